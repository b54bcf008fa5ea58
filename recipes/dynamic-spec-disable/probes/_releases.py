"""Release adapters of the fallback contract (worker_probe.py, the one-token-graph fallback of 0.5.4 - 0.5.13): per
release, what its family's scene (`scene`: the module that builds the batches, the fakes and the scheduler side) and
the checks need to know of it, and how the release's own scheduler code takes the fallback's result.

The adapter is the one of the variant the engine applied (`SPECPATCH_VARIANT`, set by `specpatch verify` from the
target's ledger; empty for the recipe's own steps). Each class says what its releases do differently from the one it
derives from, and why; none relaxes the contract, some add to it (`extra_checks`).
"""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import torch

from sglang.srt.environ import envs
from sglang.srt.managers import overlap_utils
from sglang.srt.model_executor.forward_batch_info import ForwardMode
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

try:  # 0.5.23+: the draft's parallel layout
    from sglang.srt.configs.draft_parallel import DraftParallelLayout
except ImportError:
    DraftParallelLayout = None

from _fakes import N_DRAFT, V, RecordServerArgs, ResolvedRecordServerArgs, StrictServerArgs, logprob_row


class Release059:
    """The recipe's own steps, written for 0.5.9's EAGLEWorkerV2 and scheduler."""

    scene = "_scene_model_worker_batch"  #: the module of the release family's batches, fakes and scheduler side
    on_publish = False  #: the worker takes an on_publish callback (0.5.13)

    token = "verified_id"  #: the draft input's field of the sampled token
    lens_on_result = False  #: the new sequence lengths travel on the result (0.5.13), not on the draft input
    #: (mode, is_extend_in_batch) of the batches that must keep the prefill path
    prefill_modes = ((ForwardMode.EXTEND, False), (ForwardMode.DECODE, True), (ForwardMode.IDLE, True))
    dp_attention = True  #: the worker serves DP attention (else the variant refuses it at start-up)
    grammar_to_sampler = True  #: the speculative path hands grammars to the target's sampler
    runner_attrs: dict = {}  #: attributes of the draft model runner that this release's ForwardBatch reads

    @staticmethod
    def start_up_config(server_args):
        """A frame in which the worker's start-up reads `server_args` where this release reads its configuration."""
        return contextlib.nullcontext()
    draft_worker_attrs: dict = {}  #: attributes of the draft worker that its __init__ sets and the draft extend reads
    committed_at_entry = -1  #: a request's kv_committed_len when the step starts: s + this
    histogram = True  #: the scheduler keeps an acceptance histogram
    per_request_counts = "accept_length_per_req_cpu"  #: the result's per-request accepted counts (None: none)
    total_count = "num_accepted_tokens"
    extra_checks: tuple = ()  #: names of the probe's checks only this release family has
    hybrid_attrs = ("hybrid_gdn_config", "mamba2_config")  #: model-runner configs of the refused hybrid targets
    #: the one-token-graph probe: the graph runners keep the backend they were built with (0.5.11+), else they
    #: replay on the model runner's / worker's current one
    graphs_keep_backend = False
    #: the one-token-graph probe: the module and method of the decode log line
    metrics = ("sglang.srt.managers.scheduler_metrics_mixin", "log_decode_stats")
    #: the one-token-graph probe's operator counting: what this release's process_batch_result_decode reads of the
    #: scheduler and of the batch, and its decode log line of the scheduler, beyond what every release reads
    counting_scheduler = {"_resolve_spec_overlap_token_ids": lambda result, batch: []}
    counting_batch = {"is_spec_v2": True}
    counting_log: dict = {}
    batch_has_reqs = True  #: ModelWorkerBatch carries the requests (the fallback reads return_hidden_states)
    backend_workspace_arg = True  #: ModelRunner._get_attention_backend(init_new_workspace=...)
    #: the spec-v2 draft extend replays a draft-extend graph (else it runs eagerly: no one-token draft graph)
    draft_extend_graph = True
    #: the one-token-graph probe: how CudaGraphRunner.replay_prepare reaches the attention backend (None: by
    #: graphs_keep_backend)
    replay_backend = None
    #: the ScheduleBatch scene (0.5.13+): the name in eagle_worker_v2 of the target's DECODE graph runner class, the
    #: model runner's attribute of its decode graph runner, and the draft worker's method that captures its graphs
    #: (how the CUDA graph settings are read and disabled: graph_bs, graph_server_args, graphs_disabled below)
    target_graph_cls = "CudaGraphRunner"
    target_graph_attr = "graph_runner"
    draft_capture = "init_cuda_graphs"
    #: the patch captures the draft's graphs only when there are batch sizes to capture (else it asks the draft worker
    #: to capture them with CUDA graphs disabled, and the draft worker captures none)
    draft_capture_only_with_bs = False
    #: the one-token state's draft-extend backend is also put on the draft runner (its draft extend reads
    #: draft_runner.attn_backend), and put back with the speculative one
    draft_runner_backend = False
    server_args_extra: dict = {}  #: the ScheduleBatch scene: server arguments this release's worker code reads
    #: the ScheduleBatch scene: what this release's Scheduler.run_batch reads of the scheduler beyond the scene's own
    #: stand-in (make_scheduler)
    scheduler_attrs: dict = {}
    draft_model_config_attrs: dict = {}  #: what this release reads of the draft runner's model config beyond the scene's
    #: the ScheduleBatch scene: attributes of EAGLEWorkerV2 that its __init__ sets and the step reads beyond the scene's
    worker_attrs: dict = {}
    #: the target worker's forward_batch_generation takes capture_hidden_mode= (0.5.16: ScheduleBatch has no such field)
    capture_hidden_mode_arg = False

    def spec_config(self, server_args):
        """Where the attention backends and graph runners read the speculative step counts (draft tokens per request)."""
        return server_args

    def hidden_states_settings(self, server_args) -> tuple:
        """Where the graph runners read the server's hidden-state settings: (enable_return_hidden_states,
        return_hidden_states_mode)."""
        return server_args.enable_return_hidden_states, getattr(server_args, "return_hidden_states_mode", None)

    def hybrid_target(self, attr):
        """A target worker of a refused hybrid family: its model runner has the config `attr` (hybrid_attrs)."""
        return SimpleNamespace(model_runner=SimpleNamespace(**{attr: object()}))

    def plain_target(self):
        """A target worker of a model without a mamba-style state, as the start-up refusals read it."""
        return SimpleNamespace(model_runner=SimpleNamespace())

    def init_forward_batch(self, batch, runner, capture_hidden_mode):
        """The ScheduleBatch scene: the ForwardBatch the release's TpModelWorker makes of a batch (ForwardBatch.init_new,
        which reads the one-shot capture_hidden_mode / seq_lens_cpu_cache fields of the batch before 0.5.16)."""
        from sglang.srt.model_executor.forward_batch_info import ForwardBatch

        assert capture_hidden_mode is None, "this release's target worker takes no capture_hidden_mode"
        return ForwardBatch.init_new(batch, runner)

    def graph_bs(self, server_args) -> list:
        """The CUDA graph batch sizes the server arguments ask a graph runner to capture."""
        return server_args.cuda_graph_bs

    def graph_server_args(self, bs: list, disabled: bool) -> dict:
        """The ScheduleBatch scene: the server arguments of CUDA graphs for batch sizes `bs` (`disabled`: none)."""
        return dict(cuda_graph_bs=list(bs), cuda_graph_max_bs=max(bs), disable_cuda_graph=disabled)

    def graphs_disabled(self, server_args) -> bool:
        """Whether a draft worker's graph capture finds CUDA graphs disabled (and captures none)."""
        return server_args.disable_cuda_graph

    def install_server_args(self, server_args) -> None:
        """The ScheduleBatch scene: make `server_args` what the release's code reads globally (0.5.14)."""

    def batch_fields(self, bs: int, has_grammar: bool) -> dict:
        """ModelWorkerBatch fields that not every release has."""
        return dict(reqs=[None] * bs, has_grammar=has_grammar)

    def draft_input_fields(self, seq_lens) -> dict:
        """EagleDraftInput fields of a decode batch's resolved spec_info that not every release has."""
        return {}

    def penalties(self, bs: int) -> dict:
        return dict(acc_linear_penalties=torch.full((bs, V), -1e4))

    def check_penalties(self, call, batch):
        assert call.sampling_info.acc_linear_penalties is None, "stale penalties were applied"
        assert batch.sampling_info.acc_linear_penalties is not None, "the batch's own sampling info was changed"

    def check_logprobs(self, call, batch, result):
        assert not call.return_logprob, "the target computed logprobs (the spec path does not, in 0.5.9)"

    def runner_output(self, logits_output):
        """What ModelRunner.forward returns."""
        return SimpleNamespace(logits_output=logits_output)

    def nan_detection(self, on: bool):
        """A context in which verify's NaN check is on or off (the worker's attribute is set by make_worker)."""
        return contextlib.nullcontext()

    nan_errors: tuple = (ValueError,)

    def future_map(self):
        return overlap_utils.FutureMap(max_running_requests=8, chunked_prefill_size=64, context_len=128,
                                       device="cpu", spec_algo=SpeculativeAlgorithm.EAGLE)

    def resolve(self, w, result, reqs):
        """The scheduler's own reading of the result: the tokens per request."""
        from sglang.srt.managers.scheduler_output_processor_mixin import SchedulerOutputProcessorMixin  # <= 0.5.12

        return SchedulerOutputProcessorMixin._resolve_spec_overlap_token_ids(
            SimpleNamespace(draft_worker=w), result, SimpleNamespace(reqs=reqs))

    def check_result_extra(self, result, exp):
        """What this release's result carries beyond the common contract."""


