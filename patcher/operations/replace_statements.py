"""`replace_statements`: replace one statement, or a run of consecutive statements, found by its code.

Example (sglang 0.5.9, `DecodePreallocQueue.pop_preallocated`: replace a `pass` placeholder by a timeout check)::

    - op: replace_statements
      file: srt/disaggregation/decode.py
      within: DecodePreallocQueue._update_handshake_waiters   # optional: a class or function, dotted
      match: |
        if poll == KVPoll.Bootstrapping:
            pass
        elif poll == KVPoll.WaitingForInput:
            ...
      code: |
        if poll == KVPoll.Bootstrapping:
            self._check_bootstrap_timeout(decode_req)
        elif poll == KVPoll.WaitingForInput:
            ...

`match` is the source of one or more statements, simple or compound (a whole `if`/`for`/`with`/`try`, its blocks
included). It matches a run of consecutive statements of one block, at any depth under `within` (the module when
`within` is not given; nested functions and classes included), whose code is the same up to formatting and comments
(compared as ASTs, statement by statement). It must match exactly one run. `code` replaces the run, with the run's
indentation; it may be empty (the run is deleted), or wrap the match (`with ctx:` + the matched statements, indented).
*By its header*: when `match` and `code` are each one compound statement whose block is only `...` (a `with`, `for`,
`while`, `if` without `else`, `def` or `class`), `match` matches the one statement of that kind whose header (its
items, test, target, signature, decorators) is the same code, whatever its blocks hold (`else` and `elif` arms
included), and `code`'s header replaces that header, the blocks kept as the release has them: a change to a `with`'s items survives upstream editing its body.
The comment lines above the first matched statement stay above the replacement; comment lines at the top of `code`
go below them. Blank lines at the top of `code` are kept. When `match` and `code` are the same code and differ only
in comments or layout, the runs are told apart by their text (without the comment lines above the run). There are no
other wildcards: a recipe that needs one uses `insert_statements` or `replace_expression`.

`inside` (what `specpatch import` writes when the replaced statements are there more than once in the function but
once in their block) names that block by its header, as `insert_statements`'s `inside` does (an `if`/`elif` arm, matched
in either form, a `with`, `for` or `while`, unique under `within`; `inside_else: true` for the `else:` right after the
arm); `match` is then looked for among that block's own statements only::

    - op: replace_statements
      within: SchedulerDisaggregationPrefillMixin.process_disagg_prefill_inflight_queue
      inside: "if poll in [KVPoll.WaitingForInput, KVPoll.Transferring]:"
      match: undone_reqs.append(req)
      code: ...

Answers: *changed*; *already applied* (no run matches `match` outside the code that replaced it, and `code` is
there, and no run is `match` with one or two literal values changed, which would be the match as upstream edited it
or as a typo in `match` reads it: then *cannot apply*, naming it; with an empty `code`: no run matches `match`, and no statement of the same kind with the same target or
callee and three quarters of its code is there, which would be the removed statement as upstream edited it: then
*cannot apply*, naming it); *cannot apply* (the `inside` header is missing or ambiguous,
naming it; nothing matches `match` nor `code`, with the
statements that look most alike as candidates; several runs match; the replacement would empty a block; or a
conflict: a statement that `code` adds, and `match` does not have, is already in `within`, so the release probably
has the change in another form and applying it would duplicate it: `if_present_elsewhere: apply` allows it;
or a function or class that `code` adds, and `match` does not define, is already defined in the same block with other
code: a second definition would silently replace the release's, whatever `if_present_elsewhere` says; with the same
code, up to comments, it is left as the patch had it; likewise a name `code` assigns at module or class level (a
dataclass field) that `match` does not, which the block already assigns with other code).
"""

from __future__ import annotations

import ast
import difflib
import textwrap
from dataclasses import dataclass
from typing import Literal, Sequence

import libcst as cst

from ..anchors import NodePath, body_of, fit, indent_of, near, set_block_body
from ..errors import AnchorAmbiguous, AnchorNotFound, Candidate, Conflict, RecipeError
from ..model import option
from ._code import (WITHIN, INSIDE_ELSE, blocks_under, check_inside, contains, dotted_owner, fingerprint, first_line,
                    header_text, inside_block, inside_words, line_text, literal_edit, on_a_shared_line, parse_block,
                    scope_path)
from .base import AlreadyApplied, Changed, Operation, Outcome, attempt, register

#: statements too common to say anything about where they are (`return`, `pass`, ...): never a conflict
_COMMON = (cst.Pass, cst.Return, cst.Break, cst.Continue, cst.Expr)


