"""The write side of specpatch: the target's lock, the journaled apply, recovery after a crash, exact rollback, status.

Nothing here knows about the command line. A command does, under one lock::

    with target_lock(target, timeout=30) as lock:
        report = recover(target)            # every command, first: finish or undo an interrupted transaction
        plan = engine.plan(recipe, target)  # plan under the lock: a concurrent apply is then seen as "already applied"
        record = commit(plan, lock)         # None when there was nothing to write

State folder `TARGET/.specpatch/` (git ignores it through its own `.gitignore` of `*`)::

    .gitignore              "*"
    lock                    the file lock (filelock): one specpatch at a time per target
    ledger.json             the applied recipes, oldest first, the next sequence number, and the retired entries
                            (history: records of another release or of bytes no longer there, never replayed)
    journal.json            the transaction in progress (apply or rollback); absent when there is none
    records/NNNN-RECIPE/    one folder per applied recipe, NNNN its sequence number
        before/<rel>        the original bytes of each file the recipe changed (the backup)
        after/<rel>         the patched bytes, to show a later local change as a diff
    kept/<rel>.<UTC time>   local versions replaced by `rollback --force` (or by a recovery)

`<rel>` is the file's path relative to the target root, as in diffs. Every file of the state folder and every target
file is replaced atomically (temporary file in the same folder, fsync, rename, fsync of the folder).

**Apply** (`commit`): backups and patched copies are written and fsynced, then the journal (the ledger entry to be),
then each file is replaced; the ledger write is the commit point; the journal is removed last. An exception before
the commit point restores every file from the backups and re-raises. `specpatch apply` commits with `verifying`: the
journal (marked so) stays while the checks run, until `verified` removes it or `unverified` undoes the apply.
**Recovery** (`recover`) of an apply journal: one marked `verifying` is undone (the checks never said yes: a crash or
kill -9 during them); otherwise, if the ledger has the entry, or every file has its "after" hash, the apply is
completed; otherwise every file is put back to its "before" bytes and mode. **Rollback** checks for local changes, keeps them under `kept/` when forced,
writes a rollback journal, restores every file, removes the ledger entry, removes the journal; a recovery of a
rollback journal always finishes it. Recovery is idempotent: a crash during it is recovered by the next command.
An undo, a rollback and a recovery hold SIGINT and SIGTERM back while they restore files (`signals_deferred`): an
interrupt is handled once the tree is whole. **Retirement** (`retire_stale`, after `recover`): a ledger entry made on
another release than the target's, or none of whose files has its patched bytes any more, moves to the retired list;
rollback retires before it chooses what to restore, so it never writes another release's bytes into the tree.

Fault-injection labels (`_fault`), in order: ``apply:backups-written``, ``apply:journal-written``, then per file
``apply:temp-written:<rel>`` and ``apply:after-write:<rel>``, ``apply:ledger-written``, ``apply:journal-removed``;
an in-process undo emits ``undo:restored:<rel>``, ``undo:journal-removed``; rollback: ``rollback:kept-written``,
``rollback:journal-written``, per file ``rollback:restored:<rel>``, ``rollback:ledger-written``,
``rollback:journal-removed``; recovery: ``recover:restored:<rel>`` per file (undo or finished rollback),
``recover:ledger-written`` (completed apply or finished rollback), ``recover:journal-removed``.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import AbstractSet, Any, Callable, Iterator

import filelock

from .diff import unified_diff
from .engine import Plan
from .errors import (ChangedDuringApply, DriftError, ExitCode, Location, LockTimeout, RollbackBlocked, StateDamaged,
                     StateError, VersionUnsupported, os_failure)
from .ledger import (AppliedRecord, FileRecord, Journal, RetiredRecord, State, atomic_write, file_mode, makedirs,
                     now_utc, sha256, temp_path)
from .results import FileBytes, RecoveryOutcome, Transaction
from .target import Target

__all__ = [
    "DEFAULT_LOCK_TIMEOUT", "AppliedRecord", "FileRecord", "FileState", "RecoveryReport", "RollbackReport",
    "StatusReport", "TargetLock", "applied_records", "commit", "file_state", "file_states", "patched_files",
    "pristine_files", "recover", "rollback", "status", "target_lock",
]

DEFAULT_LOCK_TIMEOUT = 30.0  #: seconds a second specpatch waits for the target's lock

#: Fault injection for tests: called with a step label (see the module docstring) at every point between two
#: durable writes. Raise to simulate a failure; kill the process to simulate a crash.
_fault: Callable[[str], None] | None = None


def _step(label: str) -> None:
    if _fault is not None:
        _fault(label)


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back while the files of a transaction are put back (an undo, a rollback): the
    restore finishes in this process, and the signal is handled right after it, with the tree whole. Only the main
    thread can hold them (elsewhere, and off POSIX, this does nothing: the journal still lets the next command
    finish the work)."""
    import signal

    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def note_interrupt(exc: BaseException, note: str) -> None:
    """Tell an interrupt what this transaction did about it (the CLI prints these lines)."""
    from .errors import Interrupted

    if isinstance(exc, (Interrupted, KeyboardInterrupt)):
        notes = getattr(exc, "notes", None)
        if notes is None:
            notes = []
            try:
                exc.notes = notes  # type: ignore[attr-defined]
            except AttributeError:
                return
        notes.append(note)


# --------------------------------------------------------------------------------------------------- lock


class TargetLock:
    """The lock of one target, held by this thread; `commit` refuses to run without it."""

    def __init__(self, target: Target, lock: filelock.BaseFileLock) -> None:
        self.target = target
        self._lock = lock
        self._depth = 0

    @property
    def held(self) -> bool:
        return self._depth > 0 and self._lock.is_locked

    @property
    def path(self) -> Path:
        return Path(self._lock.lock_file)


_local = threading.local()


def _held_locks() -> dict[str, TargetLock]:
    if not hasattr(_local, "locks"):
        _local.locks = {}
    return _local.locks


def _key(target: Target) -> str:
    return os.path.realpath(target.state_dir)


@contextmanager
def target_lock(target: Target, timeout: float = DEFAULT_LOCK_TIMEOUT) -> Iterator[TargetLock]:
    """Hold the target's lock (creating the state folder if needed); wait at most `timeout` seconds, then raise
    LockTimeout. Re-entrant within a thread, so `recover` and `rollback` may be called with or without it held."""
    held = _held_locks()
    key = _key(target)
    lock = held.get(key)
    if lock is not None:
        lock._depth += 1
        try:
            yield lock
        finally:
            lock._depth -= 1
        return
    with _package_lock(target, timeout):
        yield from _state_lock(target, timeout, held, key)


