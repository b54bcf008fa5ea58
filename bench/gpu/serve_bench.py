"""One server of the GPU benchmark: start an sglang Engine in one configuration, run the workload, write JSON.

Run by bench/gpu/run.sh on the GPU machine, once per configuration, each in a fresh process (sglang's Engine spawns
its scheduler, hence the `__main__` guard). The sglang on sys.path decides pristine or patched; the configuration
decides the server arguments:

    nospec          no speculative decoding
    spec            EAGLE3 (steps 3, top-k 1, 4 draft tokens), threshold 0: always speculate
    fallback        the same with --speculative-disable-batch-threshold N (default catch-up: one-token draft extend)
    fallback-skip   the same with SGLANG_SPEC_DISABLE_CATCH_UP=skip (no draft catch-up while speculation is off);
                    on 0.5.17+, where the flag is an alias of upstream adaptive speculation, the same with
                    upstream's SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND=1 (no draft extend at 0 steps)
    adaptive-skip   the peer, on the pristine tree (0.5.14+): upstream's own adaptive speculation configured as the
                    alias did, 3 steps up to N requests and 0 steps above (--speculative-adaptive, a config file),
                    with upstream's SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND=1, its fastest 0-step setting

Workload (identical token ids in every configuration, greedy, ignore_eos):
    for each concurrency C: one warm-up of C requests, then C requests of INPUT random tokens generating OUTPUT
    tokens, submitted at once; tokens/s = C * OUTPUT / wall time.
    crossing: requests of different lengths submitted in two waves, so that the decode batch crosses N upwards when
    the second wave arrives and downwards as its short requests finish, mid-request for the long ones.
Every request's output ids are written, so that report.py can compare them with the no-speculation server's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODELS = HERE / "models"
SPEC = dict(
    speculative_algorithm="EAGLE3",
    speculative_draft_model_path=str(MODELS / "eagle3-llama-3-8b"),
    speculative_num_steps=3,
    speculative_eagle_topk=1,
    speculative_num_draft_tokens=4,
)


def server_args(config: str, threshold: int, max_running: int) -> tuple[dict, dict]:
    """The Engine's keyword arguments and the environment of one configuration."""
    common = dict(
        model_path=str(MODELS / "llama-3-8b"),
        load_format="dummy",
        skip_tokenizer_init=True,
        attention_backend="triton",
        sampling_backend="pytorch",
        mem_fraction_static=0.7,
        max_running_requests=max_running,
        cuda_graph_max_bs=max_running,
        # fewer graphs and no piecewise (prefill) graphs: a shorter start-up, the same decode path
        cuda_graph_bs=[bs for bs in (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256) if bs <= max_running],
        disable_piecewise_cuda_graph=True,
        disable_radix_cache=True,
        random_seed=0,
        log_level=os.environ.get("BENCH_LOG_LEVEL", "warning"),
    )
    env = {}
    if config == "nospec":
        return common, env
    kwargs = dict(common, **SPEC)
    if config == "spec":
        return kwargs, env
    if config == "adaptive-skip":
        path = Path(tempfile.gettempdir()) / f"bench-adaptive-{threshold}.json"
        path.write_text(json.dumps({"1": {"candidate_steps": [SPEC["speculative_num_steps"]]},
                                    str(threshold + 1): {"candidate_steps": [0]}}))
        kwargs.update(speculative_adaptive=True, speculative_adaptive_config=str(path))
        env["SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND"] = "1"
        return kwargs, env
    kwargs["speculative_disable_batch_threshold"] = threshold
    env["SGLANG_SPEC_DISABLE_CATCH_UP"] = "skip" if config == "fallback-skip" else "padded"
    if config == "fallback-skip":
        env["SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND"] = "1"  # read by the alias releases (0.5.17+) only
    return kwargs, env


# 0.5.14 renamed the CUDA-graph arguments (the old names are CLI aliases only, not ServerArgs fields)
RENAMED = {
    "cuda_graph_max_bs": "cuda_graph_max_bs_decode",
    "cuda_graph_bs": "cuda_graph_bs_decode",
    "disable_piecewise_cuda_graph": "disable_prefill_cuda_graph",
}


def release_names(kwargs: dict) -> dict:
    """The same arguments under the names of the sglang on sys.path."""
    import dataclasses

    from sglang.srt.server_args import ServerArgs

    # ServerArgs is a dataclass up to 0.5.19 and a msgspec Struct from 0.5.20 (its fields in __struct_fields__)
    if dataclasses.is_dataclass(ServerArgs):
        fields = {f.name for f in dataclasses.fields(ServerArgs)}
    else:
        fields = set(ServerArgs.__struct_fields__)
    return {RENAMED[k] if k not in fields and RENAMED.get(k) in fields else k: v for k, v in kwargs.items()}


