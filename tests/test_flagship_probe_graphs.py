"""The 0.5.9 port of the one-token-graph fallback (variant `fallback-0.5.9`) and its behaviour probe,
worker_probe_graphs.py: the probe passes on sglang 0.5.9 patched by the recipe, fails on the pristine release, and
fails on broken fallbacks.

The recipe is applied with the engine to a copy of a pristine 0.5.9 (its variant is `fallback-0.5.9`); the probe runs
as `specpatch verify` runs it (a subprocess of an interpreter in which sglang imports, the copy first on sys.path,
GPU-only packages stubbed). Each broken variant edits one thing in the patched eagle_worker_v2.py (the target graph
captured with the speculative algorithm on, the speculative state not swapped back, tokens not at the stride the
0.5.9 scheduler reads, ...) and the probe must report a PROBE-FAIL naming it and exit non-zero.

Needs: the CPU environment (an interpreter that imports torch: this one, or $SPECPATCH_CPU_PYTHON) and the 0.5.9
release (fetched from the registry, cached).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from packaging.version import Version
from sabotage import run_broken

from patcher.engine import plan
from patcher.recipe import load_recipe
from patcher.target import find_target

ROOT = Path(__file__).resolve().parent.parent
RECIPE = ROOT / "recipes" / "dynamic-spec-disable.yaml"
PROBES = ROOT / "recipes" / "dynamic-spec-disable" / "probes"
PROBE = "worker_probe_graphs.py"
WORKER = "sglang/srt/speculative/eagle_worker_v2.py"

pytestmark = [pytest.mark.sglang, pytest.mark.cpuenv]


@pytest.fixture(scope="module")
def cpu_python(cpuenv_python) -> str:
    """The CPU environment's interpreter (tests/conftest.py: fails, never skips, when it is missing in CI)."""
    return cpuenv_python


@pytest.fixture(scope="module")
def recipe():
    return load_recipe(str(RECIPE))


@pytest.fixture(scope="module")
def patched(tmp_path_factory, sglang_release, recipe) -> Path:
    """A copy of sglang 0.5.9 with the recipe (its 0.5.9 variant) applied by the engine."""
    pristine = sglang_release("0.5.9")
    root = tmp_path_factory.mktemp("sglang-0.5.9-graphs-patched")
    shutil.copytree(pristine / "sglang", root / "sglang", ignore=shutil.ignore_patterns("__pycache__"))
    result = plan(recipe, find_target(root, assume_version="0.5.9"))
    assert result.ok, [str(e) for e in result.errors]
    assert result.selection.variant == "fallback-0.5.9"
    for f in result.changed_files:
        f.path.write_bytes(f.after)
    return root


def run_probe(python: str, import_root: Path, params: dict):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_", "SPECPATCH_"))}
    env.update(SPECPATCH_IMPORT_ROOT=str(import_root), SPECPATCH_TARGET_ROOT=str(import_root),
               SPECPATCH_PARAMS=json.dumps(params), PYTHONWARNINGS="ignore")
    return subprocess.run([python, "-I", str(PROBES / PROBE)], env=env, cwd=import_root, capture_output=True,
                          text=True, timeout=600)


def marks(out: str, kind: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith(f"PROBE-{kind}:")]


def test_the_0_5_9_variant_uses_the_graphs_probe(recipe):
    selection = recipe.select(Version("0.5.9"))
    assert selection.variant == "fallback-0.5.9"
    assert [p.path for p in selection.verify.probes][-1] == f"probes/{PROBE}"
    names = [s.name for s in selection.steps]
    for step in ("worker-plain-state", "worker-swap", "worker-stub-draft-input", "metrics-count-steps",
                 "metrics-log-steps", "metrics-internal-state"):
        assert step in names, names
    assert "worker-catch-up-padded" not in names, "the eager padded catch-up of the base steps is still there"


def test_graphs_probe_passes_on_the_patched_release(cpu_python, patched, recipe):
    run = run_probe(cpu_python, patched, recipe.resolve_params({}))
    assert run.returncode == 0 and not marks(run.stdout, "FAIL"), run.stdout + run.stderr[-3000:]
    oks = marks(run.stdout, "OK")
    assert len(oks) >= 20, run.stdout
    for mode in ("padded", "single", "skip"):
        assert any(f"({mode})" in line for line in oks), (mode, run.stdout)
    assert any("catch-up default 'skip'" in line for line in oks), run.stdout


