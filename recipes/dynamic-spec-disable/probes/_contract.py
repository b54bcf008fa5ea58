"""Checks of the fallback contract shared by the fallback probes (worker_probe_graphs.py, the one-token-graph fallback
of 0.5.4 - 0.5.12; worker_probe_on_publish.py, 0.5.13's): how the release's real scheduler code takes a step's result,
the start-up refusals some release families add, and the checks every probe runs on its own scene (the environment
variable, the start-up log line, the worker's refusals). What differs per release comes from the adapter `rel`
(_releases.py). Import after `_probe_env.setup()`.
"""

from __future__ import annotations

import contextlib
import logging
from types import SimpleNamespace

import torch

from sglang.srt.environ import envs
from sglang.srt.model_executor.forward_batch_info import ForwardMode
from sglang.srt.speculative.eagle_info import EagleDraftInput
from sglang.srt.speculative.eagle_worker_v2 import EAGLEWorkerV2

import _fakes
from _fakes import H_DRAFT, H_TARGET, N_DRAFT, STEPS, FakeReq


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
        target = rel.hybrid_target(attr)
        try:
            _fakes.init_only(rel, SimpleNamespace(speculative_disable_batch_threshold=3, enable_dp_attention=False),
                             target)
        except ValueError as exc:
            assert "mamba" in str(exc), str(exc)
        except Exception as exc:  # past the checks, the bare worker cannot build the rest of the start-up
            raise AssertionError(f"a target with {attr} was accepted (start-up went on: {exc!r})") from None
        else:
            raise AssertionError(f"a target with {attr} was accepted")
    return f"targets with {', '.join(rel.hybrid_attrs[:-1])} or {rel.hybrid_attrs[-1]} are refused at start-up"


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


def resolved_not_input(rel):
    """0.5.19+: the record's fields keep the operator's input for the life of the process, and resolution's decisions
    are in the bags. The worker's start-up must read the latter: DP attention that a DeepSeek override or context
    parallel declares (the field says False) with a set-up that skips the all-gather of the per-rank batch sizes is
    refused; adaptive speculation that upstream declared off (the field says True) is not."""
    from sglang.srt.layers.moe.utils import MoeA2ABackend
    from sglang.srt.runtime_context import get_flags

    record = SimpleNamespace(speculative_disable_batch_threshold=3, enable_dp_attention=False,
                             speculative_adaptive=False)
    dp = SimpleNamespace(**vars(record), dp_size=2, tp_size=2, moe_dense_tp_size=1, enable_dp_lm_head=True)
    dp.enable_dp_attention = True
    moe = get_flags().moe
    saved = moe.a2a_backend
    moe.a2a_backend = MoeA2ABackend.DEEPEP  # what initialize_moe_config seeds for --moe-a2a-backend deepep
    try:
        _fakes.init_only(rel, record, resolved=dp)
    except ValueError as exc:
        assert "all-gather" in str(exc), str(exc)
    except Exception as exc:
        raise AssertionError(f"declared DP attention without the all-gather: {exc!r}") from None
    else:
        raise AssertionError("DP attention declared by resolution (the field says False), without the all-gather of "
                             "the batch sizes, was accepted: the ranks could take different paths")
    finally:
        moe.a2a_backend = saved
    record.speculative_adaptive = True  # asked for; resolution declared it off (_maybe_disable_adaptive)
    try:
        _fakes.init_only(rel, record, resolved=SimpleNamespace(**dict(vars(record), speculative_adaptive=False)))
    except ValueError as exc:
        raise AssertionError(f"adaptive speculation that resolution turned off was refused: {exc}") from None
    return "DP attention declared by resolution without the all-gather refused; --speculative-adaptive that " \
           "resolution declared off accepted"


def scene_check(name: str):
    """A check written in the adapter's scene module (`rel.scene`), by its function's name."""
    def check(rel):
        import importlib

        return getattr(importlib.import_module(rel.scene), name)()
    return check


