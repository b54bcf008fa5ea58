"""The scene of the worker probe for sglang 0.5.4 - 0.5.12 (the ModelWorkerBatch contract): its batches, fakes, the
recorders of the GPU-only constructors, its scheduler side and the checks only this family has, for the contract of
_worker_contract.py (run by worker_probe_graphs.py).

The worker is built without its __init__; the target and draft workers are _fakes' recording fakes (the draft worker is
the real EagleDraftWorker with `draft` and the model runner faked, so its real `_draft_extend_for_decode` runs). The
GPU-only constructors the patch calls (CudaGraphRunner, EAGLEDraftExtendCudaGraphRunner, DraftBackendFactory,
ModelRunner._get_attention_backend) are replaced by recorders that read what the real 0.5.9 ones read (the probe
checks first that the real ones still read it) and remember what they were built with. The fallback's result is
handed to the real scheduler code: GenerationBatchResult.copy_to_cpu, the scheduler's reading of the tokens (stride n)
and a FutureMap store/resolve round trip (_contract.py). What differs per release (batches, penalties, logprobs, the
scheduler side, what the graph constructors read) comes from the adapter (_releases.py).
"""

from __future__ import annotations

import contextlib
import inspect
from types import SimpleNamespace

import torch

from sglang.srt.managers.schedule_batch import ModelWorkerBatch
from sglang.srt.managers.scheduler_output_processor_mixin import SchedulerOutputProcessorMixin
from sglang.srt.model_executor import cuda_graph_runner as real_cuda_graph_runner
from sglang.srt.model_executor.forward_batch_info import CaptureHiddenMode, ForwardMode
from sglang.srt.speculative import eagle_draft_extend_cuda_graph_runner as real_draft_graph
from sglang.srt.speculative import eagle_worker_v2
from sglang.srt.speculative.eagle_info import EagleDraftInput
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

import _contract
import _fakes
import _releases
from _contract import assert_speculative_state  # noqa: F401 (the scene's)
from _fakes import BUILT, H_DRAFT, H_TARGET, N_DRAFT, STEPS, V, Backend, draft_answer, record_forward

REL = _releases.CURRENT
CUDA_GRAPH_BS = [1, 2, 4, 8, 16]
EAGLE = SpeculativeAlgorithm.EAGLE
STRIDE = N_DRAFT  #: where the scheduler reads request i's sampled token: i * STRIDE
#: make_worker's options for a draft extend that runs eagerly (no speculative draft-extend graph to mirror)
EAGER_DRAFT_EXTEND = dict(spec_draft_graph=False)


# ------------------------------------------------------------------------------ recorders of GPU-only constructors


class RecordingCudaGraphRunner:
    """0.5.9's CudaGraphRunner(model_runner), as far as its mode goes: TARGET_VERIFY with num_draft_tokens per
    request when the model runner's speculative algorithm is EAGLE, else DECODE with one; hidden states FULL when
    server_args.enable_return_hidden_states; batch sizes from server_args.cuda_graph_bs; captured (and replayed) on
    model_runner.attn_backend."""

    def __init__(self, model_runner, *, attn_backend=None, speculative_num_steps=None,
                 speculative_num_draft_tokens=None):
        if BUILT.fail_target_graph:
            raise RuntimeError("Capture cuda graph failed (probe)")
        args = model_runner.server_args
        algo = model_runner.spec_algorithm
        if algo.is_eagle() or algo.is_standalone() or algo.is_ngram():
            self.capture_forward_mode = ForwardMode.TARGET_VERIFY
            self.num_tokens_per_bs = args.speculative_num_draft_tokens
        else:
            self.capture_forward_mode = ForwardMode.DECODE
            self.num_tokens_per_bs = 1
        self.capture_hidden_mode = (
            CaptureHiddenMode.FULL if args.enable_return_hidden_states else CaptureHiddenMode.NULL)
        self.capture_bs = sorted(set(args.cuda_graph_bs))
        self.attn_backend = attn_backend or model_runner.attn_backend
        self.model_runner = model_runner
        self.bs = 0
        self.scope = _fakes.in_scope()
        BUILT.target_graphs.append(self)

    replays_target = True  #: the fake target says whether a batch replays it (can_run_cuda_graph)

    def __repr__(self):
        return f"<plain graph {self.capture_forward_mode.name} x{self.num_tokens_per_bs} bs {self.capture_bs}>"


