"""`insert_statements`: insert statements into a function: at its start or end, or before/after a matched statement.

Example::

    - op: insert_statements
      file: srt/speculative/eagle_worker_v2.py
      function: EAGLEWorkerV2.__init__
      at: after                                  # start | end | before | after
      match: "self.plan_stream, self.plan_stream_ctx = _get_plan_stream(...)"
      code: |
        self.spec_disable_batch_threshold = server_args.speculative_disable_batch_threshold

`function` is dotted (`Class.method`, `Outer.Inner.method`, or a module-level function). `at: start` inserts at the
top of the function body, after its docstring if it has one; `at: end` appends to the function body (its top-level
block, after its last statement; a block that ends with a `return`, `raise`, `continue` or `break` is refused,
since code after it never runs: use `before` with `match: return ...` there).
`at: before` / `at: after` need `match`, a *code pattern* (see `patcher.patterns`: the source of one statement,
where `...` matches any expression and `f(...)` any arguments) that must match exactly one statement of the
function: at any block depth (inside `if`/`else`/`with`/`try`/`for` bodies), but not inside nested functions or
classes, and not a statement written on its `if x: y` header line. A compound statement is matched with a block of
`...` (`with ctx:` + an indented `...` line matches that whole `with`, whatever its body). The new statements go
right before/after that statement, in its block, with its indentation; with `before`, the comment lines above the
matched statement stay above the new code. Blank lines at the top of `code` are kept. `match` is refused at load time with `at: start`/`at: end`, and required
with `before`/`after`.

`blank_lines_after: N` (what `specpatch import` writes when the patch left a blank line below the code it inserted)
puts N blank lines between the new code and the statement after it, unless that statement already has as many
above it; its comment lines stay with it, below them. At the end of a block there is no statement after it, and
nothing to do.

`fallback_match` (with `before`/`after`, what `specpatch import` writes when it can) is a pattern of the statement on
the other side of the insertion point: the one that followed the insertion point (`at: after`) or preceded it (`at:
before`) in the release the recipe was made on. It is read only when no statement matches `match` (upstream rewrote the
anchor statement itself): then the one statement matching `fallback_match` is the anchor, on its other side (before it
for `at: after`). It must match exactly one statement too; when neither pattern matches, the step refuses naming
`match`. For `at: after`, code that reads what `match` assigned (`self.x` after `self.x = ...`) is placed through the
fallback only if the function still assigns it above that place; else the step refuses (upstream moved or changed the
assignment: the code would read it before it is set). It is read too when the statement matching `match` is now in a
block nested below the one of the statement matching `fallback_match` (upstream put it under an `if`/`else`, a `with`, a
loop) and the code reads nothing that block assigns: next to the anchor it would run on that path only, next to its
other neighbour it runs on every path, still between the two. Before `fallback_match`, that statement keeps its own
blank and comment lines, below the new code, as where the recipe was made::

    - op: insert_statements
      function: Indexer._get_logits_head_gate
      at: after
      match: weights = weights.float(...)
      fallback_match: weights = weights * self.n_heads**-0.5
      code: ...

`inside` (what `specpatch import` writes when the statement next to the insertion is there more than once in the
function) names one block of the function by its header: an `if` or `elif` arm, a `with`, `for` or `while`, written
as its header line (`if poll == KVPoll.Bootstrapping:`; a pattern, so `...` matches any expression). It is matched as
code, formatting and comments aside, and an `if` header matches an `elif` arm with that test and the other way
round: upstream turning the arm into an `elif` after another (or back) does not stop the step. `inside_else: true`
takes the `else:` block right after that arm instead. Then `at: start`/`at: end` are that block's start and end, and
`match`/`fallback_match` must match exactly one of the block's own statements (not those of blocks nested in it)::

    - op: insert_statements
      function: PrefillBootstrapQueue.pop_bootstrapped
      inside: "if poll == KVPoll.Bootstrapping:"
      at: start
      code: ...

The header must match exactly one block of the function (nested functions and classes aside): when none or several
do, the step refuses naming `inside` (with the headers that look alike, or the blocks that have it).

Steps of a recipe that insert at one place keep their recipe order there, whatever led them there: `after` one
statement twice puts the first step's code first, then the second's (and so at `start`, `before` it, at `end`, and
`after` one statement and `before` the next, or through `fallback_match`). On a second run each finds its own code
past the others', so the apply stays idempotent. Two steps with the same code at one place insert it once.

Answers: *changed*; *already applied* (the new statements, compared as ASTs, already sit at the requested place:
right before/after the matched statement, or first/last in the function or the `inside` block); *cannot apply* (the
function is missing or ambiguous; the `inside` header is missing or ambiguous, or its arm has no `else:` with
`inside_else`; no statement or several statements match `match`). By default there is no conflict answer: equal
statements elsewhere in the function are not this step's business (sglang's functions often `return batch_output`
twice). With `if_present_elsewhere: refuse` (what `specpatch import` writes), a statement the step adds that is
already anywhere in the function (a plain assignment or a call, not a `return`/`pass`/`break`) is a conflict: the
release probably has the change in another place or form.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass, replace
from typing import Literal, Sequence

import libcst as cst

from ..anchors import (NodePath, body_of, code_of, find_function, fit, indent_of, insert_after, insert_before,
                       is_docstring, near_statements, normalized, replace_at, set_block_body, statements_matching)
from ..errors import (AnchorAmbiguous, AnchorNotFound, Candidate, Conflict, ReadBeforeSet, RecipeError, SpecpatchError,
                      Unreachable)
from ..model import option
from ..patterns import Pattern
from ._code import INSIDE_ELSE, check_inside, dotted_owner, inside_block, inside_words, on_a_shared_line
from .base import AlreadyApplied, Changed, Operation, Outcome, attempt, register


@register
@dataclass(frozen=True, kw_only=True)
class InsertStatements(Operation):
    """Insert statements at the start or end of a function, or right before/after one matched statement."""

    op: Literal["insert_statements"]
    function: str = option(description="the function, dotted, e.g. EAGLEWorkerV2.__init__")
    code: str = option(description="the statements to insert (one or more)")
    at: Literal["start", "end", "before", "after"] = option(description="where: start | end | before | after")
    match: str | None = option(default=None, description="with before/after: a code pattern of the anchor statement")
    fallback_match: str | None = option(
        default=None, description="with before/after: a pattern of the statement on the other side of the insertion "
        "point, the anchor when nothing matches `match`")
    if_present_elsewhere: Literal["apply", "refuse"] = option(
        default="apply", description="when a statement that `code` adds is already in the function: apply | refuse")
    blank_lines_after: int = option(default=0, description="blank lines between the new code and the statement "
                                    "after it")
    inside: str | None = option(
        default=None, description="the header of the block to insert into, e.g. `if poll == KVPoll.Bootstrapping:` "
        "(an `if` or `elif` arm, a `with`, `for` or `while`; one in the function): `start`/`end` are that block's, "
        "and `match` is one of its own statements")
    inside_else: bool = option(default=False, description=INSIDE_ELSE)
    #: set by `among`, not by recipes: the code of the recipe's other steps that insert into this step's function,
    #: those before it and those after it in the recipe (skipped where found next to this step's place)
    stacked: tuple[tuple[str, ...], tuple[str, ...]] = option(default=((), ()), exclude=True)


    def among(self, steps: Sequence[Operation]) -> InsertStatements:
        """Steps that insert at one place keep their recipe order there, whatever the side or the anchor that led
        them there (`after` a statement twice, or `after` it and `before` the next one, or a `fallback_match`: the
        first step's code, then the second's), and each finds its own code past the others' on a second run (so
        that an apply stays idempotent). The others are the recipe's insertions into the same function; one whose
        code is this step's own is the same insertion, made once."""
        same, seen = [], set()
        for s in steps:  # one per code: a later step with an earlier one's code is that insertion again
            if s is self or (isinstance(s, InsertStatements) and s.file == self.file and s.function == self.function
                             and _dedented(s.code) not in seen):
                same.append(s)
                seen.add(_dedented(s.code))
        same = [s for s in same if s is self or _dedented(s.code) != _dedented(self.code)]
        k = next((i for i, s in enumerate(same) if s is self), None)
        if k is None or len(same) < 2:
            return self
        return replace(self, stacked=(tuple(s.code for s in same[:k]), tuple(s.code for s in same[k + 1:])))

    def __post_init__(self) -> None:
        if self.blank_lines_after < 0:
            raise ValueError("`blank_lines_after` is a number of lines: 0 or more")
        if self.at in ("before", "after"):
            if self.match is None:
                raise ValueError(f"`at: {self.at}` needs `match`, a pattern of the statement to insert {self.at}")
            Pattern.parse(self.match)  # a PatternError is a ValueError: reported at load time, with the line
        elif self.match is not None:
            raise ValueError(f"`match` goes with `at: before` or `at: after`, not with `at: {self.at}`")
        if self.fallback_match is not None:
            if self.match is None:
                raise ValueError("`fallback_match` goes with `match` (`at: before` or `at: after`)")
            Pattern.parse(self.fallback_match)
        check_inside(self.inside, self.inside_else)

    def describe(self) -> str:
        n = len(self.code.strip().splitlines())
        what = f"{n} line{'s' if n != 1 else ''}"
        block = f" {inside_words(self.inside, self.inside_else)}" if self.inside else ""
        if self.match is None:
            return f"insert {what} at the {self.at} of `{self.function}`{block}"
        return f"insert {what} in `{self.function}`{block} {self.at} `{Pattern.parse(self.match)}`"

    def anchor(self) -> str:
        where = f"{self.function}, {inside_words(self.inside, self.inside_else)}" if self.inside else self.function
        if self.match is None:
            return f"{where} ({self.at})"
        return f"{where}: `{Pattern.parse(self.match)}`"

    @attempt
    def apply(self, module: cst.Module) -> Outcome:
        from ._code import parse_block

        new = parse_block(self.code, module)  # blank lines at the top of `code` are kept, above the new code
        if not new:
            raise RecipeError("`code` holds no statement to insert")
        fpath = find_function(module, self.function)
        outcome = self._apply(module, fpath, new)
        if isinstance(outcome, Changed):
            self._refuse_overwriting_parameters(fpath, outcome.module)
        return outcome

    def settled(self, module: cst.Module, found: AlreadyApplied, *, changed: bool) -> None:
        """The code must not read what the function sets only below it in the final file either: a later step
        may add that assignment (`self.spec_disabled = self.threshold > 0`, then `self.threshold = ...` at the
        end of `__init__`)."""
        if found.existing is not None:
            self._refuse_reading_before_set(module, find_function(module, self.function), found.existing,
                                            include=False)

    def _refuse_overwriting_parameters(self, original: NodePath, patched: cst.Module) -> None:
        """Code that assigns a parameter of the function, unconditionally and before anything reads it, throws
        away what every caller passes: most often its own local that upstream has since made a parameter (`limit =
        n + 1` in `def f(req, limit=100)`). Reading it first (in the code, or in the function above the code),
        assigning it under an `if` (or `inside:` one), is the code's own choice. Judged on the patched module."""
        from ..anchors import statement_ast

        fpath = find_function(patched, self.function)
        fn = statement_ast(patched, fpath[-1])
        try:
            code = ast.parse(_dedented(self.code))
        except (SyntaxError, ValueError, RecursionError):
            return
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or not code.body:
            return
        a = fn.args
        params = {p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if p is not None}
        first = ast.dump(code.body[0])
        at = next((k for k, st in enumerate(fn.body) if ast.dump(st) == first), None)
        if at is None:
            return  # the code went into a block of the function (an `if`, `inside:`): conditional
        read = {n.id for st in fn.body[:at] for n in ast.walk(st) if isinstance(n, ast.Name)
                and isinstance(n.ctx, ast.Load)}
        for stmt in code.body:
            bound: list[str] = []
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
                read |= _names(ast.unparse(stmt.value), ast.Load)
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                bound = [t.id for t in targets if isinstance(t, ast.Name)]
            elif isinstance(stmt, (ast.Import, ast.ImportFrom)):  # the other forms that bind: an import, a def
                bound = [(x.asname or x.name).split(".")[0] for x in stmt.names]
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound = [stmt.name]
            elif isinstance(stmt, ast.Expr):  # `(args := None)`: a walrus, its value read first
                walrus = [n for n in ast.walk(stmt) if isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name)]
                for n in walrus:
                    read |= {m.id for m in ast.walk(n.value) if isinstance(m, ast.Name) and isinstance(m.ctx, ast.Load)}
                bound = [n.target.id for n in walrus]
            if bound:
                lost = sorted(t for t in bound if t in params and t not in read)
                if lost:
                    raise Conflict(f"`{lost[0]}` is a parameter of `{self.function}`, and the code's "
                                   f"`{ast.unparse(stmt)}` overwrites it before anything reads it: what every caller "
                                   f"passes would be lost (did upstream make the code's local a parameter?)",
                                   hint="give the code's variable another name, or read the parameter first",
                                   candidates=[Candidate(f"`def {fn.name}(...{lost[0]}...)`", node=original[-1])])
            read |= {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}

    def _apply(self, module: cst.Module, fpath: NodePath, new: list[cst.BaseStatement]) -> Outcome:
        # the block the step edits: the function's, or the one block of it whose header is `inside`
        block = fpath if self.inside is None else inside_block(
            module, fpath, self.inside, else_arm=self.inside_else, where=f"`{self.function}`")
        if self.match is None:
            outcome = self._at_an_end(module, block, new, fpath)
            if isinstance(outcome, Changed):
                body = list(body_of(block[-1]))
                if self.at == "start":
                    self._refuse_reading_before_set(module, fpath, body[0] if body else None, include=False)
                elif block is not fpath:
                    self._refuse_reading_before_set(module, fpath, body[-1] if body else None, include=True)
                else:
                    self._refuse_reading_before_set(module, fpath, None, include=True)
            return outcome
        try:
            try:
                outcome = self._next_to_match(module, fpath, block, new, Pattern.parse(self.match), self.at)
            except Conflict:
                # the code already where a first run put it: beside `fallback_match`, `match` being nested below
                # that statement's block (a second run of the step, `check`)
                done = self._beside_fallback(module, fpath, block, new)
                if done is None:
                    raise
                return done
            if isinstance(outcome, Changed):
                self._refuse_reading_before_set(module, fpath, outcome.anchor, include=self.at == "after")
            if not (self.fallback_match is not None and isinstance(outcome, Changed)
                    and self._nested_below_fallback(module, block, outcome.anchor, new)):
                return outcome
            raise AnchorNotFound(f"`{self.match}` is now in a block nested below `{self.fallback_match}`'s")
        except AnchorNotFound as gone:
            if self.fallback_match is None:
                raise
            other = "before" if self.at == "after" else "after"
            try:
                # before the statement that followed the anchor, that statement keeps its blank and comment lines
                # (below the code, as where the recipe was made), and the code keeps its own (above it)
                outcome = self._next_to_match(module, fpath, block, new, Pattern.parse(self.fallback_match), other,
                                              keep_lines=other == "before")
            except AnchorNotFound:
                raise gone from None
            if isinstance(outcome, Changed):
                self._refuse_reading_ahead(module, fpath, outcome.anchor, other)
            return outcome

    def _beside_fallback(self, module: cst.Module, fpath: NodePath, block: NodePath,
                         new: list[cst.BaseStatement]) -> Outcome | None:
        """AlreadyApplied when the code stands where the fallback put it (beside `fallback_match`) and the one
        statement matching `match` is nested below that statement's block, as when the fallback placed it; else
        None."""
        if self.fallback_match is None:
            return None
        matches = statements_matching(module, block, Pattern.parse(self.match))
        if len(matches) != 1 or not self._nested_below_fallback(module, block, matches[0][-1], new):
            return None
        other = "before" if self.at == "after" else "after"
        try:
            outcome = self._next_to_match(module, fpath, block, new, Pattern.parse(self.fallback_match), other,
                                          keep_lines=other == "before")
        except SpecpatchError:
            return None
        return outcome if isinstance(outcome, AlreadyApplied) else None

    def _refuse_reading_before_set(self, module: cst.Module, fpath: NodePath, stop: cst.CSTNode | None, *,
                                   include: bool) -> None:
        refuse_reading_before_set(module, fpath, stop, self.code, self.function, include=include)

    @staticmethod
    def _read_by_methods_called(module: cst.Module, fpath: NodePath, code: ast.Module, me: str) -> set[str]:
        """`me.x` for each attribute that a method of the class, called by the code as `me.method(...)`, reads on
        its own first parameter."""
        from ..anchors import statement_ast

        called = {n.func.attr for n in ast.walk(code) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                  and isinstance(n.func.value, ast.Name) and n.func.value.id == me}
        cls = next((n for n in reversed(fpath[:-1]) if isinstance(n, cst.ClassDef)), None)
        tree = statement_ast(module, cls) if called and cls is not None else None
        if not isinstance(tree, ast.ClassDef):
            return set()
        out: set[str] = set()
        for method in tree.body:
            if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) and method.name in called \
                    and method.args.args:
                own = method.args.args[0].arg
                out |= {f"{me}.{n.attr}" for n in ast.walk(method) if isinstance(n, ast.Attribute)
                        and isinstance(n.ctx, ast.Load) and isinstance(n.value, ast.Name) and n.value.id == own}
        return out

    @staticmethod
    def _set_elsewhere(module: cst.Module, fpath: NodePath, attr: str) -> bool:
        """Whether the class of the method at `fpath` binds `attr` other than in that method: at class level, or as
        `self.attr` in another method; or whether the class cannot be read (no class around the method)."""
        cls = next((n for n in reversed(fpath[:-1]) if isinstance(n, cst.ClassDef)), None)
        if cls is None:
            return True
        from ..anchors import statement_ast

        tree = statement_ast(module, cls)
        if not isinstance(tree, ast.ClassDef):
            return True
        for stmt in tree.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if isinstance(fpath[-1], cst.FunctionDef) and stmt.name == fpath[-1].name.value:
                    continue
                if any(t.endswith(f".{attr}") for t in _stores(stmt) - _only_augmented(stmt)) or stmt.name == attr \
                        or stmt.name in ("__getattr__", "__getattribute__", "__setattr__"):
                    return True
            elif attr in _stores(stmt):
                return True
        return False

    def _refuse_reading_ahead(self, module: cst.Module, fpath: NodePath, fallback: cst.CSTNode, at: str) -> None:
        """Placed by `fallback_match` (the `match` statement is not there as it was), the code must not read what
        `match` assigned (`self.has_schema = self.json_schema is not None` after `self.json_schema = json_schema`)
        unless the function still assigns it above the new place: upstream may have moved or changed that
        assignment, and the code would read it before it is set (an AttributeError no name check sees)."""
        if self.at != "after":
            return
        try:
            wanted = {ast.unparse(t) for st in ast.parse(textwrap.dedent(self.match)).body
                      for t in (st.targets if isinstance(st, ast.Assign) else
                                [st.target] if isinstance(st, (ast.AnnAssign, ast.AugAssign)) else [])}
            read = {ast.unparse(n) for n in ast.walk(ast.parse(textwrap.dedent(self.code)))
                    if isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, ast.Load)}
        except (SyntaxError, ValueError, RecursionError):
            return
        needed = wanted & read
        if not needed:
            return
        from ..anchors import statement_ast, walk_statements

        above, seen = set(), False
        for spath in walk_statements(fpath):
            stmt = spath[-1]
            if stmt is fallback:
                if at == "before":
                    break
                seen = True
            tree = statement_ast(module, stmt) if not isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) else None
            if tree is not None and not isinstance(tree, (ast.If, ast.For, ast.While, ast.With, ast.Try)):
                above |= {ast.unparse(n) for n in ast.walk(tree)
                          if isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, ast.Store)}
            if seen:
                break
        missing = sorted(needed - above)
        if missing:
            raise AnchorNotFound(
                f"no statement matching `{Pattern.parse(self.match)}` in `{self.function}`, and the code reads "
                f"{', '.join(f'`{m}`' for m in missing)}, which that statement assigned and the function does not "
                f"assign above `{Pattern.parse(self.fallback_match)}` (the fallback place): upstream moved or "
                f"changed the assignment, and the code would read it before it is set",
                candidates=near_statements(module, fpath, Pattern.parse(self.match)))

    def _nested_below_fallback(self, module: cst.Module, block: NodePath, anchor: cst.CSTNode,
                               new: list[cst.BaseStatement]) -> bool:
        """Is the anchor now in a block nested in the one of the statement matching `fallback_match` (its neighbour
        where the recipe was made: upstream put it under an `if`/`else`, a `with`, a loop), while the code reads
        nothing that block assigns? Inserted next to the anchor, the code would run in that block only; next to
        `fallback_match` it keeps its place between the two, on every path."""
        other = statements_matching(module, block, Pattern.parse(self.fallback_match))
        mine = next((m for m in statements_matching(module, block, Pattern.parse(self.match)) if m[-1] is anchor),
                    None)
        if len(other) != 1 or mine is None or len(mine) <= len(other[0]) \
                or not any(node is other[0][-2] for node in mine):
            return False
        inner = mine[len(other[0]) - 1]  # the statement of the fallback's block that holds the anchor
        reads = _names("".join(code_of(module, s) for s in new), ast.Load)
        return not reads & _names(code_of(module, inner), ast.Store)

    def _at_an_end(self, module: cst.Module, fpath: NodePath, new: list[cst.BaseStatement],
                   function: NodePath) -> Outcome:
        statements = list(body_of(fpath[-1]))
        # a docstring is a function's; a string first in an `if` block is a statement like any other
        first = 1 if statements and is_docstring(statements[0]) and isinstance(fpath[-1], cst.FunctionDef) else 0
        k = len(new)
        # past the code of the steps that insert at this place before this one (start) or after it (end)
        if self.at == "start":
            at = self._past_stacked(module, statements, first, forward=True)
            have = statements[at:at + k]
        else:
            at = self._past_stacked(module, statements, len(statements), forward=False)
            have = statements[max(first, at - k):at]
        if _same_statements(module, have, new):
            return AlreadyApplied(have[0])
        if self.if_present_elsewhere == "refuse":
            self._refuse_duplicates(module, function, new)
        if self.at == "end" and at > first and _ends_flow(statements[at - 1]):
            last = statements[at - 1]
            raise Unreachable(f"`{self.function}` ends with `{code_of(module, last).strip().splitlines()[0]}`: "
                              f"code put after it would never run",
                              candidates=[Candidate(f"`{code_of(module, last).strip().splitlines()[0]}`", node=last)])
        if self.at == "start":
            rest = statements[at:]
            padded = [self._spaced(rest[0]), *rest[1:]] if rest else []
            body = [*statements[:at], *new, *padded]
            return Changed(set_block_body(fpath, body, placed=padded[:1]), inserted=tuple(new), anchor=fpath[-1])
        return Changed(set_block_body(fpath, [*statements[:at], *new, *statements[at:]]), inserted=tuple(new),
                       anchor=fpath[-1])

    def _past_stacked(self, module: cst.Module, block: Sequence[cst.CSTNode], at: int, *, forward: bool) -> int:
        """The index in `block` past the code of the steps stacked at this place that sits at `at`: forward over
        the earlier steps' code (in recipe order), or backward over the later steps' (in reverse order); each is
        skipped where it is there, so a step whose neighbour did not apply still finds its place."""
        from ._code import parse_block

        for code in (self.stacked[0] if forward else reversed(self.stacked[1])):
            theirs = parse_block(code, module)
            n = len(theirs)
            if forward and _same_statements(module, block[at:at + n], theirs):
                at += n
            elif not forward and at - n >= 0 and _same_statements(module, block[at - n:at], theirs):
                at -= n
        return at

    def _next_to_match(self, module: cst.Module, fpath: NodePath, block: NodePath, new: list[cst.BaseStatement],
                       pattern: Pattern, at: str, *, keep_lines: bool = False) -> Outcome:
        matches = statements_matching(module, block, pattern)
        if block is not fpath:  # inside a block: its own statements only, not those of blocks nested in it
            matches = [m for m in matches if m[-2] is block[-1]]
        where = f"`{self.function}`" + (f" {inside_words(self.inside, self.inside_else)}" if self.inside else "")
        # Where the new code is already next to a match, its statements may match the pattern too (inserting
        # `self.f(x)` after `self.f(...)`): they are not anchors, or a second run would see an ambiguity.
        sides = {id(m[-1]): self._neighbours(module, m, new, at) for m in matches}
        placed = {key: run for key, (run, _) in sides.items() if run is not None}
        ours = {id(s) for run, skipped in sides.values() for s in (*(run or ()), *skipped)}
        anchors = [m for m in matches if id(m[-1]) not in ours]
        if not anchors:
            # the statement elsewhere in the module (upstream split the function, moved the code to a helper)
            moved = [m for m in statements_matching(module, (module,), pattern, into_defs=True)
                     if not any(n is fpath[-1] for n in m)]
            raise AnchorNotFound(f"no statement matching `{pattern}` in {where}"
                                 + on_a_shared_line(module, block, str(pattern)),
                                 candidates=[*near_statements(module, block, pattern), *(
                                     Candidate(f"`{code_of(module, m[-1]).strip().splitlines()[0]}` in "
                                               f"{dotted_owner(m)}", node=m[-1]) for m in moved[:3])])
        if len(anchors) > 1:
            raise AnchorAmbiguous(
                f"{len(anchors)} statements match `{pattern}` in {where}",
                candidates=[Candidate(code_of(module, m[-1]).strip().splitlines()[0], node=m[-1]) for m in anchors])
        anchor = anchors[0]
        if id(anchor[-1]) in placed:
            return AlreadyApplied(placed[id(anchor[-1])][0])
        if self.if_present_elsewhere == "refuse":
            self._refuse_duplicates(module, fpath, new)
        skipped = sides[id(anchor[-1])][1]
        # next to the code of the steps stacked at this place: after the earlier ones', before the later ones'
        beside = anchor if not skipped else (*anchor[:-1], skipped[-1] if at == "after" else skipped[0])
        return Changed(self._insert(beside, new, at, keep_lines=keep_lines), inserted=tuple(new), anchor=anchor[-1])

    def _insert(self, anchor: NodePath, new: list[cst.BaseStatement], at: str, *,
                keep_lines: bool = False) -> cst.Module:
        """The module with `new` on the `at` side of the statement at `anchor`, `blank_lines_after` blank lines
        between it and the statement after it (which keeps its comment lines, below them). `keep_lines` (`at:
        before` the statement that followed a step's `at: after` anchor): the statement keeps its leading blank and
        comment lines, below the new code, instead of handing them to it."""
        if keep_lines and at == "before":
            follower = anchor[-1] if not self.blank_lines_after else self._spaced(anchor[-1])
            return replace_at(anchor, [*fit(new, indent_of(anchor), anchor[0]), follower])
        if not self.blank_lines_after:
            return (insert_after if at == "after" else insert_before)(anchor, new)
        block = list(body_of(anchor[-2]))
        i = next(j for j, s in enumerate(block) if s is anchor[-1])
        if at == "after":
            if i + 1 == len(block):
                return insert_after(anchor, new)
            follower = (*anchor[:-1], block[i + 1])
            return replace_at(follower, [*fit(new, indent_of(follower), anchor[0]), self._spaced(follower[-1])])
        lead = tuple(getattr(anchor[-1], "leading_lines", ()))
        new = fit(new, indent_of(anchor), anchor[0])
        new[0] = new[0].with_changes(leading_lines=(*lead, *new[0].leading_lines))
        return replace_at(anchor, [*new, self._spaced(anchor[-1].with_changes(leading_lines=()))])

    def _spaced(self, stmt: cst.CSTNode) -> cst.CSTNode:
        """`stmt` with `blank_lines_after` blank lines at the top of its leading lines (counting those it has)."""
        lead = tuple(getattr(stmt, "leading_lines", ()))
        have = next((k for k, line in enumerate(lead) if line.comment is not None), len(lead))
        missing = self.blank_lines_after - have
        if missing <= 0:
            return stmt
        return stmt.with_changes(leading_lines=(*(cst.EmptyLine(indent=False) for _ in range(missing)), *lead))

    def _refuse_duplicates(self, module: cst.Module, fpath: NodePath, new: Sequence[cst.BaseStatement]) -> None:
        from ._code import fingerprint
        from .replace_statements import _common, refuse_present

        keys = {fingerprint(module, s) for s in new if not _common(s)} - {None}
        refuse_present(module, fpath, keys, f"`{self.function}`")
        # nor in an edited form: an assignment to the same target, a call of the same function, 3/4 alike
        # (upstream's `mamba_indices = get_req_to_token_pool().get_mamba_indices(...)` where the code has
        # `mamba_indices = forward_batch.req_to_token_pool.get_mamba_indices(...)`)
        from ..anchors import walk_statements
        from ._code import first_line
        from .replace_statements import _edited_upstream

        statements = [spath[-1] for spath in walk_statements(fpath)]
        for stmt in new:
            if _common(stmt):
                continue
            alike = _edited_upstream(module, [(fpath, statements)], stmt)
            if alike:
                raise Conflict(f"`{self.function}` already has {alike[0].text}, which looks like this step's "
                               f"`{first_line(cst.Module(body=[stmt]), stmt)}` in another form: upstream may have "
                               f"made the change its own way (`if_present_elsewhere: apply` inserts it anyway)",
                               candidates=alike)

    def _neighbours(self, module: cst.Module, spath: NodePath, new: Sequence[cst.BaseStatement],
                    at: str) -> tuple[Sequence[cst.CSTNode] | None, Sequence[cst.CSTNode]]:
        """On the requested side of the statement at `spath`: the statements there when they equal `new` (else
        None), past those of the other insertions of the recipe found there (the earlier steps' code after it, the
        later steps' before it), which are returned too."""
        block = list(body_of(spath[-2]))
        i = next(j for j, s in enumerate(block) if s is spath[-1])
        k = len(new)
        if at == "after":
            j = self._past_stacked(module, block, i + 1, forward=True)
            run, skipped = block[j:j + k], block[i + 1:j]
        else:
            j = self._past_stacked(module, block, i, forward=False)
            run, skipped = block[max(0, j - k):j], block[j:i]
        return (run if _same_statements(module, run, new) else None), skipped


