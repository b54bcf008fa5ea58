    # <piece catch-up-default>
    if (
        catch_up == "skip"
        and not envs.SGLANG_SPEC_DISABLE_CATCH_UP.is_set()
        and get_spec().speculative_use_rejection_sampling
    ):
        # As the start-up check decides: rejection sampling (which sglang turns on by itself
        # on ROCm for EAGLE with topk 1) stacks the draft's probabilities, which only the draft
        # extend sets, so the catch-up runs unless SGLANG_SPEC_DISABLE_CATCH_UP asks for skip.
        catch_up = "padded"
    # </piece>
