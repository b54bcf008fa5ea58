

def _speculative_disable_batch_threshold_arg(value):
    """argparse type of --speculative-disable-batch-threshold (specpatch: dynamic-spec-disable-vllm): an integer
    >= 0, so that a bad value gets argparse's one-line usage error instead of a traceback at start-up."""
    try:
        threshold = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {value!r}") from None
    if threshold < 0:
        raise argparse.ArgumentTypeError(
            f"must be >= 0 (0 means always speculate), got {threshold}"
        )
    return threshold
