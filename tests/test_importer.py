"""`specpatch import` and `specpatch port`: diffs written or generated here, never another project's patches."""

from __future__ import annotations

import difflib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from patcher import importer
from patcher.errors import UsageError
from patcher.recipe import load_recipe

BEFORE = '''\
"""Module doc."""

import os
from typing import (
    List,
    Optional,
)

LIMIT = 4


def poll(a, b):
    return a + b


@dataclass
class KVArgs:
    kv_data_ptrs: List[int]
    aux_data_ptrs: List[int]


class Queue:
    def __init__(self, size):
        self.size = size
        self.items = make(
            size,
            mode="a",
        )

    def pop(self):
        if self.items:
            pass
        else:
            return None
        return self.items.pop()

    def add(self, x):
        """Add."""
        self.items.append(x)


def add_cli_args(parser):
    parser.add_argument("--a", type=int)
    parser.add_argument("--b", type=int)


# end of module
'''

EDITS = [
    ("def poll(a, b):\n    return a + b\n", "def poll(a, b, c=0):\n    return a + b + c\n\n\ndef helper():\n    return 1\n"),
    ("    kv_data_ptrs: List[int]\n", "    kv_data_ptrs: List[int]\n    aux_buffer_names: List[str]\n"),
    ('            mode="a",\n', '            mode="a",\n            fast=True,\n'),
    ("            pass\n", "            # wait for the next batch\n            self.check()\n"),
    ("    def add(self, x):", '    def clear(self):\n        """Clear\n        all."""\n        self.items.clear()\n\n'
                            "    def add(self, x):"),
    ('    parser.add_argument("--a", type=int)\n',
     '    parser.add_argument("--a", type=int)\n    parser.add_argument("--a2", type=int)\n'),
]


def edited(text: str, edits=EDITS) -> str:
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


def git_diff(before: str, after: str, rel: str, prefix: str = "python/sglang/") -> str:
    lines = difflib.unified_diff(before.splitlines(True), after.splitlines(True), f"a/{prefix}{rel}",
                                 f"b/{prefix}{rel}", n=3)
    return f"diff --git a/{prefix}{rel} b/{prefix}{rel}\nindex 1111111..2222222 100644\n" + "".join(lines)


def package(root: Path, files: dict[str, str], name: str = "sglang") -> Path:
    pkg = root / name
    files = {"__init__.py": "", **files}  # a package, as a release is (the round trip plans it as `apply` does)
    for rel, text in files.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_bytes(text.encode())
    return pkg


def lift_and_write(tmp_path: Path, pkg: Path, patch: str, name: str = "lifted"):
    lifted = importer.lift(pkg, patch)
    out = importer.write_recipe(lifted, tmp_path / "recipes" / f"{name}.yaml", package="sglang", release="0.0.1",
                                source="test.patch")
    return lifted, out


# --------------------------------------------------------------------------------------------------- the diff


def test_parse_patch_reads_git_and_gnu_diffs_with_any_path_style():
    gnu = ("--- sglang/srt/a.py\t2026-01-01 00:00:00.000000000 +0000\n+++ sglang/srt/a.py\t2026-01-02 00:00:00.0 +0000\n"
           "@@ -1,2 +1,2 @@\n x = 1\n-y = 2\n+y = 3\n\\ No newline at end of file\n")
    rel = "--- srt/b.py\n+++ srt/b.py\n@@ -3 +3,2 @@\n z\n+w\n"
    files = importer.parse_patch(git_diff("a\n", "b\n", "srt/c.py") + gnu + rel)
    assert [(f.old, f.new, len(f.hunks)) for f in files] == [("srt/c.py", "srt/c.py", 1), ("srt/a.py", "srt/a.py", 1),
                                                            ("srt/b.py", "srt/b.py", 1)]
    assert files[1].hunks[0].lines[-1].startswith("\\ No newline")
    assert (files[2].hunks[0].old_len, files[2].hunks[0].new_len) == (1, 2)
    assert importer.parse_patch("--- /dev/null\n+++ b/python/sglang/n.py\n@@ -0,0 +1 @@\n+x = 1\n")[0].old is None
    # a `..` inside the path is resolved (the recipe names the file as the package has it); one that climbs out of
    # the package is refused before anything is written (import wrote a recipe it could not load)
    dotted = "--- a/python/sglang/srt/../g.py\n+++ b/python/sglang/srt/../g.py\n@@ -1 +1 @@\n-x\n+y\n"
    assert importer.parse_patch(dotted)[0].new == "g.py"
    with pytest.raises(UsageError, match="leads out of the package"):
        importer.parse_patch(dotted.replace("srt/../g.py", "../g.py"))


def test_parse_patch_reads_a_diff_of_two_trees_as_one_file_per_path_and_a_git_rename_as_a_rename():
    # `diff -ruN` run from inside one tree against a checkout: two paths for one file, a new file dated at the epoch
    trees = ("--- ./srt/a.py\t2026-01-02 10:00:00.000000000 +0800\n"
             "+++ ../../../work/python/sglang/srt/a.py\t2026-01-01 10:00:00.000000000 +0800\n"
             "@@ -1 +1 @@\n-x = 1\n+x = 2\n"
             "--- ./srt/new.py\t1970-01-01 08:00:00.000000000 +0800\n"
             "+++ ../../../work/python/sglang/srt/new.py\t2026-01-01 10:00:00.000000000 +0800\n"
             "@@ -0,0 +1 @@\n+y = 1\n"
             "--- orig/srt/b.py\n+++ srt/b.py\n@@ -1 +1 @@\n-z = 1\n+z = 2\n")
    renamed = ("diff --git a/python/sglang/srt/old.py b/python/sglang/srt/mod/old.py\nsimilarity index 90%\n"
               "rename from python/sglang/srt/old.py\nrename to python/sglang/srt/mod/old.py\n"
               "--- a/python/sglang/srt/old.py\n+++ b/python/sglang/srt/mod/old.py\n@@ -1 +1 @@\n-w = 1\n+w = 2\n")
    files = importer.parse_patch(trees + renamed)
    assert [(f.old, f.new) for f in files] == [("srt/a.py", "srt/a.py"), (None, "srt/new.py"),
                                               ("srt/b.py", "srt/b.py"), ("srt/old.py", "srt/mod/old.py")]


def test_import_of_a_patch_that_edits_no_file_of_the_release_says_why_and_writes_nothing(tmp_path, monkeypatch):
    pkg = package(tmp_path / "base", {"srt/mod.py": BEFORE})
    monkeypatch.setattr("patcher.fetch.fetch_release", lambda package, release: pkg.parent)
    patch = tmp_path / "team.patch"
    patch.write_text("--- /dev/null\n+++ b/python/sglang/srt/new.py\n@@ -0,0 +1 @@\n+x = 1\n"
                     + git_diff("a = 1\n", "a = 2\n", "srt/gone.py"))
    out = tmp_path / "recipes" / "team.yaml"
    with pytest.raises(UsageError, match=r"nothing in team.patch edits an existing file of sglang 0.0.1: "
                       r"srt/new.py \(new file.*srt/gone.py \(not in this release\)") as info:
        importer.import_patch(patch, package="sglang", release="0.0.1", out=out)
    assert info.value.exit_code == 2 and not out.exists()


def test_a_reversed_patch_is_bad_input_and_a_hunk_already_made_says_so(tmp_path, monkeypatch):
    # a diff made with its two trees swapped (`diff -ruN patched/ release/`): every hunk's new lines are the release's
    pkg = package(tmp_path / "base", {"srt/mod.py": BEFORE})
    monkeypatch.setattr("patcher.fetch.fetch_release", lambda package, release: pkg.parent)
    patch = tmp_path / "team.patch"
    patch.write_text(git_diff(edited(BEFORE), BEFORE, "srt/mod.py"))
    out = tmp_path / "recipes" / "team.yaml"
    with pytest.raises(UsageError, match=r"team.patch looks reversed: in sglang 0.0.1, none of its 3 hunks finds its "
                                         r"old lines, and each finds its new lines") as info:
        importer.import_patch(patch, package="sglang", release="0.0.1", out=out)
    assert info.value.exit_code == 2 and not out.exists()
    # one hunk of a patch already made on the release, beside one that is not: said per hunk, the rest lifted
    half = edited(BEFORE, EDITS[1:2])
    lifted = importer.lift(package(tmp_path / "half", {"srt/mod.py": half}),
                           git_diff(BEFORE, edited(BEFORE, EDITS[1:3]), "srt/mod.py"))
    assert [h.reason for h in lifted.hunks] == [importer.REVERSED, None]


def test_a_file_whose_hunks_do_not_apply_is_not_judged_byte_identical(tmp_path, monkeypatch):
    # the patch was made on another release: in other.py none of its hunks finds its old lines, so the file the
    # round trip would compare with is the pristine one, which the recipe (whose steps refuse) leaves as it is
    other = BEFORE.replace("def poll(a, b):\n    return a + b\n", "def poll(a, b):\n    return b + a\n")
    assert other != BEFORE
    pkg = package(tmp_path / "base", {"srt/mod.py": BEFORE, "srt/other.py": other})
    monkeypatch.setattr("patcher.fetch.fetch_release", lambda package, release: pkg.parent)
    patch = tmp_path / "team.patch"
    patch.write_text(git_diff(BEFORE, edited(BEFORE), "srt/mod.py")
                     + git_diff(BEFORE, edited(BEFORE, EDITS[:1]), "srt/other.py"))
    result = importer.import_patch(patch, package="sglang", release="0.0.1", out=tmp_path / "r" / "team.yaml")
    rt = result.round_trip
    assert rt.identical == ["srt/mod.py"] and rt.unmatched == {"srt/other.py": 1} and rt.files == 2, rt
    assert not rt.ok and result.exit_code != 0


def test_blank_lines_a_patch_adds_with_spaces_are_left_empty_and_the_round_trip_says_so(tmp_path):
    # an editor that keeps indentation on blank lines: the code lifts, the spaces are not reproduced, and said so
    after = BEFORE.replace("        self.size = size\n",
                           "        self.size = size\n        if size < 0:\n            raise ValueError(size)\n        \n")
    after = after.replace("    def add(self, x):", "    def clear(self):\n        self.items.clear()\n    \n"
                                                    "    def add(self, x):")
    after = after.replace("    parser.add_argument(\"--b\", type=int)\n\n\n",
                          "    parser.add_argument(\"--b\", type=int)\n    \n\n")  # only spaces on a blank line
    pkg = package(tmp_path / "base", {"srt/mod.py": BEFORE})
    lifted, out = lift_and_write(tmp_path, pkg, git_diff(BEFORE, after, "srt/mod.py"))
    assert [s.options["op"] for s in lifted.steps] == ["insert_statements", "add_method"]
    assert [(h.lifted, h.note) for h in lifted.hunks][-1] == (
        True, "it only adds whitespace at the end of blank lines: no step")
    assert lifted.expected["srt/mod.py"] == after.encode()  # what the patch makes, as it makes it
    made, count = lifted.trimmed["srt/mod.py"]
    assert count == 3 and made == "\n".join(ln if ln.strip() else "" for ln in after.split("\n")).encode()
    rt = importer.round_trip(out, pkg, lifted.expected, lifted.trimmed)
    assert rt.ok and rt.identical == [] and rt.blank_whitespace == {"srt/mod.py": 3}
    assert not importer.round_trip(out, pkg, lifted.expected).ok  # byte for byte, it is not the patched file


def test_spaces_on_a_blank_line_inside_a_string_are_the_string_s_and_kept(tmp_path):
    after = BEFORE.replace('        """Add."""\n', '        """Add.\n\n        x: the item\n        """\n')
    spaced = after.replace('        """Add.\n\n', '        """Add.\n        \n')
    pkg = package(tmp_path / "base", {"srt/mod.py": BEFORE})
    lifted = importer.lift(pkg, git_diff(BEFORE, spaced, "srt/mod.py"))
    assert lifted.expected["srt/mod.py"] == spaced.encode() and lifted.trimmed == {}


@pytest.mark.parametrize("text, message", [
    ("just some text\n", "holds no hunk"),
    ("--- a/x.py\n+++ b/x.py\n@@ -1,3 +1,3 @@\n a\n-b\n+c\n", "cut short"),
    # a header that counts too few lines: the `+` line below its count would be dropped in silence
    ("--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,3 @@\n a\n+b\n c\n d\n+e\n", "longer than its header says: line 8"),
])
def test_parse_patch_refuses_what_is_not_a_whole_diff(text, message):
    with pytest.raises(UsageError, match=message) as info:
        importer.parse_patch(text)
    assert info.value.exit_code == 2
    assert info.value.title == "unusable patch"  # the patch is at fault, not a command-line value


def test_what_follows_a_hunk_that_is_not_a_change_is_not_taken_for_one():
    # format-patch's signature, a commit's text in `git log -p`, the next file: none is a change of the hunk above
    hunk = "--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,3 @@\n a\n+b\n c\n"
    for tail in ("-- \n2.39.2\n", "\ncommit 0123abc\nAuthor: x\n\n    - a list item\n", "\n--- a/y.py\n+++ b/y.py\n"
                 "@@ -1 +1 @@\n-p\n+q\n"):
        assert [h.header for f in importer.parse_patch(hunk + tail) for h in f.hunks][0] == "@@ -1,2 +1,3 @@"


def test_a_hunk_sits_where_its_lines_are_even_at_another_line():
    text = "a\nb\nc\nd\ne\n"
    fp = importer.parse_patch("--- x.py\n+++ x.py\n@@ -1,2 +1,2 @@\n d\n-e\n+E\n")[0]
    units, bad = importer.units_of(text, fp)
    assert not bad and [(u.start, u.old, u.new) for u in units] == [(4, ["e\n"], ["E\n"])]


# --------------------------------------------------------------------------------------------------- lifting


def test_lift_chooses_the_robust_operation_per_hunk_and_round_trips(tmp_path):
    pkg = package(tmp_path / "base", {"srt/mod.py": BEFORE})
    after = edited(BEFORE)
    lifted, out = lift_and_write(tmp_path, pkg, git_diff(BEFORE, after, "srt/mod.py"))
    ops = [s.options["op"] for s in lifted.steps]
    assert ops == ["add_parameter", "replace_expression", "add_definition", "add_dataclass_field",
                   "add_keyword_argument", "replace_statements", "add_method", "add_argparse_argument"]
    assert lifted.lifted == len(lifted.hunks) and not lifted.skipped
    method = next(s for s in lifted.steps if s.options["op"] == "add_method")
    assert (method.options["class"], method.options["after"]) == ("Queue", "pop")
    # the recipe is readable: named steps, multi-line code in files beside it
    recipe = load_recipe(out)
    assert all(s.name and s.name.startswith("srt-mod-h") for s in recipe.steps)
    code_files = sorted(p.name for p in (out.parent / "lifted").rglob("*.py"))
    assert any(name.endswith("add-method-clear.code.py") for name in code_files)
    rt = importer.round_trip(out, pkg, lifted.expected)
    assert rt.ok and rt.identical == ["srt/mod.py"]
    assert lifted.expected["srt/mod.py"] == after.encode()


def test_applying_the_lifted_recipe_to_the_patched_file_changes_nothing(tmp_path):
    pkg = package(tmp_path / "base", {"srt/mod.py": BEFORE})
    lifted, out = lift_and_write(tmp_path, pkg, git_diff(BEFORE, edited(BEFORE), "srt/mod.py"))
    patched = package(tmp_path / "patched", {"srt/mod.py": edited(BEFORE)})
    ported = importer.port(load_recipe(out), patched)
    assert {s.status for s in ported.steps} == {"already_upstream"}
    assert ported.files["srt/mod.py"] == edited(BEFORE).encode()


def test_crlf_file_round_trips(tmp_path):
    before = BEFORE.replace("\n", "\r\n")
    after = edited(BEFORE).replace("\n", "\r\n")
    pkg = package(tmp_path / "base", {"srt/mod.py": before})
    lifted, out = lift_and_write(tmp_path, pkg, git_diff(before, after, "srt/mod.py"))
    assert lifted.lifted == len(lifted.hunks)
    assert importer.round_trip(out, pkg, lifted.expected).ok
    assert lifted.expected["srt/mod.py"] == after.encode()


CRLF_MODEL = '''"""Doc."""

import logging
from typing import Any

import torch


class Model:
    pass


class ForCausalLM:
    pass


EntryClass = [ForCausalLM]
'''


def test_edits_to_a_crlf_file_are_lifted_from_the_patch_file_whatever_its_line_ends(tmp_path, monkeypatch):
    # a release file with CRLF line ends: git's diff ends its hunks' lines in "\r\n", its framing lines in "\n";
    # the "\r" is the file's and is kept when the patch file is read (not turned into "\n")
    crlf = lambda text: text.replace("\n", "\r\n")  # noqa: E731
    after = CRLF_MODEL.replace("import logging\n", "import logging\nimport os\n").replace(
        "EntryClass = [ForCausalLM]", "EntryClass = [ForCausalLM, Model]")
    pkg = package(tmp_path / "base", {"srt/model.py": crlf(CRLF_MODEL), "srt/lf.py": CRLF_MODEL})
    patch = git_diff(crlf(CRLF_MODEL), crlf(after), "srt/model.py")
    assert "+import os\r\n" in patch and "\n@@ -" in patch and "@@\r" not in patch
    lf = git_diff(CRLF_MODEL, after, "srt/lf.py")
    # as git writes it; converted to CRLF as a whole (unix2dos: its CRLF lines kept, the others given a "\r"); every
    # line given a "\r"; with the file's "\r" lost (read with universal newlines)
    for k, text in enumerate((patch + lf, (patch + lf).replace("\r\n", "\n").replace("\n", "\r\n"),
                              (patch + lf).replace("\n", "\r\n"))):
        (tmp_path / f"run{k}").mkdir()
        done = import_cli(tmp_path / f"run{k}", monkeypatch, pkg, text)
        assert done.exit_code == 0, done.output
        assert "4/4 hunks as 4 steps; round trip: 2/2 files byte-identical" in " ".join(done.output.split())
    lifted = importer.lift(pkg, patch.replace("\r", ""))
    assert [s for h in lifted.hunks for s in h.steps] == ["add_import", "add_element"]
    assert lifted.expected["srt/model.py"] == crlf(after).encode()


def test_a_hunk_no_operation_reproduces_becomes_a_step_that_refuses_with_its_place(tmp_path):
    pkg = package(tmp_path / "base", {"srt/mod.py": BEFORE})
    after = BEFORE.replace("# end of module", "# the end")  # a comment after the last statement
    lifted, out = lift_and_write(tmp_path, pkg, git_diff(BEFORE, after, "srt/mod.py"))
    assert [s.options["op"] for s in lifted.steps] == ["unexpressed_hunk"]
    assert lifted.lifted == 0 and lifted.hunks[0].reason
    ported = importer.port(load_recipe(out), pkg)
    step = ported.steps[0]
    assert step.status == "refused" and "hunk not expressed" in step.message
    assert "@@ -" in step.message and step.error.exit_code == 3
    assert not importer.round_trip(out, pkg, lifted.expected).ok


def test_a_hunk_that_is_not_for_this_release_is_a_refusing_step_not_a_drop(tmp_path):
    pkg = package(tmp_path / "base", {"srt/mod.py": BEFORE})
    patch = git_diff(BEFORE.replace("LIMIT = 4", "LIMIT = 5"), BEFORE.replace("LIMIT = 4", "LIMIT = 6"), "srt/mod.py")
    lifted, out = lift_and_write(tmp_path, pkg, patch)
    assert [(s.options["op"], s.options["reason"]) for s in lifted.steps] == [
        ("unexpressed_hunk", "its old lines are not in the file")]
    assert importer.port(load_recipe(out), pkg).steps[0].status == "refused"


def test_files_the_recipe_cannot_touch_are_reported(tmp_path):
    pkg = package(tmp_path / "base", {"srt/mod.py": BEFORE})
    patch = "--- /dev/null\n+++ b/python/sglang/srt/new.py\n@@ -0,0 +1 @@\n+x = 1\n"
    lifted = importer.lift(pkg, patch)
    assert lifted.skipped == [("srt/new.py", "new file: recipes edit existing files only")]
    assert lifted.lifted == 0


# --------------------------------------------------------------------------------------------------- porting


def test_port_says_applied_already_upstream_or_refused_and_never_applies_twice(tmp_path):
    pkg = package(tmp_path / "base", {"srt/mod.py": BEFORE})
    lifted, out = lift_and_write(tmp_path, pkg, git_diff(BEFORE, edited(BEFORE), "srt/mod.py"))
    # the next release: upstream adopted `clear` (same code, other layout), renamed `pop` away, kept the rest
    later = edited(BEFORE, [EDITS[4]]).replace('"""Clear\n        all."""', '"""Clear\n        all."""  # upstream')
    later = later.replace("    def pop(self):\n        if self.items:\n            pass\n",
                          "    def take(self):\n        if self.items:\n            pass\n")
    release = package(tmp_path / "later", {"srt/mod.py": later})
    ported = importer.port(load_recipe(out), release)
    by_op = {s.op: s for s in ported.steps}
    assert by_op["add_method"].status == "already_upstream"
    assert by_op["replace_statements"].status == "refused"
    assert "Queue.pop" in by_op["replace_statements"].message
    assert {by_op[k].status for k in ("add_dataclass_field", "add_keyword_argument", "add_argparse_argument",
                                      "add_parameter")} == {"applied"}
    assert ported.files["srt/mod.py"].count(b"def clear(self)") == 1


def test_port_refuses_an_import_of_a_module_the_release_does_not_have(tmp_path):
    # a hostile round: a hunk of 0.5.10 -> 0.5.11 imports `RoutedExpertsOutput` from a module 0.5.11 added;
    # ported to a release without that module it landed, and the server would die with ModuleNotFoundError
    before = "import os\n\n\ndef run():\n    return os.getpid()\n"
    after = ("import os\n\nfrom sglang.srt.layers.capturer import Output\n\n\n"
             "def run():\n    return Output(os.getpid())\n")
    base = package(tmp_path / "base", {"srt/w.py": before, "srt/layers/__init__.py": "",
                                       "srt/layers/capturer.py": "class Output(int):\n    pass\n"})
    _, out = lift_and_write(tmp_path, base, git_diff(before, after, "srt/w.py"))
    release = package(tmp_path / "later", {"srt/w.py": before, "srt/layers/__init__.py": ""})
    ported = importer.port(load_recipe(out), release, base_dir=base)
    said = [(s.status, s.message) for s in ported.steps]
    assert any(st == "refused" and "`sglang.srt.layers.capturer`, a module this release does not have" in m
               for st, m in said), said
    assert all(st != "applied" for st, _ in said), said  # the call of `Output` falls with its import
    assert b"capturer" not in ported.files.get("srt/w.py", b"")
    # on the base release itself, where the module is, nothing is refused
    assert all(s.status != "refused" for s in importer.port(load_recipe(out), base, base_dir=base).steps)


def test_port_refuses_code_upstream_already_has_elsewhere(tmp_path):
    before = "def f(self):\n    self.a()\n    return 1\n"
    after = "def f(self):\n    self.a()\n    self.flush()\n    return 1\n"
    pkg = package(tmp_path / "base", {"srt/m.py": before})
    lifted, out = lift_and_write(tmp_path, pkg, git_diff(before, after, "srt/m.py"))
    later = "def f(self):\n    self.flush()\n    self.a()\n    return 1\n"  # upstream has it, in another place
    ported = importer.port(load_recipe(out), package(tmp_path / "later", {"srt/m.py": later}))
    step = ported.steps[0]
    assert step.status == "upstream_other_form"  # refused, and every line it adds is in the file: said so
    assert "self.flush()" in step.message and "another form" in step.message and "line 2" in step.message
    assert step.evidence == ("line 2: `self.flush()`",)
    assert ported.files["srt/m.py"].count(b"self.flush()") == 1


def test_a_refusal_is_upstream_in_another_form_only_when_every_added_line_is_there(tmp_path):
    before = "def f(self):\n    self.a()\n    return 1\n"
    after = "def f(self):\n    self.a()\n    self.flush(now=True)\n    self.count += 1\n    return 1\n"
    pkg = package(tmp_path / "base", {"srt/m.py": before})
    lifted, out = lift_and_write(tmp_path, pkg, git_diff(before, after, "srt/m.py"))
    recipe = load_recipe(out)
    # upstream moved `self.a()` away (the anchor is gone) and has one of the two added lines: refused
    half = "def f(self):\n    self.b()\n    self.flush(now=True)\n    return 1\n"
    ported = importer.port(recipe, package(tmp_path / "half", {"srt/m.py": half}))
    assert [s.status for s in ported.steps] == ["refused"] and ported.steps[0].evidence == ()
    # both added lines are there, reformatted and in another order: upstream in another form
    both = "def f(self):\n    self.b()\n    self.count  +=  1\n    self.flush(now=True)  # first\n    return 1\n"
    ported = importer.port(recipe, package(tmp_path / "both", {"srt/m.py": both}))
    assert [s.status for s in ported.steps] == ["upstream_other_form"]
    assert ported.steps[0].evidence == ("line 4: `self.flush(now=True`", "line 3: `self.count += 1`") \
        or len(ported.steps[0].evidence) == 2


