def _spec_disable_catch_up_padded(
    self,
    batch: ScheduleBatch,
    slots: torch.Tensor,
    result: GenerationBatchResult,
) -> None:
    """Catch the draft model up with the speculative path's draft extend, n rows per request."""
    # _draft_extend_for_decode expects verify's layout: n rows per request in the slots
    # [s, s + n). Row 0 carries the real step (the target's hidden state at s, the sampled
    # token, KV slot s); rows 1..n-1 repeat it into the request's reserved slots, which
    # the next step overwrites before reading them, as it does after rejected drafts. With
    # accept_lens of 1 only row 0 feeds next_draft_input's topk_p, topk_index and
    # hidden_states. Like verify, this rebinds fields of the scheduler's batch
    # (out_cache_loc here, input_ids, spec_info, forward_mode ... in the draft extend); the
    # scheduler's forward isolation restores them after the call.
    n = self.speculative_num_draft_tokens
    hidden = result.logits_output.hidden_states
    batch.out_cache_loc = slots.reshape(-1)
    padded = GenerationBatchResult(
        logits_output=LogitsProcessorOutput(
            next_token_logits=None,
            hidden_states=None if hidden is None else hidden.repeat_interleave(n, dim=0),
        ),
        next_token_ids=result.next_token_ids,
        accept_lens=result.accept_lens,
        next_draft_input=result.next_draft_input,
    )
    self.draft_worker._draft_extend_for_decode(batch, padded)
