"""The server-arguments probe (server_args_probe.py, written for 0.5.9) run against another release.

Where the release differs from 0.5.9 in what the probe sets up, this wrapper edits the probe's source before running
it; each edit applies only to releases that have the difference (found by looking at the release) and must find its
text once, else the probe fails (server_args_probe.py changed and this list needs a look):

- Spec v2 on by default (0.5.11, 0.5.12): `SGLANG_ENABLE_SPEC_V2` unset means v2, so the "v1 worker is refused"
  cases, which clear the variable, set it to 0 instead.
- No multi-layer EAGLE (0.5.4-0.5.7: no `enable_multi_layer_eagle`): that refusal case is dropped.
- No `SGLANG_SCHEDULER_SKIP_ALL_GATHER` (0.5.4-0.5.6): the cases that set it are dropped.
- No IDLE handling in the spec-v2 worker (0.5.4-0.5.5): DP attention, accepted on later releases, must be refused.
"""

from __future__ import annotations

import dataclasses
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

from sglang.srt.managers.schedule_batch import ModelWorkerBatch  # noqa: E402

if "reqs" not in {f.name for f in dataclasses.fields(ModelWorkerBatch)}:  # 0.5.4-0.5.5: no IDLE handling in v2
    EDITS.append(("DP attention is refused with this release's spec-v2 worker (no IDLE handling)",
                  "        dp._handle_speculative_disable_batch_threshold()\n",
                  "        refused(dp, \"IDLE\")\n"))


def main():
    src = open(PATH, encoding="utf-8").read()
    for reason, old, new in EDITS:
        if src.count(old) != 1:
            print(f"PROBE-FAIL: compat edit '{reason}' found {src.count(old)} times in server_args_probe.py "
                  "(expected once): the 0.5.9 probe changed; update probes/server_args_probe_compat.py")
            sys.exit(1)
        src = src.replace(old, new)
    if EDITS:
        print("compat edits: " + "; ".join(sorted({r for r, _, _ in EDITS})), flush=True)
    exec(compile(src, PATH, "exec"), {"__name__": "__main__", "__file__": PATH})


if __name__ == "__main__":
    main()
