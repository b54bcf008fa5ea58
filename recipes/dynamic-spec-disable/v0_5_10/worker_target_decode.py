    # <piece notes>
    # multi-step decode. The caller has swapped in the target's DECODE CUDA graph and its
    # attention backend (captured at start-up for one token per request with the hidden
    # states the draft catch-up reads); the forward runs on a copy of the batch, so the
    # batch keeps the values the draft catch-up reads after this. Grammar masks and the
    # sampling parameters apply as in any decode. Logprobs are computed by the target's
    # sampler when the batch asks for them, as in a plain decode (the speculative path of
    # this release returns them too). The DP attention token counts are copied: the
    # forward aligns them in place, and the scheduler's batch (and its draft catch-up)
    # must keep its own.
    # </piece>
    # <piece sampling>
    # The penalizers are left out: spec v2 never feeds them decode tokens in this release,
    # so their state is stale (min_new_tokens would mask EOS for ever), and the speculative
    # path does not apply them either.
    sampling_info = batch.sampling_info
    if sampling_info is not None:
        sampling_info = dataclasses.replace(
            sampling_info, acc_additive_penalties=None, acc_scaling_penalties=None
        )
    # </piece>
            # <piece idle-tail>
            return_logprob=batch.return_logprob,
            sampling_info=sampling_info,
            **dp_counts,
            # </piece>
            # <piece decode-tail>
            return_logprob=batch.return_logprob,
            sampling_info=sampling_info,
            **dp_counts,
            # </piece>
