"""The typer app: parse options, call the API, render, exit with the report's code. No logic lives here.

Importing this module stays cheap (`specpatch --help` must be fast): rich, libcst, yaml and the recipe model are
imported inside the commands that need them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Iterator, List, Optional

import typer

from .errors import ExitCode, SpecpatchError, UsageError
from .results import exit_code_summary

app = typer.Typer(
    name="specpatch",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)


# --------------------------------------------------------------------------------------------------- completion


def _recipe_folders(extra: list[Path] | None) -> list[Path]:
    """The recipe path without importing the recipe model (completion must answer fast); see recipe.recipe_dirs."""
    here = Path(__file__).resolve().parent
    shipped = here / "recipes" if (here / "recipes").is_dir() else here.parent / "recipes"
    env = [Path(p) for p in os.environ.get("SPECPATCH_RECIPE_PATH", "").split(os.pathsep) if p]
    return [*(extra or []), *env, shipped]


def _complete_recipe(ctx: typer.Context, incomplete: str) -> list[str]:
    names: set[str] = set()
    for folder in _recipe_folders(ctx.params.get("recipe_path")):
        if folder.is_dir():
            names.update(p.stem for p in folder.glob("*.yaml"))
    return sorted(n for n in names if n.startswith(incomplete))


# --------------------------------------------------------------------------------------------------- options


RecipeArg = Annotated[str, typer.Argument(help="a recipe id (`specpatch list`) or the path of a recipe .yaml",
                                          autocompletion=_complete_recipe)]
TargetOpt = Annotated[Optional[Path], typer.Option("--target", "-t", help="checkout, site-packages or package folder")]
PackageOpt = Annotated[Optional[str], typer.Option(
    "--package", help="the package to patch (default: the recipe's, else sglang); without --target, the installed one")]
VersionOpt = Annotated[Optional[str], typer.Option("--assume-version", help="treat the target as this release")]
JsonOpt = Annotated[bool, typer.Option("--json", help="machine-readable output on stdout")]
RecipePathOpt = Annotated[Optional[List[Path]], typer.Option(
    "--recipe-path", help="extra folder of recipes (repeatable; also $SPECPATCH_RECIPE_PATH)")]


def _lock_timeout(value: float) -> float:
    """Seconds, 0 or more (`inf`: wait as long as it takes); NaN and negative values are refused, not passed on."""
    if value != value or value < 0:  # NaN compares unequal to itself
        raise typer.BadParameter(f"{value} is not a number of seconds (0 or more; `inf` waits as long as it takes)")
    return value


LockOpt = Annotated[float, typer.Option("--lock-timeout", help="seconds to wait for another specpatch",
                                        callback=_lock_timeout)]


def _interpreter(value: Optional[str]) -> Optional[str]:
    """A `--python` given as a path is made absolute here (the checks run it from other folders); not resolved, so
    that a virtual environment's `bin/python` link stays that environment's. A bare name is looked up on PATH. Either
    must run as a Python interpreter: a program that does not (a typo, `/bin/true`) would make every check "could not
    run" and the command say "NOT verified" with exit 0."""
    if not value:
        return value
    hint = "give the target environment's interpreter (e.g. /srv/venv/bin/python)"
    if "/" in value or os.sep in value:
        path = Path(value).expanduser().absolute()
        if not path.is_file() or not os.access(path, os.X_OK):
            why = "does not exist" if not path.exists() else "is not an executable file"
            raise typer.BadParameter(f"{path} {why}: {hint}")
        value = str(path)
    elif shutil.which(value) is None:
        raise typer.BadParameter(f"`{value}` is not a command on PATH: {hint}")
    try:
        done = subprocess.run([value, "-c", "import sys; print('python', sys.version_info[0])"], capture_output=True,
                              text=True, timeout=120, stdin=subprocess.DEVNULL)
        runs = done.returncode == 0 and done.stdout.split() == ["python", "3"]
    except (OSError, subprocess.TimeoutExpired):
        runs = False
    if not runs:
        raise typer.BadParameter(f"{value} does not run as a Python 3 interpreter: {hint}")
    return value


PythonOpt = Annotated[Optional[str], typer.Option("--python", help="interpreter of the target's environment",
                                                  callback=_interpreter)]
