# specpatch dynamic-spec-disable: --speculative-disable-batch-threshold N is a thin alias of upstream adaptive
# speculation. It turns --speculative-adaptive on with a config of two batch-size slots: S draft steps up to N
# requests, 0 steps ("nospec": no drafting, a 1-token verify) above N. SGLANG_SPEC_DISABLE_BATCH_THRESHOLD sets N
# <piece intro>
# when the flag is 0. The check that adaptive is still on comes at the end of this function.
spec_disable_source = "--speculative-disable-batch-threshold"
spec_disable_n = server_args.speculative_disable_batch_threshold
# </piece>
spec_disable_env = os.environ.get("SGLANG_SPEC_DISABLE_BATCH_THRESHOLD", "").strip()
if spec_disable_n == 0 and spec_disable_env:
    try:
        spec_disable_n = int(spec_disable_env)
    except ValueError:
        raise ValueError(
            f"SGLANG_SPEC_DISABLE_BATCH_THRESHOLD={spec_disable_env!r} is not an integer; it is the "
            "decode batch size above which speculative decoding is disabled (0 = always speculate)."
        ) from None
    spec_disable_source = "SGLANG_SPEC_DISABLE_BATCH_THRESHOLD"
if spec_disable_n < 0:
    raise ValueError(
        f"{spec_disable_source} must be >= 0 (0 means always speculate), got {spec_disable_n}."
    )
# <piece no-algorithm>
if spec_disable_n > 0 and server_args.speculative_algorithm is None:
# </piece>
    logger.warning(
        f"{spec_disable_source}={spec_disable_n} has no effect: speculative decoding is not enabled."
    )
    spec_disable_n = 0
# <piece write-n>
server_args.speculative_disable_batch_threshold = spec_disable_n
if spec_disable_n > 0:
    if server_args.speculative_adaptive_config is not None:
# </piece>
        raise ValueError(
            f"{spec_disable_source}={spec_disable_n} writes the adaptive speculation config itself; "
            f"it cannot be combined with --speculative-adaptive-config "
            # <piece config-in-message>
            f"{server_args.speculative_adaptive_config}: put a slot "
            # </piece>
            f'"{spec_disable_n + 1}": {{"candidate_steps": [0]}} in that file instead.'
        )
    # <piece read-steps>
    spec_disable_steps = server_args.speculative_num_steps
    # </piece>
    if spec_disable_steps is None:
        spec_disable_steps = 3
    if spec_disable_steps < 1:
        raise ValueError(
            f"{spec_disable_source} needs --speculative-num-steps >= 1, got {spec_disable_steps}."
        )
    # Routing pads the batch size up to an explicit --cuda-graph-bs(-decode) list before it picks a slot:
    # "above N" stays exact only if N is in that list (or not below its largest entry).
    # <piece read-graph-bs>
    spec_disable_graph_bs = server_args.cuda_graph_bs_decode
    # </piece>
    if (
        spec_disable_graph_bs
        and spec_disable_n not in spec_disable_graph_bs
        and spec_disable_n < max(spec_disable_graph_bs)
    ):
        raise ValueError(
            f"{spec_disable_source}={spec_disable_n} with --cuda-graph-bs-decode "
            f"{' '.join(map(str, spec_disable_graph_bs))}: adaptive speculation pads the batch size to "
            f"that list before it applies the threshold, so batches of N or fewer could lose "
            f"speculation; add {spec_disable_n} to the list."
        )
    spec_disable_config = {
        "1": {"candidate_steps": [spec_disable_steps]},
        str(spec_disable_n + 1): {"candidate_steps": [0]},
    }
    spec_disable_path = os.path.join(
        tempfile.gettempdir(),
        f"sglang-spec-disable-batch-threshold-{spec_disable_n}-steps-{spec_disable_steps}.json",
    )
    spec_disable_tmp = f"{spec_disable_path}.{os.getpid()}.tmp"
    with open(spec_disable_tmp, "w") as spec_disable_file:
        json.dump(spec_disable_config, spec_disable_file)
    os.replace(spec_disable_tmp, spec_disable_path)
    # <piece write-adaptive>
    server_args.speculative_adaptive = True
    server_args.speculative_adaptive_config = spec_disable_path
    # </piece>
    logger.info(
        f"{spec_disable_source}={spec_disable_n}: decode batches of more than {spec_disable_n} "
        f"requests run without drafting (upstream adaptive speculation, config "
        f"{json.dumps(spec_disable_config)} in {spec_disable_path})."
    )
