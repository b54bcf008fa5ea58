    # <piece intro>
    # here, with the reasons.
    # This release's server_args.py does not import envs at module level.
    from sglang.srt.environ import envs

    # </piece>
    # <piece algorithm>
    if self.speculative_algorithm != "EAGLE":
        problems.append(
            f"--speculative-algorithm {self.speculative_algorithm}: in this release only EAGLE "
            "(and NEXTN, an alias of it) runs the spec-v2 worker (EAGLEWorkerV2) that holds the fallback"
        )
    # </piece>
    # <piece algorithm-tail>
    # </piece>
        # <piece v2-worker>
        if not self.enable_beta_spec or self.disable_overlap_schedule:
            problems.append(
                "the fallback lives in the spec-v2 worker (EAGLEWorkerV2), which runs only with "
                "--enable-beta-spec and the overlap scheduler on; here the v1 worker would run "
                "and ignore the threshold"
            )
        # </piece>
