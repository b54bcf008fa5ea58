"""Recipe fixture cases: discovery and a runner shared by tests/, `specpatch test` and the pytest plugin.

A case is a folder `fixtures/<recipe-id>/<case>/` with:

- `before/`: a target tree (for example `before/sglang/srt/server_args.py`, with `__init__.py` files);
- `after/`: the expected tree after applying the recipe; absent means "must stay unchanged";
- `case.yaml` (optional): `assume_version: "0.5.9"`, `params: {name: value}`, `description: ...`, `variant: NAME`
  (that variant's steps, whichever releases it admits: one that no published release selects);
- `expect.yaml` (optional): the expected error instead of a change: `error: AnchorNotFound` (the error class),
  optionally `step: 2`, `file: sglang/srt/server_args.py`, `message: substring`.

Each case is planned in memory on a copy of `before/`; the result must equal `after/` byte for byte; then the
plan is run again on the result and must change nothing (idempotence). `update=True` rewrites `after/` from the
result (for review in `git diff`); a case whose result equals `before/` needs no `after/`.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Iterator
from pathlib import Path

import yaml

from .engine import plan
from .errors import Location, RecipeError, SpecpatchError, VersionUnsupported
from .recipe import Recipe, load_recipe
from .results import ExitCode
from .target import find_target


def _shipped_fixtures() -> Path:
    here = Path(__file__).resolve().parent
    installed = here / "fixtures"  # a wheel installs the top-level fixtures/ folder as patcher/fixtures
    return installed if installed.is_dir() else here.parent / "fixtures"


FIXTURES_DIR = _shipped_fixtures()
CASE_KEYS = {"description", "assume_version", "params", "variant"}  #: what case.yaml may say
EXPECT_KEYS = {"error", "step", "file", "message"}  #: what expect.yaml may say


@dataclass(frozen=True)
class Case:
    recipe_id: str
    name: str
    folder: Path

    @property
    def id(self) -> str:
        return f"{self.recipe_id}/{self.name}"


@dataclass
class CaseResult:
    case: Case
    passed: bool
    message: str = ""
    details: list[str] = field(default_factory=list)
    updated: bool = False  #: `after/` was rewritten (update mode)
    description: str = ""  #: from case.yaml
    #: the case could not be run as written (its recipe does not load, a bad case.yaml/expect.yaml): bad input,
    #: not a recipe that does something else than its fixtures say
    bad_input: bool = False


def discover(fixtures_root: Path | None = None, recipe_id: str | None = None) -> list[Case]:
    """Every case folder (one with `before/`) under `fixtures_root`, optionally of one recipe."""
    root = fixtures_root or FIXTURES_DIR
    cases = []
    if not root.is_dir():
        return cases
    for recipe_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        if recipe_id and recipe_dir.name != recipe_id:
            continue
        for case_dir in sorted(p for p in recipe_dir.iterdir() if (p / "before").is_dir()):
            cases.append(Case(recipe_dir.name, case_dir.name, case_dir))
    return cases


def _tree(folder: Path) -> dict[str, bytes]:
    if not folder.is_dir():
        return {}
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts and ".specpatch" not in p.parts}


def _read_yaml(path: Path, allowed: set[str]) -> dict:
    if not path.is_file():
        return {}
    where = Location(file=str(path))
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise RecipeError(f"not valid YAML: {exc}", location=where) from None
    except (UnicodeDecodeError, OSError) as exc:
        raise RecipeError(f"cannot read {path.name}: {exc}", location=where) from None
    if not isinstance(data, dict):
        raise RecipeError(f"{path.name} must be a mapping", location=where)
    unknown = set(data) - allowed
    if unknown:
        raise RecipeError(f"unknown key(s) {', '.join(sorted(map(str, unknown)))} in {path.name}; it may have: "
                          f"{', '.join(sorted(allowed))}", location=where)
    return data


def run_case(case: Case, recipe: Recipe, *, update: bool = False) -> CaseResult:
    """Plan the recipe on a copy of `before/`, compare with `after/` (or the expected error), then re-run."""
    try:
        conf = _read_yaml(case.folder / "case.yaml", CASE_KEYS)
        expect = _read_yaml(case.folder / "expect.yaml", EXPECT_KEYS)
    except RecipeError as exc:
        return CaseResult(case, False, "bad case file", [str(exc)], bad_input=True)
    description = str(conf.get("description") or "").strip()
    if expect and (case.folder / "after").exists():
        return CaseResult(case, False, "a case has either expect.yaml (an error) or after/ (a change), not both",
                          description=description, bad_input=True)
    if not isinstance(conf.get("params") or {}, dict):
        return CaseResult(case, False, "bad case file", [f"{case.folder / 'case.yaml'}: `params` must be a mapping "
                                                          "of parameter names to values"],
                          description=description, bad_input=True)
    params = {str(k): str(v) for k, v in (conf.get("params") or {}).items()}
    version = str(conf["assume_version"]) if conf.get("assume_version") is not None else None
    variant = str(conf["variant"]) if conf.get("variant") is not None else None
    with tempfile.TemporaryDirectory(prefix="specpatch-case-") as tmp:
        work = Path(tmp) / "t"
        shutil.copytree(case.folder / "before", work, symlinks=True)
        try:
            p = plan(recipe, find_target(work, package=recipe.target.package, assume_version=version), params,
                     variant=variant)
        except SpecpatchError as exc:  # refused before planning: release out of range, bad parameter, no package
            if expect:
                return _check_error(case, [exc], expect, description=description)
            return CaseResult(case, False, f"cannot plan: {exc.title}", [str(exc)], description=description,
                              bad_input=exc.exit_code == ExitCode.BAD_INPUT)  # the case's own values, or its tree
        if expect:
            errors = list(p.errors)
            if p.selection.refuse:
                errors.insert(0, VersionUnsupported(p.selection.refuse, location=Location(recipe=recipe.id)))
            return _check_error(case, errors, expect, plan_diff=p.diff(), description=description)
        if p.selection.refuse:
            return CaseResult(case, False, "the recipe refuses this release", [p.selection.refuse],
                              description=description)
        if not p.ok:
            return CaseResult(case, False, "cannot apply", [str(e) for e in p.errors], description=description)
        for f in p.changed_files:
            f.path.write_bytes(f.after)
        got = _tree(work)
        want_dir = case.folder / "after"
        want = _tree(want_dir) if want_dir.is_dir() else _tree(case.folder / "before")
        updated = False
        if got != want:
            if not update:
                return CaseResult(case, False, "result differs from " + ("after/" if want_dir.is_dir() else
                                  "before/ (no after/: the case must stay unchanged)"), _tree_diff(want, got),
                                  description=description)
            problem = _replace_after(work, want_dir)
            if problem:
                return CaseResult(case, False, "after/ not rewritten", [problem], description=description,
                                  bad_input=True)
            updated = True
        again = plan(recipe, find_target(work, package=recipe.target.package, assume_version=version), params,
                     variant=variant)
        if not again.ok or again.changed_files:
            return CaseResult(case, False, "a second run is not a no-op",
                              [str(e) for e in again.errors] + [again.diff()], updated=updated,
                              description=description)
    return CaseResult(case, True, "after/ rewritten" if updated else "ok", updated=updated, description=description)


def _replace_after(work: Path, want_dir: Path) -> str | None:
    """Write the result as the case's new `after/`: copied beside it, then swapped in, so that a failed copy (a full
    disk) leaves the old one whole. A linked `after/` (or a file there) is refused: rewriting it would write where
    the link leads, outside the case. The problem, or None."""
    if want_dir.is_symlink() or (want_dir.exists() and not want_dir.is_dir()):
        return (f"{want_dir} is {'a link' if want_dir.is_symlink() else 'not a folder'}: --update writes a folder "
                "of its own there; replace it with a folder, or update the case it leads to")
    fresh = want_dir.with_name(want_dir.name + ".specpatch-new")
    old = want_dir.with_name(want_dir.name + ".specpatch-old")
    for leftover in (fresh, old):
        if leftover.is_symlink() or leftover.is_file():
            leftover.unlink()
        elif leftover.exists():
            shutil.rmtree(leftover)
    try:
        shutil.copytree(work, fresh, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", ".specpatch"))
    except OSError as exc:
        shutil.rmtree(fresh, ignore_errors=True)
        return f"cannot write {fresh}: {exc}; after/ is unchanged"
    if want_dir.exists():
        want_dir.rename(old)
    fresh.rename(want_dir)
    shutil.rmtree(old, ignore_errors=True)
    return None


def _check_error(case: Case, errors: list[SpecpatchError], expect: dict, *, plan_diff: str = "",
                 description: str = "") -> CaseResult:
    """The first error must match what expect.yaml names (a failing plan is never written: nothing to compare)."""
    if not errors:
        return CaseResult(case, False, f"expected {expect.get('error') or 'an error'}, but the recipe applies",
                          [plan_diff] if plan_diff else [], description=description)
    err = errors[0]
    problems = []
    if expect.get("error") and type(err).__name__ != expect["error"]:
        problems.append(f"error {type(err).__name__} != {expect['error']}: {err}")
    if "step" in expect and err.location.step != expect["step"]:
        problems.append(f"step {err.location.step} != {expect['step']}")
    if "file" in expect and err.location.file != expect["file"]:
        problems.append(f"file {err.location.file} != {expect['file']}")
    if "message" in expect and str(expect["message"]) not in err.message:
        problems.append(f"message {err.message!r} lacks {expect['message']!r}")
    return CaseResult(case, not problems, "; ".join(problems) or f"fails as expected: {err.title}", [str(err)],
                      description=description)


def _tree_diff(want: dict[str, bytes], got: dict[str, bytes]) -> list[str]:
    from .diff import unified_diff

    out = []
    for rel in sorted(set(want) | set(got)):
        if want.get(rel) != got.get(rel):
            out.append(unified_diff(want.get(rel, b""), got.get(rel, b""), rel) or f"{rel} differs")
    return out


def iter_results(recipe_id: str | None = None, *, fixtures_root: Path | None = None, update: bool = False,
                 recipe_dirs: list[Path] | None = None) -> Iterator[CaseResult]:
    """Run every case (of one recipe, or all), yielding each result as soon as it is known."""
    recipes: dict[str, Recipe | SpecpatchError] = {}
    for case in discover(fixtures_root, recipe_id):
        if case.recipe_id not in recipes:
            try:
                recipes[case.recipe_id] = load_recipe(case.recipe_id, recipe_dirs)
            except SpecpatchError as exc:  # every case of that recipe fails, and says why
                recipes[case.recipe_id] = exc
        recipe = recipes[case.recipe_id]
        if isinstance(recipe, SpecpatchError):
            yield CaseResult(case, False, f"cannot load recipe `{case.recipe_id}`: {recipe.title}", [str(recipe)],
                             bad_input=True)
            continue
        yield run_case(case, recipe, update=update)

