"""The use cases behind the CLI: apply, verify, rollback, status, check, try. Importable without the CLI."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .engine import Plan, plan
from .errors import ExitCode, SpecpatchError, VersionUnsupported
from .recipe import Recipe, available, load_recipe
from .target import Target


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


def apply_recipe(recipe: Recipe, target: Target, *, params: dict[str, str] | None = None, dry_run: bool = False,
                 smoke: bool = True, python: str | None = None, lock_timeout: float = 60.0) -> ApplyResult:
    """Plan, write transactionally, verify; roll back if a check fails. A dry run only plans."""
    if dry_run:
        p = plan(recipe, target, params)
        return _planned_result(p, dry_run=True)
    from . import transaction

    with transaction.target_lock(target, timeout=lock_timeout) as lock:
        recovery = transaction.recover(target)
        p = plan(recipe, target, params)
        result = _planned_result(p, dry_run=False)
        result.recovery = recovery
        if result.exit_code != ExitCode.OK or not p.changed_files:
            return result
        result.record = transaction.commit(p, lock)
        result.outcome = "changed"
        result.checks = _post_apply_checks(p, python=python, smoke=smoke, notes=result.notes)
        if any(c.status in ("failed", "timeout") for c in result.checks):
            transaction.rollback(target, recipe.id, force=True, lock=lock)
            result.exit_code, result.outcome = ExitCode.VERIFY_FAILED, "verify_failed"
            result.notes.append("a check failed: every file was restored to its original bytes")
    return result


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

    checks = list(v.check_syntax([f.path for f in p.changed_files]))
    spec = p.selection.verify
    if not smoke:
        notes.append("--no-smoke: the import smoke test and probes were skipped")
        return checks
    py = python or sys.executable
    can, why = v.can_import_target(py, p.target, spec.stubs)
    if not can:
        notes.append(f"this environment cannot import {p.target.package} ({why}): smoke test and probes skipped; "
                     f"run `specpatch verify --python PY` where it can")
        return checks
    pristine = {f.rel: f.before for f in p.changed_files}
    checks += v.smoke_import(p.target, spec, python=py, pristine=pristine)
    checks += v.run_probes(p.target, spec, p.recipe.folder, python=py, params=p.params)
    return checks
