# <piece head>


def handle_speculative_disable_batch_threshold(server_args: ServerArgs) -> None:
# </piece>
# <piece precedence>
# Precedence: a non-zero flag wins; when the flag is 0,
# SGLANG_SPEC_DISABLE_BATCH_THRESHOLD sets N; otherwise N is 0 and speculation is
# always on. The resolution pipeline calls this right after handle_other_validations,
# once overlap, top-k, multi-layer EAGLE, DP attention and the MoE set-up are declared.
# The record's fields keep the caller's input for the life of the process: everything is
# read through the resolving view (the declarations over the input) and N is written
# with declare_resolution (a field write would be lost). A set-up that the EAGLEWorkerV2
# fallback cannot serve stops the server here, with the reasons.
from sglang.srt.environ import envs

cfg = resolving_view(server_args)
# </piece>
# <piece read-n>
if cfg.speculative_disable_batch_threshold == 0 and env.is_set():
# </piece>
# <piece parse-n>
declare_resolution(
    server_args,
    "speculative_disable_batch_threshold",
    speculative_disable_batch_threshold=int(raw.strip()),
)
# </piece>
# <piece threshold>
threshold = cfg.speculative_disable_batch_threshold
# </piece>
# <piece no-algorithm>
# The algorithm as the speculative hook declared it (NEXTN resolved to EAGLE, upper-cased,
# a Gemma4 assistant draft promoted to FROZEN_KV_MTP); the field keeps what was typed.
if cfg.speculative_algorithm is None:
# </piece>
# <piece no-effect>
declare_resolution(
    server_args,
    "speculative_disable_batch_threshold",
    speculative_disable_batch_threshold=0,
)
# </piece>
# <piece view>
# </piece>
# <piece algorithm>
if cfg.pp_size > 1:
    # Only the last pipeline stage hosts the draft worker; the fallback is not built for
    # pipeline parallelism (upstream's Engine refuses speculation with it too).
    problems.append(f"--pp-size {cfg.pp_size}: the fallback runs without pipeline parallelism")
if cfg.speculative_algorithm not in ("EAGLE", "EAGLE3"):
    problems.append(
        f"--speculative-algorithm {cfg.speculative_algorithm}: only EAGLE, EAGLE3 "
# </piece>
# <piece moe-a2a>
or cfg.moe_a2a_backend in ("none", "flashinfer")
# </piece>
# <piece intro>
# </piece>
# <piece v2-worker>
# </piece>
# <piece adaptive>
if cfg.speculative_adaptive:
    problems.append(
        "--speculative-adaptive switches the number of draft steps (and the stride the "
        "scheduler reads) by batch size and acceptance rate; it is not combined with the "
        "fallback"
    )
# </piece>
# <piece catch-up>
if cfg.speculative_use_rejection_sampling and catch_up == "skip":
    # A step without speculation leaves the draft input without the draft's
    # probabilities (draft_probs), which the next speculative step's rejection sampling
    # stacks: the catch-up that runs the draft extend provides them.
    problems.append(
        "--speculative-use-rejection-sampling needs the draft catch-up: set "
        "SGLANG_SPEC_DISABLE_CATCH_UP=padded or single (the default, skip, leaves the "
        "draft's probabilities unset after a step without speculation)"
    )
# </piece>
