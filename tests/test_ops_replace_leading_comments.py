"""replace_leading_comments: a module's comment lines above its first statement (licence, SPDX, shebang)."""

from __future__ import annotations

import pytest
from op_helpers import cannot, check, op, unchanged

from patcher.errors import AnchorAmbiguous, AnchorNotFound, Conflict
from patcher.model import ValidationError

OLD = "# Copyright 2023-2024 SGLang Team\n# Licensed under the Apache License, Version 2.0\n"
NEW = "# Copyright 2023-2025 SGLang Team and TeamX\n# Licensed under the Apache License, Version 2.0\n"


def lead(match: str, code: str):
    return op("replace_leading_comments", match=match, code=code)


def test_the_leading_lines_are_replaced_whole_and_the_code_below_is_untouched():
    check(lead(OLD, NEW), OLD + '\n"""The module."""\nimport os\n',
          NEW + '\n"""The module."""\nimport os\n')


def test_a_header_is_added_to_a_file_without_one_and_crlf_is_kept():
    check(lead("", "# SPDX-License-Identifier: Apache-2.0\n"), "import os\n",
          "# SPDX-License-Identifier: Apache-2.0\nimport os\n")
    check(lead(OLD, "# -*- coding: utf-8 -*-\n" + OLD), OLD + "\nimport os\n",
          "# -*- coding: utf-8 -*-\n" + OLD + "\nimport os\n", newline="\r\n")


def test_other_leading_lines_refuse_naming_the_first_and_the_new_ones_are_already_applied():
    err = cannot(lead(OLD, NEW), "# Copyright 2023-2026 SGLang Team\nimport os\n", AnchorNotFound,
                 mentions=("leading comment lines",), candidates=("# Copyright 2023-2026 SGLang Team",))
    assert err.location.anchor.startswith("the module's leading comments")
    unchanged(lead(OLD, NEW), NEW + "import os\n")
    unchanged(lead(OLD, NEW), NEW.replace("Team and TeamX", "Team and TeamX   ") + "import os\n")  # line-end spaces


@pytest.mark.parametrize("match, code, message", [
    ("x = 1\n", "# y\n", "not comments"),
    (OLD, OLD, "nothing to replace"),
])
def test_lines_that_are_not_comments_or_no_change_are_refused_as_a_recipe_error(match, code, message):
    with pytest.raises(ValidationError, match=message):
        lead(match, code)


def test_a_refusal_names_the_first_line_that_differs():
    # a hostile round: a header differing by one blank line was refused naming its first line, the same as match's
    spaced = OLD.replace("\n# Licensed", "\n\n# Licensed")
    cannot(lead(OLD, NEW), spaced + "import os\n", AnchorNotFound,
           mentions=("line 2 is ``", "where `match` has `# Licensed under the Apache License, Version 2.0`"))


def test_a_header_upstream_has_with_a_line_more_is_already_applied():
    # a hostile round: every line the step adds is in the release's header, which has one more: it was refused
    unchanged(lead("", "# SPDX-License-Identifier: Apache-2.0\n"),
              "# SPDX-License-Identifier: Apache-2.0\n# SPDX-FileCopyrightText: Copyright SGLang\n\nimport os\n")


def test_new_lines_that_would_change_how_python_decodes_the_file_are_a_conflict():
    # a hostile round: a header declaring latin-1 (or a vim fileencoding) on a UTF-8 file: every non-ASCII
    # character of its strings changed, and the file still compiled
    before = "# Copyright 2024 SGLang Team\nDEGREE = '°C'\n"
    for code in ("# -*- coding: latin-1 -*-\n# Copyright 2025 Team\n", "# vim: set fileencoding=cp1252 :\n"):
        cannot(op("replace_leading_comments", match="# Copyright 2024 SGLang Team\n", code=code), before, Conflict)
    same = "# -*- coding: utf-8 -*-\n# Copyright 2025 Team\n"
    check(op("replace_leading_comments", match="# Copyright 2024 SGLang Team\n", code=same), before,
          before.replace("# Copyright 2024 SGLang Team\n", same))


