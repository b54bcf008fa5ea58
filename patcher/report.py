"""The only module that imports rich: consoles, progress, diffs, tables, errors, markdown and JSON for the CLI.

Where output goes:

- stdout carries what a command produces: a diff, a table of results, JSON (`--json`), markdown (`--format
  markdown`). `--quiet` silences the human-readable part; JSON and markdown were asked for and are always written.
- stderr carries progress (a spinner, only on a colour terminal), summaries and notes (silenced by `--quiet`) and
  errors (never silenced).

`NO_COLOR` (any non-empty value) turns off every escape sequence: no colour, no bold, no spinner, even when
`FORCE_COLOR` or a terminal would allow them (https://no-color.org).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from rich.console import Console
from rich.markup import escape
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from .errors import SpecpatchError
from .results import ApplyOutcome, CheckState, CheckStatus, ExitCode, FileBytes, FileVerdict, StepStatus, dumps


def no_color() -> bool:
    """True when the NO_COLOR convention asks for plain output."""
    return bool(os.environ.get("NO_COLOR"))


#: what a recipe, a target or a probe may put in a name or a message that must not reach a terminal as itself:
#: C0 controls but the line feed and the tab (ESC starts a terminal's escape sequences; a carriage return or a
#: backspace overwrites what was printed), DEL, C1 controls, and the bidirectional overrides and isolates that
#: reorder what a reader sees ("trojan source")
_UNPRINTABLE = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x09), *range(0x0b, 0x20), 0x7f, *range(0x80, 0xa0))}
_UNPRINTABLE.update({c: f"\\u{c:04x}" for c in (0x061c, 0x200e, 0x200f, *range(0x202a, 0x202f),
                                                 *range(0x2066, 0x206a))})


def printable(text: str) -> str:
    """`text` with every control character (and bidirectional control) written as a visible escape (`\\x1b`)."""
    return text.translate(_UNPRINTABLE)


class SafeConsole(Console):
    """A console that writes the text it is given with its control characters made visible (`printable`): a step
    name, an anchor, a path or a probe's output cannot move the cursor, recolour, retitle or clear the terminal,
    nor hide what was printed. Rich's own control segments (a spinner's cursor moves) and styles pass as they are."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(seg if seg.control else Segment(printable(seg.text), seg.style)
                                      for seg in buffer)

    def on_broken_pipe(self) -> None:
        """The reader closed the pipe (`specpatch show | head`): rich exits 1, the code of a bug in specpatch; this
        is 128 + SIGPIPE, as for any program a closed pipe stops (its output silenced as rich does)."""
        try:
            super().on_broken_pipe()
        except SystemExit:
            raise SystemExit(int(ExitCode.PIPE_CLOSED)) from None


def make_console(*, stderr: bool = False, quiet: bool = False) -> Console:
    """A console that respects NO_COLOR (no escape sequence at all) and plain pipes (no colour when redirected)."""
    plain = no_color()
    console = SafeConsole(stderr=stderr, quiet=quiet, no_color=plain, color_system=None if plain else "auto",
                      highlight=False, soft_wrap=True)
    if not console.is_terminal and not os.environ.get("COLUMNS"):
        # logs and pipes: no width at all, so that no table cuts or folds a name, a path or a hash that someone
        # will grep for (rich's default of 80 columns would end them in "…"); tables are as wide as their content
        console.width = PIPE_WIDTH
    return console


PIPE_WIDTH = 100_000  #: the width of a console that is not a terminal: wide enough never to cut


def release_of(target: Any) -> str:
    """`sglang 0.5.9`, or `sglang (unknown release)`."""
    return f"{target.package} {target.version or '(unknown release)'}"


def release_source(target: Any) -> str:
    """` [release 0.5.9 from sglang-0.5.9.dist-info]`: the release and where it came from, ending every report."""
    return f" [release {target.version} from {target.version_source}]" if target.version is not None else ""


