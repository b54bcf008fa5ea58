        # <piece multi-layer>
        # </piece>
        # <piece dp-all-gather>
        if not (
        # </piece>
