"""add_argparse_argument: the anchor is the statement registering a flag, however the call is written."""

from __future__ import annotations

import argparse
import textwrap

import libcst as cst
import pytest
from op_helpers import cannot, check, op, src, unchanged

from patcher.errors import AnchorAmbiguous, AnchorNotFound, Conflict
from patcher.operations.base import Changed

NEW = 'parser.add_argument("--new-flag", type=int, default=0)'
ADD = op("add_argparse_argument", function="Args.add_cli_args", after_flag="--accept", code=NEW)


def test_one_line_call():
    check(ADD, """
        class Args:
            @staticmethod
            def add_cli_args(parser):
                parser.add_argument("--accept", type=float, default=1.0)
                parser.add_argument("--other")
        """, """
        class Args:
            @staticmethod
            def add_cli_args(parser):
                parser.add_argument("--accept", type=float, default=1.0)
                parser.add_argument("--new-flag", type=int, default=0)
                parser.add_argument("--other")
        """)


def test_multi_line_call_with_comments_and_parens_in_strings():
    # the new statement follows the whole anchor statement: never inside it, whatever its `)` and comments
    check(ADD, """
        class Args:
            def add_cli_args(parser):
                parser.add_argument(  # opening comment )
                    "--accept",
                    # a comment line with a ) in it
                    type=float,
                    help="a ) inside a string (really)",
                )  # trailing comment
                parser.add_argument("--other")
        """, """
        class Args:
            def add_cli_args(parser):
                parser.add_argument(  # opening comment )
                    "--accept",
                    # a comment line with a ) in it
                    type=float,
                    help="a ) inside a string (really)",
                )  # trailing comment
                parser.add_argument("--new-flag", type=int, default=0)
                parser.add_argument("--other")
        """)


def test_keyword_args_in_any_order_and_flag_as_second_positional():
    check(ADD, """
        class Args:
            def add_cli_args(parser):
                parser.add_argument("--first", help="h", type=str, default=None)
                group.add_argument("-a", "--accept", help="h", default=1.0, type=float)
        """, """
        class Args:
            def add_cli_args(parser):
                parser.add_argument("--first", help="h", type=str, default=None)
                group.add_argument("-a", "--accept", help="h", default=1.0, type=float)
                parser.add_argument("--new-flag", type=int, default=0)
        """)


def test_new_multi_line_statement_is_the_next_statement():
    multi = op("add_argparse_argument", function="Args.add_cli_args", after_flag="--accept", code="""\
        parser.add_argument(
            "--new-flag",
            type=int,  # comment kept
        )
        """)
    out = check(multi, """
        class Args:
            def add_cli_args(parser):
                parser.add_argument(
                    "--accept",
                    type=float,
                )
                return parser
        """, """
        class Args:
            def add_cli_args(parser):
                parser.add_argument(
                    "--accept",
                    type=float,
                )
                parser.add_argument(
                    "--new-flag",
                    type=int,  # comment kept
                )
                return parser
        """)
    body = out.module.body[0].body.body[0].body.body
    assert [type(s).__name__ for s in body] == ["SimpleStatementLine"] * 3
    assert out.module.code_for_node(body[1]) == out.module.code_for_node(out.inserted[0])


def test_anchor_inside_if_block():
    check(ADD, """
        class Args:
            def add_cli_args(parser):
                if ENABLE:
                    parser.add_argument("--accept")
                parser.add_argument("--other")
        """, """
        class Args:
            def add_cli_args(parser):
                if ENABLE:
                    parser.add_argument("--accept")
                    parser.add_argument("--new-flag", type=int, default=0)
                parser.add_argument("--other")
        """)


def test_near_miss_prefix_flag_is_not_the_anchor():
    cannot(ADD, """
        class Args:
            def add_cli_args(parser):
                parser.add_argument("--accept-threshold")
                parser.add_argument("--acc")
        """, AnchorNotFound, mentions=("--accept", "Args.add_cli_args"), candidates=('"--accept-threshold"',))


def test_near_miss_flag_in_a_string_that_is_not_an_argument():
    cannot(ADD, """
        class Args:
            def add_cli_args(parser):
                parser.add_argument("--other", help="like --accept")
                print("--accept")
        """, AnchorNotFound, mentions=("--accept",))


