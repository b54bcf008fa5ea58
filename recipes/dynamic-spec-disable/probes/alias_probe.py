"""Alias probe of dynamic-spec-disable for sglang 0.5.14 and newer, on CPU.

On these releases `--speculative-disable-batch-threshold N` is a thin alias of upstream adaptive speculation. The
probe drives sglang's own parser and argument resolution on a tiny local Llama config (device "cpu"), then feeds the
configuration the alias produced to upstream's own AdaptiveController, and checks:
- the flag parses (default 0) and, resolved, turns on --speculative-adaptive with a config of two slots:
  S steps for batches of 1..N requests and 0 steps ("nospec") above N;
- upstream's controller, built on that config, activates S steps for every batch size <= N and 0 above N, also with
  an explicit CUDA-graph batch-size list that contains N, and its acceptance-rate adaptation never moves either slot;
- SGLANG_SPEC_DISABLE_BATCH_THRESHOLD sets N when the flag is 0;
- set-ups for which upstream silently turns adaptive speculation off (topk > 1) are refused at start-up, and so are
  a negative N, an explicit --speculative-adaptive-config and a --cuda-graph-bs-decode list that would blur N.
Works for the three layouts (A[...] fields, NS("spec") fields, the msgspec Spec namespace) by feature detection.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import logging
import os
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the recipe folder
sys.path.insert(1, os.path.dirname(os.path.abspath(__file__)))
import _probe_env  # noqa: E402

_probe_env.setup()
report = _probe_env.Report()
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.pop("SGLANG_SPEC_DISABLE_BATCH_THRESHOLD", None)

from sglang.srt.server_args import ServerArgs  # noqa: E402
from sglang.srt.speculative.adaptive_runtime_state import AdaptiveController  # noqa: E402

SCRATCH = tempfile.mkdtemp(prefix="specpatch-alias-probe-")
tempfile.tempdir = SCRATCH  # the alias writes its adaptive config under tempfile.gettempdir()
MODEL = os.path.join(SCRATCH, "tiny-llama")
os.makedirs(MODEL)
with open(os.path.join(MODEL, "config.json"), "w") as f:
    json.dump({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
        "num_attention_heads": 4, "num_key_value_heads": 4, "num_hidden_layers": 2, "vocab_size": 256,
        "max_position_embeddings": 512, "rms_norm_eps": 1e-6, "torch_dtype": "float32",
    }, f)
EAGLE = ("--model-path", MODEL, "--device", "cpu", "--speculative-algorithm", "EAGLE",
         "--speculative-draft-model-path", MODEL)


def parse(*argv: str) -> ServerArgs:
    """sglang's own parser and from_cli_args: the raw record (0.5.19+ resolves separately)."""
    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    return ServerArgs.from_cli_args(parser.parse_args(list(argv)))


def resolve(*argv: str):
    """Parse and run sglang's whole argument resolution; the resolved values (a view on 0.5.19+)."""
    args = parse(*argv)
    if hasattr(args, "resolve_once"):  # 0.5.19+: construction stays raw, resolution is a separate act
        args.resolve_once()
        from sglang.srt.arg_groups.overrides import resolved_view

        return resolved_view(args)
    return args  # 0.5.14-0.5.18: __post_init__ resolved it in place


@contextlib.contextmanager
def env(**values):
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update({k: v for k, v in values.items() if v is not None})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def refused(argv, *fragments) -> str:
    try:
        resolve(*argv)
    except ValueError as exc:
        message = str(exc)
        missing = [x for x in fragments if x not in message]
        assert not missing, f"refused, but the message lacks {missing}: {message}"
        return message
    raise AssertionError(f"accepted {' '.join(argv[len(EAGLE):])}")


class FakeWorker:
    """What AdaptiveController needs of a worker; records which step count is active."""

    def __init__(self, steps):
        self.speculative_num_steps = steps
        self.speculative_num_draft_tokens = steps + 1
        self.built = []

    def build_adaptive_runtime_state(self, speculative_num_steps, speculative_num_draft_tokens, cuda_graph_bs=None):
        self.built.append((speculative_num_steps, speculative_num_draft_tokens, cuda_graph_bs))
        return speculative_num_steps

    def apply_runtime_state(self, state):
        self.speculative_num_steps = state
        self.speculative_num_draft_tokens = state + 1


def make_controller(worker, config_path):
    """The controller as this release's EAGLEWorkerV2.__init__ builds it."""
    if "config_path" in inspect.signature(AdaptiveController.__init__).parameters:  # 0.5.14-0.5.19
        return AdaptiveController(worker, config_path=config_path)
    from sglang.srt.speculative.adaptive_spec_params import AdaptiveSpeculativeParams  # 0.5.20+: a policy object

    return AdaptiveController(
        worker, AdaptiveSpeculativeParams(initial_steps=worker.speculative_num_steps, cfg_path=config_path))


def steps_by_batch_size(config_path, steps, max_bs, cuda_graph_bs=None):
    controller = make_controller(FakeWorker(steps), config_path)
    controller.init_states(cuda_graph_bs=cuda_graph_bs)
    worker = controller.worker
    out = {}
    for bs in range(1, max_bs + 1):
        controller.activate_step_by_batch(bs)
        out[bs] = worker.speculative_num_steps
        # upstream adapts a slot by acceptance rate; single-candidate slots must never move
        for accepted in ([0] * bs, [steps] * bs):
            for _ in range(40):
                controller.on_verify_complete(accepted, bs)
        controller.activate_step_by_batch(bs)
        assert worker.speculative_num_steps == out[bs], \
            f"bs {bs}: the acceptance-rate adaptation moved steps {out[bs]} -> {worker.speculative_num_steps}"
    return out


# ----------------------------------------------------------------------------------------------------- checks

