    # <piece draft-catch-up>
    # As on this release's own speculative path: the draft calls run without the MoE or
    # draft-TP contexts (0.5.7 and 0.5.8 added them).
    if self.spec_disable_catch_up == "single":
        self._spec_disable_catch_up_single(batch, slots[:, 0].contiguous(), result)
    else:
        self._spec_disable_catch_up_padded(batch, slots, result)
    # </piece>
