"""verify: syntax checks, the differential import smoke test with stubs and timeouts, probes, pristine trees, fetch."""

from __future__ import annotations

import json
import os
import shutil
import sys
import textwrap
import threading
import time
import zipfile
from pathlib import Path

import pytest

from patcher import verify
from patcher.errors import FetchError
from patcher.fetch import cache_dir, fetch_release
from patcher.recipe import Probe, VerifySpec
from patcher.target import Target, find_target

PKG = "fakepkg"


def make_target(root: Path, files: dict[str, str], package: str = PKG) -> Target:
    """A site-packages style target: root/<package>/... with `files` (paths relative to the package folder)."""
    (root / package).mkdir(parents=True, exist_ok=True)
    (root / package / "__init__.py").write_text("")
    for rel, text in files.items():
        path = root / package / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return find_target(root, package=package)


def patch(target: Target, rel: str, new_text: str) -> dict[str, bytes]:
    """Overwrite a package file as a recipe would; return the `pristine` mapping (root-relative, as the engine has)."""
    path = target.package_dir / rel
    before = path.read_bytes()
    path.write_text(textwrap.dedent(new_text))
    return {target.rel(path): before}


def by_name(checks: list[verify.Check]) -> dict[str, verify.Check]:
    return {c.name: c for c in checks}


# ------------------------------------------------------------------------------------------------------ runner


def test_runner_is_standalone_stdlib_and_python38():
    """The runner runs in the target's interpreter, where specpatch and its dependencies may be missing."""
    import ast

    tree = ast.parse(verify.RUNNER.read_text(), feature_version=(3, 8))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module and not node.level}
    assert imported and imported <= set(sys.stdlib_module_names)
    assert not any(isinstance(node, ast.ImportFrom) and node.level for node in ast.walk(tree))


# ------------------------------------------------------------------------------------------------------ syntax


def test_check_syntax_passes_and_points_at_the_error(tmp_path):
    good, bad = tmp_path / "good.py", tmp_path / "bad.py"
    good.write_text("x = 1\n")
    bad.write_text("x = 1\ndef f(:\n    pass\n")
    checks = verify.check_syntax([good, bad, tmp_path / "missing.py"], relative_to=tmp_path)
    assert [(c.kind, c.name, c.status) for c in checks] == [
        ("syntax", "good.py", "passed"), ("syntax", "bad.py", "failed"), ("syntax", "missing.py", "failed")]
    assert checks[1].message.startswith("line 2, column 7:")
    assert checks[1].details == "def f(:\n      ^"
    assert "FileNotFoundError" in checks[2].message


def test_check_syntax_in_another_interpreter(tmp_path, monkeypatch):
    monkeypatch.setattr(verify, "_same_interpreter", lambda python: False)  # force the subprocess path
    good, bad = tmp_path / "good.py", tmp_path / "bad.py"
    good.write_text("x = 1\n")
    bad.write_text("x = (\n")
    checks = verify.check_syntax([good, bad], python=sys.executable)
    assert [c.status for c in checks] == ["passed", "failed"]
    assert checks[1].data["line"] == 1 and "never closed" in checks[1].message


# ---------------------------------------------------------------------------------------------- smoke import


def test_module_that_imports_fine_passes(tmp_path):
    target = make_target(tmp_path, {"good.py": "import json\nVALUE = json.dumps(1)\n"})
    [check] = verify.smoke_import(target, VerifySpec(imports=(f"{PKG}.good",)))
    assert check.status == "passed" and check.kind == "import"
    assert check.message.startswith("imported in")
    assert Path(check.data["file"]) == target.package_dir / "good.py"
    assert check.data["stubs_used"] == []
    json.dumps(check.to_dict())


def test_module_that_raises_fails_with_type_message_and_traceback(tmp_path):
    target = make_target(tmp_path, {"bad.py": "def f():\n    raise ValueError('boom')\nf()\n"})
    [check] = verify.smoke_import(target, VerifySpec(imports=(f"{PKG}.bad",)))
    assert check.status == "failed" and check.blocking
    assert check.message == "ValueError: boom"
    assert "bad.py\", line 2, in f" in check.details and check.details.endswith("ValueError: boom")
    assert check.data["differential"].startswith("not run")


