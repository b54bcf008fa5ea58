"""Regenerate the fallback-patch variants of dynamic-spec-disable (0.5.4-0.5.13) in recipes/dynamic-spec-disable/variants.yaml.

The recipe format has no "top-level steps with a few replaced" form: a variant's `steps` replace the recipe's
whole list. The fallback variants are the 0.5.9 steps (recipes/dynamic-spec-disable.yaml) with per-release
replacements, so they are generated from it: run this after changing the 0.5.9 steps, then review `git diff`.
The part of variants.yaml between the BEGIN/END markers is rewritten; the rest is left as it is.

    python scripts/gen_fallback_variants.py
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
RECIPE = ROOT / "recipes" / "dynamic-spec-disable.yaml"
VARIANTS = ROOT / "recipes" / "dynamic-spec-disable" / "variants.yaml"
BEGIN = "# ---- BEGIN generated fallback variants (scripts/gen_fallback_variants.py) ----"
END = "# ---- END generated fallback variants ----"

# name, versions, description, {step name: {option: value}} replacements, verify (None: the recipe's)
FALLBACK_VARIANTS = [
    dict(
        name="fallback-0.5.4",
        versions=">=0.5.4,<0.5.5",
        description=(
            "The 0.5.5 port with 0.5.4's differences: the spec-v2 worker is selected by --enable-beta-spec\n"
            "(not SGLANG_ENABLE_SPEC_V2, which does not exist yet) and serves EAGLE only, so the start-up check\n"
            "asks for those; the environment variables go after SGLANG_ENABLE_OVERLAP_PLAN_STREAM; the\n"
            "worker is the 0.5.5 one otherwise (allocate_lens, decode arm first, no IDLE handling, no grammar).\n"
            "On a CPU machine the worker imports only with the fast_topk shim (shims/spec_utils_fast_topk.py)."
        ),
        replace={
            "env-threshold": {"after": "SGLANG_ENABLE_OVERLAP_PLAN_STREAM"},
            "server-args-check": {"code_file": "v0_5_4/server_args_check.py"},
            "worker-fallback": {"code_file": "v0_5_5/worker_fallback.py"},
            "worker-target-decode": {"code_file": "v0_5_5/worker_target_decode.py"},
            "worker-catch-up-single": {"code_file": "v0_5_6/worker_catch_up_single.py"},
            "worker-route-guard": {"branch_if": "model_worker_batch.forward_mode.is_decode()", "arm": "body"},
        },
        probe="probes/worker_probe_compat.py",
        server_args_probe="probes/server_args_probe_compat.py",
        extra_stubs=["vllm"],
        shims=["shims/spec_utils_fast_topk.py"],
    ),
    dict(
        name="fallback-0.5.5",
        versions=">=0.5.5,<0.5.6",
        description=(
            "The 0.5.6 port with 0.5.5's differences: the worker's first test is `forward_mode.is_decode()`\n"
            "(decode arm first), so the guard goes at the top of that arm; KV space is tracked with\n"
            "allocate_lens, which the fallback passes on in next_draft_input and the result as verify does; the\n"
            "target decode leaves grammar out as this release's speculative path does (the scheduler never\n"
            "advances a grammar for spec-v2 tokens); DP attention is refused (no IDLE handling before 0.5.6)."
        ),
        replace={
            "env-threshold": {"after": "SGLANG_ENABLE_SPEC_V2"},
            "server-args-check": {"code_file": "v0_5_5/server_args_check.py"},
            "worker-fallback": {"code_file": "v0_5_5/worker_fallback.py"},
            "worker-target-decode": {"code_file": "v0_5_5/worker_target_decode.py"},
            "worker-catch-up-single": {"code_file": "v0_5_6/worker_catch_up_single.py"},
            "worker-route-guard": {"branch_if": "model_worker_batch.forward_mode.is_decode()", "arm": "body"},
        },
        probe="probes/worker_probe_compat.py",
        server_args_probe="probes/server_args_probe_compat.py",
        extra_stubs=["vllm"],
    ),
    dict(
        name="fallback-0.5.6",
        versions=">=0.5.6,<0.5.7",
        description=(
            "The 0.5.9 fallback patch with 0.5.6's differences: the environment variables go after\n"
            "SGLANG_ENABLE_SPEC_V2 (0.5.6 has no SGLANG_SPEC_ENABLE_STRICT_FILTER_CHECK); the start-up check has\n"
            "no multi-layer EAGLE and no SGLANG_SCHEDULER_SKIP_ALL_GATHER to look at (neither exists); the draft\n"
            "catch-up runs without MoE or draft-TP contexts, as 0.5.6's own speculative path; the one-token\n"
            "catch-up uses the _per_batch names and ModelRunner.forward's (logits, can_run_graph) return."
        ),
        replace={
            "env-threshold": {"after": "SGLANG_ENABLE_SPEC_V2"},
            "server-args-check": {"code_file": "v0_5_6/server_args_check.py"},
            "worker-fallback": {"code_file": "v0_5_6/worker_fallback.py"},
            "worker-catch-up-single": {"code_file": "v0_5_6/worker_catch_up_single.py"},
        },
        probe="probes/worker_probe_compat.py",
        server_args_probe="probes/server_args_probe_compat.py",
        extra_stubs=["vllm"],
    ),
    dict(
        name="fallback-0.5.13",
        versions=">=0.5.13,<0.5.14",
        description=(
            "The 0.5.12 port on 0.5.13's worker contract: forward_batch_generation(batch, on_publish) takes the\n"
            "ScheduleBatch itself (no ModelWorkerBatch), so the target decode and the one-token catch-up run on\n"
            "copies of it and every snippet names ScheduleBatch; the new sequence lengths go to on_publish before\n"
            "the draft catch-up (as after verify) and always on the result's new_seq_lens (no verify_done, none on\n"
            "the draft input); the CPU copies of the sequence lengths may be absent (needs_cpu_seq_lens); NaN/Inf\n"
            "checks as this release's verify; hybrid lightning-attention targets refused with mamba/GDN. EAGLE and\n"
            "EAGLE3 always run EAGLEWorkerV2 here, so spec v2 off / --disable-overlap-schedule (its synchronous\n"
            "path) is served, not refused; --speculative-adaptive is refused as on 0.5.12."
        ),
        replace={
            "server-args-check": {"code_file": "v0_5_13/server_args_check.py"},
            "worker-init-method": {"code_file": "v0_5_13/worker_init.py"},
            "worker-route": {"code_file": "v0_5_13/worker_route.py"},
            "worker-fallback": {"code_file": "v0_5_13/worker_fallback.py"},
            "worker-kv-slots": {"code_file": "v0_5_13/worker_slots.py"},
            "worker-target-decode": {"code_file": "v0_5_13/worker_target_decode.py"},
            "worker-catch-up-padded": {"code_file": "v0_5_13/worker_catch_up_padded.py"},
            "worker-catch-up-single": {"code_file": "v0_5_13/worker_catch_up_single.py"},
            "worker-route-guard": {
                "branch_if": "batch.forward_mode.is_extend() or batch.is_extend_in_batch",
                "condition": "self._speculation_disabled_for(batch)",
                "call": "self._forward_without_speculation(batch, on_publish)",
            },
        },
        probe="probes/worker_probe_on_publish.py",
        server_args_probe="probes/server_args_probe_compat.py",
    ),
    dict(
        name="fallback-0.5.12",
        versions=">=0.5.12,<0.5.13",
        description=(
            "The 0.5.11 port with 0.5.12's differences: the draft input's token is bonus_tokens (was\n"
            "verified_id); the result carries speculative_num_draft_tokens, the stride the scheduler now reads,\n"
            "and the target's indexer top-k capture as verify does; upstream adaptive speculation, now on the\n"
            "spec-v2 worker, is refused beside the threshold (it switches steps and stride by acceptance rate)."
        ),
        replace={
            "server-args-check": {"code_file": "v0_5_12/server_args_check.py"},
            "worker-init-method": {"code_file": "v0_5_12/worker_init.py"},
            "worker-fallback": {"code_file": "v0_5_12/worker_fallback.py"},
            "worker-target-decode": {"code_file": "v0_5_12/worker_target_decode.py"},
            "worker-catch-up-single": {"code_file": "v0_5_12/worker_catch_up_single.py"},
        },
        probe="probes/worker_probe_compat.py",
        server_args_probe="probes/server_args_probe_compat.py",
    ),
    dict(
        name="fallback-0.5.11",
        versions=">=0.5.11,<0.5.12",
        description=(
            "The 0.5.10 port with 0.5.11's differences: spec v2 now accumulates the penalties and verify applies\n"
            "them, so the fallback's decode keeps them; the target's routed-expert capture is handed to the\n"
            "scheduler as verify does. (Spec v2 is on by default from this release; the start-up check already\n"
            "refuses the v1 worker, which topk > 1, SGLANG_ENABLE_SPEC_V2=0 or --disable-overlap-schedule select.)"
        ),
        replace={
            "worker-init-method": {"code_file": "v0_5_10/worker_init.py"},
            "worker-fallback": {"code_file": "v0_5_11/worker_fallback.py"},
            "worker-target-decode": {"code_file": "v0_5_11/worker_target_decode.py"},
        },
        probe="probes/worker_probe_compat.py",
        server_args_probe="probes/server_args_probe_compat.py",
    ),
    dict(
        name="fallback-0.5.10",
        versions=">=0.5.10,<0.5.11",
        description=(
            "The 0.5.9 fallback patch with 0.5.10's differences: the stale penalties to leave out are\n"
            "acc_additive_penalties / acc_scaling_penalties; NaN is checked as 0.5.10's verify does\n"
            "(maybe_detect_nan, SGLANG_SPEC_NAN_DETECTION; the worker has no enable_nan_detection); spec-v2\n"
            "decode returns logprobs in this release, so the target computes them when the batch asks and the\n"
            "fallback hands them over as rows of one per request; hybrid mamba/GDN targets (whose state\n"
            "verify updates) are refused at start-up."
        ),
        replace={
            "worker-init-method": {"code_file": "v0_5_10/worker_init.py"},
            "worker-fallback": {"code_file": "v0_5_10/worker_fallback.py"},
            "worker-target-decode": {"code_file": "v0_5_10/worker_target_decode.py"},
        },
        probe="probes/worker_probe_compat.py",
    ),
    dict(
        name="fallback-0.5.7",
        versions=">=0.5.7,<0.5.8",
        description=(
            "The 0.5.9 fallback patch with 0.5.7's differences: the one-token catch-up's EagleDraftInput uses\n"
            "the _per_batch names, and the draft catch-up runs inside the MoE contexts only, as 0.5.7's own\n"
            "speculative path does (it wraps no draft call in draft_tp_context; 0.5.8 does)."
        ),
        replace={
            "worker-fallback": {"code_file": "v0_5_7/worker_fallback.py"},
            "worker-catch-up-single": {"code_file": "v0_5_8/worker_catch_up_single.py"},
        },
        probe="probes/worker_probe_compat.py",
        extra_stubs=["vllm"],  # 0.5.7 imports vllm (GPU-only) in layers/activation.py on the way to the worker
    ),
    dict(
        name="fallback-0.5.9",
        versions=">=0.5.9,<0.5.10",
        description="The recipe's own steps and checks, written for 0.5.9.",
        replace=None,  # no steps, no verify: the recipe's top-level ones
    ),
    dict(
        name="fallback-0.5.8",
        versions=">=0.5.8,<0.5.9",
        description=(
            "The 0.5.9 fallback patch. 0.5.8 differs only where the one-token draft catch-up builds its\n"
            "EagleDraftInput: the per-request token counts are still named num_tokens_per_batch /\n"
            "num_tokens_for_logprob_per_batch (0.5.9 renamed them _per_req)."
        ),
        replace={"worker-catch-up-single": {"code_file": "v0_5_8/worker_catch_up_single.py"}},
        probe="probes/worker_probe_compat.py",
    ),
]


def _steps(raw: dict, replace: dict) -> list:
    steps = copy.deepcopy(raw["steps"])
    names = {s.get("name") for s in steps}
    unknown = set(replace) - names
    if unknown:
        raise SystemExit(f"replacements for steps the recipe does not have: {sorted(unknown)}")
    for step in steps:
        for key, value in replace.get(step.get("name"), {}).items():
            if key == "code_file":
                step.pop("code", None)
            step[key] = value
    return steps


def _verify(raw: dict, probe: str | None, extra_stubs: list | None = None, server_args_probe: str | None = None,
            shims: list | None = None) -> dict:
    verify = copy.deepcopy(raw["verify"])
    if shims:
        verify["shims"] = list(shims)
    if server_args_probe:
        verify["probes"] = [dict(p, path=server_args_probe) if p["path"].endswith("server_args_probe.py") else p
                            for p in verify["probes"]]
    verify["stubs"] = list(verify.get("stubs", [])) + [s for s in extra_stubs or [] if s not in verify.get("stubs", [])]
    if probe:
        verify["probes"] = [
            dict(p, path=probe) if p["path"].endswith("worker_probe.py") else p for p in verify["probes"]
        ]
    return verify


class _Dumper(yaml.SafeDumper):
    """Multi-line strings as literal blocks (`|`), as a person would write them."""


_Dumper.add_representer(str, lambda d, v: d.represent_scalar(
    "tag:yaml.org,2002:str", v, style="|" if "\n" in v else None))


def generate() -> str:
    raw = yaml.safe_load(RECIPE.read_text(encoding="utf-8"))
    out = []
    for v in FALLBACK_VARIANTS:
        if v["replace"] is None:
            out.append({"name": v["name"], "versions": v["versions"], "description": v["description"] + "\n"})
            continue
        out.append({
            "name": v["name"], "versions": v["versions"], "description": v["description"] + "\n",
            "steps": _steps(raw, v["replace"]), "verify": _verify(raw, v.get("probe"), v.get("extra_stubs"), v.get("server_args_probe"),
                                                          v.get("shims")),
        })
    body = yaml.dump(out, Dumper=_Dumper, sort_keys=False, width=118, allow_unicode=True)
    return f"{BEGIN}\n{body}{END}\n"


def main() -> None:
    text = VARIANTS.read_text(encoding="utf-8")
    block = generate()
    if BEGIN in text:
        head, rest = text.split(BEGIN, 1)
        tail = rest.split(END, 1)[1].lstrip("\n")
        text = head + block + ("\n" + tail if tail else "")
    else:
        text = text.rstrip("\n") + "\n\n" + block
    VARIANTS.write_text(text, encoding="utf-8")
    print(f"wrote {len(FALLBACK_VARIANTS)} variants into {VARIANTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
