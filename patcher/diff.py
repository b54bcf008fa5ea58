"""Unified diffs of bytes that `git apply` accepts: CRLF kept, "No newline at end of file" marked."""

from __future__ import annotations

import difflib
from bisect import bisect_left


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
    for group in _Matcher(None, a, b, autojunk=False).get_grouped_opcodes(context):
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


class _Matcher(difflib.SequenceMatcher):
    """difflib's SequenceMatcher with the same answers, found faster in long files with small edits.

    Without junk, `find_longest_match` returns the longest run of equal lines in the given ranges (earliest in `a`,
    then earliest in `b`); difflib finds it by looking at every pair of equal lines, which costs seconds on a
    6,000-line file full of blank lines and `)`. When the ranges share a common prefix or suffix of L lines, the
    answer is at least L long, and every run of L or more lines contains a line whose index is a multiple of L from
    the start: looking only at those lines, and extending each match both ways, finds every candidate. The same
    ranking then gives the same answer (checked against difflib by tests/test_diff_matcher.py)."""

    MIN_RUN = 16  #: below this lower bound, difflib's own search is as fast

    def find_longest_match(self, alo: int = 0, ahi: int | None = None, blo: int = 0,
                           bhi: int | None = None) -> difflib.Match:
        a, b = self.a, self.b
        ahi = len(a) if ahi is None else ahi
        bhi = len(b) if bhi is None else bhi
        if self.bjunk or self.bpopular:  # the proof above assumes no junk (autojunk=False, isjunk=None)
            return super().find_longest_match(alo, ahi, blo, bhi)
        prefix = 0
        while alo + prefix < ahi and blo + prefix < bhi and a[alo + prefix] == b[blo + prefix]:
            prefix += 1
        suffix = 0
        while ahi - suffix > alo and bhi - suffix > blo and a[ahi - 1 - suffix] == b[bhi - 1 - suffix]:
            suffix += 1
        bound = max(prefix, suffix)
        if bound < self.MIN_RUN:
            return super().find_longest_match(alo, ahi, blo, bhi)
        best = (-1, 0, 0)  # (size, -i, -j): larger is better
        b2j = self.b2j
        for i in range(alo + bound - 1, ahi, bound):
            js = b2j.get(a[i], ())
            for j in js[bisect_left(js, blo):]:
                if j >= bhi:
                    break
                start = 0
                while i - start > alo and j - start > blo and a[i - start - 1] == b[j - start - 1]:
                    start += 1
                end = 1
                while i + end < ahi and j + end < bhi and a[i + end] == b[j + end]:
                    end += 1
                candidate = (start + end, start - i, start - j)
                if candidate > best:
                    best = candidate
        size, i, j = best
        return difflib.Match(-i, -j, size)