class RecordingDraftExtendGraph:
    """0.5.9's EAGLEDraftExtendCudaGraphRunner(eagle_worker): speculative_num_steps + 1 tokens per request (from the
    draft runner's server_args), batch sizes from its cuda_graph_bs, captured and replayed on the worker's
    draft_extend_attn_backend. Replays run the fake draft model and are recorded."""

    def __init__(self, eagle_worker, *, draft_extend_attn_backend=None, speculative_num_steps=None, **kwargs):
        assert draft_extend_attn_backend is None and speculative_num_steps is None, \
            "the recorder models the draft-extend graph built from the worker and server_args"
        args = eagle_worker.draft_runner.server_args
        self.eagle_worker = eagle_worker
        self.num_tokens_per_bs = args.speculative_num_steps + 1
        self.capture_bs = sorted(set(args.cuda_graph_bs))
        self.attn_backend = eagle_worker.draft_extend_attn_backend
        self.replays = []
        self.scope = _fakes.in_scope()
        BUILT.draft_graphs.append(self)

    def can_run(self, forward_batch):
        return forward_batch.seq_lens.numel() <= max(self.capture_bs)

    def replay(self, forward_batch):
        bs = forward_batch.seq_lens.numel()
        assert len(forward_batch.input_ids) == bs * self.num_tokens_per_bs, \
            f"the draft-extend graph for {self.num_tokens_per_bs} tokens per request got " \
            f"{len(forward_batch.input_ids)} tokens for {bs} requests"
        assert self.eagle_worker.draft_extend_attn_backend is self.attn_backend, \
            "the draft-extend graph was replayed with another attention backend than it was captured on"
        record_forward(forward_batch, self.replays)
        record_forward(forward_batch, self.eagle_worker.draft_runner.calls, graph=self)  # the draft model's forwards
        return draft_answer(forward_batch)

    def __repr__(self):
        return f"<draft-extend graph x{self.num_tokens_per_bs} bs {self.capture_bs}>"


class RecordingBackendFactory:
    def __init__(self, server_args, draft_model_runner, topk, speculative_num_steps):
        # what a backend reads from server_args when it is made (triton: the tokens per request of its
        # draft-extend graph metadata, speculative_num_steps + 1)
        self.built_with = dict(server_args=server_args, runner=draft_model_runner, topk=topk,
                               steps=speculative_num_steps, args_steps=server_args.speculative_num_steps,
                               args_draft_tokens=server_args.speculative_num_draft_tokens)

    def create_draft_extend_backend(self):
        backend = Backend("draft-extend-one-token", **self.built_with)
        BUILT.draft_backends.append(backend)
        return backend

    def create_decode_backend(self):
        raise AssertionError("a draft multi-step decode backend was built for the one-token state")


eagle_worker_v2.CudaGraphRunner = RecordingCudaGraphRunner
eagle_worker_v2.EAGLEDraftExtendCudaGraphRunner = RecordingDraftExtendGraph
eagle_worker_v2.DraftBackendFactory = RecordingBackendFactory


# ----------------------------------------------------------------------------------------------------- the fakes


