"""Recipe parameters into code: each `{{name}}` becomes a Python literal of its value, placed through libcst.

A value is never pasted into the code as text. The template is parsed with a sentinel name where each placeholder
stands, and each sentinel is then replaced, by its place in the syntax tree:

- an expression (`threshold = {{n}}`): the value's literal (`8`, `(-1)`, `0.5`, `True`, `'a "quoted" text'`);
- inside a string (`EnvStr("{{mode}}")`, a docstring, an f-string's text): the value's characters, escaped for that
  string, so that the string ends where the template's string ends;
- part of a name (`def get_{{label}}`), or where only a name can stand (`{{obj}}.field`, `self.{{attr}}`,
  `def {{name}}`, a keyword, a parameter, what an assignment binds): only a value that is an identifier, written as
  that name;
- inside a comment: only a value that is one printable line.

Anything else (a value that cannot be represented there, a sentinel left over) is refused with a ParamError naming
the parameter. The rendered code is compiled as a last check that its statements are the template's statements.
"""

from __future__ import annotations

import ast
import functools
import keyword
import math
import re
import textwrap
from typing import Any

import libcst as cst

from .errors import ParamError

_PARAM = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


def check_value(name: str, declared: str, value: Any) -> None:
    """Refuse a value that is not of the parameter's declared type, or a float that no literal writes (nan, inf)."""
    ok = {"int": isinstance(value, int) and not isinstance(value, bool),
          "float": isinstance(value, (int, float)) and not isinstance(value, bool),
          "bool": isinstance(value, bool),
          "str": isinstance(value, str)}.get(declared, False)
    if not ok:
        raise ParamError(f"parameter `{name}` is declared `{declared}`, its value {value!r} is a "
                         f"{type(value).__name__}")
    if declared == "float" and not math.isfinite(value):
        raise ParamError(f"parameter `{name}`: {value!r} is not a finite number",
                         hint="a float parameter takes a finite number such as 0.5 or 1e-3")


def literal(value: Any) -> cst.BaseExpression:
    """The libcst literal of a parameter value (negative numbers in parentheses: `(-1)` is one operand anywhere)."""
    if isinstance(value, bool):
        return cst.Name("True" if value else "False")
    if isinstance(value, (int, float)):
        node = cst.parse_expression(repr(value))
        if value < 0:
            node = node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return node
    if isinstance(value, str):
        return cst.SimpleString(repr(value))
    raise ParamError(f"a parameter value of type {type(value).__name__} cannot be written as a literal")


def render(template: str, values: dict[str, Any], *, what: str = "code") -> str:
    """`template` with each `{{name}}` replaced as the module docstring says; the template is dedented."""
    if not _PARAM.search(template):
        return template
    try:  # the variants of a recipe render the same templates with the same constants many times
        key = tuple(sorted((k, type(v).__name__, v) for k, v in values.items()))
        hash(key)
    except TypeError:
        return _render(template, values, what)
    return _render_cached(template, key, what)


@functools.lru_cache(maxsize=1024)
def _render_cached(template: str, key: tuple, what: str) -> str:
    return _render(template, {k: v for k, _, v in key}, what)


def _render(template: str, values: dict[str, Any], what: str) -> str:
    text = textwrap.dedent(template)
    sentinels: dict[str, str] = {}

    def sentinel(m: re.Match) -> str:
        name = m.group(1)
        if name not in values:
            raise ParamError(f"the step's {what} uses `{{{{{name}}}}}`, which is no parameter of the recipe")
        token = f"__specpatch_param_{len(sentinels)}__"
        while token in text:
            token = f"_{token}"
        sentinels[token] = name
        return token

    marked = _PARAM.sub(sentinel, text)
    try:
        module = cst.parse_module(marked)
    except cst.ParserSyntaxError as exc:
        raise ParamError(f"the step's {what} does not parse with its parameters marked: {exc.message} "
                         f"(line {exc.raw_line})") from None
    try:
        code = module.visit(_Substitute(sentinels, values)).code
    except ParamError:
        raise
    except (TypeError, ValueError, cst.CSTValidationError) as exc:  # a literal where the syntax wants a name
        names = ", ".join(f"`{n}`" for n in dict.fromkeys(sentinels.values()))
        raise ParamError(f"parameter(s) {names} stand where a value cannot go in the step's {what} ({exc})") from None
    left = [sentinels[t] for t in sentinels if t in code]
    if left:
        raise ParamError(f"parameter `{left[0]}` stands where no value can be written safely in the step's {what}")
    try:
        compile(code, "<recipe code>", "exec", dont_inherit=True, flags=ast.PyCF_ONLY_AST)
    except SyntaxError as exc:
        names = ", ".join(f"`{n}`" for n in dict.fromkeys(sentinels.values()))
        raise ParamError(f"the step's {what} is not valid Python with parameter(s) {names} as values: {exc.msg} "
                         f"(line {exc.lineno})") from None
    return code