@dataclass
class UI:
    """The consoles of one CLI command and the user's choice of detail."""

    out: Console  #: stdout, silenced by --quiet
    info: Console  #: stderr for progress, summaries and notes, silenced by --quiet
    err: Console  #: stderr for errors, never silenced
    failures: Console  #: stdout for failed results (a failing fixture case), never silenced
    quiet: bool = False
    verbose: bool = False

    @property
    def animated(self) -> bool:
        """A spinner is shown only on an interactive colour terminal, never with --quiet or NO_COLOR."""
        c = self.info
        return not self.quiet and c.is_terminal and not c.is_dumb_terminal and c.color_system is not None

    @contextlib.contextmanager
    def status(self, message: str) -> Iterator[Any]:
        """A transient spinner with the elapsed time on stderr while a long step runs (downloads, verifies).

        Yields a callable that replaces the message. Off a terminal nothing is drawn (with --verbose, the message is
        printed once, so that logs show what took the time)."""
        if not self.animated:
            if self.verbose and not self.quiet:
                self.info.print(f"{escape(message)} ...", style="dim")
            yield lambda text: None
            return
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=self.info,
                      transient=True) as progress:
            task = progress.add_task(escape(message), total=None)
            yield lambda text: progress.update(task, description=escape(text))

    def error(self, err: SpecpatchError) -> None:
        print_error(self.err, err)

    def summary(self, ok: bool, message: str) -> None:
        """The last line of a command: green on success (silenced by --quiet), red on failure (always shown)."""
        if ok:
            self.info.print(f"[green]{escape(message)}[/green]")
        else:
            self.err.print(f"[red]{escape(message)}[/red]")


def make_ui(*, quiet: bool = False, verbose: bool = False) -> UI:
    return UI(out=make_console(quiet=quiet), info=make_console(stderr=True, quiet=quiet),
              err=make_console(stderr=True), failures=make_console(), quiet=quiet, verbose=verbose and not quiet)


def print_json(data: Any) -> None:
    """Machine-readable output: plain JSON on stdout, never wrapped or coloured."""
    sys.stdout.write(dumps(data) + "\n")
    sys.stdout.flush()


def print_diff(console: Console, diff: str) -> None:
    """A unified diff, coloured on a colour terminal; byte-identical text otherwise (pipes, NO_COLOR)."""
    if console.quiet or not diff:
        return
    if not console.is_terminal or console.color_system is None:
        console.file.write(diff)
        console.file.flush()
        return
    for line in diff.splitlines():
        style = ""
        if line.startswith(("+++", "---", "diff --git")):
            style = "bold"
        elif line.startswith("+"):
            style = "green"
        elif line.startswith("-"):
            style = "red"
        elif line.startswith("@@"):
            style = "cyan"
        console.print(Text(line, style=style))


def print_error(console: Console, err: SpecpatchError) -> None:
    """`Error: title`, the location, the message, near candidates, details and a `Help:` hint (STYLE.md)."""
    console.print(Text.assemble(("Error: ", "bold red"), (err.title, "bold")))
    where = _where(err.location)
    if where:
        console.print(Text(f"  {where}"))
    console.print(Text(f"  {err.message}"))
    if err.location.anchor and err.location.anchor not in err.message:
        console.print(Text(f"  anchor: {err.location.anchor}"))
    if err.candidates:
        console.print(Text("  near: " + ", ".join(c.render() for c in err.candidates)))
    if err.details:
        for line in err.details.rstrip().splitlines():
            console.print(Text(f"    {line}"))
    if err.hint:
        console.print(Text.assemble(("Help: ", "bold cyan"), err.hint))


def _where(location: Any) -> str:
    """The location, without the recipe when it is the file itself (a recipe error): `r.yaml:30 [step 2]`."""
    if location.recipe is not None and location.recipe == location.file:
        from dataclasses import replace

        location = replace(location, recipe=None)
    return location.render()