class Release057(Release059):
    """0.5.7-0.5.8: no Req.update_spec_acceptance_histogram, the scheduler keeps no histogram."""

    histogram = False


class Release056(Release057):
    """0.5.6: ModelRunner.forward returns (logits_output, can_run_graph); the result has no per-request counts."""

    per_request_counts = None
    counting_batch = {"is_v2_eagle": True}
    counting_log = {"is_hybrid_gdn": False}

    def runner_output(self, logits_output):
        return logits_output, False


class Release056post1(Release056):
    """0.5.6.post1 - .post2: log_decode_stats also reads is_ssm_model."""

    counting_log = {**Release056.counting_log, "is_ssm_model": False}


class Release055(Release056):
    """0.5.5 (and 0.5.4): the worker routes decode first with no IDLE or is_extend_in_batch handling, and DP attention is
    refused at start-up (server_args_probe_compat.py checks that); ModelWorkerBatch has no reqs/has_grammar and the
    speculative path leaves grammar out (the scheduler never advances it for spec-v2 tokens); the draft extend
    calls draft_runner.model.forward; KV space is tracked by allocate_lens (no kv_committed_len), which the batch's
    draft input carries and the result must pass on; FutureMap(max_running_requests, device, spec_algo)."""

    prefill_modes = ((ForwardMode.EXTEND, False),)
    dp_attention = False
    grammar_to_sampler = False
    runner_attrs = {"is_draft_worker": True}
    committed_at_entry = None
    batch_has_reqs = False
    draft_extend_graph = False  # the draft worker captures one, but only the v1 worker replays it
    replay_backend = "self.model_runner.attn_backend.init_forward_metadata_replay_cuda_graph("
    counting_log = {**Release056.counting_log, "is_hybrid": False}

    def batch_fields(self, bs, has_grammar):
        return {}

    def draft_input_fields(self, seq_lens):
        return dict(allocate_lens=seq_lens + N_DRAFT)

    def future_map(self):
        return overlap_utils.FutureMap(max_running_requests=8, device="cpu", spec_algo=SpeculativeAlgorithm.EAGLE)

    def check_result_extra(self, result, exp):
        assert result.allocate_lens is not None and \
            result.allocate_lens.tolist() == [e.s + N_DRAFT for e in exp], "allocate_lens not passed on"
        nd = result.next_draft_input
        assert nd.allocate_lens is not None and nd.allocate_lens.tolist() == [e.s + N_DRAFT for e in exp], \
            "allocate_lens not passed on to the next draft input"


