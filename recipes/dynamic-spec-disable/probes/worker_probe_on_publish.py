"""Behaviour probe of the dynamic speculation disable on the ScheduleBatch / on_publish worker contract (0.5.13).

From sglang 0.5.13 `EAGLEWorkerV2.forward_batch_generation(batch, on_publish=None)` takes the scheduler's
ScheduleBatch (there is no ModelWorkerBatch), calls `on_publish(new_seq_lens)` between verify and the draft extend,
returns the new sequence lengths on the result (no `verify_done`, none on the draft input), and is driven by a
scheduler that snapshots and restores the batch's fields around the call and relays the draft input and the lengths
through a FutureMap keyed by the request's pool row. Its batches, fake target, scheduler half and half of its result
assertions differ from worker_probe_graphs.py's (0.5.9's contract), so this probe builds its own scene; the checks
both designs share are written once in _contract.py (run on this module: make_worker, decode_batch, step), the fakes
come from _fakes.py, and what is release-specific from the adapter of the variant applied (_releases.Release013, by
SPECPATCH_VARIANT).

The worker is built without its __init__; the target and draft workers are fakes that record their calls (the draft
worker is the real EagleDraftWorker with `draft` and the model runner faked, so its real `_draft_extend_for_decode`
runs); the batches are the real ScheduleBatch with CPU tensors, turned into ForwardBatches by the real
ForwardBatch.init_new. The fakes make every value traceable: the target "samples" (input_id * 7 + seq_len) % V, the
draft model answers (input_id + position) % V, and hidden states carry their position and token. The fallback is
then run by the real `Scheduler.run_batch` (overlap: FutureMap relay, on_publish, forward isolation; and the
synchronous path), and its result read by the real `SchedulerBatchResultProcessor` and resolved by the real
FutureMap for the next step. FutureMap's gather of the relayed rows is a Triton kernel: the probe runs it as a
plain indexed read (same rows, same buffers).

What needs a GPU is faked where the patch builds it, and the fakes record how they were built: the CUDA graph
runners (the target's DECODE graph, the draft's one-token extend graph) and the attention backends that the fallback
captures at start-up. The probe checks what is captured (DECODE, one token per request, the hidden states the draft
reads, only the batch sizes above N) and that a fallback step runs on exactly those, with every field the patch
swaps put back afterwards, also when the forward raises.
"""

from __future__ import annotations

import contextlib
import functools
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
from sglang.srt.managers.schedule_batch import ScheduleBatch  # noqa: E402
from sglang.srt.managers.scheduler import Scheduler  # noqa: E402
from sglang.srt.managers.scheduler_components.batch_result_processor import SchedulerBatchResultProcessor  # noqa: E402
from sglang.srt.managers.utils import GenerationBatchResult  # noqa: E402
from sglang.srt.model_executor.forward_batch_info import CaptureHiddenMode, ForwardBatch, ForwardMode  # noqa: E402
from sglang.srt.speculative import eagle_worker_v2  # noqa: E402
from sglang.srt.speculative.eagle_info import EagleDraftInput  # noqa: E402
from sglang.srt.speculative.eagle_worker_v2 import EAGLEWorkerV2  # noqa: E402
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm  # noqa: E402

import _contract  # noqa: E402
import _fakes  # noqa: E402
import _releases  # noqa: E402
from _fakes import H_DRAFT, H_TARGET, N_DRAFT, STEPS, V, GraphRunnerSentinel, draft_token, make_pool  # noqa: E402
from _fakes import slot, target_token  # noqa: E402
from _contract import took_fallback, took_speculative_path  # noqa: E402

VARIANT = os.environ.get("SPECPATCH_VARIANT", "")
REL = _releases.ON_PUBLISH_BY_VARIANT[VARIANT]() if VARIANT in _releases.ON_PUBLISH_BY_VARIANT else None
PROBE = sys.modules[__name__]  #: this module: the scene of _contract's shared checks
EAGLE = SpeculativeAlgorithm.EAGLE

_fakes.on_cpu()


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
                               return_hidden_states=args.enable_return_hidden_states,
                               cuda_graph_bs=list(args.cuda_graph_bs), kwargs=kwargs,
                               num_draft_tokens=args.speculative_num_draft_tokens)
        BUILT.append(self)


class DraftExtendGraph:
    """Stands for a draft-extend CUDA graph runner: never runnable here (the eager path computes the values), but
    records each batch it was asked about and how many tokens per request it was built for."""

    def __init__(self, num_tokens_per_bs):
        self.num_tokens_per_bs = num_tokens_per_bs
        self.asked = []

    def can_run(self, forward_batch):
        self.asked.append(len(forward_batch.input_ids))
        return False


