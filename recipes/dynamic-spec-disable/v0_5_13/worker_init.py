    # <piece state>
    # Decode steps run without speculation, for the operator (the scheduler's decode log line
    # and its speculative metrics read it; fallback steps are not counted as verifies).
    self.spec_disable_steps = 0
    self._spec_disable_plain = None
    # </piece>
    # <piece adaptive-check>
    if getattr(server_args, "speculative_adaptive", False):
        # Upstream adaptive speculation switches the step count, and with it the draft-token
        # stride and CUDA graphs, by batch size and acceptance rate (its runtime states are
        # already built when this runs, at the end of __init__); a fallback step would feed
        # it zero correct drafts. The two are not combined.
        raise ValueError(
            "speculative_disable_batch_threshold cannot be combined with --speculative-adaptive."
        )
    # </piece>
    # <piece hybrid-check>
    model_runner = self.target_worker.model_runner
    if (
        getattr(model_runner, "hybrid_gdn_config", None) is not None
        or getattr(model_runner, "mamba2_config", None) is not None
        or getattr(model_runner, "hybrid_lightning_config", None) is not None
    ):
        # verify() keeps the recurrent state of a speculative step (_mamba_verify_update,
        # which this release also runs for hybrid lightning-attention targets); the
        # fallback's plain decode has not been shown to leave that state as the next
        # speculative step expects it.
        raise ValueError(
            "speculative_disable_batch_threshold does not support hybrid mamba/GDN/lightning "
            "target models (their state is updated by verify in a way the fallback does not "
            "reproduce)."
        )
    # </piece>