def _same_statements(module: cst.Module, have: Sequence[cst.CSTNode], new: Sequence[cst.CSTNode]) -> bool:
    """Do two statement lists hold the same code (AST-equal, statement by statement)?"""
    return len(have) == len(new) and bool(new) and all(
        (a := normalized(code_of(module, h))) is not None and a == normalized(code_of(module, n))
        for h, n in zip(have, new))


def _dedented(code: str) -> str:
    return textwrap.dedent(code).strip()


def _only_augmented(tree: ast.AST) -> set[str]:
    """What a piece of code sets with an augmented assignment only (`self.count += 1`): read before it is written,
    it is no binding of a value."""
    aug = {id(n.target) for n in ast.walk(tree) if isinstance(n, ast.AugAssign)}
    stores = [n for n in ast.walk(tree) if isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, ast.Store)]
    return {_target(n) for n in stores if id(n) in aug} - {_target(n) for n in stores if id(n) not in aug} - {None}


def _names(code: str, ctx: type) -> set[str]:
    """The names `code` reads (ctx ast.Load) or assigns (ast.Store); none if it does not parse alone."""
    try:
        tree = ast.parse(textwrap.dedent(code))
    except SyntaxError:
        return set()
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ctx)}


def refuse_reading_before_set(module: cst.Module, fpath: NodePath, stop: cst.CSTNode | None, code: str, function: str,
                              *, include: bool, read_there: frozenset[str] = frozenset()) -> None:
    """The code must not read what the function sets only below the new place: a local it assigns further
    down (UnboundLocalError), or, in `__init__`, `self.x` that the function assigns further down and nothing
    else of the class sets (AttributeError): upstream moved that assignment below the anchor. `stop` is the
    statement the new code goes before (`include=False`) or after (`include=True`, with its block); None with
    `include`: the function's end. `read_there`: what the statements the code replaces read already (the release
    reads them at that place: not the code's doing)."""
    try:
        tree = ast.parse(textwrap.dedent(code))
    except (SyntaxError, ValueError, RecursionError):
        return
    own = {_target(n) for n in ast.walk(tree) if isinstance(n, (ast.Name, ast.Attribute))
           and not isinstance(n.ctx, ast.Load)} | _stores(tree)  # its imports and defs too
    # reads that run when the code runs: not those in a lambda or a nested def, which run when called, later;
    # `self.count += 1` reads `self.count` first (unless the code sets it otherwise)
    reads = ({_target(n) for n in _run_now(tree) if isinstance(n, (ast.Name, ast.Attribute))
              and isinstance(n.ctx, ast.Load)} - own | _only_augmented(tree)) - {None} - read_there
    if not reads:
        return
    from ..anchors import statement_ast, walk_statements

    fn = statement_ast(module, fpath[-1])
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return
    declared = {n for s in ast.walk(fn) if isinstance(s, (ast.Global, ast.Nonlocal)) for n in s.names}
    params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs, fn.args.vararg,
                              fn.args.kwarg) if a is not None}
    me = (fn.args.posonlyargs + fn.args.args)[0].arg if fn.name == "__init__" and fn.args.args else None
    inherited: set[str] | None = None  # what the base classes' __init__ set, when the module has them all
    if me is not None:  # `self.desc = self._describe()`: what the method it calls reads on `self`, read now
        reads |= InsertStatements._read_by_methods_called(module, fpath, tree, me)
        inherited = _set_by_bases(module, fpath, me)
    stored = _stores(fn) | (inherited if inherited and any(_calls_init(s) for s in fn.body) else set())
    later = {t for t in stored if t not in params and t not in declared
             and ("." not in t or (me is not None and t.startswith(f"{me}.")))} & reads
    if me is not None:
        later -= {t for t in later if "." in t and InsertStatements._set_elsewhere(module, fpath, t.split(".", 1)[1])}
    if not later:
        return
    above: set[str] = set()
    elsewhere: set[str] = set()  # what a branch off the new code's path binds (another arm, a `case`)
    stop_path = next((p for p in walk_statements(fpath) if p[-1] is stop), None) if stop is not None else None
    # `if plan is not None: rank = ...` above, and the code reads `rank` under `if plan is not None:` too (the
    # release's own way): bound wherever it is read. The tests each read is under, in the code and around its place
    here = _guards(module, stop_path) if stop_path is not None else frozenset()
    guarded = {n: g | here for n, g in _guarded_reads(tree).items()}
    under: dict[str, list[frozenset[str]]] = {}  # a name a branch above binds -> the tests of `if`s around it
    relied: dict[cst.CSTNode, set[str]] = {}  # a loop or `try` -> what the release reads below it
    for spath in walk_statements(fpath):
        stmt = spath[-1]
        if stop_path is not None and stmt is not stop and _other_arm(spath, stop_path):
            whole = statement_ast(module, stmt) if not isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) else None
            elsewhere |= (_stores(whole, header_only=True) if whole is not None else set()) | _bound_by_blocks(spath)
            continue  # an `if` arm or `case` the new code's arm excludes: what it binds is not set there
        whole = statement_ast(module, stmt) if not isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) else None
        binds = _stores(whole, header_only=True) if whole is not None else {stmt.name.value}
        skipped = _maybe_skipped(spath, stop_path) if stmt is not stop else None
        if skipped is not None and binds & later:  # what the release reads below it: for a name the code reads only
            if skipped not in relied:
                relied[skipped] = _read_after(module, fpath, skipped)
            if binds & later <= relied[skipped]:
                skipped = None
        if stmt is not stop and (_in_branch(spath, stop_path) or skipped is not None and binds & later):
            # in an `if` arm or `case` above that does not hold the new code: it may not have run; in a loop's body
            # (no turn) or a `try` whose handler goes on (it raised first), unless the release's own code reads
            # the name below that statement as well (it knows the loop turns, the `try` binds it)
            bound = binds | _bound_by_blocks(spath)
            elsewhere |= bound
            tests = _guards(module, spath)
            for n in bound:
                under.setdefault(n, []).append(tests)
            continue
        if stmt is stop:
            if include and whole is not None:
                above |= _stores(whole)
            above |= _bound_by_blocks(spath)  # `except E as e:`, a `case` pattern's captures, around it
            break
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            above.add(stmt.name.value)  # a nested def binds its name where it stands
        elsewhere |= _bound_by_blocks(spath)  # a `case` capture or `except` name above: that branch may not run
        if whole is not None:
            # what it binds on every way through it, when the new code is below it, not in it
            inside = stop_path is not None and any(n is stmt for n in stop_path)
            above |= _stores(whole, header_only=True) | (_definite(whole) if isinstance(whole, (ast.If, ast.Match,
                                                                                                ast.Try))
                                                         and not inside else set())
            if me is not None and _calls_init(whole):
                if inherited is None:
                    return  # a base class's __init__ (not in the module) ran above: it may set them
                above |= inherited
    early = sorted(n for n in later - above
                   if not any(tests and tests <= guarded.get(n, frozenset()) for tests in under.get(n, ())))
    if early:
        where = "below the new code" if stop is not None or not include else "nowhere above it"
        if set(early) <= elsewhere:
            where = ("in a branch the new code's path may not go through (an `if` or `match` arm, a `case` "
                     "pattern, a loop's body, a `try` block or its `except` handler above it, that not every way "
                     "through runs), or below it")
        them = ("it", "it is") if len(early) == 1 else ("them", "they are")
        raise ReadBeforeSet(f"the code reads {', '.join(f'`{m}`' for m in early)}, which `{function}` "
                            f"assigns only {where}: it would read {them[0]} before {them[1]} set")


