    # <piece docstring>
    """Read N for the dynamic speculation disable (specpatch: dynamic-spec-disable), build its state, log it."""
    # </piece>
    # <piece state>
    # Decode steps run without speculation, for the operator (the scheduler counts them
    # from the results for the decode log line and the server info).
    self.spec_disable_steps = 0
    self._spec_disable_plain = None
    # </piece>
    # <piece catch-up-check>
    if catch_up not in ("padded", "single", "skip"):
        raise ValueError(
            "SGLANG_SPEC_DISABLE_CATCH_UP must be 'padded', 'single' or 'skip', "
            f"got {catch_up!r}."
    # </piece>
    # <piece build>
    with self._draft_worker.draft_tp_context(
        self._draft_worker.draft_runner.tp_group
    ), speculative_moe_backend_context(), speculative_moe_a2a_backend_context():
        self._spec_disable_plain = self._spec_disable_build_plain_state(threshold)
    # </piece>
    # <piece log>
    catch_up_text = (
        "no draft catch-up (the draft model resumes cold)"
        if catch_up == "skip"
        else "a one-token draft catch-up"
    )
    logger.info(
        f"Dynamic speculation disable is on: decode batches of more than {threshold} "
        f"{requests} ({scope}) run without speculative decoding, as one-token target "
        f"decodes with {catch_up_text}."
    # </piece>