def make_worker(threshold: int = 0, *, dp_attention: bool = False, nan_detection: bool = False,
                catch_up: str | None = None, spec_draft_graph: bool = True, disable_cuda_graph: bool = False):
    """An EAGLEWorkerV2 without its __init__; the patch's own init step reads N (and the environment) and builds."""
    pool = _fakes.make_pool()
    log = []  #: the worker's events: "target", "draft", ("record", event)
    server_args = _fakes.make_server_args(threshold, dp_attention, speculative_num_draft_tokens=N_DRAFT,
                                          speculative_num_steps=STEPS)
    runner = _fakes.FakeTargetRunner(REL, pool, SimpleNamespace(
        disable_cuda_graph=disable_cuda_graph, cuda_graph_bs=list(CUDA_GRAPH_BS), enable_return_hidden_states=False,
        speculative_num_draft_tokens=N_DRAFT, speculative_num_steps=STEPS))
    runner.cuda_graph_bs = runner.server_args.cuda_graph_bs  # the list itself: the build must not replace it
    dw = _fakes.RecordingDraftWorker(REL, pool, log, spec_draft_graph=spec_draft_graph)
    dw.draft_runner.server_args = SimpleNamespace(
        attention_backend="torch_native", enable_lora=False, speculative_num_steps=STEPS,
        speculative_num_draft_tokens=N_DRAFT, cuda_graph_bs=list(CUDA_GRAPH_BS))
    dw.draft_runner.model_config = SimpleNamespace(hidden_size=H_DRAFT, dtype=torch.float32)
    w = _fakes.bare_worker(server_args, pool, enable_nan_detection=nan_detection, log=log,
                           _target_worker=_fakes.FakeTargetWorker(runner, log), _draft_worker=dw)
    _fakes.install_verify(w, pool, REL.token, pass_allocate_lens=True)  # 0.5.4 - 0.5.5 pass it on
    return _fakes.start_up(w, server_args, catch_up)


def sampling_info(bs: int):
    return _fakes.sampling_info(bs, **REL.penalties(bs))


def decode_batch(bs: int, *, mode: ForwardMode = ForwardMode.DECODE, global_num_tokens=None,
                 is_extend_in_batch: bool = False, has_grammar: bool = False, reqs=None) -> ModelWorkerBatch:
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
    fields = REL.batch_fields(bs, has_grammar)
    if REL.batch_has_reqs:
        fields["reqs"] = reqs if reqs is not None else [
            SimpleNamespace(rid=f"req-{i}", return_hidden_states=False) for i in range(bs)]
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
        lora_ids=[None] * bs, sampling_info=info, spec_algorithm=EAGLE, spec_info=spec_info,
        capture_hidden_mode=CaptureHiddenMode.FULL, **fields)


def step(w, batch):
    """The worker's forward as this release's scheduler calls it (the scene of _contract's shared checks)."""
    return w.forward_batch_generation(batch)


# ----------------------------------------------------------------------------------------------------- checks


def check_recorders_match_the_release():
    # The recorders stand for the real constructors: pin what those read, so a release that reads otherwise fails
    # here instead of passing on a wrong model of it. From 0.5.11 the graph runners take the attention backend (and
    # step counts) as keyword arguments, defaulting to the model runner's / worker's and server_args, and keep it.
    own = REL.graphs_keep_backend
    init = inspect.getsource(real_cuda_graph_runner.CudaGraphRunner.__init__)
    params = list(inspect.signature(real_cuda_graph_runner.CudaGraphRunner.__init__).parameters)
    want = ["self", "model_runner"] + (["attn_backend", "speculative_num_steps", "speculative_num_draft_tokens"]
                                       if own else [])
    assert params == want, f"CudaGraphRunner.__init__{params}: not {want}"
    for text in ("model_runner.spec_algorithm.is_speculative()" if own else "model_runner.spec_algorithm.is_eagle()",
                 "self.capture_forward_mode = ForwardMode.TARGET_VERIFY",
                 "self.capture_forward_mode = ForwardMode.DECODE", "self.num_tokens_per_bs = 1",
                 "server_args.enable_return_hidden_states",
                 "self.attn_backend = attn_backend or model_runner.attn_backend" if own
                 else "self.model_runner.attn_backend.init_cuda_graph_state",
                 "get_batch_sizes_to_capture("):
        assert text in init, f"CudaGraphRunner.__init__ no longer has `{text}`"
    assert "server_args.cuda_graph_bs" in inspect.getsource(real_cuda_graph_runner.get_batch_sizes_to_capture)
    replay = inspect.getsource(real_cuda_graph_runner.CudaGraphRunner.replay_prepare)
    used = REL.replay_backend or ("attn_backend = self.attn_backend" if own
                                  else "attn_backend = self.model_runner.attn_backend")
    assert used in replay, f"replay no longer has `{used}`"
    if not REL.draft_extend_graph:
        return "the recorder reads what this release's CudaGraphRunner reads (the spec-v2 draft extend " \
            "replays no graph: no draft-extend graph is built)"
    dinit = inspect.getsource(real_draft_graph.EAGLEDraftExtendCudaGraphRunner.__init__)
    from sglang.srt.layers.attention.triton_backend import TritonAttnBackend
    tinit = inspect.getsource(TritonAttnBackend.__init__)
    assert "self.speculative_num_steps = model_runner.server_args.speculative_num_steps" in tinit, \
        "TritonAttnBackend no longer reads the step count from server_args when it is made"
    for text in ("model_runner.server_args.speculative_num_steps",
                 "self.num_tokens_per_bs = self.speculative_num_steps + 1",
                 "draft_extend_attn_backend or eagle_worker.draft_extend_attn_backend" if own
                 else "self.eagle_worker.draft_extend_attn_backend.init_cuda_graph_state",
                 "get_batch_sizes_to_capture(model_runner)"):
        assert text in dinit, f"EAGLEDraftExtendCudaGraphRunner.__init__ no longer has `{text}`"
    return "the recorders read what this release's CudaGraphRunner and EAGLEDraftExtendCudaGraphRunner read" + \
        (" (keyword arguments, backend kept)" if own else "")


