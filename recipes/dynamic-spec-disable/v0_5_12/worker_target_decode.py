def _spec_disable_target_decode(
    self, batch: ModelWorkerBatch, out_cache_loc: torch.Tensor
) -> GenerationBatchResult:
    """One eager DECODE forward of the target with spec_info=None, sampling one token each."""
    # spec_info must be None: in DECODE mode the attention backends read one as a draft
    # multi-step decode. The target's CUDA graphs were captured for TARGET_VERIFY (n
    # tokens per request) and its graph runner does not check the forward mode, so it is
    # set aside for the call and put back even when the forward raises. The penalties apply
    # as in any decode: from this release on, spec v2 accumulates them (prepare_for_decode)
    # and verify applies them, so the state is current. Grammar masks and the sampling
    # parameters apply as in any decode.
    # Logprobs are computed by the target's sampler when the batch asks for them, as in a
    # plain decode (the speculative path of this release returns them too).
    bs = len(batch.seq_lens)
    sampling_info = batch.sampling_info
    if batch.forward_mode.is_idle():
        target_batch = dataclasses.replace(
            batch,
            spec_info=None,
            capture_hidden_mode=CaptureHiddenMode.FULL,
            return_logprob=batch.return_logprob,
            sampling_info=sampling_info,
        )
    else:
        target_batch = dataclasses.replace(
            batch,
            forward_mode=ForwardMode.DECODE,
            input_ids=batch.spec_info.bonus_tokens.to(torch.int64),
            out_cache_loc=out_cache_loc,
            seq_lens=batch.seq_lens + 1,
            seq_lens_cpu=batch.seq_lens_cpu + 1,
            seq_lens_sum=batch.seq_lens_sum + bs,
            spec_info=None,
            capture_hidden_mode=CaptureHiddenMode.FULL,
            return_logprob=batch.return_logprob,
            sampling_info=sampling_info,
        )
    model_runner = self.target_worker.model_runner
    graph_runner = model_runner.graph_runner
    model_runner.graph_runner = None
    try:
        return self.target_worker.forward_batch_generation(target_batch)
    finally:
        model_runner.graph_runner = graph_runner