def test_the_lines_of_a_longer_change_count_as_upstreams_only_as_whole_lines(tmp_path):
    before = "def f(self):\n    self.a()\n    return 1\n"
    after = "def f(self):\n    self.a()\n    self.ready = self.check(now=True)\n    self.count_all += 1\n    return 1\n"
    pkg = package(tmp_path / "base", {"srt/m.py": before})
    lifted, out = lift_and_write(tmp_path, pkg, git_diff(before, after, "srt/m.py"))
    recipe = load_recipe(out)
    # the anchor is gone and one added statement is there (so the step refuses); the other is there only as the
    # start of a longer line of other code: not the change (it was taken as upstream's, in another form)
    other = ("def f(self):\n    self.b()\n    self.ready = self.check(now=True) and self.idle\n"
             "    self.count_all += 1\n    return 1\n")
    ported = importer.port(recipe, package(tmp_path / "other", {"srt/m.py": other}))
    assert [s.status for s in ported.steps] == ["refused"] and ported.steps[0].evidence == ()
    # the same statements, reordered, wrapped and commented: upstream in another form
    same = ("def f(self):\n    self.b()\n    self.count_all  +=  1  # moved\n"
            "    self.ready = self.check(\n        now=True,\n    )\n    return 1\n")
    ported = importer.port(recipe, package(tmp_path / "same", {"srt/m.py": same}))
    assert [s.status for s in ported.steps] == ["upstream_other_form"] and len(ported.steps[0].evidence) == 2


def test_a_one_line_change_is_found_inside_a_line_only_as_whole_tokens():
    from patcher.importer import _inside_line

    assert _inside_line("timeout=args.timeout", "    run(x, timeout=args.timeout, retries=3)")
    assert not _inside_line("timeout=args.timeout", "    run(x, read_timeout=args.timeout_s)")
    assert not _inside_line("timeout=args.timeout", "    run(x, read_timeout=args.timeout)")
    assert not _inside_line("short=1", "f(short=1)")  # under 12 characters: too common to tell anything


def test_statements_inserted_in_a_function_anchor_on_a_pattern_that_survives_an_argument_rename(tmp_path):
    before = ("from .env import get_env\n\n\ndef pop(self):\n    polls = poll_all(\n        [req.receiver for req in self.queue], self.group\n    )\n\n"
              "    done = []\n    return done\n")
    after = before.replace("    )\n\n", "    )\n\n    # a timeout\n    timeout = float(get_env(\"T\", \"600\"))\n\n")
    pkg = package(tmp_path / "base", {"srt/m.py": before})
    lifted, out = lift_and_write(tmp_path, pkg, git_diff(before, after, "srt/m.py"))
    assert [(s.options["op"], s.options.get("match"), s.options.get("at")) for s in lifted.steps] == [
        ("insert_statements", "polls = poll_all(...)", "after")]
    assert importer.round_trip(out, pkg, lifted.expected).ok
    recipe = load_recipe(out)
    # upstream renamed the comprehension's variable and moved the call into a block: the step still lands, in
    # that block when the code reads what the block assigns, else before `done = []`, where it runs on every path
    later = ("from .env import get_env\n\n\ndef pop(self):\n    if self.queue:\n        polls = poll_all(\n            [r.receiver for r in self.queue], "
             "self.group\n        )\n\n    done = []\n    return done\n")
    ported = importer.port(recipe, package(tmp_path / "later", {"srt/m.py": later}))
    assert [s.status for s in ported.steps] == ["applied"]
    # with the blank lines of the release the recipe was made on: the code's own above it, `done = []`'s below it
    assert b"        )\n\n    # a timeout\n    timeout = float(get_env(\"T\", \"600\"))\n\n    done = []" \
        in ported.files["srt/m.py"]
    reads = before.replace("polls = poll_all(", "polls = get_env = poll_all(")
    assert reads.count("get_env") == 2  # the import, and the local that hides it
    _, out2 = lift_and_write(tmp_path, package(tmp_path / "base2", {"srt/m.py": reads}),
                             git_diff(reads, after.replace("polls = poll_all(", "polls = get_env = poll_all("),
                                      "srt/m.py"), name="reads")
    ported = importer.port(load_recipe(out2), package(tmp_path / "later2", {"srt/m.py": later.replace(
        "polls = poll_all(", "polls = get_env = poll_all(")}))
    assert b"        )\n\n        # a timeout\n        timeout = float(" in ported.files["srt/m.py"]
    # a release that has the statement where the step's fallback puts it (before `done = []`, the anchor nested in
    # the `if`): already upstream, as a second apply finds it (review 12: apply refused its own result there)
    has = later.replace("    done = []\n", "    timeout = float(get_env(\"T\", \"600\"))\n    done = []\n")
    ported = importer.port(recipe, package(tmp_path / "has", {"srt/m.py": has}))
    assert [s.status for s in ported.steps] == ["already_upstream"]
    assert ported.files["srt/m.py"].count(b"timeout = float(") == 1


IMPORTS = '''\
from sglang.srt.layers.utils import (
    can_split,
    gather_output,
)
from sglang.srt.utils import add_prefix


def f():
    return can_split()
'''


def test_a_name_added_to_an_import_list_is_lifted_as_a_merged_add_import_and_follows_the_list(tmp_path):
    after = IMPORTS.replace("    can_split,\n", "    can_split,\n    is_prefill_cp,\n")
    pkg = package(tmp_path / "base", {"srt/m.py": IMPORTS})
    lifted, out = lift_and_write(tmp_path, pkg, git_diff(IMPORTS, after, "srt/m.py"))
    assert [s.options for s in lifted.steps] == [{
        "op": "add_import", "code": "from sglang.srt.layers.utils import is_prefill_cp", "merge": True,
        "after": "can_split"}]
    assert importer.round_trip(out, pkg, lifted.expected).ok
    recipe = load_recipe(out)
    # the next release reshaped the list (a name added, one removed): the step still lands, in the list
    later = IMPORTS.replace("    gather_output,\n", "    rerange,\n    shard,\n")
    ported = importer.port(recipe, package(tmp_path / "later", {"srt/m.py": later}))
    assert [s.status for s in ported.steps] == ["applied"]
    assert b"    can_split,\n    is_prefill_cp,\n    rerange,\n" in ported.files["srt/m.py"]
    # a release that imports it already (in another statement): already upstream, not imported twice
    has = IMPORTS.replace("import add_prefix", "import add_prefix\nfrom sglang.srt.layers.utils import is_prefill_cp")
    ported = importer.port(recipe, package(tmp_path / "has", {"srt/m.py": has}))
    assert [s.status for s in ported.steps] == ["already_upstream"]


def lifted_round_trip(tmp_path: Path, before: str, after: str, rel: str):
    """The steps lifted from the diff of one file, and the recipe as loaded from disk (its round trip checked)."""
    pkg = package(tmp_path / "base", {rel: before})
    lifted, out = lift_and_write(tmp_path, pkg, git_diff(before, after, rel))
    assert importer.round_trip(out, pkg, lifted.expected).ok
    return lifted.steps, load_recipe(out)


ROUTES = '''from app import app, Response


async def validate(request):
    return request


##### Health endpoints #####


@app.get("/ping")
@app.get("/ping_generate")
async def ping_generate(request) -> Response:
    """Generate one token."""
    await request.generate(1)
    return Response(status_code=200)
'''


def test_a_function_inserted_under_a_section_heading_takes_a_decorator_of_the_one_below(tmp_path):
    # the decorator `@app.get("/ping")` moves from `ping_generate` onto a new function put above it, under the
    # section's comment: a definition before `ping_generate` and its new header, not the whole function replaced
    after = ROUTES.replace('@app.get("/ping")\n', '@app.get("/ping")\nasync def ping(request) -> Response:\n'
                           '    return Response(status_code=200)\n\n\n')
    steps, recipe = lifted_round_trip(tmp_path, ROUTES, after, "srt/routes.py")
    assert [(s.options["op"], s.options.get("before")) for s in steps] == [("add_definition", "ping_generate"),
                                                                         ("replace_statements", None)]
    assert "    ..." in steps[1].options["match"] and "generate(1)" not in steps[1].options["match"]
    # upstream rewrote the function's body: both steps still land
    later = ROUTES.replace("    await request.generate(1)\n", "    if request.ready:\n        await request.generate(1)\n")
    ported = importer.port(recipe, package(tmp_path / "later", {"srt/routes.py": later}))
    assert [s.status for s in ported.steps] == ["applied", "applied"]
    assert ported.files["srt/routes.py"].decode() == after.replace("    await request.generate(1)\n",
                                                                 "    if request.ready:\n        await request.generate(1)\n")


TOPK = '''class TopK:
    def __init__(self, top_k, grouped=False, group=None):
        super().__init__()
        if grouped:
            assert group is not None

        self.config = Config(top_k=top_k, group=group)
        self.ready = True
'''


def test_a_statement_put_at_the_top_of_a_paragraph_is_an_insertion_before_the_statement_below(tmp_path):
    # the new line goes under the blank line that opened the paragraph: the statement below loses it, the
    # insertion takes it (not two replacements, each matching a statement and the new line)
    after = TOPK.replace("\n        self.config =", "\n        self.layer = None\n        self.config =")
    steps, recipe = lifted_round_trip(tmp_path, TOPK, after, "srt/topk.py")
    assert [(s.options["op"], s.options.get("at"), s.options.get("match")) for s in steps] == [
        ("insert_statements", "before", "self.config = Config(...)")]
    later = TOPK.replace("if grouped:", "if grouped and group:")
    ported = importer.port(recipe, package(tmp_path / "later", {"srt/topk.py": later}))
    assert [s.status for s in ported.steps] == ["applied"]
    assert ported.files["srt/topk.py"].decode() == after.replace("if grouped:", "if grouped and group:")


def test_a_keyword_only_parameter_is_added_after_the_star_or_the_one_it_follows(tmp_path):
    before = "def select(\n    hidden,\n    logits,\n    *,\n    padded=None,\n    info=None,\n):\n    return hidden\n"
    for after, where in (("    *,\n    layer=None,\n", "*"), ("    padded=None,\n    layer=None,\n", "padded")):
        text = before.replace(after.split("\n")[0] + "\n", after)
        steps, recipe = lifted_round_trip(tmp_path / where.strip("*") or tmp_path, before, text, "srt/topk.py")
        assert [(s.options["op"], s.options.get("after")) for s in steps] == [("add_parameter", where)]
        later = before.replace("    info=None,\n", "    info=None,\n    dispatch=None,\n")
        ported = importer.port(recipe, package(tmp_path / where.strip("*") / "later", {"srt/topk.py": later}))
        assert [s.status for s in ported.steps] == ["applied"]
        assert ported.files["srt/topk.py"].decode() == text.replace("    info=None,\n",
                                                                   "    info=None,\n    dispatch=None,\n")


QUEUE = '''from .timing import clock


class TransferQueue:
    def pop(self, rids=None):
        if not self.queue:
            return []

        polls = poll_all(self.queue, self.group)
        done = []
        for req, poll in zip(self.queue, polls):
            if poll == Poll.Waiting:
                pass
        return done
'''


def test_an_insertion_whose_anchor_upstream_nested_in_a_branch_goes_next_to_its_other_neighbour(tmp_path):
    # the code went after `polls = ...`, before `done = []`; upstream put `polls = ...` under an `if`/`else`:
    # after it, the code would run in the `else:` only (`now` unset on the other branch), so it goes before
    # `done = []`, still between the two
    after = QUEUE.replace("        done = []\n", "        now = clock()\n        done = []\n")
    steps, recipe = lifted_round_trip(tmp_path, QUEUE, after, "srt/queue.py")
    assert [(s.options["op"], s.options.get("fallback_match")) for s in steps] == [("insert_statements", "done = []")]
    later = QUEUE.replace("        polls = poll_all(self.queue, self.group)\n",
                          "        if self.staging:\n            polls = self.poll_staged()\n        else:\n"
                          "            polls = poll_all(self.queue, self.group)\n")
    ported = importer.port(recipe, package(tmp_path / "later", {"srt/queue.py": later}))
    assert [s.status for s in ported.steps] == ["applied"]
    assert "            polls = poll_all(self.queue, self.group)\n        now = clock()\n        done = []\n" \
        in ported.files["srt/queue.py"].decode()


def test_a_change_two_hunks_make_names_both_hunks(tmp_path):
    # two hunks edit one call's arguments (eight lines apart): one step expresses both, and says so (the bench
    # scores each hunk by the steps that express it)
    args = "".join(f"        a{k},\n" for k in range(12))
    before = f"def launch(a0):\n    kernel(\n{args}        ENABLE=True,\n    )\n"
    after = before.replace("        a1,\n", "        a1,\n        axis_map,\n").replace(
        "        ENABLE=True,\n", "        MROPE=False,\n        ENABLE=True,\n")
    assert git_diff(before, after, "srt/k.py").count("@@ -") == 2
    pkg = package(tmp_path / "base", {"srt/k.py": before})
    lifted, _ = lift_and_write(tmp_path, pkg, git_diff(before, after, "srt/k.py"))
    assert [s.hunks for s in lifted.steps] == [(1, 2)] and all(r.lifted for r in lifted.hunks)


def test_an_insertion_moved_next_to_its_other_neighbour_leaves_that_neighbour_its_comment_and_blank_line(tmp_path):
    # as where the recipe was made: the code right below `polls = ...`, then the blank line and the comment of
    # `done = []`, not the comment above the code and the code glued to `done = []`
    base = QUEUE.replace("        done = []\n", "\n        # the finished requests\n        done = []\n")
    after = base.replace("        polls = poll_all(self.queue, self.group)\n",
                         "        polls = poll_all(self.queue, self.group)\n        now = clock()\n")
    steps, recipe = lifted_round_trip(tmp_path, base, after, "srt/queue.py")
    assert [(s.options["op"], s.options.get("fallback_match")) for s in steps] == [("insert_statements", "done = []")]
    later = base.replace("        polls = poll_all(self.queue, self.group)\n",
                         "        if self.staging:\n            polls = self.poll_staged()\n        else:\n"
                         "            polls = poll_all(self.queue, self.group)\n")
    ported = importer.port(recipe, package(tmp_path / "later", {"srt/queue.py": later}))
    assert [s.status for s in ported.steps] == ["applied"]
    assert ("            polls = poll_all(self.queue, self.group)\n        now = clock()\n\n"
            "        # the finished requests\n        done = []\n") in ported.files["srt/queue.py"].decode()


def test_a_name_put_first_in_an_import_list_is_merged_before_the_name_that_led_it(tmp_path):
    after = IMPORTS.replace("import (\n    can_split,\n", "import (\n    as_list,\n    can_split,\n")
    steps, recipe = lifted_round_trip(tmp_path, IMPORTS, after, "srt/m.py")
    assert [s.options.get("before") for s in steps] == ["can_split"]
    later = IMPORTS.replace("    gather_output,\n", "    gather_output,\n    shard,\n")
    ported = importer.port(recipe, package(tmp_path / "later", {"srt/m.py": later}))
    assert [s.status for s in ported.steps] == ["applied"]
    assert b"import (\n    as_list,\n    can_split,\n    gather_output,\n    shard,\n)" in ported.files["srt/m.py"]


LOADER = '''\
from .tracing import traced


class Loader:
    def prepare(
        self, path: str, revision: str
    ) -> str:
        """Prepare the weights.

        Downloads them first."""
        return path

    def weights(self, source):
        extra = self.config.extra
        # read the files
        folder, files = self.prepare(source.path, source.revision)
        return files
'''


def test_a_decorator_added_to_a_method_with_a_docstring_is_lifted_by_its_header(tmp_path):
    after = LOADER.replace("    def prepare(", "    @traced\n    def prepare(")
    steps, recipe = lifted_round_trip(tmp_path, LOADER, after, "srt/l.py")
    assert [s.options["op"] for s in steps] == ["replace_statements"]
    assert steps[0].options["code"].startswith("@traced\ndef prepare(")
    later = LOADER.replace("return path", "return path.strip()")
    ported = importer.port(recipe, package(tmp_path / "later", {"srt/l.py": later}))
    assert ported.files["srt/l.py"].decode() == after.replace("return path", "return path.strip()")


def test_statements_inserted_with_a_blank_line_below_are_one_step_that_survives_an_edit_below(tmp_path):
    after = LOADER.replace("        extra = self.config.extra\n", "        extra = self.config.extra\n"
                           "        if extra.get(\"fast\"):\n            return source.path\n\n")
    steps, recipe = lifted_round_trip(tmp_path, LOADER, after, "srt/l.py")
    assert [(s.options["op"], s.options["match"], s.options.get("blank_lines_after")) for s in steps] == [
        ("insert_statements", "extra = self.config.extra", 1)]
    # upstream passed one more argument to the statement below: the insertion (and its blank line) still lands
    later = LOADER.replace("source.path, source.revision)", "source.path, source.revision, source.pt)")
    ported = importer.port(recipe, package(tmp_path / "later", {"srt/l.py": later}))
    assert [s.status for s in ported.steps] == ["applied"]
    assert ported.files["srt/l.py"].decode() == after.replace("source.revision)", "source.revision, source.pt)")


# --------------------------------------------------------------------------------------------------- real releases


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200",
           "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    return subprocess.run([sys.executable, "-m", "patcher", *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=900)


