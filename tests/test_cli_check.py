"""`specpatch check`, the CI gate, through the real command line: its exit codes on an unpatched, an applied, a
drifted and a broken tree, and on the real sglang 0.5.9.

The hand-made targets are copies of the toy recipe's fixture trees (tests/recipes/fixtures/toy-greeting/*/before:
`sglang/__init__.py`, `_version.py` saying 0.5.9, `srt/greeter.py`, `srt/util.py`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
RECIPES = HERE / "recipes"
TOY = RECIPES / "fixtures" / "toy-greeting"

OK, BAD_INPUT, CANNOT_APPLY, DRIFT, WOULD_CHANGE = 0, 2, 3, 5, 7


def specpatch(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run `python -m patcher ARGS` with the test recipes on the recipe path; no colour, wide tables."""
    full_env = {**os.environ, "NO_COLOR": "1", "SPECPATCH_RECIPE_PATH": str(RECIPES), **(env or {})}
    return subprocess.run([sys.executable, "-m", "patcher", *args], capture_output=True, text=True, env=full_env,
                          timeout=600)


@pytest.fixture
def tree(tmp_path):
    """A fresh copy of a toy fixture's `before/` tree: `tree("baseline")` is the folder holding `sglang/`."""

    def make(case: str = "baseline") -> Path:
        dest = tmp_path / case
        shutil.copytree(TOY / case / "before", dest)
        return dest

    return make


def greeter(target: Path) -> Path:
    return target / "sglang" / "srt" / "greeter.py"


def test_unpatched_tree_would_change_and_check_writes_nothing(tree):
    target = tree()
    before = {p: p.read_bytes() for p in target.rglob("*") if p.is_file()}
    done = specpatch("check", "toy-greeting", "--target", str(target))
    assert done.returncode == WOULD_CHANGE, done.stderr
    assert "would_change: toy-greeting is not applied: 2 file(s) would change" in done.stderr
    assert "+    greeting: str = \"hello\"" in done.stdout  # the diff of what apply would do
    assert {p: p.read_bytes() for p in target.rglob("*") if p.is_file()} == before
    assert not (target / ".specpatch").exists()  # no state folder, no lock file: check writes nothing


def test_applied_tree_is_ok_then_drift_when_edited_by_hand(tree):
    target = tree()
    applied = specpatch("apply", "toy-greeting", "--target", str(target))
    assert applied.returncode == OK, applied.stderr
    assert "applied toy-greeting to sglang 0.5.9 (2 file(s)) and verified" in applied.stderr

    done = specpatch("check", "toy-greeting", "--target", str(target))
    assert done.returncode == OK, done.stderr
    assert "applied: toy-greeting is applied and intact" in done.stderr
    assert done.stdout == ""

    # a reformatting by hand keeps the edits but changes the file: drift
    path = greeter(target)
    path.write_text(path.read_text() + "\n# local note\n")
    done = specpatch("check", "toy-greeting", "--target", str(target))
    assert done.returncode == DRIFT, done.stderr
    assert "drift: toy-greeting was applied, but files changed since: sglang/srt/greeter.py (edits still present)" \
        in done.stderr
    assert "modified" in done.stderr  # the table of file states

    # the edits removed by hand (and something else changed): drift too
    original = (TOY / "baseline" / "before" / "sglang" / "srt" / "greeter.py").read_text()
    path.write_text(original.replace('"!"', '"?"'))
    done = specpatch("check", "toy-greeting", "--target", str(target), "--json")
    assert done.returncode == DRIFT
    report = json.loads(done.stdout)
    assert report["state"] == "drift" and report["exit_code"] == DRIFT and not report["ok"]
    assert {f["file"]: f["state"] for f in report["files"]} == {"sglang/srt/greeter.py": "modified",
                                                               "sglang/srt/util.py": "intact"}
    assert "edits gone or changed" in report["message"]


def test_a_mode_changed_since_apply_is_drift_for_check_verify_and_rollback_alike(tree):
    # found by a hostile round: after `chmod` of a patched file check and verify said "intact" (exit 0) while
    # rollback refused it as a local change (exit 5): the mode is part of what rollback restores
    target = tree()
    assert specpatch("apply", "toy-greeting", "--target", str(target), "--no-smoke").returncode == OK
    path = greeter(target)
    mode = path.stat().st_mode & 0o7777
    path.chmod(mode | 0o111)
    done = specpatch("check", "toy-greeting", "--target", str(target))
    assert done.returncode == DRIFT, done.stderr
    assert f"sglang/srt/greeter.py (mode {mode:04o} -> {mode | 0o111:04o})" in done.stderr
    done = specpatch("verify", "--target", str(target), "--no-smoke")
    assert done.returncode == DRIFT, done.stdout + done.stderr
    done = specpatch("rollback", "--target", str(target))
    assert done.returncode == DRIFT and "nothing was rolled back" in done.stderr, done.stderr
    path.chmod(mode)
    assert specpatch("check", "toy-greeting", "--target", str(target)).returncode == OK
    assert specpatch("verify", "--target", str(target), "--no-smoke").returncode == OK


