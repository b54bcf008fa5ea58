    # <piece catch-up-check>
    catch_up = envs.SGLANG_SPEC_DISABLE_CATCH_UP.get()
    if catch_up not in ("padded", "single", "skip"):
        problems.append(
            f"SGLANG_SPEC_DISABLE_CATCH_UP={catch_up!r}: the draft catch-up is 'padded', 'single' or 'skip'"
        )
    # </piece>
