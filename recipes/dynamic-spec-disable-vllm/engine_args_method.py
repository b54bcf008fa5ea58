def _add_speculative_disable_batch_threshold(self) -> None:
    """Carry --speculative-disable-batch-threshold into the speculative config (added by specpatch)."""
    threshold = self.speculative_disable_batch_threshold
    if not isinstance(threshold, int) or isinstance(threshold, bool) or threshold < 0:
        raise ValueError(
            f"--speculative-disable-batch-threshold must be an integer >= 0, got {threshold!r}."
        )
    if threshold == 0:
        return
    explicit = [getattr(self, name, None) for name in ("spec_method", "spec_model", "spec_tokens")]
    if self.speculative_config is None and all(value is None for value in explicit):
        raise ValueError(
            "--speculative-disable-batch-threshold needs speculative decoding: pass "
            "--speculative-config (or --spec-method / --spec-model)."
        )
    if self.speculative_config is None:
        self.speculative_config = {}
    given = self.speculative_config.get("disable_batch_threshold")
    if given not in (None, 0, threshold):
        raise ValueError(
            "--speculative-disable-batch-threshold and "
            "--speculative-config['disable_batch_threshold'] are mutually exclusive."
        )
    self.speculative_config["disable_batch_threshold"] = threshold
