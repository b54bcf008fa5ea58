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
written one element per line, a trailing comma kept). The names an assignment, a `for`, a comprehension or a `with`
unpacks into (`req, out = pair()`) are no literal: a name added there, without the value growing, raises ValueError.

A dict entry (`code: '"VLLM_TEAM_MAX": lambda: int(os.getenv("VLLM_TEAM_MAX", "8"))'`, `after: '"VLLM_PORT"'`,
the key of the entry it follows) goes into the one dict literal with that key; the dict having the new key with
another value, or a `**` unpacking after the anchor entry (which may set it too), is a conflict.

Answers: *changed*; *already applied* (that literal already holds `code`, anywhere in it; or several literals hold
`after` and each of them holds `code`); *cannot apply* (no literal holds `after`, or several do and one of them lacks
`code`, with the literals that hold something alike as candidates).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import libcst as cst

from ..anchors import near
from ..errors import AnchorAmbiguous, AnchorNotFound, Candidate
from ..model import option
from ._code import (WITHIN, check_expression, expression_key, expressions_under, insert_item, line_text, node_key,
                    parse_expression, scope_path)
from .base import AlreadyApplied, Changed, Operation, Outcome, attempt, register
from ..errors import Conflict

_LITERALS = (cst.List, cst.Tuple, cst.Set)


def _comment_lines(code: str) -> tuple[list[str], str]:
    """The comment lines at the top of `code` (they go above the new entry), and the rest."""
    import textwrap

    lines = textwrap.dedent(code).strip().splitlines()
    k = next((i for i, line in enumerate(lines) if not line.lstrip().startswith("#")), len(lines))
    return [line.strip() for line in lines[:k]], "\n".join(lines[k:])


def _entry(code: str) -> cst.DictElement | None:
    """`code` as a dict entry (`"KEY": value`, comment lines above it allowed), or None when it is not one."""
    import textwrap

    _, code = _comment_lines(code)
    try:
        node = cst.parse_expression("{" + textwrap.dedent(code).strip() + "}")
    except (cst.ParserSyntaxError, RecursionError):
        return None
    if isinstance(node, cst.Dict) and len(node.elements) == 1 and isinstance(node.elements[0], cst.DictElement):
        return node.elements[0].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return None


def _element_or_entry(code: str) -> None:
    """Option check at load time: one expression, or one dict entry `key: value`; not several elements (`"D", "E"`
    is a tuple written without parentheses: one step adds one element)."""
    import textwrap

    if _entry(code) is not None:
        return
    check_expression(code)
    try:
        node = cst.parse_expression(textwrap.dedent(code).strip())
    except (cst.ParserSyntaxError, RecursionError):
        return  # parse_expression says what is wrong, when the step runs
    if isinstance(node, cst.Tuple) and not node.lpar:
        raise ValueError(f"must be one element, got {len(node.elements)} ({line_text(code)!r}): give each its own "
                         f"step, or write a tuple element in parentheses")



def _opening(literal: cst.CSTNode) -> object:
    bracket = getattr(literal, "lbracket", None) or getattr(literal, "lbrace", None)
    if bracket is None and getattr(literal, "lpar", None):
        bracket = literal.lpar[0]
    return getattr(bracket, "whitespace_after", None)


