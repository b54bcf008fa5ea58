# <piece graph-settings>
# This release's CUDA graph settings are per phase (cuda_graph_config, read through the
# "exec" namespace as this release's workers read it: the same object the graph runners
# read on the model runners' server arguments); the batch sizes captured are the decode
# phase's, which _override_worker_state does not narrow (it overrides the namespace's
# cuda_graph_bs_decode only).
decode_graphs = get_exec().graph.cuda_graph_config.decode
# </piece>
# <piece hidden-states-on>
# The graph runners fix the hidden states they capture when they are built, from the
# model runner's server arguments (get_server_return_hidden_states_mode, which reads
# return_hidden_states_mode before enable_return_hidden_states): both are switched,
# through ServerArgs.override() (server_args is read-only after resolution), for the
# build.
saved_mode = runner_args.return_hidden_states_mode
runner_args.override(
    "dynamic_spec_disable.capture_plain_state",
    enable_return_hidden_states=True,
    return_hidden_states_mode="full",
)
# </piece>
# <piece restore-runner>
model_runner.spec_algorithm, model_runner.init_new_workspace, return_hidden = saved
runner_args.override(
    "dynamic_spec_disable.capture_restore",
    enable_return_hidden_states=return_hidden,
    return_hidden_states_mode=saved_mode,
)
# </piece>