#: the names an adapter lists in `extra_checks` -> the check (called with the adapter)
EXTRA_CHECKS = {"hybrid mamba/GDN target refused": hybrid_refused, "hybrid mamba/GDN/lightning target refused":
                hybrid_refused, "adaptive speculation refused": adaptive_refused,
                "the start-up reads the resolution, not the input": resolved_not_input,
                "grammar barrier before the target's sampler": scene_check("check_grammar_barrier"),
                "hidden states captured on a server returning the last only":
                scene_check("check_plain_state_last_mode"),
                "draft scope and draft-graph vote as the release's own": scene_check("check_draft_scope_and_vote"),
                "draft layout and draft-graph vote as the release's own": scene_check("check_draft_layout_and_vote"),
                "target graph runner selected as the release's own":
                scene_check("check_target_graph_runner_selected")}


# ------------------------------------------------------------------------------------- checks on a probe's scene
# `probe` is the probe module: make_worker(threshold, *, catch_up=None, ...), decode_batch(bs, ...) and step(w, batch),
# the worker's forward as that release's scheduler calls it; its workers record their calls (took_fallback reads them).


def speculative_state(w) -> dict:
    """The fields a step without speculation switches: {name: (now, as the speculative path has it)}."""
    dw, mr = w.draft_worker, w.target_worker.model_runner
    rel = mr.rel
    extra = {}
    if rel.draft_runner_backend:  # 0.5.14: the draft extend reads the draft runner's backend
        extra["draft_runner_backend"] = (dw.draft_runner.attn_backend, dw.spec_extend_backend)
    return dict(
        worker_steps=(w.speculative_num_steps, STEPS), worker_draft_tokens=(w.speculative_num_draft_tokens, N_DRAFT),
        steps=(dw.speculative_num_steps, STEPS), draft_tokens=(dw.speculative_num_draft_tokens, N_DRAFT),
        draft_extend_backend=(dw.draft_extend_attn_backend, dw.spec_extend_backend),
        draft_extend_graph=(dw.cuda_graph_runner_for_draft_extend, dw.spec_extend_graph),
        draft_graph=(dw.cuda_graph_runner, dw.spec_draft_graph),
        draft_backend=(dw.draft_attn_backend, dw.spec_draft_backend),
        target_backend=(mr.attn_backend, mr.verify_backend),
        target_graph=(getattr(mr, rel.target_graph_attr), mr.verify_graph),
        spec_algorithm=(mr.spec_algorithm, dw.speculative_algorithm),
        return_hidden=(rel.hidden_states_settings(mr.server_args)[0], False),
        target_cuda_graph_bs=(rel.graph_bs(mr.server_args), mr.spec_cuda_graph_bs),
        draft_server_steps=(dw.draft_runner.server_args.speculative_num_steps, STEPS),
        draft_server_tokens=(dw.draft_runner.server_args.speculative_num_draft_tokens, N_DRAFT),
        draft_cuda_graph_bs=(rel.graph_bs(dw.draft_runner.server_args), mr.spec_cuda_graph_bs),
        **extra,
    )


def assert_speculative_state(w, when: str):
    """Every field a step without speculation swaps is back to the speculative path's."""
    wrong = {k: v[0] for k, v in speculative_state(w).items()
             if not (v[0] == v[1] if isinstance(v[1], (list, int)) else v[0] is v[1])}
    assert not wrong, f"{when}: not restored (not put back): {wrong}"


def took_speculative_path(w) -> bool:
    return bool(w.draft_worker.draft_calls) and bool(w.verify_calls)


def took_fallback(w) -> bool:
    return not w.draft_worker.draft_calls and not w.verify_calls and len(w.target_worker.calls) == 1 \
        and w.target_worker.calls[0].mode.is_decode()


def env_var(probe, catch_up_default: str | None):
    env = envs.SGLANG_SPEC_DISABLE_BATCH_THRESHOLD
    with env.override(2):
        w = probe.make_worker(0)
        assert w.spec_disable_batch_threshold == 2, "SGLANG_SPEC_DISABLE_BATCH_THRESHOLD was not read when the flag is 0"
        probe.step(w, probe.decode_batch(3))
        assert took_fallback(w), "bs 3 > N 2 (from the environment) did not take the fallback"
        w = probe.make_worker(5)
        assert w.spec_disable_batch_threshold == 5, "the flag must win over the environment variable"
        probe.step(w, probe.decode_batch(3))
        assert took_speculative_path(w)
    if catch_up_default:
        got = probe.make_worker(2).spec_disable_catch_up
        assert got == catch_up_default, \
            f"SGLANG_SPEC_DISABLE_CATCH_UP defaults to {got!r}, not the recipe's catchup_mode {catch_up_default!r}"
    return f"the variable sets N when the flag is 0; a non-zero flag wins; catch-up default {catch_up_default!r}"