@contextmanager
def _package_lock(target: Target, timeout: float) -> Iterator[None]:
    """A lock on the package folder itself, held around the state folder's: one package named two ways (a bare
    package folder as `T` or as `T/sglang`) has two candidate state folders before its first apply, and so two
    lock files; this one is the same for both. Once held, the state folder is looked for again: one made through
    the other spelling while this command waited is refused, not doubled."""
    import fcntl
    import time

    from .target import _one_state_folder

    try:
        fd = os.open(target.package_dir, os.O_RDONLY)
    except OSError:
        yield  # the package folder cannot be opened: the state folder's lock alone
        return
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    # said as the state folder's lock is: the package folder's is held with it
                    raise LockTimeout(f"another specpatch holds the lock on {target.root}; gave up after {timeout:g} s",
                                      location=Location(file=str(State.of(target).lock_path))) from None
                time.sleep(0.05)
            except OSError:
                break  # a filesystem without flock on folders: the state folder's lock alone
        now, _ = _one_state_folder(target.root, target.layout, target.package_dir)
        if now != target.root and not target.state_dir.exists():
            # not a bug: a race another command won (exit 6, as any lock lost to another specpatch)
            raise LockTimeout(f"the state folder of {target.package_dir} was made under {now} (another specpatch, "
                              f"through another spelling of the target) while this command waited",
                              hint="run the command again: it finds that state folder")
        yield
    finally:
        os.close(fd)


def _state_lock(target: Target, timeout: float, held: dict, key) -> Iterator[TargetLock]:
    state = State.of(target)
    state.ensure()
    if state.lock_path.is_symlink() or (state.lock_path.exists() and not state.lock_path.is_file()):
        raise StateDamaged(f"{state.lock_path} is a link or not a file; specpatch locks through a plain file only",
                           location=Location(file=str(state.lock_path)))
    flock = filelock.FileLock(state.lock_path, timeout=timeout)
    for _ in range(20):
        try:
            flock.acquire()
        except filelock.Timeout:
            raise LockTimeout(f"another specpatch holds the lock on {target.root}; gave up after {timeout:g} s",
                              location=Location(file=str(state.lock_path))) from None
        if _lock_file_is_ours(flock):
            break
        flock.release()  # the file was removed or replaced between its opening and its lock: lock the new one
    lock = TargetLock(target, flock)
    lock._depth = 1
    held[key] = lock
    try:
        yield lock
    finally:
        held.pop(key, None)
        lock._depth = 0
        flock.release()


def _require_lock(lock: TargetLock, target: Target) -> None:
    if not isinstance(lock, TargetLock) or not lock.held or _key(lock.target) != _key(target):
        raise StateError(f"commit to {target.root} without holding its lock",
                         hint="plan and commit inside one `with target_lock(target) as lock:`")
    if not _lock_file_is_ours(lock._lock):
        # someone removed or replaced the lock file: another specpatch may lock the new one and work beside us
        raise LockTimeout(f"the lock file {lock.path} was removed or replaced while specpatch held it; nothing more "
                          f"was written", location=Location(file=str(lock.path)),
                          hint="never remove TARGET/.specpatch/lock; run the command again (`specpatch status` "
                               "says whether a transaction was left pending)")


def _lock_file_is_ours(flock: filelock.BaseFileLock) -> bool:
    """Whether the lock file's path still names the file this process locked (a lock on a removed file locks
    nothing another process can see)."""
    fd = getattr(getattr(flock, "_context", None), "lock_file_fd", None)
    if fd is None:
        return True  # this filelock keeps no descriptor where we can read it: nothing to compare
    try:
        mine, there = os.fstat(fd), os.stat(flock.lock_file)
    except OSError:
        return False
    return (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino)


# --------------------------------------------------------------------------------------------------- reports


@dataclass(frozen=True)
class FileState:
    """A file of an applied recipe as it is now: intact (sha == after), modified, or missing."""

    rel: str
    state: FileBytes
    record: FileRecord
    sha: str | None  #: sha256 of the current bytes
    mode: int | None  #: current permission bits
    current: bytes | None = field(default=None, repr=False)  #: the current bytes

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.rel, "state": self.state, "sha256": self.sha, "expected_sha256": self.record.sha_after,
                "mode": f"{self.mode:04o}" if self.mode is not None else None}


@dataclass(frozen=True)
class RecoveryReport:
    """What `recover` found and did about an interrupted transaction."""

    kind: Transaction  #: what was interrupted
    recipe: str
    started: str  #: when the interrupted transaction started (ISO 8601, UTC)
    outcome: RecoveryOutcome
    files: list[str]  #: every file of the transaction
    restored: list[str] = field(default_factory=list)  #: files rewritten from the backups by this recovery
    kept: list[str] = field(default_factory=list)  #: unexpected local versions kept before restoring
    #: files something else changed or removed after the crash (an upgrade, a reinstall, a hand edit): left as found
    left: list[str] = field(default_factory=list)
    #: the original bytes of the `left` files, from the backups, kept under kept/ (the backups themselves go)
    originals: list[str] = field(default_factory=list)

    @property
    def message(self) -> str:
        n = len(self.files) - len(self.left)
        if self.kind is Transaction.APPLY and self.outcome is RecoveryOutcome.COMPLETED:
            text = f"found an interrupted apply of {self.recipe} at {self.started}: completed ({n} files were written)"
        elif self.kind is Transaction.APPLY:
            text = (f"found an interrupted apply of {self.recipe} at {self.started}: rolled back {n} files "
                    f"({len(self.restored)} rewritten from the backups)")
        else:
            text = (f"found an interrupted rollback of {self.recipe} at {self.started}: finished it, "
                    f"{n} files are original again")
        if self.kept:
            text += f"; local versions kept in {', '.join(self.kept)}"
        if self.left:
            text += (f"; left as found, since something else rewrote or removed them after the interruption (an "
                     f"upgrade, a reinstall, a hand edit?), so they may still hold edits of the interrupted "
                     f"{self.kind}: {', '.join(self.left)}; their original bytes are kept in "
                     f"{', '.join(self.originals)}")
        return text

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "recipe": self.recipe, "started": self.started, "outcome": self.outcome,
                "files": self.files, "restored": self.restored, "kept": self.kept, "left": self.left,
                "originals": self.originals, "message": self.message}


@dataclass(frozen=True)
class RollbackReport:
    """What `rollback` did; `record` is None for the no-op "nothing to roll back"."""

    target: Path
    record: AppliedRecord | None
    message: str
    restored: list[str] = field(default_factory=list)  #: files given back their original bytes and mode
    kept: list[str] = field(default_factory=list)  #: absolute paths of local versions kept by --force
    removed_bytecode: list[str] = field(default_factory=list)  #: stale .pyc files removed
    exit_code: ExitCode = ExitCode.OK
    retired: list[RetiredRecord] = field(default_factory=list)  #: entries retired first (upgrade, reinstall)
    already_original: list[str] = field(default_factory=list)  #: files that had their original bytes already
    release: str | None = None  #: the target's release
    release_source: str = ""  #: where it was read
    recovery: RecoveryReport | None = None  #: what the recovery before the rollback found, if anything

    @property
    def noop(self) -> bool:
        return self.record is None

    def to_dict(self) -> dict[str, Any]:
        return {"target": str(self.target), "noop": self.noop, "message": self.message,
                "recipe": self.record.recipe if self.record else None,
                "record": self.record.to_dict() if self.record else None, "restored": self.restored,
                "kept": self.kept, "removed_bytecode": self.removed_bytecode, "exit_code": int(self.exit_code),
                "retired": [r.to_dict() for r in self.retired], "already_original": self.already_original,
                "release": self.release, "release_source": self.release_source,
                "recovery": self.recovery.to_dict() if self.recovery else None}