class FakeBackendFactory:
    """DraftBackendFactory as the patch uses it: a draft-extend backend, recorded with the step count asked for."""

    def __init__(self, server_args, draft_runner, topk, num_steps):
        self.num_steps = num_steps

    def create_draft_extend_backend(self):
        return SimpleNamespace(kind="draft-extend backend", num_steps=self.num_steps)


BUILT = []  # PlainTargetGraph instances, in order
eagle_worker_v2.CudaGraphRunner = PlainTargetGraph
eagle_worker_v2.DraftBackendFactory = FakeBackendFactory


class Capture:
    """Stands for a routed-expert / indexer top-k capture of the target's forward (copied to CPU by the result)."""

    def __init__(self, name):
        self.name = name
        self.copied = False

    def copy_to_cpu(self):
        self.copied = True


class FakeRunner:
    """What ForwardBatch.init_new and the worker read of a model runner."""

    def __init__(self, req_to_token_pool, log, graph_runner=None):
        self.device = "cpu"
        self.tp_group = None
        self.req_to_token_pool = req_to_token_pool
        self.token_to_kv_pool = None
        self.attn_backend = SimpleNamespace(init_forward_metadata=lambda forward_batch: None)
        self.server_args = SimpleNamespace(attention_backend="torch_native", enable_lora=False)
        self.model_is_mrope = False
        self.use_ngram_embedding = False
        self.is_hybrid_swa = False
        self.spec_algorithm = EAGLE
        self.canary_manager = None
        self.model_config = SimpleNamespace(vocab_size=V)
        self.graph_runner = graph_runner
        self.init_new_workspace = False
        self.log = log
        self.calls = []

    def _get_attention_backend(self, init_new_workspace=False):
        self.init_new_workspace = init_new_workspace  # the patch must put it back
        return SimpleNamespace(kind="target backend", spec_algorithm=self.spec_algorithm,
                               num_draft_tokens=self.server_args.speculative_num_draft_tokens,
                               init_forward_metadata=lambda forward_batch: None)


class FakeTargetWorker:
    """The target TpModelWorker: the real ForwardBatch.init_new on the batch it gets, a traceable 'sampler'."""

    def __init__(self, pool, log):
        self.graph_runner = GraphRunnerSentinel()
        self.model_runner = FakeRunner(pool, log, self.graph_runner)
        self.model_config = SimpleNamespace(hidden_size=H_TARGET, dtype=torch.float32, vocab_size=V)
        self.log = log
        self.calls = []
        self.nan_logits = False
        self.fail_forward = False

    def forward_batch_generation(self, batch=None, forward_batch=None, pp_proxy_tensors=None, is_verify=False,
                                 **kwargs):
        b = batch
        assert b is not None, "the fallback must call the target with a ScheduleBatch"
        self.log.append("target")
        fb = None
        if b.forward_mode.is_decode_or_idle() and not b.is_extend_in_batch:
            fb = ForwardBatch.init_new(b, self.model_runner)  # as TpModelWorker.forward_batch_generation does
        self.calls.append(SimpleNamespace(
            batch=b, mode=b.forward_mode, fb=fb, input_ids=None if b.input_ids is None else b.input_ids.clone(),
            seq_lens=b.seq_lens.clone(),
            seq_lens_cpu=None if fb is None or fb.seq_lens_cpu is None else fb.seq_lens_cpu.clone(),
            seq_lens_sum=None if fb is None else fb.seq_lens_sum,
            out_cache_loc=None if b.out_cache_loc is None else b.out_cache_loc.clone(),
            positions=None if fb is None else fb.positions.clone(),
            spec_info_is_none=b.spec_info is None, capture=None if fb is None else fb.capture_hidden_mode,
            return_logprob=b.return_logprob, sampling_info=b.sampling_info,
            graph_runner=self.model_runner.graph_runner, attn_backend=self.model_runner.attn_backend,
            fb_attn_backend=getattr(fb, "attn_backend", None), is_verify=is_verify))
        if self.fail_forward:
            raise RuntimeError("target forward failed (probe)")
        self.routed, self.indexer = Capture("routed experts"), Capture("indexer top-k")
        return GenerationBatchResult(
            **_fakes.target_output(b, fb is not None and b.forward_mode.is_decode(), self.nan_logits),
            can_run_cuda_graph=True, routed_experts_output=self.routed, indexer_topk_output=self.indexer)


class FakeDraftRunner(FakeRunner):
    """The draft model runner: answers draft_token(input, position), hidden [position, input, target hidden[1]]."""

    def forward(self, forward_batch, **kwargs):
        self.log.append("draft")
        _fakes.record_forward(forward_batch, self.calls)
        return SimpleNamespace(logits_output=_fakes.draft_answer(forward_batch))


