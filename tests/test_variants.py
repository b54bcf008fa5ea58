"""dynamic-spec-disable's per-release variants (recipes/dynamic-spec-disable/variants.yaml).

Which variant each release 0.5.4-0.5.24 gets, and, on the real releases from the registry (cached): every step of a
patching variant applies (`changed`), the result compiles, and a second plan on the patched files changes nothing.
The behaviour of each variant is checked by its probes (`specpatch try`, tests/test_matrix.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from packaging.version import Version

from patcher.engine import plan
from patcher.recipe import parse_recipe
from patcher.target import find_target

RECIPE = Path(__file__).resolve().parent.parent / "recipes" / "dynamic-spec-disable.yaml"

EXPECTED = {
    "0.5.4": "fallback-0.5.4", "0.5.5": "fallback-0.5.5",
    "0.5.6": "fallback-0.5.6", "0.5.7": "fallback-0.5.7", "0.5.8": "fallback-0.5.8", "0.5.9": "fallback-0.5.9",
    "0.5.10": "fallback-0.5.10", "0.5.11": "fallback-0.5.11", "0.5.12": "fallback-0.5.12",
    "0.5.13": "fallback-0.5.13",
    "0.5.14": "fallback-0.5.14", "0.5.15": "fallback-0.5.15", "0.5.16": "fallback-0.5.16",
    "0.5.17": "fallback-0.5.17", "0.5.18": "fallback-0.5.18",
    "0.5.19": "fallback-0.5.19",
    "0.5.20": "fallback-0.5.20", "0.5.21": "fallback-0.5.21", "0.5.22": "fallback-0.5.22",
    "0.5.23": "fallback-0.5.23",
}


@pytest.fixture(scope="module")
def recipe():
    text = RECIPE.read_text(encoding="utf-8")
    if "variants_file:" not in text:  # until the recipe includes the file itself
        text += "\nvariants_file: variants.yaml\n"
    return parse_recipe(text, RECIPE)


@pytest.mark.parametrize("version", sorted(EXPECTED, key=Version))
def test_each_release_gets_its_variant(recipe, version):
    selection = recipe.select(Version(version))
    assert selection.variant == EXPECTED[version], selection.reason


@pytest.mark.parametrize("version", ["0.5.4.post3", "0.5.13.post1", "0.5.15.post1"])
def test_post_releases_fall_in_the_ranges(recipe, version):
    assert recipe.select(Version(version)).variant


@pytest.mark.parametrize("version", ["0.5.24", "0.5.24.post1", "0.6.0"])
def test_releases_after_0_5_23_are_refused_naming_the_port_to_carry(recipe, version):
    # a newcomer's round: 0.5.24+ took the alias to upstream's adaptive speculation, "applied and verified", whose
    # 0-step path measured 0.35x - 0.50x a server without speculation: a release past the measured ports is refused
    selection = recipe.select(Version(version))
    assert selection.variant == "newer-than-measured" and selection.refuse
    assert "--variant fallback-0.5.23" in selection.refuse and "0.35x - 0.50x" in selection.refuse
    assert recipe.nearest_variant(Version(version)).name == "fallback-0.5.23"


def test_a_post_release_of_0_5_13_gets_the_0_5_13_port(recipe):
    # 0.5.13.post1 sorts between 0.5.13 and 0.5.14: the ScheduleBatch/on_publish port, not the 0.5.14+ alias
    assert recipe.select(Version("0.5.13.post1")).variant == "fallback-0.5.13"


REFUSING = """\
id: toy-refusal
title: A recipe that patches one release range and refuses another
target: {package: sglang, versions: ">=0.5.0"}
steps:
  - op: add_dataclass_field
    file: srt/server_args.py
    class: ServerArgs
    after: a
    code: "b: int = 0"
variants:
  - name: patch-old
    versions: "<0.5.13"
  - name: refuse-new
    versions: ">=0.5.13"
    refuse: |
      sglang 0.5.13+ ships this itself: pass --upstream-flag N instead.
"""


@pytest.mark.parametrize("release, outcome", [("0.5.12", "changed"), ("0.5.13", "refused")])
def test_a_refusing_variant_refuses_with_its_message_and_writes_nothing(tmp_path, release, outcome):
    from patcher import api
    from patcher.errors import ExitCode

    recipe = parse_recipe(REFUSING, tmp_path / "toy-refusal.yaml")
    (tmp_path / "site" / "sglang" / "srt").mkdir(parents=True)
    (tmp_path / "site" / "sglang" / "__init__.py").write_text("")
    source = tmp_path / "site" / "sglang" / "srt" / "server_args.py"
    source.write_text("class ServerArgs:\n    a: int = 1\n")
    (tmp_path / "site" / f"sglang-{release}.dist-info").mkdir()
    (tmp_path / "site" / f"sglang-{release}.dist-info" / "METADATA").write_text(f"Name: sglang\nVersion: {release}\n")
    result = api.apply_recipe(recipe, find_target(tmp_path / "site"), smoke=False)
    assert result.outcome == outcome
    if outcome == "refused":
        assert result.exit_code == ExitCode.CANNOT_APPLY
        assert "--upstream-flag N" in str(result.error) and result.plan.selection.variant == "refuse-new"
        assert source.read_text() == "class ServerArgs:\n    a: int = 1\n"
    else:
        assert "b: int = 0" in source.read_text()


def _mirror(release: Path, files: list[Path], dest: Path) -> Path:
    """The release's package marker, dist-info and the given files only: enough for find_target and a plan."""
    package = release / "sglang"
    for info in release.glob("sglang-*.dist-info"):
        shutil.copytree(info, dest / info.name)
    for path in [package / "__init__.py", *files]:
        target = dest / path.relative_to(release)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    return dest


@pytest.mark.sglang
@pytest.mark.parametrize("version", [v for v, name in sorted(EXPECTED.items(), key=lambda kv: Version(kv[0]))
                                     if not name.startswith("refuse")])
def test_variant_applies_cleanly_and_twice_changes_nothing(recipe, version, sglang_release, tmp_path):
    release = sglang_release(version)
    first = plan(recipe, find_target(release))
    assert first.selection.variant == EXPECTED[version]
    assert first.ok, [str(e) for e in first.errors]
    # every edit lands; only an import the release already has may be "already applied"
    not_changed = [(s.name, s.status) for s in first.steps if s.status != "changed"]
    assert all(op == "add_import" for op in (s.op for s in first.steps if s.status != "changed")), not_changed
    mirror = _mirror(release, [f.path for f in first.files], tmp_path / "tree")
    for f in first.changed_files:
        (mirror / f.path.relative_to(release)).write_bytes(f.after)
    again = plan(recipe, find_target(mirror))
    assert again.ok and not again.changed_files, [(s.name, s.status) for s in again.steps]
    assert {s.status for s in again.steps} == {"already_applied"}
