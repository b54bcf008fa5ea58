    # <piece notes>
    # multi-step decode. The target's CUDA graphs were captured for TARGET_VERIFY (n
    # tokens per request) and its graph runner does not check the forward mode, so it is
    # set aside for the call and put back even when the forward raises. The penalties apply
    # as in any decode: from this release on, spec v2 accumulates them (prepare_for_decode)
    # and verify applies them, so the state is current. Grammar masks and the sampling
    # parameters apply as in any decode.
    # Logprobs are computed by the target's sampler when the batch asks for them, as in a
    # plain decode (the speculative path of this release returns them too).
    # </piece>
    # <piece sampling>
    sampling_info = batch.sampling_info
    # </piece>
