"""The worker probes' contract: the behaviour of the one-token-graph fallback of sglang 0.5.4 - 0.5.14, on CPU.

At start-up the patched EAGLEWorkerV2 builds a target attention backend and a target DECODE CUDA graph (one token per
request, the hidden states the draft reads) and, for the padded/single catch-up, a one-token draft-extend backend and
graph, for the batch sizes above N; a decode step of more than N requests swaps them in, runs the target's DECODE and
the speculative path's own draft extend at one token per request (or zero stubs: "skip"), and swaps the speculative
state back, also when a forward raises. The result goes to the release's real scheduler code.

One contract, checked here once, for both worker probes (worker_probe_graphs.py: 0.5.4 - 0.5.12, the ModelWorkerBatch
contract; worker_probe_on_publish.py: 0.5.13 - 0.5.14, the ScheduleBatch / on_publish one), each of which calls
main() with its map of variants to adapters (_releases.py). What differs per release comes from the adapter of the variant the engine
applied (SPECPATCH_VARIANT; a variant the probe has no adapter for fails the probe, saying so). The adapter names its
scene, the module that builds the batches, the fakes and the scheduler side of its release family:
_scene_model_worker_batch.py (0.5.4 - 0.5.12: ModelWorkerBatch, the n-stride result, verify_done) and
_scene_schedule_batch.py (0.5.13: ScheduleBatch, on_publish, the real Scheduler.run_batch). The fakes (_fakes.py) make
every value traceable: the target "samples" (input_id * 7 + seq_len) % V, the draft model answers (input_id +
position) % V, hidden states carry their position and request; the pieces of the checks that other probes share too
are in _contract.py.
"""

from __future__ import annotations

import importlib
import os
from types import SimpleNamespace

import _probe_env  # noqa: E402

PARAMS = _probe_env.setup()
report = _probe_env.Report()

import torch  # noqa: E402

from sglang.srt.model_executor.forward_batch_info import CaptureHiddenMode, ForwardMode  # noqa: E402
from sglang.srt.speculative import eagle_worker_v2  # noqa: E402
from sglang.srt.speculative.eagle_info import EagleDraftInput  # noqa: E402
from sglang.srt.speculative.eagle_worker_v2 import EAGLEWorkerV2  # noqa: E402

import _contract  # noqa: E402
import _fakes  # noqa: E402
import _releases  # noqa: E402
from _contract import assert_speculative_state, took_fallback, took_speculative_path  # noqa: E402

VARIANT = os.environ.get("SPECPATCH_VARIANT", "")
REL = S = None  #: the adapter of VARIANT and the scene of its release family (main sets them)

_fakes.on_cpu()


def check_patched():
    for name in ("_init_speculative_disable", "_speculation_disabled_for", "_forward_without_speculation",
                 "_spec_disable_build_plain_state", "_spec_disable_swap"):
        assert hasattr(EAGLEWorkerV2, name), f"EAGLEWorkerV2.{name} is missing: the target is not patched " \
            "with the one-token-graph fallback"
    return f"patched EAGLEWorkerV2 from {eagle_worker_v2.__file__}"


