"""`replace_leading_comments`: replace the comment lines at the top of a module, before its first statement (a
licence or copyright header, an SPDX line, a shebang), as a whole.

Example (a team's copyright line on a file of sglang 0.5.9)::

    - op: replace_leading_comments
      file: srt/sampling/sampling_params.py
      match: |                                   # the lines as the release has them ("" : the file has none)
        # Copyright 2023-2024 SGLang Team
        # Licensed under the Apache License, Version 2.0 (the "License");
      code: |
        # Copyright 2023-2025 SGLang Team and TeamX
        # Licensed under the Apache License, Version 2.0 (the "License");

`match` and `code` are compared with the module's leading lines (comments and the blank lines among them, up to the
first statement or docstring), spaces at the ends of lines and blank lines below the last comment aside; the blank
lines between the comments and the code stay as they were unless `code` ends with its own. These lines are not
code: no statement anchors them, so the whole block is the anchor.

With `above` (a statement, a `def`, `class` or other compound statement written as its header with a block of
`...`, as `replace_statements` matches headers) and optionally `within` (a class or function, dotted), the comment
lines right above that statement, wherever it is, are the ones replaced: what `specpatch import` writes for a hunk
that rewords the comment above a function or a statement and leaves the code alone (a replacement of the code
around it would fall with any edit upstream makes to that code)::

    - op: replace_leading_comments
      file: srt/entrypoints/http_server.py
      above: |
        @app.api_route("/set_internal_state", methods=["POST", "PUT"])
        async def set_internal_state(obj: SetInternalStateReq, request: Request):
            ...
      match: "# fastapi implicitly converts json in the request to obj (dataclass)"
      code: "# fastapi converts the request's JSON to obj (a dataclass)"

The lines replaced are the block of comment lines right above the statement (an earlier block, after a blank line,
is not its own: a section's heading, a licence above a module's first statement); the blank lines around it stay.

Answers: *changed* (the leading lines are `match`: they become `code`); *already applied* (they are `code`, or hold
every line of it in order, among others, and none of the lines of `match` that `code` leaves out);
*cannot apply* (they are something else: upstream changed them, with the first of them as the candidate; with
`above`, also: no statement or several are `above`).
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from typing import Literal

import libcst as cst

from ..errors import AnchorAmbiguous, AnchorNotFound, Candidate, Conflict, RecipeError
from ..model import option
from ._code import WITHIN, blocks_under, fingerprint, first_line, line_text, parse_block, scope_path
from .base import AlreadyApplied, Changed, Operation, Outcome, attempt, register


def _lines(text: str) -> list[str]:
    """The lines, without the spaces at their ends and the blank lines at the end of the block."""
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _blank_tail(text: str) -> int:
    lines = text.splitlines()
    return len(lines) - len(_lines(text)) if lines else 0


_CODING = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")  # PEP 263


def _declared_encoding(text: str) -> str | None:
    """The encoding a coding line of the first two lines declares (PEP 263), else None."""
    for line in text.splitlines()[:2]:
        m = _CODING.match(line)
        if m:
            return m.group(1)
    return None


def _codec(name: str) -> str:
    try:
        found = codecs.lookup(name).name
    except LookupError:
        return name
    return "utf-8" if found == "utf-8-sig" else found  # a BOM says UTF-8 too


def _header_text(module: cst.Module) -> str:
    # (an empty module renders as one newline: no header is no text)
    return cst.Module(body=[], header=module.header).code if module.header else ""


@register
@dataclass(frozen=True, kw_only=True)
class ReplaceLeadingComments(Operation):
    """Replace the comment lines at the top of the module (before its first statement) as a whole."""

    op: Literal["replace_leading_comments"]
    match: str = option(description="the module's leading comment lines as the release has them (\"\": none)")
    code: str = option(description="the leading comment lines to put in their place")
    above: str | None = option(default=None, description="a statement (a compound one as its header with a block of "
                               "`...`): the comment lines right above it are replaced, not the module's top")
    within: str | None = option(default=None, description=WITHIN)

    def __post_init__(self) -> None:
        for name in ("match", "code"):
            text = getattr(self, name)
            if any(line.strip() and not line.lstrip().startswith("#") for line in text.splitlines()):
                raise ValueError(f"`{name}` holds lines that are not comments: this step changes comment lines only")
        if _lines(self.match) == _lines(self.code):
            raise ValueError("`match` and `code` are the same lines: there is nothing to replace")

    def describe(self) -> str:
        if self.above is not None:
            return f"replace the comment lines above `{line_text(self.above)}`"
        return "replace the module's leading comment lines"

    def anchor(self) -> str:
        first = next((line for line in _lines(self.match) if line), "")
        if self.above is not None:
            return f"{self.within or 'the module'}: the comment lines above `{line_text(self.above)}`"
        return f"the module's leading comments: `{first}`" if first else "the module's top (no leading comments)"

    @attempt
    def apply(self, module: cst.Module) -> Outcome:
        if self.above is not None:
            return self._above(module)
        have = _lines(_header_text(module))
        if _judged(have, self.match, self.code, "the module's leading comment lines"):
            return AlreadyApplied(None)
        declared = _declared_encoding(self.code)
        if _codec(declared or "utf-8") != _codec(module.encoding):
            says = f"declare the encoding `{declared}`" if declared else "declare no encoding"
            raise Conflict(f"the new lines {says}, and the file is `{module.encoding}`: Python would decode it "
                           f"otherwise, and every non-ASCII character of its strings would change",
                           hint="keep the file's coding line (`# -*- coding: ... -*-`) as it is in `code`")
        lines = self.code.splitlines()
        if not _blank_tail(self.code):  # the blank lines between the comments and the code stay as they were
            lines += [""] * _blank_tail(_header_text(module))
        header = [cst.EmptyLine(indent=False, whitespace=cst.SimpleWhitespace(line[:len(line) - len(line.lstrip())]),
                                comment=cst.Comment(line.strip()) if line.strip() else None)
                  for line in (ln.rstrip() for ln in lines)]
        return Changed(module.with_changes(header=header))

    def _above(self, module: cst.Module) -> Outcome:
        """The comment lines right above the one statement that is `above`."""
        from .replace_statements import _header_only, header_key

        wanted = parse_block(self.above, module, what="above")
        if len(wanted) != 1:
            raise RecipeError("`above` must be one statement (a compound one as its header with a block of `...`)")
        header = _header_only(wanted)
        key = header_key(cst.Module(body=[]), wanted[0]) if header else fingerprint(cst.Module(body=[]), wanted[0])
        found = [stmt for _, statements in blocks_under(scope_path(module, self.within)) for stmt in statements
                 if type(stmt) is type(wanted[0])
                 and (header_key(module, stmt) if header else fingerprint(module, stmt)) == key]
        where = f"`{self.within}`" if self.within else "the module"
        if not found and isinstance(wanted[0], (cst.FunctionDef, cst.ClassDef)):
            # a def or class whose decorators or signature upstream changed is still the one of that name: the
            # comment above it is its own
            named = [stmt for _, statements in blocks_under(scope_path(module, self.within)) for stmt in statements
                     if type(stmt) is type(wanted[0]) and stmt.name.value == wanted[0].name.value]
            found = named if len(named) == 1 else found
        if not found:
            raise AnchorNotFound(f"no statement `{line_text(self.above)}` in {where}")
        if len(found) > 1:  # the one whose comment lines are `match` (or `code` already) is the anchor
            wanted_lines = [[ln.strip() for ln in _lines(t)] for t in (self.match, self.code)]
            mine = [stmt for stmt in found if _comment_lines(stmt.leading_lines) in wanted_lines]
            found = mine if len(mine) == 1 else found
        if len(found) > 1:
            raise AnchorAmbiguous(f"{len(found)} statements are `{line_text(self.above)}` in {where}",
                                  candidates=[Candidate(f"`{first_line(module, s)}`", node=s) for s in found])
        stmt = found[0]
        # above the module's first statement, libcst holds the lines in the module's header (a licence there too:
        # only the block of comment lines right above the statement is the step's)
        first = bool(module.body) and stmt is module.body[0]
        leading = [*module.header, *stmt.leading_lines] if first else list(stmt.leading_lines)
        k0, k1 = _comment_span(leading)
        have = _comment_lines(leading)
        if _judged(have, self.match, self.code, f"the comment lines above `{first_line(module, stmt)}`",
                   strip=True):
            return AlreadyApplied(stmt)
        lines = [cst.EmptyLine(indent=True, comment=cst.Comment(line)) if line else
                 cst.EmptyLine(indent=False, whitespace=cst.SimpleWhitespace(""))
                 for line in (ln.strip() for ln in _lines(self.code))]
        now = [*leading[:k0], *lines, *leading[k1:]]
        if first:
            return Changed(module.with_changes(header=now, body=[stmt.with_changes(leading_lines=()),
                                                                 *module.body[1:]]), inserted=(), anchor=stmt)
        changed = stmt.with_changes(leading_lines=now)
        return Changed(module.deep_replace(stmt, changed), inserted=(), anchor=changed)


def _comment_span(leading) -> tuple[int, int]:
    """Where the block of comment lines right above a statement is among its leading lines: the last comment lines
    with no blank line between them (an earlier block, a section's heading or a licence, is not the statement's);
    the blank lines below it stay."""
    marked = [i for i, line in enumerate(leading) if line.comment is not None]
    if not marked:
        return len(leading), len(leading)
    k0 = k1 = marked[-1] + 1
    while k0 > 0 and leading[k0 - 1].comment is not None:
        k0 -= 1
    return k0, k1


def _comment_lines(leading) -> list[str]:
    k0, k1 = _comment_span(leading)
    return [line.comment.value for line in leading[k0:k1]]


def _judged(have: list[str], match: str, code_text: str, what: str, *, strip: bool = False) -> bool:
    """Whether the lines `have` are the step's code already (True) or its `match` (False); else AnchorNotFound, naming
    the first line that differs. Already applied: the lines of `code`, in order, among others (upstream has the
    header, and a line more), and none of those of `match` that `code` leaves out."""
    def norm(text: str) -> list[str]:
        return [line.strip() for line in _lines(text)] if strip else _lines(text)

    code = [line for line in norm(code_text) if line]
    lines = iter(have)
    want = norm(match)
    dropped = set(want) - set(code)  # lines the step takes away: still there, it has not run
    if have == norm(code_text) or (have != want and code and all(line in lines for line in code)
                                   and not dropped & set(have)):
        return True
    if have != want:
        if not have:
            raise AnchorNotFound(f"{what} are not those of `match`: there are none")
        k = next((i for i, (a, b) in enumerate(zip(have, want)) if a != b), min(len(have), len(want)))
        line = have[k] if k < len(have) else have[-1]
        if k < len(have):
            where = f"line {k + 1} is `{line}`" + (f" where `match` has `{want[k]}`" if k < len(want) else
                                                   ", past the end of `match`")
        else:
            where = f"they end at line {len(have)}, `match` goes on with `{want[k]}`"
        raise AnchorNotFound(f"{what} are not those of `match`: {where}",
                             candidates=[Candidate(f"`{line or '(a blank line)'}`")])
    return False
