def _forward_without_speculation(
    # <piece signature>
    self, batch: ScheduleBatch, on_publish=None
    # </piece>
) -> GenerationBatchResult:
    """Decode with the target alone, one token per request, on the state built at start-up."""
    # The step a server without speculation runs: a DECODE forward of the target replayed
    # from a CUDA graph captured at start-up for one token per request, sampled by the
    # target's own sampler. To the scheduler it is a speculative step at a stride of 1: the
    # token sampled for request i at i of next_token_ids, accept_lens 1, new_seq_lens the
    # sequence lengths plus one (which go to on_publish before the draft catch-up, as after
    # verify, and always on the result), speculative_num_draft_tokens 1 on the result
    # (the scheduler reads the stride from the result). The catch-up is the speculative
    # path's own draft extend for that one token, replayed from its own one-token graph:
    # the draft model's KV cache and hidden state stay current, so speculation resumes
    # warm when the batch shrinks. "skip" leaves it out (upstream's
    # SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND): cheaper, but the draft resumes cold.
    self.spec_disable_steps += 1
    fwd_stream = torch.get_device_module(self.device).current_stream()
    # The batch's tensors were made on the scheduler's stream: mark them used on this
    # one, as verify() does.
    record_stream_for_v2_verify(batch, None, fwd_stream)
    saved = self._spec_disable_swap(self._spec_disable_plain)
    try:
        out_cache_loc = self._spec_disable_kv_slots(batch)
        # <piece grammar-barrier>
        # </piece>
        target_result = self._spec_disable_target_decode(batch, out_cache_loc)
        logits_output = target_result.logits_output
        # As verify() does in this release (SGLANG_ENABLE_ASYNC_ASSERT).
        maybe_detect_nan(logits_output.next_token_logits, "fallback: target model logits")
        maybe_detect_inf(logits_output.next_token_logits, "fallback: target model logits")
        if logits_output.next_token_logprobs is not None:
            # The spec-v2 scheduler reads a row of logprobs per request (one per accepted
            # token) and indexes the top-k / token-id lists at i * row length + j.
            logits_output.next_token_logprobs = logits_output.next_token_logprobs.reshape(-1, 1)
        tokens = target_result.next_token_ids.to(torch.int32)
        accept_lens = torch.ones_like(tokens)
        new_seq_lens = batch.seq_lens + accept_lens
        result = GenerationBatchResult(
            logits_output=logits_output,
            next_token_ids=tokens,
            can_run_cuda_graph=target_result.can_run_cuda_graph,
            next_draft_input=EagleDraftInput(bonus_tokens=tokens),
            accept_lens=accept_lens,
            new_seq_lens=new_seq_lens,
            routed_experts_output=target_result.routed_experts_output,
            indexer_topk_output=target_result.indexer_topk_output,
            speculative_num_draft_tokens=1,
        )
        result.speculation_disabled = True
        if on_publish is not None:
            on_publish(new_seq_lens)
        if self.spec_disable_catch_up == "skip":
            self._spec_disable_stub_draft_input(batch, result)
        else:
            # The draft extend reads verify's layout, here one row per request: the
            # target's hidden state at the step's position, the sampled token, its KV slot.
            batch.out_cache_loc = out_cache_loc
            # <piece catch-up-scope>
            with self.draft_worker.draft_tp_context(
            # </piece>
                # <piece catch-up-tp-group>
                self.draft_worker.draft_runner.tp_group
                # </piece>
            ), speculative_moe_backend_context(), speculative_moe_a2a_backend_context():
                self.draft_worker._draft_extend_for_decode(batch, result)
    finally:
        self._spec_disable_swap(saved)
    if not batch.return_hidden_states:
        # The draft extend has consumed the target's hidden states (EAGLE3: three layers'
        # worth per token); nothing downstream reads them unless the request asked.
        logits_output.hidden_states = None
    return result
