# <piece target-graph-get>
model_runner.decode_cuda_graph_runner,
# </piece>
# <piece target-graph-set>
model_runner.decode_cuda_graph_runner,
# </piece>
# <piece draft-runner>
if dw.draft_extend_attn_backend is not None:
    # The draft extend reads the runner's backend (as apply_runtime_state keeps it).
    dw.draft_runner.attn_backend = dw.draft_extend_attn_backend
# </piece>
