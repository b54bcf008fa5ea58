"""`add_dataclass_field`: add a field to a dataclass, right after a named field.

Example::

    - op: add_dataclass_field
      file: srt/server_args.py
      class: ServerArgs
      after: speculative_accept_threshold_acc
      code: "speculative_disable_batch_threshold: int = 0"

`code` may hold the field's docstring below it (vLLM's config style); an anchor field with a docstring keeps it:
the new field goes below both.

Answers: *changed* (the field is inserted on the line after the anchor field's statement, with the class body's
indentation); *already applied* (a field of that name with the same annotation and default exists); *cannot apply*
(the class or the anchor field is missing or defined twice, or the field exists with another type or default).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import libcst as cst

from ..anchors import (body_of, class_members, code_of, find_class, ident, insert_after, near, parse_statements,
                       same_code, walk_statements)
from ..errors import AnchorAmbiguous, AnchorNotFound, Candidate, Conflict, FailsAtRunTime, RecipeError
from ..model import option
from ._calls import calls_by_name, subclasses
from ._code import line_text
from .base import AlreadyApplied, Changed, Operation, Outcome, attempt, register


def field_name(stmt: cst.CSTNode) -> str | None:
    """The name a class-body statement declares as a field (`x: int = 0` or `x = 0`), else None."""
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        small = stmt.body[0]
        if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
            return small.target.value
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
            return small.targets[0].target.value
    return None


@register
@dataclass(frozen=True, kw_only=True)
class AddDataclassField(Operation):
    """Add a field to a dataclass, right after a named field."""

    op: Literal["add_dataclass_field"]
    cls: str = option(alias="class", description="the class, e.g. ServerArgs (dotted for nested classes)")
    after: str = option(description="the field the new one follows, e.g. speculative_accept_threshold_acc")
    code: str = option(description="the new field, e.g. 'speculative_disable_batch_threshold: int = 0'")
    #: set by `among`, not by recipes: another step of the recipe, in this file, writes a call of the class (the
    #: recipe passes the new field itself)
    callers_changed: bool = option(default=False, exclude=True)

    def among(self, steps) -> "AddDataclassField":
        from dataclasses import replace

        short = self.cls.rsplit(".", 1)[-1]
        touched = any(s is not self and (f"{short}(" in (getattr(s, "code", None) or "")
                                         or s.op == "add_keyword_argument" and f"{short}(" in s.call) for s in steps)
        return replace(self, callers_changed=True) if touched else self


    def describe(self) -> str:
        return f"add field `{self.code.strip()}` to `{self.cls}` after `{self.after}`"

    def anchor(self) -> str:
        return f"{self.cls}.{self.after}"

    def _statements(self, module: cst.Module) -> list[cst.SimpleStatementLine]:
        """The field's statement, and its docstring when `code` has one below it (vLLM documents each config field
        with the string that follows it)."""
        stmts = parse_statements(self.code, module, what="code")
        if not stmts or field_name(stmts[0]) is None or len(stmts) > 2 or len(stmts) == 2 and not _is_doc(stmts[1]):
            raise RecipeError(f"`code` must be exactly one field declaration such as `x: int = 0` (and, below it, its "
                              f"docstring), got {self.code!r}")
        # blank lines above the field in `code` are kept above it (a documented field is spaced from the one before)
        blank = len(self.code.replace("\r\n", "\n")) - len(self.code.replace("\r\n", "\n").lstrip("\n"))
        if blank and len(stmts) == 2:
            stmts = [stmts[0].with_changes(leading_lines=(*(cst.EmptyLine(indent=False) for _ in range(blank)),
                                                          *stmts[0].leading_lines)), stmts[1]]
        return list(stmts)

    @attempt
    def apply(self, module: cst.Module) -> Outcome:
        stmts = self._statements(module)  # the field, and its docstring if `code` has one
        new, name = stmts[0], field_name(stmts[0])
        cpath = find_class(module, self.cls)
        fields = [p for p in walk_statements(cpath) if field_name(p[-1]) is not None]
        # names compare as Python compares them (NFKC): a fullwidth letter names the same field
        existing = [p for p in fields if ident(field_name(p[-1])) == ident(name)]
        if existing:
            have = code_of(module, existing[0][-1])
            doc = _doc_after(existing[0])
            if len(stmts) == 2 and doc is not None:
                have += code_of(module, doc)
            if same_code(have, self.code):
                order = [p[-1] for p in fields]
                stand = _keyword_only(module, order, existing[0][-1])
                anchor = next((s for s in order if ident(field_name(s)) == ident(self.after)), None)
                if anchor is None or "kw_only=True" in "".join(self.code.split()) or _sentinel(module, stmts[0]) \
                        or stand == _keyword_only(module, order, anchor, after=True):
                    return AlreadyApplied(existing[0][-1])
                kinds = {True: "keyword-only", False: "positional"}
                raise Conflict(f"`{self.cls}` already has the field `{have.strip()}`, but it is {kinds[stand]} there, "
                               f"where the step puts it after `{self.after}` ({kinds[not stand]}): a call that "
                               f"passes it as the step places it would fail",
                               candidates=[Candidate(have.strip(), node=existing[0][-1])])
            raise Conflict(f"`{self.cls}` already has a field `{name}` that differs: `{have.strip()}`",
                           candidates=[Candidate(have.strip(), node=existing[0][-1])])
        if _sentinel(module, stmts[0]):
            had = next((p[-1] for p in fields if _sentinel(module, p[-1])), None)
            if had is not None:  # one `KW_ONLY` per dataclass: TypeError when the class is made
                raise Conflict(f"`{self.cls}` already has a `KW_ONLY` sentinel (`{code_of(module, had).strip()}`): a "
                               f"second one is TypeError when the class is made",
                               candidates=[Candidate(code_of(module, had).strip(), node=had)])
        other = class_members(cpath).get(ident(name))
        if other is not None:  # a method or nested class of that name: the field would replace it
            raise Conflict(f"`{self.cls}` already binds `{name}` (not as a field): the field would replace it",
                           candidates=[Candidate(code_of(module, other).strip().splitlines()[0], node=other)])
        if _is_typed_dict(module, cpath[-1]) and isinstance(new.body[0], cst.AnnAssign) and new.body[0].value:
            raise Conflict(f"`{self.cls}` is a TypedDict, whose keys take no default: the value of "
                           f"`{code_of(module, new).strip()}` would never be used (`{self.cls}(...)` is a plain dict "
                           f"without the key); write the key without `= ...`, `NotRequired[...]` if it may be missing")
        reserved = _reserved_name(module, cpath[-1], name)
        if reserved is not None:  # ValueError when the class is made, at import
            raise FailsAtRunTime(f"`{self.cls}` {reserved}: the class would fail to be made, at import")
        alias = _enum_alias(module, cpath[-1], new, fields)
        if alias is not None:  # Python would make the new member another name of that one, not a member
            raise Conflict(f"`{self.cls}` is an Enum whose member `{field_name(alias)}` already has the value the new "
                           f"member `{name}` gives: it would be an alias of it, and `{field_name(alias)}` would "
                           f"read as `{name}` (upstream added a member of that value?)",
                           candidates=[Candidate(code_of(module, alias).strip(), node=alias)])
        anchors = [p for p in fields if ident(field_name(p[-1])) == ident(self.after)]
        if len(anchors) == 1 and _is_enum(cpath[-1]):
            renumbered = _auto_below(module, fields, anchors[0][-1])
            if renumbered is not None and "auto(" in module.code_for_node(new):
                # `auto()` numbers a member after the one above it: every `auto()` member below would move up one
                raise Conflict(f"`{self.cls}` numbers its members with `auto()`: a new `auto()` member after "
                               f"`{self.after}` would give `{field_name(renumbered)}` and every `auto()` member below "
                               f"it another value (stored or sent values would read as other members); add the "
                               f"member at the end of the class", candidates=[Candidate(
                                   code_of(module, renumbered).strip(), node=renumbered)])
        if len(anchors) == 1:
            _refuse_bad_init(module, cpath, new, name, anchors[0][-1], self.cls)
            if not self.callers_changed:
                _refuse_unfilled_constructions(module, cpath, new, name, anchors[0][-1], self.cls,
                                               [p[-1] for p in fields])
            _refuse_initvar_post_init_cannot_take(module, cpath, new, name, [p[-1] for p in fields], self.cls)
            _refuse_namedtuple_unpacked(module, cpath[-1], self.cls)
        if not anchors:
            by_name = {field_name(p[-1]): p[-1] for p in fields}
            raise AnchorNotFound(
                f"no field `{self.after}` in class `{self.cls}`",
                candidates=[Candidate(f"`{n}`", node=by_name[n]) for n in near(self.after, list(by_name))],
            )
        if len(anchors) > 1:
            raise AnchorAmbiguous(f"field `{self.after}` is declared {len(anchors)} times in `{self.cls}`",
                                  candidates=[Candidate(code_of(module, p[-1]).strip(), node=p[-1]) for p in anchors])
        doc = _doc_after(anchors[0])  # the anchor field's docstring stays with it: the new field goes below both
        where = anchors[0] if doc is None else (*anchors[0][:-1], doc)
        return Changed(insert_after(where, stmts), inserted=tuple(stmts), anchor=anchors[0][-1])


def _is_doc(stmt: cst.CSTNode) -> bool:
    """A statement that is a string alone (`\"\"\"The port.\"\"\"`): a field's docstring when it follows one."""
    return isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr) \
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))


