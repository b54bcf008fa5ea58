"""The use cases behind the CLI: apply, verify, rollback, status, check, try. Importable without the CLI."""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from packaging.version import Version

from .engine import Plan, plan
from .errors import ExitCode, SpecpatchError, StateLost, VersionUnsupported, os_failure
from .recipe import Recipe, available, load_recipe
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
                raise os_failure(exc, doing) from exc

        return call

    return wrap


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


@dataclass
class ApplyResult:
    """Everything an apply did, for rendering and JSON."""

    plan: Plan
    dry_run: bool
    exit_code: ExitCode = ExitCode.OK
    outcome: str = ""  #: changed | already_applied | would_change | cannot_apply | refused | verify_failed
    recovery: Any = None  #: what the start-of-command recovery found, if anything
    record: Any = None  #: the ledger record written by the commit
    checks: list[Any] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: SpecpatchError | None = None
    unverified: list[str] = field(default_factory=list)  #: checks of the recipe that did not run (`import m`, ...)

    def to_dict(self) -> dict[str, Any]:
        p = self.plan
        return {
            "ok": self.exit_code == ExitCode.OK, "exit_code": int(self.exit_code), "outcome": self.outcome,
            "dry_run": self.dry_run, "recipe": p.recipe.id, "recipe_version": p.recipe.version,
            "variant": p.selection.variant, "variant_reason": p.selection.reason,
            "target": {"root": str(p.target.root), "layout": p.target.layout, "package": p.target.package,
                       "version": str(p.target.version) if p.target.version else None,
                       "version_source": p.target.version_source},
            "params": p.params,
            "unverified": self.unverified,
            "steps": [s.to_dict() for s in p.steps],
            "files": [{"file": f.rel, "changed": f.changed} for f in p.files],
            "errors": [e.to_dict() for e in p.errors] + ([self.error.to_dict()] if self.error else []),
            "checks": [c.to_dict() for c in self.checks],
            "recovery": self.recovery.to_dict() if hasattr(self.recovery, "to_dict") else self.recovery,
            "notes": self.notes,
            "diff": p.diff(),
        }


def _refusal(p: Plan) -> VersionUnsupported:
    return VersionUnsupported(p.selection.refuse or "", hint="the message above gives the equivalent configuration")


def unverified(spec: Any, checks: list[Any]) -> list[str]:
    """The recipe's imports and probes that did not run to a verdict (skipped, environment problem, never
    started), as `import M` / `probe P`: what "verified" may not claim."""
    ran = {(c.kind, c.name) for c in checks if c.status in ("passed", "failed", "timeout")}
    wanted = [("import", m) for m in dict.fromkeys(spec.imports)] + [("probe", p.name or p.path) for p in spec.probes]
    return [f"{kind} {name}" for kind, name in wanted if (kind, name) not in ran]


@_system_errors("apply")
def apply_recipe(recipe: Recipe, target: Target, *, params: dict[str, str] | None = None, dry_run: bool = False,
                 smoke: bool = True, python: str | None = None, lock_timeout: float = 60.0,
                 require_checks: bool = False) -> ApplyResult:
    """Plan, write transactionally, verify; roll back if a check fails. A dry run only plans. With
    `require_checks`, an import smoke test or probe that could not run counts as a failed check (for CI)."""
    if dry_run:
        p = plan(recipe, target, params)
        return _planned_result(p, dry_run=True)
    from . import transaction

    with transaction.target_lock(target, timeout=lock_timeout) as lock:
        recovery = transaction.recover(target)
        retired = transaction.retire_stale(target)
        p = plan(recipe, target, params)
        result = _planned_result(p, dry_run=False)
        result.recovery = recovery
        result.notes += [retired_note(r) for r in retired]
        if result.exit_code != ExitCode.OK or not p.changed_files:
            return result
        result.record = transaction.commit(p, lock)
        result.outcome = "changed"
        try:
            result.checks = _post_apply_checks(p, python=python, smoke=smoke, notes=result.notes)
        except BaseException as exc:  # an interrupt (or a failure) before the checks said yes: undo the apply
            with transaction.signals_deferred():
                transaction.rollback(target, recipe.id, force=True)
            transaction.note_interrupt(exc, f"{recipe.id} was applied, then rolled back before its checks had "
                                             f"finished: every file has its original bytes")
            raise
        result.unverified = unverified(p.selection.verify, result.checks)
        failed = any(c.status in ("failed", "timeout") for c in result.checks)
        if failed or (require_checks and result.unverified):
            transaction.rollback(target, recipe.id, force=True)
            result.exit_code, result.outcome = ExitCode.VERIFY_FAILED, "verify_failed"
            if not failed:
                result.notes.append(f"--require-checks: {', '.join(result.unverified)} could not run")
            result.notes.append("a check failed: every file was restored to its original bytes")
        else:
            result.notes += _after_apply_notes(p)
    return result