ParamOpt = Annotated[Optional[List[str]], typer.Option("--param", help="NAME=VALUE (repeatable)")]
NoSmokeOpt = Annotated[bool, typer.Option("--no-smoke", help="skip the import smoke test and probes")]
RequireOpt = Annotated[bool, typer.Option(
    "--require-checks", help="fail (exit 4; apply rolls back) when the import smoke test or a probe could not run "
                             "(no torch, --no-smoke, a skipped probe): for CI gates")]


class Format(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"


class _State:
    quiet = False
    verbose = False


def _version(value: bool) -> None:
    if value:
        from . import __version__

        typer.echo(f"specpatch {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="print errors only (and --json / markdown output)")]
    = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="more detail: step tables, check output, "
                                                                  "tracebacks of internal errors")] = False,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="print the version and exit")] = False,
) -> None:
    """Declarative, verified, reversible source patches for ML serving engines (sglang).

    Exit codes: {exit_codes}.

    NO_COLOR=1 turns colours and spinners off. Shell completion: --install-completion.
    """
    _State.quiet, _State.verbose = quiet, verbose


_main.__doc__ = _main.__doc__.format(exit_codes=exit_code_summary())  # one table: patcher.results.EXIT_CODES


def _ui():
    from .report import make_ui

    return make_ui(quiet=_State.quiet, verbose=_State.verbose)


@contextlib.contextmanager
def reported_errors(ui, as_json: bool = False) -> Iterator[None]:
    """Turn a SpecpatchError into an `Error:`/`Help:` message (or JSON) and its exit code."""
    try:
        try:
            yield
        except OSError as exc:  # the CLI's own writes (--diff-out): the system's refusal, not a bug
            from .errors import os_failure

            raise os_failure(exc, "writing") from None
    except SpecpatchError as err:
        from .report import print_json

        if as_json:
            print_json({"ok": False, "exit_code": int(err.exit_code), "error": err.to_dict()})
        ui.error(err)
        raise typer.Exit(int(err.exit_code)) from None


