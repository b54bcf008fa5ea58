def _init_speculative_disable(self, server_args: ServerArgs) -> None:
    # <piece docstring>
    """Read N for the dynamic speculation disable (specpatch: dynamic-spec-disable), build its state, log it."""
    # </piece>
    # <piece threshold>
    # N is --speculative-disable-batch-threshold, or SGLANG_SPEC_DISABLE_BATCH_THRESHOLD
    # when the flag is 0 (ServerArgs has normally folded the variable into the flag
    # already); 0 keeps speculation always on. ServerArgs refuses the set-ups the fallback
    # cannot serve; the checks here repeat those that matter in this process.
    threshold = (
        server_args.speculative_disable_batch_threshold
        or envs.SGLANG_SPEC_DISABLE_BATCH_THRESHOLD.get()
    )
    # </piece>
    catch_up = envs.SGLANG_SPEC_DISABLE_CATCH_UP.get()
    # <piece catch-up-default>
    # </piece>
    self.spec_disable_batch_threshold = threshold
    self.spec_disable_catch_up = catch_up
    # <piece state>
    # Decode steps run without speculation, for the operator (the scheduler counts them
    # from the results for the decode log line and the server info).
    self.spec_disable_steps = 0
    self._spec_disable_plain = None
    # </piece>
    if threshold == 0:
        return
    if threshold < 0:
        raise ValueError(
            f"speculative_disable_batch_threshold must be >= 0, got {threshold}."
        )
    if self.topk != 1:
        raise ValueError(
            "speculative_disable_batch_threshold needs --speculative-eagle-topk 1, "
            f"got {self.topk}."
        )
    if catch_up not in ("padded", "single", "skip"):
        raise ValueError(
            "SGLANG_SPEC_DISABLE_CATCH_UP must be 'padded', 'single' or 'skip', "
            f"got {catch_up!r}."
        )
    # <piece adaptive-check>
    # </piece>
    # <piece hybrid-check>
    # </piece>
    # <piece dp-check>
    if server_args.enable_dp_attention and not require_mlp_tp_gather(server_args):
    # </piece>
        raise ValueError(
            "speculative_disable_batch_threshold with DP attention needs the all-gather "
            "of the per-rank batch sizes (require_mlp_tp_gather), which this set-up skips."
        )
    # <piece draft-layout-check>
    # </piece>
    # <piece build>
    # Outside the draft's scopes: the build enters them for its draft half only.
    self._spec_disable_plain = self._spec_disable_build_plain_state(threshold)
    # </piece>
    scope = (
        "summed over the DP attention ranks"
        # <piece scope-dp>
        if server_args.enable_dp_attention
        # </piece>
        else "per decode batch"
    )
    requests = "request" if threshold == 1 else "requests"
    catch_up_text = (
        "no draft catch-up (the draft model resumes cold)"
        if catch_up == "skip"
        else "a one-token draft catch-up"
    )
    logger.info(
        f"Dynamic speculation disable is on: decode batches of more than {threshold} "
        f"{requests} ({scope}) run without speculative decoding, as one-token target "
        f"decodes with {catch_up_text}."
    )
