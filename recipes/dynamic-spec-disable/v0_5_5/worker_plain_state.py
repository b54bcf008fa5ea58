    # <piece draft-scope>
    # This release's spec-v2 draft extend runs eagerly on the draft model runner's own attention
    # backend (the draft worker captures a draft-extend graph, but only the v1 worker replays
    # it), so the one-token catch-up needs no backend or graph of its own: no draft half, and
    # no draft scope to build it in.
    # </piece>
        # <piece draft-graph>
        # </piece>
