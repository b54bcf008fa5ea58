"""add_import: after the leading import block, unless every name is already imported at module top level."""

from __future__ import annotations

import pytest
from op_helpers import cannot, check, op, unchanged

from patcher.errors import Conflict
from patcher.model import ValidationError


def imp(code: str):
    return op("add_import", code=code)


def test_after_the_last_import_of_the_leading_block():
    check(imp("from a.b import c"), '''
        """Module docstring."""

        from __future__ import annotations

        # a comment
        import os
        from x import (
            y,
            z,
        )  # trailing

        logger = get_logger()
        import late
        ''', '''
        """Module docstring."""

        from __future__ import annotations

        # a comment
        import os
        from x import (
            y,
            z,
        )  # trailing
        from a.b import c

        logger = get_logger()
        import late
        ''')


def test_type_checking_and_try_import_blocks_are_passed_over():
    check(imp("import numpy as np"), """
        import os
        if TYPE_CHECKING:
            from x import Y
        try:
            import fast
        except ImportError:
            pass
        import sys
        def f():
            pass
        """, """
        import os
        if TYPE_CHECKING:
            from x import Y
        try:
            import fast
        except ImportError:
            pass
        import sys
        import numpy as np
        def f():
            pass
        """)


def test_a_try_block_with_a_fallback_ends_the_block():
    check(imp("import numpy as np"), """
        import os
        try:
            import fast
        except ImportError:
            fast = None
        import sys
        """, """
        import os
        import numpy as np
        try:
            import fast
        except ImportError:
            fast = None
        import sys
        """)


def test_part_of_a_bigger_from_import_is_already_applied():
    unchanged(imp("from a.b import (d, c)"), """
        import os
        from a.b import (
            c,
            d,
            e,
        )
        """)


def test_later_top_level_import_counts():
    unchanged(imp("import late"), """
        import os
        x = 1
        import late
        """)


def test_only_missing_names_are_added():
    check(imp("from a.b import c, d as e, f"), """
        from a.b import c
        from a.b import f

        x = 1
        """, """
        from a.b import c
        from a.b import f
        from a.b import d as e

        x = 1
        """)


def test_near_miss_conditional_import_does_not_count():
    check(imp("from x import Y"), """
        import os
        if TYPE_CHECKING:
            from x import Y
        """, """
        import os
        from x import Y
        if TYPE_CHECKING:
            from x import Y
        """)


def test_near_miss_submodule_is_another_import():
    check(imp("import a.b"), """
        import a
        import a.bc
        """, """
        import a
        import a.bc
        import a.b
        """)


def test_no_imports_after_docstring_or_at_top():
    check(imp("import os"), '''
        """Doc."""
        x = 1
        ''', '''
        """Doc."""
        import os
        x = 1
        ''')
    check(imp("import os"), """
        # license
        x = 1
        """, """
        # license
        import os
        x = 1
        """)


def test_future_import_goes_first():
    check(imp("from __future__ import annotations"), '''
        """Doc."""
        import os
        ''', '''
        """Doc."""
        from __future__ import annotations
        import os
        ''')


def test_conflict_same_name_from_elsewhere():
    cannot(imp("from a.b import c"), """
        from x import c
        """, Conflict, mentions=("`c`", "from x import c"), candidates=("from x import c",))


def test_conflict_other_alias():
    cannot(imp("from a.b import c as e"), """
        from a.b import c as f
        """, Conflict, mentions=("c as e", "`f`"), candidates=("from a.b import c as f",))
    cannot(imp("import numpy as np"), """
        import numpy
        """, Conflict, mentions=("numpy as np",))


def test_same_module_twice_is_not_a_conflict():
    unchanged(imp("import a.b"), """
        import a
        import a.b
        """)


def test_crlf():
    check(imp("from a.b import (\n    c,\n    d,\n)"), """
        import os

        x = 1
        """, """
        import os
        from a.b import (
            c,
            d,
        )

        x = 1
        """, newline="\r\n")


def test_tab_indented_module():
    check(imp("import sys"), """
        import os
        if TYPE_CHECKING:
            import typing
        class A:
            def f(self):
                return os
        """, """
        import os
        import sys
        if TYPE_CHECKING:
            import typing
        class A:
            def f(self):
                return os
        """, tabs=True)


@pytest.mark.parametrize("code, message", [
    ("x = 1", "one import statement"),
    ("import os\nimport sys", "one import statement"),
    ("from a import *", "not supported"),
    ("import", "not valid Python"),
])
def test_recipe_errors_at_load_time(code, message):
    with pytest.raises(ValidationError, match=message):
        imp(code)


def test_imports_are_read_from_the_tree_as_ast_parse_reads_them():
    """The bindings of a module's imports come from libcst nodes, not from rendering them: same as `ast.parse`."""
    import ast

    import libcst as cst

    from patcher.operations.add_import import _as_ast

    src = ("import a.b.c as d, e\nfrom . import x\nfrom ..p.q import (r as s,\n    t)  # c\nfrom m import *\n"
           "import os; from os import path as p\nfrom .rel.mod import y\n")
    module = cst.parse_module(src)
    got = [ast.dump(_as_ast(small)) for line in module.body for small in line.body]
    assert got == [ast.dump(node) for node in ast.parse(src).body]


# ---- merge: names added to the module's own `from` statement of that module


def merge(code: str, **options):
    return op("add_import", code=code, merge=True, **options)


def test_merge_adds_the_name_after_the_one_it_follows_in_a_parenthesized_list():
    check(merge("from a.b import e", after="c"), '''
        import os
        from a.b import (
            c,
            d,
        )
        ''', '''
        import os
        from a.b import (
            c,
            e,
            d,
        )
        ''')