def print_internal_error(console: Console, exc: BaseException, *, traceback: bool) -> None:
    """An exception that is not a SpecpatchError is a bug: say so, with a way to report it."""
    console.print(Text.assemble(("Error: ", "bold red"), ("internal error (a bug in specpatch)", "bold")))
    console.print(Text(f"  {type(exc).__name__}: {exc}"))
    if traceback:
        import traceback as tb

        console.print(Text("".join(tb.format_exception(exc)).rstrip()))
        hint = "please report it with the traceback above and the command you ran"
    else:
        hint = "run the command again with `specpatch --verbose ...` for the traceback, and report it"
    console.print(Text.assemble(("Help: ", "bold cyan"), hint))


# --------------------------------------------------------------------------------------------------- tables


_STEP_COLORS = {StepStatus.CHANGED: "green", StepStatus.ALREADY_APPLIED: "blue", StepStatus.CANNOT_APPLY: "red"}


def _step_lines(s: Any) -> str:
    if s.lines:
        return f"{s.lines[0]}-{s.lines[1]}" if s.lines[1] != s.lines[0] else str(s.lines[0])
    return f"anchor {s.anchor_line}" if s.anchor_line else ""


def steps_table(steps: Iterable[Any], title: str | None = None, *, verbose: bool = False) -> Table:
    """One row per step: number, name, operation, file, status and the lines of the inserted code."""
    table = Table(title=title, show_lines=False)
    for col in ("#", "step", "operation", "file", "status", "lines") + (("what",) if verbose else ()):
        table.add_column(col, overflow="fold")
    for s in steps:
        row = [str(s.index), escape(s.name or ""), s.op, escape(s.file),
               Text(s.status.words, style=_STEP_COLORS.get(s.status, "")), _step_lines(s)]
        table.add_row(*row, *((escape(s.description),) if verbose else ()))
    return table


def checks_table(checks: Iterable[Any], title: str | None = None) -> Table:
    table = Table(title=title)
    for col in ("check", "name", "status", "time", "message"):
        table.add_column(col, overflow="fold")
    colors = {CheckStatus.PASSED: "green", CheckStatus.FAILED: "red", CheckStatus.TIMEOUT: "red",
              CheckStatus.ENVIRONMENT: "yellow", CheckStatus.SKIPPED: "yellow"}
    for c in checks:
        table.add_row(c.kind, escape(c.name), Text(c.status, style=colors.get(c.status, "")),
                      f"{c.seconds:.1f}s" if getattr(c, "seconds", None) else "", escape(c.message or ""))
    return table


def _check_details(ui: UI, checks: Iterable[Any]) -> None:
    """The output of failed checks (always, on stderr), and of every check with --verbose."""
    for c in checks:
        if c.details and (c.blocking or ui.verbose):
            console = ui.err if c.blocking else ui.info
            console.print(Text(f"{c.kind} {c.name}:", style="bold"))
            console.print(Text(c.details.rstrip()))


# --------------------------------------------------------------------------------------------------- markdown


def _md_cell(text: str) -> str:
    return printable(str(text)).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _fence(text: str) -> str:
    """A backtick fence longer than any run of backticks in `text`, so that code cannot close it."""
    longest, run = 0, 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    return "`" * max(3, longest + 1)


def _counts(diff: str) -> tuple[int, int]:
    lines = diff.splitlines()
    added = sum(1 for line in lines if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in lines if line.startswith("-") and not line.startswith("---"))
    return added, removed


