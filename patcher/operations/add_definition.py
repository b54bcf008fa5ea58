"""`add_definition`: add module-level code (functions, classes, assignments, any statements) after or before a
named module-level definition, or at the end of the module.

Example (sglang 0.5.9, `srt/disaggregation/utils.py`)::

    - op: add_definition
      file: srt/disaggregation/utils.py
      after: poll_and_all_reduce                 # or before: NAME; neither: the end of the module (above a
                                                 # closing `if __name__ == "__main__":`)
      code: |


        def is_team_profiling_enabled() -> bool:
            return get_bool_env_var("TEAM_PROFILING")

`after` and `before` name a definition of the module body: a `def`, a `class`, or the target of an assignment
(`X = ...`, `X: T = ...`). The code goes right after that whole statement (or right before it, below its comment
lines), at column 0; its blank lines at the top are kept, so it brings its own spacing (PEP 8's two blank lines):
after the anchor, above the code; before it, between the code and the anchor (the anchor's comment lines, a
section's heading, stay above the code).

Answers: *changed*; *already applied* (for a single `def` or `class`: the module defines that name with the same
code, up to formatting and comments; otherwise the same statements, compared as code, are already in the module
body); *cannot apply* (the anchor is missing or defined twice, with near names; or a conflict: the module already
defines the function or class with other code, or already binds a name the code binds: a def, a class, an
assignment or an import of that name).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

import libcst as cst

from ..anchors import body_of, code_of, insert_after, insert_before, near, same_code
from ..errors import AnchorAmbiguous, AnchorNotFound, Candidate, Conflict, RecipeError
from ..model import option
from ._code import fingerprint, first_line, line_text, parse_block, type_checking_test
from .base import AlreadyApplied, Changed, Operation, Outcome, attempt, register


def defined_names(stmt: cst.CSTNode) -> list[str]:
    """The names a module-level statement defines: a def's or class's name, an assignment's plain targets."""
    if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
        return [stmt.name.value]
    out: list[str] = []
    if isinstance(stmt, cst.SimpleStatementLine):
        for small in stmt.body:
            if isinstance(small, cst.Assign):
                out += [t.target.value for t in small.targets if isinstance(t.target, cst.Name)]
            elif isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                out.append(small.target.value)
    return out


