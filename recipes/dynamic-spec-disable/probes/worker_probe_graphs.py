"""Behaviour probe of the dynamic speculation disable with one-token graphs (sglang 0.5.4 - 0.5.12), on CPU.

The 0.5.13 design on 0.5.9's API: at start-up the worker builds a target attention backend and a target DECODE
CUDA graph runner (one token per request, hidden states FULL) and, for the padded/single catch-up, a one-token
draft-extend backend and graph, for the batch sizes above N; a step without speculation swaps them in, runs the
target's DECODE and the speculative path's own draft extend at one token per request (or zero stubs: "skip"), and
swaps the speculative state back, also when a forward raises.

The worker is built without its __init__; the target and draft workers are fakes that record their calls (the draft
worker is the real EagleDraftWorker with `draft` and the model runner faked, so its real `_draft_extend_for_decode`
runs). The GPU-only constructors the patch calls (CudaGraphRunner, EAGLEDraftExtendCudaGraphRunner,
DraftBackendFactory, ModelRunner._get_attention_backend) are replaced by recorders that read what the real 0.5.9
ones read (the probe checks first that the real ones still read it) and remember what they were built with. Values
are traceable: the target "samples" (input_id * 7 + seq_len) % V, the draft model answers (input_id + position) % V,
hidden states carry their position and request. The fallback's result is handed to the real scheduler code:
GenerationBatchResult.copy_to_cpu, the scheduler's reading of the tokens (stride n) and a FutureMap store/resolve
round trip (_contract.py). What differs per release (batches, penalties, logprobs, the scheduler side, what the graph
constructors read) comes from the adapter of the variant the engine applied (_releases.py, by SPECPATCH_VARIANT).
"""

from __future__ import annotations

import contextlib
import inspect
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
from sglang.srt.managers.schedule_batch import ModelWorkerBatch  # noqa: E402
from sglang.srt.managers.scheduler_output_processor_mixin import SchedulerOutputProcessorMixin  # noqa: E402
from sglang.srt.managers.utils import GenerationBatchResult  # noqa: E402
from sglang.srt.model_executor import cuda_graph_runner as real_cuda_graph_runner  # noqa: E402
from sglang.srt.model_executor.forward_batch_info import CaptureHiddenMode, ForwardMode  # noqa: E402
from sglang.srt.speculative import eagle_draft_extend_cuda_graph_runner as real_draft_graph  # noqa: E402
from sglang.srt.speculative import eagle_worker_v2  # noqa: E402
from sglang.srt.speculative.eagle_info import EagleDraftInput  # noqa: E402
from sglang.srt.speculative.eagle_worker_v2 import EAGLEWorkerV2  # noqa: E402
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm  # noqa: E402

import _contract  # noqa: E402
import _fakes  # noqa: E402
import _releases  # noqa: E402
from _fakes import H_DRAFT, H_TARGET, N_DRAFT, STEPS, V, draft_answer, record_forward, slot  # noqa: E402
from _fakes import draft_token, target_token  # noqa: E402
from _contract import took_fallback, took_speculative_path  # noqa: E402

VARIANT = os.environ.get("SPECPATCH_VARIANT", "")
REL = _releases.GRAPHS_BY_VARIANT[VARIANT]() if VARIANT in _releases.GRAPHS_BY_VARIANT else None
PROBE = sys.modules[__name__]  #: this module: the scene of _contract's shared checks

CUDA_GRAPH_BS = [1, 2, 4, 8, 16]
EAGLE = SpeculativeAlgorithm.EAGLE

_fakes.on_cpu()


# ------------------------------------------------------------------------------ recorders of GPU-only constructors


class Backend:
    """An attention backend: only its name matters (which one the model runner holds when)."""

    def __init__(self, name, **built_with):
        self.name = name
        self.built_with = built_with

    def init_forward_metadata(self, forward_batch):
        pass

    def __repr__(self):
        return f"<backend {self.name}>"


