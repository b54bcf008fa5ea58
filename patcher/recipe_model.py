"""The recipe format as frozen models: Recipe, Variant, VerifySpec, Probe, Param, TargetSpec, and the step union.

The YAML is read into these by `patcher.recipe` (`patcher.recipe_yaml` reads the text and its included files,
`patcher.recipe_overlays` expands the variants); `json_schema()` is generated from them, the `X_file` options
included (`includable`).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from . import operations  # noqa: F401  (registers the operations)
from .errors import Location, VersionUnsupported
from .model import Option, Tagged, json_schema as model_schema, option
from .operations.base import REGISTRY, Operation
from .params import check_value

def _shipped_recipes() -> Path:
    here = Path(__file__).resolve().parent
    installed = here / "recipes"  # a wheel installs the top-level recipes/ folder as patcher/recipes
    return installed if installed.is_dir() else here.parent / "recipes"


RECIPES_DIR = _shipped_recipes()


def _step_union() -> Any:
    kinds = tuple(REGISTRY[k] for k in sorted(REGISTRY))
    return Annotated[Union[kinds], Tagged("op")]  # type: ignore[valid-type]


#: a step of a recipe: the operation named by its `op`
Step = _step_union()


def _positive(value: float) -> None:
    if not value > 0 or value != value or value == float("inf"):
        raise ValueError(f"must be a positive number of seconds, got {value!r}")


def _specifier(value: str) -> None:
    try:
        SpecifierSet(value)
    except InvalidSpecifier as exc:
        raise ValueError(f"not a PEP 440 specifier set: {exc}") from None


@dataclass(frozen=True, kw_only=True)
class Frozen:
    """Base of the recipe's models: frozen, keyword-only dataclasses, validated from YAML by `patcher.model`."""


@dataclass(frozen=True, kw_only=True)
class TargetSpec(Frozen):
    """The package a recipe patches and the releases it supports."""

    package: str = option(description="the distribution / import package, e.g. sglang")
    versions: str = option(default="", check=_specifier,
                           description="PEP 440 specifiers of the supported releases, e.g. '>=0.5.4,<0.5.14'")

    def admits(self, version: Version) -> bool:
        return SpecifierSet(self.versions).contains(version, prereleases=True)


@dataclass(frozen=True, kw_only=True)
class Param(Frozen):
    """A recipe parameter: `{{name}}` in a templated option, set with `--param name=value`."""

    default: int | float | str | bool = option(description="value used when --param does not set it")
    type: Literal["int", "float", "str", "bool"] = "str"
    description: str = ""
    minimum: int | float | None = option(default=None, description="int/float: the smallest value allowed")
    maximum: int | float | None = option(default=None, description="int/float: the largest value allowed")
    choices: tuple[str, ...] = option(default=(), description="str: the only values allowed")

    def allowed(self, value: Any) -> str | None:
        """Why `value` is not allowed by `minimum`, `maximum` or `choices`, or None."""
        if self.minimum is not None and isinstance(value, (int, float)) and value < self.minimum:
            return f"{value!r} is below the minimum {self.minimum}"
        if self.maximum is not None and isinstance(value, (int, float)) and value > self.maximum:
            return f"{value!r} is above the maximum {self.maximum}"
        if self.choices and str(value) not in self.choices:
            return f"{value!r} is not one of {', '.join(map(repr, self.choices))}"
        return None

    def parse(self, raw: str) -> int | float | str | bool:
        if self.type == "int":
            return int(raw)
        if self.type == "float":
            return float(raw)
        if self.type == "bool":
            if raw.lower() in ("1", "true", "yes", "on"):
                return True
            if raw.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(f"not a boolean: {raw!r}")
        return raw


@dataclass(frozen=True, kw_only=True)
class Probe(Frozen):
    """A behaviour check: a script run in the target's environment after the patch."""

    path: str = option(description="a Python script beside the recipe, run in the target's environment")
    name: str | None = None
    description: str = ""
    timeout: float = option(default=300.0, check=_positive, description="seconds the probe may run")


def _module_names(value: tuple) -> None:
    for name in value:
        if not (isinstance(name, str) and name and all(part.isidentifier() for part in name.split("."))):
            raise ValueError(f"{name!r} is not a module name (dotted identifiers, e.g. sglang.srt.server_args)")