def test_graphs_probe_fails_on_the_pristine_release(cpu_python, sglang_release, recipe):
    run = run_probe(cpu_python, sglang_release("0.5.9"), recipe.resolve_params({}))
    assert run.returncode != 0 and marks(run.stdout, "FAIL"), run.stdout


#: (name, regular expression matching once in the patched eagle_worker_v2.py, replacement, a fragment of the
#: PROBE-FAIL line expected); patterns use \s* for indentation, so they survive a re-indentation of the snippets
BREAKAGES = [
    ("graph-captured-speculative", r"\n\s*model_runner\.spec_algorithm = SpeculativeAlgorithm\.NONE", "",
     "not DECODE"),
    ("graph-without-hidden", r"\n\s*target_args\.enable_return_hidden_states = True", "", "not FULL"),
    ("graphs-for-every-bs", r"if bs > threshold\]", "]", "not those > N"),
    ("graph-on-speculative-backend", r"\n\s*model_runner\.attn_backend = target_backend", "", "its own backend"),
    ("build-not-restored", r"\) = saved\n", ") = (*saved[:3], True, *saved[4:])\n", "not restored"),
    ("draft-backend-made-with-n", r"(\n\s*)draft_args\.speculative_num_steps = 0\n\s*draft_args\.speculative_num_draft_tokens = 1",
     r"\1pass", "not 0 / 1"),
    ("one-token-state-with-n", r"return \(0, 1, draft_extend_backend",
     "return (self.speculative_num_steps, self.speculative_num_draft_tokens, draft_extend_backend",
     "falls back (padded catch-up)"),  # the real draft extend then breaks on n rows for one-token inputs
    ("swap-not-restored", r"(finally:\n\s*)self\._spec_disable_swap\(saved\)", r"\1pass", "not restored"),
    ("tokens-not-strided", r"tokens\.repeat_interleave\(stride\)", "tokens.repeat(stride)", "i * num_draft_tokens"),
    ("accept-lens-2", r"accept_lens = torch\.ones_like\(tokens\)", "accept_lens = torch.ones_like(tokens) * 2",
     "accept_lens"),
    ("draft-extend-at-stride-n", r"self\.draft_worker\._draft_extend_for_decode\(batch, one_token\)",
     "self.draft_worker._draft_extend_for_decode(batch, result)", "tokens"),
    ("skip-runs-draft", r'if self\.spec_disable_catch_up == "skip":', "if False:", "skip: the draft extend ran"),
    ("no-stubs", r"self\._spec_disable_stub_draft_input\(batch, result\)", "pass", "skip catch-up"),
    ("hidden-kept", r"(\n\s*)logits_output\.hidden_states = None", r"\1pass", "copy_to_cpu unasked"),
    ("threshold-inclusive", r"return batch_size > threshold", "return batch_size >= threshold",
     "batch <= N speculates"),
]


@pytest.fixture(scope="module")
def broken_runs(cpu_python, patched, recipe, tmp_path_factory) -> dict:
    """Every breakage applied to its own overlay of the patched tree, the probe run on each (in parallel)."""
    params = recipe.resolve_params({})
    return run_broken(patched, WORKER, BREAKAGES, tmp_path_factory.mktemp,
                      lambda root: run_probe(cpu_python, root, params))


@pytest.mark.parametrize("name,expected", [(b[0], b[3]) for b in BREAKAGES], ids=[b[0] for b in BREAKAGES])
def test_graphs_probe_fails_on_a_broken_fallback(broken_runs, name, expected):
    run = broken_runs[name]
    assert not isinstance(run, str), run
    fails = marks(run.stdout, "FAIL")
    assert run.returncode != 0 and fails, f"the probe passed on the broken fallback `{name}`:\n{run.stdout}"
    assert any(expected in line for line in fails), f"`{name}` failed, but not as expected:\n" + "\n".join(fails)


def test_probe_through_specpatch_verify(cpu_python, patched, recipe):
    """The 0.5.9 variant's probes through patcher.verify.run_probes, the runner `specpatch verify` uses."""
    from patcher import verify
    target = find_target(patched, assume_version="0.5.9")
    selection = recipe.select(target.version)
    checks = verify.run_probes(target, selection.verify, recipe.folder, python=cpu_python,
                               params=recipe.resolve_params({}))
    assert [c.status for c in checks] == ["passed"] * len(selection.verify.probes), \
        [(c.name, c.status, c.message, c.details) for c in checks]
