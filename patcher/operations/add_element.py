"""`add_element`: add an element to the one list, tuple or set literal that holds a named element, or an entry
to the one dict literal that has a named key.

Example (sglang 0.5.9, `ModelConfig.__init__`: one more draft-model architecture)::

    - op: add_element
      file: srt/configs/model_config.py
      within: ModelConfig.__init__               # optional: a class or function, dotted; default: the module
      after: '"DeepseekV3ForCausalLM"'           # an element of the literal; the new one follows it
      code: '"DeepseekV32ForCausalLM"'

The literal is found by what it holds: the one list, tuple or set literal under `within` (any depth) that has an
element equal to `after` (compared as code). Anchoring on an element, not on the whole literal, survives upstream
adding or removing other elements. The new element takes the layout of its neighbours (one per line in a literal
written one element per line, a trailing comma kept, the continuation lines of a multi-line element at their
indentation); comment lines above it and a comment at the end of its line go with it (a literal written on one line
has no line for them: a conflict). An unpacking is an item of its own: `code: '*EXTRA'` adds one, `after: '*EXTRA'`
follows one, and `*EXTRA` is never the element `EXTRA`. The names an assignment, a `for`, a comprehension or a `with`
unpacks into (`req, out = pair()`) are no literal: a name added there, without the value growing, raises ValueError.
The values of a `Literal[...]` type (`CacheDType = Literal["auto", "fp8"]`, a registry of choices) are elements too,
when no list, tuple or set literal under `within` holds `after`.

A dict entry (`code: '"VLLM_TEAM_MAX": lambda: int(os.getenv("VLLM_TEAM_MAX", "8"))'`, `after: '"VLLM_PORT"'`,
the key of the entry it follows) goes into the one dict literal with that key (`**BASE` adds an unpacking); the dict
having the new key with another value, or a `**` unpacking after the anchor entry (which may set it too), is a
conflict.

Answers: *changed*; *already applied* (that literal already holds `code`, anywhere in it; or several literals hold
`after` and each of them holds `code`); *cannot apply* (no literal holds `after`, or several do and one of them lacks
`code`, with the literals that hold something alike as candidates).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Literal

import libcst as cst

from ..anchors import near
from ..errors import AnchorAmbiguous, AnchorNotFound, Candidate
from ..model import option
from ._code import (EXPRESSION_WITHIN, added_before, check_expression, expression_key, expression_scope,
                    expressions_under, insert_item, item_indent as _item_indent, line_text, node_key, parse_expression,
                    past, with_comment, without_comment)
from .base import AlreadyApplied, Changed, Operation, Outcome, attempt, register
from ..errors import Conflict, RecipeError

_LITERALS = (cst.List, cst.Tuple, cst.Set)


def _comment_lines(code: str) -> tuple[list[str], str]:
    """The comment lines at the top of `code` (they go above the new entry), and the rest."""
    lines = textwrap.dedent(code.replace("\r\n", "\n")).strip().splitlines()
    k = next((i for i, line in enumerate(lines) if not line.lstrip().startswith("#")), len(lines))
    return [line.strip() for line in lines[:k]], "\n".join(lines[k:])


@dataclass(frozen=True)
class _Item:
    """The step's code read as one item of a bracket: an element (`*X` included) or a dict entry (`**X` included),
    with the comment lines above it and the comment at the end of its line."""

    node: cst.CSTNode
    above: tuple[str, ...]
    comment: cst.Comment | None

    @property
    def is_entry(self) -> bool:
        return isinstance(self.node, (cst.DictElement, cst.StarredDictElement))


def _read(code: str) -> _Item | None:
    """`code` as one item (`insert_item` puts its continuation lines at the items' indentation); None when it is
    not one item."""
    above, rest = _comment_lines(code)
    try:
        # braces read both kinds: `{"k": v}` is a dict, `{x}` and `{*x}` a set; the line breaks let a comment end it
        node = cst.parse_expression("{\n" + rest + "\n}")
    except (cst.ParserSyntaxError, RecursionError):
        return None
    if not isinstance(node, (cst.Dict, cst.Set)) or len(node.elements) != 1:
        return None
    close = node.rbrace.whitespace_before
    if isinstance(close, cst.ParenthesizedWhitespace) and any(line.comment for line in close.empty_lines):
        return None  # comment lines below the item: no item of a literal holds them
    comment = close.first_line.comment if isinstance(close, cst.ParenthesizedWhitespace) else None
    return _Item(node.elements[0].with_changes(comma=cst.MaybeSentinel.DEFAULT), tuple(above), comment)


def _item_key(code: str) -> str | None:
    """An item up to formatting and comments: an expression's key, `*` or `**` before an unpacking's."""
    text = textwrap.dedent(code).strip()
    stars = len(text) - len(text.lstrip("*"))
    if stars in (1, 2):
        key = expression_key(text[stars:])
        return None if key is None else "*" * stars + key
    return expression_key(text)


def _key_of(module: cst.Module, item: cst.CSTNode) -> str | None:
    """The key an item of a literal is compared by: an element's value, a dict entry's key, `*`/`**` before what an
    unpacking unpacks (`*X` is not the element X)."""
    if isinstance(item, cst.Element):
        return node_key(module, item.value)
    if isinstance(item, cst.StarredElement):
        return "*" + (node_key(module, item.value) or "")
    if isinstance(item, cst.DictElement):
        return node_key(module, item.key)
    if isinstance(item, cst.StarredDictElement):
        return "**" + (node_key(module, item.value) or "")
    if isinstance(item, cst.SubscriptElement) and isinstance(item.slice, cst.Index):
        return node_key(module, item.slice.value)  # a value of `Literal[...]`
    return None


def _check_item(code: str) -> None:
    """Option check at load time: one element (`*X` included), or one dict entry `key: value` (`**X`); not several
    elements (`"D", "E"` is a tuple written without parentheses: one step adds one element)."""
    if _read(code) is not None:
        return
    stripped = textwrap.dedent(code).strip()
    if stripped.startswith("*"):
        raise ValueError(f"must be one element or dict entry, got {line_text(code)!r}")
    check_expression(code)
    try:
        node = cst.parse_expression(stripped)
    except (cst.ParserSyntaxError, RecursionError):
        return  # parse_expression says what is wrong, when the step runs
    if isinstance(node, cst.Tuple) and not node.lpar:
        raise ValueError(f"must be one element, got {len(node.elements)} ({line_text(code)!r}): give each its own "
                         f"step, or write a tuple element in parentheses")


def _check_anchor(code: str) -> None:
    """Option check at load time: `after` is an element (`*X` included) or a key (`**X`)."""
    if _item_key(code) is None:
        raise ValueError(f"must be one element of the literal (or a dict key), got {line_text(code)!r}")


def _opening(literal: cst.CSTNode) -> object:
    bracket = getattr(literal, "lbracket", None) or getattr(literal, "lbrace", None)
    if bracket is None and getattr(literal, "lpar", None):
        bracket = literal.lpar[0]
    return getattr(bracket, "whitespace_after", None)


def _closing(literal: cst.CSTNode) -> tuple[str, cst.CSTNode] | None:
    """The literal's closing bracket, as (its field, the node)."""
    for field in ("rbracket", "rbrace"):
        if (bracket := getattr(literal, field, None)) is not None:
            return field, bracket
    return ("rpar", literal.rpar[-1]) if getattr(literal, "rpar", None) else None


def item_indent(literal: cst.CSTNode) -> str | None:
    """The indentation of the items of a literal written one item per line (beyond the block's), else None."""
    return _item_indent(_opening(literal), literal.elements)


def _insert(literal: cst.CSTNode, at: int, item: _Item) -> cst.CSTNode | None:
    """`literal` with `item` at `at`, its comment lines above it and its comment at the end of its line; None when
    the literal is written on one line and the item has comments (they have no line of their own there)."""
    closing = _closing(literal)
    close_ws = closing[1].whitespace_before if closing else None
    held = "slice" if isinstance(literal, cst.Subscript) else "elements"  # a `Literal[...]`'s values: its slice
    node = cst.SubscriptElement(slice=cst.Index(value=item.node.value)) if held == "slice" else item.node
    elements = insert_item(getattr(literal, held), at, node, _opening(literal), close_ws)
    changes: dict = {}
    last = at == len(elements) - 1
    if last and closing:
        close_ws = without_comment(close_ws)
    if item.comment is not None:
        placed = with_comment(elements, at, item.comment, close_ws)
        if placed is None:
            return None
        elements, close_ws = placed
    if closing:
        field, bracket = closing
        bracket = bracket.with_changes(whitespace_before=close_ws)
        changes[field] = [*literal.rpar[:-1], bracket] if field == "rpar" else bracket
    if item.above:
        above = elements[at - 1].comma if at else None
        if not (isinstance(above, cst.Comma) and isinstance(above.whitespace_after, cst.ParenthesizedWhitespace)):
            return None
        # the code's comment lines above the new item, at the items' indentation
        ws = above.whitespace_after
        lines = tuple(cst.EmptyLine(indent=ws.indent, whitespace=ws.last_line, comment=cst.Comment(c))
                      for c in item.above)
        elements[at - 1] = elements[at - 1].with_changes(comma=above.with_changes(
            whitespace_after=ws.with_changes(empty_lines=(*ws.empty_lines, *lines))))
    return literal.with_changes(**{held: elements}, **changes)


def _literal_types(module: cst.Module, scope) -> list[cst.Subscript]:
    """The `Literal[...]` subscripts under the scope (`typing.Literal` too)."""
    return [n for n in expressions_under(scope, (cst.Subscript,))
            if (n.value.value if isinstance(n.value, cst.Name) else
                n.value.attr.value if isinstance(n.value, cst.Attribute) else None) == "Literal"]


@register
@dataclass(frozen=True, kw_only=True)
class AddElement(Operation):
    """Add an element right after `after` in the one list/tuple/set literal that holds `after`."""

    op: Literal["add_element"]
    after: str = option(check=_check_anchor, description="an element of the literal (`*X` for an unpacking); the "
                                                        "new one follows it")
    code: str = option(check=_check_item, description="the new element, an expression (`*X` unpacks X); or a dict "
                                                      "entry `key: value` (`**X`), after the entry whose key is "
                                                      "`after`; comment lines above it and a comment at the end of "
                                                      "its line are kept")
    within: str | None = option(default=None, description=EXPRESSION_WITHIN)
    #: the items earlier steps of the recipe add after the same item (set by `among`): the new one goes after them,
    #: in recipe order (a list's order is part of its value)
    placed_before: tuple[str, ...] = option(default=(), exclude=True)

    def among(self, steps) -> "AddElement":
        from dataclasses import replace

        def key_of(step) -> str | None:
            item = _read(step.code)
            return _key_of(cst.Module(body=[]), item.node) if item is not None else None

        before = added_before(self, steps, _item_key(self.after), lambda s: s.within, lambda s: _item_key(s.after),
                              key_of)
        return replace(self, placed_before=before) if before else self

    def describe(self) -> str:
        return f"add `{line_text(self.code)}` after `{line_text(self.after)}` in its literal" + (
            f" in `{self.within}`" if self.within else "")

    def anchor(self) -> str:
        return f"{self.within or 'the module'}: literal holding `{line_text(self.after)}`"

    @attempt
    def apply(self, module: cst.Module) -> Outcome:
        item = _read(self.code)
        if item is None:
            parse_expression(self.code)  # says what is wrong with the code
            raise RecipeError(f"the step's code must be one element or dict entry, got {line_text(self.code)!r}")
        new_key = _key_of(module, item.node)
        if item.is_entry:
            kinds, what = (cst.Dict,), ("dict literal has the key", "dict literals have the key")
            skip: set[int] = set()
        else:
            # `req, out = pair()` are names to unpack into, not a literal (the value side would not grow)
            kinds, what = _LITERALS, ("list, tuple or set literal holds", "literals hold")
            skip = _unpacking_targets(expression_scope(module, self.within)[-1])
        if not item.is_entry and isinstance(item.node, cst.Element):
            # a `Literal["auto", "fp8"]` registry of values (vLLM's `CacheDType`): its values are the elements
            scope = expression_scope(module, self.within)
            typed = [(t, [_key_of(module, e) for e in t.slice]) for t in _literal_types(module, scope)]
            typed = [(t, keys) for t, keys in typed if _item_key(self.after) in keys]
            if len(typed) == 1 and not any(_item_key(self.after) in [_key_of(module, e) for e in lit.elements]
                                           for lit in expressions_under(scope, kinds) if id(lit) not in skip):
                lit, keys = typed[0]
                if new_key in keys:
                    return AlreadyApplied(lit)
                at = past(keys, keys.index(_item_key(self.after)) + 1, self.placed_before)
                changed = _insert(lit, at, item)
                if changed is None:
                    raise Conflict(f"the `Literal[...]` holding `{line_text(self.after)}` is written on one line: the "
                                   f"code's comments have no line of their own there; leave them out of the code",
                                   candidates=[Candidate(f"`{line_text(module.code_for_node(lit))}`", node=lit)])
                return Changed(expressions_under(scope, (cst.Subscript,)).replace(lit, changed), inserted=(),
                               anchor=lit)
        literals, (lit, keys) = self._holding(module, expression_scope(module, self.within), kinds, new_key, skip=skip,
                                              what=what)
        if new_key in keys:
            # a dict display keeps the last entry of a key, and a `**` unpacking after it may set it again
            last = len(keys) - 1 - keys[::-1].index(new_key)
            have = lit.elements[last]
            if not isinstance(item.node, cst.DictElement):
                return AlreadyApplied(lit)
            if any(isinstance(e, cst.StarredDictElement) for e in lit.elements[last + 1:]):
                raise Conflict(f"the dict has the key `{line_text(module.code_for_node(have.key))}`, and a `**` "
                               f"unpacking after it may set it again: the value read is not known",
                               candidates=[Candidate(f"`{line_text(module.code_for_node(have.key))}`", node=have)])
            if node_key(module, have.value) == node_key(module, item.node.value):
                return AlreadyApplied(lit)
            # a later entry of the key wins in a dict display: the step's value would not be the one read
            raise Conflict(f"the dict already has the key `{line_text(module.code_for_node(have.key))}` with another "
                           f"value: `{line_text(module.code_for_node(have.with_changes(comma=cst.MaybeSentinel.DEFAULT)))}`",
                           candidates=[Candidate(f"`{line_text(module.code_for_node(have.key))}`", node=have)])
        if isinstance(lit, (cst.Dict, cst.Set)):
            self._refuse_equal_key(module, lit, item.node)
        at = keys.index(_item_key(self.after)) + 1
        at = past(keys, at, self.placed_before)  # steps after the same item: in recipe order
        if isinstance(item.node, cst.DictElement) and any(
                isinstance(e, cst.StarredDictElement) for e in lit.elements[at:]):
            raise Conflict(f"a `**` unpacking follows `{line_text(self.after)}` in the dict: it may set the new key "
                           f"too, and the later one wins", candidates=[Candidate(f"`{line_text(self.after)}`", node=lit)])
        if isinstance(lit, cst.Tuple) and not lit.lpar and len(lit.elements) == 1:
            return self._refuse_bare_tuple(lit)
        changed = _insert(lit, at, item)
        if changed is None:
            raise Conflict(f"the literal holding `{line_text(self.after)}` is written on one line: the code's comments "
                           f"have no line of their own there; leave them out of the code",
                           candidates=[Candidate(f"`{line_text(module.code_for_node(lit))}`", node=lit)])
        return Changed(literals.replace(lit, changed), inserted=(), anchor=lit)

    def _holding(self, module: cst.Module, scope, kinds: tuple, new_key: str | None, *,
                 skip: set[int] = frozenset(), what: tuple[str, str]):
        """The literals of `kinds` under the scope, and the one that holds `after` with the keys of its items.
        None is AnchorNotFound, with the items that read alike as candidates; several are AnchorAmbiguous, unless
        each holds `new_key` too (the first is given: the step is applied there)."""
        after_key = _item_key(self.after)
        literals = expressions_under(scope, kinds)
        found = []
        for lit in literals:
            if id(lit) in skip:
                continue
            keys = [_key_of(module, e) for e in lit.elements]
            if after_key in keys:
                found.append((lit, keys))
        if not found:
            texts = {_item_text(module, e): lit for lit in literals if id(lit) not in skip for e in lit.elements}
            raise AnchorNotFound(f"no {what[0]} `{line_text(self.after)}`",
                                 candidates=[Candidate(f"`{t}`", node=texts[t])
                                             for t in near(line_text(self.after), list(texts))])
        if len(found) > 1 and not all(new_key in keys for _, keys in found):
            raise AnchorAmbiguous(f"{len(found)} {what[1]} `{line_text(self.after)}`",
                                  candidates=[Candidate(f"`{line_text(module.code_for_node(lit))}`", node=lit)
                                              for lit, _ in found])
        return literals, found[0]

    @staticmethod
    def _refuse_equal_key(module: cst.Module, lit: cst.Dict | cst.Set, new: cst.CSTNode) -> None:
        """A dict key or set element written otherwise than one the literal has, but equal to it as Python hashes
        them (`True` and `1`, `1.0` and `1`, a module constant's value): one key, so the entry would replace that
        one's value, or the element add nothing."""
        def key(node: cst.CSTNode) -> cst.CSTNode | None:
            return node.key if isinstance(node, cst.DictElement) else node.value if isinstance(node, cst.Element) \
                else None

        mine = _value(module, key(new))
        if mine is None:
            return
        for e in lit.elements:
            theirs = _value(module, key(e))
            try:
                equal = theirs is not None and theirs[0] == mine[0] and hash(theirs[0]) == hash(mine[0])
            except TypeError:
                continue
            if equal:
                shown, added = line_text(module.code_for_node(key(e))), line_text(module.code_for_node(key(new)))
                what = "dict has the key" if isinstance(lit, cst.Dict) else "set holds"
                raise Conflict(f"the {what} `{shown}`, which Python takes for the new `{added}` "
                               f"(equal values, one key): the step would "
                               f"{'replace its value' if isinstance(lit, cst.Dict) else 'add nothing'}",
                               candidates=[Candidate(f"`{shown}`", node=e)])

    def _refuse_bare_tuple(self, lit: cst.CSTNode) -> Outcome:
        from .base import CannotApply

        return CannotApply(AnchorNotFound("a one-element tuple without parentheses cannot take a new element here",
                                          candidates=[Candidate("use replace_expression", node=lit)]))


def _item_text(module: cst.Module, item: cst.CSTNode) -> str:
    """What an item reads as, for a candidate: an element or an unpacking, a dict entry's key."""
    if isinstance(item, cst.DictElement):
        return line_text(module.code_for_node(item.key))
    return line_text(module.code_for_node(item.with_changes(comma=cst.MaybeSentinel.DEFAULT)))


def _unpacking_targets(node: cst.CSTNode) -> set[int]:
    """The ids of the tuples and lists under `node` that are targets (of an assignment, a `for`, a comprehension, a
    `with ... as`), nested ones included."""
    found: set[int] = set()

    def mark(target: cst.CSTNode) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            found.add(id(target))
            for e in target.elements:
                mark(e.value)

    class Visit(cst.CSTVisitor):
        def visit_AssignTarget(self, n: cst.AssignTarget) -> None:
            mark(n.target)

        def visit_For(self, n: cst.For) -> None:
            mark(n.target)

        def visit_CompFor(self, n: cst.CompFor) -> None:
            mark(n.target)

        def visit_AsName(self, n: cst.AsName) -> None:
            mark(n.name)

    node.visit(Visit())
    return found


def _value(module: cst.Module, node: cst.CSTNode | None) -> tuple[object] | None:
    """(value,) of a literal key, or of a module-level name bound once to a literal; None otherwise."""
    import ast

    if node is None:
        return None
    if isinstance(node, cst.Name) and node.value not in ("True", "False", "None"):
        from ._code import module_assignments

        bound = [a.value for _, a in module_assignments(module, node.value) if a.value is not None]
        if len(bound) != 1 or isinstance(bound[0], cst.Name):
            return None
        node = bound[0]
    try:
        return (ast.literal_eval(module.code_for_node(node).strip()),)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