class Release055post3(Release055):
    """0.5.5.post3: 0.5.6's routing (prefill and is_extend_in_batch batches first, IDLE in the decode arm) and
    CudaGraphRunner.replay_prepare backported."""

    prefill_modes = Release059.prefill_modes
    replay_backend = Release059.replay_backend


class Release054(Release055):
    """0.5.4: ModelRunner._get_attention_backend() takes no argument (the registry reads the runner's
    init_new_workspace)."""

    backend_workspace_arg = False
    counting_log = {**Release055.counting_log, "spec_num_total_accepted_tokens": 0, "spec_num_total_forward_ct": 3,
                    "cum_spec_accept_length": 0, "cum_spec_accept_count": 0}


class Release0510(Release059):
    """0.5.10: ModelWorkerBatch.all_extend_in_batch, ForwardBatch.init_new reads req.rid and the runner's
    use_ngram_embedding/is_hybrid_swa; the penalties are acc_additive/acc_scaling (stale ones left out); NaN is
    checked under SGLANG_SPEC_NAN_DETECTION (maybe_detect_nan); spec-v2 decode returns logprobs, so the fallback
    asks the target when the batch does and hands over one row per request; hybrid mamba/GDN targets are refused."""

    runner_attrs = {"use_ngram_embedding": False, "is_hybrid_swa": False}
    extra_checks = ("hybrid mamba/GDN target refused",)
    metrics = ("sglang.srt.observability.scheduler_metrics_mixin", "report_decode_stats")
    #: report_decode_stats: the metrics off, the logging rank, every interval
    counting_log = dict(current_scheduler_metrics_enabled=False, is_stats_logging_rank=True, forward_ct_decode=0,
                        get_pool_stats=lambda: SimpleNamespace(get_decode_usage_msg_parts=lambda: []),
                        enable_mfu_metrics=False, spec_num_accept_tokens=0, spec_total_num_accept_tokens=0,
                        _graph_backend_label="cuda graph")
    nan_errors = (ValueError, RuntimeError)

    def batch_fields(self, bs, has_grammar):
        return dict(all_extend_in_batch=False, reqs=[SimpleNamespace(rid=f"req-{i}") for i in range(bs)],
                    has_grammar=has_grammar)

    def penalties(self, bs):
        return dict(acc_additive_penalties=torch.full((bs, V), -1e4), acc_scaling_penalties=torch.full((bs, V), 2.0))

    def check_penalties(self, call, batch):
        assert call.sampling_info.acc_additive_penalties is None and \
            call.sampling_info.acc_scaling_penalties is None, "stale penalties were applied"
        self._batch_penalties_kept(batch)

    @staticmethod
    def _batch_penalties_kept(batch):
        assert batch.sampling_info.acc_additive_penalties is not None and \
            batch.sampling_info.acc_scaling_penalties is not None, "the batch's own sampling info was changed"

    def check_logprobs(self, call, batch, result):
        assert call.return_logprob == batch.return_logprob, "the batch's return_logprob did not reach the target"
        lp = result.logits_output.next_token_logprobs
        assert lp is not None and tuple(lp.shape) == (len(batch.seq_lens), 1), \
            f"logprobs {None if lp is None else tuple(lp.shape)}: the spec-v2 scheduler reads a row per request"
        assert [row[0] for row in lp.tolist()] == [logprob_row(i) for i in range(len(batch.seq_lens))], \
            "the logprob rows are not the target's, in request order"

    def nan_detection(self, on):
        return envs.SGLANG_SPEC_NAN_DETECTION.override(on)


class Release0511(Release0510):
    """0.5.11: spec v2 accumulates the penalties and verify applies them, so the fallback passes them on;
    prepare_for_decode pre-claims kv_committed_len (a request enters the step with s); the accepted-draft
    counters are renamed."""

    committed_at_entry = 0
    graphs_keep_backend = True
    per_request_counts = "num_accepted_drafts_per_req_cpu"
    total_count = "num_accepted_drafts"

    def check_penalties(self, call, batch):
        assert call.sampling_info.acc_additive_penalties is batch.sampling_info.acc_additive_penalties and \
            call.sampling_info.acc_scaling_penalties is batch.sampling_info.acc_scaling_penalties, \
            "the penalties (accumulated by spec v2 and applied by verify in this release) were not passed on"
        self._batch_penalties_kept(batch)


