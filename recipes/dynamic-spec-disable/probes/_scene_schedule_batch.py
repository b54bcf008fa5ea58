"""The scene of the worker probe for sglang 0.5.13 (the ScheduleBatch / on_publish contract): its batches, fakes, the
real scheduler around the worker and the checks only this family has, for the contract of _worker_contract.py (run by
worker_probe_on_publish.py).

From sglang 0.5.13 `EAGLEWorkerV2.forward_batch_generation(batch, on_publish=None)` takes the scheduler's
ScheduleBatch (there is no ModelWorkerBatch), calls `on_publish(new_seq_lens)` between verify and the draft extend,
returns the new sequence lengths on the result (no `verify_done`, none on the draft input), and is driven by a
scheduler that snapshots and restores the batch's fields around the call and relays the draft input and the lengths
through a FutureMap keyed by the request's pool row. The batches are the real ScheduleBatch with CPU tensors, turned
into ForwardBatches by the real ForwardBatch.init_new in the fake target (_fakes.FakeTargetWorker). The fallback is
run by the real `Scheduler.run_batch` (overlap: FutureMap relay, on_publish, forward isolation; and the synchronous
path), and its result read by the real `SchedulerBatchResultProcessor` and resolved by the real FutureMap for the next
step. FutureMap's gather of the relayed rows is a Triton kernel: the probe runs it as a plain indexed read (same rows,
same buffers). The CUDA graph runners and backends the patch builds at start-up are recorders (the target's DECODE
graph; the draft's one-token extend graph, through the draft worker's init_cuda_graphs). From 0.5.14 (Release014) the
names differ and the CUDA graph settings are per phase; the adapter names what the scene replaces and builds.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import inspect
from types import SimpleNamespace

import torch

from sglang.srt.disaggregation.utils import DisaggregationMode
from sglang.srt.managers import overlap_utils
from sglang.srt.managers.schedule_batch import ScheduleBatch
from sglang.srt.managers.scheduler import Scheduler
from sglang.srt.managers.scheduler_components.batch_result_processor import SchedulerBatchResultProcessor
from sglang.srt.model_executor.forward_batch_info import CaptureHiddenMode, ForwardBatch, ForwardMode
from sglang.srt.speculative import eagle_worker_v2
from sglang.srt.speculative.eagle_info import EagleDraftInput
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

import _fakes
import _releases
from _contract import assert_speculative_state  # noqa: F401 (the scene's)
from _fakes import BUILT, H_DRAFT, N_DRAFT, STEPS, V, Backend, make_pool

REL = _releases.CURRENT
EAGLE = SpeculativeAlgorithm.EAGLE
CUDA_GRAPH_BS = [1, 2, 4, 8, 16, 32]
STRIDE = 1  #: where the scheduler reads request i's sampled token: i * STRIDE
EAGER_DRAFT_EXTEND = {}  #: make_worker's options for an eager draft extend (the one-token graph never runs here)


def _gather_spec_extras(indices, topk_p_buf, topk_index_buf, output_tokens_buf, hidden_states_buf):
    """FutureMap's fused Triton gather (gather_spec_extras) as plain indexing: row `indices[i]` of each buffer."""
    indices = indices.to(torch.int64)
    hidden = None if hidden_states_buf is None else hidden_states_buf[indices].clone()
    return topk_p_buf[indices].clone(), topk_index_buf[indices].clone(), output_tokens_buf[indices].clone(), hidden


overlap_utils.gather_spec_extras = _gather_spec_extras


@contextlib.contextmanager
def no_record_stream():
    """Tensor.record_stream is a CUDA call that FutureMap makes unconditionally; a no-op for CPU tensors here."""
    saved = torch.Tensor.record_stream
    torch.Tensor.record_stream = lambda self, stream: None
    try:
        yield
    finally:
        torch.Tensor.record_stream = saved


class PlainTargetGraph:
    """Stands for the target CUDA graph runner the patch builds at start-up; records how it was built."""

    def __init__(self, model_runner, *, attn_backend=None, **kwargs):
        args = model_runner.server_args
        self.built_with = dict(spec_algorithm=model_runner.spec_algorithm, attn_backend=attn_backend,
                               return_hidden_states=REL.graph_hidden_states(args),
                               cuda_graph_bs=list(REL.graph_bs(args)), kwargs=kwargs,
                               num_draft_tokens=REL.spec_config(args).speculative_num_draft_tokens)
        self.capture_bs = self.built_with["cuda_graph_bs"]
        self.scope = _fakes.in_scope()
        BUILT.target_graphs.append(self)


class DraftExtendGraph:
    """Stands for a draft-extend CUDA graph runner: never runnable here (the eager path computes the values), but
    records each batch it was asked about and how many tokens per request it was built for."""

    def __init__(self, num_tokens_per_bs):
        self.num_tokens_per_bs = num_tokens_per_bs
        self.asked = []
        self.scope = _fakes.in_scope()

    def can_run(self, forward_batch):
        self.asked.append(len(forward_batch.input_ids))
        return False

    can_run_graph = can_run  # 0.5.14's name


#: the release's own DraftBackendFactory signature (0.5.18: no server arguments first), which the fake's calls must fit
FACTORY_SIGNATURE = inspect.signature(eagle_worker_v2.DraftBackendFactory)


