def _speculation_disabled_for(self, batch: ScheduleBatch) -> bool:
    """True when this decode (or DP idle) batch has more than N requests: no speculation."""
    # With DP attention every rank must take the same path, since both paths run
    # collectives but not the same ones, so the size compared with N is the global one:
    # the sum of the all-gathered per-rank batch sizes. An idle rank follows the others.
    # Workers that skip EAGLEWorkerV2.__init__ (StandaloneWorkerV2) have no threshold:
    # always off.
    threshold = getattr(self, "spec_disable_batch_threshold", 0)
    if threshold <= 0:
        return False
    # <piece dp-size>
    if self.server_args.enable_dp_attention and batch.global_num_tokens is not None:
    # </piece>
        batch_size = sum(batch.global_num_tokens)
    else:
        batch_size = len(batch.seq_lens)
    return batch_size > threshold
