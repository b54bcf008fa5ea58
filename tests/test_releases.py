"""Issue 13, through the real command line on real sglang releases from the registry: installs made by pip from the
release wheels, upgrades and reinstalls under an applied recipe, and a git history built from release wheels
(a release branch with tags, and a main branch whose nearest tag is far from its code).

The history (module fixture, built once)::

    main:     A (0.5.6, tag v0.5.6) -- C (0.5.12 code, no tag) -- E (0.5.13, tag v0.5.13)
    release:  A -- B (0.5.9, tag v0.5.9) -- D (README change only, no tag)
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
RECIPES = REPO / "tests" / "recipes"
OK, BAD_INPUT, VERIFY_FAILED, WOULD_CHANGE = 0, 2, 4, 7
FLAGSHIP = "dynamic-spec-disable"


def specpatch(*args: str, env: dict | None = None, cwd: Path = REPO) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "NO_COLOR": "1", "SPECPATCH_RECIPE_PATH": str(RECIPES), **(env or {})}
    full_env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), (env or {}).get("PYTHONPATH", "")) if p)
    return subprocess.run([sys.executable, "-m", "patcher", *args], capture_output=True, text=True, env=full_env,
                          timeout=900, cwd=cwd)


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "-c", "advice.detachedHead=false",
                           *args], cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, f"git {' '.join(args)} (in {cwd}) exited {done.returncode}: {done.stderr}"
    return done.stdout


def files_of(root: Path) -> dict[str, str]:
    """sha256 of every file, state folder, bytecode and .git left out."""
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and not {".specpatch", "__pycache__", ".git"} &
            set(p.relative_to(root).parts)}


def wheel(version: str, sglang_release) -> Path:
    """The cached wheel of sglang==version (fetched by the fixture on first use)."""
    from patcher.fetch import cache_dir

    sglang_release(version)
    return next((cache_dir() / "wheels").glob(f"sglang-{version}-*.whl"))


def pip_install(site: Path, whl: Path, *extra: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--no-compile",
                    "--target", str(site), *extra, str(whl)], check=True, capture_output=True, text=True,
                   timeout=600)


# --------------------------------------------------------------------------------------------------- checkouts


def _lay(release: Path, checkout: Path) -> None:
    package = checkout / "python" / "sglang"
    if package.exists():
        shutil.rmtree(package)
    shutil.copytree(release / "sglang", package, ignore=shutil.ignore_patterns("__pycache__", "_version.py"))


@pytest.fixture(scope="module")
def history(tmp_path_factory, sglang_release) -> Path:
    """The bare history above, as a repository to clone work trees from."""
    repo = tmp_path_factory.mktemp("history") / "sglang"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("sglang\n")
    for version, tag in (("0.5.6", "v0.5.6"),):
        _lay(sglang_release(version), repo)
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", version)
        git(repo, "tag", tag)
    git(repo, "checkout", "-q", "-b", "release", "v0.5.6")
    _lay(sglang_release("0.5.9"), repo)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "release 0.5.9")
    git(repo, "tag", "v0.5.9")
    (repo / "README.md").write_text("sglang\n\ndocs after 0.5.9\n")
    git(repo, "commit", "-qam", "docs")
    git(repo, "tag", "D")  # not a release tag: `D` is no version
    git(repo, "checkout", "-q", "main")
    _lay(sglang_release("0.5.12"), repo)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "main, near 0.5.12")
    git(repo, "tag", "C")
    _lay(sglang_release("0.5.13"), repo)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "release 0.5.13")
    git(repo, "tag", "v0.5.13")
    return repo


@pytest.fixture
def work_tree(history, tmp_path):
    """`work_tree(ref)`: a clone of the history checked out at ref."""

    def make(ref: str) -> Path:
        dest = tmp_path / f"wt-{ref}"
        git(tmp_path, "clone", "-q", str(history), str(dest))
        git(dest, "checkout", "-q", ref)
        return dest

    return make


def test_a_release_tag_on_head_is_the_release_and_the_report_says_so(work_tree):
    tree = work_tree("v0.5.9")
    done = specpatch("status", "--target", str(tree))
    assert done.returncode == OK, done.stderr
    assert "sglang 0.5.9 (read from git tag v0.5.9 on HEAD)" in done.stdout
    done = specpatch("apply", FLAGSHIP, "--target", str(tree), "--dry-run")
    assert done.returncode == OK, done.stderr
    assert "[release 0.5.9 from git tag v0.5.9 on HEAD]" in done.stderr
    assert "release 0.5.9 is in" in done.stderr  # the variant of 0.5.9


def test_a_nearest_tag_counts_only_when_heads_code_is_that_release(work_tree):
    tree = work_tree("D")  # docs commit after v0.5.9; an editable install wrote the newest tag into _version.py
    (tree / "python/sglang/_version.py").write_text("__version__ = version = '0.5.15'\n")
    done = specpatch("apply", FLAGSHIP, "--target", str(tree), "--dry-run")
    assert done.returncode == OK, done.stderr
    assert "[release 0.5.9 from nearest tag v0.5.9; the code is that of the 0.5.9 release]" in done.stderr


def test_a_far_nearest_tag_is_refused_saying_what_was_found_where(work_tree):
    tree = work_tree("C")  # main: code of 0.5.12, nearest tag v0.5.6
    (tree / "python/sglang/_version.py").write_text("__version__ = version = '0.5.15'\n")
    before = files_of(tree)
    for args in (("apply", FLAGSHIP), ("apply", FLAGSHIP, "--dry-run"), ("check", FLAGSHIP)):
        done = specpatch(*args, "--target", str(tree))
        assert done.returncode == BAD_INPUT, (args, done.stderr)
        text = " ".join(done.stderr.split())
        assert "cannot tell which sglang release the checkout" in text and "has no release tag" in text
        assert "nearest tag v0.5.6 (`git describe`, 1 commits before HEAD)" in text
        assert "HEAD's code differs from the 0.5.6 release" in text
        assert "_version.py says 0.5.15" in text and "differs from the 0.5.15 release" in text
        assert "--assume-version" in text
    assert files_of(tree) == before
    done = specpatch("apply", FLAGSHIP, "--target", str(tree), "--dry-run", "--assume-version", "0.5.12")
    assert done.returncode == OK, done.stderr
    assert "[release 0.5.12 from --assume-version]" in done.stderr


def test_one_target_identity_however_the_path_is_spelled(work_tree):
    tree = work_tree("v0.5.9")
    done = specpatch("apply", FLAGSHIP, "--target", str(tree / "python" / "sglang"), "--no-smoke")
    assert done.returncode == OK, done.stderr
    for spelled in (tree, tree / "python", tree / "python" / "sglang", Path(str(tree) + "/./python/../python")):
        status = specpatch("status", "--target", str(spelled), "--json")
        data = json.loads(status.stdout)
        assert data["target"] == str(tree) and data["release"] == "0.5.9", (spelled, data)
        assert [r["recipe"] for r in data["applied"]] == [FLAGSHIP]
    done = specpatch("rollback", "--target", str(tree / "python"))
    assert done.returncode == OK and "rolled back dynamic-spec-disable" in done.stderr, done.stderr
    assert not (tree / "python" / ".specpatch").exists() and not (tree / "python" / "sglang" / ".specpatch").exists()
    assert git(tree, "status", "--porcelain") == ""


def test_a_file_reverted_with_git_checkout_does_not_jam_rollback(work_tree):
    tree = work_tree("v0.5.9")
    assert specpatch("apply", FLAGSHIP, "--target", str(tree), "--no-smoke").returncode == OK
    git(tree, "checkout", "--", "python/sglang/srt/server_args.py")
    done = specpatch("rollback", "--target", str(tree))
    assert done.returncode == OK, done.stderr
    assert "python/sglang/srt/server_args.py had them already" in done.stderr
    assert git(tree, "status", "--porcelain") == ""


def test_git_checkout_of_the_next_release_under_an_applied_recipe(work_tree):
    tree = work_tree("v0.5.9")
    assert specpatch("apply", FLAGSHIP, "--target", str(tree), "--no-smoke").returncode == OK
    git(tree, "checkout", "-q", "-f", "v0.5.13")  # the upgrade: git puts 0.5.13's files in place
    done = specpatch("check", FLAGSHIP, "--target", str(tree))
    assert done.returncode == WOULD_CHANGE, done.stderr
    done = specpatch("apply", FLAGSHIP, "--target", str(tree), "--no-smoke")
    assert done.returncode == OK, done.stderr
    assert "retired the record of dynamic-spec-disable" in done.stderr and "now sglang 0.5.13" in done.stderr
    assert specpatch("check", FLAGSHIP, "--target", str(tree)).returncode == OK
    done = specpatch("rollback", "--target", str(tree))
    assert done.returncode == OK, done.stderr
    assert git(tree, "status", "--porcelain") == ""  # 0.5.13's own bytes, not a byte of 0.5.9
    done = specpatch("rollback", "--target", str(tree))
    assert done.returncode == OK and "nothing to roll back" in done.stderr, done.stderr


# --------------------------------------------------------------------------------------------------- pip installs


def test_the_upgrade_path_of_deployment_md_step_by_step(tmp_path, sglang_release):
    """docs/deployment.md, "Upgrades and removal", with the configuration-management tasks as written (`check`
    then `apply` with `--package sglang`), on an install pip made from the release wheels."""
    site = tmp_path / "site-packages"
    pip_install(site, wheel("0.5.8", sglang_release))
    env = {"PYTHONPATH": str(site)}  # the interpreter that imports this sglang: `--package sglang` finds it
    gate = ("check", FLAGSHIP, "--package", "sglang", "--quiet")
    task = ("apply", FLAGSHIP, "--package", "sglang", "--quiet", "--lock-timeout", "300")
    assert specpatch(*gate, env=env).returncode == WOULD_CHANGE
    done = specpatch(*task, env=env)
    assert done.returncode == OK, done.stderr
    assert specpatch(*gate, env=env).returncode == OK

    # "Upgrading sglang to a release the recipe supports: upgrade, then run the same tasks (`check` exits 7,
    # `apply` patches the new files)."
    pip_install(site, wheel("0.5.9", sglang_release), "--upgrade")
    assert specpatch(*gate, env=env).returncode == WOULD_CHANGE
    done = specpatch(*task, env=env)
    assert done.returncode == OK, done.stderr
    assert specpatch(*gate, env=env).returncode == OK
    status = json.loads(specpatch("status", "--package", "sglang", "--json", env=env).stdout)
    assert [(r["recipe"], r["release"]) for r in status["applied"]] == [(FLAGSHIP, "0.5.9")]
    assert [r["record"]["release"] for r in status["retired"]] == ["0.5.8"]

    # "Removing the patch: `specpatch rollback dynamic-spec-disable --package sglang` restores the exact original
    # bytes and modes; run again, it says "nothing to roll back" and exits 0."
    done = specpatch("rollback", FLAGSHIP, "--package", "sglang", env=env)
    assert done.returncode == OK, done.stderr
    fresh = tmp_path / "fresh"
    pip_install(fresh, wheel("0.5.9", sglang_release))
    # 0.5.9 as pip installs it: no byte of 0.5.8 was written back (pip --target leaves 0.5.8's dist-info beside it)
    assert files_of(site / "sglang") == files_of(fresh / "sglang")
    done = specpatch("rollback", FLAGSHIP, "--package", "sglang", env=env)
    assert done.returncode == OK and "nothing to roll back" in done.stderr, done.stderr


def test_a_reinstall_of_the_same_release_then_apply_is_applied_once(tmp_path, sglang_release):
    site = tmp_path / "site-packages"
    whl = wheel("0.5.9", sglang_release)
    pip_install(site, whl)
    assert specpatch("apply", FLAGSHIP, "--target", str(site), "--no-smoke").returncode == OK
    pip_install(site, whl, "--upgrade", "--force-reinstall")
    assert specpatch("check", FLAGSHIP, "--target", str(site)).returncode == WOULD_CHANGE
    done = specpatch("apply", FLAGSHIP, "--target", str(site), "--no-smoke")
    assert done.returncode == OK, done.stderr
    assert "every file it changed has its original bytes again" in done.stderr
    assert specpatch("check", FLAGSHIP, "--target", str(site)).returncode == OK
    assert specpatch("rollback", "--target", str(site)).returncode == OK
    status = json.loads(specpatch("status", "--target", str(site), "--json").stdout)
    assert status["applied"] == [] and len(status["retired"]) == 1
    assert specpatch("check", FLAGSHIP, "--target", str(site)).returncode == WOULD_CHANGE


def test_apply_says_how_to_undo_and_that_pips_record_differs(tmp_path, sglang_release):
    site = tmp_path / "site-packages"
    pip_install(site, wheel("0.5.9", sglang_release))
    done = specpatch("apply", FLAGSHIP, "--target", str(site), "--no-smoke")
    assert done.returncode == OK, done.stderr
    text = " ".join(done.stderr.split())
    assert f"undo: specpatch rollback {FLAGSHIP} --target {site}" in text
    assert "sglang-0.5.9.dist-info/RECORD still lists the original hashes of sglang/srt/server_args.py" in text


def test_package_is_looked_up_with_the_given_python(tmp_path, sglang_release):
    site = tmp_path / "site-packages"
    pip_install(site, wheel("0.5.9", sglang_release))
    python = tmp_path / "serving-python"  # the serving environment's interpreter: it imports this sglang
    python.write_text(f"#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} \"$@\"\n")
    python.chmod(0o755)
    done = specpatch("status", "--package", "sglang", "--json")  # specpatch's own Python has no sglang
    assert done.returncode == BAD_INPUT
    done = specpatch("verify", "--package", "sglang", "--python", str(python), "--json")
    assert done.returncode == OK, done.stderr
    assert json.loads(done.stdout)["target"] == str(site)
    done = specpatch("apply", FLAGSHIP, "--package", "sglang", "--python", str(python), "--dry-run")
    assert done.returncode == OK and "[release 0.5.9 from _version.py]" in done.stderr, done.stderr
    # a relative path works as typed, though the checks run it from other folders
    done = specpatch("apply", FLAGSHIP, "--package", "sglang", "--python", "./serving-python", cwd=tmp_path)
    assert done.returncode == OK, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "and verified" in last and "cannot start" not in done.stderr, done.stderr[-2000:]


# --------------------------------------------------------------------------------------------------- what ran


def test_verified_is_said_only_of_what_ran(tmp_path, sglang_release):
    site = tmp_path / "site-packages"
    shutil.copytree(sglang_release("0.5.9"), site)
    no_torch = "/usr/bin/python3"
    if subprocess.run([no_torch, "-c", "import torch"], capture_output=True).returncode == 0:
        pytest.fail(f"{no_torch} has torch: this test needs an interpreter without it")
    before = files_of(site)
    done = specpatch("apply", FLAGSHIP, "--target", str(site), "--python", no_torch, "--require-checks")
    assert done.returncode == VERIFY_FAILED, done.stderr
    assert "--require-checks: import sglang." in " ".join(done.stderr.split())
    assert files_of(site) == before
    for how in (("--python", no_torch), ("--no-smoke",)):
        done = specpatch("apply", FLAGSHIP, "--target", str(site), *how)
        assert done.returncode == OK, done.stderr
        last = done.stderr.strip().splitlines()[-1]
        assert "and verified" not in last and "NOT verified" in last and "did not run: import " in last, last
        assert "probe " in last
        done = specpatch("verify", "--target", str(site), *how)
        assert done.returncode == OK and "NOT verified" in done.stderr and "recipe(s) verified" not in done.stderr
        done = specpatch("verify", "--target", str(site), *how, "--require-checks")
        assert done.returncode == VERIFY_FAILED and "(--require-checks)" in done.stderr, done.stderr
        assert specpatch("rollback", "--target", str(site)).returncode == OK


def test_apply_leaves_no_bytecode_in_the_tree(tmp_path):
    target = tmp_path / "t"
    shutil.copytree(RECIPES / "fixtures" / "toy-greeting" / "baseline" / "before", target)
    done = specpatch("apply", "toy-greeting", "--target", str(target))
    assert done.returncode == OK and "and verified" in done.stderr, done.stderr
    assert not list(target.rglob("__pycache__")) and not list(target.rglob("*.pyc"))


def test_output_that_no_pipe_cuts(tmp_path, sglang_release, monkeypatch):
    # a plain pipe: none of the variables by which a user asks for a terminal or a width
    for name in ("COLUMNS", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(name, raising=False)
    site = tmp_path / ("a-long-folder-name-" * 6) / "site-packages"
    shutil.copytree(sglang_release("0.5.9"), site)
    assert specpatch("apply", FLAGSHIP, "--target", str(site), "--no-smoke").returncode == OK
    done = specpatch("status", "--target", str(site))  # stdout is a pipe here
    assert done.returncode == OK
    assert "…" not in done.stdout and "..." not in done.stdout
    assert str(site) in done.stdout and FLAGSHIP in done.stdout
    ledger = json.loads((site / ".specpatch" / "ledger.json").read_text())
    for f in ledger["applied"][0]["files"]:
        assert f["rel"] in done.stdout and f["sha_before"] in done.stdout and f["sha_after"] in done.stdout
    lines = [line for line in done.stdout.splitlines() if FLAGSHIP in line]
    assert lines and all(re.search(r"\bdynamic-spec-disable\b", line) for line in lines)


def test_try_says_not_verified_when_the_checks_could_not_run(sglang_release):
    sglang_release("0.5.9")
    done = specpatch("try", FLAGSHIP, "--version", "0.5.9", "--python", "/usr/bin/python3", "--json")
    assert done.returncode == OK, done.stderr
    data = json.loads(done.stdout)
    assert data["outcome"] == "applied_not_verified" and "NOT verified: did not run: import " in data["message"]


def test_apply_says_what_the_variant_does_on_the_release(tmp_path, sglang_release):
    site = tmp_path / "site-packages"
    shutil.copytree(sglang_release("0.5.23"), site)
    done = specpatch("apply", FLAGSHIP, "--target", str(site), "--dry-run")
    assert done.returncode == OK, done.stderr
    assert "variant fallback-0.5.23" in done.stderr
    assert "0.5.22's fallback on 0.5.23" in done.stderr  # not only the variant's name
    # taken as a release after the measured ports: refused, nothing written, naming the port to carry
    worker = site / "sglang" / "srt" / "speculative" / "eagle_worker_v2.py"
    was = worker.read_bytes()
    done = specpatch("apply", FLAGSHIP, "--target", str(site), "--assume-version", "0.5.24")
    assert done.returncode == 3, done.stderr
    assert "variant newer-than-measured" in done.stderr and "--variant fallback-0.5.23" in done.stderr
    assert worker.read_bytes() == was


def test_a_checkout_is_its_release_whatever_the_wheel_s_build_added(tmp_path, monkeypatch):
    # a hostile round: a vLLM checkout with exactly 0.23.0's source was "differs in 14 of 3345 files (e.g.
    # _C.abi3.so)": the wheel holds compiled extensions and vendored folders no commit holds
    from packaging.version import Version

    from patcher import target as target_mod

    wheel = tmp_path / "wheel" / "vllm"
    for rel, text in {"__init__.py": "", "engine/args.py": "x = 1\n", "_C.abi3.so": "\x7fELF",
                      "vllm_flash_attn/ops.py": "y = 2\n"}.items():
        (wheel / rel).parent.mkdir(parents=True, exist_ok=True)
        (wheel / rel).write_text(text)
    checkout = tmp_path / "vllm-src"
    shutil.copytree(wheel, checkout / "vllm", ignore=shutil.ignore_patterns("*.so", "vllm_flash_attn"))
    git(checkout, "init", "-q", "-b", "main")
    git(checkout, "add", "-A")
    git(checkout, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "0.23.0")
    monkeypatch.setattr("patcher.fetch.fetch_release", lambda package, version: wheel.parent)
    assert target_mod._differs_from_release(checkout, checkout / "vllm", "vllm", Version("0.23.0")) is None
    # a source file of the release that HEAD lacks in a folder it tracks is still a difference
    git(checkout, "rm", "-q", "vllm/engine/args.py")
    (checkout / "vllm/engine/keep.py").parent.mkdir(exist_ok=True)
    (checkout / "vllm/engine/keep.py").write_text("")
    git(checkout, "add", "-A")
    git(checkout, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "drop args")
    said = target_mod._differs_from_release(checkout, checkout / "vllm", "vllm", Version("0.23.0"))
    assert said is not None and "engine/args.py" in said, said