class FakeBackendFactory:
    """DraftBackendFactory as the patch uses it: a draft-extend backend, recorded with the step count asked for; called
    as the release's own (its signature binds the arguments, and the draft runner is the draft worker's)."""

    def __init__(self, *args, **kwargs):
        call = FACTORY_SIGNATURE.bind(*args, **kwargs)  # TypeError where the release's factory refuses the call
        runner = call.arguments["draft_model_runner"]
        assert isinstance(runner, _fakes.FakeDraftRunner), \
            f"DraftBackendFactory got {type(runner).__name__} where this release takes the draft model runner"
        self.num_steps = call.arguments["speculative_num_steps"]

    def create_draft_extend_backend(self):
        BUILT.draft_backends.append(Backend("draft-extend-one-token", num_steps=self.num_steps))
        return BUILT.draft_backends[-1]


setattr(eagle_worker_v2, REL.target_graph_cls, PlainTargetGraph)  # CudaGraphRunner (0.5.14: DecodeCudaGraphRunner)
eagle_worker_v2.DraftBackendFactory = FakeBackendFactory


class Capture:
    """Stands for a routed-expert / indexer top-k capture of the target's forward (copied to CPU by the result)."""

    def __init__(self, name):
        self.name = name
        self.copied = False

    def copy_to_cpu(self):
        self.copied = True

    def map_device_tensors(self, fn):  # 0.5.15+: GenerationBatchResult.copy_to_cpu hands it the copy
        self.copied = True


def forward_batch(runner, b, capture_hidden_mode=None):
    """What 0.5.13's TpModelWorker.forward_batch_generation makes of a decode batch: ForwardBatch.init_new (0.5.16:
    with the capture mode the caller passed, as the adapter's init_forward_batch calls it)."""
    if b.forward_mode.is_decode_or_idle() and not b.is_extend_in_batch:
        return REL.init_forward_batch(b, runner, capture_hidden_mode)
    return None


def target_result_extra(target):
    target.routed, target.indexer = Capture("routed experts"), Capture("indexer top-k")
    return dict(can_run_cuda_graph=True, routed_experts_output=target.routed, indexer_topk_output=target.indexer)


class RecordingDraftWorker(_fakes.RecordingDraftWorker):
    """_fakes' recording draft worker, with a recorder of the graphs it would capture."""

    def capture_cuda_graphs(self):  # the real one captures CUDA graphs; record what it would build
        disabled = REL.graphs_disabled(self.server_args)
        self.graphs_built.append(dict(num_draft_tokens=self.speculative_num_draft_tokens,
                                      num_steps=self.speculative_num_steps,
                                      backend=self.draft_extend_attn_backend,
                                      disabled=disabled, bs=list(REL.graph_bs(self.server_args) or [])))
        self.cuda_graph_runner = None
        self.cuda_graph_runner_for_draft_extend = None
        if disabled:  # as the real one: nothing captured
            return
        self.cuda_graph_runner_for_draft_extend = DraftExtendGraph(self.speculative_num_draft_tokens)
        BUILT.draft_graphs.append(self.cuda_graph_runner_for_draft_extend)


# init_cuda_graphs (0.5.14: _capture_cuda_graphs)
setattr(RecordingDraftWorker, REL.draft_capture, RecordingDraftWorker.capture_cuda_graphs)


def make_worker(threshold: int = 0, *, dp_attention: bool = False, catch_up: str | None = None,
                disable_cuda_graph: bool = False, nan_detection: bool = False):
    """An EAGLEWorkerV2 without its __init__; the patch's own init step reads N (and the environment) and builds."""
    pool = make_pool()
    log = []  #: the worker's events: "target", "publish", "draft", "verify"
    server_args = _fakes.make_server_args(
        threshold, dp_attention, speculative_adaptive=False, speculative_num_steps=STEPS,
        speculative_num_draft_tokens=N_DRAFT, **REL.graph_server_args(CUDA_GRAPH_BS, disable_cuda_graph),
        max_running_requests=32, enable_return_hidden_states=False,
        attention_backend="torch_native", enable_lora=False, **REL.server_args_extra)
    REL.install_server_args(server_args)
    runner = _fakes.FakeTargetRunner(REL, pool, server_args)
    target = _fakes.FakeTargetWorker(runner, log, functools.partial(forward_batch, runner),
                                     lambda: target_result_extra(target))
    dw = RecordingDraftWorker(REL, pool, log)
    dw.graphs_built = []
    dw.server_args = dw.draft_runner.server_args = server_args
    dw.draft_runner.model_config = SimpleNamespace(vocab_size=V, spec_hidden_size=H_DRAFT, dtype=torch.float32,
                                                model_is_mrope=False,  # 0.5.16: ForwardBatch reads it here
                                                **REL.draft_model_config_attrs)
    dw.draft_runner.canary_manager = None
    dw.draft_runner.draft_attn_backend = dw.spec_draft_backend
    if REL.draft_runner_backend:  # as this release's init_attention_backend leaves it
        dw.draft_runner.attn_backend = dw.spec_extend_backend
    dw._rebuild_topk1_chain_buffers()
    w = _fakes.bare_worker(server_args, pool, adaptive_controller=None, enable_nan_detection=nan_detection, log=log,
                           published=[], _target_worker=target, _draft_worker=dw, **REL.worker_attrs)
    _fakes.install_verify(w, pool, REL.token, lens_on_result=True)
    return _fakes.start_up(w, server_args, catch_up, REL.finish_start_up)


class FakeOrchestrator:
    """The penalizer orchestrator as copy_for_forward reads it: additive -1e4, scaling 2.0 everywhere."""

    is_required = True

    def __init__(self, bs):
        self.bs = bs

    def accumulate_additive_penalties(self, out):
        out.fill_(-1e4)

    def accumulate_scaling_penalties(self):
        return torch.full((self.bs, V), 2.0)


