# <piece eagle3-dp-attention>
if cfg.attn_dp_size > 1 and cfg.speculative_algorithm == "EAGLE3":
    # With attention DP a draft whose model runs in one TP group owns its attention: this
    # release resolves the draft's parallel layout from the draft model's class
    # (draft_parallel.py: a class's draft_parallel_spec, else EAGLE3 runs in one TP group) and
    # its scope, draft_tp_context(parallel_layout), installs the attention-TP group as the TP
    # group. The class is resolved once the target is loaded, which this check cannot see: it
    # refuses EAGLE3 (every EAGLE3 draft of this release runs in one group), and the worker
    # refuses any other draft whose layout owns its attention (parallel_layout.local_dp). The
    # refusal waits for a multi-GPU run.
    problems.append(
        "EAGLE3 with DP attention (--attn-dp-size > 1, or the deprecated --dp-size with "
        "--enable-dp-attention): the EAGLE3 draft owns its attention there (its own attention-TP "
        "group, draft_parallel_spec SINGLE_GROUP); not served yet (EAGLE and NEXTN drafts that "
        "follow the target's layout are)"
    )
# </piece>
