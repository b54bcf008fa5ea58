"""Server-arguments probe of the dynamic speculation disable (the fallback variants, 0.5.4-0.5.14), on CPU.

The flag through sglang's own parser and ServerArgs.from_cli_args; the environment variable and its precedence;
the start-up refusals, through the whole ServerArgs.__post_init__ of a real (tiny, local, weightless) Llama config
on device "cpu", so that sglang's own argument handling runs first: its automatic topk 4 for Llama, the spec-v2
switch, max_running_requests = 48. The checks are written once; what a release does differently is a release
adapter below, chosen by the variant the engine applied (SPECPATCH_VARIANT; none: the recipe's own steps).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import os
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the recipe folder
sys.path.insert(1, os.path.dirname(os.path.abspath(__file__)))
import _probe_env  # noqa: E402

PARAMS = _probe_env.setup()
report = _probe_env.Report()

from sglang.srt.environ import envs  # noqa: E402
from sglang.srt.server_args import ServerArgs  # noqa: E402

DEFAULT = int(PARAMS.get("threshold_default", 0))


class Release059:
    """The recipe's own steps, written for 0.5.9 (also the 0.5.7-0.5.10 variants)."""

    v1_env = None  #: the SGLANG_ENABLE_SPEC_V2 value that selects the v1 worker (None: unset, v2 is opt-in)
    v1_refusal = "SGLANG_ENABLE_SPEC_V2=1"  #: what the refusal of the v1 worker names
    has_v1_worker = True  #: else spec v2 off / no overlap is EAGLEWorkerV2's synchronous path, which is served
    multi_layer = True  #: ServerArgs.enable_multi_layer_eagle exists (refused)
    skip_all_gather = True  #: SGLANG_SCHEDULER_SKIP_ALL_GATHER exists (refused with DP attention)
    beta_spec = False  #: spec v2 is the --enable-beta-spec flag, for EAGLE only (no SGLANG_ENABLE_SPEC_V2)
    dp_refused = False  #: DP attention refused (a spec-v2 worker without IDLE handling)
    #: SGLANG_ENABLE_SPEC_V2 exists (else spec v2 is always on, and the probe's "spec v2 off" is the synchronous path's
    #: own flag, --disable-overlap-schedule)
    spec_v2_env = True
    #: sglang keeps the overlap scheduler on for speculative decoding on device "cpu" (0.5.16: it turns it off there,
    #: _disable_overlap_schedule_for_cpu, so the probe's full __post_init__ on cpu gets the synchronous path)
    cpu_overlap = True
    #: --speculative-use-rejection-sampling exists (0.5.14+): refused with the catch-up skipped, which leaves the
    #: draft's probabilities unset for the next speculative step
    rejection_sampling = False
    extra_checks: tuple = ()
    check_logger = "sglang.srt.server_args"  #: the logger the check warns on

    @staticmethod
    def fields(cls) -> tuple:
        """The declared fields of a record class (ServerArgs is a dataclass)."""
        return dataclasses.fields(cls)

    @staticmethod
    def set_bookkeeping(args: ServerArgs, name: str, value) -> None:
        """Put the record's own bookkeeping (an underscore attribute, not a field) on it, past its setter."""
        object.__setattr__(args, name, value)

    @staticmethod
    def check(args: ServerArgs) -> None:
        """Run the start-up check on a record as the server's own resolution leaves it."""
        args._handle_speculative_disable_batch_threshold()

    @staticmethod
    def value(args: ServerArgs, name: str):
        """A field as start-up resolved it (the check writes N on the field)."""
        return getattr(args, name)

    @staticmethod
    def resolve(args: ServerArgs) -> ServerArgs:
        """Run sglang's own resolution on a parsed record (__post_init__ already did)."""
        return args


class Release056(Release059):
    """0.5.5-0.5.6: no multi-layer EAGLE, no SGLANG_SCHEDULER_SKIP_ALL_GATHER."""

    multi_layer = skip_all_gather = False


class Release055(Release056):
    """0.5.5: the spec-v2 worker has no IDLE handling: DP attention is refused."""

    dp_refused = True


class Release054(Release055):
    """0.5.4: spec v2 is --enable-beta-spec, for EAGLE only; the v1-worker refusal names the flag."""

    beta_spec = True
    v1_refusal = "--enable-beta-spec"


class Release0511(Release059):
    """0.5.11: spec v2 is the default; SGLANG_ENABLE_SPEC_V2=0 selects the v1 worker."""

    v1_env = "0"


class Release0512(Release0511):
    """0.5.12: upstream adaptive speculation on the spec-v2 worker, refused beside the threshold."""

    extra_checks = ("adaptive speculation refused",)


class Release0513(Release0512):
    """0.5.13: no v1 worker; spec v2 off / no overlap is EAGLEWorkerV2's synchronous path, which the port serves."""

    has_v1_worker = False


class Release0514(Release0513):
    """0.5.14: SGLANG_ENABLE_SPEC_V2 is removed (speculative decoding always runs the V2 worker); the synchronous
    path, which the variable's 0 selected, is --disable-overlap-schedule. Rejection sampling
    (--speculative-use-rejection-sampling) arrives."""

    spec_v2_env = False
    rejection_sampling = True


