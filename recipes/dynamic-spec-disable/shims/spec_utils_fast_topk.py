"""verify shim for sglang 0.5.4 on a CPU machine: `spec_utils.fast_topk`, which only CUDA/HIP builds define.

0.5.4's `sglang.srt.speculative.spec_utils` binds `fast_topk` only under `is_cuda()` / `is_hip()` (from sgl_kernel),
but `eagle_draft_extend_cuda_graph_runner` imports it from there unconditionally, so `eagle_worker_v2` cannot be
imported on a CPU machine, pristine or patched (0.5.5 fixed it). On a GPU the name is sgl_kernel's kernel; here it
becomes `sglang.srt.utils.common.fast_topk`, the torch implementation that the worker itself imports. The name is
added right after spec_utils runs, when something first imports it, so the order of imports is unchanged; a release
whose spec_utils defines the name is left alone.
"""

import importlib.abc
import importlib.machinery
import sys

MODULE = "sglang.srt.speculative.spec_utils"


def _add_fast_topk(module):
    if not hasattr(module, "fast_topk"):
        from sglang.srt.utils.common import fast_topk

        module.fast_topk = fast_topk


class _AfterSpecUtils(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname != MODULE:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _add_fast_topk(module)

        spec.loader.exec_module = exec_module
        return spec


if MODULE in sys.modules:
    _add_fast_topk(sys.modules[MODULE])
else:
    sys.meta_path.insert(0, _AfterSpecUtils())