def sampling_info(bs: int):
    return _fakes.sampling_info(bs, penalizer_orchestrator=FakeOrchestrator(bs))


class FakeReq:
    """A request as ForwardBatch.init_new and the result processor read it."""

    def __init__(self, i, committed, grammar=None):
        self.rid = f"req-{i}"
        self.lora_id = None
        self.token_type_ids = None
        self.grammar = grammar
        self.return_logprob = True
        self.return_hidden_states = False
        self.extend_input_len = self.extend_logprob_start_len = 0
        self.extend_range = None  # 0.5.15+: a decode request has no extend range (its extend length reads 0)
        self.is_retracted = False
        self.kv_committed_len = committed
        self.kv = self  # 0.5.19+: the request's KV fields are under req.kv (here the same fields)
        self.spec_verify_ct = 0
        self.spec_num_correct_drafts = 0
        self.histogram = []
        self.logprob = SimpleNamespace(output_token_logprobs_val=[], output_token_logprobs_idx=[],
                                       top_logprobs_num=0, token_ids_logprob=None)

    def finished(self):
        return False

    def update_spec_correct_drafts_histogram(self, correct):
        self.histogram.append(correct)


def decode_batch(bs: int, *, mode: ForwardMode = ForwardMode.DECODE, global_num_tokens=None,
                 is_extend_in_batch: bool = False, has_grammar: bool = False, overlap: bool = True,
                 cpu_seq_lens: bool = True, pool=None) -> ScheduleBatch:
    """A spec-v2 decode ScheduleBatch as it reaches the worker: input_ids None (relayed), resolved spec_info."""
    idle = mode.is_idle()
    seq_lens = torch.tensor([20 + 9 * i for i in range(bs)], dtype=torch.int64)
    bonus = torch.tensor([(11 * i + 5) % V for i in range(bs)], dtype=torch.int32)
    spec_info = None if idle else EagleDraftInput(
        bonus_tokens=bonus, topk_p=torch.ones((bs, 1)), topk_index=torch.zeros((bs, 1), dtype=torch.int64),
        hidden_states=torch.zeros((bs, H_DRAFT)), capture_hidden_mode=CaptureHiddenMode.LAST)
    info = sampling_info(bs)
    at_entry = REL.committed_at_entry  # 0: prepare_for_decode pre-claimed the bonus slot; -1 (0.5.15+): it did not
    reqs = [FakeReq(i, int(seq_lens[i]) + at_entry, object() if has_grammar else None) for i in range(bs)]
    rows = torch.tensor([2 + i for i in range(bs)], dtype=torch.int64)
    return ScheduleBatch(
        reqs=reqs, req_to_token_pool=pool or make_pool(), model_config=SimpleNamespace(vocab_size=V),
        enable_overlap=overlap, device="cpu", forward_mode=mode,
        input_ids=None,  # relayed through the FutureMap, never read by the worker's decode
        req_pool_indices=rows, req_pool_indices_cpu=rows.clone(),
        seq_lens=seq_lens, seq_lens_cpu=seq_lens.clone() if cpu_seq_lens else None,
        seq_lens_sum=int(seq_lens.sum()) if cpu_seq_lens else None,
        out_cache_loc=None,  # stale after filter/merge
        return_logprob=True, top_logprobs_nums=[0] * bs, token_ids_logprobs=[None] * bs,
        global_num_tokens=global_num_tokens, global_num_tokens_for_logprob=global_num_tokens,
        is_extend_in_batch=is_extend_in_batch, spec_algorithm=EAGLE, sampling_info=info, spec_info=spec_info,
        has_grammar=has_grammar)


def step(w, batch):
    """The worker's forward as this release's scheduler calls it, with an on_publish that records what it gets, and
    when ("publish" in the worker's event log)."""
    def on_publish(new_seq_lens):
        w.log.append("publish")
        w.published.append(new_seq_lens.clone())

    return w.forward_batch_generation(batch, on_publish=on_publish)


# ------------------------------------------------------------------------ the real scheduler around the worker


