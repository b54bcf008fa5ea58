def _spec_disable_stub_draft_input(
    self, batch: ScheduleBatch, result: GenerationBatchResult
) -> None:
    """With the catch-up skipped: shape-valid zeros for what the FutureMap stores of the draft input."""
    # verify() has set bonus_tokens, the only field a step without speculation reads. A
    # speculative step after it drafts from these zeros and from a draft KV cache that
    # missed the skipped positions: correct (verify rejects wrong drafts) but cold.
    next_draft_input = result.next_draft_input
    bs = batch.seq_lens.shape[0]
    next_draft_input.topk_p = torch.zeros(
        (bs, self.topk), dtype=torch.float32, device=self.device
    )
    next_draft_input.topk_index = torch.zeros(
        (bs, self.topk), dtype=torch.int64, device=self.device
    )
    # <piece hidden-states>
    hidden_size = EagleDraftInput.hidden_size_for(self.draft_worker)
    if hidden_size is not None:
        next_draft_input.hidden_states = torch.zeros(
            (bs, hidden_size),
            dtype=EagleDraftInput.dtype_for(self.draft_worker),
            device=self.device,
        )
    # </piece>
    # <piece graph-compatible>
    # </piece>
