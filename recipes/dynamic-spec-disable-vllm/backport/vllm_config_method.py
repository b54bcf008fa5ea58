def _apply_speculative_disable_batch_threshold(self) -> None:
    """--speculative-disable-batch-threshold N on a vLLM without dynamic speculation (added by specpatch): checks
    at start-up what the scheduler-side backport cannot serve, and makes the CUDA-graph mode one that does not
    assume a fixed decode query of 1 + num_speculative_tokens tokens (as vLLM 0.24 does for its own schedule)."""
    speculative_config = self.speculative_config
    threshold = getattr(speculative_config, "disable_batch_threshold", 0) if speculative_config else 0
    if not threshold:
        return
    if self.parallel_config.data_parallel_size > 1:
        raise ValueError(
            "--speculative-disable-batch-threshold cannot be honoured: data parallel size "
            f"{self.parallel_config.data_parallel_size} > 1 (each rank would decide on its own batch and the "
            "ranks' step shapes would diverge)."
        )
    mode = self.compilation_config.cudagraph_mode
    if mode is not None and mode.has_full_cudagraphs():
        logger.warning(
            "--speculative-disable-batch-threshold changes the decode query length at runtime "
            "(1 + num_speculative_tokens, or 1 above the threshold): overriding cudagraph_mode from %s "
            "to PIECEWISE.",
            mode.name,
        )
        self.compilation_config.cudagraph_mode = CUDAGraphMode.PIECEWISE
