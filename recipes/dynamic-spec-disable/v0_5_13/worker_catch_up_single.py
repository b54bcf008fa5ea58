def _spec_disable_catch_up_single(
    self,
    batch: ScheduleBatch,
    out_cache_loc: torch.Tensor,
    result: GenerationBatchResult,
) -> None:
    """Catch the draft model up with a one-token EXTEND per request, like the draft prefill."""
    # Draft position s is built from the target's hidden state at s and the sampled token,
    # into KV slot s; the draft's logits and hidden state there become next_draft_input's
    # topk_p, topk_index and hidden_states. It runs bs tokens instead of the padded catch-
    # up's bs * n, but without the draft-extend CUDA graph. It runs on a copy of the
    # scheduler's ScheduleBatch. Without CPU copies of the sequence lengths
    # (needs_cpu_seq_lens) the extend lengths go as device tensors with a host-side copy of
    # the constant extend lengths, as this release's own draft extend does.
    bs = len(batch.seq_lens)
    next_draft_input = result.next_draft_input
    if batch.seq_lens_cpu is None:
        prefix_lens = batch.seq_lens.to(torch.int32)
        extend_lens = torch.ones((bs,), dtype=torch.int32, device=batch.seq_lens.device)
        seq_lens_cpu = None
    else:
        prefix_lens = batch.seq_lens_cpu.tolist()
        extend_lens = [1] * bs
        seq_lens_cpu = batch.seq_lens_cpu + 1
    draft_batch = dataclasses.replace(
        batch,
        forward_mode=(
            ForwardMode.IDLE if batch.forward_mode.is_idle() else ForwardMode.EXTEND
        ),
        input_ids=next_draft_input.bonus_tokens.to(torch.int64),
        out_cache_loc=out_cache_loc,
        seq_lens=batch.seq_lens + 1,
        seq_lens_cpu=seq_lens_cpu,
        seq_lens_sum=None if batch.seq_lens_sum is None else batch.seq_lens_sum + bs,
        extend_num_tokens=bs,
        extend_lens=extend_lens,
        prefix_lens=prefix_lens,
        extend_logprob_start_lens=[0] * bs,
        extend_input_logprob_token_ids=None,
        return_logprob=False,
        capture_hidden_mode=CaptureHiddenMode.LAST,
        seq_lens_cpu_cache=None,
        spec_info=EagleDraftInput(
            hidden_states=result.logits_output.hidden_states,
            bonus_tokens=next_draft_input.bonus_tokens,
            num_tokens_per_req=1,
            num_tokens_for_logprob_per_req=1,
        ),
    )
    draft_runner = self.draft_worker.draft_runner
    forward_batch = ForwardBatch.init_new(draft_batch, draft_runner)
    if batch.seq_lens_cpu is None:
        forward_batch.extend_seq_lens_cpu = [1] * bs
    logits_output = draft_runner.forward(forward_batch).logits_output
    probs = torch.softmax(logits_output.next_token_logits, dim=-1)
    next_draft_input.topk_p, next_draft_input.topk_index = fast_topk(
        probs, self.topk, dim=-1
    )
    next_draft_input.hidden_states = logits_output.hidden_states
