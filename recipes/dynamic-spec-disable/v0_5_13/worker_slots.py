def _spec_disable_kv_slots(self, batch: ScheduleBatch) -> torch.Tensor:
    """KV slots of positions [seq_len, seq_len + n) of each request: (bs, n), int64."""
    # prepare_for_decode has reserved them in req_to_token (they are the slots verify
    # would use); the batch's out_cache_loc holds something else (the last forward's,
    # or None) and is not read.
    offsets = torch.arange(
        self.speculative_num_draft_tokens, device=batch.seq_lens.device
    )
    positions = batch.seq_lens[:, None] + offsets[None, :]
    return self.req_to_token_pool.req_to_token[
        batch.req_pool_indices[:, None], positions
    ].to(torch.int64)