@register
@dataclass(frozen=True, kw_only=True)
class ReplaceStatements(Operation):
    """Replace the one run of statements whose code equals `match` by `code` (empty: delete it)."""

    op: Literal["replace_statements"]
    match: str = option(description="the statements to replace: one statement or a run, compared as code")
    code: str = option(default="", description="the replacement statements; empty deletes the match")
    within: str | None = option(default=None, description=WITHIN)
    if_present_elsewhere: Literal["refuse", "apply"] = option(
        default="refuse", description="when a statement that `code` adds is already in `within`: refuse | apply")
    inside: str | None = option(
        default=None, description="the header of the block whose own statements `match` is, e.g. "
        "`if poll in [KVPoll.WaitingForInput, KVPoll.Transferring]:` (an `if` or `elif` arm, a `with`, `for` or "
        "`while`; one in `within`)")
    inside_else: bool = option(default=False, description=INSIDE_ELSE)
    #: another step of the recipe writes calls of the def this step's header changes (set by `among`)
    callers_changed: bool = option(default=False, exclude=True)

    def __post_init__(self) -> None:
        if not self.match.strip():
            raise ValueError("`match` is empty: it must hold the statements to replace")
        check_inside(self.inside, self.inside_else)

    def among(self, steps) -> "ReplaceStatements":
        import re
        from dataclasses import replace

        head = re.match(r"\s*(?:async\s+)?def\s+(\w+)", self.match or "")
        if head is None:
            return self
        called = f"{head.group(1)}("
        touched = any(s is not self and (called in (getattr(s, "code", None) or "")
                                         or s.op == "add_keyword_argument" and called in s.call) for s in steps)
        return replace(self, callers_changed=True) if touched else self

    def describe(self) -> str:
        what = "delete" if not self.code.strip() else "replace"
        where = f" in `{self.within}`" if self.within else ""
        block = f" {inside_words(self.inside, self.inside_else)}" if self.inside else ""
        return f"{what} `{line_text(self.match)}`{where}{block}"

    def anchor(self) -> str:
        block = f", {inside_words(self.inside, self.inside_else)}" if self.inside else ""
        return f"{self.within or 'the module'}{block}: `{line_text(self.match)}`"

    def _blocks(self, module: cst.Module, scope: NodePath) -> list[tuple[NodePath, Sequence[cst.CSTNode]]]:
        """The blocks `match` is looked for in: every block under `within` (at any depth), or with `inside` the one
        block whose header it is (its own statements)."""
        if self.inside is None:
            return list(blocks_under(scope))
        where = f"`{self.within}`" if self.within else "the module"
        block = inside_block(module, scope, self.inside, else_arm=self.inside_else, where=where)
        return [(block, body_of(block[-1]))]

    def homes(self, module: cst.Module, of: Literal["match", "code"]) -> list[str]:
        """The header (`header_text`; "" for `within`'s own body or an `else:`) of the block holding each run of
        `match` or of `code` under `within` (`port` asks where a replacement upstream seems to have stands, beside
        where `match` stood in the base release); [] when there is none or the step cannot be read there."""
        from ..errors import SpecpatchError

        try:
            stmts = parse_block(self.match if of == "match" else self.code, module)
            keys = [fingerprint(module, s) for s in stmts]
            if not stmts or None in keys:
                return []
            scope = scope_path(module, self.within)
            return ["" if owner[-1] is scope[-1] else header_text(owner[-1])
                    for owner, _ in _runs(module, self._blocks(module, scope), stmts, keys)]
        except SpecpatchError:
            return []

    def headers(self, module: cst.Module) -> set[str]:
        """The headers of the blocks under `within` (`header_text`)."""
        from ..errors import SpecpatchError

        try:
            scope = scope_path(module, self.within)
        except SpecpatchError:
            return set()
        return {header_text(owner[-1]) for owner, _ in blocks_under(scope) if owner[-1] is not scope[-1]} - {""}

    def _where(self) -> str:
        where = f"`{self.within}`" if self.within else "the module"
        return f"{where} {inside_words(self.inside, self.inside_else)}" if self.inside else where

    @attempt
    def apply(self, module: cst.Module) -> Outcome:
        old = parse_block(self.match, module, what="match")
        new = parse_block(self.code, module)
        if not old:
            raise RecipeError("`match` holds no statement")
        scope = scope_path(module, self.within)
        blocks = self._blocks(module, scope)
        if _header_only(old) and _header_only(new) and type(old[0]) is type(new[0]):
            return self._replace_header(module, scope, blocks, old[0], new[0])
        old_keys = [fingerprint(module, s) for s in old]
        new_keys = [fingerprint(module, s) for s in new]
        if None in old_keys or None in new_keys:
            raise RecipeError("`match` and `code` must be complete statements that Python can parse")
        runs = _runs(module, blocks, old, old_keys)
        placed = _runs(module, blocks, new, new_keys) if new else []
        if old_keys == new_keys:
            # a change of comments or layout only: the code is the same, so the text tells the runs apart, and the
            # run to change must have the text of `match` (one whose comments upstream reworded in its own way
            # would get the base release's wording back: "applied" over upstream's newer comment)
            text, was = _text(cst.Module(body=new), new), _text(cst.Module(body=old), old)
            placed = [r for r in placed if _text(module, r[1]) == text]
            reworded = [r for r in runs if _text(module, r[1]) not in (text, was)]
            runs = [r for r in runs if _text(module, r[1]) == was]
            if not runs and not placed and reworded:
                raise AnchorNotFound(f"the statements `{line_text(self.match)}` are in {self._where()}, but their "
                                     f"comments or layout are not those of `match` (upstream reworded them): this "
                                     f"step changes only those",
                                     candidates=[Candidate(f"`{first_line(module, r[1][0])}`", node=r[1][0])
                                                 for r in reworded])
        # a match inside the replacement is ours (the code wraps the match or keeps it): not an anchor
        anchors = [r for r in runs if not any(_inside(r, p) for p in placed)]
        if not anchors:
            wrapped = [p for p in placed if any(_inside(r, p) for r in runs)]
            if wrapped:  # the code wraps the match, which is there inside it, as written: applied (the match's
                return AlreadyApplied(wrapped[0][1][0])  # siblings with other literals are other statements)
            if new and placed:
                # a code that is the match with other values (`= 16384` -> `= 32768`) stands where the match stood:
                # its siblings in other blocks (the other GPU tiers' values) are no evidence against it
                edited = [] if literal_edit(self.code, self.match, statements=True) else \
                    _edited_runs(module, blocks, old, placed)
                if edited:
                    # `pass` of an unrelated `except:` is no evidence that a reworded warning was replaced
                    raise AnchorNotFound(
                        f"no statements matching `{line_text(self.match)}` in {self._where()}; `code` is there, but "
                        f"so is `match` with other literal values (upstream edited it, or `match` has a typo): not "
                        f"taken as already applied",
                        candidates=edited)
                return AlreadyApplied(placed[0][1][0])
            if not new:
                edited = _edited_upstream(module, blocks, old[0], receivers=True)
                if edited:
                    raise AnchorNotFound(
                        f"no statements matching `{line_text(self.match)}` in {self._where()}, which the step "
                        f"removes; {'a statement' if len(edited) == 1 else 'statements'} of the same kind binding "
                        f"the same name or calling the same function {'is' if len(edited) == 1 else 'are'} there: "
                        f"upstream may have edited it rather than removed it (not taken as already applied)",
                        candidates=edited)
                if self.within:
                    # upstream may have moved them into a helper the function calls: still run, not removed
                    mine = {id(owner[-1]) for owner, _ in blocks_under(scope)}  # the function's own: moved in it
                    elsewhere = _runs(module, [(o, b) for o, b in blocks_under((module,)) if id(o[-1]) not in mine],
                                      old, old_keys)
                    if elsewhere:
                        where = dotted_owner(elsewhere[0][0])
                        raise AnchorNotFound(
                            f"no statements matching `{line_text(self.match)}` in {self._where()}, which the step "
                            f"removes; the module has them in {where} (upstream moved them there?): not taken as "
                            f"already applied",
                            candidates=[Candidate(f"`{first_line(module, r[1][0])}`", node=r[1][0])
                                        for r in elsewhere])
                return AlreadyApplied(None)
            mine = {id(owner[-1]) for owner, _ in blocks_under(scope)}
            moved = _runs(module, [(o, b) for o, b in blocks_under((module,)) if id(o[-1]) not in mine], old, old_keys)
            raise AnchorNotFound(f"no statements matching `{line_text(self.match)}` in {self._where()}"
                                 + on_a_shared_line(module, scope, self.match),
                                 candidates=[*_near(module, blocks, old[0]), *(
                                     Candidate(f"`{first_line(module, r[1][0])}` in {dotted_owner(r[0])}",
                                               node=r[1][0]) for r in moved[:3])])
        if len(anchors) > 1:
            raise AnchorAmbiguous(f"{len(anchors)} runs of statements match `{line_text(self.match)}` in "
                                  f"{self._where()}",
                                  candidates=[Candidate(f"`{first_line(module, r[1][0])}`", node=r[1][0])
                                              for r in anchors])
        owner, run = anchors[0]
        if self.if_present_elsewhere == "refuse":
            self._refuse_duplicates(module, scope, old_keys, new, new_keys)
        return self._replace(module, owner, run, new)

    def _replace_header(self, module: cst.Module, scope: NodePath, blocks: list, old: cst.CSTNode,
                        new: cst.CSTNode) -> Outcome:
        """`match` and `code` are headers (a block of `...`): replace the header of the one statement that has
        `match`'s, keeping its block."""
        want, have = header_key(cst.Module(body=[]), old), header_key(cst.Module(body=[]), new)
        if want is None or have is None:
            raise RecipeError("`match` and `code` must be complete statements that Python can parse")
        if want == have:
            raise RecipeError("`match` and `code` are the same header: there is nothing to replace")
        anchors, placed = [], []
        for owner, statements in blocks:
            for stmt in statements:
                if type(stmt) is type(old):
                    key = header_key(module, stmt)
                    if key == want:
                        anchors.append((owner, stmt))
                    elif key == have:
                        placed.append(stmt)
        if not anchors:
            if placed:
                return AlreadyApplied(placed[0])
            raise AnchorNotFound(f"no statement whose header is `{line_text(self.match)}` in {self._where()}",
                                 candidates=_near(module, blocks, old))
        if len(anchors) > 1:
            raise AnchorAmbiguous(f"{len(anchors)} statements have the header `{line_text(self.match)}`",
                                  candidates=[Candidate(f"`{first_line(module, s)}`", node=s) for _, s in anchors])
        owner, stmt = anchors[0]
        if isinstance(new, (cst.FunctionDef, cst.ClassDef)) and new.name.value != getattr(stmt, "name", new.name).value:
            # a rename onto a name the block already defines: the later definition would silently win
            other = next((t for t in _body(owner) if t is not stmt and isinstance(t, (cst.FunctionDef, cst.ClassDef))
                          and t.name.value == new.name.value), None)
            if other is not None:
                raise Conflict(f"the block already defines `{new.name.value}`: renamed, `{first_line(module, stmt)}` "
                               f"would define it a second time (upstream added its own?)",
                               candidates=[Candidate(f"`{first_line(module, other)}`", node=other)])
        if not isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            _refuse_reading_before_set(module, owner, stmt, self.code, self.match)
        if isinstance(stmt, cst.FunctionDef) and isinstance(new, cst.FunctionDef) and not self.callers_changed:
            _refuse_unfilled_calls(module, (*owner, stmt), stmt.params, new.params)
        lead = tuple(getattr(stmt, "leading_lines", ()))
        # the header is fitted to the statement's indentation alone: the release's blocks are already there (a
        # docstring in them re-fitted would move right)
        header = fit([new.with_changes(leading_lines=(*lead, *new.leading_lines))], indent_of((*owner, stmt)),
                     module)[0]
        changes = {"body": stmt.body}
        if hasattr(stmt, "orelse"):
            changes["orelse"] = stmt.orelse  # the `else`/`elif` arms are the block's, kept as they are
        replaced = header.with_changes(**changes)
        statements = list(_body(owner))
        i = next(j for j, s in enumerate(statements) if s is stmt)
        statements[i] = replaced
        if isinstance(owner[-1], cst.Module):
            from ..anchors import replace_at

            changed = replace_at(owner, owner[-1].with_changes(body=tuple(statements))) if len(owner) > 1 \
                else owner[-1].with_changes(body=tuple(statements))
        else:
            changed = set_block_body(owner, statements, placed=(replaced,))
        return Changed(changed, inserted=(replaced,), anchor=stmt)

    def _refuse_duplicates(self, module: cst.Module, scope: NodePath, old_keys: list, new: list,
                           new_keys: list) -> None:
        keys = {k for s, k in zip(new, new_keys) if k not in old_keys and not _common(s)}
        refuse_present(module, scope, keys, f"`{self.within}`" if self.within else "the module")

    def _replace(self, module: cst.Module, owner: NodePath, run: Sequence[cst.CSTNode],
                 new: list[cst.BaseStatement]) -> Outcome:
        statements = list(_body(owner))
        i = next(j for j, s in enumerate(statements) if s is run[0])
        # a function or class the code adds that the block already defines beside the run, with other code: a
        # second definition would silently replace the release's (upstream added it in its own form)
        # (a property's getter, setter and deleter share a name: told apart by their `@x.setter` decorator)
        defined = {_def_key(module, s) for s in run if isinstance(s, (cst.FunctionDef, cst.ClassDef))}
        rest = {_def_key(module, s): s for s in [*statements[:i], *statements[i + len(run):]]
                if isinstance(s, (cst.FunctionDef, cst.ClassDef))}
        twice = [(d, rest[_def_key(module, d)]) for d in new if isinstance(d, (cst.FunctionDef, cst.ClassDef))
                 and _def_key(module, d) not in defined and _def_key(module, d) in rest
                 and fingerprint(module, d) != fingerprint(module, rest[_def_key(module, d)])]  # same code: harmless
        if twice:
            names = ", ".join(f"`{d.name.value}`" for d, _ in twice)
            raise Conflict(f"the block already defines {names}: the replacement would define "
                           f"{'it' if len(twice) == 1 else 'them'} a second time",
                           candidates=[Candidate(f"`{first_line(module, there)}`", node=there) for _, there in twice])
        if isinstance(owner[-1], (cst.Module, cst.ClassDef)) or \
                (len(owner) > 1 and isinstance(owner[-2], cst.ClassDef)):
            # likewise a field or a module/class attribute the code binds that the block binds beside the run with
            # other code: a dataclass would get the field twice (the later one wins, in the earlier one's place)
            bound = {n for st in run for n in _assigned(st)}
            others = {n: st for st in [*statements[:i], *statements[i + len(run):]] for n in _assigned(st)}
            again = [(n, others[n]) for st in new for n in _assigned(st) if n not in bound and n in others
                     and fingerprint(module, st) != fingerprint(module, others[n])]
            if again:
                names = ", ".join(f"`{n}`" for n, _ in again)
                raise Conflict(f"the block already binds {names} (upstream added it in its own form?): the "
                               f"replacement would bind {'it' if len(again) == 1 else 'them'} a second time",
                               candidates=[Candidate(f"`{first_line(module, st)}`", node=st) for _, st in again])
        if isinstance(owner[-1], cst.Module):
            # an import the code adds of a name the module defines (a def, a class, an assignment) beside the run:
            # one of the two would silently rebind the other (upstream added a function of that name)
            from .add_definition import defined_names

            kept = {n for st in run for n in (*defined_names(st), *_imported(st))}
            defs = {n: st for st in [*statements[:i], *statements[i + len(run):]] for n in defined_names(st)}
            clash = [(n, defs[n]) for st in new for n in _imported(st) if n not in kept and n in defs]
            if clash:
                names = ", ".join(f"`{n}`" for n, _ in clash)
                raise Conflict(f"the module already defines {names}: the import the replacement adds would be "
                               f"rebound by it (upstream added its own?)",
                               candidates=[Candidate(f"`{first_line(module, st)}`", node=st) for _, st in clash])
        _refuse_reading_before_set(module, owner, run[0], self.code, self.match)
        lead = tuple(getattr(run[0], "leading_lines", ()))
        if new:
            new = [new[0].with_changes(leading_lines=(*lead, *new[0].leading_lines)), *new[1:]]
        body = [*statements[:i], *new, *statements[i + len(run):]]
        if not body and not isinstance(owner[-1], cst.Module):
            raise Conflict("the replacement would leave an empty block",
                           candidates=[Candidate(f"`{first_line(module, run[0])}`", node=run[0])])
        if isinstance(owner[-1], cst.Module):
            from ..anchors import replace_at

            changed = replace_at(owner, owner[-1].with_changes(body=tuple(body))) if len(owner) > 1 \
                else owner[-1].with_changes(body=tuple(body))
        else:
            changed = set_block_body(owner, body)
        return Changed(changed, inserted=tuple(new), anchor=run[0])


