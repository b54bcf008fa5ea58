"""Behaviour probe of the dynamic speculation disable in EAGLEWorkerV2 (sglang 0.5.9), on CPU.

The worker is built without its __init__; the target and draft workers are fakes that record their calls (the draft
worker is the real EagleDraftWorker with `draft` and the model runner faked, so its real `_draft_extend_for_decode`
runs); tensors are real CPU tensors in the real ModelWorkerBatch. The fakes make every value traceable: the target
"samples" (input_id * 7 + seq_len) % V, the draft model answers (input_id + position) % V, and hidden states carry
their position and token, so the checks can tell which row ended up where. The fallback's result is then handed to
the real scheduler code: GenerationBatchResult.copy_to_cpu, Scheduler._resolve_spec_overlap_token_ids and a
FutureMap store/resolve round trip.
"""

from __future__ import annotations

import contextlib
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
from sglang.srt.layers.logits_processor import LogitsProcessorOutput  # noqa: E402
from sglang.srt.managers import overlap_utils  # noqa: E402
from sglang.srt.managers.schedule_batch import ModelWorkerBatch  # noqa: E402
from sglang.srt.managers.scheduler_output_processor_mixin import SchedulerOutputProcessorMixin  # noqa: E402
from sglang.srt.managers.utils import GenerationBatchResult  # noqa: E402
from sglang.srt.model_executor import forward_batch_info  # noqa: E402
from sglang.srt.model_executor.forward_batch_info import CaptureHiddenMode, ForwardMode  # noqa: E402
from sglang.srt.sampling.sampling_batch_info import SamplingBatchInfo  # noqa: E402
from sglang.srt.speculative import eagle_worker_v2  # noqa: E402
from sglang.srt.speculative.eagle_info import EagleDraftInput  # noqa: E402
from sglang.srt.speculative.eagle_worker_v2 import EagleDraftWorker, EAGLEWorkerV2  # noqa: E402
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm  # noqa: E402

V = 97  # vocabulary
H_TARGET = 6  # target hidden size handed to the draft (3 * hidden for EAGLE3: any width works here)
H_DRAFT = 5
STEPS = 3
N_DRAFT = STEPS + 1  # num_draft_tokens with topk 1
POOL_ROWS, POOL_LEN = 12, 160
SLOT_BASE = 10_000  # req_to_token[r, p] = SLOT_BASE + r * POOL_LEN + p: every slot tells its row and position

# The distributed groups do not exist on CPU; ForwardBatch.init_new asks them whether to pad token counts.
forward_batch_info.enable_num_token_non_padded = lambda server_args: False
# FutureMap asks the global server args whether hidden states travel (yes, unless multi-layer EAGLE).
overlap_utils.spec_need_hidden_states = lambda server_args=None: True


def slot(row: int, pos: int) -> int:
    return SLOT_BASE + row * POOL_LEN + pos


def target_token(input_id: int, seq_len: int) -> int:
    return (input_id * 7 + seq_len) % V


def draft_token(input_id: int, position: int) -> int:
    return (input_id + position) % V


class GraphRunnerSentinel:
    """Stands for the target's TARGET_VERIFY CUDA graph runner: a DECODE batch must never reach it."""

    bs = 0

    def can_run(self, forward_batch):
        raise AssertionError("the target's verify CUDA graph runner was consulted for the fallback")

    def replay(self, *args, **kwargs):
        raise AssertionError("the target's verify CUDA graph was replayed for the fallback")