class Release0512(Release0511):
    """0.5.12: the draft input's token is bonus_tokens; _resolve_spec_overlap_tokens reads the stride from the
    result (checked), feeds the worker's adaptive hook, skips retracted/finished requests and counts correct
    drafts; the draft extend asks the runner for its algorithm; --speculative-adaptive is refused beside N."""

    token = "bonus_tokens"
    runner_attrs = {**Release0510.runner_attrs, "spec_algorithm": SpeculativeAlgorithm.EAGLE}
    per_request_counts = "num_correct_drafts_per_req_cpu"
    total_count = "num_correct_drafts"
    extra_checks = Release0511.extra_checks + ("adaptive speculation refused",)
    counting_scheduler = {"_resolve_spec_overlap_tokens": lambda result, batch: []}

    def resolve(self, w, result, reqs):
        from sglang.srt.managers.scheduler_output_processor_mixin import SchedulerOutputProcessorMixin

        w.adaptive_controller = None  # not adaptive: on_verify_complete_cpu is a no-op
        return SchedulerOutputProcessorMixin._resolve_spec_overlap_tokens(
            SimpleNamespace(draft_worker=w, model_worker=w), result, SimpleNamespace(reqs=reqs))

    def check_result_extra(self, result, exp):
        assert result.speculative_num_draft_tokens == N_DRAFT, "the result does not carry its stride"


class Release013(Release0512):
    """0.5.13 (its own scene, _scene_schedule_batch.py: the ScheduleBatch / on_publish design): the new sequence
    lengths travel on the result, not on the draft input, and the result's stride is 1; NaN is checked under
    SGLANG_ENABLE_ASYNC_ASSERT; hybrid lightning targets are refused as well."""

    scene = "_scene_schedule_batch"
    finish_start_up = None  #: the one-token state is built in __init__ (0.5.14: a function that builds it later)
    on_publish = True
    lens_on_result = True
    hybrid_attrs = Release0512.hybrid_attrs + ("hybrid_lightning_config",)
    extra_checks = ("hybrid mamba/GDN/lightning target refused", "adaptive speculation refused")

    def nan_detection(self, on):
        return envs.SGLANG_ENABLE_ASYNC_ASSERT.override(on)

    def graph_hidden_states(self, server_args) -> bool:
        """Whether a graph runner built on these server arguments captures the hidden states (of every token)."""
        return server_args.enable_return_hidden_states

    def check_result_extra(self, result, exp):
        assert result.speculative_num_draft_tokens == 1, "the result does not carry its stride (1)"


class Release014(Release013):
    """0.5.14: the CUDA graph settings are per phase (server_args.cuda_graph_config, a CudaGraphConfig of
    PhaseConfigs): the captured batch sizes are cuda_graph_config.decode.bs, which the patch narrows to those above N
    while it builds the one-token state (and restores), and CUDA graphs are off when check_cuda_graph_backend(DECODE,
    DISABLED) says so, on the global server args (set_global_server_args_for_scheduler); the target's graph runner is
    DecodeCudaGraphRunner, at model_runner.decode_cuda_graph_runner; the draft's graphs are captured by
    _capture_cuda_graphs, which the patch calls only when there are batch sizes to capture; graph runners answer
    can_run_graph / execute; the draft extend reads draft_runner.attn_backend, which follows the draft-extend backend
    (apply_runtime_state, _rebuild_topk1_chain_buffers), so the swap sets it too; the draft extend reads
    speculative_use_rejection_sampling."""

    target_graph_cls = "DecodeCudaGraphRunner"
    target_graph_attr = "decode_cuda_graph_runner"
    draft_capture = "_capture_cuda_graphs"
    draft_capture_only_with_bs = True
    draft_runner_backend = True
    server_args_extra = dict(speculative_use_rejection_sampling=False, model_impl="auto")

    @staticmethod
    def finish_start_up(w):
        """0.5.14 allocates the KV pools and builds the backends and graphs after __init__: the patch builds the
        one-token state at the end of EAGLEWorkerV2.init_cuda_graphs, after the speculative path's own graphs (which
        the fakes stand for: the draft worker's init_cuda_graphs captures nothing here)."""
        assert w._spec_disable_plain is None, "the one-token state was built in __init__, before the KV pools exist"
        w._draft_worker.init_cuda_graphs = lambda: None
        w.init_cuda_graphs()
        threshold = w.spec_disable_batch_threshold
        assert (w._spec_disable_plain is not None) == (threshold > 0), \
            f"init_cuda_graphs did not build the one-token state (N={threshold})"

    def graph_bs(self, server_args):
        return server_args.cuda_graph_config.decode.bs

    def graph_server_args(self, bs, disabled):
        from sglang.srt.model_executor.cuda_graph_config import Backend, CudaGraphConfig, PhaseConfig

        # as ServerArgs leaves them: --disable-cuda-graph turns every phase's backend to DISABLED
        off = Backend.DISABLED
        return dict(disable_cuda_graph=disabled, cuda_graph_bs_decode=None, cuda_graph_config=CudaGraphConfig(
            decode=PhaseConfig(backend=off if disabled else Backend.FULL, max_bs=max(bs), bs=list(bs)),
            prefill=PhaseConfig(backend=off if disabled else Backend.TC_PIECEWISE)))

    def graphs_disabled(self, server_args):
        from sglang.srt.model_executor.cuda_graph_config import Backend, Phase, check_cuda_graph_backend

        return check_cuda_graph_backend(Phase.DECODE, Backend.DISABLED)  # as _capture_cuda_graphs asks

    def install_server_args(self, server_args):
        self.publish_scene(server_args)

    @staticmethod
    def publish_scene(server_args):
        """Publish the scene's server arguments as the scheduler's (what check_cuda_graph_backend reads)."""
        from sglang.srt.server_args import set_global_server_args_for_scheduler

        set_global_server_args_for_scheduler(server_args)


