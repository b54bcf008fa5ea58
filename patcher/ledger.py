"""A target's state folder: its paths, the ledger of applied recipes, the journal, and durable file writes.

`transaction.py` describes the layout and owns every decision; this module only knows how to read and write the
pieces so that a crash never leaves one half-written: every file here is replaced atomically and fsynced.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import threading
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from .errors import StateDamaged, TargetError
from .target import Target

FORMAT = 1  #: version of ledger.json and journal.json; bumped on an incompatible change
TMP_SUFFIX = ".specpatch-tmp"  #: temporary files of atomic writes: `.<name>.specpatch-tmp` beside the file


# --------------------------------------------------------------------------------------------------- durable writes


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fsync_dir(folder: Path) -> None:
    """Make a rename or a new entry in `folder` durable (a no-op where folders cannot be opened, i.e. Windows)."""
    if os.name == "nt":
        return
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def makedirs(folder: Path) -> None:
    """Create `folder` and its missing parents, fsyncing each new entry's parent."""
    missing = []
    p = folder
    while not p.exists():
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            d.mkdir()
        except FileExistsError:
            continue
        fsync_dir(d.parent)


def temp_path(path: Path) -> Path:
    return path.with_name(f".{path.name}{TMP_SUFFIX}")


def atomic_write(path: Path, data: bytes, mode: int, *, before_replace: Callable[[], None] | None = None,
                 owner: tuple[int, int] | None = None, unique: bool = False) -> None:
    """Replace `path` by `data` with permission bits `mode`: a temporary file in the same folder is written,
    fsynced, given its mode (and owner, when we may), then renamed over `path`, and the folder is fsynced.

    A symbolic link is written through (its target is replaced; the link stays). `before_replace` runs between the
    fsync of the temporary file and the rename: the fault-injection point "temp file written, target untouched".
    `unique` names the temporary file after the process and thread, for the few writes made before the lock is held.
    """
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    tmp = temp_path(path)
    if unique:
        tmp = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}{TMP_SUFFIX}")
    # one writer at a time (the target's lock), so a fixed name is enough; a crash's leftover is simply replaced
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
            if owner is not None and hasattr(os, "fchown"):
                try:
                    os.fchown(fd, *owner)
                except PermissionError:  # only root may give a file away; keep ours
                    pass
            if hasattr(os, "fchmod"):
                os.fchmod(fd, mode)  # after chown: chown may clear set-id bits
        finally:
            os.close(fd)
        if not hasattr(os, "fchmod"):
            os.chmod(tmp, mode)
        if before_replace is not None:
            before_replace()
        try:
            os.replace(tmp, path)
        except OSError as exc:  # the file being replaced is the one to name (`chattr +i`), not the temporary copy
            exc.filename, exc.filename2 = str(path), None
            raise
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.filename is None:
            exc.filename = str(path)  # a write to a descriptor names no file: name the one being replaced
        raise
    fsync_dir(path.parent)


def file_mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def now_utc() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)


# --------------------------------------------------------------------------------------------------- records


_SHA = re.compile(r"[0-9a-f]{64}")


def _typed(data: dict[str, Any], required: dict[str, type], optional: dict[str, type]) -> None:
    """Raise ValueError where a recorded value is not of its type (bool is no int here); optional ones may be None."""
    for key, kind in [*required.items(), *optional.items()]:
        value = data.get(key)
        if value is None and key in optional:
            continue
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ValueError(f"`{key}` is {value!r}, not {kind.__name__}")


@dataclass(frozen=True)
class FileRecord:
    """One file a recipe changed, as the ledger and the journal remember it."""

    rel: str  #: relative to the target root, forward slashes (e.g. python/sglang/srt/server_args.py)
    mode: int  #: permission bits of the original; the patched file has the same
    sha_before: str  #: sha256 of the original bytes
    sha_after: str  #: sha256 of the patched bytes
    backup: str  #: the original bytes, relative to the state folder
    patched: str  #: a copy of the patched bytes, relative to the state folder (to diff a local change)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "mode": f"{self.mode:04o}"}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "FileRecord":
        for key in ("rel", "sha_before", "sha_after", "backup", "patched", "mode"):
            if not isinstance(data.get(key), str):
                raise ValueError(f"file record: `{key}` is {data.get(key)!r}, not a string")
        for key in ("sha_before", "sha_after"):
            if not _SHA.fullmatch(data[key]):
                raise ValueError(f"file record: `{key}` {data[key]!r} is not a sha256")
        return cls(**{**data, "mode": int(data["mode"], 8)})