class Release0515(Release0514):
    """0.5.15: the check reads the fields a model override or a resolution pass declares (multi-layer EAGLE for
    MiMo-V2 / Step-3.5, DP attention and the MoE set-up for DeepSeek context parallel) through resolved_view, since
    they reach the fields only when the resolution ends, after the check."""

    extra_checks = Release0514.extra_checks + ("declared fields seen",)


class Release0516(Release0515):
    """0.5.16: sglang turns the overlap scheduler off on device "cpu"."""

    cpu_overlap = False


class Release0517(Release0516):
    """0.5.17: business code reads the resolved configuration from the runtime context's namespace bags, projected
    from the published ServerArgs by the fields' NS(...) markers: the field carries NS("spec"), and the worker reads
    N through get_spec()."""

    extra_checks = Release0516.extra_checks + ("published in the spec namespace",)

    @staticmethod
    def config_frame(context):
        """A frame that puts the runtime context's published configuration back as it found it."""
        return context.preserve_config()


class Release0518(Release0517):
    """0.5.18: the start-up check runs in ServerArgs._run_resolution_pipeline (which __post_init__ calls); the runtime
    context has no preserve_config() any more: its test-only override_server_args() frame puts the published
    configuration back."""

    @staticmethod
    def config_frame(context):
        return context.override_server_args()


class Release0519(Release0518):
    """0.5.19: construction leaves the record at its input; resolution is a separate act (resolve_once ->
    run_resolution_pipeline), whose result is the declarations over the input: the fields keep the input for the
    life of the process. The check is the module function handle_speculative_disable_batch_threshold of
    arg_groups/speculative_hook.py (the pipeline calls it after handle_other_validations) and declares N; the probe
    reads what resolution decided through the resolving view."""

    check_logger = "sglang.srt.arg_groups.speculative_hook"
    extra_checks = Release0518.extra_checks + ("start-up through resolve_once",)

    @staticmethod
    def check(args: ServerArgs) -> None:
        from sglang.srt.arg_groups.speculative_hook import handle_speculative_disable_batch_threshold

        handle_speculative_disable_batch_threshold(args)

    @staticmethod
    def value(args: ServerArgs, name: str):
        from sglang.srt.arg_groups.overrides import resolving_view

        return getattr(resolving_view(args), name)

    @staticmethod
    def resolve(args: ServerArgs) -> ServerArgs:
        args.resolve_once()
        return args


class Release0520(Release0519):
    """0.5.20: ServerArgs is no dataclass any more but a msgspec Struct (dict=True) that msgspec.defstruct assembles
    from the input halves of the namespace classes of arg_groups/fields/ (the field is declared in Spec, spec.py):
    its fields are what the release's record_fields gives (msgspec.structs.fields), and its bookkeeping (the declaration stash
    _resolved_overrides) is set through msgspec.Struct.__setattr__, not object.__setattr__."""

    @staticmethod
    def fields(cls) -> tuple:
        from sglang.srt.arg_groups.arg_utils import record_fields  # the release's own: Struct or dataclass

        return record_fields(cls)

    @staticmethod
    def set_bookkeeping(args: ServerArgs, name: str, value) -> None:
        """The Struct's own setter (object.__setattr__ does not apply to a Struct); the bookkeeping lands in the
        record's __dict__, as ServerArgs.__setattr__ and override_server_args() put it."""
        import msgspec

        msgspec.Struct.__setattr__(args, name, value)


class Release0521(Release0520):
    """0.5.21: the check also refuses EAGLE3 with DP attention where the draft's scope (owns_attention) narrows attention
    CP, expert parallelism or MoE DP, and elastic EP runtime scale-up; rejection sampling makes the catch-up default
    padded (an explicit skip is refused)."""

    extra_checks = Release0520.extra_checks + ("0.5.21 set-ups",)


class Release0522(Release0521):
    """0.5.22: DP attention is an attention-DP width (--attn-dp-size N); the deprecated --dp-size N
    --enable-dp-attention is resolved into attn_dp_size N, dp_size 1 by the pipeline's first handler
    (handle_deprecated_dp_attention), which declares enable_dp_attention False, so the check runs after it, as the
    pipeline calls it; the 0.5.21 set-ups become this release's (the EAGLE3 draft owns its attention wherever the
    attention-DP width is above 1; mori's EPv2 path and flashinfer_megamoe gather the batch sizes)."""

    extra_checks = Release0520.extra_checks + ("0.5.22 set-ups",)

    @staticmethod
    def check(args: ServerArgs) -> None:
        from sglang.srt.arg_groups.parallel_hook import handle_deprecated_dp_attention

        handle_deprecated_dp_attention(args)  # the pipeline's first handler, long before the check
        Release0521.check(args)


class Release0523(Release0522):
    """0.5.23: the same pipeline and set-ups as 0.5.22 (which drafts own their attention is now the draft model class's
    draft_parallel_spec, which the check cannot see: it still refuses EAGLE3 with DP attention, every EAGLE3 draft of
    the release running in one TP group; the worker refuses any other owning draft)."""


