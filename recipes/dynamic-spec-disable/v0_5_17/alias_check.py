# specpatch dynamic-spec-disable: upstream turns adaptive speculation off, with only a warning, for set-ups it does
# not support (_maybe_disable_adaptive); the threshold would then be ignored. Refuse to start instead.
if server_args.speculative_disable_batch_threshold > 0 and not server_args.speculative_adaptive:
    from sglang.srt.speculative.adaptive_spec_params import adaptive_unsupported_reason

    raise ValueError(
        f"--speculative-disable-batch-threshold {server_args.speculative_disable_batch_threshold} "
        "is carried out by upstream adaptive speculation (--speculative-adaptive), which sglang "
        "turned off for this set-up: "
        f"{adaptive_unsupported_reason(server_args) or 'see the warning above'}. "
        "Refusing to start rather than ignore the threshold."
    )
