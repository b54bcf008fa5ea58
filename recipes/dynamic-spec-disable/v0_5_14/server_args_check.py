# <piece catch-up>
if {{cfg}}.speculative_use_rejection_sampling and catch_up == "skip":
    # A step without speculation leaves the draft input without the draft's
    # probabilities (draft_probs), which the next speculative step's rejection sampling
    # stacks: the catch-up that runs the draft extend provides them.
    problems.append(
        "--speculative-use-rejection-sampling needs the draft catch-up: set "
        "SGLANG_SPEC_DISABLE_CATCH_UP=padded or single (the default, skip, leaves the "
        "draft's probabilities unset after a step without speculation)"
    )
# </piece>