def check_build_scopes():
    """The one-token state's draft half (its draft-extend backend and graph) is built in the scopes the release's
    draft worker builds its own graphs in (draft TP, and the speculative MoE contexts its worker module has), its
    target half (the attention backend and the DECODE graph) outside every one of them, as the target's own graphs
    are: a MoE target's one-token graph is not captured with the draft's MoE runner / all-to-all backends, FP4
    all-gather setting, speculative MoE flag or TP group."""
    w = S.make_worker(2, catch_up="padded")
    expected = _fakes.draft_scope_names(eagle_worker_v2)
    target = [("attention backend", c.backend) for c in w.target_worker.model_runner.backend_calls] + \
        [("DECODE graph", g) for g in w.built.target_graphs]
    draft = [("draft-extend backend", b) for b in w.built.draft_backends] + \
        [("draft-extend graph", g) for g in w.built.draft_graphs]
    assert w.built.target_graphs and w.target_worker.model_runner.backend_calls, "no one-token target half was built"
    for what, built in target:
        assert not built.scope, f"the one-token target {what} was built inside the draft's scopes {built.scope} " \
            "(a MoE target would capture it with the draft's MoE settings)"
    if REL.draft_extend_graph:
        assert w.built.draft_graphs, "no one-token draft-extend graph was built (padded catch-up)"
    for what, built in draft:
        assert set(built.scope) == expected, \
            f"the one-token {what} was built in the scopes {built.scope}, not in the draft's {sorted(expected)}"
    assert not _fakes.SCOPES, f"draft scopes left entered after the build: {_fakes.SCOPES}"
    half = f"draft half in {'+'.join(sorted(expected))}" if draft else "no draft half on this release"
    return f"target backend and DECODE graph built outside the draft's scopes; {half}"


