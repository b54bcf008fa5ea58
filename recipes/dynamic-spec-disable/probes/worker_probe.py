"""Behaviour probe of the eager fallback (the recipe's own steps and the 0.5.4-0.5.5 ports), on CPU.

The contract of a step without speculation, written once: routing by N (and by the DP-global batch size), one eager
DECODE of the target with its verify CUDA graphs set aside, the result in the speculative shape, the draft caught up
at position s, and the result handed to the release's real scheduler code (GenerationBatchResult.copy_to_cpu, the
scheduler's reading of the tokens, a FutureMap store/resolve round trip). The worker is built without its __init__
around the fakes of _fakes.py; what differs per release (batches, fakes, the scheduler side) comes from the adapter
of the variant the engine applied (_releases.py, chosen by SPECPATCH_VARIANT; unset: the recipe's own steps).
"""

from __future__ import annotations

import logging
import os
import sys
from types import SimpleNamespace

sys.dont_write_bytecode = True  # no __pycache__ in the recipe folder
sys.path.insert(1, os.path.dirname(os.path.abspath(__file__)))
import _probe_env  # noqa: E402

PARAMS = _probe_env.setup()
report = _probe_env.Report()

import torch  # noqa: E402

from sglang.srt.environ import envs  # noqa: E402
from sglang.srt.managers import overlap_utils  # noqa: E402
from sglang.srt.managers.schedule_batch import ModelWorkerBatch  # noqa: E402
from sglang.srt.model_executor import forward_batch_info  # noqa: E402
from sglang.srt.model_executor.forward_batch_info import CaptureHiddenMode, ForwardMode  # noqa: E402
from sglang.srt.sampling.sampling_batch_info import SamplingBatchInfo  # noqa: E402
from sglang.srt.speculative import eagle_worker_v2  # noqa: E402
from sglang.srt.speculative.eagle_info import EagleDraftInput  # noqa: E402
from sglang.srt.speculative.eagle_worker_v2 import EAGLEWorkerV2  # noqa: E402
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm  # noqa: E402

import _contract  # noqa: E402
import _fakes  # noqa: E402
import _releases  # noqa: E402
from _fakes import H_DRAFT, H_TARGET, N_DRAFT, V, FakeReq, FakeTargetWorker, draft_token, slot, target_token  # noqa: E402

VARIANT = os.environ.get("SPECPATCH_VARIANT", "")
REL = _releases.BY_VARIANT[VARIANT]() if VARIANT in _releases.BY_VARIANT else None

# The distributed groups do not exist on CPU; ForwardBatch.init_new asks them whether to pad token counts.
forward_batch_info.enable_num_token_non_padded = lambda *args: False
# FutureMap asks the global server args whether hidden states travel (yes, unless multi-layer EAGLE).
overlap_utils.spec_need_hidden_states = lambda server_args=None: True


def make_worker(threshold: int = 0, **kwargs):
    return _fakes.make_worker(REL, threshold, **kwargs)


def token(draft_input):
    """The draft input's sampled token (verified_id, or bonus_tokens from 0.5.12)."""
    return getattr(draft_input, REL.token)


def sampling_info(bs: int) -> SamplingBatchInfo:
    return SamplingBatchInfo(
        temperatures=torch.ones((bs, 1)), top_ps=torch.ones(bs), top_ks=torch.full((bs,), V), min_ps=torch.zeros(bs),
        is_all_greedy=True, need_top_p_sampling=False, need_top_k_sampling=False, need_min_p_sampling=False,
        vocab_size=V, device="cpu", **REL.penalties(bs))


