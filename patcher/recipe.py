"""YAML recipe -> frozen, validated model. Errors point at the recipe file and line, with "did you mean".

A recipe::

    id: dynamic-spec-disable            # == file stem
    version: 1                          # recipe version, recorded in the ledger
    title: ...
    description: ...
    target: {package: sglang, versions: ">=0.5.4,<0.5.14"}
    params:
      threshold_default: {default: 0, type: int, description: ...}
    steps:                              # ordered edits; `op` picks the operation, the rest are its options
      - op: add_dataclass_field
        file: srt/server_args.py        # relative to the package folder, never outside it
        class: ServerArgs
        after: speculative_accept_threshold_acc
        code: "speculative_disable_batch_threshold: int = {{threshold_default}}"
    verify:
      imports: [sglang.srt.server_args]
      stubs: [sgl_kernel, flashinfer]
      probes: [{path: probes/server_args.py}]
    variants:                           # optional: per-release alternatives of steps/verify
      - name: v0.5.13
        versions: ">=0.5.13,<0.5.14"
        steps: [...]

Option values may be read from files beside the recipe: `code_file: dynamic-spec-disable/fallback.py` (resolved
relative to the recipe's folder and refused if it leaves it).
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal, Union

import yaml
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from . import operations
from .errors import RecipeError, RecipeNotFound, Location, VersionUnsupported
from .model import Problem, Tagged, ValidationError, json_schema as model_schema, option, options, validate
from .operations.base import REGISTRY, Operation
from .params import ParamError, check_value

def _shipped_recipes() -> Path:
    here = Path(__file__).resolve().parent
    installed = here / "recipes"  # a wheel installs the top-level recipes/ folder as patcher/recipes
    return installed if installed.is_dir() else here.parent / "recipes"


RECIPES_DIR = _shipped_recipes()
_RECIPE_PATH_ENV = "SPECPATCH_RECIPE_PATH"


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


@dataclass(frozen=True, kw_only=True)
class VerifySpec(Frozen):
    """The checks run after a patch: the import smoke test and the probes."""

    imports: tuple[str, ...] = option(default=(), description="modules imported by the smoke test")
    stubs: tuple[str, ...] = option(default=(), description="GPU-only native top-level modules replaced by stubs")
    requires: tuple[str, ...] = option(default=(), description="packages the environment must have for the smoke "
                                       "test and probes to run (e.g. torch); without them they are skipped, said so")
    shims: tuple[str, ...] = option(default=(), description="Python files beside the recipe run before the smoke "
                                    "test's imports and each probe, in the same process: they stand in for what only "
                                    "a GPU build defines (run for the pristine comparison too)")
    probes: tuple[Probe, ...] = ()
    timeout: float = option(default=300.0, check=_positive, description="seconds for the import smoke test")


@dataclass(frozen=True, kw_only=True)
class Variant(Frozen):
    """Steps and checks of the recipe for a range of releases (or a refusal of them)."""

    name: str
    versions: str = option(check=_specifier, description="PEP 440 specifiers of the releases this variant is for")
    description: str = ""
    steps: tuple[Step, ...] = ()  # type: ignore[valid-type]
    change_steps: dict[str, dict[str, Any]] = option(
        default_factory=dict, description="instead of `steps`: the recipe's steps, with the options given here "
        "changed, by step name (e.g. {worker-fallback: {code_file: v2/fallback.py}})")
    verify: VerifySpec | None = None
    refuse: str | None = option(default=None,
                                description="refuse these releases with this message instead of patching")

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
        from .errors import UsageError

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
        return values

    def select(self, version: Version | None) -> "Selection":
        """The steps and checks for a release: the recipe's own, or the variant whose range admits it."""
        if not self.variants:
            if version is not None and self.target.versions and not self.target.admits(version):
                raise VersionUnsupported(
                    f"recipe `{self.id}` supports sglang {self.target.versions}; the target is {version}",
                    location=Location(recipe=self.id),
                )
            return Selection(None, self.steps, self.verify, None,
                             f"release {version} is in {self.target.versions or 'any'}" if version else "no release read")
        if version is None:
            raise VersionUnsupported(f"recipe `{self.id}` has variants and the release is unknown",
                                     hint="pass --assume-version", location=Location(recipe=self.id))
        for variant in self.variants:
            if variant.admits(version):
                return Selection(variant.name, variant.steps or self.steps, variant.verify or self.verify,
                                 variant.refuse, f"release {version} is in {variant.versions}")
        ranges = ", ".join(f"{v.name}: {v.versions}" for v in self.variants)
        raise VersionUnsupported(f"no variant of `{self.id}` supports sglang {version} (variants: {ranges})",
                                 location=Location(recipe=self.id))


