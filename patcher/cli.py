"""The typer app: parse options, call the API, render, exit with the report's code. No logic lives here."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Iterator, List, Optional

import typer
from typing_extensions import Annotated

from .errors import ExitCode, SpecpatchError, UsageError

app = typer.Typer(
    name="specpatch",
    help="Declarative, verified, reversible source patches for ML serving engines (sglang).",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)

TargetOpt = Annotated[Optional[Path], typer.Option("--target", "-t", help="checkout, site-packages or package folder")]
PackageOpt = Annotated[str, typer.Option("--package", help="the package to patch; without --target, the installed one")]
VersionOpt = Annotated[Optional[str], typer.Option("--assume-version", help="treat the target as this release")]
JsonOpt = Annotated[bool, typer.Option("--json", help="machine-readable output on stdout")]
RecipePathOpt = Annotated[Optional[List[Path]], typer.Option("--recipe-path", help="extra folder of recipes")]
LockOpt = Annotated[float, typer.Option("--lock-timeout", help="seconds to wait for another specpatch")]
PythonOpt = Annotated[Optional[str], typer.Option("--python", help="interpreter of the target's environment")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="only errors")]


class _State:
    quiet = False
    verbose = False


@app.callback()
def _main(
    quiet: QuietOpt = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="more detail")] = False,
) -> None:
    _State.quiet, _State.verbose = quiet, verbose


def _consoles():
    from .report import make_console

    return make_console(quiet=_State.quiet), make_console(stderr=True)


@contextlib.contextmanager
def reported_errors(as_json: bool = False) -> Iterator[None]:
    """Turn a SpecpatchError into an `Error:`/`Help:` message (or JSON) and its exit code."""
    try:
        yield
    except SpecpatchError as err:
        from .report import print_error, print_json

        out, errc = _consoles()
        if as_json:
            print_json(out, {"ok": False, "exit_code": int(err.exit_code), "error": err.to_dict()})
        else:
            print_error(errc, err)
        raise typer.Exit(int(err.exit_code)) from None


def _params(values: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values or []:
        if "=" not in item:
            raise UsageError(f"--param expects NAME=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        out[key.strip()] = value
    return out


def _target(target: Path | None, package: str, assume_version: str | None):
    from .target import find_target

    return find_target(target, package=package, assume_version=assume_version)


@app.command("list")
def list_(recipe_path: RecipePathOpt = None, json: JsonOpt = False) -> None:
    """List the available recipes."""
    from . import api
    from .report import print_json

    out, _ = _consoles()
    with reported_errors(json):
        recipes = api.list_recipes(recipe_path)
    if json:
        print_json(out, [{"id": r.id, "title": r.title, "versions": r.target.versions, "source": str(r.source)}
                         for r in recipes])
        return
    from rich.table import Table

    table = Table("recipe", "title", "releases")
    for r in recipes:
        table.add_row(r.id, r.title, f"{r.target.package} {r.target.versions}")
    out.print(table)


@app.command()
def show(recipe: str, recipe_path: RecipePathOpt = None, json: JsonOpt = False) -> None:
    """Show what RECIPE changes and which releases it supports."""
    from . import api
    from .report import print_json

    out, _ = _consoles()
    with reported_errors(json):
        info = api.describe_recipe(api.load(recipe, recipe_path))
    if json:
        print_json(out, info)
        return
    out.print(f"[bold]{info['id']}[/bold] (v{info['version']}): {info['title']}")
    out.print(info["description"].rstrip())
    out.print(f"target: {info['package']} {info['versions']}")
    for name, p in info["params"].items():
        out.print(f"param {name} ({p['type']}, default {p['default']!r}): {p['description']}")
    for variant in info["variants"]:
        out.print(f"\n[bold]{variant['name']}[/bold] ({variant['versions']})"
                  + (f": refuses: {variant['refuse']}" if variant["refuse"] else ""))
        for i, step in enumerate(variant["steps"], 1):
            out.print(f"  {i}. {step['file']}: {step['description']}")
        for check in variant["checks"]:
            out.print(f"  check: {check}")


@app.command()
def schema() -> None:
    """Print the JSON Schema of the recipe format (for editor validation)."""
    import json

    from .recipe import json_schema

    sys.stdout.write(json.dumps(json_schema(), indent=2) + "\n")


@app.command()
def apply(
    recipe: str,
    target: TargetOpt = None,
    package: PackageOpt = "sglang",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="write nothing; print the diff")] = False,
    diff_out: Annotated[Optional[Path], typer.Option("--diff-out", help="also write the diff to FILE")] = None,
    fmt: Annotated[str, typer.Option("--format", help="text | json | markdown")] = "text",
    json: JsonOpt = False,
    param: Annotated[Optional[List[str]], typer.Option("--param", help="NAME=VALUE")] = None,
    assume_version: VersionOpt = None,
    no_smoke: Annotated[bool, typer.Option("--no-smoke", help="skip the import smoke test and probes")] = False,
    python: PythonOpt = None,
    lock_timeout: LockOpt = 60.0,
    recipe_path: RecipePathOpt = None,
) -> None:
    """Apply RECIPE to the package at TARGET, verify it, and roll everything back if any check fails."""
    from . import api
    from .report import render_apply

    fmt = "json" if json else fmt
    if fmt not in ("text", "json", "markdown"):
        raise typer.BadParameter("--format must be text, json or markdown")
    out, errc = _consoles()
    with reported_errors(fmt == "json"):
        result = api.apply_recipe(
            api.load(recipe, recipe_path), _target(target, package, assume_version), params=_params(param),
            dry_run=dry_run, smoke=not no_smoke, python=python, lock_timeout=lock_timeout,
        )
        if diff_out is not None:
            diff_out.write_text(result.plan.diff(), encoding="utf-8", errors="surrogateescape")
    render_apply(out, errc, result, fmt=fmt, verbose=_State.verbose)
    raise typer.Exit(int(result.exit_code))


@app.command()
def verify(
    recipe: Annotated[Optional[str], typer.Argument(help="an applied recipe (default: all)")] = None,
    target: TargetOpt = None,
    package: PackageOpt = "sglang",
    json: JsonOpt = False,
    python: PythonOpt = None,
    no_smoke: Annotated[bool, typer.Option("--no-smoke", help="skip the import smoke test and probes")] = False,
    lock_timeout: LockOpt = 60.0,
) -> None:
    """Check applied recipes: files intact, syntax, import smoke test, probes."""
    from . import api
    from .report import render_verify

    out, errc = _consoles()
    with reported_errors(json):
        result = api.verify(_target(target, package, None), recipe, python=python, smoke=not no_smoke,
                            lock_timeout=lock_timeout)
    render_verify(out, errc, result, as_json=json)
    raise typer.Exit(int(result.exit_code))


@app.command()
def rollback(
    recipe: Annotated[Optional[str], typer.Argument(help="the recipe to roll back (default: the last applied)")] = None,
    target: TargetOpt = None,
    package: PackageOpt = "sglang",
    force: Annotated[bool, typer.Option("--force", help="restore even files changed since apply (kept aside)")] = False,
    json: JsonOpt = False,
    lock_timeout: LockOpt = 60.0,
) -> None:
    """Restore the exact original bytes and modes of the files a recipe changed."""
    from . import api
    from .report import render_rollback

    out, errc = _consoles()
    with reported_errors(json):
        result = api.rollback(_target(target, package, None), recipe, force=force, lock_timeout=lock_timeout)
    render_rollback(out, errc, result, as_json=json)
    raise typer.Exit(int(result.exit_code))


@app.command()
def status(
    target: TargetOpt = None,
    package: PackageOpt = "sglang",
    json: JsonOpt = False,
    lock_timeout: LockOpt = 60.0,
) -> None:
    """List the recipes applied to TARGET and any unfinished transaction."""
    from . import api
    from .report import render_status

    out, errc = _consoles()
    with reported_errors(json):
        result = api.status(_target(target, package, None), lock_timeout=lock_timeout)
    render_status(out, errc, result, as_json=json)
    raise typer.Exit(int(result.exit_code))


@app.command()
def check(
    recipe: str,
    target: TargetOpt = None,
    package: PackageOpt = "sglang",
    json: JsonOpt = False,
    param: Annotated[Optional[List[str]], typer.Option("--param", help="NAME=VALUE")] = None,
    assume_version: VersionOpt = None,
    recipe_path: RecipePathOpt = None,
) -> None:
    """CI gate, no writes: 0 when RECIPE is applied and intact; distinct codes for would-change, drift, cannot-apply."""
    from . import api
    from .report import render_check

    out, errc = _consoles()
    with reported_errors(json):
        result = api.check(api.load(recipe, recipe_path), _target(target, package, assume_version),
                           params=_params(param))
    render_check(out, errc, result, as_json=json)
    raise typer.Exit(int(result.exit_code))


@app.command("try")
def try_(
    recipe: str,
    version: Annotated[str, typer.Option("--version", help="the release to fetch from the registry")] = "0.5.9",
    keep: Annotated[Optional[Path], typer.Option("--keep", help="keep the patched tree in DIR")] = None,
    json: JsonOpt = False,
    param: Annotated[Optional[List[str]], typer.Option("--param", help="NAME=VALUE")] = None,
    python: PythonOpt = None,
    recipe_path: RecipePathOpt = None,
) -> None:
    """Fetch a pristine release into a scratch folder, apply RECIPE, verify, print the diff and the outcome."""
    from . import api
    from .report import render_try

    out, errc = _consoles()
    with reported_errors(json):
        result = api.try_recipe(api.load(recipe, recipe_path), version, keep=keep, params=_params(param),
                                python=python)
    render_try(out, errc, result, as_json=json)
    raise typer.Exit(int(result.exit_code))


@app.command()
def test(
    recipe: Annotated[Optional[str], typer.Argument(help="a recipe (default: all with fixtures)")] = None,
    fixtures: Annotated[Optional[Path], typer.Option("--fixtures", help="fixture root (default: shipped)")] = None,
    update: Annotated[bool, typer.Option("--update", help="rewrite after/ from the current output")] = False,
    recipe_path: RecipePathOpt = None,
) -> None:
    """Run the before/after fixture cases of recipes byte-exactly (twice: the second run must change nothing)."""
    from . import testing
    from .report import render_fixture_results

    out, errc = _consoles()
    with reported_errors(False):
        results = testing.run_cases(recipe, fixtures_root=fixtures, update=update, recipe_dirs=recipe_path)
    code = render_fixture_results(out, errc, results)
    raise typer.Exit(code)


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