@register
@dataclass(frozen=True, kw_only=True)
class AddElement(Operation):
    """Add an element right after `after` in the one list/tuple/set literal that holds `after`."""

    op: Literal["add_element"]
    after: str = option(check=check_expression, description="an element of the literal; the new one follows it")
    code: str = option(check=_element_or_entry, description="the new element, an expression; or a dict entry "
                                                            "`key: value`, after the entry whose key is `after`")
    within: str | None = option(default=None, description=WITHIN)

    def describe(self) -> str:
        return f"add `{line_text(self.code)}` after `{line_text(self.after)}` in its literal" + (
            f" in `{self.within}`" if self.within else "")

    def anchor(self) -> str:
        return f"{self.within or 'the module'}: literal holding `{line_text(self.after)}`"

    @attempt
    def apply(self, module: cst.Module) -> Outcome:
        entry = _entry(self.code)
        if entry is not None:
            return self._add_entry(module, entry)
        value = parse_expression(self.code)
        after_key, new_key = expression_key(self.after), expression_key(self.code)
        scope = scope_path(module, self.within)
        targets = _unpacking_targets(scope[-1])
        # `*X` unpacks X: it is not the element X (nor a match for `after: X`); `req, out = pair()` are names to
        # unpack into, not a literal (the value side would not grow)
        literals, (lit, keys) = self._holding(module, scope, _LITERALS, lambda e: None if isinstance(
            e, cst.StarredElement) else e.value, new_key, skip=targets, what=("list, tuple or set literal holds",
                                                                              "literals hold"))
        if new_key in keys:
            return AlreadyApplied(lit)
        new = cst.Element(value=value)
        elements = insert_item(lit.elements, keys.index(after_key) + 1, new, _opening(lit))
        if isinstance(lit, cst.Tuple) and len(elements) == 2 and not lit.lpar:
            return self._refuse_bare_tuple(lit)
        return Changed(literals.replace(lit, lit.with_changes(elements=elements)), inserted=(), anchor=lit)

    def _holding(self, module: cst.Module, scope, kinds: tuple, item, new_key: str | None, *,
                 skip: set[int] = frozenset(), what: tuple[str, str]):
        """The literals of `kinds` under the scope, and the one that holds `after` with the keys of its items
        (`item` gives the node an item is compared by, None for one that is never `after`). None is AnchorNotFound,
        with the items that read alike as candidates; several are AnchorAmbiguous, unless each holds `new_key`
        too (the first is given: the step is applied there)."""
        after_key = expression_key(self.after)
        literals = expressions_under(scope, kinds)
        found = []
        for lit in literals:
            if id(lit) in skip:
                continue
            keys = [node_key(module, node) if (node := item(e)) is not None else None for e in lit.elements]
            if after_key in keys:
                found.append((lit, keys))
        if not found:
            texts = {line_text(module.code_for_node(node)): lit for lit in literals for e in lit.elements
                     if (node := item(e)) is not None}
            raise AnchorNotFound(f"no {what[0]} `{line_text(self.after)}`",
                                 candidates=[Candidate(f"`{t}`", node=texts[t])
                                             for t in near(line_text(self.after), list(texts))])
        if len(found) > 1 and not all(new_key in keys for _, keys in found):
            raise AnchorAmbiguous(f"{len(found)} {what[1]} `{line_text(self.after)}`",
                                  candidates=[Candidate(f"`{line_text(module.code_for_node(lit))}`", node=lit)
                                              for lit, _ in found])
        return literals, found[0]

    def _add_entry(self, module: cst.Module, entry: cst.DictElement) -> Outcome:
        """A dict entry: into the one dict literal under `within` with a key equal to `after` (compared as code),
        right after that entry; already applied when the dict has the new key with the same value."""
        after_key, new_key = expression_key(self.after), node_key(module, entry.key)
        dicts, (lit, keys) = self._holding(module, scope_path(module, self.within), (cst.Dict,), lambda e: e.key if
                                           isinstance(e, cst.DictElement) else None, new_key,
                                           what=("dict literal has the key", "dict literals have the key"))
        if new_key in keys:
            have = lit.elements[keys.index(new_key)]
            if node_key(module, have.value) == expression_key(module.code_for_node(entry.value)):
                return AlreadyApplied(lit)
            # a later entry of the key wins in a dict display: the step's value would not be the one read
            raise Conflict(f"the dict already has the key `{line_text(module.code_for_node(entry.key))}` with another "
                           f"value: `{line_text(module.code_for_node(have.with_changes(comma=cst.MaybeSentinel.DEFAULT)))}`",
                           candidates=[Candidate(f"`{line_text(module.code_for_node(have.key))}`", node=have)])
        if any(isinstance(e, cst.StarredDictElement) for e in lit.elements[keys.index(after_key) + 1:]):
            raise Conflict(f"a `**` unpacking follows `{line_text(self.after)}` in the dict: it may set the new key "
                           f"too, and the later one wins", candidates=[Candidate(f"`{line_text(self.after)}`", node=lit)])
        at = keys.index(after_key) + 1
        elements = insert_item(lit.elements, at, entry, lit.lbrace.whitespace_after)
        comments, _ = _comment_lines(self.code)
        above = elements[at - 1].comma
        if comments and isinstance(above, cst.Comma) and isinstance(above.whitespace_after, cst.ParenthesizedWhitespace):
            # the code's comment lines above the new entry, at the entries' indentation
            ws = above.whitespace_after
            lines = tuple(cst.EmptyLine(indent=False, whitespace=ws.last_line, comment=cst.Comment(c)) for c in comments)
            elements[at - 1] = elements[at - 1].with_changes(comma=above.with_changes(
                whitespace_after=ws.with_changes(empty_lines=(*ws.empty_lines, *lines))))
        return Changed(dicts.replace(lit, lit.with_changes(elements=elements)), inserted=(), anchor=lit)

    def _refuse_bare_tuple(self, lit: cst.CSTNode) -> Outcome:
        from .base import CannotApply

        return CannotApply(AnchorNotFound("a one-element tuple without parentheses cannot take a new element here",
                                          candidates=[Candidate("use replace_expression", node=lit)]))


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