class Release015(Release014):
    """0.5.15: the draft's recurrent hidden state is get_draft_recurrent_hidden_state_spec(draft_runner), its size and
    dtype (EagleDraftInput.hidden_size_for / dtype_for are gone); the draft worker's __init__ sets the DSA index-share
    state (_init_dsa_index_share_state) that the draft extend reads: off here, as for every model without
    index_share_for_mtp_iteration; the FutureMap keeps hidden states only when the global server args' algorithm
    relays them (spec_need_hidden_states); a request enters the step with s - 1 committed (no pre-claimed bonus
    slot: the result processor commits every accepted token) and the scheduler relays a RelayPayload."""

    committed_at_entry = -1  # prepare_for_decode no longer pre-claims the bonus slot: the result commits it
    draft_worker_attrs = dict(index_share_for_mtp_iteration=False, dsa_index_topk=None,
                              seed_dsa_topk_from_draft_extend=False, dsa_extend_topk_buf=None)
    #: what the FutureMap reads of the global server args (spec_need_hidden_states) beyond 0.5.14's
    server_args_extra = dict(Release014.server_args_extra, speculative_algorithm="EAGLE",
                             enable_multi_layer_eagle=False)


class Release016(Release015):
    """0.5.16: ScheduleBatch has no capture_hidden_mode / seq_lens_cpu_cache (ForwardBatch.init_new takes
    capture_hidden_mode and return_hidden_states_before_norm as keywords, and TpModelWorker.forward_batch_generation
    passes its capture_hidden_mode= on); the model runner has no hybrid_gdn_config / mamba2_config /
    hybrid_lightning_config (the hybrid configs are functions of the model config: mambaish_config, which verify
    asks); server arguments change only through ServerArgs.override() after resolution (upstream's
    _override_worker_state too), so the scene's server arguments are strict; the scheduler's run_batch reads
    enable_unified_memory / enable_dp_attention / _confidence_budget_prepare of itself."""

    capture_hidden_mode_arg = True
    #: require_mlp_tp_gather reads the elastic EP backend first (the start-up check of DP attention)
    server_args_extra = dict(Release015.server_args_extra, elastic_ep_backend=None)
    #: what a target of each refused family looks like to 0.5.16: its model config's HF config (real classes)
    hybrid_attrs = ("mamba2 (NemotronH)", "GDN (Qwen3-Next)", "lightning (Bailing hybrid)")

    @property
    def runner_attrs(self):
        """The model runners' attributes ForwardBatch.init_new and the patch read in this release: the n-gram embedding
        manager (was use_ngram_embedding), the model config's mrope flag (was the runner's), and for the start-up
        refusal the model config a mambaish_config reads (a Llama's here)."""
        from transformers import LlamaConfig

        return {**Release015.runner_attrs, "ngram_embedding_manager": SimpleNamespace(enabled=False),
                "model_config": SimpleNamespace(vocab_size=V, hf_config=LlamaConfig(), is_draft_model=False,
                                                linear_attn_registry_result=None, model_is_mrope=False)}

    def init_forward_batch(self, batch, runner, capture_hidden_mode):
        from sglang.srt.model_executor.forward_batch_info import ForwardBatch

        return ForwardBatch.init_new(batch, runner, capture_hidden_mode=capture_hidden_mode,
                                     return_hidden_states_before_norm=False)  # as TpModelWorker calls it

    def hybrid_target(self, attr):
        """A target worker whose model runner's model config has the HF config of the family `attr` names."""
        from sglang.srt.configs import BailingHybridConfig, NemotronHConfig, Qwen3NextConfig

        hf = {"mamba2 (NemotronH)": NemotronHConfig, "GDN (Qwen3-Next)": Qwen3NextConfig,
              "lightning (Bailing hybrid)": BailingHybridConfig}[attr]()
        model_config = SimpleNamespace(hf_config=hf, is_draft_model=False, linear_attn_registry_result=None)
        return SimpleNamespace(model_runner=SimpleNamespace(model_config=model_config))

    def plain_target(self):
        """A target worker of a model without a mamba-style state (Llama), as the refusal check reads it."""
        from transformers import LlamaConfig

        model_config = SimpleNamespace(hf_config=LlamaConfig(), is_draft_model=False, linear_attn_registry_result=None)
        return SimpleNamespace(model_runner=SimpleNamespace(model_config=model_config))

    def install_server_args(self, server_args):
        super().install_server_args(server_args)
        if isinstance(server_args, StrictServerArgs):
            server_args.strict()


class Release017(Release016):
    """0.5.17: business code reads the resolved configuration from the namespace bags of the runtime context (get_spec(),
    get_exec(), get_parallel(): the worker reads N there, and the decode phase's CUDA graph settings), projected from
    the published ServerArgs by its fields' NS(...) markers, and changes it through get_context().override(), which
    writes the bags only (upstream's _override_worker_state too); ServerArgs stays the read-only startup record that
    the graph runners read (batch sizes, hidden-state capture mode). The scene's server arguments are published as a
    real ServerArgs carrying them (sglang's defaults elsewhere), sharing their objects (cuda_graph_config), so the bags
    hold the scene's values. The start-up leaves the bags as it found them."""

    extra_checks = Release016.extra_checks + ("grammar barrier before the target's sampler",
                                              "hidden states captured on a server returning the last only")
    @property
    def runner_attrs(self):
        """0.5.16's, and is_draft_worker, which ForwardBatch.init_new reads of the runner when no capture mode is given
        (the server's mode, none for a draft runner)."""
        return {**super().runner_attrs, "is_draft_worker": False}

    #: the scene's server arguments also carry the hidden-state mode the graph runners read first
    server_args_extra = dict(Release016.server_args_extra, return_hidden_states_mode=None)

    def spec_config(self, server_args):
        """The "spec" namespace bag (get_spec()), which _override_worker_state overrides while a state is built."""
        from sglang.srt.runtime_context import get_spec

        return get_spec()

    def graph_hidden_states(self, server_args) -> bool:
        """As this release's graph runners fix their capture mode when built (BaseRunner: the server's mode, which
        reads return_hidden_states_mode before enable_return_hidden_states; no recapture later)."""
        from sglang.srt.model_executor.forward_batch_info import CaptureHiddenMode, get_server_return_hidden_states_mode

        return get_server_return_hidden_states_mode(server_args) == CaptureHiddenMode.FULL

    @staticmethod
    def published(server_args):
        """A real ServerArgs (no __post_init__) with the scene's values, sglang's defaults for the other fields."""
        import dataclasses

        from sglang.srt.server_args import ServerArgs

        real = ServerArgs.__new__(ServerArgs)
        for f in dataclasses.fields(ServerArgs):
            if hasattr(server_args, f.name):
                value = getattr(server_args, f.name)
            elif f.default is not dataclasses.MISSING:
                value = f.default
            elif f.default_factory is not dataclasses.MISSING:
                value = f.default_factory()
            else:
                value = None
            object.__setattr__(real, f.name, value)
        return real

    def install_server_args(self, server_args):
        from sglang.srt.runtime_context import get_context

        super().install_server_args(server_args)
        get_context().set_server_args(self.published(server_args))  # projects the bags the worker reads

    @staticmethod
    def finish_start_up(w):
        from sglang.srt.runtime_context import get_exec, get_spec

        bags = lambda: (get_spec().speculative_num_steps, get_spec().speculative_num_draft_tokens,  # noqa: E731
                        get_exec().graph.cuda_graph_bs_decode, get_exec().graph.disable_cuda_graph)
        before = bags()
        Release016.finish_start_up(w)
        assert bags() == before, f"the start-up left the config bags at {bags()}, not {before}"
        assert get_spec().speculative_disable_batch_threshold == w.server_args.speculative_disable_batch_threshold


