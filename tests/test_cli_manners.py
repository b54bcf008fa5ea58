"""Terminal manners of the command line: NO_COLOR, --quiet, --verbose, spinners, shell completion, errors with a
title, a location and a hint, a cheap `--help`."""

from __future__ import annotations

import json
import os
import pty
import select
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
RECIPES = HERE / "recipes"
TOY = RECIPES / "fixtures" / "toy-greeting"
ESC = "\x1b"


def specpatch(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "SPECPATCH_RECIPE_PATH": str(RECIPES), **(env or {})}
    for name in ("NO_COLOR", "FORCE_COLOR", "COLUMNS"):
        if name not in (env or {}):
            full_env.pop(name, None)
    return subprocess.run([sys.executable, "-m", "patcher", *args], capture_output=True, text=True, env=full_env,
                          timeout=600)


def in_terminal(*args: str, env: dict) -> tuple[int, str]:
    """Run `python -m patcher ARGS` with stdout and stderr on a pseudo-terminal; its exit code and all it wrote."""
    main, child = pty.openpty()
    full_env = {**os.environ, "SPECPATCH_RECIPE_PATH": str(RECIPES), "TERM": "xterm-256color", **env}
    for name in ("NO_COLOR", "FORCE_COLOR", "COLUMNS"):
        if name not in env:
            full_env.pop(name, None)
    proc = subprocess.Popen([sys.executable, "-m", "patcher", *args], stdin=subprocess.DEVNULL, stdout=child,
                            stderr=child, env=full_env)
    os.close(child)
    chunks, deadline = [], time.monotonic() + 600
    while time.monotonic() < deadline:
        ready, _, _ = select.select([main], [], [], 0.5)
        if ready:
            try:
                data = os.read(main, 65536)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    os.close(main)
    return proc.wait(timeout=60), b"".join(chunks).decode("utf-8", "replace")


@pytest.fixture
def target(tmp_path) -> Path:
    dest = tmp_path / "t"
    shutil.copytree(TOY / "baseline" / "before", dest)
    return dest


# --------------------------------------------------------------------------------------------------- colour


def test_no_color_means_no_escape_sequences_even_when_colour_is_forced(target):
    forced = specpatch("-v", "apply", "toy-greeting", "--target", str(target), "--dry-run",
                       env={"FORCE_COLOR": "1"})
    assert forced.returncode == 0
    assert ESC in forced.stderr  # the test is meaningful: FORCE_COLOR alone colours the output

    for args in (("-v", "apply", "toy-greeting", "--target", str(target), "--dry-run"),
                 ("check", "toy-greeting", "--target", str(target)),
                 ("list",), ("show", "toy-greeting"),
                 ("apply", "no-such-recipe", "--target", str(target))):
        done = specpatch(*args, env={"NO_COLOR": "1", "FORCE_COLOR": "1"})
        assert done.stdout + done.stderr, args
        assert ESC not in done.stdout + done.stderr, args


def test_no_color_on_a_terminal_has_no_escape_sequences_and_no_spinner(target):
    code, shown = in_terminal("apply", "toy-greeting", "--target", str(target), env={"NO_COLOR": "1"})
    assert code == 0, shown
    assert "applied toy-greeting to sglang 0.5.9 (2 file(s)) and verified" in shown
    assert ESC not in shown

    code, shown = in_terminal("rollback", "--target", str(target), env={})
    assert code == 0, shown
    assert ESC in shown  # on a colour terminal, colour


def test_a_terminal_shows_a_spinner_on_stderr_while_verifying(target):
    code, shown = in_terminal("apply", "toy-greeting", "--target", str(target), env={})
    assert code == 0, shown
    assert "applying, then verifying" in shown  # the spinner's message, drawn and then cleared
    assert "\x1b[?25l" in shown  # the cursor is hidden while the spinner runs