BY_VARIANT = {"": Release059, "fallback-0.5.4": Release054, "fallback-0.5.4.post1": Release055,
              "fallback-0.5.5": Release055, "fallback-0.5.5.post3": Release055,
              "fallback-0.5.6": Release056, "fallback-0.5.6.post1": Release056, "fallback-0.5.7": Release059, "fallback-0.5.8": Release059,
              "fallback-0.5.9": Release059, "fallback-0.5.10": Release059, "fallback-0.5.11": Release0511,
              "fallback-0.5.12": Release0512, "fallback-0.5.13": Release0513,
              "fallback-0.5.14": Release0514, "fallback-0.5.15": Release0515,
              "fallback-0.5.16": Release0516, "fallback-0.5.17": Release0517, "fallback-0.5.18": Release0518,
              "fallback-0.5.19": Release0519, "fallback-0.5.20": Release0520,
              "fallback-0.5.21": Release0521, "fallback-0.5.22": Release0522,
              "fallback-0.5.23": Release0523}
VARIANT = os.environ.get("SPECPATCH_VARIANT", "")
REL = BY_VARIANT[VARIANT]() if VARIANT in BY_VARIANT else None
BETA_SPEC_ON = [False]  #: 0.5.4: whether the probe's SGLANG_ENABLE_SPEC_V2 asked for spec v2 (--enable-beta-spec)
SPEC_V2_OFF = [False]  #: 0.5.14: whether the probe's SGLANG_ENABLE_SPEC_V2 asked for spec v2 off (--disable-overlap-schedule)
TINY_LLAMA = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
    "num_attention_heads": 4, "num_key_value_heads": 4, "num_hidden_layers": 2, "vocab_size": 256,
    "max_position_embeddings": 512, "rms_norm_eps": 1e-6, "torch_dtype": "float32",
}


def parse_record(*argv: str) -> ServerArgs:
    """sglang's own parser and from_cli_args (resolved by __post_init__ before 0.5.19, raw from 0.5.19)."""
    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    beta = ["--enable-beta-spec"] if BETA_SPEC_ON[0] else []
    sync = ["--disable-overlap-schedule"] if SPEC_V2_OFF[0] else []
    return ServerArgs.from_cli_args(parser.parse_args(list(argv) + beta + sync))


def parse(*argv: str) -> ServerArgs:
    """The record as sglang resolves it at start-up."""
    return REL.resolve(parse_record(*argv))


@contextlib.contextmanager
def environment(**values):
    """Set (str) or clear (None) sglang environment variables for a block, through their Envs descriptors (0.5.4:
    SGLANG_ENABLE_SPEC_V2 is --enable-beta-spec; 0.5.14: SGLANG_ENABLE_SPEC_V2=0 is --disable-overlap-schedule), or
    in os.environ for one the release reads there itself."""
    with contextlib.ExitStack() as stack:
        for name, value in values.items():
            if name == "SGLANG_ENABLE_SPEC_V2" and REL.beta_spec:
                saved = BETA_SPEC_ON[0]
                BETA_SPEC_ON[0] = value == "1"
                stack.callback(BETA_SPEC_ON.__setitem__, 0, saved)
                continue
            if name == "SGLANG_ENABLE_SPEC_V2" and not REL.spec_v2_env:
                saved = SPEC_V2_OFF[0]
                SPEC_V2_OFF[0] = value == "0"
                stack.callback(SPEC_V2_OFF.__setitem__, 0, saved)
                continue
            if name == "SGLANG_SCHEDULER_SKIP_ALL_GATHER" and not REL.skip_all_gather:
                continue
            field = getattr(envs, name, None)
            if field is None:  # a variable the release reads from os.environ itself (0.5.21's SGLANG_MORI_RECV_BOUND)
                stack.callback(_set_environ, name, os.environ.get(name))
                _set_environ(name, value)
                continue
            if value is None:
                present = field.is_set()
                saved = os.environ.get(name)
                field.clear()
                if present:
                    stack.callback(os.environ.__setitem__, name, saved)
            else:
                stack.enter_context(field.override(value))
        yield


def _set_environ(name: str, value: str | None) -> None:
    """Set (str) or clear (None) a variable in os.environ."""
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def dummy(**fields) -> ServerArgs:
    """ServerArgs whose __post_init__ stops early (model_path "dummy"; 0.5.19: not resolved), with fields as sglang
    would leave them."""
    args = ServerArgs(model_path="dummy")
    for name, value in fields.items():
        setattr(args, name, value)
    return args


def refused(args: ServerArgs, *fragments: str) -> str:
    try:
        REL.check(args)
    except ValueError as exc:
        message = str(exc)
        missing = [f for f in fragments if f not in message]
        assert not missing, f"refused, but the message lacks {missing}: {message}"
        return message
    raise AssertionError(f"accepted: {fragments}")


# ----------------------------------------------------------------------------------------------------- checks


def check_flag():
    assert any(f.name == "speculative_disable_batch_threshold" for f in REL.fields(ServerArgs)), \
        "ServerArgs has no field speculative_disable_batch_threshold: the target is not patched"
    with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None):
        got = parse("--model-path", "dummy", "--speculative-disable-batch-threshold", "5")
        assert got.speculative_disable_batch_threshold == 5, f"parsed {got.speculative_disable_batch_threshold}"
        got = parse("--model-path", "dummy")
        assert got.speculative_disable_batch_threshold == DEFAULT, \
            f"default {got.speculative_disable_batch_threshold}, expected {DEFAULT}"
    return f"--speculative-disable-batch-threshold 5 -> 5; absent -> {DEFAULT}"