def decode_batch(bs: int, *, mode: ForwardMode = ForwardMode.DECODE, global_num_tokens=None,
                 is_extend_in_batch: bool = False, has_grammar: bool = False) -> ModelWorkerBatch:
    """A spec-v2 decode batch as it reaches the worker: stale input_ids and out_cache_loc, resolved spec_info."""
    idle = mode.is_idle()
    seq_lens = torch.tensor([20 + 9 * i for i in range(bs)], dtype=torch.int64)
    verified = torch.tensor([(11 * i + 5) % V for i in range(bs)], dtype=torch.int32)
    spec_info = None if idle else EagleDraftInput(
        topk_p=torch.ones((bs, 1)), topk_index=torch.zeros((bs, 1), dtype=torch.int64),
        hidden_states=torch.zeros((bs, H_DRAFT)), new_seq_lens=seq_lens.clone(), capture_hidden_mode=CaptureHiddenMode.FULL,
        **{REL.token: verified}, **REL.draft_input_fields(seq_lens))
    info = sampling_info(bs)
    if has_grammar:
        info.grammars = [object() for _ in range(bs)]
    return ModelWorkerBatch(
        forward_mode=mode,
        input_ids=torch.full((3 * bs + 2,), -7, dtype=torch.int64),  # stale: the last prefill's, never read
        req_pool_indices=torch.tensor([2 + i for i in range(bs)], dtype=torch.int64),
        seq_lens=seq_lens,
        out_cache_loc=None,  # stale after filter/merge
        seq_lens_cpu=seq_lens.clone(),
        seq_lens_sum=int(seq_lens.sum()),
        return_logprob=True, top_logprobs_nums=[0] * bs, token_ids_logprobs=[None] * bs,
        global_num_tokens=global_num_tokens,
        global_num_tokens_for_logprob=global_num_tokens,
        is_extend_in_batch=is_extend_in_batch, can_run_dp_cuda_graph=False, tbo_split_seq_index=None,
        global_forward_mode=None, extend_num_tokens=None, extend_seq_lens=None, extend_prefix_lens=None,
        extend_logprob_start_lens=None, extend_input_logprob_token_ids=None, multimodal_inputs=None,
        encoder_cached=None, encoder_lens=None, encoder_lens_cpu=None, encoder_out_cache_loc=None,
        lora_ids=[None] * bs, sampling_info=info, spec_algorithm=SpeculativeAlgorithm.EAGLE, spec_info=spec_info,
        capture_hidden_mode=CaptureHiddenMode.FULL, **REL.batch_fields(bs, has_grammar))


def expected(batch: ModelWorkerBatch):
    """Per request: the sampled token, the slots of positions s..s+n-1, and the draft's answer at position s."""
    out = []
    for i in range(len(batch.seq_lens)):
        s, row, v = int(batch.seq_lens[i]), int(batch.req_pool_indices[i]), int(token(batch.spec_info)[i])
        t = target_token(v, s + 1)
        out.append(SimpleNamespace(s=s, row=row, v=v, t=t, slots=[slot(row, s + k) for k in range(N_DRAFT)],
                                   draft=draft_token(t, s)))
    return out


def took_speculative_path(w) -> bool:
    return bool(w.draft_worker.draft_calls) and bool(w.verify_calls)


def took_fallback(w) -> bool:
    return not w.draft_worker.draft_calls and not w.verify_calls and len(w.target_worker.calls) == 1 \
        and w.target_worker.calls[0].mode.is_decode()


# ----------------------------------------------------------------------------------------------------- checks


def check_patched():
    for name in ("_init_speculative_disable", "_speculation_disabled_for", "_forward_without_speculation"):
        assert hasattr(EAGLEWorkerV2, name), f"EAGLEWorkerV2.{name} is missing: the target is not patched"
    return f"patched EAGLEWorkerV2 from {eagle_worker_v2.__file__}"


def check_threshold_zero():
    w = make_worker(0)
    batch = decode_batch(7)
    w.forward_batch_generation(batch)
    assert w.spec_disable_batch_threshold == 0
    assert took_speculative_path(w), "N = 0 must always speculate (draft, then verify)"
    assert len(w.draft_worker.extend_decode_calls) == 1, "the speculative path's draft extend did not run"
    return "N = 0: bs 7 ran draft, verify, draft extend"


