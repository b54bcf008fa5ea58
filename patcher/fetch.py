"""Pristine releases from the package registry: download a wheel once, unpack it once, share it between processes.

Layout of the cache (``$SPECPATCH_CACHE``, default ``~/.cache/specpatch``)::

    wheels/sglang-0.5.9-py3-none-any.whl        what `pip download --no-deps` fetched
    unpacked/sglang-0.5.9/sglang/...            the wheel's contents: the package and its dist-info
    unpacked/.sglang-0.5.9.lock                 held while downloading and unpacking

Unpacked folders are shared and must be treated as read-only: copy what you change (tests copy into tmp_path,
`specpatch try` into its scratch folder).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile
import zlib
from pathlib import Path, PurePosixPath

from packaging.version import InvalidVersion, Version

from .errors import FetchError

CACHE_ENV = "SPECPATCH_CACHE"
LOCK_TIMEOUT = 1800.0  #: seconds to wait for another process's download and unpack of the same release


def cache_dir() -> Path:
    """The cache folder: `$SPECPATCH_CACHE`, or `~/.cache/specpatch`."""
    configured = os.environ.get(CACHE_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "specpatch"


_default_cache_dir = cache_dir  # fetch_release's parameter of the same name hides the function


def fetch_release(package: str, version: str, cache_dir: Path | None = None, *, python: str = sys.executable,
                  timeout: float = 900.0, pristine: bool = False) -> Path:
    """The folder holding the unpacked wheel of `package==version` (the package folder and its dist-info).

    Downloads the wheel with `python -m pip download --no-deps` unless the cache already has it, and unpacks it once;
    concurrent callers (parallel test workers, two `specpatch try`) wait for each other on a file lock. With
    `pristine`, an unpacked folder whose files differ from its wheel's RECORD (edited, truncated, a recipe applied
    to it) is unpacked again from the wheel first.
    """
    from filelock import FileLock, Timeout

    try:
        wanted = Version(version)
    except InvalidVersion:
        raise FetchError(f"{version!r} is not a version") from None
    root = Path(cache_dir) if cache_dir is not None else _default_cache_dir()
    wheels, unpacked = root / "wheels", root / "unpacked"
    name = _normalize(package)
    final = unpacked / f"{name}-{wanted}"
    if final.is_dir() and not (pristine and differs_from_record(final)):
        return final
    unpacked.mkdir(parents=True, exist_ok=True)
    wheels.mkdir(parents=True, exist_ok=True)
    try:
        with FileLock(str(unpacked / f".{name}-{wanted}.lock"), timeout=LOCK_TIMEOUT):
            if final.is_dir() and not (pristine and differs_from_record(final)):  # another process finished first
                return final
            if final.is_dir():
                shutil.rmtree(final)  # not what the wheel holds any more: unpacked again below
            for stale in unpacked.glob(f".{final.name}-*"):  # left by a process killed while unpacking
                shutil.rmtree(stale, ignore_errors=True)
            wheel = _cached_wheel(wheels, name, wanted) or _download(package, wanted, wheels, python, timeout)
            _unpack(wheel, final)
    except Timeout:
        raise FetchError(f"another process has held the lock on {final} for {LOCK_TIMEOUT:g} s",
                         hint=f"remove {unpacked}/.{name}-{wanted}.lock if no specpatch is running") from None
    return final


def _normalize(name: str) -> str:
    """A distribution name as wheel file names spell it (PEP 427): runs of -_. become _, lower case."""
    return re.sub(r"[-_.]+", "_", name).lower()


def _cached_wheel(wheels: Path, name: str, version: Version) -> Path | None:
    for wheel in sorted(wheels.glob("*.whl")):
        parts = wheel.name.split("-")
        if len(parts) >= 5 and _normalize(parts[0]) == name:
            try:
                if Version(parts[1]) == version:
                    return wheel
            except InvalidVersion:
                continue
    return None


def _download(package: str, version: Version, wheels: Path, python: str, timeout: float) -> Path:
    argv = [python, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--disable-pip-version-check",
            "--dest", str(wheels), f"{package}=={version}"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise FetchError(f"`pip download {package}=={version}` did not finish within {timeout:g} s") from None
    except OSError as exc:
        raise FetchError(f"cannot run pip with {python}: {exc}") from None
    wheel = _cached_wheel(wheels, _normalize(package), version)
    if done.returncode != 0 or wheel is None:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise FetchError(f"could not download a wheel of {package}=={version}", details=tail,
                         hint="check the name and version on the registry; only wheels are used (no source builds)")
    return wheel


def _unpack(wheel: Path, final: Path) -> None:
    """Extract into a temporary sibling, then rename: a reader never sees half a tree."""
    temp = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
    try:
        try:
            with zipfile.ZipFile(wheel) as archive:
                for info in archive.infolist():
                    rel = PurePosixPath(info.filename)
                    if rel.is_absolute() or ".." in rel.parts or ":" in info.filename:
                        raise FetchError(f"{wheel.name} holds an unsafe path: {info.filename}")
                    archive.extract(info, temp)
                    mode = (info.external_attr >> 16) & 0o777
                    if mode and not info.is_dir():
                        (temp / rel).chmod(mode | stat.S_IRUSR | stat.S_IWUSR)
        except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
            # a truncated download, or damaged compressed data inside a member: fetch again next time
            wheel.unlink(missing_ok=True)
            raise FetchError(f"{wheel.name} is not a valid wheel ({exc}); it was removed from the cache") from None
        os.replace(temp, final)
    finally:
        if temp.exists():
            shutil.rmtree(temp, ignore_errors=True)


def differs_from_record(folder: Path) -> str | None:
    """The first file of an unpacked wheel whose bytes are not those its dist-info's RECORD lists (or which is
    gone), or a file under the package that RECORD does not list (a `.specpatch` state folder, a new module);
    None when the folder is as unpacked. Bytecode folders are left out."""
    import base64
    import csv
    import hashlib

    records = sorted(folder.glob("*.dist-info/RECORD"))
    if not records:
        return None
    listed: set[str] = set()
    with records[0].open(newline="", encoding="utf-8", errors="replace") as handle:
        for row in csv.reader(handle):
            if len(row) < 2 or not row[1].startswith("sha256="):
                continue
            rel = row[0]
            listed.add(rel)
            path = folder / rel
            try:
                digest = base64.urlsafe_b64encode(hashlib.sha256(path.read_bytes()).digest()).rstrip(b"=").decode()
            except OSError:
                return rel
            if digest != row[1][len("sha256="):]:
                return rel
    for path in folder.rglob("*"):
        rel = path.relative_to(folder).as_posix()
        if path.is_file() and "__pycache__" not in path.parts and not rel.endswith("dist-info/RECORD") \
                and rel not in listed:
            return rel
    return None