def make_scheduler(w, fmap, overlap: bool):
    """The parts of Scheduler that run_batch uses, with its own run_batch, _forward_isolation and batch pinning."""
    s = SimpleNamespace(
        forward_ct=0, scripted_scheduler_hook=None, forward_sleep_time=None, is_generation=True,
        profiler_manager=SimpleNamespace(_profile_batch_predicate=lambda batch: None),
        enable_overlap=overlap, enable_pdmux=False, future_map=fmap, forward_stream_ctx=contextlib.nullcontext(),
        forward_stream=SimpleNamespace(wait_stream=lambda stream: None), schedule_stream=None,
        copy_stream=SimpleNamespace(wait_stream=lambda stream: None), copy_stream_ctx=contextlib.nullcontext(),
        batch_record_ct=0, batch_record_buf=[None, None], model_worker=w, tp_worker=w.target_worker,
        device_module=torch.get_device_module("cpu"), spec_algorithm=EAGLE,
        server_args=SimpleNamespace(enable_dp_attention=False, elastic_ep_backend=None, enable_unified_memory=False),
        disaggregation_mode=DisaggregationMode.NULL,  # 0.5.15+ run_batch reads it (PD prefill's early send)
        # 0.5.16+ run_batch reads these of the scheduler itself (no DSpark confidence budget here)
        enable_unified_memory=False, enable_dp_attention=False, _confidence_budget_prepare=None,
        _sched_idled=False,  # 0.5.18+ run_batch hands it to the batch (after_idle_gap): no idle gap before a step here
        # 0.5.19+: the synchronous path copies results to the CPU on a single pipeline stage only; the relay hands the
        # step to the beam-search coordinator (no beam search here: it relays nothing more)
        ps=SimpleNamespace(pp_size=1), chunked_req=None,
        beam_coordinator=SimpleNamespace(maybe_select_and_relay=lambda batch, result, chunked_req=None: None))
    for name, value in REL.scheduler_attrs.items():  # what this release's run_batch reads beyond these
        setattr(s, name, value)
    s._forward_isolation = functools.partial(Scheduler._forward_isolation, s)
    s.record_batch_in_overlap = functools.partial(Scheduler.record_batch_in_overlap, s)
    s.update_cache_from_scheduler = functools.partial(Scheduler.update_cache_from_scheduler, s)
    s._maybe_report_active_ranks = functools.partial(Scheduler._maybe_report_active_ranks, s)
    if hasattr(Scheduler, "_relay_forward_payload"):  # 0.5.15+: the FutureMap stash of the result's relay payload
        s._relay_forward_payload = functools.partial(Scheduler._relay_forward_payload, s)
    if hasattr(Scheduler, "_copy_auxiliary_output_to_cpu"):  # 0.5.19+: a sampler plugin's output, to the CPU
        s._copy_auxiliary_output_to_cpu = functools.partial(Scheduler._copy_auxiliary_output_to_cpu, s)
    if hasattr(Scheduler, "_copy_result_to_cpu"):  # 0.5.23+: the result's readback (synchronous here)
        s._copy_result_to_cpu = functools.partial(Scheduler._copy_result_to_cpu, s)
    if hasattr(Scheduler, "_advance_pending_grammar"):
        # 0.5.17+: run_batch hands EAGLE its grammar barrier, which advances the grammar state over the results still
        # in the queue: here the previous step's, whose advance is recorded ("grammar" in the worker's event log)
        s.result_queue = collections.deque([(SimpleNamespace(name="previous batch"), SimpleNamespace())])
        s.batch_result_processor = SimpleNamespace(advance_grammar_fsm=lambda result, batch: w.log.append("grammar"))
        s._advance_pending_grammar = functools.partial(Scheduler._advance_pending_grammar, s)
    return s


def run_through_scheduler(w, batch, *, overlap: bool, needs_cpu_seq_lens: bool = True):
    """Scheduler.run_batch on `batch`. Overlap: the previous step's draft input is stashed in a FutureMap and its
    lengths published, the batch carries only the future indices, and run_batch resolves them before the worker
    runs, as in a server; FutureMap.publish is wrapped to record the calls. Returns (result, fmap, publishes)."""
    fmap = overlap_utils.FutureMap(device="cpu", spec_algo=EAGLE, req_to_token_pool=w.req_to_token_pool,
                                   needs_cpu_seq_lens=needs_cpu_seq_lens)
    publishes = []
    real_publish = fmap.publish

    def publish(future_indices, new_seq_lens):
        w.log.append("publish")
        publishes.append((future_indices.clone(), new_seq_lens.clone()))
        real_publish(future_indices, new_seq_lens)

    if overlap:
        prev = batch.spec_info
        fmap.stash(batch.req_pool_indices, prev)
        real_publish(batch.req_pool_indices, batch.seq_lens)
        batch.spec_info = EagleDraftInput(future_indices=batch.req_pool_indices.clone(),
                                          capture_hidden_mode=CaptureHiddenMode.LAST)
        batch.seq_lens = batch.seq_lens.clone()
        if not needs_cpu_seq_lens:
            batch.seq_lens_cpu, batch.seq_lens_sum = None, None
    fmap.publish = publish
    with no_record_stream():
        result = Scheduler.run_batch(make_scheduler(w, fmap, overlap), batch)
    return result, fmap, publishes


def read_result(w, batch, result):
    """The real result processor: the spec-v2 tokens, the per-request counters, the logprob rows."""
    proc = SimpleNamespace(model_worker=w)
    # 0.5.23+: _resolve_spec_v2_tokens snapshots the step's decode requests for the forward-pass metrics (FPM), a
    # no-op with FPM off, as here
    proc.metrics_reporter = SimpleNamespace(snapshot_spec_decode_metrics=lambda batch, result: None)
    proc._resolve_spec_v2_tokens = functools.partial(SchedulerBatchResultProcessor._resolve_spec_v2_tokens, proc)
    if hasattr(SchedulerBatchResultProcessor, "advance_grammar_fsm"):  # 0.5.17+: reads it (a no-op without grammar)
        proc.advance_grammar_fsm = functools.partial(SchedulerBatchResultProcessor.advance_grammar_fsm, proc)
    tokens, logprobs = SchedulerBatchResultProcessor._normalize_decode_outputs(
        proc, batch=batch, result=result, logits_output=result.logits_output, next_token_ids=result.next_token_ids)
    for i, req in enumerate(batch.reqs):
        SchedulerBatchResultProcessor._apply_decode_logprobs(
            proc, req=req, i=i, batch=batch, next_token_id=tokens[i], next_token_logprobs=logprobs,
            logits_output=result.logits_output)
    return tokens


# ----------------------------------------------------------------------------------------------------- checks


def check_speculative_step(w):
    """After a speculative step (the scene of _contract's shared checks): on_publish once, before its draft extend,
    which ran on the speculative state."""
    assert w.log.count("publish") == 1 and w.log.index("publish") < w.log.index("draft"), \
        f"order {w.log}: the speculative path's on_publish did not come (once) before its draft extend"
    de = w.draft_worker.extend_decode_calls[0]
    assert de.draft_tokens == N_DRAFT and de.graph is w.draft_worker.spec_extend_graph, \
        "the speculative path's draft extend ran on the one-token state"