@dataclass(frozen=True)
class StatusReport:
    """The applied recipes of a target, oldest first, and any unfinished transaction."""

    target: Path
    package: str
    release: str | None
    applied: list[AppliedRecord]
    pending: Journal | None  #: an interrupted transaction the next command will recover
    exit_code: ExitCode = ExitCode.OK
    version_source: str = ""  #: where the release was read
    retired: list[RetiredRecord] = field(default_factory=list)  #: history: entries that no longer describe the tree
    stale: dict[int, str] = field(default_factory=dict)  #: seq -> why the next command will retire that entry
    in_progress: bool = False  #: the pending transaction's process is running it now (it holds the target's lock)
    edited: dict[int, list[str]] = field(default_factory=dict)  #: seq -> its files changed since (by hand: drift)

    def to_dict(self) -> dict[str, Any]:
        pending = None
        if self.pending is not None:
            pending = {"kind": self.pending.kind, "recipe": self.pending.record.recipe,
                       "started": self.pending.started, "pid": self.pending.pid,
                       "files": [f.rel for f in self.pending.record.files], "in_progress": self.in_progress}
        return {"target": str(self.target), "package": self.package, "release": self.release,
                "release_source": self.version_source,
                "applied": [{**r.to_dict(), "stale": self.stale.get(r.seq), "edited": self.edited.get(r.seq, [])}
                            for r in self.applied],
                "retired": [r.to_dict() for r in self.retired], "pending": pending}


# --------------------------------------------------------------------------------------------------- apply


def commit(plan: Plan, lock: TargetLock, *, verifying: bool = False) -> AppliedRecord | None:
    """Write a ready plan to its target as one transaction and record it in the ledger. With `verifying`, the
    transaction stays open after the ledger write, for the caller's checks: `verified()` closes it, `unverified()`
    undoes it, and a recovery of its journal (a crash or kill during the checks) undoes it too.

    Refuses, writing nothing, a plan with errors (raises its first error), a release the recipe refuses, a pending
    journal, and a plan whose files changed since it was made. Returns None when the plan changes nothing (already
    applied). `lock` must be the target's lock, held around both planning and this call.
    """
    target, recipe = plan.target, plan.recipe
    _require_lock(lock, target)
    if plan.errors:
        raise plan.errors[0]
    if plan.selection.refuse:
        raise VersionUnsupported(plan.selection.refuse, location=Location(recipe=recipe.id))
    changed = plan.changed_files
    if not changed:
        return None
    state = State.of(target)
    state.ensure()
    _refuse_pending(state)
    for fp in changed:
        current = _read(fp.path)
        if current != fp.before or file_mode(fp.path) != fp.mode:
            # the lock is held (`_require_lock`): no specpatch wrote it, another program did
            raise ChangedDuringApply(f"`{fp.rel}` changed since the plan was made; nothing was written",
                                     location=Location(recipe=recipe.id, file=fp.rel))
    ledger = state.read_ledger()
    seq = ledger.next_seq
    record_dir = state.record_dir_name(seq, recipe.id)
    state.remove_record_dir(record_dir)  # a leftover of a crash before its journal existed
    files = tuple(FileRecord(fp.rel, fp.mode, sha256(fp.before), sha256(fp.after),
                             f"{record_dir}/before/{fp.rel}", f"{record_dir}/after/{fp.rel}") for fp in changed)
    record = AppliedRecord(
        seq=seq, recipe=recipe.id, recipe_version=recipe.version, variant=plan.selection.variant,
        package=target.package, release=str(target.version) if target.version is not None else None,
        params=dict(plan.params), applied_at=now_utc().isoformat(), record_dir=record_dir, files=files)
    try:
        for fp, fr in zip(changed, files):
            for rel, data in ((fr.backup, fp.before), (fr.patched, fp.after)):
                path = state.path(rel)
                makedirs(path.parent)
                atomic_write(path, data, (fr.mode & 0o777) | 0o600)  # readable by whom the file is, no more
        _step("apply:backups-written")
        state.write_journal(Journal(Transaction.APPLY, record.applied_at, os.getpid(), record, verifying=verifying))
        _step("apply:journal-written")
        _preflight_apply(state, changed)
        for fp, fr in zip(changed, files):
            # looked at again right before its replace: another program (an upgrade, which takes no lock) may have
            # rewritten it since the check above, while the backups and the journal were written; the undo leaves
            # what it wrote as found
            if _read(fp.path) != fp.before or fp.path.is_symlink() != fp.was_link:
                raise ChangedDuringApply(f"`{fp.rel}` changed while the apply was writing (another program, an "
                                         f"upgrade?): the files already written were put back, the others left as "
                                         f"found", location=Location(recipe=recipe.id, file=fp.rel))
            atomic_write(fp.path, fp.after, fr.mode, owner=_owner(fp.path),
                         before_replace=lambda fp=fp, rel=fr.rel: _unchanged_at_replace(fp, recipe.id, rel))
            _remove_bytecode(fp.path)  # an unchecked-hash .pyc would otherwise keep running the old code
            _step(f"apply:after-write:{fr.rel}")
        moved = _release_moved(target)
        if moved:
            raise ChangedDuringApply(f"the release changed while the apply was writing ({moved}): the files were put "
                                     f"back where they still held what the apply wrote, the others left as found",
                                     location=Location(recipe=recipe.id))
        state.write_ledger(ledger.with_record(record))  # the commit point
    except BaseException as exc:
        try:
            with signals_deferred():
                _undo_apply(state, record, "undo")
            note_interrupt(exc, f"the apply of {recipe.id} was undone: every file has its original bytes")
        except BaseException as undo_exc:
            doing = f"applying {recipe.id} failed ({_why(exc)}) and restoring the files failed too"
            # before its journal the apply replaces no file of the target: the tree is untouched; after it, say
            # which files are patched and which original, and that the journal finishes the rollback
            unfinished = _unfinished(state, f"the apply of {recipe.id} ({_left_as(changed)})") \
                if state.journal_path.exists() else None
            if isinstance(undo_exc, OSError):
                raise os_failure(undo_exc, doing, unfinished=unfinished) from exc
            raise StateError(f"{doing} ({undo_exc!r})", location=Location(recipe=recipe.id),
                             hint=unfinished or "the tree is untouched; fix the cause and run the command again") \
                from exc
        raise
    _step("apply:ledger-written")
    if not verifying:
        _close_journal(state, record.recipe)
        _step("apply:journal-removed")
    return record