def _doc_after(path) -> cst.CSTNode | None:
    """The docstring right below the field statement at `path[-1]` in its block, else None."""
    block = list(body_of(path[-2]))
    i = next((k for k, stmt in enumerate(block) if stmt is path[-1]), None)
    return block[i + 1] if i is not None and i + 1 < len(block) and _is_doc(block[i + 1]) else None


def _reserved_name(module: cst.Module, cls: cst.ClassDef, name: str) -> str | None:
    """Why a name cannot be a field of the class, when it cannot: a NamedTuple's field starting with `_`, an Enum
    member `_sunder_` (both ValueError when the class is made). None otherwise."""
    from ._calls import base_names

    if "NamedTuple" in base_names(module, cls) and name.startswith("_"):
        return f"is a NamedTuple, whose field names cannot start with an underscore (`{name}`)"
    if _is_enum(cls) and len(name) > 2 and name.startswith("_") and name.endswith("_") and not name.startswith("__") \
            and name not in ("_ignore_", "_order_", "_generate_next_value_", "_missing_"):
        return f"is an Enum, whose `_sunder_` names (`{name}`) are reserved"
    return None


def _is_typed_dict(module: cst.Module, cls: cst.ClassDef) -> bool:
    """Whether a class is a `TypedDict` (`class Opts(TypedDict)`, `typing.TypedDict`, `TypedDict, total=False`): its
    instances are plain dicts."""
    from ._calls import base_names

    return "TypedDict" in base_names(module, cls)


