"""`add_method`: add a method to a class, after a named method or at the end of the class body.

Example::

    - op: add_method
      file: srt/speculative/eagle_worker_v2.py
      class: EAGLEWorkerV2
      after: forward_batch_generation          # optional; without it the method ends the class body
      code: |
        def _spec_disabled_for(self, model_worker_batch: ModelWorkerBatch) -> bool:
            threshold = self.server_args.speculative_disable_batch_threshold
            return threshold > 0 and model_worker_batch.batch_size() > threshold

`code` is one `def` or `async def`, decorators included. `class` may be dotted for a nested class (`Outer.Inner`).
The method is inserted after the *whole* anchor method (its decorators belong to it, so do the comment lines that
follow it inside its body), with the class body's indentation and one blank line before it (above the code's own
leading comment lines, if it has some). Methods defined inside an `if`/`try` block of the class body count too; a
method added after one of those lands in the same block (not after one under `if TYPE_CHECKING:`, which the
interpreter skips: refused).

Answers: *changed*; *already applied* (the class has a method of that name whose code is the same, up to formatting
and comments); *cannot apply* (the class or the `after` method is missing or defined twice, or the class already has
a method of that name with other code: a conflict; or the method is a dunder that changes what Python does with
every instance unless the class has its partner: `__eq__` without `__hash__`, `__len__` without `__bool__`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import libcst as cst

from ..anchors import (NodePath, accessor, body_of, class_members, code_of, find_class, ident, insert_after, near,
                       parse_statements, same_code, set_block_body, walk_statements)
from ..errors import AnchorAmbiguous, AnchorNotFound, Candidate, Conflict, RecipeError
from ..model import option
from ._code import type_checking_test
from .base import AlreadyApplied, Changed, Operation, Outcome, attempt, register


def methods_of(cpath: NodePath) -> list[NodePath]:
    """The functions defined in a class body (also inside its if/try blocks), in source order."""
    return [p for p in walk_statements(cpath) if isinstance(p[-1], cst.FunctionDef)]


@register
@dataclass(frozen=True, kw_only=True)
class AddMethod(Operation):
    """Add a method to a class, after a named method or at the end of the class body."""

    op: Literal["add_method"]
    cls: str = option(alias="class", description="the class, e.g. EAGLEWorkerV2 (dotted for nested classes)")
    code: str = option(description="the method: one `def` or `async def`, decorators allowed")
    after: str | None = option(default=None, description="the method the new one follows; default: end of the class")
    #: `Class.method` for each method the recipe's `add_method` steps add (set by `among`): an abstract method is
    #: judged against the subclasses as the recipe leaves them
    methods_added: tuple[str, ...] = option(default=(), exclude=True)

    def among(self, steps) -> "AddMethod":
        from dataclasses import replace

        added = tuple(f"{s.file}::{s.cls.rsplit('.', 1)[-1]}.{s._name_hint()}" for s in steps
                      if s.op == "add_method" and s is not self)
        return replace(self, methods_added=added) if added else self

    def describe(self) -> str:
        where = f"after `{self.after}`" if self.after else "at the end"
        return f"add method `{self._name_hint()}` to `{self.cls}` {where}"

    def anchor(self) -> str:
        return f"{self.cls}.{self.after}" if self.after else self.cls

    def _name_hint(self) -> str:
        import ast
        import textwrap

        try:
            tree = ast.parse(textwrap.dedent(self.code))
        except SyntaxError:
            return "?"
        return next((n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), "?")

    def new_method(self, module: cst.Module) -> cst.FunctionDef:
        """The recipe's method, parsed for the target module, with a blank line above it unless it has its own."""
        stmts = parse_statements(self.code, module)
        if len(stmts) != 1 or not isinstance(stmts[0], cst.FunctionDef):
            raise RecipeError(f"`code` must be exactly one `def` (decorators allowed), got {self.code.strip()[:80]!r}")
        method = stmts[0]
        lead = tuple(method.leading_lines)
        if not lead or lead[0].comment is not None:
            # one blank line between methods, also above the code's own comment lines (parse_statements drops
            # leading blank lines of the code); indent=False, or the blank line would get trailing whitespace
            method = method.with_changes(leading_lines=(cst.EmptyLine(indent=False), *lead))
        return method

    @attempt
    def apply(self, module: cst.Module) -> Outcome:
        new = self.new_method(module)
        name = new.name.value
        cpath = find_class(module, self.cls)
        methods = methods_of(cpath)
        # names compare as Python compares them (NFKC: `def ｆorward` would replace `forward`; and mangled: in
        # `class Cache`, `__evict` is `_Cache__evict`)
        owner = self.cls.rsplit(".", 1)[-1]
        existing = [p for p in methods if _mangled(ident(p[-1].name.value), owner) == _mangled(ident(name), owner)]
        for i, p in enumerate(existing):
            if same_code(code_of(module, p[-1]), self.code):
                later = [q for q in existing[i + 1:] if q[-2] is p[-2]  # in the same block: it rebinds the name
                         and accessor(q[-1]) not in ("setter", "deleter")]
                if not later or same_code(code_of(module, later[-1][-1]), self.code):
                    return AlreadyApplied((later or [p])[-1][-1])
                raise Conflict(f"`{self.cls}` has this `{name}`, and defines `{name}` again below it: the later one "
                               f"is what runs, not this code",
                               candidates=[Candidate(_signature(code_of(module, later[-1][-1])), node=later[-1][-1])])
        kind = accessor(new)
        adds_accessor = kind in ("setter", "deleter") and any(accessor(p[-1]) == "getter" for p in existing) \
            and not any(accessor(p[-1]) == kind for p in existing)
        from .add_definition import registration

        if adds_accessor or registration(new):
            # `@v.setter def v` for the property `v`: how Python adds an accessor; `@show.register def _`: the
            # dispatcher keeps each registered def: no conflict
            existing = []
        if existing:
            have = code_of(module, existing[0][-1])
            raise Conflict(f"`{self.cls}` already has a method `{existing[0][-1].name.value}` with other code",
                           candidates=[Candidate(_signature(have), node=existing[0][-1])])
        from .add_dataclass_field import _is_typed_dict

        if _is_typed_dict(module, cpath[-1]):
            raise Conflict(f"`{self.cls}` is a TypedDict: its instances are plain dicts, which would never have the "
                           f"method `{name}` (AttributeError where it is called); add a function of the module instead")
        other = class_members(cpath).get(ident(name)) if not (adds_accessor or registration(new)) else None
        if other is not None:  # a field, attribute or nested class of that name: the method would replace it
            raise Conflict(f"`{self.cls}` already binds `{name}` (not as a method): the method would replace it",
                           candidates=[Candidate(code_of(module, other).strip().splitlines()[0], node=other)])
        if any(_decorator_name(module, d) == "abstractmethod" for d in new.decorators):
            lacking = [c for c in _concrete_subclasses_lacking(module, owner, name)
                       if f"{self.file}::{c.name.value}.{name}" not in self.methods_added]
            if lacking:
                raise Conflict(f"the new abstract method `{name}` of `{self.cls}` is not defined by "
                               f"`{lacking[0].name.value}`, its subclass in the module: TypeError when that class is "
                               f"instantiated",
                               candidates=[Candidate(f"class {lacking[0].name.value}", node=lacking[0])])
        replaced = _assigned_on_class(module, owner, name)
        if replaced is not None:  # `Key.describe = _fast_describe` at module level: the class's own is replaced
            raise Conflict(f"the module sets `{owner}.{name}` itself, after the class is made: the method would be "
                           f"replaced and never run", candidates=[Candidate(code_of(module, replaced).strip().splitlines()[0],
                                                                             node=replaced)])
        # (most names are new to the class: one rendering of it tells, not one per method)
        whole = code_of(module, cpath[-1])
        shadow = _instance_binding(module, methods, name) \
            if f".{name}" in whole or f'"{name}"' in whole or f"'{name}'" in whole else None
        if shadow is not None:  # `self.reset = self._reset_cuda` in `__init__`: the instance's wins over the method
            raise Conflict(f"`{self.cls}` sets `self.{name}` on its instances, which hides a method of that name: "
                           f"the method would never be called",
                           candidates=[Candidate(code_of(module, shadow).strip().splitlines()[0], node=shadow)])
        if self.after is None:
            statements = list(body_of(cpath[-1]))
            return Changed(set_block_body(cpath, [*statements, new]), inserted=(new,), anchor=cpath[-1])
        anchors = [p for p in methods if ident(p[-1].name.value) == ident(self.after)]
        if not anchors:
            by_name = {p[-1].name.value: p[-1] for p in methods}
            raise AnchorNotFound(
                f"no method `{self.after}` in class `{self.cls}`",
                candidates=[Candidate(f"`{n}`", node=by_name[n]) for n in near(self.after, list(by_name))],
            )
        if len(anchors) > 1 and all(accessor(p[-1]) for p in anchors):
            anchors = anchors[-1:]  # a property's accessors: after the last of them, the whole property
        if len(anchors) > 1:
            raise AnchorAmbiguous(f"method `{self.after}` is defined {len(anchors)} times in `{self.cls}`",
                                  candidates=[Candidate(_signature(code_of(module, p[-1])), node=p[-1])
                                              for p in anchors])
        block = next((n for n in anchors[0][:-1] if isinstance(n, cst.If) and type_checking_test(n.test)), None)
        if block is not None:
            raise AnchorNotFound(f"method `{self.after}` of `{self.cls}` is defined under `if TYPE_CHECKING:` only: a "
                                 "method put after it would not exist at run time",
                                 hint="name a method defined at run time as `after`, or leave `after` out (the end "
                                      "of the class body)")
        return Changed(insert_after(anchors[0], [new]), inserted=(new,), anchor=anchors[0][-1])

    def settled(self, module: cst.Module, found: AlreadyApplied, *, changed: bool) -> None:
        """A dunder that changes every instance without its partner (`__eq__` without `__hash__`), judged on the
        class as the whole recipe leaves it (a later step may add the partner), for a method the step added."""
        if not changed or not isinstance(found.existing, cst.FunctionDef):
            return
        name = found.existing.name.value
        protocol = _protocol_changed(module, find_class(module, self.cls), ident(name))
        if protocol is not None:
            raise Conflict(f"`{name}` changes how Python treats every `{self.cls}`: {protocol}",
                           hint=f"add `{_IMPLICIT[ident(name)][0]}` to the class in a step of the recipe")