def _unchanged_at_replace(fp, recipe_id: str, rel: str) -> None:
    """Right before the rename of a file's new bytes over it (its temporary copy written and synced): the file must
    still be the one planned. An upgrade that replaced it while the copy was written would otherwise lose its file to
    the rename, and the undo would then put the old release's bytes back over the new release."""
    _step(f"apply:temp-written:{rel}")
    if _read(fp.path) != fp.before or fp.path.is_symlink() != fp.was_link:
        raise ChangedDuringApply(f"`{fp.rel}` changed while the apply was writing (another program, an upgrade?): "
                                 f"the files already written were put back, the others left as found",
                                 location=Location(recipe=recipe_id, file=fp.rel))


def _left_as(changed: list) -> str:
    """Each file of an apply as it is now: patched, original, or neither (changed by another program)."""
    def now(fp) -> str:
        data = _read(fp.path)
        return "patched" if data == fp.after else "original" if data == fp.before else "changed by another program"
    return ", ".join(f"{fp.rel} {now(fp)}" for fp in changed)


def _preflight_apply(state: State, changed: list) -> None:
    """Refuse, with no file of the target replaced yet, an apply the device has no room to finish or to undo: each
    file's new bytes are written beside it before the rename, and an undo writes its old bytes the same way; the
    ledger is written last (the commit point)."""
    room = _Room()
    for fp in changed:
        room.write(fp.path.parent, len(fp.after), replacing=len(fp.before))
    for fp in changed:
        room.write(fp.path.parent, len(fp.before))  # the undo's copy, on top of the grown files
    room.write(state.root, (state.ledger_path.stat().st_size if state.ledger_path.exists() else 0) + 4096)
    room.check("write the files and, should that fail, put them back", "no file of the target was written")


class _Room:
    """The room a sequence of writes needs on each device. Each is a temporary copy renamed over its file before
    the next is written (the rename frees the bytes it replaces), so a device needs, at its worst, one copy on top
    of what the files written before it grew by; and 64 KiB to spare."""

    def __init__(self) -> None:
        self.devices: dict[int, list] = {}  # device -> [growth so far, most needed at once, a folder on it]

    def write(self, folder: Path, size: int, *, replacing: int | None = None) -> None:
        """A copy of `size` bytes in `folder`; with `replacing`, renamed over a file of that size (the device keeps
        what it grew by), else one that does not stay (an undo's, the ledger's)."""
        held = self.devices.setdefault(os.stat(folder).st_dev, [0, 0, folder])
        held[1] = max(held[1], held[0] + size)
        if replacing is not None:
            held[0] += max(0, size - replacing)

    def check(self, doing: str, untouched: str) -> None:
        for _, size, folder in self.devices.values():
            size += 64 * 1024
            st = os.statvfs(folder)
            if st.f_bavail * st.f_frsize < size:
                raise OSError(errno.ENOSPC, f"{size // 1024} KiB are needed to {doing}, "
                                            f"{st.f_bavail * st.f_frsize // 1024} KiB are free ({untouched})",
                              str(folder))


def _close_journal(state: State, recipe: str) -> None:
    """Remove the journal of an apply past its commit point: a failure here leaves the apply done, not undone."""
    try:
        state.remove_journal()
    except OSError as exc:
        raise os_failure(exc, f"removing the journal of the apply of {recipe}",
                         unfinished=f"{recipe} is applied and recorded (every file is patched); its journal could "
                                    f"not be removed, and the next specpatch command on this target removes it") from exc


def _release_moved(target: Target) -> str | None:
    """What says the target's release is no longer the one it was planned for (an upgrade under the apply), read as
    the target read it (a release given with --assume-version, or read from git, is not read again)."""
    from .target import _read_version

    if target.version is None or target.version_source in ("--assume-version", "unknown") \
            or target.version_source.startswith("git "):
        return None
    now, source = _read_version(target.root, target.package_dir, target.package)
    return None if now == target.version else f"{source} now says {now}, the plan was for {target.version}"


def verified(target: Target, lock: TargetLock) -> None:
    """Close an apply `commit(..., verifying=True)` left open: its checks passed (the journal goes, the apply stays)."""
    _require_lock(lock, target)
    state = State.of(target)
    journal = state.read_journal()
    _close_journal(state, journal.record.recipe if journal is not None else "the recipe")
    _step("apply:journal-removed")


def unverified(target: Target, lock: TargetLock, record: AppliedRecord) -> list[str]:
    """Undo an apply `commit(..., verifying=True)` left open (a check failed, or the checks were interrupted): every
    file back to its original bytes and mode (a file changed meanwhile is kept under `kept/`), the ledger entry and
    the journal removed. Returns the restored files."""
    _require_lock(lock, target)
    with signals_deferred():
        restored, _, _ = _undo_apply(State.of(target), record, "undo")
    return restored


def _refuse_pending(state: State) -> None:
    journal = state.read_journal()
    if journal is not None:
        raise StateError(f"an interrupted {journal.kind} of {journal.record.recipe} (started {journal.started}) "
                         f"is pending in {state.journal_path}",
                         hint="call recover(target) first; every specpatch command does")


def _undo_apply(state: State, record: AppliedRecord, prefix: str) -> tuple[list[str], list[str], list[str]]:
    """Put every file of an unfinished apply that still has its original or its patched bytes back to its original
    bytes and mode, then forget the apply. Returns (restored, left): a file with other bytes, or none, was rewritten
    or removed by something else since (`pip install --upgrade` after a crash): the backups are another release's
    bytes, so it is left as found, and its original bytes are kept (the third list: their paths)."""
    restored, left = [], []
    for fr in record.files:
        outcome = _restore_file(state, fr, {fr.sha_before, fr.sha_after})
        (restored if outcome == "restored" else left if outcome == "left" else []).append(fr.rel)
        _remove_bytecode(state.target_file(fr.rel))
        _step(f"{prefix}:restored:{fr.rel}")
    originals = _keep_originals(state, record, left)
    ledger = state.read_ledger()
    if any(r.seq == record.seq for r in ledger.applied):  # the ledger was renamed into place, then something failed
        state.write_ledger(ledger.without(record.seq))
    state.remove_journal()
    _step(f"{prefix}:journal-removed")
    state.remove_record_dir(record.record_dir)
    return restored, left, originals


# --------------------------------------------------------------------------------------------------- recovery


