# <piece adaptive-check>
if get_spec().speculative_adaptive:
    # Read as resolved: the field keeps the input, and upstream may declare adaptive
    # speculation off for set-ups it does not support (_maybe_disable_adaptive). Adaptive
    # speculation switches the step count (and the stride the scheduler reads) by batch
    # size and acceptance rate; a fallback step would feed it zero correct drafts.
    raise ValueError(
        "speculative_disable_batch_threshold cannot be combined with --speculative-adaptive."
    )
# </piece>
# <piece dp-check>
# DP attention as resolved (get_parallel(): DeepSeek overrides and context parallel declare
# it; the field keeps the input); require_mlp_tp_gather reads the namespaces itself here.
if get_parallel().enable_dp_attention and not require_mlp_tp_gather():
# </piece>
# <piece scope-dp>
if get_parallel().enable_dp_attention
# </piece>
