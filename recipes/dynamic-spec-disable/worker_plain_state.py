def _spec_disable_build_plain_state(self, threshold: int) -> tuple:
    """Build, once at start-up, what a decode step without speculation runs on: one token per request."""
    # The target: an attention backend of its own and a DECODE CUDA graph, captured as a
    # server without speculation captures it (the model runner's speculative algorithm is
    # set aside while it is built) but with the hidden states the draft catch-up reads
    # (EAGLE3: the auxiliary layers), so that a step without speculation costs what a plain
    # decode step costs. The draft: a draft-extend attention backend and graph for one token
    # per request (the graph runner captures speculative_num_steps + 1 tokens per request,
    # so the steps read 0 while it is built), only where the speculative path has a
    # draft-extend graph and the catch-up runs ("skip" runs none). Graphs are captured for
    # the batch sizes a step above N replays only: smaller batches always speculate. 0.5.9's graph runners
    # capture on the model runner's (and the draft worker's) attention backend and read the
    # step count and batch sizes from server_args, so those are switched for the build and
    # restored, also when a capture raises. The draft half is built in the scopes the draft
    # worker builds its own graphs in (draft TP, the speculative MoE backends), the target half
    # outside them, as the target's own graphs are: a MoE target's one-token graph runs on the
    # target's MoE settings, not the draft's.
    tic = time.perf_counter()
    before_mem = get_available_gpu_memory(self.device, self.gpu_id)
    dw = self._draft_worker
    model_runner = self._target_worker.model_runner
    target_args = model_runner.server_args
    draft_args = dw.draft_runner.server_args
    # With DP attention N is compared with the batch summed over the ranks, and each rank
    # replays the graph of the largest rank's batch: a global batch above N has a rank of
    # ceil((N + 1) / dp_size) requests or more, so the sizes are captured from there.
    smallest_bs = threshold + 1
    if self.server_args.enable_dp_attention:
        smallest_bs = threshold // self.server_args.dp_size + 1
    capture_bs = []
    if not target_args.disable_cuda_graph:
        capture_bs = [bs for bs in (target_args.cuda_graph_bs or []) if bs >= smallest_bs]
    draft_extend_backend = dw.draft_extend_attn_backend
    draft_extend_graph = None
    # <piece draft-scope>
    with dw.draft_tp_context(
        dw.draft_runner.tp_group
    ), speculative_moe_backend_context(), speculative_moe_a2a_backend_context():
    # </piece>
        # <piece draft-graph>
        if (
            self.spec_disable_catch_up != "skip"
            and capture_bs
            and dw.cuda_graph_runner_for_draft_extend is not None
        ):
            # The draft-extend backend reads the step count and draft tokens from server_args
            # when it is made (triton: the tokens per request of its graph metadata), the graph
            # runner when it is captured: both see the one-token values.
            saved_draft = (
                draft_args.speculative_num_steps,
                draft_args.speculative_num_draft_tokens,
                draft_args.cuda_graph_bs,
                dw.draft_extend_attn_backend,
            )
            try:
                draft_args.speculative_num_steps = 0
                draft_args.speculative_num_draft_tokens = 1
                draft_args.cuda_graph_bs = list(capture_bs)
                draft_extend_backend = DraftBackendFactory(
                    draft_args, dw.draft_runner, self.topk, 0
                ).create_draft_extend_backend()
                dw.draft_extend_attn_backend = draft_extend_backend
                draft_graph_cls = (
                    EAGLEDraftExtendNpuGraphRunner if _is_npu else EAGLEDraftExtendCudaGraphRunner
                )
                draft_extend_graph = draft_graph_cls(dw)
            finally:
                (
                    draft_args.speculative_num_steps,
                    draft_args.speculative_num_draft_tokens,
                    draft_args.cuda_graph_bs,
                    dw.draft_extend_attn_backend,
                ) = saved_draft
        # </piece>
    saved = (
        model_runner.spec_algorithm,
        model_runner.init_new_workspace,
        model_runner.attn_backend,
        target_args.enable_return_hidden_states,
        target_args.cuda_graph_bs,
    )
    try:
        model_runner.spec_algorithm = SpeculativeAlgorithm.NONE
        target_args.enable_return_hidden_states = True
        # <piece target-backend>
        target_backend = model_runner._get_attention_backend(init_new_workspace=True)
        # </piece>
        target_graph = None
        if capture_bs:
            target_args.cuda_graph_bs = list(capture_bs)
            model_runner.attn_backend = target_backend
            # <piece target-graph-class>
            graph_runner_cls = NPUGraphRunner if _is_npu else CudaGraphRunner
            # </piece>
            target_graph = graph_runner_cls(model_runner)
    finally:
        (
            model_runner.spec_algorithm,
            model_runner.init_new_workspace,
            model_runner.attn_backend,
            target_args.enable_return_hidden_states,
            target_args.cuda_graph_bs,
        ) = saved
    after_mem = get_available_gpu_memory(self.device, self.gpu_id)
    logger.info(
        "Dynamic speculation disable: built the one-token state for batches above "
        f"{threshold} (CUDA graph batch sizes {capture_bs or None}, draft-extend graph "
        f"{'yes' if draft_extend_graph is not None else 'no'}) in "
        f"{time.perf_counter() - tic:.2f} s, mem={(before_mem - after_mem):.2f} GB"
    )
    return (0, 1, draft_extend_backend, draft_extend_graph, target_backend, target_graph)