class Release018(Release017):
    """0.5.18: ServerArgs has no override() any more (a value one runner owns travels as a constructor argument; the
    resolved configuration changes on the bags, through get_context().override()); the graph runners read the
    hidden-state settings from the "exec" namespace (get_server_return_hidden_states_mode() takes no arguments: it
    reads get_exec().features), so the one-token build switches them there and puts them back; DraftBackendFactory
    takes no server arguments (the scene's factory binds the release's own signature). The scene's server arguments
    have no override() either, and the start-up leaves the hidden-state settings of the bags as it found them."""

    @property
    def runner_attrs(self):
        """0.5.17's, and what ForwardBatch.init_new reads of the runner now: its parallel state (ps: decode context
        parallel off) and the attention backend it resolved and stamped (was the server arguments')."""
        return {**super().runner_attrs, "ps": SimpleNamespace(attn_dcp_size=1, attn_dcp_rank=0),
                "prefill_attention_backend_str": "torch_native", "decode_attention_backend_str": "torch_native"}

    def graph_hidden_states(self, server_args) -> bool:
        """As this release's graph runners fix their capture mode when built (BaseRunner: the server's mode, read from
        get_exec().features, return_hidden_states_mode before enable_return_hidden_states)."""
        from sglang.srt.model_executor.forward_batch_info import CaptureHiddenMode, get_server_return_hidden_states_mode

        return get_server_return_hidden_states_mode() == CaptureHiddenMode.FULL

    def hidden_states_settings(self, server_args) -> tuple:
        from sglang.srt.runtime_context import get_exec

        features = get_exec().features
        return features.enable_return_hidden_states, features.return_hidden_states_mode

    record_class = RecordServerArgs  #: the scene's server arguments as this release's ServerArgs: no override()

    def install_server_args(self, server_args):
        if isinstance(server_args, StrictServerArgs):
            server_args.__class__ = self.record_class
        super().install_server_args(server_args)

    @staticmethod
    def finish_start_up(w):
        rel = Release018()
        before = rel.hidden_states_settings(w.server_args)
        Release017.finish_start_up(w)
        assert rel.hidden_states_settings(w.server_args) == before, \
            f"the start-up left the bags' hidden-state settings at {rel.hidden_states_settings(w.server_args)}, " \
            f"not {before}"


class Release019(Release018):
    """0.5.19: resolution is a separate act (resolve_once) whose result is the declarations over the input: the
    record's fields keep the input for the life of the process, and the worker reads DP attention through
    get_parallel() and adaptive speculation through get_spec(); Req's KV fields moved under req.kv."""

    #: publish() asks resolve_once again, which a record that went through it passes
    record_class = ResolvedRecordServerArgs
    extra_checks = Release018.extra_checks + ("the start-up reads the resolution, not the input",)

    @property
    def runner_attrs(self):
        """0.5.18's, the KV index translator ForwardBatch.init_new hands the batch to (rebind_write_loc: a no-op on
        pools that do not translate, as here) and the LoRA manager it now asks unconditionally (none: no LoRA)."""
        return {**super().runner_attrs, "kv_index_translator": SimpleNamespace(rebind_write_loc=lambda batch: None),
                "lora_manager": None}

    def install_server_args(self, server_args):
        """Published as 0.5.18's; with DP attention, the record's field then says what the input said without it
        (False), as when a DeepSeek override or context parallel declares DP attention: the bags (get_parallel())
        carry the resolution, the field the input, and the worker must read the former."""
        super().install_server_args(server_args)
        if getattr(server_args, "enable_dp_attention", False):
            object.__setattr__(server_args, "enable_dp_attention", False)

    @staticmethod
    def start_up_config(server_args):
        """The bags the worker's start-up reads, published from the server arguments a refusal check gives it (a
        test-only dummy-boundary record: get_spec().speculative_adaptive and the rest as given)."""
        from sglang.srt.runtime_context import get_context

        fields = {k: v for k, v in vars(server_args).items() if not k.startswith("_")}
        return get_context().override_server_args(**fields)


