# <piece view>
from sglang.srt.utils.common import get_bool_env_var

# </piece>
# <piece moe-a2a>
or cfg.moe_a2a_backend in ("none", "flashinfer")
# As this release's require_mlp_tp_gather: mori with a bounded receive buffer also
# gathers the per-rank batch sizes.
or (
    cfg.moe_a2a_backend == "mori"
    and get_bool_env_var("SGLANG_MORI_RECV_BOUND", "false")
)
# </piece>
# <piece eagle3-dp-attention>
if cfg.enable_dp_attention and cfg.speculative_algorithm == "EAGLE3":
    # With DP attention this release's EAGLE3 draft owns its attention
    # (EagleDraftWorker.draft_owns_attention) and the one-token state is built inside
    # draft_tp_context(..., owns_attention=True), where patch_tensor_parallel_group installs
    # the draft's attention-TP group as the TP group and sets the attention-DP, attention-CP,
    # expert-parallel and MoE data-parallel widths to 1: the target's one-token graph would
    # be captured with those collectives narrowed. Served where the narrowing changes
    # nothing the target uses (one attention-DP rank, no attention CP, EP or MoE DP).
    if cfg.dp_size > 1:
        problems.append(
            "EAGLE3 with DP attention (--dp-size > 1): the one-token target graph would be "
            "captured inside the EAGLE3 draft's attention-TP scope (wrong collectives); not "
            "served yet (EAGLE and NEXTN with DP attention are)"
        )
    narrowed = [
        f"{flag} {value}"
        for flag, value in (
            ("--attn-cp-size", cfg.attn_cp_size),
            ("--ep-size", cfg.ep_size),
            ("--moe-dp-size", cfg.moe_dp_size),
        )
        if value > 1
    ]
    if narrowed:
        problems.append(
            f"EAGLE3 with DP attention and {', '.join(narrowed)}: the EAGLE3 draft's scope "
            "(draft_tp_context with owns_attention) sets the attention context-parallel, "
            "expert-parallel and MoE data-parallel widths to 1, and the one-token target "
            "graph is captured inside it, so its context-parallel and MoE collectives would "
            "be recorded at the wrong width; not served (EAGLE and NEXTN are)"
        )
# </piece>
# <piece more-refusals>
if (
    cfg.elastic_ep_backend is not None
    and cfg.max_ep_size is not None
    and cfg.max_ep_size > cfg.tp_size
):
    # Elastic EP runtime scale-up (handle_elastic_ep's scaling_active): the scale-up is
    # finalized inside a non-verify target forward
    # (TpModelWorker._maybe_finalize_elastic_cuda_graph_scale), which a step without
    # speculation is. It recaptures the decode CUDA graph the model runner holds at that
    # moment (the one-token one, swapped in) and widens the DP gather, while the one-token
    # state built at start-up stays at the launch-time width.
    problems.append(
        f"Elastic EP runtime scale-up (--elastic-ep-backend {cfg.elastic_ep_backend} with "
        f"--max-ep-size {cfg.max_ep_size} > --tp-size {cfg.tp_size}): a scale-up, finalized "
        "inside a step's target forward, recaptures the decode CUDA graph swapped in at "
        "that moment and widens the DP gather, while the one-token state built at start-up "
        "is not rebuilt for the new width"
    )
# </piece>
# <piece catch-up>
if cfg.speculative_use_rejection_sampling and catch_up == "skip":
    # Rejection sampling as resolved: on ROCm, _handle_eagle_family turns it on by itself
    # for EAGLE with topk 1 (_should_auto_enable_hip_rejection_sampling). The next
    # speculative step's rejection sampling stacks the draft's probabilities (draft_probs),
    # which only the draft extend sets, so a step without speculation must run the
    # catch-up: unless SGLANG_SPEC_DISABLE_CATCH_UP asks for skip, the catch-up is "padded"
    # (the worker makes the same choice); an explicit skip is refused.
    if envs.SGLANG_SPEC_DISABLE_CATCH_UP.is_set():
        problems.append(
            "rejection sampling (--speculative-use-rejection-sampling, which sglang also "
            "turns on by itself on ROCm for EAGLE with topk 1) needs the draft catch-up: "
            "SGLANG_SPEC_DISABLE_CATCH_UP=skip leaves the draft's probabilities unset after "
            "a step without speculation; set SGLANG_SPEC_DISABLE_CATCH_UP=padded or single, "
            "or leave it unset (padded is then chosen)"
        )
    else:
        logger.info(
            f"{source}={threshold}: rejection sampling is on, so a step without speculation "
            "runs the one-token draft catch-up (SGLANG_SPEC_DISABLE_CATCH_UP defaults to "
            "padded with rejection sampling), which sets the draft's probabilities the next "
            "speculative step reads."
        )
# </piece>