def check_fallback(catch_up: str, **options):
    """A decode step of bs 5 > N 2, run as the scene's scheduler runs it (`options`: the scene's variations)."""
    def run():
        # bs 5 and n 4: i * n is not i modulo bs, so a token at the wrong stride cannot land right by chance
        bs, n = 5, S.STRIDE
        w, batch = S.fallback_scene(catch_up, bs, **options)
        assert w.spec_disable_catch_up == catch_up
        exp = _fakes.expected(batch, REL.token)
        seq_lens_values = batch.seq_lens.clone()
        entry = SimpleNamespace()
        real_fallback = w._forward_without_speculation

        def seen_at_entry(b, *args):  # what the scheduler hands the worker (overlap: after the FutureMap resolve)
            entry.__dict__.update(
                seq_lens=b.seq_lens, seq_lens_values=b.seq_lens.clone(), seq_lens_cpu=b.seq_lens_cpu,
                seq_lens_cpu_values=None if b.seq_lens_cpu is None else b.seq_lens_cpu.clone(),
                sampling_info=b.sampling_info, args=args)
            return real_fallback(b, *args)

        w._forward_without_speculation = seen_at_entry
        result = S.run_fallback(w, batch, **options)
        assert vars(entry), "the step did not reach the fallback"
        S.check_entry(entry, **options)

        call = _contract.target_forward(w)  # routing: no draft, no verify, one target forward
        _, _, draft_backend, one_token_graph, target_backend, target_graph = w._spec_disable_plain
        assert w.built.target_graphs and call.graph_runner is w.built.target_graphs[0] is target_graph, \
            f"the target forward ran with graph runner {call.graph_runner}, not the plain DECODE graph runner " \
            "built at start-up"
        assert one_token_graph is (w.built.draft_graphs[0] if w.built.draft_graphs else None), \
            f"the one-token state holds the draft-extend graph {one_token_graph}, not the one built at start-up"
        assert call.attn_backend is target_backend is w.target_worker.model_runner.backend_calls[0].backend, \
            f"the target forward ran with attention backend {call.attn_backend}, not the plain one built with its graph"
        S.check_target_state(call, result)
        assert_speculative_state(w, "after a step without speculation")
        assert call.capture == CaptureHiddenMode.FULL, f"target capture mode {call.capture}"
        S.check_target_sampling(call, batch, entry)
        _contract.target_input(call, exp)
        if entry.seq_lens_cpu is not None:
            _contract.target_cpu_lens(call, exp, seq_lens_values)
        else:
            assert call.seq_lens_cpu is None and call.seq_lens_sum is None, \
                "the target got CPU sequence lengths the batch did not have (needs_cpu_seq_lens off)"
        _contract.target_slots(call, exp)
        S.check_target_batch(call, batch, exp)
        assert torch.equal(entry.seq_lens, entry.seq_lens_values), "seq_lens (shared with the scheduler) changed in place"
        if entry.seq_lens_cpu is not None:
            assert torch.equal(entry.seq_lens_cpu, entry.seq_lens_cpu_values), "seq_lens_cpu changed in place"

        # the result contract: the sampled token of request i at i * stride, one accepted each
        assert result.next_token_ids.shape == (bs * n,), \
            f"next_token_ids shape {tuple(result.next_token_ids.shape)}, not bs * {n} (the stride)"
        assert result.next_token_ids.dtype == torch.int32
        assert [int(result.next_token_ids[i * n]) for i in range(bs)] == [e.t for e in exp], \
            f"the sampled tokens are not at i * num_draft_tokens (stride {n})"
        assert result.accept_lens.tolist() == [1] * bs and result.accept_lens.dtype == torch.int32, \
            f"accept_lens {result.accept_lens.tolist()} are not all 1 (int32)"
        assert result.delay_sample_func is None, "delay_sample_func would postpone storing the draft input"
        assert getattr(result, "speculation_disabled", False), "the result is not marked as a step without speculation"
        if REL.batch_has_reqs:
            assert result.logits_output.hidden_states is None, "the target's hidden states stayed on the result " \
                "(copy_to_cpu unasked: nothing reads them after the catch-up)"
        else:  # the worker cannot tell who asked: handed over, as verify does
            assert result.logits_output.hidden_states is not None, "the target's hidden states were dropped"
        REL.check_logprobs(call, batch, result)
        REL.check_result_extra(result, exp)
        nd = result.next_draft_input
        assert isinstance(nd, EagleDraftInput), "next_draft_input is not an EagleDraftInput"
        sampled = getattr(nd, REL.token)
        assert sampled.tolist() == [e.t for e in exp] and sampled.dtype == torch.int32, \
            f"next_draft_input.{REL.token} is not the sampled tokens (int32)"
        new_seq_lens = result.new_seq_lens if REL.lens_on_result else nd.new_seq_lens
        assert new_seq_lens is not None, "the result carries no new_seq_lens"
        assert new_seq_lens.tolist() == [e.s + 1 for e in exp], "new_seq_lens are not s + 1"
        assert new_seq_lens.data_ptr() != entry.seq_lens.data_ptr(), "new_seq_lens is not a new tensor"
        S.check_result(w, result)
        _contract.draft_input_shapes(nd, bs)
        S.check_published(w, entry, exp, catch_up, **options)

        # the draft catch-up: one real token per request, at position s, from the target's row for that request,
        # through the speculative path's own draft extend at one token per request, on the one-token graph
        dw = w.draft_worker
        if catch_up == "skip":
            assert not dw.extend_decode_calls, "skip: the draft extend ran"
            assert not dw.draft_runner.calls, "skip: the draft model ran"
            assert not nd.topk_p.any() and not nd.topk_index.any() and not nd.hidden_states.any(), \
                "skip: the draft input is not the zero stubs"
            detail = "no draft catch-up, zero stubs"
        else:
            forwards = dw.draft_runner.calls  # eager forwards and replays of the one-token graph
            assert len(forwards) == 1, f"the draft model ran {len(forwards)} times, not once"
            assert len(dw.extend_decode_calls) == 1, "_draft_extend_for_decode did not run (once)"
            de = dw.extend_decode_calls[0]
            assert (de.steps, de.draft_tokens) == (0, 1), \
                f"the draft extend ran with {de.steps} steps / {de.draft_tokens} tokens, not the one-token state"
            assert de.graph is one_token_graph and de.backend is draft_backend, \
                f"the draft extend ran with {de.graph} / {de.backend}, not the one-token graph and its backend"
            if REL.draft_runner_backend:  # the release's draft extend reads the draft runner's backend
                assert de.runner_backend is draft_backend, f"the draft runner's attention backend was " \
                    f"{de.runner_backend} during the draft extend, not the one-token state's {draft_backend}"
            assert de.next_token_ids.tolist() == [e.t for e in exp], \
                f"the draft extend got tokens {de.next_token_ids.tolist()}, not one per request"
            _contract.catch_up_extend(de, exp, seq_lens_values)
            if dw.spec_extend_graph is not None:
                assert not dw.spec_extend_graph.consulted, "the speculative draft-extend graph (n tokens) was " \
                    "consulted by the fallback"
            rc = forwards[0]
            detail = S.check_catch_up_graph(de, rc, bs)
            assert rc.out_cache_loc.tolist() == [e.slot for e in exp], "the draft model wrote other KV slots than s"
            _contract.catch_up_rows(rc, nd, exp)
        accepted = S.check_scheduler_accepts(w, batch, result, exp, seq_lens_values, catch_up, **options)
        return f"bs {bs} > N 2 ({catch_up}{S.case(**options)}): the plain DECODE graph and backend installed, " \
            f"{detail}, state restored, {accepted}"
    return run


