"""The server-arguments probe (server_args_probe.py, written for 0.5.9) run against a release where spec v2 is on
by default (0.5.11, 0.5.12).

There `SGLANG_ENABLE_SPEC_V2` unset means v2, so the probe's "v1 worker is refused" cases, which clear the variable,
would run v2 and rightly be accepted. This wrapper sets the variable to 0 in those cases instead (each edit must find
its text once, else the probe fails: server_args_probe.py changed and this list needs a look).
"""

from __future__ import annotations

import os
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
PATH = os.path.join(HERE, "server_args_probe.py")
EDITS = [
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


def main():
    src = open(PATH, encoding="utf-8").read()
    for reason, old, new in EDITS:
        if src.count(old) != 1:
            print(f"PROBE-FAIL: compat edit '{reason}' found {src.count(old)} times in server_args_probe.py "
                  "(expected once): the 0.5.9 probe changed; update probes/server_args_probe_compat.py")
            sys.exit(1)
        src = src.replace(old, new)
    exec(compile(src, PATH, "exec"), {"__name__": "__main__", "__file__": PATH})


if __name__ == "__main__":
    main()
