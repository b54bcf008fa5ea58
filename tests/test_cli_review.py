"""Review output of `specpatch apply --dry-run`: markdown for a pull-request comment, JSON with the diff, a diff file."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
RECIPES = HERE / "recipes"
TOY = RECIPES / "fixtures" / "toy-greeting"


def specpatch(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "NO_COLOR": "1", "SPECPATCH_RECIPE_PATH": str(RECIPES), **(env or {})}
    return subprocess.run([sys.executable, "-m", "patcher", *args], capture_output=True, text=True, env=full_env,
                          timeout=600)


@pytest.fixture
def target(tmp_path) -> Path:
    dest = tmp_path / "t"
    shutil.copytree(TOY / "baseline" / "before", dest)
    return dest


def fenced_blocks(markdown: str) -> list[tuple[str, str]]:
    """(info string, body) of each fenced code block."""
    return [(m.group(2), m.group(3)) for m in re.finditer(r"^(`{3,})(\w*)\n(.*?)^\1$", markdown, re.M | re.S)]


def table_rows(markdown: str) -> list[list[str]]:
    rows = []
    for line in markdown.splitlines():
        if line.startswith("|"):
            rows.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]])
    return rows


def test_markdown_is_a_table_of_steps_and_a_diff_per_changed_file(target):
    done = specpatch("apply", "toy-greeting", "--target", str(target), "--dry-run", "--format", "markdown")
    assert done.returncode == 0, done.stderr
    md = done.stdout
    assert md.startswith("### specpatch: `toy-greeting` v1 on sglang 0.5.9\n")
    assert "**would change** 2 file(s)" in md

    rows = table_rows(md)
    assert rows[0] == ["#", "step", "operation", "file", "status", "lines"]  # the header row
    assert set("".join(rows[1])) <= set("-:")  # the delimiter row
    steps = rows[2:]
    assert [r[0] for r in steps] == ["1", "2", "3"]  # one row per step
    assert [r[1] for r in steps] == ["greeting-field", "greet-method", "util-import"]
    assert [r[2] for r in steps] == ["`add_dataclass_field`", "`add_method`", "`add_import`"]
    assert [r[3] for r in steps] == ["`sglang/srt/greeter.py`", "`sglang/srt/greeter.py`", "`sglang/srt/util.py`"]
    assert all(r[4] == "changed" for r in steps)
    assert steps[0][5] == "9"  # the new field's line in the patched file

    blocks = fenced_blocks(md)
    assert [info for info, _ in blocks] == ["diff", "diff"]  # one ```diff fence per changed file
    greeter, util = (body for _, body in blocks)
    assert greeter.startswith("diff --git a/sglang/srt/greeter.py b/sglang/srt/greeter.py\n")
    assert '+    greeting: str = "hello"\n' in greeter and "+    def greet(self) -> str:\n" in greeter
    assert util.startswith("diff --git a/sglang/srt/util.py b/sglang/srt/util.py\n") and "+import os\n" in util
    assert "<summary><code>sglang/srt/greeter.py</code> (+4 −0)</summary>" in md
    assert not (target / ".specpatch").exists()  # a dry run writes nothing


def test_markdown_of_an_applied_recipe_and_of_a_broken_tree(target, tmp_path):
    assert specpatch("apply", "toy-greeting", "--target", str(target), "--no-smoke").returncode == 0
    done = specpatch("apply", "toy-greeting", "--target", str(target), "--dry-run", "--format", "markdown")
    assert done.returncode == 0
    assert "**already applied**: nothing to change" in done.stdout
    assert all(r[4] == "already applied" for r in table_rows(done.stdout)[2:])
    assert fenced_blocks(done.stdout) == []

    broken = tmp_path / "broken"
    shutil.copytree(TOY / "missing-anchor" / "before", broken)
    done = specpatch("apply", "toy-greeting", "--target", str(broken), "--dry-run", "--format", "markdown")
    assert done.returncode == 3
    assert "**cannot apply**: 1 error(s); nothing would be written" in done.stdout
    assert "> **anchor not found**:" in done.stdout and "> Help:" in done.stdout
    assert "cannot apply" in [r[4] for r in table_rows(done.stdout)[2:]]
    assert "Error: anchor not found" in done.stderr  # the terminal still gets the full error


def test_markdown_fence_survives_backticks_in_the_code(target, tmp_path):
    recipe = tmp_path / "ticks.yaml"
    recipe.write_text('id: ticks\ntitle: t\ntarget: {package: sglang}\nsteps:\n  - op: add_method\n'
                      '    file: srt/greeter.py\n    class: Greeter\n    code: |\n      def doc(self):\n'
                      '          """Example:\n\n          ```\n          g.doc()\n          ```\n          """\n')
    done = specpatch("apply", str(recipe), "--target", str(target), "--dry-run", "--format", "markdown")
    assert done.returncode == 0, done.stderr
    (info, body), = fenced_blocks(done.stdout)
    assert info == "diff" and "+        ```\n" in body and body.rstrip().endswith('+        """')
    assert "\n````diff\n" in done.stdout


def test_json_carries_the_steps_and_the_diff(target, tmp_path):
    diff_file = tmp_path / "review.diff"
    done = specpatch("apply", "toy-greeting", "--target", str(target), "--dry-run", "--format", "json",
                     "--diff-out", str(diff_file))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["outcome"] == "would_change" and report["dry_run"] and report["ok"]
    assert [s["status"] for s in report["steps"]] == ["changed"] * 3
    assert report["diff"] == diff_file.read_text()
    # the diff is one `git apply` accepts
    subprocess.run(["git", "init", "-q", str(target)], check=True)
    checked = subprocess.run(["git", "-C", str(target), "apply", "--check", str(diff_file)], capture_output=True,
                             text=True)
    assert checked.returncode == 0, checked.stderr


def test_text_dry_run_prints_the_plain_diff_on_stdout(target):
    done = specpatch("apply", "toy-greeting", "--target", str(target), "--dry-run")
    assert done.returncode == 0
    assert done.stdout.startswith("diff --git a/sglang/srt/greeter.py b/sglang/srt/greeter.py\n")
    assert "dry run: 2 file(s) would change; nothing written" in done.stderr
