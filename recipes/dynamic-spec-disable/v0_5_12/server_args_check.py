    # <piece adaptive>
    if {{cfg}}.speculative_adaptive:
        problems.append(
            "--speculative-adaptive switches the number of draft steps (and the stride the "
            "scheduler reads) by acceptance rate; it is not combined with the fallback"
        )
    # </piece>
