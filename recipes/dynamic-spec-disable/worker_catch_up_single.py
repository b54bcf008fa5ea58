def _spec_disable_catch_up_single(
    self,
    batch: ModelWorkerBatch,
    out_cache_loc: torch.Tensor,
    result: GenerationBatchResult,
) -> None:
    """Catch the draft model up with a one-token EXTEND per request, like the draft prefill."""
    # Draft position s is built from the target's hidden state at s and the sampled token,
    # into KV slot s; the draft's logits and hidden state there become next_draft_input's
    # topk_p, topk_index and hidden_states. It runs bs tokens instead of the padded catch-
    # up's bs * n, but without the draft-extend CUDA graph.
    bs = len(batch.seq_lens)
    next_draft_input = result.next_draft_input
    draft_batch = dataclasses.replace(
        batch,
        forward_mode=(
            ForwardMode.IDLE if batch.forward_mode.is_idle() else ForwardMode.EXTEND
        ),
        # <piece input-ids>
        input_ids=next_draft_input.verified_id.to(torch.int64),
        # </piece>
        out_cache_loc=out_cache_loc,
        seq_lens=batch.seq_lens + 1,
        seq_lens_cpu=batch.seq_lens_cpu + 1,
        seq_lens_sum=batch.seq_lens_sum + bs,
        extend_num_tokens=bs,
        extend_seq_lens=[1] * bs,
        extend_prefix_lens=batch.seq_lens_cpu.tolist(),
        extend_logprob_start_lens=[0] * bs,
        return_logprob=False,
        capture_hidden_mode=CaptureHiddenMode.LAST,
        spec_info=EagleDraftInput(
            hidden_states=result.logits_output.hidden_states,
            # <piece draft-token>
            verified_id=next_draft_input.verified_id,
            # </piece>
            num_tokens_per_{{counts}}=1,
            num_tokens_for_logprob_per_{{counts}}=1,
        ),
    )
    draft_runner = self.draft_worker.draft_runner
    forward_batch = ForwardBatch.init_new(draft_batch, draft_runner)
    # <piece forward>
    logits_output = draft_runner.forward(forward_batch).logits_output
    # </piece>
    probs = torch.softmax(logits_output.next_token_logits, dim=-1)
    next_draft_input.topk_p, next_draft_input.topk_index = fast_topk(
        probs, self.topk, dim=-1
    )
    next_draft_input.hidden_states = logits_output.hidden_states