class Sentinel:
    """Stands for a speculative-path object (graph runner) that a step without speculation must never use."""

    bs = 0

    def __init__(self, name):
        self.name = name

    def can_run(self, forward_batch):
        raise AssertionError(f"the speculative path's {self.name} was consulted by the fallback")

    def replay(self, *args, **kwargs):
        raise AssertionError(f"the speculative path's {self.name} was replayed by the fallback")

    def __repr__(self):
        return f"<{self.name}>"


class SpeculativeDraftExtendGraph:
    """Stands for the speculative path's draft-extend graph (n tokens per request): the speculative path consults
    it (and, here, runs eagerly); a step without speculation must not."""

    def __init__(self):
        self.consulted = []

    def can_run(self, forward_batch):
        self.consulted.append(len(forward_batch.input_ids))
        return False

    def replay(self, *args, **kwargs):
        raise AssertionError("the speculative draft-extend graph was replayed although can_run said no")

    def __repr__(self):
        return "<speculative draft-extend graph>"


BUILT = SimpleNamespace(target_graphs=[], draft_graphs=[], draft_backends=[], fail_target_graph=False)


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
        BUILT.target_graphs.append(self)

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


class FakeTargetRunner:
    """The target ModelRunner's fields the patch reads and switches; _get_attention_backend records its context."""

    def __init__(self):
        self.device = "cpu"
        self.spec_algorithm = EAGLE
        self.init_new_workspace = False
        self.verify_backend = Backend("target-speculative")
        self.attn_backend = self.verify_backend
        self.verify_graph = Sentinel("TARGET_VERIFY graph runner")
        self.graph_runner = self.verify_graph
        self.cuda_graph_bs = list(CUDA_GRAPH_BS)
        self.server_args = SimpleNamespace(
            disable_cuda_graph=False, cuda_graph_bs=self.cuda_graph_bs, enable_return_hidden_states=False,
            speculative_num_draft_tokens=N_DRAFT, speculative_num_steps=STEPS)
        self.backend_calls = []

    def _get_attention_backend(self, init_new_workspace: bool | None = None):
        if REL.backend_workspace_arg:
            self.init_new_workspace = bool(init_new_workspace)  # as _get_attention_backend_from_str leaves it
        else:  # 0.5.4: no argument, the registry reads the runner's init_new_workspace
            assert init_new_workspace is None, "this release's _get_attention_backend takes no argument"
            init_new_workspace = self.init_new_workspace
        backend = Backend("target-plain")
        self.backend_calls.append(SimpleNamespace(
            init_new_workspace=init_new_workspace, spec_algorithm=self.spec_algorithm,
            return_hidden=self.server_args.enable_return_hidden_states, backend=backend))
        return backend


class FakeTargetWorker:
    def __init__(self):
        self.model_runner = FakeTargetRunner()
        self.model_config = SimpleNamespace(hidden_size=H_TARGET, dtype=torch.float32, vocab_size=V)
        self.calls = []
        self.nan_logits = False
        self.fail_forward = False
        self.timeline = None  # check_fallback's record of events and forwards

    def forward_batch_generation(self, model_worker_batch=None, forward_batch=None, is_verify=False,
                                 skip_attn_backend_init=False, **kwargs):
        b = model_worker_batch
        assert b is not None, "the fallback must call the target with a ModelWorkerBatch"
        mr = self.model_runner
        self.calls.append(SimpleNamespace(
            batch=b, mode=b.forward_mode, input_ids=b.input_ids.clone(), seq_lens=b.seq_lens.clone(),
            seq_lens_cpu=None if b.seq_lens_cpu is None else b.seq_lens_cpu.clone(), seq_lens_sum=b.seq_lens_sum,
            out_cache_loc=None if b.out_cache_loc is None else b.out_cache_loc.clone(),
            spec_info_is_none=b.spec_info is None, capture=b.capture_hidden_mode, return_logprob=b.return_logprob,
            sampling_info=b.sampling_info, graph_runner=mr.graph_runner, attn_backend=mr.attn_backend,
            spec_algorithm=mr.spec_algorithm, is_verify=is_verify))
        if self.timeline is not None:
            self.timeline.append(("target", None))
        if self.fail_forward:
            raise RuntimeError("target forward failed (probe)")
        graph = mr.graph_runner
        replayed = isinstance(graph, RecordingCudaGraphRunner) and b.forward_mode.is_decode() \
            and len(b.seq_lens) <= max(graph.capture_bs)
        return GenerationBatchResult(**_fakes.target_output(b, b.forward_mode.is_decode(), self.nan_logits),
                                     can_run_cuda_graph=replayed)


