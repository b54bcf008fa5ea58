"""Fakes shared by the fallback probes: a target worker, a draft model runner and a recording EagleDraftWorker whose
every value is traceable, and the pieces each probe builds its EAGLEWorkerV2 from (without its __init__).

The target "samples" (input_id * 7 + seq_len) % V, the draft model answers (input_id + position) % V, and hidden
states carry their position and token, so a check can tell which row ended up where. What differs between releases
(the name of the draft input's token, what the draft runner returns, ...) comes from the release adapter `rel`
(_releases.py). Import after `_probe_env.setup()`: these fakes import the patched sglang.
"""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import torch

from sglang.srt.environ import envs
from sglang.srt.layers.logits_processor import LogitsProcessorOutput
from sglang.srt.managers.utils import GenerationBatchResult
from sglang.srt.speculative.eagle_info import EagleDraftInput
from sglang.srt.speculative.eagle_worker_v2 import EagleDraftWorker, EAGLEWorkerV2
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

V = 97  # vocabulary
H_TARGET = 6  # target hidden size handed to the draft (3 * hidden for EAGLE3: any width works here)
H_DRAFT = 5
STEPS = 3
N_DRAFT = STEPS + 1  # num_draft_tokens with topk 1
POOL_ROWS, POOL_LEN = 12, 160
SLOT_BASE = 10_000  # req_to_token[r, p] = SLOT_BASE + r * POOL_LEN + p: every slot tells its row and position


def slot(row: int, pos: int) -> int:
    return SLOT_BASE + row * POOL_LEN + pos


def target_token(input_id: int, seq_len: int) -> int:
    return (input_id * 7 + seq_len) % V


def draft_token(input_id: int, position: int) -> int:
    return (input_id + position) % V


def logprob_row(i: int) -> float:
    """The fake target's logprob of request i's sampled token (when the batch asks for logprobs)."""
    return -10.0 * i


def target_output(b, decode: bool, nan: bool) -> dict:
    """The fake target's answer to batch `b`: target_token per row when `decode`, else (3i + 1) % V; hidden states
    [position, 1000 + row]; logprob_row(i) per row when the batch asks for logprobs; NaN in the logits when `nan`."""
    bs = len(b.seq_lens)
    if decode:
        tokens = [target_token(int(x), int(s)) for x, s in zip(b.input_ids, b.seq_lens)]
    else:
        tokens = [(3 * i + 1) % V for i in range(bs)]
    tokens = torch.tensor(tokens, dtype=torch.int64)
    logits = torch.full((bs, V), -5.0)
    logits[torch.arange(bs), tokens] = 5.0
    if nan and bs:
        logits[0, 0] = float("nan")
    hidden = torch.zeros((bs, H_TARGET))
    hidden[:, 0] = b.seq_lens.to(torch.float32) - 1  # the position of the row
    hidden[:, 1] = 1000 + torch.arange(bs, dtype=torch.float32)  # the request's row in the batch
    logprobs = torch.tensor([logprob_row(i) for i in range(bs)]) if b.return_logprob else None
    return dict(logits_output=LogitsProcessorOutput(next_token_logits=logits, hidden_states=hidden,
                                                    next_token_logprobs=logprobs), next_token_ids=tokens)


def record_forward(fb, log: list, **extra) -> None:
    """Appends what a draft forward batch holds (copies) to `log`."""
    spec_hidden = getattr(fb.spec_info, "hidden_states", None)
    log.append(SimpleNamespace(
        mode=fb.forward_mode, input_ids=fb.input_ids.clone(), positions=fb.positions.clone(),
        out_cache_loc=fb.out_cache_loc.clone(), seq_lens=fb.seq_lens.clone(), capture=fb.capture_hidden_mode,
        spec_hidden=None if spec_hidden is None else spec_hidden.clone(), **extra))