class Release020(Release019):
    """0.5.20: ServerArgs is no dataclass any more but a msgspec Struct (dict=True), assembled by msgspec.defstruct from
    the input halves of the namespace classes of arg_groups/fields/ (the field is declared in Spec): its fields are
    msgspec.structs.fields, a missing default is msgspec.NODEFAULT, and ServerArgs.__new__ / object.__setattr__ do
    not build one (msgspec refuses object.__new__ on a Struct): the published record is built through its
    constructor, whose __post_init__ leaves it raw, as 0.5.19's did. Scheduler.run_batch records its stage on the
    scheduler's stage metrics and marks the scheduler active on its metrics reporter. DraftBackendFactory takes the
    draft's QSA profile, which the one-token build reads from the draft model's config, as the draft worker does."""

    @property
    def draft_model_config_attrs(self):
        """parse_qsa_profile(draft_runner.model_config.hf_config) reads it: a Llama config, which has no QSA
        profile."""
        from transformers import LlamaConfig

        return {"hf_config": LlamaConfig()}

    #: Scheduler.run_batch is a scheduler_stage_method (its wrapper asks the scheduler's stage-metrics recorder: none
    #: here, so it calls straight through), marks the scheduler active on its metrics reporter and adds a batch's
    #: extend tokens to the HRRN policy's processed-token counter
    scheduler_attrs = dict(Release019.scheduler_attrs, scheduler_stage_metrics=None, processed_tokens_counter=0,
                           metrics_reporter=SimpleNamespace(record_scheduler_active=lambda: None))

    @staticmethod
    def published(server_args):
        """A real ServerArgs (constructed, not resolved) with the scene's values, sglang's defaults for the other
        fields (None for the required model_path)."""
        import msgspec

        from sglang.srt.arg_groups.arg_utils import record_fields
        from sglang.srt.server_args import ServerArgs

        values = {}
        for f in record_fields(ServerArgs):
            if hasattr(server_args, f.name):
                values[f.name] = getattr(server_args, f.name)
            elif f.default is not msgspec.NODEFAULT:
                values[f.name] = f.default
            elif f.default_factory is not msgspec.NODEFAULT:
                values[f.name] = f.default_factory()
            else:
                values[f.name] = None
        return ServerArgs(**values)


class Release021(Release020):
    """0.5.21: draft_tp_context takes owns_attention (the draft worker's draft_owns_attention: EAGLE3 with DP
    attention); the draft input carries cuda_graph_compatible, the DP ranks' draft-graph vote. publish() reads the
    derived parallel widths (dcp_enabled) that set_server_args projects from the record's namespaces, which the
    scene's record (no ServerArgs) has none of: the scene is installed as the real record alone (0.5.17's
    set_server_args, which replaced the scene's record before too), with what publish() adds to it: attn_dcp_rank 0
    when decode context parallelism is off."""

    #: what the draft worker's __init__ sets beyond 0.5.20's: the scene's EAGLE draft does not own its attention
    draft_worker_attrs = dict(Release020.draft_worker_attrs, draft_owns_attention=False)
    #: EAGLEWorkerV2.__init__ reads SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION (off: a prefill in the batch runs the
    #: prefill path, as before)
    worker_attrs = dict(enable_dp_spec_prefill_coordination=False)
    #: Scheduler.run_batch's non-overlap speculative path asks its PP group whether it is the last stage (no PP: yes)
    scheduler_attrs = dict(Release020.scheduler_attrs, pp_group=SimpleNamespace(is_last_rank=True))
    extra_checks = Release020.extra_checks + ("draft scope and draft-graph vote as the release's own",)

    @property
    def runner_attrs(self):
        """0.5.20's, with what ForwardBatch.init_new reads of the runner now: the model config's
        requires_mm_token_modalities (a text-only model: no) and the runner's own attn_dcp_size / attn_dcp_rank (decode
        context parallelism off; was its ps)."""
        attrs = dict(super().runner_attrs, attn_dcp_size=1, attn_dcp_rank=0)  # was ps.attn_dcp_size / _rank
        attrs["model_config"] = SimpleNamespace(**vars(attrs["model_config"]), requires_mm_token_modalities=False)
        return attrs

    @property
    def draft_model_config_attrs(self):
        """0.5.20's, and requires_mm_token_modalities, which ForwardBatch.init_new asks of the draft's model config too."""
        return {**super().draft_model_config_attrs, "requires_mm_token_modalities": False}

    @staticmethod
    def publish_scene(server_args):
        """Nothing: the real record that 0.5.17's install_server_args sets next is the one the context keeps."""

    def install_server_args(self, server_args):
        from sglang.srt.runtime_context import get_context

        super().install_server_args(server_args)
        parallel = get_context().parallel
        if not parallel.dcp_enabled:  # as publish() stamps it
            parallel.override_permanently(attn_dcp_rank=0)


