"""Run at start-up by every Python process of the GPU benchmark (run.sh puts this folder on PYTHONPATH).

sgl_kernel 0.4.3 routes RMSNorm to flashinfer.norm when it imports, and flashinfer then JIT-compiles that kernel
with nvcc on first use (its sources are not carried). Hiding flashinfer.norm, after flashinfer itself has imported
(sglang's sampler needs flashinfer.sampling importable), makes sgl_kernel use its own precompiled RMSNorm: no
compiler runs on the GPU machine. The same in every configuration of the benchmark. From 0.5.15 the DSA backend is
a placeholder too (below).
"""

import os
import sys

# sglang 0.5.15+ imports its DeepSeek sparse-attention backend (dsa_backend) when the draft worker captures its CUDA
# graphs, only to list it among the graph-capable backend classes; that module imports the CUTLASS Python DSL
# (nvidia-cutlass-dsl, hundreds of MB: not carried). 0.5.20 lists its DeepSeek-V4 backend there too, whose import chain
# reaches the DSA backend's functions through the DeepSeek models. The benchmark's Llama never runs either, so every
# server alike (pristine and patched) gets placeholder modules whose classes no backend is an instance of.
if os.environ.get("SPECPATCH_BENCH_STUB_DSA_BACKEND") == "1":
    import types

    # 0.5.23 lists its FlashMLA backend there too, whose module imports the flash_mla package (sgl-flash-mla, a
    # kernel wheel built for 0.5.23's torch: not carried).
    for _module, _cls in (("sglang.srt.layers.attention.dsa_backend", "DeepseekSparseAttnBackend"),
                          ("sglang.srt.layers.attention.deepseek_v4_backend", "DeepseekV4AttnBackend"),
                          ("sglang.srt.layers.attention.flashmla_backend", "FlashMLABackend")):
        _stub = types.ModuleType(_module)
        setattr(_stub, _cls, type(_cls, (), {}))  # never instantiated: isinstance() against it is False
        sys.modules.setdefault(_module, _stub)

    # 0.5.22+ build every Llama MLP with a DualGemm whose mode is chosen by the CUTLASS-DSL module below (a fused
    # gate/up + SwiGLU kernel for decode batches of 1 - 16 tokens, not carried). Its placeholder says the kernel cannot
    # run, so every server alike uses the release's unfused MLP; the figures at C=64 / 128 (batches over 16) never
    # reach that kernel anyway.
    import enum

    _dual = types.ModuleType("sglang.kernels.ops.gemm.cutedsl_dual_gemm")
    _dual.MAX_DUAL_GEMM_DECODE_TOKENS = 16
    _dual.DualGemmQuantMode = enum.IntEnum(
        "DualGemmQuantMode", "STATIC_PER_TENSOR STATIC_PER_TOKEN DYNAMIC_PER_TENSOR DYNAMIC_PER_TOKEN UNQUANT", start=0)
    _dual.can_use_dual_gemm = lambda *args, **kwargs: False
    sys.modules.setdefault(_dual.__name__, _dual)


if os.environ.get("SPECPATCH_BENCH_HIDE_FLASHINFER_NORM") == "1":
    try:
        import flashinfer  # noqa: F401

        sys.modules["flashinfer.norm"] = None
    except Exception as exc:  # a benchmark helper: report, never stop the interpreter
        print(f"sitecustomize: flashinfer not imported ({exc!r})", file=sys.stderr)


# ---- SPECPATCH_BENCH_PROFILE=1: time the worker's stages (synchronising the GPU: for diagnosis runs only, never for
# the figures). Patched in after sglang's eagle_worker_v2 module imports; prints a summary to stderr every 100 steps.
if os.environ.get("SPECPATCH_BENCH_PROFILE") == "1":
    import importlib.abc
    import importlib.util
    import time
    from collections import defaultdict

    _stats = defaultdict(lambda: [0, 0.0])
    _calls = [0]

    def _timed(name, fn):
        def wrapper(*args, **kwargs):
            import torch

            torch.cuda.synchronize()
            t = time.perf_counter()
            out = fn(*args, **kwargs)
            torch.cuda.synchronize()
            entry = _stats[name]
            entry[0] += 1
            entry[1] += time.perf_counter() - t
            if name == "forward_batch_generation":
                graph = getattr(out, "can_run_cuda_graph", None)
                _stats[f"graph={graph}"][0] += 1
                _calls[0] += 1
                if _calls[0] % 100 == 0:
                    line = ", ".join(f"{k}: {v[0]} x {1000 * v[1] / max(v[0], 1):.2f} ms" for k, v in _stats.items())
                    print(f"[profile] {line}", file=sys.stderr, flush=True)
            return out
        return wrapper

    def _patch(module):
        worker = module.EAGLEWorkerV2
        for name in ("forward_batch_generation", "verify", "_forward_without_speculation"):
            if hasattr(worker, name):
                setattr(worker, name, _timed(name, getattr(worker, name)))
        draft = module.EagleDraftWorker
        for name in ("draft", "_draft_extend_for_decode"):
            setattr(draft, name, _timed(name, getattr(draft, name)))

    class _Hook(importlib.abc.MetaPathFinder):
        target = "sglang.srt.speculative.eagle_worker_v2"

        def find_spec(self, name, path, target=None):
            if name != self.target:
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(name)
            loader = spec.loader
            original = loader.exec_module

            def exec_module(module):
                original(module)
                _patch(module)

            loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, _Hook())