def draft_answer(fb) -> LogitsProcessorOutput:
    """The draft model on a forward batch: logits for draft_token(input, position), hidden [pos, input, target row]."""
    spec_hidden = getattr(fb.spec_info, "hidden_states", None)
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
    return LogitsProcessorOutput(next_token_logits=logits, hidden_states=hidden)


def expected(batch, token: str):
    """Per request: the sampled token, its KV slot (position s), and the draft's answer at position s (`token`: the
    draft input's field of the previous token)."""
    out = []
    for i in range(len(batch.seq_lens)):
        s, row, v = int(batch.seq_lens[i]), int(batch.req_pool_indices[i]), int(getattr(batch.spec_info, token)[i])
        t = target_token(v, s + 1)
        out.append(SimpleNamespace(s=s, row=row, v=v, t=t, slot=slot(row, s), draft=draft_token(t, s)))
    return out


def on_cpu() -> None:
    """What the one-token-graph probes replace to run the worker on CPU."""
    from sglang.srt.managers import overlap_utils
    from sglang.srt.model_executor import forward_batch_info
    from sglang.srt.speculative import eagle_worker_v2

    # The distributed groups do not exist on CPU; ForwardBatch.init_new asks them whether to pad token counts.
    forward_batch_info.enable_num_token_non_padded = lambda *args: False
    # FutureMap asks the global server args whether hidden states travel (yes, unless multi-layer EAGLE/STANDALONE).
    overlap_utils.spec_need_hidden_states = lambda server_args=None: True
    # No GPU to measure.
    eagle_worker_v2.get_available_gpu_memory = lambda *args, **kwargs: 0.0
    record_draft_scopes(eagle_worker_v2)


#: the draft's scopes entered now, innermost last: "draft-tp" (the recording draft worker's draft_tp_context), "moe"
#: and "moe-a2a" (the worker module's speculative MoE contexts, where the release has them: record_draft_scopes)
SCOPES: list[str] = []
#: the worker module's speculative MoE contexts -> the scope name recorded while one is entered
MOE_SCOPES = {"speculative_moe_backend_context": "moe", "speculative_moe_a2a_backend_context": "moe-a2a"}


@contextlib.contextmanager
def entered(name: str):
    """`name` in SCOPES while the body runs."""
    SCOPES.append(name)
    try:
        yield
    finally:
        SCOPES.pop()


def in_scope() -> tuple:
    """The draft's scopes entered now (what a graph runner or backend records when it is built)."""
    return tuple(SCOPES)


def draft_scope_names(worker_module) -> set:
    """The scopes the release's draft worker builds its own graphs in: draft TP, and the speculative MoE contexts
    its worker module has (0.5.6: the MoE backend; 0.5.7 and 0.5.6.post1 on: the all-to-all one too)."""
    return {"draft-tp"} | {tag for name, tag in MOE_SCOPES.items() if hasattr(worker_module, name)}


def record_draft_scopes(worker_module) -> None:
    """The worker module's speculative MoE contexts (those it has), still entered, but recorded in SCOPES."""
    for name, tag in MOE_SCOPES.items():
        real = getattr(worker_module, name, None)
        if real is None or getattr(real, "records_scope", False):
            continue

        @contextlib.contextmanager
        def recorded(*args, _real=real, _tag=tag, **kwargs):
            with _real(*args, **kwargs), entered(_tag):
                yield

        recorded.records_scope = True
        setattr(worker_module, name, recorded)


def sampling_info(bs: int, **more):
    """Greedy sampling info for bs requests; `more` adds the release's penalty fields."""
    import dataclasses

    from sglang.srt.sampling.sampling_batch_info import SamplingBatchInfo

    if "is_any_greedy" in {f.name for f in dataclasses.fields(SamplingBatchInfo)}:  # 0.5.16+: a required field
        more = dict(is_any_greedy=True, **more)
    return SamplingBatchInfo(
        temperatures=torch.ones((bs, 1)), top_ps=torch.ones(bs), top_ks=torch.full((bs,), V), min_ps=torch.zeros(bs),
        is_all_greedy=True, need_top_p_sampling=False, need_top_k_sampling=False, need_min_p_sampling=False,
        vocab_size=V, device="cpu", **more)