def recover(target: Target, *, timeout: float = DEFAULT_LOCK_TIMEOUT) -> RecoveryReport | None:
    """Finish or undo a transaction a crash interrupted; None when there was none. Every command calls this first,
    under the target's lock (taken here if the caller does not hold it). Safe to repeat after a crash in it."""
    state = State.of(target)
    if not state.exists():
        return None
    with target_lock(target, timeout):
        journal = state.read_journal()
        report = None
        if journal is not None:
            with signals_deferred():
                try:
                    report = _recover(state, journal)
                except OSError as exc:
                    what = f"the recovery of an interrupted {journal.kind} of {journal.record.recipe}"
                    raise os_failure(exc, "recovery", unfinished=_unfinished(state, what)) from exc
        ledger = state.read_ledger()
        state.sweep({r.record_dir for r in ledger.applied} | {r.record.record_dir for r in ledger.retired})
        return report


def _recover(state: State, journal: Journal) -> RecoveryReport:
    if journal.kind == Transaction.APPLY:  # read from disk: any string
        return _recover_apply(state, journal)
    if journal.kind == Transaction.ROLLBACK:
        restored, left, _, originals = _finish_rollback(state, journal, "recover")
        return RecoveryReport(Transaction.ROLLBACK, journal.record.recipe, journal.started,
                              RecoveryOutcome.ROLLED_BACK, [f.rel for f in journal.record.files], restored,
                              left=left, originals=_abs(state, originals))
    raise StateDamaged(f"{state.journal_path} has an unknown kind `{journal.kind}`")


def _recover_apply(state: State, journal: Journal) -> RecoveryReport:
    record = journal.record
    rels = [f.rel for f in record.files]
    ledger = state.read_ledger()
    done = any(r.seq == record.seq for r in ledger.applied) and not journal.verifying
    if not done and not journal.verifying and all(_sha_of(state.target_file(f.rel)) == f.sha_after
                                                  for f in record.files):
        state.write_ledger(ledger.with_record(record))
        _step("recover:ledger-written")
        done = True
    if not done:
        restored, left, originals = _undo_apply(state, record, "recover")
        return RecoveryReport(Transaction.APPLY, record.recipe, journal.started, RecoveryOutcome.ROLLED_BACK, rels,
                              restored, left=left, originals=_abs(state, originals))
    for fr in record.files:
        path = state.target_file(fr.rel)
        temp_path(Path(os.path.realpath(path))).unlink(missing_ok=True)
        _remove_bytecode(path)
    state.remove_journal()
    _step("recover:journal-removed")
    return RecoveryReport(Transaction.APPLY, record.recipe, journal.started, RecoveryOutcome.COMPLETED, rels)


# --------------------------------------------------------------------------------------------------- rollback


def rollback(target: Target, recipe_id: str | None = None, *, force: bool = False,
             timeout: float = DEFAULT_LOCK_TIMEOUT) -> RollbackReport:
    """Give every file of an applied recipe (default: the last applied) back its exact original bytes and mode,
    remove their stale bytecode, and remove the recipe from the ledger.

    Raises DriftError, touching nothing, if a file changed since apply (the diff of the local change is in the
    error's `details`); with `force` the local version is kept under `.specpatch/kept/` and the original restored.
    Raises RollbackBlocked if a later recipe changed one of the same files. Nothing applied is a no-op report.
    """
    state = State.of(target)
    release = {"release": str(target.version) if target.version is not None else None,
               "release_source": target.version_source}

    def nothing(applied: list[AppliedRecord], retired: list[RetiredRecord] | None = None) -> RollbackReport:
        what = "no recipe is" if recipe_id is None else f"`{recipe_id}` is not"
        names = ", ".join(r.recipe for r in applied) or "none"
        return RollbackReport(target.root, None, f"nothing to roll back: {what} applied to {target.root} "
                                                 f"(applied: {names})", retired=retired or [], **release)

    if not state.exists():
        return nothing([])
    with target_lock(target, timeout):
        _refuse_pending(state)
        retired = retire_stale(target)  # never replay a record of another release, or of bytes no longer there
        ledger = state.read_ledger()
        own = _own(target, ledger.applied)
        matches = [r for r in own if recipe_id is None or r.recipe == recipe_id]
        if not matches:
            return nothing(own, retired)
        record = matches[-1]
        later = [r for r in ledger.applied if r.seq > record.seq and r.rels & record.rels]
        if later:
            raise _blocked(record, record, later, "cannot be rolled back before {names}, applied later to {shared}")
        earlier_files = _refuse_earlier_entries(target, own, record, force)
        pristine_files(target, record)  # the backups must be whole before anything is touched
        states = file_states(target, record)
        # a file with its original bytes already (`git checkout -- FILE`) is not a local change: nothing to undo
        original = [s.rel for s in states if s.state is FileBytes.MODIFIED and s.sha == s.record.sha_before]
        # a mode changed since apply (`chmod +x`) is a local change too: rollback would put the original one back
        local = [s for s in states if (s.state is not FileBytes.INTACT or s.mode != s.record.mode)
                 and s.rel not in original]
        if local and not force:
            raise _drift_error(target, record, local)
        stamp, kept = _stamp(), []
        for s in local:
            if s.current is not None and s.state is not FileBytes.INTACT:
                kept.append(_keep(state, s.rel, s.current, stamp))
        _step("rollback:kept-written")
        journal = Journal(Transaction.ROLLBACK, now_utc().isoformat(), os.getpid(), record,
                          start_shas={s.rel: s.sha for s in states}, kept=tuple(kept))
        # the whole rollback (this entry and the earlier ones of the recipe, `api.rollback`) is checked before the
        # first file is touched
        _preflight_restore(state, [s for s in [*states, *earlier_files]
                                   if not (s.sha == s.record.sha_before and s.mode == s.record.mode)])
        # from the journal on, the rollback finishes here even on SIGINT/SIGTERM (handled once the tree is whole)
        with signals_deferred():
            try:
                state.write_journal(journal)
                _step("rollback:journal-written")
                _, left, pycs, originals = _finish_rollback(state, journal, "rollback")
            except OSError as exc:  # past the preflight: a race (another program filled the disk), or an I/O error
                if all(_sha_of(state.target_file(rel)) == sha for rel, sha in journal.start_shas.items()):
                    state.remove_journal()  # no file was replaced yet: the tree is as it was, nothing is pending
                    raise
                raise os_failure(exc, "rollback", unfinished=_unfinished(state)) from exc
        rels = [f.rel for f in record.files if f.rel not in left]
        message = f"rolled back {record.recipe}: {len(rels)} files have their original bytes and mode again"
        if original:
            message += f" ({', '.join(original)} had them already)"
        if left:  # another program wrote them while we held the lock (pip does not take it)
            message += (f"; left as found, since another program rewrote them during the rollback: {', '.join(left)}"
                        f" (their original bytes are kept in {', '.join(_abs(state, originals))})")
        if kept:
            message += f"; your local versions are kept in {', '.join(_abs(state, kept))}"
        return RollbackReport(target.root, record, message, [r for r in rels if r not in original],
                              _abs(state, kept), pycs, retired=retired, already_original=original, **release)