def check_negative():
    flag = "--speculative-disable-batch-threshold"
    with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None):
        # on the command line, a bad N is argparse's usage error (exit 2, one line), as a bad value of any flag
        _probe_env.usage_error(parse, "--model-path", "dummy", flag, "-3",
                               fragments=(f"argument {flag}", "must be >= 0"))
        _probe_env.usage_error(parse, "--model-path", "dummy", flag, "abc",
                               fragments=(f"argument {flag}", "invalid int value"))
        # set in code (ServerArgs(...)), it is refused at start-up
        refused(dummy(speculative_disable_batch_threshold=-1), ">= 0", flag)
    with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD="-3"):
        refused(dummy(speculative_disable_batch_threshold=0), ">= 0", "SGLANG_SPEC_DISABLE_BATCH_THRESHOLD")
    with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD="many"):
        refused(dummy(speculative_disable_batch_threshold=0), "not an integer")
    return "-3 / abc on the command line are usage errors; a negative field, a negative or non-integer variable " \
           "are refused"


def eagle_ok(**fields) -> ServerArgs:
    """A configuration the fallback supports, as __post_init__ leaves it."""
    base = dict(speculative_algorithm="EAGLE3", speculative_eagle_topk=1, speculative_num_steps=3,
                speculative_num_draft_tokens=4, disable_overlap_schedule=False, max_running_requests=48)
    if REL.beta_spec:  # --enable-beta-spec serves EAGLE only
        base.update(speculative_algorithm="EAGLE", enable_beta_spec=BETA_SPEC_ON[0])
    base.update(fields)
    return dummy(**base)


def check_env_precedence():
    with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD="7", SGLANG_ENABLE_SPEC_V2="1"):
        args = eagle_ok(speculative_disable_batch_threshold=0)
        REL.check(args)
        assert REL.value(args, "speculative_disable_batch_threshold") == 7, "the variable does not set N when the flag is 0"
        args = eagle_ok(speculative_disable_batch_threshold=5)
        REL.check(args)
        assert REL.value(args, "speculative_disable_batch_threshold") == 5, "the variable overrode a non-zero flag"
        got = parse("--model-path", "dummy")
        assert got.speculative_disable_batch_threshold == DEFAULT, "the parser itself must not read the variable"
    with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None, SGLANG_ENABLE_SPEC_V2="1"):
        args = eagle_ok(speculative_disable_batch_threshold=0)
        REL.check(args)
        assert REL.value(args, "speculative_disable_batch_threshold") == 0
    return "flag 0 + SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=7 -> 7; flag 5 wins over it; neither -> 0"


