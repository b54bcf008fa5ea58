"""`add_argparse_argument`: add a `parser.add_argument(...)` statement right after the one of a named flag.

Example::

    - op: add_argparse_argument
      file: srt/server_args.py
      function: ServerArgs.add_cli_args
      after_flag: --speculative-accept-threshold-acc
      code: |
        parser.add_argument(
            "--speculative-disable-batch-threshold",
            type=int,
            default=ServerArgs.speculative_disable_batch_threshold,
            help="Disable speculative decoding for decode batches larger than N requests (0 = always speculate).",
        )

The anchor is the *statement* holding the `add_argument` call (on any receiver: `parser`, a group...) that has the
flag as one of its positional string arguments, however the call is formatted: one line or many, comments inside,
a `)` inside a string, keyword arguments in any order. The new statement is inserted after the whole anchor
statement, never inside it, with the indentation of the block the anchor is in (also inside `if`/`with` blocks).

Answers: *changed*; *already applied* (the function already has an `add_argument` call for the new flag with the
same arguments); *cannot apply* (function or anchor flag missing or registered twice; the new flag already registered
with other arguments, or any other option string of the new call already registered on the same parser, its
argument groups included: argparse would refuse it when the parser is built). A subparser or a second parser made
in the function has option strings of its own. A parser made with `conflict_handler="resolve"` would take the second
registration (the new one silently replaces the flag): refused all the same, as a change a reviewer must see.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

import libcst as cst

from ..anchors import (body_of, code_of, find_function, insert_after, iter_calls_named, near, parse_statements,
                       same_code, string_value, walk_statements)
from ..errors import AnchorAmbiguous, AnchorNotFound, Candidate, Conflict, FailsAtRunTime, RecipeError
from ..model import option
from ._code import line_text
from .base import AlreadyApplied, Changed, Operation, Outcome, attempt, register


def flags_of(stmt: cst.CSTNode, receiver: str | None = None, groups: dict[str, str] | None = None) -> list[str]:
    """The option strings registered by an `add_argument(...)` statement (empty for any other statement); with
    `receiver`, those of calls that register on that parser only (`parser` or one of its argument groups, whose
    names `groups` maps to their parser: not a subparser or a second parser)."""
    out: list[str] = []
    for call in iter_calls_named(stmt, "add_argument"):
        if receiver is not None and parser_of(call, groups or {}) != receiver:
            continue
        for arg in call.args:
            if arg.keyword is None and arg.star == "":
                value = string_value(arg.value)
                if value is not None:
                    out.append(value)
    return out


_GROUP_METHODS = ("add_argument_group", "add_mutually_exclusive_group")


def parser_of(call: cst.Call, groups: dict[str, str]) -> str | None:
    """The parser an `X.add_argument(...)` call registers its option strings on, as code: an argument group or a
    mutually exclusive group shares its parser's option strings (argparse refuses `--x` on a group when the parser
    has it), so `group.add_argument` with `group = parser.add_argument_group(...)` registers on `parser`."""
    fn = call.func
    return _parser_of_expr(fn.value, groups) if isinstance(fn, cst.Attribute) else None


def _parser_of_expr(expr: cst.BaseExpression, groups: dict[str, str]) -> str:
    while (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)
           and expr.func.attr.value in _GROUP_METHODS):  # parser.add_argument_group("x").add_argument(...)
        expr = expr.func.value
    code = _code(expr)
    seen: set[str] = set()
    while code in groups and code not in seen:
        seen.add(code)
        code = groups[code]
    return code


def argument_groups(fn: cst.CSTNode) -> dict[str, str]:
    """The names a function binds to argument groups, each with the receiver it made the group on:
    `g = parser.add_argument_group("x")` gives {"g": "parser"} (also `self.g = ...`, nested groups, `with ... as g`)."""
    groups: dict[str, str] = {}

    class Visitor(cst.CSTVisitor):
        def _bind(self, target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
            if (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
                    and value.func.attr.value in _GROUP_METHODS):
                groups[_code(target)] = _parser_of_expr(value.func.value, groups)

        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                self._bind(target.target, node.value)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            self._bind(node.target, node.value)

        def visit_WithItem(self, node: cst.WithItem) -> None:
            if node.asname is not None:
                self._bind(node.asname.name, node.item)

        def on_visit(self, node: cst.CSTNode) -> bool:
            return not isinstance(node, cst.BaseExpression) and super().on_visit(node)  # statements only

    fn.visit(Visitor())
    return groups


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=()).code_for_node(node)


@register
@dataclass(frozen=True, kw_only=True)
class AddArgparseArgument(Operation):
    """Add an argparse argument right after the statement that registers a named flag."""

    op: Literal["add_argparse_argument"]
    function: str = option(description="the function that builds the parser, e.g. ServerArgs.add_cli_args")
    after_flag: str = option(description="the flag whose add_argument statement the new one follows")
    code: str = option(description="the new `parser.add_argument(...)` statement")


    def describe(self) -> str:
        flag = _first_flag(self.code) or line_text(self.code)
        return f"add argument `{flag}` to `{self.function}` after `{self.after_flag}`"

    def anchor(self) -> str:
        return f'{self.function}: add_argument("{self.after_flag}", ...)'

    def new_flag(self) -> str:
        flag = _first_flag(self.code)
        if flag is None:
            raise RecipeError(f"`code` must be one `parser.add_argument(\"--flag\", ...)` statement, got {self.code!r}")
        return flag

    @attempt
    def apply(self, module: cst.Module) -> Outcome:
        new_stmts = parse_statements(self.code, module)
        new_flag = self.new_flag()
        fpath = find_function(module, self.function)
        flagged = [(p, flags) for p in walk_statements(fpath) if (flags := flags_of(p[-1]))]  # read each once
        # every option string of the new call counts (`"--mode", "--tokenizer-mode"`): argparse refuses a second
        # registration of any of them on one parser when it is built, at the server's start-up (a subparser or a
        # second parser of the function has option strings of its own); an argument group registers on its parser
        groups = argument_groups(fpath[-1])
        calls = list(iter_calls_named(new_stmts[0], "add_argument")) if len(new_stmts) == 1 else []
        receiver = parser_of(calls[0], groups) if calls else None
        mine = set(flags_of(new_stmts[0])) if len(new_stmts) == 1 else {new_flag}
        # a parser made with `parents=[common]` has the option strings `common` registers in the function too
        reach = _with_parents(fpath[-1], receiver) if receiver is not None else [None]
        existing = [(p, sorted(mine & set(on))) for p, flags in flagged if mine & set(flags)
                    and mine & set(on := [f for r in reach for f in flags_of(p[-1], r, groups)])]
        if existing:
            (path, clash), *_ = existing
            have = code_of(module, path[-1])
            if len(existing) == 1 and same_code(have, self.code):
                anchor = next((p for p, flags in flagged if self.after_flag in flags), None)
                branch = _branch_not_taken_with(path, anchor, len(fpath))
                if branch is None:
                    return AlreadyApplied(path[-1])
                raise Conflict(f"`{new_flag}` is registered in `{self.function}` only under `{branch}`, where the "
                               f"step registers it always: the parser would lack it when that branch is not taken, "
                               f"and refuse a second registration when it is",
                               candidates=[Candidate(have.strip().splitlines()[0], node=path[-1])])
            taken = "`, `".join(clash)
            raise Conflict(f"`{taken}` {'is' if len(clash) == 1 else 'are'} already registered in `{self.function}`"
                           f"{' with other arguments' if clash == [new_flag] else ''}: argparse would refuse the "
                           "second registration when the parser is built",
                           candidates=[Candidate(code_of(module, p[-1]).strip().splitlines()[0], node=p[-1])
                                       for p, _ in existing])
        if {"-h", "--help"} & mine and not _made_without_help(module, fpath[-1], receiver):
            raise Conflict(f"`{'`, `'.join(sorted({'-h', '--help'} & mine))}` is argparse's own help option (a parser "
                           "has it unless made with `add_help=False`): argparse would refuse it when the parser is "
                           "built")
        if calls:
            _refuse_keywords_argparse_refuses(module, calls[0])
            dest, default = _dest_and_default(module, calls[0])
            for p, _ in flagged if default is not None else ():
                for call in iter_calls_named(p[-1], "add_argument"):
                    if _dest(call) != dest or parser_of(call, groups) not in reach:
                        continue
                    their_dest, their_default = _dest_and_default(module, call)
                    if their_dest == dest and default is not None and \
                            _value(default) != _value(their_default or _implicit_default(module, call)):
                        have = code_of(module, p[-1]).strip().splitlines()[0]
                        raise Conflict(f"`{new_flag}` writes `args.{dest}`, which `{have}` already writes with another "
                                       f"default: the first registered default wins, and `{default}` would never be "
                                       f"read", candidates=[Candidate(have, node=p[-1])])
        anchors = [p for p, flags in flagged if self.after_flag in flags]
        if not anchors:
            by_flag = {f: p[-1] for p, flags in flagged for f in flags}
            declared = _declared_as_field(module, self.after_flag)
            raise AnchorNotFound(
                f'no `add_argument("{self.after_flag}", ...)` in {self.function}' + (
                    f"; the release declares the flag as the field `{declared[0]}` of `{declared[1]}` (flags made "
                    "from annotated fields: an `add_dataclass_field` step there)" if declared else ""),
                candidates=[*([Candidate(f"`{declared[0]}` in `{declared[1]}`", node=declared[2])] if declared else []),
                            *(Candidate(f'"{f}"', node=by_flag[f]) for f in near(self.after_flag, list(by_flag)))],
            )
        if len(anchors) > 1:
            raise AnchorAmbiguous(f"`{self.after_flag}` is registered {len(anchors)} times in {self.function}",
                                  candidates=[Candidate(f'"{self.after_flag}"', node=p[-1]) for p in anchors])
        return Changed(insert_after(anchors[0], new_stmts), inserted=tuple(new_stmts), anchor=anchors[0][-1])


def _declared_as_field(module: cst.Module, flag: str) -> tuple[str, str, cst.CSTNode] | None:
    """(field, class, statement) where the module declares the flag as an `Annotated` class field of its dest's
    name (sglang 0.5.14+ makes its flags from `ServerArgs`' `A[type, Arg(...)]` fields), else None."""
    dest = flag.lstrip("-").replace("-", "_")
    if not dest.isidentifier():
        return None
    for cls in (n for n in module.body if isinstance(n, cst.ClassDef)):
        for stmt in body_of(cls):
            if isinstance(stmt, cst.SimpleStatementLine) and any(
                    isinstance(x, cst.AnnAssign) and isinstance(x.target, cst.Name) and x.target.value == dest
                    and isinstance(x.annotation.annotation, cst.Subscript)  # `A[int, Arg(...)]`: the flag's own
                    and _code(x.annotation.annotation.value).strip().split(".")[-1] in ("A", "Annotated")
                    for x in stmt.body):
                return dest, cls.name.value, stmt
    return None


_BRANCHES = (cst.If, cst.Else, cst.For, cst.While, cst.Match, cst.MatchCase, cst.ExceptHandler, cst.ExceptStarHandler)


def _branch_not_taken_with(path, anchor, depth: int) -> str | None:
    """The header of a branch (`if`, loop, `case`, `except`) around the statement at `path`, below the function
    (`depth` nodes down), that is not around `anchor` too (or around nothing, without an anchor): code there may
    not run when the anchor's does. None when every branch around it is around the anchor."""
    for node in path[depth:-1]:
        if isinstance(node, _BRANCHES) and not (anchor is not None and any(n is node for n in anchor)):
            if isinstance(node, cst.Else):
                return "else:"
            head = cst.Module(body=[]).code_for_node(node).splitlines()[0].strip()
            return head
    return None


def _with_parents(fn: cst.CSTNode, receiver: str) -> list[str]:
    """`receiver` and the parsers (as code) it is made from in the function, `X = ArgumentParser(parents=[...])`,
    and theirs: argparse copies their arguments into it."""
    made: dict[str, list[str]] = {}

    class Made(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            if isinstance(node.value, cst.Call):
                for a in node.value.args:
                    if a.keyword is not None and a.keyword.value == "parents" \
                            and isinstance(a.value, (cst.List, cst.Tuple)):
                        for t in node.targets:
                            made.setdefault(_code(t.target).strip(), []).extend(
                                _code(e.value).strip() for e in a.value.elements)

        def on_visit(self, node: cst.CSTNode) -> bool:
            return not isinstance(node, cst.BaseExpression) and super().on_visit(node)  # statements only

    fn.visit(Made())
    out, todo = [receiver], [receiver]
    while todo:
        for parent in made.get(todo.pop(), []):
            if parent not in out:
                out.append(parent)
                todo.append(parent)
    return out


def _made_without_help(module: cst.Module, fn: cst.CSTNode, receiver: str | None) -> bool:
    """Whether the function makes the parser `receiver` itself with `add_help=False` (a parser made elsewhere, or with
    the default, has `-h/--help`)."""
    found = []

    class Made(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            if isinstance(node.value, cst.Call) and any(module.code_for_node(t.target).strip() == receiver
                                                        for t in node.targets):
                found.append(node.value)

    fn.visit(Made())
    return any(a.keyword is not None and a.keyword.value == "add_help" and module.code_for_node(a.value) == "False"
               for call in found for a in call.args)


def _implicit_default(module: cst.Module, call: cst.Call) -> str:
    """The default an `add_argument(...)` call without `default=` has: False for `store_true`, True for
    `store_false`, else None."""
    action = next((string_value(a.value) for a in call.args if a.keyword is not None and a.keyword.value == "action"),
                  None)
    return {"store_true": "False", "store_false": "True"}.get(action or "", "None")


def _value(code: str) -> object:
    """A default's code as the value it stands for when it is a literal, else its text (`ServerArgs.x`)."""
    import ast

    try:
        return ("value", ast.literal_eval(code))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return ("code", " ".join(code.split()))


#: argparse's actions (named by a literal `action=`) and the keywords their constructors do not take
_REFUSED_BY_ACTION = {
    "store_true": {"type", "choices", "nargs", "const", "metavar"},
    "store_false": {"type", "choices", "nargs", "const", "metavar"},
    "store_const": {"type", "choices", "nargs"},
    "append_const": {"type", "choices", "nargs"},
    "count": {"type", "choices", "nargs", "const", "metavar"},
}


def _refuse_keywords_argparse_refuses(module: cst.Module, call: cst.Call) -> None:
    """`add_argument("--x", action="store_true", type=bool)`: the action's class takes no `type`, a TypeError when
    the parser is built, at the server's start-up."""
    action = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "action"), None)
    if not isinstance(action, cst.SimpleString) or action.evaluated_value not in _REFUSED_BY_ACTION:
        return
    given = sorted({a.keyword.value for a in call.args if a.keyword is not None}
                   & _REFUSED_BY_ACTION[action.evaluated_value])
    if given:
        raise FailsAtRunTime(f"argparse's `action=\"{action.evaluated_value}\"` takes no `{'`, `'.join(given)}`: "
                             f"`{line_text(module.code_for_node(call))}` would raise TypeError when the parser is built")


def _dest_and_default(module: cst.Module, call: cst.Call) -> tuple[str | None, str | None]:
    """The attribute an `add_argument(...)` call writes (`dest=`, else its first long option, else its first option
    or positional name, as argparse derives it) and its `default=` as code (None when it gives none)."""
    keys = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    default = module.code_for_node(keys["default"]).strip() if "default" in keys else None
    return _dest(call), default


def _dest(call: cst.Call) -> str | None:
    """The attribute an `add_argument(...)` call writes: `dest=`, else its first long option, else its first option
    or positional name, as argparse derives it."""
    given = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "dest"), None)
    dest = string_value(given) if given is not None else None
    if dest is None:
        names = [v for a in call.args if a.keyword is None and a.star == "" and (v := string_value(a.value))]
        long = [n for n in names if n.startswith("--")]
        first = long[0] if long else names[0] if names else None
        dest = first.lstrip("-").replace("-", "_") if first else None
    return dest


@functools.lru_cache(maxsize=256)
def _first_flag(code: str) -> str | None:
    """The flag a one-statement `add_argument(...)` snippet registers (cached: `describe` and `apply` both ask)."""
    import textwrap

    try:
        stmt = cst.parse_module(textwrap.dedent(code).strip() + "\n").body
    except (cst.ParserSyntaxError, RecursionError):
        return None  # the step refuses the code itself, saying why
    flags = flags_of(stmt[0]) if len(stmt) == 1 else []
    return flags[0] if flags else None
