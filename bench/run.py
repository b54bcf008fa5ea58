"""Benchmarks of specpatch against measured floors, side by side, in one run.

    python bench/run.py [--quick] [--runs N] [--out bench/results/latest.json] [--only apply,verify,growth,help]
                        [--publish]

Run it with the interpreter of specpatch's environment (the one `scripts/cpu-env.sh` builds). Every number is the
median of N runs (5; 2 with --quick) of a fresh subprocess, so imports are counted. A subject and its floor run
interleaved (subject, floor, floor, subject, ...) after one unmeasured warm-up each (it also fills the OS file cache
and the target's bytecode cache, for both alike), so a machine whose load changes during the run slows both alike.
Peak memory is the ru_maxrss that os.wait4 reports for the child: the largest of the process and the descendants it
waited for (the child's own RUSAGE_CHILDREN, so no delta is needed: ru_maxrss is a maximum, not a sum). Commands
are started by a small launcher process: on Linux a child's ru_maxrss also counts the process it was forked from.

1. apply: `specpatch apply dynamic-spec-disable --dry-run` on a copy of sglang 0.5.9, against its floor: a process
   that imports libcst and parses and renders (`Module.bytes`) each file of the plan once.
2. verify: `specpatch verify` (syntax, import smoke test, probes) on an applied copy, against the same work done
   bare with the same interpreter, flags (-I -u), environment, stubs (patcher/_smoke.py's StubFinder, loaded by
   path) and probe scripts: one process that imports the recipe's modules, then one fresh process per probe (a probe
   is a __main__ script that sets environment variables and builds global state: it needs its own interpreter, and
   so does the import test, or it would measure nothing).
3. the peak memory of 1 and 2 against their floors' (from the same runs).
4. growth: a generated recipe of 4 steps per file over 1, 10 and 100 generated sglang-shaped files (~300 lines: a
   dataclass with fields, `__post_init__` checks, an `add_cli_args` of `parser.add_argument` calls); time per file
   (flat is the target). Each run is a fresh process that imports specpatch, loads the recipe and times `plan()`
   (the per-file figure); the whole process's time is reported beside it. Every run's plan must be byte-identical
   (checked by a digest).
5. `specpatch --help` start-up time, against the 0.3 s target (`python -c pass` for scale).

Results: a table of ratios on stdout, JSON at --out and the same table as markdown beside it (bench/results/ is not
committed); --publish also writes bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RECIPE = "dynamic-spec-disable"
RELEASE = "0.5.9"
GROWTH_SIZES = (1, 10, 100)
GROWTH_SIZES_FULL = (1, 2, 4, 10, 100)
TARGETS = {"apply": 1.3, "verify": 1.25, "memory": 1.2, "help_seconds": 0.3}
TIMEOUT = 1800.0  #: seconds for any one measured process (a hung child is killed with its process group)


# ------------------------------------------------------------------------------------------------ measuring


@dataclass
class Sample:
    """One measured process (or sequence of processes): wall time, peak RSS, exit code, output."""

    seconds: float
    maxrss_kb: int
    returncode: int
    cpu_seconds: float = 0.0  #: user + system time of the process and the descendants it waited for
    stdout: str = ""
    stderr: str = ""
    parts: list[float] | None = None  #: for a sequence: the seconds of each process


LAUNCHER = """\
import json, os, signal, subprocess, sys, threading, time
for line in sys.stdin:
    job = json.loads(line)
    with open(job["stdout"], "wb") as out, open(job["stderr"], "wb") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(job["argv"], env=job["env"], cwd=job["cwd"], stdin=subprocess.DEVNULL, stdout=out,
                                stderr=err, start_new_session=True)
        timer = threading.Timer(job["timeout"], os.killpg, (proc.pid, signal.SIGKILL))
        timer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
    print(json.dumps({"seconds": seconds, "maxrss_kb": usage.ru_maxrss, "cpu_seconds": usage.ru_utime + usage.ru_stime,
                      "returncode": proc.returncode}), flush=True)
