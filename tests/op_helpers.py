"""Shared helpers for the operation unit tests, in the style of libcst's `assertCodemod`.

`check(op, before, after)` applies `op` to `before` (dedented), compares the rendered text with `after` exactly,
then applies `op` again to the re-parsed result and expects *already applied*. `cannot(op, before)` expects
*cannot apply* and returns the error; `unchanged(op, before)` expects *already applied* on untouched code.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

import libcst as cst

from patcher.errors import SpecpatchError
from patcher.model import validate
from patcher.operations.base import REGISTRY, AlreadyApplied, CannotApply, Changed, Operation


def op(kind: str, **options: Any) -> Operation:
    """An operation built from its YAML option names (`class`, not `cls`), as a recipe step would be."""
    return validate(REGISTRY[kind], {"op": kind, "file": "mod.py", **options})


def src(text: str, *, newline: str = "\n", tabs: bool = False) -> str:
    """Dedented source; `tabs` turns each leading 4-space indentation step into a tab; `newline` sets line ends."""
    text = textwrap.dedent(text).lstrip("\n")
    if tabs:
        text = re.sub(r"^((?:    )+)", lambda m: "\t" * (len(m.group(1)) // 4), text, flags=re.M)
    return text.replace("\n", newline)


def check(operation: Operation, before: str, after: str, **fmt: Any) -> Changed:
    """Apply to `before`, expect exactly `after`, then expect a second run to find it already applied."""
    before, after = src(before, **fmt), src(after, **fmt)
    outcome = operation.apply(cst.parse_module(before))
    assert isinstance(outcome, Changed), _why(outcome)
    assert outcome.module.code == after
    compile(outcome.module.code, "after.py", "exec")
    again = operation.apply(cst.parse_module(outcome.module.code))
    assert isinstance(again, AlreadyApplied), _why(again)
    return outcome


def unchanged(operation: Operation, before: str, **fmt: Any) -> AlreadyApplied:
    """Expect *already applied* on `before`."""
    outcome = operation.apply(cst.parse_module(src(before, **fmt)))
    assert isinstance(outcome, AlreadyApplied), _why(outcome)
    return outcome


def cannot(operation: Operation, before: str, error: type[SpecpatchError], *, mentions: tuple[str, ...] = (),
           candidates: tuple[str, ...] = ()) -> SpecpatchError:
    """Expect *cannot apply* with an `error`; its message names every `mentions`, its candidates hold `candidates`."""
    outcome = operation.apply(cst.parse_module(src(before)))
    assert isinstance(outcome, CannotApply), _why(outcome)
    err = outcome.error
    assert isinstance(err, error), f"{type(err).__name__}: {err}"
    for text in mentions:
        assert text in err.message, f"{text!r} not in {err.message!r}"
    texts = [c.text for c in err.candidates]
    for text in candidates:
        assert any(text in t for t in texts), f"{text!r} not among candidates {texts}"
    assert err.location.anchor == operation.anchor()
    return err


def _why(outcome: object) -> str:
    if isinstance(outcome, CannotApply):
        return f"cannot apply: {outcome.error}; candidates: {[c.text for c in outcome.error.candidates]}"
    if isinstance(outcome, Changed):
        return f"changed:\n{outcome.module.code}"
    return type(outcome).__name__