def test_native_module_works_only_with_its_stub(tmp_path):
    code = """\
        from typing import Optional
        import fake_native
        import fake_native.ops.sub as sub
        from fake_native import kernel, Base
        from fake_native.ops import fused

        Hint = Optional[fake_native.Tensor]          # typing accepts a stub attribute
        Union = fake_native.Tensor | None

        class Mine(Base):                            # a stub attribute can be a base class
            def __init__(self):
                super().__init__(1, x=2)
                self.real = True

        assert Mine().real and not isinstance(1, Base) and not isinstance(Mine(), fake_native.Other)
        assert kernel(1, 2).anything.at_all() is not None      # calls return mocks
        assert fused is not None and sub.deep.attr is not None
        assert fake_native.__path__ == []
        try:
            fake_native.__qualname__
        except AttributeError:
            pass
        else:
            raise AssertionError("dunders must look absent")
        import importlib.metadata
        assert fake_native.__version__ == "0.0.0" == importlib.metadata.version("fake_native")
    """
    target = make_target(tmp_path, {"uses_native.py": code})
    spec = VerifySpec(imports=(f"{PKG}.uses_native",))
    [without] = verify.smoke_import(target, spec)
    assert without.status == "failed"
    assert without.message == "ModuleNotFoundError: No module named 'fake_native'"
    assert "verify.stubs" in without.data["hint"]
    [with_stub] = verify.smoke_import(target, VerifySpec(imports=spec.imports, stubs=("fake_native", "unused_native")))
    assert with_stub.status == "passed", with_stub.details
    assert with_stub.data["stubs_used"] == ["fake_native"]
    assert with_stub.message.endswith("stubs: fake_native")


def test_stubs_never_replace_the_stdlib_or_the_target(tmp_path):
    target = make_target(tmp_path, {"m.py": "import json, fakepkg\nassert json.dumps([]) == '[]'\n"})
    [check] = verify.smoke_import(target, VerifySpec(imports=(f"{PKG}.m",), stubs=("json", PKG)))
    assert check.status == "passed", check.details
    assert set(check.data["stubs_refused"]) == {"json", PKG}


def test_stub_replacing_an_installed_package_is_reported(tmp_path):
    target = make_target(tmp_path, {"m.py": "import email_helper_pkg\nassert email_helper_pkg.anything\n"})
    (tmp_path / "email_helper_pkg").mkdir()
    (tmp_path / "email_helper_pkg" / "__init__.py").write_text("raise ImportError('the real one needs a GPU')\n")
    [check] = verify.smoke_import(target, VerifySpec(imports=(f"{PKG}.m",), stubs=("email_helper_pkg",)))
    assert check.status == "passed", check.details
    assert check.data["stubs_replacing_installed"] == ["email_helper_pkg"]


def test_broken_by_the_patch_is_failed(tmp_path):
    target = make_target(tmp_path, {"mod.py": "X = 1\n", "other.py": "Y = 2\n"})
    pristine = patch(target, "mod.py", "X = 1\nundefined_name\n")
    checks = by_name(verify.smoke_import(target, VerifySpec(imports=(f"{PKG}.mod", f"{PKG}.other")),
                                         pristine=pristine))
    assert checks[f"{PKG}.other"].status == "passed"
    check = checks[f"{PKG}.mod"]
    assert check.status == "failed"
    assert check.message == "NameError: name 'undefined_name' is not defined (imports fine from the pristine files)"
    assert check.data["differential"] == "pristine passed"
    assert check.data["pristine"]["status"] == "passed"


def test_broken_in_pristine_too_is_environment(tmp_path):
    target = make_target(tmp_path, {"mod.py": "import not_installed_dependency_xyz\nX = 1\n"})
    pristine = patch(target, "mod.py", "import not_installed_dependency_xyz\nX = 1\nZ = 3  # the patch\n")
    [check] = verify.smoke_import(target, VerifySpec(imports=(f"{PKG}.mod",)), pristine=pristine)
    assert check.status == "environment" and not check.blocking
    assert check.message == ("fails from the pristine files too: "
                             "ModuleNotFoundError: No module named 'not_installed_dependency_xyz'")
    assert check.data["differential"] == "pristine fails the same way"


def test_patch_failing_before_an_environment_error_is_still_failed(tmp_path):
    """The pristine module fails on a missing dependency, but the patch broke it earlier: blame the patch."""
    target = make_target(tmp_path, {"mod.py": "import not_installed_dependency_xyz\n"})
    pristine = patch(target, "mod.py", "raise RuntimeError('patched wrong')\nimport not_installed_dependency_xyz\n")
    [check] = verify.smoke_import(target, VerifySpec(imports=(f"{PKG}.mod",)), pristine=pristine)
    assert check.status == "failed"
    assert "the pristine files fail differently" in check.message
    assert check.data["differential"] == "pristine fails differently"


def test_error_naming_the_tree_path_is_the_same_in_both_trees(tmp_path):
    target = make_target(tmp_path, {"mod.py": "raise RuntimeError(f'cannot load {__file__}')\n"})
    pristine = patch(target, "mod.py", "# patched\nraise RuntimeError(f'cannot load {__file__}')\n")
    [check] = verify.smoke_import(target, VerifySpec(imports=(f"{PKG}.mod",)), pristine=pristine)
    assert check.status == "environment"


