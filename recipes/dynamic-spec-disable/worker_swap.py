def _spec_disable_swap(self, state: tuple) -> tuple:
    # <piece doc>
    """Make `state` the step state (draft steps and tokens, backends, graphs); return the previous one."""
    # The draft worker's step count and draft-token count (its draft extend reads them),
    # its draft-extend attention backend and graph, the target model runner's attention
    # backend and graph runner (ForwardBatch.init_new and _forward_raw read them). The
    # worker's own speculative_num_draft_tokens is not switched: the scheduler reads the
    # stride of the result's tokens from it, after this step. The worker, the scheduler and
    # these fields live on one thread.
    # </piece>
    dw = self._draft_worker
    model_runner = self._target_worker.model_runner
    previous = (
        {{steps_of}}.speculative_num_steps,
        {{steps_of}}.speculative_num_draft_tokens,
        dw.draft_extend_attn_backend,
        dw.cuda_graph_runner_for_draft_extend,
        model_runner.attn_backend,
        # <piece target-graph-get>
        model_runner.graph_runner,
        # </piece>
    )
    (
        {{steps_of}}.speculative_num_steps,
        {{steps_of}}.speculative_num_draft_tokens,
        dw.draft_extend_attn_backend,
        dw.cuda_graph_runner_for_draft_extend,
        model_runner.attn_backend,
        # <piece target-graph-set>
        model_runner.graph_runner,
        # </piece>
    ) = state
    # <piece sync>
    # </piece>
    # <piece draft-runner>
    # </piece>
    return previous