# ------------------------------------------------------------ the scene's parts of _worker_contract.check_fallback

FALLBACK_CASES = [
    (f"{catch_up} catch-up{name}", catch_up, options) for catch_up in ("skip", "padded", "single")
    for name, options in (("", {}), (", synchronous scheduler path", dict(overlap=False)),
                          (", no CPU sequence lengths", dict(needs_cpu_seq_lens=False)))]


def case(overlap: bool = True, needs_cpu_seq_lens: bool = True) -> str:
    path = ", overlap scheduler, on_publish before the catch-up" if overlap else ", synchronous scheduler path"
    return path + ("" if needs_cpu_seq_lens else ", no CPU sequence lengths")


def fallback_scene(catch_up: str, bs: int, overlap: bool = True, needs_cpu_seq_lens: bool = True):
    w = make_worker(2, catch_up=catch_up)
    return w, decode_batch(bs, overlap=overlap, pool=w.req_to_token_pool)


def run_fallback(w, batch, overlap: bool = True, needs_cpu_seq_lens: bool = True):
    result, w.fmap, w.scheduler_published = run_through_scheduler(w, batch, overlap=overlap,
                                                                  needs_cpu_seq_lens=needs_cpu_seq_lens)
    return result


def check_entry(entry, overlap: bool = True, needs_cpu_seq_lens: bool = True):
    assert (entry.seq_lens_cpu is not None) == (needs_cpu_seq_lens or not overlap), \
        "the probe's FutureMap set-up is wrong"


def check_target_state(call, result):
    assert isinstance(call.graph_runner, PlainTargetGraph), "the target forward did not run on the DECODE graph runner"
    if call.fb_attn_backend is not None:
        assert call.fb_attn_backend is call.attn_backend, "the target's ForwardBatch got another attention backend"


def check_target_sampling(call, batch, entry):
    assert call.return_logprob, "the batch's return_logprob did not reach the target"
    assert call.sampling_info is entry.sampling_info, "the target did not get the batch's sampling info"
    si = call.sampling_info
    assert si.acc_additive_penalties is not None and bool((si.acc_additive_penalties == -1e4).all()) and \
        si.acc_scaling_penalties is not None and bool((si.acc_scaling_penalties == 2.0).all()), \
        "the penalties (accumulated by spec v2 and applied by verify in this release) were not passed on"


def check_target_batch(call, batch, exp):
    assert call.positions.tolist() == [e.s for e in exp], "the target's new token is not at position s"
    assert call.batch is not batch, "the target ran on the scheduler's ScheduleBatch itself, not a copy"


def check_result(w, result):
    assert result.routed_experts_output is w.target_worker.routed and w.target_worker.routed.copied, \
        "the target's routed-expert capture was not handed to the scheduler"
    assert result.indexer_topk_output is w.target_worker.indexer, \
        "the target's indexer top-k capture was not handed to the scheduler"


def check_published(w, entry, exp, catch_up, overlap: bool = True, needs_cpu_seq_lens: bool = True):
    """on_publish: the new lengths, once, after the target forward and before the draft catch-up."""
    log, publishes, rows = w.log, w.scheduler_published, torch.tensor([e.row for e in exp])
    if overlap:
        assert len(publishes) == 1, f"on_publish called {len(publishes)} times, not once"
        indices, values = publishes[0]
        assert torch.equal(indices, rows), "on_publish did not publish for the batch's pool rows"
        assert values.tolist() == [e.s + 1 for e in exp], \
            f"on_publish got {values.tolist()}, not the new sequence lengths s + 1"
        assert log.index("target") < log.index("publish"), f"order {log}: on_publish before the target forward"
        if catch_up != "skip":
            assert "draft" in log and log.index("publish") < log.index("draft"), \
                f"order {log}: on_publish must come after the target forward and before the draft catch-up"
        assert w.fmap.new_seq_lens_buf[rows].tolist() == [e.s + 1 for e in exp], "FutureMap did not get s + 1"
    else:
        # the route guard hands on what the scheduler gave: (on_publish, and 0.5.17+ grammar_barrier), None here
        assert not publishes and entry.args in ((), (None,), (None, None)), \
            "the synchronous path has no on_publish, yet something was published"


def check_catch_up_graph(de, rc, bs):
    assert isinstance(de.graph, DraftExtendGraph) and de.graph.num_tokens_per_bs == 1, \
        "the draft extend did not get the one-token graph built at start-up"
    assert de.graph.asked and set(de.graph.asked) == {bs}, \
        f"the one-token draft graph was asked about {de.graph.asked} tokens, not {bs} (one per request)"
    assert rc.graph is None
    return "draft caught up at position s (the one-token graph asked, the draft model run)"