@dataclass(frozen=True)
class AppliedRecord:
    """A recipe applied to a target: one entry of the ledger."""

    seq: int  #: order of application, never reused within a target
    recipe: str  #: recipe id
    recipe_version: int
    variant: str | None  #: the variant whose steps ran, if the recipe has variants
    package: str  #: e.g. sglang
    release: str | None  #: the target's release as read when applied
    params: dict[str, Any]  #: the resolved parameter values
    applied_at: str  #: ISO 8601, UTC
    record_dir: str  #: this record's folder, relative to the state folder
    files: tuple[FileRecord, ...] = ()

    @property
    def rels(self) -> set[str]:
        return {f.rel for f in self.files}

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "files": [f.to_dict() for f in self.files]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "AppliedRecord":
        record_dir = data.get("record_dir")
        # one folder under records/, as `record_dir_name` makes it: the sweep of crash leftovers removes every
        # folder of records/ that no entry names, so an entry naming another place would cost every backup
        if not (isinstance(record_dir, str) and _RECORD_DIR.fullmatch(record_dir)
                and record_dir not in ("records/.", "records/..")):
            raise ValueError(f"record_dir {record_dir!r} is not a folder of records/")
        files = data.get("files")
        if not isinstance(files, list) or not files:
            # an entry is written for a change of one file or more: without them it cannot be rolled back
            raise ValueError(f"entry {data.get('recipe')!r}: `files` is {files!r}, not a list of the files it changed")
        _typed(data, {"seq": int, "recipe": str, "recipe_version": int, "package": str, "params": dict,
                      "applied_at": str}, {"variant": str, "release": str})
        return cls(**{**data, "files": tuple(FileRecord.from_dict(f) for f in files)})


@dataclass(frozen=True)
class Journal:
    """A transaction in progress: written (durably) before the first target file is touched, removed last."""

    kind: str  #: a `results.Transaction`: "apply" | "rollback" (a string as read from disk)
    started: str  #: ISO 8601, UTC
    pid: int
    record: AppliedRecord  #: apply: the entry the ledger will get; rollback: the entry being removed
    #: rollback: sha256 of each file when the rollback started (a local version under --force)
    start_shas: dict[str, str | None] = field(default_factory=dict)
    kept: tuple[str, ...] = ()  #: rollback --force: where the local versions were kept, relative to the state folder
    #: apply: the apply is not done until its checks pass (`specpatch apply`): the journal stays while they run, and a
    #: recovery undoes the apply, ledger entry or not (a crash or kill -9 during the checks never leaves it applied)
    verifying: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "kind": self.kind, "started": self.started, "pid": self.pid,
                "record": self.record.to_dict(), "start_shas": dict(self.start_shas), "kept": list(self.kept),
                "verifying": self.verifying}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Journal":
        return cls(kind=data["kind"], started=data["started"], pid=data["pid"],
                   record=AppliedRecord.from_dict(data["record"]), start_shas=dict(data.get("start_shas", {})),
                   kept=tuple(data.get("kept", ())), verifying=data.get("verifying") is True)


@dataclass(frozen=True)
class RetiredRecord:
    """A ledger entry that no longer describes the tree (the package was upgraded, downgraded or reinstalled since):
    kept for the record, never replayed: no rollback, recovery or check reads its backups again."""

    record: AppliedRecord
    reason: str  #: why, in words (e.g. "the target is now sglang 0.5.13 (sglang-0.5.13.dist-info)")
    retired_at: str  #: ISO 8601, UTC

    def to_dict(self) -> dict[str, Any]:
        return {"record": self.record.to_dict(), "reason": self.reason, "retired_at": self.retired_at}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RetiredRecord":
        return cls(AppliedRecord.from_dict(data["record"]), data["reason"], data["retired_at"])


@dataclass
class Ledger:
    """The recipes applied to a target, oldest first, and the retired entries (history only)."""

    next_seq: int = 1
    applied: list[AppliedRecord] = field(default_factory=list)
    retired: list[RetiredRecord] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "next_seq": self.next_seq, "applied": [r.to_dict() for r in self.applied],
                "retired": [r.to_dict() for r in self.retired]}

    def without(self, seq: int) -> "Ledger":
        return replace(self, applied=[r for r in self.applied if r.seq != seq])

    def with_record(self, record: AppliedRecord) -> "Ledger":
        applied = sorted([r for r in self.applied if r.seq != record.seq] + [record], key=lambda r: r.seq)
        return Ledger(max(self.next_seq, record.seq + 1), applied, list(self.retired))

    def reviving(self, seq: int) -> "Ledger":
        """This ledger with the retired entry `seq` applied again (the tree holds what it wrote once more)."""
        back = [r.record for r in self.retired if r.record.seq == seq]
        return Ledger(self.next_seq, sorted([*self.applied, *back], key=lambda r: r.seq),
                      [r for r in self.retired if r.record.seq != seq])

    def retiring(self, record: AppliedRecord, reason: str) -> "Ledger":
        """This ledger with `record` moved from the applied entries to the retired ones."""
        return Ledger(self.next_seq, [r for r in self.applied if r.seq != record.seq],
                      [*self.retired, RetiredRecord(record, reason, now_utc().isoformat())])


