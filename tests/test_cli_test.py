"""Recipe tests for everyone: `specpatch test [--update]`, the pytest plugin on a team's own recipe folder, the worked
example of docs/writing-recipes.md (shipped as tests/recipes/request-tenant-label) and `specpatch schema`."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RECIPES = HERE / "recipes"
TEAM_FIXTURES = RECIPES / "fixtures"
SHIPPED_FIXTURES = ROOT / "fixtures"


def specpatch(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "NO_COLOR": "1", **(env or {})}
    full_env.pop("SPECPATCH_RECIPE_PATH", None)
    return subprocess.run([sys.executable, "-m", "patcher", *args], capture_output=True, text=True, env=full_env,
                          cwd=cwd, timeout=600)


# --------------------------------------------------------------------------------------------------- specpatch test


def test_shipped_recipes_pass_their_fixture_cases():
    done = specpatch("test")
    assert done.returncode == 0, done.stdout + done.stderr
    cases = sorted(p.parent.name for p in SHIPPED_FIXTURES.glob("*/*/before"))
    assert cases and len(re.findall(r"^PASS ", done.stdout, re.M)) == len(cases)
    assert f"{len(cases)} passed, 0 failed" in done.stderr


@pytest.fixture
def shipped_copy(tmp_path) -> Path:
    dest = tmp_path / "fixtures"
    shutil.copytree(SHIPPED_FIXTURES, dest)
    return dest


def test_a_fixture_broken_on_purpose_fails_and_is_named(shipped_copy):
    after = shipped_copy / "dynamic-spec-disable" / "baseline" / "after" / "sglang" / "srt" / "server_args.py"
    after.write_bytes(after.read_bytes().replace(b"speculative_disable_batch_threshold: int = 0",
                                                 b"speculative_disable_batch_threshold: int = 1"))
    done = specpatch("test", "--fixtures", str(shipped_copy))
    assert done.returncode == 4
    assert "FAIL dynamic-spec-disable/baseline: result differs from after/" in done.stdout
    assert "-    speculative_disable_batch_threshold: int = 1\n+    speculative_disable_batch_threshold: int = 0" \
        in done.stdout  # the difference, as a diff from the expected to the actual result
    assert "PASS dynamic-spec-disable/crlf" in done.stdout  # the others still run
    assert "1 failed" in done.stderr

    # --quiet keeps the failure (and only it)
    quiet = specpatch("--quiet", "test", "dynamic-spec-disable", "--fixtures", str(shipped_copy))
    assert quiet.returncode == 4
    assert "FAIL dynamic-spec-disable/baseline" in quiet.stdout and "PASS" not in quiet.stdout


def test_a_wrong_expected_error_fails(shipped_copy):
    expect = shipped_copy / "dynamic-spec-disable" / "missing-anchor" / "expect.yaml"
    expect.write_text(expect.read_text().replace("step: 3", "step: 1"))
    done = specpatch("test", "dynamic-spec-disable", "--fixtures", str(shipped_copy))
    assert done.returncode == 4
    assert "FAIL dynamic-spec-disable/missing-anchor: step 3 != 1" in done.stdout


def test_a_case_file_with_a_typo_is_bad_input(shipped_copy):
    case = shipped_copy / "dynamic-spec-disable" / "params" / "case.yaml"
    case.write_text(case.read_text().replace("params:", "parameters:"))
    done = specpatch("test", "dynamic-spec-disable", "--fixtures", str(shipped_copy))
    assert done.returncode == 2  # the case was not run as written: bad input, not a recipe that fails its fixtures
    assert "FAIL dynamic-spec-disable/params: bad case file" in done.stdout
    assert "unknown key(s) parameters in case.yaml" in done.stdout
    assert "1 could not be run as written" in done.stdout + done.stderr


def test_update_rewrites_after_for_review(shipped_copy):
    baseline = shipped_copy / "dynamic-spec-disable" / "baseline"
    after = baseline / "after" / "sglang" / "srt" / "server_args.py"
    good = after.read_bytes()
    after.write_bytes(good.replace(b"int = 0", b"int = 1", 1))
    (baseline / "after" / "stray.txt").write_text("left over")
    done = specpatch("test", "dynamic-spec-disable", "--fixtures", str(shipped_copy), "--update")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "UPDATED dynamic-spec-disable/baseline: after/ rewritten" in done.stdout
    assert "after/ rewritten for 1 case(s): review with `git diff`" in done.stderr
    assert after.read_bytes() == good
    assert not (baseline / "after" / "stray.txt").exists()
    again = specpatch("test", "dynamic-spec-disable", "--fixtures", str(shipped_copy))
    assert again.returncode == 0 and "UPDATED" not in again.stdout


def test_update_never_writes_through_a_linked_after(shipped_copy, tmp_path):
    baseline = shipped_copy / "dynamic-spec-disable" / "baseline"
    elsewhere = tmp_path / "elsewhere"
    shutil.move(baseline / "after", elsewhere)
    (baseline / "after").symlink_to(elsewhere, target_is_directory=True)
    server_args = elsewhere / "sglang" / "srt" / "server_args.py"
    server_args.write_bytes(server_args.read_bytes().replace(b"int = 0", b"int = 1", 1))
    before = {p: p.read_bytes() for p in elsewhere.rglob("*") if p.is_file()}
    done = specpatch("test", "dynamic-spec-disable", "--fixtures", str(shipped_copy), "--update")
    assert done.returncode == 2, done.stdout + done.stderr  # bad input (was exit 1, a traceback: rmtree on a link)
    assert "FAIL dynamic-spec-disable/baseline: after/ not rewritten" in done.stdout
    assert "is a link: --update writes a folder of its own there" in " ".join(done.stdout.split())
    assert "Traceback" not in done.stderr
    assert (baseline / "after").is_symlink()
    assert {p: p.read_bytes() for p in elsewhere.rglob("*") if p.is_file()} == before
    assert not list(baseline.glob("after.specpatch-*"))


@pytest.mark.parametrize("case_yaml, says", [
    (b'params: "x"\n', "`params` must be a mapping"),
    (b"description: caf\xff\n", "cannot read case.yaml"),
    (b'assume_version: "garbage"\n', "cannot plan"),
])
def test_a_case_file_that_cannot_be_used_is_bad_input_not_a_crash(shipped_copy, case_yaml, says):
    (shipped_copy / "dynamic-spec-disable" / "params" / "case.yaml").write_bytes(case_yaml)
    done = specpatch("test", "dynamic-spec-disable", "--fixtures", str(shipped_copy))
    assert done.returncode == 2, done.stdout + done.stderr  # was exit 1 (AttributeError, UnicodeDecodeError) or 4
    assert says in " ".join(done.stdout.split()) and "Traceback" not in done.stderr


def test_no_cases_is_an_error(tmp_path):
    done = specpatch("test", "--fixtures", str(tmp_path))
    assert done.returncode == 2
    assert "no fixture cases found under" in done.stderr


def test_team_recipes_and_fixtures_run_through_the_recipe_path():
    done = specpatch("test", "--fixtures", str(TEAM_FIXTURES), "--recipe-path", str(RECIPES))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS request-tenant-label/baseline: ok" in done.stdout
    assert "PASS toy-greeting/missing-anchor: fails as expected: anchor not found" in done.stdout
    env = specpatch("test", "toy-greeting", "--fixtures", str(TEAM_FIXTURES), env={})
    assert env.returncode == 2  # without the recipe path the recipe is not found (bad input), and each case says so
    assert "FAIL toy-greeting/baseline: cannot load recipe `toy-greeting`: recipe not found" in env.stdout


def test_recipes_of_another_checkout_are_tested_against_its_own_fixtures(tmp_path):
    # a newcomer's round: `specpatch test NAME --recipe-path CLONE/recipes` ran the clone's recipe on the shipped
    # cases, and `--update` would have rewritten them from another tree's recipe
    clone = tmp_path / "clone"
    shutil.copytree(RECIPES, clone / "recipes", ignore=shutil.ignore_patterns("fixtures"))
    shutil.copytree(TEAM_FIXTURES, clone / "fixtures")
    done = specpatch("test", "toy-greeting", "--recipe-path", str(clone / "recipes"))
    assert done.returncode == 0 and "PASS toy-greeting/baseline: ok" in done.stdout, done.stdout + done.stderr
    # hostile round 12 (a newcomer): the layout docs/writing-recipes.md shows, `fixtures/` inside the recipe folder,
    # was not looked at (the shipped cases were run instead: exit 2)
    shutil.move(str(clone / "fixtures"), str(clone / "recipes" / "fixtures"))
    done = specpatch("test", "toy-greeting", "--recipe-path", str(clone / "recipes"))
    assert done.returncode == 0 and "PASS toy-greeting/baseline: ok" in done.stdout, done.stdout + done.stderr
    shutil.move(str(clone / "recipes" / "fixtures"), str(clone / "fixtures"))
    # without a fixtures folder in or beside it, --update refuses to touch the shipped cases
    shutil.rmtree(clone / "fixtures")
    done = specpatch("test", "toy-greeting", "--update", "--recipe-path", str(clone / "recipes"))
    assert done.returncode == 2 and "pass --fixtures DIR" in done.stderr, done.stdout + done.stderr


# --------------------------------------------------------------------------------------------------- pytest plugin


def run_pytest(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "SPECPATCH_RECIPE"))}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "patcher.pytest_plugin", "-p", "no:cacheprovider",
                           "-p", "no:xdist", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=600)


def test_pytest_plugin_turns_a_team_folder_into_tests(tmp_path):
    team = tmp_path / "team"
    shutil.copytree(RECIPES, team / "recipes", ignore=shutil.ignore_patterns("fixtures", "__pycache__"))
    shutil.copytree(TEAM_FIXTURES / "toy-greeting", team / "fixtures" / "toy-greeting")
    args = ("--specpatch-fixtures", str(team / "fixtures"), "--specpatch-recipes", str(team / "recipes"), "-v",
            "-rA")
    done = run_pytest(*args, cwd=team)
    assert done.returncode == 0, done.stdout + done.stderr
    for case in ("baseline", "missing-anchor", "params"):
        assert f"specpatch::toy-greeting/{case} PASSED" in done.stdout
    assert "3 passed" in done.stdout

    after = team / "fixtures" / "toy-greeting" / "params" / "after" / "sglang" / "srt" / "greeter.py"
    after.write_text(after.read_text().replace("good morning", "good evening"))
    done = run_pytest(*args, cwd=team)
    assert done.returncode == 1
    assert "specpatch::toy-greeting/params FAILED" in done.stdout
    assert "toy-greeting/params: result differs from after/" in done.stdout
    assert '-    greeting: str = "good evening"' in done.stdout
    assert "1 failed, 2 passed" in done.stdout

    # -k selects cases too; the ini option works like the command-line one
    (team / "pytest.ini").write_text(f"[pytest]\nspecpatch_fixtures = fixtures\nspecpatch_recipes = recipes\n")
    done = run_pytest("-k", "baseline", cwd=team)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed, 2 deselected" in done.stdout


# --------------------------------------------------------------------------------------------------- worked example


DOC = ROOT / "docs" / "writing-recipes.md"
EXAMPLE = RECIPES / "request-tenant-label.yaml"


def test_the_docs_show_the_shipped_example_verbatim():
    """docs/writing-recipes.md walks through tests/recipes/request-tenant-label: its code blocks are those files."""
    doc = DOC.read_text()
    blocks = re.findall(r"^```(\w*)\n(.*?)^```$", doc, re.M | re.S)
    bodies = [body for _, body in blocks]
    assert EXAMPLE.read_text() in bodies
    assert (RECIPES / "request-tenant-label" / "apply_tenant_label.py").read_text() in bodies
    assert (RECIPES / "request-tenant-label" / "probes" / "tenant_probe.py").read_text() in bodies
    for command in ("specpatch test", "specpatch apply", "--dry-run", "specpatch schema",
                    "yaml-language-server: $schema="):
        assert command in doc


@pytest.mark.sglang
def test_worked_example_plans_on_the_real_release(sglang_release, tmp_path):
    """The example recipe against sglang 0.5.9's own io_struct.py: every step changes it, nothing is written."""
    target = tmp_path / "site-packages"
    shutil.copytree(sglang_release("0.5.9"), target, ignore=shutil.ignore_patterns("__pycache__"))
    done = specpatch("apply", "request-tenant-label", "--recipe-path", str(RECIPES), "--target", str(target),
                     "--dry-run", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["outcome"] == "would_change"
    assert [(s["name"], s["status"]) for s in report["steps"]] == [
        ("tenant-field", "changed"), ("tenant-label-method", "changed"), ("tenant-label-call", "changed")]
    assert report["files"] == [{"file": "sglang/srt/managers/io_struct.py", "changed": True}]
    diff = report["diff"]
    assert "     custom_labels: Optional[Dict[str, str]] = None\n+    tenant: Optional[str] = None\n" in diff
    assert "         self._validate_inputs()\n+        self._apply_tenant_label()\n" in diff
    assert '+        self.custom_labels = {**(self.custom_labels or {}), "tenant": self.tenant}\n' in diff
    assert not (target / ".specpatch").exists()


@pytest.mark.sglang
@pytest.mark.cpuenv
def test_worked_example_applies_and_its_probe_passes(sglang_release, cpuenv_python, tmp_path):
    """Applied for real in the CPU environment: the import smoke test and the example's probe pass."""
    target = tmp_path / "site-packages"
    shutil.copytree(sglang_release("0.5.9"), target, ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run([cpuenv_python, "-m", "patcher", "apply", "request-tenant-label", "--recipe-path",
                           str(RECIPES), "--target", str(target), "--json"], capture_output=True, text=True,
                          timeout=900, env={**os.environ, "NO_COLOR": "1"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    checks = {c["name"]: c["status"] for c in json.loads(done.stdout)["checks"]}
    assert checks == {"sglang/srt/managers/io_struct.py": "passed", "sglang.srt.managers.io_struct": "passed",
                      "tenant-label": "passed"}


# --------------------------------------------------------------------------------------------------- schema


def _step_defs(schema: dict) -> dict[str, dict]:
    return {d["properties"]["op"]["const"]: d for d in schema["$defs"].values() if "op" in d.get("properties", {})}


def _problems(obj: dict, definition: dict) -> list[str]:
    """The part of JSON Schema validation an editor does on a step or a recipe: unknown keys, missing keys."""
    props, out = definition["properties"], []
    out += [f"unknown key {k}" for k in obj if k not in props and definition.get("additionalProperties") is False]
    out += [f"missing {k}" for k in definition.get("required", []) if k not in obj]
    for rule in definition.get("allOf", []):
        if sum(all(k in obj for k in alt["required"]) for alt in rule["oneOf"]) != 1:
            out.append(f"needs exactly one of {[alt['required'][0] for alt in rule['oneOf']]}")
    return out


def test_schema_accepts_the_recipes_as_written():
    """Editors validate recipe files as they are written, `code_file:` and `variants_file:` included."""
    done = specpatch("schema")
    assert done.returncode == 0
    schema = json.loads(done.stdout)
    assert schema["$schema"].startswith("https://json-schema.org/")
    steps = _step_defs(schema)
    assert set(steps) == {"add_argparse_argument", "add_branch", "add_dataclass_field", "add_import", "add_method",
                          "insert_statements", "replace_statements", "replace_expression", "add_keyword_argument",
                          "add_element", "add_parameter", "add_definition", "replace_leading_comments",
                          "unexpressed_hunk"}
    recipes = [EXAMPLE, RECIPES / "toy-greeting.yaml", *sorted((ROOT / "recipes").glob("*.yaml"))]
    for path in recipes:
        data = yaml.safe_load(path.read_text())
        assert _problems(data, schema) == [], path
        for step in data.get("steps", []):
            assert _problems(step, steps[step["op"]]) == [], (path, step)
    bad = {"op": "add_method", "file": "x.py", "class": "C", "code": "def f(self): pass", "code_file": "f.py",
           "afterr": "g"}
    assert _problems(bad, steps["add_method"]) == ["unknown key afterr", "needs exactly one of ['code', 'code_file']"]


def test_schema_modeline_names_a_schema_the_example_validates_against(tmp_path):
    first = EXAMPLE.read_text().splitlines()[0]
    assert first == "# yaml-language-server: $schema=specpatch.schema.json"
    (tmp_path / "specpatch.schema.json").write_text(specpatch("schema").stdout)
    shutil.copy(EXAMPLE, tmp_path)
    shutil.copytree(RECIPES / "request-tenant-label", tmp_path / "request-tenant-label")
    done = specpatch("show", str(tmp_path / "request-tenant-label.yaml"))
    assert done.returncode == 0, done.stderr
    assert "request-tenant-label (v1): A `tenant` field on generate requests" in done.stdout
