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

VERSIONS = matrix.releases("sglang", include_post=False)


def test_the_registry_lists_the_known_range():
    assert VERSIONS[0] == "0.5.4" and "0.5.9" in VERSIONS and len(VERSIONS) >= 20, VERSIONS


@pytest.mark.parametrize("version", VERSIONS)
def test_try_on_release(version, cpuenv_python, cpuenv_python_tf5):
    row = matrix.run_specpatch("dynamic-spec-disable", version,
                               matrix.python_for(version, cpuenv_python, cpuenv_python_tf5))
    assert not row.half_patched, f"{version}: the tree was left half-patched"
    assert row.ok, f"{version}: {row.outcome} (exit {row.exit_code}): {row.reason} {row.checks}"
    if row.outcome == "refused":
        assert "--speculative" in row.reason, f"{version}: a refusal must name the upstream flag: {row.reason}"
    else:
        assert "probes passed" in row.checks and "not passed" not in row.checks, row.checks