def test_a_reinstalled_package_would_change_and_apply_patches_it_again(tree):
    """`pip install --force-reinstall` puts the original files back: not drift, just not applied any more."""
    target = tree()
    assert specpatch("apply", "toy-greeting", "--target", str(target), "--no-smoke").returncode == OK
    shutil.copytree(TOY / "baseline" / "before" / "sglang", target / "sglang", dirs_exist_ok=True)
    done = specpatch("check", "toy-greeting", "--target", str(target))
    assert done.returncode == WOULD_CHANGE, done.stderr
    assert "the original bytes are back in sglang/srt/greeter.py, sglang/srt/util.py (a reinstall?): 2 file(s) " \
        "would change" in done.stderr
    assert specpatch("apply", "toy-greeting", "--target", str(target), "--no-smoke").returncode == OK
    assert specpatch("check", "toy-greeting", "--target", str(target)).returncode == OK


def test_an_upgraded_package_is_judged_by_its_new_release(tree, tmp_path):
    """The ledger speaks of 0.5.9, the package is now 0.5.10 with new files: would change (7), not drift."""
    target = tree()
    wide = tmp_path / "wide"
    shutil.copytree(RECIPES / "toy-greeting", wide / "toy-greeting")
    (wide / "toy-greeting.yaml").write_text((RECIPES / "toy-greeting.yaml").read_text().replace(
        'versions: "==0.5.9"', 'versions: ">=0.5.9,<0.6"'))
    env = {"SPECPATCH_RECIPE_PATH": str(wide)}
    assert specpatch("apply", "toy-greeting", "--target", str(target), "--no-smoke", env=env).returncode == OK

    shutil.copytree(TOY / "baseline" / "before" / "sglang", target / "sglang", dirs_exist_ok=True)  # the upgrade
    (target / "sglang" / "_version.py").write_text('__version__ = "0.5.10"\n')
    greeter(target).write_text(greeter(target).read_text().replace('"""A toy', '"""Release 0.5.10: a toy'))
    done = specpatch("check", "toy-greeting", "--target", str(target), env=env)
    assert done.returncode == WOULD_CHANGE, done.stderr
    assert "(it was applied to sglang 0.5.9; the target is now 0.5.10)" in done.stderr
    assert specpatch("apply", "toy-greeting", "--target", str(target), "--no-smoke", env=env).returncode == OK
    assert specpatch("check", "toy-greeting", "--target", str(target), env=env).returncode == OK


def test_broken_tree_cannot_apply(tree):
    target = tree("missing-anchor")
    done = specpatch("check", "toy-greeting", "--target", str(target))
    assert done.returncode == CANNOT_APPLY, done.stderr
    assert "Error: anchor not found" in done.stderr
    assert "sglang/srt/greeter.py [toy-greeting, step 1, add_dataclass_field]" in done.stderr
    assert "Help:" in done.stderr
    assert "cannot_apply: toy-greeting is not applied and cannot apply" in done.stderr
    assert done.stdout == ""  # no diff of a plan that will not be written


def test_target_file_with_a_syntax_error_is_bad_input(tree):
    target = tree()
    greeter(target).write_text("class Greeter(:\n")
    done = specpatch("check", "toy-greeting", "--target", str(target))
    assert done.returncode == BAD_INPUT, done.stderr
    assert "Error: target file does not parse" in done.stderr


def test_release_outside_the_recipe_cannot_apply(tree):
    target = tree()
    done = specpatch("check", "toy-greeting", "--target", str(target), "--assume-version", "0.5.8")
    assert done.returncode == CANNOT_APPLY, done.stderr
    assert "Error: release not supported by this recipe" in done.stderr


def test_check_uses_the_parameters_recorded_at_apply(tree):
    """Applied with --param, the recipe is intact: check must not compare it with the defaults."""
    target = tree()
    assert specpatch("apply", "toy-greeting", "--target", str(target), "--no-smoke",
                     "--param", "greeting=good morning").returncode == OK
    done = specpatch("check", "toy-greeting", "--target", str(target))
    assert done.returncode == OK, done.stderr
    done = specpatch("check", "toy-greeting", "--target", str(target), "--param", "greeting=good morning")
    assert done.returncode == OK, done.stderr



