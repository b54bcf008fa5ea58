"""Shared pytest fixtures. Each block is self-contained: add yours as a new block."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# ---------------------------------------------------------------- real releases and the CPU environment (verify)


@pytest.fixture(scope="session")
def sglang_release():
    """A factory: `sglang_release("0.5.9")` is the folder of that release's unpacked wheel (`sglang/` and its
    dist-info), downloaded once into `$SPECPATCH_CACHE/wheels` and unpacked once. It is shared between tests and
    workers: copy what you change into tmp_path."""
    from patcher.fetch import fetch_release

    def get(version: str) -> Path:
        return fetch_release("sglang", version)

    return get


def _env_python(python: str, what: str, build: str, modules: str = "torch, transformers") -> str:
    """`python` if `import <modules>` works in it; else the test fails (or skips with SPECPATCH_ALLOW_NO_CPUENV=1),
    saying how to `build` the environment."""
    try:
        done = subprocess.run([python, "-c", f"import {modules}"], capture_output=True, text=True, timeout=300)
        problem = None if done.returncode == 0 else (done.stderr.strip().splitlines() or ["exit code"])[-1]
    except (OSError, subprocess.TimeoutExpired) as exc:
        problem = str(exc)
    if problem:
        message = (f"the {what} is missing: `import {modules}` fails in {python} ({problem}); build it "
                   f"with {build}, or set SPECPATCH_ALLOW_NO_CPUENV=1 to skip")
        if os.environ.get("SPECPATCH_ALLOW_NO_CPUENV") == "1":
            pytest.skip(message)
        pytest.fail(message, pytrace=False)
    return python


@pytest.fixture(scope="session")
def cpuenv_python_tf5() -> str:
    """The interpreter of the CPU environment for sglang 0.5.10+ (transformers 5): `$SPECPATCH_CPU_PYTHON_TF5`,
    built by `scripts/cpu-env.sh .venv-tf5 requirements/sglang-cpu-tf5.txt`. Missing, the tests that need it fail
    (or skip with SPECPATCH_ALLOW_NO_CPUENV=1)."""
    return _env_python(os.environ.get("SPECPATCH_CPU_PYTHON_TF5") or "python-tf5-not-configured",
                       "transformers-5 CPU environment (SPECPATCH_CPU_PYTHON_TF5)",
                       "`scripts/cpu-env.sh .venv-tf5 requirements/sglang-cpu-tf5.txt`")


@pytest.fixture(scope="session")
def cpuenv_python() -> str:
    """The interpreter of the CPU environment in which sglang imports (`scripts/cpu-env.sh` builds it): this one,
    or `$SPECPATCH_CPU_PYTHON`. Without torch there, a `cpuenv` test fails, so that CI never passes by skipping
    the real smoke test; `SPECPATCH_ALLOW_NO_CPUENV=1` turns the failure into a skip for a quick local run."""
    return _env_python(os.environ.get("SPECPATCH_CPU_PYTHON") or sys.executable, "CPU environment",
                       "`scripts/cpu-env.sh` and run pytest with its python", modules="torch")


# ------------------------------------------------------------------------- the tiers: registry or none (markers)

#: modules whose tests download from the package registry without the sglang_release fixture (build dependencies)
NETWORK_MODULES = {"test_packaging.py"}
#: fixtures that download from the registry: vLLM's CPU environment, which the vLLM tests use to try real releases
NETWORK_FIXTURES = {"vllm_python"}


def pytest_configure(config):
    config.addinivalue_line("markers", "network: downloads from the package registry, not a release of sglang "
                                       "(vLLM wheels, a clean venv's build dependencies)")


def pytest_collection_modifyitems(config, items):
    """Every test that uses `sglang_release` (directly or through another fixture) is marked `sglang`, and the tests
    of NETWORK_MODULES or NETWORK_FIXTURES `network`: `pytest -m "not sglang and not network"` is the tier that needs
    no registry."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if "sglang_release" in fixtures:
            item.add_marker(pytest.mark.sglang)
        if item.path.name in NETWORK_MODULES or fixtures & NETWORK_FIXTURES:
            item.add_marker(pytest.mark.network)


@pytest.fixture(autouse=True)
def _no_registry_unless_marked(request, monkeypatch, tmp_path_factory):
    """A test marked neither `sglang` nor `network` runs as on a machine without the registry, in every run (not
    only in the offline tier): an empty release cache and pip without an index, for it and its subprocesses. A test
    that downloads a release without saying so fails here, instead of passing on a machine whose cache has it."""
    if request.node.get_closest_marker("sglang") or request.node.get_closest_marker("network"):
        return
    monkeypatch.setenv("SPECPATCH_CACHE", str(tmp_path_factory.mktemp("no-registry-cache")))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
