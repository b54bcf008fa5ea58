"""Probe of the alias (vLLM 0.24+): --speculative-disable-batch-threshold N is written as vLLM's own dynamic
speculation, and vLLM's real V1 Scheduler / AsyncScheduler run it on CPU.

Checks (N=4, K=3 ngram drafts): VllmConfig holds num_speculative_tokens_per_batch_size [[1, N, K], [N+1,
max_num_seqs, 0]]; the scheduler's batch-size -> K table gives K up to N and 0 above; driven step by step, a step
whose batch is above N asks the drafter for 0 tokens (SchedulerOutput.num_spec_tokens_to_schedule) and, from the
next step, schedules and charges no drafts (the lag is at most one step, both ways); the async scheduler's
placeholders match K; data parallel > 1 and a method vLLM's V1 proposer cannot size are refused at start-up
(vLLM would drop the schedule with only a warning; vLLM 0.34+, variant alias-0.34, has no V1 runner, and such a
method is served with the schedule); -3 and abc are usage errors of vLLM's parser (exit 2), a
negative N in --speculative-config or in EngineArgs built in code is refused when the config is built. Prints
PROBE-OK / PROBE-FAIL lines.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _vllm_cpu as v  # noqa: E402
from backport_probe import PLAN, check_steps, failures, fail, ok  # noqa: E402  (same step checks)

N = 4
VARIANT = os.environ.get("SPECPATCH_VARIANT", "alias")  #: alias (vLLM 0.24 - 0.33) or alias-0.34 (one runner)


def refused(argv, what):
    try:
        v.build_config(argv)
    except Exception as exc:  # noqa: BLE001 - the refusal is what we look for, any other error is reported
        if "--speculative-disable-batch-threshold cannot be honoured" in str(exc):
            print("PROBE-OK: %s refused at start-up" % what)
        else:
            fail("%s: start-up failed for another reason: %s: %s" % (what, type(exc).__name__, exc))
    else:
        fail("%s was accepted: vLLM drops or ignores the schedule there" % what)


def main():
    model = v.model_dir()
    config = v.build_config(v.base_argv(model, extra=["--speculative-disable-batch-threshold", str(N)]))
    sc = config.speculative_config
    want = [[1, N, v.NUM_SPEC], [N + 1, v.MAX_NUM_SEQS, 0]]
    got = [list(e) for e in (sc.num_speculative_tokens_per_batch_size or [])]
    if got != want:
        fail("num_speculative_tokens_per_batch_size is %r, not %r" % (got, want))
        return
    print("PROBE-OK: the flag is written as num_speculative_tokens_per_batch_size %r" % (want,))
    v.check_bad_thresholds(model, ok, fail)
    for use_async in (False, True):
        label = "async" if use_async else "sync"
        scheduler = v.build_scheduler(config, use_async=use_async)
        table = scheduler.dynamic_sd_lookup
        expected = [0] + [v.NUM_SPEC] * N + [0] * (v.MAX_NUM_SEQS - N)
        if list(table or []) != expected:
            fail("%s: the scheduler's batch-size -> K table is %r, not %r" % (label, table, expected))
            continue
        steps = v.run_schedule(v.Driver(scheduler, use_async), PLAN)
        for t, s in enumerate(steps):
            k = s["k_field"]
            if s["batch"] and k != (0 if s["batch"] > N else v.NUM_SPEC):
                fail("%s step %d: batch %d asked the drafter for K=%r" % (label, t, s["batch"], k))
        verified, skipped = check_steps(steps, N, label, use_async)
        if not verified or not skipped:
            fail("%s: the schedule never reached both regimes (%d steps with drafts at <= N, %d without above N)"
                 % (label, verified, skipped))
        elif not failures:
            print("PROBE-OK: %s scheduler: K=%d at batch <= %d (%d steps verified drafts), K=0 above it (%d steps "
                  "charged no drafts)" % (label, v.NUM_SPEC, N, verified, skipped))
    flag = ["--speculative-disable-batch-threshold", str(N)]
    refused(v.base_argv(model, extra=flag + ["--data-parallel-size", "2"]), "data parallel size 2")
    if VARIANT == "alias-0.34":
        # one GPU model runner, which keeps the first K drafts of every method's proposal: no method is refused
        try:
            config = v.build_config(v.base_argv(model, method="ngram_gpu", extra=flag))
        except Exception as exc:  # noqa: BLE001 - a refusal or any other start-up failure is the finding
            fail("method ngram_gpu: start-up failed: %s: %s" % (type(exc).__name__, exc))
            return
        got = [list(e) for e in (config.speculative_config.num_speculative_tokens_per_batch_size or [])]
        if got != want:
            fail("method ngram_gpu: the schedule is %r, not %r" % (got, want))
        else:
            print("PROBE-OK: method ngram_gpu served with the schedule (one model runner)")
        return
    # the V1 model runner (forced: vLLM 0.33 picks V2 for this model where Triton is installed), whose ngram_gpu
    # proposer vLLM 0.33 does not give a per-step K (it drops the schedule with a warning)
    os.environ["VLLM_USE_V2_MODEL_RUNNER"] = "0"
    refused(v.base_argv(model, method="ngram_gpu", extra=flag), "method ngram_gpu on the V1 model runner")


if __name__ == "__main__":
    main()
    sys.exit(1 if failures else 0)