def _is_enum(cls: cst.ClassDef) -> bool:
    """Whether a class derives from a base named `...Enum` or `...Flag` (`Enum`, `enum.IntEnum`, `Flag`)."""
    def base_name(arg: cst.Arg) -> str:
        node = arg.value
        return node.attr.value if isinstance(node, cst.Attribute) else node.value if isinstance(node, cst.Name) else ""

    return any(base_name(b).endswith(("Enum", "Flag")) for b in cls.bases)


def _auto_below(module: cst.Module, fields: list, after: cst.CSTNode) -> cst.CSTNode | None:
    """The first member below `after` whose value is `auto()`, else None."""
    below = [p[-1] for p in fields][[p[-1] for p in fields].index(after) + 1:]
    return next((m for m in below if isinstance(m, cst.SimpleStatementLine) and len(m.body) == 1
                 and isinstance(m.body[0], cst.Assign) and "auto(" in module.code_for_node(m.body[0].value)), None)


def _enum_alias(module: cst.Module, cls: cst.ClassDef, new: cst.SimpleStatementLine,
                fields: list) -> cst.CSTNode | None:
    """The member of an Enum class (a base named `...Enum` or `...Flag`) whose literal value the new member's equals
    (an alias to be: `Enum` keeps one member per value), else None."""
    import ast

    if not _is_enum(cls):
        return None

    def value(stmt: cst.CSTNode) -> object:
        small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
        if not isinstance(small, cst.Assign):
            return None
        try:
            return ("value", _constant_value(ast.parse(module.code_for_node(small.value).strip(), mode="eval").body))
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError, ArithmeticError):
            return None

    mine = value(new)
    if mine is None:
        return None
    for path in fields:
        theirs = value(path[-1])
        try:
            if theirs is not None and theirs == mine and hash(theirs) == hash(mine):
                return path[-1]
        except TypeError:  # an unhashable value (a list): Enum compares it by ==, as here
            if theirs == mine:
                return path[-1]
    return None


