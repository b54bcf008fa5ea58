            # <piece draft-input>
            verified_id=tokens,
            new_seq_lens=new_seq_lens,
            verify_done=verify_done,
            allocate_lens=batch.spec_info.allocate_lens,
            # </piece>
        # <piece result-extra>
        # KV space is tracked by allocate_lens in this release: prepare_for_decode reserved
        # [seq_len, seq_len + n) and the next one tops it up from here; the scheduler frees a
        # finished request's slots up to the result's allocate_lens. Passed on, as verify() does.
        allocate_lens=batch.spec_info.allocate_lens,
        # </piece>
    # <piece draft-catch-up>
    # As on this release's own speculative path: the draft calls run without the MoE or
    # draft-TP contexts (0.5.7 and 0.5.8 added them).
    if self.spec_disable_catch_up == "single":
        self._spec_disable_catch_up_single(batch, slots[:, 0].contiguous(), result)
    else:
        self._spec_disable_catch_up_padded(batch, slots, result)
    # </piece>