def check_extend_untouched():
    for mode, in_batch in REL.prefill_modes:
        w = S.make_worker(1)
        batch = S.decode_batch(0 if mode.is_idle() else 5, mode=mode, is_extend_in_batch=in_batch)
        S.step(w, batch)
        assert len(w.draft_worker.extend_prefill_calls) == 1, f"{mode.name} (is_extend_in_batch={in_batch}) " \
            "did not take the extend branch"
        assert not w.draft_worker.draft_calls and not w.verify_calls
        assert len(w.target_worker.calls) == 1 and w.target_worker.calls[0].mode == mode, \
            "the extend branch's target forward was changed"
        call = w.target_worker.calls[0]
        assert call.graph_runner is w.target_worker.model_runner.verify_graph and \
            call.attn_backend is w.target_worker.model_runner.verify_backend, \
            "the extend branch ran on the one-token state (or lost the target's CUDA graphs)"
        if REL.on_publish:
            assert len(w.published) == 1, "the extend branch's on_publish was changed"
    return " and ".join(f"{m.name} (is_extend_in_batch={b})" for m, b in REL.prefill_modes) + \
        " keep the prefill path even above N"


def check_dp_attention():
    # ranks with 3 and 40 requests, N = 16: the global size 43 decides, on the small rank and on an idle one
    w = S.make_worker(16, dp_attention=True, catch_up="padded")
    batch = S.decode_batch(3, global_num_tokens=[3, 40])
    S.step(w, batch)
    assert took_fallback(w), "bs 3 of a global 43 > N 16 did not take the fallback (ranks would disagree)"
    S.check_dp_target(w, batch)
    w = S.make_worker(16, dp_attention=True, catch_up="padded")
    result = S.step(w, S.decode_batch(0, mode=ForwardMode.IDLE, global_num_tokens=[0, 40]))
    calls = w.target_worker.calls
    assert not w.draft_worker.draft_calls and not w.verify_calls, "an idle rank speculated while the others did not"
    assert len(calls) == 1 and calls[0].mode.is_idle() and calls[0].spec_info_is_none, "idle rank: no IDLE target"
    plain = w._spec_disable_plain
    assert calls[0].attn_backend is plain[4] is w.target_worker.model_runner.backend_calls[0].backend and \
        calls[0].graph_runner is plain[5], \
        "idle rank: the target did not run on the one-token state"
    assert_speculative_state(w, "after an idle rank's step")
    assert result.next_token_ids.shape == (0,) and result.accept_lens.shape == (0,)
    new_seq_lens = result.new_seq_lens if REL.lens_on_result else result.next_draft_input.new_seq_lens
    assert new_seq_lens is not None and new_seq_lens.shape == (0,)
    if REL.on_publish:
        assert len(w.published) == 1 and w.published[0].shape == (0,), "the idle rank did not publish (empty)"
    assert len(w.draft_worker.extend_decode_calls) == 1, \
        "the idle rank skipped the draft catch-up (collectives would not match)"
    S.check_dp_idle_catch_up(w)
    # every rank replays the graph of the largest rank's batch, and a global batch above 16 on 2 ranks has a rank
    # of 9 or more: the one-token graphs start there, not above 16 (a rank of 9 would replay a padded graph)
    captured = w.built.target_graphs[0].capture_bs if w.built.target_graphs else []
    assert captured == [bs for bs in S.CUDA_GRAPH_BS if bs >= 9], \
        f"DP attention on 2 ranks, N 16: the one-token graphs capture batch sizes {captured}, not those from 9"
    # global 3 + 10 = 13 <= 16: every rank speculates, including the big one
    w = S.make_worker(16, dp_attention=True)
    S.step(w, S.decode_batch(10, global_num_tokens=[3, 10]))
    assert took_speculative_path(w), "a global 13 <= N 16 did not speculate"
    return "DP attention: the summed global batch size decides on every rank, idle ranks included; graphs from " \
        "ceil((N + 1) / dp_size)"


