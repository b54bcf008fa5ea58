    # <piece build>
    # As the draft worker captures its own graphs in this release: in draft-TP (0.5.5 added the
    # MoE backend context).
    with self._draft_worker.draft_tp_context(self._draft_worker.draft_runner.tp_group):
        self._spec_disable_plain = self._spec_disable_build_plain_state(threshold)
    # </piece>
