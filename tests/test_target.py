"""Target discovery: checkout, site-packages and package layouts; version sources; refusal out of range."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from patcher.errors import StateDamaged, TargetError, UsageError
from patcher.target import find_target


def make_pkg(folder: Path, version: str | None = "0.5.9") -> Path:
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    if version:
        (folder / "_version.py").write_text(f"__version__ = version = '{version}'\n")
    return folder


def test_checkout_layout(tmp_path):
    make_pkg(tmp_path / "python" / "sglang")
    t = find_target(tmp_path)
    assert t.layout == "checkout" and t.package_dir == tmp_path / "python" / "sglang"
    assert t.version == Version("0.5.9") and t.rel(t.package_dir / "srt" / "x.py") == "python/sglang/srt/x.py"
    assert t.import_root == tmp_path / "python"


def test_site_packages_layout_reads_dist_info(tmp_path):
    make_pkg(tmp_path / "sglang", version=None)
    (tmp_path / "sglang-0.5.10.dist-info").mkdir()
    (tmp_path / "sglang-0.5.10.dist-info" / "METADATA").write_text("Name: sglang\nVersion: 0.5.10\n")
    t = find_target(tmp_path)
    assert t.layout == "site-packages" and t.version == Version("0.5.10") and "dist-info" in t.version_source


def test_dist_info_folders_that_say_different_releases_are_refused(tmp_path):
    # hostile round 13 (12): 0.5.9's code with a leftover sglang-0.5.13.dist-info and no _version.py was taken for
    # 0.5.13 (the first in string order), silently; the 0.5.13 variant was then planned on 0.5.9's code
    make_pkg(tmp_path / "sglang", version=None)
    for v in ("0.5.9", "0.5.13"):
        (tmp_path / f"sglang-{v}.dist-info").mkdir()
        (tmp_path / f"sglang-{v}.dist-info" / "METADATA").write_text(f"Name: sglang\nVersion: {v}\n")
    with pytest.raises(TargetError, match="sglang-0.5.9.dist-info, sglang-0.5.13.dist-info") as err:
        find_target(tmp_path)
    assert "--assume-version" in err.value.hint
    assert find_target(tmp_path, assume_version="0.5.9").version == Version("0.5.9")


def test_a_package_this_python_lacks_points_to_python_and_target(tmp_path):
    # hostile round 13 (13): the hint proposed `--package`, the option just used
    with pytest.raises(TargetError) as err:
        find_target(None, package="no_such_package_here")
    assert "--python" in err.value.hint and "--package" not in err.value.hint


def test_package_folder_itself(tmp_path):
    pkg = make_pkg(tmp_path / "sglang")
    t = find_target(pkg)
    assert t.layout == "package" and t.root == pkg and t.rel(pkg / "a.py") == "a.py"


def test_a_package_with_no_marker_beside_it_has_one_state_folder_however_it_is_named(tmp_path):
    # a hostile round: `--target T` and `--target T/sglang` (no dist-info, no checkout) used two state folders:
    # after an apply through T, `rollback --target T/sglang` said "nothing to roll back" on a patched tree
    pkg = make_pkg(tmp_path / "sglang")
    assert find_target(tmp_path).root == tmp_path and find_target(pkg).root == pkg  # nothing recorded yet
    (tmp_path / ".specpatch").mkdir()
    assert find_target(pkg).root == tmp_path and find_target(pkg).state_dir == tmp_path / ".specpatch"
    (tmp_path / ".specpatch").rmdir()
    (pkg / ".specpatch").mkdir()
    assert find_target(tmp_path).root == pkg and find_target(tmp_path).rel(pkg / "a.py") == "a.py"
    (tmp_path / ".specpatch").mkdir()
    with pytest.raises(StateDamaged, match="two state folders for one package"):
        find_target(pkg)


def test_checkout_pyproject_version(tmp_path):
    make_pkg(tmp_path / "python" / "sglang", version=None)
    (tmp_path / "python" / "pyproject.toml").write_text('[project]\nname = "sglang"\nversion = "0.5.7"\n')
    assert find_target(tmp_path).version == Version("0.5.7")


def test_unknown_version_and_assume_version(tmp_path):
    make_pkg(tmp_path / "sglang", version=None)
    assert find_target(tmp_path).version is None
    assert find_target(tmp_path, assume_version="0.5.9").version == Version("0.5.9")
    with pytest.raises(UsageError):
        find_target(tmp_path, assume_version="not-a-version")


def test_not_a_target(tmp_path):
    with pytest.raises(TargetError, match="no `sglang` package"):
        find_target(tmp_path)
    with pytest.raises(TargetError, match="not a folder"):
        find_target(tmp_path / "missing")


def test_step_file_through_a_link_out_of_the_tree_is_refused(tmp_path):
    pkg = make_pkg(tmp_path / "sglang")
    outside = tmp_path / "outside.py"
    outside.write_text("x = 1\n")
    (pkg / "srt").mkdir()
    (pkg / "srt" / "evil.py").symlink_to(outside)
    t = find_target(tmp_path)
    with pytest.raises(TargetError, match="outside the package"):
        t.file("srt/evil.py")


def test_package_option_finds_installed_package_without_importing(tmp_path, monkeypatch):
    pkg = make_pkg(tmp_path / "site" / "fakepkg_sp")
    (pkg / "__init__.py").write_text("raise RuntimeError('imported!')\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    t = find_target(None, package="fakepkg_sp")
    assert t.package_dir == pkg and t.version == Version("0.5.9")


@pytest.mark.parametrize("name", ["../t1", ".sglang", "a..b", "sglang.", ""])
def test_a_package_option_that_is_not_a_package_name_is_bad_input(name):
    # these reached importlib (ImportError, ModuleNotFoundError: exit 1)
    from patcher.errors import TargetError

    with pytest.raises(TargetError, match="is not a package name"):
        find_target(None, package=name)


def test_a_package_folder_linked_in_from_another_tree_is_the_target_it_stands_in(tmp_path):
    # hostile round 13 (newcomer 01): `T/sglang -> ../real/sglang` named as `--target T/sglang` was resolved to
    # `real/`, a second state folder: status and rollback said "no recipe applied" while T's ledger held one
    make_pkg(tmp_path / "real" / "sglang")
    (tmp_path / "real" / "sglang-0.5.9.dist-info").mkdir()
    (tmp_path / "T").mkdir()
    (tmp_path / "T" / "sglang-0.5.9.dist-info").mkdir()
    (tmp_path / "T" / "sglang").symlink_to(tmp_path / "real" / "sglang")
    by_root, by_package = find_target(tmp_path / "T"), find_target(tmp_path / "T" / "sglang")
    assert by_root.root == by_package.root == (tmp_path / "T").resolve()
    assert by_root.package_dir == by_package.package_dir
    # a link to the target's root is the folder it points to, as before
    (tmp_path / "link").symlink_to(tmp_path / "T")
    assert find_target(tmp_path / "link").root == by_root.root


def test_a_package_folder_linked_into_site_packages_is_one_target_however_it_is_named(tmp_path, monkeypatch):
    # hostile round 15, installs (04): `--package` resolved the link (state beside the real folder), `--target
    # site-packages` kept it: two ledgers, and a rollback the other way said "the original bytes are gone"
    import importlib.util
    import types

    from patcher import target as target_module

    real = tmp_path / "src" / "sglang"
    real.mkdir(parents=True)
    (real / "__init__.py").write_text("")
    (real / "_version.py").write_text("__version__ = '0.5.9'\n")
    site = tmp_path / "venv" / "site-packages"
    (site / "sglang-0.5.9.dist-info").mkdir(parents=True)
    (site / "sglang-0.5.9.dist-info" / "METADATA").write_text("Name: sglang\nVersion: 0.5.9\n")
    (site / "sglang").symlink_to(real)
    found = types.SimpleNamespace(submodule_search_locations=[str(site / "sglang")])
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: found if name == "sglang" else None)
    by_package = target_module.find_target(None, package="sglang")
    by_folder = target_module.find_target(site, package="sglang")
    assert by_package.root == by_folder.root == site.resolve()
    assert by_package.state_dir == by_folder.state_dir