_HEADED = (cst.With, cst.For, cst.While, cst.If, cst.FunctionDef, cst.ClassDef)


def _assigned(stmt: cst.CSTNode) -> list[str]:
    """The plain names a simple statement line assigns (`x = ...`, `x: T = ...`, `x: T`)."""
    if not isinstance(stmt, cst.SimpleStatementLine):
        return []
    out = []
    for small in stmt.body:
        if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
            out.append(small.target.value)
        elif isinstance(small, cst.Assign):
            out += [t.target.value for t in small.targets if isinstance(t.target, cst.Name)]
    return out


def _imported(stmt: cst.CSTNode) -> list[str]:
    """The names an import line binds (`import a.b` binds `a`; `from m import x as y` binds `y`)."""
    if not isinstance(stmt, cst.SimpleStatementLine):
        return []
    out: list[str] = []
    for small in stmt.body:
        if isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(small.names, cst.ImportStar):
            for alias in small.names:
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    out.append(alias.asname.name.value)
                else:
                    node = alias.name
                    while isinstance(node, cst.Attribute):
                        node = node.value
                    if isinstance(node, cst.Name):
                        out.append(node.value)
    return out


def _refuse_reading_before_set(module: cst.Module, owner: NodePath, first: cst.CSTNode, code: str,
                               match: str) -> None:
    """In a function, the code must not read a local the function binds only below the replaced statements, or only
    in a branch above them that the way to them may not go through (as `insert_statements` refuses): what the
    replaced statements read already is the release's own reading there. (`self.x` is the engine's
    `_init_reads_early`.)"""
    at = max((i for i, n in enumerate(owner) if isinstance(n, (cst.FunctionDef, cst.ClassDef))), default=None)
    if at is None or not isinstance(owner[at], cst.FunctionDef):
        return
    from .insert_statements import _target, refuse_reading_before_set

    try:
        read = frozenset(_target(n) for n in ast.walk(ast.parse(textwrap.dedent(match).strip()))
                         if isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, ast.Load)) - {None}
        # `self.x` read in `__init__` above its assignment is the engine's rule, which names the line
        read |= {f"{n.value.id}.{n.attr}" for n in ast.walk(ast.parse(textwrap.dedent(code).strip()))
                 if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}
    except (SyntaxError, ValueError, RecursionError):
        return
    refuse_reading_before_set(module, owner[:at + 1], first, code, dotted_owner(owner[:at + 1]).strip("`"),
                              include=False, read_there=read)


