    # <piece adaptive-check>
    if getattr(server_args, "speculative_adaptive", False):
        # Upstream adaptive speculation (0.5.12+) switches the step count, and with it the
        # draft-token stride and CUDA graphs, by acceptance rate; a fallback step would feed it
        # zero accepted drafts. The two are not combined.
        raise ValueError(
            "speculative_disable_batch_threshold cannot be combined with --speculative-adaptive."
        )
    # </piece>
