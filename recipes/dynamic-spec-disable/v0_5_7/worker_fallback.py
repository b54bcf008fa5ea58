    # <piece draft-catch-up>
    # As on this release's own speculative path: the MoE contexts only (draft_tp_context around
    # the draft calls came in 0.5.8).
    with speculative_moe_backend_context(), speculative_moe_a2a_backend_context():
        if self.spec_disable_catch_up == "single":
            self._spec_disable_catch_up_single(batch, slots[:, 0].contiguous(), result)
        else:
            self._spec_disable_catch_up_padded(batch, slots, result)
    # </piece>