def _preflight_restore(state: State, states: list[FileState]) -> None:
    """Refuse, before the journal and with nothing touched, a rollback the system would stop half-way: a folder we
    may not write, an immutable or append-only file (`chattr +i`: not even root may rename over it), or a device
    without room for the temporary copy of each file to restore (the old bytes stay until each rename)."""
    # the rollback ends by rewriting the ledger (its commit point): an immutable ledger or state folder would stop it
    # there, every file restored and the journal left behind
    for held in (state.root, state.ledger_path):
        if held.exists() and _immutable(held):
            raise PermissionError(errno.EPERM, "the state folder or its ledger is immutable or append-only (nothing "
                                               "was rolled back)", str(held))
    if not os.access(state.root, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, "the state folder may not be written (nothing was rolled back)",
                              str(state.root))
    room = _Room()
    for s in states:
        path = Path(os.path.realpath(state.target_file(s.rel)))
        folder = path.parent
        while not folder.exists():
            folder = folder.parent
        if not os.access(folder, os.W_OK | os.X_OK):
            raise PermissionError(errno.EACCES, "the folder may not be written (nothing was rolled back)", str(folder))
        if _immutable(folder):  # `chattr +a`/`+i` on the folder: no rename into it
            raise PermissionError(errno.EPERM, "the folder is immutable or append-only (nothing was rolled back)",
                                  str(folder))
        if s.current is not None and _immutable(path):
            raise PermissionError(errno.EPERM, "the file is immutable or append-only (nothing was rolled back)",
                                  str(path))
        # the files are restored one at a time
        room.write(folder, state.path(s.record.backup).stat().st_size, replacing=len(s.current or b""))
    # then the ledger's new copy (and the journal before it), in the state folder: without room there, every file
    # would be restored and the rollback stop at its commit point
    room.write(state.root, (state.ledger_path.stat().st_size if state.ledger_path.exists() else 0) + 4096)
    room.check("restore the files", "nothing was rolled back")


def _immutable(path: Path) -> bool:
    """Whether the file carries the immutable or append-only attribute (Linux `chattr +i` / `+a`, read with the
    FS_IOC_GETFLAGS ioctl; BSD and macOS `chflags` through st_flags)."""
    flags = getattr(os.stat(path), "st_flags", 0)
    if flags & (getattr(stat, "UF_IMMUTABLE", 0) | getattr(stat, "SF_IMMUTABLE", 0) | getattr(stat, "UF_APPEND", 0)
                | getattr(stat, "SF_APPEND", 0)):
        return True
    try:
        import fcntl
        import struct

        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except (ImportError, OSError):
        return False
    try:
        got = fcntl.ioctl(fd, 0x80086601, struct.pack("l", 0))  # FS_IOC_GETFLAGS
        return bool(struct.unpack("l", got)[0] & (0x10 | 0x20))  # FS_IMMUTABLE_FL, FS_APPEND_FL
    except OSError:  # a file system without these flags
        return False
    finally:
        os.close(fd)


def _unfinished(state: State, what: str = "the rollback") -> str:
    return (f"{what} stopped part-way: its journal ({state.journal_path}) is kept, and the next specpatch "
            f"command on this target finishes it once the cause is fixed (`specpatch status` shows it)")


def _refuse_earlier_entries(target: Target, own: list[AppliedRecord], record: AppliedRecord,
                            force: bool) -> list[FileState]:
    """A recipe applied again after a hand edit or a partial reinstall has a second entry, and rolling the recipe back
    rolls back every entry of it, newest first (`api.rollback`). Check the earlier entries before the first is
    touched, as each will find its files (bytes and mode) once the later ones are rolled back, so that a drift or a
    block in an earlier one stops the rollback with nothing done rather than half-way. Returns the earlier entries'
    other files as they are now, for the preflight of the whole rollback."""
    stack = sorted((r for r in own if r.recipe == record.recipe and r.seq <= record.seq), key=lambda r: r.seq)
    if len(stack) < 2:
        return []
    # each file as the earlier entry will find it, once the later entries have put their backups back
    bytes_then = {s.rel: s.current for s in file_states(target, record)}
    bytes_then.update(pristine_files(target, record))
    mode_then = {fr.rel: fr.mode for fr in record.files}
    others: dict[str, FileState] = {}
    for earlier in reversed(stack[:-1]):
        blocking = [r for r in own if r.seq > earlier.seq and r.recipe != record.recipe and r.rels & earlier.rels]
        if blocking:
            raise _blocked(record, earlier, blocking, "was applied twice, and its earlier entry cannot be rolled back "
                                                      "before {names}, applied in between to {shared}; nothing was "
                                                      "rolled back")
        local = []
        for s in file_states(target, earlier):
            data = bytes_then.get(s.rel, s.current)
            sha = None if data is None else sha256(data)
            mode = mode_then.get(s.rel, s.mode)
            if sha not in (s.record.sha_after, s.record.sha_before):
                local.append(FileState(s.rel, FileBytes.MISSING if data is None else FileBytes.MODIFIED, s.record,
                                       sha, mode, data))
            elif sha == s.record.sha_after and mode is not None and mode != s.record.mode:  # a chmod since
                local.append(FileState(s.rel, FileBytes.INTACT, s.record, sha, mode, data))
            if s.rel not in bytes_then:
                others.setdefault(s.rel, s)
        if local and not force:
            raise _drift_error(target, earlier, local, f" (its earlier entry, of {earlier.applied_at}: the recipe "
                                                       f"was applied again since)")
        bytes_then.update(pristine_files(target, earlier))
        mode_then.update({fr.rel: fr.mode for fr in earlier.files})
    return list(others.values())


def _blocked(record: AppliedRecord, entry: AppliedRecord, blocking: list[AppliedRecord], text: str) -> RollbackBlocked:
    """`record`'s recipe cannot be rolled back: the `blocking` entries, of other recipes, wrote files of `entry`
    after it. `text` follows the recipe's name, with `{names}` and `{shared}` (the files) filled in."""
    names = ", ".join(f"`{r.recipe}`" for r in reversed(blocking))
    shared = sorted(set().union(*(r.rels & entry.rels for r in blocking)))
    return RollbackBlocked(f"`{record.recipe}` " + text.format(names=names, shared=", ".join(shared)),
                           location=Location(recipe=record.recipe, file=shared[0]),
                           hint=f"roll back {names} first, then `{record.recipe}`")


