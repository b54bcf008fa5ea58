"""End to end on the real sglang 0.5.9 wheel from the registry, through the command line, as a user runs it."""

from __future__ import annotations

import ast
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.sglang

SPEC = [sys.executable, "-m", "patcher"]
REPO = Path(__file__).resolve().parent.parent


def run(*args: str, cwd: Path | None = None, check: bool = False) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    done = subprocess.run([*SPEC, *args], capture_output=True, text=True, cwd=cwd or REPO, env=env, timeout=900)
    if check and done.returncode != 0:
        raise AssertionError(f"specpatch {' '.join(args)} -> {done.returncode}\n{done.stdout}\n{done.stderr}")
    return done


def tree_hash(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file() and ".specpatch" not in p.parts and "__pycache__" not in p.parts and ".git" not in p.parts:
            h.update(p.relative_to(root).as_posix().encode())
            h.update(oct(p.stat().st_mode).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


@pytest.fixture
def checkout(tmp_path, sglang_release) -> Path:
    """A checkout-layout copy (T/python/sglang) of the pristine 0.5.9 wheel, committed in a git repository."""
    root = tmp_path / "sglang"
    shutil.copytree(sglang_release("0.5.9") / "sglang", root / "python" / "sglang")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "0.5.9"], cwd=root,
                   check=True)
    return root


def add_cli_args_statements(source: str) -> list[ast.stmt]:
    tree = ast.parse(source)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ServerArgs")
    fn = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "add_cli_args")
    return fn.body