class FakeDraftRunner(_fakes.FakeDraftRunner):
    """The draft model runner (eager) of _fakes, with the server arguments the graph constructors read; a forward
    raises (after it is recorded) when `fail_forward` is set."""

    def __init__(self, req_to_token_pool):
        super().__init__(REL, req_to_token_pool)
        self.attn_backend = Backend("draft-runner")
        self.server_args = SimpleNamespace(attention_backend="torch_native", enable_lora=False,
                                           speculative_num_steps=STEPS, speculative_num_draft_tokens=N_DRAFT,
                                           cuda_graph_bs=list(CUDA_GRAPH_BS))
        self.model_config = SimpleNamespace(hidden_size=H_DRAFT, dtype=torch.float32)
        self.fail_forward = False

    def _answer(self, fb):  # also what model.forward answers (0.5.4 - 0.5.5: the spec-v2 draft extend calls it)
        answer = super()._answer(fb)
        if self.fail_forward:
            raise RuntimeError("draft forward failed (probe)")
        return answer


class RecordingDraftWorker(_fakes.RecordingDraftWorker):
    """_fakes' recording draft worker on this probe's draft runner, with the speculative path's graphs and backends
    (sentinels: a step without speculation must not use them)."""

    def __init__(self, req_to_token_pool, *, spec_draft_graph: bool):  # not the real __init__: no model to load
        super().__init__(REL, req_to_token_pool)
        self.draft_runner = FakeDraftRunner(req_to_token_pool)
        self.cuda_graph_runner = Sentinel("draft multi-step graph runner")
        self.spec_extend_backend = Backend("draft-extend-speculative")
        self.draft_extend_attn_backend = self.spec_extend_backend
        self.spec_extend_graph = SpeculativeDraftExtendGraph() if spec_draft_graph else None
        self.cuda_graph_runner_for_draft_extend = self.spec_extend_graph


def make_worker(threshold: int = 0, *, dp_attention: bool = False, nan_detection: bool = False,
                catch_up: str | None = None, spec_draft_graph: bool = True, disable_cuda_graph: bool = False):
    """An EAGLEWorkerV2 without its __init__; the patch's own init step reads N (and the environment) and builds."""
    pool = _fakes.make_pool()
    server_args = _fakes.make_server_args(threshold, dp_attention, speculative_num_draft_tokens=N_DRAFT,
                                          speculative_num_steps=STEPS)
    w = _fakes.bare_worker(server_args, pool, enable_nan_detection=nan_detection, _target_worker=FakeTargetWorker(),
                           _draft_worker=RecordingDraftWorker(pool, spec_draft_graph=spec_draft_graph))
    w._target_worker.model_runner.server_args.disable_cuda_graph = disable_cuda_graph
    _fakes.install_verify(w, pool, REL.token, pass_allocate_lens=True)  # 0.5.4 - 0.5.5 pass it on
    # the speculative path's draft extend must not reach the speculative draft-extend graph in these fakes
    w._draft_worker.cuda_graph_runner_for_draft_extend = w._draft_worker.spec_extend_graph
    BUILT.target_graphs.clear()
    BUILT.draft_graphs.clear()
    BUILT.draft_backends.clear()
    with catch_up_env(catch_up):
        w._init_speculative_disable(server_args)
    w.built = SimpleNamespace(target_graphs=list(BUILT.target_graphs), draft_graphs=list(BUILT.draft_graphs),
                              draft_backends=list(BUILT.draft_backends))
    return w


@contextlib.contextmanager
def catch_up_env(value: str | None):
    """SGLANG_SPEC_DISABLE_CATCH_UP set to `value` (None: left as it is), put back also when the body raises
    (Envs' own override does not restore on an exception, and several checks expect one)."""
    name = envs.SGLANG_SPEC_DISABLE_CATCH_UP.name
    before = os.environ.get(name)
    if value is not None:
        os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


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


