# <piece doc>
"""Make `state` the worker's step state (steps, draft tokens, backends, graphs); return the previous one."""
# The fields upstream's apply_runtime_state switches, without its log line and without
# rebuilding the top-k chain buffers (no draft step runs on the one-token state). The
# worker, the scheduler and these fields live on one thread; server_args is not touched,
# since the scheduler sizes the next step's KV reservation from it.
# </piece>
# <piece sync>
dw.speculative_num_steps = self.speculative_num_steps
dw.speculative_num_draft_tokens = self.speculative_num_draft_tokens
# </piece>
