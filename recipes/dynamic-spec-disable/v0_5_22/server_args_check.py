# <piece view>
# </piece>
# <piece dp-attention>
# DP attention is an attention-DP width here (--attn-dp-size N; the deprecated spelling
# --dp-size N --enable-dp-attention is resolved into it before this check runs, and the
# resolution declares enable_dp_attention False).
if cfg.attn_dp_size > 1:
# </piece>
# <piece moe-a2a>
or cfg.moe_a2a_backend in ("none", "flashinfer", "flashinfer_megamoe")
# As this release's require_mlp_tp_gather: mori with its EPv2 path (SGLANG_MORI_EP_V2,
# on by default) or a bounded receive buffer also gathers the per-rank batch sizes.
or (
    cfg.moe_a2a_backend == "mori"
    and (envs.SGLANG_MORI_EP_V2.get() or envs.SGLANG_MORI_RECV_BOUND.get())
)
# </piece>
# <piece dense-tp>
# The DP ranks: replicas times attention-DP groups (num_dp_ranks).
or cfg.moe_dense_tp_size > cfg.tp_size // (cfg.dp_size * cfg.attn_dp_size)
# </piece>
# <piece eagle3-dp-attention>
if cfg.attn_dp_size > 1 and cfg.speculative_algorithm == "EAGLE3":
    # With attention DP this release's EAGLE3 draft owns its attention
    # (EagleDraftWorker.draft_owns_attention: get_parallel().attn_dp_enabled) and its scope,
    # draft_tp_context(owns_attention=True), installs the attention-TP group as the TP group
    # and sets the attention-DP, attention-CP, expert-parallel and MoE data-parallel widths
    # to 1. The one-token state's target half is built outside that scope; the refusal
    # waits for a multi-GPU run.
    problems.append(
        "EAGLE3 with DP attention (--attn-dp-size > 1, or the deprecated --dp-size with "
        "--enable-dp-attention): the one-token target graph would be captured inside the "
        "EAGLE3 draft's attention-TP scope (wrong collectives); not served yet (EAGLE and "
        "NEXTN with DP attention are)"
    )
# </piece>
