    # <piece notes>
    # multi-step decode. The target's CUDA graphs were captured for TARGET_VERIFY (n
    # tokens per request) and its graph runner does not check the forward mode, so it is
    # set aside for the call and put back even when the forward raises. The penalizers are
    # left out: spec v2 never feeds them decode tokens in this release, so their state is
    # stale (min_new_tokens would mask EOS for ever), and the speculative path does not
    # apply them either. Grammar masks and the sampling parameters apply as in any decode.
    # Logprobs are computed by the target's sampler when the batch asks for them, as in a
    # plain decode (the speculative path of this release returns them too).
    # </piece>
    # <piece sampling>
    sampling_info = batch.sampling_info
    if sampling_info is not None:
        sampling_info = dataclasses.replace(
            sampling_info, acc_additive_penalties=None, acc_scaling_penalties=None
        )
    # </piece>
            # <piece idle-tail>
            return_logprob=batch.return_logprob,
            sampling_info=sampling_info,
            # </piece>
            # <piece decode-tail>
            return_logprob=batch.return_logprob,
            sampling_info=sampling_info,
            # </piece>
