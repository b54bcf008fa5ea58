"""Every fixture case of every shipped recipe: byte-exact after/, an idempotent second run, expected errors."""

from __future__ import annotations

import pytest

from patcher.recipe import load_recipe
from patcher.testing import discover, run_case

CASES = discover()


def test_there_are_fixture_cases():
    assert CASES, "fixtures/ has no cases"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fixture_case(case):
    result = run_case(case, load_recipe(case.recipe_id))
    assert result.passed, result.message + "\n" + "\n".join(result.details)
