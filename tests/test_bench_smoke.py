"""bench/run.py's growth generator and planning driver: no timings, only that they plan what they should."""

from __future__ import annotations

import importlib.util
import json
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


def test_generated_files_look_like_sglang(bench, tmp_path):
    target, recipe = bench.generate_growth(tmp_path, 2)
    text = (target / "genpkg" / "mod_001.py").read_text()
    compile(text, "mod_001.py", "exec")
    assert 250 <= len(text.splitlines()) <= 350
    assert "class Component1Args:" in text and text.count("parser.add_argument(") == 29
    p = plan(load_recipe(recipe), find_target(target, package="genpkg"))
    assert p.ok and len(p.changed_files) == 2 and [s.status for s in p.steps] == ["changed"] * 8


@pytest.mark.parametrize("broken", [(), (0, 2)], ids=["clean", "two-files-broken"])
def test_the_growth_driver_plans_in_a_fresh_process(bench, tmp_path, broken):
    """The driver the benchmark times: same digest as a plan in this process, one error per broken file."""
    target, recipe = bench.generate_growth(tmp_path, 3, broken=broken)
    done = subprocess.run([sys.executable, "-c", bench.GROWTH_DRIVER, str(recipe), str(target), "plan"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert (got["files"], got["errors"]) == (3, len(broken))
    again = subprocess.run([sys.executable, "-c", bench.GROWTH_DRIVER, str(recipe), str(target), "plan"],
                           capture_output=True, text=True, timeout=300)
    assert json.loads(again.stdout)["digest"] == got["digest"]


def test_steps_are_reported_in_recipe_order_across_files(bench, tmp_path):
    target, recipe = bench.generate_growth(tmp_path, 3)
    p = plan(load_recipe(recipe), find_target(target, package="genpkg"))
    assert [s.index for s in p.steps] == sorted(s.index for s in p.steps)
