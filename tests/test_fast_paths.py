"""The faster helpers give exactly the answers of the slow ones they replaced (difflib's search, one big regex,
ast.literal_eval)."""

from __future__ import annotations

import ast
import difflib
import random
import re

import libcst as cst
import pytest

from patcher.anchors import line_of_text, string_value
from patcher.diff import _Matcher, unified_diff


def _regex_line_of_text(text: str, snippet: str, start: int = 0) -> int | None:
    """line_of_text as it was: one multi-line regex."""
    lines = [ln.strip() for ln in snippet.strip("\n").splitlines()]
    if not lines or not lines[0]:
        return None
    pattern = r"\n".join(r"^[ \t]*" + re.escape(ln) + r"[ \t]*\r?$" for ln in lines)
    m = re.compile(pattern, re.M).search(text, start)
    return None if m is None else text.count("\n", 0, m.start()) + 1


def _edited(rng: random.Random, alphabet: str, size: int) -> tuple[list[str], list[str]]:
    a = [rng.choice(alphabet) for _ in range(size)]
    b = list(a)
    for _ in range(rng.randint(0, 4)):
        pos = rng.randint(0, len(b))
        roll = rng.random()
        if roll < 0.5:
            b[pos:pos] = [rng.choice(alphabet) for _ in range(rng.randint(1, 20))]
        elif roll < 0.8 and b:
            del b[pos:pos + rng.randint(1, 10)]
        else:
            b[pos:pos] = b[max(0, pos - 15):pos]  # a repeated block: ties between equally long runs
    return a, b


@pytest.mark.parametrize("min_run", [1, 2, 3, 16])
def test_matcher_finds_difflibs_blocks(min_run, monkeypatch):
    monkeypatch.setattr(_Matcher, "MIN_RUN", min_run)  # small bounds take the fast path on tiny inputs too
    rng = random.Random(min_run)
    for _ in range(600):
        a, b = _edited(rng, rng.choice(["ab", "abc", "abcdef"]), rng.randint(0, 150))
        want = difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks()
        assert _Matcher(None, a, b, autojunk=False).get_matching_blocks() == want, (a, b)


def test_matcher_on_a_long_file_with_repeated_lines(monkeypatch):
    body = []
    for k in range(400):
        body += ["        parser.add_argument(\n", f'            "--flag-{k}",\n', "            type=int,\n",
                 "        )\n", "\n"]
    after = body[:1000] + ["        parser.add_argument(\n", '            "--new",\n', "        )\n"] + body[1000:]
    after = after[:1500] + after[1510:]
    want = difflib.SequenceMatcher(None, body, after, autojunk=False).get_opcodes()
    assert _Matcher(None, body, after, autojunk=False).get_opcodes() == want
    fast = unified_diff("".join(body).encode(), "".join(after).encode(), "f.py")
    monkeypatch.setattr("patcher.diff._Matcher", difflib.SequenceMatcher)
    assert fast == unified_diff("".join(body).encode(), "".join(after).encode(), "f.py")
    assert fast.count("\n@@") == 2


def test_line_of_text_is_the_regex_search():
    rng = random.Random(3)
    pieces = ["a", "b", "x = 1", "", " ", "\t", "\r", "(", ")", "\x0c"]
    for _ in range(5000):
        rows = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 3))) for _ in range(rng.randint(0, 12))]
        text = rng.choice(["\n", "\r\n"]).join(rows) + rng.choice(["", "\n"])
        i, k = rng.randint(0, max(0, len(rows) - 1)), rng.randint(0, 4)
        snippet = "\n".join((rng.choice(["", "  "]) + r.strip()) if rng.random() < 0.8 else rng.choice(pieces)
                            for r in rows[i:i + k])
        start = rng.randint(0, len(text))
        assert line_of_text(text, snippet, start) == _regex_line_of_text(text, snippet, start), (text, snippet)


@pytest.mark.parametrize("literal", ['"--flag"', "'--flag'", '""', "''", '"it\'s"', "'say \"hi\"'", '"é"',
                                     '"a\\"b"', "'''x'''", '"""x"""', 'r"--x\\d"', 'b"x"', 'f"x"', 'u"x"',
                                     '"\\t"'])
def test_string_value_is_literal_eval(literal):
    node = cst.parse_expression(literal)
    value = ast.literal_eval(literal) if not literal.startswith("f") else None
    assert string_value(node) == (value if isinstance(value, str) else None)
