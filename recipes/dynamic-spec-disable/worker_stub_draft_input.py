def _spec_disable_stub_draft_input(
    self, batch: ModelWorkerBatch, result: GenerationBatchResult
) -> None:
    """With the catch-up skipped: shape-valid zeros for what the FutureMap stores of the draft input."""
    # verified_id, new_seq_lens and verify_done are set; the FutureMap also stores topk_p,
    # topk_index and the draft hidden state of every request. A speculative step after this
    # drafts from these zeros and from a draft KV cache that missed the skipped positions:
    # correct (verify rejects wrong drafts) but cold.
    next_draft_input = result.next_draft_input
    bs = batch.seq_lens.shape[0]
    draft_config = self.draft_worker.draft_runner.model_config
    next_draft_input.topk_p = torch.zeros(
        (bs, self.topk), dtype=torch.float32, device=self.device
    )
    next_draft_input.topk_index = torch.zeros(
        (bs, self.topk), dtype=torch.int64, device=self.device
    )
    next_draft_input.hidden_states = torch.zeros(
        (bs, draft_config.hidden_size), dtype=draft_config.dtype, device=self.device
    )