class Release022(Release021):
    """0.5.22: draft_tp_context is a module function of the owns-attention flag (draft_tp_context(owns_attention)),
    entered as upstream's own calls do; the draft worker has no draft_tp_context attribute any more. DP attention
    is an attention-DP width: the worker reads get_parallel().attn_dp_enabled (enable_dp_attention is the deprecated
    spelling, which the resolution declares False)."""

    @staticmethod
    def scope_record(arguments: dict) -> dict:
        """What the scene records of a draft_tp_context entry, from the release's bound arguments: the flag."""
        return {"owns_attention": arguments["owns_attention"]}

    @classmethod
    def finish_start_up(cls, w):
        """The worker module's draft_tp_context recorded as the release's own (its signature binds the call; "draft-tp"
        in the scene's scopes while entered; what scope_record makes of its arguments recorded on the scene's draft
        worker), and the scene's draft worker without the draft_tp_context attribute the release's no longer has;
        then 0.5.21's."""
        import inspect

        import sglang.srt.speculative.eagle_worker_v2 as worker_module

        import _fakes

        dw = w._draft_worker
        dw.__dict__.pop("draft_tp_context", None)
        real = getattr(worker_module.draft_tp_context, "real", worker_module.draft_tp_context)

        def recorded(*args, **kwargs):
            bound = inspect.signature(real).bind(*args, **kwargs)  # TypeError where the release's refuses the call
            dw.tp_contexts.append(cls.scope_record(bound.arguments))
            return _fakes.entered("draft-tp")

        recorded.real = real
        worker_module.draft_tp_context = recorded
        Release021.finish_start_up(w)

    #: Scheduler.run_batch marks the scheduler active on its metrics reporter with the time (record_scheduler_active(ns))
    #: and asks whether the unified cache's external linker loads KV (no) and, for elastic EP, whether attention runs DP
    scheduler_attrs = dict(Release021.scheduler_attrs, enable_unified_cache_external_linker=False, attn_dp_enabled=False,
                           metrics_reporter=SimpleNamespace(record_scheduler_active=lambda now_ns: None))

    @property
    def runner_attrs(self):
        """0.5.21's, with the KV index translator ForwardBatch.init_new asks for the forward's own KV location plan
        (own_plan; bind gives the batch its write ids: on a pool that does not translate, as here, the virtual ids
        as they are)."""
        def bind(plan, batch, reader, cols=None):
            batch.kv_loc_plan, batch.kv_loc_cols = plan, cols
            batch.out_cache_loc_virtual = None
            batch.out_cache_loc_is_physical = batch.out_cache_loc is not None

        def own_plan(batch):
            plan = SimpleNamespace()
            plan.bind = lambda b, reader, cols=None: bind(plan, b, reader, cols)
            return plan

        translator = SimpleNamespace(own_plan=own_plan, is_translating=False)
        return {**super().runner_attrs, "kv_index_translator": translator}

    @staticmethod
    def resolved_dp(fields: dict) -> dict:
        """DP attention as this release resolves it: the deprecated --dp-size N --enable-dp-attention becomes
        attn_dp_size N, dp_size 1, enable_dp_attention False (handle_deprecated_dp_attention)."""
        if fields.get("enable_dp_attention"):
            fields = dict(fields, attn_dp_size=fields.get("dp_size", 1), dp_size=1, enable_dp_attention=False)
        return fields

    def install_server_args(self, server_args):
        """As 0.5.21's, with DP attention spelt as this release resolves it (resolved_dp)."""
        for name, value in self.resolved_dp(dict(vars(server_args))).items():
            if not name.startswith("_"):
                setattr(server_args, name, value)
        super().install_server_args(server_args)

    @classmethod
    def start_up_config(cls, server_args):
        """0.5.19's, with DP attention spelt as this release resolves it (resolved_dp)."""
        from sglang.srt.runtime_context import get_context

        fields = {k: v for k, v in vars(server_args).items() if not k.startswith("_")}
        return get_context().override_server_args(**cls.resolved_dp(fields))


class Release023(Release022):
    """0.5.23: the draft worker's draft_owns_attention is replaced by its parallel layout
    (EagleDraftWorker.parallel_layout, a DraftParallelLayout resolved from the draft model's class), which
    draft_tp_context takes (draft_tp_context(layout)); a layout with a TP group of its own (local_dp) owns its
    attention. The scene's EAGLE draft follows the target's layout (no TP group of its own)."""

    #: what the draft worker's __init__ sets: its parallel layout in place of 0.5.21's draft_owns_attention
    draft_worker_attrs = {**{k: v for k, v in Release022.draft_worker_attrs.items() if k != "draft_owns_attention"},
                          "parallel_layout": DraftParallelLayout and DraftParallelLayout(tp_group=None, attn_tp_size=1)}
    extra_checks = tuple(c for c in Release022.extra_checks
                         if c != "draft scope and draft-graph vote as the release's own") \
        + ("draft layout and draft-graph vote as the release's own",
           "target graph runner selected as the release's own")

    #: Scheduler._copy_result_to_cpu (run_batch's result readback) asks whether it may hand the copy to its async D2H
    #: worker: no, the copy runs behind the forward, as the scene's CPU run needs
    scheduler_attrs = dict(Release022.scheduler_attrs, enable_async_d2h_copy=False)

    @staticmethod
    def scope_record(arguments: dict) -> dict:
        """The layout entered (the scene checks it is the draft worker's own) and whether it owns attention."""
        return {"layout": arguments["layout"], "owns_attention": arguments["layout"].local_dp}


#: the one-token-graph fallback on the ModelWorkerBatch contract (worker_probe_graphs.py): variant -> its adapter
GRAPHS_BY_VARIANT = {
    "": Release059,  # the recipe's own steps
    "fallback-0.5.4": Release054, "fallback-0.5.4.post1": Release054,
    "fallback-0.5.5": Release055, "fallback-0.5.5.post3": Release055post3,
    "fallback-0.5.6": Release056, "fallback-0.5.6.post1": Release056post1, "fallback-0.5.7": Release057, "fallback-0.5.8": Release057,
    "fallback-0.5.9": Release059, "fallback-0.5.10": Release0510, "fallback-0.5.11": Release0511,
    "fallback-0.5.12": Release0512,
}
#: the ScheduleBatch / on_publish fallback (worker_probe_on_publish.py): the variant the engine applied -> its adapter
ON_PUBLISH_BY_VARIANT = {"fallback-0.5.13": Release013, "fallback-0.5.14": Release014, "fallback-0.5.15": Release015,
                         "fallback-0.5.16": Release016, "fallback-0.5.17": Release017, "fallback-0.5.18": Release018,
                         "fallback-0.5.19": Release019, "fallback-0.5.20": Release020,
                         "fallback-0.5.21": Release021, "fallback-0.5.22": Release022,
                         "fallback-0.5.23": Release023}
CURRENT = None  #: the adapter the running probe chose (its scene reads it)