def _constant_value(node):
    """The value of a literal, or of arithmetic on literals (`1 + 1`, `4 // 2`, `-(3)`, `2 ** 3`: what an Enum
    member's value is when the module runs); ValueError for anything else (a name, a call)."""
    import ast
    import operator

    binary = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
              ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.LShift: operator.lshift,
              ast.RShift: operator.rshift, ast.BitOr: operator.or_, ast.BitAnd: operator.and_,
              ast.BitXor: operator.xor}
    if isinstance(node, ast.BinOp) and type(node.op) in binary:
        left, right = _constant_value(node.left), _constant_value(node.right)
        if not all(isinstance(v, (int, float)) for v in (left, right)):
            raise ValueError("not arithmetic")
        if isinstance(node.op, ast.LShift) and right > 64:
            raise ValueError("too large")
        return binary[type(node.op)](left, right)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        left, right = _constant_value(node.left), _constant_value(node.right)
        if not (isinstance(left, (int, float)) and isinstance(right, (int, float))) or abs(right) > 64:
            raise ValueError("not small arithmetic")
        return left ** right
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Invert)):
        value = _constant_value(node.operand)
        return {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}[type(node.op)](value)
    return ast.literal_eval(node)


def _init_kind(module: cst.Module, cls: cst.ClassDef) -> str | None:
    """"dataclass" for a class whose fields make a positional `__init__` (`@dataclass`, not `kw_only=True`),
    "namedtuple" for a `NamedTuple`, else None (a plain class, an Enum, a model class of another library)."""
    from ._calls import base_names, dataclass_decorator_options

    options = dataclass_decorator_options(module, cls)
    if options is not None:
        # no positional `__init__` to break: keyword-only fields, or an `__init__` the class writes itself
        return None if options.get("kw_only") == "True" or options.get("init") == "False" else "dataclass"
    if "NamedTuple" in base_names(module, cls):
        return "namedtuple"
    return None


def _has_default(module: cst.Module, stmt: cst.CSTNode) -> bool | None:
    """Whether a field statement gives a default (`= value`, `field(default=...)`/`default_factory`), None for what
    makes no parameter of the `__init__` (a `ClassVar`, `KW_ONLY`, `field(init=False)`, an assignment without an
    annotation)."""
    small = stmt.body[0]
    if not isinstance(small, cst.AnnAssign):
        return None
    note = module.code_for_node(small.annotation.annotation)
    if "ClassVar" in note or "KW_ONLY" in note:
        return None
    value = small.value
    if isinstance(value, cst.Call) and module.code_for_node(value.func).split(".")[-1] == "field":
        keys = {a.keyword.value: module.code_for_node(a.value) for a in value.args if a.keyword is not None}
        if keys.get("init") == "False" or keys.get("kw_only") == "True":
            return None
        return "default" in keys or "default_factory" in keys
    return value is not None