@dataclass(frozen=True, kw_only=True)
class VerifySpec(Frozen):
    """The checks run after a patch: the import smoke test and the probes."""

    imports: tuple[str, ...] = option(default=(), check=_module_names, description="modules imported by the smoke "
                                      "test (dotted names)")
    stubs: tuple[str, ...] = option(default=(), check=_module_names, description="GPU-only native top-level modules "
                                    "replaced by stubs")
    requires: tuple[str, ...] = option(default=(), description="packages the environment must have for the smoke "
                                       "test and probes to run (e.g. torch); without them they are skipped, said so")
    shims: tuple[str, ...] = option(default=(), description="Python files beside the recipe run before the smoke "
                                    "test's imports and each probe, in the same process: they stand in for what only "
                                    "a GPU build defines (run for the pristine comparison too)")
    probes: tuple[Probe, ...] = ()
    timeout: float = option(default=300.0, check=_positive, description="seconds for the import smoke test")


Constant = Union[str, int, float, bool]  #: a recipe or variant constant: a value for `{{name}}` in code


def _constants(value: dict) -> None:
    for name in value:
        if not (isinstance(name, str) and name.isidentifier()):
            raise ValueError(f"constant name {name!r} is not an identifier")


@dataclass(frozen=True, kw_only=True)
class Variant(Frozen):
    """Steps and checks of the recipe for a range of releases (or a refusal of them).

    A variant is a *root* (its own `steps`) or an *overlay*: the steps and checks of the variant it `extends` (else
    the recipe's), changed by `change_steps`, `add_steps` and `remove_steps`, its `verify` and `constants` merged
    over the base's (`patcher.recipe_overlays`)."""

    name: str
    versions: str = option(check=_specifier, description="PEP 440 specifiers of the releases this variant is for")
    description: str = ""
    extends: str | None = option(default=None, description="an overlay of this variant (its expanded steps, "
                                 "checks and constants) instead of the recipe's steps")
    steps: tuple[Step, ...] = option(default=(), description="a root variant's own steps (no `extends`, no "  # type: ignore[valid-type]
                                     "step changes)")
    change_steps: dict[str, dict[str, Any]] = option(
        default_factory=dict, description="the base's steps with these options changed, by step name: a value "
        "replaces the base's, null removes the option, `pieces` (or `pieces_file`) replaces named pieces of the "
        "step's code (e.g. {worker-fallback: {code_file: v2/fallback.py}})")
    add_steps: tuple[dict[str, Any], ...] = option(
        default=(), description="new steps, each placed with `after_step: NAME` or `before_step: NAME` (default: "
        "last)")
    remove_steps: tuple[str, ...] = option(default=(), description="names of the base's steps this variant drops")
    constants: dict[str, Constant] = option(default_factory=dict, check=_constants,  # type: ignore[valid-type]
                                            description="values for `{{name}}` in the steps' code, merged over "
                                            "the base's; fixed by the recipe, unlike params")
    verify: VerifySpec | None = option(default=None, description="an overlay's is merged over its base's "
                                       "(probes by name); a root variant's replaces the recipe's")
    refuse: str | None = option(default=None,
                                description="refuse these releases with this message instead of patching")
    kind: Literal["patch", "alias"] = option(
        default="patch", description="patch: the steps patch the change in; alias: they configure an upstream "
        "mechanism that does the same (reported as such); an overlay's is its base's unless it says")

    def admits(self, version: Version) -> bool:
        return SpecifierSet(self.versions).contains(version, prereleases=True)