def check_refusals():
    with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None, SGLANG_ENABLE_SPEC_V2="1",
                     SGLANG_SCHEDULER_SKIP_ALL_GATHER=None, SGLANG_SPEC_DISABLE_CATCH_UP=None):
        REL.check(eagle_ok(speculative_disable_batch_threshold=8))
        cases = [
            ("topk 4", eagle_ok(speculative_eagle_topk=4), ["topk is 4", "--speculative-eagle-topk 1"]),
            ("STANDALONE", eagle_ok(speculative_algorithm="STANDALONE"), ["STANDALONE"]),
            ("NGRAM", eagle_ok(speculative_algorithm="NGRAM", speculative_eagle_topk=8), ["NGRAM"]),
            ("DP without gather", eagle_ok(enable_dp_attention=True, dp_size=8, tp_size=8, moe_dense_tp_size=1,
                                           enable_dp_lm_head=True, moe_a2a_backend="deepep"), ["all-gather"]),
            ("TBO", eagle_ok(enable_two_batch_overlap=True), ["two-batch-overlap"]),
        ]
        if REL.multi_layer:
            cases.append(("multi-layer", eagle_ok(enable_multi_layer_eagle=True), ["multi-layer EAGLE"]))
        if REL.has_v1_worker:
            cases.append(("v1 worker", eagle_ok(disable_overlap_schedule=True), [REL.v1_refusal]))
        if REL.beta_spec:
            cases.append(("EAGLE3", eagle_ok(speculative_algorithm="EAGLE3"), ["EAGLE3", "only EAGLE"]))
        for name, args, fragments in cases:
            args.speculative_disable_batch_threshold = 8
            refused(args, *fragments)
        # DP attention with the all-gather (the default) is accepted for EAGLE; EAGLE3's draft runs at the attention-TP
        # width, inside whose scope the one-token target graph would be captured: refused
        dp_algorithm = {} if REL.beta_spec else {"speculative_algorithm": "EAGLE"}
        dp = eagle_ok(speculative_disable_batch_threshold=8, enable_dp_attention=True, dp_size=2, tp_size=2,
                      **dp_algorithm)
        if REL.dp_refused:  # this release's spec-v2 worker has no IDLE handling
            refused(dp, "IDLE")
        else:
            REL.check(dp)
            refused(eagle_ok(speculative_disable_batch_threshold=8, enable_dp_attention=True, dp_size=2, tp_size=2,
                             speculative_algorithm="EAGLE3"), "EAGLE3 with DP attention")
    if REL.skip_all_gather:
        with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None, SGLANG_ENABLE_SPEC_V2="1",
                         SGLANG_SCHEDULER_SKIP_ALL_GATHER="1"):
            refused(eagle_ok(speculative_disable_batch_threshold=8, enable_dp_attention=True, dp_size=2, tp_size=2),
                    "SGLANG_SCHEDULER_SKIP_ALL_GATHER")
    if REL.has_v1_worker:
        with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None, SGLANG_ENABLE_SPEC_V2=REL.v1_env):
            refused(eagle_ok(speculative_disable_batch_threshold=8), REL.v1_refusal)
    else:  # spec v2 off / no overlap: EAGLEWorkerV2's synchronous path, served
        for spec_v2 in ("0", "1"):
            with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None, SGLANG_ENABLE_SPEC_V2=spec_v2):
                sync = eagle_ok(speculative_disable_batch_threshold=8, disable_overlap_schedule=True)
                REL.check(sync)
                assert REL.value(sync, "speculative_disable_batch_threshold") == 8, "the synchronous path was not accepted"
    with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None, SGLANG_ENABLE_SPEC_V2="1",
                     SGLANG_SPEC_DISABLE_CATCH_UP="sideways"):
        refused(eagle_ok(speculative_disable_batch_threshold=8), "SGLANG_SPEC_DISABLE_CATCH_UP")
    if REL.rejection_sampling:  # the catch-up that runs the draft extend sets the draft's probabilities; skip does not
        with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None, SGLANG_ENABLE_SPEC_V2="1",
                         SGLANG_SPEC_DISABLE_CATCH_UP="skip"):
            refused(eagle_ok(speculative_disable_batch_threshold=8, speculative_use_rejection_sampling=True),
                    "--speculative-use-rejection-sampling", "SGLANG_SPEC_DISABLE_CATCH_UP=padded")
        with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None, SGLANG_ENABLE_SPEC_V2="1",
                         SGLANG_SPEC_DISABLE_CATCH_UP="padded"):
            REL.check(eagle_ok(speculative_disable_batch_threshold=8, speculative_use_rejection_sampling=True))
    return ", ".join(name for name, *_ in cases) + (", SGLANG_SCHEDULER_SKIP_ALL_GATHER" if REL.skip_all_gather
                                                     else "") + \
        (", DP attention" if REL.dp_refused else ", EAGLE3 with DP attention (EAGLE with it accepted)") + \
        (", rejection sampling with the catch-up skipped (accepted with padded)" if REL.rejection_sampling else "") + \
        " and an unknown catch-up mode are refused with a reason" + \
        ("" if REL.has_v1_worker else "; no overlap / spec v2 off accepted (EAGLEWorkerV2's synchronous path)")


def check_warnings():
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger(REL.check_logger)
    logger.addHandler(handler)
    try:
        with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None, SGLANG_ENABLE_SPEC_V2="1"):
            args = dummy(speculative_disable_batch_threshold=4)
            REL.check(args)
            assert REL.value(args, "speculative_disable_batch_threshold") == 0, "N kept without speculative decoding"
            REL.check(eagle_ok(speculative_disable_batch_threshold=48))
    finally:
        logger.removeHandler(handler)
    text = "\n".join(r.getMessage() for r in records)
    assert "no effect" in text, f"no warning for N without speculative decoding: {text!r}"
    assert "never disabled" in text, f"no warning for N >= max_running_requests: {text!r}"
    return "warns (and does not refuse) when N has no effect"


def check_real_post_init():
    """The whole ServerArgs.__post_init__ on a tiny local Llama config: sglang's own choices, then the check."""
    with tempfile.TemporaryDirectory(prefix="specpatch-probe-") as model:
        with open(os.path.join(model, "config.json"), "w") as f:
            json.dump(TINY_LLAMA, f)
        common = ("--model-path", model, "--device", "cpu", "--speculative-algorithm", "EAGLE",
                  "--speculative-draft-model-path", model, "--speculative-disable-batch-threshold", "8")
        try:
            with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None, SGLANG_ENABLE_SPEC_V2="1"):
                try:
                    parse(*common)
                except ValueError as exc:  # sglang chose (5, 4, 8) for Llama: topk 4
                    assert "topk is 4" in str(exc), str(exc)
                else:
                    raise AssertionError("sglang's automatic topk 4 for Llama went through")
                args = parse(*common, "--speculative-eagle-topk", "1", "--speculative-num-steps", "3",
                             "--speculative-num-draft-tokens", "4")
                got = {k: REL.value(args, k) for k in ("speculative_disable_batch_threshold",
                                                       "disable_overlap_schedule", "max_running_requests")}
                assert got == {"speculative_disable_batch_threshold": 8, "disable_overlap_schedule": not REL.cpu_overlap,
                               "max_running_requests": 48}, got
            with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None, SGLANG_ENABLE_SPEC_V2=REL.v1_env):
                plain = ("--speculative-eagle-topk", "1", "--speculative-num-steps", "3",
                         "--speculative-num-draft-tokens", "4")
                if REL.has_v1_worker:
                    try:
                        parse(*common, *plain)
                    except ValueError as exc:
                        assert REL.v1_refusal in str(exc), str(exc)
                    else:
                        raise AssertionError("the v1 worker (spec v2 off) was accepted")
                else:
                    args = parse(*common, *plain)
                    assert REL.value(args, "disable_overlap_schedule") and \
                        REL.value(args, "speculative_disable_batch_threshold") == 8, \
                        "spec v2 off (EAGLEWorkerV2's synchronous path) was not accepted"
                    from sglang.srt.speculative.eagle_worker_v2 import EAGLEWorkerV2
                    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
                    worker = SpeculativeAlgorithm.from_string(
                        REL.value(args, "speculative_algorithm")).create_worker(args)
                    assert worker is EAGLEWorkerV2, f"spec v2 off creates {worker}, not EAGLEWorkerV2"
        except (ImportError, OSError) as exc:  # transformers cannot read the config here: not the patch's fault
            print(f"PROBE-SKIP: full __post_init__ not run: {type(exc).__name__}: {exc}")
            return _probe_env.SKIPPED
    return "full __post_init__ (tiny Llama, cpu): automatic topk 4 refused; topk 1 accepted with " \
           "max_running_requests 48; spec v2 off " + \
           ("refused" if REL.has_v1_worker else "accepted (sglang creates EAGLEWorkerV2)")