SPEC_DRAFT_GRAPH = SimpleNamespace(kind="the speculative path's draft graph")
SPEC_DRAFT_EXTEND_GRAPH = SimpleNamespace(kind="the speculative path's draft-extend graph",
                                          can_run=lambda forward_batch: False)
SPEC_DRAFT_BACKEND = SimpleNamespace(kind="the speculative path's draft backend")
SPEC_DRAFT_EXTEND_BACKEND = SimpleNamespace(kind="the speculative path's draft-extend backend")
SPEC_TARGET_BACKEND = SimpleNamespace(kind="the speculative path's target backend",
                                      init_forward_metadata=lambda forward_batch: None)
CUDA_GRAPH_BS = [1, 2, 4, 8, 16, 32]


class RecordingDraftWorker(_fakes.RecordingDraftWorker):
    """_fakes' recording draft worker on this probe's draft runner, with the speculative path's graphs and backends
    (a step without speculation must put them back) and a recorder of the graphs it would capture."""

    def __init__(self, pool, log):  # not the real __init__: no model to load
        super().__init__(REL, pool)
        self.speculative_algorithm = EAGLE
        self.draft_runner = FakeDraftRunner(pool, log)
        self.cuda_graph_runner = SPEC_DRAFT_GRAPH
        self.cuda_graph_runner_for_draft_extend = SPEC_DRAFT_EXTEND_GRAPH
        self.draft_attn_backend = SPEC_DRAFT_BACKEND
        self.draft_extend_attn_backend = SPEC_DRAFT_EXTEND_BACKEND
        self.draft_runner.draft_attn_backend = SPEC_DRAFT_BACKEND
        self.graphs_built = []

    def init_cuda_graphs(self):  # the real one captures CUDA graphs; record what it would build
        self.graphs_built.append(dict(num_draft_tokens=self.speculative_num_draft_tokens,
                                      num_steps=self.speculative_num_steps,
                                      backend=self.draft_extend_attn_backend,
                                      disabled=self.server_args.disable_cuda_graph))
        self.cuda_graph_runner = None
        self.cuda_graph_runner_for_draft_extend = DraftExtendGraph(self.speculative_num_draft_tokens)


def make_worker(threshold: int = 0, *, dp_attention: bool = False, catch_up: str | None = None,
                disable_cuda_graph: bool = False, nan_detection: bool = False):
    """An EAGLEWorkerV2 without its __init__; the patch's own init step reads N (and the environment)."""
    pool = make_pool()
    log = []
    server_args = _fakes.make_server_args(
        threshold, dp_attention, speculative_adaptive=False, speculative_num_steps=STEPS,
        speculative_num_draft_tokens=N_DRAFT, cuda_graph_bs=list(CUDA_GRAPH_BS), disable_cuda_graph=disable_cuda_graph,
        cuda_graph_max_bs=32, max_running_requests=32, enable_return_hidden_states=False,
        attention_backend="torch_native", enable_lora=False)
    w = _fakes.bare_worker(server_args, pool, adaptive_controller=None, enable_nan_detection=nan_detection)
    w._target_worker = FakeTargetWorker(pool, log)
    w._target_worker.model_runner.server_args = server_args
    w._target_worker.model_runner.attn_backend = SPEC_TARGET_BACKEND
    w._draft_worker = RecordingDraftWorker(pool, log)
    w._draft_worker.server_args = server_args
    w._draft_worker.draft_runner.server_args = server_args
    w._draft_worker.draft_runner.model_config = SimpleNamespace(vocab_size=V, spec_hidden_size=H_DRAFT,
                                                                dtype=torch.float32)
    w._draft_worker._rebuild_topk1_chain_buffers()
    w.log = log
    _fakes.install_verify(w, pool, REL.token, lens_on_result=True)
    env = envs.SGLANG_SPEC_DISABLE_CATCH_UP
    with (env.override(catch_up) if catch_up else contextlib.nullcontext()):
        w._init_speculative_disable(server_args)
    return w


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
        self.is_retracted = False
        self.kv_committed_len = committed
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
    reqs = [FakeReq(i, int(seq_lens[i]), object() if has_grammar else None) for i in range(bs)]
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


def expected(batch: ScheduleBatch):
    """Per request: the sampled token, its KV slot (position s), and the draft's answer at position s."""
    out = []
    for i in range(len(batch.seq_lens)):
        s, row, v = int(batch.seq_lens[i]), int(batch.req_pool_indices[i]), int(batch.spec_info.bonus_tokens[i])
        t = target_token(v, s + 1)
        out.append(SimpleNamespace(s=s, row=row, v=v, t=t, slot=slot(row, s), draft=draft_token(t, s)))
    return out


