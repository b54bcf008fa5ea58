    # <piece sampling>
    # The penalties apply as in any decode: from this release on, spec v2 accumulates them
    # (prepare_for_decode) and verify applies them, so the state is current.
    sampling_info = batch.sampling_info
    # </piece>