def _finish_rollback(state: State, journal: Journal,
                     prefix: str) -> tuple[list[str], list[str], list[str], list[str]]:
    """Returns (restored, left, removed bytecode, the kept originals of the left files); see `_restore_file`."""
    record = journal.record
    restored, left, pycs = [], [], []
    for fr in record.files:
        outcome = _restore_file(state, fr, {fr.sha_before, fr.sha_after, journal.start_shas.get(fr.rel)})
        (restored if outcome == "restored" else left if outcome == "left" else []).append(fr.rel)
        pycs += _remove_bytecode(state.target_file(fr.rel))
        _step(f"{prefix}:restored:{fr.rel}")
    originals = _keep_originals(state, record, left)
    ledger = state.read_ledger()
    if any(r.seq == record.seq for r in ledger.applied):
        state.write_ledger(ledger.without(record.seq))
    _step(f"{prefix}:ledger-written")
    state.remove_journal()
    _step(f"{prefix}:journal-removed")
    state.remove_record_dir(record.record_dir)
    return restored, left, pycs, originals


def _drift_error(target: Target, record: AppliedRecord, local: list[FileState], which: str = "") -> DriftError:
    patched = patched_files(target, record)
    details = []
    for s in local:
        if s.current is None:
            details.append(f"# {s.rel} is missing\n")
        else:
            details.append(unified_diff(patched[s.rel], s.current, s.rel) or f"# {s.rel}: only the mode changed\n")
    what = ", ".join(f"{s.rel} ({s.state})" if s.state is not FileBytes.INTACT
                     else f"{s.rel} (mode {s.record.mode:04o} -> {s.mode:04o})" for s in local)
    message = (f"{what} changed since `{record.recipe}` was applied{which}" if len(local) == 1
               else f"{len(local)} files changed since `{record.recipe}` was applied{which}: {what}")
    return DriftError(message + "; nothing was rolled back", location=Location(recipe=record.recipe, file=local[0].rel),
                      details="".join(details))


# --------------------------------------------------------------------------------------------------- queries


def status(target: Target) -> StatusReport:
    """The applied recipes and any unfinished transaction; reads only, takes no lock."""
    state = State.of(target)
    ledger = state.read_ledger() if state.exists() else None
    applied = _own(target, ledger.applied) if ledger else []
    # a retired entry whose edits came back is applied again, as the next writing command records it (retire_stale)
    back = _revivable(target, state, ledger) if ledger else []
    applied = sorted([*applied, *back], key=lambda r: r.seq)
    pending = state.read_journal() if state.exists() else None
    # the files of an unfinished apply or rollback are part-way: the pending line says what the next command does
    # with them, not "edited" or "stale"
    busy = {pending.record.seq} if pending is not None else set()
    originals = _originals(applied)
    stale = {r.seq: why for r in applied if r.seq not in busy and (why := stale_reason(target, r, originals))}
    # files whose bytes are not what the last recipe that wrote them left (a hand edit: `check` calls it drift)
    last = {f.rel: (r, f) for r in applied if r.seq not in stale for f in r.files}
    last = {rel: (r, f) for rel, (r, f) in last.items() if r.seq not in busy}
    edited: dict[int, list[str]] = {}
    for rel, (r, f) in last.items():
        if file_state(target, f).state is not FileBytes.INTACT:
            edited.setdefault(r.seq, []).append(rel)
    return StatusReport(target.root, target.package, str(target.version) if target.version is not None else None,
                        applied, pending, version_source=target.version_source, edited=edited,
                        in_progress=pending is not None and lock_held_elsewhere(target),
                        retired=[r for r in ledger.retired if r.record.package == target.package
                                 and r.record not in back] if ledger else [],
                        stale=stale)