def _header_only(stmts: Sequence[cst.CSTNode]) -> bool:
    """One compound statement whose only block is `...` (a header, as `match` or `code` writes it)."""
    if len(stmts) != 1 or not isinstance(stmts[0], _HEADED) or getattr(stmts[0], "orelse", None) is not None:
        return False
    body = stmts[0].body
    if not isinstance(body, cst.IndentedBlock) or len(body.body) != 1:
        return False
    line = body.body[0]
    return isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1 and isinstance(line.body[0], cst.Expr) \
        and isinstance(line.body[0].value, cst.Ellipsis)


_DOTS = cst.IndentedBlock(body=[cst.SimpleStatementLine(body=[cst.Expr(cst.Ellipsis())])])


def header_key(module: cst.Module, stmt: cst.CSTNode) -> str | None:
    """A compound statement's header up to formatting and comments (its block and any `else` left out)."""
    from ..anchors import normalized

    changes = {"body": _DOTS, "leading_lines": ()}
    if getattr(stmt, "orelse", None) is not None:
        changes["orelse"] = None
    if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
        changes["lines_after_decorators"] = ()
    return normalized(module.code_for_node(stmt.with_changes(**changes)))


def _body(owner: NodePath) -> Sequence[cst.CSTNode]:
    from ..anchors import body_of

    return body_of(owner[-1])