def gpu_memory_used_mib() -> int | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30).stdout
        return int(out.split()[0])
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
        return None


def prompts(n: int, length: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(1000, 120000) for _ in range(length)] for _ in range(n)]


def greedy(max_new_tokens: int) -> dict:
    return {"max_new_tokens": max_new_tokens, "temperature": 0.0, "ignore_eos": True}


def spec_disabled_steps(engine) -> int | None:
    info = engine.get_server_info()
    states = info.get("internal_states") or [{}]
    return states[0].get("spec_disable_num_steps")


async def crossing(engine, threshold: int, input_len: int) -> tuple[list[list[int]], float]:
    """Wave 1: threshold // 2 long requests (speculating); wave 2, once wave 1 decodes: 2 * threshold shorter ones
    (the batch crosses N upwards, every request stops speculating); as the short ones finish the batch crosses N
    downwards and the long ones speculate again."""
    first = prompts(max(threshold // 2, 1), input_len, seed=101)
    second = prompts(2 * threshold, input_len, seed=102)
    lengths_first = [256] * len(first)
    lengths_second = [32 + 8 * (i % 12) for i in range(len(second))]

    async def one(ids, n):
        out = await engine.async_generate(input_ids=ids, sampling_params=greedy(n))
        return out["output_ids"]

    t0 = time.perf_counter()
    tasks = [asyncio.create_task(one(ids, n)) for ids, n in zip(first, lengths_first)]
    await asyncio.sleep(0.4)
    tasks += [asyncio.create_task(one(ids, n)) for ids, n in zip(second, lengths_second)]
    outs = await asyncio.gather(*tasks)
    return outs, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, choices=["nospec", "spec", "adaptive-skip", "fallback", "fallback-skip"])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--tree", default="", help="which sglang tree (recorded only)")
    parser.add_argument("--threshold", type=int, default=16)
    parser.add_argument("--concurrency", default="1,16,64,128")
    parser.add_argument("--input-len", type=int, default=128)
    parser.add_argument("--output-len", type=int, default=128)
    parser.add_argument("--no-crossing", action="store_true")
    args = parser.parse_args()
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    kwargs, env = server_args(args.config, args.threshold, max(concurrencies))
    os.environ.update(env)
    if args.config != "nospec":
        os.environ.setdefault("SGLANG_ENABLE_SPEC_V2", "1")

    import sglang

    kwargs = release_names(kwargs)
    record: dict = {"config": args.config, "tree": args.tree, "threshold": args.threshold, "env": env,
                    "sglang": sglang.__version__, "server_args": kwargs, "runs": {}}
    mem_before = gpu_memory_used_mib()
    t0 = time.perf_counter()
    engine = sglang.Engine(**kwargs)
    record["startup_s"] = time.perf_counter() - t0
    mem_after = gpu_memory_used_mib()
    record["gpu_memory_mib"] = None if mem_before is None or mem_after is None else mem_after - mem_before
    info = engine.get_server_info()
    state = (info.get("internal_states") or [{}])[0]
    record["memory_usage"] = state.get("memory_usage")
    record["max_total_num_tokens"] = info.get("max_total_num_tokens") or state.get("memory_usage", {}).get(
        "token_capacity")
    try:
        for c in concurrencies:
            ids = prompts(c, args.input_len, seed=c)
            engine.generate(input_ids=ids, sampling_params=greedy(8))  # warm this concurrency once
            steps0 = spec_disabled_steps(engine)
            t = time.perf_counter()
            outs = engine.generate(input_ids=ids, sampling_params=greedy(args.output_len))
            dt = time.perf_counter() - t
            steps1 = spec_disabled_steps(engine)
            record["runs"][str(c)] = {
                "seconds": dt,
                "tokens_per_s": c * args.output_len / dt,
                "spec_disabled_steps": None if steps0 is None else steps1 - steps0,
                "outputs": [o["output_ids"] for o in outs],
            }
            print(f"[{args.config}] C={c}: {c * args.output_len / dt:.0f} tok/s", flush=True)
        if not args.no_crossing:
            steps0 = spec_disabled_steps(engine)
            outs, dt = engine.loop.run_until_complete(crossing(engine, args.threshold, args.input_len))
            steps1 = spec_disabled_steps(engine)
            record["runs"]["crossing"] = {
                "seconds": dt,
                "tokens_per_s": sum(len(o) for o in outs) / dt,
                "spec_disabled_steps": None if steps0 is None else steps1 - steps0,
                "outputs": outs,
            }
            print(f"[{args.config}] crossing: {sum(len(o) for o in outs) / dt:.0f} tok/s", flush=True)
    finally:
        args.out.write_text(json.dumps(record))
        engine.shutdown()


if __name__ == "__main__":
    sys.exit(main())