def check_small_batch_speculates():
    for bs in (1, 4):
        w = make_worker(4)
        w.forward_batch_generation(decode_batch(bs))
        assert took_speculative_path(w), f"bs {bs} <= N 4 must speculate"
        assert not w.target_worker.calls, "the target ran a plain forward on the speculative path"
    return "bs 1 and bs 4 with N = 4 ran draft then verify"


def check_fallback(catch_up: str):
    def run():
        # bs 5 and n 4: i * n is not i modulo bs, so a token at the wrong stride cannot land right by chance
        bs, n = 5, N_DRAFT
        w = make_worker(2, catch_up=catch_up)
        assert w.spec_disable_catch_up == catch_up
        batch = decode_batch(bs)
        exp = expected(batch)
        seq_lens_before, seq_lens_cpu_before = batch.seq_lens, batch.seq_lens_cpu
        seq_lens_values = batch.seq_lens.clone()
        seq_lens_cpu_values = batch.seq_lens_cpu.clone()
        result = w.forward_batch_generation(batch)

        # routing: no draft, no verify, one target forward
        assert not w.draft_worker.draft_calls, "draft() was called for a batch larger than N"
        assert not w.verify_calls, "verify() was called for a batch larger than N"
        assert len(w.target_worker.calls) == 1, f"the target ran {len(w.target_worker.calls)} times, not once"
        call = w.target_worker.calls[0]
        assert call.mode == ForwardMode.DECODE, f"target forward mode {call.mode}, not DECODE"
        assert call.spec_info_is_none, "the target forward got a spec_info (attention would read it as a draft)"
        assert not call.is_verify, "the target forward was a verify forward"
        assert call.graph_runner is None, "the target's CUDA graph runner was not set aside during the forward"
        assert w.target_worker.model_runner.graph_runner is w.target_worker.graph_runner, \
            "the target's CUDA graph runner was not put back"
        assert call.capture == CaptureHiddenMode.FULL, f"target capture mode {call.capture}"
        REL.check_logprobs(call, batch, result)
        REL.check_penalties(call, batch)
        assert call.input_ids.tolist() == [e.v for e in exp], \
            f"target input {call.input_ids.tolist()} is not the previous tokens {[e.v for e in exp]}"
        assert call.input_ids.dtype == torch.int64
        assert call.seq_lens.tolist() == [e.s + 1 for e in exp], "target seq_lens are not s + 1"
        assert call.seq_lens_cpu.tolist() == [e.s + 1 for e in exp], "target seq_lens_cpu are not s + 1"
        assert call.seq_lens_sum == int(seq_lens_values.sum()) + bs, "target seq_lens_sum is not sum(s) + bs"
        assert call.out_cache_loc.tolist() == [e.slots[0] for e in exp], \
            f"target KV slots {call.out_cache_loc.tolist()} are not req_to_token[row, s]"
        assert call.out_cache_loc.dtype == torch.int64

        # the scheduler's tensors are not changed in place (the draft extend rebinds the batch's attributes, as
        # on the speculative path, but the ScheduleBatch still holds the originals)
        assert torch.equal(seq_lens_before, seq_lens_values), "seq_lens (shared with the scheduler) changed in place"
        assert torch.equal(seq_lens_cpu_before, seq_lens_cpu_values), "seq_lens_cpu changed in place"

        # the result contract
        assert result.next_token_ids.shape == (bs * n,), f"next_token_ids shape {tuple(result.next_token_ids.shape)}"
        assert result.next_token_ids.dtype == torch.int32
        assert [int(result.next_token_ids[i * n]) for i in range(bs)] == [e.t for e in exp], \
            "the sampled tokens are not at i * num_draft_tokens"
        assert result.accept_lens.tolist() == [1] * bs and result.accept_lens.dtype == torch.int32, \
            f"accept_lens {result.accept_lens.tolist()} are not all 1 (int32)"
        assert result.delay_sample_func is None, "delay_sample_func would postpone store_to_map"
        assert result.logits_output is not None
        nd = result.next_draft_input
        assert isinstance(nd, EagleDraftInput), "next_draft_input is not an EagleDraftInput"
        assert token(nd).tolist() == [e.t for e in exp] and token(nd).dtype == torch.int32, \
            f"next_draft_input.{REL.token} is not the sampled tokens (int32)"
        assert nd.new_seq_lens.tolist() == [e.s + 1 for e in exp], "new_seq_lens are not s + 1"
        assert nd.new_seq_lens is not batch.seq_lens and nd.new_seq_lens.data_ptr() != batch.seq_lens.data_ptr(), \
            "new_seq_lens is not a new tensor"
        assert nd.verify_done is not None and hasattr(nd.verify_done, "synchronize"), "no verify_done event"
        assert nd.topk_p is not None and tuple(nd.topk_p.shape) == (bs, 1) and nd.topk_p.dtype == torch.float32
        assert nd.topk_index is not None and tuple(nd.topk_index.shape) == (bs, 1) and nd.topk_index.dtype == torch.int64
        assert nd.hidden_states is not None and tuple(nd.hidden_states.shape) == (bs, H_DRAFT)
        REL.check_result_extra(result, exp)

        # the draft catch-up: one real token per request, at position s, from the target's row for that request
        runner_calls = w.draft_worker.draft_runner.calls
        assert len(runner_calls) == 1, f"the draft model ran {len(runner_calls)} times, not once"
        rc = runner_calls[0]
        if catch_up == "padded":
            assert len(w.draft_worker.extend_decode_calls) == 1, "_draft_extend_for_decode did not run"
            de = w.draft_worker.extend_decode_calls[0]
            assert de.out_cache_loc.tolist() == [x for e in exp for x in e.slots], \
                "the padded draft extend does not write the request's slots s..s+n-1"
            assert de.accept_lens.tolist() == [1] * bs
            assert de.hidden_shape == (bs * n, H_TARGET), f"padded hidden states {de.hidden_shape}"
            assert torch.equal(de.seq_lens_values, seq_lens_values), "the draft extend got modified seq_lens"
            assert rc.mode == ForwardMode.DRAFT_EXTEND_V2, f"draft catch-up mode {rc.mode}"
            rows = [i * n for i in range(bs)]
        else:
            assert not w.draft_worker.extend_decode_calls, "the single catch-up ran the padded draft extend"
            assert rc.mode == ForwardMode.EXTEND, f"draft catch-up mode {rc.mode}"
            assert rc.capture == CaptureHiddenMode.LAST
            assert len(rc.input_ids) == bs, f"{len(rc.input_ids)} draft tokens for {bs} requests"
            assert rc.out_cache_loc.tolist() == [e.slots[0] for e in exp]
            rows = list(range(bs))
        assert [int(rc.input_ids[r]) for r in rows] == [e.t for e in exp], "the draft did not get the sampled tokens"
        assert [int(rc.positions[r]) for r in rows] == [e.s for e in exp], "the draft rows are not at position s"
        assert [int(rc.spec_hidden[r, 1]) for r in rows] == [1000 + i for i in range(bs)], \
            "the draft rows do not carry the target hidden state of their own request"
        assert nd.topk_index[:, 0].tolist() == [e.draft for e in exp], \
            "next_draft_input.topk_index does not come from the draft's answer at position s"
        assert nd.hidden_states[:, 0].tolist() == [float(e.s) for e in exp] and \
            nd.hidden_states[:, 1].tolist() == [float(e.t) for e in exp], \
            "next_draft_input.hidden_states is not the draft hidden state at position s"
        check_scheduler_accepts(w, result, exp)
        return f"bs {bs} > N 2 ({catch_up} catch-up): one eager DECODE of the target, graph runner restored, " \
               "draft caught up at position s, result accepted by the scheduler"
    return run


