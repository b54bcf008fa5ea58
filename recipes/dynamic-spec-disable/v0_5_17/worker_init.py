# <piece threshold>
# N is --speculative-disable-batch-threshold, read as this release's workers read server
# arguments (the field is in the "spec" namespace: get_spec()), or
# SGLANG_SPEC_DISABLE_BATCH_THRESHOLD when the flag is 0 (ServerArgs has normally folded
# the variable into the flag already); 0 keeps speculation always on. ServerArgs refuses
# the set-ups the fallback cannot serve; the checks here repeat those that matter in this
# process.
threshold = (
    get_spec().speculative_disable_batch_threshold
    or envs.SGLANG_SPEC_DISABLE_BATCH_THRESHOLD.get()
)
# </piece>