def _runs(module: cst.Module, blocks: Sequence, stmts: list, keys: list) -> list[tuple[NodePath, tuple]]:
    """(owner path, statements) of every run of consecutive statements of `blocks` ((owner path, statements)
    pairs) whose fingerprints are `keys`."""
    want = type(stmts[0])
    out = []
    k = len(keys)
    for owner, statements in blocks:
        statements = list(statements)
        for i in range(len(statements) - k + 1):
            if type(statements[i]) is not want:  # cheap filter before rendering and parsing
                continue
            if all(fingerprint(module, statements[i + j]) == keys[j] for j in range(k)):
                out.append((owner, tuple(statements[i:i + k])))
    return out


def _text(module: cst.Module, stmts: Sequence[cst.CSTNode]) -> str:
    """Statements as text at column 0, without the comment lines above the first one (kept by a replacement)."""
    import textwrap

    first = stmts[0].with_changes(leading_lines=()) if hasattr(stmts[0], "leading_lines") else stmts[0]
    code = "".join(module.code_for_node(s) for s in (first, *stmts[1:]))
    return textwrap.dedent(code.replace("\r\n", "\n")).strip("\n")


def _edited_runs(module: cst.Module, blocks: Sequence, old: list, placed: list) -> list[Candidate]:
    """The runs of statements that are `old` with one or two literal values changed (`literal_edit`), away from the
    code's runs `placed` (not in their block, nor in another arm of the `if`, `try` or `match` that holds them): the
    match as upstream edited it, or as a typo in `match` reads it, while `code` stands somewhere else. Beside the
    code, such a run is a sibling the step left alone (`logger.warning("B")` next to where `logger.warning("A")`
    became `pass`; the `x = 2` of the `else:` whose `if` arm had `x = 1`)."""
    match = cst.Module(body=old).code
    near = {id(_arm_root(owner)) for owner, _ in placed}
    out = []
    for owner, statements in blocks:
        if id(_arm_root(owner)) in near:
            continue
        statements = list(statements)
        for i in range(len(statements) - len(old) + 1):
            run = (owner, tuple(statements[i:i + len(old)]))
            if type(run[1][0]) is not type(old[0]) or any(_inside(run, p) for p in placed):
                continue
            text = "\n".join(textwrap.dedent(module.code_for_node(st)) for st in run[1])
            # a typo or a rewording reads almost as the match does; another statement of the same shape (another
            # warning, another tier's value) does not
            if literal_edit(text, match, statements=True) and difflib.SequenceMatcher(
                    None, " ".join(text.split()), " ".join(match.split())).ratio() >= 0.9:
                out.append(Candidate(f"`{first_line(module, run[1][0])}`", node=run[1][0]))
    return out