def _in_string(value: Any, *, raw: bool, fstring: bool, name: str) -> str:
    """The characters of a value for the inside of a string literal whose quotes stay the template's."""
    text = value if isinstance(value, str) else repr(value) if isinstance(value, float) else str(value)
    if raw:
        if any(c in text for c in "\\'\"") or not text.isprintable():
            raise ParamError(f"parameter `{name}`: {text!r} cannot be written inside a raw string")
        out = text
    else:
        # every backslash, control and non-ASCII character escaped, and both quote characters: safe in any quote kind
        out = text.encode("unicode_escape").decode("ascii").replace('"', '\\"').replace("'", "\\'")
    if fstring:
        out = out.replace("{", "{{").replace("}", "}}")
    return out


#: where only a name can stand: an attribute's name, a def's or class's, a keyword, a parameter, `global`, an
#: import's `as`, and what an assignment, a loop or a `with ... as` binds
_NAME_SLOTS: dict[type, tuple[str, ...]] = {
    cst.Attribute: ("value", "attr"), cst.FunctionDef: ("name",), cst.ClassDef: ("name",), cst.Arg: ("keyword",),
    cst.Param: ("name",), cst.NameItem: ("name",), cst.AsName: ("name",), cst.AssignTarget: ("target",),
    cst.AnnAssign: ("target",), cst.AugAssign: ("target",), cst.For: ("target",),
}


class _Substitute(cst.CSTTransformer):
    def __init__(self, sentinels: dict[str, str], values: dict[str, Any]) -> None:
        super().__init__()
        self.sentinels = sentinels
        self.values = values
        self.pattern = re.compile("|".join(re.escape(t) for t in sorted(sentinels, key=len, reverse=True)))
        self.raw: list[bool] = []  #: for each f-string being visited, whether it is raw
        self.objects: set[int] = set()  #: the placeholders where only a name can stand: written as names

    def _names(self, *nodes: Any) -> None:
        """Mark the placeholders among `nodes` (Name nodes where only a name can stand) to be written as names."""
        for node in nodes:
            if isinstance(node, cst.Name) and node.value in self.sentinels:
                self.objects.add(id(node))

    def on_visit(self, node: cst.CSTNode) -> bool:
        self._names(*(getattr(node, field) for field in _NAME_SLOTS.get(type(node), ())))
        return super().on_visit(node)

    def _sub(self, text: str, fn) -> str:
        return self.pattern.sub(lambda m: fn(self.sentinels[m.group(0)]), text)

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        self.raw.append("r" in node.start.lower())

    def leave_FormattedString(self, original: cst.FormattedString,
                              updated: cst.FormattedString) -> cst.FormattedString:
        self.raw.pop()
        return updated

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        if updated.value in self.sentinels and id(original) in self.objects:
            return updated.with_changes(value=self._identifier(self.sentinels[updated.value],
                                                               "where only a name can stand"))
        if updated.value in self.sentinels:
            node = literal(self.values[self.sentinels[updated.value]])
            return node.with_changes(lpar=updated.lpar, rpar=updated.rpar) if updated.lpar else node
        if self.pattern.search(updated.value):
            return updated.with_changes(value=self._sub(updated.value,
                                                        lambda name: self._identifier(name, "part of a name")))
        return updated

    def _identifier(self, name: str, where: str) -> str:
        """The value of parameter `name` where only a name can stand, or a ParamError."""
        value = self.values[name]
        if not (isinstance(value, str) and value.isidentifier() and not keyword.iskeyword(value)):
            raise ParamError(f"parameter `{name}` is {where}; {value!r} is not an identifier")
        return value

    def leave_SimpleString(self, original: cst.SimpleString, updated: cst.SimpleString) -> cst.SimpleString:
        if not self.pattern.search(updated.value):
            return updated
        prefix = updated.prefix.lower()
        if "b" in prefix:
            raise ParamError(f"parameter `{self._first(updated.value)}` stands in a bytes literal")
        new = updated.with_changes(value=self._sub(
            updated.value, lambda n: _in_string(self.values[n], raw="r" in prefix, fstring=False, name=n)))
        # the string must still be one literal whose value is the template's with the values in place
        expected = self._sub(ast.literal_eval(updated.value), lambda n: _plain(self.values[n]))
        if ast.literal_eval(new.value) != expected:
            raise ParamError(f"parameter `{self._first(updated.value)}` cannot be written inside this string")
        return new

    def leave_FormattedStringText(self, original: cst.FormattedStringText,
                                  updated: cst.FormattedStringText) -> cst.FormattedStringText:
        if not self.pattern.search(updated.value):
            return updated
        return updated.with_changes(value=self._sub(
            updated.value, lambda n: _in_string(self.values[n], raw=bool(self.raw and self.raw[-1]), fstring=True,
                                                name=n)))

    def leave_Comment(self, original: cst.Comment, updated: cst.Comment) -> cst.Comment:
        def line(name: str) -> str:
            text = _plain(self.values[name])
            if not text.isprintable():
                raise ParamError(f"parameter `{name}` stands in a comment; {text!r} is not one printable line")
            return text
        return updated.with_changes(value=self._sub(updated.value, line)) if self.pattern.search(updated.value) \
            else updated

    def _first(self, text: str) -> str:
        m = self.pattern.search(text)
        return self.sentinels[m.group(0)] if m else "?"


def _plain(value: Any) -> str:
    return value if isinstance(value, str) else repr(value) if isinstance(value, float) else str(value)