class FakeTargetWorker:
    def __init__(self):
        self.graph_runner = GraphRunnerSentinel()
        self.model_runner = SimpleNamespace(graph_runner=self.graph_runner)
        self.model_config = SimpleNamespace(hidden_size=H_TARGET, dtype=torch.float32, vocab_size=V)
        self.calls = []
        self.nan_logits = False
        self.fail_forward = False

    def forward_batch_generation(self, model_worker_batch=None, forward_batch=None, is_verify=False,
                                 skip_attn_backend_init=False, **kwargs):
        b = model_worker_batch
        assert b is not None, "the fallback must call the target with a ModelWorkerBatch"
        self.calls.append(SimpleNamespace(
            batch=b, mode=b.forward_mode, input_ids=b.input_ids.clone(), seq_lens=b.seq_lens.clone(),
            seq_lens_cpu=None if b.seq_lens_cpu is None else b.seq_lens_cpu.clone(), seq_lens_sum=b.seq_lens_sum,
            out_cache_loc=None if b.out_cache_loc is None else b.out_cache_loc.clone(),
            spec_info_is_none=b.spec_info is None, capture=b.capture_hidden_mode, return_logprob=b.return_logprob,
            sampling_info=b.sampling_info, graph_runner=self.model_runner.graph_runner, is_verify=is_verify))
        if self.fail_forward:
            raise RuntimeError("target forward failed (probe)")
        bs = len(b.seq_lens)
        if b.forward_mode.is_decode():
            tokens = [target_token(int(x), int(s)) for x, s in zip(b.input_ids, b.seq_lens)]
        else:
            tokens = [(3 * i + 1) % V for i in range(bs)]
        tokens = torch.tensor(tokens, dtype=torch.int64)
        logits = torch.full((bs, V), -5.0)
        logits[torch.arange(bs), tokens] = 5.0
        if self.nan_logits and bs:
            logits[0, 0] = float("nan")
        hidden = torch.zeros((bs, H_TARGET))
        hidden[:, 0] = b.seq_lens.to(torch.float32) - 1  # the position of the row
        hidden[:, 1] = 1000 + torch.arange(bs, dtype=torch.float32)  # the request's row in the batch
        return GenerationBatchResult(
            logits_output=LogitsProcessorOutput(next_token_logits=logits, hidden_states=hidden),
            next_token_ids=tokens, can_run_cuda_graph=True)


class FakeDraftRunner:
    """The draft model runner: answers draft_token(input, position), hidden [position, input, target hidden[0]]."""

    def __init__(self, req_to_token_pool):
        self.tp_group = None
        self.device = "cpu"
        self.req_to_token_pool = req_to_token_pool
        self.token_to_kv_pool = None
        self.attn_backend = SimpleNamespace(init_forward_metadata=lambda forward_batch: None)
        self.server_args = SimpleNamespace(attention_backend="torch_native", enable_lora=False)
        self.model_is_mrope = False
        self.calls = []

    def forward(self, forward_batch, skip_attn_backend_init=False, **kwargs):
        fb = forward_batch
        spec_hidden = getattr(fb.spec_info, "hidden_states", None)
        self.calls.append(SimpleNamespace(
            mode=fb.forward_mode, input_ids=fb.input_ids.clone(), positions=fb.positions.clone(),
            out_cache_loc=fb.out_cache_loc.clone(), seq_lens=fb.seq_lens.clone(),
            capture=fb.capture_hidden_mode, spec_hidden=None if spec_hidden is None else spec_hidden.clone()))
        rows = len(fb.input_ids)
        answer = torch.tensor([draft_token(int(x), int(p)) for x, p in zip(fb.input_ids, fb.positions)],
                              dtype=torch.int64)
        logits = torch.full((rows, V), -5.0)
        logits[torch.arange(rows), answer] = 5.0
        hidden = torch.zeros((rows, H_DRAFT))
        hidden[:, 0] = fb.positions.to(torch.float32)
        hidden[:, 1] = fb.input_ids.to(torch.float32)
        if spec_hidden is not None and rows:
            hidden[:, 2] = spec_hidden[:, 1]  # which target row fed this draft row
        return SimpleNamespace(logits_output=LogitsProcessorOutput(next_token_logits=logits, hidden_states=hidden))


class FakeVerifyInput:
    def is_verify_input(self):
        return True


