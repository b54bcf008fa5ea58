"""The one-token-graph fallback on 0.5.4 - 0.5.12 (variants `fallback-0.5.4` ... `fallback-0.5.12`) and its behaviour
probe, worker_probe_graphs.py: the probe passes on sglang 0.5.5 (the oldest family: allocate_lens, decode arm first,
no IDLE batch, no grammar, an eager draft extend), 0.5.9 (the base) and 0.5.12 patched by the recipe, fails on the pristine release and with the wrong release adapter, and fails on broken fallbacks.

The recipe is applied with the engine to a copy of a pristine release; the probe runs as `specpatch verify` runs it (a
subprocess of an interpreter in which sglang imports, the copy first on sys.path, GPU-only packages stubbed, the
variant applied in SPECPATCH_VARIANT). Each broken variant edits one thing in the patched eagle_worker_v2.py (the target graph
captured with the speculative algorithm on, the speculative state not swapped back, tokens not at the stride the
0.5.9 scheduler reads, ...) and the probe must report a PROBE-FAIL naming it and exit non-zero.

Needs: the CPU environments (0.5.5 and 0.5.9: $SPECPATCH_CPU_PYTHON or this interpreter; 0.5.12: $SPECPATCH_CPU_PYTHON_TF5)
and the releases (fetched from the registry, cached).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from packaging.version import Version
from sabotage import patched_releases, run_broken

from patcher.recipe import load_recipe
from patcher.target import find_target

ROOT = Path(__file__).resolve().parent.parent
RECIPE = ROOT / "recipes" / "dynamic-spec-disable.yaml"
PROBES = ROOT / "recipes" / "dynamic-spec-disable" / "probes"
PROBE = "worker_probe_graphs.py"
WORKER = "sglang/srt/speculative/eagle_worker_v2.py"

pytestmark = [pytest.mark.sglang, pytest.mark.cpuenv]


#: release -> the conftest fixture of the interpreter in which it imports
RELEASES = {"0.5.5": "cpuenv_python", "0.5.9": "cpuenv_python", "0.5.12": "cpuenv_python_tf5"}
#: one xdist group per release (`--dist loadgroup`): a worker builds a release and its broken overlays once
RELEASE_PARAMS = [pytest.param(v, marks=pytest.mark.xdist_group(f"graphs-{v}")) for v in RELEASES]


@pytest.fixture(scope="module")
def recipe():
    return load_recipe(str(RECIPE))


@pytest.fixture(scope="module")
def patched(request, tmp_path_factory, sglang_release, recipe):
    """patched(release): (interpreter, a copy of the release with its variant applied by the engine, the variant)."""
    return patched_releases(request, tmp_path_factory, sglang_release, recipe, RELEASES)


def run_probe(python: str, import_root: Path, params: dict, variant: str):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_", "SPECPATCH_"))}
    env.update(SPECPATCH_IMPORT_ROOT=str(import_root), SPECPATCH_TARGET_ROOT=str(import_root),
               SPECPATCH_PARAMS=json.dumps(params), SPECPATCH_VARIANT=variant, PYTHONWARNINGS="ignore")
    return subprocess.run([python, "-I", str(PROBES / PROBE)], env=env, cwd=import_root, capture_output=True,
                          text=True, timeout=600)


def marks(out: str, kind: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith(f"PROBE-{kind}:")]


@pytest.mark.parametrize("version", ["0.5.4", "0.5.5", "0.5.6", "0.5.7", "0.5.8", "0.5.9", "0.5.10", "0.5.11",
                                     "0.5.12"])
def test_the_graph_variants_use_the_graphs_probe(recipe, version):
    selection = recipe.select(Version(version))
    assert selection.variant == f"fallback-{version}"
    assert [p.path for p in selection.verify.probes][-1] == f"probes/{PROBE}"
    names = [s.name for s in selection.steps]
    for step in ("worker-plain-state", "worker-swap", "worker-stub-draft-input", "metrics-count-steps",
                 "metrics-log-steps", "metrics-internal-state"):
        assert step in names, names
    assert "worker-catch-up-padded" not in names, "the eager padded catch-up of the base steps is still there"
    adapters = (PROBES / "_releases.py").read_text()
    assert f'"fallback-{version}"' in adapters, "a variant without an adapter in _releases.py"


@pytest.mark.parametrize("version", RELEASE_PARAMS)
def test_graphs_probe_passes_on_the_patched_release(patched, recipe, version):
    python, root, variant = patched(version)
    run = run_probe(python, root, recipe.resolve_params({}), variant)
    assert run.returncode == 0 and not marks(run.stdout, "FAIL"), run.stdout + run.stderr[-3000:]
    oks = marks(run.stdout, "OK")
    assert len(oks) >= 20, run.stdout
    for mode in ("padded", "single", "skip"):
        assert any(f"({mode})" in line for line in oks), (mode, run.stdout)
    assert any("catch-up default 'skip'" in line for line in oks), run.stdout


@pytest.mark.parametrize("version", RELEASE_PARAMS)
def test_graphs_probe_fails_on_the_pristine_release(patched, sglang_release, recipe, version):
    python, _root, variant = patched(version)
    run = run_probe(python, sglang_release(version), recipe.resolve_params({}), variant)
    assert run.returncode != 0 and marks(run.stdout, "FAIL"), run.stdout


@pytest.mark.parametrize("version", RELEASE_PARAMS)
def test_graphs_probe_fails_with_the_wrong_adapter(patched, recipe, version):
    """The adapter matters: the other end's adapter fails, an unknown variant fails saying so."""
    python, root, variant = patched(version)
    other = "fallback-0.5.12" if version == "0.5.9" else "fallback-0.5.9"
    run = run_probe(python, root, recipe.resolve_params({}), other)
    assert run.returncode != 0 and marks(run.stdout, "FAIL"), run.stdout
    run = run_probe(python, root, recipe.resolve_params({}), "fallback-9.9")
    assert run.returncode != 0 and any("no release adapter for the variant `fallback-9.9`" in line
                                       for line in marks(run.stdout, "FAIL")), run.stdout


