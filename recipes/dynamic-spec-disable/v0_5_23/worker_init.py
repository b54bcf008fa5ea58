# <piece draft-layout-check>
dw = self._draft_worker
if dw is not None and dw.parallel_layout.local_dp:
    # This release resolves the draft's parallel layout from the draft model's class once the
    # target is loaded (resolve_draft_parallel_layout(model_draft_parallel_spec(...)): a class's
    # draft_parallel_spec, else EAGLE3 runs in one TP group); with attention DP such a draft owns
    # its attention (an attention-TP group of its own, layout.local_dp). The start-up check
    # cannot see the class and refuses EAGLE3 there; any other draft that owns its attention
    # is refused here, as EAGLE3 is.
    raise ValueError(
        "speculative_disable_batch_threshold with DP attention does not support a draft model "
        f"that owns its attention ({type(dw.draft_runner.model).__name__} runs in its own "
        "attention-TP group: draft_parallel_spec SINGLE_GROUP); not served yet."
    )
# </piece>
