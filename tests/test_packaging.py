"""Packaging: a wheel builds from the source tree, carries every recipe file and fixture case, and installs into a
clean venv (its dependencies from the registry) where `specpatch list`, `show` and `test` work.

Takes about a minute: the build backend and the dependencies are downloaded (pip's cache makes reruns faster).
The source is copied to a scratch folder first, so that the build leaves no `build/` or `*.egg-info` in the checkout.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("patcher", "recipes", "fixtures", "pyproject.toml", "README.md")


def run(argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "SPECPATCH_RECIPE_PATH", "PYTHONHOME")}
    env["NO_COLOR"] = "1"
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900, **kwargs)
    assert done.returncode == 0, f"{' '.join(map(str, argv))}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done


def files_under(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    scratch = tmp_path_factory.mktemp("pkg")
    src = scratch / "src"
    src.mkdir()
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(path, src / name)
    dist = scratch / "dist"
    if importlib.util.find_spec("build") is not None:
        run([sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(src)])
    else:  # pip builds through the same PEP 517 backend, in an isolated environment too
        run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", "-w", str(dist),
             str(src)])
    wheels = sorted(dist.glob("specpatch-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_wheel_carries_recipes_fixtures_and_entry_points(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        info = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        entry_points = archive.read(info).decode()
    recipes = {n[len("patcher/recipes/"):] for n in names if n.startswith("patcher/recipes/")}
    assert recipes == files_under(ROOT / "recipes")  # every YAML, code snippet, variant file and probe
    fixtures = {n[len("patcher/fixtures/"):] for n in names if n.startswith("patcher/fixtures/")}
    assert fixtures == files_under(ROOT / "fixtures")
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert "specpatch = patcher.cli:run" in entry_points
    assert "specpatch = patcher.pytest_plugin" in entry_points


def test_wheel_installs_and_runs_in_a_clean_venv(wheel, tmp_path):
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    bindir = venv / ("Scripts" if os.name == "nt" else "bin")
    python = bindir / "python"
    run([str(python), "-m", "pip", "install", "--disable-pip-version-check", str(wheel)])
    work = tmp_path / "elsewhere"  # not the checkout: the installed copy must be the one that runs
    work.mkdir()
    specpatch = str(bindir / "specpatch")

    where = run([str(python), "-c", "import patcher; print(patcher.__file__)"], cwd=work).stdout.strip()
    assert Path(where).is_relative_to(venv)

    listed = run([specpatch, "list", "--json"], cwd=work)
    recipes = {r["id"]: r for r in json.loads(listed.stdout)}
    assert "dynamic-spec-disable" in recipes
    assert Path(recipes["dynamic-spec-disable"]["source"]).is_relative_to(venv)
    assert "dynamic-spec-disable" in run([specpatch, "list"], cwd=work).stdout

    # show loads the recipe: its code_file snippets, its variants file and its probes must all be there
    shown = run([specpatch, "show", "dynamic-spec-disable"], cwd=work)
    assert "speculative" in shown.stdout and "check: probe" in shown.stdout
    info = json.loads(run([specpatch, "show", "dynamic-spec-disable", "--json"], cwd=work).stdout)
    assert any(step["op"] == "add_method" for v in info["variants"] for step in v["steps"])

    tested = run([specpatch, "test"], cwd=work)  # the shipped fixture cases, from the installed copy
    assert "0 failed" in tested.stderr and "FAIL" not in tested.stdout
    schema = json.loads(run([specpatch, "schema"], cwd=work).stdout)
    assert schema["title"] == "specpatch recipe"
    assert run([specpatch, "--version"], cwd=work).stdout.startswith("specpatch ")