def _maybe_skipped(path: NodePath, stop: NodePath | None) -> cst.CSTNode | None:
    """The loop (not `while True`), `try` or `with suppress(...)` whose block holds the statement at `path` and not
    the one at `stop`, when that block may not run on a way that goes on below it: a loop may not turn; a `try`'s
    body (or `else`) may raise first into a handler that does not always leave (`suppress` is one); a handler runs
    only when the body raised. None
    otherwise. (A path goes from a loop or `try` to a statement of its body directly, to one of its other blocks
    through that block's node.)"""
    def arm(child: cst.CSTNode) -> cst.CSTNode | None:  # None: the body
        return child if isinstance(child, (cst.Else, cst.Finally, cst.ExceptHandler, cst.ExceptStarHandler)) else None

    for i, node in enumerate(path[:-1]):
        if isinstance(node, cst.With) and any(  # `with suppress(E):` is a `try` whose handler goes on
                isinstance(item.item, cst.Call) and (getattr(item.item.func, "value", None) == "suppress" or (
                    isinstance(item.item.func, cst.Attribute) and item.item.func.attr.value == "suppress"))
                for item in node.items) and not (stop is not None and len(stop) > i and stop[i] is node):
            return node
        if not isinstance(node, (cst.For, cst.While, cst.Try, cst.TryStar)):
            continue
        mine = arm(path[i + 1])
        if stop is not None and len(stop) > i + 1 and stop[i] is node and arm(stop[i + 1]) is mine:
            continue  # the new code is in the same block
        if isinstance(node, (cst.For, cst.While)):
            if mine is None and not (isinstance(node, cst.While) and isinstance(node.test, cst.Name)
                                     and node.test.value == "True"):
                return node
        elif isinstance(mine, (cst.ExceptHandler, cst.ExceptStarHandler)):
            return node
        elif not isinstance(mine, cst.Finally) and any(not (h.body.body and _ends_flow(h.body.body[-1]))
                                                       for h in node.handlers):
            return node
    return None


