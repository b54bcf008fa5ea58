def _spec_disable_target_decode(
    # <piece signature>
    self, batch: ModelWorkerBatch, out_cache_loc: torch.Tensor
    # </piece>
) -> GenerationBatchResult:
    # <piece docstring>
    """One DECODE forward of the target with spec_info=None, sampling one token each."""
    # </piece>
    # spec_info must be None: in DECODE mode the attention backends read one as a draft
    # <piece notes>
    # multi-step decode. The caller has swapped in the target's DECODE CUDA graph and its
    # attention backend (captured at start-up for one token per request with the hidden
    # states the draft catch-up reads); the forward runs on a copy of the batch, so the
    # batch keeps the values the draft catch-up reads after this. The penalizers are left
    # out: spec v2 never feeds them decode tokens in this release, so their state is stale
    # (min_new_tokens would mask EOS for ever), and the speculative path does not apply
    # them either. Grammar masks and the sampling parameters apply as in any decode;
    # logprobs are not computed, as on the speculative path of this release.
    # The DP attention token counts are copied: the forward aligns them in place, and the
    # scheduler's batch (and its draft catch-up) must keep its own.
    # </piece>
    bs = len(batch.seq_lens)
    dp_counts = dict(
        global_num_tokens=None
        if batch.global_num_tokens is None
        else list(batch.global_num_tokens),
        global_num_tokens_for_logprob=None
        if batch.global_num_tokens_for_logprob is None
        else list(batch.global_num_tokens_for_logprob),
    )
    # <piece sampling>
    sampling_info = batch.sampling_info
    if sampling_info is not None:
        sampling_info = dataclasses.replace(sampling_info, acc_linear_penalties=None)
    # </piece>
    if batch.forward_mode.is_idle():
        target_batch = dataclasses.replace(
            batch,
            spec_info=None,
            # <piece idle-capture>
            capture_hidden_mode=CaptureHiddenMode.FULL,
            # </piece>
            # <piece idle-tail>
            return_logprob=False,
            sampling_info=sampling_info,
            **dp_counts,
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
            # <piece decode-capture>
            capture_hidden_mode=CaptureHiddenMode.FULL,
            # </piece>
            # <piece decode-tail>
            return_logprob=False,
            sampling_info=sampling_info,
            **dp_counts,
            # </piece>
        )
    # <piece forward>
    return self.target_worker.forward_batch_generation(target_batch)
    # </piece>