def markdown_report(plan: Any, outcome: str = "") -> str:
    """A pull-request comment: a headline, a table of steps, the errors, and a fenced diff per changed file."""
    version = f"{plan.target.package} {plan.target.version or '(unknown release)'}"
    out = [f"### specpatch: `{plan.recipe.id}` v{plan.recipe.version} on {version}", ""]
    changed = plan.changed_files
    if plan.selection.refuse:
        headline = f"**refused**: {plan.selection.refuse}"
    elif plan.errors:
        headline = f"**cannot apply**: {len(plan.errors)} error(s); nothing would be written"
    elif changed:
        headline = f"**would change** {len(changed)} file(s)" if outcome != ApplyOutcome.CHANGED else \
            f"**changed** {len(changed)} file(s)"
    else:
        headline = "**already applied**: nothing to change"
    if plan.selection.variant:
        headline += f" (variant `{plan.selection.variant}`: {plan.selection.reason})"
    out += [headline, ""]
    if plan.steps:
        out += ["| # | step | operation | file | status | lines |", "|---:|---|---|---|---|---|"]
        for s in plan.steps:
            out.append(f"| {s.index} | {_md_cell(s.name or s.description)} | `{s.op}` | `{_md_cell(s.file)}` | "
                       f"{s.status.words} | {_step_lines(s)} |")
    for err in plan.errors:
        where = _where(err.location)
        line = f"> **{_md_cell(err.title)}**: {_md_cell(err.message)}" + (f" ({_md_cell(where)})" if where else "")
        out += ["", line]
        if err.candidates:
            out.append(f"> near: {_md_cell(', '.join(c.render() for c in err.candidates))}")
        if err.hint:
            out.append(f"> Help: {_md_cell(err.hint)}")
    for f in changed:
        diff = f.diff()
        added, removed = _counts(diff)
        fence = _fence(diff)
        out += ["", f"<details><summary><code>{f.rel}</code> (+{added} −{removed})</summary>", "",
                f"{fence}diff", diff.rstrip("\n"), fence, "", "</details>"]
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------------- commands


def render_list(ui: UI, recipes: list[Any], *, as_json: bool = False) -> None:
    """`specpatch list`: one row per recipe (with --verbose, the file it was loaded from)."""
    if as_json:
        print_json([{"id": r.id, "title": r.title, "versions": r.target.versions, "source": str(r.source)}
                    for r in recipes])
        return
    table = Table("recipe", "title", "releases", *(("file",) if ui.verbose else ()))
    for r in recipes:
        table.add_row(r.id, r.title, f"{r.target.package} {r.target.versions}", *((str(r.source),) if ui.verbose
                                                                                   else ()))
    ui.out.print(table)


def render_show(ui: UI, info: dict[str, Any], source: Any = None, *, as_json: bool = False) -> None:
    """`specpatch show`: the recipe, its parameters, and per variant its releases, steps and checks."""
    if as_json:
        print_json(info)
        return
    out = ui.out
    out.print(f"[bold]{escape(info['id'])}[/bold] (v{info['version']}): {escape(info['title'])}")
    out.print(escape(info["description"].rstrip()))
    out.print(f"target: {escape(info['package'])} {escape(info['versions'])}")
    if ui.verbose:
        out.print(f"file: {escape(str(source))}")
    for name, p in info["params"].items():
        out.print(f"param {escape(name)} ({p['type']}, default {escape(repr(p['default']))}): "
                  f"{escape(p['description'].strip())}")
    for variant in info["variants"]:
        out.print(f"\n[bold]{escape(variant['name'])}[/bold] ({escape(variant['versions'])})"
                  + (f": refuses: {escape(variant['refuse'])}" if variant["refuse"] else ""))
        for i, step in enumerate(variant["steps"], 1):
            out.print(f"  {i}. {escape(step['file'])}: {escape(step['description'])}")
        for check in variant["checks"]:
            out.print(f"  check: {escape(check)}")