def _after_apply_notes(p: Plan) -> list[str]:
    """What a user needs after a write: how to undo it, and what pip will think of the patched files."""
    t = p.target
    where = f"--target {t.root}"
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


def _planned_result(p: Plan, *, dry_run: bool) -> ApplyResult:
    result = ApplyResult(p, dry_run)
    if p.selection.refuse:
        result.exit_code, result.outcome, result.error = ExitCode.CANNOT_APPLY, "refused", _refusal(p)
    elif p.errors:
        result.exit_code, result.outcome = max(e.exit_code for e in p.errors), "cannot_apply"
    elif not p.changed_files:
        result.outcome = "already_applied"
    else:
        result.outcome = "would_change" if dry_run else "planned"
    return result


def _post_apply_checks(p: Plan, *, python: str | None, smoke: bool, notes: list[str]) -> list[Any]:
    from . import verify as v

    checks = list(v.check_syntax([f.path for f in p.changed_files], relative_to=p.target.root))
    spec = p.selection.verify
    if not smoke:
        notes.append("--no-smoke: the import smoke test and probes were skipped")
        return checks
    py = python or sys.executable
    can, why = v.can_import_target(py, p.target, spec.stubs, requires=spec.requires)
    if not can:
        notes.append(f"this environment cannot import {p.target.package} ({why}): smoke test and probes skipped; "
                     f"run `specpatch verify --python PY` where it can")
        return checks
    pristine = {f.rel: f.before for f in p.changed_files}
    checks += v.smoke_import(p.target, spec, python=py, pristine=pristine, recipe_folder=p.recipe.folder)
    checks += v.run_probes(p.target, spec, p.recipe.folder, python=py, params=p.params)
    return checks


# --------------------------------------------------------------------------------------------------- verify


@dataclass
class RecipeVerification:
    """The verification of one applied recipe."""

    record: Any  #: the ledger's AppliedRecord
    files: list[dict[str, Any]] = field(default_factory=list)  #: per file: state intact | drift | lost
    checks: list[Any] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unverified: list[str] = field(default_factory=list)  #: the recipe's imports and probes that did not run

    @property
    def drifted(self) -> list[str]:
        return [f["file"] for f in self.files if f["state"] == "drift"]

    @property
    def lost(self) -> list[str]:
        return [f["file"] for f in self.files if f["state"] == "lost"]

    def to_dict(self) -> dict[str, Any]:
        return {"recipe": self.record.recipe, "recipe_version": self.record.recipe_version,
                "variant": self.record.variant, "release": self.record.release, "params": self.record.params,
                "files": self.files, "checks": [c.to_dict() for c in self.checks], "notes": self.notes,
                "unverified": self.unverified}