class Publishes:
    """An on_publish callback that records what it gets and when (in the worker's event log)."""

    def __init__(self, log):
        self.log = log
        self.calls = []

    def __call__(self, new_seq_lens):
        self.log.append("publish")
        self.calls.append(new_seq_lens.clone())


def step(w, batch):
    """The worker's forward as this release's scheduler calls it, with an on_publish (the scene of _contract's
    shared checks)."""
    return w.forward_batch_generation(batch, on_publish=Publishes(w.log))


# ------------------------------------------------------------------------ the real scheduler around the worker


def make_scheduler(w, fmap, overlap: bool):
    """The parts of Scheduler that run_batch uses, with its own run_batch, _forward_isolation and batch pinning."""
    s = SimpleNamespace(
        forward_ct=0, scripted_scheduler_hook=None, forward_sleep_time=None, is_generation=True,
        profiler_manager=SimpleNamespace(_profile_batch_predicate=lambda batch: None),
        enable_overlap=overlap, enable_pdmux=False, future_map=fmap, forward_stream_ctx=contextlib.nullcontext(),
        forward_stream=SimpleNamespace(wait_stream=lambda stream: None), schedule_stream=None,
        batch_record_ct=0, batch_record_buf=[None, None], model_worker=w, tp_worker=w.target_worker,
        device_module=torch.get_device_module("cpu"), spec_algorithm=EAGLE,
        server_args=SimpleNamespace(enable_dp_attention=False, elastic_ep_backend=None))
    s._forward_isolation = functools.partial(Scheduler._forward_isolation, s)
    s.record_batch_in_overlap = functools.partial(Scheduler.record_batch_in_overlap, s)
    s.update_cache_from_scheduler = functools.partial(Scheduler.update_cache_from_scheduler, s)
    s._maybe_report_active_ranks = functools.partial(Scheduler._maybe_report_active_ranks, s)
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
    proc._resolve_spec_v2_tokens = functools.partial(SchedulerBatchResultProcessor._resolve_spec_v2_tokens, proc)
    tokens, logprobs = SchedulerBatchResultProcessor._normalize_decode_outputs(
        proc, batch=batch, result=result, logits_output=result.logits_output, next_token_ids=result.next_token_ids)
    for i, req in enumerate(batch.reqs):
        SchedulerBatchResultProcessor._apply_decode_logprobs(
            proc, req=req, i=i, batch=batch, next_token_id=tokens[i], next_token_logprobs=logprobs,
            logits_output=result.logits_output)
    return tokens


# ----------------------------------------------------------------------------------------------------- checks


def check_patched():
    for name in ("_init_speculative_disable", "_speculation_disabled_for", "_forward_without_speculation"):
        assert hasattr(EAGLEWorkerV2, name), f"EAGLEWorkerV2.{name} is missing: the target is not patched"
    return f"patched EAGLEWorkerV2 from {eagle_worker_v2.__file__}"


def check_speculative_step(w):
    """After a speculative step (the scene of _contract's shared checks): on_publish once, before its draft extend,
    which ran on the speculative state."""
    assert w.log.count("publish") == 1 and w.log.index("publish") < w.log.index("draft"), \
        f"order {w.log}: the speculative path's on_publish did not come (once) before its draft extend"
    de = w.draft_worker.extend_decode_calls[0]
    assert de.draft_tokens == N_DRAFT and de.graph is SPEC_DRAFT_EXTEND_GRAPH, \
        "the speculative path's draft extend ran on the one-token state"


