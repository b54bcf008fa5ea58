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

Answers: *changed* (the leading lines are `match`: they become `code`); *already applied* (they are `code`, or hold
every line of it in order, among others, and none of the lines of `match` that `code` leaves out);
*cannot apply* (they are something else: upstream changed them, with the first of them as the candidate).
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from typing import Literal

import libcst as cst

from ..errors import AnchorNotFound, Candidate, Conflict
from ..model import option
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

    def __post_init__(self) -> None:
        for name in ("match", "code"):
            text = getattr(self, name)
            if any(line.strip() and not line.lstrip().startswith("#") for line in text.splitlines()):
                raise ValueError(f"`{name}` holds lines that are not comments: this step changes comment lines only")
        if _lines(self.match) == _lines(self.code):
            raise ValueError("`match` and `code` are the same lines: there is nothing to replace")

    def describe(self) -> str:
        return "replace the module's leading comment lines"

    def anchor(self) -> str:
        first = next((line for line in _lines(self.match) if line), "")
        return f"the module's leading comments: `{first}`" if first else "the module's top (no leading comments)"

    @attempt
    def apply(self, module: cst.Module) -> Outcome:
        have = _lines(_header_text(module))
        code = [line for line in _lines(self.code) if line]
        lines = iter(have)
        want = _lines(self.match)
        dropped = set(want) - set(code)  # lines the step takes away: still there, it has not run
        if have == _lines(self.code) or (have != want and code and all(line in lines for line in code)
                                         and not dropped & set(have)):
            # the lines of `code`, in order, among the module's own (upstream has the header, and a line more)
            return AlreadyApplied(None)
        if have != want:
            if not have:
                raise AnchorNotFound("the module's leading comment lines are not those of `match`: it has none")
            k = next((i for i, (a, b) in enumerate(zip(have, want)) if a != b), min(len(have), len(want)))
            line = have[k] if k < len(have) else have[-1]
            if k < len(have):
                where = f"line {k + 1} is `{line}`" + (f" where `match` has `{want[k]}`" if k < len(want) else
                                                       ", past the end of `match`")
            else:
                where = f"they end at line {len(have)}, `match` goes on with `{want[k]}`"
            raise AnchorNotFound(f"the module's leading comment lines are not those of `match`: {where}",
                                 candidates=[Candidate(f"`{line or '(a blank line)'}`")])
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