def expected(batch: ModelWorkerBatch):
    """Per request: the sampled token, its KV slot (position s), and the draft's answer at position s."""
    out = []
    for i in range(len(batch.seq_lens)):
        s, row, v = int(batch.seq_lens[i]), int(batch.req_pool_indices[i]), int(getattr(batch.spec_info, REL.token)[i])
        t = target_token(v, s + 1)
        out.append(SimpleNamespace(s=s, row=row, v=v, t=t, slot=slot(row, s), draft=draft_token(t, s)))
    return out


def step(w, batch):
    """The worker's forward as this release's scheduler calls it (the scene of _contract's shared checks)."""
    return w.forward_batch_generation(batch)


def speculative_state(w):
    """The fields a step without speculation switches, as they must be outside it."""
    dw, mr = w.draft_worker, w.target_worker.model_runner
    return dict(
        steps=(dw.speculative_num_steps, STEPS), draft_tokens=(dw.speculative_num_draft_tokens, N_DRAFT),
        worker_draft_tokens=(w.speculative_num_draft_tokens, N_DRAFT),
        draft_extend_backend=(dw.draft_extend_attn_backend, dw.spec_extend_backend),
        draft_extend_graph=(dw.cuda_graph_runner_for_draft_extend, dw.spec_extend_graph),
        draft_graph=(dw.cuda_graph_runner, dw.cuda_graph_runner),
        target_backend=(mr.attn_backend, mr.verify_backend), target_graph=(mr.graph_runner, mr.verify_graph),
        spec_algorithm=(mr.spec_algorithm, EAGLE),
        return_hidden=(mr.server_args.enable_return_hidden_states, False),
        target_cuda_graph_bs=(mr.server_args.cuda_graph_bs, CUDA_GRAPH_BS),
        draft_server_steps=(dw.draft_runner.server_args.speculative_num_steps, STEPS),
        draft_server_tokens=(dw.draft_runner.server_args.speculative_num_draft_tokens, N_DRAFT),
        draft_cuda_graph_bs=(dw.draft_runner.server_args.cuda_graph_bs, CUDA_GRAPH_BS),
    )


def assert_speculative_state(w, when: str):
    wrong = {k: v[0] for k, v in speculative_state(w).items()
             if not (v[0] == v[1] if isinstance(v[1], (list, int)) else v[0] is v[1])}
    assert not wrong, f"{when}: not restored: {wrong}"


# ----------------------------------------------------------------------------------------------------- checks


def check_patched():
    for name in ("_init_speculative_disable", "_speculation_disabled_for", "_forward_without_speculation",
                 "_spec_disable_build_plain_state", "_spec_disable_swap"):
        assert hasattr(EAGLEWorkerV2, name), f"EAGLEWorkerV2.{name} is missing: the target is not patched " \
            "with the one-token-graph fallback"
    return f"patched EAGLEWorkerV2 from {eagle_worker_v2.__file__}"


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


def check_scheduler_accepts(w, result, exp):
    _contract.scheduler_accepts(REL, w, result, exp)


@contextlib.contextmanager
def recording_events():
    """torch.cpu.Event (what torch.get_device_module("cpu").Event gives) recording when each event is recorded,
    in one timeline with the target's forwards (FakeTargetWorker appends ("target", None))."""
    timeline = []
    real = torch.cpu.Event

    class Event(real):
        def record(self, *args, **kwargs):
            timeline.append(("record", self))
            return super().record(*args, **kwargs)

    torch.cpu.Event = Event
    try:
        yield timeline
    finally:
        torch.cpu.Event = real


