def _spec_disable_build_plain_state(self, threshold: int) -> tuple:
    """Build, once at start-up, what a decode step without speculation runs on: one token per request."""
    # The target: an attention backend of its own and a DECODE CUDA graph, captured as a
    # server without speculation captures it (the model runner's speculative algorithm is
    # set aside while it is built) but with the hidden states the draft catch-up reads
    # (EAGLE3: the auxiliary layers), so that a step without speculation costs what a plain
    # decode step costs. The draft: a draft-extend attention backend and graph for one token
    # per request, as upstream's adaptive speculation builds a state per step count
    # (build_adaptive_runtime_state). Graphs are captured for the batch sizes a step above N
    # replays only: smaller batches always speculate. No draft multi-step decode backend is
    # built. The draft half is built in the scopes the draft worker builds its own graphs in
    # (draft TP, the speculative MoE backends), the target half outside them, as the target's
    # own graphs are: a MoE target's one-token graph runs on the target's MoE settings, not
    # the draft's.
    tic = time.perf_counter()
    before_mem = get_available_gpu_memory(self.device, self.gpu_id)
    sa = self.server_args
    dw = self._draft_worker
    model_runner = self._target_worker.model_runner
    # With DP attention N is compared with the batch summed over the ranks, and each rank
    # replays the graph of the largest rank's batch: a global batch above N has a rank of
    # ceil((N + 1) / dp_size) requests or more, so the sizes are captured from there.
    smallest_bs = threshold + 1
    # <piece dp-smallest-bs>
    if sa.enable_dp_attention:
        smallest_bs = threshold // sa.dp_size + 1
    # </piece>
    capture_bs = None
    # <piece graph-settings>
    # </piece>
    # <piece capture-bs>
    if not sa.disable_cuda_graph:
        capture_bs = [bs for bs in (sa.cuda_graph_bs or []) if bs >= smallest_bs]
    with self._override_worker_state(0, 1, cuda_graph_bs=capture_bs):
    # </piece>
        # <piece draft-scope>
        with dw.draft_tp_context(
            dw.draft_runner.tp_group
        ), speculative_moe_backend_context(), speculative_moe_a2a_backend_context():
        # </piece>
            # <piece draft-extend-backend>
            draft_extend_backend = DraftBackendFactory(
                sa, dw.draft_runner, self.topk, 0
            ).create_draft_extend_backend()
            # </piece>
            draft_extend_graph = None
            if self.spec_disable_catch_up != "skip":
                dw.draft_extend_attn_backend = draft_extend_backend
                # <piece draft-graph>
                dw.init_cuda_graphs()
                # </piece>
                draft_extend_graph = dw.cuda_graph_runner_for_draft_extend
        runner_args = model_runner.server_args
        saved = (
            model_runner.spec_algorithm,
            model_runner.init_new_workspace,
            runner_args.enable_return_hidden_states,
        )
        model_runner.spec_algorithm = SpeculativeAlgorithm.NONE
        # <piece hidden-states-on>
        runner_args.enable_return_hidden_states = True
        # </piece>
        try:
            target_backend = model_runner._get_attention_backend(init_new_workspace=True)
            target_graph = None
            # <piece target-graph>
            if not runner_args.disable_cuda_graph:
                graph_runner_cls = NPUGraphRunner if _is_npu else CudaGraphRunner
            # </piece>
                target_graph = graph_runner_cls(model_runner, attn_backend=target_backend)
        finally:
            # <piece restore-runner>
            (
                model_runner.spec_algorithm,
                model_runner.init_new_workspace,
                runner_args.enable_return_hidden_states,
            ) = saved
            # </piece>
    # <piece restore-bs>
    # </piece>
    after_mem = get_available_gpu_memory(self.device, self.gpu_id)
    log_info_on_rank0(
        logger,
        "Dynamic speculation disable: built the one-token state for batches above "
        f"{threshold} (CUDA graph batch sizes {capture_bs}) in "
        f"{time.perf_counter() - tic:.2f} s, mem={(before_mem - after_mem):.2f} GB",
    )
    return (0, 1, draft_extend_backend, draft_extend_graph, target_backend, target_graph)