# dunders whose mere presence changes what Python does with every instance, beside what the method says: the
# partner that keeps the old behaviour, what changes without it, and the bases that already behave so (nothing
# changes on their subclasses)
_CONTAINERS = frozenset({"list", "dict", "set", "bytearray", "deque", "OrderedDict", "defaultdict", "Counter",
                         "UserList", "UserDict"})
_IMPLICIT = {
    "__eq__": ("__hash__", "Python sets `__hash__ = None` on a class that defines `__eq__` alone, so its instances can "
                           "no longer go in a set or be a dict key (TypeError: unhashable type)", _CONTAINERS),
    "__len__": ("__bool__", "an instance whose `__len__` returns 0 becomes false, so `obj or default`, `if obj:` and "
                            "`not obj` on it change meaning",
                _CONTAINERS | {"tuple", "str", "bytes", "frozenset", "NamedTuple", "Sequence", "Mapping", "Sized",
                               "MutableSequence", "MutableMapping", "Collection"}),
}
_PLAIN_BASES = frozenset({"object", "ABC", "Generic", "Protocol"})


def _protocol_changed(module: cst.Module, cpath: NodePath, name: str) -> str | None:
    """Why adding the dunder `name` to the class changes what Python does with its instances beyond the method
    (`__eq__` without `__hash__`, `__len__` without `__bool__`), else None. Left alone: a decorated class (a
    dataclass makes its own `__eq__` and `__hash__`), one whose body or a base of the module gives the partner or
    the dunder already (then nothing changes), one with a base that already behaves so (`list`), and one with a base
    from elsewhere (not read: a pydantic model is unhashable already, a NamedTuple stays hashable)."""
    if name not in _IMPLICIT or cpath[-1].decorators:
        return None
    partner, why, behaving = _IMPLICIT[name]
    classes = {n.name.value: n for n in module.body if isinstance(n, cst.ClassDef)}
    seen: set[str] = set()
    todo: list[NodePath] = [cpath]
    while todo:
        path = todo.pop()
        members = class_members(path)
        if partner in members or (path is not cpath and name in members):
            return None
        for b in path[-1].bases:
            if b.keyword is not None:
                continue
            base = module.code_for_node(b.value).split("[", 1)[0].split(".")[-1]
            if base in behaving or (base not in classes and base not in _PLAIN_BASES):
                return None  # a base from elsewhere (pydantic's BaseModel, NamedTuple) may already behave so
            if base in classes and base not in seen:
                seen.add(base)
                todo.append((module, classes[base]))
    return (f"{why}. Add `{partner}` to the class too (another step) to keep the old behaviour, "
            f"or to say what it should be")


