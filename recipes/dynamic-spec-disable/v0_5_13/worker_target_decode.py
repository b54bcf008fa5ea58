    # <piece signature>
    self, batch: ScheduleBatch, out_cache_loc: torch.Tensor
    # </piece>
    # <piece docstring>
    """One DECODE forward of the target with spec_info=None, sampling one token each."""
    # The target runs on a copy of the scheduler's ScheduleBatch (this release hands the
    # worker the ScheduleBatch itself, and ForwardBatch.init_new consumes its one-shot
    # fields), so the batch keeps the values the draft catch-up reads after this.
    # </piece>
    # <piece notes>
    # multi-step decode. The caller has swapped in the target's DECODE CUDA graph and its
    # attention backend (captured at start-up for one token per request with the hidden
    # states the draft catch-up reads). The penalties apply as in any decode: spec v2
    # accumulates them (prepare_for_decode) and verify applies them, so the state is
    # current. Grammar masks, logit bias, min_p and custom logit processors apply as in a
    # server without speculation (speculative steps apply penalties, logit bias and grammar
    # in verify, but not min_p or custom logit processors). Logprobs are computed by the
    # target's sampler when the batch asks for them, as in a plain decode.
    # The CPU copies of the sequence lengths are None when every attention backend says it
    # does not need them (FutureMap's needs_cpu_seq_lens); they then stay None. The DP
    # attention token counts are copied: the forward aligns them in place, and the
    # scheduler's batch (and its draft catch-up) must keep its own.
    # </piece>
    # <piece sampling>
    # </piece>
            # <piece idle-tail>
            seq_lens_cpu_cache=None,
            **dp_counts,
            # </piece>
            # <piece input-ids>
            input_ids=batch.spec_info.bonus_tokens.to(torch.int64),
            # </piece>
            # <piece seq-lens-cpu>
            seq_lens_cpu=None if batch.seq_lens_cpu is None else batch.seq_lens_cpu + 1,
            seq_lens_sum=None if batch.seq_lens_sum is None else batch.seq_lens_sum + bs,
            # </piece>
            # <piece decode-tail>
            seq_lens_cpu_cache=None,
            **dp_counts,
            # </piece>
