# <piece draft-extend-backend>
# This release's factory takes no server arguments: the draft runner carries its
# own attention backend (draft_attention_backend), the rest comes from the
# namespace bags.
draft_extend_backend = DraftBackendFactory(
    dw.draft_runner, self.topk, 0
).create_draft_extend_backend()
# </piece>
# <piece hidden-states-on>
# The graph runners fix the hidden states they capture when they are built, from the
# "exec" namespace (get_server_return_hidden_states_mode reads get_exec().features:
# return_hidden_states_mode before enable_return_hidden_states); ServerArgs has no
# override() any more, so both leaves are switched on the bag for the build, as
# _override_worker_state switches the speculative ones (get_context().override).
features = get_exec().features
saved_features = (features.enable_return_hidden_states, features.return_hidden_states_mode)
get_context().override(
    "dynamic_spec_disable.capture_plain_state",
    enable_return_hidden_states=True,
    return_hidden_states_mode="full",
)
# </piece>
# <piece restore-runner>
model_runner.spec_algorithm, model_runner.init_new_workspace, _ = saved
get_context().override(
    "dynamic_spec_disable.capture_restore",
    enable_return_hidden_states=saved_features[0],
    return_hidden_states_mode=saved_features[1],
)
# </piece>
