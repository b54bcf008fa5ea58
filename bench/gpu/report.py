"""Print the GPU benchmark's table from the per-server JSON files of one run (bench/gpu/run.sh writes them).

    python bench/gpu/report.py DIR

Throughput per concurrency for every configuration, the fallback's ratios against no speculation and against
plain speculation measured in the same run, the steps run without speculation, whether every request's greedy
output equals the no-speculation server's, and each server's start-up time and GPU memory.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ORDER = ["nospec", "spec", "adaptive-skip", "fallback", "fallback-skip"]
TITLES = {"nospec": "no speculation", "spec": "EAGLE3, N=0", "adaptive-skip": "upstream adaptive, 0 steps above {n}",
          "fallback": "N={n}, catch-up", "fallback-skip": "N={n}, no catch-up"}
RATIOS = ("adaptive", "fallback")  #: the configurations whose ratios against nospec and spec are printed


def load(folder: Path) -> dict[str, dict]:
    found = {}
    for name in ORDER:
        path = folder / f"{name}.json"
        if path.is_file():
            found[name] = json.loads(path.read_text())
    return found


def identical(run: dict, reference: dict | None) -> str:
    if reference is None:
        return "-"
    mine, theirs = run["outputs"], reference["outputs"]
    same = sum(a == b for a, b in zip(mine, theirs))
    return f"{same}/{len(theirs)}" + ("" if same == len(theirs) and len(mine) == len(theirs) else " DIFFER")


def main(folder: Path) -> int:
    runs = load(folder)
    if not runs:
        print(f"no results in {folder}")
        return 1
    n = next((r["threshold"] for r in runs.values() if r["config"].startswith(RATIOS)), "N")
    base = runs.get("nospec")
    spec = runs.get("spec")
    keys = []
    for record in runs.values():
        for key in record["runs"]:
            if key not in keys:
                keys.append(key)
    cols = [c for c in ORDER if c in runs]
    head = ["concurrency"] + [TITLES[c].format(n=n) + " tok/s" for c in cols]
    for c in cols:
        if c.startswith(RATIOS):
            head += [f"{c} / nospec", f"{c} / spec", f"{c} steps off", f"{c} = nospec"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for key in keys:
        row = [key]
        for c in cols:
            run = runs[c]["runs"].get(key)
            row.append(f"{run['tokens_per_s']:.0f}" if run else "-")
        for c in cols:
            if not c.startswith(RATIOS):
                continue
            run = runs[c]["runs"].get(key)
            if run is None:
                row += ["-"] * 4
                continue
            b = base["runs"].get(key) if base else None
            s = spec["runs"].get(key) if spec else None
            row.append(f"{run['tokens_per_s'] / b['tokens_per_s']:.2f}x" if b else "-")
            row.append(f"{run['tokens_per_s'] / s['tokens_per_s']:.2f}x" if s else "-")
            row.append(str(run.get("spec_disabled_steps")))
            row.append(identical(run, b))
        print("| " + " | ".join(row) + " |")
    print()
    print("| server | start-up s | GPU memory MiB | KV tokens | spec = nospec (all runs) |")
    print("|---|---|---|---|---|")
    for c in cols:
        r = runs[c]
        same = "-"
        if base and c != "nospec":
            pairs = [(run, base["runs"][k]) for k, run in r["runs"].items() if k in base["runs"]]
            total = sum(len(b["outputs"]) for _, b in pairs)
            equal = sum(x == y for run, b in pairs for x, y in zip(run["outputs"], b["outputs"]))
            same = f"{equal}/{total}"
        print(f"| {c} | {r['startup_s']:.1f} | {r.get('gpu_memory_mib')} | {r.get('max_total_num_tokens')} | {same} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "bench/results/gpu")))