def check_fallback(catch_up: str, *, overlap: bool = True, needs_cpu_seq_lens: bool = True):
    def run():
        # bs 5 > N 2
        bs = 5
        w = make_worker(2, catch_up=catch_up)
        assert w.spec_disable_catch_up == catch_up
        batch = decode_batch(bs, overlap=overlap, pool=w.req_to_token_pool)
        exp = expected(batch)
        seq_lens_values = batch.seq_lens.clone()
        rows = batch.req_pool_indices.clone()
        entry = {}
        real_fallback = w._forward_without_speculation

        def seen_at_entry(b, *args):  # what run_batch hands the worker, after the FutureMap resolve
            entry.update(seq_lens=b.seq_lens, seq_lens_cpu=b.seq_lens_cpu, fields=dict(vars(b)),
                         sampling_info=b.sampling_info, args=args)
            entry.update(seq_lens_values=b.seq_lens.clone(),
                         seq_lens_cpu_values=None if b.seq_lens_cpu is None else b.seq_lens_cpu.clone())
            return real_fallback(b, *args)

        w._forward_without_speculation = seen_at_entry
        result, fmap, publishes = run_through_scheduler(w, batch, overlap=overlap,
                                                        needs_cpu_seq_lens=needs_cpu_seq_lens)
        assert entry, "run_batch did not reach the fallback"
        with_cpu = entry["seq_lens_cpu"] is not None
        assert with_cpu == (needs_cpu_seq_lens or not overlap), "the probe's FutureMap set-up is wrong"

        call = _contract.target_forward(w)  # routing: no draft, no verify, one target forward
        plain = w._spec_disable_plain
        assert isinstance(call.graph_runner, PlainTargetGraph) and call.graph_runner is plain[5], \
            "the target forward did not run on the DECODE graph runner built at start-up"
        assert call.attn_backend is plain[4] and call.attn_backend.kind == "target backend", \
            "the target forward did not run on the attention backend built with its graph"
        if call.fb_attn_backend is not None:
            assert call.fb_attn_backend is plain[4], "the target's ForwardBatch got another attention backend"
        check_restored(w)
        assert call.capture == CaptureHiddenMode.FULL, f"target capture mode {call.capture}"
        assert call.return_logprob, "the batch's return_logprob did not reach the target"
        assert call.sampling_info is entry["sampling_info"], "the target did not get the batch's sampling info"
        si = call.sampling_info
        assert si.acc_additive_penalties is not None and bool((si.acc_additive_penalties == -1e4).all()) and \
            si.acc_scaling_penalties is not None and bool((si.acc_scaling_penalties == 2.0).all()), \
            "the penalties (accumulated by spec v2 and applied by verify in this release) were not passed on"
        _contract.target_input(call, exp)
        assert call.positions.tolist() == [e.s for e in exp], "the target's new token is not at position s"
        if with_cpu:
            _contract.target_cpu_lens(call, exp, seq_lens_values)
        else:
            assert call.seq_lens_cpu is None and call.seq_lens_sum is None, \
                "the target got CPU sequence lengths the batch did not have (needs_cpu_seq_lens off)"
        _contract.target_slots(call, exp)
        assert call.batch is not batch, "the target ran on the scheduler's ScheduleBatch itself, not a copy"

        # the scheduler's tensors are not changed in place
        assert torch.equal(entry["seq_lens"], entry["seq_lens_values"]), \
            "seq_lens (shared with the scheduler) changed in place"
        if with_cpu:
            assert torch.equal(entry["seq_lens_cpu"], entry["seq_lens_cpu_values"]), "seq_lens_cpu changed in place"

        # the result contract
        assert result.next_token_ids.shape == (bs,), f"next_token_ids shape {tuple(result.next_token_ids.shape)}"
        assert result.next_token_ids.dtype == torch.int32
        assert result.next_token_ids.tolist() == [e.t for e in exp], "the sampled tokens are not at i (stride 1)"
        assert result.accept_lens.tolist() == [1] * bs and result.accept_lens.dtype == torch.int32, \
            f"accept_lens {result.accept_lens.tolist()} are not all 1 (int32)"
        assert result.speculative_num_draft_tokens == 1, "the result does not carry its stride (1)"
        assert getattr(result, "speculation_disabled", False), "the result is not marked as a step without speculation"
        assert result.delay_sample_func is None, "delay_sample_func would postpone the stash"
        assert result.logits_output is not None
        assert result.new_seq_lens is not None, "the result carries no new_seq_lens"
        assert result.new_seq_lens.tolist() == [e.s + 1 for e in exp], "new_seq_lens are not s + 1"
        assert result.new_seq_lens.data_ptr() != entry["seq_lens"].data_ptr(), "new_seq_lens is not a new tensor"
        assert result.routed_experts_output is w.target_worker.routed and w.target_worker.routed.copied, \
            "the target's routed-expert capture was not handed to the scheduler"
        assert result.indexer_topk_output is w.target_worker.indexer, \
            "the target's indexer top-k capture was not handed to the scheduler"
        lp = result.logits_output.next_token_logprobs
        assert lp is not None and tuple(lp.shape) == (bs, 1), \
            f"logprobs {None if lp is None else tuple(lp.shape)}: the spec-v2 scheduler reads a row per request"
        assert result.logits_output.hidden_states is None, \
            "the target's hidden states stayed on the result (nothing reads them after the catch-up)"
        nd = result.next_draft_input
        assert isinstance(nd, EagleDraftInput), "next_draft_input is not an EagleDraftInput"
        assert nd.bonus_tokens.tolist() == [e.t for e in exp] and nd.bonus_tokens.dtype == torch.int32
        _contract.draft_input_shapes(nd, bs)

        # on_publish: the new lengths, once, after the target forward and before the draft catch-up
        log = w.log
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
            assert fmap.new_seq_lens_buf[rows].tolist() == [e.s + 1 for e in exp], "FutureMap did not get s + 1"
        else:
            assert not publishes and entry["args"] in ((), (None,)), \
                "the synchronous path has no on_publish, yet something was published"

        # the draft catch-up: one real token per request, at position s, from the target's row for that request,
        # through the speculative path's own draft extend at one token per request and the one-token graph
        runner_calls = w.draft_worker.draft_runner.calls
        if catch_up == "skip":
            assert not runner_calls and not w.draft_worker.extend_decode_calls, "the skip mode ran a draft catch-up"
            assert not nd.topk_p.any() and not nd.topk_index.any() and not nd.hidden_states.any(), \
                "the skip mode's next_draft_input is not zeros"
        else:
            assert len(runner_calls) == 1, f"the draft model ran {len(runner_calls)} times, not once"
            rc = runner_calls[0]
            assert len(w.draft_worker.extend_decode_calls) == 1, "_draft_extend_for_decode did not run"
            de = w.draft_worker.extend_decode_calls[0]
            assert de.draft_tokens == 1, f"the draft extend ran at {de.draft_tokens} tokens per request, not 1"
            assert isinstance(de.graph, DraftExtendGraph) and de.graph.num_tokens_per_bs == 1 \
                and de.graph is plain[3], "the draft extend did not get the one-token graph built at start-up"
            assert de.graph.asked and set(de.graph.asked) == {bs}, \
                f"the one-token draft graph was asked about {de.graph.asked} tokens, not {bs} (one per request)"
            _contract.catch_up_extend(de, exp, seq_lens_values)
            _contract.catch_up_rows(rc, nd, exp)

        # the scheduler after the call: its isolation put the batch's fields back, the next step is set up
        assert batch.spec_info is nd, "run_batch did not install next_draft_input"
        assert batch.input_ids is None
        assert batch.forward_mode == ForwardMode.DECODE and batch.out_cache_loc is None, \
            "the batch's fields were not restored after the forward"
        if overlap:
            assert torch.equal(nd.future_indices, rows)
            check_next_step(batch, fmap, exp, warm=catch_up != "skip")
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
            "kv_committed_len (pre-claimed by prepare_for_decode) moved: it must advance by exactly 1"
        assert result.num_correct_drafts == 0 and result.num_correct_drafts_per_req_cpu == [0] * bs
        assert all(r.histogram == [0] for r in reqs) and all(r.spec_verify_ct == 1 for r in reqs)
        assert [r.logprob.output_token_logprobs_val for r in reqs] == [[-10.0 * i] for i in range(bs)] and \
            [r.logprob.output_token_logprobs_idx for r in reqs] == [[e.t] for e in exp], \
            "the logprob rows are not the target's, in request order"
        path = "overlap scheduler, on_publish before the catch-up" if overlap else "synchronous scheduler path"
        lens = "" if needs_cpu_seq_lens else ", no CPU sequence lengths"
        caught = "no draft catch-up" if catch_up == "skip" else "draft caught up at position s by the one-token graph"
        return f"bs {bs} > N 2 ({catch_up} catch-up, {path}{lens}): one DECODE of the target on the graph built at " \
               f"start-up, fields restored, {caught}, result and next step accepted by the scheduler"
    return run


