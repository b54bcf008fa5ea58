"""pytest plugin: a team's own recipe folder gets its fixture cases as tests, with no test code.

Installed with specpatch (entry point `specpatch`: `-p no:specpatch` turns it off); `-p patcher.pytest_plugin`
loads it where specpatch is only on sys.path, and is harmless where it is installed. Inert until
`--specpatch-fixtures DIR` or the `specpatch_fixtures` ini option names a fixture root; `--specpatch-recipes DIR` /
`specpatch_recipes` add recipe folders (the shipped recipes and `$SPECPATCH_RECIPE_PATH` are searched too). Each case
becomes one test item `specpatch::<recipe>/<case>`, selectable with `-k`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest


#: the names this module is registered under: the entry point's, and its module name when loaded with `-p`
_NAMES = ("specpatch", __name__)


def pytest_plugin_registered(plugin, plugin_name, manager) -> None:
    """Registered under one name, block the other: pluggy refuses one module under two names, and `-p` loads the
    module before the entry point is read."""
    if plugin is sys.modules[__name__]:
        for other in _NAMES:
            if other != plugin_name and manager.get_plugin(other) is None:
                manager.set_blocked(other)


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
        from .errors import SpecpatchError
        from .recipe import load_recipe
        from .testing import CaseResult, run_case

        try:
            recipe = load_recipe(self.case.recipe_id, self.recipe_dirs)
        except SpecpatchError as exc:
            raise CaseFailed(CaseResult(self.case, False, f"cannot load recipe `{self.case.recipe_id}`",
                                        [str(exc), f"Help: {exc.hint}"])) from None
        result = run_case(self.case, recipe)
        if not result.passed:
            raise CaseFailed(result)

    def repr_failure(self, excinfo, style=None):  # type: ignore[override]
        if isinstance(excinfo.value, CaseFailed):
            r = excinfo.value.result
            lines = [f"{r.case.id}: {r.message}", f"  case: {r.case.folder}"]
            if r.description:
                lines.append(f"  {r.description}")
            return "\n".join(lines + r.details)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.case.folder, None, f"specpatch::{self.case.id}"


class CaseFailed(Exception):
    def __init__(self, result) -> None:
        super().__init__(result.message)
        self.result = result


@pytest.hookimpl(tryfirst=True)  # before `-k` / `-m` deselection, so that they apply to the cases too
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