def _params(values: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values or []:
        if "=" not in item:
            raise UsageError(f"--param expects NAME=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        out[key.strip()] = value
    return out


def _package_of(recipe: str | None, recipe_path: list[Path] | None) -> str | None:
    """The package a named recipe patches, as `apply` reads it (a folder that holds sglang and vllm: `verify R` and
    `rollback R` find R's package without --package); None without a name, or when the recipe cannot be loaded."""
    if recipe is None:
        return None
    from .errors import SpecpatchError
    from .recipe import load_recipe

    try:
        return load_recipe(recipe, recipe_path).target.package
    except SpecpatchError:
        return None


def _target(target: Path | None, package: str | None, assume_version: str | None, python: str | None = None):
    """The target; without --package, sglang, else the one other engine specpatch knows that the folder holds (a
    vLLM tree's `rollback`, `status` or `verify` need not repeat `--package vllm`)."""
    from .errors import TargetError
    from .target import PACKAGES, find_target

    if package is not None or target is None:
        return find_target(target, package=package or "sglang", assume_version=assume_version, python=python)
    try:
        return find_target(target, package="sglang", assume_version=assume_version, python=python)
    except TargetError as exc:
        for other in (p for p in PACKAGES if p != "sglang"):
            try:
                return find_target(target, package=other, assume_version=assume_version, python=python)
            except TargetError:
                continue
        raise exc from None


def _release(target) -> str:
    from .report import release_of

    return release_of(target)


# --------------------------------------------------------------------------------------------------- commands


@app.command("list")
def list_(recipe_path: RecipePathOpt = None, json: JsonOpt = False) -> None:
    """List the available recipes."""
    from . import api
    from .report import render_list

    ui = _ui()
    with reported_errors(ui, json):
        recipes = api.list_recipes(recipe_path)
    render_list(ui, recipes, as_json=json)


@app.command()
def show(recipe: RecipeArg, recipe_path: RecipePathOpt = None, json: JsonOpt = False) -> None:
    """Show what RECIPE changes and which releases it supports."""
    from . import api
    from .report import render_show

    ui = _ui()
    with reported_errors(ui, json):
        loaded = api.load(recipe, recipe_path)
        info = api.describe_recipe(loaded)
    render_show(ui, info, loaded.source, as_json=json)


@app.command()
def schema() -> None:
    """Print the JSON Schema of the recipe format, for editor validation.

    Save it (`specpatch schema > specpatch.schema.json`) and put
    `# yaml-language-server: $schema=specpatch.schema.json` on the first line of a recipe.
    """
    from .recipe import json_schema
    from .results import dumps

    sys.stdout.write(dumps(json_schema()) + "\n")


def _outside_target(path: Path, where, option: str) -> None:
    """Refuse an output file inside the package or its state folder: the diff written over a file that was just
    patched (or over the ledger) would leave the tree broken under an apply that said it was verified."""
    real = Path(os.path.realpath(path))
    for folder in (where.package_dir, where.state_dir):
        if real == Path(os.path.realpath(folder)) or real.is_relative_to(os.path.realpath(folder)):
            raise UsageError(f"{option} {path} is inside {folder}: specpatch writes there only through its "
                             f"transaction; write the diff outside the target")
    # a file the diff cannot go to is found before anything is applied, not after (the apply would stand, unreported)
    folder = real.parent
    if real.is_dir() or not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK) or (
            real.exists() and not os.access(real, os.W_OK)):
        why = "is a folder" if real.is_dir() else f"its folder {folder} does not exist" if not folder.is_dir() \
            else "cannot be written here (permission)"
        raise UsageError(f"{option} {path}: {why}", hint="choose a file specpatch can write; nothing was applied")


@app.command()
def apply(
    recipe: RecipeArg,
    target: TargetOpt = None,
    package: PackageOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="write nothing; print the diff")] = False,
    diff_out: Annotated[Optional[Path], typer.Option("--diff-out", help="also write the diff to FILE")] = None,
    fmt: Annotated[Format, typer.Option("--format", help="text (a diff), json, or markdown (a PR comment)")]
    = Format.text,
    json: JsonOpt = False,
    param: ParamOpt = None,
    assume_version: VersionOpt = None,
    no_smoke: NoSmokeOpt = False,
    require_checks: RequireOpt = False,
    python: PythonOpt = None,
    lock_timeout: LockOpt = 60.0,
    recipe_path: RecipePathOpt = None,
) -> None:
    """Apply RECIPE to the package at TARGET, verify it, and roll everything back if any check fails."""
    from . import api
    from .report import render_apply

    ui = _ui()
    fmt_name = "json" if json else fmt.value
    with reported_errors(ui, fmt_name == "json"):
        loaded = api.load(recipe, recipe_path)
        where = _target(target, package or loaded.target.package, assume_version, python)
        if diff_out is not None:
            _outside_target(diff_out, where, "--diff-out")
        doing = "planning" if dry_run else "applying, then verifying (syntax, import smoke test, probes)"
        with ui.status(f"{loaded.id} on {_release(where)}: {doing}"):
            result = api.apply_recipe(loaded, where, params=_params(param), dry_run=dry_run, smoke=not no_smoke,
                                      python=python, lock_timeout=lock_timeout, require_checks=require_checks)
    written = None
    if diff_out is not None:
        try:
            diff_out.write_text(result.plan.diff(), encoding="utf-8", errors="surrogateescape")
        except OSError as exc:  # the apply stands: it is reported, then what failed
            written = exc
    render_apply(ui, result, fmt=fmt_name)
    if written is not None:
        with reported_errors(ui, fmt_name == "json"):
            from .errors import OSFailure

            raise OSFailure(f"--diff-out {diff_out}: the diff could not be written ({written.strerror or written}); "
                            f"what the report above says was done stands",
                            hint="`specpatch rollback` then `specpatch apply --dry-run`, or `git diff`, shows the diff")
    raise typer.Exit(int(result.exit_code))


@app.command()
def verify(
    recipe: Annotated[Optional[str], typer.Argument(help="an applied recipe (default: all)",
                                                    autocompletion=_complete_recipe)] = None,
    target: TargetOpt = None,
    package: PackageOpt = None,
    json: JsonOpt = False,
    python: PythonOpt = None,
    no_smoke: NoSmokeOpt = False,
    require_checks: RequireOpt = False,
    lock_timeout: LockOpt = 60.0,
    recipe_path: RecipePathOpt = None,
) -> None:
    """Check applied recipes: files intact, syntax, import smoke test, probes ("verified" only if they ran)."""
    from . import api
    from .report import render_verify

    ui = _ui()
    with reported_errors(ui, json):
        where = _target(target, package or _package_of(recipe, recipe_path), None, python)
        with ui.status(f"verifying {recipe or 'the applied recipes'} on {_release(where)} "
                       f"(syntax, import smoke test, probes)"):
            result = api.verify(where, recipe, python=python, smoke=not no_smoke, lock_timeout=lock_timeout,
                                extra_dirs=recipe_path, require_checks=require_checks)
    render_verify(ui, result, as_json=json)
    raise typer.Exit(int(result.exit_code))


