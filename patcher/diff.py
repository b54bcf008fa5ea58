"""Unified diffs of bytes that `git apply` accepts: CRLF kept, "No newline at end of file" marked."""

from __future__ import annotations

import difflib


def _lines(data: bytes) -> list[str]:
    # latin-1 maps every byte to one character: the diff is exact whatever the file's encoding; split on "\n"
    # only (str.splitlines would also split on \r, \x0c, \x85..., which git does not)
    text = data.decode("latin-1")
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def unified_diff(before: bytes, after: bytes, rel: str, context: int = 3) -> str:
    """A `diff --git`-style patch of one file whose paths are `a/<rel>` and `b/<rel>`; empty if equal."""
    if before == after:
        return ""
    a, b = _lines(before), _lines(after)
    out = [f"diff --git a/{rel} b/{rel}\n", f"--- a/{rel}\n", f"+++ b/{rel}\n"]
    for group in difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(context):
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        out.append(f"@@ -{_range(i1, i2)} +{_range(j1, j2)} @@\n")
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                out.extend(_mark(" ", a[a1:a2]))
                continue
            if tag in ("replace", "delete"):
                out.extend(_mark("-", a[a1:a2]))
            if tag in ("replace", "insert"):
                out.extend(_mark("+", b[b1:b2]))
    return "".join(out).encode("latin-1").decode("utf-8", errors="surrogateescape")


def _range(start: int, stop: int) -> str:
    length = stop - start
    first = start + 1 if length else start
    return f"{first}" if length == 1 else f"{first},{length}"


def _mark(prefix: str, lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        if line.endswith("\n"):
            out.append(prefix + line)
        else:
            out.append(prefix + line + "\n\\ No newline at end of file\n")
    return out
