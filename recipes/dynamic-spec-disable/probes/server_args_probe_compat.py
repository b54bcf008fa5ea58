"""The server-arguments probe (server_args_probe.py, written for 0.5.9) run against another release.

Where the release differs from 0.5.9 in what the probe sets up, this wrapper edits the probe's source before running
it; each edit applies only to releases that have the difference (found by looking at the release) and must find its
text once, else the probe fails (server_args_probe.py changed and this list needs a look):

- Spec v2 on by default (0.5.11, 0.5.12): `SGLANG_ENABLE_SPEC_V2` unset means v2, so the "v1 worker is refused"
  cases, which clear the variable, set it to 0 instead.
- No multi-layer EAGLE (0.5.4-0.5.7: no `enable_multi_layer_eagle`): that refusal case is dropped.
- No `SGLANG_SCHEDULER_SKIP_ALL_GATHER` (0.5.4-0.5.6): the cases that set it are dropped.
- No IDLE handling in the spec-v2 worker (0.5.4-0.5.5): DP attention, accepted on later releases, must be refused.
- Spec v2 selected by `--enable-beta-spec` (0.5.4: no `SGLANG_ENABLE_SPEC_V2`), for EAGLE only: the probe's
  `SGLANG_ENABLE_SPEC_V2="1"` / `None` become `enable_beta_spec` True / False (on the dataclass for the direct
  cases, `--enable-beta-spec` for parsed ones), its supported set-up is EAGLE (not EAGLE3), the refusal must name
  `--enable-beta-spec`, and EAGLE3 is one more set-up that must be refused.
- No v1 worker (0.5.13+: no `sglang.srt.speculative.eagle_worker`): EAGLE/EAGLE3 always run EAGLEWorkerV2, and
  `SGLANG_ENABLE_SPEC_V2=0` / `--disable-overlap-schedule` only select its synchronous path, which the 0.5.13 port
  serves (worker_probe_on_publish.py runs it through the scheduler's synchronous path). The "v1 worker is refused"
  cases become "accepted", and the full __post_init__ case also checks that sglang then creates EAGLEWorkerV2.
- No `ModelWorkerBatch` (0.5.13+: the worker takes the ScheduleBatch): the 0.5.4-0.5.5 test above is skipped.
- Adaptive speculation on the spec-v2 worker (0.5.12+: `AdaptiveController` in eagle_worker_v2.py): an extra check
  that `--speculative-adaptive` beside the threshold is refused, directly and through the whole __post_init__
  (where sglang's own `_maybe_disable_adaptive` runs first and keeps it on for a supported set-up).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(1, HERE)
import _probe_env  # noqa: E402

_probe_env.setup()

from sglang.srt.environ import envs  # noqa: E402
from sglang.srt.server_args import ServerArgs  # noqa: E402

PATH = os.path.join(HERE, "server_args_probe.py")
EDITS = []

BETA_SPEC = not hasattr(type(envs), "SGLANG_ENABLE_SPEC_V2") and not hasattr(envs, "SGLANG_ENABLE_SPEC_V2")
SPEC_V2_DEFAULT = False
if not BETA_SPEC:
    _saved = os.environ.pop("SGLANG_ENABLE_SPEC_V2", None)
    SPEC_V2_DEFAULT = envs.SGLANG_ENABLE_SPEC_V2.get()
    if _saved is not None:
        os.environ["SGLANG_ENABLE_SPEC_V2"] = _saved
if SPEC_V2_DEFAULT:
    EDITS += [
        ("spec v2 is the default: select v1 with SGLANG_ENABLE_SPEC_V2=0",
         "    with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None, SGLANG_ENABLE_SPEC_V2=None):\n"
         "        refused(eagle_ok(speculative_disable_batch_threshold=8), \"SGLANG_ENABLE_SPEC_V2=1\")\n",
         "    with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None, SGLANG_ENABLE_SPEC_V2=\"0\"):\n"
         "        refused(eagle_ok(speculative_disable_batch_threshold=8), \"SGLANG_ENABLE_SPEC_V2=1\")\n"),
        ("spec v2 is the default: select v1 with SGLANG_ENABLE_SPEC_V2=0",
         "            with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None, SGLANG_ENABLE_SPEC_V2=None):\n"
         "                try:\n",
         "            with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None, SGLANG_ENABLE_SPEC_V2=\"0\"):\n"
         "                try:\n"),
    ]
if "enable_multi_layer_eagle" not in {f.name for f in dataclasses.fields(ServerArgs)}:
    EDITS.append(("no multi-layer EAGLE in this release",
                  "            (\"multi-layer\", eagle_ok(enable_multi_layer_eagle=True), [\"multi-layer EAGLE\"]),\n", ""))
if not hasattr(type(envs), "SGLANG_SCHEDULER_SKIP_ALL_GATHER") and not hasattr(envs, "SGLANG_SCHEDULER_SKIP_ALL_GATHER"):
    EDITS += [
        ("no SGLANG_SCHEDULER_SKIP_ALL_GATHER in this release",
         "SGLANG_SCHEDULER_SKIP_ALL_GATHER=None, ", ""),
        ("no SGLANG_SCHEDULER_SKIP_ALL_GATHER in this release",
         "    with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None, SGLANG_ENABLE_SPEC_V2=\"1\",\n"
         "                     SGLANG_SCHEDULER_SKIP_ALL_GATHER=\"1\"):\n"
         "        refused(eagle_ok(speculative_disable_batch_threshold=8, enable_dp_attention=True, dp_size=2, tp_size=2),\n"
         "                \"SGLANG_SCHEDULER_SKIP_ALL_GATHER\")\n", ""),
    ]

if BETA_SPEC:
    EDITS += [
        ("spec v2 is --enable-beta-spec: a switch the probe's environment() turns",
         "def parse(*argv: str) -> ServerArgs:\n",
         "BETA_SPEC_ON = [False]\n\n\n"
         "@contextlib.contextmanager\n"
         "def beta_spec(on: bool):\n"
         "    saved, BETA_SPEC_ON[0] = BETA_SPEC_ON[0], on\n"
         "    try:\n"
         "        yield\n"
         "    finally:\n"
         "        BETA_SPEC_ON[0] = saved\n\n\n"
         "def parse(*argv: str) -> ServerArgs:\n"),
        ("spec v2 is --enable-beta-spec: SGLANG_ENABLE_SPEC_V2 turns it",
         "        for name, value in values.items():\n            field = getattr(envs, name)\n",
         "        for name, value in values.items():\n"
         "            if name == \"SGLANG_ENABLE_SPEC_V2\":\n"
         "                stack.enter_context(beta_spec(value == \"1\"))\n"
         "                continue\n"
         "            field = getattr(envs, name)\n"),
        ("spec v2 is --enable-beta-spec: parsed arguments get it",
         "    return ServerArgs.from_cli_args(parser.parse_args(list(argv)))\n",
         "    beta = [\"--enable-beta-spec\"] if BETA_SPEC_ON[0] else []\n"
         "    return ServerArgs.from_cli_args(parser.parse_args(list(argv) + beta))\n"),
        ("spec v2 (--enable-beta-spec) serves EAGLE only: the supported set-up",
         "    base = dict(speculative_algorithm=\"EAGLE3\", ",
         "    base = dict(speculative_algorithm=\"EAGLE\", enable_beta_spec=BETA_SPEC_ON[0], "),
        ("spec v2 (--enable-beta-spec) serves EAGLE only: EAGLE3 is refused",
         "            (\"STANDALONE\", eagle_ok(speculative_algorithm=\"STANDALONE\"), [\"STANDALONE\"]),\n",
         "            (\"STANDALONE\", eagle_ok(speculative_algorithm=\"STANDALONE\"), [\"STANDALONE\"]),\n"
         "            (\"EAGLE3\", eagle_ok(speculative_algorithm=\"EAGLE3\"), [\"EAGLE3\", \"only EAGLE\"]),\n"),
        ("the v1-worker refusal names --enable-beta-spec",
         "\"SGLANG_ENABLE_SPEC_V2=1\"", "\"--enable-beta-spec\"", 3),
    ]

from sglang.srt.managers import schedule_batch  # noqa: E402

MODEL_WORKER_BATCH = getattr(schedule_batch, "ModelWorkerBatch", None)  # 0.5.13+: none, the worker takes the batch
if MODEL_WORKER_BATCH is not None and "reqs" not in {f.name for f in dataclasses.fields(MODEL_WORKER_BATCH)}:
    # 0.5.4-0.5.5: no IDLE handling in v2
    EDITS.append(("DP attention is refused with this release's spec-v2 worker (no IDLE handling)",
                  "        dp._handle_speculative_disable_batch_threshold()\n",
                  "        refused(dp, \"IDLE\")\n"))

if not BETA_SPEC and importlib.util.find_spec("sglang.srt.speculative.eagle_worker") is None:  # 0.5.13+
    EDITS += [
        ("no v1 worker: spec v2 off / no overlap is EAGLEWorkerV2's synchronous path, accepted",
         "            (\"v1 worker\", eagle_ok(disable_overlap_schedule=True), [\"SGLANG_ENABLE_SPEC_V2=1\"]),\n", ""),
        ("no v1 worker: spec v2 off / no overlap is EAGLEWorkerV2's synchronous path, accepted",
         "    with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None, SGLANG_ENABLE_SPEC_V2=\"0\"):\n"
         "        refused(eagle_ok(speculative_disable_batch_threshold=8), \"SGLANG_ENABLE_SPEC_V2=1\")\n",
         "    for spec_v2 in (\"0\", \"1\"):\n"
         "        with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None, SGLANG_ENABLE_SPEC_V2=spec_v2):\n"
         "            sync = eagle_ok(speculative_disable_batch_threshold=8, disable_overlap_schedule=True)\n"
         "            sync._handle_speculative_disable_batch_threshold()\n"
         "            assert sync.speculative_disable_batch_threshold == 8\n"),
        ("no v1 worker: spec v2 off / no overlap is EAGLEWorkerV2's synchronous path, accepted",
         "    return \"topk 4, multi-layer EAGLE, the v1 worker, STANDALONE, ",
         "    return \"(no overlap / spec v2 off accepted: EAGLEWorkerV2's synchronous path) topk 4, multi-layer EAGLE, "
         "STANDALONE, "),
        ("no v1 worker: spec v2 off / no overlap is EAGLEWorkerV2's synchronous path, accepted",
         "                try:\n"
         "                    parse(*common, \"--speculative-eagle-topk\", \"1\", \"--speculative-num-steps\", \"3\",\n"
         "                          \"--speculative-num-draft-tokens\", \"4\")\n"
         "                except ValueError as exc:\n"
         "                    assert \"SGLANG_ENABLE_SPEC_V2=1\" in str(exc), str(exc)\n"
         "                else:\n"
         "                    raise AssertionError(\"the v1 worker (spec v2 off) was accepted\")\n",
         "                args = parse(*common, \"--speculative-eagle-topk\", \"1\", \"--speculative-num-steps\", \"3\",\n"
         "                             \"--speculative-num-draft-tokens\", \"4\")\n"
         "                assert args.disable_overlap_schedule and args.speculative_disable_batch_threshold == 8, \\\n"
         "                    \"spec v2 off (EAGLEWorkerV2's synchronous path) was not accepted\"\n"
         "                from sglang.srt.speculative.eagle_worker_v2 import EAGLEWorkerV2\n"
         "                from sglang.srt.speculative.spec_info import SpeculativeAlgorithm\n"
         "                worker = SpeculativeAlgorithm.from_string(args.speculative_algorithm).create_worker(args)\n"
         "                assert worker is EAGLEWorkerV2, f\"spec v2 off creates {worker}, not EAGLEWorkerV2\"\n"),
        ("no v1 worker: spec v2 off / no overlap is EAGLEWorkerV2's synchronous path, accepted",
         "\"max_running_requests 48; spec v2 off refused\"",
         "\"max_running_requests 48; spec v2 off accepted (sglang creates EAGLEWorkerV2)\""),
    ]


WORKER_V2 = importlib.util.find_spec("sglang.srt.speculative.eagle_worker_v2")
if WORKER_V2 is not None and "AdaptiveController" in open(WORKER_V2.origin, encoding="utf-8").read():  # 0.5.12+
    EDITS += [
        ("extra check: --speculative-adaptive refused beside the threshold (adaptive on the spec-v2 worker)",
         "    report.run(\"real __post_init__\", check_real_post_init)\n",
         "    report.run(\"real __post_init__\", check_real_post_init)\n"
         "    report.run(\"adaptive speculation refused\", check_adaptive_refused)\n"),
        ("extra check: --speculative-adaptive refused beside the threshold (adaptive on the spec-v2 worker)",
         "\ndef main():\n",
         "\ndef check_adaptive_refused():\n"
         "    with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None, SGLANG_ENABLE_SPEC_V2=\"1\"):\n"
         "        refused(eagle_ok(speculative_disable_batch_threshold=8, speculative_adaptive=True),\n"
         "                \"--speculative-adaptive\")\n"
         "    with tempfile.TemporaryDirectory(prefix=\"specpatch-probe-\") as model:\n"
         "        with open(os.path.join(model, \"config.json\"), \"w\") as f:\n"
         "            json.dump(TINY_LLAMA, f)\n"
         "        try:\n"
         "            with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None, SGLANG_ENABLE_SPEC_V2=\"1\"):\n"
         "                parse(\"--model-path\", model, \"--device\", \"cpu\", \"--speculative-algorithm\", \"EAGLE\",\n"
         "                      \"--speculative-draft-model-path\", model, \"--speculative-disable-batch-threshold\", \"8\",\n"
         "                      \"--speculative-eagle-topk\", \"1\", \"--speculative-num-steps\", \"3\",\n"
         "                      \"--speculative-num-draft-tokens\", \"4\", \"--speculative-adaptive\")\n"
         "        except ValueError as exc:  # the threshold's check, not one of sglang's own\n"
         "            assert \"--speculative-adaptive\" in str(exc) and \\\n"
         "                \"--speculative-disable-batch-threshold=8 cannot be used\" in str(exc), str(exc)\n"
         "        except (ImportError, OSError) as exc:\n"
         "            print(f\"PROBE-SKIP: full __post_init__ with --speculative-adaptive not run: {exc}\")\n"
         "            return \"--speculative-adaptive beside the threshold is refused (full __post_init__ not run)\"\n"
         "        else:\n"
         "            raise AssertionError(\"--speculative-adaptive was accepted beside the threshold\")\n"
         "    return \"--speculative-adaptive beside the threshold is refused, also after sglang's own adaptive \" \\\n"
         "           \"checks in the full __post_init__\"\n"
         "\n\ndef main():\n"),
    ]


def main():
    src = open(PATH, encoding="utf-8").read()
    for reason, old, new, *count in EDITS:
        expected = count[0] if count else 1
        if src.count(old) != expected:
            print(f"PROBE-FAIL: compat edit '{reason}' found {src.count(old)} times in server_args_probe.py "
                  f"(expected {expected}): the 0.5.9 probe changed; update probes/server_args_probe_compat.py")
            sys.exit(1)
        src = src.replace(old, new)
    if EDITS:
        print("compat edits: " + "; ".join(sorted({e[0] for e in EDITS})), flush=True)
    exec(compile(src, PATH, "exec"), {"__name__": "__main__", "__file__": PATH})


if __name__ == "__main__":
    main()
