"""The Operation protocol, its three possible answers, and the registry keyed by `op`."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import ClassVar, Literal, Sequence, Union, get_args, get_origin

import libcst as cst

from ..errors import Location, SpecpatchError
from ..model import option, options
from ..results import StepStatus

_PARAM = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


@dataclass(frozen=True)
class Changed:
    """The operation changed the module; `inserted` are the new nodes (used to report their lines)."""

    module: cst.Module
    inserted: tuple[cst.CSTNode, ...] = ()
    anchor: cst.CSTNode | None = None
    status: ClassVar[StepStatus] = StepStatus.CHANGED


@dataclass(frozen=True)
class AlreadyApplied:
    """The equivalent code is already there: nothing to do."""

    existing: cst.CSTNode | None = None
    status: ClassVar[StepStatus] = StepStatus.ALREADY_APPLIED


@dataclass(frozen=True)
class CannotApply:
    """The operation cannot apply; `error` says why (anchor missing or ambiguous, conflict) with candidates."""

    error: SpecpatchError
    status: ClassVar[StepStatus] = StepStatus.CANNOT_APPLY


Outcome = Union[Changed, AlreadyApplied, CannotApply]


@dataclass(frozen=True, kw_only=True)
class Operation:
    """One semantic edit of one file. Subclasses are frozen, keyword-only dataclasses (`patcher.model` models):
    they set `op` to a `Literal` of their name, declare their options, and implement `apply`."""

    op: str
    file: str = option(description="the file to change, relative to the package folder (e.g. srt/server_args.py)")
    name: str | None = option(default=None, description="a short name for the step, shown in reports")
    group: str | None = option(default=None, description="steps of one group stand or fall together in `specpatch "
                               "port`: when one cannot apply, none of them is applied (`specpatch import` gives "
                               "the steps of one hunk one group)")

    #: option names whose strings may contain {{param}} placeholders (every operation's `code`)
    templated: ClassVar[tuple[str, ...]] = ("code",)

    def describe(self) -> str:
        """One line for `specpatch show` and reports."""
        raise NotImplementedError

    def anchor(self) -> str:
        """The anchor as a user would name it, for errors."""
        raise NotImplementedError

    def apply(self, module: cst.Module) -> Outcome:
        """Apply to a parsed module; must never raise for a target-side problem (return CannotApply instead)."""
        raise NotImplementedError

    def settled(self, module: cst.Module, found: AlreadyApplied, *, changed: bool) -> None:
        """Check the step's code where it stands in the file as the whole recipe leaves it (`found`: this step's
        answer there; `changed`: whether the step changed the file, or found its code there already): what a step
        checked against the module as it stood then can be undone, or made right, by another step (an assignment
        it reads, added below it; the `__hash__` beside an `__eq__`). Raises a `SpecpatchError`; most steps have
        nothing more to check."""

    def among(self, steps: Sequence["Operation"]) -> "Operation":
        """This step as it applies beside `steps`, the steps of its recipe that edit its file, in recipe order
        (itself among them, by identity). Most steps apply alone: they are themselves."""
        return self

    def render_params(self, params: dict[str, object]) -> "Operation":
        """A copy with each {{param}} placeholder of the templated options replaced by its value's literal, placed
        through libcst (`patcher.params`): never pasted as text."""
        from ..params import render

        if not params:
            return self  # a recipe without parameters has no placeholders: `{{x}}` is its code's own text
        update = {}
        for name in self.templated:
            value = getattr(self, name, None)
            if isinstance(value, str) and _PARAM.search(value):
                try:
                    update[name] = render(value, dict(params), what=name)
                except SpecpatchError as exc:
                    raise exc.at(Location(step=None, op=self.op, file=self.file)) from None
        return replace(self, **update) if update else self

    def placeholders(self) -> set[str]:
        found: set[str] = set()
        for name in self.templated:
            value = getattr(self, name, None)
            if isinstance(value, str):
                found.update(_PARAM.findall(value))
        return found


REGISTRY: dict[str, type[Operation]] = {}


def register(cls: type[Operation]) -> type[Operation]:
    """Class decorator: make an operation available to recipes under its `op` name."""
    hint = next(o.type for o in options(cls) if o.name == "op")
    if get_origin(hint) is not Literal or len(get_args(hint)) != 1:
        raise TypeError(f"{cls.__name__}.op must be a Literal of the operation's name, e.g. Literal['add_method']")
    name = get_args(hint)[0]
    if name in REGISTRY and REGISTRY[name].__qualname__ != cls.__qualname__:
        # a second class under one name would silently take every recipe's steps of the first (a module reloaded
        # re-registers its own class: that one is the same operation)
        raise TypeError(f"operation {name!r} is registered twice: {REGISTRY[name].__module__}."
                        f"{REGISTRY[name].__qualname__} and {cls.__module__}.{cls.__qualname__}")
    REGISTRY[name] = cls
    return cls


def attempt(fn):
    """Wrap an `apply` so that anchor errors raised by the helpers become a CannotApply answer."""
    import functools

    from ..errors import AnchorAmbiguous, AnchorNotFound, Conflict

    @functools.wraps(fn)
    def wrapper(self: Operation, module: cst.Module) -> Outcome:
        try:
            return fn(self, module)
        except (AnchorNotFound, AnchorAmbiguous, Conflict) as exc:
            if exc.location.anchor is None:
                from ..errors import Location

                exc.at(Location(anchor=self.anchor()))
            return CannotApply(exc)

    return wrapper