def _refuse_bad_init(module: cst.Module, cpath, new: cst.SimpleStatementLine, name: str, anchor: cst.CSTNode,
                     cls_name: str) -> None:
    """Refuse a field that would break the class's generated `__init__` (a dataclass's, a NamedTuple's): one
    without an annotation (not a field at all), a mutable default, a field without a default among defaulted ones
    in either order (TypeError when the class is created), or one that shifts the arguments a call of the module
    passes by position (`Limits(10, 20)` would fill the new field)."""
    kind = _init_kind(module, cpath[-1])
    if kind is None:
        return
    small = new.body[0]
    if not isinstance(small, cst.AnnAssign):
        raise RecipeError(f"`{name} = ...` is not a field of the {kind} `{cls_name}` (no annotation): a class "
                          f"attribute its `__init__` does not take; write `{name}: <type> = ...`")
    value = small.value if "ClassVar" not in module.code_for_node(small.annotation.annotation) else None
    if kind == "dataclass" and isinstance(value, cst.Call) \
            and module.code_for_node(value.func).strip().split(".")[-1] == "field":
        keys = {a.keyword.value: a.value for a in value.args if a.keyword is not None}
        if "default" in keys and "default_factory" in keys:
            raise RecipeError(f"the field `{name}` of the dataclass `{cls_name}` gives both `default` and "
                              f"`default_factory`: ValueError when the class is created")
        value = keys.get("default")  # `field(default=[])` is a mutable default as `= []` is
    if kind == "dataclass" and value is not None and (
            isinstance(value, (cst.List, cst.Dict, cst.Set, cst.ListComp, cst.DictComp, cst.SetComp))
            or isinstance(value, cst.Call)
            and module.code_for_node(value.func).strip() in ("list", "dict", "set", "bytearray")):
        raise RecipeError(f"the field `{name}` of the dataclass `{cls_name}` has a mutable default "
                          f"(`{module.code_for_node(value)}`): ValueError when the class is created; use "
                          f"`field(default_factory=...)`")
    order = []
    for stmt in body_of(cpath[-1]):
        if isinstance(stmt, cst.SimpleStatementLine) and field_name(stmt) is not None:
            if any(isinstance(s, cst.AnnAssign) and "KW_ONLY" in module.code_for_node(s.annotation.annotation)
                   for s in stmt.body):
                break  # the fields after `_: KW_ONLY` are keyword-only: no order, no position
            order.append(stmt)
            if stmt is anchor:
                order.append(new)
    fields = [(s, d) for s in order if (d := _has_default(module, s)) is not None]
    if not any(s is new for s, _ in fields):
        return  # keyword-only (after `_: KW_ONLY`), or no field of the `__init__` (a `ClassVar`)
    seen_default = None
    for stmt, default in fields:
        if default:
            seen_default = seen_default or stmt
        elif seen_default is not None and (stmt is new or seen_default is new):
            later = field_name(stmt)
            raise Conflict(f"the field `{later}` of the {kind} `{cls_name}` has no default and would follow "
                           f"`{field_name(seen_default)}`, which has one: TypeError when the class is created",
                           candidates=[Candidate(code_of(module, seen_default if seen_default is not new
                                                              else stmt).strip(),
                                                 node=seen_default if seen_default is not new else stmt)])
    if kind == "dataclass" and dict((id(s), d) for s, d in fields)[id(new)]:
        _refuse_breaking_subclasses(module, cpath[-1], name, cls_name)
    position = next(i for i, (s, _) in enumerate(fields) if s is new)
    for call in calls_by_name(module, cls_name.split(".")[-1]):
        positional = [a for a in call.args if a.keyword is None and not a.star]
        unpacked = any(a.star == "*" for a in call.args)  # `Cfg(*ROW)`: what it unpacks goes by position
        if (len(positional) > position or unpacked) and position < len(fields) - 1:
            shown = line_text(module.code_for_node(call))
            passes = f"passes {len(positional)} arguments by position" if not unpacked else \
                "unpacks its arguments by position (`*`)"
            raise Conflict(f"a call of `{cls_name}` in the module {passes} (`{shown}`): the new field `{name}`, "
                           f"number {position + 1} of its `__init__`, would take one meant for the next field",
                           candidates=[Candidate(f"`{shown}`", node=call)])


