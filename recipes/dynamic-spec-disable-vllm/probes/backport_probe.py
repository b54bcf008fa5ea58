"""Probe of the backport (vLLM 0.12-0.23): drives vLLM's real V1 Scheduler and AsyncScheduler on CPU.

With --speculative-disable-batch-threshold N (N=4, K=3 ngram drafts): a step whose running batch is larger than N
schedules no draft tokens and charges each decode request 1 token (budget and KV blocks sized without the drafts);
at or below N every decode request verifies its K drafts (1 + K tokens); the switch follows the batch within one
step both ways; scheduled_spec_decode_tokens matches the tokens charged; the async scheduler's output placeholders
grow by exactly 1 + the drafts scheduled; without the flag nothing changes; data parallel > 1 is refused at
start-up; -3 and abc are usage errors of vLLM's parser (exit 2), a negative N in --speculative-config or in
EngineArgs built in code is refused when the config is built. Prints PROBE-OK / PROBE-FAIL lines (see patcher/verify.py).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _vllm_cpu as v  # noqa: E402

N = 4
PLAN = [(2, 0, 6), (6, 0, 6), (0, 5, 6), (4, 0, 6)]  # (add, abort, steps): 2 -> 8 -> 3 -> 7 requests
failures = []


def fail(message):
    failures.append(message)
    print("PROBE-FAIL: " + message)


def ok(message):
    print("PROBE-OK: " + message)


def check_steps(steps, threshold, label, use_async):
    verified = skipped_above = 0
    for t, s in enumerate(steps):
        prev = steps[t - 1]["running"] if t else 0
        for rid in s["decode_ids"]:
            nst, drafts = s["num_scheduled_tokens"][rid], len(s["spec"].get(rid, ()))
            if nst != 1 + drafts:
                fail("%s step %d: %s charged %d tokens for %d drafts (budget/KV sized for drafts that are not "
                     "verified)" % (label, t, rid, nst, drafts))
            if use_async:
                grown = s["placeholders_after"].get(rid, 0) - s["placeholders_before"][rid]
                if grown != 1 + drafts:
                    fail("%s step %d: %s output placeholders grew by %d, not 1 + %d drafts"
                         % (label, t, rid, grown, drafts))
        if set(s["spec"]) - set(s["num_scheduled_tokens"]):
            fail("%s step %d: drafts listed for requests that are not scheduled" % (label, t))
        decoding = [rid for rid in s["decode_ids"] if t and rid in steps[t - 1]["num_scheduled_tokens"]
                    and rid in steps[t - 1]["decode_ids"]]
        if not decoding:
            continue
        above, prev_above = 0 < threshold < s["running"], 0 < threshold < prev
        with_drafts = [rid for rid in decoding if s["spec"].get(rid)]
        if above and prev_above and with_drafts:
            fail("%s step %d: batch %d > N=%d, yet %d requests have drafts scheduled"
                 % (label, t, s["running"], threshold, len(with_drafts)))
        if not above and not prev_above and len(with_drafts) != len(decoding):
            fail("%s step %d: batch %d <= N=%d, yet only %d of %d decode requests have drafts scheduled"
                 % (label, t, s["running"], threshold, len(with_drafts), len(decoding)))
        if above and prev_above:
            skipped_above += 1
        if not above and not prev_above and with_drafts:
            verified += 1
    return verified, skipped_above


def main():
    model = v.model_dir()
    config = v.build_config(v.base_argv(model, extra=["--speculative-disable-batch-threshold", str(N)]))
    got = getattr(config.speculative_config, "disable_batch_threshold", None)
    if got != N:
        fail("the flag did not reach SpeculativeConfig (disable_batch_threshold=%r)" % (got,))
        return
    print("PROBE-OK: --speculative-disable-batch-threshold %d parsed into SpeculativeConfig" % N)
    v.check_bad_thresholds(model, ok, fail)
    for use_async in (False, True):
        label = "async" if use_async else "sync"
        steps = v.run_schedule(v.Driver(v.build_scheduler(config, use_async=use_async), use_async), PLAN)
        verified, skipped = check_steps(steps, N, label, use_async)
        if not verified or not skipped:
            fail("%s: the schedule never reached both regimes (%d steps with drafts at <= N, %d without above N)"
                 % (label, verified, skipped))
        elif not failures:
            print("PROBE-OK: %s scheduler: %d steps at batch <= %d verified K=%d drafts, %d steps above it "
                  "scheduled none and charged 1 token per decode request" % (label, verified, N, v.NUM_SPEC,
                                                                                skipped))
    # control: without the flag every decode step verifies its drafts, whatever the batch
    plain = v.build_config(v.base_argv(model))
    steps = v.run_schedule(v.Driver(v.build_scheduler(plain)), PLAN)
    verified, skipped = check_steps(steps, 0, "no flag", False)
    if skipped or not verified:
        fail("without the flag: %d steps skipped drafts" % skipped)
    else:
        print("PROBE-OK: without the flag all %d decode steps verify drafts" % verified)
    # data parallel > 1: refused at start-up
    try:
        v.build_config(v.base_argv(model, extra=["--speculative-disable-batch-threshold", str(N),
                                                 "--data-parallel-size", "2"]))
    except Exception as exc:  # noqa: BLE001 - the refusal is what we look for, any other error is reported
        if "--speculative-disable-batch-threshold cannot be honoured" in str(exc):
            print("PROBE-OK: data parallel size 2 refused at start-up")
        else:
            fail("data parallel size 2: start-up failed for another reason: %s: %s" % (type(exc).__name__, exc))
    else:
        fail("data parallel size 2 was accepted: each rank would decide on its own batch")


if __name__ == "__main__":
    main()
    sys.exit(1 if failures else 0)
