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
        """The absolute path of a recipe step's file; refuses anything that leaves the package folder."""
        path = self.package_dir / rel_to_package
        real = path.resolve()
        if not real.is_relative_to(self.package_dir.resolve()):
            raise TargetError(f"`{rel_to_package}` resolves outside the package ({real})",
                              location=Location(file=rel_to_package),
                              hint="a link in the target points out of the package; specpatch will not follow it")
        return path


def find_target(path: Path | None = None, *, package: str = "sglang", assume_version: str | None = None) -> Target:
    """Resolve `--target PATH` (or, with no path, the installed `package`) into a Target."""
    if path is None:
        spec = importlib.util.find_spec(package)  # a top-level find_spec does not import the package
        if spec is None or not spec.submodule_search_locations:
            raise TargetError(f"package `{package}` is not installed in this Python ({_python()})")
        package_dir = Path(list(spec.submodule_search_locations)[0])
        root, layout = package_dir.parent, "site-packages"
    else:
        root = Path(path).expanduser().absolute()
        if not root.is_dir():
            raise TargetError(f"target `{path}` is not a folder")
        if (root / "python" / package / "__init__.py").is_file():
            package_dir, layout = root / "python" / package, "checkout"
        elif (root / package / "__init__.py").is_file():
            package_dir, layout = root / package, "site-packages"
        elif (root / "__init__.py").is_file() and root.name == package:
            package_dir, layout = root, "package"
        else:
            raise TargetError(f"no `{package}` package in {root} (looked for python/{package}/, {package}/ "
                              f"and the folder itself)")
    version, source = _read_version(root, package_dir, package)
    if assume_version is not None:
        try:
            version, source = Version(assume_version), "--assume-version"
        except InvalidVersion:
            raise UsageError(f"--assume-version {assume_version!r} is not a version") from None
    return Target(root=root, package_dir=package_dir, package=package, layout=layout, version=version,
                  version_source=source)


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
