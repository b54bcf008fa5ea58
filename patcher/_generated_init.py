"""The `__init__` that Python writes for a class: a dataclass's (from its fields) or a NamedTuple's, read from the
AST, for the engine's checks of calls across modules and of what makes a class fail when it is created.

The operations read the same from libcst trees (`operations/_calls.py`, `operations/add_dataclass_field.py`), one
module at a time; these readers serve the checks that see the whole file after the recipe (any operation may have
changed a field: `replace_statements` as well as `add_dataclass_field`) and other modules of the package.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

_NEUTRAL = {"object", "ABC", "Generic", "Protocol"}  # bases that add no field


@dataclass(frozen=True)
class Field:
    name: str
    default: bool  # the `__init__` gives it a default (`= v`, `field(default=...)`, `field(default_factory=...)`)
    kw_only: bool
    line: int


Resolve = Callable[[ast.expr], "list[Field] | None"]


def _last_name(node: ast.AST) -> str:
    """`dataclass` for `dataclass`, `dataclasses.dataclass`, `List` for `typing.List[int]`; "" for anything else.
    (Not `ast.unparse`: the engine's trees may hold string annotations read as code, which it cannot write back.)"""
    if isinstance(node, ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def _mentions(node: ast.AST, name: str) -> bool:
    """Whether an annotation names `name` (`ClassVar[int]`, `typing.ClassVar`, `"ClassVar[int]"`)."""
    return any(isinstance(n, ast.Name) and n.id == name or isinstance(n, ast.Attribute) and n.attr == name
               or isinstance(n, ast.Constant) and isinstance(n.value, str) and name in n.value for n in ast.walk(node))


def dataclass_options(cls: ast.ClassDef) -> dict[str, ast.expr] | None:
    """The keywords of a class's one decorator when it is `@dataclass` (`@dataclasses.dataclass(...)`); None when
    it has no such decorator or another one too (what that one does to the class cannot be told)."""
    if len(cls.decorator_list) != 1:
        return None
    d = cls.decorator_list[0]
    head = d.func if isinstance(d, ast.Call) else d
    if _last_name(head) != "dataclass":
        return None
    return {k.arg: k.value for k in getattr(d, "keywords", ()) if k.arg is not None}


def is_namedtuple(cls: ast.ClassDef) -> bool:
    return not cls.decorator_list and len(cls.bases) == 1 and _last_name(cls.bases[0]) == "NamedTuple"


def _true(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _false(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


def _field_call(value: ast.expr | None) -> dict[str, ast.expr] | None:
    """The keywords of `field(...)` / `dataclasses.field(...)`, None for any other value."""
    if isinstance(value, ast.Call) and _last_name(value.func) == "field":
        return {k.arg: k.value for k in value.keywords if k.arg is not None}
    return None


def fields(cls: ast.ClassDef, resolve: Resolve, seen: frozenset[int] = frozenset()) -> list[Field] | None:
    """The parameters of the `__init__` Python generates for `cls`, in order: a dataclass's (its bases' first, a
    field a subclass declares again keeping its place, as `dataclasses` does) or a NamedTuple's. None when it cannot
    be told: no such class, `init=False`, a base `resolve` does not know (it answers a base's fields, or None)."""
    if is_namedtuple(cls):
        return [Field(st.target.id, st.value is not None, False, st.lineno) for st in cls.body
                if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)]
    options = dataclass_options(cls)
    if options is None or _false(options.get("init")) or id(cls) in seen:
        return None
    out: dict[str, Field] = {}
    for base in reversed(cls.bases):  # as `dataclasses` collects them: the method resolution order, reversed
        if _last_name(base) in _NEUTRAL:
            continue
        inherited = resolve(base)
        if inherited is None:
            return None
        out.update((f.name, f) for f in inherited)
    kw = _true(options.get("kw_only"))
    for st in cls.body:
        if not isinstance(st, ast.AnnAssign) or not isinstance(st.target, ast.Name):
            continue
        if _mentions(st.annotation, "KW_ONLY"):
            kw = True
            continue
        if _mentions(st.annotation, "ClassVar"):
            continue
        call = _field_call(st.value)
        if call is not None and _false(call.get("init")):
            out.pop(st.target.id, None)
            continue
        default = ("default" in call or "default_factory" in call) if call is not None else st.value is not None
        out[st.target.id] = Field(st.target.id, default, kw or call is not None and _true(call.get("kw_only")),
                                  st.lineno)
    return list(out.values())


def order_error(cls_name: str, found: list[Field]) -> tuple[int, str] | None:
    """A parameter without a default after one with a default (keyword-only ones aside): TypeError when the class
    is created."""
    first_default = None
    for f in found:
        if f.kw_only:
            continue
        if f.default:
            first_default = first_default or f
        elif first_default is not None:
            return f.line, (f"puts the field `{f.name}` of `{cls_name}`, which has no default, after "
                            f"`{first_default.name}`, which has one: TypeError when the class is created")
    return None


def init_def(found: list[Field]) -> ast.FunctionDef | None:
    """The generated `__init__` as a def (defaults shown as `...`), None when its fields are out of order."""
    plain = [f for f in found if not f.kw_only]
    kwonly = [f for f in found if f.kw_only]
    params = ["self", *(f"{f.name}=..." if f.default else f.name for f in plain)]
    if kwonly:
        params += ["*", *(f"{f.name}=..." if f.default else f.name for f in kwonly)]
    try:
        fn = ast.parse(f"def __init__({', '.join(params)}): pass").body[0]
    except SyntaxError:  # a field without a default after one with: the class is not created at all
        return None
    assert isinstance(fn, ast.FunctionDef)
    return fn


def module_resolver(tree: ast.Module) -> Resolve:
    """Bases named by a top-level class of the same module; anything else is not known."""
    classes = {c.name: c for c in tree.body if isinstance(c, ast.ClassDef)}

    def resolve(base: ast.expr, seen: frozenset[str] = frozenset()) -> list[Field] | None:
        name = base.id if isinstance(base, ast.Name) else None
        cls = classes.get(name) if name and name not in seen else None
        return fields(cls, lambda b: resolve(b, seen | {name})) if cls is not None else None

    return resolve


_MUTABLE = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)


def broken_classes(tree: ast.Module, nodes: list[ast.AST]) -> list[tuple[int, str]]:
    """What makes a dataclass or NamedTuple of the module fail when Python creates it: a field without a default
    after one with, a mutable default (`= []`, `field(default={})`) of a dataclass, `default` and
    `default_factory` both. Messages name the class and field, not the line, so that what the release already has
    can be told from what a recipe adds."""
    resolve = module_resolver(tree)
    out: list[tuple[int, str]] = []
    for cls in (n for n in nodes if isinstance(n, ast.ClassDef)):
        found = fields(cls, resolve)
        if found is None:
            continue
        wrong = order_error(cls.name, found)
        if wrong is not None:
            out.append(wrong)
        if is_namedtuple(cls):
            continue
        for st in cls.body:
            if not isinstance(st, ast.AnnAssign) or not isinstance(st.target, ast.Name) \
                    or _mentions(st.annotation, "ClassVar"):
                continue
            call = _field_call(st.value)
            if call is not None and "default" in call and "default_factory" in call:
                out.append((st.lineno, f"gives the field `{st.target.id}` of the dataclass `{cls.name}` both "
                                       f"`default` and `default_factory`: ValueError when the class is created"))
            value = call.get("default") if call is not None else st.value
            if isinstance(value, _MUTABLE) or isinstance(value, ast.Call) and isinstance(value.func, ast.Name) \
                    and value.func.id in ("list", "dict", "set", "bytearray"):
                kind = {ast.List: "a list", ast.Dict: "a dict", ast.Set: "a set", ast.ListComp: "a list",
                        ast.DictComp: "a dict", ast.SetComp: "a set"}.get(type(value)) or f"a {value.func.id}"
                out.append((st.lineno, f"gives the field `{st.target.id}` of the dataclass `{cls.name}` a mutable "
                                       f"default ({kind}): ValueError when the class is created; use "
                                       f"`field(default_factory=...)`"))
    return out