def _read_after(module: cst.Module, fpath: NodePath, node: cst.CSTNode) -> set[str]:
    """The names the function at `fpath` reads in the statements after `node`, outside it."""
    from ..anchors import statement_ast, walk_statements

    out: set[str] = set()
    seen = False
    for spath in walk_statements(fpath):
        if spath[-1] is node:
            seen = True
            continue
        if not seen or any(n is node for n in spath):
            continue
        tree = statement_ast(module, spath[-1]) if not isinstance(spath[-1], (cst.FunctionDef, cst.ClassDef)) else None
        if tree is not None:
            out |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return out


def _guards(module: cst.Module, path: NodePath) -> frozenset[str]:
    """The tests (as AST dumps) of the `if`s whose first arm holds the statement at `path`: true when it runs."""
    out = set()
    for node, child in zip(path, path[1:]):
        if isinstance(node, cst.If) and child is not node.orelse:
            try:
                out.add(ast.dump(ast.parse(f"({module.code_for_node(node.test)})", mode="eval").body))
            except (SyntaxError, ValueError, RecursionError):
                pass
    return frozenset(out)


def _guarded_reads(tree: ast.AST) -> dict[str, frozenset[str]]:
    """For each name (or `a.b`) the code reads when it runs, the tests of the code's own `if`s that hold every one
    of its reads (as AST dumps)."""
    out: dict[str, frozenset[str]] = {}

    def visit(node: ast.AST, tests: frozenset[str]) -> None:
        target = _target(node) if isinstance(node, (ast.Name, ast.Attribute)) \
            and isinstance(node.ctx, ast.Load) else None
        if target is not None:
            out[target] = out[target] & tests if target in out else tests
        if isinstance(node, ast.If):
            visit(node.test, tests)
            inner = tests | {ast.dump(node.test)}
            for child in node.body:
                visit(child, inner)
            for child in node.orelse:
                visit(child, tests)
            return
        if isinstance(node, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef)):
            return  # run when called (`_run_now`); their defaults are read with `tests` all the same
        for child in ast.iter_child_nodes(node):
            visit(child, tests)

    visit(tree, frozenset())
    return out


