# <piece head>
def _handle_speculative_disable_batch_threshold(self):
# </piece>
    """Resolve and check --speculative-disable-batch-threshold (specpatch: dynamic-spec-disable)."""
    # <piece precedence>
    # Precedence: a non-zero flag wins; when the flag is 0,
    # SGLANG_SPEC_DISABLE_BATCH_THRESHOLD sets N; otherwise N is 0 and speculation is
    # always on. Runs last in __post_init__, once overlap, top-k and multi-layer EAGLE are
    # settled. A set-up that the EAGLEWorkerV2 fallback cannot serve stops the server
    # </piece>
    # <piece intro>
    # here, with the reasons.
    # </piece>
    env = envs.SGLANG_SPEC_DISABLE_BATCH_THRESHOLD
    source = "--speculative-disable-batch-threshold"
    # <piece read-n>
    if self.speculative_disable_batch_threshold == 0 and env.is_set():
    # </piece>
        raw = os.environ[env.name]
        try:
            # <piece parse-n>
            self.speculative_disable_batch_threshold = int(raw.strip())
            # </piece>
        except ValueError:
            raise ValueError(
                f"{env.name}={raw!r} is not an integer; it is the decode batch size "
                "above which speculative decoding is disabled (0 = always speculate)."
            ) from None
        source = env.name
    # <piece threshold>
    threshold = self.speculative_disable_batch_threshold
    # </piece>
    if threshold < 0:
        raise ValueError(
            f"{source} must be >= 0 (0 means always speculate), got {threshold}."
        )
    if threshold == 0:
        return
    # <piece no-algorithm>
    if self.speculative_algorithm is None:
    # </piece>
        logger.warning(
            f"{source}={threshold} has no effect: speculative decoding is not enabled."
        )
        # <piece no-effect>
        self.speculative_disable_batch_threshold = 0
        # </piece>
        return

    # <piece view>
    # </piece>
    problems = []
    # <piece algorithm>
    if self.speculative_algorithm not in ("EAGLE", "EAGLE3"):
        problems.append(
            f"--speculative-algorithm {self.speculative_algorithm}: only EAGLE, EAGLE3 "
    # </piece>
    # <piece algorithm-tail>
            "(and NEXTN, an alias of EAGLE) run the EAGLEWorkerV2 fallback"
        )
    # </piece>
    else:
        # <piece v2-worker>
        if not envs.SGLANG_ENABLE_SPEC_V2.get() or self.disable_overlap_schedule:
            problems.append(
                "the fallback lives in the spec-v2 worker (EAGLEWorkerV2), which runs only with "
                "SGLANG_ENABLE_SPEC_V2=1 and the overlap scheduler on; here the v1 worker "
                "would run and ignore the threshold"
            )
        # </piece>
        # <piece multi-layer>
        if {{cfg}}.enable_multi_layer_eagle:
            problems.append(
                "multi-layer EAGLE (--enable-multi-layer-eagle, turned on by itself for "
                "MiMo-V2-Flash and Step-3.5) runs MultiLayerEagleWorkerV2, which has no fallback"
            )
        # </piece>
        if {{cfg}}.speculative_eagle_topk != 1:
            problems.append(
                f"--speculative-eagle-topk is {{{cfg}}.speculative_eagle_topk}, the fallback needs 1; "
                "sglang picks topk 4 by itself for Llama and Grok models when "
                "--speculative-num-steps is not given: pass --speculative-eagle-topk 1 "
                "--speculative-num-steps S --speculative-num-draft-tokens S+1"
            )
    # <piece dp-attention>
    if {{cfg}}.enable_dp_attention:
    # </piece>
        # <piece dp-all-gather>
        if envs.SGLANG_SCHEDULER_SKIP_ALL_GATHER.get():
            problems.append(
                "SGLANG_SCHEDULER_SKIP_ALL_GATHER=1 with DP attention: the ranks would not "
                "know the global batch size and could take different paths (a deadlock)"
            )
        elif not (
        # </piece>
            {{cfg}}.moe_dense_tp_size is None
            or not {{cfg}}.enable_dp_lm_head
            # <piece moe-a2a>
            or {{cfg}}.moe_a2a_backend == "none"
            # </piece>
            # <piece dense-tp>
            or {{cfg}}.moe_dense_tp_size > {{cfg}}.tp_size // {{cfg}}.dp_size
            # </piece>
        ):
            problems.append(
                "with DP attention, this --moe-dense-tp-size / --enable-dp-lm-head / "
                "--moe-a2a-backend combination skips the all-gather of the per-rank batch "
                "sizes, so the ranks could take different paths (a deadlock)"
            )
    # <piece eagle3-dp-attention>
    if (
        {{cfg}}.enable_dp_attention
        and {{cfg}}.dp_size > 1
        and {{cfg}}.speculative_algorithm == "EAGLE3"
    ):
        # The EAGLE3 draft runs at the attention-TP width (draft_tp_context patches the
        # tensor-parallel group) and the one-token state is built inside that scope, so
        # the target's one-token graph would record its DP gathers and all-reduces on the
        # attention-TP group: refused until the target half is built outside it.
        problems.append(
            "EAGLE3 with DP attention (--dp-size > 1): the one-token target graph would be "
            "captured inside the EAGLE3 draft's attention-TP scope (wrong collectives); not "
            "served yet (EAGLE and NEXTN with DP attention are)"
        )
    # </piece>
    # <piece adaptive>
    # </piece>
    if {{cfg}}.enable_two_batch_overlap:
        problems.append("--enable-two-batch-overlap has not been validated with the fallback")
    if {{cfg}}.enable_pdmux:
        problems.append("--enable-pdmux has not been validated with the fallback")
    # <piece more-refusals>
    # </piece>
    catch_up = envs.SGLANG_SPEC_DISABLE_CATCH_UP.get()
    if catch_up not in ("padded", "single", "skip"):
        problems.append(
            f"SGLANG_SPEC_DISABLE_CATCH_UP={catch_up!r}: the draft catch-up is 'padded', 'single' or 'skip'"
        )
    # <piece catch-up>
    # </piece>
    if problems:
        raise ValueError(
            f"{source}={threshold} cannot be used with this configuration:\n  - "
            + "\n  - ".join(problems)
        )
    if {{cfg}}.max_running_requests is not None and threshold >= {{cfg}}.max_running_requests:
        logger.warning(
            f"{source}={threshold} is not below --max-running-requests "
            f"{{{cfg}}.max_running_requests}: no decode batch is larger than that, so "
            "speculation is never disabled."
        )