@dataclass(frozen=True)
class Selection:
    """What will run against one target: a variant's (or the recipe's) steps and checks."""

    variant: str | None
    steps: tuple[Operation, ...]
    verify: VerifySpec
    refuse: str | None
    reason: str


# --------------------------------------------------------------------------------------------------- loading


MAX_RECIPE_BYTES = 1_000_000  #: one YAML or code file of a recipe
MAX_INCLUDED_BYTES = 8_000_000  #: a recipe and everything it includes (`X_file:` options), all reads together
MAX_DEPTH = 64  #: nesting of mappings and lists in one YAML file (the flagship recipe needs 8)


def _refusal(message: str, mark: Any) -> yaml.YAMLError:
    return yaml.composer.ComposerError(None, None, message, mark)


class _LineLoader(yaml.SafeLoader):
    """SafeLoader that refuses aliases (no "billion laughs") and nesting deeper than MAX_DEPTH (its composer
    recurses once per level); lines are collected from its node tree."""

    _depth = 0

    def compose_node(self, parent, index):  # type: ignore[override]
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise _refusal("YAML aliases (*name) are not allowed in recipes", mark)
        if self._depth >= MAX_DEPTH:
            raise _refusal(f"nested deeper than {MAX_DEPTH} levels", self.peek_event().start_mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _compose_and_load(text: str) -> tuple[yaml.Node | None, Any]:
    """The node tree (for line numbers) and the data of a YAML text, as `_LineLoader` gives them, parsed once: by
    libyaml when PyYAML has it (ten times faster than the pure-Python parser, and a recipe's variant files run to
    thousands of lines). A text with an alias, or one libyaml refuses, is left to `_LineLoader`, whose refusals and
    messages are the reference. Either way a key given twice in one mapping is refused (YAML says keys are unique;
    PyYAML would keep the last one silently), and so is nesting deeper than MAX_DEPTH."""
    fast = getattr(yaml, "CSafeLoader", None)  # libyaml's parser and composer, PyYAML's resolver and constructor
    if fast is not None:
        loader = fast(text)
        try:
            node = loader.get_single_node()
            shape = None if node is None else _shape(node)
            if node is not None and shape is None:
                return node, loader.construct_document(node)
        except yaml.YAMLError:
            pass  # the reference loader below raises it, in its own words
        finally:
            loader.dispose()
    loader = _LineLoader(text)
    try:
        node = loader.get_single_node()
        if node is not None and (problem := _shape(node)) is not None:
            raise _refusal(*problem)
        return node, None if node is None else loader.construct_document(node)
    finally:
        loader.dispose()


def _shape(root: yaml.Node) -> tuple[str, Any] | None:
    """What makes a node tree unfit for a recipe, walked without recursion: an alias (the composer reuses its anchor's
    node: a node reached twice), a key given twice in a mapping, or nesting deeper than MAX_DEPTH. None if fit."""
    seen: set[int] = set()
    todo = [(root, 1)]
    while todo:
        node, depth = todo.pop()
        if id(node) in seen:
            return "YAML aliases (*name) are not allowed in recipes", node.start_mark
        seen.add(id(node))
        if depth > MAX_DEPTH:
            return f"nested deeper than {MAX_DEPTH} levels", node.start_mark
        if isinstance(node, yaml.MappingNode):
            keys: dict[Any, Any] = {}
            for key, value in node.value:
                k = key.value if isinstance(key, yaml.ScalarNode) else id(key)
                if k in keys:
                    return (f"key `{k}` is given twice in one mapping (line {keys[k].line + 1} and line "
                            f"{key.start_mark.line + 1}); YAML keys are unique", key.start_mark)
                keys[k] = key.start_mark
                todo += [(key, depth + 1), (value, depth + 1)]
        elif isinstance(node, yaml.SequenceNode):
            todo += [(item, depth + 1) for item in node.value]
    return None


def _lines(node: yaml.Node, path: tuple = (), out: dict | None = None) -> dict[tuple, int]:
    out = {} if out is None else out
    out.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            kpath = path + (key.value,)
            out[kpath] = key.start_mark.line + 1
            _lines(value, kpath, out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _lines(item, path + (i,), out)
    return out


def _line_for(lines: dict[tuple, int], loc: tuple) -> int | None:
    loc = tuple(loc)
    while loc:
        if loc in lines:
            return lines[loc]
        loc = loc[:-1]
    return lines.get(())


def _inside(base: Path, rel: str) -> bool:
    """True when `rel` is a relative path that stays inside `base` (no `..`, not absolute)."""
    p = PurePosixPath(rel)
    return not (p.is_absolute() or rel.startswith(("/", "\\")) or ".." in p.parts or ":" in rel.split("/")[0])


@dataclass
class _Reads:
    """What loading one recipe has read so far: the YAML files open now (an include of one of them is a cycle) and
    the bytes of every file read, bounded by MAX_INCLUDED_BYTES."""

    open: list[Path]
    total: int = 0


def _load_code_files(data: Any, folder: Path, path: tuple, errors: list, reads: _Reads | None = None) -> Any:
    """Replace `X_file: rel` options by `X: <file text>`, refusing paths outside the recipe's folder, files that are
    not UTF-8 or too large, a YAML file that includes itself (directly or not), and more than MAX_INCLUDED_BYTES
    read in all."""
    reads = reads if reads is not None else _Reads([])
    if isinstance(data, dict):
        out = {}
        for key, value in data.items():
            if isinstance(key, str) and key.endswith("_file") and isinstance(value, str) and key != "file":
                here = path + (key,)
                if "\0" in value:
                    errors.append((here, f"`{key}` contains a NUL byte"))
                    continue
                real = (folder / value).resolve()
                if not _inside(folder, value) or not real.is_relative_to(folder.resolve()):
                    errors.append((here, f"`{key}: {value}` leaves the recipe's folder"))
                    continue
                if not real.is_file():
                    errors.append((here, f"`{key}: {value}`: no such file beside the recipe"))
                    continue
                if real in reads.open:
                    chain = " -> ".join(p.name for p in [*reads.open, real])
                    errors.append((here, f"`{key}: {value}` includes itself ({chain})"))
                    continue
                try:
                    raw = real.read_bytes()
                except OSError as exc:
                    errors.append((here, f"`{key}: {value}`: cannot read it ({exc.strerror or exc})"))
                    continue
                reads.total += len(raw)
                if len(raw) > MAX_RECIPE_BYTES or reads.total > MAX_INCLUDED_BYTES:
                    errors.append((here, f"`{key}: {value}`: larger than {MAX_RECIPE_BYTES} bytes" if
                                   len(raw) > MAX_RECIPE_BYTES else f"the recipe and the files it includes are "
                                   f"larger than {MAX_INCLUDED_BYTES} bytes in all"))
                    continue
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    errors.append((here, f"`{key}: {value}` is not UTF-8 text ({exc.reason} at byte {exc.start})"))
                    continue
                if real.suffix in (".yaml", ".yml"):  # structured options (e.g. `variants_file`) come as YAML
                    try:
                        reads.open.append(real)
                        out[key[: -len("_file")]] = _load_code_files(
                            _compose_and_load(text)[1], real.parent, here, errors, reads)
                    except yaml.YAMLError as exc:
                        errors.append((here, f"`{value}` is not valid YAML: {exc}"))
                    finally:
                        reads.open.pop()
                else:
                    out[key[: -len("_file")]] = text
            else:
                out[key] = _load_code_files(value, folder, path + (key,), errors, reads)
        return out
    if isinstance(data, list):
        return [_load_code_files(v, folder, path + (i,), errors, reads) for i, v in enumerate(data)]
    return data


def parse_recipe(text: str, source: Path) -> Recipe:
    """Validate recipe text; every problem is a RecipeError naming `source` and the line."""
    where = str(source)
    if len(text) > MAX_RECIPE_BYTES:
        raise RecipeError(f"recipe is larger than {MAX_RECIPE_BYTES} bytes", location=Location(recipe=where, file=where))
    try:
        node, data = _compose_and_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise RecipeError(f"not valid YAML: {getattr(exc, 'problem', exc)}",
                          location=Location(recipe=where, file=where, line=mark.line + 1 if mark else None)) from None
    if not isinstance(data, dict):
        raise RecipeError("a recipe is a YAML mapping (id, title, target, steps, ...)",
                          location=Location(recipe=where, file=where, line=1))
    lines = _lines(node)

    def fail(loc: tuple, message: str) -> RecipeError:
        step = loc[1] + 1 if len(loc) > 1 and loc[0] == "steps" and isinstance(loc[1], int) else None
        return RecipeError(message, location=Location(recipe=where, file=where, line=_line_for(lines, loc), step=step))

    folder = source.parent / str(data.get("id", source.stem))
    file_errors: list = []
    data = _load_code_files(data, folder, (), file_errors, _Reads([source.resolve()], len(text.encode())))
    if file_errors:
        raise fail(*file_errors[0])

    # Operations are checked first, by hand, for a better message than the union's ("did you mean").
    for i, step in enumerate(data.get("steps") or []):
        _check_op(step, ("steps", i), fail)
    _expand_changed_steps(data, lines, fail)
    for vi, variant in enumerate(data.get("variants") or []):
        if isinstance(variant, dict):
            for i, step in enumerate(variant.get("steps") or []):
                _check_op(step, ("variants", vi, "steps", i), fail)
    try:
        recipe = validate(Recipe, data, source=source)
    except ValidationError as exc:
        # unknown options first: a typo usually explains the "missing option" errors that come with it
        errors = sorted(exc.errors, key=lambda e: e.type != "extra_forbidden")
        messages = [_describe_error(err, data) for err in errors[:3]]
        more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
        raise fail(errors[0].loc, "; ".join(messages) + more) from None
    if recipe.id != source.stem and source.suffix in (".yaml", ".yml"):
        raise fail(("id",), f"id `{recipe.id}` must equal the file name `{source.stem}`")
    _check_semantics(recipe, fail)
    return recipe


def _expand_changed_steps(data: dict, lines: dict[tuple, int], fail) -> None:
    """Give each variant with `change_steps` its `steps`: the recipe's, with the named steps' options changed (the
    option values replace the recipe's; `code_file` replaces `code`, the files being read already). Errors in a
    changed option point at the change, errors in an unchanged one at the recipe's step."""
    base = data.get("steps") or []
    names = [s.get("name") for s in base]
    for vi, variant in enumerate(data.get("variants") or []):
        if not isinstance(variant, dict) or "change_steps" not in variant:
            continue
        where = ("variants", vi, "change_steps")
        changes = variant["change_steps"]
        if "steps" in variant:
            raise fail(where, "a variant has `steps` (its own list) or `change_steps` (the recipe's, changed), not both")
        if not isinstance(changes, dict) or not all(isinstance(c, dict) for c in changes.values()):
            raise fail(where, "`change_steps` maps step names to the options they change, "
                              "e.g. {worker-fallback: {code_file: v2/fallback.py}}")
        for name, change in changes.items():
            if name not in names:
                guess = difflib.get_close_matches(str(name), [n for n in names if n], n=1)
                raise fail(where + (name,), f"no step named `{name}` in the recipe"
                           + (f"; did you mean `{guess[0]}`?" if guess else ""))
            if names.count(name) > 1:
                raise fail(where + (name,), f"the recipe has {names.count(name)} steps named `{name}`")
            if {"op", "name"} & set(change):
                raise fail(where + (name,), "`change_steps` changes a step's options; its `op` and `name` stay")
        steps = []
        for i, step in enumerate(base):
            change = changes.get(step.get("name"), {})
            here = ("variants", vi, "steps", i)
            lines[here] = lines.get(where + (step.get("name"),)) or lines.get(("steps", i), 0)
            for key in step:
                lines[here + (key,)] = lines.get(("steps", i, key), lines[here])
            for key in change:
                lines[here + (key,)] = lines.get(where + (step["name"], key)) or lines.get(
                    where + (step["name"], f"{key}_file"), lines[here])
            steps.append({**step, **change})
        variant["steps"] = steps


def _describe_error(err: Problem, data: dict) -> str:
    loc = err.loc
    where = ".".join(str(x) for x in loc[:-1] if not isinstance(x, int)) if len(loc) > 1 else ""
    if err.type == "missing":
        return f"missing option `{loc[-1]}`" + (f" in {where}" if where and where != "steps" else "")
    if err.type == "extra_forbidden":
        return f"unknown option `{loc[-1]}`" + _did_you_mean_option(data, loc)
    return f"`{'.'.join(str(x) for x in loc)}`: {err.msg}" if loc else err.msg


def _did_you_mean_option(data: dict, loc: tuple) -> str:
    step: Any = data
    for part in loc[:-1]:
        step = step[part]
    if isinstance(step, dict) and step.get("op") in REGISTRY:
        model = REGISTRY[step["op"]]
        names = [o.key for o in options(model) if o.name != "op"]
        guess = difflib.get_close_matches(str(loc[-1]), names, n=1)
        if guess:
            return f"; did you mean `{guess[0]}`?"
        return f"; `{step['op']}` takes: {', '.join(names)}"
    return ""


def _check_op(step: Any, loc: tuple, fail) -> None:
    if not isinstance(step, dict):
        raise fail(loc, "a step is a mapping with `op`, `file` and the operation's options")
    kind = step.get("op")
    if kind is None:
        raise fail(loc, f"step has no `op`; one of: {', '.join(sorted(REGISTRY))}")
    if kind not in REGISTRY:
        guess = difflib.get_close_matches(str(kind), list(REGISTRY), n=1)
        hint = f"; did you mean `{guess[0]}`?" if guess else f"; one of: {', '.join(sorted(REGISTRY))}"
        raise fail(loc + ("op",), f"unknown operation `{kind}`{hint}")
    file = step.get("file")
    if isinstance(file, str) and (not file.isprintable() or not file.strip()):
        raise fail(loc + ("file",), f"step file {file!r} is empty or holds a NUL or control character")
    if isinstance(file, str) and not _inside(Path("."), file):
        raise fail(loc + ("file",), f"step file `{file}` is outside the package (use a path relative to it)")


def _check_semantics(recipe: Recipe, fail) -> None:
    def steps_with_loc():
        for i, s in enumerate(recipe.steps):
            yield ("steps", i), s
        for vi, v in enumerate(recipe.variants):
            for i, s in enumerate(v.steps):
                yield ("variants", vi, "steps", i), s

    lists = [(("steps",), recipe.steps)]
    lists += [(("variants", vi, "steps"), v.steps) for vi, v in enumerate(recipe.variants)]
    for loc, steps in lists:
        seen: dict[str, int] = {}
        for i, step in enumerate(steps):
            if step.name is None:
                continue
            if step.name in seen:
                raise fail(loc + (i, "name"), f"two steps are named `{step.name}` (steps {seen[step.name] + 1} and "
                                              f"{i + 1}); step names are unique")
            seen[step.name] = i
    if not recipe.variants and not recipe.steps:
        raise fail(("steps",), "the recipe has no steps: it would change nothing")
    for vi, variant in enumerate(recipe.variants):
        if not variant.refuse and not (variant.steps or recipe.steps):
            raise fail(("variants", vi), f"variant `{variant.name}` has no steps (and the recipe none to inherit); "
                                         f"give it steps or `refuse`")
    for name, param in recipe.params.items():
        try:
            check_value(name, param.type, param.default)
        except ParamError as exc:
            raise fail(("params", name, "default"), f"default of {exc.message}") from None
    for loc, step in steps_with_loc():
        unknown = step.placeholders() - set(recipe.params)
        if unknown:
            raise fail(loc, f"uses undeclared parameter(s) {', '.join(sorted(unknown))}; declare them under `params`")
    specs = [(("verify",), recipe.verify)] + [(("variants", vi, "verify"), v.verify)
                                             for vi, v in enumerate(recipe.variants) if v.verify]
    scripts = [(loc + ("probes", i), "probe", p.path) for loc, spec in specs for i, p in enumerate(spec.probes)]
    scripts += [(loc + ("shims", i), "shim", path) for loc, spec in specs for i, path in enumerate(spec.shims)]
    for loc, kind, path in scripts:
        real = (recipe.folder / path).resolve()
        if not _inside(recipe.folder, path) or not real.is_relative_to(recipe.folder.resolve()):
            raise fail(loc, f"{kind} `{path}` leaves the recipe's folder")
        if not real.is_file():
            raise fail(loc, f"{kind} `{path}` not found in {recipe.folder}")


def recipe_dirs(extra: list[Path] | None = None) -> list[Path]:
    """Where recipes are looked up: --recipe-path folders, $SPECPATCH_RECIPE_PATH, then the shipped ones."""
    dirs = list(extra or [])
    dirs += [Path(p) for p in os.environ.get(_RECIPE_PATH_ENV, "").split(os.pathsep) if p]
    dirs.append(RECIPES_DIR)
    return dirs


def available(extra: list[Path] | None = None) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for d in recipe_dirs(extra):
        if d.is_dir():
            for f in sorted(d.glob("*.yaml")):
                found.setdefault(f.stem, f)
    return found


def load_recipe(name_or_path: str | Path, extra_dirs: list[Path] | None = None) -> Recipe:
    """Load a recipe by id (searched in the recipe path) or by the path of its YAML file."""
    path = Path(name_or_path)
    if not (path.suffix in (".yaml", ".yml") and path.exists()):
        found = available(extra_dirs)
        if str(name_or_path) not in found:
            guess = difflib.get_close_matches(str(name_or_path), list(found), n=1)
            raise RecipeNotFound(f"no recipe `{name_or_path}`" + (f"; did you mean `{guess[0]}`?" if guess else ""),
                                 location=Location(recipe=str(name_or_path)))
        path = found[str(name_or_path)]
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RecipeError(f"cannot read recipe: {exc}", location=Location(recipe=str(path), file=str(path))) from None
    return parse_recipe(text, path)


def json_schema() -> dict:
    """JSON Schema of the recipe format, for editors."""
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", **model_schema(Recipe)}
    schema["title"] = "specpatch recipe"
    return _with_file_options(schema)


def _with_file_options(schema: dict) -> dict:
    """Let the schema accept what the loader accepts: any option `X` of a step, a variant or the recipe may be given
    as `X_file: path` (read from a file beside the recipe), e.g. `code_file: worker_init.py`, `variants_file:
    variants.yaml`. (The recipe model has no such fields: the loader reads the files before validating.)"""
    fixed = {"op", "file", "name", "id"}

    def extend(obj: dict) -> None:
        props = obj.get("properties", {})
        for key in [k for k in props if k not in fixed and not k.endswith("_file")]:
            props[f"{key}_file"] = {"type": "string", "title": f"{key} (from a file)",
                                    "description": f"read `{key}` from this file, relative to the recipe's folder"}
            if key in obj.get("required", []):
                obj["required"] = [r for r in obj["required"] if r != key]
                obj.setdefault("allOf", []).append({"oneOf": [{"required": [key]}, {"required": [f"{key}_file"]}]})
        # `arm` goes with `branch_if`: either of them may come from a file
        for key, needs in obj.pop("dependentRequired", {}).items():
            rule = {"allOf": [{"anyOf": [{"required": [n]}, {"required": [f"{n}_file"]}]} for n in needs]}
            obj.setdefault("dependentSchemas", {}).update({key: rule, f"{key}_file": rule})

    defs = schema.get("$defs", {})
    for definition in defs.values():
        if "op" in definition.get("properties", {}) or definition.get("title") == "Variant":
            extend(definition)
    extend(schema)
    return schema