@contextlib.contextmanager
def records_of(logger: logging.Logger):
    """The log records `logger` emits in the body, at INFO and above."""
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        yield records
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def log_once(probe):
    from sglang.srt.speculative import eagle_worker_v2

    with records_of(logging.getLogger(eagle_worker_v2.__name__)) as records:
        w = probe.make_worker(6, catch_up="padded")
        for _ in range(3):
            probe.step(w, probe.decode_batch(7))
        probe.make_worker(0)
    lines = [r.getMessage() for r in records if "speculation disable is on" in r.getMessage().lower()]
    assert len(lines) == 1, f"expected one start-up line, got {lines}"
    assert "6" in lines[0], f"the line does not say N: {lines[0]}"
    assert w.spec_disable_steps == 3, f"{w.spec_disable_steps} steps without speculation counted, not 3"
    return lines[0]


def refusals(probe, modes=("padded", "single", "skip")):
    problems = []
    for name, kwargs, expected_texts in (
        ("negative", dict(threshold=-1), (">= 0",)),
        ("catch-up", dict(threshold=2, catch_up="sideways"), modes),
    ):
        try:
            probe.make_worker(kwargs["threshold"], catch_up=kwargs.get("catch_up"))
        except ValueError as exc:
            if not all(text in str(exc) for text in expected_texts):
                problems.append(f"{name}: {exc}")
        else:
            problems.append(f"{name}: accepted")
    for mode in modes:
        if probe.make_worker(2, catch_up=mode).spec_disable_catch_up != mode:
            problems.append(f"{mode}: not accepted")
    w = EAGLEWorkerV2.__new__(EAGLEWorkerV2)
    w.topk = 4
    try:
        w._init_speculative_disable(SimpleNamespace(speculative_disable_batch_threshold=3, enable_dp_attention=False))
    except ValueError as exc:
        assert "topk" in str(exc), str(exc)
    else:
        problems.append("topk 4: accepted")
    assert not problems, "; ".join(problems)
    return f"the worker accepts {'/'.join(modes)} and refuses N < 0, topk != 1 and an unknown catch-up mode"


def threshold_zero(probe):
    w = probe.make_worker(0)
    probe.step(w, probe.decode_batch(7))
    assert w.spec_disable_batch_threshold == 0
    assert took_speculative_path(w), "N = 0 must always speculate (draft, then verify)"
    assert len(w.draft_worker.extend_decode_calls) == 1, "the speculative path's draft extend did not run"
    probe.check_speculative_step(w)
    return "N = 0: bs 7 ran draft, verify, draft extend"


def small_batch_speculates(probe):
    for bs in (1, 4):
        w = probe.make_worker(4)
        probe.step(w, probe.decode_batch(bs))
        assert took_speculative_path(w), f"bs {bs} <= N 4 must speculate"
        assert not w.target_worker.calls, "the target ran a plain forward on the speculative path"
        probe.check_speculative_step(w)
    return "bs 1 and bs 4 with N = 4 ran draft then verify, on the speculative state"


def nan_detection(probe, rel):
    w = probe.make_worker(1, nan_detection=True)
    w.target_worker.nan_logits = True
    try:
        with rel.nan_detection(True):
            probe.step(w, probe.decode_batch(2))
    except rel.nan_errors as exc:
        assert "NaN" in str(exc), str(exc)
    else:
        raise AssertionError("NaN logits went through with NaN detection on (verify's check raises)")
    probe.assert_speculative_state(w, "after NaN detection raised")
    w = probe.make_worker(1, nan_detection=False)
    w.target_worker.nan_logits = True
    with rel.nan_detection(False):
        probe.step(w, probe.decode_batch(2))
    return "NaN logits raise with NaN detection on, as verify's check does"