def test_missing_function():
    cannot(ADD, """
        class Args:
            def add_cli_arg(parser):
                parser.add_argument("--accept")
        """, AnchorNotFound, mentions=("add_cli_args",), candidates=("add_cli_arg",))


def test_ambiguous_anchor():
    cannot(ADD, """
        class Args:
            def add_cli_args(parser):
                if A:
                    parser.add_argument("--accept")
                else:
                    parser.add_argument("--accept", type=int)
        """, AnchorAmbiguous, mentions=("--accept",), candidates=('"--accept"',))


def test_conflict_new_flag_with_other_arguments():
    cannot(ADD, """
        class Args:
            def add_cli_args(parser):
                parser.add_argument("--accept")
                parser.add_argument("--new-flag", type=str)
        """, Conflict, mentions=("--new-flag",), candidates=("--new-flag",))


def test_conflict_on_any_option_string_of_the_new_call():
    # the new call's second option string is a flag the parser already has: argparse raises "conflicting option
    # string" when the parser is built, at the server's start-up
    step = op("add_argparse_argument", function="Args.add_cli_args", after_flag="--accept",
              code='parser.add_argument("--hostile-mode", "--tokenizer-mode", type=str)')
    cannot(step, """
        class Args:
            def add_cli_args(parser):
                parser.add_argument("--accept")
                parser.add_argument("--tokenizer-mode", type=str)
        """, Conflict, mentions=("--tokenizer-mode", "argparse"), candidates=("--tokenizer-mode",))


def test_already_applied_anywhere_in_the_function():
    unchanged(ADD, """
        class Args:
            def add_cli_args(parser):
                parser.add_argument("--new-flag", type=int, default=0)
                parser.add_argument("--accept")
        """)


def test_crlf():
    check(ADD, """
        class Args:
            def add_cli_args(parser):
                parser.add_argument(
                    "--accept",
                )
        """, """
        class Args:
            def add_cli_args(parser):
                parser.add_argument(
                    "--accept",
                )
                parser.add_argument("--new-flag", type=int, default=0)
        """, newline="\r\n")


def test_tabs_nested():
    out = check(ADD, """
        class Args:
            def add_cli_args(parser):
                with group():
                    parser.add_argument("--accept")
        """, """
        class Args:
            def add_cli_args(parser):
                with group():
                    parser.add_argument("--accept")
                    parser.add_argument("--new-flag", type=int, default=0)
        """, tabs=True)
    assert "\t\t\tparser.add_argument(\"--new-flag\"" in out.module.code


def test_rest_of_file_is_byte_identical():
    before = src("""
        # -*- coding: utf-8 -*-
        class Args:   
            def add_cli_args(parser):
                parser.add_argument("--accept")  ;  x = 1


        def tail( a ,b ):  # odd spacing
            pass
        """)
    out = ADD.apply(cst.parse_module(before))
    assert isinstance(out, Changed)
    added = '        parser.add_argument("--new-flag", type=int, default=0)\n'
    i = before.index("\n\n\ndef tail")
    assert out.module.code == before[:i + 1] + added + before[i + 1:]


def test_a_flag_of_another_parser_object_is_not_a_conflict():
    # a subparser (or a second parser) has option strings of its own: argparse takes `--name` on both
    step = op("add_argparse_argument", function="Args.add_cli_args", after_flag="--accept",
              code='sub.add_argument("--name", "-n", type=str)')
    check(step, """
        class Args:
            def add_cli_args(parser):
                parser.add_argument("--name")
                parser.add_argument("-n")
                sub = parser.add_subparsers().add_parser("run")
                sub.add_argument("--accept")
        """, """
        class Args:
            def add_cli_args(parser):
                parser.add_argument("--name")
                parser.add_argument("-n")
                sub = parser.add_subparsers().add_parser("run")
                sub.add_argument("--accept")
                sub.add_argument("--name", "-n", type=str)
        """)


GROUP_SOURCE = """
    class Args:
        def add_cli_args(parser):
            group = parser.add_argument_group("speculative")
            group.add_argument("--accept")
            exclusive = group.add_mutually_exclusive_group()
            exclusive.add_argument("--fast")
            parser.add_argument("--name")
    """