def check_plain_state_built():
    w = make_worker(3, catch_up="padded")
    mr = w.target_worker.model_runner
    assert len(w.built.target_graphs) == 1, f"{len(w.built.target_graphs)} target graph runners built, not one"
    g = w.built.target_graphs[0]
    assert g.capture_forward_mode == ForwardMode.DECODE, \
        f"the plain target graph captures {g.capture_forward_mode.name}, not DECODE (spec_algorithm not set aside)"
    assert g.num_tokens_per_bs == 1, f"the plain target graph has {g.num_tokens_per_bs} tokens per request"
    assert g.capture_hidden_mode == CaptureHiddenMode.FULL, \
        f"the plain target graph captures hidden mode {g.capture_hidden_mode.name}, not FULL"
    assert g.capture_bs == [4, 8, 16], f"the plain target graph captures batch sizes {g.capture_bs}, not those > N 3"
    assert len(mr.backend_calls) == 1, f"{len(mr.backend_calls)} target attention backends built, not one"
    bc = mr.backend_calls[0]
    assert bc.init_new_workspace, "the target's plain backend was not built with init_new_workspace=True"
    assert bc.spec_algorithm.is_none(), "the target's plain backend was built with the speculative algorithm on"
    assert g.attn_backend is bc.backend, \
        f"the plain target graph was captured on {g.attn_backend}, not on its own backend {bc.backend}"
    dg = None
    if not REL.draft_extend_graph:  # the spec-v2 draft extend runs eagerly on the draft runner's backend
        assert not w.built.draft_backends and not w.built.draft_graphs, \
            "a one-token draft-extend backend or graph was built, which this release's draft extend never uses"
        draft = "no draft-extend graph (the draft extend is eager)"
    else:
        assert len(w.built.draft_backends) == 1 and w.built.draft_backends[0].built_with["steps"] == 0, \
            "the one-token draft-extend backend was not built (with 0 steps)"
        made = w.built.draft_backends[0].built_with
        assert (made["args_steps"], made["args_draft_tokens"]) == (0, 1), \
            f"the one-token draft-extend backend was made while server_args said {made['args_steps']} steps / " \
            f"{made['args_draft_tokens']} draft tokens (it sizes its graph metadata from them), not 0 / 1"
        assert len(w.built.draft_graphs) == 1, f"{len(w.built.draft_graphs)} draft-extend graphs built, not one"
        dg = w.built.draft_graphs[0]
        assert dg.num_tokens_per_bs == 1, f"the draft-extend graph has {dg.num_tokens_per_bs} tokens per request"
        assert dg.capture_bs == [4, 8, 16], f"the draft-extend graph captures batch sizes {dg.capture_bs}"
        assert dg.attn_backend is w.built.draft_backends[0], \
            "the draft-extend graph was not captured on its own backend"
        draft = "one-token draft-extend graph"
    assert_speculative_state(w, "after start-up")
    assert mr.init_new_workspace is False, "model_runner.init_new_workspace was left changed"
    assert mr.server_args.cuda_graph_bs is mr.cuda_graph_bs and mr.cuda_graph_bs == CUDA_GRAPH_BS, \
        "server_args.cuda_graph_bs was changed"
    state = w._spec_disable_plain
    assert state is not None and g in state and (dg is None or dg in state) and bc.backend in state, \
        "the built graphs and backends are not the worker's one-token state"
    return f"DECODE x1 FULL target graph for bs [4, 8, 16] on its own backend, {draft}; " \
        "spec_algorithm, server_args, backends and graphs restored"


