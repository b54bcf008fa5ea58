    # <piece graph-compatible>
    # The next step's DP sync reads this input's draft-graph vote (cuda_graph_compatible,
    # min-reduced over the ranks): as the draft extend sets it, False where the draft seeds
    # its DSA top-k from the draft extend, which this step skipped (no seed to replay with).
    next_draft_input.cuda_graph_compatible = (
        not self.draft_worker.seed_dsa_topk_from_draft_extend
    )
    # </piece>