def make_pool():
    return SimpleNamespace(req_to_token=(SLOT_BASE + torch.arange(POOL_ROWS * POOL_LEN, dtype=torch.int32))
                           .view(POOL_ROWS, POOL_LEN), device="cpu")


class StrictServerArgs(SimpleNamespace):
    """The scene's server arguments as 0.5.16's ServerArgs treats them after resolution: changed only through
    override(source, **fields) (recorded in `overrides`); a bare assignment raises, as under
    SGLANG_STRICT_CONFIG_MUTATION (the release's own test harness)."""

    def strict(self):
        object.__setattr__(self, "_strict", True)
        object.__setattr__(self, "overrides", [])
        return self

    def override(self, source, **fields):
        self.overrides.append((source, dict(fields)))
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name, value):
        if getattr(self, "_strict", False) and not name.startswith("_"):
            raise AttributeError(f"server_args.{name} assigned after resolution; use server_args.override(source, ...)")
        object.__setattr__(self, name, value)


class RecordServerArgs(StrictServerArgs):
    """0.5.18's ServerArgs after resolution: the read-only startup record, without override() (the resolved
    configuration changes on the runtime context's bags)."""

    @property
    def override(self):
        raise AttributeError("'ServerArgs' object has no attribute 'override'")


class ResolvedRecordServerArgs(RecordServerArgs):
    """0.5.19's ServerArgs as a process publishes it: already through resolve_once (which publish() asks again and
    which then does nothing); its fields are the input, the resolution's declarations are what the bags carry."""

    def resolve_once(self):
        pass


def make_server_args(threshold: int, dp_attention: bool, **more) -> SimpleNamespace:
    """The server arguments the patch's start-up step and the worker read; `more` adds fields (strict once the
    release adapter's install_server_args makes them so: 0.5.16)."""
    return StrictServerArgs(speculative_disable_batch_threshold=threshold, enable_dp_attention=dp_attention,
                           dp_size=2 if dp_attention else 1, tp_size=2 if dp_attention else 1,
                           moe_dense_tp_size=None, enable_dp_lm_head=False, moe_a2a_backend="none", **more)


def bare_worker(args, pool, **fields):
    """An EAGLEWorkerV2 without its __init__: the fields the worker's step reads; `fields` adds more."""
    w = EAGLEWorkerV2.__new__(EAGLEWorkerV2)
    w.server_args = args
    w.topk = 1
    w.speculative_num_steps = STEPS
    w.speculative_num_draft_tokens = N_DRAFT
    w.tp_rank = 0
    w.gpu_id = 0
    w.device = "cpu"
    w.page_size = 1
    w.speculative_algorithm = SpeculativeAlgorithm.EAGLE
    w.req_to_token_pool = pool
    w.token_to_kv_pool_allocator = None
    w.plan_stream, w.plan_stream_ctx = None, contextlib.nullcontext()
    w.__dict__.update(fields)
    return w


