"""The recipe's own steps (the eager fallback, base of the 0.5.4-0.5.5 ports) and their behaviour probe,
worker_probe.py, on sglang 0.5.9, the release they were written for: it passes on the patched release and fails on
broken fallbacks. (0.5.9 itself gets the `fallback-0.5.9` variant, one-token CUDA graphs: tests/test_flagship_probe_graphs.py.)

The recipe's steps, without its variants, are applied with the engine to a copy of a pristine 0.5.9; the probe then
runs as `specpatch verify` runs it (a subprocess of an interpreter in which sglang imports, the copy first on sys.path,
GPU-only packages stubbed).
Each broken variant edits one thing in the patched eagle_worker_v2.py (accept_lens of 2, draft() called, the graph
runner not restored, ...) and the probe must report a PROBE-FAIL and exit non-zero.

Needs: the CPU environment (an interpreter that imports torch: this one, or $SPECPATCH_CPU_PYTHON) and the 0.5.9
release (fetched from the registry, cached).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sabotage import patched_releases, run_broken

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
               SPECPATCH_PARAMS=json.dumps(params or {"threshold_default": 0, "catchup_mode": "padded"}),
               PYTHONWARNINGS="ignore")
    return subprocess.run([python, "-I", str(PROBES / script)], env=env, cwd=import_root, capture_output=True,
                          text=True, timeout=600)


def marks(out: str, kind: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith(f"PROBE-{kind}:")]


def test_worker_probe_passes_on_the_patched_release(cpu_python, patched):
    run = run_probe(cpu_python, patched, "worker_probe.py")
    assert run.returncode == 0 and not marks(run.stdout, "FAIL"), run.stdout + run.stderr[-3000:]
    oks = marks(run.stdout, "OK")
    assert len(oks) >= 12, run.stdout
    assert any("padded catch-up" in line for line in oks) and any("single catch-up" in line for line in oks)


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


def test_worker_probe_fails_on_the_pristine_release(cpu_python, tmp_path, sglang_release):
    pristine = sglang_release("0.5.9")
    run = run_probe(cpu_python, pristine, "worker_probe.py")
    assert run.returncode != 0 and marks(run.stdout, "FAIL"), run.stdout


#: (name, regular expression matching once in the patched eagle_worker_v2.py, replacement, a fragment of the
#: PROBE-FAIL line expected); patterns use \s* for indentation, so they survive a re-indentation of the snippets
BREAKAGES = [
    ("accept-lens-2", r"accept_lens = torch\.ones_like\(tokens\)", "accept_lens = torch.ones_like(tokens) * 2",
     "accept_lens"),
    ("draft-called", r"(\n(\s*)batch = model_worker_batch\n)", r"\1\2self.draft_worker.draft(batch)\n",
     "draft() was called"),
    ("graph-runner-not-restored", r"(finally:\n\s*)model_runner\.graph_runner = graph_runner", r"\1pass",
     "graph runner"),
    ("graph-runner-kept", r"\n\s*model_runner\.graph_runner = None", "", "set aside"),
    ("spec-info-kept", r"(seq_lens_sum=batch\.seq_lens_sum \+ bs,\n)\s*spec_info=None,\n", r"\1", "spec_info"),
    ("tokens-not-strided", r"tokens\.repeat_interleave\(self\.speculative_num_draft_tokens\)",
     "tokens.repeat(self.speculative_num_draft_tokens)", "i * num_draft_tokens"),
    ("seq-lens-in-place", r"new_seq_lens = batch\.seq_lens \+ accept_lens",
     "new_seq_lens = batch.seq_lens.add_(accept_lens)", "seq_lens"),
    ("no-catch-up", r"self\._spec_disable_catch_up_padded\(batch, slots, result\)", "pass", "padded catch-up"),
    ("catch-up-wrong-row", r"hidden\.repeat_interleave\(n, dim=0\)", "hidden.repeat(n, 1)",
     "target hidden state of their own request"),
    ("stale-slots", r"\n\s*batch\.out_cache_loc = slots\.reshape\(-1\)", "", "padded catch-up"),
    ("threshold-inclusive", r"return batch_size > threshold", "return batch_size >= threshold",
     "batch <= N speculates"),
    ("dp-local-size", r"batch_size = sum\(model_worker_batch\.global_num_tokens\)",
     "batch_size = len(model_worker_batch.seq_lens)", "DP attention"),
    ("no-nan-check", r"(logits_output = target_result\.logits_output\n)\s*if self\.enable_nan_detection:\n"
                     r"\s*detect_nan\(logits_output\)\n", r"\1", "NaN"),
    ("penalties-kept", r"dataclasses\.replace\(sampling_info, acc_linear_penalties=None\)",
     "dataclasses.replace(sampling_info)", "penalties"),
]


@pytest.fixture(scope="module")
def broken_runs(cpu_python, patched, tmp_path_factory) -> dict:
    """Every breakage applied to its own overlay of the patched tree, the probe run on each (in parallel)."""
    return run_broken(patched, WORKER, BREAKAGES, tmp_path_factory.mktemp,
                      lambda root: run_probe(cpu_python, root, "worker_probe.py"))


@pytest.mark.parametrize("name,expected", [(b[0], b[3]) for b in BREAKAGES], ids=[b[0] for b in BREAKAGES])
def test_worker_probe_fails_on_a_broken_fallback(broken_runs, name, expected):
    run = broken_runs[name]
    assert not isinstance(run, str), run
    fails = marks(run.stdout, "FAIL")
    assert run.returncode != 0 and fails, f"the probe passed on the broken fallback `{name}`:\n{run.stdout}"
    assert any(expected in line for line in fails), f"`{name}` failed, but not as expected:\n" + "\n".join(fails)


def test_probe_through_specpatch_verify(cpu_python, patched):
    """The same probes through patcher.verify.run_probes, the runner `specpatch verify` uses (stubs included)."""
    from patcher import verify
    recipe = base_recipe()
    target = find_target(patched, assume_version="0.5.9")
    checks = verify.run_probes(target, recipe.verify, recipe.folder, python=cpu_python,
                               params=recipe.resolve_params({}))
    assert [c.status for c in checks] == ["passed"] * len(recipe.verify.probes), \
        [(c.name, c.status, c.message, c.details) for c in checks]


# ------------------------------------------------------------------------------------------------------ the ports
# The same probe on the ports of other releases: the contract is worker_probe.py's, the release adapter is the one of
# the variant the engine applied (SPECPATCH_VARIANT). 0.5.5 is the eager-fallback family's port (allocate_lens, no DP
# attention, decode arm first; 0.5.4 is 0.5.5's with --enable-beta-spec). 0.5.6 - 0.5.12 run the one-token-graph
# fallback (tests/test_flagship_probe_graphs.py), 0.5.13 its on_publish form.

#: release -> the conftest fixture of the interpreter in which it imports
PORTS = {"0.5.5": "cpuenv_python"}
#: breakages of the 0.5.9 list that every port shares (the others are spelled differently in the ports)
SHARED = {"accept-lens-2", "draft-called", "graph-runner-not-restored", "graph-runner-kept", "spec-info-kept",
          "tokens-not-strided", "no-catch-up", "catch-up-wrong-row", "stale-slots", "threshold-inclusive"}
PORT_BREAKAGES = {
    "0.5.5": [b for b in BREAKAGES if b[0] in SHARED | {"seq-lens-in-place", "no-nan-check"}] + [
        ("grammar-kept", r"acc_linear_penalties=None, grammars=None, vocab_mask=None", "acc_linear_penalties=None",
         "a grammar reached the target's sampler"),
        ("penalties-kept", r"acc_linear_penalties=None, grammars=None", "grammars=None", "penalties"),
        ("allocate-lens-dropped", r"(Passed on, as verify\(\) does\.\n)\s*allocate_lens=batch\.spec_info\.allocate_lens,",
         r"\1", "allocate_lens not passed on"),
    ],
}


@pytest.fixture(scope="module")
def ports(request, tmp_path_factory, sglang_release):
    """ports(release): (interpreter, a copy of the release with its variant applied by the engine, the variant)."""
    return patched_releases(request, tmp_path_factory, sglang_release, load_recipe(str(RECIPE)), PORTS)


def test_the_ports_name_the_contract_probe():
    """Every eager-fallback variant runs worker_probe.py's contract, and the probe has an adapter for each."""
    recipe = load_recipe(str(RECIPE))
    names = {v.name for v in recipe.variants
             if any(p.path in ("probes/worker_probe.py", "probes/worker_probe_compat.py") for p in v.verify.probes)}
    assert names == {f"fallback-0.5.{m}" for m in (4, 5)}, sorted(names)
    adapters = (PROBES / "_releases.py").read_text()
    assert all(f'"{name}"' in adapters for name in names), "a variant without an adapter in _releases.py"