def check_adaptive_refused():
    with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None, SGLANG_ENABLE_SPEC_V2="1"):
        refused(eagle_ok(speculative_disable_batch_threshold=8, speculative_adaptive=True), "--speculative-adaptive")
    with tempfile.TemporaryDirectory(prefix="specpatch-probe-") as model:
        with open(os.path.join(model, "config.json"), "w") as f:
            json.dump(TINY_LLAMA, f)
        try:
            with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None, SGLANG_ENABLE_SPEC_V2="1"):
                parse("--model-path", model, "--device", "cpu", "--speculative-algorithm", "EAGLE",
                      "--speculative-draft-model-path", model, "--speculative-disable-batch-threshold", "8",
                      "--speculative-eagle-topk", "1", "--speculative-num-steps", "3",
                      "--speculative-num-draft-tokens", "4", "--speculative-adaptive")
        except ValueError as exc:  # the threshold's check, not one of sglang's own
            assert "--speculative-adaptive" in str(exc) and \
                "--speculative-disable-batch-threshold=8 cannot be used" in str(exc), str(exc)
        except (ImportError, OSError) as exc:
            print(f"PROBE-SKIP: full __post_init__ with --speculative-adaptive not run: {exc}")
            return "--speculative-adaptive beside the threshold is refused (full __post_init__ not run)"
        else:
            raise AssertionError("--speculative-adaptive was accepted beside the threshold")
    return "--speculative-adaptive beside the threshold is refused, also after sglang's own adaptive " \
           "checks in the full __post_init__"


def check_declared_fields():
    """Declarations not yet materialized (as __post_init__ leaves them when the check runs) are what the check reads."""
    with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None, SGLANG_SCHEDULER_SKIP_ALL_GATHER=None):
        cases = [("multi-layer EAGLE (MiMo-V2 / Step-3.5 override)", {"enable_multi_layer_eagle": True}, {},
                  "multi-layer EAGLE"),
                 ("DP attention without the all-gather (DeepSeek CP override)",
                  {"enable_dp_attention": True, "moe_dense_tp_size": 1, "moe_a2a_backend": "deepep"},
                  dict(dp_size=8, tp_size=8, enable_dp_lm_head=True), "all-gather")]
        for name, declared, fields, fragment in cases:
            args = eagle_ok(speculative_disable_batch_threshold=8, **fields)
            REL.check(args)  # accepted on the pristine fields
            args = eagle_ok(speculative_disable_batch_threshold=8, **fields)
            REL.set_bookkeeping(args, "_resolved_overrides", [("probe: " + name, dict(declared))])
            assert all(getattr(args, k) != v for k, v in declared.items()), "the probe's fields are not pristine"
            refused(args, fragment)
    return ", ".join(name for name, *_ in cases) + ": refused while only declared (before materialize_declarations)"


def check_spec_namespace():
    """0.5.17: the flag reaches the "spec" namespace bag (get_spec()) when the server arguments are published, and
    get_context().override() can change it, as any resolved spec leaf."""
    from sglang.srt.runtime_context import get_context, get_spec

    with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None):
        args = parse("--model-path", "dummy", "--speculative-disable-batch-threshold", "5")
    context = get_context()
    with REL.config_frame(context):
        context.set_server_args(args)
        got = get_spec().speculative_disable_batch_threshold
        assert got == 5, f"get_spec() reads {got}, not the flag's 5"
        context.override("probe", speculative_disable_batch_threshold=7)
        assert get_spec().speculative_disable_batch_threshold == 7, "the spec leaf is not the one override() writes"
        assert args.speculative_disable_batch_threshold == 5
    return "get_spec().speculative_disable_batch_threshold is the flag's value once published"