def _other_arm(path: NodePath, other: NodePath) -> bool:
    """Whether the statement at `path` is in another arm than the one at `other` of an `if`/`elif`/`else` chain or
    a `match` they share: exclusive branches, only one of which runs."""
    for i, (a, b) in enumerate(zip(path, other)):
        if a is not b:
            parent = path[i - 1]
            if isinstance(parent, cst.If):
                return (a is parent.orelse) != (b is parent.orelse)
            return isinstance(parent, cst.Match)
    return False


def _in_branch(path: NodePath, stop: NodePath | None) -> bool:
    """Whether the statement at `path` is in an arm of an `if` or a `case` of a `match` that does not hold the
    statement at `stop` (None: the function's end): it runs on some ways through the function only. (A path goes
    from an `if` to a statement of its body directly, to one of its `else`/`elif` through that node, and from a
    `match` through the `case`.)"""
    for i, node in enumerate(path[:-1]):
        if not isinstance(node, (cst.If, cst.Match)):
            continue
        if stop is None or len(stop) <= i + 1 or stop[i] is not node:
            return True
        same = (path[i + 1] is node.orelse) == (stop[i + 1] is node.orelse) if isinstance(node, cst.If) \
            else path[i + 1] is stop[i + 1]
        if not same:
            return True
    return False