def check_plain_state_variants():
    w = make_worker(3, catch_up="skip")
    assert len(w.built.target_graphs) == 1, "skip: the target's plain graph was not built"
    assert not w.built.draft_graphs and not w.built.draft_backends, "skip: a draft-extend graph or backend was built"
    assert_speculative_state(w, "skip, after start-up")
    w = make_worker(3, catch_up="single", spec_draft_graph=False)
    assert len(w.built.target_graphs) == 1
    assert not w.built.draft_graphs, "a one-token draft-extend graph was built where the speculative path has none"
    w = make_worker(3, catch_up="padded", disable_cuda_graph=True)
    assert not w.built.target_graphs and not w.built.draft_graphs, "graphs captured with --disable-cuda-graph"
    assert len(w.target_worker.model_runner.backend_calls) == 1, "no plain backend without CUDA graphs"
    w = make_worker(16, catch_up="padded")
    assert not w.built.target_graphs and not w.built.draft_graphs, \
        "graphs captured although no CUDA-graph batch size is above N 16"
    assert_speculative_state(w, "N above every graph batch size, after start-up")
    w = make_worker(0, catch_up="padded")
    assert not w.built.target_graphs and not w.built.draft_graphs and w._spec_disable_plain is None
    assert not w.target_worker.model_runner.backend_calls, "N = 0 built a backend"
    return "skip: no draft graph; no draft graph without a speculative one; no graphs with --disable-cuda-graph, " \
        "none above the largest graph batch size, nothing at N = 0"


def check_build_restores_on_error():
    BUILT.fail_target_graph = True
    try:
        make_worker(3, catch_up="padded")
    except RuntimeError as exc:
        assert "probe" in str(exc), str(exc)
    else:
        raise AssertionError("a failing capture was swallowed")
    finally:
        BUILT.fail_target_graph = False
    # make_worker returned no worker: rebuild the scene and fail inside the build
    w = make_worker(0)
    w.spec_disable_catch_up = "padded"
    BUILT.fail_target_graph = True
    try:
        w._spec_disable_build_plain_state(3)
    except RuntimeError:
        pass
    else:
        raise AssertionError("a failing capture was swallowed")
    finally:
        BUILT.fail_target_graph = False
    assert_speculative_state(w, "after a failing capture")
    assert w.target_worker.model_runner.init_new_workspace is False
    return "a capture that raises leaves spec_algorithm, server_args, backends and graphs as they were"


def check_speculative_step(w):
    """After a speculative step (the scene of _contract's shared checks): its draft extend on the speculative state."""
    de = w.draft_worker.extend_decode_calls[0]
    assert de.draft_tokens == N_DRAFT and de.graph is w.draft_worker.spec_extend_graph, \
        "the speculative path's draft extend ran on the one-token state"


@contextlib.contextmanager
def recording_events(log: list):
    """torch.cpu.Event (what torch.get_device_module("cpu").Event gives) appending ("record", event) to `log` when
    an event is recorded, in one timeline with the target's forwards ("target")."""
    real = torch.cpu.Event

    class Event(real):
        def record(self, *args, **kwargs):
            log.append(("record", self))
            return super().record(*args, **kwargs)

    torch.cpu.Event = Event
    try:
        yield
    finally:
        torch.cpu.Event = real


# ------------------------------------------------------------ the scene's parts of _worker_contract.check_fallback

FALLBACK_CASES = [("padded catch-up", "padded", {}), ("single catch-up", "single", {}), ("skip catch-up", "skip", {}),
                  ("padded, no draft-extend graph", "padded", dict(spec_draft_graph=False))]


