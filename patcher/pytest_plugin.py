"""pytest plugin: a team's own recipe folder gets its fixture cases as tests, with no test code.

Enabled by the `specpatch_fixtures` ini option or `--specpatch-fixtures DIR` (and `--specpatch-recipes DIR` /
`specpatch_recipes` for recipes outside the shipped ones). Each case becomes one test item `specpatch::<recipe>/<case>`.
"""

from __future__ import annotations

from pathlib import Path

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("specpatch")
    group.addoption("--specpatch-fixtures", action="append", default=[], help="fixture root(s) to run as tests")
    group.addoption("--specpatch-recipes", action="append", default=[], help="extra recipe folder(s)")
    parser.addini("specpatch_fixtures", "fixture roots to run as tests", type="paths", default=[])
    parser.addini("specpatch_recipes", "extra recipe folders", type="paths", default=[])


class CaseItem(pytest.Item):
    def __init__(self, *, case, recipe_dirs, **kwargs) -> None:
        super().__init__(**kwargs)
        self.case = case
        self.recipe_dirs = recipe_dirs

    def runtest(self) -> None:
        from .recipe import load_recipe
        from .testing import run_case

        result = run_case(self.case, load_recipe(self.case.recipe_id, self.recipe_dirs))
        if not result.passed:
            raise CaseFailed(result)

    def repr_failure(self, excinfo, style=None):  # type: ignore[override]
        if isinstance(excinfo.value, CaseFailed):
            r = excinfo.value.result
            return f"{r.case.id}: {r.message}\n" + "\n".join(r.details)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.case.folder, None, f"specpatch::{self.case.id}"


class CaseFailed(Exception):
    def __init__(self, result) -> None:
        super().__init__(result.message)
        self.result = result


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    roots = [Path(p) for p in config.getoption("specpatch_fixtures")] + list(config.getini("specpatch_fixtures"))
    if not roots:
        return
    from .testing import discover

    recipe_dirs = [Path(p) for p in config.getoption("specpatch_recipes")] + list(config.getini("specpatch_recipes"))
    for root in roots:
        for case in discover(root):
            items.append(CaseItem.from_parent(session, name=f"specpatch::{case.id}", case=case,
                                              recipe_dirs=recipe_dirs))