def test_try_shows_the_download_then_the_verification(tmp_path):
    """`specpatch try` draws a spinner (with the elapsed time) while the release is fetched, then while it is
    patched and verified. The fetch and the work are stood in for by slow fakes: the test is about the terminal."""
    runner = tmp_path / "run_try.py"
    runner.write_text(textwrap.dedent("""
        import time
        from patcher import api, cli, fetch
        from patcher.errors import FetchError

        def slow_fetch(package, version, *args, **kwargs):
            time.sleep(1.5)

        def slow_try(recipe, version, **kwargs):
            time.sleep(1.5)
            raise FetchError("stand-in: nothing was tried")

        fetch.fetch_release, api.try_recipe = slow_fetch, slow_try
        cli.main()
    """))
    main, child = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "SPECPATCH_RECIPE_PATH": str(RECIPES)}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, str(runner), "try", "toy-greeting", "--version", "0.5.9"],
                            stdin=subprocess.DEVNULL, stdout=child, stderr=child, env=env)
    os.close(child)
    chunks = []
    while True:
        try:
            data = os.read(main, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(main)
    shown = b"".join(chunks).decode("utf-8", "replace")
    assert proc.wait(timeout=60) == 2, shown
    assert "fetching sglang 0.5.9 (pip download, once; then cached)" in shown
    assert "0:00:01" in shown  # the elapsed time
    assert "toy-greeting on a scratch copy of sglang 0.5.9: applying, then verifying" in shown
    assert "stand-in: nothing was tried" in shown


def test_pipes_get_no_spinner_and_no_colour(target):
    done = specpatch("apply", "toy-greeting", "--target", str(target))
    assert done.returncode == 0
    assert ESC not in done.stdout + done.stderr
    assert "verifying" not in done.stderr  # the spinner's message is not printed to logs...
    done = specpatch("-v", "rollback", "--target", str(target))
    assert done.returncode == 0
    done = specpatch("-v", "apply", "toy-greeting", "--target", str(target))
    assert "applying, then verifying (syntax, import smoke test, probes) ..." in done.stderr  # ...unless -v


@pytest.mark.parametrize("args", [("--help",), ("show", "toy-greeting")])
def test_a_reader_that_closes_the_pipe_is_no_bug_in_specpatch(args):
    # hostile round 13 (newcomer 09): `specpatch show | head -1` exited 1, the code of a bug, silently: a
    # `set -o pipefail` CI step failed as if specpatch had crashed
    env = {**os.environ, "SPECPATCH_RECIPE_PATH": str(RECIPES)}
    proc = subprocess.Popen([sys.executable, "-m", "patcher", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    proc.stdout.close()  # closed before the program writes (`| head -0`): every write meets a closed pipe
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 141, (proc.returncode, err)
    assert b"internal error" not in err


# --------------------------------------------------------------------------------------------------- quiet, verbose


def test_quiet_prints_errors_only(target, tmp_path):
    done = specpatch("--quiet", "apply", "toy-greeting", "--target", str(target))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    done = specpatch("-q", "check", "toy-greeting", "--target", str(target))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    done = specpatch("-q", "apply", "toy-greeting", "--target", str(target), "--dry-run", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["outcome"] == "already_applied"  # asked-for JSON stays

    broken = tmp_path / "broken"
    shutil.copytree(TOY / "missing-anchor" / "before", broken)
    done = specpatch("-q", "check", "toy-greeting", "--target", str(broken))
    assert done.returncode == 3 and done.stdout == ""
    assert "Error: anchor not found" in done.stderr and "Help:" in done.stderr
    assert "cannot_apply:" in done.stderr  # a failing result's last line is an error too


def test_verbose_shows_the_steps(target):
    plain = specpatch("apply", "toy-greeting", "--target", str(target), "--dry-run")
    assert "greeting-field" not in plain.stderr
    done = specpatch("--verbose", "apply", "toy-greeting", "--target", str(target), "--dry-run")
    assert done.returncode == 0
    for text in ("operation", "greeting-field", "add_dataclass_field", "greet-method", "util-import", "changed",
                 "what", "add field"):
        assert text in done.stderr
    done = specpatch("-v", "check", "toy-greeting", "--target", str(target))
    assert done.returncode == 7 and "greet-method" in done.stderr
    done = specpatch("-v", "show", "toy-greeting")
    assert f"file: {RECIPES / 'toy-greeting.yaml'}" in done.stdout


# --------------------------------------------------------------------------------------------------- errors


def assert_error(done: subprocess.CompletedProcess, code: int, title: str, *where: str) -> None:
    assert done.returncode == code, done.stderr
    lines = done.stderr.splitlines()
    assert f"Error: {title}" in lines, done.stderr
    for text in where:
        assert text in done.stderr, done.stderr
    assert any(line.startswith("Help: ") and len(line) > 10 for line in lines), done.stderr


def test_a_broken_recipe_names_file_line_and_step(target, tmp_path):
    bad = tmp_path / "toy-typo.yaml"
    shutil.copytree(RECIPES / "toy-greeting", tmp_path / "toy-typo")
    bad.write_text((RECIPES / "toy-greeting.yaml").read_text().replace("id: toy-greeting", "id: toy-typo")
                   .replace("op: add_method", "op: add_methd"))
    done = specpatch("apply", str(bad), "--target", str(target))
    assert_error(done, 2, "invalid recipe", f"{bad}:23 [step 2]", "unknown operation `add_methd`; did you mean "
                 "`add_method`?")


def test_a_missing_anchor_names_recipe_step_file_and_near_candidates(tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(TOY / "missing-anchor" / "before", broken)
    done = specpatch("apply", "toy-greeting", "--target", str(broken))
    assert_error(done, 3, "anchor not found", "sglang/srt/greeter.py [toy-greeting, step 1, add_dataclass_field]",
                 "no field `name` in class `Greeter`", "anchor: Greeter.name")
    assert "cannot apply toy-greeting to sglang 0.5.9: nothing was written" in done.stderr


def test_a_locked_target_exits_6(target):
    from patcher.target import find_target
    from patcher.transaction import target_lock

    with target_lock(find_target(target)):
        started = time.monotonic()
        done = specpatch("apply", "toy-greeting", "--target", str(target), "--lock-timeout", "0.2")
        assert_error(done, 6, "target is locked", str(target / ".specpatch" / "lock"), "gave up after 0.2 s")
        assert time.monotonic() - started < 30
        done = specpatch("verify", "--target", str(target), "--lock-timeout", "0.2", "--json")
        assert done.returncode == 6 and json.loads(done.stdout)["error"]["error"] == "LockTimeout"
        assert specpatch("check", "toy-greeting", "--target", str(target)).returncode == 7  # check takes no lock
    assert specpatch("apply", "toy-greeting", "--target", str(target), "--lock-timeout", "0.2").returncode == 0


def test_an_unknown_recipe_suggests_the_close_one(target):
    done = specpatch("apply", "toy-greting", "--target", str(target))
    assert_error(done, 2, "recipe not found", "[toy-greting]", "did you mean `toy-greeting`?", "specpatch list")
    done = specpatch("check", "toy-greting", "--target", str(target), "--json")
    report = json.loads(done.stdout)
    assert done.returncode == 2 and report == {"ok": False, "exit_code": 2, "error": report["error"]}
    assert report["error"]["error"] == "RecipeNotFound" and report["error"]["hint"]


def test_bad_values_and_targets_are_bad_input(target, tmp_path):
    assert_error(specpatch("apply", "toy-greeting", "--target", str(target), "--param", "greeting"), 2,
                 "bad command-line value", "--param expects NAME=VALUE")
    assert_error(specpatch("apply", "toy-greeting", "--target", str(target), "--param", "greting=hi"), 2,
                 "bad command-line value", "did you mean `greeting`?")
    assert_error(specpatch("check", "toy-greeting", "--target", str(tmp_path / "nowhere")), 2, "unusable target",
                 "is not a folder")
    done = specpatch("apply", "toy-greeting", "--target", str(target), "--format", "html")
    assert done.returncode == 2 and "html" in done.stderr  # typer's own usage error
    for wait in ("nan", "-5"):  # NaN reached filelock and came back as an internal error (exit 1)
        for args in (("apply", "toy-greeting"), ("verify",), ("rollback",)):
            done = specpatch(*args, "--target", str(target), "--lock-timeout", wait)
            assert done.returncode == 2 and "number of seconds" in done.stderr, (args, wait, done.stderr)


@pytest.mark.parametrize("python", ["/no/such/python", "NOT-EXECUTABLE", "/tmp", "no-such-python-command",
                                    "/bin/true", "false"])
def test_an_interpreter_that_cannot_run_is_a_bad_option_not_a_silent_skip(target, tmp_path, python):
    """A mistyped `--python` used to give exit 0, "NOT verified": the smoke test "could not run" in it. So did a
    program that runs but is not Python (/bin/true, false on PATH)."""
    if python == "NOT-EXECUTABLE":
        python = str(tmp_path / "python")
        Path(python).write_text("not a program\n")
    assert specpatch("apply", "toy-greeting", "--target", str(target), "--no-smoke").returncode == 0
    for args in (("verify",), ("apply", "toy-greeting", "--dry-run")):
        done = specpatch(*args, "--target", str(target), "--python", python)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert "--python" in done.stderr and "interpreter" in " ".join(done.stderr.split()), done.stderr


def test_an_internal_error_is_reported_as_a_bug(monkeypatch, capsys):
    from patcher import api, cli

    def boom(*args, **kwargs):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(api, "list_recipes", boom)
    monkeypatch.setenv("NO_COLOR", "1")
    for argv, traceback in ((["specpatch", "list"], False), (["specpatch", "--verbose", "list"], True)):
        monkeypatch.setattr(sys, "argv", argv)
        with pytest.raises(SystemExit) as exit_info:
            cli.main()
        assert exit_info.value.code == 1
        err = capsys.readouterr().err
        assert "Error: internal error (a bug in specpatch)" in err and "RuntimeError: kaboom" in err
        assert ("Traceback (most recent call last)" in err) is traceback
        assert "Help: " in err


# --------------------------------------------------------------------------------------------------- completion, help


def console_script() -> Path:
    script = Path(sys.executable).parent / "specpatch"
    if not script.exists():
        pytest.fail(f"no `specpatch` console script beside {sys.executable}: install specpatch (pip install -e .)")
    return script


def test_shell_completion_script_and_recipe_names():
    script = console_script()
    # typer names the shell it runs under (its parent), whatever follows the flag: run it under bash (the `; exit`
    # keeps bash from exec-ing it, which would make the parent whatever started the tests, `sh` in some CI runners)
    shown = subprocess.run(["bash", "-c", '"$0" --show-completion; exit $?', str(script)], capture_output=True,
                           text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert "_SPECPATCH_COMPLETE=complete_bash" in shown.stdout and "complete " in shown.stdout

    env = {**os.environ, "_SPECPATCH_COMPLETE": "complete_bash", "COMP_WORDS": "specpatch check toy",
           "COMP_CWORD": "2", "SPECPATCH_RECIPE_PATH": str(RECIPES)}
    done = subprocess.run([str(script)], capture_output=True, text=True, env=env, timeout=60)
    assert done.stdout.split() == ["toy-greeting"], done.stderr
    env["COMP_WORDS"], env["COMP_CWORD"] = "specpatch apply t", "2"
    done = subprocess.run([str(script)], capture_output=True, text=True, env=env, timeout=60)
    assert set(done.stdout.split()) == {"toy-greeting"}


def test_help_and_version_are_cheap():
    probe = ("import sys, patcher.cli; heavy = ('rich', 'libcst', 'yaml', 'patcher.model', 'pydantic'); "
             "print([m for m in heavy if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr
    done = specpatch("--version")
    assert done.returncode == 0 and done.stdout.startswith("specpatch ")
    done = specpatch("--help")
    assert done.returncode == 0
    for text in ("--quiet", "--verbose", "--show-completion", "check", "NO_COLOR"):
        assert text in done.stdout


# --------------------------------------------------------------------------------------------------- try --keep

def _toy_release(monkeypatch, calls):
    import patcher.fetch as fetch

    def fake_fetch(package, version, *args, **kwargs):
        calls.append(version)
        return TOY / "baseline" / "before"  # holds sglang/, as the cache's unpacked release does

    monkeypatch.setattr(fetch, "fetch_release", fake_fetch)


def test_try_keep_never_empties_a_folder_that_has_something_in_it(tmp_path, monkeypatch):
    from patcher import api
    from patcher.errors import UsageError

    calls: list = []
    _toy_release(monkeypatch, calls)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("a week of work\n")
    recipe = api.load(str(RECIPES / "toy-greeting.yaml"))
    with pytest.raises(UsageError, match="not an empty folder"):
        api.try_recipe(recipe, "0.5.9", keep=mine)
    assert (mine / "notes.txt").read_text() == "a week of work\n" and calls == []  # refused before the fetch
    done = specpatch("try", "toy-greeting", "--keep", str(mine))
    assert done.returncode == 2 and "not an empty folder" in done.stderr + done.stdout
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]


def test_try_keep_leaves_a_patched_tree_that_rolls_back_to_the_release(tmp_path, monkeypatch):
    from patcher import api
    from patcher.target import find_target

    calls: list = []
    _toy_release(monkeypatch, calls)
    kept = tmp_path / "kept"
    result = api.try_recipe(api.load(str(RECIPES / "toy-greeting.yaml")), "0.5.9", keep=kept)
    assert result.exit_code == 0 and result.folder == kept, result.message
    patched = (kept / "sglang/srt/greeter.py").read_bytes()
    assert patched != (TOY / "baseline/before/sglang/srt/greeter.py").read_bytes()
    # the ledger travelled with the tree: the undo the apply printed works on the kept folder
    assert any(str(kept) in note for note in result.apply.notes)
    api.rollback(find_target(kept, package="sglang"), "toy-greeting")
    for rel in ("sglang/srt/greeter.py", "sglang/srt/util.py"):
        assert (kept / rel).read_bytes() == (TOY / "baseline/before" / rel).read_bytes()


def test_control_characters_of_a_recipe_never_reach_the_terminal_as_themselves(target, tmp_path):
    """A step name, an anchor or a path holding ESC (colour, cursor moves, a window title), a bidirectional override
    or a carriage return is printed with those characters made visible, on a pipe and on a colour terminal alike;
    specpatch's own colours stay."""
    folder = tmp_path / "recipes"
    folder.mkdir()
    (folder / "hostile.yaml").write_text(textwrap.dedent("""\
        id: hostile
        title: control characters in names and anchors
        target: {package: sglang}
        steps:
          - name: "evil\\e[2J\\e[31mRED\\u202e"
            op: add_import
            file: srt/util.py
            code: import os
          - name: two
            op: add_method
            file: srt/greeter.py
            class: Greeter
            after: "shout\\e]0;pwned\\e[1A\\rfake"
            code: "def x(self): pass"
        """))
    env = {"SPECPATCH_RECIPE_PATH": str(folder)}
    done = specpatch("-v", "apply", "hostile", "--target", str(target), env={**env, "NO_COLOR": "1"})
    assert done.returncode == 3, done.stderr
    for shown in (done.stdout + done.stderr, in_terminal("-v", "apply", "hostile", "--target", str(target),
                                                         env=env)[1]):
        assert "\\x1b]0;pwned\\x1b[1A" in shown, shown  # (rich drops a carriage return itself)
        assert "]0;pwned" not in shown.replace("\\x1b]0;pwned", "")
        assert "\x1b[2J" not in shown and "\u202e" not in shown
        assert "\\x1b[2J" in shown, shown  # the step name, made visible
    assert ESC in shown  # the terminal still gets specpatch's own colours


def test_diff_out_is_refused_inside_the_package_and_the_state_folder(target, tmp_path):
    """`--diff-out` over a file the apply had just patched left the tree broken (a diff in place of Python) under an
    apply that said "verified"; over the ledger it destroyed the record. Both are refused before anything is
    written; outside the package (the checkout's root included) the diff is written as before."""
    def files() -> dict[str, bytes]:
        return {p.relative_to(target).as_posix(): p.read_bytes() for p in sorted(target.rglob("*")) if p.is_file()
                and ".specpatch" not in p.parts}

    before = files()
    for out in (target / "sglang" / "srt" / "util.py", target / "sglang" / "x.diff",
                target / ".specpatch" / "ledger.json"):
        for how in ((), ("--dry-run",)):
            done = specpatch("apply", "toy-greeting", "--target", str(target), "--no-smoke", *how,
                             "--diff-out", str(out))
            assert_error(done, 2, "bad command-line value", "--diff-out")
            assert "is inside" in " ".join(done.stderr.split())
            assert files() == before
    done = specpatch("apply", "toy-greeting", "--target", str(target), "--no-smoke", "--diff-out",
                     str(tmp_path / "x.diff"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "x.diff").read_text().startswith("diff --git")
    # hostile round 13 (newcomer 07): a file the diff cannot go to was found after the apply, which stood unreported
    # under "the tree was left whole" (exit 2): it is refused before anything is written
    specpatch("rollback", "--target", str(target))
    before = files()
    for out in (tmp_path / "no" / "such" / "x.diff", tmp_path):
        done = specpatch("apply", "toy-greeting", "--target", str(target), "--no-smoke", "--diff-out", str(out))
        assert_error(done, 2, "bad command-line value", "nothing was applied")
        assert files() == before and not (target / ".specpatch" / "ledger.json").read_text().count("toy-greeting\"")


def test_try_verifies_a_recipe_loaded_from_a_folder_of_its_own(tmp_path, monkeypatch):
    # a newcomer's find: `try NAME --recipe-path DIR` applied, then its verify could not load the recipe by name
    # ("cannot be loaded"): outcome applied_not_verified, exit 0
    import shutil

    from patcher import api

    _toy_release(monkeypatch, [])
    monkeypatch.delenv("SPECPATCH_RECIPE_PATH", raising=False)
    mine = tmp_path / "team"
    mine.mkdir()
    text = (RECIPES / "toy-greeting.yaml").read_text().replace("id: toy-greeting", "id: team-greeting")
    (mine / "team-greeting.yaml").write_text(text)
    if (RECIPES / "toy-greeting").is_dir():
        shutil.copytree(RECIPES / "toy-greeting", mine / "team-greeting")
    result = api.try_recipe(api.load("team-greeting", [mine]), "0.5.9", keep=tmp_path / "kept")
    assert result.outcome == "applied_and_verified", result.message
    # a later `verify` without the folder checks the files, and says where the recipe is found
    from patcher.target import find_target

    [checked] = api.verify(find_target(tmp_path / "kept", package="sglang"), smoke=False).recipes
    assert any("`--recipe-path DIR`" in n for n in checked.notes), checked.notes


def test_every_command_finds_the_package_through_python(target, tmp_path):
    # hostile round 12 (installs): apply and verify took `--package sglang --python S`, rollback, status and check
    # had no --python: an install patched that way could not be rolled back or checked the same way
    python = tmp_path / "serving-python"
    python.write_text(f"#!/bin/sh\nPYTHONPATH={target} exec {sys.executable} \"$@\"\n")
    python.chmod(0o755)
    where = ("--package", "sglang", "--python", str(python))
    assert specpatch("apply", "toy-greeting", *where, "--no-smoke").returncode == 0
    status = specpatch("status", *where)
    assert status.returncode == 0 and "toy-greeting" in status.stdout + status.stderr, status.stderr
    assert specpatch("check", "toy-greeting", *where).returncode == 0
    done = specpatch("rollback", *where)
    assert done.returncode == 0 and "toy-greeting" in done.stdout + done.stderr, done.stderr
    assert not [p for p in (target / ".specpatch").rglob("journal.json")]


def test_the_header_shows_the_variant_description_s_first_sentence_whole():
    # hostile round 13 (02, a newcomer): the header printed the first line of a wrapped YAML paragraph, cut
    # mid-sentence ("... is what a server without")
    from types import SimpleNamespace

    from patcher.report import _variant_description

    wrapped = ("The recipe's steps as they are (written for 0.5.9): a step without speculation is what a server without\n"
               "speculation runs, a DECODE forward. The rest of it.\n")
    shown = _variant_description(SimpleNamespace(variant=SimpleNamespace(description=wrapped)))
    assert shown == ("The recipe's steps as they are (written for 0.5.9): a step without speculation is what a server "
                     "without speculation runs, a DECODE forward.")


def test_a_dry_run_waits_for_an_apply_that_is_running(target):
    # hostile round 15, installs (07): a dry run during another apply exited 6 at once, calling it "interrupted"
    from patcher import engine, transaction
    from patcher.recipe import load_recipe
    from patcher.target import find_target

    t = find_target(target)
    with transaction.target_lock(t) as lock:
        record = transaction.commit(engine.plan(load_recipe(RECIPES / "toy-greeting.yaml"), t), lock, verifying=True)
        started = time.monotonic()
        done = specpatch("apply", "toy-greeting", "--target", str(target), "--dry-run", "--lock-timeout", "0.5")
        assert_error(done, 6, "target is locked", "gave up after 0.5 s")
        assert time.monotonic() - started >= 0.5 and "interrupted" not in done.stderr
        transaction.verified(t, lock)
    done = specpatch("apply", "toy-greeting", "--target", str(target), "--dry-run")
    assert done.returncode == 0 and "already applied" in done.stdout + done.stderr, done.stderr
    assert record is not None


def test_an_interrupt_during_a_rollback_says_the_rollback_finished(target):
    # hostile round 15, installs (03): SIGTERM during a rollback (held until its files are written) exited 143 with
    # the generic line only; it says which way the tree was left
    assert specpatch("apply", "toy-greeting", "--target", str(target)).returncode == 0
    script = ("import os, signal, sys\nimport patcher.transaction as t\n"
              "t._fault = lambda step: os.kill(os.getpid(), signal.SIGTERM) if step == 'rollback:journal-written' "
              "else None\nsys.argv = ['specpatch', 'rollback', '--target', sys.argv[1]]\n"
              "from patcher.cli import main\nmain()\n")
    done = subprocess.run([sys.executable, "-c", script, str(target)], capture_output=True, text=True,
                          env={**os.environ, "SPECPATCH_RECIPE_PATH": str(RECIPES), "NO_COLOR": "1"})
    assert done.returncode == 143, done.stderr
    assert "the rollback of toy-greeting had finished: its files have their original bytes" in done.stderr
    assert "no recipe applied" in specpatch("status", "--target", str(target)).stdout