def render_apply(ui: UI, result: Any, *, fmt: str = "text") -> None:
    """An ApplyResult: the diff of a dry run, the steps, the checks, the notes and a last line."""
    if fmt == "json":
        print_json(result.to_dict())
        return
    if fmt == "markdown":
        sys.stdout.write(markdown_report(result.plan, result.outcome))
        sys.stdout.flush()
        for e in result.plan.errors + ([result.error] if result.error else []):
            ui.error(e)
        return
    p = result.plan
    if result.recovery:
        _recovered(ui, result.recovery)
    if p.selection.variant:
        ui.info.print(f"variant [bold]{escape(p.selection.variant)}[/bold]: {escape(p.selection.reason)}")
        described = _variant_description(p)
        if described:
            ui.info.print(f"  {escape(described)}")
    if result.dry_run and p.ok and not p.selection.refuse:
        print_diff(ui.out, p.diff())
    if p.steps and (ui.verbose or not result.dry_run or not p.ok):
        ui.info.print(steps_table(p.steps, verbose=ui.verbose))
    for e in p.errors:
        ui.error(e)
    if result.error:
        ui.error(result.error)
    if result.checks:
        (ui.info if result.exit_code == 0 else ui.err).print(checks_table(result.checks))
        _check_details(ui, result.checks)
    for note in result.notes:
        ui.info.print(f"note: {escape(note)}")
    version = release_of(p.target)
    if result.unverified:
        ran = [c for c in result.checks if c.status.ran]
        done = f"checked: {', '.join(sorted({c.kind for c in ran}))}" if ran else "nothing checked"
        changed = (f"applied {p.recipe.id} to {version} ({len(p.changed_files)} file(s)); NOT verified: {done}; "
                   f"did not run: {', '.join(result.unverified)}")
    else:
        kinds = sorted({c.kind for c in result.checks if c.status.ran})
        what = "" if set(kinds) - {"syntax"} else \
            " (syntax only: the recipe declares no import smoke test or probe, or --no-smoke left them out)"
        changed = f"applied {p.recipe.id} to {version} ({len(p.changed_files)} file(s)) and verified{what}"
    messages = {
        ApplyOutcome.WOULD_CHANGE: f"dry run: {len(p.changed_files)} file(s) would change; nothing written",
        ApplyOutcome.ALREADY_APPLIED: f"{p.recipe.id} is already applied to {version}: nothing to do",
        ApplyOutcome.CHANGED: changed,
        ApplyOutcome.CANNOT_APPLY: f"cannot apply {p.recipe.id} to {version}: nothing was written",
        ApplyOutcome.REFUSED: f"{p.recipe.id} refuses {version}: nothing was written",
        ApplyOutcome.VERIFY_FAILED: f"verification failed: {p.recipe.id} was rolled back, the target is unchanged",
    }
    ui.summary(result.exit_code == 0, messages.get(result.outcome, result.outcome) + release_source(p.target))


def _variant_description(p: Any) -> str:
    """The first sentence of the selected variant's description (what it does on this release), if it has one: a
    YAML paragraph wraps its lines anywhere, so the lines are joined first."""
    text = " ".join((p.variant.description or "").split()) if p.variant else ""
    end = re.search(r"[.;](?=\s)", text)
    return text[:end.start() + 1] if end else text


def render_check(ui: UI, result: Any, *, as_json: bool = False) -> None:
    """`check`: the errors, the diff of what would change (or what drifted), the file states, a last line."""
    if as_json:
        print_json(result.to_dict())
        return
    for e in result.plan.errors:
        ui.error(e)
    if result.state in (CheckState.WOULD_CHANGE, CheckState.DRIFT) and result.plan.ok:
        print_diff(ui.out, result.plan.diff())
    if ui.verbose and result.plan.steps:
        ui.info.print(steps_table(result.plan.steps, verbose=True))
    if result.files and (ui.verbose or result.state is CheckState.DRIFT):
        table = Table("file", "state", "recorded sha256", "current sha256")
        colors = {FileBytes.INTACT: "green", FileBytes.MODIFIED: "yellow", FileBytes.MISSING: "red"}
        cut = 12 if ui.err.is_terminal else None  # a log or a pipe gets whole hashes
        for f in result.files:
            table.add_row(escape(f["file"]), Text(f["state"], style=colors.get(f["state"], "")),
                          (f.get("expected_sha256") or "")[:cut], (f.get("sha256") or "-")[:cut])
        (ui.info if result.exit_code == 0 else ui.err).print(table)
    ui.summary(result.exit_code == 0, f"{result.state}: {result.message}" + release_source(result.plan.target))