class RecordingDraftWorker(EagleDraftWorker):
    """The real EagleDraftWorker (its draft-extend code runs) with `draft` faked and every entry recorded."""

    def __init__(self, req_to_token_pool):  # not the real __init__: no model to load
        self.device = "cpu"
        self.topk = 1
        self.speculative_num_steps = STEPS
        self.speculative_num_draft_tokens = N_DRAFT
        self.server_args = SimpleNamespace(enable_nan_detection=False)
        self.req_to_token_pool = req_to_token_pool
        self.draft_runner = FakeDraftRunner(req_to_token_pool)
        self.draft_tp_context = lambda group: contextlib.nullcontext()
        self.plan_stream, self.plan_stream_ctx = None, contextlib.nullcontext()
        self.cuda_graph_runner = None
        self.cuda_graph_runner_for_draft_extend = None
        self.hot_token_id = None
        self.draft_calls = []
        self.extend_decode_calls = []
        self.extend_prefill_calls = []

    def draft(self, model_worker_batch):
        self.draft_calls.append(model_worker_batch)
        return FakeVerifyInput()

    def _draft_extend_for_decode(self, batch, batch_result):
        hidden = batch_result.logits_output.hidden_states
        self.extend_decode_calls.append(SimpleNamespace(
            out_cache_loc=None if batch.out_cache_loc is None else batch.out_cache_loc.clone(),
            seq_lens=batch.seq_lens, seq_lens_values=batch.seq_lens.clone(),
            next_token_ids=batch_result.next_token_ids.clone(), accept_lens=batch_result.accept_lens.clone(),
            hidden_shape=None if hidden is None else tuple(hidden.shape)))
        return super()._draft_extend_for_decode(batch, batch_result)

    def _draft_extend_for_prefill(self, batch, target_hidden_states, next_token_ids):
        self.extend_prefill_calls.append(batch)
        bs = len(batch.seq_lens)
        return EagleDraftInput(topk_p=torch.ones((bs, 1)), topk_index=torch.zeros((bs, 1), dtype=torch.int64),
                               hidden_states=torch.zeros((bs, H_DRAFT)), verified_id=next_token_ids,
                               new_seq_lens=batch.seq_lens)


def make_worker(threshold: int = 0, *, dp_attention: bool = False, nan_detection: bool = False,
                catch_up: str | None = None):
    """An EAGLEWorkerV2 without its __init__; the patch's own init step reads N (and the environment)."""
    pool = SimpleNamespace(req_to_token=(SLOT_BASE + torch.arange(POOL_ROWS * POOL_LEN, dtype=torch.int32))
                           .view(POOL_ROWS, POOL_LEN))
    server_args = SimpleNamespace(speculative_disable_batch_threshold=threshold, enable_dp_attention=dp_attention,
                                  dp_size=2 if dp_attention else 1, tp_size=2 if dp_attention else 1,
                                  moe_dense_tp_size=None, enable_dp_lm_head=False, moe_a2a_backend="none")
    w = EAGLEWorkerV2.__new__(EAGLEWorkerV2)
    w.server_args = server_args
    w.topk = 1
    w.speculative_num_steps = STEPS
    w.speculative_num_draft_tokens = N_DRAFT
    w.enable_nan_detection = nan_detection
    w.tp_rank = 0
    w.gpu_id = 0
    w.device = "cpu"
    w.page_size = 1
    w.speculative_algorithm = SpeculativeAlgorithm.EAGLE
    w.req_to_token_pool = pool
    w.token_to_kv_pool_allocator = None
    w.plan_stream, w.plan_stream_ctx = None, contextlib.nullcontext()
    w._target_worker = FakeTargetWorker()
    w._draft_worker = RecordingDraftWorker(pool)
    w.verify_calls = []

    def fake_verify(batch):  # the speculative path's verify, as far as the scheduler sees it
        w.verify_calls.append(batch)
        bs = len(batch.seq_lens)
        starts = batch.seq_lens[:, None] + torch.arange(N_DRAFT)[None, :]
        batch.out_cache_loc = pool.req_to_token[batch.req_pool_indices[:, None], starts].reshape(-1).to(torch.int64)
        accept = torch.full((bs,), 2, dtype=torch.int32)
        return GenerationBatchResult(
            logits_output=LogitsProcessorOutput(next_token_logits=None,
                                                hidden_states=torch.zeros((bs * N_DRAFT, H_TARGET))),
            next_token_ids=torch.zeros((bs * N_DRAFT,), dtype=torch.int32), accept_lens=accept,
            next_draft_input=EagleDraftInput(verified_id=torch.zeros((bs,), dtype=torch.int32),
                                             new_seq_lens=batch.seq_lens + accept))

    w.verify = fake_verify
    env = envs.SGLANG_SPEC_DISABLE_CATCH_UP
    with (env.override(catch_up) if catch_up else contextlib.nullcontext()):
        w._init_speculative_disable(server_args)
    return w


