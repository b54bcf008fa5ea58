"""Shared by the probes: build vLLM's real V1 Scheduler / AsyncScheduler on a CPU machine and drive it step by step.

Nothing of vLLM is imitated: the config comes from the real arg parser and EngineArgs.create_engine_config() (with
a tiny local model config, no weights, no tokenizer), the scheduler is vLLM's own class, and each step's model
output is what a worker would return (one sampled token per request plus the accepted drafts; the drafter proposes
K tokens for every running request). The only stand-in: vLLM's platform on a machine without an accelerator is
"unspecified", whose empty device type DeviceConfig refuses; it is given the device type "cpu" here.
"""

import inspect
import json
import os
import tempfile

PROMPT_LEN = 8
NUM_SPEC = 3
MAX_NUM_SEQS = 16
BLOCK_SIZE = 16
CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
          "num_attention_heads": 4, "num_key_value_heads": 4, "num_hidden_layers": 2, "vocab_size": 1000,
          "max_position_embeddings": 2048, "torch_dtype": "float32", "rms_norm_eps": 1e-5}


# vLLM 0.12-0.13 inspect the model class in a subprocess (`python -m vllm.model_executor.models.registry`): it must
# import the same vllm as this process, which the runner put on sys.path only
if os.environ.get("SPECPATCH_IMPORT_ROOT"):
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [os.environ["SPECPATCH_IMPORT_ROOT"]] + [p for p in [os.environ.get("PYTHONPATH")] if p])


def cpu_platform():
    from vllm.platforms import current_platform

    if not type(current_platform).device_type:
        type(current_platform).device_type = "cpu"
    return current_platform


def model_dir():
    folder = tempfile.mkdtemp(prefix="specpatch-vllm-model-")
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(CONFIG, f)
    return folder


def parser():
    """vLLM's own parser with EngineArgs' arguments, as `vllm serve` builds it (its defaults build a DeviceConfig:
    the platform's device type first)."""
    cpu_platform()
    from vllm.engine.arg_utils import EngineArgs

    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:
        from vllm.utils import FlexibleArgumentParser
    return EngineArgs.add_cli_args(FlexibleArgumentParser())


def engine_args(argv):
    """EngineArgs from a command line, through vLLM's own parser (so the flag is parsed as `vllm serve` would)."""
    from vllm.engine.arg_utils import EngineArgs

    return EngineArgs.from_cli_args(parser().parse_args(argv))


def usage_error(argv):
    """The parser must stop on `argv` as argparse does on a bad value: exit status 2 and a one-line error on
    stderr. Returns (None, that line), or (what went wrong instead, the line or None)."""
    import contextlib
    import io

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parser().parse_args(argv)
    except SystemExit as exc:
        line = (err.getvalue().strip().splitlines() or [""])[-1]
        if exc.code != 2:
            return "exit status %r, not argparse's 2" % (exc.code,), line
        return None, line
    return "accepted by the parser", None


def check_bad_thresholds(model, ok, fail):
    """A negative or non-integer N: on the command line argparse's usage error (exit 2, naming the flag, from the
    recipe's int >= 0 type), never a traceback at start-up; inside --speculative-config and in EngineArgs built in
    code (no parser), refused when the config is built."""
    flag = "--speculative-disable-batch-threshold"
    bad = False
    for value, fragment in (("-3", "must be >= 0 (0 means always speculate), got -3"),
                            ("abc", "invalid int value: 'abc'")):
        wrong, line = usage_error(base_argv(model, extra=[flag, value]))
        if wrong is None and ("argument %s" % flag) in line and fragment in line:
            continue
        bad = True
        fail("%s %s on the command line: %s%s (wanted argparse's usage error: argument %s: %s)"
             % (flag, value, wrong or "the error line is", ": " + line if line else "", flag, fragment))
    if not bad:
        ok("%s -3 / abc on the command line are usage errors (exit 2, argument %s: ...)" % (flag, flag))
    import dataclasses

    cases = (("EngineArgs(speculative_disable_batch_threshold=-3) built in code",
              lambda: dataclasses.replace(engine_args(base_argv(model)), speculative_disable_batch_threshold=-3),
              ("must be an integer >= 0",)),
             ("--speculative-config {..., \"disable_batch_threshold\": -3}",
              lambda: engine_args(base_argv(model, spec_extra={"disable_batch_threshold": -3})),
              ("disable_batch_threshold", "greater than or equal to 0")))  # SpeculativeConfig's Field(ge=0)
    for what, make, fragments in cases:
        try:
            make().create_engine_config()
        except Exception as exc:  # noqa: BLE001 - the refusal is what we look for
            if all(f in str(exc) for f in fragments):
                ok("%s refused when the config is built" % what)
            else:
                fail("%s: refused for another reason: %s: %s" % (what, type(exc).__name__, str(exc)[:300]))
        else:
            fail("%s was accepted" % what)


def base_argv(model, *, method="ngram", extra=(), spec_extra=None):
    spec = {"method": method, "num_speculative_tokens": NUM_SPEC}
    if method == "ngram":
        spec.update(prompt_lookup_max=3, prompt_lookup_min=1)
    spec.update(spec_extra or {})
    return ["--model", model, "--skip-tokenizer-init", "--max-num-seqs", str(MAX_NUM_SEQS),
            "--max-num-batched-tokens", "2048", "--max-model-len", "512", "--enforce-eager", "--no-enable-prefix-caching",
            "--speculative-config", json.dumps(spec)] + list(extra)


def build_config(argv):
    cpu_platform()
    return engine_args(argv).create_engine_config()