def test_other_parameter_values_than_the_applied_ones_say_rollback_then_apply(tree):
    """Hostile round 12 (a newcomer): apply again with another --param was "conflicting definition ... roll back the
    other recipe" (there was no other recipe), and check said the same."""
    target = tree()
    assert specpatch("apply", "toy-greeting", "--target", str(target), "--no-smoke").returncode == OK
    before = {p: p.read_bytes() for p in target.rglob("*.py")}
    for command in (("apply", "--no-smoke"), ("apply", "--dry-run"), ("check",)):
        done = specpatch(command[0], "toy-greeting", "--target", str(target), *command[1:],
                         "--param", "greeting=good morning")
        assert done.returncode == CANNOT_APPLY, (command, done.stderr)
        assert "toy-greeting is applied with greeting=" in done.stderr and "not greeting='good morning'" in \
            done.stderr and "specpatch rollback toy-greeting" in done.stderr, (command, done.stderr)
    assert {p: p.read_bytes() for p in target.rglob("*.py")} == before


def test_edits_present_without_a_ledger_count_as_applied(tree):
    """A tree patched by another tool (or an older specpatch without state) is applied: the gate passes."""
    target = tree()
    for rel in ("sglang/srt/greeter.py", "sglang/srt/util.py"):
        shutil.copyfile(TOY / "baseline" / "after" / rel, target / rel)
    done = specpatch("check", "toy-greeting", "--target", str(target))
    assert done.returncode == OK, done.stderr
    assert "not recorded by specpatch" in done.stderr


def test_an_apply_running_now_is_locked_not_drift(tree, tmp_path):
    """`check` during a live apply (here paused after its journal, holding the lock): exit 6, "in progress", and
    `status` does not promise a recovery of a transaction that is still running (found by a hostile round: exit 5
    and "the next command will recover it")."""
    target = tree()
    go, paused = tmp_path / "go", tmp_path / "paused"
    slow = textwrap.dedent(f"""
        import time
        from pathlib import Path
        from patcher import api, transaction
        from patcher.recipe import load_recipe
        from patcher.target import find_target

        def hook(step):
            if step == "apply:journal-written":
                Path({str(paused)!r}).touch()
                while not Path({str(go)!r}).exists():
                    time.sleep(0.05)
        transaction._fault = hook
        api.apply_recipe(load_recipe("toy-greeting", [Path({str(RECIPES)!r})]), find_target(Path({str(target)!r})),
                         smoke=False)
    """)
    apply = subprocess.Popen([sys.executable, "-c", slow])
    try:
        for _ in range(1200):
            if paused.exists() or apply.poll() is not None:
                break
            import time
            time.sleep(0.05)
        assert paused.exists(), "the apply did not reach its journal"
        done = specpatch("check", "toy-greeting", "--target", str(target))
        assert done.returncode == 6, done.stderr
        assert "in progress" in done.stderr and f"pid {apply.pid}" in done.stderr
        status = specpatch("status", "--target", str(target))
        assert "in progress" in status.stderr and "will recover" not in status.stderr, status.stderr
        # hostile round 12 (installs): a dry run meanwhile said "an interrupted transaction is pending", exit 5;
        # round 15 (07): it waits for the running one, as a writing command would, up to --lock-timeout
        dry = specpatch("apply", "toy-greeting", "--target", str(target), "--dry-run", "--lock-timeout", "0.5")
        assert dry.returncode == 6 and "gave up after 0.5 s" in dry.stderr, dry.stderr
        assert "interrupted" not in dry.stderr
    finally:
        go.touch()
        assert apply.wait(timeout=120) == 0
    done = specpatch("check", "toy-greeting", "--target", str(target))
    assert done.returncode == OK, done.stderr


def test_an_interrupted_apply_is_reported_not_recovered(tree):
    """A crash between the journal and the ledger: check says so (DRIFT) and leaves the recovery to apply."""
    target = tree()
    crash = textwrap.dedent(f"""
        import os
        from pathlib import Path
        from patcher import api, transaction
        from patcher.recipe import load_recipe
        from patcher.target import find_target
        transaction._fault = lambda step: os._exit(9) if step == "apply:journal-written" else None
        api.apply_recipe(load_recipe("toy-greeting", [Path({str(RECIPES)!r})]), find_target(Path({str(target)!r})),
                         smoke=False)
    """)
    assert subprocess.run([sys.executable, "-c", crash], timeout=120).returncode == 9
    done = specpatch("check", "toy-greeting", "--target", str(target))
    assert done.returncode == DRIFT, done.stderr
    assert "unfinished: an interrupted apply of toy-greeting" in done.stderr
    assert (target / ".specpatch" / "journal.json").exists()  # untouched by check

    again = specpatch("apply", "toy-greeting", "--target", str(target), "--no-smoke")
    assert again.returncode == OK, again.stderr
    assert "recovered:" in again.stderr
    assert specpatch("check", "toy-greeting", "--target", str(target)).returncode == OK


