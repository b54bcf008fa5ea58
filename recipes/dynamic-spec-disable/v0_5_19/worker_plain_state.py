# <piece dp-smallest-bs>
# DP attention and its width as resolved (get_parallel()), not the record's fields, which
# keep the input (a DeepSeek override or context parallel may declare DP attention).
if get_parallel().enable_dp_attention:
    smallest_bs = threshold // get_parallel().dp_size + 1
# </piece>
