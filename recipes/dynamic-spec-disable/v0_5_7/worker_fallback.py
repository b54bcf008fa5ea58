            # <piece draft-extend>
            # As on this release's own speculative path: the MoE contexts only (draft_tp_context
            # around the draft calls came in 0.5.8).
            with speculative_moe_backend_context(), speculative_moe_a2a_backend_context():
                self.draft_worker._draft_extend_for_decode(batch, one_token)
            # </piece>