#: (name, regular expression matching once in the patched eagle_worker_v2.py, replacement, a fragment of the
#: PROBE-FAIL line expected); patterns use \s* for indentation, so they survive a re-indentation of the snippets
COMMON = [
    ("graph-captured-speculative", r"\n\s*model_runner\.spec_algorithm = SpeculativeAlgorithm\.NONE", "",
     "not DECODE"),
    ("graph-without-hidden", r"\n\s*target_args\.enable_return_hidden_states = True", "", "not FULL"),
    ("graphs-for-every-bs", r"if bs >= smallest_bs\]", "]", "not those > N"),
    ("dp-graphs-above-n", r"smallest_bs = threshold // self\.server_args\.dp_size \+ 1", "smallest_bs = threshold + 1",
     "not those from 9"),  # a rank of 9 to 16 requests would replay a padded graph
    ("graph-on-speculative-backend", r"\n\s*model_runner\.attn_backend = target_backend", "", "its own backend"),
    ("build-not-restored", r"\) = saved\n", ") = (*saved[:3], True, *saved[4:])\n", "not restored"),
    ("draft-backend-made-with-n", r"(\n\s*)draft_args\.speculative_num_steps = 0\n\s*draft_args\.speculative_num_draft_tokens = 1",
     r"\1pass", "not 0 / 1"),
    ("one-token-state-with-n", r"return \(0, 1, draft_extend_backend",
     "return (self.speculative_num_steps, self.speculative_num_draft_tokens, draft_extend_backend",
     "falls back (padded catch-up)"),  # the real draft extend then breaks on n rows for one-token inputs
    ("swap-not-restored", r"(finally:\n\s*)self\._spec_disable_swap\(saved\)", r"\1pass", "not restored"),
    ("tokens-not-strided", r"tokens\.repeat_interleave\(stride\)", "tokens.repeat(stride)", "i * num_draft_tokens"),
    ("accept-lens-2", r"accept_lens = torch\.ones_like\(batch\.seq_lens, dtype=torch\.int32\)",
     "accept_lens = torch.ones_like(batch.seq_lens, dtype=torch.int32) * 2", "accept_lens"),
    ("draft-extend-at-stride-n", r"self\.draft_worker\._draft_extend_for_decode\(batch, one_token\)",
     "self.draft_worker._draft_extend_for_decode(batch, result)", "tokens"),
    ("skip-runs-draft", r'if self\.spec_disable_catch_up == "skip":', "if False:", "skip: the draft extend ran"),
    ("no-stubs", r"self\._spec_disable_stub_draft_input\(batch, result\)", "pass", "skip catch-up"),
    ("hidden-kept", r"(\n\s*)logits_output\.hidden_states = None", r"\1pass", "copy_to_cpu unasked"),
    ("threshold-inclusive", r"return batch_size > threshold", "return batch_size >= threshold",
     "batch <= N speculates"),
    ("verify-done-after-forward",  # the scheduler would wait for the whole step before preparing the next batch
     r"verify_done\.record\(\)\n(\s*)saved = self\._spec_disable_swap\(self\._spec_disable_plain\)\n(\s*)try:\n"
     r"(\s*)out_cache_loc = self\._spec_disable_kv_slots\(batch\)\n"
     r"(\s*)target_result = self\._spec_disable_target_decode\(batch, out_cache_loc\)",
     r"pass\n\1saved = self._spec_disable_swap(self._spec_disable_plain)\n\2try:\n"
     r"\3out_cache_loc = self._spec_disable_kv_slots(batch)\n"
     r"\4target_result = self._spec_disable_target_decode(batch, out_cache_loc)\n\4verify_done.record()",
     "verify_done is recorded after the target's forward"),
    ("target-half-in-the-draft-scope",  # the whole build back inside draft TP (before 2026-12-04: and the MoE contexts)
     r"\n(\s*)(self\._spec_disable_plain = self\._spec_disable_build_plain_state\(threshold\))\n",
     r"\n\1with self._draft_worker.draft_tp_context(self._draft_worker.draft_runner.tp_group):\n\1    \2\n",
     "built inside the draft's scopes"),
]
#: release -> its breakages: the common ones, and those of what 0.5.5 (allocate_lens, no grammar, hidden states always
#: handed over, no one-token draft graph) and 0.5.10 - 0.5.12 do differently (NaN check, penalties, logprob rows, the
#: stride on the result, bonus_tokens, the adaptive and hybrid refusals)
BREAKAGES = {
    # (the real 0.5.5 draft extend breaks on a result at stride n, before it could read the wrong tokens)
    "0.5.5": [b if b[0] != "draft-extend-at-stride-n" else (*b[:3], "falls back (padded catch-up)")
              for b in COMMON if b[0] not in ("draft-backend-made-with-n", "hidden-kept", "dp-graphs-above-n")] + [
        ("no-nan-check", r"(logits_output = target_result\.logits_output\n)\s*if self\.enable_nan_detection:\n"
                         r"\s*detect_nan\(logits_output\)\n", r"\1", "NaN"),
        ("grammar-kept", r"acc_linear_penalties=None, grammars=None, vocab_mask=None", "acc_linear_penalties=None",
         "a grammar reached the target's sampler"),
        ("penalties-kept", r"acc_linear_penalties=None, grammars=None", "grammars=None", "penalties"),
        ("allocate-lens-dropped", r"(Passed on, as verify\(\) does\.\n)\s*allocate_lens=batch\.spec_info\.allocate_lens,",
         r"\1", "allocate_lens not passed on"),
        ("allocate-lens-not-in-draft-input", r"(verify_done=verify_done,\n)\s*allocate_lens=batch\.spec_info\.allocate_lens,",
         r"\1", "next draft input"),
        ("hidden-dropped", r"(\n(\s*)# no reqs\), so they are handed over, as verify hands over its own\.\n)",
         r"\1\2logits_output.hidden_states = None\n", "hidden states were dropped"),
        ("one-token-draft-graph-built", r"(\n(\s*)draft_extend_graph = None\n)",
         r"\1\2draft_extend_graph = EAGLEDraftExtendCudaGraphRunner(dw)\n", "draft-extend backend or graph was built"),
    ],
    "0.5.9": COMMON,
    "0.5.12": COMMON + [
        ("no-nan-check", r'maybe_detect_nan\(logits_output\.next_token_logits, "fallback: target model logits"\)',
         "pass", "NaN"),
        ("penalties-dropped", r"\n(\s*)sampling_info = batch\.sampling_info\n",
         r"\n\1sampling_info = dataclasses.replace(batch.sampling_info, acc_additive_penalties=None)\n", "penalties"),
        ("logprobs-not-rows", r"logits_output\.next_token_logprobs = logits_output\.next_token_logprobs\.reshape\(-1, 1\)",
         "pass", "a row per request"),
        ("no-stride", r"(records it on the result\)\.)\n\s*speculative_num_draft_tokens=self\.speculative_num_draft_tokens,",
         r"\1", "stride"),
        ("bonus-tokens-reordered", r"bonus_tokens=tokens, new_seq_lens", "bonus_tokens=tokens.flip(0), new_seq_lens",
         "bonus_tokens"),
        ("adaptive-accepted", r'if getattr\(server_args, "speculative_adaptive", False\):', "if False:",
         "--speculative-adaptive"),
        ("hybrid-accepted", r'getattr\(model_runner, "hybrid_gdn_config", None\) is not None\n(\s*)or ', r"False\n\1and ",
         "mamba/GDN"),
    ],
}


