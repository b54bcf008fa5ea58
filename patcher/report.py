"""The only module that imports rich: diffs, tables, errors and JSON for the CLI."""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Iterable

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from .errors import SpecpatchError


def make_console(*, stderr: bool = False, quiet: bool = False) -> Console:
    """A console that respects NO_COLOR and plain pipes (no colour codes in redirected output)."""
    return Console(stderr=stderr, no_color=bool(os.environ.get("NO_COLOR")), quiet=quiet, highlight=False,
                   soft_wrap=True)


def print_json(console: Console, data: Any) -> None:
    """Machine-readable output: plain JSON on stdout, never wrapped or coloured."""
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    sys.stdout.flush()


def print_diff(console: Console, diff: str) -> None:
    """A unified diff, coloured on a terminal; byte-identical text when piped."""
    if not console.is_terminal or console.no_color:
        sys.stdout.write(diff)
        sys.stdout.flush()
        return
    for line in diff.splitlines():
        style = None
        if line.startswith(("+++", "---", "diff --git")):
            style = "bold"
        elif line.startswith("+"):
            style = "green"
        elif line.startswith("-"):
            style = "red"
        elif line.startswith("@@"):
            style = "cyan"
        console.print(Text(line, style=style or ""))


def print_error(console: Console, err: SpecpatchError) -> None:
    """`Error: title` + location + message + candidates + `Help:` hint (the format of STYLE.md)."""
    console.print(Text.assemble(("Error: ", "bold red"), (err.title, "bold")))
    where = err.location.render()
    if where:
        console.print(f"  {escape(where)}")
    console.print(f"  {escape(err.message)}")
    if err.location.anchor and err.location.anchor not in err.message:
        console.print(f"  anchor: {escape(err.location.anchor)}")
    if err.candidates:
        console.print("  near: " + ", ".join(escape(c.render()) for c in err.candidates))
    if err.details:
        for line in err.details.rstrip().splitlines():
            console.print(f"    {escape(line)}")
    if err.hint:
        console.print(Text.assemble(("Help: ", "bold cyan"), err.hint))


def steps_table(steps: Iterable[Any], title: str | None = None) -> Table:
    table = Table(title=title, show_lines=False)
    for col in ("#", "step", "file", "status", "lines"):
        table.add_column(col, overflow="fold")
    colors = {"changed": "green", "already_applied": "blue", "cannot_apply": "red"}
    for s in steps:
        lines = f"{s.lines[0]}-{s.lines[1]}" if s.lines else (f"anchor {s.anchor_line}" if s.anchor_line else "")
        table.add_row(str(s.index), escape(s.name or s.description), escape(s.file),
                      Text(s.status.replace("_", " "), style=colors.get(s.status, "")), lines)
    return table


def checks_table(checks: Iterable[Any], title: str | None = None) -> Table:
    table = Table(title=title)
    for col in ("check", "name", "status", "time", "message"):
        table.add_column(col)
    colors = {"passed": "green", "failed": "red", "timeout": "red", "environment": "yellow", "skipped": "yellow"}
    for c in checks:
        table.add_row(c.kind, escape(c.name), Text(c.status, style=colors.get(c.status, "")),
                      f"{c.seconds:.1f}s" if getattr(c, "seconds", None) else "", escape(c.message or ""))
    return table


def markdown_report(plan: Any) -> str:
    """A pull-request comment: a table of steps and a fenced diff per file."""
    out = [f"### specpatch: `{plan.recipe.id}` on {plan.target.package} {plan.target.version or '(unknown release)'}",
           "", "| # | step | file | status | lines |", "|---|---|---|---|---|"]
    for s in plan.steps:
        lines = f"{s.lines[0]}-{s.lines[1]}" if s.lines else ""
        desc = (s.name or s.description).replace("|", "\\|")
        out.append(f"| {s.index} | {desc} | `{s.file}` | {s.status.replace('_', ' ')} | {lines} |")
    for err in plan.errors:
        out.append("")
        out.append(f"> **{err.title}**: {err.message} ({err.location.render()})")
    for f in plan.changed_files:
        out += ["", f"<details><summary><code>{f.rel}</code></summary>", "", "```diff", f.diff().rstrip("\n"), "```",
                "", "</details>"]
    return "\n".join(out) + "\n"


def render_apply(out: Console, err: Console, result: Any, *, fmt: str = "text", verbose: bool = False) -> None:
    """Render an ApplyResult: the diff for a dry run, a summary of steps, checks and notes otherwise."""
    if fmt == "json":
        print_json(out, result.to_dict())
        return
    if fmt == "markdown":
        sys.stdout.write(markdown_report(result.plan))
        return
    p = result.plan
    if result.recovery:
        err.print(f"[yellow]recovered:[/yellow] {escape(str(result.recovery))}")
    if p.selection.variant:
        err.print(f"variant [bold]{escape(p.selection.variant)}[/bold]: {escape(p.selection.reason)}")
    if result.dry_run and p.ok and not p.selection.refuse:
        print_diff(out, p.diff())
    if verbose or not result.dry_run or not p.ok:
        err.print(steps_table(p.steps))
    for e in p.errors:
        print_error(err, e)
    if result.error:
        print_error(err, result.error)
    if result.checks:
        err.print(checks_table(result.checks))
    for note in result.notes:
        err.print(f"note: {escape(note)}")
    version = f"{p.target.package} {p.target.version or '(unknown release)'}"
    messages = {
        "would_change": f"dry run: {len(p.changed_files)} file(s) would change; nothing written",
        "already_applied": f"{p.recipe.id} is already applied to {version}: nothing to do",
        "changed": f"applied {p.recipe.id} to {version} ({len(p.changed_files)} file(s)) and verified",
        "cannot_apply": f"cannot apply {p.recipe.id} to {version}: nothing was written",
        "refused": f"{p.recipe.id} refuses {version}: nothing was written",
        "verify_failed": f"verification failed: {p.recipe.id} was rolled back, the target is unchanged",
    }
    style = "green" if result.exit_code == 0 else "red"
    err.print(f"[{style}]{escape(messages.get(result.outcome, result.outcome))}[/{style}]")