def assert_speculative_state(w, when: str):
    """check_restored, for _contract's shared checks."""
    try:
        check_restored(w)
    except AssertionError as exc:
        raise AssertionError(f"{when}: {exc}") from None


def check_restored(w):
    """Every field the fallback swaps for its step is back to the speculative path's."""
    dw, runner = w.draft_worker, w.target_worker.model_runner
    assert runner.graph_runner is w.target_worker.graph_runner, "the target's CUDA graph runner was not put back"
    assert runner.attn_backend is SPEC_TARGET_BACKEND, "the target's attention backend was not put back"
    assert (w.speculative_num_steps, w.speculative_num_draft_tokens) == (STEPS, N_DRAFT) and \
        (dw.speculative_num_steps, dw.speculative_num_draft_tokens) == (STEPS, N_DRAFT), \
        "the speculative step and draft-token counts were not put back"
    assert dw.cuda_graph_runner_for_draft_extend is SPEC_DRAFT_EXTEND_GRAPH and \
        dw.draft_extend_attn_backend is SPEC_DRAFT_EXTEND_BACKEND, "the draft-extend graph or backend was not put back"
    assert dw.cuda_graph_runner is SPEC_DRAFT_GRAPH and dw.draft_attn_backend is SPEC_DRAFT_BACKEND


