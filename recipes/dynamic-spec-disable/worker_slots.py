def _spec_disable_kv_slots(self, batch: ModelWorkerBatch) -> torch.Tensor:
    """The KV slot of position seq_len of each request: (bs,), int64."""
    # prepare_for_decode has reserved it in req_to_token (it is the first slot verify would
    # use); the batch's out_cache_loc holds something else (only the newly allocated slots,
    # or None) and is not read.
    return self.req_to_token_pool.req_to_token[
        batch.req_pool_indices, batch.seq_lens
    ].to(torch.int64)
