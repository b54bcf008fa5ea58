"""`replace_expression`: replace the one expression, in a class, a function or the module, whose code is `match`.

Example (sglang 0.5.9, `ModelConfig.__init__`)::

    - op: replace_expression
      file: srt/configs/model_config.py
      within: ModelConfig.__init__              # optional: a class or function, dotted; default: the module
      match: self.hf_config.architectures[0] == "DeepseekV3ForCausalLM"
      code: self.hf_config.architectures[0] in ("DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM")

`match` is one expression, compared as an AST (formatting, parentheses and comments do not matter) with every
expression under `within`, at any depth (nested functions included); names that are not expressions (the `attr` of
`a.attr`, a keyword's name, a parameter's name, imports) are not compared. It must match exactly one expression.
`code`, one expression, replaces it where it stands, in parentheses where the code around would otherwise read it
differently. `statement` (what `specpatch import` writes: `an assignment to x`, `a call of f`, `an `if` statement`)
says what the statement holding the expression did where the recipe was made; one now in a statement of another kind
is refused (the same expression, moved by upstream into an `if` test, would take an edit meant for an assignment),
and where several expressions match, the one in a statement of that kind is the anchor (others, in statements of
other kinds, are not counted: `x` in `weights, _ = self.proj(x)`, beside an `x = x.to(...)` upstream added).
This is the general expression edit; the narrower ones
(`add_keyword_argument`, `add_element`, `add_parameter`) survive upstream changes around the edit better, and the
importer prefers them when they express a change.

Answers: *changed*; *already applied* (no expression matches `match` outside the ones that replaced it, and `code` is
there; with `statement:`, in a statement of that kind, and no other statement of that kind holds the match but for
one or two literal values, which upstream would have edited: without `statement:`, `code` anywhere under `within`
counts, so say it where the code is short); *cannot apply* (neither `match` nor `code` is found, with the
expressions of the same kind that look most alike as candidates; several expressions match).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import libcst as cst

from ..anchors import near
from ..errors import AnchorAmbiguous, AnchorNotFound, Candidate
from ..model import option
from ._code import (EXPRESSION_WITHIN, Shift, check_expression, contains, expression_key, expressions_under, line_text,
                    line_text_against, literal_edit, node_key, parse_expression, expression_scope)
from .base import AlreadyApplied, Changed, Operation, Outcome, attempt, register



@register
@dataclass(frozen=True, kw_only=True)
class ReplaceExpression(Operation):
    """Replace the one expression whose code equals `match` by `code`."""

    op: Literal["replace_expression"]
    match: str = option(check=check_expression, description="the expression to replace, compared as code")
    code: str = option(check=check_expression, description="the expression that replaces it")
    within: str | None = option(default=None, description=EXPRESSION_WITHIN)
    statement: str | None = option(default=None, description=(
        "what the statement holding the expression does where the recipe was made (`an assignment to x`, `a call "
        "of f`, `an `if` statement`: what `specpatch import` writes): an expression now in a statement of another "
        "kind is refused, the edit would land somewhere it was never meant for"))

    def describe(self) -> str:
        return f"replace `{line_text(self.match)}` by `{line_text(self.code)}`" + (
            f" in `{self.within}`" if self.within else "")

    def anchor(self) -> str:
        return f"{self.within or 'the module'}: `{line_text(self.match)}`"

    @attempt
    def apply(self, module: cst.Module) -> Outcome:
        old, new = parse_expression(self.match, what="match"), parse_expression(self.code)
        scope = expression_scope(module, self.within)
        old_key, new_key = expression_key(self.match), expression_key(self.code)
        candidates = expressions_under(scope, (type(old),))
        found = [n for n in candidates if node_key(module, n) == old_key and not _capture(candidates._paths[id(n)])]
        news = expressions_under(scope, (type(new),))
        placed = [n for n in news if node_key(module, n) == new_key and not _capture(news._paths[id(n)])]
        anchors = [n for n in found if not any(contains(p, n) for p in placed)]

        def evidence() -> list[cst.CSTNode]:
            # the code where the match would have stood: not inside an expression shaped as the match (`self.timeout`
            # in upstream's `self.timeout * 4`, where the step turns `self.timeout * 2` into `self.timeout`), and in
            # a statement of the recipe's kind when it says one
            inner = _part_of(self.code, self.match)  # the change keeps a part of the match (drops a factor)
            return [p for p in placed if not (inner and (parent := next(
                (n for n in reversed(news._paths[id(p)][:-1]) if isinstance(n, cst.BaseExpression)), None)) is not None
                and _same_shape(module.code_for_node(parent), self.match))
                and (self.statement is None or _role(module, news._paths[id(p)]) in (None, self.statement))]

        if anchors and self.statement is not None:
            # the statement the recipe names picks among them: `x` of `weights, _ = self.proj(x)`, not the `x` of
            # an `x = x.to(...)` upstream put above it (one left in a statement of that kind is the anchor; none
            # left, and the code in such a statement: applied already)
            mine = [n for n in anchors if _role(module, candidates._paths[id(n)]) == self.statement]
            if not mine and (done := evidence()):
                return AlreadyApplied(done[0])
            anchors = mine or anchors
        if not anchors:
            if done := evidence():
                edited = self._edited_beside(module, candidates, news, done, new_key)
                if edited is not None:
                    raise AnchorNotFound(
                        f"`{line_text(self.code)}` is in {self.statement} here, but so is `{line_text(edited[0])}`, "
                        f"which is alike `{line_text(self.match)}` and holds neither: upstream may have edited the "
                        f"expression the step changes (not taken as already applied)",
                        candidates=[Candidate(f"`{line_text(edited[0])}`", node=edited[1])])
                return AlreadyApplied(done[0])
            # compared whole: cut to a message's width, a candidate would read as the match does
            alike = {" ".join(module.code_for_node(n).split()): n for n in expressions_under(scope, (type(old),))}
            raise AnchorNotFound(
                f"no expression `{line_text(self.match)}` in {f'`{self.within}`' if self.within else 'the module'}",
                candidates=[Candidate(f"`{line_text_against(t, self.match)}`", node=alike[t])
                            for t in near(" ".join(self.match.split()), list(alike))])
        if len(anchors) > 1:
            raise AnchorAmbiguous(f"{len(anchors)} expressions match `{line_text(self.match)}`",
                                  candidates=[Candidate(f"`{line_text(module.code_for_node(n))}`", node=n)
                                              for n in anchors])
        if self.statement is not None:
            role = _role(module, candidates._paths[id(anchors[0])])
            if role is not None and role != self.statement:
                raise AnchorNotFound(
                    f"`{line_text(self.match)}` is in {role} here; the recipe was made with it in {self.statement}: "
                    f"upstream rewrote the statement around it, and the edit would land in another one",
                    candidates=[Candidate(f"`{line_text(module.code_for_node(anchors[0]))}`", node=anchors[0])])
        new = _grouped(module, candidates._paths[id(anchors[0])], old, anchors[0], new)
        return Changed(candidates.replace(anchors[0], new), inserted=(), anchor=anchors[0])

    def _edited_beside(self, module: cst.Module, candidates, news, done: list[cst.CSTNode],
                       new_key: str | None) -> tuple[str, cst.CSTNode] | None:
        """With `statement:`, the code found in one statement of that kind while another statement of that kind
        holds an expression alike the match (`chunk = n * 3` beside the `chunk = n * 4` of one `if` arm, for a step
        `n * 2` -> `n * 4`): the match was edited there, not replaced. The expression and its node, else None."""
        if self.statement is None:
            return None

        def statement_of(path: tuple[cst.CSTNode, ...]) -> cst.CSTNode | None:
            return next((n for n in reversed(path) if isinstance(n, cst.BaseSmallStatement)), None)

        mine = {id(statement_of(news._paths[id(n)])) for n in done}
        want = self.match
        for n in candidates:
            path = candidates._paths[id(n)]
            stmt = statement_of(path)
            if stmt is None or id(stmt) in mine or _role(module, path) != self.statement:
                continue
            text = " ".join(module.code_for_node(n).split())
            if node_key(module, n) != new_key and _edited_form(text, want):
                return text, n
        return None

    def statement_role(self, module: cst.Module) -> str | None:
        """What the statement holding the one expression that matches `match` does, in words that survive
        formatting: `an assignment to self.x`, `a call of f`, `an `if` statement`...; None when there is not exactly
        one. `specpatch port` compares it between the base release and the release: the same expression in a
        statement of another kind (upstream rewrote the assignment it was in; the expression is now an `if` test)
        takes the edit somewhere it was never meant for."""
        try:
            scope = expression_scope(module, self.within)
        except Exception:  # noqa: BLE001 - an anchor error: the step's own answer says it
            return None
        old_key = expression_key(self.match)
        candidates = expressions_under(scope, (type(parse_expression(self.match, what="match")),))
        found = [n for n in candidates if node_key(module, n) == old_key]
        if len(found) != 1:
            return None
        return _role(module, candidates._paths[id(found[0])])


def _part_of(code: str, match: str) -> bool:
    """Whether the expression `code` is a proper part of the expression `match` (`self.timeout` of
    `self.timeout * 2`)."""
    import ast
    import textwrap

    try:
        want = ast.dump(ast.parse(textwrap.dedent(code).strip(), mode="eval").body)
        whole = ast.parse(textwrap.dedent(match).strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return False
    return any(ast.dump(n) == want for n in ast.walk(whole) if n is not whole)


def _capture(path: tuple[cst.CSTNode, ...]) -> bool:
    """Whether the name at the end of `path` is a capture of a `case` pattern (`case [a, *rest]:`, `**others`): a
    name the pattern binds, no expression to replace."""
    if len(path) < 2:
        return False
    parent, node = path[-2], path[-1]
    return isinstance(parent, (cst.MatchAs, cst.MatchStar)) and parent.name is node \
        or isinstance(parent, cst.MatchMapping) and parent.rest is node


def _edited_form(code: str, match: str) -> bool:
    """Whether an expression is the match with one or two of its literal values changed (`n * 3` for `n * 2`): an
    edit of the very expression (`_code.literal_edit`)."""
    return literal_edit(code, match)


def _same_shape(code: str, match: str) -> bool:
    """Whether two expressions are of one kind and operator (`self.timeout * 4` and `self.timeout * 2`: a product;
    `a * s` and `a + b` are not)."""
    import ast
    import textwrap

    try:
        a = ast.parse("(\n" + textwrap.dedent(code).strip() + "\n)", mode="eval").body
        b = ast.parse(textwrap.dedent(match).strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return False
    if type(a) is not type(b):
        return False
    if isinstance(a, (ast.BinOp, ast.BoolOp, ast.UnaryOp)):
        return type(a.op) is type(b.op)
    if isinstance(a, ast.Compare):
        return [type(o) for o in a.ops] == [type(o) for o in b.ops]
    return True


def _role(module: cst.Module, path: tuple[cst.CSTNode, ...]) -> str | None:
    """What the statement holding the expression at the end of `path` does (`ReplaceExpression.statement_role`)."""
    for node in reversed(path):
        if isinstance(node, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            targets = node.targets if isinstance(node, cst.Assign) else [node]
            return "an assignment to " + ", ".join(module.code_for_node(t.target).strip() for t in targets)
        if isinstance(node, cst.Expr):
            value = node.value
            return f"a call of {module.code_for_node(value.func).strip()}" if isinstance(value, cst.Call) \
                else "an expression statement"
        if isinstance(node, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            kind = type(node).__name__.lower()
            return f"{'an' if kind[0] in 'aeiou' else 'a'} `{kind}` statement"
    return None


def _grouped(module: cst.Module, path: tuple[cst.CSTNode, ...], pattern: cst.BaseExpression, old: cst.CSTNode,
             new: cst.BaseExpression) -> cst.BaseExpression:
    """`new` as it must be written in `old`'s place to stay one expression there. Parentheses around `old` that the
    match does not hold are kept (`(a + b) * s`: `a + b` -> `a + b + c` gives `(a + b + c) * s`, not `a + b + c *
    s`); and where the expression around the place would read the new code otherwise (an operator of lower
    precedence, a tuple in an argument list), it is put in parentheses. Read with `ast`: the code around the place,
    rewritten, must hold the new expression as one of its subtrees."""
    import ast
    import textwrap

    if getattr(old, "lpar", None) and not getattr(pattern, "lpar", None) and hasattr(new, "lpar") and not new.lpar:
        return new.with_changes(lpar=old.lpar, rpar=old.rpar)
    if not hasattr(new, "lpar") or new.lpar:
        return new
    text = module.code_for_node(new)
    if "\n" in text:
        # continuation lines start at the column of the line the expression starts on, as the recipe has them below
        # its first line (`device=model.device` / `    if ...`: under the argument, not at the statement's column)
        new = new.visit(Shift(_line_indent(module, path, old)))
    grouped = new.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    if "\n" in text:
        try:  # lines that continue only inside brackets (`a is None\n    or b is None`): in parentheses, unless the
            # place is inside brackets already (a call's argument, a list's item)
            ast.parse(textwrap.dedent(text).strip(), mode="eval")
        except SyntaxError:
            statement = next((n for n in reversed(path[:-1]) if isinstance(n, cst.BaseStatement)), None)
            try:
                ast.parse(module.code_for_node(statement.deep_replace(old, new)))
            except (SyntaxError, ValueError, RecursionError, AttributeError):
                return grouped
    if isinstance(new, cst.Tuple) and not isinstance(old, cst.Tuple):
        # a tuple written bare is one only where a statement takes a bare tuple (`return a, b`, `x = a, b`);
        # elsewhere its commas would make other code: subscript elements (`d[a, b]`, which libcst then no longer
        # reads as the tuple), two context managers or two bases, or a syntax error (`if a, b:`)
        holder = path[-2] if len(path) > 1 else None
        if isinstance(holder, (cst.Return, cst.Assign, cst.AugAssign, cst.AnnAssign, cst.Expr)) \
                or isinstance(holder, cst.For) and holder.iter is old:
            return new
        if isinstance(holder, cst.WithItem):  # `with (a, b):` is two context managers: the tuple is `((a, b))`
            return new.with_changes(lpar=[cst.LeftParen(), cst.LeftParen()], rpar=[cst.RightParen(), cst.RightParen()])
        return grouped
    parent = next((n for n in reversed(path[:-1]) if isinstance(n, cst.BaseExpression)), None)
    if parent is None or isinstance(parent, cst.ConcatenatedString):
        return new  # a string beside others (`f"a{x}" "b"`) takes no parentheses: libcst refuses them there
    try:
        bare = ast.parse("(\n" + module.code_for_node(parent.deep_replace(old, new)) + "\n)", mode="eval")
        held = ast.parse("(\n" + module.code_for_node(parent.deep_replace(old, grouped)) + "\n)", mode="eval")
    except (SyntaxError, ValueError, RecursionError):
        return grouped
    # where the parentheses change nothing Python runs (`a and b and c`: `and` is one chain), none are added
    return new if ast.dump(_flat(bare)) == ast.dump(_flat(held)) else grouped


def _line_indent(module: cst.Module, path: tuple[cst.CSTNode, ...], old: cst.CSTNode) -> str:
    """The indentation, beyond its block's, of the line on which `old` (at the end of `path`) starts: its statement
    rendered with a marker in its place, the marker's line read."""
    statement = next((n for n in reversed(path[:-1]) if isinstance(n, cst.BaseStatement)), None)
    if statement is None:
        return ""
    marker = "_specpatch_place_"
    text = module.code_for_node(statement.deep_replace(old, cst.Name(marker)))
    line = next((t for t in text.split("\n") if marker in t), "")
    return line[:len(line) - len(line.lstrip())]


def _flat(tree):
    """`tree` with nested `and`/`or` chains of the same operator made one (`(a and b) and c` is `a and b and c`)."""
    import ast

    class Flatten(ast.NodeTransformer):
        def visit_BoolOp(self, node: ast.BoolOp) -> ast.BoolOp:
            self.generic_visit(node)
            values = []
            for v in node.values:
                values.extend(v.values if isinstance(v, ast.BoolOp) and type(v.op) is type(node.op) else [v])
            node.values = values
            return node

    return Flatten().visit(tree)
