def _init_speculative_disable(self, server_args: ServerArgs) -> None:
    # <piece docstring>
    """Read N for the dynamic speculation disable (specpatch: dynamic-spec-disable); log it."""
    # </piece>
    # N is --speculative-disable-batch-threshold, or SGLANG_SPEC_DISABLE_BATCH_THRESHOLD
    # when the flag is 0 (ServerArgs has normally folded the variable into the flag
    # already); 0 keeps speculation always on. ServerArgs refuses the set-ups the fallback
    # cannot serve; the checks here repeat those that matter in this process.
    threshold = (
        server_args.speculative_disable_batch_threshold
        or envs.SGLANG_SPEC_DISABLE_BATCH_THRESHOLD.get()
    )
    catch_up = envs.SGLANG_SPEC_DISABLE_CATCH_UP.get()
    self.spec_disable_batch_threshold = threshold
    self.spec_disable_catch_up = catch_up
    # <piece state>
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
    # <piece catch-up-check>
    if catch_up not in ("padded", "single"):
        raise ValueError(
            f"SGLANG_SPEC_DISABLE_CATCH_UP must be 'padded' or 'single', got {catch_up!r}."
    # </piece>
        )
    # <piece adaptive-check>
    # </piece>
    # <piece hybrid-check>
    # </piece>
    if server_args.enable_dp_attention and not require_mlp_tp_gather(server_args):
        raise ValueError(
            "speculative_disable_batch_threshold with DP attention needs the all-gather "
            "of the per-rank batch sizes (require_mlp_tp_gather), which this set-up skips."
        )
    # <piece build>
    # </piece>
    scope = (
        "summed over the DP attention ranks"
        if server_args.enable_dp_attention
        else "per decode batch"
    )
    requests = "request" if threshold == 1 else "requests"
    # <piece log>
    logger.info(
        f"Dynamic speculation disable is on: decode batches of more than {threshold} "
        f"{requests} ({scope}) run without speculative decoding, as plain target "
        f"decodes with a '{catch_up}' draft catch-up."
    # </piece>
    )
