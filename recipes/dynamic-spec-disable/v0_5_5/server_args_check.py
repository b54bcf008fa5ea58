        # <piece dp-all-gather>
        problems.append(
            "DP attention: this release's spec-v2 worker has no IDLE-batch handling (it came in 0.5.6)"
        )
    if self.enable_dp_attention:
        if not (
        # </piece>
