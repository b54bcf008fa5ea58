"""Recipe fixture cases: discovery and a runner shared by tests/, `specpatch test` and the pytest plugin.

A case is a folder `fixtures/<recipe-id>/<case>/` with:

- `before/`: a target tree (for example `before/sglang/srt/server_args.py`, with `__init__.py` files);
- `after/`: the expected tree after applying the recipe; absent means "must stay unchanged";
- `case.yaml` (optional): `assume_version: "0.5.9"`, `params: {name: value}`, `description: ...`;
- `expect.yaml` (optional): the expected error instead of a change: `error: AnchorNotFound` (the error class),
  optionally `step: 2`, `file: sglang/srt/server_args.py`, `message: substring`.

Each case is planned in memory on a copy of `before/`; the result must equal `after/` byte for byte; then the
plan is run again on the result and must change nothing (idempotence).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import yaml

from .engine import plan
from .errors import RecipeError
from .recipe import Recipe, load_recipe
from .target import find_target

FIXTURES_DIR = Path(__file__).resolve().parent.parent / "fixtures"


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
    updated: bool = False


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


def _read_yaml(path: Path) -> dict:
    if not path.is_file():
        return {}
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise RecipeError(f"{path} must be a mapping", )
    return data


def run_case(case: Case, recipe: Recipe, *, update: bool = False) -> CaseResult:
    """Plan the recipe on a copy of `before/`, compare with `after/` (or the expected error), then re-run."""
    conf = _read_yaml(case.folder / "case.yaml")
    expect = _read_yaml(case.folder / "expect.yaml")
    params = {k: str(v) for k, v in (conf.get("params") or {}).items()}
    with tempfile.TemporaryDirectory(prefix="specpatch-case-") as tmp:
        work = Path(tmp) / "t"
        shutil.copytree(case.folder / "before", work, symlinks=True)
        target = find_target(work, package=recipe.target.package, assume_version=conf.get("assume_version"))
        p = plan(recipe, target, params)
        if expect:
            return _check_error(case, p, expect)
        if not p.ok:
            return CaseResult(case, False, "cannot apply", [str(e) for e in p.errors])
        for f in p.changed_files:
            f.path.write_bytes(f.after)
        got = _tree(work)
        want_dir = case.folder / "after"
        want = _tree(want_dir) if want_dir.is_dir() else _tree(case.folder / "before")
        if got != want:
            if update:
                if want_dir.exists():
                    shutil.rmtree(want_dir)
                shutil.copytree(work, want_dir, symlinks=True,
                                ignore=shutil.ignore_patterns("__pycache__", ".specpatch"))
                return CaseResult(case, True, "after/ rewritten", updated=True)
            return CaseResult(case, False, "result differs from after/", _tree_diff(want, got))
        again = plan(recipe, find_target(work, package=recipe.target.package,
                                         assume_version=conf.get("assume_version")), params)
        if not again.ok or again.changed_files:
            return CaseResult(case, False, "a second run is not a no-op",
                              [str(e) for e in again.errors] + [again.diff()])
    return CaseResult(case, True, "ok")


def _check_error(case: Case, p, expect: dict) -> CaseResult:
    errors = list(p.errors)
    if p.selection.refuse:
        errors.append(RecipeError(p.selection.refuse))
    if not errors:
        return CaseResult(case, False, f"expected {expect.get('error')}, but the recipe applies", [p.diff()])
    err = errors[0]
    problems = []
    if expect.get("error") and type(err).__name__ != expect["error"]:
        problems.append(f"error {type(err).__name__} != {expect['error']}: {err}")
    if "step" in expect and err.location.step != expect["step"]:
        problems.append(f"step {err.location.step} != {expect['step']}")
    if "file" in expect and err.location.file != expect["file"]:
        problems.append(f"file {err.location.file} != {expect['file']}")
    if "message" in expect and expect["message"] not in err.message:
        problems.append(f"message {err.message!r} lacks {expect['message']!r}")
    if any(f.changed for f in p.files) and errors:
        problems.append("a failing plan has changed files")
    return CaseResult(case, not problems, "; ".join(problems) or f"fails as expected: {err.title}", [str(err)])


def _tree_diff(want: dict[str, bytes], got: dict[str, bytes]) -> list[str]:
    from .diff import unified_diff

    out = []
    for rel in sorted(set(want) | set(got)):
        if want.get(rel) != got.get(rel):
            out.append(unified_diff(want.get(rel, b""), got.get(rel, b""), rel) or f"{rel} differs")
    return out


def run_cases(recipe_id: str | None = None, *, fixtures_root: Path | None = None, update: bool = False,
              recipe_dirs: list[Path] | None = None) -> list[CaseResult]:
    """Run every case (of one recipe, or all) and return the results."""
    results = []
    recipes: dict[str, Recipe] = {}
    for case in discover(fixtures_root, recipe_id):
        if case.recipe_id not in recipes:
            recipes[case.recipe_id] = load_recipe(case.recipe_id, recipe_dirs)
        results.append(run_case(case, recipes[case.recipe_id], update=update))
    return results


def iter_case_params(fixtures_root: Path | None = None) -> Iterator[tuple[str, Case]]:
    for case in discover(fixtures_root):
        yield case.id, case
