"""The fallback behaviour probe (worker_probe.py, written for 0.5.9) run against another release of the same shape.

worker_probe.py drives the patched EAGLEWorkerV2 with fakes and hands the result to the release's real scheduler
code. Its checks are the contract of the fallback. Where a release's own code differs from 0.5.9's, this wrapper
edits the probe's source before running it; each edit is listed below with its reason, applies only to the
releases that have the difference (found by looking at the release, not by version number), and must find the
text it replaces (else the probe fails: worker_probe.py changed and this list needs a look). Nothing about the
patched worker's contract is relaxed; 0.5.10+ gets an extra check of the logprob rows.

- `ModelWorkerBatch.all_extend_in_batch` (0.5.10+): a new required field; False for the probe's batches.
- `ForwardBatch.init_new` reads `req.rid` (0.5.10+): the probe's batches get requests with an id.
- `_draft_extend_for_prefill` takes `mm_input_embeds` (0.5.10+): the probe's recording override accepts it.
- `ForwardBatch.init_new` reads `model_runner.use_ngram_embedding` (0.5.10+): the fake draft runner says False.
- 0.5.4-0.5.6: `ModelRunner.forward` returns `(logits_output, can_run_graph)`, so the fake draft runner does too;
  the result gets no per-request accepted counts, so that assertion keeps only the total.
- 0.5.5: `FutureMap(max_running_requests, device, spec_algo)`; the worker routes decode first with no IDLE or
  `is_extend_in_batch` handling, so only EXTEND is checked for the prefill path and the DP-attention routing check
  is dropped (the variant refuses DP attention at start-up; server_args_probe_compat.py checks that);
  `ModelWorkerBatch` has no `reqs`/`has_grammar`; the grammar check becomes "grammar left out" (the
  speculative path of 0.5.5 ignores grammar and the scheduler never advances it for spec-v2 tokens);
  the draft extend calls `draft_runner.model.forward(input_ids, positions, batch)` (the fake runner has
  one); KV space is tracked with `allocate_lens`, which the probe's batches carry and the result must pass on
  (checked).
- No `Req.update_spec_acceptance_histogram` (0.5.4-0.5.8): the scheduler keeps no acceptance histogram, so the
  histogram assertion is dropped.
- No `SamplingBatchInfo.acc_linear_penalties` (0.5.10+): the penalties are `acc_additive_penalties` and
  `acc_scaling_penalties`; the probe's sampling info and its "stale penalties dropped" assertions use those.
- Penalties accumulated by spec v2 (0.5.11+, "relaxed" penalties applied by verify): the fallback keeps them, so
  the assertion becomes "passed on unchanged".
- 0.5.11+ scheduler: `kv_committed_len` is pre-claimed by prepare_for_decode (a request enters the step with s),
  the accepted-draft counters are renamed, and requests have `spec_accepted_drafts`.
- 0.5.12: `EagleDraftInput.verified_id` (and the FutureMap buffer) is `bonus_tokens`; the scheduler's
  `_resolve_spec_overlap_tokens` reads the stride from `result.speculative_num_draft_tokens` (checked), calls the
  worker's adaptive hook, skips retracted or finished requests and counts "correct drafts".
- No `EAGLEWorkerV2.enable_nan_detection` (0.5.10+): verify() checks NaN with `maybe_detect_nan` under
  SGLANG_SPEC_NAN_DETECTION; the NaN check switches that variable instead of the attribute.
- Spec-v2 decode logprobs (0.5.10+): the fallback asks the target for logprobs when the batch does (the probe's
  batches do), so the "no logprobs" assertion becomes "the batch's return_logprob is passed on", and the fake
  target returns logprobs so that their shape can be checked: one row of one value per request.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(1, HERE)
import _probe_env  # noqa: E402

_probe_env.setup()

from sglang.srt.managers.schedule_batch import ModelWorkerBatch, Req  # noqa: E402
from sglang.srt.managers.scheduler_output_processor_mixin import SchedulerOutputProcessorMixin  # noqa: E402
from sglang.srt.speculative.eagle_info import EagleDraftInput  # noqa: E402
from sglang.srt.speculative.eagle_info_v2 import EagleDraftInputV2Mixin  # noqa: E402
from sglang.srt.sampling.sampling_batch_info import SamplingBatchInfo  # noqa: E402
from sglang.srt.model_executor.forward_batch_info import ForwardBatch  # noqa: E402
from sglang.srt.speculative.eagle_worker_v2 import EagleDraftWorker, EAGLEWorkerV2  # noqa: E402

PATH = os.path.join(HERE, "worker_probe.py")
FIELDS = {f.name for f in dataclasses.fields(SamplingBatchInfo)}
EDITS = []  # (reason, old, new)

if "all_extend_in_batch" in {f.name for f in dataclasses.fields(ModelWorkerBatch)}:
    EDITS.append(("ModelWorkerBatch.all_extend_in_batch (0.5.10+, required; False for these batches)",
                  "is_extend_in_batch=is_extend_in_batch, can_run_dp_cuda_graph=False,",
                  "is_extend_in_batch=is_extend_in_batch, all_extend_in_batch=False, can_run_dp_cuda_graph=False,"))

if "rids=" in inspect.getsource(ForwardBatch.init_new):
    EDITS.append(("ForwardBatch.init_new reads req.rid (0.5.10+)",
                  "reqs=[None] * bs, has_grammar=has_grammar)",
                  "reqs=[SimpleNamespace(rid=f\"req-{i}\") for i in range(bs)], has_grammar=has_grammar)"))

if "mm_input_embeds" in inspect.getsource(EagleDraftWorker._draft_extend_for_prefill):
    EDITS.append(("_draft_extend_for_prefill takes mm_input_embeds (0.5.10+)",
                  "def _draft_extend_for_prefill(self, batch, target_hidden_states, next_token_ids):",
                  "def _draft_extend_for_prefill(self, batch, target_hidden_states, next_token_ids, *more):"))

if "use_ngram_embedding" in inspect.getsource(ForwardBatch.init_new):
    EDITS.append(("ForwardBatch.init_new reads model_runner.use_ngram_embedding (0.5.10+)",
                  "        self.model_is_mrope = False\n        self.calls = []\n",
                  "        self.model_is_mrope = False\n        self.use_ngram_embedding = False\n"
                  "        self.is_hybrid_swa = False\n        self.calls = []\n"))

SCHEDULER_BLOCK = (
    "    result.copy_done = torch.get_device_module(\"cpu\").Event()\n"
    "    result.copy_to_cpu(return_logprob=True)\n"
    "    reqs = [FakeReq(e.s - 1) for e in exp]\n"
    "    scheduler = SimpleNamespace(draft_worker=w)\n"
    "    tokens = SchedulerOutputProcessorMixin._resolve_spec_overlap_token_ids(\n"
    "        scheduler, result, SimpleNamespace(reqs=reqs))\n"
    "    assert tokens == [[e.t] for e in exp], f\"the scheduler read {tokens}, not one sampled token per request\"\n"
    "    assert [r.kv_committed_len for r in reqs] == [e.s for e in exp], \"kv_committed_len did not advance by 1\"\n"
    "    assert result.num_accepted_tokens == 0 and result.accept_length_per_req_cpu == [0] * bs\n"
    "    assert all(r.histogram == [0] for r in reqs)\n"
)
if not hasattr(SchedulerOutputProcessorMixin, "_resolve_spec_overlap_token_ids"):  # 0.5.12
    EDITS.append((
        "0.5.12 scheduler: _resolve_spec_overlap_tokens reads the stride from the result, feeds the worker's "
        "adaptive hook, skips retracted/finished requests, counts correct drafts; kv_committed_len pre-claimed",
        SCHEDULER_BLOCK,
        "    result.copy_done = torch.get_device_module(\"cpu\").Event()\n"
        "    result.copy_to_cpu(return_logprob=True)\n"
        "    assert result.speculative_num_draft_tokens == N_DRAFT, \"the result does not carry its stride\"\n"
        "    reqs = [FakeReq(e.s) for e in exp]  # prepare_for_decode pre-claimed the bonus slot\n"
        "    for r in reqs:\n"
        "        r.is_retracted, r.finished, r.spec_num_correct_drafts = False, (lambda: False), 0\n"
        "        r.update_spec_correct_drafts_histogram = r.update_spec_acceptance_histogram\n"
        "    w.adaptive_controller = None  # not adaptive: on_verify_complete_cpu is a no-op\n"
        "    scheduler = SimpleNamespace(draft_worker=w, model_worker=w)\n"
        "    tokens = SchedulerOutputProcessorMixin._resolve_spec_overlap_tokens(\n"
        "        scheduler, result, SimpleNamespace(reqs=reqs))\n"
        "    assert tokens == [[e.t] for e in exp], f\"the scheduler read {tokens}, not one sampled token per request\"\n"
        "    assert [r.kv_committed_len for r in reqs] == [e.s for e in exp], \"kv_committed_len did not advance by 1\"\n"
        "    assert result.num_correct_drafts == 0 and result.num_correct_drafts_per_req_cpu == [0] * bs\n"
        "    assert all(r.histogram == [0] for r in reqs)\n"))
    RESOLVE = ""
else:
    RESOLVE = inspect.getsource(SchedulerOutputProcessorMixin._resolve_spec_overlap_token_ids)
if "verified_id" not in {f.name for f in dataclasses.fields(EagleDraftInput)}:  # 0.5.12+
    EDITS.append(("EagleDraftInput.verified_id renamed bonus_tokens (0.5.12+; FutureMap too)", None, None))
if "kv_committed_len += accept_lens[i] - 1" in RESOLVE:
    EDITS.append(("kv_committed_len pre-claim (0.5.11+): prepare_for_decode already added 1 at step entry",
                  "    reqs = [FakeReq(e.s - 1) for e in exp]\n",
                  "    reqs = [FakeReq(e.s) for e in exp]\n"))
if "num_accepted_drafts_per_req_cpu" in RESOLVE:
    EDITS.append(("accepted-draft counters renamed (0.5.11+)",
                  "    assert result.num_accepted_tokens == 0 and result.accept_length_per_req_cpu == [0] * bs\n",
                  "    assert result.num_accepted_drafts == 0 and result.num_accepted_drafts_per_req_cpu == [0] * bs\n"))
if "spec_accepted_drafts" in RESOLVE:
    EDITS.append(("Req.spec_accepted_drafts (0.5.11+)",
                  "        self.spec_accepted_tokens = 0\n",
                  "        self.spec_accepted_tokens = 0\n        self.spec_accepted_drafts = 0\n"))

if "spec_algorithm.is_standalone()" in inspect.getsource(EagleDraftInputV2Mixin.prepare_for_extend_to_fill_draft_kvcache):
    EDITS.append(("the draft extend asks the draft runner for its algorithm (0.5.12+)",
                  "        self.model_is_mrope = False\n",
                  "        self.model_is_mrope = False\n        self.spec_algorithm = SpeculativeAlgorithm.EAGLE\n"))

if "speculative_adaptive" in inspect.getsource(EAGLEWorkerV2._init_speculative_disable):  # the 0.5.12+ port
    EDITS.append(("extra check: --speculative-adaptive is refused beside the threshold (0.5.12+)",
                  "    report.run(\"worker refusals\", check_refusals)\n",
                  "    report.run(\"worker refusals\", check_refusals)\n"
                  "    report.run(\"adaptive speculation refused\", check_adaptive_refused)\n"))
    EDITS.append(("extra check: --speculative-adaptive is refused beside the threshold (0.5.12+)",
                  "\ndef main():\n",
                  "\ndef check_adaptive_refused():\n"
                  "    w = EAGLEWorkerV2.__new__(EAGLEWorkerV2)\n"
                  "    w.topk, w._target_worker = 1, FakeTargetWorker()\n"
                  "    try:\n"
                  "        with envs.SGLANG_SPEC_DISABLE_CATCH_UP.override(\"padded\"):\n"
                  "            w._init_speculative_disable(SimpleNamespace(speculative_disable_batch_threshold=3,\n"
                  "                                                        enable_dp_attention=False,\n"
                  "                                                        speculative_adaptive=True))\n"
                  "    except ValueError as exc:\n"
                  "        assert \"--speculative-adaptive\" in str(exc), str(exc)\n"
                  "    else:\n"
                  "        raise AssertionError(\"--speculative-adaptive was accepted beside the threshold\")\n"
                  "    return \"--speculative-adaptive beside the threshold is refused at start-up\"\n"
                  "\n\ndef main():\n"))

from sglang.srt.model_executor import forward_batch_info  # noqa: E402

if not inspect.signature(forward_batch_info.enable_num_token_non_padded).parameters:  # 0.5.12+
    EDITS.append(("enable_num_token_non_padded takes no argument (0.5.12+)",
                  "forward_batch_info.enable_num_token_non_padded = lambda server_args: False",
                  "forward_batch_info.enable_num_token_non_padded = lambda *args: False"))

if ", _ = self.draft_runner.forward(" in inspect.getsource(EagleDraftWorker):
    EDITS.append(("ModelRunner.forward returns (logits_output, can_run_graph) (0.5.4-0.5.6)",
                  "        return SimpleNamespace(logits_output=LogitsProcessorOutput(next_token_logits=logits, "
                  "hidden_states=hidden))\n",
                  "        return LogitsProcessorOutput(next_token_logits=logits, hidden_states=hidden), False\n"))
if RESOLVE and "accept_length_per_req_cpu" not in RESOLVE and "num_accepted_drafts_per_req_cpu" not in RESOLVE:
    EDITS.append(("no per-request accepted counts on the result (0.5.4-0.5.6)",
                  "    assert result.num_accepted_tokens == 0 and result.accept_length_per_req_cpu == [0] * bs\n",
                  "    assert result.num_accepted_tokens == 0\n"))

if "self.draft_runner.model.forward(" in inspect.getsource(EagleDraftWorker._draft_extend_for_decode):
    EDITS.append(("the draft extend calls draft_runner.model.forward(input_ids, positions, batch) (0.5.4-0.5.5)",
                  "        self.model_is_mrope = False\n",
                  "        self.model_is_mrope = False\n"
                  "        self.is_draft_worker = True\n"
                  "        self.model = SimpleNamespace(forward=lambda input_ids, positions, forward_batch:\n"
                  "                                     self.forward(forward_batch)[0])\n"))
    EDITS.append(("verify(batch, cur_allocate_lens) (0.5.4-0.5.5)",
                  "    def fake_verify(batch):", "    def fake_verify(batch, *allocate_lens):"))
if "allocate_lens" in {f.name for f in dataclasses.fields(EagleDraftInput)}:
    EDITS += [
        ("allocate_lens scheme (0.5.4-0.5.5): the batch's draft input carries the reserved lengths",
         "new_seq_lens=seq_lens.clone(), capture_hidden_mode=CaptureHiddenMode.FULL)",
         "new_seq_lens=seq_lens.clone(), capture_hidden_mode=CaptureHiddenMode.FULL,\n"
         "        allocate_lens=seq_lens + N_DRAFT)"),
        ("allocate_lens scheme (0.5.4-0.5.5): passed on in the result and the next draft input",
         "    assert result.num_accepted_tokens == 0\n",
         "    assert result.num_accepted_tokens == 0\n"
         "    assert result.allocate_lens.tolist() == [e.s + N_DRAFT for e in exp], \"allocate_lens not passed on\"\n"
         "    assert result.next_draft_input.allocate_lens.tolist() == [e.s + N_DRAFT for e in exp]\n"),
    ]

if "reqs" not in {f.name for f in dataclasses.fields(ModelWorkerBatch)}:  # 0.5.4-0.5.5
    EDITS += [
        ("ModelWorkerBatch has no reqs/has_grammar (0.5.4-0.5.5)",
         "capture_hidden_mode=CaptureHiddenMode.FULL, reqs=[None] * bs, has_grammar=has_grammar)",
         "capture_hidden_mode=CaptureHiddenMode.FULL)"),
        ("no grammar on 0.5.4-0.5.5's speculative path: the fallback leaves it out too",
         "    assert info.grammars is batch.sampling_info.grammars, \"the grammars did not reach the target's sampler\"\n"
         "    return \"grammar objects reach the target's sampler (it builds the vocab mask)\"\n",
         "    assert info.grammars is None and info.vocab_mask is None, \"a grammar reached the target's sampler\"\n"
         "    assert batch.sampling_info.grammars is not None, \"the batch's own sampling info was changed\"\n"
         "    return \"grammar left out, as on this release's speculative path (its state never advances)\"\n"),
    ]

from sglang.srt.managers import overlap_utils  # noqa: E402

if "chunked_prefill_size" not in inspect.signature(overlap_utils.FutureMap.__init__).parameters:  # 0.5.4-0.5.5
    EDITS.append(("FutureMap(max_running_requests, device, spec_algo) (0.5.4-0.5.5)",
                  "overlap_utils.FutureMap(max_running_requests=8, chunked_prefill_size=64, context_len=128, device=\"cpu\",",
                  "overlap_utils.FutureMap(max_running_requests=8, device=\"cpu\","))
if "is_extend_in_batch" not in inspect.getsource(EAGLEWorkerV2.forward_batch_generation):  # 0.5.4-0.5.5
    # The worker routes decode first and has no IDLE / is_extend_in_batch handling: DP attention does not work
    # with this spec-v2 worker, and the variant refuses it at start-up (server_args_probe_compat checks that).
    EDITS += [
        ("no is_extend_in_batch / IDLE in this release's worker: only EXTEND takes the prefill path",
         "    for mode, in_batch in ((ForwardMode.EXTEND, False), (ForwardMode.DECODE, True), (ForwardMode.IDLE, True)):\n",
         "    for mode, in_batch in ((ForwardMode.EXTEND, False),):\n"),
        ("no DP attention with this release's spec-v2 worker (refused at start-up): no DP routing check",
         "    report.run(\"DP attention decides on the global batch size\", check_dp_attention)\n", ""),
    ]

if RESOLVE and "kv_committed_len" not in RESOLVE:  # 0.5.4-0.5.5: KV is tracked by allocate_lens, checked above
    EDITS.append(("no kv_committed_len in this release's scheduler (allocate_lens scheme)",
                  "    assert [r.kv_committed_len for r in reqs] == [e.s for e in exp], \"kv_committed_len did not advance by 1\"\n",
                  ""))

if not hasattr(Req, "update_spec_acceptance_histogram") and not hasattr(Req, "update_spec_correct_drafts_histogram"):
    EDITS.append(("no acceptance histogram in this release's scheduler",
                  "    assert all(r.histogram == [0] for r in reqs)\n",
                  "    assert all(r.histogram == [] for r in reqs)  # compat: the release keeps no histogram\n"))

SPEC_V2_PENALTIES = "cumulate_output_tokens" in inspect.getsource(EagleDraftInputV2Mixin.prepare_for_decode)
if "acc_linear_penalties" not in FIELDS:
    EDITS += [
        ("penalties renamed", "vocab_size=V, acc_linear_penalties=torch.full((bs, V), -1e4), device=\"cpu\")",
         "vocab_size=V, acc_additive_penalties=torch.full((bs, V), -1e4),\n"
         "        acc_scaling_penalties=torch.full((bs, V), 2.0), device=\"cpu\")"),
        ("penalties renamed", "assert call.sampling_info.acc_linear_penalties is None, \"stale penalties were applied\"",
         "assert call.sampling_info.acc_additive_penalties is batch.sampling_info.acc_additive_penalties and "
         "call.sampling_info.acc_scaling_penalties is batch.sampling_info.acc_scaling_penalties, "
         "\"the penalties (accumulated by spec v2 and applied by verify in this release) were not passed on\""
         if SPEC_V2_PENALTIES else
         "assert call.sampling_info.acc_additive_penalties is None and "
         "call.sampling_info.acc_scaling_penalties is None, \"stale penalties were applied\""),
        ("penalties renamed",
         "assert batch.sampling_info.acc_linear_penalties is not None, \"the batch's own sampling info was changed\"",
         "assert batch.sampling_info.acc_additive_penalties is not None and "
         "batch.sampling_info.acc_scaling_penalties is not None, \"the batch's own sampling info was changed\""),
    ]

if "enable_nan_detection" not in inspect.getsource(EAGLEWorkerV2.__init__):
    EDITS += [
        ("NaN detection by SGLANG_SPEC_NAN_DETECTION",
         "def check_nan_detection():\n    w = make_worker(1, nan_detection=True)\n    w.target_worker.nan_logits = True\n"
         "    try:\n        w.forward_batch_generation(decode_batch(2))\n    except ValueError as exc:\n",
         "def check_nan_detection():\n    w = make_worker(1, nan_detection=True)\n    w.target_worker.nan_logits = True\n"
         "    try:\n        with envs.SGLANG_SPEC_NAN_DETECTION.override(True):\n"
         "            w.forward_batch_generation(decode_batch(2))\n    except (ValueError, RuntimeError) as exc:\n"),
        ("NaN detection by SGLANG_SPEC_NAN_DETECTION",
         "    w = make_worker(1, nan_detection=False)\n    w.target_worker.nan_logits = True\n"
         "    w.forward_batch_generation(decode_batch(2))\n",
         "    w = make_worker(1, nan_detection=False)\n    w.target_worker.nan_logits = True\n"
         "    with envs.SGLANG_SPEC_NAN_DETECTION.override(False):\n        w.forward_batch_generation(decode_batch(2))\n"),
    ]

if "acc_linear_penalties" not in FIELDS:  # 0.5.10+: spec-v2 decode returns logprobs
    EDITS += [
        ("logprobs passed on",
         "assert not call.return_logprob, \"the target computed logprobs (the spec path does not, in 0.5.9)\"",
         "assert call.return_logprob == batch.return_logprob, \"the batch's return_logprob did not reach the target\"\n"
         "        lp = result.logits_output.next_token_logprobs\n"
         "        assert lp is not None and tuple(lp.shape) == (bs, 1), \\\n"
         "            f\"logprobs {None if lp is None else tuple(lp.shape)}: the spec-v2 scheduler reads a row per request\"\n"
         "        assert [row[0] for row in lp.tolist()] == [float(-10.0 * i) for i in range(bs)], \\\n"
         "            \"the logprob rows are not the target's, in request order\""),
        ("the fake target returns logprobs when asked",
         "        return GenerationBatchResult(\n"
         "            logits_output=LogitsProcessorOutput(next_token_logits=logits, hidden_states=hidden),\n",
         "        logprobs = -10.0 * torch.arange(bs, dtype=torch.float32) if b.return_logprob else None\n"
         "        return GenerationBatchResult(\n"
         "            logits_output=LogitsProcessorOutput(next_token_logits=logits, hidden_states=hidden,\n"
         "                                                next_token_logprobs=logprobs),\n"),
    ]

if "_mamba_verify_update" in inspect.getsource(EAGLEWorkerV2):  # 0.5.10+: verify updates mamba/GDN state
    EDITS.append(("extra check: hybrid mamba/GDN targets are refused (verify updates their state)",
                  "    report.run(\"worker refusals\", check_refusals)\n",
                  "    report.run(\"worker refusals\", check_refusals)\n"
                  "    report.run(\"hybrid mamba/GDN target refused\", check_hybrid_refused)\n"))
    EDITS.append(("extra check: hybrid mamba/GDN targets are refused (verify updates their state)",
                  "\ndef main():\n",
                  "\ndef check_hybrid_refused():\n"
                  "    for attr in (\"hybrid_gdn_config\", \"mamba2_config\"):\n"
                  "        target = FakeTargetWorker()\n"
                  "        setattr(target.model_runner, attr, object())\n"
                  "        w = EAGLEWorkerV2.__new__(EAGLEWorkerV2)\n"
                  "        w.topk, w._target_worker = 1, target\n"
                  "        try:\n"
                  "            with envs.SGLANG_SPEC_DISABLE_CATCH_UP.override(\"padded\"):\n"
                  "                w._init_speculative_disable(SimpleNamespace(speculative_disable_batch_threshold=3,\n"
                  "                                                            enable_dp_attention=False))\n"
                  "        except ValueError as exc:\n"
                  "            assert \"mamba\" in str(exc), str(exc)\n"
                  "        else:\n"
                  "            raise AssertionError(f\"a target with {attr} was accepted\")\n"
                  "    return \"targets with hybrid_gdn_config or mamba2_config are refused at start-up\"\n"
                  "\n\ndef main():\n"))


def main():
    src = open(PATH, encoding="utf-8").read()
    for reason, old, new in EDITS:
        if old is None:  # a rename everywhere in the probe
            src = src.replace("verified_id", "bonus_tokens")
            continue
        if src.count(old) != 1:
            print(f"PROBE-FAIL: compat edit '{reason}' found {src.count(old)} times in worker_probe.py "
                  "(expected once): the 0.5.9 probe changed; update probes/worker_probe_compat.py")
            sys.exit(1)
        src = src.replace(old, new)
    if EDITS:
        print("compat edits: " + "; ".join(sorted({r for r, _, _ in EDITS})), flush=True)
    code = compile(src, PATH, "exec")
    exec(code, {"__name__": "__main__", "__file__": PATH})


if __name__ == "__main__":
    main()
