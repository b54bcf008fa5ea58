# <piece target-graph>
# The target's graph runner class as upstream's own one-token (adaptive) target graphs pick it
# (_select_spec_graph_runner_cls): an out-of-tree platform's own runner, none where that
# platform captures no graphs.
graph_runner_cls = None
if capture_bs:
    graph_runner_cls = _select_spec_graph_runner_cls(
        builtin_runner_cls=lambda: NPUGraphRunner if _is_npu else DecodeCudaGraphRunner,
        oot_runner_cls=current_platform.get_graph_runner_cls,
    )
if graph_runner_cls is not None:
# </piece>
# <piece draft-scope>
with (
    draft_tp_context(dw.parallel_layout),
    speculative_moe_backend_context(),
    speculative_moe_a2a_backend_context(),
):
# </piece>