# ----------------------------------------------------------- pieces of a probe's check of a step without speculation
# `exp`: per request, s (its length), v (its previous token), t (the sampled one), slot (its KV slot at s), draft (the
# draft's answer at position s).


def target_forward(w):
    """Routing: no draft, no verify, one target forward: DECODE, without a spec_info, not a verify. Returns it."""
    assert not w.draft_worker.draft_calls, "draft() was called for a batch larger than N"
    assert not w.verify_calls, "verify() was called for a batch larger than N"
    assert len(w.target_worker.calls) == 1, f"the target ran {len(w.target_worker.calls)} times, not once"
    call = w.target_worker.calls[0]
    assert call.mode == ForwardMode.DECODE, f"target forward mode {call.mode}, not DECODE"
    assert call.spec_info_is_none, "the target forward got a spec_info (attention would read it as a draft)"
    assert not call.is_verify, "the target forward was a verify forward"
    return call


def target_input(call, exp):
    """The target's input: the previous tokens (int64) at lengths s + 1."""
    assert call.input_ids.tolist() == [e.v for e in exp], \
        f"target input {call.input_ids.tolist()} is not the previous tokens {[e.v for e in exp]}"
    assert call.input_ids.dtype == torch.int64
    assert call.seq_lens.tolist() == [e.s + 1 for e in exp], "target seq_lens are not s + 1"


def target_cpu_lens(call, exp, seq_lens_values):
    assert call.seq_lens_cpu.tolist() == [e.s + 1 for e in exp], "target seq_lens_cpu are not s + 1"
    assert call.seq_lens_sum == int(seq_lens_values.sum()) + len(exp), "target seq_lens_sum is not sum(s) + bs"


def target_slots(call, exp):
    assert call.out_cache_loc.tolist() == [e.slot for e in exp], \
        f"target KV slots {call.out_cache_loc.tolist()} are not req_to_token[row, s]"
    assert call.out_cache_loc.dtype == torch.int64


def draft_input_shapes(nd, bs: int):
    assert nd.topk_p is not None and tuple(nd.topk_p.shape) == (bs, 1) and nd.topk_p.dtype == torch.float32
    assert nd.topk_index is not None and tuple(nd.topk_index.shape) == (bs, 1) and nd.topk_index.dtype == torch.int64
    assert nd.hidden_states is not None and tuple(nd.hidden_states.shape) == (bs, H_DRAFT)


def catch_up_extend(de, exp, seq_lens_values):
    """The draft extend of the catch-up: the request's slot at s, one accepted token each, the target's rows."""
    assert de.out_cache_loc.tolist() == [e.slot for e in exp], \
        "the draft extend does not write the request's slot at position s"
    assert de.accept_lens.tolist() == [1] * len(exp)
    assert de.hidden_shape == (len(exp), H_TARGET), f"draft extend hidden states {de.hidden_shape}"
    assert torch.equal(de.seq_lens_values, seq_lens_values), "the draft extend got modified seq_lens"


def catch_up_rows(rc, nd, exp):
    """The draft model's forward of the catch-up: one row per request, the sampled token at position s, fed by its
    own target row; the next draft input from its answer."""
    bs = len(exp)
    assert rc.mode == ForwardMode.DRAFT_EXTEND_V2, f"draft catch-up mode {rc.mode}"
    assert len(rc.input_ids) == bs, f"{len(rc.input_ids)} draft tokens for {bs} requests"
    assert rc.input_ids.tolist() == [e.t for e in exp], "the draft did not get the sampled tokens"
    assert rc.positions.tolist() == [e.s for e in exp], "the draft rows are not at position s"
    assert [int(rc.spec_hidden[r, 1]) for r in range(bs)] == [1000 + i for i in range(bs)], \
        "the draft rows do not carry the target hidden state of their own request"
    assert nd.topk_index[:, 0].tolist() == [e.draft for e in exp], \
        "next_draft_input.topk_index does not come from the draft's answer at position s"
    assert nd.hidden_states[:, 0].tolist() == [float(e.s) for e in exp] and \
        nd.hidden_states[:, 1].tolist() == [float(e.t) for e in exp], \
        "next_draft_input.hidden_states is not the draft hidden state at position s"