def test_an_argument_group_shares_its_parsers_option_strings():
    # argparse keeps one table of option strings per parser, its groups included: `--name` on a group of a parser
    # that has `--name` (or the other way round, or on a mutually exclusive group of a group) raises "conflicting
    # option string" when the parser is built, at the server's start-up; the receivers' names differ
    for code in ('group.add_argument("--name", type=str)', 'exclusive.add_argument("--name")',
                 'parser.add_argument("--fast", type=int)',
                 'parser.add_argument_group("other").add_argument("--accept", type=int)'):
        step = op("add_argparse_argument", function="Args.add_cli_args", after_flag="--accept", code=code)
        cannot(step, GROUP_SOURCE, Conflict, mentions=("argparse",))
        # what the refusal prevents, as argparse has it: the same code put in by hand
        patched = textwrap.dedent(GROUP_SOURCE).replace(
            '        parser.add_argument("--name")\n', f'        parser.add_argument("--name")\n        {code}\n')
        scope: dict = {}
        exec(compile(patched, "<patched>", "exec"), scope)
        try:
            scope["Args"].add_cli_args(argparse.ArgumentParser())
        except argparse.ArgumentError:
            pass
        else:
            raise AssertionError(f"argparse took {code}: the test's premise is wrong")


def test_a_new_flag_on_a_group_is_not_a_conflict():
    step = op("add_argparse_argument", function="Args.add_cli_args", after_flag="--accept",
              code='group.add_argument("--new-flag", type=int)')
    check(step, GROUP_SOURCE, """
        class Args:
            def add_cli_args(parser):
                group = parser.add_argument_group("speculative")
                group.add_argument("--accept")
                group.add_argument("--new-flag", type=int)
                exclusive = group.add_mutually_exclusive_group()
                exclusive.add_argument("--fast")
                parser.add_argument("--name")
        """)


@pytest.mark.parametrize("code, says", [
    # a hostile round: both "changed", exit 0: the new default was never read, or the parser refused to build
    ('parser.add_argument("--limit", type=int, default=9)', "already writes with another default"),
    ('parser.add_argument("-h", "--host", default="0.0.0.0")', "argparse's own help option"),
])
def test_a_flag_argparse_would_shadow_or_refuse_is_a_conflict(code, says):
    step = op("add_argparse_argument", function="build", after_flag="--port", code=code)
    before = ("def build():\n    parser = argparse.ArgumentParser()\n"
              "    parser.add_argument(\"--max-len\", dest=\"limit\", type=int, default=5)\n"
              "    parser.add_argument(\"--port\", type=int)\n    return parser\n")
    err = cannot(step, before, Conflict)
    assert says in err.message, err.message


def test_a_flag_that_shares_a_dest_without_a_default_or_help_on_a_parser_without_it_is_added():
    before = ("def build():\n    parser = argparse.ArgumentParser(add_help=False)\n"
              "    parser.add_argument(\"--enable-x\", dest=\"x\", action=\"store_true\")\n    return parser\n")
    off = 'parser.add_argument("--disable-x", dest="x", action="store_false")'
    check(op("add_argparse_argument", function="build", after_flag="--enable-x", code=off), before,
          before.replace("    return parser\n", f"    {off}\n    return parser\n"))
    helps = 'parser.add_argument("-h", "--host")'
    check(op("add_argparse_argument", function="build", after_flag="--enable-x", code=helps), before,
          before.replace("    return parser\n", f"    {helps}\n    return parser\n"))


def test_a_flag_sharing_a_dest_with_the_same_default_as_argparse_gives_the_other_is_added():
    # a review: `--model` (default=None) beside `--model-path` (no default: None) was refused as "another default"
    before = ("def build(parser):\n    parser.add_argument(\"--model-path\", type=str)\n"
              "    parser.add_argument(\"--enable-cache\", dest=\"cache\", action=\"store_true\")\n")
    for after, code in (("--model-path", 'parser.add_argument("--model", dest="model_path", type=str, default=None)'),
                        ("--enable-cache", 'parser.add_argument("--no-cache", dest="cache", default=False)')):
        step = op("add_argparse_argument", function="build", after_flag=after, code=code)
        anchor = next(line for line in before.splitlines(keepends=True) if f'"{after}"' in line)
        check(step, before, before.replace(anchor, anchor + f"    {code}\n"))


