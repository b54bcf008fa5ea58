def _spec_disable_swap(self, state: tuple) -> tuple:
    """Make `state` the worker's step state (steps, draft tokens, backends, graphs); return the previous one."""
    # The fields upstream's apply_runtime_state switches, without its log line and without
    # rebuilding the top-k chain buffers (no draft step runs on the one-token state). The
    # worker, the scheduler and these fields live on one thread; server_args is not touched,
    # since the scheduler sizes the next step's KV reservation from it.
    dw = self._draft_worker
    model_runner = self._target_worker.model_runner
    previous = (
        self.speculative_num_steps,
        self.speculative_num_draft_tokens,
        dw.draft_extend_attn_backend,
        dw.cuda_graph_runner_for_draft_extend,
        model_runner.attn_backend,
        # <piece target-graph-get>
        model_runner.graph_runner,
        # </piece>
    )
    (
        self.speculative_num_steps,
        self.speculative_num_draft_tokens,
        dw.draft_extend_attn_backend,
        dw.cuda_graph_runner_for_draft_extend,
        model_runner.attn_backend,
        # <piece target-graph-set>
        model_runner.graph_runner,
        # </piece>
    ) = state
    dw.speculative_num_steps = self.speculative_num_steps
    dw.speculative_num_draft_tokens = self.speculative_num_draft_tokens
    # <piece draft-runner>
    # </piece>
    return previous