def check_plain_state(catch_up: str, *, disable_cuda_graph: bool = False):
    def run():
        BUILT.clear()
        w = make_worker(2, catch_up=catch_up, disable_cuda_graph=disable_cuda_graph)
        sa = w.server_args
        steps, tokens, draft_backend, draft_graph, target_backend, target_graph = w._spec_disable_plain
        assert (steps, tokens) == (0, 1), f"the plain state runs {steps} draft steps and {tokens} tokens per request"
        assert target_backend.kind == "target backend" and target_backend.num_draft_tokens == 1, \
            "the target's attention backend was not built for one token per request"
        assert target_backend.spec_algorithm == SpeculativeAlgorithm.NONE, \
            "the target's attention backend was built for the speculative (verify) path"
        if disable_cuda_graph:
            assert target_graph is None and not BUILT, "CUDA graphs were captured with --disable-cuda-graph"
        else:
            assert len(BUILT) == 1 and target_graph is BUILT[0], "one target graph runner is built at start-up"
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
        else:
            assert len(built_draft) == 1 and built_draft[0]["num_draft_tokens"] == 1 and \
                built_draft[0]["num_steps"] == 0 and built_draft[0]["backend"] is draft_backend, \
                f"the draft-extend graph was built with {built_draft}, not one token per request on its own backend"
            assert built_draft[0]["disabled"] == disable_cuda_graph
            assert draft_backend.num_steps == 0
        # everything the build changes for the capture is put back
        assert w.target_worker.model_runner.spec_algorithm == EAGLE and not sa.enable_return_hidden_states and \
            not w.target_worker.model_runner.init_new_workspace, "the model runner was left as built for the capture"
        assert sa.cuda_graph_bs == CUDA_GRAPH_BS and sa.disable_cuda_graph == disable_cuda_graph and \
            (sa.speculative_num_steps, sa.speculative_num_draft_tokens) == (STEPS, N_DRAFT), \
            "the server arguments were left as set for the capture"
        check_restored(w)
        graphs = "no graphs (--disable-cuda-graph)" if disable_cuda_graph else \
            f"a DECODE graph with hidden states for bs {[bs for bs in CUDA_GRAPH_BS if bs > 2]}"
        draft = "no draft graph" if catch_up == "skip" else "a one-token draft-extend graph"
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


def check_extend_untouched():
    for mode, in_batch in ((ForwardMode.EXTEND, False), (ForwardMode.DECODE, True), (ForwardMode.IDLE, True)):
        w = make_worker(1)
        batch = decode_batch(0 if mode.is_idle() else 5, mode=mode, is_extend_in_batch=in_batch)
        publishes = Publishes(w.log)
        w.forward_batch_generation(batch, on_publish=publishes)
        assert len(w.draft_worker.extend_prefill_calls) == 1, f"{mode.name} (is_extend_in_batch={in_batch}) " \
            "did not take the extend branch"
        assert not w.draft_worker.draft_calls and not w.verify_calls
        assert len(w.target_worker.calls) == 1 and w.target_worker.calls[0].mode == mode, \
            "the extend branch's target forward was changed"
        assert w.target_worker.calls[0].graph_runner is w.target_worker.graph_runner, \
            "the extend branch lost the target's CUDA graphs"
        assert len(publishes.calls) == 1, "the extend branch's on_publish was changed"
    return "EXTEND, and DECODE/IDLE with is_extend_in_batch, keep the prefill path even above N"