@dataclass(frozen=True, kw_only=True)
class Recipe(Frozen):
    """A recipe: ordered semantic edits of a package's source, with the checks that verify them."""

    id: str = option(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$", description="kebab-case, equal to the file stem")
    version: int = option(default=1, description="the recipe's own version, recorded when applied")
    title: str
    description: str = ""
    target: TargetSpec
    params: dict[str, Param] = option(default_factory=dict)
    constants: dict[str, Constant] = option(default_factory=dict, check=_constants,  # type: ignore[valid-type]
                                            description="values for `{{name}}` in the steps' code, the defaults "
                                            "of every variant's; fixed by the recipe, unlike params")
    steps: tuple[Step, ...] = ()  # type: ignore[valid-type]
    verify: VerifySpec = option(default_factory=VerifySpec)
    variants: tuple[Variant, ...] = ()

    #: where the recipe was loaded from (not part of the YAML)
    source: Path | None = option(default=None, exclude=True)

    @property
    def folder(self) -> Path:
        return (self.source.parent if self.source else RECIPES_DIR) / self.id

    def resolve_params(self, given: dict[str, str]) -> dict[str, Any]:
        """Defaults overlaid with `NAME=VALUE` strings from the command line, parsed to the declared types."""
        from .errors import UsageError  # noqa: PLC0415

        values: dict[str, Any] = {k: p.default for k, p in self.params.items()}
        for key, raw in given.items():
            if key not in self.params:
                guess = difflib.get_close_matches(key, list(self.params), n=1)
                raise UsageError(f"recipe `{self.id}` has no parameter `{key}`"
                                 + (f"; did you mean `{guess[0]}`?" if guess else f"; it has: {', '.join(self.params) or 'none'}"))
            try:
                values[key] = self.params[key].parse(raw)
            except ValueError as exc:
                raise UsageError(f"parameter `{key}`: {exc}") from None
        for key, value in values.items():
            check_value(key, self.params[key].type, value)
            why = self.params[key].allowed(value)
            if why:
                raise UsageError(f"parameter `{key}`: {why}")
        return values

    def select(self, version: Version | None) -> "Selection":
        """The steps and checks for a release: the recipe's own, or the variant whose range admits it."""
        if not self.variants:
            if version is not None and self.target.versions and not self.target.admits(version):
                raise VersionUnsupported(
                    f"recipe `{self.id}` supports {self.target.package} {self.target.versions}; the target is {version}",
                    location=Location(recipe=self.id),
                )
            return Selection(None, self.steps, self.verify, None,
                             f"release {version} is in {self.target.versions or 'any'}" if version else "no release read")
        if version is None:
            raise VersionUnsupported(f"recipe `{self.id}` has variants and the release is unknown",
                                     hint="pass --assume-version", location=Location(recipe=self.id))
        for variant in self.variants:
            if variant.admits(version):
                return self._selection(variant, f"release {version} is in {variant.versions}")
        ranges = ", ".join(f"{v.name}: {v.versions}" for v in self.variants)
        hint = None
        if version.is_prerelease:
            final = Version(version.base_version)
            near = next((v.name for v in self.variants if v.admits(final)), None)
            hint = (f"{version} is a pre-release of {final}: releases sort it before {final}, so a range that starts "
                    f"at {final} does not hold it" + (f" (the variant for {final} is `{near}`); if its code is "
                                                     f"{final}'s, pass --assume-version {final}" if near else ""))
        raise VersionUnsupported(f"no variant of `{self.id}` supports {self.target.package} {version} "
                                 f"(variants: {ranges})", hint=hint,
                                 location=Location(recipe=self.id))

    def select_variant(self, name: str) -> "Selection":
        """The steps and checks of the variant called `name`, whichever releases its range admits (what `specpatch
        port --variant` plans on a release the recipe does not cover yet)."""
        from .errors import UsageError  # noqa: PLC0415

        for variant in self.variants:
            if variant.name == name:
                return self._selection(variant, f"variant `{name}` was asked for")
        names = [v.name for v in self.variants]
        guess = difflib.get_close_matches(name, names, n=1)
        raise UsageError(f"recipe `{self.id}` has no variant `{name}`"
                         + (f"; did you mean `{guess[0]}`?" if guess else f"; it has: {', '.join(names) or 'none'}"))

    def _selection(self, variant: Variant, reason: str) -> "Selection":
        return Selection(variant.name, variant.steps or self.steps, variant.verify or self.verify, variant.refuse,
                         reason, variant.kind)

    def nearest_variant(self, version: Version) -> "Variant | None":
        """The variant whose range starts last at or below `version` (the one to carry to a release past the
        recipe's ranges), else None."""
        starts = [(first_release(v.versions), v) for v in self.variants if not v.refuse]
        below = [(Version(s), v) for s, v in starts if s is not None and Version(s) <= version]
        return max(below, key=lambda sv: sv[0])[1] if below else None


def first_release(versions: str | None) -> str | None:
    """X of a range's `>=X` (the release a recipe or variant starts at), else None."""
    try:
        specs = SpecifierSet(versions or "")
    except InvalidSpecifier:
        return None
    firsts = [s.version for s in specs if s.operator == ">="]
    return firsts[0] if len(firsts) == 1 else None


@dataclass(frozen=True)
class Selection:
    """What will run against one target: a variant's (or the recipe's) steps and checks."""

    variant: str | None
    steps: tuple[Operation, ...]
    verify: VerifySpec
    refuse: str | None
    reason: str
    kind: str = "patch"  #: the variant's kind (patch | alias)



#: options never read from a file: what picks the operation, the file it edits, and names
_NOT_INCLUDABLE = frozenset({"op", "file", "name", "id"})


def includable(model: type, opt: Option) -> bool:
    """Whether option `opt` of `model` may be given as `X_file: path`, read from a file beside the recipe (the
    loader's include convention, `patcher.recipe_yaml`): every option of a step, a variant and the recipe, but
    the ones in _NOT_INCLUDABLE."""
    return ((model in (Recipe, Variant) or model in REGISTRY.values()) and opt.key not in _NOT_INCLUDABLE
            and not opt.key.endswith("_file"))


def json_schema() -> dict:
    """JSON Schema of the recipe format, for editors: generated from the models, the `X_file` options included."""
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema",
              **model_schema(Recipe, file_options=includable)}
    schema["title"] = "specpatch recipe"
    return schema