def test_a_step_that_takes_a_line_away_is_not_applied_while_the_line_is_there():
    # a hostile round: `code` = `match` less the copyright line held "every line of code in order": the untouched
    # file was "already applied" (and "already upstream" in a port), the line never taken away
    step = op("replace_leading_comments", match="# Copyright 2023 SGLang Team\n# Licensed under Apache-2.0\n",
              code="# Licensed under Apache-2.0\n")
    check(step, "# Copyright 2023 SGLang Team\n# Licensed under Apache-2.0\nx = 1\n",
          "# Licensed under Apache-2.0\nx = 1\n")
    # upstream added a line of its own and has no copyright line: still the step's header
    unchanged(step, "# Licensed under Apache-2.0\n# SPDX-License-Identifier: Apache-2.0\nx = 1\n")


def test_the_comment_lines_above_a_statement_anywhere():
    # hostile round 12 (import): a reworded comment above a decorated function, or above the first statement of a
    # function, was lifted as a replacement of the whole function (and of the one before it), refused wherever
    # upstream edited that code
    before = ("def get_load():\n    return 1\n\n\n# converts json\n@app.post('/x')\nasync def set_state(obj):\n"
              "    # may alloc\n    if obj:\n        return 2\n    return 3\n")
    step = op("replace_leading_comments", above="@app.post('/x')\nasync def set_state(obj):\n    ...",
              match="# converts json", code="# converts JSON\n# to obj")
    after = before.replace("# converts json\n", "# converts JSON\n# to obj\n")
    check(step, before, after)
    unchanged(step, after)
    upstream = after.replace("    return 1\n", "    return load()\n").replace("    return 3\n", "    return 4\n")
    unchanged(step, upstream.replace("# converts JSON\n# to obj\n", "# converts JSON\n# to obj\n# (upstream)\n"))
    inner = op("replace_leading_comments", within="set_state", above="if obj:\n    ...", match="# may alloc",
               code="# may allocate")
    check(inner, before, before.replace("    # may alloc\n", "    # may allocate\n"))
    err = cannot(inner, before.replace("# may alloc", "# might alloc"), AnchorNotFound)
    assert "line 1 is `# might alloc` where `match` has `# may alloc`" in err.message, err.message
    cannot(op("replace_leading_comments", above="if nothing:\n    ...", match="# a", code="# b"), before,
           AnchorNotFound)
    # no comment there yet (`match: ""`): the new lines go right above the statement, below its blank lines; above
    # the module's first statement, they are the module's leading lines
    add = op("replace_leading_comments", within="set_state", above="return 3", match="", code="# the end")
    check(add, before, before.replace("    return 3\n", "    # the end\n    return 3\n"))
    first = op("replace_leading_comments", above="def get_load():\n    ...", match="", code="# the load")
    check(first, before, "# the load\n" + before)


def test_a_statement_there_twice_is_told_apart_by_its_comment_lines():
    before = ("def release(req):\n    # may alloc\n    if req is None:\n        return\n    work(req)\n"
              "    if req is None:\n        return\n")
    step = op("replace_leading_comments", within="release", above="if req is None:\n    ...", match="# may alloc",
              code="# may allocate")
    check(step, before, before.replace("# may alloc\n", "# may allocate\n"))
    err = cannot(step, before.replace("    # may alloc\n", ""), AnchorAmbiguous)
    assert "2 statements are" in err.message, err.message


def test_above_the_first_statement_only_its_own_block_is_compared():
    # review 12: above a module's first statement, `match` was compared with the module's whole header, the
    # licence above a blank line included, and the step refused
    before = "# Copyright 2025 SGLang\n# Licensed\n\n# fp4 helpers\nfrom enum import Enum\n\nX = 1\n"
    step = op("replace_leading_comments", above="from enum import Enum", match="# fp4 helpers",
              code="# fp4 helpers (team)")
    after = before.replace("# fp4 helpers\n", "# fp4 helpers (team)\n")
    check(step, before, after)
    unchanged(step, after)


def test_above_a_def_whose_decorator_upstream_changed_is_that_def():
    # review 12: the step named the decorator and the signature; a release whose decorator differs refused it
    before = "# serve it\n@app.post('/x', response_class=J)\nasync def set_state(obj):\n    return 1\n"
    step = op("replace_leading_comments", above="@app.post('/x')\nasync def set_state(obj):\n    ...",
              match="# serve it", code="# serve it (team)")
    check(step, "X = 1\n\n\n" + before, "X = 1\n\n\n" + before.replace("# serve it", "# serve it (team)"))
