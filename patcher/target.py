"""Find the package in a git checkout, a site-packages folder or the package folder itself; read its release."""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from .errors import Location, TargetError, UsageError

STATE_DIRNAME = ".specpatch"


@dataclass(frozen=True)
class Target:
    """A package to patch. `root` is what the user named; diff paths and the state folder are relative to it."""

    root: Path  #: the folder the user passed (checkout, site-packages, or the package folder)
    package_dir: Path  #: the importable package folder, e.g. root/python/sglang
    package: str  #: e.g. "sglang"
    layout: str  #: "checkout" | "site-packages" | "package"
    version: Version | None  #: the release, if it could be read
    version_source: str  #: where the version came from

    @property
    def import_root(self) -> Path:
        """The folder to put first on sys.path so that `import <package>` finds this copy."""
        return self.package_dir.parent

    @property
    def state_dir(self) -> Path:
        return self.root / STATE_DIRNAME

    def rel(self, path: Path) -> str:
        """`path` relative to the root, with forward slashes (what diffs and reports show)."""
        return path.relative_to(self.root).as_posix()

    def file(self, rel_to_package: str) -> Path:
        """The one identity of a recipe step's file: `package_dir / <its real path inside the package>`, however the
        step spells it (`./srt/x.py`, `srt//x.py`, or through a link that stays inside the package all give the
        same path). Refuses a path that leaves the package folder, also through a link, and a NUL byte."""
        if "\0" in rel_to_package:
            raise TargetError(f"`{rel_to_package!r}` contains a NUL byte", location=Location(file=repr(rel_to_package)),
                              hint="a file path cannot contain NUL; fix the recipe's `file`")
        path = self.package_dir / rel_to_package
        real = path.resolve()
        package_real = self.package_dir.resolve()
        if not real.is_relative_to(package_real):
            raise TargetError(f"`{rel_to_package}` resolves outside the package ({real})",
                              location=Location(file=rel_to_package),
                              hint="a link in the target points out of the package; specpatch will not follow it")
        return self.package_dir / real.relative_to(package_real)


def find_target(path: Path | None = None, *, package: str = "sglang", assume_version: str | None = None,
                python: str | None = None) -> Target:
    """Resolve `--target PATH` (or, with no path, the `package` installed in `python`, default this interpreter)
    into a Target.

    One target has one identity however it is spelled: a checkout named as `T`, `T/python` or `T/python/sglang`,
    and a site-packages install named as the folder or as its package folder, give the same root (and so the same
    state folder, lock and ledger)."""
    try:
        return _find_target(path, package=package, assume_version=assume_version, python=python)
    except OSError as exc:
        from .errors import os_failure

        raise os_failure(exc, "reading the target") from None


def _find_target(path: Path | None, *, package: str, assume_version: str | None, python: str | None) -> Target:
    if path is None:
        package_dir = _installed(package, python)
        given = package_dir.parent
    else:
        if "\0" in str(path):
            raise TargetError(f"target {str(path)!r} contains a NUL byte")
        given = Path(path).expanduser().resolve()
        if not given.is_dir():
            raise TargetError(f"target `{path}` is not a folder")
        if (given / "python" / package / "__init__.py").is_file():
            package_dir = given / "python" / package
        elif (given / package / "__init__.py").is_file():
            package_dir = given / package
        elif (given / "__init__.py").is_file() and given.name == package:
            package_dir = given
        else:
            raise TargetError(f"no `{package}` package in {given} (looked for python/{package}/, {package}/ "
                              f"and the folder itself)")
    root, layout = _root_of(package_dir, package, given)
    version, source = _read_version(root, package_dir, package)
    if assume_version is not None:
        try:
            version, source = Version(assume_version), "--assume-version"
        except InvalidVersion:
            raise UsageError(f"--assume-version {assume_version!r} is not a version") from None
    return Target(root=root, package_dir=package_dir, package=package, layout=layout, version=version,
                  version_source=source)


def _root_of(package_dir: Path, package: str, given: Path) -> tuple[Path, str]:
    """The canonical root of a package folder: the checkout (`python/<package>` in a git work tree or beside
    python/pyproject.toml), the site-packages folder (a dist-info beside the package), else the folder given."""
    python = package_dir.parent
    if python.name == "python" and (given == python.parent or (python.parent / ".git").exists()
                                    or (python / "pyproject.toml").is_file()):
        return python.parent, "checkout"
    if any(python.glob(f"{package}-*.dist-info")) or given == python:
        return python, "site-packages"
    return package_dir, "package"


def _installed(package: str, python: str | None) -> Path:
    """The folder of `package` as `python` (default: this interpreter) imports it, without importing it."""
    import sys

    if python is None or Path(python).absolute() == Path(sys.executable).absolute():
        spec = importlib.util.find_spec(package)  # a top-level find_spec does not import the package
        if spec is None or not spec.submodule_search_locations:
            raise TargetError(f"package `{package}` is not installed in this Python ({_python()})")
        return Path(list(spec.submodule_search_locations)[0]).resolve()
    probe = (f"import importlib.util as u, sys; s = u.find_spec({package!r}); "
             f"print(list(s.submodule_search_locations)[0] if s and s.submodule_search_locations else '')")
    try:
        done = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=60, cwd="/")
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TargetError(f"cannot run --python {python}: {exc}") from None
    if done.returncode != 0:
        raise TargetError(f"--python {python} failed to look for `{package}`: "
                          f"{(done.stderr.strip().splitlines() or ['exit code ' + str(done.returncode)])[-1]}")
    folder = done.stdout.strip()
    if not folder:
        raise TargetError(f"package `{package}` is not installed in {python}")
    return Path(folder).resolve()


def _python() -> str:
    import sys

    return sys.executable


def _read_version(root: Path, package_dir: Path, package: str) -> tuple[Version | None, str]:
    """The release from `_version.py`, a dist-info beside the package, or the checkout's metadata."""
    vfile = package_dir / "_version.py"
    if vfile.is_file():
        v = _version_from_py(vfile)
        if v:
            return v, f"{vfile.name}"
    for meta in sorted(package_dir.parent.glob(f"{package}-*.dist-info/METADATA")):
        m = re.search(r"^Version:\s*(\S+)", meta.read_text(encoding="utf-8", errors="replace"), re.M)
        if m and (v := _parse(m.group(1))):
            return v, meta.parent.name
    pyproject = package_dir.parent / "pyproject.toml"
    if pyproject.is_file():
        import tomllib

        try:
            project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
        except tomllib.TOMLDecodeError:
            project = {}
        if isinstance(project.get("version"), str) and (v := _parse(project["version"])):
            return v, "pyproject.toml"
    if (root / ".git").exists():
        try:
            out = subprocess.run(["git", "-C", str(root), "describe", "--tags", "--abbrev=0"], capture_output=True,
                                 text=True, timeout=10)
            if out.returncode == 0 and (v := _parse(out.stdout.strip().lstrip("v"))):
                return v, "git describe"
        except (OSError, subprocess.TimeoutExpired):
            pass
    return None, "unknown"


def _version_from_py(path: Path) -> Version | None:
    try:
        tree = ast.parse(path.read_bytes())
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            names = {t.id for t in node.targets if isinstance(t, ast.Name)}
            if names & {"__version__", "version"}:
                return _parse(node.value.value)
    return None


def _parse(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None
