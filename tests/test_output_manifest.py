"""The recipe writes the bytes recorded in tests/output-manifest/ (scripts/output_manifest.py): on real releases of
two families, fetched from the registry into the cache when missing, and a changed byte is caught."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "output_manifest.py"
MANIFEST = ROOT / "tests" / "output-manifest" / "dynamic-spec-disable.json"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=1800,
                          cwd=ROOT)


def test_the_manifest_covers_the_matrix_and_the_post_releases():
    releases = json.loads(MANIFEST.read_text())["releases"]
    posts = {"0.5.4.post1", "0.5.4.post2", "0.5.4.post3", "0.5.5.post1", "0.5.5.post2", "0.5.5.post3", "0.5.6.post1",
             "0.5.6.post2", "0.5.8.post1", "0.5.10.post1", "0.5.12.post1", "0.5.13.post1", "0.5.15.post1"}
    assert set(releases) == {f"0.5.{minor}" for minor in range(4, 24)} | posts
    assert all(r["outcome"] == "changed" and r["files"] for r in releases.values())


@pytest.mark.sglang  # the script fetches the releases
def test_an_old_and_the_newest_fallback_port_write_the_recorded_bytes():
    # no release gets the alias (0.5.24+ is refused); fixtures/dynamic-spec-disable/release-0.5.24 covers its bytes
    done = run("--versions", "0.5.5,0.5.23")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0.5.5: identical (fallback-0.5.5, 6 files)" in done.stdout
    assert "0.5.23: identical (fallback-0.5.23, 8 files)" in done.stdout


@pytest.mark.sglang  # the script fetches the releases
def test_a_changed_byte_is_reported(tmp_path):
    recorded = json.loads(MANIFEST.read_text())
    files = recorded["releases"]["0.5.5"]["files"]
    files["sglang/srt/environ.py"] = "0" * 64
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps(recorded))
    done = run("--versions", "0.5.5", "--manifest", str(manifest))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "0.5.5: DIFFERENT" in done.stdout and "files: sglang/srt/environ.py" in done.stdout, done.stdout


VLLM_MANIFEST = ROOT / "tests" / "output-manifest" / "dynamic-spec-disable-vllm.json"


@pytest.mark.network  # the script fetches the releases
def test_the_vllm_recipe_writes_the_recorded_bytes():
    """The package comes from the recipe (vllm), and so do the default releases (the five tests/test_vllm.py tries)
    and the manifest (tests/output-manifest/dynamic-spec-disable-vllm.json)."""
    releases = json.loads(VLLM_MANIFEST.read_text())["releases"]
    assert {v: r["variant"] for v, r in releases.items()} == {"0.12.0": "backport", "0.23.0": "backport",
                                                              "0.24.0": "alias", "0.33.0": "alias",
                                                              "0.34.0": "alias-0.34"}
    done = run("--recipe", "dynamic-spec-disable-vllm")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0.12.0: identical (backport, 4 files)" in done.stdout
    assert "0.33.0: identical (alias, 3 files)" in done.stdout
    assert "0.34.0: identical (alias-0.34, 3 files)" in done.stdout
    assert "5 identical, 0 different" in done.stdout
