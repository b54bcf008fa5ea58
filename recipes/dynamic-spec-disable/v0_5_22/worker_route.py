# <piece dp-size>
# DP attention as resolved (get_parallel().attn_dp_enabled: enable_dp_attention is the
# deprecated spelling, declared False by the resolution): every rank must compare the same,
# global size.
if get_parallel().attn_dp_enabled and batch.global_num_tokens is not None:
# </piece>