"""


class _Launcher:
    """A small Python process (stdlib only, no site) that starts every measured command. A child's ru_maxrss
    includes the memory of the process it was forked from (Linux folds the pre-exec image into it), so commands
    are never started from this process, which grows while it plans and applies."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-S", "-c", LAUNCHER], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)

    def __call__(self, argv: list[str], env: dict[str, str] | None, cwd: Path | None) -> Sample:
        with tempfile.TemporaryDirectory(prefix="specpatch-bench-out-") as tmp:
            out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
            job = {"argv": argv, "env": dict(os.environ if env is None else env), "cwd": str(cwd) if cwd else None,
                   "stdout": str(out), "stderr": str(err), "timeout": TIMEOUT}
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.proc.stdin.write(json.dumps(job) + "\n")
            self.proc.stdin.flush()
            reply = json.loads(self.proc.stdout.readline())
            return Sample(reply["seconds"], reply["maxrss_kb"], reply["returncode"], reply["cpu_seconds"],
                          out.read_text("utf-8", "replace"), err.read_text("utf-8", "replace"))


_launcher: _Launcher | None = None


def run(argv: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None) -> Sample:
    """Run `argv` to completion: wall time from spawn to reaping, peak RSS and CPU time from os.wait4."""
    global _launcher
    if _launcher is None:
        _launcher = _Launcher()
    return _launcher(argv, env, cwd)


def sequence(steps: list[Callable[[], Sample]]) -> Sample:
    """Several processes one after the other, as one sample: total time, largest peak, first failure."""
    done = [step() for step in steps]
    failed = next((s for s in done if s.returncode != 0), None)
    return Sample(sum(s.seconds for s in done), max(s.maxrss_kb for s in done),
                  failed.returncode if failed else 0, sum(s.cpu_seconds for s in done),
                  "".join(s.stdout for s in done), "".join(s.stderr for s in done),
                  parts=[round(s.seconds, 2) for s in done])


def checked(sample: Sample, what: str) -> Sample:
    if sample.returncode != 0:
        tail = "\n".join((sample.stderr or sample.stdout).strip().splitlines()[-15:])
        raise SystemExit(f"bench: {what} exited with {sample.returncode}:\n{tail}")
    return sample


def interleaved(runs: int, warmup: int = 1, **commands: Callable[[], Sample]) -> dict[str, list[Sample]]:
    """`runs` samples of each command, in an order that alternates (forward, backward) from run to run; `warmup`
    unmeasured runs of each before."""
    for _ in range(warmup):
        for fn in commands.values():
            fn()
    out: dict[str, list[Sample]] = {name: [] for name in commands}
    names = list(commands)
    for i in range(runs):
        for name in names if i % 2 == 0 else reversed(names):
            out[name].append(commands[name]())
        print(f"    run {i + 1}/{runs}: " + ", ".join(f"{name} {out[name][-1].seconds:.2f} s (CPU "
                                                      f"{out[name][-1].cpu_seconds:.2f} s)" for name in names),
              flush=True)
    return out


def summary(samples: list[Sample]) -> dict[str, Any]:
    secs = [s.seconds for s in samples]
    rss = [s.maxrss_kb for s in samples]
    return {"seconds": statistics.median(secs), "seconds_min": min(secs), "seconds_max": max(secs),
            "cpu_seconds": statistics.median(s.cpu_seconds for s in samples),
            "maxrss_mb": statistics.median(rss) / 1024, "runs": len(samples), "all_seconds": secs}


def pair(subjects: list[Sample], floors: list[Sample]) -> dict[str, Any]:
    """Medians of both and the ratios of the medians: wall time (the target), CPU time, peak memory."""
    s, f = summary(subjects), summary(floors)
    return {"specpatch": s, "floor": f, "time_ratio": s["seconds"] / f["seconds"],
            "cpu_ratio": s["cpu_seconds"] / f["cpu_seconds"], "memory_ratio": s["maxrss_mb"] / f["maxrss_mb"]}