def render_fixture_result(ui: UI, r: Any) -> None:
    """`specpatch test`: one line per case; a failure with its details (never silenced)."""
    if r.passed:
        mark = "[yellow]UPDATED[/yellow]" if r.updated else "[green]PASS[/green]"
        ui.out.print(f"{mark} {escape(r.case.id)}: {escape(r.message)}")
        if ui.verbose and r.description:
            ui.out.print(f"       {escape(r.description)}", style="dim")
        return
    ui.failures.print(f"[red]FAIL[/red] {escape(r.case.id)}: {escape(r.message)}")
    ui.failures.print(Text(f"     {r.case.folder}"))
    for d in r.details:
        if d.startswith("diff --git"):
            print_diff(ui.failures, d)
        else:
            ui.failures.print(Text(d))


def render_fixture_summary(ui: UI, results: list[Any], where: str) -> int:
    """The last line of `specpatch test`; returns the exit code: 4 when a case failed (the recipe does not do what
    its fixtures say); 2 when there were none, or a case could not be run as written (its recipe does not load, a
    bad case file), which comes first: such a run tested nothing of that case."""
    if not results:
        ui.err.print(f"[yellow]no fixture cases found under {escape(where)}[/yellow] (a case is "
                     f"<fixtures>/<recipe-id>/<case>/before/)")
        return 2
    failed = [r for r in results if not r.passed]
    updated = [r for r in results if r.updated]
    text = f"{len(results) - len(failed)} passed, {len(failed)} failed"
    if updated:
        text += f"; after/ rewritten for {len(updated)} case(s): review with `git diff`"
    bad = [r for r in failed if r.bad_input]
    if bad:
        text += f" ({len(bad)} could not be run as written)"
    ui.summary(not failed, text)
    if bad:
        return int(ExitCode.BAD_INPUT)
    return int(ExitCode.VERIFY_FAILED) if failed else 0


def _recovered(ui: UI, recovery: Any) -> None:
    if recovery:
        ui.info.print(f"[yellow]recovered:[/yellow] {escape(recovery.message)}")


def render_verify(ui: UI, result: Any, *, as_json: bool = False) -> None:
    if as_json:
        print_json(result.to_dict())
        return
    _recovered(ui, result.recovery)
    for r in result.recipes:
        rec = r.record
        ui.out.print(f"[bold]{escape(rec.recipe)}[/bold] v{rec.recipe_version}"
                     + (f" (variant {escape(rec.variant)})" if rec.variant else "")
                     + f" on {escape(rec.package)} {escape(str(rec.release))}, applied {escape(rec.applied_at)}")
        files = Table("file", "state")
        colors = {FileVerdict.INTACT: "green", FileVerdict.DRIFT: "yellow", FileVerdict.LOST: "red"}
        for f in r.files:
            files.add_row(escape(f["file"]), Text(f["state"], style=colors.get(f["state"], "")))
        ui.out.print(files)
        if r.checks:
            ui.out.print(checks_table(r.checks))
        _check_details(ui, r.checks)
        for note in r.notes:
            ui.info.print(f"note: {escape(note)}")
    for note in getattr(result, "notes", []):
        ui.info.print(f"note: {escape(note)}")
    ui.summary(result.exit_code == 0, result.message + release_source(result.target))


def render_rollback(ui: UI, report: Any, *, as_json: bool = False) -> None:
    if as_json:
        print_json(report.to_dict())
        return
    _recovered(ui, report.recovery)
    for retired in report.retired:
        r = retired.record
        ui.info.print(f"note: retired the record of {escape(r.recipe)} (applied {escape(r.applied_at)} to "
                      f"{escape(r.package)} {escape(str(r.release))}): {escape(retired.reason)}; kept in the "
                      f"ledger's history, never replayed")
    for rel in report.restored:
        ui.out.print(f"restored {escape(rel)}")
    for path in report.kept:
        ui.out.print(f"kept your version in {escape(path)}")
    for pyc in report.removed_bytecode:
        ui.out.print(f"removed stale bytecode {escape(pyc)}", style="dim")
    release = f" [release {report.release} from {report.release_source}]" if report.release else ""
    ui.summary(report.exit_code == 0, report.message + release)