def sampling_info(bs: int) -> SamplingBatchInfo:
    return SamplingBatchInfo(
        temperatures=torch.ones((bs, 1)), top_ps=torch.ones(bs), top_ks=torch.full((bs,), V), min_ps=torch.zeros(bs),
        is_all_greedy=True, need_top_p_sampling=False, need_top_k_sampling=False, need_min_p_sampling=False,
        vocab_size=V, acc_linear_penalties=torch.full((bs, V), -1e4), device="cpu")


def decode_batch(bs: int, *, mode: ForwardMode = ForwardMode.DECODE, global_num_tokens=None,
                 is_extend_in_batch: bool = False, has_grammar: bool = False) -> ModelWorkerBatch:
    """A spec-v2 decode batch as it reaches the worker: stale input_ids and out_cache_loc, resolved spec_info."""
    idle = mode.is_idle()
    seq_lens = torch.tensor([20 + 9 * i for i in range(bs)], dtype=torch.int64)
    verified = torch.tensor([(11 * i + 5) % V for i in range(bs)], dtype=torch.int32)
    spec_info = None if idle else EagleDraftInput(
        verified_id=verified, topk_p=torch.ones((bs, 1)), topk_index=torch.zeros((bs, 1), dtype=torch.int64),
        hidden_states=torch.zeros((bs, H_DRAFT)), new_seq_lens=seq_lens.clone(), capture_hidden_mode=CaptureHiddenMode.FULL)
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
        capture_hidden_mode=CaptureHiddenMode.FULL, reqs=[None] * bs, has_grammar=has_grammar)


def expected(batch: ModelWorkerBatch):
    """Per request: the sampled token, the slots of positions s..s+n-1, and the draft's answer at position s."""
    out = []
    for i in range(len(batch.seq_lens)):
        s, row, v = int(batch.seq_lens[i]), int(batch.req_pool_indices[i]), int(batch.spec_info.verified_id[i])
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
        assert not call.return_logprob, "the target computed logprobs (the spec path does not, in 0.5.9)"
        assert call.sampling_info.acc_linear_penalties is None, "stale penalties were applied"
        assert batch.sampling_info.acc_linear_penalties is not None, "the batch's own sampling info was changed"
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
        assert nd.verified_id.tolist() == [e.t for e in exp] and nd.verified_id.dtype == torch.int32
        assert nd.new_seq_lens.tolist() == [e.s + 1 for e in exp], "new_seq_lens are not s + 1"
        assert nd.new_seq_lens is not batch.seq_lens and nd.new_seq_lens.data_ptr() != batch.seq_lens.data_ptr(), \
            "new_seq_lens is not a new tensor"
        assert nd.verify_done is not None and hasattr(nd.verify_done, "synchronize"), "no verify_done event"
        assert nd.topk_p is not None and tuple(nd.topk_p.shape) == (bs, 1) and nd.topk_p.dtype == torch.float32
        assert nd.topk_index is not None and tuple(nd.topk_index.shape) == (bs, 1) and nd.topk_index.dtype == torch.int64
        assert nd.hidden_states is not None and tuple(nd.hidden_states.shape) == (bs, H_DRAFT)

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