def test_hanging_import_times_out_and_its_process_group_is_killed(tmp_path):
    pid_file = tmp_path / "child.pid"
    hang = f"""\
        import subprocess, time
        child = subprocess.Popen(["sleep", "60"])
        open({str(pid_file)!r}, "w").write(str(child.pid))
        time.sleep(60)
    """
    target = make_target(tmp_path / "t", {"hang.py": hang, "later.py": "X = 1\n"})
    start = time.monotonic()
    checks = by_name(verify.smoke_import(target, VerifySpec(imports=(f"{PKG}.hang", f"{PKG}.later"), timeout=3)))
    assert time.monotonic() - start < 20
    check = checks[f"{PKG}.hang"]
    assert check.status == "timeout" and check.blocking
    assert check.message == "no result within 3 s: the process group was killed"
    assert "hang.py" in check.details  # faulthandler's dump shows where it hung
    assert checks[f"{PKG}.later"].status == "skipped"
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_hanging_in_pristine_too_is_environment(tmp_path):
    target = make_target(tmp_path, {"hang.py": "import time\ntime.sleep(60)\n"})
    pristine = patch(target, "hang.py", "import time\ntime.sleep(60)  # patched\n")
    [check] = verify.smoke_import(target, VerifySpec(imports=(f"{PKG}.hang",), timeout=2), pristine=pristine)
    assert check.status == "environment"


def test_interpreter_that_dies_mid_import(tmp_path):
    target = make_target(tmp_path, {"die.py": "import os\nos._exit(3)\n", "after.py": ""})
    checks = verify.smoke_import(target, VerifySpec(imports=(f"{PKG}.die", f"{PKG}.after")))
    assert [c.status for c in checks] == ["failed", "skipped"]
    assert checks[0].message == "the interpreter died while importing it (exit code 3)"


def test_isolation_from_pythonpath_and_the_working_folder(tmp_path, monkeypatch):
    leak = tmp_path / "leak"
    leak.mkdir()
    (leak / "leaky_module_xyz.py").write_text("")
    monkeypatch.setenv("PYTHONPATH", str(leak))
    monkeypatch.chdir(leak)
    target = make_target(tmp_path / "t", {"m.py": "import leaky_module_xyz\n"})
    [check] = verify.smoke_import(target, VerifySpec(imports=(f"{PKG}.m",)))
    assert check.status == "failed" and "leaky_module_xyz" in check.message


def test_target_comes_first_on_sys_path(tmp_path):
    """A copy of the package elsewhere on the path (an installed release) must not be the one imported."""
    other = make_target(tmp_path / "installed", {"which.py": "WHERE = 'installed'\n"})
    target = make_target(tmp_path / "t", {"which.py": "WHERE = 'target'\n"})
    probe = tmp_path / "recipe" / "p.py"
    probe.parent.mkdir()
    probe.write_text(f"import sys\nsys.path.append({str(other.import_root)!r})\n"
                     f"from {PKG}.which import WHERE\nprint('PROBE-OK:', WHERE)\n")
    [check] = verify.run_probes(target, VerifySpec(probes=(Probe(path="p.py"),)), probe.parent, params={})
    assert check.message == "target"


def test_missing_interpreter_is_environment(tmp_path):
    target = make_target(tmp_path, {"m.py": ""})
    [check] = verify.smoke_import(target, VerifySpec(imports=(f"{PKG}.m",)), python=tmp_path / "no-python")
    assert check.status == "environment" and check.message.startswith("cannot start")


def test_no_imports_no_checks(tmp_path):
    assert verify.smoke_import(make_target(tmp_path, {}), VerifySpec()) == []


# ------------------------------------------------------------------------------------------- pristine tree


def test_pristine_tree_links_untouched_entries_and_restores_touched_ones(tmp_path):
    target = make_target(tmp_path / "t", {"a/b/c.py": "new c\n", "a/d.py": "d\n", "e/f.py": "f\n", "new.py": "n\n"})
    (target.package_dir / "a" / "__pycache__").mkdir()
    pristine = {
        target.rel(target.package_dir / "a/b/c.py"): b"old c\n",  # root-relative, as the engine gives it
        "new.py": None,  # package-relative; created by the patch: absent from the pristine tree
    }
    dest = verify.build_pristine_tree(target, pristine, tmp_path / "scratch")
    top = dest / PKG
    assert (top / "a/b/c.py").read_bytes() == b"old c\n" and not (top / "a/b/c.py").is_symlink()
    assert not (top / "new.py").exists()
    assert (top / "a/d.py").is_symlink() and (top / "e").is_symlink()  # untouched: linked, folder and all
    assert not (top / "a").is_symlink() and not (top / "a/__pycache__").exists()
    assert (target.package_dir / "a/b/c.py").read_text() == "new c\n"  # the target is untouched


def test_pristine_key_outside_the_package_is_refused(tmp_path):
    target = make_target(tmp_path / "t", {})
    with pytest.raises(ValueError, match="not a file inside the package"):
        verify.build_pristine_tree(target, {"../evil.py": b""}, tmp_path / "scratch")


# ------------------------------------------------------------------------------------------------------ probes