def render_status(ui: UI, report: Any, *, as_json: bool = False) -> None:
    if as_json:
        print_json(report.to_dict())
        return
    source = f" (read from {report.version_source})" if report.release and report.version_source else ""
    ui.out.print(f"target {escape(str(report.target))}: {escape(report.package)} "
                 f"{escape(str(report.release or '(unknown release)'))}{escape(source)}")
    for retired in report.retired:
        r = retired.record
        ui.out.print(f"retired (history, never replayed): {escape(r.recipe)} v{r.recipe_version} applied "
                     f"{escape(r.applied_at)} to {escape(str(r.release))}: {escape(retired.reason)}")
    for seq, why in report.stale.items():
        ui.err.print(f"[yellow]stale: entry {seq} no longer describes the tree ({escape(why)}); the next apply, "
                     f"verify or rollback retires it[/yellow]")
    for seq, files in report.edited.items():
        ui.err.print(f"[yellow]edited: entry {seq}'s {', '.join(escape(f) for f in files)} changed since it was applied "
                     f"(`specpatch check` shows the drift; rollback refuses it without --force)[/yellow]")
    if report.pending is not None:
        p = report.pending
        if report.in_progress:
            ui.err.print(f"[yellow]{p.kind} of {escape(p.record.recipe)} in progress, started {escape(p.started)} "
                         f"(pid {p.pid}, which holds the target's lock)[/yellow]")
        else:
            ui.err.print(f"[yellow]unfinished {p.kind} of {escape(p.record.recipe)} started {escape(p.started)} "
                         f"(pid {p.pid}): the next apply, rollback or verify will recover it[/yellow]")
    if not report.applied:
        ui.out.print("no recipe applied")
        return
    table = Table("#", "recipe", "version", "variant", "release", "params", "applied", "files")
    for r in report.applied:
        cut = 10 if ui.out.is_terminal else None  # a log or a pipe gets whole hashes: they are grepped for
        files = "\n".join(f"{f.rel} {f.sha_before[:cut]}→{f.sha_after[:cut]}" for f in r.files)
        params = ", ".join(f"{k}={v}" for k, v in r.params.items())
        table.add_row(str(r.seq), escape(r.recipe), str(r.recipe_version), escape(r.variant or ""),
                      escape(str(r.release)), escape(params), escape(r.applied_at), escape(files))
    ui.out.print(table)


def render_try(ui: UI, result: Any, *, as_json: bool = False) -> None:
    if as_json:
        print_json(result.to_dict())
        return
    if result.apply is not None:
        p = result.apply.plan
        if p.selection.variant:
            ui.info.print(f"variant [bold]{escape(p.selection.variant)}[/bold]: {escape(p.selection.reason)}")
            if _variant_description(p):
                ui.info.print(f"  {escape(_variant_description(p))}")
        print_diff(ui.out, p.diff())
        if p.steps:
            ui.info.print(steps_table(p.steps, verbose=ui.verbose))
        for e in p.errors:
            ui.error(e)
        if result.apply.checks:
            ui.info.print(checks_table(result.apply.checks, title="checks after apply"))
            _check_details(ui, result.apply.checks)
        for note in result.apply.notes if result.folder else ():  # without --keep the scratch tree is gone
            ui.info.print(f"note: {escape(note)}")
    if result.verify is not None:
        for r in result.verify.recipes:
            ui.info.print(checks_table(r.checks, title="specpatch verify"))
            _check_details(ui, r.checks)
    if result.folder:
        ui.info.print(f"patched tree kept in {escape(str(result.folder))}")
    ui.summary(result.exit_code == 0, f"{result.outcome}: {result.message} ({result.seconds:.1f} s)")