# --------------------------------------------------------------------------------------------------- the folder


_SAFE = re.compile(r"[^A-Za-z0-9._-]")
_RECORD_DIR = re.compile(r"records/[A-Za-z0-9._-]+")


@dataclass(frozen=True)
class State:
    """Paths of a target's state folder and the reads and writes of its ledger and journal."""

    root: Path  #: TARGET/.specpatch
    target_root: Path  #: TARGET
    package_dir: Path | None = None  #: the package folder: no recorded file may lead out of it

    @classmethod
    def of(cls, target: Target) -> "State":
        return cls(target.state_dir, target.root, target.package_dir)

    def _in_target(self, record: Path) -> bool:
        """Whether a file of the record folder's `after/` copy has its bytes in the target, where its `before/` copy
        differs (the apply that made it reached the target's files)."""
        after = record / "after"
        if after.is_symlink() or not after.is_dir():
            return False
        for copy in after.rglob("*"):
            if copy.is_symlink() or not copy.is_file():
                continue
            rel = copy.relative_to(after)
            live, before = self.target_root / rel, record / "before" / rel
            try:
                data = copy.read_bytes()
                if live.is_file() and not live.is_symlink() and live.read_bytes() == data and (
                        not before.is_file() or before.read_bytes() != data):
                    return True
            except OSError:
                continue
        return False

    @property
    def ledger_path(self) -> Path:
        return self.root / "ledger.json"

    @property
    def journal_path(self) -> Path:
        return self.root / "journal.json"

    @property
    def lock_path(self) -> Path:
        return self.root / "lock"

    @property
    def records_dir(self) -> Path:
        return self.root / "records"

    def path(self, rel_to_state: str) -> Path:
        """A path recorded relative to the state folder, refused if it would leave it (a tampered ledger)."""
        p = (self.root / rel_to_state)
        if ".." in Path(rel_to_state).parts or Path(rel_to_state).is_absolute():
            raise StateDamaged(f"recorded path `{rel_to_state}` leaves the state folder")
        real = Path(os.path.realpath(p))
        if not real.is_relative_to(os.path.realpath(self.root)):  # a link inside the state folder leads out of it
            raise StateDamaged(f"`{rel_to_state}` of the state folder leads out of it, to {real}")
        return p

    def target_file(self, rel: str) -> Path:
        """A recorded target file (relative to the target root). Refused if the record leads out of the target, and
        if the file is now (or lies under) a symbolic link that leads out of the package: every read and write of
        rollback and recovery goes through here, and none may reach a file of another tree."""
        if "\0" in rel or ".." in Path(rel).parts or Path(rel).is_absolute():
            raise StateDamaged(f"recorded file `{rel}` leaves the target")
        path = self.target_root / rel
        inside = self.package_dir if self.package_dir is not None else self.target_root
        if not path.is_relative_to(inside):
            # a file of another package of this folder (a site-packages that holds sglang and vllm has one state
            # folder): that package's folder, the first folder on the way to the file that is a package
            inside = next((p for p in reversed(path.parents) if p.is_relative_to(self.target_root)
                           and p != self.target_root and (p / "__init__.py").is_file()), self.target_root)
        real = Path(os.path.realpath(path))
        if not real.is_relative_to(os.path.realpath(inside)):
            raise TargetError(f"`{rel}` is now a link (or lies under one) that leads out of the package, to {real}; "
                              f"nothing was written through it",
                              hint="replace the link by a regular file (e.g. `cp --remove-destination` the original, "
                                   "or reinstall the package), then run the command again")
        return path

    def record_dir_name(self, seq: int, recipe: str) -> str:
        return f"records/{seq:04d}-{_SAFE.sub('_', recipe)}"

    def ensure(self) -> None:
        """Create the state folder with a `.gitignore` of `*`, so that git never shows or commits it."""
        if self.root.is_symlink() or (self.root.exists() and not self.root.is_dir()):
            raise StateDamaged(f"{self.root} is not a folder (or is a link)")
        try:
            makedirs(self.root)
            ignore = self.root / ".gitignore"
            self._refuse_link(ignore)  # a link (dangling too) would have specpatch write outside the target
            if not ignore.exists():
                atomic_write(ignore, b"*\n", 0o644, unique=True)  # before the lock: two may race here
        except PermissionError as exc:
            raise TargetError(f"cannot create the state folder {self.root}: {exc.strerror}",
                              hint="run specpatch as a user who may write to the target") from None

    def exists(self) -> bool:
        """True when the state folder is there; a file or a link in its place is damage, not "no state"."""
        if self.root.is_symlink() or (self.root.exists() and not self.root.is_dir()):
            raise StateDamaged(f"{self.root} is not a folder (or is a link)")
        return self.root.is_dir()

    def _refuse_link(self, path: Path) -> None:
        """The ledger and the journal are the state folder's own files: a link there would have specpatch read its
        history from, and write it to, a file outside the target."""
        if path.is_symlink() or (path.exists() and not path.is_file()):
            raise StateDamaged(f"{path} is not a regular file (or is a link)")

    def _read_json(self, path: Path) -> dict[str, Any] | None:
        self._refuse_link(path)
        try:
            data = json.loads(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise StateDamaged(f"cannot read {path}: {exc}") from None
        except RecursionError:
            raise StateDamaged(f"cannot read {path}: nested too deeply for a file specpatch writes") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise StateDamaged(f"{path} has an unknown format (expected format {FORMAT})",
                             hint="this state was written by another specpatch version; use that version")
        return data

    def _write_json(self, path: Path, data: dict[str, Any]) -> None:
        self._refuse_link(path)
        atomic_write(path, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode(), 0o644)

    def read_ledger(self) -> Ledger:
        data = self._read_json(self.ledger_path)
        if data is None:
            return Ledger()
        try:
            applied = [AppliedRecord.from_dict(r) for r in data["applied"]]
            retired = [RetiredRecord.from_dict(r) for r in data.get("retired", [])]
            return Ledger(int(data["next_seq"]), sorted(applied, key=lambda r: r.seq), retired)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:  # a value of the wrong shape
            raise StateDamaged(f"{self.ledger_path} is damaged: {exc!r}") from None

    def write_ledger(self, ledger: Ledger) -> None:
        self._write_json(self.ledger_path, ledger.to_dict())

    def read_journal(self) -> Journal | None:
        data = self._read_json(self.journal_path)
        if data is None:
            return None
        try:
            return Journal.from_dict(data)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:  # a value of the wrong shape
            raise StateDamaged(f"{self.journal_path} is damaged: {exc!r}") from None

    def write_journal(self, journal: Journal) -> None:
        self._write_json(self.journal_path, journal.to_dict())

    def remove_journal(self) -> None:
        self.journal_path.unlink(missing_ok=True)
        fsync_dir(self.root)

    def remove_record_dir(self, record_dir: str) -> None:
        shutil.rmtree(self.path(record_dir), ignore_errors=True)

    def sweep(self, keep: set[str]) -> list[str]:
        """Remove record folders no ledger entry or journal names, left by a commit that stopped before its journal
        was written (the target's files never got their bytes), and leftover temporary files of the state folder.
        Returns what was removed, relative to the state folder. A `records` that is a link, or a record folder the
        ledger does not name whose `after` bytes are in the target (an apply whose ledger entry was lost: the
        ledger deleted, or another target's copied in), is damage: StateDamaged, and nothing is removed (those
        folders hold the only copy of the original bytes)."""
        removed: list[str] = []
        if self.records_dir.is_symlink() or self.records_dir.exists() and not self.records_dir.is_dir():
            raise StateDamaged(f"{self.records_dir} is not a folder of the state folder (a link, or a file): "
                               f"specpatch reads and removes backups only in a folder of its own",
                               hint="make it a plain folder again (move the backups back into it)")
        if self.records_dir.is_dir():
            orphans = [d for d in sorted(self.records_dir.iterdir()) if f"records/{d.name}" not in keep]
            written = [d for d in orphans if d.is_symlink() or self._in_target(d)]
            if written:
                raise StateDamaged(
                    f"{written[0]} is the backup of an apply whose bytes are in the target, and "
                    + ("the ledger does not name it" if self.ledger_path.exists() else "ledger.json is missing")
                    + " (the ledger lost, or another target's copied in?)",
                    hint="put back this target's ledger.json; to give the backups up, move that record folder away "
                         "yourself: specpatch removes no backup of bytes that are in the target")
            for d in orphans:
                shutil.rmtree(d, ignore_errors=True)
                removed.append(f"records/{d.name}")
        # only the fixed names written under the lock: a unique one may belong to an `ensure` running right now
        for tmp in (temp_path(self.ledger_path), temp_path(self.journal_path)):
            if tmp.exists():
                tmp.unlink(missing_ok=True)
                removed.append(tmp.name)
        return removed