def build_scheduler(vllm_config, *, use_async=False, num_blocks=2000):
    import torch
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
    from vllm.v1.structured_output import StructuredOutputManager

    cls = Scheduler
    if use_async:
        from vllm.v1.core.sched.async_scheduler import AsyncScheduler as cls
    spec = FullAttentionSpec(block_size=BLOCK_SIZE, num_kv_heads=1, head_size=1, dtype=torch.float32)
    kv_cache_config = KVCacheConfig(num_blocks=num_blocks, kv_cache_tensors=[],
                                    kv_cache_groups=[KVCacheGroupSpec(["layer"], spec)])
    vllm_config.cache_config.num_gpu_blocks = num_blocks
    kwargs = dict(vllm_config=vllm_config, kv_cache_config=kv_cache_config, log_stats=True,
                  structured_output_manager=StructuredOutputManager(vllm_config), block_size=BLOCK_SIZE)
    accepted = inspect.signature(Scheduler.__init__).parameters  # AsyncScheduler takes *args, **kwargs
    return cls(**{k: v for k, v in kwargs.items() if k in accepted})


def make_request(i, max_tokens=200):
    from vllm.sampling_params import SamplingParams
    from vllm.v1.request import Request

    kwargs = dict(request_id="r%d" % i, prompt_token_ids=[(i * 7 + j) % 900 + 1 for j in range(PROMPT_LEN)],
                  sampling_params=SamplingParams(max_tokens=max_tokens, ignore_eos=True), pooling_params=None,
                  eos_token_id=2, arrival_time=float(i))
    accepted = inspect.signature(Request.__init__).parameters
    return Request(**{k: v for k, v in kwargs.items() if k in accepted})


class Driver(object):
    """Runs schedule() -> worker output -> update_from_output() -> drafts, and records each step."""

    def __init__(self, scheduler, use_async=False):
        self.scheduler = scheduler
        self.use_async = use_async
        self.steps = []
        self.pending = None  # async: the previous step's output, consumed one step later (like the engine core)
        self.n = 0

    def add(self, count):
        for _ in range(count):
            self.scheduler.add_request(make_request(self.n))
            self.n += 1

    def abort(self, count):
        from vllm.v1.request import RequestStatus

        ids = [r.request_id for r in list(self.scheduler.running)[-count:]]
        self.scheduler.finish_requests(ids, RequestStatus.FINISHED_ABORTED)

    def step(self):
        sched = self.scheduler
        running_before = len(sched.running)
        placeholders_before = {r.request_id: r.num_output_placeholders for r in sched.running}
        out = sched.schedule()
        spec = {k: list(v) for k, v in out.scheduled_spec_decode_tokens.items()}
        record = {
            "running": running_before,
            "batch": len(out.num_scheduled_tokens),
            "num_scheduled_tokens": dict(out.num_scheduled_tokens),
            "total": out.total_num_scheduled_tokens,
            "spec": spec,
            "k_field": getattr(out, "num_spec_tokens_to_schedule", None),
            "placeholders_before": placeholders_before,
            "decode_ids": [rid for rid in out.num_scheduled_tokens if rid in placeholders_before],
        }
        if self.use_async:
            record["placeholders_after"] = {r.request_id: r.num_output_placeholders for r in sched.running}
        self.steps.append(record)
        model_output = self._worker_output(out)
        if self.use_async:
            if self.pending is not None:
                sched.update_from_output(*self.pending)
            self.pending = (out, model_output)
        else:
            sched.update_from_output(out, model_output)
            self._drafts(out)
        return record

    def _worker_output(self, out):
        from vllm.v1.outputs import ModelRunnerOutput

        req_ids = list(out.num_scheduled_tokens)
        sampled = []
        for rid in req_ids:
            request = self.scheduler.requests[rid]
            done = request.num_computed_tokens + out.num_scheduled_tokens[rid]
            if done < request.num_prompt_tokens:  # a prefill chunk samples nothing
                sampled.append([])
                continue
            # all drafts accepted, plus the bonus token
            sampled.append([5] * (1 + len(out.scheduled_spec_decode_tokens.get(rid, ()))))
        kwargs = dict(req_ids=req_ids, req_id_to_index={r: i for i, r in enumerate(req_ids)},
                      sampled_token_ids=sampled, logprobs=None, prompt_logprobs_dict={}, pooler_output=[])
        accepted = inspect.signature(ModelRunnerOutput.__init__).parameters
        return ModelRunnerOutput(**{k: v for k, v in kwargs.items() if k in accepted})

    def _drafts(self, out):
        """The drafter's proposals for the next step: K tokens for every decoding request (how many the worker
        proposes: vLLM 0.24+ sizes them to SchedulerOutput.num_spec_tokens_to_schedule)."""
        from vllm.v1.outputs import DraftTokenIds

        k = getattr(out, "num_spec_tokens_to_schedule", None)
        k = NUM_SPEC if k is None else k
        ids = [rid for rid in out.num_scheduled_tokens if rid in self.scheduler.requests
               and self.scheduler.requests[rid].num_computed_tokens >= self.scheduler.requests[rid].num_prompt_tokens]
        if ids:
            self.scheduler.update_draft_token_ids(DraftTokenIds(ids, [[7] * k for _ in ids]))


def run_schedule(driver, plan):
    """plan: a list of (requests to add, requests to abort, steps to run)."""
    for add, abort, steps in plan:
        if add:
            driver.add(add)
        if abort:
            driver.abort(abort)
        for _ in range(steps):
            driver.step()
    return driver.steps