def check_scheduler_accepts(w, batch, result, exp, seq_lens_values, catch_up, overlap=True, needs_cpu_seq_lens=True):
    # the scheduler after the call: its isolation put the batch's fields back, the next step is set up
    bs, nd = len(exp), result.next_draft_input
    assert batch.spec_info is nd, "run_batch did not install next_draft_input"
    assert batch.input_ids is None
    assert batch.forward_mode == ForwardMode.DECODE and batch.out_cache_loc is None, \
        "the batch's fields were not restored after the forward"
    if overlap:
        assert torch.equal(nd.future_indices, torch.tensor([e.row for e in exp]))
        check_next_step(batch, w.fmap, exp, warm=catch_up != "skip")
    else:
        assert batch.seq_lens.tolist() == [e.s + 1 for e in exp], \
            "the synchronous scheduler path did not advance seq_lens from result.new_seq_lens"
        assert batch.seq_lens_cpu.tolist() == [e.s + 1 for e in exp] and \
            batch.seq_lens_sum == int(seq_lens_values.sum()) + bs

    # the result processor: one sampled token per request, counters, logprob rows
    tokens = read_result(w, batch, result)
    assert tokens == [[e.t] for e in exp], f"the scheduler read {tokens}, not one sampled token per request"
    reqs = batch.reqs
    assert [r.kv_committed_len for r in reqs] == [e.s for e in exp], \
        "kv_committed_len did not end the step at the request's sequence length: one committed token a step"
    assert result.num_correct_drafts == 0 and result.num_correct_drafts_per_req_cpu == [0] * bs
    assert all(r.histogram == [0] for r in reqs) and all(r.spec_verify_ct == 1 for r in reqs)
    assert [r.logprob.output_token_logprobs_val for r in reqs] == [[-10.0 * i] for i in range(bs)] and \
        [r.logprob.output_token_logprobs_idx for r in reqs] == [[e.t] for e in exp], \
        "the logprob rows are not the target's, in request order"
    return "result and next step accepted by the scheduler"


# --------------------------------------------------------- the scene's parts of _worker_contract's other checks


def check_dp_target(w, batch):
    target_batch = w.target_worker.calls[0].batch
    assert target_batch.global_num_tokens == [3, 40] and \
        target_batch.global_num_tokens is not batch.global_num_tokens and \
        target_batch.global_num_tokens_for_logprob is not batch.global_num_tokens_for_logprob, \
        "the target's batch shares global_num_tokens with the scheduler's (the forward aligns it in place)"
    assert w.target_worker.calls[0].fb.global_num_tokens_cpu == [3, 40], \
        "the target's MLP sync sizes are not the ranks' batch sizes"


def check_dp_idle_catch_up(w):
    assert len(w.draft_worker.draft_runner.calls) == 1 and w.draft_worker.draft_runner.calls[0].mode.is_idle(), \
        "the idle rank skipped the draft catch-up forward (collectives would not match)"


def target_sampling_info(call):
    return call.fb.sampling_info


def check_grammars_reached(info, batch):
    assert info.grammars is not None and info.grammars == [r.grammar for r in batch.reqs], \
        "the requests' grammars did not reach the target's sampler"


# ------------------------------------------------------------------------------- the checks only this family has


def check_plain_state(catch_up: str, *, disable_cuda_graph: bool = False):
    def run():
        w = make_worker(2, catch_up=catch_up, disable_cuda_graph=disable_cuda_graph)
        steps, tokens, draft_backend, draft_graph, target_backend, target_graph = w._spec_disable_plain
        assert (steps, tokens) == (0, 1), f"the plain state runs {steps} draft steps and {tokens} tokens per request"
        assert target_backend.name == "target-plain" and target_backend.built_with["num_draft_tokens"] == 1, \
            "the target's attention backend was not built for one token per request"
        assert target_backend.built_with["spec_algorithm"] == SpeculativeAlgorithm.NONE, \
            "the target's attention backend was built for the speculative (verify) path"
        if disable_cuda_graph:
            assert target_graph is None and not w.built.target_graphs, "CUDA graphs were captured with --disable-cuda-graph"
        else:
            assert len(w.built.target_graphs) == 1 and target_graph is w.built.target_graphs[0], "one target graph runner is built at start-up"
            built = target_graph.built_with
            assert built["spec_algorithm"] == SpeculativeAlgorithm.NONE, \
                "the target graph was captured as a speculative (TARGET_VERIFY) graph, not DECODE"
            assert built["return_hidden_states"], "the target graph does not return the hidden states the draft reads"
            assert built["attn_backend"] is target_backend, "the target graph was captured on another backend"
            assert built["cuda_graph_bs"] == [bs for bs in CUDA_GRAPH_BS if bs > 2], \
                f"the target graph captures batch sizes {built['cuda_graph_bs']}, not those above N"
        built_draft = w.draft_worker.graphs_built
        if catch_up == "skip":
            assert draft_graph is None and not built_draft, "the skip mode built a draft-extend graph"
        elif disable_cuda_graph and REL.draft_capture_only_with_bs:
            assert not built_draft, f"the draft's graphs were captured ({built_draft}) with CUDA graphs disabled"
        else:
            assert len(built_draft) == 1 and built_draft[0]["num_draft_tokens"] == 1 and \
                built_draft[0]["num_steps"] == 0 and built_draft[0]["backend"] is draft_backend, \
                f"the draft-extend graph was built with {built_draft}, not one token per request on its own backend"
            assert built_draft[0]["disabled"] == disable_cuda_graph
            if not disable_cuda_graph:
                assert built_draft[0]["bs"] == [bs for bs in CUDA_GRAPH_BS if bs > 2], \
                    f"the draft-extend graph captures batch sizes {built_draft[0]['bs']}, not those above N"
        if catch_up != "skip":
            assert draft_backend.built_with["num_steps"] == 0
            if disable_cuda_graph:
                assert draft_graph is None, f"the one-token state holds the draft-extend graph {draft_graph} " \
                    "with CUDA graphs disabled"
        check_put_back(w, disable_cuda_graph)
        graphs = "no graphs (--disable-cuda-graph)" if disable_cuda_graph else \
            f"a DECODE graph with hidden states for bs {[bs for bs in CUDA_GRAPH_BS if bs > 2]}"
        draft = "no draft graph" if catch_up == "skip" or disable_cuda_graph else "a one-token draft-extend graph"
        return f"N 2, {catch_up}: {graphs}, {draft}; model runner and server args put back"
    return run