def specpatch_argv() -> list[str]:
    """The console script beside this interpreter (what users run), else `python -m patcher`."""
    script = Path(sys.executable).with_name("specpatch")
    return [str(script)] if script.exists() else [sys.executable, "-m", "patcher"]


# ------------------------------------------------------------------------------------------------ 1. apply

FLOOR_APPLY = """\
import sys
import libcst
for path in sys.argv[1:]:
    with open(path, "rb") as f:
        module = libcst.parse_module(f.read())
    module.bytes
"""

#: not a floor, an explanation: the apply floor plus the third-party libraries the command line imports
LIBRARIES = "import typer, rich.console, yaml, packaging.specifiers\n"


def copy_release(dest: Path) -> Path:
    from patcher.fetch import fetch_release

    shutil.copytree(fetch_release("sglang", RELEASE), dest, symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def bench_apply(scratch: Path, runs: int) -> dict[str, Any]:
    from patcher.api import load
    from patcher.engine import plan
    from patcher.target import find_target

    tree = copy_release(scratch / "apply-target")
    files = [str(f.path) for f in plan(load(RECIPE), find_target(tree, package="sglang")).files]
    subject = [*specpatch_argv(), "apply", RECIPE, "--target", str(tree), "--dry-run"]
    print(f"  apply --dry-run vs parse+render of {len(files)} files", flush=True)
    got = interleaved(runs, specpatch=lambda: checked(run(subject), "apply --dry-run"),
                      floor=lambda: checked(run([sys.executable, "-c", FLOOR_APPLY, *files]), "the apply floor"),
                      libraries=lambda: checked(run([sys.executable, "-c", LIBRARIES + FLOOR_APPLY, *files]),
                                                "the apply floor with libraries"))
    return {"files": [Path(p).relative_to(tree).as_posix() for p in files],
            "command": " ".join(["specpatch", *subject[len(specpatch_argv()):]]),
            **pair(got["specpatch"], got["floor"]),
            "floor_with_libraries": {**summary(got["libraries"]), "libraries": LIBRARIES.strip(),
                                     "time_ratio": summary(got["specpatch"])["seconds"]
                                     / summary(got["libraries"])["seconds"]}}


# ------------------------------------------------------------------------------------------------ 2. verify

FLOOR_VERIFY = """\
import importlib.util, json, os, runpy, sys
config = json.load(open(sys.argv[1]))
spec = importlib.util.spec_from_file_location("_specpatch_smoke", config["runner"])
smoke = importlib.util.module_from_spec(spec)
spec.loader.exec_module(smoke)
sys.path.insert(0, config["import_root"])
sys.meta_path.insert(0, smoke.StubFinder(config["stubs"]))
if sys.argv[2] == "import":
    for name in config["modules"]:
        __import__(name)
else:
    sys.argv = [sys.argv[3]]
    runpy.run_path(sys.argv[0], run_name="__main__")
sys.stdout.flush()
os._exit(0)
"""


def bench_verify(scratch: Path, runs: int) -> dict[str, Any]:
    from patcher import verify as v
    from patcher.api import apply_recipe, load
    from patcher.target import find_target

    tree = copy_release(scratch / "verify-target")
    recipe = load(RECIPE)
    target = find_target(tree, package="sglang")
    applied = apply_recipe(recipe, target, smoke=False)
    if applied.outcome != "changed":
        raise SystemExit(f"bench: could not apply {RECIPE} for the verify benchmark: {applied.outcome}")
    spec = recipe.select(target.version).verify
    params = recipe.resolve_params({})
    subject = [*specpatch_argv(), "verify", "--target", str(tree)]

    # the floor: the same interpreter, flags, environment, stubs, modules and probe scripts, nothing else
    config = scratch / "floor-verify.json"
    config.write_text(json.dumps({"runner": str(v.RUNNER), "import_root": str(target.import_root),
                                  "stubs": list(spec.stubs), "modules": list(dict.fromkeys(spec.imports))}))
    script = scratch / "floor_verify.py"
    script.write_text(FLOOR_VERIFY)
    cwd = scratch / "floor-cwd"
    cwd.mkdir()
    env = v._child_env({
        "SPECPATCH_PARAMS": json.dumps(params, default=str), "SPECPATCH_TARGET_ROOT": str(target.root),
        "SPECPATCH_IMPORT_ROOT": str(target.import_root), "SPECPATCH_PACKAGE_DIR": str(target.package_dir),
        "SPECPATCH_PACKAGE": target.package, "SPECPATCH_TARGET_VERSION": str(target.version or ""),
    })
    base = [sys.executable, "-I", "-u", str(script), str(config)]
    steps = [lambda: run([*base, "import"], env=env, cwd=cwd)]
    for probe in spec.probes:
        path = str((recipe.folder / probe.path).resolve())
        steps.append(lambda path=path: run([*base, "probe", path], env=env, cwd=cwd))

    # one verify with --json first: it must have run (not skipped) every check, or the comparison means nothing
    first = checked(run([*subject, "--json"]), "specpatch verify")
    checks = [c for r in json.loads(first.stdout)["recipes"] for c in r["checks"]]
    not_passed = [f"{c['kind']} {c['name']}: {c['status']}" for c in checks if c["status"] != "passed"]
    if not_passed:
        return {"skipped": "specpatch verify did not pass every check here: " + "; ".join(not_passed)}
    print(f"  verify vs bare imports of {len(spec.imports)} modules + {len(spec.probes)} probes "
          f"({len(steps)} processes)", flush=True)
    got = interleaved(runs, specpatch=lambda: checked(run(subject), "specpatch verify"),
                      floor=lambda: checked(sequence(steps), "the verify floor"))
    s, f = got["specpatch"], got["floor"]
    return {"checks": [f"{c['kind']} {c['name']}" for c in checks], "floor_processes": len(steps),
            "floor_process_seconds": [x.parts for x in f],
            "command": "specpatch verify --target T", **pair(s, f)}


# ------------------------------------------------------------------------------------------------ 4. growth


def growth_module(i: int, fields: int = 28) -> str:
    """A ~300-line sglang-shaped module: a dataclass of options with `__post_init__` checks and `add_cli_args`."""
    cls = f"Component{i}Args"
    kinds = [("int", "0", "int"), ("float", "1.0", "float"), ("str", '"auto"', "str"), ("Optional[int]", "None", "int")]
    out = [f'"""Options of component {i} (generated for specpatch\'s benchmarks, shaped like sglang\'s '
           f'server_args)."""',
           "", "from __future__ import annotations", "", "import argparse", "import dataclasses", "import logging",
           "from typing import List, Optional", "", "logger = logging.getLogger(__name__)", "", "",
           "@dataclasses.dataclass", f"class {cls}:", f'    """Arguments of component {i}."""', ""]
    for k in range(fields):
        if k % 7 == 0:
            out.append(f"    # group {k // 7}")
        ann, default, _ = kinds[k % len(kinds)]
        out.append(f"    option_{k}: {ann} = {default}")
    out += ["    extra_flags: List[str] = dataclasses.field(default_factory=list)", "",
            "    def __post_init__(self):"]
    for k in range(0, fields, 4):
        out += [f"        if self.option_{k} < 0:",
                f'            raise ValueError(f"option_{k} must be >= 0, got {{self.option_{k}}}")']
    out += ["        self._finish()", "", "    def _finish(self) -> None:",
            '        logger.debug("%s ready", type(self).__name__)', "", "    @staticmethod",
            "    def add_cli_args(parser: argparse.ArgumentParser) -> None:"]
    for k in range(fields):
        _, _, typ = kinds[k % len(kinds)]
        out += ["        parser.add_argument(", f'            "--option-{k}",', f"            type={typ},",
                f"            default={cls}.option_{k},",
                f'            help="Option {k} of component {i}: what it tunes and when to change it "',
                '            "(see the documentation).",', "        )"]
    out += ["        parser.add_argument(", '            "--extra-flags",', '            nargs="*",',
            "            default=[],", "        )", "", "    @classmethod",
            "    def from_cli_args(cls, args: argparse.Namespace):",
            "        attrs = [f.name for f in dataclasses.fields(cls)]",
            "        return cls(**{a: getattr(args, a) for a in attrs})", "", "",
            f"def describe_{i}(args: {cls}) -> str:", f'    return f"component {i}: {{args}}"', ""]
    return "\n".join(out)


def growth_recipe(n: int, *, package: str = "genpkg", broken: tuple[int, ...] = ()) -> str:
    """A recipe of 4 steps per generated file (field, flag, method, call); files in `broken` get a missing anchor."""
    steps = []
    for i in range(n):
        cls = f"Component{i}Args"
        anchor = "option_missing" if i in broken else "option_12"
        steps.append({"name": f"field-{i}", "op": "add_dataclass_field", "file": f"mod_{i:03d}.py", "class": cls,
                      "after": anchor, "code": "option_new: int = {{new_default}}"})
        steps.append({"name": f"flag-{i}", "op": "add_argparse_argument", "file": f"mod_{i:03d}.py",
                      "function": f"{cls}.add_cli_args", "after_flag": "--option-12",
                      "code": textwrap.dedent(f"""\
                          parser.add_argument(
                              "--option-new",
                              type=int,
                              default={cls}.option_new,
                              help="The new option of component {i}.",
                          )
                          """)})
        steps.append({"name": f"check-{i}", "op": "add_method", "file": f"mod_{i:03d}.py", "class": cls,
                      "after": "__post_init__", "code": textwrap.dedent("""\
                          def _check_option_new(self) -> None:
                              \"\"\"Refuse a negative option_new.\"\"\"
                              if self.option_new < 0:
                                  raise ValueError("option_new must be >= 0")
                          """)})
        steps.append({"name": f"call-{i}", "op": "insert_statements", "file": f"mod_{i:03d}.py",
                      "function": f"{cls}.__post_init__", "at": "end", "code": "self._check_option_new()"})
    recipe = {"id": f"growth-{n}", "version": 1, "title": f"benchmark: 4 steps on each of {n} generated files",
              "target": {"package": package, "versions": ""},
              "params": {"new_default": {"type": "int", "default": 0, "description": "default of option_new"}},
              "steps": steps}
    return json.dumps(recipe, indent=1)  # JSON is YAML


def generate_growth(root: Path, n: int, *, broken: tuple[int, ...] = ()) -> tuple[Path, Path]:
    """Write `root/target/genpkg/mod_*.py` (n files) and `root/recipes/growth-N.yaml`; return (target, recipe)."""
    pkg = root / "target" / "genpkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""Generated package for specpatch benchmarks."""\n')
    (pkg / "_version.py").write_text('__version__ = "1.0.0"\n')
    for i in range(n):
        (pkg / f"mod_{i:03d}.py").write_text(growth_module(i))
    recipes = root / "recipes"
    recipes.mkdir()
    path = recipes / f"growth-{n}.yaml"
    path.write_text(growth_recipe(n, broken=broken))
    return root / "target", path


GROWTH_DRIVER = """\
import hashlib, json, sys, time
t0 = time.perf_counter()
from pathlib import Path
if sys.argv[3] == "floor":  # the floor: parse and render each file once, in a process that imports only libcst
    import libcst
    t1 = time.perf_counter()
    for path in sorted((Path(sys.argv[2]) / "genpkg").glob("mod_*.py")):
        libcst.parse_module(path.read_bytes()).bytes
    print(json.dumps({"import": t1 - t0, "plan": time.perf_counter() - t1}))
    sys.exit()
from patcher.engine import plan
from patcher.recipe import load_recipe
from patcher.target import find_target
t1 = time.perf_counter()
recipe, target = load_recipe(Path(sys.argv[1])), find_target(Path(sys.argv[2]), package="genpkg")
t2 = time.perf_counter()
p = plan(recipe, target)
t3 = time.perf_counter()
digest = hashlib.sha256()
for f in p.files:
    digest.update(f.rel.encode() + b"\\0" + f.after + b"\\0")
digest.update(json.dumps([s.to_dict() for s in p.steps] + [e.to_dict() for e in p.errors]).encode())
print(json.dumps({"import": t1 - t0, "load": t2 - t1, "plan": t3 - t2, "files": len(p.files),
                  "changed": len(p.changed_files), "errors": len(p.errors),
                  "digest": digest.hexdigest()}))
"""


def plan_in_subprocess(target: Path, recipe: Path, mode: str) -> tuple[Sample, dict[str, Any]]:
    """`mode` is "plan", or "floor" (parse and render only)."""
    sample = checked(run([sys.executable, "-c", GROWTH_DRIVER, str(recipe), str(target), mode]), "growth planning")
    return sample, json.loads(sample.stdout)


def bench_growth(scratch: Path, runs: int, sizes: tuple[int, ...]) -> dict[str, Any]:
    rows = []
    for n in sizes:
        target, recipe = generate_growth(scratch / f"growth-{n}", n)
        lines = sum(len(p.read_text().splitlines()) for p in (target / "genpkg").glob("mod_*.py")) // n
        print(f"  growth: {n} file(s) of {lines} lines, 4 steps each", flush=True)
        got: dict[str, list[tuple[Sample, dict[str, Any]]]] = {"floor": [], "plan": []}
        for mode in got:  # warm-up
            plan_in_subprocess(target, recipe, mode)
        for i in range(runs):
            modes = list(got) if i % 2 == 0 else list(reversed(got))
            for mode in modes:
                got[mode].append(plan_in_subprocess(target, recipe, mode))
        digests = {r["digest"] for mode, results in got.items() if mode != "floor" for _, r in results}
        if len(digests) != 1:
            raise SystemExit(f"bench: two plans of {n} files differ")
        row: dict[str, Any] = {"files": n, "lines_per_file": lines,
                               "bytes": sum(p.stat().st_size for p in (target / "genpkg").glob("mod_*.py"))}
        for mode, results in got.items():
            if mode == "floor":
                continue
            plan_s = statistics.median(r["plan"] for _, r in results)
            row[mode] = {"plan_seconds": plan_s, "per_file_ms": 1000 * plan_s / n,
                         "process_seconds": statistics.median(s.seconds for s, _ in results),
                         "maxrss_mb": statistics.median(s.maxrss_kb for s, _ in results) / 1024}
        row["floor_per_file_ms"] = 1000 * statistics.median(r["plan"] for _, r in got["floor"]) / n
        row["floor_process_seconds"] = statistics.median(s.seconds for s, _ in got["floor"])
        print(f"    per file: {row['plan']['per_file_ms']:.1f} ms (floor {row['floor_per_file_ms']:.1f} ms)",
              flush=True)
        rows.append(row)
    return {"rows": rows}


# ------------------------------------------------------------------------------------------------ 5. --help


def bench_help(runs: int) -> dict[str, Any]:
    print("  specpatch --help", flush=True)
    got = interleaved(runs, specpatch=lambda: checked(run([*specpatch_argv(), "--help"]), "specpatch --help"),
                      python=lambda: checked(run([sys.executable, "-c", "pass"]), "python -c pass"))
    return {"specpatch": summary(got["specpatch"]), "python_c_pass": summary(got["python"])}


# ------------------------------------------------------------------------------------------------ report


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {"platform": platform.platform(), "cpus": os.cpu_count(),
                            "python": platform.python_version(), "executable": sys.executable}
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        info["cpu"] = next(line.split(":", 1)[1].strip() for line in cpuinfo.splitlines()
                           if line.startswith("model name"))
        meminfo = Path("/proc/meminfo").read_text().split()
        info["memory_gb"] = round(int(meminfo[meminfo.index("MemTotal:") + 1]) / 1024 ** 2, 1)
    except (OSError, StopIteration, ValueError):
        pass
    try:
        from importlib.metadata import version

        info["libcst"] = version("libcst")
    except Exception:  # noqa: BLE001 - informational only
        pass
    try:
        commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "patcher"], capture_output=True,
                               text=True).stdout.strip()
        info["commit"] = commit + (" + uncommitted changes in patcher/" if dirty else "")
    except OSError:
        pass
    return info