def _refuse_unfilled_constructions(module: cst.Module, cpath, new: cst.SimpleStatementLine, name: str,
                                   anchor: cst.CSTNode, cls_name: str, order: list[cst.CSTNode]) -> None:
    """A field without a default is a parameter every construction must pass: a call of the class in the module
    that passes it neither by keyword nor (a positional field) by position raises TypeError. For a dataclass (its
    fields keyword-only too) and a NamedTuple; as `add_parameter` refuses for a function."""
    from ._calls import _dataclass_options, base_names, calls_in_classes

    cls = cpath[-1]
    options = _dataclass_options(module, cls)
    namedtuple = "NamedTuple" in base_names(module, cls)
    small = new.body[0]
    if options is None and not namedtuple or options is not None and options.get("init") == "False" \
            or not isinstance(small, cst.AnnAssign):
        return
    note = module.code_for_node(small.annotation.annotation)
    flat = "".join(module.code_for_node(small.value).split()) if small.value is not None else ""
    is_field = isinstance(small.value, cst.Call) and module.code_for_node(small.value.func).split(".")[-1] == "field"
    if "ClassVar" in note or "KW_ONLY" in note or is_field and "init=False" in flat:
        return
    if small.value is not None and (not is_field or "default=" in flat or "default_factory=" in flat):
        return  # it has a default
    keyword = options is not None and options.get("kw_only") == "True" or "kw_only=True" in flat \
        or _keyword_only(module, order, anchor, after=True)
    positional = [field_name(s) for s in order if not _sentinel(module, s) and _has_default(module, s) is not None
                  and not _keyword_only(module, order, s)]
    at = positional.index(field_name(anchor)) + 1 if field_name(anchor) in positional else len(positional)
    short = cls_name.split(".")[-1]
    for call, _ in calls_in_classes(module):
        if not (isinstance(call.func, cst.Name) and call.func.value == short) or any(a.star for a in call.args):
            continue
        if any(a.keyword is not None and a.keyword.value == name for a in call.args):
            continue
        if not keyword and sum(1 for a in call.args if a.keyword is None) > at:
            continue  # it passes the new field by position (the shift is judged in `_refuse_bad_init`)
        text = line_text(module.code_for_node(call))
        raise Conflict(f"`{text}` does not pass `{name}`, which the new field of `{cls_name}` requires (no "
                       f"default): TypeError at that call", candidates=[Candidate(f"`{text}`", node=call)])


def _refuse_initvar_post_init_cannot_take(module: cst.Module, cpath, new: cst.SimpleStatementLine, name: str,
                                           order: list[cst.CSTNode], cls_name: str) -> None:
    """A dataclass passes each `InitVar` field, in order, to its `__post_init__`: one more that the class's
    `__post_init__` does not take is TypeError at every construction."""
    def initvar(stmt: cst.CSTNode) -> bool:
        return "InitVar" in _annotation(module, stmt)

    if not initvar(new):
        return
    post = next((n for n in body_of(cpath[-1]) if isinstance(n, cst.FunctionDef) and n.name.value == "__post_init__"),
                None)
    if post is None:
        return  # none: the dataclass calls none (a base's, from elsewhere, cannot be read)
    params = post.params
    if isinstance(params.star_arg, cst.Param):
        return
    takes = len([*params.posonly_params, *params.params]) - 1  # less `self`
    count = sum(1 for s in order if initvar(s)) + 1
    if count > takes:
        raise Conflict(f"the new `InitVar` field `{name}` of `{cls_name}` is passed to its `__post_init__`, which "
                       f"takes {takes} argument(s) besides `self` where {count} `InitVar` fields would pass {count}: "
                       f"TypeError at every construction",
                       candidates=[Candidate(f"`def __post_init__({line_text(module.code_for_node(params))})`",
                                             node=post)])