@pytest.fixture(scope="module")
def broken_runs(patched, recipe, tmp_path_factory):
    """broken_runs(release): {breakage: the probe's run on an overlay of the patched release with that breakage}."""
    done = {}

    def get(version):
        if version not in done:
            python, root, variant = patched(version)
            params = recipe.resolve_params({})
            done[version] = run_broken(root, WORKER, BREAKAGES[version], tmp_path_factory.mktemp,
                                       lambda broken: run_probe(python, broken, params, variant))
        return done[version]

    return get


@pytest.mark.parametrize("version,name,expected", [
    pytest.param(v, b[0], b[3], marks=pytest.mark.xdist_group(f"graphs-{v}"), id=f"{v}-{b[0]}")
    for v in RELEASES for b in BREAKAGES[v]])
def test_graphs_probe_fails_on_a_broken_fallback(broken_runs, version, name, expected):
    run = broken_runs(version)[name]
    assert not isinstance(run, str), run
    fails = marks(run.stdout, "FAIL")
    assert run.returncode != 0 and fails, f"the probe passed on the broken {version} fallback `{name}`:\n{run.stdout}"
    assert any(expected in line for line in fails), f"`{name}` failed, but not as expected:\n" + "\n".join(fails)


@pytest.mark.parametrize("version", ["0.5.4", "0.5.6", "0.5.9"])
def test_probe_through_specpatch_verify(cpuenv_python, recipe, sglang_release, tmp_path, version):
    """The variant's probes through patcher.verify.run_probes, the runner `specpatch verify` uses: it reads the
    variant from the target's ledger and hands it to the probes, with the variant's stubs (0.5.4, 0.5.6: vllm too)
    and shims (0.5.4: fast_topk). 0.5.4 is the oldest release (--enable-beta-spec, EAGLE only, no MoE context,
    _get_attention_backend without argument); 0.5.6 the oldest with IDLE batches (no MoE contexts around the draft
    calls, NPUGraphRunner elsewhere, ModelRunner.forward returning a tuple)."""
    from patcher import verify
    from patcher.api import apply_recipe

    python = cpuenv_python
    shutil.copytree(sglang_release(version) / "sglang", tmp_path / "sglang",
                    ignore=shutil.ignore_patterns("__pycache__"))
    target = find_target(tmp_path, assume_version=version)
    applied = apply_recipe(recipe, target, smoke=False)
    assert applied.record is not None and applied.record.variant == f"fallback-{version}", applied.outcome
    selection = recipe.select(target.version)
    checks = verify.run_probes(target, selection.verify, recipe.folder, python=python,
                               params=recipe.resolve_params({}))
    assert [c.status for c in checks] == ["passed"] * len(selection.verify.probes), \
        [(c.name, c.status, c.message, c.details) for c in checks]