def _probes(tmp_path: Path, scripts: dict[str, str], **probe_options) -> tuple[Path, VerifySpec]:
    folder = tmp_path / "recipe"
    folder.mkdir(exist_ok=True)
    for name, text in scripts.items():
        (folder / name).write_text(textwrap.dedent(text))
    return folder, VerifySpec(stubs=("fake_native",),
                              probes=tuple(Probe(path=name, **probe_options) for name in scripts))


def test_probes_pass_fail_skip_by_convention(tmp_path):
    target = make_target(tmp_path / "t", {"flags.py": "THRESHOLD = 0\n"})
    folder, spec = _probes(tmp_path, {
        "ok.py": """\
            import json, os
            from fakepkg.flags import THRESHOLD
            import fake_native
            params = json.loads(os.environ["SPECPATCH_PARAMS"])
            assert os.environ["SPECPATCH_TARGET_ROOT"] and os.environ["SPECPATCH_PACKAGE"] == "fakepkg"
            print("noise")
            print(f"PROBE-OK: threshold {THRESHOLD}, param {params['threshold_default']}")
            print("trailing noise")
        """,
        "fail_exit.py": "import sys\nprint('PROBE-FAIL: flag missing')\nsys.exit(2)\n",
        "fail_mark.py": "print('PROBE-FAIL: exited 0 but said no')\n",
        "crash.py": "raise KeyError('speculative_disable_batch_threshold')\n",
        "skip.py": "print('PROBE-SKIP: needs a GPU')\n",
        "silent.py": "pass\n",
    })
    checks = by_name(verify.run_probes(target, spec, folder, python=sys.executable, params={"threshold_default": 7}))
    assert checks["ok.py"].status == "passed" and checks["ok.py"].message == "threshold 0, param 7"
    assert checks["ok.py"].data["stubs_used"] == ["fake_native"]
    assert checks["fail_exit.py"].status == "failed"
    assert checks["fail_exit.py"].message == "flag missing (exit code 2)"
    assert checks["fail_mark.py"].status == "failed" and checks["fail_mark.py"].message == "exited 0 but said no"
    assert checks["crash.py"].status == "failed"
    assert checks["crash.py"].message == "KeyError: 'speculative_disable_batch_threshold' (exit code 1)"
    assert "Traceback" in checks["crash.py"].details
    assert checks["skip.py"].status == "skipped" and checks["skip.py"].message == "needs a GPU"
    assert checks["silent.py"].status == "passed" and checks["silent.py"].message == "exit code 0"


def test_a_probe_that_dies_importing_a_module_the_environment_lacks_is_environment_not_failed(tmp_path):
    # as the smoke test says of an import that fails from the pristine files too: no verdict on the patch (a vLLM
    # probe in an interpreter without cbor2); a module of the target's own package missing is the patch's business
    target = make_target(tmp_path / "t", {"flags.py": "THRESHOLD = 0\n"})
    folder, spec = _probes(tmp_path, {
        "lacks.py": "import cbor2_not_installed_here\n",
        "lacks_sub.py": "import json\nfrom cbor2_not_installed_here.types import Tag\n",
        "own.py": "import fakepkg.not_there\n",
        "says_no.py": "print('PROBE-FAIL: no')\nimport cbor2_not_installed_here\n",
        # a newcomer's find: another version of a dependency (transformers without `PreTrainedConfig`), the error
        # the pristine imports fail with too, failed the probe and rolled the apply back
        "other_version.py": "from json import NoSuchNameHere\n",
        "own_name.py": "from fakepkg.flags import NOT_THERE\n",
    })
    checks = by_name(verify.run_probes(target, spec, folder, python=sys.executable, params={}))
    assert checks["lacks.py"].status == "environment" and "`cbor2_not_installed_here`" in checks["lacks.py"].message
    assert checks["lacks_sub.py"].status == "environment"
    assert checks["other_version.py"].status == "environment" and "`json`" in checks["other_version.py"].message
    assert checks["own_name.py"].status == "failed"
    assert checks["own.py"].status == "failed"
    assert checks["says_no.py"].status == "failed"


def test_probe_timeout(tmp_path):
    target = make_target(tmp_path / "t", {})
    folder, spec = _probes(tmp_path, {"slow.py": "import time\nprint('PROBE-OK: started')\ntime.sleep(60)\n"},
                           timeout=2)
    start = time.monotonic()
    [check] = verify.run_probes(target, spec, folder, params={})
    assert check.status == "timeout" and time.monotonic() - start < 15
    assert "PROBE-OK: started" in check.details


def test_probe_outside_the_recipe_folder_or_missing(tmp_path):
    target = make_target(tmp_path / "t", {})
    folder = tmp_path / "recipe"
    folder.mkdir()
    (tmp_path / "outside.py").write_text("print('PROBE-OK: should not run')\n")
    spec = VerifySpec(probes=(Probe(path="../outside.py"), Probe(path="nope.py", name="named")))
    checks = verify.run_probes(target, spec, folder, params={})
    assert [(c.name, c.status) for c in checks] == [("../outside.py", "failed"), ("named", "failed")]
    assert "leaves the recipe's folder" in checks[0].message and "no probe script" in checks[1].message


