"""add_definition (module-level code after/before a named definition or at the end) and unexpressed_hunk."""

from __future__ import annotations

import pytest
from op_helpers import cannot, check, op, unchanged

from patcher.errors import AnchorAmbiguous, AnchorNotFound, Conflict, HunkNotExpressed
from patcher.model import ValidationError

BEFORE = """
    import os

    LIMIT = 4


    def poll():
        return 1


    class Queue:
        pass
    """

HELPER = "\n\ndef is_profiling() -> bool:\n    return os.environ.get('P') == '1'\n"


def test_function_after_a_named_function_with_its_blank_lines():
    check(op("add_definition", after="poll", code=HELPER), BEFORE, """
        import os

        LIMIT = 4


        def poll():
            return 1


        def is_profiling() -> bool:
            return os.environ.get('P') == '1'


        class Queue:
            pass
        """)


def test_statement_before_an_assignment_target_and_at_the_end():
    check(op("add_definition", before="LIMIT", code="# the default\nDEFAULT = 2\n"), BEFORE,
          BEFORE.replace("LIMIT = 4", "# the default\n    DEFAULT = 2\n    LIMIT = 4"))
    check(op("add_definition", code="\n\n__all__ = ['poll']"), BEFORE, BEFORE + "\n\n    __all__ = ['poll']\n")


def test_function_before_a_named_function_keeps_the_section_heading_above_and_its_spacing_below():
    sectioned = BEFORE.replace("\n\n    def poll():", "\n\n    # Polling #\n\n\n    def poll():")
    check(op("add_definition", before="poll", code=HELPER), sectioned, sectioned.replace(
        "def poll():", "def is_profiling() -> bool:\n        return os.environ.get('P') == '1'\n\n\n"
        "    def poll():"))
    check(op("add_definition", before="Queue", code=HELPER), BEFORE, BEFORE.replace(
        "class Queue:", "def is_profiling() -> bool:\n        return os.environ.get('P') == '1'\n\n\n"
        "    class Queue:"))


def test_already_applied_and_conflict():
    unchanged(op("add_definition", after="LIMIT", code="def poll():\n    return (1)  # same"), BEFORE)
    cannot(op("add_definition", after="LIMIT", code="def poll():\n    return 2"), BEFORE, Conflict,
           mentions=("poll",), candidates=("def poll():",))


def test_near_miss_names():
    cannot(op("add_definition", after="pol", code="X = 1"), BEFORE, AnchorNotFound, candidates=("poll",))
    cannot(op("add_definition", after="X", code="Y = 1"), "X = 1\nX = 2\n", AnchorAmbiguous)
    # a method of the same name is not a module-level definition
    cannot(op("add_definition", after="run", code="Y = 1"), "class A:\n    def run(self):\n        pass\n",
           AnchorNotFound)


def test_after_and_before_together_is_a_recipe_error():
    with pytest.raises(ValidationError, match="not both"):
        op("add_definition", after="a", before="b", code="X = 1")


def test_unexpressed_hunk_always_refuses_with_the_hunk():
    err = cannot(op("unexpressed_hunk", hunk="@@ -3,2 +3,2 @@", reason="only comments", diff="-# a\n+# b\n"),
                 BEFORE, HunkNotExpressed, mentions=("@@ -3,2 +3,2 @@", "only comments"), candidates=("+# b",))
    assert err.exit_code == 3


NEW_OPS = ("replace_statements", "replace_expression", "add_keyword_argument", "add_element", "add_parameter",
           "add_definition", "unexpressed_hunk")


@pytest.mark.parametrize("kind", NEW_OPS)
def test_the_new_operations_are_registered_documented_and_in_the_schema(kind):
    import importlib
    import json

    from patcher.operations import REGISTRY
    from patcher.recipe import json_schema

    cls = REGISTRY[kind]
    assert importlib.import_module(cls.__module__).__doc__.startswith(f"`{kind}`")  # the user documentation
    assert f'"const": "{kind}"' in json.dumps(json_schema()) or f'"{kind}"' in json.dumps(json_schema())


REBOUND = """
import os
from typing import Any as AnyType


def register(fn):
    return fn


LIMIT = 8
"""


