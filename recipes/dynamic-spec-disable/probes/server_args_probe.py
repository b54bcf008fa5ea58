"""Server-arguments probe of the dynamic speculation disable (sglang 0.5.9), on CPU.

The flag through sglang's own parser and ServerArgs.from_cli_args; the environment variable and its precedence;
the start-up refusals, through the whole ServerArgs.__post_init__ of a real (tiny, local, weightless) Llama config
on device "cpu", so that sglang's own argument handling runs first: its automatic topk 4 for Llama, the spec-v2
switch, max_running_requests = 48.
"""

from __future__ import annotations

import argparse
import contextlib
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
TINY_LLAMA = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
    "num_attention_heads": 4, "num_key_value_heads": 4, "num_hidden_layers": 2, "vocab_size": 256,
    "max_position_embeddings": 512, "rms_norm_eps": 1e-6, "torch_dtype": "float32",
}


def parse(*argv: str) -> ServerArgs:
    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    return ServerArgs.from_cli_args(parser.parse_args(list(argv)))


@contextlib.contextmanager
def environment(**values):
    """Set (str) or clear (None) sglang environment variables for a block, through their Envs descriptors."""
    with contextlib.ExitStack() as stack:
        for name, value in values.items():
            field = getattr(envs, name)
            if value is None:
                present = field.is_set()
                saved = os.environ.get(name)
                field.clear()
                if present:
                    stack.callback(os.environ.__setitem__, name, saved)
            else:
                stack.enter_context(field.override(value))
        yield


def dummy(**fields) -> ServerArgs:
    """ServerArgs whose __post_init__ stops early (model_path "dummy"), with fields as sglang would leave them."""
    args = ServerArgs(model_path="dummy")
    for name, value in fields.items():
        setattr(args, name, value)
    return args


def refused(args: ServerArgs, *fragments: str) -> str:
    try:
        args._handle_speculative_disable_batch_threshold()
    except ValueError as exc:
        message = str(exc)
        missing = [f for f in fragments if f not in message]
        assert not missing, f"refused, but the message lacks {missing}: {message}"
        return message
    raise AssertionError(f"accepted: {fragments}")


# ----------------------------------------------------------------------------------------------------- checks


def check_flag():
    assert any(f.name == "speculative_disable_batch_threshold" for f in __import__("dataclasses").fields(ServerArgs)), \
        "ServerArgs has no field speculative_disable_batch_threshold: the target is not patched"
    with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None):
        got = parse("--model-path", "dummy", "--speculative-disable-batch-threshold", "5")
        assert got.speculative_disable_batch_threshold == 5, f"parsed {got.speculative_disable_batch_threshold}"
        got = parse("--model-path", "dummy")
        assert got.speculative_disable_batch_threshold == DEFAULT, \
            f"default {got.speculative_disable_batch_threshold}, expected {DEFAULT}"
    return f"--speculative-disable-batch-threshold 5 -> 5; absent -> {DEFAULT}"


def check_negative():
    with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None):
        refused(dummy(speculative_disable_batch_threshold=-1), ">= 0", "--speculative-disable-batch-threshold")
    with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD="-3"):
        refused(dummy(speculative_disable_batch_threshold=0), ">= 0", "SGLANG_SPEC_DISABLE_BATCH_THRESHOLD")
    with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD="many"):
        refused(dummy(speculative_disable_batch_threshold=0), "not an integer")
    return "a negative flag, a negative or non-integer variable are refused"


def eagle_ok(**fields) -> ServerArgs:
    """A configuration the fallback supports, as __post_init__ leaves it."""
    base = dict(speculative_algorithm="EAGLE3", speculative_eagle_topk=1, speculative_num_steps=3,
                speculative_num_draft_tokens=4, disable_overlap_schedule=False, max_running_requests=48)
    base.update(fields)
    return dummy(**base)


def check_env_precedence():
    with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD="7", SGLANG_ENABLE_SPEC_V2="1"):
        args = eagle_ok(speculative_disable_batch_threshold=0)
        args._handle_speculative_disable_batch_threshold()
        assert args.speculative_disable_batch_threshold == 7, "the variable does not set N when the flag is 0"
        args = eagle_ok(speculative_disable_batch_threshold=5)
        args._handle_speculative_disable_batch_threshold()
        assert args.speculative_disable_batch_threshold == 5, "the variable overrode a non-zero flag"
        got = parse("--model-path", "dummy")
        assert got.speculative_disable_batch_threshold == DEFAULT, "the parser itself must not read the variable"
    with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None, SGLANG_ENABLE_SPEC_V2="1"):
        args = eagle_ok(speculative_disable_batch_threshold=0)
        args._handle_speculative_disable_batch_threshold()
        assert args.speculative_disable_batch_threshold == 0
    return "flag 0 + SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=7 -> 7; flag 5 wins over it; neither -> 0"


