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
    # <piece hidden-states>
    # This release's ModelWorkerBatch does not say which requests asked for hidden states (it has
    # no reqs), so they are handed over, as verify hands over its own.
    # </piece>
