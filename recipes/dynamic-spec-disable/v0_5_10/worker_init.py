    # <piece hybrid-check>
    model_runner = self.target_worker.model_runner
    if (
        getattr(model_runner, "hybrid_gdn_config", None) is not None
        or getattr(model_runner, "mamba2_config", None) is not None
    ):
        # verify() keeps the mamba/GDN state of a speculative step (_mamba_verify_update);
        # the fallback's plain decode has not been shown to leave that state as the next
        # speculative step expects it.
        raise ValueError(
            "speculative_disable_batch_threshold does not support hybrid mamba/GDN target "
            "models (their state is updated by verify in a way the fallback does not reproduce)."
        )
    # </piece>