@register
@dataclass(frozen=True, kw_only=True)
class AddDefinition(Operation):
    """Add functions, classes or statements to the module body, after/before a named definition or at the end."""

    op: Literal["add_definition"]
    code: str = option(description="the module-level code to add: defs, classes, statements")
    after: str | None = option(default=None, description="the module-level name the code follows")
    before: str | None = option(default=None, description="the module-level name the code precedes")

    def __post_init__(self) -> None:
        if self.after is not None and self.before is not None:
            raise ValueError("give `after` or `before`, not both")
        if not self.code.strip():
            raise ValueError("`code` is empty")

    def describe(self) -> str:
        where = f"after `{self.after}`" if self.after else f"before `{self.before}`" if self.before else "at the end"
        return f"add `{self._what()}` to the module {where}"

    def anchor(self) -> str:
        return self.after or self.before or "the end of the module"

    def _what(self) -> str:
        lines = [ln for ln in self.code.strip().splitlines() if ln.strip() and not ln.lstrip().startswith(("#", "@"))]
        return line_text(lines[0].rstrip(":")) if lines else "?"

    @attempt
    def apply(self, module: cst.Module) -> Outcome:
        new = parse_block(self.code, module)
        if not new:
            raise RecipeError("`code` holds no statement")
        body = list(module.body)
        if len(new) == 1 and isinstance(new[0], (cst.FunctionDef, cst.ClassDef)) and not registration(new[0]):
            name = new[0].name.value
            same = [s for s in body if isinstance(s, (cst.FunctionDef, cst.ClassDef)) and s.name.value == name]
            if same:
                mine = code_of(cst.Module(body=new), new[0])
                if same_code(code_of(module, same[-1]), mine):
                    return AlreadyApplied(same[-1])
                if any(same_code(code_of(module, s), mine) for s in same):
                    raise Conflict(f"the module has this `{name}`, and defines `{name}` again below it: the later one "
                                   f"is what runs, not this code",
                                   candidates=[Candidate(f"`{first_line(module, same[-1])}`", node=same[-1])])
                raise Conflict(f"the module already defines `{name}` with other code",
                               candidates=[Candidate(f"`{first_line(module, same[0])}`", node=same[0])])
        else:
            keys = [fingerprint(module, s) for s in new]
            for i in range(len(body) - len(new) + 1):
                if all(fingerprint(module, body[i + j]) == keys[j] for j in range(len(new))):
                    return AlreadyApplied(body[i])
        self._refuse_rebinding(module, body, new)
        name = self.after or self.before
        if name is None:
            # the end of what an import runs: above a closing `if __name__ == "__main__":`, which runs the module as
            # a script with what stands above it only (a def below it is not defined yet when it calls it)
            guard = next((s for s in reversed(body) if _main_guard(s)), None)
            if guard is not None and all(_main_guard(s) or not isinstance(s, (cst.FunctionDef, cst.ClassDef))
                                         for s in body[body.index(guard):]):
                return Changed(_insert_before(module, guard, new), inserted=tuple(new), anchor=guard)
            return Changed(module.with_changes(body=(*body, *new)), inserted=tuple(new))
        anchors = [s for s in body if name in defined_names(s)]
        if not anchors:
            names = [n for s in body for n in defined_names(s)]
            by_name = {n: s for s in body for n in defined_names(s)}
            raise AnchorNotFound(f"no module-level definition `{name}`",
                                 candidates=[Candidate(f"`{n}`", node=by_name[n]) for n in near(name, names)])
        if len(anchors) > 1:
            raise AnchorAmbiguous(f"`{name}` is defined {len(anchors)} times in the module body",
                                  candidates=[Candidate(f"`{first_line(module, s)}`", node=s) for s in anchors])
        if self.after:
            return Changed(insert_after((module, anchors[0]), new), inserted=tuple(new), anchor=anchors[0])
        return Changed(_insert_before(module, anchors[0], new), inserted=tuple(new), anchor=anchors[0])


    def _refuse_rebinding(self, module: cst.Module, body: list[cst.CSTNode], new: list[cst.CSTNode]) -> None:
        """A name the new code binds at module level that the module already binds at run time (a def, a class,
        an assignment, an unpacking, a `for` or `with` target, a walrus, an import) is a conflict: the new code
        would replace what the module's own code relies on (`X = None` over `def X`), or be replaced by it."""
        import ast

        try:
            code = ast.parse(cst.Module(body=new).code).body  # the code only: small
        except (SyntaxError, ValueError, RecursionError):
            return  # the file's own checks say what is wrong with it
        mine = bound_at_module_level(code)
        for st in new:  # `@show.register def _(...)`: the dispatcher keeps each, whatever the name
            if isinstance(st, cst.FunctionDef) and registration(st):
                mine.pop(st.name.value, None)
        # `helper += 1` makes no binding, but changes the module's own
        mine.update({st.target.id: st.lineno for st in code if isinstance(st, ast.AugAssign)
                     and isinstance(st.target, ast.Name)})
        if not mine:
            return
        theirs = _bound_in(module.body)  # read on the tree: rendering a big module costs more than the step
        for n in mine:
            if n in theirs:
                stmt = theirs[n]
                raise Conflict(f"the module already binds `{n}` (`{first_line(module, stmt)}`): the new code would "
                               "rebind it", candidates=[Candidate(f"`{first_line(module, stmt)}`", node=stmt)])
        import builtins

        hidden = sorted(n for n in mine if hasattr(builtins, n) and not n.startswith("__"))
        if hidden:  # `def filter(...)`: every `filter(...)` of the module's own code would call it
            try:
                tree = ast.parse(module.code)
            except (SyntaxError, ValueError, RecursionError):
                return
            used = next((node for node in ast.walk(tree) if isinstance(node, ast.Name) and node.id in hidden
                         and isinstance(node.ctx, ast.Load)), None)
            if used is not None:
                raise Conflict(f"the new code binds `{used.id}`, the builtin the module's own code reads (line "
                               f"{used.lineno}): it would read the new one instead")


def registration(node: cst.CSTNode) -> bool:
    """Whether a def is registered by a decorator `@X.register` (`functools.singledispatch`): the dispatcher keeps
    it, so another def of its name (`_`, by custom) replaces nothing."""
    return isinstance(node, cst.FunctionDef) and any(
        isinstance(d, cst.Attribute) and d.attr.value == "register" for dec in node.decorators
        for d in [dec.decorator.func if isinstance(dec.decorator, cst.Call) else dec.decorator])