#: one xdist group per port (`--dist loadgroup`): a worker builds a port and its broken overlays once
PORT_PARAMS = [pytest.param(v, marks=pytest.mark.xdist_group(f"port-{v}")) for v in sorted(PORTS)]


@pytest.mark.parametrize("version", PORT_PARAMS)
def test_port_probe_passes(ports, version):
    python, root, variant = ports(version)
    run = run_probe(python, root, "worker_probe_compat.py", variant=variant)
    assert run.returncode == 0 and not marks(run.stdout, "FAIL"), run.stdout + run.stderr[-3000:]
    assert len(marks(run.stdout, "OK")) >= 11, run.stdout


@pytest.mark.parametrize("version", PORT_PARAMS)
def test_port_probe_fails_with_the_wrong_adapter(ports, version):
    """The adapter matters: the recipe's own (no variant) fails on a port, an unknown variant fails saying so."""
    python, root, variant = ports(version)
    run = run_probe(python, root, "worker_probe_compat.py", variant="")
    assert run.returncode != 0 and marks(run.stdout, "FAIL"), run.stdout
    run = run_probe(python, root, "worker_probe_compat.py", variant="fallback-9.9")
    assert run.returncode != 0 and any("no release adapter for the variant `fallback-9.9`" in line
                                       for line in marks(run.stdout, "FAIL")), run.stdout


@pytest.fixture(scope="module")
def port_broken_runs(ports, tmp_path_factory):
    """port_broken_runs(release): {breakage: the probe's run on an overlay of the port with that breakage}."""
    done = {}

    def get(version):
        if version not in done:
            python, root, variant = ports(version)
            done[version] = run_broken(root, WORKER, PORT_BREAKAGES[version], tmp_path_factory.mktemp,
                                       lambda broken: run_probe(python, broken, "worker_probe_compat.py",
                                                                variant=variant))
        return done[version]

    return get


@pytest.mark.parametrize("version,name,expected", [
    pytest.param(v, b[0], b[3], marks=pytest.mark.xdist_group(f"port-{v}"), id=f"{v}-{b[0]}")
    for v in sorted(PORTS) for b in PORT_BREAKAGES[v]])
def test_port_probe_fails_on_a_broken_fallback(port_broken_runs, version, name, expected):
    run = port_broken_runs(version)[name]
    assert not isinstance(run, str), run
    fails = marks(run.stdout, "FAIL")
    assert run.returncode != 0 and fails, f"the probe passed on the broken {version} port `{name}`:\n{run.stdout}"
    assert any(expected in line for line in fails), f"`{name}` failed, but not as expected:\n" + "\n".join(fails)


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