def check_scheduler_accepts(w, result, exp):
    _contract.scheduler_accepts(REL, w, result, exp)


def check_extend_untouched():
    for mode, in_batch in REL.prefill_modes:
        w = make_worker(1)
        batch = decode_batch(0 if mode.is_idle() else 5, mode=mode, is_extend_in_batch=in_batch)
        w.forward_batch_generation(batch)
        assert len(w.draft_worker.extend_prefill_calls) == 1, f"{mode.name} (is_extend_in_batch={in_batch}) " \
            "did not take the extend branch"
        assert not w.draft_worker.draft_calls and not w.verify_calls
        assert len(w.target_worker.calls) == 1 and w.target_worker.calls[0].mode == mode, \
            "the extend branch's target forward was changed"
        assert w.target_worker.calls[0].graph_runner is w.target_worker.graph_runner, \
            "the extend branch lost the target's CUDA graphs"
    return " and ".join(f"{m.name} (is_extend_in_batch={b})" for m, b in REL.prefill_modes) + \
        " keep the prefill path even above N"


def check_dp_attention():
    # ranks with 3 and 40 requests, N = 16: the global size 43 decides, on the small rank and on an idle one
    w = make_worker(16, dp_attention=True)
    w.forward_batch_generation(decode_batch(3, global_num_tokens=[3, 40]))
    assert took_fallback(w), "bs 3 of a global 43 > N 16 did not take the fallback (ranks would disagree)"
    w = make_worker(16, dp_attention=True)
    idle = decode_batch(0, mode=ForwardMode.IDLE, global_num_tokens=[0, 40])
    result = w.forward_batch_generation(idle)
    calls = w.target_worker.calls
    assert not w.draft_worker.draft_calls and not w.verify_calls, "an idle rank speculated while the others did not"
    assert len(calls) == 1 and calls[0].mode.is_idle() and calls[0].spec_info_is_none, "idle rank: no IDLE target"
    assert calls[0].graph_runner is None and w.target_worker.model_runner.graph_runner is w.target_worker.graph_runner
    assert result.next_token_ids.shape == (0,) and result.accept_lens.shape == (0,)
    assert result.next_draft_input.new_seq_lens.shape == (0,)
    assert len(w.draft_worker.draft_runner.calls) == 1 and w.draft_worker.draft_runner.calls[0].mode.is_idle(), \
        "the idle rank skipped the draft catch-up forward (collectives would not match)"
    # global 3 + 10 = 13 <= 16: every rank speculates, including the big one
    w = make_worker(16, dp_attention=True)
    w.forward_batch_generation(decode_batch(10, global_num_tokens=[3, 10]))
    assert took_speculative_path(w), "a global 13 <= N 16 did not speculate"
    return "DP attention: the summed global batch size decides on every rank, idle ranks included"


