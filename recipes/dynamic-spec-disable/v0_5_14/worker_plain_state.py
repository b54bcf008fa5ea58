# <piece graph-settings>
# This release's CUDA graph settings are per phase (cuda_graph_config); the batch sizes
# captured are the decode phase's, which _override_worker_state does not narrow.
decode_graphs = sa.cuda_graph_config.decode
# </piece>
# <piece capture-bs>
if not check_cuda_graph_backend(Phase.DECODE, Backend.DISABLED):
    capture_bs = [bs for bs in (decode_graphs.bs or []) if bs >= smallest_bs]
saved_bs = decode_graphs.bs
if capture_bs:
    decode_graphs.bs = capture_bs
with self._override_worker_state(0, 1, cuda_graph_bs=capture_bs):
# </piece>
# <piece draft-graph>
# _override_worker_state leaves the speculative draft-extend graph (n tokens
# per request) in place: without batch sizes to capture, the one-token state
# holds none.
dw.cuda_graph_runner_for_draft_extend = None
if capture_bs:
    dw._capture_cuda_graphs()
# </piece>
# <piece target-graph>
if capture_bs:
    graph_runner_cls = NPUGraphRunner if _is_npu else DecodeCudaGraphRunner
# </piece>
# <piece restore-bs>
decode_graphs.bs = saved_bs
# </piece>