def test_a_flag_a_parent_parser_registers_is_a_conflict():
    # a hostile round: `ArgumentParser(parents=[common])` copies `common`'s `--log-level`; a second one is an
    # ArgumentError when the parser is built
    before = textwrap.dedent("""\
        import argparse


        def build():
            common = argparse.ArgumentParser(add_help=False)
            common.add_argument("--log-level", default="info")
            parser = argparse.ArgumentParser(parents=[common])
            parser.add_argument("--port", type=int, default=30000)
            return parser
        """)
    step = op("add_argparse_argument", function="build", after_flag="--port",
              code='parser.add_argument("--log-level", default="debug")')
    cannot(step, before, Conflict, mentions=("`--log-level` is already registered",))
    # made without parents, it is its own
    alone = before.replace("parents=[common]", "add_help=True")
    check(step, alone, alone.replace('    parser.add_argument("--port", type=int, default=30000)\n',
                                     '    parser.add_argument("--port", type=int, default=30000)\n'
                                     '    parser.add_argument("--log-level", default="debug")\n'))


def test_a_flag_the_release_declares_as_an_annotated_field_is_named_where_it_is():
    # an import round: on sglang 0.5.16+ `--weight-loader-disable-mmap` is the field `weight_loader_disable_mmap:
    # A[...]` of ServerArgs; the refusal named only the nearest add_argument flag
    before = textwrap.dedent("""\
        class ServerArgs:
            weight_loader_disable_mmap: A[bool, Arg(help="x")] = False
            port: int = 30000

            @staticmethod
            def add_cli_args(parser):
                parser.add_argument("--port", type=int)
        """)
    step = op("add_argparse_argument", function="ServerArgs.add_cli_args", after_flag="--weight-loader-disable-mmap",
              code='parser.add_argument("--team", type=int, default=0)')
    err = cannot(step, before, AnchorNotFound, mentions=("declares the flag as the field `weight_loader_disable_mmap`",),
                 candidates=("`weight_loader_disable_mmap` in `ServerArgs`",))
    # a plain field (a release whose flag is only missing from the parser) is not taken for it
    plain = before.replace("A[bool, Arg(help=\"x\")]", "bool")
    err = cannot(step, plain, AnchorNotFound)
    assert "declares the flag" not in err.message


def test_the_same_registration_under_a_branch_the_anchor_is_not_under_is_a_conflict():
    # a hostile round: `--b` registered only under `if is_hip():` was "already applied"; on CUDA the server's
    # `--b 3` was an unrecognized argument
    step = op("add_argparse_argument", function="add_args", after_flag="--a",
              code='parser.add_argument("--b", type=int, default=0)')
    before = ('def add_args(parser):\n    parser.add_argument("--a", type=int)\n    if is_hip():\n'
              '        parser.add_argument("--b", type=int, default=0)\n')
    err = cannot(step, before, Conflict)
    assert "only under `if is_hip():`" in err.message, err.message
    # in the branch the anchor is in too, it is the step's registration
    unchanged(step, 'def add_args(parser):\n    if is_hip():\n        parser.add_argument("--a", type=int)\n'
                    '        parser.add_argument("--b", type=int, default=0)\n')


@pytest.mark.parametrize("code, refused", [
    ('parser.add_argument("--fast", action="store_true", type=bool)', True),
    ('parser.add_argument("--n", action="count", choices=[1, 2])', True),
    ('parser.add_argument("--fast", action="store_true", help="go fast")', False),
    ('parser.add_argument("--mode", type=str, choices=["a", "b"])', False),
])
def test_keywords_the_action_does_not_take_are_refused(code, refused):
    # hostile round 13 (25): `action="store_true", type=bool` applied; argparse raised TypeError when the parser was
    # built, at the server's start-up
    before = """
        class Args:
            @staticmethod
            def add_cli_args(parser):
                parser.add_argument("--accept", type=float, default=1.0)
        """
    step = op("add_argparse_argument", function="Args.add_cli_args", after_flag="--accept", code=code)
    if refused:
        err = cannot(step, before, Conflict)
        assert "would raise TypeError when the parser is built" in err.message, err.message
    else:
        assert isinstance(step.apply(cst.parse_module(src(before))), Changed)
    # what argparse itself says of the same call
    parser = argparse.ArgumentParser()
    try:
        eval(code, {"parser": parser})
        raised = False
    except TypeError:
        raised = True
    assert raised == refused
