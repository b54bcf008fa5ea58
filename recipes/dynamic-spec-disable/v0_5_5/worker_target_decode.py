    # <piece sampling>
    sampling_info = batch.sampling_info
    if sampling_info is not None:
        # No grammar either: this release's speculative path ignores it, and the scheduler
        # never advances a grammar for spec-v2 tokens, so a mask built from it would be stale.
        sampling_info = dataclasses.replace(
            sampling_info, acc_linear_penalties=None, grammars=None, vocab_mask=None
        )
    # </piece>