def check_next_step(batch, fmap, exp, warm=True):
    """The next iteration's FutureMap resolve: lengths s + 1, the sampled tokens, the catch-up's top-k and hidden."""
    with no_record_stream():
        fmap.resolve_seq_lens_cpu(batch)
        overlap_utils.resolve_forward_inputs(batch, fmap)
    assert batch.seq_lens.tolist() == [e.s + 1 for e in exp], "the next step does not start from s + 1"
    if fmap.needs_cpu_seq_lens:
        assert batch.seq_lens_cpu.tolist() == [e.s + 1 for e in exp]
    nd = batch.spec_info
    assert nd.bonus_tokens.tolist() == [e.t for e in exp], "the next step does not start from the sampled tokens"
    if warm:
        assert nd.topk_index[:, 0].tolist() == [e.draft for e in exp], "FutureMap lost the catch-up's top-k"
        assert nd.hidden_states[:, 0].tolist() == [float(e.s) for e in exp], "FutureMap lost the catch-up's hidden state"
    else:
        assert not nd.topk_index.any() and not nd.hidden_states.any(), "FutureMap did not relay the skip mode's zeros"


def check_put_back(w, disable_cuda_graph: bool):
    """Everything the build changes for the capture is put back (the model runner, the server arguments)."""
    sa = w.server_args
    assert w.target_worker.model_runner.spec_algorithm == EAGLE and not REL.hidden_states_settings(sa)[0] and \
        not w.target_worker.model_runner.init_new_workspace, "the model runner was left as built for the capture"
    graph_args = REL.graph_server_args(CUDA_GRAPH_BS, disable_cuda_graph)
    left = {k: getattr(sa, k) for k, v in graph_args.items() if getattr(sa, k) != v}
    assert not left and (sa.speculative_num_steps, sa.speculative_num_draft_tokens) == (STEPS, N_DRAFT), \
        f"the server arguments were left as set for the capture: {left}"
    assert_speculative_state(w, "after start-up")


def check_no_bs_above_n():
    """N at the largest CUDA graph batch size: no graph to capture, none built, none in the one-token state."""
    n = max(CUDA_GRAPH_BS)
    w = make_worker(n, catch_up="padded")
    _, _, _, draft_graph, _, target_graph = w._spec_disable_plain
    assert target_graph is None and not w.built.target_graphs, \
        f"a target graph was captured although no CUDA graph batch size is above N {n}"
    assert draft_graph is None and not w.built.draft_graphs, f"the one-token state holds the draft-extend graph " \
        f"{draft_graph} although no CUDA graph batch size is above N {n} (the speculative one?)"
    check_put_back(w, False)
    return f"N {n}: no graphs captured, none in the one-token state; model runner and server args put back"


def check_grammar_barrier():
    """0.5.17+: the scheduler does not wait for the previous step's result before an EAGLE decode with a grammar; it
    hands the worker a barrier that advances the grammar state over it. A step without speculation runs it before the
    target's forward (whose sampler builds the grammar mask from that state), and only for a batch with a grammar."""
    for has_grammar in (True, False):
        w = make_worker(2, catch_up="padded")
        batch = decode_batch(4, has_grammar=has_grammar, pool=w.req_to_token_pool)
        run_through_scheduler(w, batch, overlap=True)
        assert "target" in w.log and not w.verify_calls, f"order {w.log}: the step did not fall back"
        if has_grammar:
            assert w.log.count("grammar") == 1 and w.log.index("grammar") < w.log.index("target"), \
                f"order {w.log}: the grammar barrier did not run (once) before the target's forward and sampler"
        else:
            assert "grammar" not in w.log, f"order {w.log}: the grammar barrier ran for a batch without a grammar"
    return "the grammar state advanced over the previous step before the target samples (with a grammar only)"


def check_plain_state_last_mode():
    """0.5.17+: on a server whose hidden-state mode is "last" (--return-hidden-states-mode last), the target's DECODE
    graph still captures every token's hidden states for the draft (a graph runner fixes its mode when built), and the
    server's mode is put back after the build."""
    saved = REL.server_args_extra
    REL.server_args_extra = dict(saved, return_hidden_states_mode="last")
    try:
        w = make_worker(2, catch_up="padded")
    finally:
        REL.server_args_extra = saved
    [target_graph] = w.built.target_graphs
    assert target_graph.built_with["return_hidden_states"], \
        "the target graph does not capture the hidden states the draft reads (the server's mode is last)"
    assert REL.hidden_states_settings(w.server_args) == (False, "last"), \
        "the server's hidden-state mode was not put back after the build"
    return "a DECODE graph with every token's hidden states, on a server returning the last only; its mode put back"


def check_draft_scope_and_vote():
    """0.5.21+: the one-token state's draft half and the draft catch-up enter the draft's scope as the release's own
    calls do (draft_tp_context(tp_group, owns_attention=draft_worker.draft_owns_attention): a call without it is
    refused by the release's signature; the target half enters none, check_build_scopes); a step with the catch-up skipped votes on the next step's draft graph
    (cuda_graph_compatible) as the draft extend would: no, where the draft seeds its DSA top-k from the draft extend
    (no seed was made), else yes."""
    for owns in (False, True):
        _check_draft_scopes(dict(draft_owns_attention=owns), "owns_attention", owns)
    _check_skipped_catch_up_vote()
    return "build and catch-up scopes pass owns_attention as the draft worker owns it (False / True); the skipped " \
        "catch-up's draft input votes against the draft graph only for a DSA-seeded draft"