@app.command()
def rollback(
    recipe: Annotated[Optional[str], typer.Argument(help="the recipe to roll back (default: the last applied)",
                                                    autocompletion=_complete_recipe)] = None,
    target: TargetOpt = None,
    package: PackageOpt = None,
    force: Annotated[bool, typer.Option("--force", help="restore even files changed since apply (kept aside)")] = False,
    json: JsonOpt = False,
    lock_timeout: LockOpt = 60.0,
    recipe_path: RecipePathOpt = None,
    python: PythonOpt = None,
) -> None:
    """Restore the exact original bytes and modes of the files a recipe changed."""
    from . import api
    from .report import render_rollback

    ui = _ui()
    with reported_errors(ui, json):
        result = api.rollback(_target(target, package or _package_of(recipe, recipe_path), None, python), recipe,
                              force=force, lock_timeout=lock_timeout, extra_dirs=recipe_path)
    render_rollback(ui, result, as_json=json)
    raise typer.Exit(int(result.exit_code))


@app.command()
def status(
    target: TargetOpt = None,
    package: PackageOpt = None,
    json: JsonOpt = False,
    lock_timeout: Annotated[float, typer.Option("--lock-timeout", hidden=True,
                                                help="accepted for old scripts; status takes no lock")] = 60.0,
    python: PythonOpt = None,
) -> None:
    """List the recipes applied to TARGET and any unfinished transaction (reads only: takes no lock)."""
    from . import api
    from .report import render_status

    ui = _ui()
    with reported_errors(ui, json):
        result = api.status(_target(target, package, None, python))
    render_status(ui, result, as_json=json)
    raise typer.Exit(int(result.exit_code))


@app.command()
def check(
    recipe: RecipeArg,
    target: TargetOpt = None,
    package: PackageOpt = None,
    json: JsonOpt = False,
    param: ParamOpt = None,
    assume_version: VersionOpt = None,
    recipe_path: RecipePathOpt = None,
    python: PythonOpt = None,
) -> None:
    """CI gate, writes nothing: exit 0 when RECIPE is applied and intact.

    7: not applied, would change the target; 5: applied, but changed since (drift) or an interrupted transaction;
    3: cannot apply (anchor missing, release refused); 2: bad input.
    """
    from . import api
    from .report import render_check

    ui = _ui()
    with reported_errors(ui, json):
        loaded = api.load(recipe, recipe_path)
        where = _target(target, package or loaded.target.package, assume_version, python)
        with ui.status(f"checking {loaded.id} on {_release(where)}"):
            result = api.check(loaded, where, params=_params(param))
    render_check(ui, result, as_json=json)
    raise typer.Exit(int(result.exit_code))


@app.command("try")
def try_(
    recipe: RecipeArg,
    version: Annotated[str, typer.Option("--version", help="the release to fetch from the registry")] = "0.5.9",
    keep: Annotated[Optional[Path], typer.Option("--keep", help="keep the patched tree in DIR")] = None,
    json: JsonOpt = False,
    param: ParamOpt = None,
    python: PythonOpt = None,
    recipe_path: RecipePathOpt = None,
) -> None:
    """Fetch a pristine release into a scratch folder, apply RECIPE, verify, print the diff and the outcome."""
    from . import api
    from .fetch import fetch_release
    from .report import render_try

    ui = _ui()
    with reported_errors(ui, json):
        loaded = api.load(recipe, recipe_path)
        package = loaded.target.package
        api.check_keep(keep)
        with ui.status(f"fetching {package} {version} (pip download, once; then cached)"):
            fetch_release(package, version)
        with ui.status(f"{loaded.id} on a scratch copy of {package} {version}: applying, then verifying "
                       f"(import smoke test, probes)"):
            result = api.try_recipe(loaded, version, keep=keep, params=_params(param), python=python)
    render_try(ui, result, as_json=json)
    raise typer.Exit(int(result.exit_code))