def test_shims_run_before_imports_and_probes_in_both_trees(tmp_path):
    """A name the target defines only on a GPU build: the shim provides it before the first import, in the patched
    process, the pristine comparison and the probe; without the shim both trees fail the same way (environment)."""
    target = make_target(tmp_path / "t", {
        "kernels.py": "import os\nif os.environ.get('FAKE_CUDA'):\n    from fake_native import topk\n",
        "worker.py": "from fakepkg.kernels import topk\nVALUE = 1\n",
    })
    folder = tmp_path / "recipe"
    folder.mkdir()
    (folder / "cpu_shim.py").write_text("import fakepkg.kernels as k\nif not hasattr(k, 'topk'):\n    k.topk = sorted\n")
    (folder / "probe.py").write_text("from fakepkg.worker import topk, VALUE\nprint(f'PROBE-OK: {topk([2, 1])} {VALUE}')\n")
    pristine = patch(target, "worker.py", "from fakepkg.kernels import topk\nVALUE = 2\n")
    spec = VerifySpec(imports=(f"{PKG}.worker",), probes=(Probe(path="probe.py"),))
    [without] = verify.smoke_import(target, spec, pristine=pristine, recipe_folder=folder)
    assert without.status == "environment" and "cannot import name 'topk'" in without.message
    shimmed = VerifySpec(imports=spec.imports, probes=spec.probes, shims=("cpu_shim.py",))
    [check] = verify.smoke_import(target, shimmed, pristine=pristine, recipe_folder=folder)
    assert check.status == "passed", check.message
    [probe] = verify.run_probes(target, shimmed, folder, params={})
    assert probe.status == "passed" and probe.message == "[1, 2] 2"
    # a patch that breaks the module is still blamed with the shim in place (the pristine one imports)
    patch(target, "worker.py", "from fakepkg.kernels import topk\nVALUE = undefined_name\n")
    [broken] = verify.smoke_import(target, shimmed, pristine=pristine, recipe_folder=folder)
    assert broken.status == "failed" and "imports fine from the pristine files" in broken.message


def test_a_failing_shim_fails_imports_and_probes_naming_it(tmp_path):
    target = make_target(tmp_path / "t", {"m.py": "X = 1\n"})
    folder = tmp_path / "recipe"
    folder.mkdir()
    (folder / "shim.py").write_text("raise RuntimeError('no such kernel')\n")
    (folder / "probe.py").write_text("print('PROBE-OK: should not run')\n")
    spec = VerifySpec(imports=(f"{PKG}.m",), probes=(Probe(path="probe.py"),), shims=("shim.py",))
    [check] = verify.smoke_import(target, spec, recipe_folder=folder)
    assert check.status == "failed"
    assert check.message == "ShimError: the verify shim shim.py failed: RuntimeError: no such kernel"
    [probe] = verify.run_probes(target, spec, folder, params={})
    assert probe.status == "failed" and "the verify shim shim.py failed" in probe.message
    with pytest.raises(ValueError, match="leaves the recipe's folder"):
        verify.smoke_import(target, VerifySpec(imports=spec.imports, shims=("../x.py",)), recipe_folder=folder)


# --------------------------------------------------------------------------------------- can_import_target


def test_can_import_target(tmp_path):
    good = make_target(tmp_path / "good", {})
    ok, why = verify.can_import_target(sys.executable, good, ())
    assert ok and "imports fakepkg" in why
    ok, why = verify.can_import_target(sys.executable, good, (), requires=("not_installed_xyz",))
    assert not ok and why.startswith("not_installed_xyz not installed")
    bad = make_target(tmp_path / "bad", {})
    (bad.package_dir / "__init__.py").write_text("import numpy_is_missing_xyz\n")
    ok, why = verify.can_import_target(sys.executable, bad, ())
    assert not ok and "No module named 'numpy_is_missing_xyz'" in why
    stubbed = make_target(tmp_path / "stubbed", {})
    (stubbed.package_dir / "__init__.py").write_text("import fake_native\n")
    assert verify.can_import_target(sys.executable, stubbed, ("fake_native",))[0]
    ok, why = verify.can_import_target(tmp_path / "no-python", good, ())
    assert not ok and why.startswith("cannot start")


# ------------------------------------------------------------------------------------------------------- fetch


def _fake_wheel(wheels: Path, name: str = "fakedist", version: str = "1.2.0", members: dict | None = None) -> Path:
    wheels.mkdir(parents=True, exist_ok=True)
    path = wheels / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in (members or {f"{name}/__init__.py": "X = 1\n",
                                         f"{name}-{version}.dist-info/METADATA": f"Version: {version}\n"}).items():
            archive.writestr(member, text)
    return path


