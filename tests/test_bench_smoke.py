"""bench/run.py's growth generator and the parallel planner: no timings, only that both plans are the same bytes."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from patcher.engine import plan
from patcher.recipe import load_recipe
from patcher.target import find_target

BENCH = Path(__file__).resolve().parents[1] / "bench" / "run.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("specpatch_bench_run", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def plan_of(bench, target: Path, recipe: Path, jobs: str, env: dict | None = None) -> dict:
    """Plan in a fresh interpreter (single-threaded, so the engine may fork) with the benchmark's own driver."""
    done = subprocess.run([sys.executable, "-c", bench.GROWTH_DRIVER, str(recipe), str(target), jobs],
                          capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_generated_files_look_like_sglang(bench, tmp_path):
    target, recipe = bench.generate_growth(tmp_path, 2)
    text = (target / "genpkg" / "mod_001.py").read_text()
    compile(text, "mod_001.py", "exec")
    assert 250 <= len(text.splitlines()) <= 350
    assert "class Component1Args:" in text and text.count("parser.add_argument(") == 29
    p = plan(load_recipe(recipe), find_target(target, package="genpkg"), jobs=1)
    assert p.ok and len(p.changed_files) == 2 and [s.status for s in p.steps] == ["changed"] * 8


@pytest.mark.parametrize("broken", [(), (0, 1, 2)], ids=["clean", "every-file-broken"])
def test_parallel_plan_is_the_sequential_plan(bench, tmp_path, broken):
    target, recipe = bench.generate_growth(tmp_path, 3, broken=broken)
    one, two = plan_of(bench, target, recipe, "1"), plan_of(bench, target, recipe, "2")
    assert (one["workers"], two["workers"]) == (1, 2)  # the second really used a forked worker
    assert one["digest"] == two["digest"]  # files' bytes, steps and errors (to_dict), in order
    assert one["errors"] == two["errors"] == len(broken)  # the field step of each broken file


def test_specpatch_jobs_sets_the_processes_when_plan_decides(bench, tmp_path):
    """`plan(jobs=None)` decides by itself (by the files' sizes and the machine's load); $SPECPATCH_JOBS decides
    instead, whatever the load."""
    target, recipe = bench.generate_growth(tmp_path, 3)
    one = plan_of(bench, target, recipe, "auto", {"SPECPATCH_JOBS": "1"})
    two = plan_of(bench, target, recipe, "auto", {"SPECPATCH_JOBS": "2"})
    assert (one["workers"], two["workers"]) == (1, 2)
    assert one["digest"] == two["digest"]


@pytest.mark.parametrize("broken", [(), (1,)], ids=["clean", "one-file-broken"])
def test_parallel_plan_in_process(bench, tmp_path, broken):
    """In this process (pytest may run threads: the engine then plans here), the same objects either way."""
    target, recipe = bench.generate_growth(tmp_path, 3, broken=broken)
    r, t = load_recipe(recipe), find_target(target, package="genpkg")
    one, two = plan(r, t, jobs=1), plan(r, t, jobs=2)
    assert [(f.rel, f.before, f.after, f.mode) for f in one.files] == [(f.rel, f.before, f.after, f.mode)
                                                                       for f in two.files]
    assert [s.to_dict() for s in one.steps] == [s.to_dict() for s in two.steps]
    assert [e.to_dict() for e in one.errors] == [e.to_dict() for e in two.errors]
    assert all(c.node is not None for e in two.errors for c in e.candidates)  # errors keep their nodes


FAILING_WORKERS = """\
import json, os, pickle, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import run as bench
from patcher import engine
from patcher.recipe import load_recipe
from patcher.target import find_target
target, recipe = bench.generate_growth(Path(sys.argv[2]), 3, broken=(1,))
r, t = load_recipe(recipe), find_target(target, package="genpkg")
def seen(p):
    return [[(f.rel, f.after) for f in p.files], [s.to_dict() for s in p.steps], [e.to_dict() for e in p.errors]]
want = seen(engine.plan(r, t, jobs=1))
out = {}
fork = os.fork
def no_fork():
    raise OSError(11, "Resource temporarily unavailable")
os.fork = no_fork
p = engine.plan(r, t, jobs=2)
out["no fork"] = [p.workers, seen(p) == want]
os.fork = fork
def broken_dumps(*args, **kwargs):
    raise RuntimeError("the worker dies")
pickle.dumps = broken_dumps  # in the worker only: the parent never pickles
p = engine.plan(r, t, jobs=2)
out["worker dies"] = [p.workers, seen(p) == want]
print(json.dumps(out))
"""


def test_parallel_plan_survives_failing_workers(tmp_path):
    """No process to fork, or a worker that dies: the files are planned in the parent, with the same result."""
    done = subprocess.run([sys.executable, "-c", FAILING_WORKERS, str(BENCH.parent), str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"no fork": [1, True], "worker dies": [2, True]}
