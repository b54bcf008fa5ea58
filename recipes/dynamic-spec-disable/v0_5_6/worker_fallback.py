            # <piece draft-extend>
            # As on this release's own speculative path: the draft calls run without the MoE or
            # draft-TP contexts (0.5.7 and 0.5.8 added them).
            self.draft_worker._draft_extend_for_decode(batch, one_token)
            # </piece>