@app.command("import")
def import_(
    patch: Annotated[Path, typer.Argument(help="a unified diff (git or GNU), paths a/python/PKG/... or package-relative")],
    release: Annotated[str, typer.Option("--release", help="the release the patch was made against (fetched)")],
    package: Annotated[Optional[str], typer.Option("--package", help="the package the patch changes (default: the "
                                                   "one its paths name, `a/vllm/...`; else sglang)")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="the recipe to write (NAME.yaml; its code goes "
                                                "in NAME/ beside it)")] = None,
    json: JsonOpt = False,
) -> None:
    """Lift PATCH into a recipe of semantic steps, and check that it reproduces the patched files byte for byte."""
    from . import importer
    from .report import render_import

    ui = _ui()
    with reported_errors(ui, json):
        with ui.status(f"lifting {patch.name} on {package or 'its package'} {release}"):
            result = importer.import_patch(patch, package=package, release=release, out=out)
    render_import(ui, result, as_json=json)
    raise typer.Exit(result.exit_code)


@app.command()
def port(
    recipe: RecipeArg,
    release: Annotated[str, typer.Option("--release", help="the release to port to (fetched from the registry)")],
    skip: Annotated[Optional[List[str]], typer.Option(
        "--skip", help="a step the team does not port: its name or a shell pattern of names (e.g. "
        "'managers-tp-worker-h2-*'); repeatable; reported as skipped, and steps that need it are refused")] = None,
    skip_file: Annotated[Optional[Path], typer.Option(
        "--skip-file", help="a file of such names or patterns, one a line (# starts a comment)")] = None,
    base: Annotated[Optional[str], typer.Option(
        "--base", help="the release the recipe was made on (default: X of the recipe's, or the variant's, "
        "`>=X`), fetched to tell upstream's lines from lines the change copies")] = None,
    variant: Annotated[Optional[str], typer.Option(
        "--variant", help="plan this variant's steps (default: the variant whose range admits the release); "
        "how a variant carries over to a release its range does not cover yet")] = None,
    json: JsonOpt = False,
    recipe_path: RecipePathOpt = None,
) -> None:
    """Plan RECIPE step by step on a pristine release: applied, already upstream, upstream in another form,
    skipped (--skip) or refused (with near candidates, or the step it depends on). With variants, the release's
    variant is planned, or the one --variant names (to carry it to a new release)."""
    from . import api, importer
    from .fetch import fetch_release
    from .report import render_port

    ui = _ui()
    with reported_errors(ui, json):
        loaded = api.load(recipe, recipe_path)
        package = loaded.target.package
        skips = [*(skip or []), *(importer.read_skip_file(skip_file) if skip_file else [])]
        selection = importer.port_selection(loaded, release, variant)
        base = base or importer.base_release(loaded, selection)
        planned = f"{loaded.id}" + (f" (variant {selection.variant})" if selection.variant else "")
        with ui.status(f"planning {planned} on {package} {release}"):
            base_dir = fetch_release(package, base) / package if base else None
            result = importer.port(loaded, fetch_release(package, release) / package, skip=skips,
                                   base_dir=base_dir, selection=selection)
    render_port(ui, result, f"{package} {release}", as_json=json, variant=selection.variant)
    blocked = result.count("refused") or result.count("upstream_other_form")
    raise typer.Exit(int(ExitCode.CANNOT_APPLY if blocked else ExitCode.OK))


@app.command()
def test(
    recipe: Annotated[Optional[str], typer.Argument(help="a recipe (default: every recipe with fixtures)",
                                                    autocompletion=_complete_recipe)] = None,
    fixtures: Annotated[Optional[Path], typer.Option(
        "--fixtures", help="fixture root: <root>/<recipe-id>/<case>/{before,after}/ (default: the `fixtures/` "
        "folder in a --recipe-path folder, or beside it, else the shipped ones)")]
    = None,
    update: Annotated[bool, typer.Option("--update", help="rewrite after/ from the current output (review with "
                                                          "`git diff`)")] = False,
    recipe_path: RecipePathOpt = None,
) -> None:
    """Run the before/after fixture cases of recipes byte-exactly (twice: the second run must change nothing)."""
    from . import testing
    from .report import render_fixture_result, render_fixture_summary

    ui = _ui()
    # the recipes of another checkout are tested against that checkout's cases (`recipes/` beside `fixtures/`), and
    # never update the shipped ones
    extra = _recipe_folders(recipe_path)[:-1]  # --recipe-path, then $SPECPATCH_RECIPE_PATH
    # `team-recipes/fixtures/` (the layout docs/writing-recipes.md shows), else `fixtures/` beside the recipe folder
    beside = [f for d in extra for f in (d / "fixtures", d.parent / "fixtures") if f.is_dir()]
    root = fixtures or (beside[0] if beside else testing.FIXTURES_DIR)
    results = []
    with reported_errors(ui):
        if fixtures is not None and not fixtures.is_dir():
            raise UsageError(f"--fixtures {fixtures}: no such folder")
        if update and extra and fixtures is None and not beside:
            raise UsageError(f"--update with --recipe-path and no `fixtures/` folder in or beside it would rewrite the "
                             f"shipped cases ({testing.FIXTURES_DIR}) from another tree's recipes: pass --fixtures DIR")
        with ui.status("running fixture cases") as say:
            for result in testing.iter_results(recipe, fixtures_root=root, update=update, recipe_dirs=recipe_path):
                results.append(result)
                render_fixture_result(ui, result)
                say(f"running fixture cases ({len(results)} done)")
    where = f"{root}" + (f" for `{recipe}`" if recipe else "")
    raise typer.Exit(render_fixture_summary(ui, results, where))


