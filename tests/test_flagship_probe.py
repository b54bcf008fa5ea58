"""The recipe's own steps (the one-token-graph fallback, written for 0.5.9 and the base of every fallback variant) and
their server-arguments probe on sglang 0.5.9, applied without variants: the probes pass on the patched release, the
server-arguments probe fails when the flag stops being a usage error, and `specpatch verify`'s runner passes them with
the recipe's own adapter (variant ""). The worker probe on the variants and its sabotages:
tests/test_flagship_probe_graphs.py.

The recipe's steps, without its variants, are applied with the engine to a copy of a pristine 0.5.9; the probe then
runs as `specpatch verify` runs it (a subprocess of an interpreter in which sglang imports, the copy first on sys.path,
GPU-only packages stubbed).

Needs: the CPU environment (an interpreter that imports torch: this one, or $SPECPATCH_CPU_PYTHON) and the 0.5.9
release (fetched from the registry, cached).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from sabotage import run_broken

from patcher.engine import plan
from patcher.recipe import load_recipe
from patcher.target import find_target

ROOT = Path(__file__).resolve().parent.parent
RECIPE = ROOT / "recipes" / "dynamic-spec-disable.yaml"
PROBES = ROOT / "recipes" / "dynamic-spec-disable" / "probes"
WORKER = "sglang/srt/speculative/eagle_worker_v2.py"

pytestmark = [pytest.mark.sglang, pytest.mark.cpuenv]


@pytest.fixture(scope="module")
def cpu_python(cpuenv_python) -> str:
    """The CPU environment's interpreter (tests/conftest.py: fails, never skips, when it is missing in CI)."""
    return cpuenv_python


def base_recipe():
    """The recipe with its own steps and checks only (no variants): what the change_steps ports start from."""
    return dataclasses.replace(load_recipe(str(RECIPE)), variants=())


@pytest.fixture(scope="module")
def patched(tmp_path_factory, sglang_release) -> Path:
    """A copy of sglang 0.5.9 with the recipe's own steps applied by the engine; its root holds the `sglang` folder."""
    pristine = sglang_release("0.5.9")
    root = tmp_path_factory.mktemp("sglang-0.5.9-patched")
    shutil.copytree(pristine / "sglang", root / "sglang", ignore=shutil.ignore_patterns("__pycache__"))
    result = plan(base_recipe(), find_target(root, assume_version="0.5.9"))
    assert result.ok, [str(e) for e in result.errors]
    assert result.selection.variant is None
    for f in result.changed_files:
        f.path.write_bytes(f.after)
    return root


def run_probe(python: str, import_root: Path, script: str, params: dict | None = None, variant: str = ""):
    """The probe as `specpatch verify` runs it; `variant` is what verify passes from the ledger (none: the recipe's
    own steps)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_", "SPECPATCH_"))}
    env.update(SPECPATCH_IMPORT_ROOT=str(import_root), SPECPATCH_TARGET_ROOT=str(import_root), SPECPATCH_VARIANT=variant,
               SPECPATCH_PARAMS=json.dumps(params or {"threshold_default": 0, "catchup_mode": "skip"}),
               PYTHONWARNINGS="ignore")
    return subprocess.run([python, "-I", str(PROBES / script)], env=env, cwd=import_root, capture_output=True,
                          text=True, timeout=600)


def marks(out: str, kind: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith(f"PROBE-{kind}:")]


def test_worker_probe_passes_on_the_patched_release(cpu_python, patched):
    """The recipe's own steps are the 0.5.9 design: the graphs probe with the recipe's own adapter (no variant)."""
    run = run_probe(cpu_python, patched, "worker_probe_graphs.py")
    assert run.returncode == 0 and not marks(run.stdout, "FAIL"), run.stdout + run.stderr[-3000:]
    assert "release adapter Release059 for variant " in run.stdout, run.stdout
    assert len(marks(run.stdout, "OK")) >= 20, run.stdout


def test_server_args_probe_passes_on_the_patched_release(cpu_python, patched):
    run = run_probe(cpu_python, patched, "server_args_probe.py")
    assert run.returncode == 0 and not marks(run.stdout, "FAIL"), run.stdout + run.stderr[-3000:]
    assert len(marks(run.stdout, "OK")) >= 5, run.stdout


def test_server_args_probe_fails_when_a_negative_flag_is_not_a_usage_error(cpu_python, patched, tmp_path_factory):
    """The flag back to `type=int`: -3 passes the parser and only __post_init__ refuses it (a traceback)."""
    breakage = [("flag-any-int", r"type=_speculative_disable_batch_threshold_arg,", "type=int,")]
    run = run_broken(patched, "sglang/srt/server_args.py", breakage, tmp_path_factory.mktemp,
                     lambda root: run_probe(cpu_python, root, "server_args_probe.py"))["flag-any-int"]
    assert not isinstance(run, str), run
    fails = marks(run.stdout, "FAIL")
    assert run.returncode != 0 and any("was not refused by the parser" in f for f in fails), run.stdout


def test_probe_through_specpatch_verify(cpu_python, patched):
    """The same probes through patcher.verify.run_probes, the runner `specpatch verify` uses (stubs included)."""
    from patcher import verify
    recipe = base_recipe()
    target = find_target(patched, assume_version="0.5.9")
    checks = verify.run_probes(target, recipe.verify, recipe.folder, python=cpu_python,
                               params=recipe.resolve_params({}))
    assert [c.status for c in checks] == ["passed"] * len(recipe.verify.probes), \
        [(c.name, c.status, c.message, c.details) for c in checks]


def test_verify_passes_the_applied_variant_to_the_probes(cpuenv_python_tf5, tmp_path, sglang_release):
    """`specpatch verify`'s runner reads the variant from the target's ledger and hands it to both probes (without
    it, 0.5.12 would be probed with the recipe's own 0.5.9 adapter and fail)."""
    from patcher import verify
    from patcher.api import apply_recipe

    shutil.copytree(sglang_release("0.5.12") / "sglang", tmp_path / "sglang",
                    ignore=shutil.ignore_patterns("__pycache__"))
    recipe = load_recipe(str(RECIPE))
    target = find_target(tmp_path, assume_version="0.5.12")
    applied = apply_recipe(recipe, target, smoke=False)
    assert applied.record is not None and applied.record.variant == "fallback-0.5.12", applied.outcome
    spec = recipe.select(target.version).verify
    checks = verify.run_probes(target, spec, recipe.folder, python=cpuenv_python_tf5,
                               params=recipe.resolve_params({}))
    assert [c.status for c in checks] == ["passed"] * len(spec.probes), \
        [(c.name, c.status, c.message, c.details[-2000:]) for c in checks]
    assert all("for variant fallback-0.5.12" in c.details for c in checks), [c.details[:500] for c in checks]