def install_verify(w, pool, token: str, lens_on_result: bool = False, pass_allocate_lens: bool = False):
    """w.verify: the speculative path's verify, as far as the scheduler sees it (the slots of positions s..s+n-1,
    2 accepted per request), recorded in w.verify_calls (and "verify" in w.log, where the worker has one). The new
    lengths travel on the draft input, or (`lens_on_result`, 0.5.13) on the result beside its stride; with
    `pass_allocate_lens`, the allocate_lens verify is given (0.5.4 - 0.5.5) are passed on on the result."""
    w.verify_calls = []

    # 0.5.17: the scheduler's grammar barrier, by keyword; 0.5.21: the PP proxy tensors (None without PP), by keyword
    def verify(batch, *more, pp_proxy_tensors=None, grammar_barrier=None):
        w.verify_calls.append(batch)
        if getattr(w, "log", None) is not None:
            w.log.append("verify")
        bs = len(batch.seq_lens)
        starts = batch.seq_lens[:, None] + torch.arange(N_DRAFT)[None, :]
        batch.out_cache_loc = pool.req_to_token[batch.req_pool_indices[:, None], starts].reshape(-1).to(torch.int64)
        accept = torch.full((bs,), 2, dtype=torch.int32)
        lens = dict(new_seq_lens=batch.seq_lens + accept)
        return GenerationBatchResult(
            logits_output=LogitsProcessorOutput(next_token_logits=None,
                                                hidden_states=torch.zeros((bs * N_DRAFT, H_TARGET))),
            next_token_ids=torch.zeros((bs * N_DRAFT,), dtype=torch.int32), accept_lens=accept,
            **(dict(speculative_num_draft_tokens=N_DRAFT, **lens) if lens_on_result else {}),
            **({"allocate_lens": more[0]} if pass_allocate_lens and more else {}),
            next_draft_input=EagleDraftInput(**({} if lens_on_result else lens),
                                             **{token: torch.zeros((bs,), dtype=torch.int32)}))

    w.verify = verify


class Backend:
    """An attention backend: only its identity and what it was built with matter."""

    def __init__(self, name, **built_with):
        self.name = name
        self.built_with = built_with
        self.scope = in_scope()  #: the draft's scopes it was built in

    def init_forward_metadata(self, forward_batch):
        pass

    def __repr__(self):
        return f"<backend {self.name}>"


class Sentinel:
    """Stands for a speculative-path graph runner that a step without speculation must never use."""

    bs = 0

    def __init__(self, name):
        self.name = name

    def can_run(self, forward_batch):
        raise AssertionError(f"the speculative path's {self.name} was consulted by the fallback")

    def replay(self, *args, **kwargs):
        raise AssertionError(f"the speculative path's {self.name} was replayed by the fallback")

    can_run_graph, execute = can_run, replay  # 0.5.14's names

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

    can_run_graph, execute = can_run, replay  # 0.5.14's names

    def __repr__(self):
        return "<speculative draft-extend graph>"


#: what the recorders of the GPU-only constructors built (a probe's make_worker copies it to w.built)
BUILT = SimpleNamespace(target_graphs=[], draft_graphs=[], draft_backends=[], fail_target_graph=False)


class FakeTargetRunner:
    """The target ModelRunner: what the patch reads and switches, and what ForwardBatch.init_new reads;
    _get_attention_backend records each backend it builds, and the state it was built in."""

    def __init__(self, rel, pool, server_args):
        self.rel = rel
        self.device = "cpu"
        self.tp_group = None
        self.req_to_token_pool = pool
        self.token_to_kv_pool = None
        self.model_is_mrope = False
        self.canary_manager = None
        self.model_config = SimpleNamespace(vocab_size=V)
        self.spec_algorithm = SpeculativeAlgorithm.EAGLE
        self.init_new_workspace = False
        self.verify_backend = Backend("target-speculative")
        self.attn_backend = self.verify_backend
        self.verify_graph = Sentinel("TARGET_VERIFY graph runner")
        setattr(self, rel.target_graph_attr, self.verify_graph)  # graph_runner (0.5.14: decode_cuda_graph_runner)
        self.server_args = server_args
        self.spec_cuda_graph_bs = list(rel.graph_bs(server_args))  #: as the speculative path has it
        for name, value in rel.runner_attrs.items():
            setattr(self, name, value)
        self.backend_calls = []

    def _get_attention_backend(self, init_new_workspace: bool | None = None):
        if self.rel.backend_workspace_arg:
            self.init_new_workspace = bool(init_new_workspace)  # as _get_attention_backend_from_str leaves it
        else:  # 0.5.4: no argument, the registry reads the runner's init_new_workspace
            assert init_new_workspace is None, "this release's _get_attention_backend takes no argument"
            init_new_workspace = self.init_new_workspace
        args = self.server_args
        backend = Backend("target-plain", spec_algorithm=self.spec_algorithm,
                          num_draft_tokens=self.rel.spec_config(args).speculative_num_draft_tokens)
        self.backend_calls.append(SimpleNamespace(
            init_new_workspace=init_new_workspace, spec_algorithm=self.spec_algorithm,
            return_hidden=args.enable_return_hidden_states, backend=backend))
        return backend