def case(spec_draft_graph: bool = True) -> str:
    return "" if spec_draft_graph else ", no draft-extend graph"


def fallback_scene(catch_up: str, bs: int, spec_draft_graph: bool = True):
    return make_worker(2, catch_up=catch_up, spec_draft_graph=spec_draft_graph), decode_batch(bs)


def run_fallback(w, batch, **options):
    with recording_events(w.log):
        return w.forward_batch_generation(batch)


def check_entry(entry, **options):
    assert entry.args == (), "the fallback got more than the batch"


def check_target_state(call, result):
    assert result.can_run_cuda_graph, "the result does not say the plain graph ran"


def check_target_sampling(call, batch, entry):
    REL.check_penalties(call, batch)


def check_target_batch(call, batch, exp):
    pass


def check_result(w, result):
    nd = result.next_draft_input
    assert nd.verify_done is not None and hasattr(nd.verify_done, "synchronize"), "no verify_done event"
    # the scheduler waits on verify_done before it prepares the next batch: recorded before the target's forward,
    # the next batch is prepared on the CPU while the target runs (after it, the overlap is lost)
    assert ("record", nd.verify_done) in w.log and w.log.index(("record", nd.verify_done)) < w.log.index("target"), \
        f"verify_done is recorded after the target's forward ({w.log}): the scheduler waits for the whole step " \
        "before it prepares the next batch"


def check_published(w, entry, exp, catch_up, **options):
    pass  # no on_publish in this family: the lengths travel on the draft input (checked)


def check_catch_up_graph(de, rc, bs):
    if de.graph is not None:
        assert rc.graph is de.graph, "the draft model ran eagerly beside the one-token graph"
        assert de.backend is de.graph.attn_backend, "the draft extend ran on another backend than its graph's"
        assert len(de.graph.replays) == 1, "the one-token draft-extend graph was not replayed"
        return "one-token draft extend replayed from its graph"
    assert rc.graph is None
    return "eager one-token draft extend (no draft-extend graph)"


def check_scheduler_accepts(w, batch, result, exp, seq_lens_values, catch_up, **options):
    _contract.scheduler_accepts(REL, w, result, exp)
    return "result at stride n accepted by the scheduler"


# --------------------------------------------------------- the scene's parts of _worker_contract's other checks


def check_dp_target(w, batch):
    pass


def check_dp_idle_catch_up(w):
    pass


def target_sampling_info(call):
    return call.sampling_info


def check_grammars_reached(info, batch):
    assert info.grammars is batch.sampling_info.grammars, "the grammars did not reach the target's sampler"


# ------------------------------------------------------------------------------- the checks only this family has


def check_hidden_states_kept_when_asked():
    w = make_worker(1, catch_up="skip")
    reqs = [SimpleNamespace(return_hidden_states=i == 1) for i in range(3)]
    result = w.forward_batch_generation(decode_batch(3, reqs=reqs))
    hidden = result.logits_output.hidden_states
    assert hidden is not None and tuple(hidden.shape) == (3, H_TARGET), \
        "a request asked for hidden states and they were dropped"
    assert hidden[:, 1].tolist() == [1000.0, 1001.0, 1002.0], "hidden state row i is not request i's"
    return "hidden states kept (row i = request i) when a request asks for them"


