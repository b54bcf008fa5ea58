def _apply_speculative_disable_batch_threshold(self) -> None:
    """--speculative-disable-batch-threshold N as vLLM's own dynamic speculation (added by specpatch): writes
    num_speculative_tokens_per_batch_size = [[1, N, K], [N + 1, max_num_seqs, 0]], and refuses at start-up the
    configurations in which vLLM would drop that schedule with only a warning (or ignore it)."""
    speculative_config = self.speculative_config
    threshold = getattr(speculative_config, "disable_batch_threshold", 0) if speculative_config else 0
    if not threshold:
        return
    if speculative_config.num_speculative_tokens_per_batch_size is not None:
        raise ValueError(
            "--speculative-disable-batch-threshold and "
            "--speculative-config['num_speculative_tokens_per_batch_size'] are mutually exclusive: "
            "the threshold is written as that schedule."
        )
    num_tokens = speculative_config.num_speculative_tokens
    max_num_seqs = self.scheduler_config.max_num_seqs or threshold + 1
    speculative_config.num_speculative_tokens_per_batch_size = [
        [1, threshold, num_tokens],
        [threshold + 1, max(threshold + 1, max_num_seqs), 0],
    ]
    refused = []
    if self.parallel_config.data_parallel_size > 1:
        refused.append(
            f"data parallel size {self.parallel_config.data_parallel_size} > 1 (the ranks would choose "
            "different speculative-token counts; vLLM drops the schedule)"
        )
    # <piece runner-check>
    # asked after the schedule is written: whether the V2 model runner is used depends on it
    use_v2 = bool(getattr(self, "use_v2_model_runner", False))
    supported_on_v1 = ("ngram", "eagle", "eagle3", "mtp", "draft_model", "dflash")
    if use_v2:
        missing = getattr(self, "_get_v2_model_runner_unsupported_features", lambda: [])()
        if any("dynamic speculative" in feature for feature in missing):
            refused.append("the V2 model runner (VLLM_USE_V2_MODEL_RUNNER=1) of this release ignores the schedule")
    elif speculative_config.method not in supported_on_v1:
        refused.append(
            f"speculative method {speculative_config.method!r} on the V1 model runner (its proposer does "
            f"not take a per-step token count; supported: {', '.join(supported_on_v1)})"
        )
    # </piece>
    if refused:
        speculative_config.num_speculative_tokens_per_batch_size = None
        raise ValueError(
            "--speculative-disable-batch-threshold cannot be honoured: " + "; ".join(refused) + "."
        )