def _definite(node: ast.If | ast.Match | ast.Try) -> set[str]:
    """What an `if` (a `match`, a `try`) binds on every way through it that goes on below it: what each arm binds
    for sure, an arm that always leaves (ends in `return`, `raise`, `continue`, `break`) aside; an `if` without
    `else` binds nothing for sure; a `try`'s ways are its body (with `else`) and each handler, `finally` on all."""
    def block(stmts: list[ast.stmt]) -> set[str] | None:  # None: it never goes on below
        if stmts and isinstance(stmts[-1], (ast.Return, ast.Raise, ast.Continue, ast.Break)):
            return None
        out: set[str] = set()
        for st in stmts:
            out |= _definite(st) | _stores(st, header_only=True) if isinstance(st, (ast.If, ast.Match)) \
                else _stores(st, header_only=isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))
        return out

    if isinstance(node, ast.Try):  # the body (and `else`) on one way, each handler on another; `finally` on all
        arms = [a for a in (block(node.body + node.orelse), *(block(h.body) for h in node.handlers)) if a is not None]
        return (set.intersection(*arms) if arms else set()) | (block(node.finalbody) or set())
    if isinstance(node, ast.Match):  # a `match` whose last `case` takes anything (`case _:`) runs one arm
        last = node.cases[-1] if node.cases else None
        if last is None or last.guard is not None or not (isinstance(last.pattern, ast.MatchAs)
                                                           and last.pattern.pattern is None):
            return set()
        arms = [a for a in (block(c.body) for c in node.cases) if a is not None]
    elif not node.orelse:
        return set()
    else:
        arms = [a for a in (block(node.body), block(node.orelse)) if a is not None]
    return set.intersection(*arms) if arms else set()


