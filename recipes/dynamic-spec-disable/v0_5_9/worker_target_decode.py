    # <piece docstring>
    """One DECODE forward of the target with spec_info=None, sampling one token each."""
    # </piece>
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
    # <piece dp-counts>
    dp_counts = dict(
        global_num_tokens=None
        if batch.global_num_tokens is None
        else list(batch.global_num_tokens),
        global_num_tokens_for_logprob=None
        if batch.global_num_tokens_for_logprob is None
        else list(batch.global_num_tokens_for_logprob),
    )
    # </piece>
            # <piece idle-tail>
            return_logprob=False,
            sampling_info=sampling_info,
            **dp_counts,
            # </piece>
            # <piece decode-tail>
            return_logprob=False,
            sampling_info=sampling_info,
            **dp_counts,
            # </piece>
    # <piece forward>
    return self.target_worker.forward_batch_generation(target_batch)
    # </piece>