def flag_of(stmt: ast.stmt) -> str | None:
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and stmt.value.args:
        first = stmt.value.args[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return first.value
    return None


def test_dry_run_writes_nothing_and_git_apply_accepts_the_diff(checkout, tmp_path):
    before = tree_hash(checkout)
    done = run("apply", "dynamic-spec-disable", "--target", str(checkout), "--dry-run",
               "--diff-out", str(tmp_path / "out.diff"), check=True)
    assert tree_hash(checkout) == before and not (checkout / ".specpatch").exists()
    assert done.stdout.startswith("diff --git a/python/sglang/srt/")
    assert (tmp_path / "out.diff").read_text() == done.stdout
    subprocess.run(["git", "apply", "--check", str(tmp_path / "out.diff")], cwd=checkout, check=True)

    # the diff applied by git gives byte-identical files to a real apply
    twin = tmp_path / "twin"
    shutil.copytree(checkout, twin, symlinks=True)
    subprocess.run(["git", "apply", str(tmp_path / "out.diff")], cwd=twin, check=True)
    run("apply", "dynamic-spec-disable", "--target", str(checkout), "--no-smoke", check=True)
    assert tree_hash(twin) == tree_hash(checkout)


def test_apply_places_field_and_flag_and_second_apply_is_a_noop(checkout):
    pristine = (checkout / "python/sglang/srt/server_args.py").read_text()
    done = run("apply", "dynamic-spec-disable", "--target", str(checkout), "--no-smoke", "--json")
    assert done.returncode == 0, done.stderr
    patched_files = [p for p in (checkout / "python/sglang").rglob("*.py")]
    for path in patched_files:
        compile(path.read_bytes(), str(path), "exec")

    source = (checkout / "python/sglang/srt/server_args.py").read_text()
    # the field right after its anchor field
    lines = source.splitlines()
    i = lines.index("    speculative_accept_threshold_acc: float = 1.0")
    assert lines[i + 1] == "    speculative_disable_batch_threshold: int = 0"
    # the flag: the statement right after the whole anchor statement, and nothing else moved
    body = add_cli_args_statements(source)
    flags = [flag_of(s) for s in body]
    k = flags.index("--speculative-accept-threshold-acc")
    assert flags[k + 1] == "--speculative-disable-batch-threshold"
    assert [f for f in flags if f != "--speculative-disable-batch-threshold"] == [
        flag_of(s) for s in add_cli_args_statements(pristine)]
    call = body[k + 1].value
    assert {kw.arg for kw in call.keywords} >= {"type", "default", "help"}
    # the flag's type is the recipe's int >= 0 parser (a negative N is argparse's usage error), defined in the module
    assert ast.unparse(next(kw.value for kw in call.keywords if kw.arg == "type")) == \
        "_speculative_disable_batch_threshold_arg"
    assert any(isinstance(d, ast.FunctionDef) and d.name == "_speculative_disable_batch_threshold_arg"
               for d in ast.parse(source).body)

    before = tree_hash(checkout)
    again = run("apply", "dynamic-spec-disable", "--target", str(checkout), "--no-smoke")
    assert again.returncode == 0 and "already applied" in again.stderr
    assert tree_hash(checkout) == before

    status = run("status", "--target", str(checkout), "--json", check=True)
    assert '"recipe": "dynamic-spec-disable"' in status.stdout

    back = run("rollback", "--target", str(checkout), check=True)
    assert "rolled back" in back.stderr
    assert subprocess.run(["git", "status", "--porcelain"], cwd=checkout, capture_output=True,
                          text=True).stdout.strip() == ""
    assert "nothing to roll back" in run("rollback", "--target", str(checkout), check=True).stderr


@pytest.mark.parametrize("edit, anchor", [
    (('"--speculative-accept-threshold-acc",', '"--speculative-accept-threshold-accum",'),
     "--speculative-accept-threshold-acc"),
    (("    speculative_accept_threshold_acc: float = 1.0\n",
      "    speculative_accept_threshold_acc: float = 1.0\n    speculative_accept_threshold_acc: float = 1.0\n"),
     "speculative_accept_threshold_acc"),
])
def test_missing_or_ambiguous_anchor_changes_nothing(checkout, edit, anchor):
    path = checkout / "python/sglang/srt/server_args.py"
    path.write_text(path.read_text().replace(*edit, 1))
    before = tree_hash(checkout)
    done = run("apply", "dynamic-spec-disable", "--target", str(checkout))
    assert done.returncode == 3
    assert "python/sglang/srt/server_args.py" in done.stderr and anchor in done.stderr
    assert "dynamic-spec-disable" in done.stderr and "step" in done.stderr
    assert tree_hash(checkout) == before


def test_site_packages_layout_and_release_out_of_range(tmp_path, sglang_release):
    site = tmp_path / "site-packages"
    shutil.copytree(sglang_release("0.5.9"), site)
    done = run("apply", "dynamic-spec-disable", "--target", str(site), "--no-smoke", "--json")
    assert done.returncode == 0, done.stderr
    assert '"layout": "site-packages"' in done.stdout
    meta = next(site.glob("sglang-*.dist-info"))
    (site / "sglang" / "_version.py").write_text("__version__ = version = '0.3.0'\n")
    refused = run("apply", "dynamic-spec-disable", "--target", str(site), "--dry-run")
    assert refused.returncode == 3 and "0.3.0" in refused.stderr
    assert meta.is_dir()


def test_target_with_a_syntax_error_is_refused(checkout):
    path = checkout / "python/sglang/srt/environ.py"
    path.write_text(path.read_text() + "\ndef broken(:\n")
    before = tree_hash(checkout)
    done = run("apply", "dynamic-spec-disable", "--target", str(checkout))
    assert done.returncode == 2 and "environ.py" in done.stderr and "does not parse" in done.stderr
    assert tree_hash(checkout) == before


@pytest.mark.cpuenv
def test_apply_then_verify_runs_smoke_test_and_probes(checkout, cpuenv_python):
    done = subprocess.run([cpuenv_python, "-m", "patcher", "apply", "dynamic-spec-disable", "--target",
                           str(checkout), "--json"], capture_output=True, text=True, cwd=REPO, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    verified = subprocess.run([cpuenv_python, "-m", "patcher", "verify", "--target", str(checkout), "--json"],
                              capture_output=True, text=True, cwd=REPO, timeout=900)
    assert verified.returncode == 0, verified.stdout[-3000:] + verified.stderr[-3000:]
    import json

    report = json.loads(verified.stdout)
    checks = report["recipes"][0]["checks"]
    kinds = {(c["kind"], c["status"]) for c in checks}
    assert ("import", "passed") in kinds and ("probe", "passed") in kinds
    assert all(c["status"] == "passed" for c in checks), checks
    names = {c["name"] for c in checks if c["kind"] == "probe"}
    assert len(names) >= 2
