def _forward_without_speculation(
    self, model_worker_batch: ModelWorkerBatch
) -> GenerationBatchResult:
    """Decode with the target alone (no draft, no verify), then catch the draft model up."""
    # To the scheduler this is a speculative step whose draft tokens were all rejected:
    # accept_lens are 1, the token sampled for request i sits at i * num_draft_tokens of
    # next_token_ids (padded with copies of it), and next_draft_input holds what the next
    # speculative step starts from: the sampled token, the new sequence lengths (a new
    # tensor) with the event recorded after them, and the draft model's top-k and hidden
    # state.
    batch = model_worker_batch
    if batch.seq_lens.is_cuda:
        # Allocated on the scheduler's stream: keep it alive for this one, as verify() does.
        batch.seq_lens.record_stream(
            torch.get_device_module(self.device).current_stream()
        )
    slots = self._spec_disable_kv_slots(batch)
    target_result = self._spec_disable_target_decode(batch, slots[:, 0].contiguous())
    logits_output = target_result.logits_output
    # <piece nan-check>
    if self.enable_nan_detection:
        detect_nan(logits_output)
    # </piece>

    tokens = target_result.next_token_ids.to(torch.int32)
    accept_lens = torch.ones_like(tokens)
    new_seq_lens = batch.seq_lens + accept_lens
    verify_done = torch.get_device_module(self.device).Event()
    verify_done.record()
    result = GenerationBatchResult(
        logits_output=logits_output,
        next_token_ids=tokens.repeat_interleave(self.speculative_num_draft_tokens),
        can_run_cuda_graph=False,
        next_draft_input=EagleDraftInput(
            # <piece draft-input>
            verified_id=tokens, new_seq_lens=new_seq_lens, verify_done=verify_done
            # </piece>
        ),
        accept_lens=accept_lens,
        # <piece result-extra>
        # </piece>
    )

    # <piece draft-catch-up>
    with self.draft_worker.draft_tp_context(
        self.draft_worker.draft_runner.tp_group
    ), speculative_moe_backend_context(), speculative_moe_a2a_backend_context():
        if self.spec_disable_catch_up == "single":
            self._spec_disable_catch_up_single(batch, slots[:, 0].contiguous(), result)
        else:
            self._spec_disable_catch_up_padded(batch, slots, result)
    # </piece>
    return result
