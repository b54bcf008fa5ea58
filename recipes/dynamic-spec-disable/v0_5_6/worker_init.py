    # <piece build>
    # As the draft worker captures its own graphs in this release: draft-TP and the MoE
    # backend context (0.5.7 added the MoE all-to-all one).
    with self._draft_worker.draft_tp_context(
        self._draft_worker.draft_runner.tp_group
    ), speculative_moe_backend_context():
        self._spec_disable_plain = self._spec_disable_build_plain_state(threshold)
    # </piece>