@pytest.mark.sglang
def test_cli_lifts_upstreams_own_change_between_two_releases_and_ports_it(tmp_path, sglang_release):
    """The diff of one file from sglang 0.5.9 to 0.5.10, made here: lifted on 0.5.9 it round-trips byte for byte;
    ported to 0.5.10, every step finds its change already there (exit 0, nothing applied twice)."""
    rel = "srt/disaggregation/utils.py"
    old = (sglang_release("0.5.9") / "sglang" / rel).read_text()
    new = (sglang_release("0.5.10") / "sglang" / rel).read_text()
    (tmp_path / "up.patch").write_text(git_diff(old, new, rel))
    done = run("import", "up.patch", "--release", "0.5.9", "-o", "recipes/upstream-utils.yaml", "--json",
               cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    import json

    report = json.loads(done.stdout)
    assert report["lifted"] == report["hunks"] > 3 and report["round_trip"]["identical"] == [rel]
    ops = {s.op for s in load_recipe(tmp_path / "recipes/upstream-utils.yaml").steps}
    assert "add_definition" in ops  # new module-level functions are added by name, not as text
    done = run("port", "recipes/upstream-utils.yaml", "--release", "0.5.10", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    ported = json.loads(done.stdout)
    assert ported["already_upstream"] == len(ported["steps"]) and ported["applied"] == 0


@pytest.mark.sglang
def test_cli_import_exit_codes(tmp_path, sglang_release):
    sglang_release("0.5.9")
    (tmp_path / "bad.patch").write_text("not a diff\n")
    assert run("import", "bad.patch", "--release", "0.5.9", cwd=tmp_path).returncode == 2
    rel = "srt/disaggregation/utils.py"
    text = (sglang_release("0.5.9") / "sglang" / rel).read_text()
    # a comment added after the last statement of the module: no operation expresses it
    after = text + "# trailing note\n"
    (tmp_path / "note.patch").write_text(git_diff(text, after, rel))
    done = run("import", "note.patch", "--release", "0.5.9", "-o", "note.yaml", cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "not expressed" in done.stderr


@pytest.mark.sglang
def test_bench_import_scores_a_port_against_the_teams_port(tmp_path, sglang_release):
    """bench/import.py on a patch made here: upstream's own 0.5.9 -> 0.5.10 change of one file (so 0.5.10 has it),
    a method the team carries to 0.5.10, and a change the team dropped. specpatch lands the carried hunk as the
    team did, reports the upstream hunks as already there and applies none of them twice."""
    old9, new10 = (sglang_release(v) / "sglang" for v in ("0.5.9", "0.5.10"))
    utils = "srt/disaggregation/utils.py"
    checker = "srt/utils/weight_checker.py"
    method = ("    def _reset_tensors(self):", "    def _noop(self):\n        return None\n\n"
                                             "    def _reset_tensors(self):")
    dropped = ("    info_messages = []\n", '    info_messages = ["x"]\n')
    text = (old9 / checker).read_text()
    assert text == (new10 / checker).read_text()  # the file is the same in both releases
    ours = git_diff((old9 / utils).read_text(), (new10 / utils).read_text(), utils) + git_diff(
        text, edited(text, [method, dropped]), checker)
    team = git_diff(text, edited(text, [method]), checker)
    (tmp_path / "ours.patch").write_text(ours)
    (tmp_path / "team.patch").write_text(team)
    bench = Path(__file__).resolve().parent.parent / "bench" / "import.py"
    argv = [sys.executable, str(bench), str(tmp_path / "ours.patch"), "--base", "0.5.9", "--later", "0.5.10",
            "--truth", str(tmp_path / "team.patch")]
    done = subprocess.run([*argv, "--json", str(tmp_path / "out.json"), "--keep", str(tmp_path / "kept")],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    import json

    out = json.loads((tmp_path / "out.json").read_text())
    # scoring the kept recipe again (without lifting) gives the same figures
    again = subprocess.run([*argv, "--json", str(tmp_path / "again.json"), "--recipe",
                            str(tmp_path / "kept" / "bench-lifted.yaml")], capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stdout + again.stderr
    second = json.loads((tmp_path / "again.json").read_text())
    assert second["truth"]["tools"] == out["truth"]["tools"] and second["lifted"] == out["lifted"]
    assert out["lifted"] == out["hunks"] and out["round_trip_identical_files"] == out["round_trip_files"] == 2
    classes = out["truth"]["classes"]
    assert classes.get("carried") == 1 and classes.get("dropped") == 1 and classes.get("upstream", 0) >= 3
    spec = out["truth"]["tools"]["specpatch"]
    assert spec["carried"]["landed"] == 1 and spec["carried"]["wrong"] == 0
    assert spec["upstream"]["already_upstream"] == classes["upstream"] and spec["upstream"]["wrong"] == 0
    assert "patch --fuzz 2" in out["truth"]["tools"] and "landed as the team's port" in done.stdout


def test_an_import_whose_name_upstream_now_imports_from_another_module_is_upstream_in_another_form(tmp_path):
    after = IMPORTS.replace("    can_split,\n", "    can_split,\n    is_prefill_cp,\n")
    pkg = package(tmp_path / "base", {"srt/m.py": IMPORTS})
    lifted, out = lift_and_write(tmp_path, pkg, git_diff(IMPORTS, after, "srt/m.py"))
    moved = IMPORTS.replace("from sglang.srt.utils import add_prefix",
                            "from sglang.srt.utils import add_prefix\nfrom sglang.srt.layers.cp_utils import (\n"
                            "    is_prefill_cp,\n)")
    ported = importer.port(load_recipe(out), package(tmp_path / "moved", {"srt/m.py": moved}))
    step = ported.steps[0]
    assert step.status == "upstream_other_form"
    assert step.evidence == ("line 6: `from sglang.srt.layers.cp_utils import (` binds `is_prefill_cp`",)
    assert ported.files["srt/m.py"].count(b"is_prefill_cp") == 1


# --------------------------------------------------------------------------------------------------- holding together


def recipe_of(tmp_path: Path, steps: list[dict], files: dict[str, str] | None = None) -> Path:
    """A recipe written by hand (the shape `specpatch import` writes), code files beside it."""
    import yaml

    out = tmp_path / "recipes" / "held.yaml"
    out.parent.mkdir(parents=True, exist_ok=True)
    for rel, text in (files or {}).items():
        (out.parent / "held" / rel).parent.mkdir(parents=True, exist_ok=True)
        (out.parent / "held" / rel).write_text(text)
    out.write_text(yaml.safe_dump({"id": "held", "version": 1, "title": "t", "description": "d",
                                   "target": {"package": "sglang", "versions": ">=0.0.1"}, "steps": steps}))
    return out


UTILS = "class Buffers:\n    def __init__(self):\n        self.ids = make()\n\n    def infos(self):\n        return [self.ids]\n"
USER = "from .logs import log\n\n\ndef start(buffers):\n    ptrs = buffers.infos()\n    return ptrs\n"


def test_a_step_that_uses_a_name_only_a_refused_step_adds_is_refused_naming_both(tmp_path):
    steps = [
        # upstream rewrote `__init__`: the step that adds `self.timing` refuses
        {"name": "utils-h1-replace", "op": "replace_statements", "file": "srt/utils.py", "group": "h1",
         "within": "Buffers.__init__", "match": "self.ids = make()",
         "code": "self.ids = make()\nself.timing = make()\n"},
        {"name": "utils-h2-add-method", "op": "add_method", "file": "srt/utils.py", "group": "h2", "class": "Buffers",
         "code": "def clear_timing(self):\n    self.timing.zero_()\n"},
        {"name": "user-h1-insert", "op": "insert_statements", "file": "srt/user.py", "group": "h1",
         "function": "start", "at": "after", "match": "ptrs = buffers.infos()", "code": "buffers.clear_timing()\n"},
        {"name": "user-h2-unrelated", "op": "insert_statements", "file": "srt/user.py", "group": "h2",
         "function": "start", "at": "before", "match": "return ptrs", "code": "log(ptrs)\n"},
    ]
    out = recipe_of(tmp_path, steps)
    later = package(tmp_path / "later", {"srt/utils.py": UTILS.replace("self.ids = make()", "self.ids = alloc()"),
                                         "srt/user.py": USER})
    ported = importer.port(load_recipe(out), later)
    status = {s.name: s for s in ported.steps}
    assert status["utils-h1-replace"].status == "refused"
    # the method reads `self.timing`, which only the refused step adds; the caller of the method then falls too
    assert status["utils-h2-add-method"].status == "refused"
    assert "`timing`" in status["utils-h2-add-method"].message and "utils-h1-replace" in status["utils-h2-add-method"].message
    assert status["user-h1-insert"].status == "refused" and "`clear_timing`" in status["user-h1-insert"].message
    assert "start: `ptrs = buffers.infos()`" in status["user-h1-insert"].message  # the anchor is named
    assert status["user-h2-unrelated"].status == "applied"
    assert b"clear_timing" not in ported.files["srt/user.py"] and b"log(ptrs)" in ported.files["srt/user.py"]
    assert b"clear_timing" not in ported.files["srt/utils.py"]
    # on a release where nothing refuses, everything applies: the rules only follow refusals
    same = package(tmp_path / "same", {"srt/utils.py": UTILS, "srt/user.py": USER})
    assert {s.status for s in importer.port(load_recipe(out), same).steps} == {"applied"}


def test_a_step_whose_new_names_only_refused_steps_use_is_refused_and_a_name_the_release_has_is_not_followed(tmp_path):
    steps = [
        {"name": "utils-h1-const", "op": "add_definition", "file": "srt/utils.py", "group": "h1", "after": "Buffers",
         "code": "TIMING_NAME = 'timing'\n"},
        {"name": "user-h1-uses-const", "op": "insert_statements", "file": "srt/user.py", "group": "h1",
         "function": "gone", "at": "after", "match": "x = 1", "code": "y = TIMING_NAME\n"},
        {"name": "utils-h2-helper", "op": "add_definition", "file": "srt/utils.py", "group": "h2", "after": "Buffers",
         "code": "def make():\n    return 1\n"},  # `make` is a name the release has: its users are not followed
        {"name": "user-h2-uses-make", "op": "insert_statements", "file": "srt/user.py", "group": "h2",
         "function": "gone", "at": "after", "match": "x = 2", "code": "z = make()\n"},
    ]
    out = recipe_of(tmp_path, steps)
    later = package(tmp_path / "later", {"srt/utils.py": UTILS, "srt/user.py": USER})
    ported = {s.name: s for s in importer.port(load_recipe(out), later).steps}
    assert ported["user-h1-uses-const"].status == "refused"  # `gone` is not in the release
    assert ported["utils-h1-const"].status == "refused"
    assert "`TIMING_NAME`" in ported["utils-h1-const"].message and "user-h1-uses-const" in ported["utils-h1-const"].message
    assert ported["utils-h2-helper"].status == "applied"


def test_the_edits_of_one_hunk_to_one_place_stand_or_fall_together_but_not_edits_to_other_places(tmp_path):
    before = "def f(self):\n    a = 1\n    b = 2\n    return a + b\n\n\ndef g():\n    return 0\n"
    steps = [
        {"name": "m-h1-one", "op": "replace_statements", "file": "srt/m.py", "group": "h1", "within": "f",
         "match": "a = 1", "code": "a = 10\n"},
        {"name": "m-h1-two", "op": "replace_statements", "file": "srt/m.py", "group": "h1", "within": "f",
         "match": "b = 2", "code": "b = 20\n"},
        {"name": "m-h1-other-place", "op": "replace_statements", "file": "srt/m.py", "group": "h1", "within": "g",
         "match": "return 0", "code": "return 1\n"},
    ]
    out = recipe_of(tmp_path, steps)
    later = package(tmp_path / "later", {"srt/m.py": before.replace("b = 2", "b = 3")})
    ported = {s.name: s for s in importer.port(load_recipe(out), later).steps}
    assert ported["m-h1-two"].status == "refused"
    assert ported["m-h1-one"].status == "refused" and "group (`h1`) in `f`" in ported["m-h1-one"].message
    assert ported["m-h1-other-place"].status == "applied"
    # the same steps without a group are independent
    for s in steps:
        s.pop("group")
    alone = {s.name: s.status for s in importer.port(load_recipe(recipe_of(tmp_path, steps)), later).steps}
    assert alone == {"m-h1-one": "applied", "m-h1-two": "refused", "m-h1-other-place": "applied"}


def test_a_local_name_of_one_function_does_not_tie_steps_in_another(tmp_path):
    before = "from .sync import wait\n\n\ndef f():\n    x = 1\n    return x\n\n\ndef g():\n    x = 2\n    return x\n"
    steps = [
        {"name": "m-h1-f", "op": "insert_statements", "file": "srt/m.py", "group": "h1", "function": "f",
         "at": "after", "match": "x = 1", "code": "timeout = 5\nwait(timeout)\n"},
        {"name": "m-h2-g", "op": "insert_statements", "file": "srt/m.py", "group": "h2", "function": "g",
         "at": "after", "match": "x = 3", "code": "timeout = 6\n"},
        {"name": "m-h3-g-uses", "op": "insert_statements", "file": "srt/m.py", "group": "h3", "function": "g",
         "at": "before", "match": "return x", "code": "wait(timeout)\n"},
    ]
    out = recipe_of(tmp_path, steps)
    ported = {s.name: s for s in importer.port(load_recipe(out), package(tmp_path / "l", {"srt/m.py": before})).steps}
    assert ported["m-h2-g"].status == "refused"  # its anchor `x = 3` is not in g
    assert ported["m-h1-f"].status == "applied"  # f's own `timeout` is f's
    assert ported["m-h3-g-uses"].status == "refused" and "`timeout`" in ported["m-h3-g-uses"].message


def test_an_applied_step_whose_lines_upstream_added_since_the_base_is_upstream_in_another_form(tmp_path):
    base = "def f(self):\n    ret = self.send()\n    polls.append(ret)\n    return polls\n"
    steps = [{"name": "m-h1-insert", "op": "insert_statements", "file": "srt/m.py", "group": "h1", "function": "f",
              "at": "after", "match": "polls.append(...)",
              "code": "if ret != 0:\n    self.failures[self.session] += 1\n"}]
    out = recipe_of(tmp_path, steps)
    helper = "\n\ndef on_failure(self, ret):\n    if ret != 0:\n        self.failures[self.session] += 1\n"
    # upstream added the same handling in a helper of its own: the step could apply, and would do it twice
    ported = importer.port(load_recipe(out), package(tmp_path / "later", {"srt/m.py": base + helper}),
                           base_dir=package(tmp_path / "base", {"srt/m.py": base}))
    assert ported.steps[0].status == "upstream_other_form" and "line 8" in ported.steps[0].message
    assert ported.files["srt/m.py"].count(b"self.failures") == 1
    # the same lines were in the base release already (the change copies them): not upstream's, applied
    ported = importer.port(load_recipe(out), package(tmp_path / "later2", {"srt/m.py": base + helper}),
                           base_dir=package(tmp_path / "base2", {"srt/m.py": base + helper}))
    assert ported.steps[0].status == "applied"
    assert ported.files["srt/m.py"].count(b"self.failures") == 2


def test_port_skips_what_the_user_lists_and_refuses_what_needs_it(tmp_path):
    steps = [
        {"name": "utils-h1-add-method", "op": "add_method", "file": "srt/utils.py", "group": "h1", "class": "Buffers",
         "code": "def timing_names(self):\n    return []\n"},
        {"name": "user-h1-insert", "op": "insert_statements", "file": "srt/user.py", "group": "h1",
         "function": "start", "at": "after", "match": "ptrs = buffers.infos()", "code": "buffers.timing_names()\n"},
        {"name": "user-h2-insert", "op": "insert_statements", "file": "srt/user.py", "group": "h2",
         "function": "start", "at": "before", "match": "return ptrs", "code": "log(ptrs)\n"},
    ]
    out = recipe_of(tmp_path, steps)
    later = package(tmp_path / "later", {"srt/utils.py": UTILS, "srt/user.py": USER})
    ported = importer.port(load_recipe(out), later, skip=["utils-h1-*"])
    status = {s.name: s for s in ported.steps}
    assert status["utils-h1-add-method"].status == "skipped" and "--skip utils-h1-*" in status["utils-h1-add-method"].message
    assert status["user-h1-insert"].status == "refused" and "timing_names" in status["user-h1-insert"].message
    assert status["user-h2-insert"].status == "applied"
    assert ported.count("skipped") == 1 and b"timing_names" not in ported.files["srt/utils.py"]
    with pytest.raises(UsageError, match="no step of `held` is named `utils-h9-\\*`"):
        importer.port(load_recipe(out), later, skip=["utils-h9-*"])
    skip_file = tmp_path / "dropped.txt"
    skip_file.write_text("# what we do not port\n\nuser-h2-insert  # logging only\n")
    assert importer.read_skip_file(skip_file) == ["user-h2-insert"]
    assert importer.base_release(load_recipe(out)) == "0.0.1"


def test_cli_port_takes_a_skip_list(tmp_path):
    import json

    steps = [{"name": "user-h2-insert", "op": "insert_statements", "file": "srt/user.py", "group": "h2",
              "function": "start", "at": "before", "match": "return ptrs", "code": "log(ptrs)\n"}]
    out = recipe_of(tmp_path, steps)
    skip_file = tmp_path / "dropped.txt"
    skip_file.write_text("user-h2-insert\n")
    from patcher import cli as cli_module
    from typer.testing import CliRunner

    later = package(tmp_path / "later", {"srt/user.py": USER})
    import patcher.fetch as fetch

    calls = []

    def fake_fetch(package_name, version):
        calls.append(version)
        return later.parent

    old, fetch.fetch_release = fetch.fetch_release, fake_fetch
    try:
        done = CliRunner().invoke(cli_module.app, ["port", str(out), "--release", "9.9", "--skip-file",
                                                   str(skip_file), "--json"])
    finally:
        fetch.fetch_release = old
    assert done.exit_code == 0, done.output
    data = json.loads(done.output)
    assert data["skipped"] == 1 and data["steps"][0]["status"] == "skipped"
    assert calls == ["0.0.1", "9.9"]  # the base, read from the recipe's `>=0.0.1`, then the release


def test_a_layer_that_calls_the_same_method_on_the_next_layer_falls_when_that_layer_refuses(tmp_path):
    steps = [
        # the tokenizer layer's file is gone from the release (renamed upstream): its step refuses
        {"name": "tok-h1-method", "op": "add_method", "file": "srt/tok.py", "group": "h1", "class": "Tok",
         "code": "def flush_weights(self):\n    return self.sched.flush_weights()\n"},
        {"name": "engine-h1-method", "op": "add_method", "file": "srt/engine.py", "group": "h1", "class": "Engine",
         "code": "def flush_weights(self):\n    return self.tokenizer.flush_weights()\n"},
    ]
    out = recipe_of(tmp_path, steps)
    later = package(tmp_path / "later", {"srt/engine.py": "class Engine:\n    pass\n"})
    ported = {s.name: s for s in importer.port(load_recipe(out), later).steps}
    assert ported["tok-h1-method"].status == "refused"
    engine = ported["engine-h1-method"]
    assert engine.status == "refused"
    assert engine.message.startswith("it uses `flush_weights`") and "tok-h1-method" in engine.message


# ------------------------------------------------------------------ anchors that survive an edit of the anchor itself

POOL = '''\
from .memory import KV, ptrs, region


class Pool:
    def __init__(self, size):
        with (
            use_pool(self.pool)
            if self.pool
            else nullcontext()
        ):
            self.buf = [
                zeros(size)
                for _ in range(3)
            ]
        self.done = True
'''


def test_a_with_whose_items_change_is_lifted_by_its_header_and_survives_upstream_editing_its_body(tmp_path):
    after = POOL.replace("            use_pool(self.pool)\n            if self.pool\n            else nullcontext()\n",
                         "            (\n                use_pool(self.pool)\n                if self.pool\n"
                         "                else nullcontext()\n            ),\n            region(KV),\n")
    after = after.replace("            ]\n        self.done", "            ]\n            self.ptrs = ptrs(self.buf)\n"
                          "        self.done")
    pkg = package(tmp_path / "base", {"srt/pool.py": POOL})
    lifted, out = lift_and_write(tmp_path, pkg, git_diff(POOL, after, "srt/pool.py"))
    assert [s.options["op"] for s in lifted.steps] == ["replace_statements", "insert_statements"]
    assert lifted.steps[0].options["match"].rstrip().endswith(":\n    ...")
    assert importer.round_trip(out, pkg, lifted.expected).ok
    # upstream edited the `with` block (the header the step matches is the same): both steps land
    later = POOL.replace("zeros(size)", "zeros(buf_size + 1)")
    ported = importer.port(load_recipe(out), package(tmp_path / "later", {"srt/pool.py": later}))
    assert [s.status for s in ported.steps] == ["applied", "applied"]
    assert ported.files["srt/pool.py"].decode() == after.replace("zeros(size)", "zeros(buf_size + 1)")


GATE = '''\
class Indexer:
    def gate(self, x, q):
        w, _ = self.proj(x)
        w = w.float()
        w = w * self.n_heads**-0.5
        return w * q
'''


def test_an_insertion_falls_back_to_the_statement_below_when_upstream_rewrote_the_one_above(tmp_path):
    after = GATE.replace("        w = w.float()\n", "        w = w.float()\n        if w.shape[1] < q.shape[1]:\n"
                         "            w = w.repeat_interleave(2, dim=1)\n")
    pkg = package(tmp_path / "base", {"srt/ix.py": GATE})
    lifted, out = lift_and_write(tmp_path, pkg, git_diff(GATE, after, "srt/ix.py"))
    assert [(s.options["op"], s.options["match"], s.options.get("fallback_match")) for s in lifted.steps] == [
        ("insert_statements", "w = w.float(...)", "w = w * self.n_heads**-0.5")]
    assert importer.round_trip(out, pkg, lifted.expected).ok
    # upstream merged the two statements above into one call: the code goes above the statement below
    later = GATE.replace("        w, _ = self.proj(x)\n        w = w.float()\n", "        w = self._proj_fp32(x)\n")
    ported = importer.port(load_recipe(out), package(tmp_path / "later", {"srt/ix.py": later}))
    assert [s.status for s in ported.steps] == ["applied"]
    assert b"w = self._proj_fp32(x)\n        if w.shape[1] < q.shape[1]:" in ported.files["srt/ix.py"]
    # the statement below is there twice: the fallback is not used, the step refuses
    twice = later.replace("        return w * q", "        w = w * self.n_heads**-0.5\n        return w * q")
    ported = importer.port(load_recipe(out), package(tmp_path / "twice", {"srt/ix.py": twice}))
    assert [s.status for s in ported.steps] == ["refused"]


def test_the_fallback_is_not_written_when_the_statement_below_is_not_unique_in_the_function(tmp_path):
    before = GATE.replace("        return w * q", "        w = w * self.n_heads**-0.5\n        return w * q")
    after = before.replace("        w = w.float()\n", "        w = w.float()\n        w = w + 1\n")
    pkg = package(tmp_path / "base", {"srt/ix.py": before})
    lifted, _ = lift_and_write(tmp_path, pkg, git_diff(before, after, "srt/ix.py"))
    assert [s.options.get("fallback_match") for s in lifted.steps] == [None]


def test_an_import_in_the_middle_of_a_sorted_block_is_lifted_sorted_and_follows_the_block(tmp_path):
    before = "import contextlib\nfrom abc import ABC\n\nimport torch\n\n\ndef f():\n    return ABC\n"
    after = before.replace("import contextlib\n", "import contextlib\nimport os\n")
    pkg = package(tmp_path / "base", {"srt/s.py": before})
    lifted, out = lift_and_write(tmp_path, pkg, git_diff(before, after, "srt/s.py"))
    assert [(s.options["op"], s.options.get("sorted")) for s in lifted.steps] == [("add_import", True)]
    assert importer.round_trip(out, pkg, lifted.expected).ok
    later = before.replace("import contextlib\n", "import contextlib\nimport logging\n")
    ported = importer.port(load_recipe(out), package(tmp_path / "later", {"srt/s.py": later}))
    assert b"import contextlib\nimport logging\nimport os\nfrom abc import ABC\n" in ported.files["srt/s.py"]


# ------------------------------------------------------------------ a file upstream renamed

OLD_MIXIN = '''\
class CommunicatorMixin:
    def init(self):
        self.a = 1

    def pause(self):
        return 1

    def resume(self):
        return 2

    def flush(self):
        return 3
'''


def test_port_follows_a_file_upstream_renamed_with_its_class_and_says_so(tmp_path):
    after = OLD_MIXIN.replace("    def flush(self):\n        return 3\n",
                              "    def flush(self):\n        return 3\n\n    def post_process(self):\n        return 4\n")
    pkg = package(tmp_path / "base", {"srt/comm_mixin.py": OLD_MIXIN})
    lifted, out = lift_and_write(tmp_path, pkg, git_diff(OLD_MIXIN, after, "srt/comm_mixin.py"))
    assert [s.options["op"] for s in lifted.steps] == ["add_method"]
    # the later release renamed the file and the class, and has one more method
    later_text = OLD_MIXIN.replace("CommunicatorMixin", "ControlMixin") + "\n    def stats(self):\n        return 5\n"
    later = package(tmp_path / "later", {"srt/control_mixin.py": later_text, "srt/other.py": "class X:\n    pass\n"})
    ported = importer.port(load_recipe(out), later, base_dir=pkg)
    step = ported.steps[0]
    assert (step.status, step.file) == ("applied", "srt/control_mixin.py")
    assert "followed to `srt/control_mixin.py`" in step.message and "`ControlMixin` (4 of its 4 methods)" in step.message
    assert b"    def post_process(self):\n        return 4\n" in ported.files["srt/control_mixin.py"]
    # without the base release, or when two classes of the release look alike, nothing moves: the step refuses
    assert [s.status for s in importer.port(load_recipe(out), later).steps] == ["refused"]
    twin = package(tmp_path / "twin", {"srt/control_mixin.py": later_text,
                                       "srt/control_mixin2.py": later_text.replace("ControlMixin", "Control2")})
    ported = importer.port(load_recipe(out), twin, base_dir=pkg)
    assert [(s.status, s.file) for s in ported.steps] == [("refused", "srt/comm_mixin.py")]
    assert "not in the release" in ported.steps[0].message



def test_port_follows_a_module_turned_into_a_re_export_shim_and_a_class_renamed_in_its_file(tmp_path):
    after = OLD_MIXIN.replace("    def flush(self):\n        return 3\n",
                              "    def flush(self):\n        return 3\n\n    def post_process(self):\n        return 4\n")
    other = "class Other:\n    def get(self):\n        return 0\n\n\n"
    pool, pool_after = (other + t.replace("CommunicatorMixin", "NsaPool").replace("def pause", "def save").replace(
        "def resume", "def load") for t in (OLD_MIXIN, after))
    pkg = package(tmp_path / "base", {"srt/old/comm_mixin.py": OLD_MIXIN, "srt/pool.py": pool})
    _, out = lift_and_write(tmp_path, pkg, git_diff(OLD_MIXIN, after, "srt/old/comm_mixin.py")
                            + git_diff(pool, pool_after, "srt/pool.py"))
    later = package(tmp_path / "later", {
        # the old module only re-exports the new one, where the class kept its name
        "srt/old/comm_mixin.py": "import warnings\n\nfrom sglang.srt.new.comm_mixin import *  # noqa\n",
        "srt/new/comm_mixin.py": OLD_MIXIN,
        # the class was renamed where it is, beside a class still there
        "srt/pool.py": pool.replace("NsaPool", "DsaPool")})
    ported = importer.port(load_recipe(out), later, base_dir=pkg)
    shim, pool_step = ported.steps
    assert (shim.status, shim.file) == ("applied", "srt/new/comm_mixin.py")
    assert "no longer defines `CommunicatorMixin`: followed to `srt/new/comm_mixin.py`" in shim.message
    assert (pool_step.status, pool_step.file) == ("applied", "srt/pool.py")
    assert "in `srt/pool.py`, `NsaPool` is `DsaPool` (4 of its 4 methods)" in pool_step.message
    assert b"class DsaPool:" in ported.files["srt/pool.py"] and b"    def post_process(self):" in ported.files[
        "srt/pool.py"]
    # a class the base release already had is another class, not the old one renamed: nothing moves
    twin = pool.replace("NsaPool", "DsaPool")
    base2 = package(tmp_path / "base2", {"srt/pool.py": pool, "srt/twin.py": twin})
    _, out2 = lift_and_write(tmp_path / "b2", base2, git_diff(pool, pool_after, "srt/pool.py"))
    later2 = package(tmp_path / "later2", {"srt/pool.py": other, "srt/twin.py": twin})
    assert [s.status for s in importer.port(load_recipe(out2), later2, base_dir=base2).steps] == ["refused"]


def test_a_release_file_python_cannot_parse_does_not_stop_the_follow(tmp_path):
    """The release index reads every file of the release: one that does not parse (a template, a file for another
    Python, a null byte) defines nothing, and the class is followed to the file that does."""
    pkg = package(tmp_path / "base", {"srt/old/comm_mixin.py": OLD_MIXIN})
    after = OLD_MIXIN.replace("    def flush(self):\n        return 3\n",
                              "    def flush(self):\n        return 3\n\n    def post_process(self):\n        return 4\n")
    _, out = lift_and_write(tmp_path, pkg, git_diff(OLD_MIXIN, after, "srt/old/comm_mixin.py"))
    later = package(tmp_path / "later", {"srt/new/comm_mixin.py": OLD_MIXIN,
                                         "srt/broken.py": "class CommunicatorMixin(\n",
                                         "srt/nul.py": "class CommunicatorMixin:\x00\n"})
    [step] = importer.port(load_recipe(out), later, base_dir=pkg).steps
    assert (step.status, step.file) == ("applied", "srt/new/comm_mixin.py"), step.message


def test_a_step_followed_into_a_renamed_class_where_self_is_another_object_is_refused(tmp_path):
    # the base's mixin reads the host's attributes through `self`; the release turned it into a component that
    # holds the host as `self.host`: the same methods, but `self.mode` is not there any more
    mixin = ("class UpdateMixin:\n    def pause(self):\n        self.flush()\n\n    def resume(self):\n"
             "        return 2\n\n    def check(self):\n        return 3\n\n    def flush(self):\n        return 4\n")
    after = mixin.replace("        self.flush()\n", "        self.flush()\n        if self.mode == 1:\n"
                          "            self.queue.clear()\n").replace(
        "    def check(self):\n        return 3\n", "    def check(self):\n        return 3\n\n"
        "    def post(self):\n        return self.check()\n")
    pkg = package(tmp_path / "base", {"srt/update_mixin.py": mixin})
    _, out = lift_and_write(tmp_path, pkg, git_diff(mixin, after, "srt/update_mixin.py"))
    component = mixin.replace("class UpdateMixin:\n", "class Updater:\n    def __init__(self, host):\n"
                              "        self.host = host\n\n")
    later = package(tmp_path / "later", {"srt/parts/updater.py": component})
    ported = importer.port(load_recipe(out), later, base_dir=pkg)
    status = {s.op: (s.status, s.file, s.message) for s in ported.steps}
    assert status["insert_statements"][:2] == ("refused", "srt/parts/updater.py")
    assert "`Updater` (followed from `UpdateMixin`) never has `self.mode`, `self.queue`" in status["insert_statements"][2]
    assert status["add_method"][:2] == ("applied", "srt/parts/updater.py")  # it reads only what `Updater` has


def test_a_class_the_release_already_defines_in_another_module_is_not_added_again_nor_registered(tmp_path):
    model = "class Model:\n    pass\n\n\nEntryClass = [Model]\n"
    after = "class Model:\n    pass\n\n\nclass LiteModel(Model):\n    pass\n\n\nEntryClass = [Model, LiteModel]\n"
    pkg = package(tmp_path / "base", {"srt/models/model.py": model})
    lifted, out = lift_and_write(tmp_path, pkg, git_diff(model, after, "srt/models/model.py"))
    assert [s.options["op"] for s in lifted.steps] == ["add_definition", "add_element"]
    # upstream added the class in a module of its own, registered there
    later = package(tmp_path / "later", {"srt/models/model.py": model,
                                         "srt/models/lite_model.py": "class LiteModel:\n    pass\n\n\n"
                                                                     "EntryClass = [LiteModel]\n"})
    steps = importer.port(load_recipe(out), later).steps
    assert [s.status for s in steps] == ["refused", "refused"]
    assert "already defines `LiteModel` in `srt/models/lite_model.py`" in steps[0].message
    assert "another step of its group" in steps[1].message
    assert {s.status for s in importer.port(load_recipe(out), pkg).steps} == {"applied"}

# classes that take keywords (`object.__init__` takes none: `A(size=1)` on a bare class is a TypeError, refused)
FIELDS = {"srt/a.py": "class A:\n    size: int = 0\n\n    def __init__(self, **kw):\n        pass\n\n\n"
                      "def make_a():\n    return A(size=1)\n",
          "srt/b.py": "class B:\n    size: int = 0\n\n    def __init__(self, **kw):\n        pass\n\n\n"
                      "def make_b():\n    return B(size=1)\n"}


def test_a_step_that_needs_a_name_an_unexpressed_hunk_adds_falls_and_a_same_named_field_of_another_file_does_not(
        tmp_path):
    pkg = package(tmp_path / "base", FIELDS)
    a_after = FIELDS["srt/a.py"].replace("size: int = 0\n", "size: int = 0\n    temps: int = 1\n").replace(
        "A(size=1)", "A(size=1, temps=2)")
    # b's field is added by a hunk made on another tree (its context is not in the release): unexpressed
    b_field = ("--- a/python/sglang/srt/b.py\n+++ b/python/sglang/srt/b.py\n@@ -1,2 +1,3 @@\n class B:\n"
               "     width: int = 0\n+    temps: int = 1\n")
    b_call = git_diff(FIELDS["srt/b.py"], FIELDS["srt/b.py"].replace("B(size=1)", "B(size=1, temps=2)"), "srt/b.py")
    patch = git_diff(FIELDS["srt/a.py"], a_after, "srt/a.py") + b_field + b_call.split("\n", 2)[2].split("\n", 2)[2]
    lifted, out = lift_and_write(tmp_path, pkg, patch)
    ops = {s.options["op"] for s in lifted.steps}
    assert {"unexpressed_hunk", "add_keyword_argument", "add_dataclass_field"} <= ops
    ported = importer.port(load_recipe(out), pkg)
    status = {(s.file, s.op): (s.status, s.message) for s in ported.steps}
    assert status[("srt/a.py", "add_dataclass_field")][0] == status[("srt/a.py", "add_keyword_argument")][0] == "applied"
    b_call_status, why = status[("srt/b.py", "add_keyword_argument")]
    assert b_call_status == "refused" and "uses `temps`" in why and "unexpressed-hunk" in why


def test_a_module_split_into_a_package_is_followed_by_its_functions_and_an_import_of_a_helper_that_fell_falls(
        tmp_path):
    utils = "import os\n\n\ndef check(x):\n    return x\n"
    runner = "from sglang.srt.utils import check\n\n\ndef run():\n    return check(1)\n"
    after_utils = "import inspect\nimport os\n\n\ndef check(x):\n    return x\n\n\ndef traced(f):\n    return f\n"
    after_runner = runner.replace("import check\n", "import check, traced\n").replace("def run", "@traced\ndef run")
    pkg = package(tmp_path / "base", {"srt/utils.py": utils, "srt/runner.py": runner})
    lifted, out = lift_and_write(tmp_path, pkg, git_diff(utils, after_utils, "srt/utils.py")
                                 + git_diff(runner, after_runner, "srt/runner.py"))
    recipe = load_recipe(out)
    later = package(tmp_path / "later", {"srt/utils/common.py": utils, "srt/utils/__init__.py": "from .common import *\n",
                                         "srt/runner.py": runner})
    ported = importer.port(recipe, later, base_dir=pkg)
    moved = [s for s in ported.steps if s.file == "srt/utils/common.py"]
    assert [s.status for s in moved] == ["applied", "applied"] and "where `check` is defined" in moved[0].message
    assert {s.status for s in ported.steps} == {"applied"}
    # the helper is not ported: the import of it in another file falls, and the decorator with it
    helper = next(s.name for s in ported.steps if s.op == "add_definition")
    ported = importer.port(recipe, later, base_dir=pkg, skip=[helper])
    assert {s.status for s in ported.steps if s.file == "srt/runner.py"} == {"refused"}


def test_a_refusal_is_not_upstream_in_another_form_for_a_line_an_earlier_step_of_the_recipe_added(tmp_path):
    filler = "".join(f"    def f{k}(self):\n        return {k}\n\n" for k in range(3))  # two hunks, two groups
    before = f"from .tracing import traced\n\n\nclass M:\n    def load(self):\n        return 1\n\n{filler}    def update(self, path):\n        return 2\n"
    after = before.replace("    def load", "    @traced\n    def load").replace("    def update", "    @traced\n    def update")
    pkg = package(tmp_path / "base", {"srt/m.py": before})
    _, out = lift_and_write(tmp_path, pkg, git_diff(before, after, "srt/m.py"))
    later = package(tmp_path / "later", {"srt/m.py": before.replace("update(self, path)", "update(self, path, fmt)")})
    ported = importer.port(load_recipe(out), later)
    assert [s.status for s in ported.steps] == ["applied", "refused"]
    assert "another form" not in ported.steps[1].message


def bench_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("specpatch_bench_import",
                                                  Path(__file__).resolve().parent.parent / "bench" / "import.py")
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench  # its dataclasses look their module up
    spec.loader.exec_module(bench)
    return bench


def test_bench_gives_patch_a_diff_of_two_trees_with_the_paths_patch_p2_finds(tmp_path):
    bench = bench_module()
    tree = tmp_path / "later"
    package(tree, {"srt/a.py": "x = 1\n"})
    team = tmp_path / "team.patch"
    team.write_text("--- ./srt/a.py\t2026-01-02 10:00:00.000000000 +0800\n"
                    "+++ ../../../work/python/sglang/srt/a.py\t2026-01-01 10:00:00.000000000 +0800\n"
                    "@@ -1 +1 @@\n-x = 1\n+x = 2\n")
    log, rc = bench.run_patch(team, tree, 0)
    assert rc == 0, log
    assert (tree / "sglang" / "srt" / "a.py").read_text() == "x = 2\n" and sorted(p.name for p in tree.iterdir()) == [
        "sglang"]


def test_bench_landed_in_the_teams_context_reads_the_context_from_the_teams_files():
    bench = bench_module()
    patch = git_diff("import contextlib\nfrom abc import ABC\n", "import contextlib\nimport os\nfrom abc import ABC\n",
                     "srt/s.py")
    fp = importer.parse_patch(patch)[0]
    info = bench.hunk_info(fp, fp.hunks[0])
    team = ["import contextlib", "import logging", "import os", "from abc import ABC"]  # upstream added logging
    # the hunk's own context (`import contextlib` above) is in no port: only the second figure sees it land
    assert bench.count(team, info.groups[0]) == 0
    assert bench.landed_in_context(info, list(team), team)
    assert not bench.landed_in_context(info, ["import contextlib", "import os", "import logging", "from abc import ABC"],
                                       team)
    assert not bench.landed_in_context(info, team + ["import logging", "import os", "from abc import ABC"], team)


# ----------------------------------------------------------------------------------- port of a recipe's variants

def variants_recipe(tmp_path: Path) -> Path:
    """Two variants: 1.x adds `mode` after `size`, 2.x (an overlay of 1.x) after `width`, which 2.x renamed it."""
    import yaml

    out = tmp_path / "recipes" / "carried.yaml"
    out.parent.mkdir(parents=True, exist_ok=True)
    field = {"name": "field-mode", "op": "add_dataclass_field", "file": "srt/args.py", "class": "Args",
             "after": "size", "code": "mode: str = 'a'"}
    out.write_text(yaml.safe_dump({
        "id": "carried", "version": 1, "title": "t", "description": "d",
        "target": {"package": "sglang", "versions": ">=1.0"},
        "steps": [field],
        "variants": [{"name": "v1", "versions": ">=1.0,<2.0", "description": "as written"},
                     {"name": "v2", "versions": ">=2.0,<3.0", "description": "size is width",
                      "extends": "v1", "change_steps": {"field-mode": {"after": "width"}}}]}))
    return out


ARGS_V1 = "@dataclass\nclass Args:\n    size: int = 1\n"
ARGS_V3 = "@dataclass\nclass Args:\n    width: int = 1\n    depth: int = 2\n"


def test_port_plans_the_variant_of_the_release_or_the_one_named(tmp_path):
    recipe = load_recipe(variants_recipe(tmp_path))
    chosen = importer.port_selection(recipe, "1.5")
    assert chosen.variant == "v1"
    v1_tree = package(tmp_path / "one", {"srt/args.py": ARGS_V1})
    assert [s.status for s in importer.port(recipe, v1_tree, selection=chosen).steps] == ["applied"]
    # 3.0 is past every range: the newest variant is the one to carry, and naming it plans its steps there
    v3_tree = package(tmp_path / "three", {"srt/args.py": ARGS_V3})
    carried = importer.port(recipe, v3_tree, selection=importer.port_selection(recipe, "3.0", "v2"))
    assert [s.status for s in carried.steps] == ["applied"]
    assert b"width: int = 1\n    mode: str = 'a'\n" in carried.files["srt/args.py"]
    first = importer.port(recipe, v3_tree, selection=importer.port_selection(recipe, "3.0", "v1")).steps[0]
    assert first.status == "refused" and "size" in first.message
    # the base of a variant is the first release of its range
    assert importer.base_release(recipe, importer.port_selection(recipe, "3.0", "v2")) == "2.0"
    assert importer.base_release(recipe, importer.port_selection(recipe, "1.0")) == "1.0"


def test_port_past_every_variant_names_the_one_to_try(tmp_path):
    from patcher.errors import VersionUnsupported

    recipe = load_recipe(variants_recipe(tmp_path))
    with pytest.raises(VersionUnsupported) as past:
        importer.port_selection(recipe, "3.0")
    assert "--variant v2" in past.value.hint
    with pytest.raises(VersionUnsupported) as before:
        importer.port_selection(recipe, "0.9")
    assert "--variant NAME" in before.value.hint
    with pytest.raises(UsageError, match="no variant `v3`; it has: v1, v2"):
        importer.port_selection(recipe, "3.0", "v3")
    with pytest.raises(UsageError, match="not a version"):
        importer.port_selection(recipe, "latest")


def test_cli_port_of_a_variant_says_which_and_reads_its_base(tmp_path):
    import json

    import patcher.fetch as fetch
    from patcher import cli as cli_module
    from typer.testing import CliRunner

    out = variants_recipe(tmp_path)
    trees = {"2.0": package(tmp_path / "two", {"srt/args.py": ARGS_V3}),
             "3.0": package(tmp_path / "three", {"srt/args.py": ARGS_V3})}
    calls = []

    def fake_fetch(package_name, version):
        calls.append(version)
        return trees[version].parent

    old, fetch.fetch_release = fetch.fetch_release, fake_fetch
    try:
        done = CliRunner().invoke(cli_module.app, ["port", str(out), "--release", "3.0", "--variant", "v2",
                                                   "--json"])
        past = CliRunner().invoke(cli_module.app, ["port", str(out), "--release", "3.0"])
    finally:
        fetch.fetch_release = old
    assert done.exit_code == 0, done.output
    data = json.loads(done.output)
    assert data["variant"] == "v2" and data["applied"] == 1
    assert calls == ["2.0", "3.0"]  # the variant's first release as the base, then the release
    assert past.exit_code == 3 and "--variant v2" in past.output  # 3: cannot apply (no variant admits it)


# ------------------------------------------------------------------ a statement anchored by its block's header

# the scenes of the operations' own tests (`inside`), lifted from a diff and ported
from op_helpers import src  # noqa: E402
from test_ops_insert_statements import POLLS, REORDERED  # noqa: E402
from test_ops_replace_statements import CHAIN  # noqa: E402

# (with the helpers the steps below call imported, as a real module has them)
BOOT, BOOT_LATER, WAITING = ("from .timing import fail, late, log\n\n\n" + src(s) for s in (POLLS, REORDERED, CHAIN))
# upstream reordered the chain: the `Waiting` arm is an `elif` after the `Done` arm, which changed
WAITING_LATER = WAITING.replace(
    "            if poll in [Poll.Waiting, Poll.Sending]:\n                undone.append(req)\n"
    "            elif poll == Poll.Done:\n                done.append(req)\n",
    "            if poll == Poll.Done:\n                self.release(req)\n                done.append(req)\n"
    "            elif poll in [Poll.Waiting, Poll.Sending]:\n                undone.append(req)\n")
TIMED = ("                if late(req):\n                    done.append(req)\n                else:\n"
         "                    undone.append(req)\n")


def test_a_statement_there_twice_in_its_function_is_anchored_by_its_blocks_header_and_lands_after_a_reorder(
        tmp_path):
    boot = BOOT.replace("            if poll == Poll.Boot:\n", "            if poll == Poll.Boot:\n"
                        "                if late(req):\n                    fail(req)\n                    continue\n")
    waiting = WAITING.replace("Poll.Sending]:\n                undone.append(req)\n", "Poll.Sending]:\n" + TIMED)
    pkg = package(tmp_path / "base", {"srt/boot.py": BOOT, "srt/waiting.py": WAITING})
    lifted, out = lift_and_write(tmp_path, pkg, git_diff(BOOT, boot, "srt/boot.py")
                                 + git_diff(WAITING, waiting, "srt/waiting.py"))
    assert [(s.options["op"], s.options.get("at"), s.options.get("match"), s.options.get("inside"))
            for s in lifted.steps] == [
        ("insert_statements", "start", None, "if poll == Poll.Boot:"),
        ("replace_statements", None, "undone.append(req)\n", "if poll in [Poll.Waiting, Poll.Sending]:")]
    assert importer.round_trip(out, pkg, lifted.expected).ok
    later = package(tmp_path / "later", {"srt/boot.py": BOOT_LATER, "srt/waiting.py": WAITING_LATER})
    ported = importer.port(load_recipe(out), later)
    assert [s.status for s in ported.steps] == ["applied", "applied"]
    assert ported.files["srt/boot.py"].decode() == BOOT_LATER.replace(
        "            ):\n", "            ):\n                if late(req):\n                    fail(req)\n"
        "                    continue\n")
    assert ported.files["srt/waiting.py"].decode() == WAITING_LATER.replace(
        "Poll.Sending]:\n                undone.append(req)\n", "Poll.Sending]:\n" + TIMED)


def test_the_header_is_not_written_when_it_is_not_unique_in_the_function_nor_when_the_statement_is(tmp_path):
    # the same header twice in the function: today's choice (the whole chain), no `inside`
    twice = BOOT + "            if poll == Poll.Boot:\n                stay(req)\n"
    after = twice.replace("            if poll == Poll.Boot:\n", "            if poll == Poll.Boot:\n                log(req)\n", 1)
    pkg = package(tmp_path / "base", {"srt/boot.py": twice})
    lifted, out = lift_and_write(tmp_path / "a", pkg, git_diff(twice, after, "srt/boot.py"))
    assert all("inside" not in s.options for s in lifted.steps)
    assert importer.round_trip(out, pkg, lifted.expected).ok
    # a statement unique in the function: anchored on it, as before
    after = BOOT.replace("                fail(req)\n", "                fail(req)\n                log(req)\n")
    pkg = package(tmp_path / "one", {"srt/boot.py": BOOT})
    lifted, _ = lift_and_write(tmp_path / "b", pkg, git_diff(BOOT, after, "srt/boot.py"))
    assert [(s.options.get("match"), s.options.get("inside")) for s in lifted.steps] == [("fail(...)", None)]


HEADS = '''\
class Indexer:
    def forward(self, x, dual):
        if dual and x.decode:
            q, k = self.qk(x)
            s = quant(q)
            self.store(k)
        else:
            q, k = self.qk(x)

            if dual:
                s = quant(q)
            else:
                s = quant(q)
        return s
'''


def test_a_statement_of_an_else_arm_is_anchored_by_the_header_of_the_arm_before_it(tmp_path):
    after = HEADS.replace("            q, k = self.qk(x)\n\n", "            q, k = self.qk(x)\n"
                          "            if q.shape[1] < 32:\n                q = q.repeat(2)\n\n")
    pkg = package(tmp_path / "base", {"srt/ix.py": HEADS})
    lifted, out = lift_and_write(tmp_path, pkg, git_diff(HEADS, after, "srt/ix.py"))
    assert [(s.options["op"], s.options.get("match"), s.options.get("inside"), s.options.get("inside_else"))
            for s in lifted.steps] == [("insert_statements", "q, k = self.qk(...)", "if dual and x.decode:", True)]
    assert importer.round_trip(out, pkg, lifted.expected).ok
    # upstream edited the first arm (what a context of the whole `if` would have matched): the step lands
    later = HEADS.replace("            s = quant(q)\n            self.store(k)\n",
                          "            w = self.gate(x)\n            s = quant(q, w)\n            self.store(k)\n")
    ported = importer.port(load_recipe(out), package(tmp_path / "later", {"srt/ix.py": later}))
    assert [s.status for s in ported.steps] == ["applied"]
    assert ported.files["srt/ix.py"].decode() == after.replace(
        "            s = quant(q)\n            self.store(k)\n",
        "            w = self.gate(x)\n            s = quant(q, w)\n            self.store(k)\n")


def test_a_step_that_uses_a_name_upstream_removed_from_the_whole_release_is_refused_naming_it(tmp_path):
    # the base release's `Req` has `check_done()` and `chunked`; the later release renamed both (nowhere else)
    base_req = "class Req:\n    def __init__(self):\n        self.chunked = 0\n\n    def check_done(self):\n        return 1\n"
    later_req = base_req.replace("chunked", "middle_chunks").replace("check_done", "poll_done")
    loop = "def run(reqs):\n    for req in reqs:\n        req.go()\n    return reqs\n"
    steps = [
        {"name": "loop-h1-insert", "op": "insert_statements", "file": "srt/loop.py", "group": "h1",
         "function": "run", "at": "before", "match": "req.go()",
         "code": "req.check_done()\nif req.chunked > 0:\n    continue\n"},
        # a name the release still has (`go`), one no release defines (`torch_op`, another library's): applied
        {"name": "loop-h2-insert", "op": "insert_statements", "file": "srt/loop.py", "group": "h2",
         "function": "run", "at": "before", "match": "return reqs", "code": "reqs[0].go()\nreqs[0].torch_op()\n"},
        # a name another step of the recipe adds is that step's business, not upstream's
        {"name": "req-h1-add-method", "op": "add_method", "file": "srt/req.py", "group": "h1", "class": "Req",
         "code": "def drain(self):\n    return 0\n"},
        {"name": "loop-h3-insert", "op": "insert_statements", "file": "srt/loop.py", "group": "h3",
         "function": "run", "at": "after", "match": "req.go()", "code": "req.drain()\n"},
    ]
    out = recipe_of(tmp_path, steps)
    base = package(tmp_path / "base", {"srt/req.py": base_req, "srt/loop.py": loop})
    later = package(tmp_path / "later", {"srt/req.py": later_req, "srt/loop.py": loop})
    ported = importer.port(load_recipe(out), later, base_dir=base)
    status = {s.name: s for s in ported.steps}
    assert status["loop-h1-insert"].status == "refused"
    assert "`check_done` (srt/req.py), `chunked` (srt/req.py)" in status["loop-h1-insert"].message
    assert "upstream removed or renamed them" in status["loop-h1-insert"].message
    assert [status[n].status for n in ("loop-h2-insert", "req-h1-add-method", "loop-h3-insert")] == ["applied"] * 3
    # without the base release there is nothing to compare: the step applies
    assert {s.status for s in importer.port(load_recipe(out), later).steps} == {"applied"}
    # a release older than the base (an import round: port to 0.5.7 of a 0.5.8 patch) has not got them yet
    for root, version in ((base, "0.5.8"), (later, "0.5.7")):
        (root / "version.py").write_text(f'__version__ = "{version}"\n')
    older = {s.name: s for s in importer.port(load_recipe(out), later, base_dir=base).steps}["loop-h1-insert"]
    assert older.status == "refused" and "this release, older than the base, does not have them yet" in older.message


def test_code_the_patch_puts_in_both_arms_of_an_if_is_two_steps_anchored_by_the_header(tmp_path):
    repeat = "            if q.shape[1] < 32:\n                q = q.repeat(2)\n"
    after = HEADS.replace("            q, k = self.qk(x)\n", "            q, k = self.qk(x)\n" + repeat)
    pkg = package(tmp_path / "base", {"srt/ix.py": HEADS})
    lifted, out = lift_and_write(tmp_path, pkg, git_diff(HEADS, after, "srt/ix.py"))
    assert [(s.options.get("inside"), s.options.get("inside_else"), s.options.get("if_present_elsewhere"))
            for s in lifted.steps] == [("if dual and x.decode:", None, "refuse"), ("if dual and x.decode:", True, "apply")]
    assert importer.round_trip(out, pkg, lifted.expected).ok
    later = HEADS.replace("            s = quant(q)\n            self.store(k)\n",
                          "            w = self.gate(x)\n            s = quant(q, w)\n            self.store(k)\n")
    ported = importer.port(load_recipe(out), package(tmp_path / "later", {"srt/ix.py": later}))
    assert [s.status for s in ported.steps] == ["applied", "applied"]
    assert ported.files["srt/ix.py"].decode().count(repeat) == 2


def test_a_local_a_refused_step_assigns_is_followed_even_when_the_word_is_elsewhere_in_the_file(tmp_path):
    # `now` is a word of the file (another function, a comment), not a local of `pop`: the step that uses it falls
    # with the one that assigns it
    text = ("from .clock import clock, fail\n\n\ndef pop(reqs):\n    polls = poll_all(reqs)\n    for req in reqs:\n        if req.waiting:\n"
            "            continue\n        done(req)\n\n\ndef tick():\n    now = wall()  # now\n    return now\n")
    steps = [
        {"name": "q-h1-insert", "op": "insert_statements", "file": "srt/q.py", "group": "h1", "function": "pop",
         "at": "after", "match": "polls = poll_all(...)", "code": "now = clock()\n"},
        {"name": "q-h2-insert", "op": "insert_statements", "file": "srt/q.py", "group": "h2", "function": "pop",
         "inside": "if req.waiting:", "at": "start", "code": "if now > req.deadline:\n    fail(req)\n"},
    ]
    out = recipe_of(tmp_path, steps)
    later = package(tmp_path / "later", {"srt/q.py": text.replace("polls = poll_all(reqs)", "polls = gather(reqs)")})
    status = {s.name: s for s in importer.port(load_recipe(out), later).steps}
    assert status["q-h1-insert"].status == "refused"
    assert status["q-h2-insert"].status == "refused" and "`now`" in status["q-h2-insert"].message
    # where the function has its own `now`, the step relies on it: applied
    own = text.replace("    for req in reqs:", "    now = clock()\n    for req in reqs:")
    status = {s.name: s for s in importer.port(load_recipe(out), package(tmp_path / "own", {"srt/q.py": own})).steps}
    assert status["q-h2-insert"].status == "applied"


# a scheduler whose metrics and output mixins upstream turned into components it holds (`self.metrics`,
# `self.streamer`): `rank`, `enabled` and `stream` still exist in the later release, in other classes
ENGINE = '''from .logs import log


class MetricsMixin:
    def init_metrics(self):
        self.rank = 0
        self.enabled = True


class OutputMixin:
    def stream(self, reqs):
        return reqs


class QueueMixin:
    def poll_queue(self, reqs):
        done = []
        for req in reqs:
            done.append(req)
        return done


class Engine(MetricsMixin, OutputMixin, QueueMixin):
    def __init__(self):
        self.name = "engine"
        self.init_metrics()


class Waiter:
    def __init__(self, engine: "Engine"):
        self.engine = engine

    def pop(self, reqs):
        out = []
        for req in reqs:
            out.append(req)
        return out
'''
ENGINE_LATER = ENGINE.split("class QueueMixin")[0].replace("MetricsMixin:\n    def init_metrics(self):",
                                                          "MetricsReporter:\n    def __init__(self):") \
    .replace("class OutputMixin:", "class OutputStreamer:") + "class QueueMixin" + \
    ENGINE.split("class QueueMixin")[1].replace("Engine(MetricsMixin, OutputMixin, QueueMixin)", "Engine(QueueMixin)") \
    .replace("        self.init_metrics()\n", "        self.metrics = MetricsReporter()\n        self.streamer = OutputStreamer()\n")


def ported_engine(tmp_path: Path, after: str) -> dict:
    """The team's change of ENGINE (`after`), lifted, then planned on ENGINE_LATER: step name -> ported step."""
    pkg = package(tmp_path / "base", {"srt/engine.py": ENGINE})
    lifted, out = lift_and_write(tmp_path, pkg, git_diff(ENGINE, after, "srt/engine.py"))
    assert importer.round_trip(out, pkg, lifted.expected).ok
    later = package(tmp_path / "later", {"srt/engine.py": ENGINE_LATER})
    return {s.name: s for s in importer.port(load_recipe(out), later, base_dir=pkg).steps}


def test_a_step_that_reads_an_attribute_upstream_moved_to_another_class_is_refused_naming_both(tmp_path):
    after = ENGINE.replace("            done.append(req)\n", "            if self.enabled:\n"
                           "                log(self.rank, self.name)\n            done.append(req)\n") \
        .replace("            out.append(req)\n", "            self.engine.stream([req])\n            out.append(req)\n")
    steps = ported_engine(tmp_path, after)
    assert [s.status for s in steps.values()] == ["refused", "refused"]
    mixin, waiter = steps.values()
    assert "`self.enabled`: `enabled` is defined by `MetricsMixin` in the base release and by no such class in " \
           "the release (now in `MetricsReporter`)" in mixin.message
    assert "`self.rank`" in mixin.message and "`self.name`" not in mixin.message  # `name` stayed in `Engine`
    assert "`self.engine.stream` (`self.engine`: `Engine`): `stream` is defined by `OutputMixin` in the base " \
           "release and by no such class in the release (now in `OutputStreamer`)" in waiter.message
    # without the base release there is nothing to compare: both apply
    out = tmp_path / "recipes" / "lifted.yaml"
    assert {s.status for s in importer.port(load_recipe(out), tmp_path / "later" / "sglang").steps} == {"applied"}


def test_a_step_that_reads_attributes_upstream_kept_or_that_it_defines_itself_applies(tmp_path):
    # `name` and `poll_queue` stayed where they were; `enabled` is assigned by the step itself; `stream` is the
    # method another step of the patch adds to `Engine`
    after = ENGINE.replace("            done.append(req)\n", "            self.enabled = req\n"
                           "            if self.enabled:\n                log(self.name)\n            done.append(req)\n") \
        .replace("            out.append(req)\n", "            self.engine.poll_queue([req])\n"
                 "            self.engine.stream(req)\n            out.append(req)\n") \
        .replace("        self.init_metrics()\n", "        self.init_metrics()\n\n    def stream(self, req):\n"
                 "        return [req]\n")
    steps = ported_engine(tmp_path, after)
    assert len(steps) == 3 and {s.status for s in steps.values()} == {"applied"}


ROPE = '''import torch
from torch import nn


class Rope(nn.Module):
    def __init__(self, n):
        super().__init__()
        if n:
            self.register_buffer("table", torch.arange(n), persistent=False)
        else:
            self.table = None

    def forward(self, x):
        return x + self.table


def make_rope(n):
    return Rope(n)
'''
ROPE_AFTER = ROPE.replace('''        if n:
            self.register_buffer("table", torch.arange(n), persistent=False)
        else:
            self.table = None
''', '''        self.n = n
        self.register_buffer("table", self._build(), persistent=False)

    def _build(self):
        return torch.arange(self.n) if self.n else None

    @property
    def _shifted(self):
        return self.table + 1
''')


def test_an_attribute_torch_registers_by_name_is_defined_and_a_step_upstream_adopted_is_already_upstream(tmp_path):
    pkg = package(tmp_path / "base", {"srt/rope.py": ROPE})
    lifted, out = lift_and_write(tmp_path, pkg, git_diff(ROPE, ROPE_AFTER, "srt/rope.py"))
    assert importer.round_trip(out, pkg, lifted.expected).ok
    # upstream adopted the change: `table` is a buffer only (`register_buffer("table", ...)` defines `self.table`)
    got = importer.port(load_recipe(out), package(tmp_path / "adopted", {"srt/rope.py": ROPE_AFTER}), base_dir=pkg)
    assert {s.status for s in got.steps} == {"already_upstream"}, [(s.name, s.status, s.message) for s in got.steps]
    # a release that sets `table` from outside the class (no class of the family defines it): the step that reads
    # it is refused where it would land, but answers already upstream where the release has its very code
    outside = ROPE_AFTER.replace('        self.register_buffer("table", self._build(), persistent=False)\n', "") \
        .replace("    return Rope(n)\n", "    rope = Rope(n)\n    rope.table = rope._build()\n    return rope\n")
    got = importer.port(load_recipe(out), package(tmp_path / "outside", {"srt/rope.py": outside}), base_dir=pkg)
    status = {s.name.rsplit("-h1-", 1)[1]: s.status for s in got.steps}
    assert status["add-method--shifted"] == "already_upstream", status
    # a release with the buffer but not the property: the step that adds it reads `self.table`, a buffer there
    partial = ROPE_AFTER.replace("    @property\n    def _shifted(self):\n        return self.table + 1\n\n", "")
    got = importer.port(load_recipe(out), package(tmp_path / "partial", {"srt/rope.py": partial}), base_dir=pkg)
    status = {s.name.rsplit("-h1-", 1)[1]: (s.status, s.message) for s in got.steps}
    assert status["add-method--shifted"][0] == "applied", status


def test_an_attribute_the_evidence_does_not_settle_is_not_judged(tmp_path):
    # a class that takes attributes by a name read at run time, one that gained a base class from outside the
    # package, and a `self.x` whose class the release cannot tell: the reads they concern are not judged
    dynamic = ENGINE_LATER.replace("        self.name = \"engine\"\n", "        self.name = \"engine\"\n"
                                   "        for k in KEYS:\n            setattr(self, k, None)\n")
    outside = ENGINE_LATER.replace("class Engine(QueueMixin):", "class Engine(QueueMixin, nn.Module):")
    unknown = ENGINE_LATER.replace("        self.engine = engine\n", "        self.engine = make(engine)\n")
    after = ENGINE.replace("            done.append(req)\n", "            log(self.rank)\n            done.append(req)\n") \
        .replace("            out.append(req)\n", "            self.engine.stream([req])\n            out.append(req)\n")
    pkg = package(tmp_path / "base", {"srt/engine.py": ENGINE})
    lifted, out = lift_and_write(tmp_path, pkg, git_diff(ENGINE, after, "srt/engine.py"))
    # (`Engine` is `self` in `QueueMixin` and `self.engine` in `Waiter`: the first two settle neither read)
    for name, text, applied in (("dynamic", dynamic, {"queue", "waiter"}), ("outside", outside, {"queue", "waiter"}),
                                ("unknown", unknown, {"waiter"})):
        got = importer.port(load_recipe(out), package(tmp_path / name, {"srt/engine.py": text}), base_dir=pkg)
        status = dict(zip(("queue", "waiter"), (s.status for s in got.steps)))
        assert {k for k, v in status.items() if v == "applied"} == applied, (name, status)


ROUTE = '''class Server:
    def route(self, request):
        rank = request.get("rank")
        if rank == -1:
            info = {
                "tp_size": self.tp_size,
                "dp_size": self.dp_size,
            }
            return info
        return self.table[rank]
'''


def test_code_put_at_the_top_of_a_block_whose_first_statement_the_hunk_also_edits_is_an_insertion_at_its_start(
        tmp_path):
    # the first statement of the block is unique, but the hunk edits it too: a step anchored before it would not
    # find it in the patched file; the insertion goes at the block's start, the edit is its own step
    after = ROUTE.replace('            info = {\n                "tp_size": self.tp_size,\n',
                          '            tp_size = max(len(v) for v in self.table.values())\n'
                          '            info = {\n                "tp_size": tp_size,\n')
    steps, recipe = lifted_round_trip(tmp_path, ROUTE, after, "srt/route.py")
    assert [(s.options["op"], s.options.get("at"), s.options.get("inside")) for s in steps] == [
        ("insert_statements", "start", "if rank == -1:"), ("replace_expression", None, None)]
    # upstream adds a field to the dict: the insertion and the edit still land (the whole statement would refuse)
    later = ROUTE.replace('                "dp_size": self.dp_size,\n',
                          '                "dp_size": self.dp_size,\n                "pp_size": self.pp_size,\n')
    ported = importer.port(recipe, package(tmp_path / "later", {"srt/route.py": later}))
    assert [s.status for s in ported.steps] == ["applied", "applied"]
    assert ported.files["srt/route.py"].decode() == after.replace(
        '                "dp_size": self.dp_size,\n',
        '                "dp_size": self.dp_size,\n                "pp_size": self.pp_size,\n')


TRACKER = '''class Manager:
    def on_message(self, room, rank):
        if room in self.status:
            self.tracker[room].add(rank)
            expected = (
                self.table[room]
            )
            arrived = len(
                self.tracker[room]
            )
            if arrived == expected:
                self.update(room)

    def other(self, room):
        return room
'''


def test_a_step_whose_sibling_is_upstream_in_another_form_is_not_applied_alone(tmp_path):
    # one hunk, two steps in one function: the first moves `tracker.add` under a guard the second adds; upstream
    # edited the block the second replaces, and has its lines elsewhere in the file (upstream in another form, by
    # the file's lines): the first alone would drop `tracker.add` and `arrived` (a NameError), so it falls too
    after = TRACKER.replace('''            self.tracker[room].add(rank)
            expected = (
                self.table[room]
            )
            arrived = len(
                self.tracker[room]
            )
            if arrived == expected:
                self.update(room)
''', '''            # the entry may be gone
            expected = (
                self.table.get(room)
            )
            if expected is not None:
                self.tracker[room].add(
                    rank
                )
                arrived = len(
                    self.tracker[room]
                )
                if arrived == expected:
                    self.update(room)
''')
    later = TRACKER.replace("                self.update(room)\n",
                            "                self.flush(room)\n                self.update(room)\n").replace(
        "    def other(self, room):\n",
        "    def other(self, room):\n        expected = self.table.get(room)\n        if expected is not None:\n"
        "            self.tracker[room].add(room)\n")
    pkg = package(tmp_path / "base", {"srt/m.py": TRACKER})
    lifted, out = lift_and_write(tmp_path, pkg, git_diff(TRACKER, after, "srt/m.py"))
    assert [s.options["op"] for s in lifted.steps] == ["replace_statements", "replace_statements"]
    assert importer.round_trip(out, pkg, lifted.expected).ok
    ported = importer.port(load_recipe(out), package(tmp_path / "later", {"srt/m.py": later}), base_dir=pkg)
    assert [s.status for s in ported.steps] == ["refused", "upstream_other_form"]
    assert "another step of its group (`h1`) in `Manager.on_message` is not applied" in ported.steps[0].message
    assert ported.files["srt/m.py"].decode() == later


PROCESSOR = '''from typing import List

from pkg.rope import Rotary
from pkg.models import Model


class Processor:
    def __init__(self, config):
        self.config = config

    def run(self, ids):
        return Rotary.positions(ids)
'''


def test_an_import_put_at_module_level_is_not_taken_for_a_function_local_import_of_the_release(tmp_path):
    # one hunk adds `import torch` under the first import and an import of two names that a new method (another
    # hunk) uses; the later release imports torch inside a method only: the module does not have `torch`, so the
    # step is not "upstream in another form" and does not take its sibling (the other import) down with it
    after = PROCESSOR.replace("from typing import List\n\n", "from typing import List\n\nimport torch\n\n").replace(
        "from pkg.rope import Rotary\n", "from pkg.rope import Rotary\nfrom pkg.batch import Item, Kind\n").replace(
        "    def run(self, ids):\n",
        "    def data(self, ids):\n        return [Item(kind=Kind.IMAGE, ids=torch.tensor(ids))]\n\n"
        "    def run(self, ids):\n")
    later = PROCESSOR.replace("        return Rotary.positions(ids)\n",
                              "        import torch\n\n        return Rotary.positions(torch.tensor(ids))\n")
    pkg = package(tmp_path / "base", {"srt/p.py": PROCESSOR})
    lifted, out = lift_and_write(tmp_path, pkg, git_diff(PROCESSOR, after, "srt/p.py"))
    assert importer.round_trip(out, pkg, lifted.expected).ok
    ported = importer.port(load_recipe(out), package(tmp_path / "later", {"srt/p.py": later}), base_dir=pkg)
    assert [s.status for s in ported.steps] == ["applied"] * len(ported.steps), \
        [(s.name, s.status, s.message) for s in ported.steps]
    text = ported.files["srt/p.py"].decode()
    assert text.startswith("from typing import List\n\nimport torch\n\n")
    assert "from pkg.batch import Item, Kind\n" in text and "    def data(self, ids):\n" in text


DRAFT = '''class Loader:
    def load(self, config, is_draft):
        if is_draft:
            config = config.draft()
            config.layers = 1
        else:
            config = config.target()

        with timer("load"):
            model = build(config)
            model.eval()
        return model
'''


def test_an_if_block_inserted_between_two_compound_statements_is_anchored_on_a_header(tmp_path):
    # the new `if` goes between the `if`/`else` and the `with`: an insertion anchored on one of them by its header
    # (its body any), not a replacement of the whole `if`/`else` (which refuses once upstream edits its body)
    new = "        if config.quantized:\n            config = config.dequantized()\n"
    after = DRAFT.replace("\n        with timer", "\n" + new + "\n        with timer")
    steps, recipe = lifted_round_trip(tmp_path, DRAFT, after, "srt/loader.py")
    assert [s.options["op"] for s in steps] == ["insert_statements"]
    assert "    ..." in steps[0].options["match"] and "config.draft()" not in steps[0].options["match"]
    # upstream rewrote both blocks' bodies: the step still lands, between them
    later = DRAFT.replace("            config.layers = 1\n", "            config.layers = config.draft_layers\n") \
        .replace("            model.eval()\n", "            model.eval()\n            model.warm_up()\n")
    ported = importer.port(recipe, package(tmp_path / "later", {"srt/loader.py": later}))
    assert [s.status for s in ported.steps] == ["applied"]
    assert ported.files["srt/loader.py"].decode() == later.replace("\n        with timer", "\n" + new + "\n        with timer")


QUEUE_BASE = '''import logging
import time

from .conn import poll_all

logger = logging.getLogger(__name__)


def started():
    return time.time()


class Queue:
    def pop(self):
        polls = poll_all(self.queue)
        done = []
        for req, poll in zip(self.queue, polls):
            if poll:
                done.append(req)
        return done
'''


def test_a_step_that_reads_a_module_name_upstream_removed_is_refused_naming_it(tmp_path):
    # the step reads `time`, which the base release's module imports; upstream dropped `import time` (its own use of
    # it went away), and no step adds it: applied, the code would raise NameError at its first call
    steps = [
        {"name": "queue-h1-insert", "op": "insert_statements", "file": "srt/queue.py", "group": "h1",
         "function": "Queue.pop", "at": "after", "match": "polls = poll_all(...)",
         "code": "now = time.perf_counter()\nlogger.debug('polled at %s', now)\n"},
        {"name": "queue-h2-insert", "op": "insert_statements", "file": "srt/queue.py", "group": "h2",
         "function": "Queue.pop", "at": "before", "match": "return done", "code": "logger.debug('done')\n"},
    ]
    out = recipe_of(tmp_path, steps)
    base = package(tmp_path / "base", {"srt/queue.py": QUEUE_BASE})
    later_text = QUEUE_BASE.replace("import time\n", "").replace("    return time.time()\n", "    return 0\n")
    later = package(tmp_path / "later", {"srt/queue.py": later_text})
    ported = importer.port(load_recipe(out), later, base_dir=base)
    status = {s.name: s for s in ported.steps}
    assert status["queue-h1-insert"].status == "refused"
    assert "`time`" in status["queue-h1-insert"].message and "import time" in status["queue-h1-insert"].message
    assert status["queue-h2-insert"].status == "applied"  # `logger` is still there
    assert b"perf_counter" not in ported.files["srt/queue.py"]
    # a step of the recipe that imports it again makes the first one whole: both apply
    steps.append({"name": "queue-h0-import", "op": "add_import", "file": "srt/queue.py", "group": "h0",
                  "code": "import time"})
    again = importer.port(load_recipe(recipe_of(tmp_path / "two", steps)), later, base_dir=base)
    assert {s.name: s.status for s in again.steps} == {"queue-h1-insert": "applied", "queue-h2-insert": "applied",
                                                         "queue-h0-import": "applied"}
    # where the release still imports it, nothing is held back
    same = importer.port(load_recipe(out), package(tmp_path / "same", {"srt/queue.py": QUEUE_BASE}), base_dir=base)
    assert {s.status for s in same.steps} == {"applied"}


def test_a_step_that_reads_a_local_upstream_renamed_is_refused_and_its_siblings_stand(tmp_path):
    # the anchor is still there, but upstream renamed the local the step's code reads (`polls` -> `statuses`): applied,
    # the code would raise NameError at its first call. The check is the one apply makes (pyflakes on the planned
    # file), so it covers locals and helpers as well as module names; without a base release it holds too
    steps = [
        {"name": "queue-h1-insert", "op": "insert_statements", "file": "srt/queue.py", "group": "h1",
         "function": "Queue.pop", "at": "after", "match": "done = []",
         "code": "logger.debug('%d polls', len(polls))\n"},
        {"name": "queue-h2-insert", "op": "insert_statements", "file": "srt/queue.py", "group": "h2",
         "function": "Queue.pop", "at": "before", "match": "return done", "code": "logger.debug('done')\n"},
    ]
    out = recipe_of(tmp_path, steps)
    later_text = QUEUE_BASE.replace("polls", "statuses")
    later = package(tmp_path / "later", {"srt/queue.py": later_text})
    for base in (None, package(tmp_path / "base", {"srt/queue.py": QUEUE_BASE})):
        ported = importer.port(load_recipe(out), later, base_dir=base)
        status = {s.name: s for s in ported.steps}
        assert status["queue-h1-insert"].status == "refused"
        assert "`polls`" in status["queue-h1-insert"].message
        # with the base release the rule that reads it (a name upstream removed) speaks first
        assert base is not None or "NameError" in status["queue-h1-insert"].message
        assert status["queue-h2-insert"].status == "applied"
        text = ported.files["srt/queue.py"].decode()
        assert "len(polls)" not in text and "logger.debug('done')" in text
    # on the base release itself the same step applies (the local is there)
    same = importer.port(load_recipe(out), package(tmp_path / "same", {"srt/queue.py": QUEUE_BASE}))
    assert {s.status for s in same.steps} == {"applied"}


def test_a_patch_or_skip_file_that_is_not_utf8_is_bad_input(tmp_path):
    latin = "--- a/python/sglang/x.py\n+++ b/python/sglang/x.py\n@@ -1 +1 @@\n-a = 1\n+a = 1  # caf\udce9\n"
    with pytest.raises(UsageError, match="holds bytes that are not UTF-8"):
        importer.parse_patch(latin)
    # elsewhere than in a Python file's hunk (a data file the recipe does not lift), such bytes are no obstacle
    importer.parse_patch(latin.replace("x.py", "x.txt"))
    skip = tmp_path / "skip.txt"
    skip.write_bytes(b"gc\xff\n")
    with pytest.raises(UsageError, match="is not UTF-8 text"):
        importer.read_skip_file(skip)


@pytest.mark.parametrize("line", ["x = " + "[" * 3000 + "]" * 3000, "x = " + "+".join(["1"] * 600)])
def test_a_patch_whose_code_nests_too_deeply_is_reported_not_a_crash(tmp_path, line):
    # libcst's native parser overflowed its stack on the first (a segmentation fault), and its walk on the second
    base = "a = 1\n"
    pkg = package(tmp_path / "base", {"srt/deep.py": base, "srt/ok.py": base})
    patch = git_diff(base, base + line + "\n", "srt/deep.py") + git_diff(base, base + "b = 2\n", "srt/ok.py")
    lifted = importer.lift(pkg, patch)
    assert any(path == "srt/deep.py" and "cannot be parsed" in why for path, why in lifted.skipped)
    assert [s.file for s in lifted.steps] == ["srt/ok.py"]  # the other file is lifted as before


# --------------------------------------------------------------------------------------------------- what is not lifted


def import_cli(tmp_path: Path, monkeypatch, pkg: Path, patch: str, out: str = "recipes/team.yaml"):
    """`specpatch import team.patch --release 0.0.1 -o OUT` in `tmp_path`, on `pkg` as the release."""
    from typer.testing import CliRunner

    from patcher import cli as cli_module

    monkeypatch.setattr("patcher.fetch.fetch_release", lambda package, release: pkg.parent)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "400")
    (tmp_path / "team.patch").write_text(patch)
    return CliRunner().invoke(cli_module.app, ["import", "team.patch", "--release", "0.0.1", "-o", out])


def test_what_a_git_diff_changes_besides_its_hunks_is_reported_not_lifted_never_dropped(tmp_path, monkeypatch):
    # a pure rename, a copy, a mode change, binary files (with and without --binary) and an empty new file: none
    # has a hunk; each was dropped in silence (exit 0, "byte-identical") while applying the recipe made none of them
    pkg = package(tmp_path / "base", {"srt/mod.py": BEFORE, "srt/old.py": "x = 1\n", "srt/run.py": "y = 1\n"})
    g = "diff --git a/python/sglang/srt/{0} b/python/sglang/srt/{1}\n"
    patch = (git_diff(BEFORE, edited(BEFORE, EDITS[:1]), "srt/mod.py")
             + g.format("old.py", "moved.py") + "similarity index 100%\nrename from python/sglang/srt/old.py\n"
               "rename to python/sglang/srt/moved.py\n"
             + g.format("old.py", "twin.py") + "similarity index 100%\ncopy from python/sglang/srt/old.py\n"
               "copy to python/sglang/srt/twin.py\n"
             + g.format("run.py", "run.py") + "old mode 100644\nnew mode 100755\n"
             + g.format("blob.bin", "blob.bin") + "new file mode 100644\nindex 0000000..1111111\nGIT binary patch\n"
               "literal 9\nQc${NkVPs@vU|?hb00H9xssI20\n\nliteral 0\nHcmV?d00001\n\n"
             + g.format("img.png", "img.png") + "index 2222222..3333333 100644\n"
               "Binary files a/python/sglang/srt/img.png and b/python/sglang/srt/img.png differ\n"
             + g.format("__init__.py", "__init__.py") + "new file mode 100644\nindex 0000000..e69de29\n")
    lifted = importer.lift(pkg, patch)
    assert lifted.lifted == len(lifted.hunks) == 1
    assert [(p, why.split(":")[0]) for p, why in lifted.skipped] == [
        ("srt/moved.py", "renamed file from srt/old.py"), ("srt/twin.py", "copied file from srt/old.py"),
        ("srt/run.py", "mode change"), ("srt/blob.bin", "new binary file"), ("srt/img.png", "binary file"),
        ("srt/__init__.py", "new file")]
    done = import_cli(tmp_path, monkeypatch, pkg, patch)
    assert done.exit_code == 3, done.output  # as a rename with a hunk, a new or a deleted file
    summary = " ".join(done.output.split())
    assert "not lifted: 6 files (srt/moved.py: renamed file from srt/old.py, srt/twin.py: copied file from " \
           "srt/old.py, srt/run.py: mode change, 3 more)" in summary, summary
    assert "srt/run.py: mode change: 100644 -> 100755" in summary
    # a mode change that comes with hunks: the hunks are lifted, the mode is reported
    moded = git_diff(BEFORE, edited(BEFORE, EDITS[:1]), "srt/mod.py").replace(
        "index 1111111..2222222 100644\n", "old mode 100644\nnew mode 100755\nindex 1111111..2222222\n")
    lifted = importer.lift(pkg, moded)
    assert lifted.lifted == 1 and [p for p, _ in lifted.skipped] == ["srt/mod.py"]


def test_sections_that_are_not_unified_diffs_are_reported_not_lifted_and_alone_are_bad_input(tmp_path, monkeypatch):
    pkg = package(tmp_path / "base", {"srt/mod.py": BEFORE, "srt/other.py": BEFORE})
    plain = git_diff(BEFORE, edited(BEFORE, EDITS[:1]), "srt/mod.py")
    combined = ("diff --cc python/sglang/srt/other.py\nindex 1111111,2222222..3333333\n"
                "--- a/python/sglang/srt/other.py\n+++ b/python/sglang/srt/other.py\n"
                "@@@ -9,2 -9,2 +9,2 @@@\n- LIMIT = 5\n -LIMIT = 6\n++LIMIT = 7\n  \n")
    context = ("*** a/python/sglang/srt/other.py\t2026-01-01 00:00:00\n--- b/python/sglang/srt/other.py\t2026-01-01\n"
               "***************\n*** 9,9 ****\n! LIMIT = 4\n--- 9,9 ----\n! LIMIT = 8\n")
    only = "Only in B/sglang/srt: helper.py\n"
    lifted = importer.lift(pkg, plain + combined + context + only)
    assert lifted.lifted == len(lifted.hunks) == 1
    assert [(p, why.split(":")[0]) for p, why in lifted.skipped] == [
        ("srt/other.py", "combined diff"), ("srt/other.py", "context diff"), ("srt/helper.py", "only in one tree")]
    # a unified section after a context one is read again
    assert [f.path for f in importer.parse_patch(context + plain) if f.hunks] == ["srt/mod.py"]
    done = import_cli(tmp_path, monkeypatch, pkg, plain + combined + context + only)
    assert done.exit_code == 3, done.output
    assert "not lifted: 3 files (srt/other.py: combined diff, srt/other.py: context diff, srt/helper.py: only " \
           "in one tree)" in " ".join(done.output.split())
    for alone in (combined, context):  # nothing import can read: bad input, as before
        with pytest.raises(UsageError, match=r"the patch holds no hunk import can read: srt/other.py: "
                                             r"(combined|context) diff") as info:
            importer.parse_patch(alone)
        assert info.value.exit_code == 2


def test_a_unified_section_right_after_a_combined_diff_with_no_diff_line_between_is_read(tmp_path, monkeypatch):
    # a `diff --cc` section, then a plain `---`/`+++` section pasted after it: the combined section's own `---`/`+++`
    # lines lead a `@@@` hunk, the unified section's a `@@ -` one, where the combined section ends
    pkg = package(tmp_path / "base", {"srt/mod.py": BEFORE, "srt/other.py": BEFORE})
    combined = ("diff --cc python/sglang/srt/other.py\nindex 1111111,2222222..3333333\n"
                "--- a/python/sglang/srt/other.py\n+++ b/python/sglang/srt/other.py\n"
                "@@@ -9,2 -9,2 +9,2 @@@\n- LIMIT = 5\n -LIMIT = 6\n++LIMIT = 7\n  \n")
    plain = git_diff(BEFORE, edited(BEFORE, EDITS[:1]), "srt/mod.py").split("\n", 2)[2]  # no `diff`/`index` line
    assert plain.startswith("--- a/python/sglang/srt/mod.py\n+++ ")
    files = importer.parse_patch(combined + plain)
    assert [(f.path, len(f.hunks), [n.split(":")[0] for n in f.notes]) for f in files] == [
        ("srt/other.py", 0, ["combined diff"]), ("srt/mod.py", 1, [])]
    done = import_cli(tmp_path, monkeypatch, pkg, combined + plain)
    assert done.exit_code == 3, done.output
    summary = " ".join(done.output.split())
    assert "1/1 hunks as 3 steps; not lifted: 1 file (srt/other.py: combined diff); round trip: 1/1 files " \
           "byte-identical" in summary, summary


def test_a_rename_in_a_diff_of_two_trees_is_named_without_the_trees_folders(tmp_path):
    # `git diff --no-index -M orig patched`: a renamed file's two paths lead with the two trees' folders, which no
    # common end of its paths shows; the other sections' paths do, and they are stripped the same way
    pkg = package(tmp_path / "base", {"srt/mod.py": BEFORE, "srt/old.py": "w = 1\n", "srt/a.py": "a = 1\n"})
    after = edited(BEFORE, EDITS[:1])
    body = "".join(difflib.unified_diff(BEFORE.splitlines(True), after.splitlines(True), "x", "y")).split("\n", 2)[2]
    renamed = ("diff --git a/orig/srt/old.py b/patched/srt/new_name.py\nsimilarity index 88%\n"
               "rename from orig/srt/old.py\nrename to patched/srt/new_name.py\nindex 1111111..2222222 100644\n"
               "--- a/orig/srt/old.py\n+++ b/patched/srt/new_name.py\n@@ -1 +1 @@\n-w = 1\n+w = 2\n")
    copied = ("diff --git a/orig/srt/a.py b/patched/srt/sub/b.py\nsimilarity index 100%\n"
              "copy from orig/srt/a.py\ncopy to patched/srt/sub/b.py\n")
    same = ("diff --git a/orig/srt/mod.py b/patched/srt/mod.py\nindex 1111111..2222222 100644\n"
            "--- a/orig/srt/mod.py\n+++ b/patched/srt/mod.py\n" + body)
    files = importer.parse_patch(renamed + copied + same)
    assert [(f.old, f.new, f.moved) for f in files] == [("srt/old.py", "srt/new_name.py", "rename"),
                                                        ("srt/a.py", "srt/sub/b.py", "copy"),
                                                        ("srt/mod.py", "srt/mod.py", None)]
    lifted = importer.lift(pkg, renamed + copied + same)
    assert lifted.skipped == [("srt/new_name.py", "renamed file from srt/old.py: recipes edit existing files only"),
                              ("srt/sub/b.py", "copied file from srt/a.py: recipes edit existing files only")]
    assert lifted.lifted == 1 and lifted.expected["srt/mod.py"] == after.encode()


def test_two_trees_under_other_names_than_a_and_b_are_one_file_per_path_not_renames(tmp_path):
    # `git diff --no-index orig patched` and `diff -ru orig patched`: the trees' folders lead the paths
    after = edited(BEFORE, EDITS[:1])
    pkg = package(tmp_path / "base", {"srt/mod.py": BEFORE})
    lines = "".join(difflib.unified_diff(BEFORE.splitlines(True), after.splitlines(True), "x", "y"))
    body = lines.split("\n", 2)[2]
    git = ("diff --git a/orig/srt/mod.py b/patched/srt/mod.py\nindex 1111111..2222222 100644\n"
           "--- a/orig/srt/mod.py\n+++ b/patched/srt/mod.py\n" + body)
    gnu = ("diff -ru orig/srt/mod.py patched/srt/mod.py\n--- orig/srt/mod.py\t2026-01-01 00:00:00.0 +0000\n"
           "+++ patched/srt/mod.py\t2026-01-02 00:00:00.0 +0000\n" + body)
    nested = "--- work/orig/srt/mod.py\n+++ work/patched/srt/mod.py\n" + body  # trees under one folder
    for patch in (git, gnu, nested):
        assert [(f.old, f.new) for f in importer.parse_patch(patch)] == [("srt/mod.py", "srt/mod.py")]
        lifted = importer.lift(pkg, patch)
        assert not lifted.skipped and lifted.lifted == 1 and lifted.expected["srt/mod.py"] == after.encode()
    # two file names without `rename from` (`diff -u mod.py.orig mod.py`): one file, the one the release has
    lifted = importer.lift(pkg, "--- srt/mod.py.orig\n+++ srt/mod.py\n" + body)
    assert not lifted.skipped and lifted.lifted == 1


def test_the_description_says_which_hunks_have_a_refusing_step_and_which_none(tmp_path):
    pkg = package(tmp_path / "base", {"srt/mod.py": BEFORE, "README.md": "# sglang\n"})
    patch = (git_diff(BEFORE, edited(BEFORE, EDITS[:1]).replace("# end of module", "# the end"), "srt/mod.py")
             + git_diff("# sglang\n", "# sglang\nmore\n", "README.md")
             + "--- /dev/null\n+++ b/python/sglang/srt/new.py\n@@ -0,0 +1 @@\n+x = 1\n")
    lifted, out = lift_and_write(tmp_path, pkg, patch)
    recipe = load_recipe(out)
    assert [s.op for s in recipe.steps].count("unexpressed_hunk") == 1
    assert " ".join(recipe.description.split()) == (
        "Lifted by `specpatch import` from test.patch on sglang 0.0.1: 4 hunks, 1 expressed as semantic steps, 1 as "
        "a step that refuses (`unexpressed_hunk`, named after the hunk: port it by hand), 2 with no step. No step makes "
        "these changes (applying the recipe leaves them out): README.md (not a Python file); srt/new.py (new file: "
        "recipes edit existing files only).")


def test_sections_of_one_file_one_after_the_other_apply_in_order(tmp_path):
    # two commits' diffs concatenated: the second section counts its lines in the file the first one made
    first = edited(BEFORE, EDITS[:1])
    second = first.replace("    return a + b + c\n", "    return (a + b + c) * LIMIT\n").replace(
        "    kv_data_ptrs: List[int]\n", "    kv_data_ptrs: List[int]\n    aux_buffer_names: List[str]\n")
    pkg = package(tmp_path / "base", {"srt/mod.py": BEFORE})
    lifted, out = lift_and_write(tmp_path, pkg, git_diff(BEFORE, first, "srt/mod.py")
                                 + git_diff(first, second, "srt/mod.py"))
    assert [h.reason for h in lifted.hunks] == [None] * len(lifted.hunks) and len(lifted.hunks) == 3
    assert [h.hunk.number for h in lifted.hunks] == [1, 2, 3]
    assert lifted.expected["srt/mod.py"] == second.encode()
    rt = importer.round_trip(out, pkg, lifted.expected, lifted.trimmed, lifted.unmatched)
    assert rt.ok and rt.identical == ["srt/mod.py"], rt
    # a file an earlier section adds is named so, not "not in this release"
    added = importer.lift(pkg, "--- /dev/null\n+++ b/python/sglang/srt/n.py\n@@ -0,0 +1 @@\n+x = 1\n"
                               + git_diff("x = 1\n", "x = 2\n", "srt/n.py"))
    assert [why for _, why in added.skipped][1].startswith("a file an earlier section of the patch creates")


# --------------------------------------------------------------------------------------------------- writing


def test_import_never_deletes_files_it_did_not_write_and_replaces_its_own_output(tmp_path, monkeypatch):
    pkg = package(tmp_path / "base", {"srt/mod.py": BEFORE})
    monkeypatch.setattr("patcher.fetch.fetch_release", lambda package, release: pkg.parent)
    patch = tmp_path / "team.patch"
    patch.write_text(git_diff(BEFORE, edited(BEFORE), "srt/mod.py"))
    # `-o recipes.yaml` beside a folder `recipes/` of other recipes: refused, naming them, nothing touched
    others = {"README.txt": "notes\n", "other.yaml": "id: other\n", "other/step.code.py": "x = 1\n"}
    package(tmp_path / "proj", {f"../recipes/{k}": v for k, v in others.items()})
    folder = tmp_path / "proj" / "recipes"
    with pytest.raises(UsageError, match=r"recipes/ holds files that no recipes.yaml references \(recipes/README.txt, "
                                         r"recipes/other.yaml, recipes/other/step.code.py\)") as info:
        importer.import_patch(patch, package="sglang", release="0.0.1", out=tmp_path / "proj" / "recipes.yaml")
    assert info.value.exit_code == 2 and "move those files out" in info.value.hint
    assert {p.relative_to(folder).as_posix(): p.read_text() for p in folder.rglob("*") if p.is_file()} == others
    assert not (tmp_path / "proj" / "recipes.yaml").exists()
    # a re-import over its own output replaces it, the code files of the earlier one included
    out = tmp_path / "r" / "team.yaml"
    importer.import_patch(patch, package="sglang", release="0.0.1", out=out)
    earlier = sorted(p.name for p in (tmp_path / "r" / "team").rglob("*") if p.is_file())
    patch.write_text(git_diff(BEFORE, edited(BEFORE, EDITS[4:5]), "srt/mod.py"))
    assert importer.import_patch(patch, package="sglang", release="0.0.1", out=out).exit_code == 0
    now = sorted(p.name for p in (tmp_path / "r" / "team").rglob("*") if p.is_file())
    assert len(earlier) > len(now) == 1 and now[0].endswith("add-method-clear.code.py")
    assert len(load_recipe(out).steps) == 1 and sorted(p.name for p in out.parent.iterdir()) == ["team", "team.yaml"]
    # but not over a file of its folder the earlier recipe does not reference, nor a recipe import did not write
    (tmp_path / "r" / "team" / "mine.py").write_text("keep\n")
    with pytest.raises(UsageError, match=r"holds files that the earlier team.yaml does not reference \(team/mine.py"):
        importer.import_patch(patch, package="sglang", release="0.0.1", out=out)
    (tmp_path / "r" / "team" / "mine.py").unlink()
    own = out.read_text()
    out.write_text(own.replace("Lifted by `specpatch import`", "Written by hand"))
    with pytest.raises(UsageError, match="is not a recipe `specpatch import` wrote"):
        importer.import_patch(patch, package="sglang", release="0.0.1", out=out)
    assert "Written by hand" in out.read_text()
    # nor over its own output edited since (hostile round 13, newcomer 04: a `verify:` section and a reworded code
    # file were replaced, exit 0): the YAML or a code file it references
    out.write_text(own)
    importer.import_patch(patch, package="sglang", release="0.0.1", out=out)  # as written: replaced
    code = next(p for p in (tmp_path / "r" / "team").rglob("*") if p.is_file())
    for edit in (lambda: out.write_text(out.read_text() + "verify:\n  imports: [sglang.srt.mod]\n"),
                 lambda: code.write_text(code.read_text() + "# reworded\n")):
        stamped, mine = out.read_text(), code.read_text()
        edit()
        edited_yaml, edited_code = out.read_text(), code.read_text()
        with pytest.raises(UsageError, match="changed since `specpatch import` wrote them"):
            importer.import_patch(patch, package="sglang", release="0.0.1", out=out)
        assert (out.read_text(), code.read_text()) == (edited_yaml, edited_code)
        out.write_text(stamped)
        code.write_text(mine)


def test_an_output_folder_that_is_a_symbolic_link_is_bad_input(tmp_path, monkeypatch):
    pkg = package(tmp_path / "base", {"srt/mod.py": BEFORE})
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "keep.txt").write_text("keep\n")
    (tmp_path / "lk").symlink_to(tmp_path / "real")
    done = import_cli(tmp_path, monkeypatch, pkg, git_diff(BEFORE, edited(BEFORE), "srt/mod.py"), out="lk.yaml")
    assert done.exit_code == 2, done.output  # was 8: "Cannot call rmtree on a symbolic link"
    assert "lk, the folder of its code, is a symbolic link" in " ".join(done.output.split())
    assert (tmp_path / "real" / "keep.txt").read_text() == "keep\n" and not (tmp_path / "lk.yaml").exists()


@pytest.mark.parametrize("fails", ["write", "rename", "replace"])
def test_a_write_that_fails_half_way_leaves_the_earlier_recipe_whole_and_loadable(tmp_path, monkeypatch, fails):
    # a code file that cannot be written (no space left), or a step of the swap the system refuses (the new code
    # folder, then the yaml): the earlier recipe and its code files stay as they were, and the error says so
    pkg = package(tmp_path / "base", {"srt/mod.py": BEFORE})
    monkeypatch.setattr("patcher.fetch.fetch_release", lambda package, release: pkg.parent)
    patch = tmp_path / "team.patch"
    patch.write_text(git_diff(BEFORE, edited(BEFORE), "srt/mod.py"))
    out = tmp_path / "r" / "team.yaml"
    importer.import_patch(patch, package="sglang", release="0.0.1", out=out)
    before = {p: p.read_bytes() for p in out.parent.rglob("*") if p.is_file()}
    patch.write_text(git_diff(BEFORE, edited(BEFORE, EDITS[4:5]), "srt/mod.py"))
    owner, name = {"write": (Path, "write_bytes"), "rename": (os, "rename"), "replace": (os, "replace")}[fails]
    real, calls = getattr(owner, name), []

    def refuse(*args):
        calls.append(args)
        if fails != "rename" or len(calls) == 2:  # the earlier folder moved aside, the new one cannot come in
            raise OSError(28 if fails == "write" else 5, "refused", str(args[-1]))
        return real(*args)

    monkeypatch.setattr(owner, name, refuse)
    with pytest.raises(importer.SpecpatchError) as info:
        importer.import_patch(patch, package="sglang", release="0.0.1", out=out)
    monkeypatch.undo()
    assert calls and "nothing was replaced: team.yaml and team/ beside it are as they were" in info.value.hint
    assert {p: p.read_bytes() for p in out.parent.rglob("*") if p.is_file()} == before  # no stage left either
    assert len(load_recipe(out).steps) == 8


def test_a_changed_literal_is_anchored_by_the_expression_around_it(tmp_path):
    # a hostile round: `"3"` -> `"10"` lifted as a bare literal landed, in a release that moved the timeout, on
    # another `"3"` of the function (and `"10"` anywhere in it read as "already applied")
    before = ('import os\n\n\ndef get(url):\n    timeout = int(os.getenv("REQUEST_TIMEOUT", "3"))\n'
              '    return url, timeout\n')
    after = before.replace('"3"))', '"10"))')
    base = package(tmp_path / "base", {"srt/u.py": before})
    _, out = lift_and_write(tmp_path, base, git_diff(before, after, "srt/u.py"))
    [step] = load_recipe(out).steps
    assert step.op == "replace_expression" and step.match == 'os.getenv("REQUEST_TIMEOUT", "3")'
    # the next release reads the timeout elsewhere and has another "3" and a "10" in the function
    later = ('import os\n\n\ndef get(url):\n    retries = int(os.getenv("RETRIES", "3"))\n'
             '    timeout = read_timeout(default="10")\n    return url, timeout, retries\n')
    release = package(tmp_path / "later", {"srt/u.py": later})
    ported = importer.port(load_recipe(out), release, base_dir=base)
    assert [s.status for s in ported.steps] == ["refused"], [(s.status, s.message) for s in ported.steps]
    assert b'"RETRIES", "10"' not in ported.files.get("srt/u.py", b"")


def test_a_step_that_removes_a_binding_the_release_still_reads_is_refused_naming_it(tmp_path):
    # a hostile round: one hunk removed `topk_output = ...` because another hunk rewrote its reads; ported where
    # the other hunk refuses, the removal landed alone and the function raised NameError
    middle = "".join(f"    step{k} = x + {k}\n" for k in range(10))  # two hunks, far apart
    before = ("def run(d, helper):\n    x = d.hidden\n    topk_output = d.topk\n" + middle +
              "    return helper(x, topk_output, step9)\n")
    after = ("def run(d, helper):\n    x = d.hidden\n" + middle +
             "    return helper(x, d.topk_output_new(), step9)\n")
    base = package(tmp_path / "base", {"srt/q.py": before})
    _, out = lift_and_write(tmp_path, base, git_diff(before, after, "srt/q.py"))
    assert len({s.group for s in load_recipe(out).steps}) == 2, load_recipe(out).steps
    # the next release reads topk_output twice, in two `return` statements: the step rewriting the read is ambiguous
    # and refuses (a read in a statement of another kind would not count: the step's `statement:` picks the match)
    later = before.replace("    return helper(", "    if d.dry:\n        return helper(x, topk_output, 0)\n"
                                                 "    return helper(")
    release = package(tmp_path / "later", {"srt/q.py": later})
    ported = importer.port(load_recipe(out), release, base_dir=base)
    said = [(s.status, s.message) for s in ported.steps]
    assert all(st != "applied" for st, _ in said), said
    assert any("removes the statement that binds `topk_output`" in m for _, m in said), said


@pytest.mark.parametrize("before_head, after_head", [
    ("# Copyright 2023-2024 SGLang Team\n# Licensed under Apache 2.0\n\n",
     "# Copyright 2023-2025 SGLang Team and TeamX\n# Licensed under Apache 2.0\n\n"),
    ("", "# SPDX-License-Identifier: Apache-2.0\n"),
    ("# Copyright 2023-2024 SGLang Team\n\n", "# -*- coding: utf-8 -*-\n# Copyright 2023-2024 SGLang Team\n\n"),
])
def test_a_change_of_the_files_leading_comments_is_lifted_and_round_trips(tmp_path, before_head, after_head):
    # a hostile round: a team's licence or SPDX line at the top of a file was always an unexpressed hunk
    body = '"""Sampling."""\nimport os\n\n\ndef f():\n    return os.sep\n'
    base = package(tmp_path / "base", {"srt/s.py": before_head + body})
    lifted, out = lift_and_write(tmp_path, base, git_diff(before_head + body, after_head + body, "srt/s.py"))
    assert [s.options["op"] for s in lifted.steps] == ["replace_leading_comments"]
    assert lifted.expected["srt/s.py"] == (after_head + body).encode()
    recipe = load_recipe(out)
    ported = importer.port(recipe, base, hold_together=False)
    assert ported.files["srt/s.py"] == (after_head + body).encode()
    # a release whose header upstream changed: refused, naming its first line
    later = package(tmp_path / "later", {"srt/s.py": "# Copyright 2023-2026 SGLang Team\n\n" + body})
    [step] = importer.port(recipe, later, base_dir=base).steps
    assert step.status == "refused" and "# Copyright 2023-2026 SGLang Team" in step.message


def test_a_constant_built_of_literals_is_anchored_by_the_statement_around_it(tmp_path):
    # a hostile round: `1 << 16` -> `1 << 17` lifted as a bare expression rewrote another constant `1 << 16` of a
    # release that had one (RING_SIZE)
    before = "import os\n\nDEFAULT_SIZE = 1 << 16\n"
    after = before.replace("1 << 16", "1 << 17")
    base = package(tmp_path / "base", {"srt/c.py": before})
    _, out = lift_and_write(tmp_path, base, git_diff(before, after, "srt/c.py"))
    [step] = load_recipe(out).steps
    assert "DEFAULT_SIZE" in (getattr(step, "match", None) or ""), step
    later = "import os\n\nRING_SIZE = 1 << 16\nDEFAULT_SIZE = 1 << 18\n"
    ported = importer.port(load_recipe(out), package(tmp_path / "later", {"srt/c.py": later}), base_dir=base)
    assert [s.status for s in ported.steps] == ["refused"], [(s.status, s.message) for s in ported.steps]


def test_port_refuses_an_import_from_a_folder_upstream_removed_and_a_name_a_module_lost(tmp_path):
    # a hostile round: `from sglang.srt.metrics.func_timer import ...` ported to a release without `srt/metrics/`
    # (moved to `srt/observability`), and `from sglang.srt.layers.moe import routed_experts_capturer` to one whose
    # `moe` package has neither that module nor that name: both "applied", both ImportError at start-up
    before = "import os\n\n\ndef run():\n    return os.getpid()\n"
    after = ("import os\n\nfrom sglang.srt.metrics.func_timer import enable\nfrom sglang.srt.moe import capturer\n\n\n"
             "def run():\n    enable()\n    return capturer, os.getpid()\n")
    base = package(tmp_path / "base", {"srt/w.py": before, "srt/metrics/__init__.py": "",
                                       "srt/metrics/func_timer.py": "def enable():\n    pass\n",
                                       "srt/moe/__init__.py": "", "srt/moe/capturer.py": "X = 1\n"})
    _, out = lift_and_write(tmp_path, base, git_diff(before, after, "srt/w.py"))
    release = package(tmp_path / "later", {"srt/w.py": before, "srt/moe/__init__.py": "from .topk import TopK\n",
                                           "srt/moe/topk.py": "TopK = 1\n"})
    ported = importer.port(load_recipe(out), release, base_dir=base)
    said = " ".join(s.message for s in ported.steps)
    assert all(s.status != "applied" for s in ported.steps), [(s.status, s.message) for s in ported.steps]
    assert "`sglang.srt.metrics.func_timer` (the base release has it" in said
    # the name alone, on a release that keeps `srt/metrics/`
    keeps = package(tmp_path / "keeps", {"srt/w.py": before, "srt/moe/__init__.py": "", "srt/metrics/__init__.py": "",
                                         "srt/metrics/func_timer.py": "def enable():\n    pass\n"})
    said = " ".join(s.message for s in importer.port(load_recipe(out), keeps, base_dir=base).steps)
    assert "`capturer` from `sglang.srt.moe`, a name this release does not have" in said
    assert all(s.status != "refused" for s in importer.port(load_recipe(out), base, base_dir=base).steps)


def test_port_refuses_an_expression_now_in_a_statement_of_another_kind(tmp_path):
    # a hostile round (glm4_moe_nextn.py, 0.5.10 -> 0.5.11, ported to 0.5.13): `X` -> `X is not None or q is not
    # None` was lifted as a replace_expression of `X`; 0.5.13 rewrote the assignment, and `X` is now only in
    # `if is_npu() and X is None:`, which the edit turned into `(X is not None or ...) is None`: always False
    before = ("def init(args, q):\n    needs = (\n        args.draft_quant\n    )\n    return needs\n")
    after = before.replace("        args.draft_quant\n", "        args.draft_quant is not None or q is not None\n")
    base = package(tmp_path / "base", {"srt/n.py": before})
    _, out = lift_and_write(tmp_path, base, git_diff(before, after, "srt/n.py"))
    [step] = load_recipe(out).steps
    assert step.op == "replace_expression" and " ".join(step.match.split()) == "( args.draft_quant )", step
    # the lifter writes what the statement does: the step itself refuses another kind, with or without a base
    assert step.statement == "an assignment to needs", step
    later = ("def init(args, q):\n    needs = True\n    if is_npu() and args.draft_quant is None:\n"
             "        needs = False\n    return needs\n")
    for base_dir in (base, None):
        ported = importer.port(load_recipe(out), package(tmp_path / "later", {"srt/n.py": later}), base_dir=base_dir)
        [only] = ported.steps
        assert only.status == "refused" and "is in an `if` statement" in only.message, only.message
    # where the statement is the same kind (upstream only reformatted it), the edit lands
    same = package(tmp_path / "same", {"srt/n.py": before.replace("    needs = (\n        args.draft_quant\n    )\n",
                                                                   "    needs = args.draft_quant\n")})
    assert [s.status for s in importer.port(load_recipe(out), same, base_dir=base).steps] == ["applied"]


BATCHES = '''class BatchInfo:
    def __init__(self):
        self.extra = 0


class Batch:
    def __init__(self, reqs):
        self.reqs = reqs
        self.mode = "decode"


def run(batch: "Batch", steps: int):
    out = []
    for req in batch.reqs:
        out.append(req)
    return out


class Runner:
    def forward(self, batch: Optional[Batch]):
        n = 0
        return n
'''
BATCHES_LATER = BATCHES.replace("        self.extra = 0\n", "        self.extra = 0\n        self.mode = \"decode\"\n") \
    .replace("        self.mode = \"decode\"\n\n\ndef", "        self.info = BatchInfo()\n\n\ndef")


def test_a_step_that_reads_an_attribute_of_an_annotated_parameter_upstream_moved_is_refused_naming_it(tmp_path):
    # `mode` moved from `Batch` to `BatchInfo` upstream; the team's code reads it on parameters annotated `Batch`:
    # the function's own (`run`, `Runner.forward`) and one of a method the patch adds
    after = BATCHES.replace("        out.append(req)\n", "        if batch.mode == \"decode\":\n"
                            "            out.append(req)\n") \
        .replace("        n = 0\n", "        n = len(batch.reqs)\n") \
        .replace("        return n\n", "        return n\n\n    def mode_of(self, b: Batch):\n        return b.mode\n")
    pkg = package(tmp_path / "base", {"srt/batches.py": BATCHES})
    lifted, out = lift_and_write(tmp_path, pkg, git_diff(BATCHES, after, "srt/batches.py"))
    assert importer.round_trip(out, pkg, lifted.expected).ok
    later = package(tmp_path / "later", {"srt/batches.py": BATCHES_LATER})
    got = {s.name.split("-h", 1)[1]: s for s in importer.port(load_recipe(out), later, base_dir=pkg).steps}
    status = {k: s.status for k, s in got.items()}
    assert sorted(status.values()) == ["applied", "refused", "refused"], status
    refused = [s.message for s in got.values() if s.status == "refused"]
    assert any("`batch.mode` (`batch`: `Batch`): `mode` is defined by `Batch` in the base release and by no such "
               "class in the release (now in `BatchInfo`)" in m for m in refused), refused
    assert any("`b.mode` (`b`: `Batch`)" in m for m in refused), refused
    # `batch.reqs` stayed in `Batch`: `Runner.forward`'s step applies
    assert [s for s in got.values() if s.status == "applied"][0].file == "srt/batches.py"
    # the release binds the parameter again before the read: what it holds cannot be told, the step is not judged
    rebound = BATCHES_LATER.replace("    out = []\n", "    out = []\n    batch = batch.info\n")
    again = package(tmp_path / "rebound", {"srt/batches.py": rebound})
    got = importer.port(load_recipe(out), again, base_dir=pkg).steps
    assert sum(s.status == "refused" for s in got) == 1, [(s.name, s.status, s.message) for s in got]


CONTEXT = '''from typing import Optional


class Context:
    def __init__(self):
        self.mode = 0
        self.tokens: Optional[int] = None
        self.ready = True


_ctx: Optional[Context] = None


def get_context() -> Optional[Context]:
    return _ctx
'''
ATTEND = '''from .ctx import get_context


def attend(x):
    context = get_context()
    return x + context.mode
'''


def test_a_step_that_removes_an_attribute_the_release_now_reads_in_another_file_is_refused_naming_the_read(tmp_path):
    # the team removed `Context.tokens` (nothing read it in their release); the release reads it, in another file,
    # on what `get_context()` returns: `AttributeError` once the step applies
    after = CONTEXT.replace("        self.tokens: Optional[int] = None\n", "")
    pkg = package(tmp_path / "base", {"srt/ctx.py": CONTEXT, "srt/attend.py": ATTEND})
    lifted, out = lift_and_write(tmp_path, pkg, git_diff(CONTEXT, after, "srt/ctx.py"))
    assert importer.round_trip(out, pkg, lifted.expected).ok

    def port(name: str, attend: str) -> list:
        later = package(tmp_path / name, {"srt/ctx.py": CONTEXT, "srt/attend.py": attend})
        return importer.port(load_recipe(out), later, base_dir=pkg).steps

    reads = ATTEND.replace("    return x + context.mode\n", "    n = context.tokens\n    return x + context.mode + n\n")
    (step,) = port("reads", reads)
    assert step.status == "refused", step.message
    assert "it removes `tokens`, which no class of `Context`'s family defines once applied, while the release " \
           "reads it in `srt/attend.py` (line 6, `attend`: `n = context.tokens`)" in step.message
    # the same read on an object whose class the code does not tell, or a release that sets `tokens` from outside
    # the class, or a read the base release had too: not judged, the step applies
    unknown = reads.replace("    context = get_context()\n", "    context = make()\n")
    sets = reads.replace("    n = context.tokens\n", "    context.tokens = 1\n    n = context.tokens\n")
    for name, text in (("unknown", unknown), ("sets", sets)):
        (step,) = port(name, text)
        assert step.status == "applied", (name, step.message)
    pkg2 = package(tmp_path / "base2", {"srt/ctx.py": CONTEXT, "srt/attend.py": reads})
    lifted, out = lift_and_write(tmp_path, pkg2, git_diff(CONTEXT, after, "srt/ctx.py"), name="lifted2")
    later = package(tmp_path / "later2", {"srt/ctx.py": CONTEXT, "srt/attend.py": reads})
    (step,) = importer.port(load_recipe(out), later, base_dir=pkg2).steps
    assert step.status == "applied", step.message


@pytest.mark.parametrize("after", [
    "def f(n):\n    if n is None:\n        n = 0\n    elif n == -1:\n        n = 5\n    return n\n",  # an arm added
    "def f(n):\n    if n is not None:\n        n = 0\n    else:\n        n = 1\n    return n\n",  # header and arm
])
def test_an_elif_or_else_arm_added_to_an_if_lifts_and_round_trips(tmp_path, after):
    # the header-only candidate compared the arms of the two `if`s and crashed (exit 1) when one had none
    before = "def f(n):\n    if n is None:\n        n = 0\n    return n\n"
    pkg = package(tmp_path / "base", {"srt/a.py": before})
    for name, (old, new) in {"add": (before, after), "remove": (after, before)}.items():
        lifted, out = lift_and_write(tmp_path, pkg if name == "add" else package(tmp_path / name, {"srt/a.py": old}),
                                     git_diff(old, new, "srt/a.py"), name=name)
        assert importer.round_trip(out, pkg if name == "add" else tmp_path / name / "sglang", lifted.expected).ok


def test_a_method_renamed_where_the_release_added_a_caller_of_the_old_name_is_refused_naming_it(tmp_path):
    # a hostile round: the patch renames `A.old` to `A.new` and its one caller; the release added `A.user2`, which
    # calls `self.old()`: both steps "applied", and `A().user2()` raised AttributeError
    before = "class A:\n    def old(self):\n        return 1\n\n    def user(self):\n        return self.old()\n"
    after = before.replace("old", "new")
    pkg = package(tmp_path / "base", {"srt/m.py": before})
    lifted, out = lift_and_write(tmp_path, pkg, git_diff(before, after, "srt/m.py"))
    assert importer.round_trip(out, pkg, lifted.expected).ok
    later = before + "\n    def user2(self):\n        return self.old() + 1\n"
    got = importer.port(load_recipe(out), package(tmp_path / "later", {"srt/m.py": later}), base_dir=pkg).steps
    assert {s.status for s in got} == {"refused"}, [(s.name, s.status, s.message) for s in got]
    assert any("it removes `old`, which no class of `A`'s family defines once applied, while the release reads it in "
               "`srt/m.py` (line 9, `A.user2`: `return self.old() + 1`)" in s.message for s in got), \
        [s.message for s in got]
    # the caller the patch itself renames is no reason: on a release without `user2` both apply
    same = importer.port(load_recipe(out), package(tmp_path / "same", {"srt/m.py": before}), base_dir=pkg).steps
    assert {s.status for s in same} == {"applied"}, [(s.name, s.status, s.message) for s in same]


def test_a_plain_parameter_appended_by_the_patch_stays_last_after_one_upstream_appended(tmp_path):
    # a hostile round: `def f(a, b=1)` -> `def f(a, b=1, neg=False)` was lifted `after: b`; the release appended
    # `scale=1` and calls `f(1, 2, 10)`: the new parameter went between `b` and `scale`, and 10 bound to `neg`
    before = "def f(a, b=1):\n    return a + b\n"
    after = "def f(a, b=1, neg=False):\n    return -(a + b) if neg else a + b\n"
    steps, recipe = lifted_round_trip(tmp_path, before, after, "srt/f.py")
    assert [(s.options["op"], s.options.get("after")) for s in steps if s.options["op"] == "add_parameter"] == [
        ("add_parameter", None)]
    later = "def f(a, b=1, scale=1):\n    return a + b\n\n\ndef call():\n    return f(1, 2, 10)\n"
    ported = importer.port(recipe, package(tmp_path / "later", {"srt/f.py": later}))
    assert "def f(a, b=1, scale=1, neg=False):" in ported.files["srt/f.py"].decode()
    # a parameter put between two others keeps its place after the one it follows
    middle = "def f(a, mid=None, b=1):\n    return a + b\n"
    steps, _ = lifted_round_trip(tmp_path / "middle", before, middle, "srt/f.py")
    assert [s.options.get("after") for s in steps] == ["a"]


def test_a_port_whose_planned_file_python_refuses_leaves_the_step_out(tmp_path):
    # a hostile round: the patch adds `global COUNT` before `x = 1`; the release reads COUNT above that line, and
    # Python refuses the file ("name 'COUNT' is used prior to global declaration"): port said applied, apply exit 3
    before = "COUNT = 0\n\n\ndef f():\n    x = 1\n    return x\n"
    after = "COUNT = 0\n\n\ndef f():\n    global COUNT\n    x = 1\n    COUNT = x\n    return x\n"
    steps, recipe = lifted_round_trip(tmp_path, before, after, "srt/c.py")
    later = "COUNT = 0\n\n\ndef f():\n    print(COUNT)\n    x = 1\n    return x\n"
    ported = importer.port(recipe, package(tmp_path / "later", {"srt/c.py": later}))
    refused = [s for s in ported.steps if s.status == "refused"]
    assert refused and any("does not compile: name 'COUNT' is used prior to global declaration" in s.message
                           for s in refused), [(s.name, s.status, s.message) for s in ported.steps]
    assert "srt/c.py" not in ported.files or b"global COUNT" not in ported.files["srt/c.py"]


def test_port_does_not_take_a_removal_upstream_moved_into_another_module_as_already_upstream(tmp_path):
    # a hostile round: `del d["y"]` removed by the patch; upstream moved it into a helper of another module that the
    # function now calls, so it still runs. "Already upstream" would drop the team's change in silence
    before = 'def run(d):\n    d["x"] = 1\n    del d["y"]\n    return d\n'
    after = 'def run(d):\n    d["x"] = 1\n    return d\n'
    base = package(tmp_path / "base", {"srt/w.py": before, "srt/h.py": "def other():\n    pass\n"})
    _, out = lift_and_write(tmp_path, base, git_diff(before, after, "srt/w.py"))
    moved = package(tmp_path / "moved", {
        "srt/w.py": 'from sglang.srt.h import clean\n\n\ndef run(d):\n    d["x"] = 1\n    clean(d)\n    return d\n',
        "srt/h.py": 'def other():\n    pass\n\n\ndef clean(d):\n    del d["y"]\n'})
    [only] = importer.port(load_recipe(out), moved, base_dir=base).steps
    assert only.status == "refused" and "`srt/h.py` has it (line 6)" in only.message, (only.status, only.message)
    # really gone upstream: already upstream, as before; and a module that had the statement in the base too
    # (another function's own) is no evidence
    gone = package(tmp_path / "gone", {"srt/w.py": after, "srt/h.py": "def other():\n    pass\n"})
    assert [s.status for s in importer.port(load_recipe(out), gone, base_dir=base).steps] == ["already_upstream"]
    base2 = package(tmp_path / "base2", {"srt/w.py": before, "srt/h.py": 'def other(d):\n    del d["y"]\n'})
    _, out2 = lift_and_write(tmp_path / "2", base2, git_diff(before, after, "srt/w.py"))
    kept = package(tmp_path / "kept", {"srt/w.py": after, "srt/h.py": 'def other(d):\n    del d["y"]\n'})
    assert [s.status for s in importer.port(load_recipe(out2), kept, base_dir=base2).steps] == ["already_upstream"]
    # hostile round 14 (upstream 03): the same statement in a module the step's file does not name, or at a
    # module's top level (its own logger, its `_is_hip = is_hip()`), is no helper the function calls: upstream's own
    # removals were refused on their own release
    unrelated = package(tmp_path / "unrelated", {
        "srt/w.py": after, "srt/h.py": 'def other():\n    pass\n\n\ndef clean(d):\n    del d["y"]\n'})
    assert [s.status for s in importer.port(load_recipe(out), unrelated, base_dir=base).steps] == ["already_upstream"]
    const_before = "import logging\n\nlogger = logging.getLogger(__name__)\n\n\ndef f():\n    return 1\n"
    const_after = "import logging\n\n\ndef f():\n    return 1\n"
    base4 = package(tmp_path / "base4", {"srt/w.py": const_before, "srt/h.py": "def other():\n    pass\n"})
    _, out4 = lift_and_write(tmp_path / "4", base4, git_diff(const_before, const_after, "srt/w.py"))
    new_module = package(tmp_path / "new_module", {
        "srt/w.py": "import logging\n\nfrom sglang.srt import h\n\n\ndef f():\n    return 1\n",
        "srt/h.py": "import logging\n\nlogger = logging.getLogger(__name__)\n\n\ndef other():\n    pass\n"})
    assert [s.status for s in importer.port(load_recipe(out4), new_module, base_dir=base4).steps if s.op != "add_import"
            ] == ["already_upstream"]
    # an import gone from the module while another module gains the same import is no code moved (hostile round
    # 13, upstream 01: five real upstream diffs refused on their own release)
    imp_before = "import os\nimport time\n\n\ndef f():\n    return os.sep\n"
    imp_after = "import os\n\n\ndef f():\n    return os.sep\n"
    base3 = package(tmp_path / "base3", {"srt/w.py": imp_before, "srt/h.py": "def other():\n    pass\n"})
    _, out3 = lift_and_write(tmp_path / "3", base3, git_diff(imp_before, imp_after, "srt/w.py"))
    gained = package(tmp_path / "gained", {"srt/w.py": imp_after,
                                           "srt/h.py": "import time\n\n\ndef other():\n    return time.time()\n"})
    assert [s.status for s in importer.port(load_recipe(out3), gained, base_dir=base3).steps] == ["already_upstream"]


def test_port_does_not_take_a_replacement_another_block_holds_as_already_upstream(tmp_path):
    # a hostile round: `x = 1` -> `x = 5` in the `if mode == "a":` arm; the later release has `x = 3` there and a new
    # `elif mode == "b":` arm that happens to hold `x = 5`. "Already upstream" dropped the change: f("a") gave 3
    before = 'def f(mode):\n    if mode == "a":\n        x = 1\n    else:\n        x = 2\n    return x\n'
    after = before.replace("x = 1", "x = 5")
    base = package(tmp_path / "base", {"srt/m.py": before})
    _, out = lift_and_write(tmp_path, base, git_diff(before, after, "srt/m.py"))
    [step] = load_recipe(out).steps
    assert (step.op, step.match, step.code) == ("replace_statements", "x = 1", "x = 5"), step
    other = package(tmp_path / "other", {"srt/m.py": 'def f(mode):\n    if mode == "a":\n        x = 3\n'
                                                     '    elif mode == "b":\n        x = 5\n    else:\n        x = 2\n'
                                                     '    return x\n'})
    [only] = importer.port(load_recipe(out), other, base_dir=base).steps
    assert only.status == "refused" and "not in `if mode == 'a':`" in only.message, (only.status, only.message)
    # upstream's own change in that block, and a block upstream rewrote (its header gone): already upstream
    adopted = package(tmp_path / "adopted", {"srt/m.py": after.replace("    return x\n", "    log(x)\n    return x\n")})
    rewritten = package(tmp_path / "rewritten", {"srt/m.py": before.replace('mode == "a"', 'mode in ("a", "c")')
                                                 .replace("x = 1", "x = 5")})
    for release in (adopted, rewritten):
        assert [s.status for s in importer.port(load_recipe(out), release, base_dir=base).steps] == \
            ["already_upstream"], release


def test_port_names_the_file_a_method_moved_to(tmp_path):
    # a hostile round: upstream moved `Worker.prepare_batch` into a base class of a new module; the refusal named
    # nothing near
    before = "class Worker:\n    def prepare_batch(self, b):\n        b.sort()\n        return b\n"
    after = before.replace("        b.sort()\n", "        b.sort()\n        b.reverse()\n")
    base = package(tmp_path / "base", {"srt/w.py": before})
    _, out = lift_and_write(tmp_path, base, git_diff(before, after, "srt/w.py"))
    later = package(tmp_path / "later", {
        "srt/w.py": "from sglang.srt.base_worker import BaseWorker\n\n\nclass Worker(BaseWorker):\n    pass\n",
        "srt/base_worker.py": ("class BaseWorker:\n    def prepare_batch(self, b):\n        b.sort()\n"
                               "        return b\n")})
    [only] = importer.port(load_recipe(out), later, base_dir=base).steps
    assert only.status == "refused", only
    assert "function `prepare_batch` is in `srt/base_worker.py` line 2 (moved there?)" in only.candidates, only


def test_port_refuses_a_member_that_would_override_one_upstream_added_to_a_base_class(tmp_path):
    # a hostile round: the patch adds `Worker.reset(self)`; upstream added `BaseWorker.reset(self, hard=False)` in
    # another module and calls `self.reset(hard=True)`: applied, Worker().start() raised TypeError. The same for a
    # dataclass field over upstream's field of the base class (a 600 s timeout cut to 5)
    base_worker = "class BaseWorker:\n    def start(self):\n        return 1\n"
    before = ("from sglang.srt.bw import BaseWorker\n\n\nclass Worker(BaseWorker):\n    timeout: int = 1\n\n"
              "    def run(self):\n        return 0\n")
    after = (before.replace("    timeout: int = 1\n", "    timeout: int = 1\n    limit: int = 5\n")
             + "\n    def reset(self):\n        return 2\n")
    base = package(tmp_path / "base", {"srt/bw.py": base_worker, "srt/w.py": before})
    _, out = lift_and_write(tmp_path, base, git_diff(before, after, "srt/w.py"))
    assert {s.op for s in load_recipe(out).steps} == {"add_method", "add_dataclass_field"}
    grown = ("class BaseWorker:\n    limit: float = 600.0\n\n    def start(self):\n        self.reset(hard=True)\n"
             "        return 1\n\n    def reset(self, hard=False):\n        return 3\n")
    later = package(tmp_path / "later", {"srt/bw.py": grown, "srt/w.py": before})
    said = {s.op: (s.status, s.message) for s in importer.port(load_recipe(out), later, base_dir=base).steps}
    assert said["add_method"][0] == "refused" and "base class `BaseWorker` (`srt/bw.py`) defines `reset`" in \
        said["add_method"][1], said
    assert said["add_dataclass_field"][0] == "refused" and "defines `limit`" in said["add_dataclass_field"][1], said
    # an override the base release already had is the patch's own choice
    base2 = package(tmp_path / "base2", {"srt/bw.py": grown, "srt/w.py": before})
    _, out2 = lift_and_write(tmp_path / "2", base2, git_diff(before, after, "srt/w.py"))
    assert {s.status for s in importer.port(load_recipe(out2), later, base_dir=base2).steps} == {"applied"}


def test_port_refuses_an_insertion_that_assigns_a_name_upstream_added_to_the_function(tmp_path):
    # a hostile round: the patch inserts `limit = n + 1`; upstream added a parameter `limit` and reads it below:
    # applied, the caller's limit was silently replaced
    before = "def f(req):\n    n = len(req)\n    total = n * 2\n    return total\n"
    after = before.replace("    total = n * 2\n", "    limit = n + 1\n    total = n * 2\n    print(limit)\n")
    base = package(tmp_path / "base", {"srt/m.py": before})
    _, out = lift_and_write(tmp_path, base, git_diff(before, after, "srt/m.py"))
    assert {s.op for s in load_recipe(out).steps} == {"insert_statements"}
    for name, later in (("a parameter", before.replace("def f(req):", "def f(req, limit=100):")),
                        ("a local", before.replace("    total = n * 2\n", "    limit = 7\n    total = n * 2\n"))):
        ported = importer.port(load_recipe(out), package(tmp_path / name.replace(" ", "-"), {"srt/m.py": later}),
                               base_dir=base)
        assert any(s.status == "refused" and "it assigns `limit`, which `f` binds in this release" in s.message
                   for s in ported.steps), (name, [(s.status, s.message) for s in ported.steps])
    # a release whose function does not bind it: applied
    other = package(tmp_path / "other", {"srt/m.py": before.replace("return total", "return total + 0")})
    assert {s.status for s in importer.port(load_recipe(out), other, base_dir=base).steps} == {"applied"}


def test_port_refuses_a_keyword_whose_parameter_step_is_refused_or_skipped(tmp_path):
    # a hostile round: `scale=1` added to A.f and `scale=3` passed by A.g; the release has its own `scale="linear"`
    # (a mode): the parameter step refused, the keyword step "applied" and passed 3 as upstream's mode
    before = "class A:\n    def f(self, n):\n        return n + 1\n\n    def g(self):\n        return self.f(1)\n"
    after = ("class A:\n    def f(self, n, scale=1):\n        return (n + 1) * scale\n\n    def g(self):\n"
             "        return self.f(1, scale=3)\n")
    base = package(tmp_path / "base", {"srt/m.py": before})
    _, out = lift_and_write(tmp_path, base, git_diff(before, after, "srt/m.py"))
    ops = {s.op: s.name for s in load_recipe(out).steps}
    assert {"add_parameter", "add_keyword_argument"} <= set(ops), ops
    later = package(tmp_path / "later",
                    {"srt/m.py": before.replace("def f(self, n):", 'def f(self, n, scale="linear"):')})
    for skip in ((), (ops["add_parameter"],)):
        said = {s.op: (s.status, s.message) for s in importer.port(load_recipe(out), later, base_dir=base,
                                                                    skip=skip).steps}
        assert said["add_keyword_argument"][0] == "refused" and "it passes `scale` to `f`" in \
            said["add_keyword_argument"][1], (skip, said)
    # the parameter applied (or upstream's own): the keyword goes with it
    assert {s.status for s in importer.port(load_recipe(out), base, base_dir=base).steps} == {"applied"}


def test_port_reads_the_names_an_add_branch_guard_uses(tmp_path):
    # a newcomer's round: the flagship's route guard (add_branch) was "applied" on a release where the step adding
    # the method its `call:` names refused; written as insert_statements, the same guard was refused
    release = package(tmp_path / "rel", {"srt/w.py": "class Worker:\n    def __init__(self):\n        self.n = 0\n\n"
                                                     "    def forward(self, batch):\n        if batch.is_extend():\n"
                                                     "            return 1\n        else:\n            return 2\n"})
    path = tmp_path / "guard.yaml"
    path.write_text('id: guard\nversion: 1\ntitle: t\ntarget: {package: sglang, versions: ">=0"}\nsteps:\n'
                    '  - {name: fallback, op: add_method, file: srt/w.py, class: Worker, after: init_graphs,\n'
                    '     code: "def _fallback_forward(self, batch):\\n    return 0\\n"}\n'
                    '  - {name: guard, op: add_branch, file: srt/w.py, function: Worker.forward,\n'
                    '     branch_if: batch.is_extend(), arm: else, condition: batch.size > 4,\n'
                    '     call: self._fallback_forward(batch)}\n')
    said = {s.name: (s.status, s.message) for s in importer.port(load_recipe(path), release).steps}
    assert said["fallback"][0] == "refused", said
    assert said["guard"][0] == "refused" and "_fallback_forward" in said["guard"][1], said


def test_port_gives_near_candidates_the_line_of_the_release_not_of_the_planned_file(tmp_path):
    # a newcomer's round: after a step that inserted 100 lines above it, port said `setup_graphs (line 1495)` for a
    # method at line 1387 of the release (apply said 1387)
    release = package(tmp_path / "rel", {"srt/w.py": "class Worker:\n    def __init__(self):\n        self.n = 0\n\n"
                                                     "    def setup_graphs(self):\n        pass\n"})
    path = tmp_path / "r.yaml"
    path.write_text('id: r\nversion: 1\ntitle: t\ntarget: {package: sglang, versions: ">=0"}\nsteps:\n'
                    '  - {name: big, op: add_method, file: srt/w.py, class: Worker, after: __init__,\n'
                    '     code: "def helper(self):\\n' + "    x = 1\\n" * 20 + '    return x\\n"}\n'
                    '  - {name: late, op: insert_statements, file: srt/w.py, function: Worker.setup_graph,\n'
                    '     at: end, code: "self.n = 1"}\n')
    said = {s.name: s for s in importer.port(load_recipe(path), release).steps}
    assert said["big"].status == "applied" and said["late"].status == "refused", said
    assert any("setup_graphs" in c and "(line 5)" in c for c in said["late"].candidates), said["late"].candidates


def test_port_does_not_take_a_comprehension_variable_for_a_local_upstream_added(tmp_path):
    # a review: the step's `sum(r.n for r in batch)` and upstream's new `[r for r in reqs]` bind no local of the
    # function; the step was refused as overwriting upstream's `r`
    before = "def schedule(batch, reqs):\n    n = len(batch)\n    return n\n"
    after = before.replace("    return n\n", "    total = sum(r.n for r in batch)\n    return n + total\n")
    base = package(tmp_path / "base", {"srt/m.py": before})
    _, out = lift_and_write(tmp_path, base, git_diff(before, after, "srt/m.py"))
    later = package(tmp_path / "later", {"srt/m.py": before.replace(
        "    n = len(batch)\n", "    n = len(batch)\n    live = [r for r in reqs if r]\n")})
    assert all(s.status == "applied" for s in importer.port(load_recipe(out), later, base_dir=base).steps)


def test_an_if_inserted_beside_upstreams_new_if_of_the_same_test_is_upstream_in_another_form(tmp_path):
    # a tester's round: the patch adds `extra` to `x` under its own `if`; upstream added it to `residual` above,
    # under an `if` of the same test, so `x = x + residual` has it already: applied, it counted twice
    before = ("def forward(x, residual=None, extra=None):\n    if residual is not None:\n        x = x + residual\n"
              "        residual = x\n    return x * 2, residual\n")
    after = before.replace("        x = x + residual\n", "        x = x + residual\n        if extra is not None:\n"
                           "            x = x + extra\n")
    base = package(tmp_path / "base", {"srt/norm.py": before})
    lifted, out = lift_and_write(tmp_path, base, git_diff(before, after, "srt/norm.py"))
    assert [s.options["op"] for s in lifted.steps] == ["insert_statements"]
    upstream = before.replace("        x = x + residual\n", "        if extra is not None:\n"
                              "            residual = residual + extra\n        x = x + residual\n")
    [step] = importer.port(load_recipe(out), package(tmp_path / "later", {"srt/norm.py": upstream}),
                           base_dir=base).steps
    assert step.status == "upstream_other_form" and "`if extra is not None:` (line 3)" in step.message, step
    # the base release's function had that test already (another case of it): not upstream's, applied
    had = before.replace("    return x * 2", "    if extra is not None:\n        x = x - 1\n    return x * 2")
    base2 = package(tmp_path / "base2", {"srt/norm.py": had})
    lifted, out = lift_and_write(tmp_path, base2, git_diff(had, after.replace(
        "    return x * 2", "    if extra is not None:\n        x = x - 1\n    return x * 2"), "srt/norm.py"), "two")
    later = had.replace("    return x * 2", "    y = 1\n    return x * 2")
    assert [s.status for s in importer.port(load_recipe(out), package(tmp_path / "later2", {"srt/norm.py": later}),
                                            base_dir=base2).steps] == ["applied"]


def test_a_field_of_a_class_the_recipe_adds_is_not_removed_upstream(tmp_path):
    # a tester's round: the method reads `p.start` of the dataclass the recipe's own add_definition adds; the base
    # release had a local `start` in a file the release dropped, and port refused the method as "removed upstream"
    struct = "from dataclasses import dataclass\n\n\n@dataclass\nclass Req:\n    name: str\n"
    runner = "class Runner:\n    def update(self, req):\n        return req.name\n"
    files = {"srt/io.py": struct, "srt/runner.py": runner, "tests/t.py": "def test_x():\n    start = 3\n"}
    new = {"srt/io.py": struct + "\n\n@dataclass\nclass DeltaParam:\n    name: str\n    start: int\n",
           "srt/runner.py": runner + "\n    def _decode(self, values, p):\n        return values[p.start :]\n"}
    base = package(tmp_path / "base", files)
    _, out = lift_and_write(tmp_path, base, "".join(git_diff(files[rel], text, rel) for rel, text in new.items()))
    later = package(tmp_path / "later", {"srt/io.py": struct, "srt/runner.py": runner})
    said = {s.op: (s.status, s.message) for s in importer.port(load_recipe(out), later, base_dir=base).steps}
    assert said == {"add_definition": ("applied", ""), "add_method": ("applied", "")}, said


def test_imports_put_at_the_top_of_a_section_are_add_import_steps_that_port_one_by_one(tmp_path):
    # a tester's round: `import contextlib` and `import contextvars` above `import datetime` were lifted as one
    # replace_statements of `import datetime`; on a release that has `import contextlib` it refused, and the code
    # that uses contextvars fell with it
    before = ("from __future__ import annotations\n\nimport datetime\nimport gc\nimport os\n\nimport torch\n\n\n"
              "def now():\n    return datetime.datetime.now(), gc, os, torch\n")
    after = before.replace("import datetime\n", "import contextlib\nimport contextvars\nimport datetime\n") + (
        "\n\ndef scoped():\n    with contextlib.suppress(KeyError):\n        return contextvars.ContextVar('x')\n")
    base = package(tmp_path / "base", {"srt/r.py": before})
    lifted, out = lift_and_write(tmp_path, base, git_diff(before, after, "srt/r.py"))
    assert [(s.options["op"], s.options.get("code"), s.options.get("sorted")) for s in lifted.steps[:2]] == [
        ("add_import", "import contextlib", True), ("add_import", "import contextvars", True)], lifted.steps
    assert importer.round_trip(out, base, lifted.expected).ok
    later = before.replace("import datetime\n", "import contextlib\nimport datetime\n")
    ported = importer.port(load_recipe(out), package(tmp_path / "later", {"srt/r.py": later}), base_dir=base)
    assert [s.status for s in ported.steps] == ["already_upstream", "applied", "applied"], ported.steps
    assert b"\nimport contextlib\nimport contextvars\nimport datetime\n" in ported.files["srt/r.py"]


def test_a_step_anchored_on_what_a_step_not_applied_adds_names_that_step(tmp_path):
    # a tester's round: a chain of add_method steps, each after the method the one before adds; when one refused,
    # the next said "anchor not found: no method `_decode` in class `Runner`" with the release's near names
    before = ("import json\n\n\nclass Runner:\n    def update(self, path):\n        return json.dumps(path)\n\n"
              "    def reset(self):\n        return None\n")
    after = before.replace("    def reset(", "    def _decode(self, blob):\n        return json.loads(blob)\n\n"
                           "    def _apply(self, path):\n        return self._decode(path)\n\n    def reset(")
    base = package(tmp_path / "base", {"srt/r.py": before})
    _, out = lift_and_write(tmp_path, base, git_diff(before, after, "srt/r.py"))
    first, second = (s.name for s in load_recipe(out).steps)
    later = package(tmp_path / "later", {"srt/r.py": before.replace("import json\n\n\n", "").replace(
        "json.dumps(path)", "str(path)")})
    for skip, status in (((), "refused"), ((first,), "skipped")):
        said = {s.name: s for s in importer.port(load_recipe(out), later, base_dir=base, skip=skip).steps}
        assert said[first].status == status, said
        assert said[second].status == "refused" and said[second].message.startswith(
            f"its anchor `_decode` is what `{first}` adds, and that step is not applied ({status})"), said[second]
        assert not said[second].candidates


def test_code_reading_what_a_default_flip_carries_falls_with_the_flip(tmp_path):
    # an import round: hunk 1 makes `fp32_residual=True` the default, hunk 5 rewrites `forward_native` for it; on a
    # release where upstream added `__init__` parameters the flip was refused and hunk 5 applied: every RMSNorm
    # built with defaults took a path neither upstream nor the team's patch runs
    filler = "    def extra(self):\n" + "".join(f"        v{k} = {k}\n" for k in range(6)) + "        return 0\n\n"
    before = ("class RMSNorm:\n    def __init__(self, size, fp32_residual=False):\n"
              "        self.fp32_residual = fp32_residual\n        self.size = size\n\n" + filler +
              "    def forward(self, x, residual):\n        x = x + residual\n        return x\n")
    after = before.replace("fp32_residual=False", "fp32_residual=True").replace(
        "        x = x + residual\n", "        if self.fp32_residual:\n            x = float(x)\n        x = x + residual\n")
    base = package(tmp_path / "base", {"srt/norm.py": before})
    _, out = lift_and_write(tmp_path, base, git_diff(before, after, "srt/norm.py"))
    later = before.replace("fp32_residual=False):", "fp32_residual=False, has_weight=True):")
    said = {s.op: (s.status, s.message) for s in importer.port(load_recipe(out), package(tmp_path / "later",
                                                                                        {"srt/norm.py": later}),
                                                                 base_dir=base).steps}
    status, message = said["insert_statements"]
    assert status == "refused" and "reads `self.fp32_residual`, whose default" in message, said
    assert said["replace_statements"][0] == "refused"
    # on a release where the flip applies, both apply
    assert {s.status for s in importer.port(load_recipe(out), package(tmp_path / "same", {"srt/norm.py": before}),
                                            base_dir=base).steps} == {"applied"}


def test_upstream_evidence_shows_the_lines_in_the_function_the_step_edits():
    # an import round: "upstream in another form" for `forward_hip` cited the lines of `forward_cuda`, which has
    # the same statements higher up in the file
    from op_helpers import op

    text = ("class Norm:\n    def forward_cuda(self, x, extra):\n        if extra is not None:\n            x = x + extra\n"
            "        return x\n\n    def forward_hip(self, x, extra):\n        if extra is not None:\n"
            "            x = x + extra\n        return x\n")
    step = op("insert_statements", function="Norm.forward_hip", at="before", match="return x",
              code="if extra is not None:\n    x = x + extra\n")
    assert importer.upstream_evidence(step, text) == ("line 8: `if extra is not None:`", "line 9: `x = x + extra`")


def test_import_takes_the_package_the_patch_paths_name_and_refuses_another(tmp_path, monkeypatch):
    # a hostile round: a diff of `vllm/...` files, imported without --package, fetched sglang==0.12.0 ("could not
    # download a wheel") or said "not in this release", and never named --package vllm
    fetched = []
    pkg = package(tmp_path / "base", {"srt/mod.py": BEFORE}, name="vllm")
    monkeypatch.setattr("patcher.fetch.fetch_release",
                        lambda package, release: fetched.append(package) or pkg.parent)
    patch = tmp_path / "team.patch"
    patch.write_text(git_diff(BEFORE, edited(BEFORE), "srt/mod.py", prefix="vllm/"))
    assert importer.packages_named(patch.read_text()) == {"vllm"}
    with pytest.raises(UsageError, match=r"changes files of vllm .* --package is sglang") as info:
        importer.import_patch(patch, package="sglang", release="0.12.0", out=tmp_path / "r" / "team.yaml")
    assert "--package vllm" in info.value.hint and not fetched
    result = importer.import_patch(patch, package=None, release="0.12.0", out=tmp_path / "r" / "team.yaml")
    assert fetched == ["vllm"] and result.round_trip.identical == ["srt/mod.py"], result.round_trip
    # a release the inferred package lacks says where the package came from
    from patcher.errors import FetchError

    def missing(package, release):
        raise FetchError(f"could not download a wheel of {package}=={release}")

    monkeypatch.setattr("patcher.fetch.fetch_release", missing)
    with pytest.raises(FetchError) as info:
        importer.import_patch(patch, package=None, release="0.5.9", out=tmp_path / "r2" / "team.yaml")
    assert "vllm was taken from the patch's paths" in info.value.hint, info.value.hint


def test_a_step_that_reads_a_refused_steps_name_through_a_string_key_falls_with_it(tmp_path):
    # a hostile round (vLLM): the flag `add_argument("--boost", **kwargs["boost_tokens"])` reads the config field
    # by its name as a key; the field's step refused on the later release, the flag was "applied" (KeyError when
    # the parser is built)
    steps = [
        {"name": "utils-h1-field", "op": "add_definition", "file": "srt/user.py", "group": "h1", "after": "gone",
         "code": "boost_tokens = 0\n"},
        {"name": "utils-h2-flag", "op": "add_definition", "file": "srt/utils.py", "group": "h2", "after": "Buffers",
         "code": "BOOST = KWARGS['boost_tokens']\n"},
    ]
    out = recipe_of(tmp_path, steps)
    later = package(tmp_path / "later", {"srt/utils.py": "KWARGS = {}\n\n\n" + UTILS, "srt/user.py": USER})
    ported = {s.name: s for s in importer.port(load_recipe(out), later).steps}
    assert ported["utils-h1-field"].status == "refused"
    assert ported["utils-h2-flag"].status == "refused", ported["utils-h2-flag"]
    assert "`boost_tokens`" in ported["utils-h2-flag"].message


def test_a_documented_field_put_below_the_last_documented_field_is_one_add_dataclass_field(tmp_path):
    # a hostile round (vLLM 0.12.0's SchedulerConfig): the field and its docstring, above a method, were an
    # unexpressed hunk (import exited 3)
    before = ('class SchedulerConfig:\n    a: int = 1\n    """The a."""\n\n    stream_interval: int = 1\n'
              '    """The interval,\n    in steps."""\n\n    @staticmethod\n    def default_factory(**kwargs):\n'
              '        return 1\n')
    after = before.replace('in steps."""\n\n', 'in steps."""\n\n    boost: int = 0\n    """Extra tokens."""\n\n')
    pkg = package(tmp_path / "base", {"srt/config.py": before})
    lifted = importer.lift(pkg, git_diff(before, after, "srt/config.py"))
    assert [s.options["op"] for s in lifted.steps] == ["add_dataclass_field"], [s.options for s in lifted.steps]
    assert lifted.steps[0].options["after"] == "stream_interval"
    lifted, out = lift_and_write(tmp_path, pkg, git_diff(before, after, "srt/config.py"))
    rt = importer.round_trip(out, pkg, lifted.expected)
    assert rt.ok and rt.identical == ["srt/config.py"], rt


def test_an_entry_added_to_a_dict_display_is_one_add_element_by_the_key_above_it(tmp_path):
    # a hostile round (vLLM's envs.py): one new entry was a replace_expression of the whole dict
    before = ('import os\n\nenvironment_variables = {\n    "A": lambda: int(os.getenv("A", "1")),\n'
              '    "B": lambda: os.getenv("B"),\n}\n')
    after = before.replace('    "B": lambda: os.getenv("B"),\n', '    "B": lambda: os.getenv("B"),\n'
                           '    # team: a cap\n    "C": lambda: int(\n        os.getenv("C", "0")\n    ),\n')
    pkg = package(tmp_path / "base", {"envs.py": before})
    lifted, out = lift_and_write(tmp_path, pkg, git_diff(before, after, "envs.py"))
    assert [(s.options["op"], s.options.get("after")) for s in lifted.steps] == [("add_element", '"B"')]
    rt = importer.round_trip(out, pkg, lifted.expected)
    assert rt.ok and rt.identical == ["envs.py"], rt


def test_an_element_added_with_a_comment_or_as_an_unpacking_is_one_add_element(tmp_path):
    # fuzzer round 11 (07): a starred element was lifted as its value (`EXTRA` for `*EXTRA`), and an element with
    # a comment at the end of its line had no add_element form: each became a replacement of the whole literal
    before = 'DEFAULT = OTHER = "d"\nEXTRA = []\nmake = list\nGROUPS = [\n    DEFAULT,\n    OTHER,\n]\n'
    for added in ("    *EXTRA,\n", '    "team",  # our own group\n', "    make(\n        (1,),\n    ),\n"):
        after = before.replace("    DEFAULT,\n", "    DEFAULT,\n" + added)
        where = tmp_path / str(len(added))
        pkg = package(where / "base", {"groups.py": before})
        lifted, out = lift_and_write(where, pkg, git_diff(before, after, "groups.py"))
        assert [(s.options["op"], s.options.get("after")) for s in lifted.steps] == [("add_element", "DEFAULT")], \
            (added, [s.options for s in lifted.steps])
        rt = importer.round_trip(out, pkg, lifted.expected)
        assert rt.ok and rt.identical == ["groups.py"], rt


def test_hunk_lines_that_gained_carriage_returns_on_an_lf_file_are_the_files_lines(tmp_path):
    # hostile round 12 (import): only the hunks' lines ending in "\r" (an editor or a mail client; the framing lines
    # kept LF) on an LF file: every hunk "not expressed: no operation reproduces it exactly", the endings unnamed
    before = "def f(a):\n    x = a\n    return x\n"
    after = before.replace("    return x\n", "    x += 1\n    return x\n")
    patch = "".join(ln if ln.startswith(("diff ", "index ", "--- ", "+++ ", "@@")) else ln.replace("\n", "\r\n")
                    for ln in git_diff(before, after, "m.py").splitlines(True))
    pkg = package(tmp_path / "base", {"m.py": before})
    lifted, out = lift_and_write(tmp_path, pkg, patch)
    assert lifted.expected["m.py"] == after.encode(), lifted.expected
    assert [s.options["op"] for s in lifted.steps] == ["insert_statements"]
    rt = importer.round_trip(out, pkg, lifted.expected)
    assert rt.ok and rt.identical == ["m.py"], rt


def test_a_reworded_comment_above_a_function_is_one_step_on_that_function(tmp_path):
    # hostile round 12 (import): the comment above a decorated function, or above a function's first statement, was
    # lifted as a replacement of the whole function and the one before it, which fell with any edit upstream made
    # to either; it is a replace_leading_comments above that statement, which ports where the code moved on
    before = ("def get_load():\n    return 1\n\n\n# converts json\n@app.post('/x')\nasync def set_state(obj):\n"
              "    # may alloc\n    if obj:\n        return 2\n    return 3\n")
    after = before.replace("# converts json", "# converts JSON").replace("# may alloc", "# may allocate")
    pkg = package(tmp_path / "base", {"srt/h.py": before})
    lifted, out = lift_and_write(tmp_path, pkg, git_diff(before, after, "srt/h.py"))
    assert [s.options["op"] for s in lifted.steps] == ["replace_leading_comments"] * 2, \
        [s.options for s in lifted.steps]
    rt = importer.round_trip(out, pkg, lifted.expected)
    assert rt.ok and rt.identical == ["srt/h.py"], rt
    later = package(tmp_path / "later", {"srt/h.py": before.replace("return 1", "return load()").replace(
        "return 3", "return 4")})
    assert [s.status for s in importer.port(load_recipe(out), later, base_dir=pkg).steps] == ["applied"] * 2


def test_a_keyword_or_parameter_added_with_a_comment_is_one_step(tmp_path):
    # fuzzer round 12 (F9): the comment ending the new argument's line was not in the step's code, so the step did
    # not reproduce the patch and the hunk fell back to a replacement of the whole statement
    before = "def f(\n    a,\n):\n    return g(\n        a,\n    )\n\n\ndef g(*x, **k):\n    return x\n"
    after = before.replace("    a,\n):", "    a,\n    b=0,  # new\n):").replace(
        "        a,\n    )", "        a,\n        t=30,  # seconds\n    )")
    pkg = package(tmp_path / "base", {"m.py": before})
    lifted, out = lift_and_write(tmp_path, pkg, git_diff(before, after, "m.py"))
    assert sorted(s.options["op"] for s in lifted.steps) == ["add_keyword_argument", "add_parameter"], \
        [s.options for s in lifted.steps]
    rt = importer.round_trip(out, pkg, lifted.expected)
    assert rt.ok and rt.identical == ["m.py"], rt


def test_port_leaves_out_a_step_that_would_not_find_its_own_change_on_a_second_run(tmp_path):
    # review 12: port answered "applied" for a step apply then refused (its second run: a later step rewrites what
    # it anchors on); port asks what apply asks
    pkg = package(tmp_path / "rel", {"m.py": "def f():\n    x = 1\n    return x\n"})
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "two.yaml").write_text(
        "id: two\nversion: 1\ntitle: t\ntarget: {package: sglang}\nsteps:\n"
        "  - {name: log, op: insert_statements, file: m.py, function: f, at: after, match: x = 1, code: log(x)}\n"
        "  - {name: bump, op: replace_statements, file: m.py, within: f, match: x = 1, code: x = 2}\n")
    (pkg / "m.py").write_text("def log(v):\n    pass\n\n\n" + (pkg / "m.py").read_text())
    ported = importer.port(load_recipe(tmp_path / "r" / "two.yaml"), pkg)
    by_name = {s.name: s for s in ported.steps}
    assert by_name["log"].status == "refused" and "second apply" in by_name["log"].message, by_name["log"]
    assert by_name["bump"].status == "applied"


def test_port_refuses_a_call_across_modules_the_release_cannot_take(tmp_path):
    # hostile round 13 (upstream 04): a keyword added to a call of another module's function that the release's
    # function does not take was "applied" by port (exit 0), where apply refuses it (TypeError when it runs)
    lib_new = "def init(endpoint, name, modules=None):\n    return endpoint\n"
    lib_old = "def init(endpoint, name):\n    return endpoint\n"
    user = "from sglang.srt.lib import init\n\n\ndef run(a):\n    return init(a, \"x\")\n"
    base = package(tmp_path / "base", {"srt/lib.py": lib_new, "srt/use.py": user})
    _, out = lift_and_write(tmp_path, base, git_diff(user, user.replace('"x")', '"x", modules=a)'), "srt/use.py"))
    older = package(tmp_path / "older", {"srt/lib.py": lib_old, "srt/use.py": user})
    [only] = importer.port(load_recipe(out), older, base_dir=base).steps
    assert only.status == "refused" and "the keyword `modules`" in only.message, (only.status, only.message)
    assert [s.status for s in importer.port(load_recipe(out), base, base_dir=base).steps] == ["applied"]


def test_port_refuses_a_signature_change_another_module_of_the_release_calls_by_position(tmp_path):
    # this session's slime bench run: port's check of the calls of other modules (a signature the step changes)
    # ended with exit 1 (the port's stand-in target had no `rel` to name the other file with)
    lib = "def init(endpoint, name=None):\n    return endpoint\n"
    base = package(tmp_path / "base", {"srt/lib.py": lib, "srt/use.py": "def run(a):\n    return a\n"})
    _, out = lift_and_write(tmp_path, base, git_diff(lib, lib.replace("endpoint, name", "endpoint, port=0, name"),
                                                     "srt/lib.py"))
    user = "from sglang.srt.lib import init\n\n\ndef run(a):\n    return init(a, \"x\")\n"
    later = package(tmp_path / "later", {"srt/lib.py": lib, "srt/use.py": user})
    [only] = importer.port(load_recipe(out), later, base_dir=base).steps
    assert only.status == "refused" and "the call `init(a, 'x')` of `srt/use.py` (line 5) passes by position" \
        in only.message, (only.status, only.message)


@pytest.mark.parametrize("before", [
    # a method's docstring (sglang 0.5.13 -> 0.5.14 adaptive_runtime_state.py) and a field's docstring below it
    # (vLLM's config classes): hostile round 14 (upstream 02), 20 of its 22 hunks not lifted were such rewordings
    'class C:\n    def register(self, state):\n        """Register a state.\n\n        *steps* defaults to ``x``.\n'
    '        """\n        self.s = state\n',
    'class Config:\n    size: int = 0\n    """The size.\n\n    Zero means any.\n    """\n    name: str = ""\n',
])
def test_a_reworded_multi_line_docstring_is_lifted(tmp_path, before):
    after = before.replace("``x``", "x").replace("Zero means any.", "Zero means any size.")
    steps, recipe = lifted_round_trip(tmp_path, before, after, "srt/c.py")
    assert [s.options["op"] for s in steps] == ["replace_statements"], [s.options for s in steps]


def test_statements_put_at_the_top_of_a_function_above_its_comment_are_lifted_at_start(tmp_path):
    # hostile round 13 (newcomer 03): two lines above a method's first comment and `if` were lifted as one
    # replace_statements of the whole 31-line method, refused on the next release wherever upstream edited it
    body = "".join(f"        x{k} = {k}\n" for k in range(12))
    before = (f"class S:\n    def check(self):\n        # Handle the dump.\n        if self.a:\n            self.b = 1\n"
              f"{body}")
    after = before.replace("        # Handle the dump.\n", "        if self.cap < 0:\n            raise ValueError\n"
                                                            "        # Handle the dump.\n")
    steps, recipe = lifted_round_trip(tmp_path, before, after, "srt/s.py")
    [step] = recipe.steps
    assert (step.op, step.at) == ("insert_statements", "start"), (step.op, getattr(step, "at", None))
    # upstream rewrote the rest of the method: the step still lands
    later = package(tmp_path / "later", {"srt/s.py": before.replace("x3 = 3", "x3 = 33").replace("self.b = 1",
                                                                                               "self.b = 2")})
    assert [s.status for s in importer.port(recipe, later).steps] == ["applied"]


def test_port_refuses_an_import_only_a_refused_step_uses_though_another_file_mentions_its_name(tmp_path):
    # hostile round 13 (upstream 03): of two imports of one hunk used only by a refused method, the one whose name
    # another file of the patch mentions was applied (an unused import written), its sibling refused
    lp = "class Out:\n    pass\n\n\ndef helper():\n    return 1\n"
    a = "import os\n\n\nclass W:\n    def run(self):\n        return os.sep\n"
    a_new = ("import os\nfrom sglang.srt.lp import Out\nfrom sglang.srt.lp import helper\n\n\nclass W:\n"
             "    def run(self):\n        return os.sep\n\n    def extra(self):\n        return Out(), helper()\n")
    b = "from sglang.srt.lp import Out\n\n\ndef make():\n    return Out()\n"
    b_new = b.replace("return Out()", "return Out(), 2")
    base = package(tmp_path / "base", {"srt/lp.py": lp, "srt/a.py": a, "srt/b.py": b})
    _, out = lift_and_write(tmp_path, base, git_diff(a, a_new, "srt/a.py") + git_diff(b, b_new, "srt/b.py"))
    later = package(tmp_path / "later", {"srt/lp.py": lp, "srt/a.py": a.replace("def run", "def go"),
                                         "srt/b.py": b})
    ported = importer.port(load_recipe(out), later, base_dir=base)
    imports = [s.status for s in ported.steps if s.name.startswith("srt-a-") and "add-import" in s.name]
    assert len(imports) == 2 and set(imports) == {"refused"}, {s.name: (s.status, s.message) for s in ported.steps}


def test_a_module_constant_only_a_refused_step_reads_falls_though_another_file_has_its_own(tmp_path):
    """Round 14, upstream 05: `_is_hip = is_hip()` and its import were applied while the one step reading `_is_hip`
    was refused, because another file of the recipe has a `_is_hip` of its own: a module-level name is its module's."""
    steps = [
        {"name": "w-h1-add-import", "op": "add_import", "file": "srt/w.py", "group": "h1",
         "code": "from sglang.srt.utils import is_hip\n"},
        {"name": "w-h2-add-definition", "op": "add_definition", "file": "srt/w.py", "group": "h2",
         "code": "_is_hip = is_hip()\n"},
        {"name": "w-h3-insert", "op": "insert_statements", "file": "srt/w.py", "group": "h3",
         "function": "run", "at": "before", "match": "return gone_upstream(n)", "code": "n = n + 1 if _is_hip else n\n"},
        {"name": "e-h1-insert", "op": "insert_statements", "file": "srt/e.py", "group": "h1",
         "function": "step", "at": "start", "code": "print(_is_hip)\n"},
    ]
    out = recipe_of(tmp_path, steps)
    utils = "def is_hip():\n    return False\n"
    later = package(tmp_path / "later", {
        "srt/utils.py": utils,
        "srt/w.py": "def run(n):\n    return n\n",
        "srt/e.py": "from sglang.srt.utils import is_hip\n\n_is_hip = is_hip()\n\n\ndef step():\n    return 1\n"})
    status = {s.name: s for s in importer.port(load_recipe(out), later).steps}
    assert status["w-h3-insert"].status == "refused"
    assert status["e-h1-insert"].status == "applied"  # e.py's own `_is_hip`
    for name in ("w-h1-add-import", "w-h2-add-definition"):
        assert status[name].status == "refused" and "only steps that are not applied use" in status[name].message
