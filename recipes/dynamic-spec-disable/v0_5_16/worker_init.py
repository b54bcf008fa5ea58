# <piece hybrid-check>
model_runner = self.target_worker.model_runner
if mambaish_config(model_runner.model_config) is not None:
    # verify() keeps the recurrent state of a speculative step
    # (commit_mamba_states_after_verify, for every target with a mamba-style state:
    # mamba2, GDN, Kimi linear, lightning, registered linear attention); the fallback's
    # plain decode has not been shown to leave that state as the next speculative step
    # expects it.
    raise ValueError(
        "speculative_disable_batch_threshold does not support hybrid mamba/GDN/lightning "
        "target models (their state is updated by verify in a way the fallback does not "
        "reproduce)."
    )
# </piece>