class FakeReq:
    def __init__(self, committed):
        self.kv_committed_len = committed
        self.spec_verify_ct = 0
        self.spec_accepted_tokens = 0
        self.histogram = []

    def update_spec_acceptance_histogram(self, accepted):
        self.histogram.append(accepted)


def check_scheduler_accepts(w, result, exp):
    """The real scheduler code on the result: copy_to_cpu, _resolve_spec_overlap_token_ids, FutureMap."""
    bs = len(exp)
    # FutureMap: buffers shaped by a prefill result first (as in a server), then the fallback's result, resolved.
    fmap = overlap_utils.FutureMap(max_running_requests=8, chunked_prefill_size=64, context_len=128, device="cpu",
                                   spec_algo=SpeculativeAlgorithm.EAGLE)
    prefill = EagleDraftInput(topk_p=torch.ones((bs, 1)), topk_index=torch.zeros((bs, 1), dtype=torch.int64),
                              verified_id=torch.zeros((bs,), dtype=torch.int64), new_seq_lens=torch.ones(bs, dtype=torch.int64),
                              hidden_states=torch.zeros((bs, H_DRAFT)))
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
    reqs = [FakeReq(e.s - 1) for e in exp]
    scheduler = SimpleNamespace(draft_worker=w)
    tokens = SchedulerOutputProcessorMixin._resolve_spec_overlap_token_ids(
        scheduler, result, SimpleNamespace(reqs=reqs))
    assert tokens == [[e.t] for e in exp], f"the scheduler read {tokens}, not one sampled token per request"
    assert [r.kv_committed_len for r in reqs] == [e.s for e in exp], "kv_committed_len did not advance by 1"
    assert result.num_accepted_tokens == 0 and result.accept_length_per_req_cpu == [0] * bs
    assert all(r.histogram == [0] for r in reqs)


def check_extend_untouched():
    for mode, in_batch in ((ForwardMode.EXTEND, False), (ForwardMode.DECODE, True), (ForwardMode.IDLE, True)):
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
    return "EXTEND, and DECODE/IDLE with is_extend_in_batch, keep the prefill path even above N"


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
        w.forward_batch_generation(decode_batch(2))
    except ValueError as exc:
        assert "NaN" in str(exc)
    else:
        raise AssertionError("NaN logits went through with --enable-nan-detection (verify raises)")
    w = make_worker(1, nan_detection=False)
    w.target_worker.nan_logits = True
    w.forward_batch_generation(decode_batch(2))
    return "NaN logits raise with --enable-nan-detection, as verify does"


def check_grammar():
    w = make_worker(1)
    batch = decode_batch(2, has_grammar=True)
    w.forward_batch_generation(batch)
    info = w.target_worker.calls[0].sampling_info
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
    report.run("patched", check_patched)
    if report.failed:
        report.finish()
    report.run("threshold 0 always speculates", check_threshold_zero)
    report.run("batch <= N speculates", check_small_batch_speculates)
    report.run("batch > N falls back (padded catch-up)", check_fallback("padded"))
    report.run("batch > N falls back (single catch-up)", check_fallback("single"))
    report.run("extend batches untouched", check_extend_untouched)
    report.run("DP attention decides on the global batch size", check_dp_attention)
    report.run("environment variable", check_env_var)
    report.run("start-up log line", check_log_once)
    report.run("graph runner restored on error", check_graph_runner_restored_on_error)
    report.run("NaN detection", check_nan_detection)
    report.run("grammar", check_grammar)
    report.run("worker refusals", check_refusals)
    report.finish()


if __name__ == "__main__":
    main()