@pytest.mark.parametrize("code, name", [
    ("register = None\n", "register"),  # an assignment over a def: the module's own calls would get None
    ("LIMIT = 16\n", "LIMIT"),  # the same constant bound twice: the later one wins, silently
    ("def os():\n    return 1\n", "os"),  # a def over an import
    ("AnyType = object\n", "AnyType"),  # over an import's alias
    ("NEW, LIMIT = 1, 2\n", "LIMIT"),  # unpacking
    ("for register in range(2):\n    pass\n", "register"),  # a loop target
    ("with open(__file__) as os:\n    pass\n", "os"),  # a `with` target
    ("if (LIMIT := 3):\n    pass\n", "LIMIT"),  # a walrus
    ("import json as register\n", "register"),  # an import in the code
])
def test_code_that_rebinds_a_module_name_is_a_conflict(code, name):
    cannot(op("add_definition", code=code), REBOUND, Conflict, mentions=(f"`{name}`", "rebind"))
    # a new name is added as ever
    check(op("add_definition", code="TEAM_LIMIT = 16\n"), REBOUND, REBOUND.lstrip("\n") + "TEAM_LIMIT = 16\n")


def test_a_bare_annotation_binds_nothing_and_type_checking_names_are_not_run_time_bindings():
    check(op("add_definition", code="LIMIT_HINT: int\n"), REBOUND, REBOUND.lstrip("\n") + "LIMIT_HINT: int\n")
    typed = "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from json import JSONDecoder\n"
    check(op("add_definition", code="JSONDecoder = None\n"), typed, typed + "JSONDecoder = None\n")


@pytest.mark.parametrize("code", ["try:\n    import no_such_module\nexcept ImportError as helper:\n    pass\n",
                                  "match 2:\n    case helper:\n        pass\n", "helper += 1\n"])
def test_code_that_rebinds_a_module_name_by_any_form_is_a_conflict(code):
    # hostile round 10 (a fuzzer): an `except ... as`, a `case` capture and an augmented assignment rebound the
    # module's `helper` (deleted, 2, TypeError at import) with exit 0
    step = op("add_definition", code=code)
    err = cannot(step, "def helper(x):\n    return x + 1\n", Conflict)
    assert "already binds `helper`" in err.message, err.message


def test_a_definition_for_the_end_goes_above_a_closing_main_guard():
    # hostile round 13 (20): written below `if __name__ == "__main__":`, the def did not exist yet when the module
    # ran as a script called it (NameError); an import saw nothing wrong
    before = 'import sys\n\n\ndef main():\n    return 0\n\n\nif __name__ == "__main__":\n    sys.exit(main())\n'
    step = op("add_definition", code="\n\ndef banner():\n    print('banner')\n")
    after = before.replace('if __name__', "def banner():\n    print('banner')\n\n\nif __name__")
    check(step, before, after)
    unchanged(step, after)
    # a guard with definitions below it is not the module's end: the end stays the end
    tail = before + "\n\ndef late():\n    pass\n"
    check(step, tail, tail + "\n\ndef banner():\n    print('banner')\n")


def test_a_definition_named_like_a_builtin_the_module_reads_is_a_conflict():
    # hostile round 13 (19): a new module-level `def filter(...)` silently replaced the builtin every `filter(...)`
    # of the module's own code called
    before = "def names(xs):\n    return list(filter(None, xs))\n"
    err = cannot(op("add_definition", code="def filter(pred, xs):\n    return xs\n"), before, Conflict)
    assert "the builtin the module's own code reads (line 2)" in err.message, err.message
    # a builtin the module does not read is free to take
    check(op("add_definition", code="\n\ndef compile(x):\n    return x\n"), before,
          before + "\n\ndef compile(x):\n    return x\n")


def test_a_singledispatch_registration_named_like_another_is_added():
    # hostile round 15 (07)
    before = ("import functools\n\n\n@functools.singledispatch\ndef show(x):\n    return 'obj'\n\n\n"
              "@show.register\ndef _(x: int):\n    return 'int'\n")
    new = "@show.register\ndef _(x: str):\n    return 'str'\n"
    check(op("add_definition", code=new), before, before + new)
    cannot(op("add_definition", code="def _(x):\n    return 1\n"), before, Conflict)