def conditions() -> dict[str, float | None]:
    """How busy the machine is: the 1-minute load average and the share of time some task waited for a CPU."""
    pressure = None
    try:
        some = Path("/proc/pressure/cpu").read_text().splitlines()[0]
        pressure = float(dict(kv.split("=") for kv in some.split()[1:])["avg60"])
    except (OSError, IndexError, KeyError, ValueError):
        pass
    return {"load1": os.getloadavg()[0], "cpu_pressure_avg60": pressure}


def _met(value: float, target: float) -> str:
    return "yes" if value <= target else "**no**"


def _busy(results: dict[str, Any]) -> str:
    parts = []
    for key in ("apply", "verify", "growth", "help"):
        c = (results.get(key) or {}).get("conditions")
        if c:
            pressure = f", CPU pressure {c['before']['cpu_pressure_avg60']:.0f}%" if c["before"][
                "cpu_pressure_avg60"] is not None else ""
            parts.append(f"{key}: load average {c['before']['load1']:.1f} → {c['after']['load1']:.1f}{pressure}")
    return "; ".join(parts) or "unknown"


def markdown(results: dict[str, Any]) -> str:
    """The results as markdown: machine and method, one table of ratios, the growth table."""
    m, lines = results["machine"], []
    lines += [f"Machine: {m.get('cpu', '?')}, {m['cpus']} CPUs, {m.get('memory_gb', '?')} GB RAM; {m['platform']}; "
              f"Python {m['python']}, libcst {m.get('libcst', '?')}; specpatch {m.get('commit', '?')}; "
              f"{results['date']}.", "",
              f"Method: `python bench/run.py` ({results['runs']} runs per figure). Each figure is the median of "
              f"{results['runs']} fresh processes (imports counted), the subject and its floor interleaved after an "
              f"unmeasured warm-up of each; ratio = median / median. Peak memory: ru_maxrss from os.wait4 (the "
              f"process and the children it waited for; the largest, not a sum). CPU = user + system time. The "
              f"machine was shared with other work: {_busy(results)}.", "",
              "| measure | specpatch | floor | ratio | target | met | CPU ratio |", "|---|---|---|---|---|---|---|"]
    for key, label in (("apply", "apply --dry-run"), ("verify", "verify")):
        r = results.get(key)
        if not r:
            continue
        if "skipped" in r:
            lines.append(f"| {label} | skipped: {r['skipped']} | | | | | |")
            continue
        s, f = r["specpatch"], r["floor"]
        lines.append(f"| {label}: time | {s['seconds']:.2f} s | {f['seconds']:.2f} s | {r['time_ratio']:.2f}× | "
                     f"≤ {TARGETS[key]}× | {_met(r['time_ratio'], TARGETS[key])} | {r['cpu_ratio']:.2f}× |")
        lines.append(f"| {label}: peak memory | {s['maxrss_mb']:.0f} MB | {f['maxrss_mb']:.0f} MB | "
                     f"{r['memory_ratio']:.2f}× | ≤ {TARGETS['memory']}× | "
                     f"{_met(r['memory_ratio'], TARGETS['memory'])} | |")
    h = results.get("help")
    if h:
        lines.append(f"| specpatch --help | {h['specpatch']['seconds']:.3f} s | (`python -c pass`: "
                     f"{h['python_c_pass']['seconds']:.3f} s) | | ≤ {TARGETS['help_seconds']} s | "
                     f"{_met(h['specpatch']['seconds'], TARGETS['help_seconds'])} | |")
    a = results.get("apply")
    if a and "floor_with_libraries" in a:
        lib = a["floor_with_libraries"]
        lines += ["", f"apply: the floor parses and renders {', '.join(a['files'])}. For scale, the same floor "
                      f"that first imports the third-party libraries of the command line (`{lib['libraries']}`) "
                      f"takes {lib['seconds']:.2f} s ({lib['maxrss_mb']:.0f} MB): specpatch is "
                      f"{lib['time_ratio']:.2f}× that."]
    v = results.get("verify")
    if v and "skipped" not in v:
        lines += ["", f"verify: {len(v['checks'])} checks ({', '.join(v['checks'])}); the floor runs the same "
                      f"imports and probes in {v['floor_processes']} bare processes."]
    g = results.get("growth")
    if g:
        lines += ["", "Growth: a generated recipe of 4 steps (field, flag, method, call) per generated file; time "
                      "of `plan()` per file, and of the whole process (import, load, plan) in brackets. floor = "
                      "parse + render of the same files in a process that imports only libcst.", "",
                  "| files | lines/file | floor | specpatch |", "|---|---|---|---|"]
        for row in g["rows"]:
            one = row["plan"]
            lines.append(f"| {row['files']} | {row['lines_per_file']} | {row['floor_per_file_ms']:.1f} ms "
                         f"({row['floor_process_seconds']:.2f} s) | "
                         f"{one['per_file_ms']:.1f} ms ({one['process_seconds']:.2f} s) |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 runs per figure, growth sizes 1, 10, 100 only")
    parser.add_argument("--runs", type=int, help="runs per figure (default 5, or 2 with --quick)")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "latest.json")
    parser.add_argument("--only", default="apply,verify,growth,help", help="comma-separated sections")
    parser.add_argument("--publish", action="store_true", help="also write bench/RESULTS.md")
    args = parser.parse_args(argv)
    runs = args.runs or (2 if args.quick else 5)
    only = set(args.only.split(","))
    sys.path.insert(0, str(REPO))  # run from a checkout: import its patcher
    results: dict[str, Any] = {"machine": machine(), "runs": runs,
                               "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}
    with tempfile.TemporaryDirectory(prefix="specpatch-bench-") as tmp:
        scratch = Path(tmp)
        sections: dict[str, Callable[[], dict[str, Any]]] = {
            "apply": lambda: bench_apply(scratch, runs), "verify": lambda: bench_verify(scratch, runs),
            "growth": lambda: bench_growth(scratch, runs, GROWTH_SIZES if args.quick else GROWTH_SIZES_FULL),
            "help": lambda: bench_help(runs)}
        for name, section in sections.items():
            if name in only:
                before = conditions()
                results[name] = {**section(), "conditions": {"before": before, "after": conditions()}}
    table = markdown(results)
    print("\n" + table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(table)
    print(f"wrote {args.out} and {args.out.with_suffix('.md')}")
    if args.publish:
        (HERE / "RESULTS.md").write_text("# Benchmark results\n\nWritten by `python bench/run.py --publish`; its "
                                         "docstring describes each measure and its floor.\n\n" + table)
        print(f"wrote {HERE / 'RESULTS.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
