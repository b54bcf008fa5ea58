    # <piece forward>
    logits_output, _ = draft_runner.forward(forward_batch)  # (logits, can_run_graph) here
    # </piece>
