"""Checks of the fallback contract shared by both fallback probes (worker_probe.py, the eager fallback, and
worker_probe_graphs.py, the one-token-graph fallback): how the release's real scheduler code takes a step's result,
and the start-up refusals some release families add. What differs per release comes from the adapter `rel`
(_releases.py). Import after `_probe_env.setup()`.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch

from sglang.srt.speculative.eagle_info import EagleDraftInput

import _fakes
from _fakes import H_DRAFT, FakeReq


def scheduler_accepts(rel, w, result, exp):
    """The real scheduler code on the result: a FutureMap store/resolve round trip, copy_to_cpu, the scheduler's
    reading of the tokens (one sampled token per request) and of the accepted-draft counters (none)."""
    bs = len(exp)
    token = rel.token
    # FutureMap: buffers shaped by a prefill result first (as in a server), then the fallback's result, resolved.
    fmap = rel.future_map()
    prefill = EagleDraftInput(topk_p=torch.ones((bs, 1)), topk_index=torch.zeros((bs, 1), dtype=torch.int64),
                              new_seq_lens=torch.ones(bs, dtype=torch.int64), hidden_states=torch.zeros((bs, H_DRAFT)),
                              **{token: torch.zeros((bs,), dtype=torch.int64)})
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
    assert getattr(resolved, token).tolist() == getattr(nd, token).tolist(), f"FutureMap lost {token}"
    assert resolved.new_seq_lens.tolist() == nd.new_seq_lens.tolist(), "FutureMap lost new_seq_lens"
    assert torch.equal(resolved.topk_index, nd.topk_index) and torch.equal(resolved.hidden_states, nd.hidden_states)

    result.copy_done = torch.get_device_module("cpu").Event()
    result.copy_to_cpu(return_logprob=True)
    at_entry = rel.committed_at_entry or 0
    reqs = [FakeReq(e.s + at_entry) for e in exp]
    tokens = rel.resolve(w, result, reqs)
    assert tokens == [[e.t] for e in exp], f"the scheduler read {tokens}, not one sampled token per request"
    if rel.committed_at_entry is not None:
        assert [r.kv_committed_len for r in reqs] == [e.s for e in exp], "kv_committed_len did not advance by 1"
    assert getattr(result, rel.total_count) == 0, f"{rel.total_count} is not 0"
    if rel.per_request_counts:
        assert getattr(result, rel.per_request_counts) == [0] * bs, f"{rel.per_request_counts} is not all 0"
    assert all(r.histogram == ([0] if rel.histogram else []) for r in reqs), "the acceptance histogram is wrong"


def hybrid_refused(rel):
    for attr in rel.hybrid_attrs:
        target = _fakes.FakeTargetWorker()
        setattr(target.model_runner, attr, object())
        try:
            _fakes.init_only(rel, SimpleNamespace(speculative_disable_batch_threshold=3, enable_dp_attention=False),
                             target)
        except ValueError as exc:
            assert "mamba" in str(exc), str(exc)
        except Exception as exc:  # past the checks, the bare worker cannot build the rest of the start-up
            raise AssertionError(f"a target with {attr} was accepted (start-up went on: {exc!r})") from None
        else:
            raise AssertionError(f"a target with {attr} was accepted")
    return f"targets with {', '.join(rel.hybrid_attrs)} are refused at start-up"


def adaptive_refused(rel):
    try:
        _fakes.init_only(rel, SimpleNamespace(speculative_disable_batch_threshold=3, enable_dp_attention=False,
                                              speculative_adaptive=True))
    except ValueError as exc:
        assert "--speculative-adaptive" in str(exc), str(exc)
    except Exception as exc:  # past the checks, the bare worker cannot build the rest of the start-up
        raise AssertionError(f"--speculative-adaptive was accepted beside the threshold (start-up went on: "
                             f"{exc!r})") from None
    else:
        raise AssertionError("--speculative-adaptive was accepted beside the threshold")
    return "--speculative-adaptive beside the threshold is refused at start-up"


#: the names an adapter lists in `extra_checks` -> the check (called with the adapter)
EXTRA_CHECKS = {"hybrid mamba/GDN target refused": hybrid_refused,
                "hybrid mamba/GDN/lightning target refused": hybrid_refused, "adaptive speculation refused": adaptive_refused}