def render_fixture_results(out: Console, err: Console, results: list[Any]) -> int:
    """`specpatch test`: one line per case, details of failures; returns the exit code."""
    failed = [r for r in results if not r.passed]
    for r in results:
        mark = "[green]PASS[/green]" if r.passed else "[red]FAIL[/red]"
        out.print(f"{mark} {escape(r.case.id)}: {escape(r.message)}")
        if not r.passed:
            for d in r.details:
                out.print(Text(d))
    if not results:
        err.print("[yellow]no fixture cases found[/yellow]")
        return 2
    err.print(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


def _recovered(err: Console, recovery: Any) -> None:
    if recovery:
        err.print(f"[yellow]recovered:[/yellow] {escape(recovery.message)}")


def render_verify(out: Console, err: Console, result: Any, *, as_json: bool = False) -> None:
    if as_json:
        print_json(out, result.to_dict())
        return
    _recovered(err, result.recovery)
    for r in result.recipes:
        rec = r.record
        out.print(f"[bold]{escape(rec.recipe)}[/bold] v{rec.recipe_version}"
                  + (f" (variant {escape(rec.variant)})" if rec.variant else "")
                  + f" on {escape(rec.package)} {escape(str(rec.release))}, applied {escape(rec.applied_at)}")
        files = Table("file", "state")
        colors = {"intact": "green", "drift": "yellow", "lost": "red"}
        for f in r.files:
            files.add_row(escape(f["file"]), Text(f["state"], style=colors.get(f["state"], "")))
        out.print(files)
        if r.checks:
            out.print(checks_table(r.checks))
        for c in r.checks:
            if c.blocking and c.details:
                out.print(Text(c.details))
        for note in r.notes:
            err.print(f"note: {escape(note)}")
    style = "green" if result.exit_code == 0 else "red"
    err.print(f"[{style}]{escape(result.message)}[/{style}]")


def render_rollback(out: Console, err: Console, report: Any, *, as_json: bool = False) -> None:
    if as_json:
        data = report.to_dict()
        rec = getattr(report, "recovery", None)
        data["recovery"] = rec.to_dict() if rec else None
        print_json(out, data)
        return
    _recovered(err, getattr(report, "recovery", None))
    for rel in report.restored:
        out.print(f"restored {escape(rel)}")
    for pyc in report.removed_bytecode:
        out.print(f"removed stale bytecode {escape(pyc)}", style="dim")
    err.print(("[green]" if report.exit_code == 0 else "[red]") + escape(report.message))


def render_status(out: Console, err: Console, report: Any, *, as_json: bool = False) -> None:
    if as_json:
        print_json(out, report.to_dict())
        return
    out.print(f"target {escape(str(report.target))}: {escape(report.package)} {escape(str(report.release))}")
    if report.pending is not None:
        p = report.pending
        err.print(f"[yellow]unfinished {p.kind} of {escape(p.record.recipe)} started {escape(p.started)} "
                  f"(pid {p.pid}): the next specpatch command will recover it[/yellow]")
    if not report.applied:
        out.print("no recipe applied")
        return
    table = Table("#", "recipe", "version", "variant", "release", "params", "applied", "files")
    for r in report.applied:
        files = "\n".join(f"{f.rel} {f.sha_before[:10]}→{f.sha_after[:10]}" for f in r.files)
        params = ", ".join(f"{k}={v}" for k, v in r.params.items())
        table.add_row(str(r.seq), escape(r.recipe), str(r.recipe_version), escape(r.variant or ""),
                      escape(str(r.release)), escape(params), escape(r.applied_at), escape(files))
    out.print(table)


def render_check(out: Console, err: Console, result: Any, *, as_json: bool = False) -> None:
    if as_json:
        print_json(out, result.to_dict())
        return
    for e in result.plan.errors:
        print_error(err, e)
    if result.state in ("would_change", "drift") and result.plan.changed_files:
        print_diff(out, result.plan.diff())
    style = "green" if result.exit_code == 0 else "red"
    err.print(f"[{style}]{escape(result.state)}: {escape(result.message)}[/{style}]")


def render_try(out: Console, err: Console, result: Any, *, as_json: bool = False) -> None:
    if as_json:
        print_json(out, result.to_dict())
        return
    if result.apply is not None:
        p = result.apply.plan
        if p.selection.variant:
            err.print(f"variant [bold]{escape(p.selection.variant)}[/bold]: {escape(p.selection.reason)}")
        if p.changed_files:
            print_diff(out, p.diff())
        err.print(steps_table(p.steps))
        for e in p.errors:
            print_error(err, e)
        if result.apply.checks:
            err.print(checks_table(result.apply.checks, title="checks after apply"))
        for note in result.apply.notes:
            err.print(f"note: {escape(note)}")
    if result.verify is not None:
        for r in result.verify.recipes:
            err.print(checks_table(r.checks, title="specpatch verify"))
            for c in r.checks:
                if c.blocking and c.details:
                    err.print(Text(c.details))
    if result.folder:
        err.print(f"patched tree kept in {escape(str(result.folder))}")
    style = "green" if result.exit_code == 0 else "red"
    err.print(f"[{style}]{escape(result.outcome)}: {escape(result.message)} ({result.seconds:.1f} s)[/{style}]")
