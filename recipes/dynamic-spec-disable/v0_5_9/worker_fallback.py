def _forward_without_speculation(
    self, model_worker_batch: ModelWorkerBatch
) -> GenerationBatchResult:
    """Decode with the target alone, one token per request, on the state built at start-up."""
    # The step a server without speculation runs: a DECODE forward of the target replayed
    # from a CUDA graph captured at start-up for one token per request, sampled by the
    # target's own sampler. To the scheduler it is a speculative step whose draft tokens
    # were all rejected: this release's scheduler reads the tokens at the stride
    # speculative_num_draft_tokens (n), so the token sampled for request i sits at i * n of
    # next_token_ids (padded with copies of it); accept_lens are 1; next_draft_input holds
    # what the next speculative step starts from: the sampled token, the new sequence
    # lengths (a new tensor) with the event recorded after them, and the draft model's
    # top-k and hidden state. Those come from the speculative path's own draft extend for
    # the one token, replayed from its own one-token graph where the speculative path has
    # a draft-extend graph: the draft model's KV cache and hidden state stay current, so
    # speculation resumes warm when the batch shrinks. "skip" leaves it out (zeros): cheaper,
    # but the draft resumes cold.
    batch = model_worker_batch
    self.spec_disable_steps += 1
    stride = self.speculative_num_draft_tokens
    if batch.seq_lens.is_cuda:
        # Allocated on the scheduler's stream: keep it alive for this one, as verify() does.
        batch.seq_lens.record_stream(
            torch.get_device_module(self.device).current_stream()
        )
    # Every request gains one token, whatever the target samples: the new sequence lengths are
    # computed, and verify_done recorded after them, before the target's forward is launched.
    # The scheduler waits on verify_done before it prepares the next batch (its seq_lens are
    # these), so it does that on the CPU while the target runs, as it does during a
    # speculative step's draft extend; recorded after the forward, the step would lose the
    # overlap of the scheduler's CPU work with the GPU.
    accept_lens = torch.ones_like(batch.seq_lens, dtype=torch.int32)
    new_seq_lens = batch.seq_lens + accept_lens
    verify_done = torch.get_device_module(self.device).Event()
    verify_done.record()
    saved = self._spec_disable_swap(self._spec_disable_plain)
    try:
        out_cache_loc = self._spec_disable_kv_slots(batch)
        target_result = self._spec_disable_target_decode(batch, out_cache_loc)
        logits_output = target_result.logits_output
        # <piece nan-check>
        if self.enable_nan_detection:
            detect_nan(logits_output)
        # </piece>

        tokens = target_result.next_token_ids.to(torch.int32)
        next_draft_input = EagleDraftInput(
            # <piece draft-input>
            verified_id=tokens, new_seq_lens=new_seq_lens, verify_done=verify_done
            # </piece>
        )
        result = GenerationBatchResult(
            logits_output=logits_output,
            next_token_ids=tokens.repeat_interleave(stride),
            can_run_cuda_graph=target_result.can_run_cuda_graph,
            next_draft_input=next_draft_input,
            accept_lens=accept_lens,
            # <piece result-extra>
            # </piece>
        )
        result.speculation_disabled = True
        if self.spec_disable_catch_up == "skip":
            self._spec_disable_stub_draft_input(batch, result)
        else:
            # The draft extend reads verify's layout, here one row per request (the draft
            # worker's step state is the one-token one): the target's hidden state at the
            # step's position, the sampled token, its KV slot.
            batch.out_cache_loc = out_cache_loc
            one_token = GenerationBatchResult(
                logits_output=logits_output,
                next_token_ids=tokens,
                accept_lens=accept_lens,
                next_draft_input=next_draft_input,
            )
            # <piece draft-extend>
            with self.draft_worker.draft_tp_context(
                self.draft_worker.draft_runner.tp_group
            ), speculative_moe_backend_context(), speculative_moe_a2a_backend_context():
                self.draft_worker._draft_extend_for_decode(batch, one_token)
            # </piece>
    finally:
        self._spec_disable_swap(saved)
    # <piece hidden-states>
    if not any(getattr(req, "return_hidden_states", False) for req in batch.reqs or ()):
        # The draft extend has consumed the target's hidden states (EAGLE3: three layers'
        # worth per token); copy_to_cpu would copy them and nothing reads them unless a
        # request asked (the scheduler then reads row i for request i: this layout).
        logits_output.hidden_states = None
    # </piece>
    return result