def _main_guard(stmt: cst.CSTNode) -> bool:
    """Whether a module-level statement is `if __name__ == "__main__":` (either way round)."""
    if not isinstance(stmt, cst.If) or not isinstance(stmt.test, cst.Comparison) or len(stmt.test.comparisons) != 1:
        return False
    sides = (stmt.test.left, stmt.test.comparisons[0].comparator)
    return isinstance(stmt.test.comparisons[0].operator, cst.Equal) \
        and {type(x).__name__ for x in sides} == {"Name", "SimpleString"} \
        and any(isinstance(x, cst.Name) and x.value == "__name__" for x in sides) \
        and any(isinstance(x, cst.SimpleString) and x.evaluated_value == "__main__" for x in sides)


#: (id of a module-level statement, imports) -> (the statement, what it binds): libcst trees are immutable, and a
#: recipe of many steps on one file asks again for the statements each step left alone
_BOUND: dict[tuple[int, bool], tuple[cst.CSTNode, dict[str, cst.CSTNode]]] = {}


def _bound_in(body: Sequence[cst.CSTNode], *, imports: bool = True) -> dict[str, cst.CSTNode]:
    """`bound_at_module_level` read on a libcst module body: each name with the module-level statement that binds
    it (walrus targets aside), and the names a function of the module declares `global` and binds (`global cache;
    cache = {}` rebinds the module's `cache` when it runs). `imports=False`: not the names imports bind. Read once
    per statement."""
    out: dict[str, cst.CSTNode] = {}
    for stmt in body:
        hit = _BOUND.get((id(stmt), imports))
        if hit is None or hit[0] is not stmt:
            if len(_BOUND) > 100_000:
                _BOUND.clear()
            hit = (stmt, _bound_by([stmt], imports=imports))
            _BOUND[(id(stmt), imports)] = hit
        for name, owner in hit[1].items():
            out.setdefault(name, owner)
    return out


def _bound_by(body: Sequence[cst.CSTNode], *, imports: bool) -> dict[str, cst.CSTNode]:
    out: dict[str, cst.CSTNode] = {}

    def names(target: cst.CSTNode, stmt: cst.CSTNode) -> None:
        if isinstance(target, cst.Name):
            out.setdefault(target.value, stmt)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                names(element.value, stmt)
        elif isinstance(target, cst.StarredElement):
            names(target.value, stmt)

    def visit(block: Sequence[cst.CSTNode], top: cst.CSTNode | None) -> None:
        for stmt in block:
            owner = top or stmt
            if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                out.setdefault(stmt.name.value, owner)
                for name in _globals_bound(stmt):
                    out.setdefault(name, stmt)
            elif isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.Assign):
                        for t in small.targets:
                            names(t.target, owner)
                    elif isinstance(small, cst.AnnAssign) and small.value is not None:
                        names(small.target, owner)
                    elif imports and isinstance(small, (cst.Import, cst.ImportFrom)) and \
                            not isinstance(small.names, cst.ImportStar):
                        for alias in small.names:
                            bound = alias.asname.name if alias.asname else alias.name
                            head = bound
                            while isinstance(head, cst.Attribute):
                                head = head.value
                            if isinstance(head, cst.Name):
                                out.setdefault(head.value, owner)
            elif isinstance(stmt, cst.If):
                if not type_checking_test(stmt.test):
                    visit(body_of(stmt), owner)
                if isinstance(stmt.orelse, cst.If):  # an `elif`: an `if` of its own
                    visit([stmt.orelse], owner)
                elif stmt.orelse is not None:
                    visit(body_of(stmt.orelse), owner)
            elif isinstance(stmt, (cst.For, cst.While, cst.With, cst.Try)) or type(stmt).__name__ == "TryStar":
                if isinstance(stmt, cst.For):
                    names(stmt.target, owner)
                if isinstance(stmt, cst.With):
                    for item in stmt.items:
                        if item.asname is not None:
                            names(item.asname.name, owner)
                visit(body_of(stmt), owner)
                for handler in getattr(stmt, "handlers", ()):
                    if handler.name is not None:  # `except E as x:` binds x, and deletes it after the handler
                        names(handler.name.name, owner)
                    visit(body_of(handler), owner)
                for part in (getattr(stmt, "orelse", None), getattr(stmt, "finalbody", None)):
                    if part is not None:
                        visit(body_of(part), owner)

    visit(body, None)
    return out


