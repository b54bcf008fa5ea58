def _spec_disable_target_decode(
    # <piece signature>
    self, batch: ModelWorkerBatch, out_cache_loc: torch.Tensor
    # </piece>
) -> GenerationBatchResult:
    # <piece docstring>
    """One eager DECODE forward of the target with spec_info=None, sampling one token each."""
    # </piece>
    # spec_info must be None: in DECODE mode the attention backends read one as a draft
    # <piece notes>
    # multi-step decode. The target's CUDA graphs were captured for TARGET_VERIFY (n
    # tokens per request) and its graph runner does not check the forward mode, so it is
    # set aside for the call and put back even when the forward raises. The penalizers are
    # left out: spec v2 never feeds them decode tokens, so their state is stale
    # (min_new_tokens would mask EOS for ever), and the speculative path does not apply
    # them either. Grammar masks and the sampling parameters apply as in any decode;
    # logprobs are not computed, as on the speculative path of this release.
    # </piece>
    bs = len(batch.seq_lens)
    # <piece dp-counts>
    # </piece>
    # <piece sampling>
    sampling_info = batch.sampling_info
    if sampling_info is not None:
        sampling_info = dataclasses.replace(sampling_info, acc_linear_penalties=None)
    # </piece>
    if batch.forward_mode.is_idle():
        target_batch = dataclasses.replace(
            batch,
            spec_info=None,
            capture_hidden_mode=CaptureHiddenMode.FULL,
            # <piece idle-tail>
            return_logprob=False,
            sampling_info=sampling_info,
            # </piece>
        )
    else:
        target_batch = dataclasses.replace(
            batch,
            forward_mode=ForwardMode.DECODE,
            # <piece input-ids>
            input_ids=batch.spec_info.verified_id.to(torch.int64),
            # </piece>
            out_cache_loc=out_cache_loc,
            seq_lens=batch.seq_lens + 1,
            # <piece seq-lens-cpu>
            seq_lens_cpu=batch.seq_lens_cpu + 1,
            seq_lens_sum=batch.seq_lens_sum + bs,
            # </piece>
            spec_info=None,
            capture_hidden_mode=CaptureHiddenMode.FULL,
            # <piece decode-tail>
            return_logprob=False,
            sampling_info=sampling_info,
            # </piece>
        )
    # <piece forward>
    model_runner = self.target_worker.model_runner
    graph_runner = model_runner.graph_runner
    model_runner.graph_runner = None
    try:
        return self.target_worker.forward_batch_generation(target_batch)
    finally:
        model_runner.graph_runner = graph_runner
    # </piece>