def check_fallback(catch_up: str, *, spec_draft_graph: bool = True):
    def run():
        # bs 5 and n 4: i * n is not i modulo bs, so a token at the wrong stride cannot land right by chance
        bs, n = 5, N_DRAFT
        w = make_worker(2, catch_up=catch_up, spec_draft_graph=spec_draft_graph)
        assert w.spec_disable_catch_up == catch_up
        plain_graph = w.built.target_graphs[0]
        plain_backend = w.target_worker.model_runner.backend_calls[0].backend
        one_token_graph = w.built.draft_graphs[0] if w.built.draft_graphs else None
        batch = decode_batch(bs)
        exp = expected(batch)
        seq_lens_before, seq_lens_cpu_before = batch.seq_lens, batch.seq_lens_cpu
        seq_lens_values = batch.seq_lens.clone()
        seq_lens_cpu_values = batch.seq_lens_cpu.clone()
        with recording_events() as timeline:
            w.target_worker.timeline = timeline
            result = w.forward_batch_generation(batch)

        call = _contract.target_forward(w)  # routing: no draft, no verify, one target forward
        assert call.graph_runner is plain_graph, \
            f"the target forward ran with graph runner {call.graph_runner}, not the plain DECODE graph"
        assert call.attn_backend is plain_backend, \
            f"the target forward ran with attention backend {call.attn_backend}, not the plain one"
        assert result.can_run_cuda_graph, "the result does not say the plain graph ran"
        assert_speculative_state(w, "after a step without speculation")
        assert call.capture == CaptureHiddenMode.FULL, f"target capture mode {call.capture}"
        REL.check_penalties(call, batch)
        _contract.target_input(call, exp)
        _contract.target_cpu_lens(call, exp, seq_lens_values)
        _contract.target_slots(call, exp)
        assert torch.equal(seq_lens_before, seq_lens_values), "seq_lens (shared with the scheduler) changed in place"
        assert torch.equal(seq_lens_cpu_before, seq_lens_cpu_values), "seq_lens_cpu changed in place"

        # the result contract of 0.5.9: the n-stride layout
        assert result.next_token_ids.shape == (bs * n,), \
            f"next_token_ids shape {tuple(result.next_token_ids.shape)}, not bs * num_draft_tokens"
        assert result.next_token_ids.dtype == torch.int32
        assert [int(result.next_token_ids[i * n]) for i in range(bs)] == [e.t for e in exp], \
            "the sampled tokens are not at i * num_draft_tokens"
        assert result.accept_lens.tolist() == [1] * bs and result.accept_lens.dtype == torch.int32, \
            f"accept_lens {result.accept_lens.tolist()} are not all 1 (int32)"
        assert result.delay_sample_func is None, "delay_sample_func would postpone store_to_map"
        assert getattr(result, "speculation_disabled", False), "the result is not marked as a step without speculation"
        if REL.batch_has_reqs:
            assert result.logits_output.hidden_states is None, "the target's hidden states go to copy_to_cpu unasked"
        else:  # the worker cannot tell who asked: handed over, as verify does
            assert result.logits_output.hidden_states is not None, "the target's hidden states were dropped"
        REL.check_logprobs(call, batch, result)
        REL.check_result_extra(result, exp)
        nd = result.next_draft_input
        assert isinstance(nd, EagleDraftInput), "next_draft_input is not an EagleDraftInput"
        sampled = getattr(nd, REL.token)
        assert sampled.tolist() == [e.t for e in exp] and sampled.dtype == torch.int32, \
            f"next_draft_input.{REL.token} is not the sampled tokens (int32)"
        assert nd.new_seq_lens.tolist() == [e.s + 1 for e in exp], "new_seq_lens are not s + 1"
        assert nd.new_seq_lens.data_ptr() != batch.seq_lens.data_ptr(), "new_seq_lens is not a new tensor"
        assert nd.verify_done is not None and hasattr(nd.verify_done, "synchronize"), "no verify_done event"
        # the scheduler waits on verify_done before it prepares the next batch: recorded before the target's
        # forward, the next batch is prepared on the CPU while the target runs (after it, the overlap is lost)
        assert ("record", nd.verify_done) in timeline and \
            timeline.index(("record", nd.verify_done)) < timeline.index(("target", None)), \
            f"verify_done is recorded after the target's forward ({timeline}): the scheduler waits for the " \
            "whole step before it prepares the next batch"
        _contract.draft_input_shapes(nd, bs)

        dw = w.draft_worker
        if catch_up == "skip":
            assert not dw.extend_decode_calls, "skip: the draft extend ran"
            assert not dw.draft_runner.calls, "skip: the draft model ran"
            assert torch.count_nonzero(nd.topk_p) == 0 and torch.count_nonzero(nd.hidden_states) == 0, \
                "skip: the draft input is not the zero stubs"
            detail = "no draft catch-up, zero stubs"
        else:
            assert len(dw.extend_decode_calls) == 1, "_draft_extend_for_decode did not run (once)"
            de = dw.extend_decode_calls[0]
            assert (de.steps, de.draft_tokens) == (0, 1), \
                f"the draft extend ran with {de.steps} steps / {de.draft_tokens} tokens, not the one-token state"
            assert de.next_token_ids.tolist() == [e.t for e in exp], \
                f"the draft extend got tokens {de.next_token_ids.tolist()}, not one per request"
            _contract.catch_up_extend(de, exp, seq_lens_values)
            if dw.spec_extend_graph is not None:
                assert not dw.spec_extend_graph.consulted, "the speculative draft-extend graph (n tokens) was " \
                    "consulted by the fallback"
            if one_token_graph is not None:
                assert de.graph is one_token_graph and de.backend is one_token_graph.attn_backend, \
                    f"the draft extend ran with {de.graph} / {de.backend}, not the one-token graph and its backend"
                assert not dw.draft_runner.calls, "the draft model ran eagerly beside the one-token graph"
                assert len(one_token_graph.replays) == 1, "the one-token draft-extend graph was not replayed"
                rc = one_token_graph.replays[0]
                detail = "one-token draft extend replayed from its graph"
            else:
                assert de.graph is None, f"the draft extend ran with {de.graph} where no one-token graph exists"
                assert len(dw.draft_runner.calls) == 1, "the eager one-token draft extend did not run"
                rc = dw.draft_runner.calls[0]
                detail = "eager one-token draft extend (no draft-extend graph)"
            assert rc.out_cache_loc.tolist() == [e.slot for e in exp]
            _contract.catch_up_rows(rc, nd, exp)
        check_scheduler_accepts(w, result, exp)
        return f"bs {bs} > N 2 ({catch_up}): the plain DECODE graph and backend installed, {detail}, state " \
            "restored, result at stride n accepted by the scheduler"
    return run