def check_env_var():
    env = envs.SGLANG_SPEC_DISABLE_BATCH_THRESHOLD
    with env.override(2):
        w = make_worker(0)
        assert w.spec_disable_batch_threshold == 2, "SGLANG_SPEC_DISABLE_BATCH_THRESHOLD was not read when the flag is 0"
        w.forward_batch_generation(decode_batch(3))
        assert took_fallback(w), "bs 3 > N 2 (from the environment) did not take the fallback"
        w = make_worker(5)
        assert w.spec_disable_batch_threshold == 5, "the flag must win over the environment variable"
        w.forward_batch_generation(decode_batch(3))
        assert took_speculative_path(w)
    return "the variable sets N when the flag is 0; a non-zero flag wins"


def check_log_once():
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger(eagle_worker_v2.__name__)
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        w = make_worker(6)
        for _ in range(3):
            w.forward_batch_generation(decode_batch(7))
        make_worker(0)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    lines = [r.getMessage() for r in records if "speculation disable" in r.getMessage().lower()]
    assert len(lines) == 1, f"expected one start-up line, got {lines}"
    assert "6" in lines[0], f"the line does not say N: {lines[0]}"
    return lines[0]


def check_graph_runner_restored_on_error():
    w = make_worker(1)
    w.target_worker.fail_forward = True
    try:
        w.forward_batch_generation(decode_batch(2))
    except RuntimeError:
        pass
    else:
        raise AssertionError("the target's exception was swallowed")
    assert w.target_worker.model_runner.graph_runner is w.target_worker.graph_runner, \
        "the CUDA graph runner is lost when the target forward raises"
    return "a failing target forward still gets its graph runner back"