def test_fetch_release_unpacks_a_cached_wheel_once(tmp_path):
    _fake_wheel(tmp_path / "wheels")
    (tmp_path / "unpacked" / ".fakedist-1.2-killed").mkdir(parents=True)  # a half unpack of a killed process
    results: list[Path] = []
    threads = [threading.Thread(target=lambda: results.append(fetch_release("fakedist", "1.2", tmp_path)))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(results)) == 1
    folder = results[0]
    assert folder == tmp_path / "unpacked" / "fakedist-1.2"
    assert (folder / "fakedist" / "__init__.py").read_text() == "X = 1\n"
    assert find_target(folder, package="fakedist").version is not None
    assert [p.name for p in (tmp_path / "unpacked").iterdir() if not p.name.endswith(".lock")] == ["fakedist-1.2"]


def test_fetch_release_refuses_unsafe_wheels_and_reports_download_failures(tmp_path):
    _fake_wheel(tmp_path / "wheels", members={"../escape.py": ""})
    with pytest.raises(FetchError, match="unsafe path"):
        fetch_release("fakedist", "1.2.0", tmp_path)
    assert not (tmp_path / "escape.py").exists() and not (tmp_path / "unpacked" / "fakedist-1.2.0").exists()
    with pytest.raises(FetchError, match="could not download"):
        fetch_release("otherdist", "1.0", tmp_path, python=shutil.which("false") or "/bin/false")
    with pytest.raises(FetchError, match="not a version"):
        fetch_release("fakedist", "latest", tmp_path)


def test_a_cached_wheel_with_damaged_compressed_data_is_bad_input_and_removed(tmp_path):
    # a hostile round: a flipped byte inside a member's deflate stream raised zlib.error: exit 1 on every later run,
    # the wheel kept in the cache
    (tmp_path / "wheels").mkdir()
    wheel = tmp_path / "wheels" / "fakedist-1.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("fakedist/__init__.py", "".join(f"X{i} = {i}\n" for i in range(2000)))
        archive.writestr("fakedist-1.2.dist-info/METADATA", "Version: 1.2\n")
    with zipfile.ZipFile(wheel) as archive:
        info = archive.getinfo("fakedist/__init__.py")
    data = bytearray(wheel.read_bytes())
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    for i in range(start + 4, start + 40):
        data[i] ^= 0x5A
    wheel.write_bytes(bytes(data))
    with pytest.raises(FetchError, match="not a valid wheel") as caught:
        fetch_release("fakedist", "1.2", tmp_path)
    assert "a bug" not in caught.value.title and caught.value.exit_code != 1
    assert not wheel.exists() and not (tmp_path / "unpacked" / "fakedist-1.2").exists()