class FakeTargetWorker:
    """The target worker: records each forward (copies of what it was given, the runner's graph and backend, "target"
    in the worker's event log) and answers target_output. `forward_batch` (None: none) makes the ForwardBatch a
    release's TpModelWorker makes of the batch; `result_extra` adds fields to the result."""

    def __init__(self, runner, log, forward_batch=lambda batch: None, result_extra=lambda: {}):
        self.model_runner = runner
        self.model_config = SimpleNamespace(hidden_size=H_TARGET, dtype=torch.float32, vocab_size=V)
        self.log = log
        self.forward_batch = forward_batch
        self.result_extra = result_extra
        self.calls = []
        self.nan_logits = False
        self.fail_forward = False

    def forward_batch_generation(self, batch=None, forward_batch=None, *args, model_worker_batch=None,
                                 is_verify=False, **kwargs):
        b = batch if batch is not None else model_worker_batch
        assert b is not None, "the fallback must call the target with its batch"
        mr = self.model_runner
        # 0.5.16+: a per-forward capture mode is a keyword of the target worker's forward (only with a batch); the
        # earlier releases' target worker has no such keyword (a TypeError there, as in the real one)
        capture_hidden_mode = kwargs.pop("capture_hidden_mode", None)
        if capture_hidden_mode is not None and not mr.rel.capture_hidden_mode_arg:
            raise TypeError("forward_batch_generation() got an unexpected keyword argument 'capture_hidden_mode'")
        self.log.append("target")
        fb = self.forward_batch(b) if capture_hidden_mode is None else \
            self.forward_batch(b, capture_hidden_mode=capture_hidden_mode)
        cpu = b if fb is None else fb
        self.calls.append(SimpleNamespace(
            batch=b, mode=b.forward_mode, fb=fb, input_ids=None if b.input_ids is None else b.input_ids.clone(),
            seq_lens=b.seq_lens.clone(), seq_lens_cpu=None if cpu.seq_lens_cpu is None else cpu.seq_lens_cpu.clone(),
            seq_lens_sum=cpu.seq_lens_sum, positions=None if fb is None else fb.positions.clone(),
            out_cache_loc=None if b.out_cache_loc is None else b.out_cache_loc.clone(),
            spec_info_is_none=b.spec_info is None, capture=getattr(cpu, "capture_hidden_mode", None), return_logprob=b.return_logprob,
            sampling_info=b.sampling_info, graph_runner=getattr(mr, mr.rel.target_graph_attr),
            attn_backend=mr.attn_backend,
            fb_attn_backend=getattr(fb, "attn_backend", None), spec_algorithm=mr.spec_algorithm, is_verify=is_verify))
        if self.fail_forward:
            raise RuntimeError("target forward failed (probe)")
        decode = b.forward_mode.is_decode() and (fb is not None or b.input_ids is not None)
        graph = getattr(mr, mr.rel.target_graph_attr)
        replayed = getattr(graph, "replays_target", False) and decode and len(b.seq_lens) <= max(graph.capture_bs)
        return GenerationBatchResult(**target_output(b, decode, self.nan_logits),
                                     **{"can_run_cuda_graph": replayed, **self.result_extra()})


