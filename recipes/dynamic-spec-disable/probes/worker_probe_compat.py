"""The fallback behaviour probe (worker_probe.py, written for 0.5.9) run against an older release of the same shape.

worker_probe.py drives the patched EAGLEWorkerV2 with fakes and hands the result to the release's real scheduler
code. Its checks are the contract of the fallback and hold as they are for the releases whose variants use this
probe, except where the *scheduler* of that release differs from 0.5.9's; those pieces are replaced here, each
with the reason. Nothing about the patched worker is relaxed.

- 0.5.4-0.5.8: the scheduler keeps no per-request acceptance histogram (`Req.update_spec_acceptance_histogram`
  appears in 0.5.9), so `_resolve_spec_overlap_token_ids` never calls it; the histogram assertion is dropped there.
"""

from __future__ import annotations

import os
import runpy
import sys
from types import SimpleNamespace

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
probe = runpy.run_path(os.path.join(HERE, "worker_probe.py"), run_name="worker_probe")["main"].__globals__
# (run_path returns a copy of the module globals; the functions use the live ones, reached through `main`)

torch = probe["torch"]
from sglang.srt.managers.schedule_batch import Req  # noqa: E402

HAS_HISTOGRAM = hasattr(Req, "update_spec_acceptance_histogram")


def check_scheduler_accepts(w, result, exp):
    """worker_probe.check_scheduler_accepts, with the histogram assertion only where the release keeps one."""
    EagleDraftInput, overlap_utils = probe["EagleDraftInput"], probe["overlap_utils"]
    bs = len(exp)
    fmap = overlap_utils.FutureMap(max_running_requests=8, chunked_prefill_size=64, context_len=128, device="cpu",
                                   spec_algo=probe["SpeculativeAlgorithm"].EAGLE)
    prefill = EagleDraftInput(topk_p=torch.ones((bs, 1)), topk_index=torch.zeros((bs, 1), dtype=torch.int64),
                              verified_id=torch.zeros((bs,), dtype=torch.int64),
                              new_seq_lens=torch.ones(bs, dtype=torch.int64),
                              hidden_states=torch.zeros((bs, probe["H_DRAFT"])))
    fmap.store_to_map(fmap.alloc_future_indices(bs), SimpleNamespace(next_draft_input=prefill))
    indices = fmap.alloc_future_indices(bs)
    fmap.store_to_map(indices, result)
    nd = result.next_draft_input
    resolved = EagleDraftInput(future_indices=indices)
    record_stream = torch.Tensor.record_stream
    torch.Tensor.record_stream = lambda self, stream: None  # a CUDA-only call in resolve_future
    try:
        fmap.resolve_future(SimpleNamespace(spec_info=resolved))
    finally:
        torch.Tensor.record_stream = record_stream
    assert resolved.verified_id.tolist() == nd.verified_id.tolist(), "FutureMap lost verified_id"
    assert resolved.new_seq_lens.tolist() == nd.new_seq_lens.tolist(), "FutureMap lost new_seq_lens"
    assert torch.equal(resolved.topk_index, nd.topk_index) and torch.equal(resolved.hidden_states, nd.hidden_states)

    result.copy_done = torch.get_device_module("cpu").Event()
    result.copy_to_cpu(return_logprob=True)
    reqs = [probe["FakeReq"](e.s - 1) for e in exp]
    scheduler = SimpleNamespace(draft_worker=w)
    tokens = probe["SchedulerOutputProcessorMixin"]._resolve_spec_overlap_token_ids(
        scheduler, result, SimpleNamespace(reqs=reqs))
    assert tokens == [[e.t] for e in exp], f"the scheduler read {tokens}, not one sampled token per request"
    assert [r.kv_committed_len for r in reqs] == [e.s for e in exp], "kv_committed_len did not advance by 1"
    assert result.num_accepted_tokens == 0 and result.accept_length_per_req_cpu == [0] * bs
    if HAS_HISTOGRAM:
        assert all(r.histogram == [0] for r in reqs)


probe["check_scheduler_accepts"] = check_scheduler_accepts

if __name__ == "__main__":
    probe["main"]()