def check_dp_attention():
    # ranks with 3 and 40 requests, N = 16: the global size 43 decides, on the small rank and on an idle one
    w = make_worker(16, dp_attention=True)
    batch = decode_batch(3, global_num_tokens=[3, 40])
    w.forward_batch_generation(batch, on_publish=Publishes(w.log))
    assert took_fallback(w), "bs 3 of a global 43 > N 16 did not take the fallback (ranks would disagree)"
    target_batch = w.target_worker.calls[0].batch
    assert target_batch.global_num_tokens == [3, 40] and \
        target_batch.global_num_tokens is not batch.global_num_tokens and \
        target_batch.global_num_tokens_for_logprob is not batch.global_num_tokens_for_logprob, \
        "the target's batch shares global_num_tokens with the scheduler's (the forward aligns it in place)"
    assert w.target_worker.calls[0].fb.global_num_tokens_cpu == [3, 40], \
        "the target's MLP sync sizes are not the ranks' batch sizes"
    w = make_worker(16, dp_attention=True, catch_up="padded")
    idle = decode_batch(0, mode=ForwardMode.IDLE, global_num_tokens=[0, 40])
    publishes = Publishes(w.log)
    result = w.forward_batch_generation(idle, on_publish=publishes)
    calls = w.target_worker.calls
    assert not w.draft_worker.draft_calls and not w.verify_calls, "an idle rank speculated while the others did not"
    assert len(calls) == 1 and calls[0].mode.is_idle() and calls[0].spec_info_is_none, "idle rank: no IDLE target"
    assert calls[0].graph_runner is w._spec_disable_plain[5]
    check_restored(w)
    assert result.next_token_ids.shape == (0,) and result.accept_lens.shape == (0,)
    assert result.new_seq_lens is not None and result.new_seq_lens.shape == (0,)
    assert len(publishes.calls) == 1 and publishes.calls[0].shape == (0,), "the idle rank did not publish (empty)"
    assert len(w.draft_worker.draft_runner.calls) == 1 and w.draft_worker.draft_runner.calls[0].mode.is_idle(), \
        "the idle rank skipped the draft catch-up forward (collectives would not match)"
    # global 3 + 10 = 13 <= 16: every rank speculates, including the big one
    w = make_worker(16, dp_attention=True)
    w.forward_batch_generation(decode_batch(10, global_num_tokens=[3, 10]), on_publish=Publishes(w.log))
    assert took_speculative_path(w), "a global 13 <= N 16 did not speculate"
    return "DP attention: the summed global batch size decides on every rank, idle ranks included"


def check_graph_runner_restored_on_error():
    w = make_worker(1)
    w.target_worker.fail_forward = True
    publishes = Publishes(w.log)
    try:
        w.forward_batch_generation(decode_batch(2), on_publish=publishes)
    except RuntimeError:
        pass
    else:
        raise AssertionError("the target's exception was swallowed")
    check_restored(w)
    assert not publishes.calls, "lengths were published for a step whose target forward failed"
    return "a failing target forward still gets every swapped field back, and nothing is published"


def check_grammar():
    w = make_worker(1)
    batch = decode_batch(2, has_grammar=True)
    w.forward_batch_generation(batch, on_publish=Publishes(w.log))
    info = w.target_worker.calls[0].fb.sampling_info
    assert info.grammars is not None and info.grammars == [r.grammar for r in batch.reqs], \
        "the requests' grammars did not reach the target's sampler"
    return "grammar objects reach the target's sampler (it builds the vocab mask)"


def main():
    if REL is None:
        print(f"PROBE-FAIL: no release adapter for the variant `{VARIANT}` (SPECPATCH_VARIANT) in _releases.py: "
              f"this probe knows {', '.join(repr(v) for v in _releases.ON_PUBLISH_BY_VARIANT)}", flush=True)
        sys.exit(1)
    print(f"release adapter {type(REL).__name__} for variant {VARIANT}", flush=True)
    report.run("patched", check_patched)
    if report.failed:
        report.finish()
    report.run("threshold 0 always speculates", lambda: _contract.threshold_zero(PROBE))
    report.run("batch <= N speculates", lambda: _contract.small_batch_speculates(PROBE))
    report.run("start-up: what is captured (skip)", check_plain_state("skip"))
    report.run("start-up: what is captured (padded)", check_plain_state("padded"))
    report.run("start-up: no CUDA graphs", check_plain_state("padded", disable_cuda_graph=True))
    for catch_up in ("skip", "padded", "single"):
        report.run(f"batch > N falls back ({catch_up})", check_fallback(catch_up))
        report.run(f"synchronous scheduler path ({catch_up})", check_fallback(catch_up, overlap=False))
        report.run(f"no CPU sequence lengths ({catch_up})", check_fallback(catch_up, needs_cpu_seq_lens=False))
    report.run("extend batches untouched", check_extend_untouched)
    report.run("DP attention decides on the global batch size", check_dp_attention)
    report.run("environment variable", lambda: _contract.env_var(PROBE, PARAMS.get("catchup_mode")))
    report.run("start-up log line", lambda: _contract.log_once(PROBE))
    report.run("graph runner restored on error", check_graph_runner_restored_on_error)
    report.run("NaN detection", lambda: _contract.nan_detection(PROBE, REL))
    report.run("grammar", check_grammar)
    report.run("worker refusals", lambda: _contract.refusals(PROBE))
    for name in REL.extra_checks:
        report.run(name, lambda check=_contract.EXTRA_CHECKS[name]: check(REL))
    report.finish()


if __name__ == "__main__":
    main()
