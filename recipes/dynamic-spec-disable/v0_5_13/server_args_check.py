    # <piece intro>
    # here, with the reasons. EAGLE and EAGLE3 always run EAGLEWorkerV2 in this release
    # (there is no v1 worker any more): SGLANG_ENABLE_SPEC_V2=0 or
    # --disable-overlap-schedule only select its synchronous path, which the fallback
    # serves too (it is called without on_publish and hands over new_seq_lens).
    # </piece>
        # <piece v2-worker>
        # </piece>
    # <piece adaptive>
    if {{cfg}}.speculative_adaptive:
        problems.append(
            "--speculative-adaptive switches the number of draft steps (and the stride the "
            "scheduler reads) by batch size and acceptance rate; it is not combined with the "
            "fallback"
        )
    # </piece>