def _bound_by_blocks(path: NodePath) -> set[str]:
    """The names the blocks around a statement bind where they begin, that are no statement of their own: an
    exception handler's `as` name, the captures of a `case` pattern."""
    out: set[str] = set()
    for node in path:
        if isinstance(node, (cst.ExceptHandler, cst.ExceptStarHandler)) and node.name is not None \
                and isinstance(node.name.name, cst.Name):
            out.add(node.name.name.value)
        elif isinstance(node, cst.MatchCase):
            class Captures(cst.CSTVisitor):
                def visit_MatchAs(self, n: cst.MatchAs) -> None:
                    if n.name is not None:
                        out.add(n.name.value)

                def visit_MatchStar(self, n: cst.MatchStar) -> None:
                    if n.name is not None:
                        out.add(n.name.value)

                def visit_MatchMapping(self, n: cst.MatchMapping) -> None:
                    if n.rest is not None:
                        out.add(n.rest.value)

            node.pattern.visit(Captures())
    return out


def _run_now(tree: ast.AST) -> list[ast.AST]:
    """The nodes of `tree` evaluated when it runs: a lambda's body and a nested def's body are left out (they run
    when called), their default values and decorators kept."""
    out: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, ast.Lambda):
            todo.extend(node.args.defaults + [d for d in node.args.kw_defaults if d is not None])
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            todo.extend([*node.decorator_list, *node.args.defaults, *(d for d in node.args.kw_defaults if d)])
        else:
            todo.extend(ast.iter_child_nodes(node))
    return out


