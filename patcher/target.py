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
class PackageInfo:
    """What specpatch knows of one engine's source layout: where a git checkout keeps the package. The release is
    read the same way for every package (`_version.py`, then the dist-info, then pyproject.toml; in a checkout a
    release tag), and the import root is always the folder above the package folder."""

    name: str  #: the import package, e.g. "vllm"
    #: the folder of a git checkout that holds the package, relative to the checkout's root ("" = the root itself)
    checkout_src: str = "python"


#: The engines specpatch knows; any other package is looked for the way sglang is laid out.
PACKAGES: dict[str, PackageInfo] = {
    "sglang": PackageInfo("sglang", checkout_src="python"),  # sglang/python/sglang, python/pyproject.toml
    "vllm": PackageInfo("vllm", checkout_src=""),  # vllm/vllm, pyproject.toml at the root (setuptools-scm version)
}


def package_info(package: str) -> PackageInfo:
    """The layout of `package`: its entry in PACKAGES, else sglang's layout under the package's name."""
    return PACKAGES.get(package) or PackageInfo(package)


@dataclass(frozen=True)
class Target:
    """A package to patch. `root` is what the user named; diff paths and the state folder are relative to it."""

    root: Path  #: the folder the user passed (checkout, site-packages, or the package folder)
    package_dir: Path  #: the importable package folder, e.g. root/python/sglang
    package: str  #: e.g. "sglang"
    layout: str  #: "checkout" | "site-packages" | "package"
    version: Version | None  #: the release, if it could be read
    version_source: str  #: where the version came from
    #: why the release could not be told, with what was found where (commands that need the release refuse with it)
    version_problem: str | None = None

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
    if not (isinstance(package, str) and package.isidentifier()):
        raise TargetError(f"--package {package!r} is not a package name (a top-level import name, e.g. sglang)")
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
        named = Path(path).expanduser()
        given = named.resolve()
        if named.is_symlink() and named.name == package and (given / "__init__.py").is_file():
            # a package folder linked in from another tree (`T/sglang -> ../real/sglang`) is the package folder
            # of `T`, as `--target T` finds it: one target, one state folder
            given = named.parent.resolve() / named.name
        if not given.is_dir():
            raise TargetError(f"target `{path}` is not a folder")
        src = package_info(package).checkout_src
        if src and (given / src / package / "__init__.py").is_file():
            package_dir = given / src / package
        elif (given / package / "__init__.py").is_file():
            package_dir = given / package
        elif (given / "__init__.py").is_file() and given.name == package:
            package_dir = given
        else:
            raise TargetError(f"no `{package}` package in {given} (looked for python/{package}/, {package}/ "
                              f"and the folder itself)")
    root, layout = _root_of(package_dir, package, given)
    root, layout = _one_state_folder(root, layout, package_dir)
    problem = None
    if assume_version is not None:
        try:
            version, source = Version(assume_version), "--assume-version"
        except InvalidVersion:
            raise UsageError(f"--assume-version {assume_version!r} is not a version") from None
    elif layout == "checkout" and (root / ".git").exists():
        version, source, problem = _checkout_release(root, package_dir, package)
    else:
        version, source = _read_version(root, package_dir, package)
        if source.endswith(".dist-info"):
            _one_dist_info(package_dir, package)
    return Target(root=root, package_dir=package_dir, package=package, layout=layout, version=version,
                  version_source=source, version_problem=problem)


def _one_dist_info(package_dir: Path, package: str) -> None:
    """Refuse an install whose release only dist-info folders tell, when they tell several (a copy over an older
    install leaves its `sglang-0.5.13.dist-info` beside `sglang-0.5.9.dist-info`): which release the code is cannot be
    told, and a variant planned for the wrong one writes the wrong code."""
    said = {}
    for meta in package_dir.parent.glob(f"{package}-*.dist-info/METADATA"):
        m = re.search(r"^Version:\s*(\S+)", meta.read_text(encoding="utf-8", errors="replace"), re.M)
        if m and (v := _parse(m.group(1))):
            said.setdefault(v, meta.parent.name)
    if len(said) > 1:
        raise TargetError(f"`{package_dir}` has no `_version.py`, and its dist-info folders say different releases: "
                          f"{', '.join(said[v] for v in sorted(said))}", hint=(
                              "remove the stale dist-info folder (left by an install copied over another), or give "
                              "the release with --assume-version; nothing was written"))