def check_nan_detection():
    w = make_worker(1, nan_detection=True)
    w.target_worker.nan_logits = True
    try:
        with REL.nan_detection(True):
            w.forward_batch_generation(decode_batch(2))
    except REL.nan_errors as exc:
        assert "NaN" in str(exc)
    else:
        raise AssertionError("NaN logits went through with --enable-nan-detection (verify raises)")
    w = make_worker(1, nan_detection=False)
    w.target_worker.nan_logits = True
    with REL.nan_detection(False):
        w.forward_batch_generation(decode_batch(2))
    return "NaN logits raise with --enable-nan-detection, as verify does"


def check_grammar():
    w = make_worker(1)
    batch = decode_batch(2, has_grammar=True)
    w.forward_batch_generation(batch)
    info = w.target_worker.calls[0].sampling_info
    if not REL.grammar_to_sampler:
        assert info.grammars is None and info.vocab_mask is None, "a grammar reached the target's sampler"
        assert batch.sampling_info.grammars is not None, "the batch's own sampling info was changed"
        return "grammar left out, as on this release's speculative path (its state never advances)"
    assert info.grammars is batch.sampling_info.grammars, "the grammars did not reach the target's sampler"
    return "grammar objects reach the target's sampler (it builds the vocab mask)"


def check_refusals():
    problems = []
    for name, kwargs, expected_text in (
        ("negative", dict(threshold=-1), ">= 0"),
        ("catch-up", dict(threshold=2, catch_up="sideways"), "padded"),
    ):
        try:
            make_worker(kwargs["threshold"], catch_up=kwargs.get("catch_up"))
        except ValueError as exc:
            if expected_text not in str(exc):
                problems.append(f"{name}: {exc}")
        else:
            problems.append(f"{name}: accepted")
    w = EAGLEWorkerV2.__new__(EAGLEWorkerV2)
    w.topk = 4
    try:
        w._init_speculative_disable(SimpleNamespace(speculative_disable_batch_threshold=3, enable_dp_attention=False))
    except ValueError as exc:
        assert "topk" in str(exc), str(exc)
    else:
        problems.append("topk 4: accepted")
    assert not problems, "; ".join(problems)
    return "the worker refuses N < 0, topk != 1 and an unknown catch-up mode"


def main():
    if REL is None:
        print(f"PROBE-FAIL: no release adapter for the variant `{VARIANT}` (SPECPATCH_VARIANT) in _releases.py: "
              f"this probe knows {', '.join(repr(v) for v in _releases.BY_VARIANT)}", flush=True)
        sys.exit(1)
    print(f"release adapter {type(REL).__name__} for variant {VARIANT or 'none (the recipe steps)'}", flush=True)
    report.run("patched", check_patched)
    if report.failed:
        report.finish()
    report.run("threshold 0 always speculates", check_threshold_zero)
    report.run("batch <= N speculates", check_small_batch_speculates)
    report.run("batch > N falls back (padded catch-up)", check_fallback("padded"))
    report.run("batch > N falls back (single catch-up)", check_fallback("single"))
    report.run("extend batches untouched", check_extend_untouched)
    if REL.dp_attention:  # else the variant refuses DP attention at start-up (server_args_probe_compat.py)
        report.run("DP attention decides on the global batch size", check_dp_attention)
    report.run("environment variable", check_env_var)
    report.run("start-up log line", check_log_once)
    report.run("graph runner restored on error", check_graph_runner_restored_on_error)
    report.run("NaN detection", check_nan_detection)
    report.run("grammar", check_grammar)
    report.run("worker refusals", check_refusals)
    for name in REL.extra_checks:
        report.run(name, lambda check=_contract.EXTRA_CHECKS[name]: check(REL))
    report.finish()


if __name__ == "__main__":
    main()
