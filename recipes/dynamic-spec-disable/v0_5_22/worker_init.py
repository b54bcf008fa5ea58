# <piece dp-check>
# DP attention as resolved: an attention-DP width (get_parallel().attn_dp_enabled), as this
# release's draft worker and require_mlp_tp_gather read it; enable_dp_attention is the
# deprecated spelling, which the resolution declares False.
if get_parallel().attn_dp_enabled and not require_mlp_tp_gather():
# </piece>
# <piece scope-dp>
if get_parallel().attn_dp_enabled
# </piece>