_ARMS = (cst.If, cst.Else, cst.Try, cst.TryStar, cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally, cst.Match,
         cst.MatchCase)


def _arm_root(owner: NodePath) -> cst.CSTNode:
    """The statement whose arms a block is one of (the `if` of an `elif:` or `else:` arm, the `try` of a handler,
    the `match` of a `case`), else the block's own owner."""
    k = len(owner) - 1
    while k > 0 and isinstance(owner[k], _ARMS) and isinstance(owner[k - 1], _ARMS) and _arm_of(owner[k - 1], owner[k]):
        k -= 1
    return owner[k]


def _arm_of(parent: cst.CSTNode, child: cst.CSTNode) -> bool:
    if isinstance(parent, cst.If):
        return parent.orelse is child
    if isinstance(parent, (cst.Try, cst.TryStar)):
        return child in parent.handlers or child is parent.orelse or child is parent.finalbody
    return isinstance(parent, cst.Match) and child in parent.cases


def _inside(run: tuple[NodePath, tuple], placed: tuple[NodePath, tuple]) -> bool:
    """Is the run `run` part of (or nested in) the statements of `placed`?"""
    return any(contains(p, run[1][0]) for p in placed[1])


def refuse_present(module: cst.Module, scope: NodePath, keys: set, where: str) -> None:
    """A Conflict when a statement under `scope` has one of the fingerprints `keys` (statements a step adds): the
    release may have the change in another form. Shared by replace_statements and insert_statements."""
    if not keys:
        return
    for owner, statements in blocks_under(scope):
        # an import in a def or class below the scope binds its name there only: the scope does not have it
        nested = any(isinstance(n, (cst.FunctionDef, cst.ClassDef)) for n in owner[len(scope):])
        for stmt in statements:
            if nested and _is_import(stmt):
                continue
            if fingerprint(module, stmt) in keys:
                raise Conflict(f"{where} already has `{first_line(module, stmt)}`, which this step adds: the "
                               "release may have the change in another form",
                               hint="compare with the release; `if_present_elsewhere: apply` adds it anyway",
                               candidates=[Candidate(f"`{first_line(module, stmt)}`", node=stmt)])