def _target(node: ast.AST) -> str | None:
    """`x` for a name, `self.x` for an attribute of a name (what an assignment sets); None otherwise."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return None


_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


def _stores(node: ast.AST, *, header_only: bool = False) -> set[str]:
    """What a statement binds (names, `a.b`), nested functions' and classes' bodies (but their names) and
    comprehensions' own variables left out; with `header_only`, a compound statement's header only (a `for` target,
    a `with ... as`, a walrus in a test; a def's name). A def given itself is read whole (what its body binds)."""
    out: set[str] = set()

    def visit(n: ast.AST, top: bool) -> None:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and (not top or header_only):
            out.add(n.name)  # a def binds its name where it stands
            return
        if isinstance(n, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            # its loop variables are its own scope's, not the function's; a walrus in it binds in the function
            out.update(w.target.id for w in ast.walk(n) if isinstance(w, ast.NamedExpr))
            return
        if isinstance(n, ast.Lambda):
            return
        if isinstance(n, (ast.Name, ast.Attribute)) and not isinstance(n.ctx, ast.Load):
            t = _target(n)
            if t:
                out.add(t)
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in n.names)
        if isinstance(n, ast.ExceptHandler) and n.name:
            out.add(n.name)
        if isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name:  # a `case` pattern's captures
            out.add(n.name)
        if isinstance(n, ast.MatchMapping) and n.rest:
            out.add(n.rest)
        for field, value in ast.iter_fields(n):
            if header_only and n is node and field in _BLOCKS:
                continue
            for child in (value if isinstance(value, list) else [value]):
                if isinstance(child, ast.AST):
                    visit(child, False)

    visit(node, True)
    return out


def _set_by_bases(module: cst.Module, fpath: NodePath, me: str) -> set[str] | None:
    """`me.x` for what the `__init__` of the class's bases (and theirs) set on their instance, when the module
    defines every one of them; None when a base is not the module's (it may set anything), or the class has none."""
    from ..anchors import statement_ast

    classes = {n.name.value: n for n in module.body if isinstance(n, cst.ClassDef)}
    cls = next((n for n in reversed(fpath[:-1]) if isinstance(n, cst.ClassDef)), None)
    if cls is None or not cls.bases:
        return None
    out: set[str] = set()
    todo, seen = [cls], set()
    while todo:
        here = todo.pop()
        for b in here.bases:
            name = module.code_for_node(b.value).strip()
            if b.keyword is not None or name == "object":
                continue
            if name not in classes:
                return None
            if name in seen:
                continue
            seen.add(name)
            tree = statement_ast(module, classes[name])
            init = next((f for f in getattr(tree, "body", []) if isinstance(f, ast.FunctionDef)
                         and f.name == "__init__" and f.args.args), None)
            if init is not None:
                own = init.args.args[0].arg
                out |= {f"{me}.{n.attr}" for n in ast.walk(init) if isinstance(n, ast.Attribute)
                        and isinstance(n.ctx, ast.Store) and isinstance(n.value, ast.Name) and n.value.id == own}
            todo.append(classes[name])
    return out


def _calls_init(node: ast.AST) -> bool:
    """Whether a statement calls a base class's `__init__` (`super().__init__(...)`, `Base.__init__(self, ...)`)."""
    return any(isinstance(n, ast.Attribute) and n.attr == "__init__" for n in ast.walk(node))


def _ends_flow(stmt: cst.CSTNode) -> bool:
    """A `return`, `raise`, `continue` or `break` line: nothing after it in its block runs."""
    return isinstance(stmt, cst.SimpleStatementLine) and any(
        isinstance(small, (cst.Return, cst.Raise, cst.Continue, cst.Break)) for small in stmt.body)
