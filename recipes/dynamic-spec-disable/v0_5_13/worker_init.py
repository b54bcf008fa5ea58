def _init_speculative_disable(self, server_args: ServerArgs) -> None:
    """Read N for the dynamic speculation disable (specpatch: dynamic-spec-disable), build its state, log it."""
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
    # Decode steps run without speculation, for the operator (the scheduler's decode log line
    # and its speculative metrics read it; fallback steps are not counted as verifies).
    self.spec_disable_steps = 0
    self._spec_disable_plain = None
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
    if getattr(server_args, "speculative_adaptive", False):
        # Upstream adaptive speculation switches the step count, and with it the draft-token
        # stride and CUDA graphs, by batch size and acceptance rate (its runtime states are
        # already built when this runs, at the end of __init__); a fallback step would feed
        # it zero correct drafts. The two are not combined.
        raise ValueError(
            "speculative_disable_batch_threshold cannot be combined with --speculative-adaptive."
        )
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
    if server_args.enable_dp_attention and not require_mlp_tp_gather(server_args):
        raise ValueError(
            "speculative_disable_batch_threshold with DP attention needs the all-gather "
            "of the per-rank batch sizes (require_mlp_tp_gather), which this set-up skips."
        )
    with self._draft_worker.draft_tp_context(
        self._draft_worker.draft_runner.tp_group
    ), speculative_moe_backend_context(), speculative_moe_a2a_backend_context():
        self._spec_disable_plain = self._spec_disable_build_plain_state(threshold)
    scope = (
        "summed over the DP attention ranks"
        if server_args.enable_dp_attention
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