def check_resolve_once_startup():
    """0.5.19: the check runs inside resolve_once, the gate every publisher goes through (publish(), the Engine): N
    from the environment variable is declared, so the published spec namespace (what the worker reads) and the
    server info carry it while the field keeps its input; a refused set-up stops the publish; NEXTN (which the
    speculative hook resolves to EAGLE, the field keeping what was typed) is served; pipeline parallelism is
    refused."""
    from sglang.srt.runtime_context import get_context, get_spec, publish

    context = get_context()
    with tempfile.TemporaryDirectory(prefix="specpatch-probe-") as model:
        with open(os.path.join(model, "config.json"), "w") as f:
            json.dump(TINY_LLAMA, f)
        common = ("--model-path", model, "--device", "cpu", "--speculative-draft-model-path", model)
        plain = ("--speculative-eagle-topk", "1", "--speculative-num-steps", "3", "--speculative-num-draft-tokens", "4")
        try:
            with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD="7"):
                args = parse_record(*common, "--speculative-algorithm", "EAGLE", *plain)
                with REL.config_frame(context):
                    publish(args, role="scheduler")
                    assert context.server_args is args
                    got = get_spec().speculative_disable_batch_threshold
                    assert got == 7, f"the worker's get_spec() reads {got}, not the variable's 7"
                    info = args.resolved_dict()["speculative_disable_batch_threshold"]
                    assert info == 7, f"the server info says {info}"
                    assert args.speculative_disable_batch_threshold == 0, "the field is not the input any more"
                # sglang's automatic topk 4 for Llama: the check refuses it inside the resolution
                args = parse_record(*common, "--speculative-algorithm", "EAGLE")
                with REL.config_frame(context):
                    try:
                        publish(args, role="scheduler")
                    except ValueError as exc:
                        assert "topk is 4" in str(exc) and "SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=7" in str(exc), str(exc)
                    else:
                        raise AssertionError("the automatic topk 4 was published")
                    assert context.server_args is not args, "the refused record was published"
                    try:
                        args.resolve_once()
                    except RuntimeError:
                        pass
                    else:
                        raise AssertionError("the refused record resolves on a second try")
            with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None):
                args = parse(*common, "--speculative-algorithm", "NEXTN", *plain,
                             "--speculative-disable-batch-threshold", "8")
                got = (args.speculative_algorithm, REL.value(args, "speculative_algorithm"),
                       REL.value(args, "speculative_disable_batch_threshold"))
                assert got == ("NEXTN", "EAGLE", 8), got
        except (ImportError, OSError) as exc:
            print(f"PROBE-SKIP: resolve_once on a tiny Llama not run: {type(exc).__name__}: {exc}")
            return _probe_env.SKIPPED
    with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None, SGLANG_SCHEDULER_SKIP_ALL_GATHER=None):
        refused(eagle_ok(speculative_disable_batch_threshold=8, pp_size=2), "--pp-size 2")
    return "resolve_once + publish (tiny Llama, cpu): the variable's 7 reaches get_spec() and the server info (the " \
           "field keeps 0); the automatic topk 4 stops the publish; NEXTN (resolved to EAGLE) served; --pp-size 2 " \
           "refused"


def _check_rocm_rejection_sampling():
    """Rejection sampling declared by sglang itself (ROCm's _handle_eagle_family) makes the catch-up default padded
    (served with the catch-up unset); an explicit skip is refused."""
    rocm = eagle_ok(speculative_disable_batch_threshold=8, speculative_algorithm="EAGLE")
    REL.set_bookkeeping(rocm, "_resolved_overrides",
                        [("probe: _handle_eagle_family (ROCm)", {"speculative_use_rejection_sampling": True})])
    with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None, SGLANG_SCHEDULER_SKIP_ALL_GATHER=None,
                     SGLANG_SPEC_DISABLE_CATCH_UP=None):
        REL.check(rocm)
    with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None, SGLANG_SPEC_DISABLE_CATCH_UP="skip"):
        refused(rocm, "on ROCm", "SGLANG_SPEC_DISABLE_CATCH_UP=padded")


def check_0521_setups():
    """0.5.21: EAGLE3 with DP attention refused where its draft's scope (owns_attention) narrows attention CP, EP or MoE
    DP, served where it narrows nothing; elastic EP runtime scale-up refused; mori with SGLANG_MORI_RECV_BOUND gathers
    the per-rank batch sizes (served); rejection sampling, asked for or declared by sglang itself (ROCm), makes the
    catch-up default padded, and an explicit skip is refused."""
    with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None, SGLANG_SCHEDULER_SKIP_ALL_GATHER=None,
                     SGLANG_SPEC_DISABLE_CATCH_UP=None):
        dp1 = dict(speculative_disable_batch_threshold=8, enable_dp_attention=True, dp_size=1, tp_size=4)
        REL.check(eagle_ok(**dp1))  # EAGLE3, one attention-DP rank, no CP / EP / MoE DP: nothing narrowed
        for flag, field in (("--ep-size", "ep_size"), ("--attn-cp-size", "attn_cp_size"),
                            ("--moe-dp-size", "moe_dp_size")):
            refused(eagle_ok(**dp1, **{field: 2}), "EAGLE3 with DP attention and", f"{flag} 2")
            REL.check(eagle_ok(**dp1, **{field: 2}, speculative_algorithm="EAGLE"))  # EAGLE's draft owns nothing
        elastic = dict(speculative_disable_batch_threshold=8, elastic_ep_backend="mooncake", tp_size=2)
        refused(eagle_ok(**elastic, max_ep_size=4), "Elastic EP runtime scale-up", "--max-ep-size 4")
        REL.check(eagle_ok(**elastic, max_ep_size=2))  # no scale-up beyond the launch width
        REL.check(eagle_ok(**elastic))
        mori = eagle_ok(speculative_disable_batch_threshold=8, speculative_algorithm="EAGLE", enable_dp_attention=True,
                        dp_size=2, tp_size=2, moe_dense_tp_size=1, enable_dp_lm_head=True, moe_a2a_backend="mori")
        refused(mori, "all-gather")
        with environment(SGLANG_MORI_RECV_BOUND="true"):
            REL.check(mori)
        REL.check(eagle_ok(speculative_disable_batch_threshold=8, speculative_use_rejection_sampling=True))
    _check_rocm_rejection_sampling()
    return "EAGLE3 with DP attention refused with --ep-size / --attn-cp-size / --moe-dp-size 2 (served with none, and " \
           "EAGLE with them); elastic EP scale-up (--max-ep-size > --tp-size) refused; mori gathers with " \
           "SGLANG_MORI_RECV_BOUND; rejection sampling (also as declared on ROCm) served with the catch-up unset, " \
           "refused with an explicit skip"