def render_import(ui: UI, result: Any, *, as_json: bool = False) -> None:
    """`specpatch import`: what each hunk became, the files it could not touch, and the round trip."""
    if as_json:
        print_json(result.to_dict())
        return
    lifted = result.lifted
    table = Table(title="hunks", show_lines=False)
    for col in ("file", "hunk", "steps"):
        table.add_column(col)
    for h in lifted.hunks:
        ops = ", ".join(dict.fromkeys(h.steps)) if h.lifted else f"[red]not expressed: {escape(h.reason or '')}[/red]"
        if h.lifted and h.note:
            ops = ", ".join([*dict.fromkeys(h.steps), escape(h.note)])
        table.add_row(escape(h.file), escape(h.hunk.header.split("@@")[1].strip()), ops)
    if ui.verbose or not all(h.lifted for h in lifted.hunks):
        ui.info.print(table)
    for path, why in lifted.skipped:
        ui.err.print(f"[red]not lifted[/red]: {escape(path)}: {escape(why)}")
    rt = result.round_trip
    for rel in rt.different:
        ui.err.print(f"[red]round trip differs[/red]: {escape(rel)}")
    for line in rt.errors:
        ui.err.print(f"[red]refused on the base release[/red]: {escape(line)}")
    refused = f", {len(rt.errors)} step{'s' if len(rt.errors) != 1 else ''} refused on the base release" \
        if rt.errors else ""
    blank = rt.blank_whitespace
    for rel, n in blank.items():
        ui.err.print(f"round trip: {escape(rel)} is the patched file but for the spaces on {n} blank "
                     f"line{'s' if n != 1 else ''} the patch adds (left empty: no operation writes them)")
    for rel, n in rt.unmatched.items():
        ui.err.print(f"[red]round trip not judged[/red]: {escape(rel)}: {n} of its hunks do not apply to this "
                     f"release")
    blank_part = f", {len(blank)} identical but for spaces on {sum(blank.values())} blank lines" if blank else ""
    unmatched = rt.unmatched
    unmatched_part = (f", {len(unmatched)} not judged ({sum(unmatched.values())} hunks do not apply to the release)"
                      if unmatched else "")
    skipped = lifted.skipped
    skipped_part = (f"; not lifted: {len(skipped)} file{'s' if len(skipped) != 1 else ''} ("
                    + ", ".join(f"{p}: {why.split(':')[0]}" for p, why in skipped[:3])
                    + (f", {len(skipped) - 3} more" if len(skipped) > 3 else "") + ")") if skipped else ""
    ui.summary(result.exit_code == 0,
               f"wrote {result.recipe}: {lifted.lifted}/{len(lifted.hunks)} hunks as {len(lifted.steps)} steps"
               f"{skipped_part}; round trip: {len(rt.identical)}/{rt.files} files byte-identical{blank_part}"
               f"{unmatched_part}{refused}")


def render_port(ui: UI, result: Any, release: str, *, as_json: bool = False, variant: str | None = None) -> None:
    """`specpatch port`: each step's answer on the release (the steps of `variant`, when the recipe has variants)."""
    if as_json:
        print_json({"release": release, "variant": variant, "steps": [
            {"step": s.index, "name": s.name, "op": s.op, "file": s.file, "status": s.status, "message": s.message,
             "candidates": list(s.candidates)} for s in result.steps],
            "applied": result.count("applied"), "already_upstream": result.count("already_upstream"),
            "upstream_other_form": result.count("upstream_other_form"), "refused": result.count("refused"),
            "skipped": result.count("skipped")})
        return
    table = Table(title=f"steps on {release}" + (f" (variant {variant})" if variant else ""))
    for col in ("step", "name", "status", "why / near"):
        table.add_column(col)
    colour = {"applied": "green", "already_upstream": "cyan", "upstream_other_form": "yellow", "refused": "red",
              "skipped": "magenta"}
    for s in result.steps:
        why = s.message + (f"; near: {', '.join(s.candidates[:3])}" if s.candidates else "")
        table.add_row(str(s.index), escape(s.name or s.op), f"[{colour[s.status]}]{s.status}[/]", escape(why))
    ui.out.print(table)
    refused, other = result.count("refused"), result.count("upstream_other_form")
    ui.summary(refused + other == 0, f"{result.count('applied')} applied, {result.count('already_upstream')} already "
                                     f"upstream, {other} upstream in another form, {refused} refused, "
                                     f"{result.count('skipped')} skipped by the user on {release} (nothing written)")
