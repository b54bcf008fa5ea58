def _forward_without_speculation(
    self, batch: ScheduleBatch, on_publish=None
) -> GenerationBatchResult:
    """Decode with the target alone (no draft, no verify), then catch the draft model up."""
    # To the scheduler this is a speculative step whose draft tokens were all rejected:
    # accept_lens are 1, the token sampled for request i sits at i * num_draft_tokens of
    # next_token_ids (padded with copies of it), new_seq_lens are the sequence lengths plus
    # one (a new tensor), and next_draft_input holds what the next speculative step starts
    # from: the sampled token and the draft model's top-k and hidden state.
    # As forward_batch_generation does after verify, the new sequence lengths go to
    # on_publish (the overlap scheduler's FutureMap.publish, which lets the next batch be
    # scheduled) before the draft catch-up, and on the result always: the synchronous
    # scheduler path calls the worker without on_publish and reads result.new_seq_lens.
    fwd_stream = torch.get_device_module(self.device).current_stream()
    # The batch's tensors were made on the scheduler's stream: mark them used on this
    # one, as verify() does.
    record_stream_for_v2_verify(batch, None, fwd_stream)
    slots = self._spec_disable_kv_slots(batch)
    target_result = self._spec_disable_target_decode(batch, slots[:, 0].contiguous())
    logits_output = target_result.logits_output
    # As verify() does in this release (SGLANG_ENABLE_ASYNC_ASSERT).
    maybe_detect_nan(logits_output.next_token_logits, "fallback: target model logits")
    maybe_detect_inf(logits_output.next_token_logits, "fallback: target model logits")
    if logits_output.next_token_logprobs is not None:
        # The spec-v2 scheduler reads a row of logprobs per request (one per accepted token) and indexes
        # the top-k / token-id lists at i * row length + j: one token per request makes rows of 1.
        logits_output.next_token_logprobs = logits_output.next_token_logprobs.reshape(-1, 1)

    tokens = target_result.next_token_ids.to(torch.int32)
    accept_lens = torch.ones_like(tokens)
    new_seq_lens = batch.seq_lens + accept_lens
    result = GenerationBatchResult(
        logits_output=logits_output,
        next_token_ids=tokens.repeat_interleave(self.speculative_num_draft_tokens),
        can_run_cuda_graph=False,
        next_draft_input=EagleDraftInput(bonus_tokens=tokens),
        accept_lens=accept_lens,
        new_seq_lens=new_seq_lens,
        # The target's routed-expert and indexer top-k captures of this step, handed to the
        # scheduler as verify() does.
        routed_experts_output=target_result.routed_experts_output,
        indexer_topk_output=target_result.indexer_topk_output,
        # The scheduler reads the tokens at this stride (recorded on the result).
        speculative_num_draft_tokens=self.speculative_num_draft_tokens,
        # No extra_keep_alive_refs: verify hands the scheduler its ForwardBatch, prepared on
        # the plan stream; the tensors made here are all made on this stream.
    )
    # Publish before the draft catch-up, as after verify: the fence is at target-end.
    if on_publish is not None:
        on_publish(new_seq_lens)

    with self.draft_worker.draft_tp_context(
        self.draft_worker.draft_runner.tp_group
    ), speculative_moe_backend_context(), speculative_moe_a2a_backend_context():
        if self.spec_disable_catch_up == "single":
            self._spec_disable_catch_up_single(batch, slots[:, 0].contiguous(), result)
        else:
            self._spec_disable_catch_up_padded(batch, slots, result)
    return result
