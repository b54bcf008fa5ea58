"""Code patterns: AST equality with `...` wildcards."""

from __future__ import annotations

import ast

import pytest

from patcher.patterns import Pattern, PatternError


def stmt(code: str) -> ast.stmt:
    return ast.parse(code).body[0]


@pytest.mark.parametrize("pattern, code", [
    ("batch_output = self.verify(...)", "batch_output = self.verify(batch, mode=1, *a, **k)"),
    ("batch_output = self.verify(...)", "batch_output = self.verify()"),
    ("batch_output = self.verify(...)", "batch_output = (\n    self.verify(  # comment\n        batch\n    )\n)"),
    ("x = ...", "x = [1, 2]"),
    ("f(..., k=...)", "f(a, k=b)"),
    ("self.verify(...)", "self.verify(batch)"),
    ("with ctx:\n    ...", "with ctx:\n    a = 1\n    b = 2"),
    ("if a:\n    ...\nelse:\n    ...", "if a:\n    x\nelif b:\n    y"),
    ("return ...", "return batch_output"),
    # a last argument `...`: the first arguments match, whatever follows (hostile rounds 13 and 14: a newcomer's
    # `uvicorn.run(app, ...)` and a team's `parser.add_argument("--flag", ...)` matched no call)
    ('parser.add_argument("--port", ...)', 'parser.add_argument("--port", type=int, default=30000, help="p")'),
    ("uvicorn.run(app, ...)", "uvicorn.run(app, host=h, port=p, loop='uvloop')"),
    ("f(a, ...)", "f(a)"),
    ("f(a, ...)", "f(a, b, *rest, **kw)"),
])
def test_matches(pattern, code):
    assert Pattern.parse(pattern).matches_statement(stmt(code))


@pytest.mark.parametrize("pattern, code", [
    ("batch_output = self.verify(...)", "batch_output = self.verifyx(batch)"),
    ("batch_output = self.verify(...)", "out = self.verify(batch)"),
    ("self.verify(...)", "out = self.verify(batch)"),           # an expression pattern matches expression statements
    ("f(..., k=...)", "f(a, b, k=c)"),                          # only `f(...)` alone means any arguments
    ("x = 1", "x = True"),                                      # 1 == True in Python, not in code
    ("x = 1", "x = 1.0"),
    ("if a:\n    ...", "if a:\n    x\nelse:\n    y"),           # the else arm must be absent as in the pattern
    ("x = self.a", "x = self.a.b"),
    ('parser.add_argument("--port", ...)', 'parser.add_argument("--host", type=str)'),
    ("f(a, b, ...)", "f(a)"),                                    # fewer arguments than the pattern's first ones
    ("f(a, ...)", "g(a, b)"),
])
def test_does_not_match(pattern, code):
    assert not Pattern.parse(pattern).matches_statement(stmt(code))


def test_expression_patterns_match_if_tests_ignoring_parentheses():
    test = ast.parse("(\n    a.is_extend()\n    or a.in_batch\n)", mode="eval").body
    assert Pattern.parse("a.is_extend() or a.in_batch").matches_expression(test)
    assert Pattern.parse("a.is_extend() or ...").matches_expression(test)
    assert not Pattern.parse("a.is_extend()").matches_expression(test)
    assert not Pattern.parse("x = a").matches_expression(test)


def test_kinds_and_description():
    assert Pattern.parse("self.verify(...)").is_expression
    assert not Pattern.parse("x = 1").is_expression
    assert Pattern.parse("with a:\n    ...").is_compound
    assert Pattern.parse("  x   =  f( ... )").describe() == "x = f(...)"


@pytest.mark.parametrize("text", ["", "x = ", "x = 1\ny = 2"])
def test_bad_patterns(text):
    with pytest.raises(PatternError):
        Pattern.parse(text)
