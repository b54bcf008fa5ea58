    # <piece nan-check>
    # As verify() does in this release (SGLANG_SPEC_NAN_DETECTION; the worker has no enable_nan_detection).
    maybe_detect_nan(logits_output.next_token_logits, "fallback: target model logits")
    if logits_output.next_token_logprobs is not None:
        # The spec-v2 scheduler reads a row of logprobs per request (one per accepted token) and indexes
        # the top-k / token-id lists at i * row length + j: one token per request makes rows of 1.
        logits_output.next_token_logprobs = logits_output.next_token_logprobs.reshape(-1, 1)
    # </piece>