def test_stacked_recipes_are_judged_by_the_last_writer(tree, tmp_path):
    """A second recipe that changes the same file is not drift of the first."""
    target = tree()
    second = tmp_path / "more" / "toy-farewell.yaml"
    second.parent.mkdir()
    second.write_text(textwrap.dedent("""\
        id: toy-farewell
        title: a second recipe on the same file
        target: {package: sglang, versions: "==0.5.9"}
        steps:
          - op: add_method
            file: srt/greeter.py
            class: Greeter
            code: |
              def farewell(self) -> str:
                  return "bye, " + self.name
    """))
    assert specpatch("apply", "toy-greeting", "--target", str(target), "--no-smoke").returncode == OK
    assert specpatch("apply", str(second), "--target", str(target), "--no-smoke").returncode == OK
    done = specpatch("check", "toy-greeting", "--target", str(target), "--json")
    assert done.returncode == OK, done.stdout
    files = {f["file"]: f for f in json.loads(done.stdout)["files"]}
    assert files["sglang/srt/greeter.py"]["state"] == "intact"
    assert files["sglang/srt/greeter.py"]["last_written_by"] == "toy-farewell"
    # verify judges the first recipe's files by their last writer too (it said "changed since apply": exit 5)
    done = specpatch("verify", "--target", str(target), "--no-smoke", "--recipe-path", str(second.parent))
    assert done.returncode == OK, done.stdout + done.stderr


def test_a_recipe_applied_twice_is_judged_on_every_entry(tree):
    # a hostile round: a second apply over a partial reinstall records a second entry (the file it wrote again);
    # check judged that entry alone and called a hand edit of a file only the first recorded "applied and intact"
    target = tree()
    assert specpatch("apply", "toy-greeting", "--target", str(target), "--no-smoke").returncode == OK
    shutil.copyfile(TOY / "baseline" / "before" / "sglang" / "srt" / "util.py", target / "sglang/srt/util.py")
    assert specpatch("apply", "toy-greeting", "--target", str(target), "--no-smoke").returncode == OK
    assert specpatch("check", "toy-greeting", "--target", str(target)).returncode == OK
    path = greeter(target)
    path.write_text(path.read_text() + "# hand edit\n")
    for verb in ("check", "verify"):
        args = (verb, "toy-greeting", "--target", str(target)) + (("--no-smoke",) if verb == "verify" else ())
        done = specpatch(*args)
        assert done.returncode == DRIFT and "greeter.py" in done.stdout + done.stderr, (verb, done.stderr)


@pytest.mark.sglang
def test_check_on_the_real_release(sglang_release, tmp_path):
    """sglang 0.5.9 from the registry: pristine would change (7), applied is 0, a hand edit is drift (5)."""
    target = tmp_path / "site-packages"
    shutil.copytree(sglang_release("0.5.9"), target, ignore=shutil.ignore_patterns("__pycache__"))
    done = specpatch("check", "dynamic-spec-disable", "--target", str(target), "--json")
    assert done.returncode == WOULD_CHANGE, done.stderr
    report = json.loads(done.stdout)
    assert report["state"] == "would_change"
    assert "+    speculative_disable_batch_threshold: int = 0" in report["diff"]

    assert specpatch("apply", "dynamic-spec-disable", "--target", str(target), "--no-smoke").returncode == OK
    done = specpatch("check", "dynamic-spec-disable", "--target", str(target))
    assert done.returncode == OK, done.stderr

    server_args = target / "sglang" / "srt" / "server_args.py"
    server_args.write_bytes(server_args.read_bytes().replace(b"speculative_disable_batch_threshold: int = 0",
                                                             b"speculative_disable_batch_threshold: int = 4"))
    done = specpatch("check", "dynamic-spec-disable", "--target", str(target))
    assert done.returncode == DRIFT, done.stderr
    assert "sglang/srt/server_args.py" in done.stderr


def test_check_answers_from_one_table():
    """`check` is `api.CHECK_RULES`, first match wins: every state is a row, the last row always holds."""
    from patcher import api
    from patcher.results import CheckState

    assert {r.state for r in api.CHECK_RULES} == set(CheckState)
    assert api.CHECK_RULES[-1].when(None) is True
    assert api.CHECK_RULES[0].state is CheckState.UNFINISHED  # an interrupted transaction trumps every other answer
