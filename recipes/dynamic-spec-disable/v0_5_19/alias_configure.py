# <piece intro>
# when the flag is 0. The check that adaptive is still on comes at the end of this function. Reads go through the
# resolving view `cfg`, writes through declare_resolution: the record's input is frozen during resolution.
spec_disable_source = "--speculative-disable-batch-threshold"
spec_disable_n = cfg.speculative_disable_batch_threshold
# </piece>
# <piece no-algorithm>
if spec_disable_n > 0 and cfg.speculative_algorithm is None:
# </piece>
# <piece write-n>
if spec_disable_n != cfg.speculative_disable_batch_threshold:
    declare_resolution(
        server_args,
        "speculative_disable_batch_threshold",
        speculative_disable_batch_threshold=spec_disable_n,
    )
if spec_disable_n > 0:
    if cfg.speculative_adaptive_config is not None:
# </piece>
            # <piece config-in-message>
            f"{cfg.speculative_adaptive_config}: put a slot "
            # </piece>
    # <piece read-steps>
    spec_disable_steps = cfg.speculative_num_steps
    # </piece>
    # <piece read-graph-bs>
    spec_disable_graph_bs = cfg.cuda_graph_bs_decode
    # </piece>
    # <piece write-adaptive>
    declare_resolution(
        server_args,
        "speculative_disable_batch_threshold",
        speculative_adaptive=True,
        speculative_adaptive_config=spec_disable_path,
    )
    # </piece>