def test_merge_appends_when_the_name_it_follows_is_gone_keeping_the_trailing_comma_style():
    check(merge("from a.b import e", after="gone"), '''
        from a.b import (
            c,
            d
        )
        ''', '''
        from a.b import (
            c,
            d,
            e
        )
        ''')


def test_merge_into_a_one_line_list_and_several_names():
    check(merge("from a.b import e, f as g", after="c"), '''
        from a.b import c, d
        ''', '''
        from a.b import c, e, f as g, d
        ''')


def test_merge_without_a_statement_of_that_module_adds_a_new_one():
    check(merge("from a.b import e"), '''
        from a import b
        from .a.b import x
        ''', '''
        from a import b
        from .a.b import x
        from a.b import e
        ''')


def test_merge_finds_the_name_already_imported_anywhere():
    unchanged(merge("from a.b import d", after="c"), '''
        from a.b import c
        from a.b import (
            x,
            d,
        )
        ''')


def test_merge_still_refuses_a_name_bound_elsewhere():
    err = cannot(merge("from a.b import d"), '''
        from a.b import c
        from x import d
        ''', Conflict)
    assert "already imported from elsewhere" in err.message


@pytest.mark.parametrize("options, message", [
    ({"code": "import os", "merge": True}, "for a `from"),
    ({"code": "from a import b", "after": "c"}, "needs `merge: true`"),
])
def test_merge_options_are_checked_at_load_time(options, message):
    with pytest.raises(ValidationError, match=message):
        op("add_import", **options)


def test_sorted_goes_where_it_sorts_in_its_section():
    step = op("add_import", code="import os", sorted=True)
    check(step, '''
        from __future__ import annotations

        import contextlib
        import logging
        from abc import ABC

        import torch

        x = 1
        ''', '''
        from __future__ import annotations

        import contextlib
        import logging
        import os
        from abc import ABC

        import torch

        x = 1
        ''')
    # the release the recipe was made on: the same step after `import contextlib`
    check(step, '''
        import contextlib
        from abc import ABC
        ''', '''
        import contextlib
        import os
        from abc import ABC
        ''')


def test_sorted_goes_to_the_section_of_its_package_not_to_one_it_sorts_inside_by_name():
    check(op("add_import", code="from pkg.layers.moe.capture import get_capturer", sorted=True), '''
        import logging
        from dataclasses import dataclass
        from typing import Optional

        from pkg.layers.dp import is_symmetric
        from pkg.layers.moe import get_backend
        from pkg.utils import is_cpu

        x = 1
        ''', '''
        import logging
        from dataclasses import dataclass
        from typing import Optional

        from pkg.layers.dp import is_symmetric
        from pkg.layers.moe import get_backend
        from pkg.layers.moe.capture import get_capturer
        from pkg.utils import is_cpu

        x = 1
        ''')


def test_sorted_goes_at_the_top_of_the_first_section_of_its_kind_that_it_sorts_before():
    # a tester's round: `import contextlib` a patch put above `import datetime` (the section's top): above it, taking
    # the section's blank line, in the standard library's section and not above `import numpy`'s
    before = '''
        from __future__ import annotations

        import datetime
        import os

        import numpy
        import torch

        from pkg.layers import dp
        from pkg.utils import is_cpu
        '''
    check(op("add_import", code="import contextlib", sorted=True), before,
          before.replace("import datetime\n", "import contextlib\n        import datetime\n"))
    check(op("add_import", code="from pkg.attention import backend", sorted=True), before,
          before.replace("from pkg.layers", "from pkg.attention import backend\n        from pkg.layers"))
    # a module of neither kind: at the block's end, as before
    check(op("add_import", code="import aiohttp", sorted=True), before,
          before.replace("is_cpu\n", "is_cpu\n        import aiohttp\n"))


def test_sorted_without_a_sorted_section_around_it_goes_at_the_end():
    check(op("add_import", code="import os", sorted=True), '''
        import torch
        import logging
        x = 1
        ''', '''
        import torch
        import logging
        import os
        x = 1
        ''')


def test_merge_before_puts_a_name_first_in_the_list_and_appends_when_that_name_is_gone():
    before = '''
        from a.b import (
            c,
            d,
        )
        '''
    check(merge("from a.b import e", before="c"), before, '''
        from a.b import (
            e,
            c,
            d,
        )
        ''')
    check(merge("from a.b import e", before="gone"), before, '''
        from a.b import (
            c,
            d,
            e,
        )
        ''')
    with pytest.raises(ValidationError, match="not both"):
        op("add_import", code="from a.b import e", merge=True, after="c", before="d")


def test_an_import_of_a_name_the_module_defines_is_a_conflict():
    # the module's `def register` would rebind it (the import dead), or the import would replace the def
    cannot(op("add_import", code="from os.path import join as register"), """
        import os


        def register(fn):
            return fn
        """, Conflict, mentions=("`register`", "already bound by the module"))


@pytest.mark.parametrize("binding", [
    # a hostile round: each "changed", exit 0; the module's own code rebound the import when it ran
    "for time in ('prefill', 'decode'):\n    PHASES.append(time)\n",
    "with open('x') as time:\n    pass\n",
    "try:\n    pass\nexcept OSError as time:\n    pass\n",
    "def init():\n    global time\n    time = 3\n",
])
def test_an_import_of_a_name_the_module_rebinds_at_run_time_is_a_conflict(binding):
    cannot(op("add_import", code="import time"), "import os\n\nPHASES = []\n" + binding, Conflict,
           mentions=("`time`", "already bound by the module"))


def test_a_definition_a_function_rebinds_through_global_is_a_conflict():
    cannot(op("add_definition", code="def get_cache(k):\n    return k\n"),
           "def init_cache():\n    global get_cache\n    get_cache = {}\n", Conflict, mentions=("`get_cache`",))