def _globals_bound(node: cst.CSTNode) -> set[str]:
    """The names functions in `node` (a def, or a class's methods) declare `global` and bind in their body."""
    declared: set[str] = set()
    stored: set[str] = set()

    class Visit(cst.CSTVisitor):
        def visit_Global(self, g: cst.Global) -> None:
            declared.update(n.name.value for n in g.names)

        def visit_AssignTarget(self, t: cst.AssignTarget) -> None:
            for sub in _names_in(t.target):
                stored.add(sub)

        def visit_AugAssign(self, a: cst.AugAssign) -> None:
            stored.update(_names_in(a.target))

        def visit_FunctionDef(self, f: cst.FunctionDef) -> None:
            stored.add(f.name.value)

        def on_visit(self, n: cst.CSTNode) -> bool:
            # an expression holds no `global` and no statement (the targets are read whole above): not walked,
            # which is most of a large module's nodes
            return not isinstance(n, cst.BaseExpression) and super().on_visit(n)

    node.visit(Visit())
    return declared & stored


def _names_in(target: cst.CSTNode) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _names_in(e.value)]
    if isinstance(target, cst.StarredElement):
        return _names_in(target.value)
    return []


def bound_at_module_level(stmts: list) -> dict[str, int]:
    """The names statements bind in the module's namespace at run time, each with its first line: defs, classes,
    imports, assignment and unpacking targets, annotated assignments with a value, `for` and `with` targets and
    walrus targets, also under a module-level `if`/`try`/`for`/`while`/`with` (not under `if TYPE_CHECKING:`, which
    the interpreter skips; not in functions, classes or lambdas). `X += 1` changes a binding, it does not make one."""
    import ast

    out: dict[str, int] = {}

    def targets(node, line: int) -> None:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                out.setdefault(sub.id, line)

    def walrus(node) -> None:
        todo = [node]
        while todo:
            sub = todo.pop()
            if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            if isinstance(sub, ast.NamedExpr):
                out.setdefault(sub.target.id, sub.lineno)
            todo.extend(ast.iter_child_nodes(sub))

    def visit(body: list) -> None:
        for st in body:
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.setdefault(st.name, st.lineno)
                continue
            if isinstance(st, (ast.Import, ast.ImportFrom)):
                for a in st.names:
                    if a.name != "*":
                        out.setdefault((a.asname or a.name).split(".")[0], st.lineno)
                continue
            if isinstance(st, ast.Assign):
                for t in st.targets:
                    targets(t, st.lineno)
            elif isinstance(st, ast.AnnAssign) and st.value is not None:
                targets(st.target, st.lineno)
            elif isinstance(st, (ast.For, ast.AsyncFor)):
                targets(st.target, st.lineno)
            elif isinstance(st, (ast.With, ast.AsyncWith)):
                for item in st.items:
                    if item.optional_vars is not None:
                        targets(item.optional_vars, st.lineno)
            if isinstance(st, ast.Match):  # a `case` pattern's captures bind (`case helper:` rebinds `helper`)
                walrus(st.subject)
                for case in st.cases:
                    for sub in ast.walk(case.pattern):
                        name = sub.name if isinstance(sub, (ast.MatchAs, ast.MatchStar)) else \
                            sub.rest if isinstance(sub, ast.MatchMapping) else None
                        if name:
                            out.setdefault(name, case.pattern.lineno)
                    visit(case.body)
                continue
            if not isinstance(st, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try)) \
                    and not (hasattr(ast, "TryStar") and isinstance(st, ast.TryStar)):
                walrus(st)
                continue
            if isinstance(st, ast.If):
                walrus(st.test)
                if not type_checking_test(st.test):
                    visit(st.body)
                visit(st.orelse)
                continue
            for field in ("body", "orelse", "finalbody"):
                visit(getattr(st, field, []) or [])
            for handler in getattr(st, "handlers", []):
                if handler.name:  # `except E as helper:` binds it, and unbinds it where the handler ends
                    out.setdefault(handler.name, handler.lineno)
                visit(handler.body)

    visit(stmts)
    return out


def _insert_before(module: cst.Module, anchor: cst.CSTNode, new: list[cst.CSTNode]) -> cst.Module:
    """The code right before `anchor`, below the anchor's comment lines; the blank lines at the top of the code
    (its spacing, PEP 8's two) go between the code and the anchor, where the anchor had its own lines."""
    lead, top = tuple(getattr(anchor, "leading_lines", ())), tuple(getattr(new[0], "leading_lines", ()))
    k = next((i for i, line in enumerate(top) if line.comment is not None), len(top))
    if not lead or not k or not hasattr(anchor, "leading_lines"):
        return insert_before((module, anchor), new)
    at = next(i for i, s in enumerate(module.body) if s is anchor)
    body = list(insert_before((module, anchor), [new[0].with_changes(leading_lines=top[k:]), *new[1:]]).body)
    body[at + len(new)] = body[at + len(new)].with_changes(leading_lines=top[:k])
    return module.with_changes(body=tuple(body))