def _annotation(module: cst.Module, stmt: cst.CSTNode) -> str:
    """The annotation of a class-body statement `name: T (= value)`, as written; "" for any other statement."""
    small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
    return module.code_for_node(small.annotation.annotation) if isinstance(small, cst.AnnAssign) else ""


def _sentinel(module: cst.Module, stmt: cst.CSTNode) -> bool:
    """Whether a class-body statement is the `_: KW_ONLY` sentinel of a dataclass."""
    return "KW_ONLY" in _annotation(module, stmt)


def _keyword_only(module: cst.Module, order: list[cst.CSTNode], stmt: cst.CSTNode, *, after: bool = False) -> bool:
    """Whether a field of the class body (`order`: its field statements in order) is keyword-only in the
    `__init__` for being below the `_: KW_ONLY` sentinel. With `after`, for a field that goes right after `stmt`:
    the sentinel itself counts as above it."""
    for s in order:
        if _sentinel(module, s):
            return True if s is stmt and after else any(t is stmt for t in order[order.index(s):])
        if s is stmt:
            break
    return False


def _refuse_namedtuple_unpacked(module: cst.Module, cls: cst.ClassDef, cls_name: str) -> None:
    """A NamedTuple is a tuple: a new field, even with a default, makes every instance one item longer, and an
    unpacking of one in the module (`x, y = Point(0, 0)`, or of a module-level name made so: `a, b = ORIGIN`) raises
    ValueError. Instances the module gets otherwise cannot be told."""
    import ast

    from ._calls import base_names

    if "NamedTuple" not in base_names(module, cls):
        return
    name = cls.name.value
    try:
        tree = ast.parse(module.code)
    except (SyntaxError, ValueError, RecursionError):
        return

    def made(value: ast.expr) -> bool:
        return isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == name

    instances = {t.id for st in tree.body if isinstance(st, ast.Assign) and made(st.value)
                 for t in st.targets if isinstance(t, ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            value = node.value
            if (made(value) or isinstance(value, ast.Name) and value.id in instances) \
                    and any(isinstance(t, (ast.Tuple, ast.List)) and not any(isinstance(e, ast.Starred) for e in t.elts)
                            for t in node.targets):
                shown = ast.get_source_segment(module.code, node) or f"line {node.lineno}"
                raise Conflict(f"`{cls_name}` is a NamedTuple, a tuple: a new field makes it one item longer, and "
                               f"the module unpacks one into as many names as it has fields now (`{line_text(shown)}`): "
                               f"ValueError when that runs", candidates=[Candidate(f"`{line_text(shown)}`")])


def _refuse_breaking_subclasses(module: cst.Module, cls: cst.ClassDef, name: str, cls_name: str) -> None:
    """A field with a default added to a dataclass comes before the fields of its dataclass subclasses in their
    `__init__`: one of theirs without a default (and not keyword-only) then follows it (TypeError when the
    subclass is created, at import). The subclasses of the module, through one another."""
    family = subclasses(module, cls.name.value) - {cls.name.value}
    for c in (n for n in module.body if isinstance(n, cst.ClassDef) and n.name.value in family):
        if _init_kind(module, c) != "dataclass":
            continue
        for stmt in body_of(c):
            if not (isinstance(stmt, cst.SimpleStatementLine) and field_name(stmt) is not None):
                continue
            if any(isinstance(x, cst.AnnAssign) and "KW_ONLY" in module.code_for_node(x.annotation.annotation)
                   for x in stmt.body):
                break
            if _has_default(module, stmt) is False:
                raise Conflict(f"the field `{name}` of the dataclass `{cls_name}` has a default, and comes "
                               f"before the fields of its subclass `{c.name.value}` in their `__init__`: "
                               f"`{field_name(stmt)}` has none and would follow it (TypeError when "
                               f"`{c.name.value}` is created); make the new field keyword-only "
                               f"(`field(default=..., kw_only=True)`)",
                               candidates=[Candidate(code_of(module, stmt).strip(), node=stmt)])