def check_hidden_states_kept_when_asked():
    w = make_worker(1, catch_up="skip")
    reqs = [SimpleNamespace(return_hidden_states=i == 1) for i in range(3)]
    result = w.forward_batch_generation(decode_batch(3, reqs=reqs))
    hidden = result.logits_output.hidden_states
    assert hidden is not None and tuple(hidden.shape) == (3, H_TARGET), \
        "a request asked for hidden states and they were dropped"
    assert hidden[:, 1].tolist() == [1000.0, 1001.0, 1002.0], "hidden state row i is not request i's"
    return "hidden states kept (row i = request i) when a request asks for them"


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
        call = w.target_worker.calls[0]
        assert call.graph_runner is w.target_worker.model_runner.verify_graph and \
            call.attn_backend is w.target_worker.model_runner.verify_backend, \
            "the extend branch ran on the one-token state"
    return " and ".join(f"{m.name} (is_extend_in_batch={b})" for m, b in REL.prefill_modes) + \
        " keep the prefill path even above N"


def check_dp_attention():
    # ranks with 3 and 40 requests, N = 16: the global size 43 decides, on the small rank and on an idle one
    w = make_worker(16, dp_attention=True, catch_up="padded")
    w.forward_batch_generation(decode_batch(3, global_num_tokens=[3, 40]))
    assert took_fallback(w), "bs 3 of a global 43 > N 16 did not take the fallback (ranks would disagree)"
    w = make_worker(16, dp_attention=True, catch_up="padded")
    idle = decode_batch(0, mode=ForwardMode.IDLE, global_num_tokens=[0, 40])
    result = w.forward_batch_generation(idle)
    calls = w.target_worker.calls
    assert not w.draft_worker.draft_calls and not w.verify_calls, "an idle rank speculated while the others did not"
    assert len(calls) == 1 and calls[0].mode.is_idle() and calls[0].spec_info_is_none, "idle rank: no IDLE target"
    assert calls[0].attn_backend is w.target_worker.model_runner.backend_calls[0].backend, \
        "idle rank: the target did not run on the one-token state"
    assert_speculative_state(w, "after an idle rank's step")
    assert result.next_token_ids.shape == (0,) and result.accept_lens.shape == (0,)
    assert result.next_draft_input.new_seq_lens.shape == (0,)
    assert len(w.draft_worker.extend_decode_calls) == 1, \
        "the idle rank skipped the draft catch-up (collectives would not match)"
    w = make_worker(16, dp_attention=True)
    w.forward_batch_generation(decode_batch(10, global_num_tokens=[3, 10]))
    assert took_speculative_path(w), "a global 13 <= N 16 did not speculate"
    return "DP attention: the summed global batch size decides on every rank, idle ranks included"