def check_restored_on_error():
    for what, fails, options in (("target forward", lambda w: w.target_worker, {}),
                                 ("draft extend", lambda w: w.draft_worker.draft_runner, S.EAGER_DRAFT_EXTEND)):
        w = S.make_worker(1, catch_up="padded", **options)
        fails(w).fail_forward = True
        try:
            S.step(w, S.decode_batch(2))
        except RuntimeError:
            pass
        else:
            raise AssertionError(f"the {what}'s exception was swallowed")
        assert_speculative_state(w, f"after a {what} that raised")
        if REL.on_publish and what == "target forward":
            assert not w.published, "lengths were published for a step whose target forward failed"
    return "a target forward or draft extend that raises still gets the speculative state back" + \
        (", and nothing is published for a failed target forward" if REL.on_publish else "")


def check_grammar():
    w = S.make_worker(1)
    batch = S.decode_batch(2, has_grammar=True)
    S.step(w, batch)
    info = S.target_sampling_info(w.target_worker.calls[0])
    if not REL.grammar_to_sampler:
        assert info.grammars is None and info.vocab_mask is None, "a grammar reached the target's sampler"
        assert batch.sampling_info.grammars is not None, "the batch's own sampling info was changed"
        return "grammar left out, as on this release's speculative path (its state never advances)"
    S.check_grammars_reached(info, batch)
    return "grammar objects reach the target's sampler (it builds the vocab mask)"


def main(by_variant: dict):
    """Run the contract with the adapter `by_variant` gives the variant the engine applied."""
    global REL, S
    REL = _releases.CURRENT = _probe_env.adapter(by_variant, "_releases.py")
    S = importlib.import_module(REL.scene)
    print(f"release adapter {type(REL).__name__} for variant {VARIANT} ({REL.scene})", flush=True)
    report.gate("patched", check_patched)
    for name, check in S.START_UP_CHECKS:
        report.run(name, check)
    report.run("start-up: draft half in the draft's scopes, target half outside", check_build_scopes)
    report.run("threshold 0 always speculates", lambda: _contract.threshold_zero(S))
    report.run("batch <= N speculates", lambda: _contract.small_batch_speculates(S))
    for name, catch_up, options in S.FALLBACK_CASES:
        report.run(f"batch > N falls back ({name})", check_fallback(catch_up, **options))
    for name, check in S.STEP_CHECKS:
        report.run(name, check)
    report.run("extend batches untouched", check_extend_untouched)
    if REL.dp_attention:  # else the variant refuses DP attention at start-up (server_args_probe_compat.py)
        report.run("DP attention decides on the global batch size", check_dp_attention)
    report.run("environment variable", lambda: _contract.env_var(S, PARAMS.get("catchup_mode")))
    report.run("start-up log line", lambda: _contract.log_once(S))
    report.run("state restored on error", check_restored_on_error)
    report.run("NaN detection", lambda: _contract.nan_detection(S, REL))
    report.run("grammar", check_grammar)
    report.run("worker refusals", lambda: _contract.refusals(S))
    for name, check in S.LAST_CHECKS:
        report.run(name, check)
    for name in REL.extra_checks:
        report.run(name, lambda check=_contract.EXTRA_CHECKS[name]: check(REL))
    report.finish()

