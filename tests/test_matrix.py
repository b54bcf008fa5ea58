"""The release matrix in CI: `specpatch try dynamic-spec-disable` on every sglang release from 0.5.4 to the newest
the registry lists. A release fails the test when its outcome is an error or its tree was left half-patched; a
refusal passes only when it names the upstream mechanism and the equivalent configuration."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import matrix  # noqa: E402

pytestmark = [pytest.mark.sglang, pytest.mark.cpuenv]

#: the releases of docs/matrix.md, tried without asking the registry at collection; the registry is asked in a
#: fixture, and a release it lists beyond these is tried by test_the_registry_lists_no_untried_release
KNOWN = [f"0.5.{minor}" for minor in range(4, 24)]
#: post releases whose code differs from their final release where the recipe touches it (each has its variant or
#: is one a later release's variant serves); the other post releases are in docs/matrix.md's run
KNOWN_POST = ["0.5.4.post1", "0.5.4.post2", "0.5.4.post3", "0.5.5.post3", "0.5.6.post1", "0.5.6.post2",
              "0.5.15.post1"]


@pytest.fixture(scope="module")
def registry_versions() -> list[str]:
    return matrix.releases("sglang", include_post=False)


def check_try(version, cpuenv_python, cpuenv_python_tf5):
    row = matrix.run_specpatch("dynamic-spec-disable", version,
                               matrix.python_for(version, cpuenv_python, cpuenv_python_tf5))
    assert not row.half_patched, f"{version}: the tree was left half-patched"
    assert row.ok, f"{version}: {row.outcome} (exit {row.exit_code}): {row.reason} {row.checks}"
    if row.outcome == "refused":
        assert "--speculative" in row.reason, f"{version}: a refusal must name the upstream flag: {row.reason}"
    else:
        assert "probes passed" in row.checks and "not passed" not in row.checks, row.checks


def test_the_registry_lists_the_known_range(registry_versions):
    assert registry_versions[0] == "0.5.4" and "0.5.9" in registry_versions and len(registry_versions) >= 20, \
        registry_versions
    assert set(KNOWN) <= set(registry_versions), sorted(set(KNOWN) - set(registry_versions))


@pytest.mark.parametrize("version", KNOWN + KNOWN_POST)
def test_try_on_release(version, cpuenv_python, cpuenv_python_tf5):
    check_try(version, cpuenv_python, cpuenv_python_tf5)


def test_the_registry_lists_no_untried_release(registry_versions, cpuenv_python, cpuenv_python_tf5):
    """A release published after the matrix was written is tried too (and should then join KNOWN)."""
    for version in registry_versions:
        if version not in KNOWN:
            check_try(version, cpuenv_python, cpuenv_python_tf5)