def _check_draft_scopes(attrs, key, expected):
    """With the draft worker given `attrs`, the one-token state's draft half (the build) and the padded catch-up of a
    step above N enter draft_tp_context with `key` bound to the draft worker's own `expected` (the object itself)."""
    saved = REL.draft_worker_attrs
    try:
        REL.draft_worker_attrs = dict(saved, **attrs)
        w = make_worker(2, catch_up="padded")
        built = list(w._draft_worker.tp_contexts)
        result = step(w, decode_batch(4, pool=w.req_to_token_pool))
        assert getattr(result, "speculation_disabled", False), "the step did not fall back"
        calls = w._draft_worker.tp_contexts
        assert built and len(calls) > len(built), f"draft scopes entered: {calls} (build: {built})"
        assert all(c.get(key) is expected for c in calls), \
            f"draft_tp_context entered with {calls}, not with the draft worker's {', '.join(attrs)} ({expected!r})"
    finally:
        REL.draft_worker_attrs = saved


def _check_skipped_catch_up_vote():
    """A step with the catch-up skipped votes on the next step's draft graph as the draft extend would."""
    saved = REL.draft_worker_attrs
    try:
        for seed in (False, True):
            REL.draft_worker_attrs = dict(saved, seed_dsa_topk_from_draft_extend=seed)
            w = make_worker(2, catch_up="skip")
            result = step(w, decode_batch(4, pool=w.req_to_token_pool))
            assert getattr(result, "speculation_disabled", False), "the step did not fall back"
            vote = result.next_draft_input.cuda_graph_compatible
            assert vote is (not seed), f"the skipped catch-up's draft input votes {vote} with the DSA seed flag {seed}"
    finally:
        REL.draft_worker_attrs = saved


def check_draft_layout_and_vote():
    """0.5.23+: the one-token state's draft half and the draft catch-up enter draft_tp_context with the draft worker's
    own parallel layout (EagleDraftWorker.parallel_layout, the object itself: a call without it is refused by the
    release's signature), as the release's own calls do; a draft whose layout owns its attention (a TP group of its
    own, local_dp: an EAGLE3-like draft under attention DP) is refused at start-up, naming it; the skipped catch-up's
    draft-graph vote as on 0.5.21."""
    from sglang.srt.configs.draft_parallel import DraftParallelLayout

    layout = DraftParallelLayout(tp_group=None, attn_tp_size=2)  # not the adapter's default: identity is checked
    _check_draft_scopes(dict(parallel_layout=layout), "layout", layout)
    saved = REL.draft_worker_attrs
    try:
        owning = DraftParallelLayout(tp_group=SimpleNamespace(world_size=1, name="attn_tp"), attn_tp_size=1)
        REL.draft_worker_attrs = dict(saved, parallel_layout=owning)
        try:
            make_worker(2, catch_up="padded")
        except ValueError as exc:
            assert "owns its attention" in str(exc), f"refused for another reason: {exc}"
        else:
            raise AssertionError("a draft whose parallel layout owns its attention (local_dp) was served")
    finally:
        REL.draft_worker_attrs = saved
    _check_skipped_catch_up_vote()
    return "build and catch-up scopes enter draft_tp_context with the draft worker's own parallel layout; a draft " \
        "owning its attention (local_dp) refused at start-up; the skipped catch-up's draft input votes against the " \
        "draft graph only for a DSA-seeded draft"


def check_target_graph_runner_selected():
    """0.5.23+: the one-token target graph's runner class is picked as the release picks the target's own graphs
    (_select_spec_graph_runner_cls): the built-in class in tree (the checks above), an out-of-tree platform's own
    get_graph_runner_cls() where it captures graphs, and none (an eager target) where it captures none."""
    real = eagle_worker_v2.current_platform

    class OutOfTreeGraph(PlainTargetGraph):
        """An out-of-tree platform's graph runner."""

    try:
        for capture in (True, False):
            eagle_worker_v2.current_platform = SimpleNamespace(
                is_out_of_tree=lambda: True, capabilities=SimpleNamespace(graph_capture=capture),
                get_graph_runner_cls=lambda: OutOfTreeGraph, get_speculative_graph_runner_cls=lambda **kw: None)
            w = make_worker(2, catch_up="padded")
            target_graph = w._spec_disable_plain[5]
            if capture:
                assert type(target_graph) is OutOfTreeGraph and len(w.built.target_graphs) == 1, \
                    f"an out-of-tree platform capturing graphs: the target graph is {target_graph!r}, not its runner's"
            else:
                assert target_graph is None and not w.built.target_graphs, \
                    f"an out-of-tree platform capturing no graphs: a target graph {target_graph!r} was built"
    finally:
        eagle_worker_v2.current_platform = real
    return "out of tree: the platform's get_graph_runner_cls() where it captures graphs, no target graph where not"


START_UP_CHECKS = [("start-up: what is captured (skip)", check_plain_state("skip")),
                   ("start-up: what is captured (padded)", check_plain_state("padded")),
                   ("start-up: no CUDA graphs", check_plain_state("padded", disable_cuda_graph=True)),
                   ("start-up: no batch size above N", check_no_bs_above_n)]
STEP_CHECKS = LAST_CHECKS = []