def test_a_pristine_fetch_unpacks_again_a_cached_tree_edited_since(tmp_path):
    # a safety round: `try` ran on a cached tree a recipe had been applied to ("already applied", then "verified"),
    # and on a truncated one ("this release may have moved the code")
    import base64
    import hashlib

    def line(rel: str, data: bytes) -> str:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        return f"{rel},sha256={digest},{len(data)}\n"

    members = {"fakedist/__init__.py": b"X = 1\n", "fakedist-1.2.dist-info/METADATA": b"Version: 1.2\n"}
    record = "".join(line(rel, data) for rel, data in members.items()) + "fakedist-1.2.dist-info/RECORD,,\n"
    _fake_wheel(tmp_path / "wheels", version="1.2", members={**{k: v.decode() for k, v in members.items()},
                                                             "fakedist-1.2.dist-info/RECORD": record})
    folder = fetch_release("fakedist", "1.2", tmp_path)
    (folder / "fakedist" / "__init__.py").write_text("X = 2\n")
    assert fetch_release("fakedist", "1.2", tmp_path) == folder  # as cached: tests and port read it as it is
    assert (folder / "fakedist" / "__init__.py").read_text() == "X = 2\n"
    assert fetch_release("fakedist", "1.2", tmp_path, pristine=True) == folder
    assert (folder / "fakedist" / "__init__.py").read_text() == "X = 1\n"
    (folder / ".specpatch").mkdir()
    (folder / ".specpatch" / "ledger.json").write_text("{}")
    fetch_release("fakedist", "1.2", tmp_path, pristine=True)
    assert not (folder / ".specpatch").exists()
    (folder / "fakedist" / "__pycache__").mkdir()
    (folder / "fakedist" / "__pycache__" / "x.pyc").write_bytes(b"")
    fetch_release("fakedist", "1.2", tmp_path, pristine=True)
    assert (folder / "fakedist" / "__pycache__" / "x.pyc").exists()  # bytecode is no edit: left alone


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("SPECPATCH_CACHE", str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c"
    monkeypatch.delenv("SPECPATCH_CACHE")
    assert cache_dir() == Path.home() / ".cache" / "specpatch"


# ----------------------------------------------------------------------------- real sglang, CPU environment

SGLANG_STUBS = ("sgl_kernel", "flashinfer", "torchvision", "deep_gemm")
SERVER_ARGS = "sglang.srt.server_args"
WORKER = "sglang.srt.speculative.eagle_worker_v2"


@pytest.fixture
def sglang_059(sglang_release, tmp_path) -> Target:
    """A private copy of the pristine sglang 0.5.9 wheel (package and dist-info), site-packages style."""
    release = sglang_release("0.5.9")
    for entry in release.iterdir():
        if entry.is_dir():
            shutil.copytree(entry, tmp_path / "site" / entry.name, ignore=shutil.ignore_patterns("__pycache__"))
    return find_target(tmp_path / "site")


@pytest.mark.sglang
@pytest.mark.cpuenv
def test_real_sglang_imports_with_stubs(sglang_059, cpuenv_python):
    assert verify.can_import_target(cpuenv_python, sglang_059, SGLANG_STUBS, requires=("torch",))[0]
    checks = by_name(verify.smoke_import(sglang_059, VerifySpec(imports=(SERVER_ARGS, WORKER), stubs=SGLANG_STUBS),
                                         python=cpuenv_python))
    assert checks[SERVER_ARGS].status == "passed", checks[SERVER_ARGS].details
    assert checks[WORKER].status == "passed", checks[WORKER].details
    assert "sgl_kernel" in checks[WORKER].data["stubs_used"]
    assert Path(checks[WORKER].data["file"]).is_relative_to(sglang_059.package_dir)


@pytest.mark.sglang
@pytest.mark.cpuenv
def test_real_sglang_broken_by_a_patch_is_blamed(sglang_059, cpuenv_python):
    path = sglang_059.package_dir / "srt" / "server_args.py"
    before = path.read_bytes()
    path.write_bytes(before + b"\nraise RuntimeError('specpatch test: broken on purpose')\n")
    [check] = verify.smoke_import(sglang_059, VerifySpec(imports=(SERVER_ARGS,), stubs=SGLANG_STUBS),
                                  python=cpuenv_python, pristine={sglang_059.rel(path): before})
    assert check.status == "failed"
    assert check.message == ("RuntimeError: specpatch test: broken on purpose "
                             "(imports fine from the pristine files)")


@pytest.mark.sglang
@pytest.mark.cpuenv
def test_real_sglang_missing_native_stub_is_environment(sglang_059, cpuenv_python):
    """Without the stubs the CPU environment lacks torchvision/sgl_kernel: not the patch's fault."""
    path = sglang_059.package_dir / "srt" / "server_args.py"
    before = path.read_bytes()
    path.write_bytes(before + b"\n# a harmless patch\n")
    [check] = verify.smoke_import(sglang_059, VerifySpec(imports=(WORKER,), stubs=()), python=cpuenv_python,
                                  pristine={sglang_059.rel(path): before})
    assert check.status == "environment", check.message
    assert "No module named" in check.message


@pytest.mark.sglang
@pytest.mark.cpuenv
def test_real_sglang_probe_builds_the_server_args_parser(sglang_059, cpuenv_python, tmp_path):
    folder, spec = _probes(tmp_path, {"parser.py": """\
        import argparse
        from sglang.srt.server_args import ServerArgs
        parser = argparse.ArgumentParser()
        ServerArgs.add_cli_args(parser)
        args = parser.parse_args(["--model-path", "dummy", "--speculative-accept-threshold-acc", "0.5"])
        assert args.speculative_accept_threshold_acc == 0.5
        print(f"PROBE-OK: {len(parser._actions)} arguments parsed")
    """})
    spec = VerifySpec(stubs=SGLANG_STUBS, probes=spec.probes)
    [check] = verify.run_probes(sglang_059, spec, folder, python=cpuenv_python, params={})
    assert check.status == "passed", check.details
    assert check.message.endswith("arguments parsed")


# ------------------------------------------------------------------------------------------ the one sequence


def test_verify_tree_without_smoke_runs_syntax_only_and_says_what_did_not_run(tmp_path):
    target = make_target(tmp_path / "t", {"a.py": "X = 1\n"})
    spec = VerifySpec(imports=(f"{PKG}.a",), probes=(Probe(path="p.py", name="p"),))
    got = verify.verify_tree(target, spec, [target.package_dir / "a.py"], recipe_folder=tmp_path, params={},
                             pristine=lambda: pytest.fail("no import ran: the backups are not read"), smoke=False)
    assert [(c.kind, c.status) for c in got.checks] == [("syntax", "passed")]
    assert got.unverified == (f"import {PKG}.a", "probe p") and not got.failed
    assert got.notes == ("--no-smoke: the import smoke test and probes were skipped",)


def test_verify_tree_in_an_interpreter_that_cannot_start_skips_imports_and_probes(tmp_path):
    target = make_target(tmp_path / "t", {"a.py": "X = 1\n"})
    spec = VerifySpec(imports=(f"{PKG}.a",), probes=(Probe(path="p.py", name="p"),))
    got = verify.verify_tree(target, spec, [target.package_dir / "a.py"], recipe_folder=tmp_path, params={},
                             pristine=lambda: pytest.fail("not read"), python=str(tmp_path / "no-python"))
    assert [(c.kind, c.name, c.status) for c in got.checks] == [
        ("syntax", "fakepkg/a.py", "passed"), ("import", f"{PKG}.a", "skipped"), ("probe", "p", "skipped")]
    assert got.unverified == (f"import {PKG}.a", "probe p")
    assert "cannot import fakepkg" in got.notes[0] and "specpatch verify --python PY" in got.notes[0]


def test_verify_tree_runs_imports_and_probes_and_blames_a_failure(tmp_path):
    target = make_target(tmp_path / "t", {"a.py": "X = 1\n", "b.py": "raise ImportError('broken by the patch')\n"})
    pristine = {target.rel(target.package_dir / "b.py"): b"Y = 2\n"}
    folder = tmp_path / "recipe"
    folder.mkdir()
    (folder / "p.py").write_text("print('PROBE-OK: fine')\n")
    spec = VerifySpec(imports=(f"{PKG}.a", f"{PKG}.b"), probes=(Probe(path="p.py", name="p"),))
    got = verify.verify_tree(target, spec, [target.package_dir / "b.py"], recipe_folder=folder, params={},
                             pristine=lambda: pristine)
    statuses = {(c.kind, c.name): c.status for c in got.checks}
    assert statuses == {("syntax", "fakepkg/b.py"): "passed", ("import", f"{PKG}.a"): "passed",
                        ("import", f"{PKG}.b"): "failed", ("probe", "p"): "passed"}
    assert got.failed and got.unverified == () and got.notes == ()


def test_a_patch_that_breaks_the_package_import_fails_verification(tmp_path):
    # a recipe added `import nonexistent_mod` to a module `import <package>` runs (sglang's environ.py): the
    # package no longer imports, which is the patch's doing, not the environment's: the pristine files import
    target = make_target(tmp_path / "t", {"env.py": "X = 1\n", "a.py": "Y = 2\n"})
    (target.package_dir / "__init__.py").write_text("from . import env\n")
    pristine = patch(target, "env.py", "import nonexistent_mod_xyz\nX = 1\n")
    spec = VerifySpec(imports=(f"{PKG}.a",), probes=(Probe(path="p.py", name="p"),))
    got = verify.verify_tree(target, spec, [target.package_dir / "env.py"], recipe_folder=tmp_path, params={},
                             pristine=lambda: pristine)
    assert [(c.kind, c.name, c.status) for c in got.checks] == [
        ("syntax", "fakepkg/env.py", "passed"), ("import", PKG, "failed"), ("import", f"{PKG}.a", "skipped"),
        ("probe", "p", "skipped")]
    assert got.failed and "nonexistent_mod_xyz" in got.checks[1].message
    assert "imports fine from the pristine files" in got.checks[1].message
    assert "import nonexistent_mod_xyz" in got.checks[1].details  # the traceback


def test_a_package_whose_pristine_files_fail_otherwise_is_blamed_on_the_patch(tmp_path):
    # a hostile round: the patch's own `raise ImportError(...)` in a module `import <package>` runs, in an
    # interpreter where the pristine package fails on a missing dependency further on: it was "this environment
    # cannot import", apply exited 0 and kept the patch
    target = make_target(tmp_path / "t", {"env.py": "X = 1\n", "later.py": "import numpy_is_missing_xyz\n"})
    (target.package_dir / "__init__.py").write_text("from . import env\nfrom . import later\n")
    pristine = patch(target, "env.py", "raise ImportError('patched env')\n")
    got = verify.verify_tree(target, VerifySpec(), [target.package_dir / "env.py"], recipe_folder=tmp_path,
                             params={}, pristine=lambda: pristine)
    [syntax, broken] = got.checks
    assert broken.status == "failed" and got.failed and "patched env" in broken.message
    assert "the pristine files fail differently" in broken.message and "numpy_is_missing_xyz" in broken.message


def test_a_package_the_environment_cannot_import_either_way_is_not_blamed_on_the_patch(tmp_path):
    target = make_target(tmp_path / "t", {"env.py": "import numpy_is_missing_xyz\n"})
    (target.package_dir / "__init__.py").write_text("from . import env\n")
    pristine = patch(target, "env.py", "import numpy_is_missing_xyz\nX = 1\n")
    spec = VerifySpec(imports=(f"{PKG}.env",))
    got = verify.verify_tree(target, spec, [target.package_dir / "env.py"], recipe_folder=tmp_path, params={},
                             pristine=lambda: pristine)
    assert [(c.kind, c.status) for c in got.checks] == [("syntax", "passed"), ("import", "skipped")]
    assert not got.failed and "cannot import fakepkg" in got.notes[0]


def test_a_check_takes_a_status_string_and_refuses_an_unknown_one():
    assert verify.Check("import", "m", "passed").status is verify.PASSED
    with pytest.raises(ValueError):
        verify.Check("import", "m", "fine")