class FakeDraftRunner:
    """The draft model runner: answers draft_token(input, position), hidden [position, input, target hidden[1]];
    records each forward ("draft" in the worker's event log) and raises after it when `fail_forward` is set."""

    def __init__(self, rel, req_to_token_pool, log=None):
        self.rel = rel
        self.log = [] if log is None else log
        self.tp_group = None
        self.device = "cpu"
        self.req_to_token_pool = req_to_token_pool
        self.token_to_kv_pool = None
        self.attn_backend = Backend("draft-runner")
        self.server_args = SimpleNamespace(attention_backend="torch_native", enable_lora=False)
        self.model_is_mrope = False
        self.model = SimpleNamespace(forward=lambda input_ids, positions, forward_batch: self._answer(forward_batch))
        for name, value in rel.runner_attrs.items():
            setattr(self, name, value)
        self.calls = []
        self.fail_forward = False

    def forward(self, forward_batch, skip_attn_backend_init=False, **kwargs):
        return self.rel.runner_output(self._answer(forward_batch))

    def _answer(self, fb):  # also what model.forward answers (0.5.4 - 0.5.5: the spec-v2 draft extend calls it)
        self.log.append("draft")
        record_forward(fb, self.calls, graph=None)
        if self.fail_forward:
            raise RuntimeError("draft forward failed (probe)")
        return draft_answer(fb)


class FakeVerifyInput:
    kv_loc_plan = None  #: 0.5.22: the window the draft planned (none here), which the draft extend takes

    def is_verify_input(self):
        return True


class RecordingDraftWorker(EagleDraftWorker):
    """The real EagleDraftWorker (its draft-extend code runs) with `draft` faked and every entry recorded, on the fake
    draft runner, with the speculative path's graphs and backends (a step without speculation must put them back,
    and use none of them)."""

    def __init__(self, rel, req_to_token_pool, log=None, spec_draft_graph=True):  # not the real __init__
        self.rel = rel
        self.device = "cpu"
        self.topk = 1
        self.speculative_algorithm = SpeculativeAlgorithm.EAGLE
        self.speculative_num_steps = STEPS
        self.speculative_num_draft_tokens = N_DRAFT
        self.server_args = SimpleNamespace(enable_nan_detection=False)
        self.req_to_token_pool = req_to_token_pool
        self.draft_runner = FakeDraftRunner(rel, req_to_token_pool, log)
        self.draft_tp_context = self._draft_tp_context
        self.tp_contexts = []  #: the keyword arguments of each draft_tp_context entry (0.5.21: owns_attention)
        self.plan_stream, self.plan_stream_ctx = None, contextlib.nullcontext()
        self.spec_draft_graph = self.cuda_graph_runner = Sentinel("draft multi-step graph runner")
        self.spec_draft_backend = self.draft_attn_backend = Backend("draft-speculative")
        self.spec_extend_backend = self.draft_extend_attn_backend = Backend("draft-extend-speculative")
        self.spec_extend_graph = SpeculativeDraftExtendGraph() if spec_draft_graph else None
        self.cuda_graph_runner_for_draft_extend = self.spec_extend_graph
        self.hot_token_id = None
        for name, value in rel.draft_worker_attrs.items():
            setattr(self, name, value)
        self.draft_calls = []
        self.extend_decode_calls = []
        self.extend_prefill_calls = []

    def _draft_tp_context(self, *args, **kwargs):
        """No TP group switched, entered as the release's own draft_tp_context is (its signature binds the call:
        0.5.21 asks owns_attention); the keyword arguments are recorded, and "draft-tp" is in SCOPES while it is
        entered."""
        import inspect

        import sglang.srt.speculative.eagle_worker_v2 as worker_module

        real = getattr(worker_module, "draft_tp_context", None)
        if real is not None:
            inspect.signature(real).bind(*args, **kwargs)  # TypeError where the release's function refuses the call
        self.tp_contexts.append(dict(kwargs))
        return entered("draft-tp")

    def draft(self, model_worker_batch):
        self.draft_calls.append(model_worker_batch)
        return FakeVerifyInput()

    def _draft_extend_for_decode(self, batch, batch_result, **more):  # 0.5.22: kv_loc_plan=
        hidden = batch_result.logits_output.hidden_states
        self.extend_decode_calls.append(SimpleNamespace(
            out_cache_loc=None if batch.out_cache_loc is None else batch.out_cache_loc.clone(),
            seq_lens=batch.seq_lens, seq_lens_values=batch.seq_lens.clone(),
            next_token_ids=batch_result.next_token_ids.clone(), accept_lens=batch_result.accept_lens.clone(),
            hidden_shape=None if hidden is None else tuple(hidden.shape), steps=self.speculative_num_steps,
            draft_tokens=self.speculative_num_draft_tokens, graph=self.cuda_graph_runner_for_draft_extend,
            backend=getattr(self, "draft_extend_attn_backend", None), runner_backend=self.draft_runner.attn_backend))
        return super()._draft_extend_for_decode(batch, batch_result, **more)

    def _draft_extend_for_prefill(self, batch, target_hidden_states, next_token_ids, *more, **kw):  # 0.5.22: kv_loc_plan=
        self.extend_prefill_calls.append(batch)
        bs = len(batch.seq_lens)
        lens = {} if self.rel.lens_on_result else dict(new_seq_lens=batch.seq_lens)
        return EagleDraftInput(topk_p=torch.ones((bs, 1)), topk_index=torch.zeros((bs, 1), dtype=torch.int64),
                               hidden_states=torch.zeros((bs, H_DRAFT)), **lens, **{self.rel.token: next_token_ids})


