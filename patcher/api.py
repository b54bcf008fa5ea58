"""The use cases behind the CLI: apply, verify, rollback, status, check, try. Importable without the CLI."""

from __future__ import annotations

import functools
import shlex
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from packaging.version import Version

from .engine import Plan, plan
from .errors import (DriftError, ExitCode, Location, LockTimeout, ParamsChanged, PendingTransaction, RecipeNotFound,
                     SpecpatchError, StateLost, UsageError, VersionUnsupported, os_failure)
from .recipe import Recipe, available, load_recipe
from .results import (ApplyOutcome, ApplyResult, CheckResult, CheckState, FileBytes, FileVerdict, RecipeVerification,
                      TryOutcome, TryResult, VariantKind, VerifyResult)
from .target import Target


def _system_errors(doing: str):
    """A use case whose OSError (a read-only tree, no space left, an immutable file) becomes an OSFailure naming
    the file and the errno: the machine's refusal is not a bug of specpatch. The transaction has restored the tree
    (or not touched it) by the time the error gets here."""

    def wrap(fn):
        @functools.wraps(fn)
        def call(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except OSError as exc:
                raise os_failure(exc, doing, unfinished=_left_part_way(args, kwargs)) from exc

        return call

    return wrap


def _left_part_way(args: tuple, kwargs: dict) -> str | None:
    """When the target of a use case that the system stopped still has a journal (an earlier apply or rollback that
    was interrupted, and that this command could not finish either): the tree is part-way, not whole, in words."""
    target = next((a for a in (*args, *kwargs.values()) if isinstance(a, Target)), None)
    try:
        journal = target.state_dir / "journal.json" if target is not None else None
        if journal is None or not journal.is_file():
            return None
    except OSError:
        return None
    return (f"an interrupted apply or rollback left the tree part-way: its journal ({journal}) is kept, and the next "
            f"specpatch command on this target that can write finishes it (`specpatch status` shows it)")


def load(name_or_path: str, extra_dirs: list[Path] | None = None) -> Recipe:
    return load_recipe(name_or_path, extra_dirs)


def list_recipes(extra_dirs: list[Path] | None = None) -> list[Recipe]:
    return [load_recipe(path) for path in available(extra_dirs).values()]


def describe_recipe(recipe: Recipe) -> dict[str, Any]:
    """What a recipe changes, per variant (the recipe's own steps form a variant when there are none)."""

    def steps(items) -> list[dict[str, str]]:
        return [{"op": s.op, "file": s.file, "name": s.name or "", "description": s.describe()} for s in items]

    def checks(spec) -> list[str]:
        out = [f"import {m}" for m in spec.imports] + [f"probe {p.name or p.path}" for p in spec.probes]
        return out + ([f"stubs: {', '.join(spec.stubs)}"] if spec.stubs else [])

    variants = [{"name": v.name, "versions": v.versions, "refuse": v.refuse, "description": v.description,
                 "steps": steps(v.steps or recipe.steps), "checks": checks(v.verify or recipe.verify)}
                for v in recipe.variants]
    if not variants:
        variants = [{"name": "default", "versions": recipe.target.versions, "refuse": None, "description": "",
                     "steps": steps(recipe.steps), "checks": checks(recipe.verify)}]
    return {
        "id": recipe.id, "version": recipe.version, "title": recipe.title, "description": recipe.description,
        "package": recipe.target.package, "versions": recipe.target.versions,
        "params": {k: {"type": p.type, "default": p.default, "description": p.description}
                   for k, p in recipe.params.items()},
        "variants": variants,
    }


# --------------------------------------------------------------------------------------------------- apply


def _refusal(p: Plan) -> VersionUnsupported:
    return VersionUnsupported(p.selection.refuse or "", hint="the recipe refuses this release: the message above says "
                              "why, and what to use instead")


@_system_errors("apply")
def apply_recipe(recipe: Recipe, target: Target, *, params: dict[str, str] | None = None, dry_run: bool = False,
                 smoke: bool = True, python: str | None = None, lock_timeout: float = 60.0,
                 require_checks: bool = False) -> ApplyResult:
    """Plan, write transactionally, verify; roll back if a check fails. A dry run only plans. With
    `require_checks`, an import smoke test or probe that could not run counts as a failed check (for CI)."""
    if dry_run:
        from . import transaction

        # a dry run writes nothing, so it cannot finish an interrupted apply or rollback: its diff would be against
        # a half-written tree (the files not yet written only); say so, as `check` does
        pending = transaction.status(target).pending if target.state_dir.is_dir() else None
        if pending is not None and transaction.lock_held_elsewhere(target):
            # one running now: wait for it (as a writing command would, `--lock-timeout`), then look again
            with transaction.target_lock(target, timeout=lock_timeout):
                pass
            pending = transaction.status(target).pending
        if pending is not None:
            running = transaction.lock_held_elsewhere(target)
            # one running now is a lock to wait for (exit 6, as `check` says), not an interrupted one (exit 5)
            raise (LockTimeout if running else PendingTransaction)(
                f"an {'' if running else 'interrupted '}{pending.kind} of {pending.record.recipe} (started "
                f"{pending.started}, pid {pending.pid}) is {'running' if running else 'pending'}: the tree is part-way "
                f"through it, and a dry run would show a diff against half-written files",
                hint="wait for it to end (--lock-timeout)" if running else
                "run `specpatch verify` (or apply/rollback): it finishes or undoes the interrupted one first; then "
                "the dry run")
        p = plan(recipe, target, params)
        if target.state_dir.is_dir():
            records = transaction.applied_records(target)
            _refuse_other_params(p, records)
            if p.errors and not p.selection.refuse:
                _refuse_reapplying_edited(p, records)
        return _planned(p, dry_run=True)
    from . import transaction
    from . import verify as v

    with transaction.target_lock(target, timeout=lock_timeout) as lock:
        recovery = transaction.recover(target)
        notes = [retired_note(r) for r in transaction.retire_stale(target)]
        p = plan(recipe, target, params)
        records = transaction.applied_records(target)  # the ledger under the lock: read once
        _refuse_other_params(p, records)
        planned = _planned(p, dry_run=False, recovery=recovery, notes=notes)
        if p.errors and not p.selection.refuse:
            _refuse_reapplying_over_drift(p, records, refused=True)
            _refuse_reapplying_edited(p, records)
        if planned.exit_code != ExitCode.OK or not p.changed_files:
            return planned
        _refuse_reapplying_over_drift(p, records)
        # the transaction stays open (its journal on disk) until the checks pass: a crash or kill -9 during them is
        # undone by the next command, as an interrupt or a failed check is here
        record = transaction.commit(p, lock, verifying=True)
        try:
            checked = v.verify_tree(target, p.selection.verify, [f.path for f in p.changed_files],
                                    recipe_folder=p.recipe.folder, params=p.params, python=python, smoke=smoke,
                                    pristine=lambda: {f.rel: f.before for f in p.changed_files})
        except BaseException as exc:  # an interrupt (or a failure) before the checks said yes: undo the apply
            transaction.unverified(target, lock, record)
            transaction.note_interrupt(exc, f"{recipe.id} was applied, then rolled back before its checks had "
                                             f"finished: every file has its original bytes")
            raise
        _refuse_rewritten_meanwhile(recipe, target, p, lock, record)
        notes += checked.notes
        outcome, code = ApplyOutcome.CHANGED, ExitCode.OK
        if checked.failed or (require_checks and checked.unverified):
            transaction.unverified(target, lock, record)
            outcome, code = ApplyOutcome.VERIFY_FAILED, ExitCode.VERIFY_FAILED
            if not checked.failed:
                notes.append(f"--require-checks: {', '.join(checked.unverified)} could not run")
            notes.append("a check failed: every file was restored to its original bytes")
        else:
            transaction.verified(target, lock)
            notes += _after_apply_notes(p)
    return ApplyResult(p, False, outcome, code, recovery, record, checked.checks, tuple(notes),
                       unverified=checked.unverified)


def _refuse_rewritten_meanwhile(recipe: Recipe, target: Target, p: Plan, lock: Any, record: Any) -> None:
    """The checks take seconds to a minute: a file another program rewrote meanwhile (a `pip install
    --force-reinstall`, a `git checkout`) no longer holds the recipe's bytes, and "applied and verified" would be
    false. The apply is undone where its bytes are still there; a rewritten file is left as that program wrote it
    (its bytes are the newer ones); exit 5."""
    from . import transaction
    from .errors import DriftError, Location

    def now(path: Path) -> bytes | None:
        try:
            return path.read_bytes()
        except OSError:
            return None

    rewritten = [f.rel for f in p.changed_files if now(f.path) != f.after]
    if not rewritten:
        return
    restored = transaction.unverified(target, lock, record)
    them = ", ".join(f"`{r}`" for r in rewritten[:3]) + (
        f" and {len(rewritten) - 3} more" if len(rewritten) > 3 else "")
    raise DriftError(
        f"while its checks ran, another program rewrote {them} (a pip install, a git checkout?): {recipe.id} is not "
        f"applied; its edits were undone where they were still there ({len(restored)} file(s)), and what that program "
        f"wrote is left as it is", location=Location(recipe=recipe.id, file=rewritten[0]),
        hint="let the other program finish, then apply again (specpatch status says what the tree holds)")


def _other_params(p: Plan, record: Any) -> str | None:
    """What differs between the parameter values `record` (the recipe's ledger entry) was applied with and the plan's,
    in words; None when they are the same."""
    import json

    if record is None or not p.params:
        return None
    had, want = ({k: json.dumps(v, sort_keys=True, default=str) for k, v in values.items()}
                 for values in (record.params, p.params))
    changed = sorted(k for k in set(had) | set(want) if had.get(k) != want.get(k))
    if not changed:
        return None
    return (f"{p.recipe.id} is applied with {', '.join(f'{k}={record.params.get(k)!r}' for k in changed)}, not "
            f"{', '.join(f'{k}={p.params.get(k)!r}' for k in changed)}")


def _refuse_other_params(p: Plan, records: list[Any]) -> None:
    """The recipe is applied with other parameter values: its steps would find their own code with the old values
    ("conflicting definition", "roll back the other recipe") or put a second copy beside it. A parameter of an applied
    recipe changes by a rollback, then an apply."""
    differs = _other_params(p, next((r for r in reversed(records) if r.recipe == p.recipe.id), None))
    if differs is not None:
        raise ParamsChanged(differs, hint=_PARAMS_HINT.format(id=p.recipe.id), location=Location(recipe=p.recipe.id))


_PARAMS_HINT = ("a parameter of an applied recipe changes by a rollback, then an apply: `specpatch rollback {id}`, "
                "then `specpatch apply {id}` with the new values")


def _refuse_reapplying_over_drift(p: Plan, records: list[Any], *, refused: bool = False) -> None:
    """A recipe the ledger records as applied, whose files someone changed since (an edit next to or inside the
    recipe's code), and which would now change them again: applied over the edit, its code would go in a second
    time (`budget = budget * 2` twice) or beside the edited copy. Refused: the edit is the operator's to settle.
    With `refused`, for a plan that cannot apply: a step refused in a file the ledger says this recipe wrote and
    someone changed since (a value of its own code edited by hand) is that drift, not a conflict with another
    recipe."""
    from . import transaction

    if refused:
        named = {e.location.file for e in p.errors if e.location is not None and e.location.file}
        p = replace(p, files=[f for f in p.files if f.rel in named])
        if not p.files:
            return

    # the bytes the ledger accounts for: each file as the last applied recipe that wrote it left it (another recipe
    # applied after this one on the same file is no hand edit)
    expected = {f.rel: f.sha_after for record in records for f in record.files}
    for record in records:
        if record.recipe != p.recipe.id:
            continue
        mine = {f.rel for f in (p.files if refused else p.changed_files)}
        drifted = [s.rel for s in transaction.file_states(p.target, record)
                   if s.state is FileBytes.MODIFIED and s.rel in mine and s.sha != s.record.sha_before
                   and s.sha != expected.get(s.rel)]
        if drifted:
            raise DriftError(
                f"{p.recipe.id} is applied, and {', '.join(f'`{r}`' for r in drifted)} changed since (by hand?): "
                + (f"its steps no longer find their own code there ({p.errors[0].message})" if refused else
                   "applied again, its code would go in beside the edited copy"),
                hint="`specpatch verify` shows the change; `specpatch rollback --force` restores the original bytes "
                     "and keeps the edited file beside them, then apply again")


def _refuse_reapplying_edited(p: Plan, records: list[Any]) -> None:
    """A recipe the ledger records as applied (its files as it left them: no drift), edited since, that cannot apply
    over its own earlier code: the way out is its rollback, not another recipe's or a local change's."""
    written = {f.rel for record in records if record.recipe == p.recipe.id for f in record.files}
    first = next((e for e in p.errors if e.location is not None and e.location.file in written), None)
    if first is None:
        return
    raise type(first)(f"{p.recipe.id} is applied here already, as the recipe was then, and the recipe as it is now "
                      f"cannot apply over its own earlier code: {first.message}", location=first.location,
                      candidates=first.candidates,
                      hint=f"`specpatch rollback {p.recipe.id}` takes the earlier code out; then apply the edited "
                           f"recipe (`specpatch check {p.recipe.id}` says what differs)")


def _planned(p: Plan, *, dry_run: bool, recovery: Any = None, notes: list[str] | None = None) -> ApplyResult:
    """The result of a plan that is not written (yet): refused, cannot apply, already applied, would change."""
    done = functools.partial(ApplyResult, p, dry_run, recovery=recovery, notes=tuple(notes or ()))
    if p.selection.refuse:
        return done(ApplyOutcome.REFUSED, ExitCode.CANNOT_APPLY, error=_refusal(p))
    if p.errors:
        return done(ApplyOutcome.CANNOT_APPLY, ExitCode(max(e.exit_code for e in p.errors)))
    if not p.changed_files:
        return done(ApplyOutcome.ALREADY_APPLIED)
    return done(ApplyOutcome.WOULD_CHANGE if dry_run else ApplyOutcome.PLANNED)


def _after_apply_notes(p: Plan) -> list[str]:
    """What a user needs after a write: how to undo it, and what pip will think of the patched files."""
    t = p.target
    where = f"--target {shlex.quote(str(t.root))}"  # copied into a shell as it is: a path with spaces stays one
    if t.package != "sglang":
        where += f" --package {t.package}"
    notes = [f"undo: specpatch rollback {p.recipe.id} {where} (restores the original bytes and modes)"]
    records = sorted(t.package_dir.parent.glob(f"{t.package}-*.dist-info/RECORD"))
    mine = [r for r in records if r.parent.name == f"{t.package}-{t.version}.dist-info"]
    record = (mine or records or [None])[0]
    if record is not None:
        listed = {line.split(",")[0] for line in record.read_text(encoding="utf-8", errors="replace").splitlines()}
        named = [f.rel for f in p.changed_files if f.path.relative_to(t.package_dir.parent).as_posix() in listed]
        if named:
            notes.append(f"pip's {record.parent.name}/RECORD still lists the original hashes of {', '.join(named)}: "
                         f"a tool that checks installed files against RECORD reports them as modified, and "
                         f"`pip install --force-reinstall` puts the originals back (then apply again); specpatch "
                         f"does not rewrite RECORD")
    return notes


# --------------------------------------------------------------------------------------------------- verify


def retired_note(retired: Any) -> str:
    """One line about a ledger entry retired by this command."""
    r = retired.record
    return (f"retired the record of {r.recipe} (applied {r.applied_at} to {r.package} {r.release}): {retired.reason}; "
            f"kept in the ledger's history, never replayed")


@_system_errors("verify")
def verify(target: Target, recipe_id: str | None = None, *, python: str | None = None, smoke: bool = True,
           lock_timeout: float = 60.0, extra_dirs: list[Path] | None = None,
           require_checks: bool = False) -> VerifyResult:
    """For each applied recipe (or one): files intact / drifted / lost, syntax, import smoke test, probes. "verified"
    is said only of what ran; with `require_checks`, an import or probe that could not run fails (VERIFY_FAILED)."""
    from . import transaction

    had_state = target.state_dir.exists()  # before the lock creates the folder
    if not had_state or not _state_writable(target):
        # no state folder (never patched: nothing to lock, recover or retire, and verify should not leave a folder
        # behind), or a read-only tree (a container's read-only root file system, a mounted image): nothing may be
        # written; verify reads the ledger and the files as `check` does
        return _verify_read_only(target, recipe_id, python=python, smoke=smoke, extra_dirs=extra_dirs,
                                 require_checks=require_checks, had_state=had_state)
    with transaction.target_lock(target, timeout=lock_timeout):
        recovery = transaction.recover(target)
        notes = tuple(retired_note(r) for r in transaction.retire_stale(target))
        records = [r for r in transaction.applied_records(target) if recipe_id is None or r.recipe == recipe_id]
        if not records:
            _refuse_unrecorded_edits(target, recipe_id, extra_dirs, had_state)
            what = f"`{recipe_id}` is not" if recipe_id else "no recipe is"
            return VerifyResult(target, (), recovery, f"{what} applied to {target.root}: nothing to verify",
                                ExitCode.WOULD_CHANGE if recipe_id else ExitCode.OK, notes)
        recipes = tuple(_verify_record(target, record, python=python, smoke=smoke, extra_dirs=extra_dirs)
                        for record in records)
    code, message = _verify_verdict(recipes, require_checks)
    return VerifyResult(target, recipes, recovery, message, code, notes)


def _state_writable(target: Target) -> bool:
    """Whether this process may write the target's state folder (or create it): False on a read-only file system,
    an immutable folder, or a tree of another user."""
    state = target.state_dir
    if state.is_symlink() or (state.exists() and not state.is_dir()):
        return True  # damage: the locked path reports it
    if state.is_dir():
        lock = state / "lock"
        return os.access(state, os.W_OK | os.X_OK) and (not lock.exists() or os.access(lock, os.W_OK))
    return os.access(target.root, os.W_OK | os.X_OK)


def _verify_read_only(target: Target, recipe_id: str | None, *, python: str | None, smoke: bool,
                      extra_dirs: list[Path] | None, require_checks: bool, had_state: bool) -> VerifyResult:
    """`verify` of a target whose state folder cannot be written: no lock (no other specpatch can write there
    either), no recovery, no retirement. An interrupted transaction is reported (it can only be finished where the
    tree is writable); entries the next writable command would retire are left out, with a note."""
    from . import transaction

    report = transaction.status(target)  # reads only
    if report.pending is not None:
        j = report.pending
        raise PendingTransaction(f"an interrupted {j.kind} of {j.record.recipe} (started {j.started}, pid {j.pid}) "
                                 f"is pending, and {target.state_dir} cannot be written here: it cannot be finished "
                                 f"or undone")
    notes = [f"{target.state_dir} cannot be written here: verified without the lock, nothing recorded"] \
        if had_state else []  # no state folder: nothing was ever recorded, nothing to lock
    records = []
    for r in report.applied:
        if r.seq in report.stale:
            notes.append(f"the record of {r.recipe} (applied {r.applied_at} to {r.package} {r.release}) no longer "
                         f"describes the tree: {report.stale[r.seq]}; not verified (the next writable command "
                         f"retires it)")
        elif recipe_id is None or r.recipe == recipe_id:
            records.append(r)
    if not records:
        _refuse_unrecorded_edits(target, recipe_id, extra_dirs, had_state)
        what = f"`{recipe_id}` is not" if recipe_id else "no recipe is"
        return VerifyResult(target, (), None, f"{what} applied to {target.root}: nothing to verify",
                            ExitCode.WOULD_CHANGE if recipe_id else ExitCode.OK, tuple(notes))
    recipes = tuple(_verify_record(target, record, python=python, smoke=smoke, extra_dirs=extra_dirs)
                    for record in records)
    code, message = _verify_verdict(recipes, require_checks)
    return VerifyResult(target, recipes, None, message, code, tuple(notes))


def _verify_verdict(recipes: tuple[RecipeVerification, ...], require_checks: bool) -> tuple[ExitCode, str]:
    if any(r.drifted or r.lost for r in recipes):
        names = list(dict.fromkeys(f for r in recipes for f in r.drifted + r.lost))
        return ExitCode.DRIFT, f"patched files changed since apply: {', '.join(names)}"
    if any(c.blocking for r in recipes for c in r.checks):
        return ExitCode.VERIFY_FAILED, "a check failed"
    if any(r.unverified for r in recipes):
        skipped = [f"{r.record.recipe}: {', '.join(r.unverified)}" for r in recipes if r.unverified]
        message = (f"{len(recipes)} recipe(s): files intact and syntax passed, but NOT verified: did not run: "
                   f"{'; '.join(skipped)}")
        if require_checks:
            return ExitCode.VERIFY_FAILED, message + " (--require-checks)"
        return ExitCode.OK, message
    return ExitCode.OK, f"{len(recipes)} recipe(s) verified"


def _verify_record(target: Target, record: Any, *, python: str | None, smoke: bool,
                   extra_dirs: list[Path] | None) -> RecipeVerification:
    from . import transaction
    from . import verify as v

    states = [s for s, _ in _judged_states(target, record, transaction.applied_records(target))]
    recipe, notes, skipped = None, (), ()
    try:
        recipe = load_recipe(record.recipe, extra_dirs)
    except SpecpatchError as exc:
        where = ("; a recipe applied from its own folder is found with `--recipe-path DIR` (or "
                 "SPECPATCH_RECIPE_PATH)" if isinstance(exc, RecipeNotFound) else "")
        notes = (f"recipe `{record.recipe}` cannot be loaded ({exc.message}): only the files are checked{where}",)
        skipped = ("the recipe's imports and probes (the recipe cannot be loaded)",)
    edits_present = None
    if recipe is not None and any(s.state is not FileBytes.INTACT for s in states):
        # changed by hand: are the recipe's edits still there? re-plan on the current files (reads only)
        edits_present = _edits_present(recipe, target, record)
    # a mode changed since apply (`chmod`) is a local change as rollback sees it: drift, the edits being there
    files = tuple({"file": s.rel, "sha256": s.sha, "expected_sha256": s.record.sha_after,
                   "state": FileVerdict.DRIFT if s.state is FileBytes.INTACT and s.mode != s.record.mode
                   else _verdict(s.state, edits_present)} for s in states)
    present = [target.root / s.rel for s in states if s.current is not None]
    if recipe is None or any(f["state"] is FileVerdict.LOST for f in files):
        return RecipeVerification(record, files, tuple(v.check_syntax(present, relative_to=target.root)), notes,
                                  skipped)
    spec = recipe.select(Version(record.release) if record.release else target.version).verify
    checked = v.verify_tree(target, spec, present, recipe_folder=recipe.folder, params=record.params,
                            python=python, smoke=smoke, pristine=lambda: transaction.pristine_files(target, record))
    return RecipeVerification(record, files, checked.checks, notes + checked.notes, checked.unverified)


def _verdict(state: FileBytes, edits_present: bool | None) -> FileVerdict:
    """A recorded file judged: intact; changed with the recipe's edits still in it (drift); or without them (lost)."""
    if state is FileBytes.INTACT:
        return FileVerdict.INTACT
    if state is FileBytes.MODIFIED and edits_present:
        return FileVerdict.DRIFT
    return FileVerdict.LOST


def _edits_present(recipe: Recipe, target: Target, record: Any) -> bool:
    forced = replace(target, version=Version(record.release)) if record.release else target
    p = plan(recipe, forced, {k: str(v) for k, v in record.params.items()})
    return p.ok and not p.changed_files


# --------------------------------------------------------------------------------------------------- rollback, status


@_system_errors("rollback")
def rollback(target: Target, recipe_id: str | None = None, *, force: bool = False, lock_timeout: float = 60.0,
             extra_dirs: list[Path] | None = None):
    """Recover any interrupted transaction, then roll back `recipe_id` (default: the last applied). When the ledger
    has nothing to roll back but the tree carries a recipe's edits (the state folder was deleted), raises StateLost
    instead of calling the tree clean."""
    from . import transaction

    had_state = target.state_dir.exists()
    recovery = transaction.recover(target, timeout=lock_timeout)
    before = {r.seq: r.recipe for r in transaction.applied_records(target)} if had_state else {}
    try:
        report = transaction.rollback(target, recipe_id, force=force, timeout=lock_timeout)
    except BaseException as exc:  # an interrupt: say which way it left the tree (signals wait for a file's write)
        now = {r.seq for r in transaction.applied_records(target)} if target.state_dir.exists() else set()
        gone = [name for seq, name in before.items() if seq not in now]
        transaction.note_interrupt(exc, "the rollback was stopped part-way; the next apply, rollback or verify "
                                        "finishes it" if transaction.status(target).pending is not None else
                                   f"the rollback of {gone[0]} had finished: its files have their original bytes"
                                   if gone else "nothing was rolled back")
        raise
    if report.noop and recovery is None:
        _refuse_unrecorded_edits(target, recipe_id, extra_dirs, had_state)
    # a recipe applied again over a partial reinstall has a second entry (the files it wrote then): rolling the recipe
    # back rolls back every entry of it, newest first, so that none of its edits is left behind
    more = report
    while not more.noop and any(r.recipe == report.record.recipe for r in transaction.applied_records(target)):
        more = transaction.rollback(target, report.record.recipe, force=force, timeout=lock_timeout)
        report = replace(report, restored=[*report.restored, *more.restored], kept=[*report.kept, *more.kept],
                         removed_bytecode=[*report.removed_bytecode, *more.removed_bytecode],
                         already_original=[*report.already_original, *more.already_original],
                         message=f"{report.message}; and its earlier entry: {more.message}")
    return replace(report, recovery=recovery)


def edits_in_tree(target: Target, recipe_id: str | None = None,
                  extra_dirs: list[Path] | None = None) -> list[str]:
    """The recipes (this one, or every available one for the target's package) whose edits are all present in the
    target, read from the tree alone (a plan that changes nothing). Reads only."""
    names = [recipe_id] if recipe_id else list(available(extra_dirs))
    found = []
    for name in names:
        try:
            recipe = load_recipe(name, extra_dirs)
            if recipe.target.package != target.package:
                continue
            p = plan(recipe, target)
        except SpecpatchError:  # not loadable, not for this release: not evidence either way
            continue
        if p.already_applied:
            found.append(recipe.id)
    return found


def _refuse_unrecorded_edits(target: Target, recipe_id: str | None, extra_dirs: list[Path] | None,
                             had_state: bool) -> None:
    """Raise StateLost when the target has no specpatch history (no state folder, or a ledger that never recorded
    anything) and yet carries a recipe's edits: the state folder was deleted. A ledger with history is trusted (a
    release may ship a recipe's change itself)."""
    from . import transaction
    from .ledger import State

    if had_state:
        ledger = State.of(target).read_ledger()
        if ledger.next_seq > 1 or ledger.retired:
            return
    recorded = {r.recipe for r in transaction.applied_records(target)}
    present = [r for r in edits_in_tree(target, recipe_id, extra_dirs) if r not in recorded]
    if present:
        state = target.state_dir
        why = "there is no state folder" if not state.is_dir() else "its ledger does not record them"
        raise StateLost(f"the edits of {', '.join(present)} are in {target.root} but {why} ({state}): the "
                        f"original bytes cannot be restored from specpatch's backups")


@_system_errors("status")
def status(target: Target):
    """The ledger and any unfinished transaction (reads only: an interrupted one is shown, not recovered)."""
    from . import transaction

    return transaction.status(target)


# --------------------------------------------------------------------------------------------------- check


@dataclass(frozen=True)
class _Found:
    """What `check` reads before it judges: the plan, the ledger's entry for the recipe, the recorded files."""

    recipe: Recipe
    target: Target
    plan: Plan
    record: Any  #: the ledger entry of the recipe on this release, or None
    stale: Any  #: the ledger entry of the recipe made on another release (upgraded since), or None
    pending: Any  #: the journal of an interrupted transaction, or None
    files: tuple[dict[str, Any], ...]  #: the recorded files now (`_check_files`)
    in_progress: bool = False  #: the pending transaction is running now (its process holds the target's lock)
    other_params: str | None = None  #: the parameter values asked for differ from the applied ones, in words

    @property
    def changed_by_hand(self) -> list[str]:
        """Recorded files whose bytes, or mode (`chmod`: rollback would put the original one back), changed."""
        return [f["file"] for f in self.files if f["state"] is not FileBytes.INTACT or f["mode_changed"]]

    @property
    def changes(self) -> list[str]:
        """`changed_by_hand`, a change of mode alone shown as such."""
        return [f"{f['file']} (mode {f['applied_mode']} -> {f['mode']})"
                if f["state"] is FileBytes.INTACT and f["mode_changed"] else f["file"]
                for f in self.files if f["state"] is not FileBytes.INTACT or f["mode_changed"]]

    @property
    def reinstalled(self) -> bool:
        """Every recorded file changed since apply has its original bytes again, and the recipe applies."""
        reverted = [f["file"] for f in self.files
                    if f["state"] is FileBytes.MODIFIED and f["sha256"] == f["original_sha256"]]
        return bool(self.changed_by_hand) and reverted == self.changed_by_hand and self.would_write

    @property
    def present(self) -> bool:
        """The recipe's edits are all in the tree: the plan changes nothing."""
        return self.plan.ok and not self.plan.changed_files

    @property
    def would_write(self) -> bool:
        return self.plan.ok and bool(self.plan.changed_files)

    @property
    def n(self) -> int:
        return len(self.plan.changed_files)


@dataclass(frozen=True)
class _Rule:
    """One row of `check`'s table: when `when` holds (and no row above it did), the answer is `state`, `code`."""

    when: Callable[[_Found], bool]
    state: CheckState
    code: Callable[[_Found], ExitCode]
    say: Callable[[_Found], str]


def _pending(f: _Found) -> str:
    j = f.pending
    if f.in_progress:  # `check` takes no lock: an apply may be running its checks right now
        return (f"an {j.kind} of {j.record.recipe} is in progress (started {j.started}, pid {j.pid}): not done until "
                f"it ends; check again then")
    return (f"an interrupted {j.kind} of {j.record.recipe} (started {j.started}, pid {j.pid}) is pending; the next "
            f"`specpatch apply/rollback/verify` finishes or undoes it")


def _code(code: ExitCode) -> Callable[[_Found], ExitCode]:
    return lambda f: code


#: `check`'s answers, first match wins (see `check` for what each means).
CHECK_RULES: tuple[_Rule, ...] = (
    _Rule(lambda f: f.pending is not None and f.in_progress, CheckState.UNFINISHED, _code(ExitCode.LOCKED),
          _pending),
    _Rule(lambda f: f.pending is not None, CheckState.UNFINISHED, _code(ExitCode.DRIFT), _pending),
    _Rule(lambda f: bool(f.plan.selection.refuse), CheckState.REFUSED, _code(ExitCode.CANNOT_APPLY),
          lambda f: f.plan.selection.refuse),
    _Rule(lambda f: f.reinstalled, CheckState.WOULD_CHANGE, _code(ExitCode.WOULD_CHANGE),
          lambda f: f"{f.recipe.id} was applied, but the original bytes are back in {', '.join(f.changed_by_hand)} "
                    f"(a reinstall?): {f.n} file(s) would change"),
    _Rule(lambda f: bool(f.changed_by_hand), CheckState.DRIFT, _code(ExitCode.DRIFT),
          lambda f: f"{f.recipe.id} was applied, but files changed since: {', '.join(f.changes)} "
                    f"({'edits still present' if f.present else 'edits gone or changed'})"),
    _Rule(lambda f: f.other_params is not None, CheckState.CANNOT_APPLY, _code(ExitCode.CANNOT_APPLY),
          lambda f: f"{f.other_params}: " + _PARAMS_HINT.format(id=f.recipe.id)),
    _Rule(lambda f: f.present and f.record is None, CheckState.APPLIED, _code(ExitCode.OK),
          lambda f: f"the edits of {f.recipe.id} are present (not recorded by specpatch: applied by hand or by "
                    f"another tool)"),
    _Rule(lambda f: f.present, CheckState.APPLIED, _code(ExitCode.OK),
          lambda f: f"{f.recipe.id} is applied and intact"),
    _Rule(lambda f: not f.plan.ok, CheckState.CANNOT_APPLY,
          lambda f: ExitCode(max(e.exit_code for e in f.plan.errors)),
          lambda f: f"{f.recipe.id} "
                    f"{'was applied and its files are intact, but now' if f.record else 'is not applied and'} "
                    f"cannot apply: {f.plan.errors[0]}"),
    _Rule(lambda f: f.record is not None, CheckState.WOULD_CHANGE, _code(ExitCode.WOULD_CHANGE),
          lambda f: f"{f.recipe.id} v{f.record.recipe_version} is applied and intact, but this recipe "
                    f"(v{f.recipe.version}) would change {f.n} more file(s)"),
    _Rule(lambda f: True, CheckState.WOULD_CHANGE, _code(ExitCode.WOULD_CHANGE),
          lambda f: f"{f.recipe.id} is not applied: {f.n} file(s) would change"),
)


@_system_errors("check")
def check(recipe: Recipe, target: Target, *, params: dict[str, str] | None = None) -> CheckResult:
    """The CI gate, no writes: is `recipe` applied to `target` and intact? The answer is the first row of
    `CHECK_RULES` that holds:

    - ``unfinished`` (LOCKED): an apply or rollback is running now (its process holds the target's lock): ask
      again when it ends;
    - ``unfinished`` (DRIFT): an apply or rollback was interrupted; the next specpatch command that takes the lock
      finishes or undoes it, `check` only reports it;
    - ``refused`` (CANNOT_APPLY): the recipe refuses this release;
    - ``would_change`` (WOULD_CHANGE): an applied recipe whose changed files all have their original bytes again
      (the package was reinstalled: `apply` patches it again);
    - ``drift`` (DRIFT): applied, but a patched file was changed or removed since (or the edits are gone);
    - ``cannot_apply`` (CANNOT_APPLY): applied, with other parameter values than those asked for;
    - ``applied`` (OK): the plan changes nothing and every file the ledger recorded still has its patched bytes
      (a recipe whose edits are present without a ledger entry, applied by hand or by another tool, counts too);
    - ``cannot_apply`` (the errors' code: CANNOT_APPLY, or BAD_INPUT for a file that does not parse);
    - ``would_change`` (WOULD_CHANGE): a recipe updated since it was applied, whose recorded files are intact but
      which now has more to do; and a recipe not applied that applies cleanly.

    Without `params`, the values recorded when the recipe was applied are checked (not the defaults); given ones
    override them. A target whose release cannot be read is checked as the release recorded at apply time; a target
    now of another release than the recorded one (upgraded since) is judged by the plan alone, like an unrecorded one.
    """
    from . import transaction

    report = transaction.status(target)  # reads only: no lock, no state folder created
    records = [r for r in report.applied if r.recipe == recipe.id]
    record = records[-1] if records else None
    if record is not None:
        params = {**{k: str(v) for k, v in record.params.items() if k in recipe.params}, **(params or {})}
        if target.version is None and record.release:
            target = replace(target, version=Version(record.release), version_source="ledger")
    p = plan(recipe, target, params)
    stale = None  # the ledger speaks of another release: the package was upgraded or downgraded since (and the
    # change of release did not leave every file of the entry with its patched bytes: see transaction.stale_reason)
    if record is not None and transaction.stale_reason(target, record) is not None and record.release and \
            target.version is not None and Version(record.release) != target.version:
        stale, record = record, None
    # every entry of the recipe (a second apply over a partial reinstall has a second, of the files it wrote then)
    files = tuple({f["file"]: f for r in records for f in _check_files(target, r, report.applied)}.values()) \
        if record else ()
    found = _Found(recipe, target, p, record, stale, report.pending, files, report.in_progress,
                   _other_params(p, record))
    rule = next(r for r in CHECK_RULES if r.when(found))
    message = rule.say(found)
    if stale is not None:
        message += f" (it was applied to {target.package} {stale.release}; the target is now {target.version})"
    return CheckResult(p, rule.state, message, files, rule.code(found))


def _judged_states(target: Target, record: Any, applied: list[Any]) -> list[tuple[Any, Any]]:
    """(state, owner) of each file of `record`: its state judged against the last entry that wrote it (recipes
    stack; a recipe applied again has a second entry), and that entry."""
    from . import transaction

    last = {fr.rel: r for r in applied for fr in r.files}  # the ledger is oldest first
    out = []
    for fr in record.files:
        owner = last.get(fr.rel, record)
        if owner.seq != record.seq:
            fr = next(x for x in owner.files if x.rel == fr.rel)
        out.append((transaction.file_state(target, fr), owner))
    return out


def _check_files(target: Target, record: Any, applied: list[Any]) -> list[dict[str, Any]]:
    """The state of each file of `record`, judged against the last recipe that wrote it (recipes may stack), with
    the hash it had before any recipe wrote it."""
    original: dict[str, str] = {}
    for r in applied:
        for fr in r.files:
            original.setdefault(fr.rel, fr.sha_before)  # before the first recipe that wrote it
    out = []
    for s, owner in _judged_states(target, record, applied):
        extra = {"original_sha256": original.get(s.rel, s.record.sha_before),
                 "mode_changed": s.mode is not None and s.mode != s.record.mode, "applied_mode": f"{s.record.mode:04o}"}
        if owner.recipe != record.recipe:
            extra["last_written_by"] = owner.recipe
        out.append({**s.to_dict(), **extra})
    return out


# --------------------------------------------------------------------------------------------------- try


def check_keep(keep: Path | None) -> None:
    """Refuse a `try --keep` folder that exists and is not empty (or is a link): `try` never empties a folder."""
    if keep is not None and (keep.is_symlink() or keep.exists() and (not keep.is_dir() or any(keep.iterdir()))):
        raise UsageError(f"--keep {keep}: it exists and is not an empty folder; `try` writes a new tree there and "
                         f"never deletes what it did not make", hint="give a new or empty folder")


@_system_errors("try")
def try_recipe(recipe: Recipe, version: str = "0.5.9", *, keep: Path | None = None,
               params: dict[str, str] | None = None, python: str | None = None) -> TryResult:
    """Fetch a pristine release (cached), copy it to a scratch folder, apply, verify, clean up. With `keep`, the
    copy is made in that folder (new, or empty: a folder with anything in it is refused, never emptied) and left
    there, patched, with its ledger, so that `rollback` and `verify` work on it."""
    import shutil
    import tempfile
    import time

    from .fetch import fetch_release
    from .target import find_target

    check_keep(keep)
    start = time.perf_counter()
    release = fetch_release(recipe.target.package, version, pristine=True)  # a cached tree edited since: again
    scratch = None if keep is not None else Path(tempfile.mkdtemp(prefix=f"specpatch-try-{version}-"))
    work = keep if keep is not None else scratch / "t"
    try:
        shutil.copytree(release, work, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"),
                        dirs_exist_ok=True)
        target = find_target(work, package=recipe.target.package)
        applied = apply_recipe(recipe, target, params=params, python=python)
        verified = None
        if applied.exit_code == ExitCode.OK and applied.outcome is ApplyOutcome.CHANGED:
            # the recipe as loaded (by path, or from `--recipe-path`): its folder is where verify finds it again
            verified = verify(target, recipe.id, python=python,
                              extra_dirs=[recipe.source.parent] if recipe.source is not None else None)
        outcome, code, message = _tried(recipe, version, applied, verified)
        return TryResult(version, keep, applied, verified, time.perf_counter() - start, code, outcome, message)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _tried(recipe: Recipe, version: str, applied: ApplyResult,
           verified: VerifyResult | None) -> tuple[TryOutcome, ExitCode, str]:
    """The outcome of `try`: what the apply and the verify that followed it said, in one word and one line."""
    on = f"{recipe.target.package} {version}"
    if applied.outcome is ApplyOutcome.REFUSED:  # a refusal that names the upstream mechanism is the designed outcome
        return TryOutcome.REFUSED, ExitCode.OK, applied.plan.selection.refuse or ""
    code = applied.exit_code if applied.exit_code != ExitCode.OK else (verified.exit_code if verified else ExitCode.OK)
    if code != ExitCode.OK:
        outcome = TryOutcome(applied.outcome) if applied.outcome in set(TryOutcome) else TryOutcome.VERIFY_FAILED
        return outcome, ExitCode(code), (verified.message if verified else applied.outcome)
    skipped = list(applied.unverified) or [u for r in (verified.recipes if verified else ()) for u in r.unverified]
    if skipped:  # "verified" only for what ran
        return (TryOutcome.APPLIED_NOT_VERIFIED, code,
                f"{recipe.id} applied to {on}; NOT verified: did not run: {', '.join(skipped)}")
    kind = TryOutcome.ALIAS_VERIFIED if applied.plan.variant_kind is VariantKind.ALIAS else \
        TryOutcome.APPLIED_AND_VERIFIED
    return kind, code, f"{recipe.id} applied to {on} and verified"
