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


def _reference_yaml(text: str):
    """What recipes were read with before libyaml: the pure-Python _LineLoader, twice (node, then data)."""
    import yaml

    from patcher.recipe import _LineLoader

    return yaml.compose(text, Loader=_LineLoader), yaml.load(text, Loader=_LineLoader)


def test_recipe_yaml_reads_the_same_with_libyaml():
    from pathlib import Path

    from patcher.recipe import _compose_and_load, _lines

    root = Path(__file__).resolve().parents[1]
    texts = [p.read_text(encoding="utf-8") for d in ("recipes", "fixtures", "tests")
             for p in sorted((root / d).rglob("*.y*ml"))]
    texts += ["", "a: 1\n", "- x\n- {y: [1, 2.5, null, yes, '3']}\n", "k: |\n  one\n  two\n", "&a x: 1\n",
              "s: \"tab\\there\"\nt: 'it''s'\nu: ~\nv: 0o17\nw: 2001-12-14\n"]
    assert len(texts) > 10
    for text in texts:
        node, data = _compose_and_load(text)
        ref_node, ref_data = _reference_yaml(text)
        assert data == ref_data
        assert (node is None) == (ref_node is None)
        if node is not None:
            assert _lines(node) == _lines(ref_node)


@pytest.mark.parametrize("text", ["a: &x [1]\nb: *x\n", "a: [1\n", "a: b: c\n", "- a\nb: 1\n", "a: 1\n---\nb: 2\n"])
def test_recipe_yaml_refusals_are_the_reference_ones(text):
    import yaml

    from patcher.recipe import _compose_and_load

    with pytest.raises(yaml.YAMLError) as fast:
        _compose_and_load(text)
    with pytest.raises(yaml.YAMLError) as reference:
        _reference_yaml(text)
    assert str(fast.value) == str(reference.value)
