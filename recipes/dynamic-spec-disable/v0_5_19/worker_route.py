# <piece dp-size>
# DP attention as resolved (get_parallel()), not the record's field, which keeps the input
# (a DeepSeek override or context parallel may declare it): every rank must compare the
# same, global size.
if get_parallel().enable_dp_attention and batch.global_num_tokens is not None:
# </piece>
