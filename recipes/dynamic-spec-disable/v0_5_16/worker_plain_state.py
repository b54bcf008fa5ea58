# <piece hidden-states-on>
# Server arguments change through override() after resolution in this release (as
# _override_worker_state switches them), also for the build.
runner_args.override(
    "dynamic_spec_disable.capture_plain_state", enable_return_hidden_states=True
)
# </piece>
# <piece restore-runner>
model_runner.spec_algorithm, model_runner.init_new_workspace, return_hidden = saved
runner_args.override(
    "dynamic_spec_disable.capture_restore", enable_return_hidden_states=return_hidden
)
# </piece>