def run() -> None:
    """The `specpatch` command (console script, `python -m patcher`): `main`, then exit without the interpreter's
    teardown. Every command has released its lock, closed its files and removed its scratch folders by the time
    `main` returns; what is left is freeing objects one by one and running no handler specpatch registered, which
    after a plan of sglang's files costs 10% of a dry run. The output streams are flushed first."""
    silenced = _to_devnull()
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code
    if code is not None and not isinstance(code, int):
        sys.stderr.write(f"{code}\n")
        code = 1
    # the reader closed the pipe (`specpatch --help | head`; click exits 1 there, the code of a bug in specpatch):
    # 128 + SIGPIPE, as for any program a closed pipe stops (the consoles say so themselves: SafeConsole)
    # (rich's help console points the output at /dev/null and exits 1)
    closed = type(sys.stdout).__name__ == "PacifyFlushWrapper" or (_to_devnull() and not silenced)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:
            closed = True
        except (OSError, ValueError):  # the output could not be written: what was said reached no one
            code = code or int(ExitCode.SYSTEM)
    os._exit(int(ExitCode.PIPE_CLOSED) if closed and code in (None, 0, 1) else code or 0)


def _to_devnull() -> bool:
    """Whether the standard output is /dev/null now."""
    try:
        return os.path.samestat(os.fstat(1), os.stat(os.devnull))
    except OSError:
        return False


def _on_signal(signum: int, frame) -> None:
    from .errors import Interrupted

    raise Interrupted(signum)


def _catch_signals() -> None:
    """SIGINT and SIGTERM raise `Interrupted` (not KeyboardInterrupt, which typer turns into a silent exit 130
    before anyone can say what was finished or undone). Only the main thread may set handlers."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, _on_signal)


#: the options of the app itself, also accepted after the command (`specpatch check R --quiet`, as people write them)
_GLOBAL_FLAGS = ("--quiet", "-q", "--verbose", "-v")


def _hoisted(argv: list[str]) -> list[str]:
    """`argv` with the app's own flags that follow the command moved before it (up to a `--`)."""
    end = argv.index("--") if "--" in argv else len(argv)
    flags = [a for a in argv[1:end] if a in _GLOBAL_FLAGS]
    if not flags or not argv or argv[0].startswith("-"):
        return argv
    rest = [a for a in argv[1:end] if a not in _GLOBAL_FLAGS]
    return [*flags, argv[0], *rest, *argv[end:]]


def main() -> None:
    """Entry point for callers that want Python's normal exit (tests, embedding): Ctrl-C (SIGINT) or SIGTERM prints
    what was interrupted and what the transaction in progress did about it, and exits 128 + the signal (130,
    143); an unexpected exception is reported as a bug, exit 1."""
    from .errors import Interrupted

    _catch_signals()
    try:
        app(args=_hoisted(sys.argv[1:]), prog_name="specpatch")
    except (Interrupted, KeyboardInterrupt) as exc:
        name = exc.name if isinstance(exc, Interrupted) else "SIGINT"
        notes = getattr(exc, "notes", None) or [
            "nothing is left half-written (a transaction in progress is finished or undone first)"]
        sys.stderr.write(f"interrupted ({name}): " + "; ".join(notes) + "\n")
        sys.exit(128 + (exc.signum if isinstance(exc, Interrupted) else 2))
    except Exception as exc:  # noqa: BLE001 - the last line of defence: a bug gets a message, not a bare traceback
        from .report import make_console, print_internal_error

        print_internal_error(make_console(stderr=True), exc, traceback=_State.verbose)
        sys.exit(int(ExitCode.INTERNAL))
