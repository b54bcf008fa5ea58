"""Code patterns: Python source with `...` wildcards, matched against target code by comparing ASTs.

A pattern is the source of one statement or one expression, as a recipe writes it::

    batch_output = self.verify(...)                        # a statement pattern
    self.verify(...)                                       # an expression pattern
    model_worker_batch.forward_mode.is_extend() or ...     # an expression pattern (for an `if` test)

A target node matches when its AST equals the pattern's AST, except that

- `...` (the Ellipsis literal) in the pattern matches any one expression: `x = ...` matches every assignment to `x`;
- a call written `f(...)` matches a call of `f` with any arguments (none, several, keywords, `*args`), and one
  whose last argument is `...`, `f(a, ...)`, a call of `f` whose first arguments match (`a`), whatever follows them
  (`parser.add_argument("--port", ...)` is the call adding that flag);
- a block made of `...` alone matches any block: `with self.plan_stream_ctx:\\n    ...` matches that `with`
  statement whatever its body (`else`/`except` arms still have to be there or absent as in the pattern).

ASTs are compared without their `ctx` (load/store), positions and type comments, so formatting, comments,
parentheses and line breaks never matter. An expression pattern matches an *expression statement* when it is used to
find a statement (`self.verify(...)` matches the line `self.verify(batch)`, not `out = self.verify(batch)`).
A statement pattern is one statement; a line holding several statements separated by `;` never matches.

This module only knows the standard library's `ast`; turning libcst nodes into `ast` is done by the callers
(see `anchors.statement_ast` and `anchors.expression_ast`).
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass, field

_IGNORED_FIELDS = frozenset({"ctx", "type_comment", "kind"})

#: statements with blocks; the others (assignments, calls, return, ...) are *simple* statements
COMPOUND: tuple[type, ...] = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try,
                              ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Match) \
    + ((ast.TryStar,) if hasattr(ast, "TryStar") else ())


class PatternError(ValueError):
    """The pattern text is not one Python statement or expression (raised at recipe load time)."""


@dataclass(frozen=True)
class Pattern:
    """A parsed code pattern; `node` is an `ast.expr` for an expression pattern, else an `ast.stmt`."""

    source: str  #: the pattern as written in the recipe
    node: ast.AST = field(compare=False, repr=False)

    @classmethod
    def parse(cls, source: str) -> "Pattern":
        """Parse pattern text; raises PatternError (a ValueError) when it is not one statement or expression."""
        text = textwrap.dedent(source).strip()
        if not text:
            raise PatternError("the pattern is empty")
        try:
            return cls(source, ast.parse(text, mode="eval").body)
        except SyntaxError:
            pass
        try:
            body = ast.parse(text).body
        except SyntaxError as exc:
            raise PatternError(f"the pattern `{text}` is not valid Python: {exc.msg}") from None
        if len(body) != 1:
            raise PatternError(f"the pattern `{text}` must be one statement or expression, it has {len(body)}")
        return cls(source, body[0])

    @property
    def is_expression(self) -> bool:
        return isinstance(self.node, ast.expr)

    @property
    def is_compound(self) -> bool:
        """True for a pattern of a statement with a block (`if`, `with`, `for`, ...)."""
        return isinstance(self.node, COMPOUND)

    def matches_statement(self, stmt: ast.stmt) -> bool:
        """Does the target statement match? An expression pattern matches an expression statement only."""
        if self.is_expression:
            return isinstance(stmt, ast.Expr) and _match(self.node, stmt.value)
        return _match(self.node, stmt)

    def matches_expression(self, expr: ast.expr) -> bool:
        """Does the target expression match? (Only for expression patterns; a statement pattern never matches.)"""
        return self.is_expression and _match(self.node, expr)

    def describe(self) -> str:
        """The pattern on one line, for messages and candidate lists (`ast.unparse` keeps `...` as written)."""
        return ast.unparse(self.node)

    def __str__(self) -> str:
        return self.describe()


def _is_ellipsis(node: object) -> bool:
    return isinstance(node, ast.Constant) and node.value is Ellipsis


def _is_wildcard_block(stmts: object) -> bool:
    return isinstance(stmts, list) and len(stmts) == 1 and isinstance(stmts[0], ast.Expr) \
        and _is_ellipsis(stmts[0].value)


def _match(pattern: object, target: object) -> bool:
    """Structural equality of two AST values with the wildcards of the module docstring."""
    if _is_ellipsis(pattern) and isinstance(target, ast.expr):
        return True
    if isinstance(pattern, ast.Call) and isinstance(target, ast.Call) and not pattern.keywords \
            and pattern.args and _is_ellipsis(pattern.args[-1]):
        # `f(...)`: any arguments; `f(a, ...)`: `a` first, then any (none, more, keywords, unpackings)
        head = pattern.args[:-1]
        return _match(pattern.func, target.func) and len(target.args) >= len(head) \
            and all(_match(p, t) for p, t in zip(head, target.args))
    if isinstance(pattern, list):
        if _is_wildcard_block(pattern) and isinstance(target, list) and all(isinstance(t, ast.stmt) for t in target):
            return bool(target)
        return isinstance(target, list) and len(pattern) == len(target) \
            and all(_match(p, t) for p, t in zip(pattern, target))
    if isinstance(pattern, ast.AST):
        if type(pattern) is not type(target):
            return False
        return all(_match(getattr(pattern, f, None), getattr(target, f, None))
                   for f in pattern._fields if f not in _IGNORED_FIELDS)
    # constants: 1 == 1.0 == True in Python, but they are different code
    return type(pattern) is type(target) and pattern == target