def init_only(rel, server_args, target=None, resolved=None):
    """Run only the patch's start-up step on a bare worker (for the refusals); `resolved` (a namespace of fields):
    what the release's resolution decided, where it differs from the record's input (0.5.19+)."""
    w = EAGLEWorkerV2.__new__(EAGLEWorkerV2)
    w.topk, w._target_worker = 1, target or rel.plain_target()
    w._draft_worker = None  # as on a pipeline stage that hosts no draft (0.5.23+ reads the draft's parallel layout)
    with envs.SGLANG_SPEC_DISABLE_CATCH_UP.override("padded"), rel.start_up_config(resolved or server_args):
        w._init_speculative_disable(server_args)
    return w


@contextlib.contextmanager
def catch_up_env(value: str | None):
    """SGLANG_SPEC_DISABLE_CATCH_UP set to `value` (None: left as it is), put back also when the body raises
    (Envs' own override does not restore on an exception, and several checks expect one)."""
    import os

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


def start_up(w, server_args, catch_up: str | None, finish=None):
    """The patch's own start-up step on `w` (SGLANG_SPEC_DISABLE_CATCH_UP set to `catch_up` unless None), then
    `finish(w)` where the release builds the one-token state later; what the recorders built meanwhile is kept in
    w.built. Returns w."""
    for built in (BUILT.target_graphs, BUILT.draft_graphs, BUILT.draft_backends):
        built.clear()
    with catch_up_env(catch_up):
        w._init_speculative_disable(server_args)
        if finish is not None:
            finish(w)
    w.built = SimpleNamespace(target_graphs=list(BUILT.target_graphs), draft_graphs=list(BUILT.draft_graphs),
                              draft_backends=list(BUILT.draft_backends))
    return w


class FakeReq:
    """A scheduler request, as far as the scheduler's result code reads it; `committed` is kv_committed_len."""

    def __init__(self, committed):
        self.kv_committed_len = committed
        self.spec_verify_ct = 0
        self.spec_accepted_tokens = 0
        self.spec_accepted_drafts = 0
        self.spec_num_correct_drafts = 0
        self.is_retracted = False
        self.histogram = []

    def finished(self):
        return False

    def update_spec_acceptance_histogram(self, accepted):
        self.histogram.append(accepted)

    update_spec_correct_drafts_histogram = update_spec_acceptance_histogram