def _signature(code: str) -> str:
    """The `def` line of a method's code (after its decorators), for candidate lists."""
    for line in code.splitlines():
        if line.lstrip().startswith(("def ", "async def ")):
            return line.strip()
    return code.strip().splitlines()[0]


def _instance_binding(module: cst.Module, methods: list[NodePath], name: str) -> cst.CSTNode | None:
    """The first statement of a method that assigns `self.<name>` (the method's first parameter), else None."""
    import ast

    from ..anchors import statement_ast

    for path in methods:
        fn = path[-1]
        params = [*fn.params.posonly_params, *fn.params.params]
        text = code_of(module, fn)
        if not params or "." + name not in text and f'"{name}"' not in text and f"'{name}'" not in text:
            continue
        me = params[0].name.value
        for stmt in (sp[-1] for sp in walk_statements((fn,))
                     if isinstance(sp[-1], (cst.SimpleStatementLine, cst.For, cst.With))):
            tree = statement_ast(module, stmt)
            if isinstance(tree, (ast.With, ast.AsyncWith)):  # `with ... as self.x:`: its header only
                tree = ast.Assign(targets=[i.optional_vars for i in tree.items if i.optional_vars is not None],
                                  value=ast.Constant(None))
            if tree is None or isinstance(tree, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            targets = tree.targets if isinstance(tree, ast.Assign) else [tree.target] \
                if isinstance(tree, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor)) else []
            # unpacked (`self.a, self.reset = ...`) or a loop's target, and `setattr(self, "reset", ...)`
            flat = [n for t in targets for n in ast.walk(t) if isinstance(getattr(n, "ctx", None), ast.Store)]
            calls = [] if isinstance(tree, (ast.For, ast.AsyncFor)) else [
                n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                     and n.func.id == "setattr" and len(n.args) >= 2 and isinstance(n.args[0], ast.Name)
                     and n.args[0].id == me and isinstance(n.args[1], ast.Constant) and n.args[1].value == name]
            if calls or any(isinstance(t, ast.Attribute) and t.attr == ident(name) and isinstance(t.value, ast.Name)
                            and t.value.id == me for t in flat):
                return stmt
    return None