@dataclass
class VerifyResult:
    target: Target
    recipes: list[RecipeVerification] = field(default_factory=list)
    recovery: Any = None
    message: str = ""
    exit_code: ExitCode = ExitCode.OK
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.exit_code == ExitCode.OK, "exit_code": int(self.exit_code), "message": self.message,
                "target": str(self.target.root), "release": str(self.target.version) if self.target.version else None,
                "release_source": self.target.version_source, "recipes": [r.to_dict() for r in self.recipes],
                "recovery": self.recovery.to_dict() if self.recovery else None, "notes": self.notes}


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

    result = VerifyResult(target)
    had_state = target.state_dir.exists()  # before the lock creates the folder
    with transaction.target_lock(target, timeout=lock_timeout):
        result.recovery = transaction.recover(target)
        result.notes += [retired_note(r) for r in transaction.retire_stale(target)]
        records = [r for r in transaction.applied_records(target) if recipe_id is None or r.recipe == recipe_id]
        if not records:
            _refuse_unrecorded_edits(target, recipe_id, extra_dirs, had_state)
            what = f"`{recipe_id}` is not" if recipe_id else "no recipe is"
            result.message = f"{what} applied to {target.root}: nothing to verify"
            result.exit_code = ExitCode.WOULD_CHANGE if recipe_id else ExitCode.OK
            return result
        for record in records:
            result.recipes.append(_verify_record(target, record, python=python, smoke=smoke, extra_dirs=extra_dirs))
    if any(r.drifted or r.lost for r in result.recipes):
        result.exit_code = ExitCode.DRIFT
        names = [f for r in result.recipes for f in r.drifted + r.lost]
        result.message = f"patched files changed since apply: {', '.join(names)}"
    elif any(c.blocking for r in result.recipes for c in r.checks):
        result.exit_code = ExitCode.VERIFY_FAILED
        result.message = "a check failed"
    elif any(r.unverified for r in result.recipes):
        skipped = [f"{r.record.recipe}: {', '.join(r.unverified)}" for r in result.recipes if r.unverified]
        result.message = (f"{len(result.recipes)} recipe(s): files intact and syntax passed, but NOT verified: "
                          f"did not run: {'; '.join(skipped)}")
        if require_checks:
            result.exit_code = ExitCode.VERIFY_FAILED
            result.message += " (--require-checks)"
    else:
        result.message = f"{len(result.recipes)} recipe(s) verified"
    return result


def _verify_record(target: Target, record: Any, *, python: str | None, smoke: bool,
                   extra_dirs: list[Path] | None) -> RecipeVerification:
    from . import transaction
    from . import verify as v

    out = RecipeVerification(record)
    states = transaction.file_states(target, record)
    recipe = None
    try:
        recipe = load_recipe(record.recipe, extra_dirs)
    except SpecpatchError as exc:
        out.notes.append(f"recipe `{record.recipe}` cannot be loaded ({exc.message}): only the files are checked")
        out.unverified = ["the recipe's imports and probes (the recipe cannot be loaded)"]
    edits_present = None
    if recipe is not None and any(s.state != "intact" for s in states):
        # changed by hand: are the recipe's edits still there? re-plan on the current files (reads only)
        edits_present = _edits_present(recipe, target, record)
    for s in states:
        if s.state == "intact":
            state = "intact"
        elif s.state == "missing":
            state = "lost"
        else:
            state = "drift" if edits_present else "lost"
        out.files.append({"file": s.rel, "state": state, "sha256": s.sha, "expected_sha256": s.record.sha_after})
    present = [target.root / s.rel for s in states if s.current is not None]
    out.checks += v.check_syntax(present, relative_to=target.root)
    if recipe is None or out.lost:
        return out
    selection = recipe.select(Version(record.release) if record.release else target.version)
    spec = selection.verify
    out.unverified = unverified(spec, [])  # until they run
    if not smoke:
        out.notes.append("--no-smoke: the import smoke test and probes were skipped")
        return out
    py = python or sys.executable
    can, why = v.can_import_target(py, target, spec.stubs, requires=spec.requires)
    if not can:
        out.notes.append(f"this environment cannot import {target.package} ({why}): smoke test and probes skipped")
        out.checks += [v.Check("import", m, "skipped", why) for m in spec.imports]
        out.checks += [v.Check("probe", p.name or p.path, "skipped", why) for p in spec.probes]
        return out
    pristine = transaction.pristine_files(target, record)
    out.checks += v.smoke_import(target, spec, python=py, pristine=pristine, recipe_folder=recipe.folder)
    out.checks += v.run_probes(target, spec, recipe.folder, python=py, params=record.params)
    out.unverified = unverified(spec, out.checks)
    return out


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
    report = transaction.rollback(target, recipe_id, force=force, timeout=lock_timeout)
    if report.noop and recovery is None:
        _refuse_unrecorded_edits(target, recipe_id, extra_dirs, had_state)
    report.recovery = recovery
    return report


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
def status(target: Target, *, lock_timeout: float = 60.0):
    """The ledger and any unfinished transaction (reads only: an interrupted one is shown, not recovered)."""
    from . import transaction

    return transaction.status(target)