def lock_held_elsewhere(target: Target) -> bool:
    """Whether another process holds the target's lock now: a journal is then a transaction in progress, not an
    interrupted one. Reads only (the lock file is opened read-only; a shared `flock` probe, released at once)."""
    import fcntl

    if _key(target) in _held_locks():
        return False
    try:
        fd = os.open(State.of(target).lock_path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def _originals(records: list[AppliedRecord]) -> dict[str, str]:
    """{file: sha256 before the first recipe that wrote it} (records oldest first: recipes may stack)."""
    out: dict[str, str] = {}
    for r in records:
        for f in r.files:
            out.setdefault(f.rel, f.sha_before)
    return out


def stale_reason(target: Target, record: AppliedRecord, originals: dict[str, str] | None = None) -> str | None:
    """Why `record` no longer describes the target, or None while it does. A record is bound to the release and the
    bytes it was made on: it is stale when the target is now another release (an upgrade or a downgrade: its
    backups are another release's bytes) and not every file has its patched bytes still, or when none of its files
    has its patched bytes any more, every one being original again or gone (a reinstall, an uninstall, a `git
    checkout` of the files)."""
    from packaging.version import InvalidVersion, Version

    release_changed = None
    if record.release and target.version is not None:
        try:
            if Version(record.release) != target.version:
                release_changed = (f"it was applied to {record.package} {record.release}; the target is now "
                                   f"{target.package} {target.version} (read from {target.version_source})")
        except InvalidVersion:
            pass
    # ... unless every file still has exactly the bytes the apply wrote: the change of release left them alone (a
    # `git checkout` keeps edits to files both releases have alike), so their backups are still what they were before
    # the apply, and the entry still describes them
    states = file_states(target, record)
    originals = originals or {}
    if release_changed and not (states and all(s.state is FileBytes.INTACT for s in states)):
        return release_changed
    # a file the release had, deleted while the package is still there, is an edit of the tree (drift, which
    # check names and rollback --force restores), not an uninstall
    installed = (target.package_dir / "__init__.py").is_file()
    if installed and any(s.state is FileBytes.MISSING and s.record.sha_before is not None for s in states):
        return None
    if states and all(s.state is FileBytes.MISSING or s.sha in (s.record.sha_before, originals.get(s.rel))
                      for s in states):
        gone = all(s.state is FileBytes.MISSING for s in states)
        return ("its files are gone (the package was uninstalled or moved)" if gone else
                "every file it changed has its original bytes again (a reinstall, or `git checkout` of the files)")
    return None


def retire_stale(target: Target) -> list[RetiredRecord]:
    """Move the ledger entries that no longer describe the target (see `stale_reason`) to its retired history, so
    that no command replays them: a rollback would otherwise write another release's bytes into the tree. Call it
    with the target's lock held, after `recover`. Returns what was retired."""
    state = State.of(target)
    if not state.exists():
        return []
    ledger = state.read_ledger()
    retired = []
    originals = _originals(ledger.applied)
    for record in _own(target, ledger.applied):
        reason = stale_reason(target, record, originals)
        if reason is not None:
            ledger = ledger.retiring(record, reason)
            retired.append(ledger.retired[-1])
    revived = False
    for record in _revivable(target, state, ledger, {r.record.seq for r in retired}):
        ledger = ledger.reviving(record.seq)
        revived = True
    if retired or revived:
        state.write_ledger(ledger)
    return retired


def _revivable(target: Target, state: State, ledger: Any, skip: AbstractSet[int] = frozenset()) -> list[AppliedRecord]:
    """The retired entries whose files hold again exactly what their apply wrote (`git stash pop` after a verify
    retired them), none of them another applied entry's, their backups there: they describe the tree again, and
    a rollback restores the bytes before them. Newest first; reads only."""
    out: list[AppliedRecord] = []
    busy = {f.rel for r in ledger.applied for f in r.files}
    for old in reversed(ledger.retired):  # the newest first
        record = old.record
        if record.package != target.package or record.seq in skip:
            continue
        states = file_states(target, record)
        if (states and all(s.state is FileBytes.INTACT for s in states) and not busy & {f.rel for f in record.files}
                and stale_reason(target, record) is None
                and all(state.path(f.backup).is_file() for f in record.files)):
            out.append(record)
            busy |= {f.rel for f in record.files}
    return out


def applied_records(target: Target) -> list[AppliedRecord]:
    """The ledger's entries for the target's package, oldest first."""
    state = State.of(target)
    return _own(target, state.read_ledger().applied) if state.exists() else []


def _own(target: Target, records: list[AppliedRecord]) -> list[AppliedRecord]:
    """The entries of the target's package: a site-packages that holds sglang and vllm keeps one ledger for both,
    and a command on one package never judges, retires or rolls back the other's entries."""
    return [r for r in records if r.package == target.package]


def file_states(target: Target, record: AppliedRecord) -> list[FileState]:
    """Each file of `record` now: intact (its patched bytes), modified, or missing, with its current bytes."""
    state = State.of(target)
    return [_file_state(state, fr) for fr in record.files]


def file_state(target: Target, fr: FileRecord) -> FileState:
    """One recorded file now (see `file_states`)."""
    return _file_state(State.of(target), fr)


def _file_state(state: State, fr: FileRecord) -> FileState:
    path = state.target_file(fr.rel)
    current = _read(path)
    if current is None:
        return FileState(fr.rel, FileBytes.MISSING, fr, None, None, None)
    sha = sha256(current)
    return FileState(fr.rel, FileBytes.INTACT if sha == fr.sha_after else FileBytes.MODIFIED, fr, sha,
                     file_mode(path), current)


def pristine_files(target: Target, record: AppliedRecord) -> dict[str, bytes]:
    """The original bytes of each file of `record` (from the backups), keyed by path relative to the target root."""
    return {fr.rel: _read_copy(State.of(target), fr, fr.backup, fr.sha_before) for fr in record.files}


def patched_files(target: Target, record: AppliedRecord) -> dict[str, bytes]:
    """The bytes each file of `record` had right after the apply."""
    return {fr.rel: _read_copy(State.of(target), fr, fr.patched, fr.sha_after) for fr in record.files}


# --------------------------------------------------------------------------------------------------- helpers


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return f"{exc.strerror or exc} on {exc.filename}" if exc.filename else str(exc.strerror or exc)
    return repr(exc)


def _sha_of(path: Path) -> str | None:
    data = _read(path)
    return None if data is None else sha256(data)


def _read_copy(state: State, fr: FileRecord, rel_to_state: str, sha: str) -> bytes:
    data = _read(state.path(rel_to_state))
    if data is None or sha256(data) != sha:
        raise StateDamaged(f"the saved copy of `{fr.rel}` ({state.path(rel_to_state)}) is "
                         f"{'missing' if data is None else 'damaged'}", location=Location(file=fr.rel))
    return data


def _restore_file(state: State, fr: FileRecord, expected: set[str | None]) -> str:
    """Give `fr` its original bytes and mode unless it has them: "restored", or "original" if it had them. A file
    whose bytes (None: gone) are none of `expected` (original, patched, or what a rollback found) was rewritten or
    removed by something else after the transaction started, a `pip install --upgrade` after a crash say: our
    backups would put another release's bytes over it, so it is left as found: "left"."""
    path = state.target_file(fr.rel)
    temp_path(Path(os.path.realpath(path))).unlink(missing_ok=True)
    current = _read(path)
    sha = None if current is None else sha256(current)
    if sha == fr.sha_before and file_mode(path) == fr.mode:
        return "original"
    if sha not in expected:
        return "left"
    original = _read_copy(state, fr, fr.backup, fr.sha_before)
    makedirs(path.parent)
    atomic_write(path, original, fr.mode, owner=_owner(path) if current is not None else None)
    return "restored"


def _keep_originals(state: State, record: AppliedRecord, left: list[str]) -> list[str]:
    """Save the original bytes of the files a transaction leaves as found under kept/ (`FILE.STAMP.original`), as
    the record's folder, backups and all, goes next: whatever the file holds now, its original stays at hand.
    Returns the paths, relative to the state folder."""
    stamp, out = _stamp(), []
    for fr in record.files:
        if fr.rel in left:
            out.append(_keep(state, f"{fr.rel}", _read_copy(state, fr, fr.backup, fr.sha_before),
                             f"{stamp}.original"))
    return out


def _keep(state: State, rel: str, data: bytes, stamp: str) -> str:
    """Save a local version under kept/ and return its path relative to the state folder."""
    name, n = f"kept/{rel}.{stamp}", 1
    while state.path(name).exists():
        name, n = f"kept/{rel}.{stamp}.{n}", n + 1
    path = state.path(name)
    makedirs(path.parent)
    atomic_write(path, data, 0o644)
    return name


def _abs(state: State, rels: list[str]) -> list[str]:
    return [str(state.path(r)) for r in rels]


def _stamp() -> str:
    return now_utc().strftime("%Y%m%dT%H%M%SZ")


def _owner(path: Path) -> tuple[int, int] | None:
    """The file's owner when it is not us (root patching another user's files keeps their ownership)."""
    if not hasattr(os, "geteuid"):
        return None
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return None if (st.st_uid, st.st_gid) == (os.geteuid(), os.getegid()) else (st.st_uid, st.st_gid)


def _remove_bytecode(path: Path) -> list[str]:
    """Remove `__pycache__/<stem>.*.pyc` of a source file (module names have no dots, so the prefix is exact).
    A `__pycache__` that is a link is not followed (it may lead out of the target: nothing there is specpatch's to
    delete), and only files (or links, removed as links) are removed, never a folder of that name; one the system
    will not let us write is left as it is (best effort)."""
    cache = path.parent / "__pycache__"
    removed = []
    try:
        if cache.is_dir() and not cache.is_symlink():
            for pyc in cache.iterdir():
                if pyc.name.startswith(f"{path.stem}.") and pyc.name.endswith(".pyc") \
                        and (pyc.is_symlink() or pyc.is_file()):
                    pyc.unlink(missing_ok=True)
                    removed.append(str(pyc))
    except OSError:
        # a `__pycache__` the system will not let us write (read-only, `chattr +i`): the files are what counts, and
        # a timestamp-checked .pyc (the default) is not used once its source changed; stopping here would leave the
        # transaction half-done for every later command
        pass
    return removed