def _mangled(name: str, cls: str) -> str:
    """The attribute name Python stores for `name` written in class `cls`'s body (`__x` -> `_cls__x`)."""
    if name.startswith("__") and not name.endswith("__") and cls.strip("_"):
        return f"_{cls.lstrip('_')}{name}"
    return name


def _decorator_name(module: cst.Module, d: cst.Decorator) -> str:
    return module.code_for_node(d.decorator).split("(", 1)[0].strip().split(".")[-1]


def _concrete_subclasses_lacking(module: cst.Module, cls: str, name: str) -> list[cst.ClassDef]:
    """The module-level classes that inherit from `cls` (directly or through another such class) and define no
    `name` along the way: an abstract method `name` added to `cls` makes them abstract."""
    from ._calls import base_names, module_classes

    classes = module_classes(module)

    def bases(c: cst.ClassDef) -> set[str]:
        return set(base_names(module, c))

    def abstract(c: cst.ClassDef, seen: frozenset[str] = frozenset()) -> bool:
        """An ABC: `ABC` among its bases, `metaclass=ABCMeta`, or a base of the module that is one."""
        if "ABC" in bases(c) or any(b.keyword is not None and b.keyword.value == "metaclass"
                                    and module.code_for_node(b.value).split(".")[-1] == "ABCMeta" for b in c.bases):
            return True
        return any(abstract(classes[b], seen | {c.name.value}) for b in bases(c) if b in classes and b not in seen)

    if cls not in classes or not abstract(classes[cls]):
        return []  # an abstract method of a class that is no ABC is not enforced

    def defines(c: cst.ClassDef) -> bool:
        return any(isinstance(n, (cst.FunctionDef, cst.SimpleStatementLine)) and (
            n.name.value == name if isinstance(n, cst.FunctionDef) else f"{name} =" in module.code_for_node(n)
            or f"{name}:" in module.code_for_node(n)) for n in body_of(c))

    def given(c: cst.ClassDef) -> bool:
        """Whether another base of `c` gives it the name: one of the module that defines it, or one from elsewhere
        (not read: it may)."""
        return any(b not in classes or defines(classes[b]) for b in bases(c) - {cls})

    out, todo = [], [cls]
    while todo:
        parent = todo.pop()
        for c in classes.values():
            if parent in bases(c) and not defines(c) and not given(c) and c not in out:
                out.append(c)
                todo.append(c.name.value)
    return [c for c in out if not any(_decorator_name(module, d) == "abstractmethod"
                                      for n in body_of(c) if isinstance(n, cst.FunctionDef) for d in n.decorators)]


def _assigned_on_class(module: cst.Module, cls: str, name: str) -> cst.CSTNode | None:
    """A module-level statement that sets the attribute `name` of the class `cls` (`Cls.name = ...`,
    `setattr(Cls, "name", ...)`), else None."""
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else \
                [small.target] if isinstance(small, cst.AnnAssign) else []
            if any(isinstance(t, cst.Attribute) and t.attr.value == name and isinstance(t.value, cst.Name)
                   and t.value.value == cls for t in targets):
                return stmt
            call = small.value if isinstance(small, cst.Expr) else None
            if isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value == "setattr" \
                    and len(call.args) >= 2 and isinstance(call.args[0].value, cst.Name) \
                    and call.args[0].value.value == cls and isinstance(call.args[1].value, cst.SimpleString) \
                    and call.args[1].value.evaluated_value == name:
                return stmt
    return None
