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
        extends: v0.5.12                # an overlay: v0.5.12's steps and checks, changed
        change_steps: {worker-fallback: {code_file: v0_5_13/fallback.py}}

Loading is split by concern: `patcher.recipe_yaml` reads the YAML (with each key's line) and the files it includes
(`code_file: dynamic-spec-disable/fallback.py`, resolved relative to the recipe's folder and refused if it leaves
it), `patcher.recipe_overlays` expands the variants, `patcher.recipe_model` holds the models that validate the
result (and the JSON Schema generated from them), `patcher.recipe_discovery` finds recipes by id. This module
joins them (`parse_recipe`, `load_recipe`) and checks what the models cannot (unique step names, declared
parameters, probes inside the recipe's folder).
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import yaml

from . import recipe_overlays, recipe_yaml as ry
from .errors import Location, RecipeError
from .model import Problem, ValidationError, options, validate
from .operations.base import REGISTRY
from .params import ParamError, check_value
from .recipe_discovery import available, load_recipe, recipe_dirs
from .recipe_model import (RECIPES_DIR, Param, Probe, Recipe, Selection, Step, TargetSpec, Variant, VerifySpec,
                           json_schema)
from .recipe_yaml import MAX_DEPTH, MAX_INCLUDED_BYTES, MAX_RECIPE_BYTES

__all__ = ["MAX_DEPTH", "MAX_INCLUDED_BYTES", "MAX_RECIPE_BYTES", "RECIPES_DIR", "Param", "Probe", "Recipe",
           "Selection", "Step", "TargetSpec", "Variant", "VerifySpec", "available", "json_schema", "load_recipe",
           "parse_recipe", "recipe_dirs"]

# the loader's internals, under the names the tests of the fast paths use
_LineLoader, _compose_and_load, _lines = ry.LineLoader, ry.compose_and_load, ry.lines


def parse_recipe(text: str, source: Path) -> Recipe:
    """Validate recipe text; every problem is a RecipeError naming `source` and the line."""
    where = str(source)
    if len(text) > MAX_RECIPE_BYTES:
        raise RecipeError(f"recipe is larger than {MAX_RECIPE_BYTES} bytes", location=Location(recipe=where, file=where))
    try:
        node, data = ry.compose_and_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise RecipeError(f"not valid YAML: {getattr(exc, 'problem', exc)}",
                          location=Location(recipe=where, file=where, line=mark.line + 1 if mark else None)) from None
    if not isinstance(data, dict):
        raise RecipeError("a recipe is a YAML mapping (id, title, target, steps, ...)",
                          location=Location(recipe=where, file=where, line=1))
    lines = ry.LineMap(ry.lines(node))

    def fail(loc: tuple, message: str) -> RecipeError:
        step = loc[1] + 1 if len(loc) > 1 and loc[0] == "steps" and isinstance(loc[1], int) else None
        return RecipeError(message, location=Location(recipe=where, file=ry.file_for(lines, loc) or where,
                                                      line=ry.line_for(lines, loc), step=step))

    folder = source.parent / str(data.get("id", source.stem))
    file_errors: list = []
    data = ry.load_code_files(data, folder, (), file_errors, ry.Reads([source.resolve()], len(text.encode()), lines))
    if file_errors:
        raise fail(*file_errors[0])

    # Operations are checked first, by hand, for a better message than the union's ("did you mean").
    for i, step in enumerate(data.get("steps") or []):
        _check_op(step, ("steps", i), fail)
    recipe_overlays.expand(data, lines, fail)
    data = ry.plain_floats(data)  # the text of a float was for the constants' check only
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


def _describe_error(err: Problem, data: dict) -> str:
    loc = err.loc
    where = ".".join(str(x) for x in loc[:-1] if not isinstance(x, int)) if len(loc) > 1 else ""
    if err.type == "missing":
        return f"missing option `{loc[-1]}`" + (f" in {where}" if where and where != "steps" else "")
    if err.type == "extra_forbidden":
        return f"unknown option `{loc[-1]}`" + (_did_you_mean_option(data, loc) or err.msg.partition("`" + str(
            loc[-1]) + "`")[2])
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
    if not isinstance(kind, str):
        raise fail(loc + ("op",), f"`op` is the name of one operation (a string), got a {type(kind).__name__}; one "
                                  f"of: {', '.join(sorted(REGISTRY))}")
    if kind not in REGISTRY:
        guess = difflib.get_close_matches(str(kind), list(REGISTRY), n=1)
        hint = f"; did you mean `{guess[0]}`?" if guess else f"; one of: {', '.join(sorted(REGISTRY))}"
        raise fail(loc + ("op",), f"unknown operation `{kind}`{hint}")
    file = step.get("file")
    if isinstance(file, str) and (not file.isprintable() or not file.strip()):
        raise fail(loc + ("file",), f"step file {file!r} is empty or holds a NUL or control character")
    if isinstance(file, str) and not ry.inside(Path("."), file):
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
    extended = {v.extends for v in recipe.variants if v.extends}
    for vi in _admitting_none(recipe.variants, recipe.target.versions):
        variant = recipe.variants[vi]
        # `versions: "<0"` says it on purpose: a base, or a variant chosen by name only (`--variant`)
        if variant.name not in extended and variant.versions.replace(" ", "") != "<0":
            raise fail(("variants", vi, "versions"), f"variant `{variant.name}` ({variant.versions}) can never be "
                                                     f"selected: it admits no release the recipe is for "
                                                     f"({recipe.target.versions or 'any'}) and no variant extends it "
                                                     f"(a typo in the range? `versions: \"<0\"` if it is chosen by "
                                                     f"name only)")
    for vi, earlier in _shadowed(recipe.variants):
        variant = recipe.variants[vi]
        raise fail(("variants", vi, "versions"), f"variant `{variant.name}` ({variant.versions}) can never be "
                                                 f"selected: every release it admits is admitted by "
                                                 f"{', '.join(f'`{e}`' for e in earlier)} before it (the first variant "
                                                 f"that admits a release is the one used); narrow that range, or "
                                                 f"give this variant `versions: \"<0\"` if it is only a base")
    for name, param in recipe.params.items():
        try:
            check_value(name, param.type, param.default)
        except ParamError as exc:
            raise fail(("params", name, "default"), f"default of {exc.message}") from None
    for loc, step in steps_with_loc():
        unknown = step.placeholders() - set(recipe.params)
        if unknown and recipe.params:  # without parameters, `{{x}}` is code (an f-string's escaped braces)
            raise fail(loc, f"uses undeclared parameter(s) {', '.join(sorted(unknown))}; declare them under `params` "
                            "(`{{NAME}}` is a parameter's placeholder: an f-string's escaped braces around a name, "
                            "`f\"{{x}}\"`, must be split, `f\"{{\" f\"x}}\"`)")
    specs = [(("verify",), recipe.verify)] + [(("variants", vi, "verify"), v.verify)
                                             for vi, v in enumerate(recipe.variants) if v.verify]
    scripts = [(loc + ("probes", i), "probe", p.path) for loc, spec in specs for i, p in enumerate(spec.probes)]
    scripts += [(loc + ("shims", i), "shim", path) for loc, spec in specs for i, path in enumerate(spec.shims)]
    for loc, kind, path in scripts:
        real = (recipe.folder / path).resolve()
        if not ry.inside(recipe.folder, path) or not real.is_relative_to(recipe.folder.resolve()):
            raise fail(loc, f"{kind} `{path}` leaves the recipe's folder")
        if not real.is_file():
            raise fail(loc, f"{kind} `{path}` not found in {recipe.folder}")


def _admitting_none(variants, target_versions: str | None) -> list[int]:
    """The indexes of the variants that admit none of the sample releases (`_samples`) within the recipe's range: a
    base for overlays (`versions: "<0"`), or a range written wrong (`>=0.5.13,<0.5.3`)."""
    from packaging.specifiers import SpecifierSet

    within = SpecifierSet(target_versions or "")
    named = {v for v in _samples(variants, extra=(target_versions or "",)) if within.contains(v, prereleases=True)}
    return [i for i, variant in enumerate(variants) if not any(variant.admits(v) for v in named)]


def _samples(variants, extra: tuple[str, ...] = ()) -> set:
    """Sample releases: every version the variants' specifiers name, the same with `.post1` and `.1` (inside the
    range above it), the next major, and one below them all."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    named: set[Version] = {Version("0"), Version("0.0.0.post1")}
    for versions in [*(v.versions for v in variants), *extra]:
        for spec in SpecifierSet(versions):
            try:
                v = Version(spec.version.rstrip(".*"))
            except InvalidVersion:
                continue
            named |= {v, Version(f"{v.base_version}.post1"), Version(f"{v.base_version}.1"),
                      Version(f"{v.major + 1}")}
            if v.post is not None:  # `>0.5.5.post1,<0.5.5.post3` admits 0.5.5.post2 only
                named.add(Version(f"{v.base_version}.post{v.post + 1}"))
    return named


def _shadowed(variants) -> list[tuple[int, list[str]]]:
    """(index, earlier variants' names) of each variant that admits releases, all of which an earlier variant admits
    too: `select` takes the first that admits a release, so it is never chosen. Judged on sample releases: every
    version its specifiers name, the same with `.post1` (inside the range above it), and one below them all and one
    above."""
    named = _samples(variants)
    out = []
    for i, variant in enumerate(variants):
        mine = [v for v in named if variant.admits(v)]
        if not mine:
            continue  # admits no release: a base for overlays (`versions: "<0"`)
        covering = [e for e in variants[:i] if any(e.admits(v) for v in mine)]
        if all(any(e.admits(v) for e in variants[:i]) for v in mine):
            out.append((i, [e.name for e in covering]))
    return out