# --------------------------------------------------------------------------------------------------- check, try


@dataclass
class CheckResult:
    """`check`: is the recipe applied and intact? No writes."""

    plan: Plan
    state: str  #: applied | would_change | drift | cannot_apply | refused | unfinished
    message: str
    files: list[dict[str, Any]] = field(default_factory=list)
    exit_code: ExitCode = ExitCode.OK

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.exit_code == ExitCode.OK, "exit_code": int(self.exit_code), "state": self.state,
                "message": self.message, "recipe": self.plan.recipe.id, "variant": self.plan.selection.variant,
                "target": str(self.plan.target.root), "files": self.files,
                "steps": [s.to_dict() for s in self.plan.steps],
                "errors": [e.to_dict() for e in self.plan.errors], "diff": self.plan.diff()}


@_system_errors("check")
def check(recipe: Recipe, target: Target, *, params: dict[str, str] | None = None) -> CheckResult:
    """The CI gate, no writes: is `recipe` applied to `target` and intact?

    - ``applied`` (OK): the plan changes nothing and every file the ledger recorded still has its patched bytes
      (a recipe whose edits are present without a ledger entry, applied by hand or by another tool, counts too);
    - ``would_change`` (WOULD_CHANGE): not applied, and it applies cleanly; also a recipe updated since it was
      applied, whose recorded files are intact but which now has more to do, and an applied recipe whose changed
      files all have their original bytes again (the package was reinstalled: `apply` patches it again);
    - ``drift`` (DRIFT): applied, but a patched file was changed or removed since (or the edits are gone);
    - ``cannot_apply`` (the errors' code: CANNOT_APPLY, or BAD_INPUT for a file that does not parse) and
      ``refused`` (CANNOT_APPLY): not applied, and it cannot be;
    - ``unfinished`` (DRIFT): an apply or rollback was interrupted; the next specpatch command that takes the lock
      finishes or undoes it, `check` only reports it.

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
    stale = None  # the ledger speaks of another release: the package was upgraded or downgraded since
    if record is not None and record.release and target.version is not None and \
            Version(record.release) != target.version:
        stale, record = record, None
    files = _check_files(target, record, report.applied) if record else []
    changed_by_hand = [f["file"] for f in files if f["state"] != "intact"]

    def result(state: str, message: str, code: ExitCode) -> CheckResult:
        if stale is not None:
            message += f" (it was applied to {target.package} {stale.release}; the target is now {target.version})"
        return CheckResult(p, state, message, files, code)

    if report.pending is not None:
        j = report.pending
        return result("unfinished", f"an interrupted {j.kind} of {j.record.recipe} (started {j.started}, pid "
                      f"{j.pid}) is pending; the next `specpatch apply/rollback/verify` finishes or undoes it",
                      ExitCode.DRIFT)
    if p.selection.refuse:
        return result("refused", p.selection.refuse, ExitCode.CANNOT_APPLY)
    reverted = [f["file"] for f in files if f["state"] == "modified" and f["sha256"] == f["original_sha256"]]
    if changed_by_hand and reverted == changed_by_hand and p.ok and p.changed_files:
        return result("would_change", f"{recipe.id} was applied, but the original bytes are back in "
                      f"{', '.join(reverted)} (a reinstall?): {len(p.changed_files)} file(s) would change",
                      ExitCode.WOULD_CHANGE)
    if changed_by_hand:
        how = "edits still present" if p.ok and not p.changed_files else "edits gone or changed"
        return result("drift", f"{recipe.id} was applied, but files changed since: {', '.join(changed_by_hand)} "
                      f"({how})", ExitCode.DRIFT)
    if p.ok and not p.changed_files:
        if record is None:
            return result("applied", f"the edits of {recipe.id} are present (not recorded by specpatch: applied "
                          f"by hand or by another tool)", ExitCode.OK)
        return result("applied", f"{recipe.id} is applied and intact", ExitCode.OK)
    if not p.ok:
        code = max(e.exit_code for e in p.errors)
        first = p.errors[0]
        what = "was applied and its files are intact, but now" if record else "is not applied and"
        return result("cannot_apply", f"{recipe.id} {what} cannot apply: {first}", ExitCode(code))
    if record is not None:
        return result("would_change", f"{recipe.id} v{record.recipe_version} is applied and intact, but this "
                      f"recipe (v{recipe.version}) would change {len(p.changed_files)} more file(s)",
                      ExitCode.WOULD_CHANGE)
    return result("would_change", f"{recipe.id} is not applied: {len(p.changed_files)} file(s) would change",
                  ExitCode.WOULD_CHANGE)


def _check_files(target: Target, record: Any, applied: list[Any]) -> list[dict[str, Any]]:
    """The state of each file of `record`, judged against the last recipe that wrote it (recipes may stack), with
    the hash it had before any recipe wrote it."""
    from . import transaction

    last = {fr.rel: r for r in applied for fr in r.files}  # the ledger is oldest first
    original: dict[str, str] = {}
    for r in applied:
        for fr in r.files:
            original.setdefault(fr.rel, fr.sha_before)  # before the first recipe that wrote it
    out = []
    for s in transaction.file_states(target, record):
        owner = last.get(s.rel, record)
        if owner is not record:
            s = next(x for x in transaction.file_states(target, owner) if x.rel == s.rel)
        extra = {"original_sha256": original.get(s.rel, s.record.sha_before)}
        if owner is not record:
            extra["last_written_by"] = owner.recipe
        out.append({**s.to_dict(), **extra})
    return out


@dataclass
class TryResult:
    version: str
    folder: Path | None  #: the kept tree, if --keep
    apply: ApplyResult | None
    verify: VerifyResult | None
    seconds: float
    exit_code: ExitCode
    #: applied_and_verified | alias_verified | applied_not_verified | refused | cannot_apply | verify_failed
    outcome: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.exit_code == ExitCode.OK, "exit_code": int(self.exit_code), "version": self.version,
                "outcome": self.outcome, "message": self.message, "seconds": round(self.seconds, 2),
                "kept": str(self.folder) if self.folder else None,
                "apply": self.apply.to_dict() if self.apply else None,
                "verify": self.verify.to_dict() if self.verify else None}


@_system_errors("try")
def try_recipe(recipe: Recipe, version: str = "0.5.9", *, keep: Path | None = None,
               params: dict[str, str] | None = None, python: str | None = None) -> TryResult:
    """Fetch a pristine release (cached), copy it to a scratch folder, apply, verify, clean up."""
    import shutil
    import tempfile
    import time

    from .fetch import fetch_release
    from .target import find_target

    start = time.perf_counter()
    release = fetch_release(recipe.target.package, version)
    scratch = Path(tempfile.mkdtemp(prefix=f"specpatch-try-{version}-"))
    try:
        work = scratch / "t"
        shutil.copytree(release, work, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        target = find_target(work, package=recipe.target.package)
        applied = apply_recipe(recipe, target, params=params, python=python)
        verified = None
        if applied.exit_code == ExitCode.OK and applied.outcome == "changed":
            verified = verify(target, recipe.id, python=python)
        code = applied.exit_code if applied.exit_code != ExitCode.OK else (verified.exit_code if verified else 0)
        variant = applied.plan.selection.variant
        if applied.outcome == "refused":
            outcome, message = "refused", applied.plan.selection.refuse or ""
            code = ExitCode.OK  # a refusal that names the upstream mechanism is the designed outcome
        elif code == ExitCode.OK and (applied.unverified or (verified and any(r.unverified
                                                                            for r in verified.recipes))):
            skipped = applied.unverified or [u for r in verified.recipes for u in r.unverified]
            outcome = "applied_not_verified"  # "verified" only for what ran
            message = (f"{recipe.id} applied to {recipe.target.package} {version}; NOT verified: did not run: "
                       f"{', '.join(skipped)}")
        elif code == ExitCode.OK:
            outcome = "alias_verified" if variant and "alias" in variant else "applied_and_verified"
            message = f"{recipe.id} applied to {recipe.target.package} {version} and verified"
        else:
            outcome, message = applied.outcome or "verify_failed", (verified.message if verified else applied.outcome)
        kept = None
        if keep is not None:
            if keep.exists():
                shutil.rmtree(keep)
            shutil.copytree(work, keep, symlinks=True)
            kept = keep
        return TryResult(version, kept, applied, verified, time.perf_counter() - start, ExitCode(code), outcome,
                         message)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