def check_0522_setups():
    """0.5.22: DP attention through --attn-dp-size and through the deprecated --dp-size --enable-dp-attention (the
    pipeline resolves one into the other); EAGLE3 refused wherever the attention-DP width is above 1 (its draft owns
    its attention there), served at width 1 even with --ep-size 2 (the draft owns nothing); mori gathers the batch
    sizes on its EPv2 path (SGLANG_MORI_EP_V2, on by default) or with SGLANG_MORI_RECV_BOUND, flashinfer_megamoe
    always; elastic EP scale-up and the rejection-sampling catch-up as on 0.5.21."""
    with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None, SGLANG_SCHEDULER_SKIP_ALL_GATHER=None,
                     SGLANG_SPEC_DISABLE_CATCH_UP=None):
        n = dict(speculative_disable_batch_threshold=8)
        for dp in (dict(attn_dp_size=2, tp_size=2), dict(enable_dp_attention=True, dp_size=2, tp_size=2)):
            REL.check(eagle_ok(**n, **dp, speculative_algorithm="EAGLE"))
            refused(eagle_ok(**n, **dp), "EAGLE3 with DP attention")
            args = eagle_ok(**n, **dp, speculative_algorithm="EAGLE", moe_dense_tp_size=1, enable_dp_lm_head=True,
                            moe_a2a_backend="deepep")
            refused(args, "all-gather")
        REL.check(eagle_ok(**n, enable_dp_attention=True, dp_size=1, tp_size=4, ep_size=2))  # width 1: nothing owned
        elastic = dict(speculative_disable_batch_threshold=8, elastic_ep_backend="mooncake", tp_size=2)
        refused(eagle_ok(**elastic, max_ep_size=4), "Elastic EP runtime scale-up", "--max-ep-size 4")
        REL.check(eagle_ok(**elastic, max_ep_size=2))
        gather = dict(n, speculative_algorithm="EAGLE", attn_dp_size=2, tp_size=2, moe_dense_tp_size=1,
                      enable_dp_lm_head=True)
        REL.check(eagle_ok(**gather, moe_a2a_backend="flashinfer_megamoe"))
        for ep_v2, recv_bound, served in (("1", None, True), ("0", None, False), ("0", "true", True)):
            with environment(SGLANG_MORI_EP_V2=ep_v2, SGLANG_MORI_RECV_BOUND=recv_bound):
                mori = eagle_ok(**gather, moe_a2a_backend="mori")
                REL.check(mori) if served else refused(mori, "all-gather")
    _check_rocm_rejection_sampling()
    return "DP attention as --attn-dp-size 2 and as --dp-size 2 --enable-dp-attention: EAGLE served, EAGLE3 refused, " \
           "deepep without the all-gather refused; EAGLE3 at attention-DP width 1 with --ep-size 2 served; mori " \
           "gathers on EPv2 (default) or with SGLANG_MORI_RECV_BOUND, refused with neither; flashinfer_megamoe " \
           "gathers; elastic EP scale-up refused; the ROCm rejection-sampling catch-up as on 0.5.21"


EXTRA_CHECKS = {"0.5.21 set-ups": check_0521_setups, "0.5.22 set-ups": check_0522_setups, "adaptive speculation refused": check_adaptive_refused, "declared fields seen": check_declared_fields,
                "published in the spec namespace": check_spec_namespace,
                "start-up through resolve_once": check_resolve_once_startup}


def main():
    if REL is None:
        _probe_env.adapter(BY_VARIANT, "server_args_probe.py")  # says which variants it knows, and exits
    print(f"release adapter {type(REL).__name__} for variant {VARIANT or 'none (the recipe steps)'}", flush=True)
    report.gate("flag", check_flag)
    report.run("negative values refused", check_negative)
    report.run("environment variable precedence", check_env_precedence)
    report.run("unsupported set-ups refused", check_refusals)
    report.run("warnings", check_warnings)
    report.run("real __post_init__", check_real_post_init)
    for name in REL.extra_checks:
        report.run(name, EXTRA_CHECKS[name])
    report.finish()


if __name__ == "__main__":
    main()