def _is_import(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(isinstance(s, (cst.Import, cst.ImportFrom))
                                                             for s in stmt.body)


def _common(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(isinstance(s, _COMMON) for s in stmt.body) \
        and not any(isinstance(s, cst.Expr) and isinstance(s.value, cst.Call) for s in stmt.body)


def _edited_upstream(module: cst.Module, blocks: Sequence, first: cst.CSTNode, *,
                     receivers: bool = False) -> list[Candidate]:
    """Statements of the blocks that look like an edited `first` (a statement a step removes and that is not there):
    the same kind of simple statement with the same target or callee (`x = ...`, `self.x: T = ...`, `f(...)`), or
    the same compound header keyword and target, whose code is three quarters alike. A removal whose statement
    upstream merely edited is not done: the edited statement is still there. With `receivers`, also the same
    method called, with alike arguments, on a receiver rooted at the same module the file imports and reached another
    way (named, now computed: `torch.cuda.synchronize()` as `torch.get_device_module(dev).synchronize()`; not
    `self.a.zero_()` as `self.b.zero_()`, nor `envs.A.set(True)` as `envs.B.set(True)`: two objects)."""
    import difflib

    def head(stmt: cst.CSTNode, mod: cst.Module) -> tuple | None:
        if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
            small = stmt.body[0]
            if isinstance(small, cst.Assign):
                return ("=", tuple(mod.code_for_node(t.target).strip() for t in small.targets))
            if isinstance(small, (cst.AnnAssign, cst.AugAssign)):
                return (type(small).__name__, mod.code_for_node(small.target).strip())
            if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                return ("call", mod.code_for_node(small.value.func).strip())
        return None

    alone = cst.Module(body=[first]) if isinstance(first, cst.BaseStatement) else None
    want = head(first, alone) if alone is not None else None
    if want is None:
        return []
    text = " ".join(alone.code.split())
    out = []
    for _, statements in blocks:
        for stmt in statements:
            if head(stmt, module) == want:
                other = " ".join(module.code_for_node(stmt).split())
                if difflib.SequenceMatcher(None, text, other).ratio() >= 0.75:
                    out.append(Candidate(f"`{first_line(module, stmt)}`", node=stmt))
    if not out and receivers and want[0] == "call":
        # the same method called on another receiver of the same root (`torch.cuda.synchronize()` made
        # `torch.get_device_module(self.device).synchronize()`), with its arguments alike
        def mod_root(name: cst.BaseExpression) -> str:
            while isinstance(name, cst.Attribute):
                name = name.value
            return name.value if isinstance(name, cst.Name) else ""

        def tail(stmt: cst.CSTNode, mod: cst.Module) -> tuple[str, str, str, bool] | None:
            if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
                    and isinstance(stmt.body[0], cst.Expr) and isinstance(stmt.body[0].value, cst.Call)
                    and isinstance(stmt.body[0].value.func, cst.Attribute)):
                return None
            call = stmt.body[0].value
            root = call.func
            while isinstance(root, (cst.Attribute, cst.Call, cst.Subscript)):
                root = root.value if not isinstance(root, cst.Call) else root.func
            args = " ".join(" ".join(mod.code_for_node(a).split()) for a in call.args)
            # the last part: whether the object is named (`torch.cuda`, `envs.X`), not computed
            return (call.func.attr.value, root.value if isinstance(root, cst.Name) else "", args,
                    bool(mod_root(call.func.value)))

        imported = {(a.asname.name.value if a.asname else mod_root(a.name)) for node in module.body
                    if isinstance(node, cst.SimpleStatementLine) for small in node.body
                    if isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(small.names, cst.ImportStar)
                    for a in small.names}
        mine = tail(first, alone)
        for _, statements in blocks if mine is not None and mine[1] in imported else ():
            for stmt in statements:
                theirs = tail(stmt, module)
                # the way to the object changed (named, now computed, or the other way round): two objects both
                # named (`envs.A.set(True)`, `envs.B.set(True)`) or both computed are two objects
                if theirs is not None and theirs[:2] == mine[:2] and theirs[3] != mine[3] and (
                        theirs[2] == mine[2] or difflib.SequenceMatcher(None, mine[2], theirs[2]).ratio() >= 0.75):
                    out.append(Candidate(f"`{first_line(module, stmt)}`", node=stmt))
    return out


def _near(module: cst.Module, blocks: Sequence, first: cst.CSTNode) -> list[Candidate]:
    def head(mod: cst.Module, stmt: cst.CSTNode) -> str:
        # a def or class by its own line, not its first decorator's (upstream decorated it)
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) and stmt.decorators:
            stmt = stmt.with_changes(decorators=(), leading_lines=())
        return first_line(mod, stmt)

    want = head(cst.Module(body=[first]), first) if isinstance(first, cst.BaseStatement) else ""
    by_text: dict[str, cst.CSTNode] = {}
    for _, statements in blocks:
        for stmt in statements:
            by_text.setdefault(head(module, stmt), stmt)
    return [Candidate(f"`{t}`", node=by_text[t]) for t in near(want, list(by_text))]


def _def_key(module: cst.Module, node: cst.FunctionDef | cst.ClassDef) -> tuple[str, str]:
    """A definition's name, with the accessor a decorator `@<name>.setter`/`.deleter`/`.getter` makes it."""
    name = node.name.value
    for d in node.decorators:
        text = module.code_for_node(d.decorator).strip()
        if text in (f"{name}.setter", f"{name}.deleter", f"{name}.getter"):
            return name, text.rsplit(".", 1)[1]
    return name, ""


def _refuse_unfilled_calls(module: cst.Module, fpath: NodePath, was: cst.Parameters, now: cst.Parameters) -> None:
    """A header that makes a parameter required (a new one without a default, or a default taken away) where a call
    of the module does not pass it: TypeError at that call."""
    from .add_parameter import refuse_unfilled_calls

    def required(params: cst.Parameters) -> dict[str, int | None]:
        positional = [*params.posonly_params, *params.params]
        out: dict[str, int | None] = {p.name.value: i for i, p in enumerate(positional) if p.default is None}
        out.update({p.name.value: None for p in params.kwonly_params if p.default is None})
        return out

    before = required(was)
    for name, position in required(now).items():
        if name not in before:
            refuse_unfilled_calls(module, fpath, name, position, "the new header")