def check_restored_on_error():
    w = make_worker(1, catch_up="padded")
    w.target_worker.fail_forward = True
    try:
        w.forward_batch_generation(decode_batch(2))
    except RuntimeError:
        pass
    else:
        raise AssertionError("the target's exception was swallowed")
    assert_speculative_state(w, "after a target forward that raised")
    w = make_worker(1, catch_up="padded", spec_draft_graph=False)
    w.draft_worker.draft_runner.fail_forward = True
    try:
        w.forward_batch_generation(decode_batch(2))
    except RuntimeError:
        pass
    else:
        raise AssertionError("the draft's exception was swallowed")
    assert_speculative_state(w, "after a draft extend that raised")
    return "a target forward or draft extend that raises still gets the speculative state back"


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


def main():
    if REL is None:
        print(f"PROBE-FAIL: no release adapter for the variant `{VARIANT}` (SPECPATCH_VARIANT) in _releases.py: "
              f"this probe knows {', '.join(repr(v) for v in _releases.GRAPHS_BY_VARIANT)}", flush=True)
        sys.exit(1)
    print(f"release adapter {type(REL).__name__} for variant {VARIANT}", flush=True)
    report.run("patched", check_patched)
    if report.failed:
        report.finish()
    report.run("recorders match the release", check_recorders_match_the_release)
    report.run("one-token state built at start-up", check_plain_state_built)
    report.run("one-token state: catch-up and graph options", check_plain_state_variants)
    report.run("one-token state: a failing capture restores", check_build_restores_on_error)
    report.run("threshold 0 always speculates", lambda: _contract.threshold_zero(PROBE))
    report.run("batch <= N speculates", lambda: _contract.small_batch_speculates(PROBE))
    report.run("batch > N falls back (padded catch-up)", check_fallback("padded"))
    report.run("batch > N falls back (single catch-up)", check_fallback("single"))
    report.run("batch > N falls back (skip catch-up)", check_fallback("skip"))
    report.run("batch > N falls back (padded, no draft-extend graph)", check_fallback("padded", spec_draft_graph=False))
    report.run("hidden states kept when asked", check_hidden_states_kept_when_asked)
    report.run("extend batches untouched", check_extend_untouched)
    if REL.dp_attention:  # else the variant refuses DP attention at start-up (server_args_probe_compat.py)
        report.run("DP attention decides on the global batch size", check_dp_attention)
    report.run("environment variable", lambda: _contract.env_var(PROBE, PARAMS.get("catchup_mode")))
    report.run("start-up log line", lambda: _contract.log_once(PROBE))
    report.run("state restored on error", check_restored_on_error)
    report.run("NaN detection", lambda: _contract.nan_detection(PROBE, REL))
    report.run("grammar", check_grammar)
    report.run("worker refusals", lambda: _contract.refusals(PROBE))
    report.run("operator counting", check_operator_counting)
    for name in REL.extra_checks:
        report.run(name, lambda check=_contract.EXTRA_CHECKS[name]: check(REL))
    report.finish()


if __name__ == "__main__":
    main()