def _root_of(package_dir: Path, package: str, given: Path) -> tuple[Path, str]:
    """The canonical root of a package folder: the checkout (`python/<package>` for sglang, `<package>` at the root
    for vllm: see PACKAGES; in a git work tree or beside the checkout's pyproject.toml), the site-packages folder (a
    dist-info beside the package), else the folder given."""
    python = package_dir.parent
    src = package_info(package).checkout_src
    if src and python.name == src and (given == python.parent or (python.parent / ".git").exists()
                                       or (python / "pyproject.toml").is_file()):
        return python.parent, "checkout"
    if not src and not any(python.glob(f"{package}-*.dist-info")) and (
            (python / ".git").exists() or (python / "pyproject.toml").is_file()):
        return python, "checkout"
    if any(python.glob(f"{package}-*.dist-info")) or given == python:
        return python, "site-packages"
    return package_dir, "package"


def _one_state_folder(root: Path, layout: str, package_dir: Path) -> tuple[Path, str]:
    """A package folder with no marker beside it (no dist-info, no checkout) is its own root when named itself, and
    its parent's when the parent is named: two spellings, two state folders. Where one of the two already holds the
    state folder (the recipes applied through the other spelling), that one is the root; both is a damaged state."""
    if layout not in ("package", "site-packages") or (layout == "site-packages" and any(
            package_dir.parent.glob(f"{package_dir.name}-*.dist-info"))):
        return root, layout
    here, parent = package_dir / STATE_DIRNAME, package_dir.parent / STATE_DIRNAME
    if here.exists() and parent.exists():
        from .errors import StateDamaged

        raise StateDamaged(f"two state folders for one package: {parent} and {here}",
                           hint="the recipes of one are not seen through the other: keep the one whose ledger lists "
                                "what is applied (`specpatch status --target` each spelling), remove the other")
    if layout == "package" and parent.is_dir():
        return package_dir.parent, "site-packages"
    if layout == "site-packages" and here.is_dir():
        return package_dir, "package"
    return root, layout


def _installed(package: str, python: str | None) -> Path:
    """The folder of `package` as `python` (default: this interpreter) imports it, without importing it."""
    import sys

    if python is None or Path(python).absolute() == Path(sys.executable).absolute():
        spec = importlib.util.find_spec(package)  # a top-level find_spec does not import the package
        if spec is None or not spec.submodule_search_locations:
            raise TargetError(f"package `{package}` is not installed in this Python ({_python()})", hint=(
                "give the Python of the serving environment with --python /path/to/venv/bin/python, or the "
                "package's folder with --target"))
        return _as_installed(Path(list(spec.submodule_search_locations)[0]))
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
        raise TargetError(f"package `{package}` is not installed in {python}", hint=(
            "check --python (the Python the server runs with), or give the package's folder with --target"))
    return _as_installed(Path(folder))


def _as_installed(folder: Path) -> Path:
    """The package folder an interpreter imports, its parents resolved; a package folder that is a link
    (`site-packages/sglang -> /src/sglang`) stays the link, as `--target site-packages` names it: one install, one
    state folder however it is named."""
    folder = folder.absolute()
    return folder.parent.resolve() / folder.name if folder.is_symlink() else folder.resolve()


def _python() -> str:
    import sys

    return sys.executable


def _read_version(root: Path, package_dir: Path, package: str, *, files: bool = True) -> tuple[Version | None, str]:
    """The release of an install: `_version.py` (in a wheel, written from the same version as its metadata), the
    dist-info pip wrote, or pyproject.toml (`files=False`: pyproject.toml only)."""
    vfile = package_dir / "_version.py"
    if files and vfile.is_file():
        v = _version_from_py(vfile)
        if v:
            return v, f"{vfile.name}"
    for meta in sorted(package_dir.parent.glob(f"{package}-*.dist-info/METADATA")) if files else []:
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
    return None, "unknown"