def check_refusals():
    with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None, SGLANG_ENABLE_SPEC_V2="1",
                     SGLANG_SCHEDULER_SKIP_ALL_GATHER=None, SGLANG_SPEC_DISABLE_CATCH_UP=None):
        eagle_ok(speculative_disable_batch_threshold=8)._handle_speculative_disable_batch_threshold()
        cases = [
            ("topk 4", eagle_ok(speculative_eagle_topk=4), ["topk is 4", "--speculative-eagle-topk 1"]),
            ("multi-layer", eagle_ok(enable_multi_layer_eagle=True), ["multi-layer EAGLE"]),
            ("v1 worker", eagle_ok(disable_overlap_schedule=True), ["SGLANG_ENABLE_SPEC_V2=1"]),
            ("STANDALONE", eagle_ok(speculative_algorithm="STANDALONE"), ["STANDALONE"]),
            ("NGRAM", eagle_ok(speculative_algorithm="NGRAM", speculative_eagle_topk=8), ["NGRAM"]),
            ("DP without gather", eagle_ok(enable_dp_attention=True, dp_size=8, tp_size=8, moe_dense_tp_size=1,
                                           enable_dp_lm_head=True, moe_a2a_backend="deepep"), ["all-gather"]),
            ("TBO", eagle_ok(enable_two_batch_overlap=True), ["two-batch-overlap"]),
        ]
        for name, args, fragments in cases:
            args.speculative_disable_batch_threshold = 8
            refused(args, *fragments)
        # DP attention with the all-gather (the default) is accepted
        dp = eagle_ok(speculative_disable_batch_threshold=8, enable_dp_attention=True, dp_size=2, tp_size=2)
        dp._handle_speculative_disable_batch_threshold()
    with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None, SGLANG_ENABLE_SPEC_V2="1",
                     SGLANG_SCHEDULER_SKIP_ALL_GATHER="1"):
        refused(eagle_ok(speculative_disable_batch_threshold=8, enable_dp_attention=True, dp_size=2, tp_size=2),
                "SGLANG_SCHEDULER_SKIP_ALL_GATHER")
    with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None, SGLANG_ENABLE_SPEC_V2=None):
        refused(eagle_ok(speculative_disable_batch_threshold=8), "SGLANG_ENABLE_SPEC_V2=1")
    with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None, SGLANG_ENABLE_SPEC_V2="1",
                     SGLANG_SPEC_DISABLE_CATCH_UP="sideways"):
        refused(eagle_ok(speculative_disable_batch_threshold=8), "SGLANG_SPEC_DISABLE_CATCH_UP")
    return "topk 4, multi-layer EAGLE, the v1 worker, STANDALONE, NGRAM, DP attention without the all-gather, " \
           "SGLANG_SCHEDULER_SKIP_ALL_GATHER, TBO and an unknown catch-up mode are refused with a reason"


def check_warnings():
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger("sglang.srt.server_args")
    logger.addHandler(handler)
    try:
        with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None, SGLANG_ENABLE_SPEC_V2="1"):
            args = dummy(speculative_disable_batch_threshold=4)
            args._handle_speculative_disable_batch_threshold()
            assert args.speculative_disable_batch_threshold == 0, "N kept without speculative decoding"
            eagle_ok(speculative_disable_batch_threshold=48)._handle_speculative_disable_batch_threshold()
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
                assert args.speculative_disable_batch_threshold == 8 and not args.disable_overlap_schedule
                assert args.max_running_requests == 48, args.max_running_requests
            with environment(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=None, SGLANG_ENABLE_SPEC_V2=None):
                try:
                    parse(*common, "--speculative-eagle-topk", "1", "--speculative-num-steps", "3",
                          "--speculative-num-draft-tokens", "4")
                except ValueError as exc:
                    assert "SGLANG_ENABLE_SPEC_V2=1" in str(exc), str(exc)
                else:
                    raise AssertionError("the v1 worker (spec v2 off) was accepted")
        except (ImportError, OSError) as exc:  # transformers cannot read the config here: not the patch's fault
            print(f"PROBE-SKIP: full __post_init__ not run: {type(exc).__name__}: {exc}")
            return _probe_env.SKIPPED
    return "full __post_init__ (tiny Llama, cpu): automatic topk 4 refused; topk 1 accepted with " \
           "max_running_requests 48; spec v2 off refused"


def main():
    report.run("flag", check_flag)
    if report.failed:
        report.finish()
    report.run("negative values refused", check_negative)
    report.run("environment variable precedence", check_env_precedence)
    report.run("unsupported set-ups refused", check_refusals)
    report.run("warnings", check_warnings)
    report.run("real __post_init__", check_real_post_init)
    report.finish()


if __name__ == "__main__":
    main()