def check_operator_counting():
    # The steps without speculation, for the operator: counted from the results by the real (patched)
    # process_batch_result_decode, shown (and reset) by the real decode log line (log_decode_stats; from 0.5.10
    # report_decode_stats), totalled by get_internal_state.
    import importlib

    from sglang.srt.disaggregation.utils import DisaggregationMode
    from sglang.srt.managers import scheduler as scheduler_module

    module_name, method = REL.metrics
    scheduler_metrics_mixin = importlib.import_module(module_name)
    log_decode = getattr(scheduler_metrics_mixin.SchedulerMetricsMixin, method)

    class Stop(Exception):
        pass

    def stop():  # the first call after the counting: the rest of the processing needs a real scheduler
        raise Stop()

    w = make_worker(2, catch_up="skip")
    fallback = w.forward_batch_generation(decode_batch(3))
    speculative = w.forward_batch_generation(decode_batch(1))
    assert getattr(fallback, "speculation_disabled", False) and not getattr(speculative, "speculation_disabled", False)
    fake = SimpleNamespace(
        num_generated_tokens=0, update_spec_metrics=lambda bs, accepted: None, enable_metrics=False,
        token_to_kv_pool_allocator=SimpleNamespace(free_group_begin=stop), **REL.counting_scheduler)
    batch = SimpleNamespace(reqs=[], spec_algorithm=EAGLE, batch_size=lambda: 0, return_logprob=False,
                            **REL.counting_batch)
    for result in (fallback, fallback, speculative):
        try:
            SchedulerOutputProcessorMixin.process_batch_result_decode(fake, batch, result)
        except Stop:
            pass
    assert getattr(fake, "spec_disable_num_steps", 0) == 2 and getattr(fake, "spec_disable_total_steps", 0) == 2, \
        f"process_batch_result_decode counted {getattr(fake, 'spec_disable_num_steps', 0)} steps without " \
        "speculation for 2 fallback results and 1 speculative one"

    fake.__dict__.update(
        last_decode_stats_tic=0.0, is_hybrid_swa=False, is_hybrid_ssm=False, _get_token_info=lambda: (0, 0.0, 0, 0),
        forward_ct=0, spec_algorithm=EAGLE, spec_num_accepted_tokens=0, spec_num_forward_ct=3,
        spec_total_num_accepted_tokens=0, spec_total_num_forward_ct=0, disaggregation_mode=DisaggregationMode.NULL,
        server_args=SimpleNamespace(speculative_num_steps=STEPS, speculative_num_draft_tokens=N_DRAFT,
                                    language_only=False, decode_log_interval=40),
        device="cpu", waiting_queue=[], running_batch=SimpleNamespace(reqs=[], forward_iter=None),
        _publish_kv_events=lambda: None, **REL.counting_log)
    with _contract.records_of(scheduler_metrics_mixin.logger) as records:
        log_decode(fake, can_run_cuda_graph=True)
        fake.spec_num_forward_ct = fake.spec_num_total_forward_ct = 1  # the next interval's verifies (the line
        # divides by them; 0.5.4 names them spec_num_total_forward_ct)
        log_decode(fake, can_run_cuda_graph=True)
    lines = [r.getMessage() for r in records if r.getMessage().startswith("Decode batch")]
    assert len(lines) == 2, lines
    assert "steps without speculation: 2" in lines[0], f"the decode log line does not say 2: {lines[0]}"
    assert "steps without speculation" not in lines[1], f"the count was not reset after the line: {lines[1]}"

    kvcache = SimpleNamespace(mem_usage=0.0)
    fake.__dict__.update(
        last_gen_throughput=0.0, max_total_num_tokens=1, max_running_requests=8,
        tp_worker=SimpleNamespace(model_runner=SimpleNamespace(weight_load_mem_usage=0.0, graph_mem_usage=0.0)),
        token_to_kv_pool_allocator=SimpleNamespace(get_kvcache=lambda: kvcache))
    real_global_args = scheduler_module.get_global_server_args
    scheduler_module.get_global_server_args = lambda: SimpleNamespace()
    try:
        state = scheduler_module.Scheduler.get_internal_state(fake, None).internal_state
    finally:
        scheduler_module.get_global_server_args = real_global_args
    assert state.get("spec_disable_num_steps") == 2, \
        f"get_internal_state reports spec_disable_num_steps {state.get('spec_disable_num_steps')!r}, not 2"
    return "2 fallback results counted, 'steps without speculation: 2' in the decode log line (then reset), " \
        "spec_disable_num_steps 2 in get_internal_state"


START_UP_CHECKS = [
    ("recorders match the release", check_recorders_match_the_release),
    ("one-token state built at start-up", check_plain_state_built),
    ("one-token state: catch-up and graph options", check_plain_state_variants),
    ("one-token state: a failing capture restores", check_build_restores_on_error)]
STEP_CHECKS = [("hidden states kept when asked", check_hidden_states_kept_when_asked)]
LAST_CHECKS = [("operator counting", check_operator_counting)]