def _git(root: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _tag_version(tag: str) -> Version | None:
    return _parse(tag[1:] if tag[:1] in "vV" else tag)


def _checkout_release(root: Path, package_dir: Path, package: str) -> tuple[Version | None, str, str | None]:
    """The release of a git checkout, right or not at all: a release tag on HEAD; else the first of the nearest tag
    (`git describe`), `_version.py` (an editable install writes the newest tag there, whatever the code) and
    pyproject.toml whose pristine release (fetched into the cache) has exactly this code. Returns (version, source,
    None), or (None, "unknown", what was found where and what to pass)."""
    tags = [(v, t) for t in (_git(root, "tag", "--points-at", "HEAD") or "").split() if (v := _tag_version(t))]
    if tags:
        version, tag = max(tags)
        return version, f"git tag {tag} on HEAD", None
    head = (_git(root, "rev-parse", "--short=12", "HEAD") or "?")
    found: list[tuple[str, Version]] = []
    nearest = _git(root, "describe", "--tags", "--abbrev=0", "--match", "v[0-9]*", "--match", "[0-9]*")
    if nearest and (v := _tag_version(nearest)):
        behind = _git(root, "rev-list", "--count", f"{nearest}..HEAD")
        found.append((f"nearest tag {nearest} (`git describe`, {behind or '?'} commits before HEAD)", v))
    vfile = package_dir / "_version.py"
    if vfile.is_file() and (v := _version_from_py(vfile)):
        found.append((f"{vfile.relative_to(root)} says {v} (an editable install writes the newest tag there)", v))
    v, source = _read_version(root, package_dir, package, files=False)
    if v is not None and source == "pyproject.toml":
        found.append((f"{(package_dir.parent / 'pyproject.toml').relative_to(root).as_posix()} says {v}", v))
    said = []
    for where, version in found:
        differs = _differs_from_release(root, package_dir, package, version)
        if differs is None:
            return version, f"{where.split(' (')[0]}; the code is that of the {version} release", None
        said.append(f"{where}: {differs}")
    problem = (f"cannot tell which {package} release the checkout {root} is: HEAD ({head}) has no release tag"
               + ("; " + "; ".join(said) if said else "; no tag, _version.py or pyproject version was found")
               + ". Pass --assume-version V (the release this code is), or check out a release tag")
    return None, "unknown", problem


_BUILT = {".so", ".pyd", ".dll", ".dylib", ".a", ".o", ".cubin", ".fatbin"}  #: compiled by a wheel's build


def _differs_from_release(root: Path, package_dir: Path, package: str, version: Version) -> str | None:
    """None when every file of the pristine `package==version` wheel is, with the same bytes, in the commit checked
    out (HEAD: local uncommitted edits are the user's, they do not make the commit another release); else how it
    differs. Files a recorded recipe changed are left out (specpatch checked the release when it applied them), and
    so are the build's products that no commit holds: compiled extensions, and files of folders git tracks nothing
    in."""
    import hashlib

    from .errors import SpecpatchError
    from .fetch import fetch_release

    prefix = package_dir.relative_to(root).as_posix()
    listing = _git(root, "ls-tree", "-r", "-z", "HEAD", "--", prefix)
    if listing is None:
        return "git cannot list HEAD's files"
    blobs = {}
    for entry in listing.split("\0"):
        if "\t" in entry:
            meta, path = entry.split("\t", 1)
            blobs[path[len(prefix) + 1:]] = meta.split()[2]
    try:
        release = fetch_release(package, str(version)) / package
    except SpecpatchError as exc:
        return f"the {version} release could not be fetched to compare ({exc.message})"
    recorded = _recorded_files(root, package_dir)
    # folders HEAD tracks files in: a wheel's file in a folder git tracks nothing of (vllm's `vllm_flash_attn/`,
    # `third_party/`) was put there by the build, as a compiled extension anywhere was: no commit holds those
    tracked = {"/".join(rel.split("/")[:k]) for rel in blobs for k in range(rel.count("/") + 1)}
    differ, total = [], 0
    for path in sorted(release.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts or path.name == "_version.py":
            continue
        rel = path.relative_to(release).as_posix()
        if rel in recorded:
            continue
        if rel not in blobs and (path.suffix in _BUILT or rel.rpartition("/")[0] not in tracked):
            continue  # a build product: compared by nobody
        total += 1
        data = path.read_bytes()
        if blobs.get(rel) != hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest():
            differ.append(rel)
    if not differ:
        return None
    return f"HEAD's code differs from the {version} release in {len(differ)} of {total} files (e.g. {differ[0]})"


def _recorded_files(root: Path, package_dir: Path) -> set[str]:
    """The files (relative to the package) that the ledger says a recipe changed."""
    import json

    try:
        data = json.loads((root / STATE_DIRNAME / "ledger.json").read_bytes())
        paths = {root / f["rel"] for record in data.get("applied", []) for f in record.get("files", [])}
        return {p.relative_to(package_dir).as_posix() for p in paths if p.is_relative_to(package_dir)}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return set()


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
