"""`add_branch`: add an early-return guard `if CONDITION: return CALL` to a function or to one arm of an `if`.

Example (sglang 0.5.9, `EAGLEWorkerV2.forward_batch_generation`: run big decode batches without speculation)::

    - op: add_branch
      file: srt/speculative/eagle_worker_v2.py
      function: EAGLEWorkerV2.forward_batch_generation
      branch_if: "model_worker_batch.forward_mode.is_extend() or model_worker_batch.is_extend_in_batch"
      arm: else                                   # body | else (default: else)
      condition: self._spec_disabled_for(model_worker_batch)
      call: self._forward_without_spec(model_worker_batch)

which turns the decode arm into::

        else:
            if self._spec_disabled_for(model_worker_batch):
                return self._forward_without_spec(model_worker_batch)
            if model_worker_batch.spec_info is None:
                ...

Without `branch_if` the guard is the first statement of the function (after its docstring). With it, the guard is
the first statement of one arm of the single `if` (or `elif`) of the function whose test matches the pattern
`branch_if` (a code pattern, see `patcher.patterns`: `...` matches any expression, `f(...)` any arguments; the test
is compared as an AST, so parentheses and line breaks do not matter). `arm: body` is the block under the test;
`arm: else` is the `else:` block, the final one of an if/elif chain. `if`s inside nested functions do not count.

Answers: *changed*; *already applied* (the first statement of that arm or function is that guard, compared as an
AST); *cannot apply* (the function or the `if` is missing or ambiguous, the `if` has no `else` arm, the first
statement is an `if` with the same condition but another body, or the function is a generator, whose `return
CALL` its caller never sees: a conflict).
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass
from typing import ClassVar, Literal

import libcst as cst

from ..anchors import (NodePath, body_of, code_of, else_arm, expression_ast, find_function, if_statements,
                       is_docstring, near, normalized, parse_statements, set_block_body)
from ..errors import AnchorAmbiguous, AnchorNotFound, Candidate, Conflict, RecipeError
from ..model import option
from ..patterns import Pattern
from .base import AlreadyApplied, Changed, Operation, Outcome, attempt, register


@register
@dataclass(frozen=True, kw_only=True)
class AddBranch(Operation):
    """Add `if CONDITION: return CALL` at the start of a function, or of one arm of a matched `if`."""

    op: Literal["add_branch"]
    function: str = option(description="the function, dotted, e.g. EAGLEWorkerV2.forward_batch_generation")
    condition: str = option(description="the guard's condition, an expression")
    call: str = option(description="the expression the guard returns, e.g. self._forward_plain(batch)")
    branch_if: str | None = option(default=None, description="a pattern of the test of the `if` to put the guard in")
    arm: Literal["body", "else"] = option(default="else", requires="branch_if",
                                          description="with branch_if: the `if` arm, body | else")

    templated: ClassVar[tuple[str, ...]] = ("condition", "call")

    def __post_init__(self) -> None:
        # a PatternError is a ValueError: reported at load time, with the step's line
        if self.branch_if is not None and not Pattern.parse(self.branch_if).is_expression:
            raise ValueError(f"`branch_if` is the test of an `if` (an expression), got {self.branch_if.strip()!r}")

    def describe(self) -> str:
        where = f"the `{self.arm}` arm of `if {self.branch_if.strip()}` in" if self.branch_if else "the start of"
        return f"add `if {self.condition.strip()}: return ...` to {where} `{self.function}`"

    def anchor(self) -> str:
        if self.branch_if is None:
            return self.function
        return f"{self.function}: `if {Pattern.parse(self.branch_if)}` ({self.arm})"

    def guard(self, module: cst.Module) -> cst.If:
        """The guard statement, parsed for the target module (its newline and indentation)."""
        condition, call = (_expression(self.condition, "condition"), _expression(self.call, "call"))
        stmts = parse_statements(f"if {condition}:\n    return {call}\n", module, what="guard")
        assert len(stmts) == 1 and isinstance(stmts[0], cst.If)
        return stmts[0]

    @attempt
    def apply(self, module: cst.Module) -> Outcome:
        guard = self.guard(module)
        fpath = find_function(module, self.function)
        if _is_generator(fpath[-1]):
            raise Conflict(f"`{self.function}` is a generator (it yields): `return {self.call}` would end it, and "
                           "its caller would never see the value (a context manager would fail: it did not yield)",
                           hint="guard a plain function, or write the branch with `insert_statements`")
        if fpath[-1].name.value in ("__init__", "__setattr__", "__delattr__", "__setitem__", "__delitem__"):
            raise Conflict(f"`{self.function}` must return None: `return {self.call}` raises TypeError (in "
                           f"`__init__`) or hands back a value nobody reads, unless the call returns None",
                           hint="write the branch with `insert_statements`: `if COND:`, the call, then `return`")
        owner = fpath if self.branch_if is None else self._arm(module, fpath, Pattern.parse(self.branch_if))
        statements = list(body_of(owner[-1]))
        first = 1 if owner is fpath and statements and is_docstring(statements[0]) else 0
        if first < len(statements):
            have = statements[first]
            if normalized(code_of(module, have)) == normalized(code_of(module, guard)):
                return AlreadyApplied(have)
            if isinstance(have, cst.If) and _same_expression(module, have.test, guard.test):
                where = f"`{self.function}`" if owner is fpath else f"the `{self.arm}` arm in `{self.function}`"
                raise Conflict(f"{where} already starts with `{_header(module, have)}` with another body",
                               candidates=[Candidate(f"`{_header(module, have)}`", node=have)])
        body = [*statements[:first], guard, *statements[first:]]
        return Changed(set_block_body(owner, body), inserted=(guard,), anchor=owner[-1])

    def _arm(self, module: cst.Module, fpath: NodePath, pattern: Pattern) -> NodePath:
        """Path to the block that gets the guard: the body or final else of the single matching `if`."""
        ifs = list(if_statements(fpath))
        tests = [(p, expression_ast(module, p[-1].test)) for p in ifs]
        found = [p for p, t in tests if t is not None and pattern.matches_expression(t)]
        if not found:
            by_text = {_header(module, p[-1]): p[-1] for p in ifs}
            raise AnchorNotFound(
                f"no `if {pattern}` in `{self.function}`",
                candidates=[Candidate(f"`{t}`", node=by_text[t]) for t in near(f"if {pattern}:", list(by_text))])
        if len(found) > 1:
            raise AnchorAmbiguous(f"{len(found)} `if` tests match `{pattern}` in `{self.function}`",
                                  candidates=[Candidate(f"`{_header(module, p[-1])}`", node=p[-1]) for p in found])
        if self.arm == "body":
            return found[0]
        arm = else_arm(found[0])
        if arm is None:
            raise AnchorNotFound(f"the `if {pattern}` in `{self.function}` has no `else` arm",
                                 candidates=[Candidate(f"`{_header(module, found[0][-1])}`", node=found[0][-1])])
        return arm


def _expression(code: str, what: str) -> str:
    """The option's expression on one logical line (parenthesized when it spans lines)."""
    text = textwrap.dedent(code).strip()
    if "\n" in text:
        text = f"(\n{textwrap.indent(text, '    ')}\n)"
    try:
        ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise RecipeError(f"`{what}` must be a Python expression, got {text!r}: {exc.msg}") from None
    return text


def _same_expression(module: cst.Module, a: cst.BaseExpression, b: cst.BaseExpression) -> bool:
    ta, tb = expression_ast(module, a), expression_ast(module, b)
    return ta is not None and tb is not None and ast.dump(ta) == ast.dump(tb)


def _header(module: cst.Module, node: cst.If) -> str:
    """`if TEST:` on one line, for messages."""
    test = expression_ast(module, node.test)
    return f"if {ast.unparse(test) if test is not None else code_of(module, node.test)}:"


def _is_generator(fn: cst.FunctionDef) -> bool:
    """Does `fn` yield in its own body (not in a nested def, class or lambda)?"""
    class Yields(cst.CSTVisitor):
        found = False

        def visit_Yield(self, node: cst.Yield) -> bool:
            self.found = True
            return False

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is fn

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return False

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

    visitor = Yields()
    fn.visit(visitor)
    return visitor.found