def check_flag():
    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    try:
        got = parser.parse_args(["--model-path", MODEL, "--speculative-disable-batch-threshold", "5"])
    except SystemExit:
        raise AssertionError("sglang's parser has no --speculative-disable-batch-threshold: not patched") from None
    assert got.speculative_disable_batch_threshold == 5, f"parsed {got.speculative_disable_batch_threshold}"
    got = parser.parse_args(["--model-path", MODEL])
    assert got.speculative_disable_batch_threshold == 0, f"default {got.speculative_disable_batch_threshold}"
    return "sglang's parser: --speculative-disable-batch-threshold 5 -> 5; absent -> 0"


def configured(view, n, steps):
    assert view.speculative_adaptive is True, "speculative_adaptive is not on after resolution"
    path = view.speculative_adaptive_config
    assert path and os.path.isfile(path), f"no adaptive config file: {path!r}"
    with open(path) as f:
        cfg = json.load(f)
    want = {"1": {"candidate_steps": [steps]}, str(n + 1): {"candidate_steps": [0]}}
    assert cfg == want, f"adaptive config {cfg}, expected {want}"
    assert view.speculative_num_steps == steps, f"speculative_num_steps {view.speculative_num_steps}"
    assert view.speculative_num_draft_tokens == steps + 1, view.speculative_num_draft_tokens
    assert view.speculative_eagle_topk == 1, view.speculative_eagle_topk
    return path


def check_resolution():
    view = resolve(*EAGLE, "--speculative-disable-batch-threshold", "8", "--speculative-num-steps", "4")
    path = configured(view, 8, 4)
    by_bs = steps_by_batch_size(path, 4, 40)
    wrong = {bs: s for bs, s in by_bs.items() if s != (4 if bs <= 8 else 0)}
    assert not wrong, f"steps by batch size differ from 'S up to N, 0 above': {wrong}"
    view = resolve(*EAGLE, "--speculative-disable-batch-threshold", "16")
    configured(view, 16, 3)
    return "N=8, S=4: adaptive on, config {'1': [4], '9': [0]}; upstream's controller runs 4 steps for bs 1..8 " \
           "and 0 for bs 9..40, unmoved by acceptance; without --speculative-num-steps S=3"


def check_cuda_graph_list():
    view = resolve(*EAGLE, "--speculative-disable-batch-threshold", "8", "--speculative-num-steps", "3",
                   "--cuda-graph-bs-decode", "1", "2", "4", "8", "16", "32")
    path = configured(view, 8, 3)
    by_bs = steps_by_batch_size(path, 3, 40, cuda_graph_bs=[1, 2, 4, 8, 16, 32])
    wrong = {bs: s for bs, s in by_bs.items() if s != (3 if bs <= 8 else 0)}
    assert not wrong, f"with padding to the CUDA-graph list: {wrong}"
    refused((*EAGLE, "--speculative-disable-batch-threshold", "6", "--cuda-graph-bs-decode", "1", "2", "4", "8", "16"),
            "add 6 to the list")
    return "an explicit CUDA-graph list with N keeps bs <= N speculative; a list without N is refused"


def check_env():
    with env(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD="6"):
        configured(resolve(*EAGLE, "--speculative-num-steps", "2"), 6, 2)
        configured(resolve(*EAGLE, "--speculative-num-steps", "2", "--speculative-disable-batch-threshold", "9"),
                   9, 2)
    view = resolve(*EAGLE, "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
                   "--speculative-num-draft-tokens", "4")
    assert not view.speculative_adaptive, "adaptive turned on without the flag or the variable"
    return "flag 0 + SGLANG_SPEC_DISABLE_BATCH_THRESHOLD=6 -> slot '7'; flag 9 wins; neither -> adaptive stays off"


def check_refusals():
    refused((*EAGLE, "--speculative-disable-batch-threshold", "8", "--speculative-eagle-topk", "4",
             "--speculative-num-steps", "3", "--speculative-num-draft-tokens", "8"),
            "turned off", "topk", "Refusing to start")
    _probe_env.usage_error(parse, *EAGLE, "--speculative-disable-batch-threshold", "-1",
                           fragments=("argument --speculative-disable-batch-threshold", "must be >= 0"))
    with env(SGLANG_SPEC_DISABLE_BATCH_THRESHOLD="lots"):
        refused(EAGLE, "not an integer")
    cfg = os.path.join(SCRATCH, "mine.json")
    with open(cfg, "w") as f:
        json.dump({"1": {"candidate_steps": [3]}}, f)
    refused((*EAGLE, "--speculative-disable-batch-threshold", "8", "--speculative-adaptive-config", cfg),
            "--speculative-adaptive-config", '"9": {"candidate_steps": [0]}')
    return "topk 4 (upstream turns adaptive off) refused with the reason; a negative N is a usage error; a " \
           "non-integer variable, an explicit adaptive config refused"


def check_no_speculation():
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logging.getLogger().addHandler(handler)
    try:
        view = resolve("--model-path", MODEL, "--device", "cpu", "--speculative-disable-batch-threshold", "8")
    finally:
        logging.getLogger().removeHandler(handler)
    assert not view.speculative_adaptive, "adaptive turned on without speculative decoding"
    assert any("no effect" in r.getMessage() for r in records), "no warning that N has no effect"
    return "N without --speculative-algorithm: a warning, nothing turned on"


def main():
    report.gate("flag", check_flag)
    report.run("resolution to upstream adaptive", check_resolution)
    report.run("explicit CUDA-graph batch sizes", check_cuda_graph_list)
    report.run("environment variable", check_env)
    report.run("refusals", check_refusals)
    report.run("no speculative decoding", check_no_speculation)
    report.finish()


if __name__ == "__main__":
    main()
