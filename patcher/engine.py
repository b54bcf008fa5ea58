"""Plan a recipe: parse each touched file once, run its steps in order, render once, compile, compare text.

Planning never writes. A plan whose every step is `changed` or `already_applied` and whose every rendered file
compiles is *ready*; otherwise it carries the errors and nothing may be written (the transaction refuses it).
"""

from __future__ import annotations

import ast
import contextlib
import functools
import gc
import os
import re
import stat
import textwrap
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Iterable, Iterator, Sequence

import libcst as cst

from . import _generated_init as generated_init
from . import _runtime_rules as runtime_rules
from .anchors import code_of, line_of_text, lines_of, too_deep
from .diff import unified_diff
from .errors import (AnchorNotFound, CallMisfit, Candidate, Conflict, FailsAtRunTime, FileNotInRelease, FlowChanged,
                     Location, MissingModuleError, NameTakenError, NotIdempotent, ReadBeforeSet, RenderError,
                     SpecpatchError, TargetError, TargetSyntaxError, UndefinedNameError, Unreachable)
from .operations._code import imported_module, type_checking_test
from .operations.add_parameter import forwards_keyword
from .operations.base import AlreadyApplied, CannotApply, Changed, Operation
from .recipe import Recipe, Selection
from .results import StepStatus, VariantKind
from .target import Target


@dataclass
class StepReport:
    """What one step did (or would do) to its file."""

    index: int  #: 1-based, in recipe order
    op: str
    name: str | None
    file: str  #: relative to the target root
    description: str
    anchor: str
    status: StepStatus
    anchor_line: int | None = None  #: line of the anchor in the original file
    lines: tuple[int, int] | None = None  #: first and last line of the inserted code in the new file
    error: SpecpatchError | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.index, "op": self.op, "name": self.name, "file": self.file, "description": self.description,
            "anchor": self.anchor, "status": self.status, "anchor_line": self.anchor_line,
            "lines": list(self.lines) if self.lines else None,
            "error": self.error.to_dict() if self.error else None,
        }


@dataclass
class FilePlan:
    """One file: its bytes before and after all of its steps."""

    path: Path  #: absolute
    rel: str  #: relative to the target root
    before: bytes
    after: bytes
    mode: int  #: permission bits of the original
    #: whether the path was a symlink when planned (one made a link since is another file: it is not written)
    was_link: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        self.was_link = self.path.is_symlink()

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        return unified_diff(self.before, self.after, self.rel)


@dataclass
class Plan:
    """A recipe planned against a target; `errors` empty means it may be written."""

    recipe: Recipe
    target: Target
    selection: Selection
    params: dict[str, Any]
    files: list[FilePlan] = field(default_factory=list)
    steps: list[StepReport] = field(default_factory=list)
    errors: list[SpecpatchError] = field(default_factory=list)
    #: the package's Python files as read for the error path (`moved_elsewhere`), once per plan
    package_texts: dict[str, str] | None = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def changed_files(self) -> list[FilePlan]:
        return [f for f in self.files if f.changed]

    @property
    def already_applied(self) -> bool:
        return self.ok and not self.changed_files and bool(self.steps)

    def diff(self) -> str:
        return "".join(f.diff() for f in self.changed_files)

    @property
    def variant(self) -> Any:
        """The recipe's selected variant (None for a recipe without variants)."""
        return next((v for v in self.recipe.variants if v.name == self.selection.variant), None)

    @property
    def variant_kind(self) -> VariantKind:
        """What the selected variant does: patch the change in, or alias an upstream mechanism, as it declares."""
        return VariantKind(self.selection.kind)


def plan(recipe: Recipe, target: Target, params: dict[str, str] | None = None, *, variant: str | None = None) -> Plan:
    """Plan `recipe` on `target` in memory. Raises only for bad input; target-side problems land in `Plan.errors`.
    `variant`: that variant's steps, whichever releases its range admits (a fixture case of a variant no published
    release selects), instead of the one the release selects."""
    if recipe.target.package != target.package:
        raise TargetError(f"recipe `{recipe.id}` patches the package `{recipe.target.package}`; the target is "
                          f"`{target.package}` ({target.package_dir})", location=Location(recipe=recipe.id),
                          hint=f"point --target at a `{recipe.target.package}` (or pass --package "
                               f"{recipe.target.package})")
    if target.version is None and target.version_problem:
        raise TargetError(target.version_problem, location=Location(recipe=recipe.id),
                          hint="a wrong release would pick the wrong variant: pass --assume-version V")
    values = recipe.resolve_params(params or {})
    if target.version is None and (recipe.variants or recipe.target.versions) and variant is None:
        # a recipe written for some releases, on files of an unknown one: nothing says they are of those releases
        ranges = recipe.target.versions or ", ".join(v.versions for v in recipe.variants)
        raise TargetError(f"the target's release cannot be read (no version in "
                          f"`_version.py`, a dist-info's METADATA or pyproject.toml), and recipe `{recipe.id}` is for "
                          f"{recipe.target.package} {ranges}",
                          hint="pass --assume-version V, the release these files are from",
                          location=Location(recipe=recipe.id))
    selection = recipe.select_variant(variant) if variant is not None else recipe.select(target.version)
    result = Plan(recipe, target, selection, values)
    if selection.refuse:
        return result
    steps = [_rendered(recipe.id, i, s, values) for i, s in enumerate(selection.steps, start=1)]
    by_file: dict[str, list[tuple[int, Operation]]] = {}
    for i, step in enumerate(steps, start=1):
        by_file.setdefault(_identity(target, step.file), []).append((i, step))
    deferred: list = []  # checks that read the other planned files (a name another file's step defines)
    with _collector_paused():
        for rel_pkg, file_steps in by_file.items():
            try:
                _plan_file(result, rel_pkg, file_steps, deferred)
            except RecursionError:  # libcst walks and renders nested code recursively (`1 + 1 + ...` 500 times)
                first = file_steps[0]
                result.errors.append(TargetSyntaxError(
                    f"`{target.rel(target.package_dir / rel_pkg)}` (or the recipe's code for it) is nested too deeply "
                    "for specpatch's parser", location=Location(recipe=recipe.id, step=first[0], op=first[1].op,
                                                                file=rel_pkg, anchor=first[1].anchor())))
    if deferred and not result.errors:
        planned = {fp.path: fp.after for fp in result.files if fp.after != fp.before}
        for check in deferred:
            result.errors.extend(check(planned))
    result.steps.sort(key=lambda s: s.index)  # planned file by file; reported in recipe order
    return result


def _identity(target: Target, rel_pkg: str) -> str:
    """The file a step's `file` names, relative to the package folder, as `Target.file` resolves it: steps that
    spell one file differently are planned together, from one read of it (else the last write would win). A path
    the target refuses keeps its spelling: planning reports the refusal."""
    try:
        return target.file(rel_pkg).relative_to(target.package_dir).as_posix()
    except TargetError:
        return rel_pkg


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """No cyclic garbage collection while planning: libcst builds ~100,000 nodes for a 6,000-line file, all alive
    until the file is rendered, and the collector would scan them again and again (a tenth of the planning time)
    to find nothing; plain reference counting still frees every tree as soon as its file is done."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _plan_file(result: Plan, rel_pkg: str, file_steps: list[tuple[int, Operation]], deferred: list) -> None:
    recipe, target = result.recipe, result.target
    where = Location(recipe=recipe.id)
    try:
        path = target.file(rel_pkg)
    except TargetError as exc:
        result.errors.append(exc.at(where))
        return
    rel = target.rel(path)
    first = file_steps[0]
    if not path.is_file():
        # a folder, FIFO or device of that name is not the Python file the step edits (and is never opened): an
        # unusable target; no file of that name is the release's layout, a port's matter as a moved function is
        at = Location(recipe=recipe.id, step=first[0], op=first[1].op, file=rel, anchor=first[1].anchor())
        err = FileNotInRelease(f"`{rel}` does not exist in the target", location=at) if not path.exists() else \
            TargetError(f"`{rel}` is not a regular file in the target", location=at, hint=(
                "this release may lay its files out differently; `specpatch show RECIPE` lists supported releases"))
        result.errors.append(err)
        return
    before = path.read_bytes()
    mode = stat.S_IMODE(os.stat(path).st_mode)
    deep = too_deep(before)
    if deep:  # libcst's native parser would overflow its stack (a segmentation fault, no exception)
        result.errors.append(TargetSyntaxError(f"`{rel}` cannot be parsed: {deep}",
                                               location=Location(recipe=recipe.id, step=first[0], file=rel)))
        return
    try:
        module = cst.parse_module(before)
    except SyntaxError as exc:  # tokenize's: no coding line, and bytes that are not UTF-8
        result.errors.append(TargetSyntaxError(
            f"`{rel}` is not text in its encoding: {exc.msg}", location=Location(recipe=recipe.id, step=first[0],
                                                                                file=rel)))
        return
    except cst.ParserSyntaxError as exc:
        try:  # Python takes it, libcst does not: say so (a form feed in an indentation, say), not "fix the file"
            compile(before, rel, "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
            python_takes_it = True
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            python_takes_it = False
        if python_takes_it:
            feed = " (a form feed, ^L, in the indentation of a line: remove it)" if b"\x0c" in before else ""
            result.errors.append(TargetSyntaxError(
                f"`{rel}` is valid Python that libcst, the parser specpatch edits with, cannot read{feed}: "
                f"{exc.message}", location=Location(recipe=recipe.id, step=first[0], file=rel, line=exc.raw_line),
                details=str(exc), hint="nothing was written; the file is as it was (a layout libcst does not read)"))
            return
        result.errors.append(TargetSyntaxError(
            f"{exc.message}", location=Location(recipe=recipe.id, step=first[0], file=rel, line=exc.raw_line),
            details=str(exc)))
        return
    except (UnicodeDecodeError, LookupError) as exc:  # bytes that are not text in the file's encoding
        result.errors.append(TargetSyntaxError(
            f"`{rel}` is not text in its encoding: {exc}", location=Location(recipe=recipe.id, step=first[0],
                                                                              file=rel)))
        return
    original = module
    original_text = before.decode(module.encoding, errors="replace")
    done: list[tuple[StepReport, Changed | None]] = []
    anchor_lines: dict[int, tuple[cst.CSTNode, int | None]] = {}
    siblings = [op for _, op in file_steps]
    for index, op in file_steps:
        loc = Location(recipe=recipe.id, step=index, op=op.op, file=rel, anchor=op.anchor())
        report = StepReport(index, op.op, op.name, rel, op.describe(), op.anchor(), StepStatus.CANNOT_APPLY)
        try:
            outcome = op.among(siblings).apply(module)
        except SpecpatchError as exc:  # a recipe-side problem found late (e.g. code that does not parse)
            outcome = CannotApply(exc)
        report.status = outcome.status
        if isinstance(outcome, Changed):
            module = outcome.module
            report.anchor_line = _line(original_text, original, outcome.anchor, anchor_lines)
        elif isinstance(outcome, CannotApply):
            report.error = _with_candidate_lines(outcome.error.at(loc), module, original)
            if isinstance(report.error, AnchorNotFound):
                if result.package_texts is None:
                    result.package_texts = package_texts(target.package_dir)
                report.error.candidates = (*report.error.candidates, *moved_elsewhere(
                    op, target.package_dir, rel_pkg, original_text, result.package_texts))
            if isinstance(report.error, AnchorNotFound) and module is not original \
                    and not isinstance(op.among(siblings).apply(original), CannotApply):
                # the release has the anchor: the recipe's own earlier steps took it away
                report.error.message += "; the release has it: an earlier step of the recipe in this file changed it"
                report.error.hint = ("reorder the steps (this one before the step that changes its anchor), or "
                                     "anchor it on what that step writes; nothing was written")
            result.errors.append(report.error)
        result.steps.append(report)
        done.append((report, outcome if isinstance(outcome, Changed) else None))
    if any(r.status is StepStatus.CANNOT_APPLY for r, _ in done):
        result.files.append(FilePlan(path, rel, before, before, mode))
        return
    result.errors.extend(_second_run(recipe.id, rel, module, file_steps, siblings, done))
    if result.errors:
        result.files.append(FilePlan(path, rel, before, before, mode))
        return
    try:
        after = module.bytes if module is not original else before
    except UnicodeEncodeError as exc:  # code the file's declared encoding (`# -*- coding: latin-1 -*-`) cannot hold
        owner = next((r for r, c in reversed(done) if c is not None), None)
        result.errors.append(RenderError(
            f"the recipe's code holds {exc.object[exc.start:exc.end]!r}, which `{rel}`'s declared encoding "
            f"({module.encoding}) cannot represent", location=Location(
                recipe=recipe.id, file=rel, step=owner.index if owner else None, op=owner.op if owner else None,
                anchor=owner.anchor if owner else None)))
        result.files.append(FilePlan(path, rel, before, before, mode))
        return
    if after != before:
        tree, failed = None, None
        try:
            tree = ast.parse(after, str(path))  # once, for the compile and the names read below
            compile(tree, str(path), "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as exc:
            tree, failed = None, exc
        text = after.decode(module.encoding, errors="replace")
        written: set[int] | None = None
        for report, changed in done:
            if changed and changed.inserted:
                codes = [code_of(module, n) for n in changed.inserted]  # rendered once, used twice
                first_line = line_of_text(text, "".join(codes), _offset_of_line(text, report.anchor_line))
                if first_line and line_of_text(text, "".join(codes), _offset_of_line(text, first_line + 1)):
                    # the same lines stand twice (the code equals its anchor, or code the file already has): the
                    # first of them that the change wrote (a line diff, computed once, only in this case)
                    if written is None:
                        written = _written_lines(original_text, text)
                    at = first_line
                    while at and at not in written:
                        at = line_of_text(text, "".join(codes), _offset_of_line(text, at + 1))
                    first_line = at or first_line
                if first_line:
                    n = sum(code.count("\n") for code in codes)
                    report.lines = (first_line, first_line + max(n - 1, 0))
        if failed is not None:  # charged to the step whose code holds the line, else the file's last changed one
            line = getattr(failed, "lineno", None)
            owner = _step_at(done, line)
            result.errors.append(RenderError(f"{getattr(failed, 'msg', failed)}", location=Location(
                recipe=recipe.id, file=rel, line=line, step=owner.index if owner else None,
                op=owner.op if owner else None, anchor=owner.anchor if owner else None)))
        if tree is not None and not result.errors:
            result.errors.extend(_undefined_names(recipe.id, rel, original_text, text, tree, done,
                                                  submodule=submodule_of(path.parent)))
        if tree is not None and not result.errors:
            result.errors.extend(_flow_changed(recipe.id, rel, original_text, text, tree, done))
        taking = any(c is not None and r.op in _TAKING for r, c in done)  # a step that may take a name away
        if tree is not None and not result.errors and taking:
            result.errors.extend(_attributes_taken(recipe.id, rel, original_text, text, tree, done))
        if tree is not None and not result.errors:
            deferred.append(lambda planned: _missing_modules(recipe.id, target, rel_pkg, rel, original_text, tree,
                                                             done, planned))
            if taking:
                deferred.append(lambda planned: _names_taken(recipe.id, target, rel_pkg, rel, path, done, planned))
            deferred.append(lambda planned: _calls_across_modules(recipe.id, target, rel_pkg, rel, path,
                                                                  original_text, tree, done, planned))
            if any(isinstance(st, ast.ImportFrom) and any(a.name == "*" for a in st.names) for st in tree.body):
                deferred.append(lambda planned: _star_reads(recipe.id, target, rel_pkg, rel, original_text, text,
                                                            done, planned))
            methods = [(r, op) for (r, c), (_, op) in zip(done, file_steps) if c is not None and op.op == "add_method"]
            if methods:
                deferred.append(lambda planned: _overrides_unfit(recipe.id, target, rel_pkg, rel, tree, methods,
                                                                 planned))
    result.files.append(FilePlan(path, rel, before, after, mode))


def _rendered(recipe_id: str, index: int, step: Operation, values: dict[str, Any]) -> Operation:
    """The step with the parameters' values placed; an error names the recipe, the step and its file (the value
    is the user's `--param`, the place is the recipe's)."""
    try:
        return step.render_params(values)
    except SpecpatchError as exc:
        raise exc.at(Location(recipe=recipe_id, step=index, op=step.op, file=step.file)) from None


def _second_run(recipe_id: str, rel: str, module: cst.Module, file_steps: list[tuple[int, Operation]],
                siblings: list[Operation], done: list[tuple[StepReport, Changed | None]]) -> list[SpecpatchError]:
    """Each step that changed the file, applied again to the file as the recipe leaves it, must answer *already
    applied*: what a second apply, `check` and `verify` will ask of it (an in-memory pass over the patched tree,
    about 0.1 s for the flagship's six files). A later step that rewrites what an earlier one anchors on (or its
    code) makes the recipe apply once, then fail or change the file again on every run after. A step that found
    its code already there is asked again too when another step changed the file: a later step may rewrite it."""
    errors: list[SpecpatchError] = []
    if all(changed is None for _, changed in done):
        return errors
    for (index, op), (report, changed) in zip(file_steps, done):
        if changed is None and report.status is not StepStatus.ALREADY_APPLIED:
            continue
        step = op.among(siblings)
        again = step.apply(module)
        if isinstance(again, AlreadyApplied):
            try:
                step.settled(module, again, changed=changed is not None)
            except SpecpatchError as exc:
                errors.append(exc.at(Location(recipe=recipe_id, step=index, op=op.op, file=rel, anchor=op.anchor())))
            continue
        if isinstance(again, (Changed, CannotApply)):
            why = ("it would change the file again" if isinstance(again, Changed)
                   else f"{again.error.title}: {again.error.message}")
            errors.append(NotIdempotent(
                f"applied to `{rel}` as the recipe leaves it, step {index} does not find its own change: {why}",
                location=Location(recipe=recipe_id, step=index, op=op.op, file=rel, anchor=op.anchor())))
    return errors


def _missing_modules(recipe_id: str, target: Target, rel_pkg: str, rel: str, before: str, tree: ast.Module,
                     done: list[tuple[StepReport, Changed | None]],
                     planned: dict[Path, bytes] | None = None) -> list[SpecpatchError]:
    """Imports of the target package's own modules (`from sglang.srt.x import y`, `from .x import y`) that the
    patched file runs and the package folder has no module for, or names such a module does not define, that the
    original file did not already import: each would raise ImportError at start-up (a module or a name upstream
    moved since the recipe was written). See `missing_imports`."""
    # what the original file imports already is not the recipe's doing (and reading every module it imports, for
    # each patched file, was most of a plan's time)
    had = {(dotted, alias.name) if isinstance(node, ast.ImportFrom) else (dotted, "")
           for node, dotted in _package_imports(ast.parse(before), target.package, rel_pkg)
           for alias in (node.names if isinstance(node, ast.ImportFrom) else [None])}
    missing = missing_imports(tree, target.package, target.package_dir, rel_pkg, planned=planned, known=had)
    errors: list[SpecpatchError] = _imports_in_a_circle(recipe_id, target, rel_pkg, rel, tree, had, done, planned or {})
    if not missing:
        return errors
    release = f"{target.package} {target.version}" if target.version else target.package
    for node, what, why in missing:
        owner = _step_at(done, node.lineno)
        errors.append(MissingModuleError(
            f"`{rel}` would import {why} (line {node.lineno}), and {release} has no such "
            f"{'module' if what.startswith('module ') else 'name there'}",
            location=Location(recipe=recipe_id, step=owner.index if owner else None, op=owner.op if owner else None,
                              file=rel, anchor=owner.anchor if owner else None, line=node.lineno)))
    return errors


def _run_at_import(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements a module runs when it is imported: its own level, and the blocks of its `if`, `try` and
    `with` statements (not what a function or class body holds: a function's imports run when it is called)."""
    for node in body:
        yield node
        if isinstance(node, (ast.If, ast.With, ast.Try)) or type(node).__name__ == "TryStar":
            if isinstance(node, ast.If) and type_checking_test(node.test):
                yield from _run_at_import(node.orelse)
                continue
            for block in (node.body, getattr(node, "orelse", []), getattr(node, "finalbody", []),
                          *(h.body for h in getattr(node, "handlers", []))):
                yield from _run_at_import(block)


def _imports_in_a_circle(recipe_id: str, target: Target, rel_pkg: str, rel: str, tree: ast.Module,
                         had: set[tuple[str, str]], done: list[tuple[StepReport, Changed | None]],
                         planned: dict[Path, bytes]) -> list[SpecpatchError]:
    """A `from M import n` the recipe adds at this module's own level, where M imports this module at its own level
    above the line that binds `n`: imported first, M runs this module, which asks the half-made M for `n` (ImportError,
    "partially initialized module"). The other order works, so a smoke test may pass."""
    parts = PurePosixPath(rel_pkg).with_suffix("").parts
    me = ".".join([target.package, *(parts[:-1] if parts[-1] == "__init__" else parts)])
    mine = {id(n) for n in _run_at_import(tree.body)}
    errors: list[SpecpatchError] = []
    for node, dotted in _package_imports(tree, target.package, rel_pkg):
        if not isinstance(node, ast.ImportFrom) or id(node) not in mine or dotted == me \
                or all((dotted, a.name) in had for a in node.names):
            continue
        there = _module_path(target.package_dir, dotted)
        if not isinstance(there, Path):
            continue
        source = there / "__init__.py" if there.is_dir() else there
        try:
            text = planned[source].decode("utf-8") if source in planned else source.read_text(encoding="utf-8")
            other = ast.parse(text)
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError, RecursionError):
            continue
        if me.rsplit(".", 1)[-1] not in text:
            continue
        other_rel = source.relative_to(target.package_dir).as_posix()
        at_import = {id(n) for n in _run_at_import(other.body)}
        back = [n.lineno for n, d in _package_imports(other, target.package, other_rel) if id(n) in at_import and (
            d == me or isinstance(n, ast.ImportFrom) and any(f"{d}.{a.name}" == me for a in n.names))]
        if not back:
            continue
        bound = bound_at_module_level_ast(other.body)
        for alias in node.names:
            line = bound.get(alias.name)
            if (dotted, alias.name) in had or line is None or line < min(back):
                continue
            owner = _step_at(done, node.lineno)
            errors.append(FailsAtRunTime(
                f"`{rel}` would import `{alias.name}` from `{dotted}` (line {node.lineno}), which imports this "
                f"module at its line {min(back)}, above the line that binds `{alias.name}` ({line}): a circular "
                f"import; where `{dotted}` is imported first, it fails with ImportError (\"partially initialized "
                f"module\"); import it inside the function that uses it",
                location=Location(recipe=recipe_id, step=owner.index if owner else None, op=owner.op if owner else None,
                                  file=rel, anchor=owner.anchor if owner else None, line=node.lineno)))
            break
    return errors


def missing_imports(tree: ast.Module, package: str, package_dir: Path, rel_pkg: str, base_dir: Path | None = None,
                    planned: dict[Path, bytes] | None = None,
                    known: set[tuple[str, str]] = frozenset()) -> list[tuple[ast.stmt, str, str]]:
    """(statement, key, words) for each import of the package's own code, run by the file `rel_pkg`, that the
    package at `package_dir` cannot satisfy: a module it has no file or folder for, or a name `from M import N`
    takes that M neither defines nor has as a submodule. Imports under `if TYPE_CHECKING:`, in a `try:` that
    catches the failure or under `with suppress(ImportError)` are left alone: they are meant to fail. A module whose
    folder is absent too is judged only with `base_dir` (the release the code was written on, as `port` has it):
    missing when that release had it; else it cannot be told from a tree of some files (a fixture). A module whose
    names cannot be read (a star import, `__getattr__`, `globals()`) is taken to define any name. `planned`: the
    bytes the recipe gives other files ({path: bytes}), whose names count as defined (a step of another file adds
    the function this import takes). `known`: (module, name) pairs ("" for `import module`) not to judge."""
    out: list[tuple[ast.stmt, str, str]] = []
    for node, dotted in _package_imports(tree, package, rel_pkg):
        if (dotted, "") in known if not isinstance(node, ast.ImportFrom) else \
                all((dotted, alias.name) in known for alias in node.names):
            continue
        there = _module_path(package_dir, dotted)
        if there in (None, True) and any(d == dotted for d, _ in known):
            continue  # the original file imports from that module already: not the recipe's doing
        if there is None:
            out.append((node, f"module {dotted}", f"`{dotted}`"))
            continue
        if there is True:  # its folder is not there either: only the base release can tell
            if base_dir is not None and _module_path(base_dir, dotted) not in (None, True):
                out.append((node, f"module {dotted}", f"`{dotted}` (the base release has it, and its folder)"))
            continue
        if not isinstance(node, ast.ImportFrom):
            continue
        names = _defined_names(there, planned or {})
        for alias in node.names:
            if alias.name == "*" or names is None or alias.name in names or (dotted, alias.name) in known:
                continue
            if there.is_dir() and _module_path(package_dir, f"{dotted}.{alias.name}") not in (None, True):
                continue  # a submodule of the package
            out.append((node, f"name {dotted}.{alias.name}", f"`{alias.name}` from `{dotted}`"))
    return out


#: the operations whose change can take a module-level name away (the others only add code)
_TAKING = frozenset({"replace_statements", "replace_expression", "unexpressed_hunk"})


def _names_taken(recipe_id: str, target: Target, rel_pkg: str, rel: str, path: Path,
                 done: list[tuple[StepReport, Changed | None]], planned: dict[Path, bytes]) -> list[SpecpatchError]:
    """Names the patched module no longer binds at its own level that another module of the package imports from it
    (`from sglang.srt.a import helper` in a module upstream added after the recipe renamed `helper`): that module
    would raise ImportError at start-up, though no patched file does. See `importers_of`."""
    found = importers_of(target.package, target.package_dir, rel_pkg, path, planned)
    errors: list[SpecpatchError] = []
    owner = next((r for r, c in reversed(done) if c is not None), None)
    for other, line, name, dotted in found:
        errors.append(NameTakenError(
            f"once patched, `{rel}` no longer defines `{name}`, which `{other}` uses from `{dotted}` (line {line})",
            location=Location(recipe=recipe_id, step=owner.index if owner else None, op=owner.op if owner else None,
                              file=rel, anchor=owner.anchor if owner else None)))
    return errors


def importers_of(package: str, package_dir: Path, rel_pkg: str, path: Path,
                 planned: dict[Path, bytes]) -> list[tuple[str, int, str, str]]:
    """(file, line, name, module) for each `from <module> import <name>` that a module of the package runs (outside
    `if TYPE_CHECKING:` and the guards `missing_imports` leaves alone) where `<module>` is the file `rel_pkg` and
    `<name>` a name that file binds at its own level before the recipe (`path` as on disk) and not after it (as
    `planned` has it). Nothing when no name goes, or when the names cannot be told (a star import...)."""
    before = _defined_names(path, {})
    after = _defined_names(path, planned)
    if before is None or after is None or not before - after:
        return []
    gone = before - after
    parts = PurePosixPath(rel_pkg).with_suffix("").parts
    dotted = ".".join([package, *(parts[:-1] if parts[-1] == "__init__" else parts)])
    leaf = dotted.rsplit(".", 1)[-1]
    out: list[tuple[str, int, str, str]] = []
    stars: list[tuple[str, frozenset[str]]] = []  # the modules that `from <module> import *` it, with their own names
    for other, data in _package_sources(package_dir, path, planned, [*gone, "import *"]):
        if leaf.encode() not in data and b"from ." not in data:
            continue
        try:
            tree = ast.parse(data)
        except (SyntaxError, ValueError, RecursionError):
            continue
        other_rel = other.relative_to(package_dir).as_posix()
        via: set[str] = set()  # what the file calls the module itself (`import sglang.srt.a as a`: `a`)
        for node, module in _package_imports(tree, package, other_rel):
            if isinstance(node, ast.ImportFrom):
                if module == dotted:
                    for alias in node.names:
                        if alias.name in gone:
                            out.append((other_rel, node.lineno, alias.name, module))
                        elif alias.name == "*":
                            # what it binds itself (an explicit import of the name) it does not take from the star
                            bound = _names_bound_in(data.decode("utf-8", "replace"), explicit=True) or frozenset()
                            read = next((n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id in gone
                                         and isinstance(n.ctx, ast.Load) and n.id not in bound), None)
                            if read is not None:
                                out.append((other_rel, read.lineno, read.id, module))
                            own = PurePosixPath(other_rel).with_suffix("").parts
                            stars.append((".".join([package, *(own[:-1] if own[-1] == "__init__" else own)]),
                                          bound))
                else:  # `from sglang.srt import a`
                    via.update(a.asname or a.name for a in node.names if f"{module}.{a.name}" == dotted)
            else:
                via.update(a.asname or a.name for a in node.names if a.name == dotted)
        if via:
            for n in ast.walk(tree):
                if isinstance(n, ast.Attribute) and n.attr in gone and isinstance(n.ctx, ast.Load) and \
                        ast.unparse(n.value) in via:
                    out.append((other_rel, n.lineno, n.attr, dotted))
                    break
    for reexport, own_names in stars:  # `from sglang import name` where `sglang/__init__.py` star-imports it
        lost = gone - own_names  # a name the re-exporting module binds itself it still gives
        for other, data in _package_sources(package_dir, path, planned, lost):
            try:
                tree = ast.parse(data)
            except (SyntaxError, ValueError, RecursionError):
                continue
            other_rel = other.relative_to(package_dir).as_posix()
            out.extend((other_rel, node.lineno, alias.name, module)
                       for node, module in _package_imports(tree, package, other_rel)
                       if isinstance(node, ast.ImportFrom) and module == reexport
                       for alias in node.names if alias.name in lost)
    return out


def _package_sources(package_dir: Path, path: Path, planned: dict[Path, bytes],
                     names: Iterable[str]) -> Iterator[tuple[Path, bytes]]:
    """(file, its bytes as the recipe leaves them) for each module of the package other than `path` whose text holds
    one of `names` (a cheap filter before any parse)."""
    wanted = [n.encode() for n in names]
    for other in _package_modules(package_dir):
        if other == path:
            continue
        try:
            data = planned[other] if other in planned else other.read_bytes() if _source_file(other) else b""
        except OSError:
            continue
        if any(n in data for n in wanted):
            yield other, data


def _module_path(package_dir: Path, dotted: str) -> Path | bool | None:
    """The file or folder of the module `dotted` (the package's name first) under `package_dir`; None when its
    folder is there and it is not; True when its folder is not there either (a tree of some files cannot tell)."""
    import importlib.machinery

    parts = dotted.split(".")[1:]
    if not parts:
        return package_dir
    folder = package_dir.joinpath(*parts[:-1])
    last = parts[-1]
    if not folder.is_dir():
        return True
    if (folder / last).is_dir():
        return folder / last
    for suffix in importlib.machinery.all_suffixes():
        if (folder / f"{last}{suffix}").is_file():
            return folder / f"{last}{suffix}"
    return next(iter(folder.glob(f"{last}.*.so")), None)


def _defined_names(module: Path, planned: dict[Path, bytes]) -> set[str] | None:
    """The names a module (a file, or a package folder's `__init__.py`) binds at its own level, as the recipe leaves
    it (`planned`), or None when they cannot be told: not Python source, unreadable, a star import, a module
    `__getattr__`, `globals()` writes."""
    source = module / "__init__.py" if module.is_dir() else module
    if source.suffix != ".py":
        return None
    try:
        text = planned[source].decode("utf-8") if source in planned else source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    names = _names_bound_in(text)
    return set(names) if names is not None else None


@functools.lru_cache(maxsize=512)
def _names_bound_in(text: str, *, explicit: bool = False) -> frozenset[str] | None:
    """`_defined_names` of a module's source (cached: every file of a recipe asks for the modules it imports, the
    second-run and cross-module checks again). `explicit`: the names it binds itself, its star imports aside (not
    None for them)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if "globals()" in text:
        return None
    names: set[str] = set()

    def visit(body: list[ast.stmt]) -> bool:
        for st in body:
            if isinstance(st, (ast.Import, ast.ImportFrom)):
                if any(a.name == "*" for a in st.names):
                    if explicit:
                        continue
                    return False
                names.update((a.asname or a.name).split(".")[0] for a in st.names)
            elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if st.name == "__getattr__":
                    return False
                names.add(st.name)
            elif isinstance(st, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = st.targets if isinstance(st, ast.Assign) else [st.target]
                names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
            else:
                for part in ("body", "orelse", "finalbody"):
                    inner = getattr(st, part, None)
                    if part == "body" and isinstance(st, ast.If) and type_checking_test(st.test):
                        continue  # for type checkers only: the interpreter never binds these
                    if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt) and not visit(inner):
                        return False
                for handler in getattr(st, "handlers", []) or []:
                    if not visit(handler.body):
                        return False
                if isinstance(st, (ast.For, ast.With)):
                    names.update(n.id for n in ast.walk(st) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
        return True

    return frozenset(names) if visit(tree.body) else None


def _package_imports(tree: ast.Module, package: str, rel_pkg: str) -> list[tuple[ast.stmt, str]]:
    """(import statement, dotted module) for each import of `package`'s own modules the file runs, relative ones
    resolved against the file's place (`rel_pkg`, relative to the package folder)."""
    out: list[tuple[ast.stmt, str]] = []

    def guarded(handlers: list[ast.ExceptHandler]) -> bool:
        names = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}
        return any(h.type is None or any(isinstance(n, ast.Name) and n.id in names or
                                         isinstance(n, ast.Attribute) and n.attr in names
                                         for n in ast.walk(h.type)) for h in handlers)

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                out.extend((node, a.name) for a in node.names if a.name.split(".")[0] == package)
            elif isinstance(node, ast.ImportFrom):
                module = imported_module(node, package, rel_pkg)
                if module is not None:
                    out.append((node, module))
            elif isinstance(node, ast.If) and type_checking_test(node.test):
                visit(node.orelse)
            elif isinstance(node, (ast.With, ast.AsyncWith)) and any(
                    isinstance(item.context_expr, ast.Call) and guarded([ast.ExceptHandler(
                        type=ast.Tuple(elts=list(item.context_expr.args), ctx=ast.Load()), body=[])])
                    and ast.unparse(item.context_expr.func).split(".")[-1] == "suppress" for item in node.items):
                continue  # `with suppress(ImportError):` is meant to fail
            elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
                if not guarded(node.handlers):
                    visit(node.body)
                for block in (node.handlers, node.orelse, node.finalbody):
                    for item in block:
                        visit(item.body if isinstance(item, ast.ExceptHandler) else [item])
            else:
                for part in ("body", "orelse", "finalbody"):
                    inner = getattr(node, part, None)
                    if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                        visit(inner)
                for handler in getattr(node, "handlers", []) or []:
                    visit(handler.body)
                for case in getattr(node, "cases", []) or []:
                    visit(case.body)

    visit(tree.body)
    return out


def _overrides_unfit(recipe_id: str, target: Target, rel_pkg: str, rel: str, tree: ast.Module,
                     methods: list[tuple[StepReport, Operation]], planned: dict[Path, bytes]) -> list[SpecpatchError]:
    """A method a step adds that overrides a method of a base class of the package (in the file or a module it
    imports the base from), while a call `self.name(...)` in that base class or in the class itself passes what the
    new method does not take: TypeError when it runs (a hostile round: the patch's `Worker.reset(self)` over the
    `BaseWorker.reset(self, hard=False)` upstream added, whose `start()` calls `self.reset(hard=True)`)."""
    errors: list[SpecpatchError] = []
    for report, op in methods:
        try:
            new = next(n for n in ast.parse(textwrap.dedent(op.code)).body
                       if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
        except (StopIteration, SyntaxError, ValueError, RecursionError):
            continue
        cls = next((c for c in tree.body if isinstance(c, ast.ClassDef) and c.name == op.cls), None)
        if cls is None:
            continue
        for base_rel, base in _package_bases(target, rel_pkg, tree, cls, planned):
            theirs = next((f for f in base.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                           and f.name == new.name), None)
            if theirs is None:
                continue
            where = Location(recipe=recipe_id, step=report.index, op=report.op, file=rel, anchor=report.anchor)
            if _descriptor(new) != _descriptor(theirs):  # `self.size + 1` of a property, now a bound method
                errors.append(Conflict(
                    f"the new `{op.cls}.{new.name}` is {_descriptor(new)}, where `{base.name}.{new.name}` "
                    f"(`{base_rel}`) it overrides is {_descriptor(theirs)}: what reads or calls it as one would get "
                    f"the other (TypeError, or a method where a value was read)", location=where))
                break
            if _descriptor(new) != "a method":
                break
            # (a generator over a plain function may serve what iterates it: only `async` is judged)
            other_kind = _kind(theirs) != _kind(new) and (isinstance(theirs, ast.AsyncFunctionDef)
                                                          or isinstance(new, ast.AsyncFunctionDef))
            for owner, caller, call in _self_calls((base, cls), new.name):
                said = f"`{owner.name}.{caller.name}` calls `{ast.unparse(call)}` (line {call.lineno})"
                if other_kind:
                    errors.append(FlowChanged(
                        f"the new `{op.cls}.{new.name}` is {_kind(new)}, where `{base.name}.{new.name}` (`{base_rel}`) "
                        f"it overrides is {_kind(theirs)}, and {said} as one: it would get another kind of result",
                        location=where))
                    break
                why = _misfit(call, new)
                if why:
                    errors.append(Conflict(
                        f"the new `{op.cls}.{new.name}` overrides `{base.name}.{new.name}` (`{base_rel}`), and {said}, "
                        f"which it does not take: {why}; TypeError when it runs (upstream added or changed the base's "
                        f"method?)", location=where))
                    break
            break  # the nearest base that defines it is the one overridden
    return errors


def _parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef | None) -> set[str]:
    """The names of a function's parameters, `*args` and `**kwargs` aside (none for None)."""
    if fn is None:
        return set()
    a = fn.args
    return {p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)}


def _takes(tree: ast.Module, name: str, param: str) -> bool:
    """Whether the function or method `name` of the module (`C.m`) has a parameter `param`."""
    found = _signatures(tree).get(name)
    return found is not None and param in _parameters(found[0])


def _keywords_passed(changed: dict, tree: ast.Module) -> dict[str, list[tuple[str, str, set[str]]]]:
    """For each method `C.m` of `changed` that gained parameters: (parameter, calling method, the call's other
    keywords) for each `self.m(..., p=...)` in a method of `C` passing one of them by keyword (what runs an
    override of `m` when `self` is a subclass's)."""
    out: dict[str, list[tuple[str, str, set[str]]]] = {}
    classes = {c.name: c for c in tree.body if isinstance(c, ast.ClassDef)}
    for name, ((old_fn, _), (new_fn, _)) in changed.items():
        owner, _, method = name.rpartition(".")
        new = _parameters(new_fn) - _parameters(old_fn)
        if not owner or not new or owner not in classes:
            continue
        for _, caller, call in _self_calls((classes[owner],), method):
            keywords = {k.arg for k in call.keywords if k.arg is not None}
            for p in sorted(new & keywords):
                out.setdefault(name, []).append((p, caller.name, keywords - {p}))
    return out


def _overrides_lacking(tree: ast.Module, classes: dict[str, ast.ClassDef],
                       passed: dict[str, list[tuple[str, str, set[str]]]], base_of: Callable[[ast.expr], str | None]
                       ) -> list[tuple[ast.ClassDef, str, ast.AST, str]]:
    """(subclass, `C.m`, its override, parameter) for each class of `tree` deriving from `C` (through classes of
    `tree` too; `base_of` names what a base expression stands for) whose override of `m` does not take a parameter
    of `passed` (nor `**kwargs`), where the call passing it reaches that override: the subclass does not override
    the calling method itself, and the override takes the call's other keywords (one it never took already kept
    that call away from it)."""
    out = []

    def derives(cls: ast.ClassDef, owner: str, seen: frozenset[str] = frozenset()) -> bool:
        for b in cls.bases:
            name = base_of(b)
            if name == owner:
                return True
            inner = classes.get(b.id) if isinstance(b, ast.Name) else None
            if inner is not None and inner.name not in seen and inner is not cls \
                    and derives(inner, owner, seen | {cls.name}):
                return True
        return False

    for name, calls in passed.items():
        owner, method = name.split(".")[0], name.split(".")[-1]
        for cls in classes.values():
            if cls.name == owner or not derives(cls, owner):
                continue
            own = {f.name: f for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
            fn = own.get(method)
            if fn is None or fn.args.kwarg is not None:
                continue
            takes = _parameters(fn)
            lacking = sorted(p for p, caller, others in calls if p not in takes and caller not in own
                             and others <= takes)
            if lacking:
                out.append((cls, name, fn, lacking[0]))
    return out


def _descriptor(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """What a def in a class body makes of the name: a property (its getter, setter or deleter, a
    `cached_property`), a class method, a static method, or a method."""
    for d in fn.decorator_list:
        name = ast.unparse(d.func if isinstance(d, ast.Call) else d)
        last = name.split(".")[-1]
        if last in ("property", "cached_property") or last in ("setter", "getter", "deleter") and "." in name:
            return "a property"
        if last in ("classmethod", "staticmethod"):
            return f"a {last[:-6]} method"
    return "a method"


def _kind(fn: ast.AST) -> str:
    """What calling a function gives: a coroutine, an (async) generator, or its value."""
    if isinstance(fn, ast.AsyncFunctionDef):
        return "an async generator" if _is_generator(fn) else "a coroutine function (`async def`)"
    return "a generator" if _is_generator(fn) else "a plain function"


def _package_bases(target: Target, rel_pkg: str, tree: ast.Module, cls: ast.ClassDef,
                   planned: dict[Path, bytes]) -> list[tuple[str, ast.ClassDef]]:
    """The base classes of `cls` that the package defines, nearest first (three levels at most): those of the same
    file, and those a `from M import B` of the package brings, as the recipe leaves them (`planned`)."""
    out: list[tuple[str, ast.ClassDef]] = []
    todo = [(rel_pkg, tree, cls, 0)]
    while todo:
        here, module, node, depth = todo.pop(0)
        if depth >= 3:
            continue
        for b in node.bases:
            name = b.id if isinstance(b, ast.Name) else None
            found = next(((here, module, c) for c in module.body if isinstance(c, ast.ClassDef) and c.name == name),
                         None) if name else None
            if found is None and name:
                imp = next((i for i in module.body if isinstance(i, ast.ImportFrom)
                            and any((a.asname or a.name) == name for a in i.names)), None)
                dotted = imported_module(imp, target.package, here) if imp is not None else None
                where = _module_path(target.package_dir, dotted) if dotted else None
                if isinstance(where, Path) and where.is_dir():
                    where = where / "__init__.py"
                if isinstance(where, Path) and where.suffix == ".py" and where.is_file() and _source_file(where):
                    real = next(a.name for a in imp.names if (a.asname or a.name) == name)
                    try:
                        other = ast.parse(planned.get(where) or where.read_bytes())
                    except (OSError, SyntaxError, ValueError, RecursionError):
                        other = None
                    other_rel = where.relative_to(target.package_dir).as_posix()
                    found = next(((other_rel, other, c) for c in (other.body if other else [])
                                  if isinstance(c, ast.ClassDef) and c.name == real), None)
            if found is not None and all(found[2] is not c for _, c in out):
                out.append((found[0], found[2]))
                todo.append((*found, depth + 1))
    return out


def _self_calls(classes: tuple[ast.ClassDef, ...],
                name: str | None = None) -> Iterator[tuple[ast.ClassDef, ast.AST, ast.Call]]:
    """(class, method, call) for each `self.name(...)` (with `name` None, each `self.<any>(...)`) in the classes'
    own methods."""
    for owner in classes:
        for fn in owner.body:
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or not fn.args.args:
                continue
            me = fn.args.args[0].arg
            for n in ast.walk(fn):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and name in (None, n.func.attr) \
                        and isinstance(n.func.value, ast.Name) and n.func.value.id == me:
                    yield owner, fn, n


def _misfit(call: ast.Call, fn: ast.FunctionDef | ast.AsyncFunctionDef, skip: int = 1) -> str | None:
    """Why the function `fn` cannot take the call, `skip` of its first parameters filled without an argument (1: a
    method's instance), or None when it can (or when the call unpacks `*args`/`**kwargs`: not told)."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None
    a = fn.args
    positional = [p.arg for p in (*a.posonlyargs, *a.args)][skip:]
    posonly = {p.arg for p in a.posonlyargs}
    kwonly = [p.arg for p in a.kwonlyargs]
    if len(call.args) > len(positional) and a.vararg is None:
        return f"{len(call.args)} positional argument(s), where it takes {len(positional)}"
    bound = set(positional[:len(call.args)])
    given = {k.arg for k in call.keywords}
    for k in call.keywords:
        if k.arg in bound:
            return f"`{k.arg}` given twice"
        if (k.arg not in positional or k.arg in posonly) and k.arg not in kwonly and a.kwarg is None:
            return f"the keyword `{k.arg}`"
    required = positional[len(call.args):len(positional) - len(a.defaults)]
    missing = [p for p in required if p not in given]
    missing += [p.arg for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is None and p.arg not in given]
    return f"no value for `{missing[0]}`" if missing else None


def _signatures(tree: ast.Module) -> dict[str, tuple[ast.FunctionDef | ast.AsyncFunctionDef, int]]:
    """The module's own functions and classes (the class's `__init__`) by name, with how many of their first
    parameters a call does not fill."""
    out: dict[str, tuple[ast.FunctionDef | ast.AsyncFunctionDef, int]] = {}
    resolve = None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out[node.name] = (node, 0)
        elif isinstance(node, ast.ClassDef):
            for fn in node.body:  # its methods, as `self.m(...)` of a subclass elsewhere runs them
                # (`abstractmethod` hands the function back as it is: its signature is the one overrides answer to)
                if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name != "__init__" and all(
                        isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod", "abstractmethod")
                        or isinstance(d, ast.Attribute) and d.attr == "abstractmethod" for d in fn.decorator_list):
                    static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list)
                    out[f"{node.name}.{fn.name}"] = (fn, 0 if static else 1)
            init = next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
            if init is not None and not node.decorator_list:
                out[node.name] = (init, 1)
            elif init is None and (generated_init.dataclass_options(node) is not None
                                   or generated_init.is_namedtuple(node)):
                # the `__init__` Python writes from the fields (an own `__init__` is what a dataclass keeps)
                resolve = resolve or generated_init.module_resolver(tree)
                found = generated_init.fields(node, resolve)
                made = generated_init.init_def(found) if found is not None else None
                if made is not None:
                    out[node.name] = (made, 1)
    return out


def _first_step(done: list[tuple[StepReport, Changed | None]],
                written: Callable[[ast.Module], bool]) -> StepReport | None:
    """The first changed step after which the module holds what `written` looks for (read only when a check fails)."""
    for report, changed in done:
        if changed is None:
            continue
        try:
            if written(ast.parse(changed.module.code)):
                return report
        except (SyntaxError, ValueError, RecursionError):
            continue
    return None


def _reexports(target: Target, dotted: str, names: set[str], planned: dict[Path, bytes]) -> dict[str, dict[str, str]]:
    """{package: {name it exports: name in `dotted`}} for the packages above the module `dotted` whose
    `__init__.py` imports some of `names` from it (`from .utils import helper` makes `from sglang import helper`
    the same function)."""
    out: dict[str, dict[str, str]] = {}
    parts = dotted.split(".")
    for depth in range(1, len(parts)):
        package = ".".join(parts[:depth])
        init = target.package_dir.joinpath(*parts[1:depth], "__init__.py")
        try:
            data = planned[init] if init in planned else init.read_bytes()
        except OSError:
            continue
        if not any(n.encode() in data for n in names):
            continue
        try:
            tree = ast.parse(data)
        except (SyntaxError, ValueError, RecursionError):
            continue
        rel = init.relative_to(target.package_dir).as_posix()
        found = {a.asname or a.name: a.name for node, module in _package_imports(tree, target.package, rel)
                 if isinstance(node, ast.ImportFrom) and module == dotted for a in node.names if a.name in names}
        if found:
            out[package] = found
    return out


def _widened_only(old: ast.FunctionDef | ast.AsyncFunctionDef, new: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether `new` takes every call by keywords that `old` takes: the same parameters (each keeping a default it
    had, a positional-only one staying so) and more, each with a default; no `**kwargs` (whose keywords a new
    parameter would capture) and no `*args` gained or lost."""
    def table(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, tuple[bool, bool]]:
        a = fn.args
        positional = [*a.posonlyargs, *a.args]
        with_default = {p.arg for p in positional[len(positional) - len(a.defaults):]} | {
            p.arg for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None}
        posonly = {p.arg for p in a.posonlyargs}
        return {p.arg: (p.arg in with_default, p.arg in posonly) for p in (*positional, *a.kwonlyargs)}

    if old.args.kwarg is not None or new.args.kwarg is not None or (old.args.vararg is None) != (new.args.vararg is None):
        return False
    was, now = table(old), table(new)
    return all(name in now and now[name][1] == posonly and (now[name][0] or not default)
               for name, (default, posonly) in was.items()) \
        and all(now[name][0] for name in now.keys() - was.keys())


def _positional_names(call: ast.Call, fn: ast.FunctionDef | ast.AsyncFunctionDef, skip: int) -> list[str]:
    return [p.arg for p in (*fn.args.posonlyargs, *fn.args.args)][skip:][:len(call.args)]


def _calls_across_modules(recipe_id: str, target: Target, rel_pkg: str, rel: str, path: Path, before: str,
                          tree: ast.Module, done: list[tuple[StepReport, Changed | None]],
                          planned: dict[Path, bytes]) -> list[SpecpatchError]:
    """Calls that cross a module boundary and no longer fit: a function (or class) of this file whose signature the
    recipe changed, called from another module of the package (`from sglang.srt.utils import get_int_env_var`) in
    a way that fails now (TypeError) or passes an argument by position to another parameter than before; and a
    call the recipe adds or changes in this file to a function another module of the package defines, that does
    not fit it (a keyword it does not take). The checks of the operations see one module."""
    try:
        old_tree = ast.parse(before)
    except (SyntaxError, ValueError, RecursionError):
        return []
    owner = next((r for r, c in reversed(done) if c is not None), None)
    errors: list[SpecpatchError] = []

    def error(message: str, line: int | None, kind: type[SpecpatchError] = CallMisfit,
              written: Callable[[ast.Module], bool] | None = None) -> None:
        """`written`: what tells, in the module as a step left it, that the step wrote what fails (the step charged:
        the first that did, else the file's last changed one)."""
        by = _first_step(done, written) if written is not None else None
        by = by or owner
        errors.append(kind(message, location=Location(
            recipe=recipe_id, step=by.index if by else None, op=by.op if by else None, file=rel,
            anchor=by.anchor if by else None, line=line)))

    # this file's functions whose parameters changed: their calls elsewhere
    was, now = _signatures(old_tree), _signatures(tree)
    changed = {name: (was[name], now[name]) for name in was.keys() & now.keys()
               if ast.dump(was[name][0].args) != ast.dump(now[name][0].args)}
    # a method that gained a parameter the recipe's calls pass by keyword: a subclass's override that does not take
    # it gets it all the same, where the object is of that subclass (TypeError)
    passed = _keywords_passed(changed, tree)
    if passed:
        classes = {c.name: c for c in tree.body if isinstance(c, ast.ClassDef)}
        for sub, name, fn, key in _overrides_lacking(tree, classes, passed,
                                                     lambda b: b.id if isinstance(b, ast.Name) else None):
            error(f"once patched, `{name}` takes `{key}`, which the recipe's calls pass, but `{sub.name}.{fn.name}` "
                  f"(line {fn.lineno}), which overrides it, does not: TypeError where the object is a `{sub.name}`",
                  fn.lineno, written=lambda t, n=name, k=key: _takes(t, n, k))
    if changed:
        parts = PurePosixPath(rel_pkg).with_suffix("").parts
        dotted = ".".join([target.package, *(parts[:-1] if parts[-1] == "__init__" else parts)])
        # a signature that only gained parameters with defaults fails no call that passes keywords only; a module
        # whose text has no other use of such a name (a call with a first argument by position, an alias, a class
        # deriving from it) is not parsed: `ServerArgs` gaining a field is read in a hundred modules of sglang
        # (a method `C.m` is looked for in the subclasses of `C` other modules derive, whose `self.m(...)` runs it)
        widened = {name for name, ((o, _), (n, _)) in changed.items() if _widened_only(o, n)}
        exported = _reexports(target, dotted, {n.split(".")[0] for n in changed}, planned)
        owners = {name.split(".")[0] for name in changed if "." in name}
        uses = {name: re.compile((rb"\b" + name.encode() + rb"(?:\s*\(\s*(?!\)|\*|[A-Za-z_]\w*\s*=(?!=))|\s+as\s)|"
                                  if "." not in name else b"") + rb"class\s+\w+\s*\([^)]*\b"
                                 + name.split(".")[0].encode() + rb"\b") for name in widened}
        for other, data in _package_sources(target.package_dir, path, planned, {n.split(".")[0] for n in changed}):
            if all(name in widened and not uses[name].search(data) for name in changed
                   if name.split(".")[0].encode() in data):
                continue
            try:
                other_tree = ast.parse(data)
            except (SyntaxError, ValueError, RecursionError):
                continue
            other_rel = other.relative_to(target.package_dir).as_posix()
            there = target.rel(other)  # as the messages name files (`rel`)
            imports = _package_imports(other_tree, target.package, other_rel)
            names = {a.asname or a.name: a.name for node, module in imports
                     if isinstance(node, ast.ImportFrom) and module == dotted for a in node.names
                     if a.name in changed or a.name in owners}
            names.update({a.asname or a.name: exported[module][a.name] for node, module in imports
                          if isinstance(node, ast.ImportFrom) and module in exported for a in node.names
                          if a.name in exported[module]})  # through a package's `__init__.py` that re-exports it
            # the module itself, bound to a name (`from sglang.srt import utils`, `import sglang.srt.utils as u`)
            # or by its dotted path (`import sglang.srt.utils`): its calls `utils.f(...)` too
            modules = {a.asname or a.name for node, module in imports if isinstance(node, ast.ImportFrom)
                       for a in node.names if f"{module}.{a.name}" == dotted}
            modules |= {a.asname or a.name for node, _ in imports if isinstance(node, ast.Import)
                        for a in node.names if a.name == dotted}

            def callee(f: ast.expr) -> str | None:
                """The name here that `f` (what a call calls, or a base class) stands for in that module."""
                if isinstance(f, ast.Name):
                    return names.get(f.id)
                if isinstance(f, ast.Attribute) and (f.attr in changed or f.attr in owners) \
                        and ast.unparse(f.value) in modules:
                    return f.attr
                return None

            if not names and not modules:
                continue
            # a dataclass of that module deriving (through its own classes, too) from a dataclass here: its
            # generated `__init__` is made of the fields of both
            subs = [n for n in other_tree.body if isinstance(n, ast.ClassDef) and n.bases]
            if subs:
                theirs = {c.name: c for c in subs}
                mine = (generated_init.module_resolver(old_tree), generated_init.module_resolver(tree))

                def resolve(base: ast.expr, at: int, seen: frozenset[str] = frozenset()) -> list | None:
                    name = callee(base)
                    if name is not None:
                        return mine[at](ast.Name(name))
                    cls = theirs.get(base.id) if isinstance(base, ast.Name) and base.id not in seen else None
                    return generated_init.fields(cls, lambda b: resolve(b, at, seen | {cls.name})) if cls else None

                for sub in subs:
                    errs = [generated_init.order_error(sub.name, found) if (
                        found := generated_init.fields(sub, lambda b, at=at: resolve(b, at))) is not None else None
                        for at in (0, 1)]
                    if errs[1] is not None and errs[0] is None:
                        error(f"once patched, the dataclass `{sub.name}` of `{there}` (line {sub.lineno}), which "
                              f"derives from one of `{rel}`, {errs[1][1]} (when `{there}` is imported)", None,
                              FailsAtRunTime)
            if passed:
                for sub, name, fn, key in _overrides_lacking(
                        other_tree, {c.name: c for c in other_tree.body if isinstance(c, ast.ClassDef)}, passed,
                        callee):
                    error(f"once patched, `{name}` of `{rel}` takes `{key}`, which the recipe's calls pass, but "
                          f"`{sub.name}.{fn.name}` of `{there}` (line {fn.lineno}), which overrides it, does not: "
                          f"TypeError where the object is a `{sub.name}`", None,
                          written=lambda t, n=name, k=key: _takes(t, n, k))
            calls = [(n, callee(n.func)) for n in ast.walk(other_tree) if isinstance(n, ast.Call)]
            for sub in (n for n in ast.walk(other_tree) if isinstance(n, ast.ClassDef) and owners):
                base = next((b for b in (callee(b) for b in sub.bases)
                             if b in owners), None)
                own = {f.name for f in sub.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
                calls += [(call, key) for key in changed if base is not None and key.startswith(f"{base}.")
                          and key.split(".")[1] not in own for _, _, call in _self_calls((sub,), key.split(".")[1])]
            for call, name in calls:
                if name not in changed:
                    continue
                (old_fn, skip), (new_fn, _) = changed[name]
                if _misfit(call, old_fn, skip) is not None:
                    continue  # it did not fit before either: not the recipe's doing
                why = _misfit(call, new_fn, skip)
                shown = ast.unparse(call)[:100]
                new_args = ast.dump(new_fn.args)

                def changed_by(t: ast.Module, name: str = name, new_args: str = new_args) -> bool:
                    found = _signatures(t).get(name)
                    return found is not None and ast.dump(found[0].args) == new_args

                named = {p.arg for p in (*old_fn.args.posonlyargs, *old_fn.args.args, *old_fn.args.kwonlyargs)}
                captured = [k.arg for k in call.keywords if k.arg is not None and k.arg not in named
                            and old_fn.args.kwarg is not None and k.arg in {
                                p.arg for p in (*new_fn.args.args, *new_fn.args.kwonlyargs)}
                            and forwards_keyword(ast.unparse(old_fn), old_fn.args.kwarg.arg, k.arg)]
                if why is None and captured:
                    error(f"once patched, the call `{shown}` of `{there}` (line {call.lineno}) passes "
                          f"`{captured[0]}=` into `**{old_fn.args.kwarg.arg}` of `{name}`, and the new "
                          f"parameter `{captured[0]}` would take it instead", None, written=changed_by)
                elif why is not None:
                    error(f"once patched, `{name}` of `{rel}` cannot take the call `{shown}` of "
                          f"`{there}` (line {call.lineno}): {why}, TypeError when it runs", None, written=changed_by)
                elif _positional_names(call, old_fn, skip) != _positional_names(call, new_fn, skip):
                    moved = [(o, n) for o, n in zip(_positional_names(call, old_fn, skip),
                                                    _positional_names(call, new_fn, skip)) if o != n]
                    error(f"once patched, the call `{shown}` of `{there}` (line {call.lineno}) passes by "
                          f"position what `{moved[0][0]}` took to `{moved[0][1]}` of `{name}`", None,
                          written=changed_by)
    # calls the recipe adds or changes here, to functions other modules of the package define (only calls of names
    # the file imports from the package are compared: dumping every call of a large module is most of the cost)
    imported: dict[str, tuple[str, str]] = {}
    modules: dict[str, str] = {}  # a name (or dotted path) bound to a module of the package -> the module
    for node, module in _package_imports(tree, target.package, rel_pkg):
        if isinstance(node, ast.ImportFrom):
            imported.update({a.asname or a.name: (module, a.name) for a in node.names})
            modules.update({a.asname or a.name: f"{module}.{a.name}" for a in node.names})
        else:
            modules.update({a.asname or a.name: a.name for a in node.names})

    heads = {name.split(".")[0] for name in modules}

    def target_of(call: ast.Call) -> tuple[str, str] | None:
        f = call.func
        if isinstance(f, ast.Name):
            return imported.get(f.id)
        root = f.value if isinstance(f, ast.Attribute) else None
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name) and root.id in heads and (held := modules.get(ast.unparse(f.value))):
            return held, f.attr
        return None

    if imported or modules:
        def calls_of(t: ast.Module) -> list[ast.Call]:
            return [n for n in ast.walk(t) if isinstance(n, ast.Call) and isinstance(n.func, (ast.Name, ast.Attribute))
                    and target_of(n) is not None]

        def self_calls(t: ast.Module) -> list[tuple[ast.Call, tuple[str, str]]]:
            """`self.m(...)` in a class of the file whose one base another module of the package defines, where the
            class does not define `m`: it runs the base's (`Base.m` of that module)."""
            out = []
            for cls in (c for c in t.body if isinstance(c, ast.ClassDef) and len(c.bases) == 1):
                base = cls.bases[0]
                if not isinstance(base, ast.Name) or base.id not in imported:
                    continue
                module, real = imported[base.id]
                own = {f.name for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
                out += [(call, (module, f"{real}.{call.func.attr}")) for _, _, call in _self_calls((cls,))
                        if call.func.attr not in own]
            return out

        old_calls = [*((n, target_of(n)) for n in calls_of(old_tree)), *self_calls(old_tree)]
        had = {ast.dump(n) for n, _ in old_calls}
        read: dict[tuple[str, bool], dict] = {}  # (module, as planned) -> its signatures, read once

        def signatures(module: str, as_planned: bool = True) -> dict:
            if (module, as_planned) not in read:
                there = _module_path(target.package_dir, module)
                read[module, as_planned] = {}
                if isinstance(there, Path) and not there.is_dir():
                    try:
                        read[module, as_planned] = _signatures(ast.parse(
                            planned[there] if as_planned and there in planned else there.read_bytes()))
                    except (OSError, SyntaxError, ValueError, RecursionError):
                        pass
            return read[module, as_planned]

        for call, (module, name) in [*((n, target_of(n)) for n in calls_of(tree)), *self_calls(tree)]:
            if ast.dump(call) in had:
                continue
            found = signatures(module).get(name)
            if found is None or any(not isinstance(d, ast.Name) or d.id not in ("staticmethod",)
                                    for d in found[0].decorator_list):
                continue  # not a plain function of that module (a decorator may change what it takes)
            why = _misfit(call, *found)
            was = signatures(module, False).get(name) if why is not None else None
            if why is not None and why.startswith("no value for") and was is not None and any(
                    where == (module, name) and (_misfit(c, *was) or "").startswith("no value for")
                    for c, where in old_calls):
                continue  # the release's own calls of it leave values out too: what it requires is not told right
            if why is not None:
                dump = ast.dump(call)
                error(f"the call `{ast.unparse(call)[:100]}` (line {call.lineno}) cannot be taken by `{name}` of "
                      f"`{module}`: {why}, TypeError when it runs", call.lineno,
                      written=lambda t, dump=dump: any(ast.dump(n) == dump for n in ast.walk(t)
                                                       if isinstance(n, ast.Call)))
    return errors


def _flow_changed(recipe_id: str, rel: str, before: str, after: str, tree: ast.Module,
                  done: list[tuple[StepReport, Changed | None]]) -> list[SpecpatchError]:
    """What the recipe's code does to how a function of the file runs that Python accepts and nobody meant: a
    `yield` that makes a plain function a generator (its callers get a generator object) or the last one taken out
    of a generator; a `return VALUE` added to a generator (the value never reaches a `for` loop); statements added
    right after a `return`, `raise`, `continue` or `break` of their block (they never run). Each is judged against
    the original function of the same name, so what the release already does is not charged."""
    try:
        old_tree = ast.parse(before)
    except (SyntaxError, ValueError, RecursionError):
        return []
    # functions of one name (an if/else pair of defs) are paired in their order; only those the recipe changed
    # are judged
    was: dict[str, list] = {}
    for name, fn in _functions(old_tree):
        was.setdefault(name, []).append(fn)
    now: dict[str, list] = {}
    for name, fn in _functions(tree):
        now.setdefault(name, []).append(fn)
    old_lines, lines = before.splitlines(), after.splitlines()

    def same(o: ast.AST, n: ast.AST) -> bool:  # the same text is the same code: no dump of every function
        if old_lines[o.lineno - 1:o.end_lineno] == lines[n.lineno - 1:n.end_lineno]:
            return True
        return ast.dump(o) == ast.dump(n)

    pairs = [(name, o, n) for name, fns in now.items() if len(was.get(name, ())) == len(fns)
             for o, n in zip(was[name], fns) if not same(o, n)]
    errors: list[SpecpatchError] = []
    # names the module defines only as coroutine functions (a sync `close` beside an async one says nothing)
    defs = [f for fns in now.values() for f in fns]
    coroutines = {f.name for f in defs if isinstance(f, ast.AsyncFunctionDef)} - \
        {f.name for f in defs if isinstance(f, ast.FunctionDef)}
    # plain functions that return nothing awaitable (no value, or literals and arithmetic only): read only for a
    # function the recipe changed that awaits something
    inert = (ast.Constant, ast.JoinedStr, ast.BinOp, ast.UnaryOp, ast.Compare, ast.List, ast.Tuple, ast.Dict,
             ast.Set, ast.ListComp, ast.SetComp, ast.DictComp)
    plain: set[str] = set()
    if any(isinstance(n, ast.Await) for _, _, fn in pairs for n in _own_nodes(fn)):
        inert_of = {f: isinstance(f, ast.FunctionDef) and not _is_generator(f)
                    and all(isinstance(r.value, inert) for r in _value_returns(f)) for f in defs}
        plain = {f.name for f, yes in inert_of.items() if yes} - {f.name for f, yes in inert_of.items() if not yes}
    for name, old, fn in pairs:
        found: list[tuple[int, str]] = []
        gen_then, gen_now = _is_generator(old), _is_generator(fn)
        if gen_now != gen_then:
            line = next((n.lineno for n in _own_nodes(fn) if isinstance(n, (ast.Yield, ast.YieldFrom))), fn.lineno)
            found.append((line, f"makes `{name}` a generator (a `yield` in its body): its callers would get a "
                                f"generator object, not what it returns" if gen_now else
                                f"takes the last `yield` out of `{name}`: it is no longer a generator, and its "
                                f"callers iterate what it returns"))
        elif gen_now:
            returns = _value_returns(fn)
            if len(returns) > len(_value_returns(old)):
                found.append((returns[-1].lineno, f"returns a value from the generator `{name}`: it ends the "
                                                  f"iteration, and a `for` loop or `list()` never sees the value"))
        if isinstance(fn, ast.AsyncFunctionDef) != isinstance(old, ast.AsyncFunctionDef):
            bare = _unawaited_calls(tree, {fn.name}) if isinstance(fn, ast.AsyncFunctionDef) else []
            if bare or not isinstance(fn, ast.AsyncFunctionDef):
                found.append((bare[0] if bare else fn.lineno,
                              f"makes `{name}` a coroutine function (`async def`) while the module calls it without "
                              f"`await`: those calls get a coroutine that never runs" if bare else
                              f"makes the coroutine function `{name}` a plain one: its callers `await` what it "
                              f"returns"))
        shadowed = sorted(n for n in (_local_names(fn) - _local_names(old)) & _outer_reads(old)
                          if not _bound_before_reads(fn, n))
        if shadowed:
            n = shadowed[0]
            line = next((x.lineno for x in _own_nodes(fn) if isinstance(x, ast.Name) and x.id == n
                         and not isinstance(x.ctx, ast.Load)), fn.lineno)
            found.append((line, f"binds `{n}` in `{name}`, which its own code read from outside it (a name of the "
                                f"module or a builtin): every read of `{n}` in `{name}` now reads the local, before "
                                f"it is set (UnboundLocalError, or NameError in a comprehension or lambda) or after"))
        leaves = _finally_exits(fn)
        if len(leaves) > len(_finally_exits(old)):
            found.append((leaves[-1], f"leaves a `finally:` block of `{name}` with a `return`, `break` or "
                                      f"`continue`: the exception the `try` raised is silently dropped"))
        raises: list[tuple[int, str]] = []
        if fn.name == "__init__" and len(_value_returns(fn)) > len(_value_returns(old)):
            raises.append((_value_returns(fn)[-1].lineno, f"returns a value from `{name}`: `__init__` must return "
                                                         f"None, a TypeError at every construction"))
        awaited = _awaited_plain(fn, plain)
        if len(awaited) > len(_awaited_plain(old, plain)):
            raises.append((awaited[-1][0], f"awaits `{awaited[-1][1]}(...)` in `{name}`, a plain function of the "
                                          f"module that returns no awaitable: a TypeError at the `await`"))
        if coroutines and isinstance(fn, ast.FunctionDef):  # a plain function now returning a coroutine, too
            def coro_returns(f: ast.AST) -> list[ast.Return]:
                return [r for r in _value_returns(f) if isinstance(r.value, ast.Call) and _called(r.value) in coroutines]

            mixed = coro_returns(fn)
            if len(mixed) > len(coro_returns(old)) and len(mixed) < len(_value_returns(fn)):
                found.append((mixed[-1].lineno, f"returns `{ast.unparse(mixed[-1].value)[:60]}`, a coroutine, from "
                                                f"the plain function `{name}`, whose other returns are values: its "
                                                f"callers would get a coroutine object that never runs"))
        unawaited = _unawaited_calls(fn, coroutines, statements_only=True) if coroutines else []
        if len(unawaited) > len(_unawaited_calls(old, coroutines, statements_only=True) if coroutines else []):
            found.append((unawaited[-1], f"calls a coroutine function of the module in `{name}` without `await`: "
                                         f"the coroutine is made and never runs"))
        dead_then, dead_now = _dead_statements(old), _dead_statements(fn)
        if len(dead_now) > len(dead_then):
            line = dead_now[-1]
            if not found:
                errors.append(_charged(recipe_id, rel, lines, done, line, (
                    f"puts code in `{name}` after a statement that always leaves its block (a `return`, `raise`, "
                    f"`continue` or `break`, or an `if`, `with`, `try` or `while True` every way through which "
                    f"does): it never runs"), kind=Unreachable))
        errors.extend(_charged(recipe_id, rel, lines, done, lineno, why, kind=FlowChanged)
                      for lineno, why in found[:1])
        errors.extend(_charged(recipe_id, rel, lines, done, lineno, why, kind=FailsAtRunTime)
                      for lineno, why in raises[:1])
    twice = ("keep one of the two imports: this release may have the name elsewhere (the recipe's code can import "
             "it from there); nothing was written")
    for check, kind, hint in ((lambda t: _slots_broken(t) + _class_scope_reads(t) + _frozen_writes(t)
                               + _class_attributes_missing(t) + generated_init.broken_classes(t, _nodes(t)),
                               FailsAtRunTime, None),
                              (_class_body_shadows, FlowChanged, None),
                              (_imported_twice, Conflict, twice),
                              (_lambda_generators, FlowChanged, None),
                              (_init_reads_early, ReadBeforeSet, None),
                              (lambda t: runtime_rules.unpacked_wrong(t) + runtime_rules.readonly_writes(t)
                               + runtime_rules.import_time_reads(t), FailsAtRunTime, None),
                              (lambda t: runtime_rules.builtins_shadowed(t) + runtime_rules.mutable_defaults_changed(t)
                               + runtime_rules.contextmanager_yields(t), FlowChanged, None)):
        found = check(tree)
        had = {why for _, why in check(old_tree)} if found else set()  # the release's own are not charged
        errors.extend(_charged(recipe_id, rel, lines, done, lineno, why, kind=kind, hint=hint)
                      for lineno, why in [(n, w) for n, w in found if w not in had][:1])
    return errors


def _bound_before_reads(fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    """Whether an import in the function's own block (no branch around it: an import moved into the function, as
    upstream does against a circular import) binds `name` above every read of it in the function: each read gets
    what it imports, as it got the module's before (another value bound so, `time = 2`, is another thing)."""
    first = next((st for st in fn.body if isinstance(st, (ast.Import, ast.ImportFrom))
                  and name in {(a.asname or a.name).split(".")[0] for a in st.names}), None)
    if first is None:
        return False
    reads = [n.lineno for st in fn.body for n in ast.walk(st) if isinstance(n, ast.Name) and n.id == name
             and isinstance(n.ctx, ast.Load)]
    return all(line > first.end_lineno for line in reads)


def _local_names(fn: ast.AST) -> set[str]:
    """The names a function binds in its own scope (parameters, assignments, imports, nested defs and classes,
    `except ... as`, `match` captures, walrus targets), less those it declares `global` or `nonlocal`; a
    comprehension's own loop variables are its own."""
    args = fn.args
    out = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg) if a is not None}
    inner = {id(n) for node in _own_nodes(fn) if isinstance(node, ast.comprehension)
             for n in ast.walk(node.target)}
    declared: set[str] = set()
    for node in _own_nodes(fn):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load) and id(node) not in inner:
            out.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node is not fn:
            out.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"}
        elif isinstance(node, ast.ExceptHandler) and node.name:
            out.add(node.name)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            out.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            declared |= set(node.names)
    return out - declared


def _outer_reads(fn: ast.AST) -> set[str]:
    """The names a function (its nested scopes included) reads that it does not bind itself: the module's, the
    builtins, an enclosing function's. A name a nested scope binds (a comprehension's loop variable, a lambda's or
    nested def's parameter or local) is that scope's where it reads it."""
    out: set[str] = set()
    comprehensions = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)

    def visit(node: ast.AST, bound: frozenset[str]) -> None:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in bound:
            out.add(node.id)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            bound = bound | _local_names(node)
        elif isinstance(node, ast.Lambda):
            a = node.args
            bound = bound | {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if x}
        elif isinstance(node, comprehensions):
            bound = bound | {t.id for g in node.generators for t in ast.walk(g.target) if isinstance(t, ast.Name)}
        for child in ast.iter_child_nodes(node):
            visit(child, bound)

    visit(fn, frozenset(_local_names(fn)))
    return out


def _finally_exits(fn: ast.AST) -> list[int]:
    """The lines of the `return`, `break` and `continue` statements that leave a `finally:` block of a function's own
    body (a `break` of a loop inside the block stays in it)."""
    out: list[int] = []

    def walk(stmts: list[ast.stmt], in_loop: bool) -> None:
        for st in stmts:
            if isinstance(st, ast.Return) or isinstance(st, (ast.Break, ast.Continue)) and not in_loop:
                out.append(st.lineno)
            elif not isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                loop = in_loop or isinstance(st, (ast.For, ast.AsyncFor, ast.While))
                for block in ("body", "orelse", "finalbody"):
                    walk(getattr(st, block, []), loop if block != "orelse" else in_loop)
                for handler in [*getattr(st, "handlers", []), *getattr(st, "cases", [])]:
                    walk(handler.body, in_loop)

    for node in _own_nodes(fn):
        if isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            walk(node.finalbody, False)
    return sorted(set(out))




def _nodes(tree: ast.AST) -> list[ast.AST]:
    """`ast.walk(tree)` as a list, one walk for the checks of the engine and of `_runtime_rules` alike."""
    return runtime_rules._nodes(tree)


def _called(call: ast.Call) -> str | None:
    """The function of the module a call names: `f(...)`, `self.f(...)`, `cls.f(...)`; else None."""
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) and \
        isinstance(f.value, ast.Name) and f.value.id in ("self", "cls") else None


def _awaited_plain(fn: ast.AST, plain: set[str]) -> list[tuple[int, str]]:
    """(line, name) of each `await f(...)` / `await self.f(...)` in a function's own body whose `f` is in `plain`."""
    return sorted((node.lineno, name) for node in _own_nodes(fn) if isinstance(node, ast.Await)
                  and isinstance(node.value, ast.Call) and (name := _called(node.value)) in plain)


def _lambda_generators(tree: ast.Module) -> list[tuple[int, str]]:
    """Lambdas with a `yield` in their body: calling one gives a generator, not the value."""
    return [(n.lineno, f"makes `{ast.unparse(n)}` a generator (a `yield` in a lambda): calling it gives a generator "
                       f"object, not the value") for n in _nodes(tree)
            if isinstance(n, ast.Lambda) and any(isinstance(m, (ast.Yield, ast.YieldFrom)) for m in _own_nodes(n))]


def _class_attributes_missing(tree: ast.Module) -> list[tuple[int, str]]:
    """Reads of `C.name` where `C` is a class the module defines at its top level, whose bases (if any) the module
    defines too, and no class of that line binds `name` (in its body, a field's annotation included, or by an
    assignment `C.name = ...` anywhere in the module): AttributeError when it runs (`default=ServerArgs.batch` for a
    field the recipe's other step no longer adds)."""
    classes = {c.name: c for c in tree.body if isinstance(c, ast.ClassDef)}
    if not classes:
        return []
    on_classes = [n for n in _nodes(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                  and n.value.id in classes]
    if not on_classes:
        return []
    assigned = {(n.value.id, n.attr) for n in on_classes if not isinstance(n.ctx, ast.Load)}

    def bound(name: str, seen: frozenset = frozenset()) -> set[str] | None:
        """The names class `name` and its bases bind; None when a base (or a metaclass, a decorator) is not known."""
        cls = classes.get(name)
        if cls is None or name in seen or cls.keywords or cls.decorator_list and not all(
                "dataclass" in ast.unparse(d) for d in cls.decorator_list):
            return None
        out = {attr for owner, attr in assigned if owner == name}
        for st in cls.body:
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.add(st.name)
            elif isinstance(st, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Import, ast.ImportFrom,
                                 ast.If, ast.Try, ast.For, ast.With)):
                out |= {t.id for t in _targets(st) if isinstance(t, ast.Name)}
        for base in cls.bases:
            if isinstance(base, ast.Name) and base.id == "object":
                continue
            more = bound(base.id, seen | {name}) if isinstance(base, ast.Name) else None
            if more is None:
                return None
            out |= more
        return out

    known = {name: bound(name) for name in {n.value.id for n in on_classes}}
    return [(n.lineno, f"reads `{n.value.id}.{n.attr}`, which the class `{n.value.id}` does not define: AttributeError "
                       f"when it runs") for n in on_classes
            if isinstance(n.ctx, ast.Load) and known.get(n.value.id) is not None and not n.attr.startswith("__")
            and n.attr not in known[n.value.id]]


def _class_body_shadows(tree: ast.Module) -> list[tuple[int, str]]:
    """Names a class body binds (a method `def property`, `int = 3`) above a read of the same name at the class's own
    level (a decorator `@property`, an annotation, a default value) that, without the binding, is the module's or a
    builtin: the read now gets the class's own (the next `@property` calls the new method)."""
    import builtins

    module_names: set[str] | None = None  # read once a class reads a name it binds above
    lazy = any(isinstance(st, ast.ImportFrom) and st.module == "__future__" and any(
        a.name == "annotations" for a in st.names) for st in tree.body)
    out: list[tuple[int, str]] = []
    for cls in (n for n in _nodes(tree) if isinstance(n, ast.ClassDef)):
        bound: set[str] = set()
        for st in cls.body:
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = st.args
                notes = [] if lazy else [*(p.annotation for p in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg,
                                                                    a.kwarg) if p is not None), st.returns]
                read = [*st.decorator_list, *a.defaults, *(d for d in a.kw_defaults if d is not None),
                        *(n for n in notes if n is not None)]
            elif isinstance(st, ast.ClassDef):
                read = [*st.decorator_list, *st.bases, *(k.value for k in st.keywords)]
            elif isinstance(st, ast.AnnAssign):
                read = [st.value] if st.value is not None else []
                read += [] if lazy else [st.annotation]
            else:
                read = [st]
            for n in (x for r in read for x in _class_level(r)) if bound else ():
                if not (isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in bound):
                    continue
                if module_names is None:
                    module_names = set(bound_at_module_level_ast(tree.body)) | set(dir(builtins))
                if n.id in module_names:
                    out.append((n.lineno, f"binds `{n.id}` in the class `{cls.name}` above a read of it in the class's "
                                          f"body (a decorator, an annotation, a default), which meant the module's "
                                          f"or the builtin `{n.id}`: it now gets the class's own"))
                    bound.discard(n.id)  # once per name
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound.add(st.name)
            elif isinstance(st, (ast.Assign, ast.AnnAssign)) and (not isinstance(st, ast.AnnAssign) or st.value):
                bound |= {t.id for t in (st.targets if isinstance(st, ast.Assign) else [st.target])
                          if isinstance(t, ast.Name)}
    return out


def _imported_twice(tree: ast.Module) -> list[tuple[int, str]]:
    """A name two import statements of one block bind from different places (`from a import X` then `from b import
    X`): the second wins, and the first is dead or the stale one (upstream moved `X`, the recipe's import brings the
    old home back beside the new)."""
    out: list[tuple[int, str]] = []
    blocks = (ast.Module, ast.If, ast.Try, ast.ExceptHandler, ast.With, ast.For, ast.While, ast.FunctionDef,
              ast.AsyncFunctionDef, ast.ClassDef, ast.AsyncWith, ast.AsyncFor, *((ast.TryStar,) if hasattr(ast, "TryStar")
                                                                                  else ()))
    for node in (n for n in _nodes(tree) if isinstance(n, blocks)):
        for part in ("body", "orelse", "finalbody"):
            block = getattr(node, part, None)
            if not isinstance(block, list) or not block or not isinstance(block[0], ast.stmt):
                continue
            seen: dict[str, str] = {}
            for st in block:
                if not isinstance(st, (ast.Import, ast.ImportFrom)):
                    continue
                for a in st.names:
                    if a.name == "*":
                        continue
                    if isinstance(st, ast.ImportFrom):
                        name, where = a.asname or a.name, f"{'.' * st.level}{st.module or ''}.{a.name}"
                    else:
                        name, where = a.asname or a.name.split(".")[0], a.name if a.asname else a.name.split(".")[0]
                    if name in seen and seen[name] != where:
                        out.append((st.lineno, f"imports `{name}` as `{where}` in a block that already imports it "
                                               f"as `{seen[name]}`: one of them is stale (did upstream move it?)"))
                    seen[name] = where
    return out


def _class_level(node: ast.AST) -> Iterator[ast.AST]:
    """The nodes of `node` that run in the class's own scope: a lambda's body, a nested def's, and a comprehension's
    parts but its first iterable run in scopes of their own, which do not see the class's names."""
    yield node
    if isinstance(node, ast.Lambda):
        children = [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
    elif isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
        children = [node.generators[0].iter]
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        children = []
    else:
        children = list(ast.iter_child_nodes(node))
    for child in children:
        yield from _class_level(child)


def _frozen_writes(tree: ast.Module) -> list[tuple[int, str]]:
    """Attributes a method of a frozen dataclass assigns on its instance (`self.b = ...`, `self.n += 1`): the
    generated `__setattr__` raises FrozenInstanceError (`object.__setattr__` is the way round it)."""
    out: list[tuple[int, str]] = []
    for cls in (n for n in _nodes(tree) if isinstance(n, ast.ClassDef)):
        if not any(isinstance(d, ast.Call) and ast.unparse(d.func) in ("dataclass", "dataclasses.dataclass")
                   and any(k.arg == "frozen" and isinstance(k.value, ast.Constant) and k.value.value is True
                           for k in d.keywords) for d in cls.decorator_list):
            continue
        for fn in cls.body:
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or not fn.args.args \
                    or any(ast.unparse(d) in ("staticmethod", "classmethod") for d in fn.decorator_list):
                continue
            me = fn.args.args[0].arg
            out += [(n.lineno, f"assigns `{me}.{n.attr}` in `{cls.name}.{fn.name}`, a method of a frozen dataclass: "
                               f"FrozenInstanceError at every call") for n in _own_nodes(fn)
                    if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == me
                    and isinstance(n.ctx, (ast.Store, ast.Del))]
    return out


def _step_at(done: list[tuple[StepReport, Changed | None]], line: int | None) -> StepReport | None:
    """The step whose code holds `line` of the patched file, else the file's last changed step."""
    return next((r for r, c in done if c is not None and r.lines and line and r.lines[0] <= line <= r.lines[1]),
                None) or next((r for r, c in reversed(done) if c is not None), None)


def _charged(recipe_id: str, rel: str, lines: list[str], done: list[tuple[StepReport, Changed | None]],
             lineno: int, why: str, *, kind: type[Conflict] = Conflict, hint: str | None = None) -> SpecpatchError:
    """A conflict (of `kind`, with the kind's hint unless `hint` is given) at a line of the patched file, charged to
    the step whose code holds the line (else the file's last changed step)."""
    owner = _step_at(done, lineno)
    text = lines[lineno - 1].strip() if 0 < lineno <= len(lines) else ""
    return kind(f"once patched, `{rel}` {why} (line {lineno}: `{text}`)", location=Location(
        recipe=recipe_id, step=owner.index if owner else None, op=owner.op if owner else None, file=rel,
        anchor=owner.anchor if owner else None, line=lineno), hint=hint)


def _class_scope_reads(tree: ast.Module) -> list[tuple[int, str]]:
    """Names a comprehension, generator expression or lambda at a class's own level reads that only the class body
    binds (the module does not): those scopes do not see the class's names, a NameError when the class is made (or
    the lambda called). The iterable of a comprehension's first `for` is read in the class: it may use them."""
    import builtins

    module_names = set(bound_at_module_level_ast(tree.body)) | set(dir(builtins))  # what those scopes read instead
    out: list[tuple[int, str]] = []
    for cls in (n for n in _nodes(tree) if isinstance(n, ast.ClassDef)):
        own: set[str] = set()
        for st in cls.body:
            if isinstance(st, (ast.Assign, ast.AnnAssign)):
                own |= {t.id for t in (st.targets if isinstance(st, ast.Assign) else [st.target])
                        if isinstance(t, ast.Name)}
            elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                own.add(st.name)
        only = own - module_names
        if not only:
            continue
        for st in cls.body:
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            for node in ast.walk(st):
                if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
                    first = {id(n) for n in ast.walk(node.generators[0].iter)}
                    inner = [n for n in ast.walk(node) if id(n) not in first]
                elif isinstance(node, ast.Lambda):
                    inner = list(ast.walk(node.body))
                else:
                    continue
                for n in inner:
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in only:
                        out.append((n.lineno, f"reads `{n.id}` of the class `{cls.name}` in a comprehension or "
                                              f"lambda of its body, which does not see the class's names: NameError"))
                        break
    return out


def bound_at_module_level_ast(body: list[ast.stmt]) -> dict[str, int]:
    from .operations.add_definition import bound_at_module_level

    return bound_at_module_level(body)


def _slots_broken(tree: ast.Module) -> list[tuple[int, str]]:
    """What breaks a class's `__slots__` (a literal list of names, without `__dict__`, on a class whose bases are
    `object` or such classes of the module): a method that sets `self.x` for an `x` no slot has (AttributeError),
    a class attribute of a slot's name (ValueError when the class is made). (line, why) each."""
    classes = {c.name: c for c in tree.body if isinstance(c, ast.ClassDef)}

    def slots(c: ast.ClassDef, seen: frozenset = frozenset()) -> set[str] | None:
        own = next((st.value for st in c.body if isinstance(st, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__slots__" for t in st.targets)), None)
        if not isinstance(own, (ast.Tuple, ast.List)) or not all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in own.elts):
            return None
        names = {e.value for e in own.elts}
        if "__dict__" in names:
            return None
        for b in c.bases:
            name = b.id if isinstance(b, ast.Name) else None
            if name == "object":
                continue
            if name not in classes or name in seen:
                return None
            more = slots(classes[name], seen | {c.name})
            if more is None:
                return None
            names |= more
        return names

    out: list[tuple[int, str]] = []
    for c in classes.values():
        allowed = slots(c)
        if allowed is None:
            continue
        for st in c.body:
            if isinstance(st, (ast.Assign, ast.AnnAssign)):
                for t in (st.targets if isinstance(st, ast.Assign) else [st.target]):
                    if isinstance(t, ast.Name) and t.id in allowed and (isinstance(st, ast.Assign) or st.value):
                        out.append((st.lineno, f"gives `{c.name}` a class attribute `{t.id}` that its `__slots__` "
                                               f"names: ValueError when the class is made"))
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)) and st.args.args:
                me = st.args.args[0].arg
                for n in ast.walk(st):
                    if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and \
                            isinstance(n.value, ast.Name) and n.value.id == me and n.attr not in allowed:
                        out.append((n.lineno, f"sets `{me}.{n.attr}` in `{c.name}.{st.name}`, which no slot of its "
                                              f"`__slots__` names: AttributeError when it runs"))
    return out


def _functions(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """(dotted name, node) of every function and method of a module, nested ones included."""
    stack: list[tuple[str, ast.AST]] = [("", tree)]
    while stack:
        here, node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{here}.{child.name}" if here else child.name
                if not isinstance(child, ast.ClassDef):
                    yield name, child
                stack.append((name, child))
            elif not isinstance(child, ast.expr):
                stack.append((here, child))


def _own_nodes(fn: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a function's own body: not those of the functions, classes and lambdas it defines."""
    return runtime_rules._walk(ast.iter_child_nodes(fn))


def _value_returns(fn: ast.AST) -> list[ast.Return]:
    """The `return VALUE` statements of a function's own body (`return` and `return None` return no value)."""
    return [n for n in _own_nodes(fn) if isinstance(n, ast.Return) and n.value is not None
            and not (isinstance(n.value, ast.Constant) and n.value.value is None)]


def _is_generator(fn: ast.AST) -> bool:
    return any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in _own_nodes(fn))


def _dead_statements(fn: ast.AST) -> list[int]:
    """The lines of the statements of a function's own blocks that follow a statement of the same block that always
    leaves it (`_always_leaves`: a `return`, or an `if` whose arms all return...)."""
    out: list[int] = []
    for node in (fn, *_own_nodes(fn)):
        for part in ("body", "orelse", "finalbody"):
            block = getattr(node, part, None)
            if not isinstance(block, list) or not block or not isinstance(block[0], ast.stmt):
                continue
            ends = [i for i, st in enumerate(block) if _always_leaves(st)]
            if ends:
                out.extend(st.lineno for st in block[ends[0] + 1:])
    return sorted(out)


def _unawaited_calls(node: ast.AST, names: set[str], *, statements_only: bool = False) -> list[int]:
    """The lines of the calls under `node` of a function named in `names` (`f(...)`, `self.f(...)`) whose coroutine
    nothing takes: not awaited, not an argument of another call (`asyncio.run(f())`, `create_task(...)`), not
    returned or assigned. `statements_only`: a call that is a statement by itself, or that a coroutine function
    returns without `await` (its caller awaits it and gets another coroutine)."""
    if statements_only:  # a call that is a statement, or what a coroutine function returns (its caller awaits it)
        kinds = (ast.Expr, ast.Return) if isinstance(node, ast.AsyncFunctionDef) else (ast.Expr,)
        return sorted(st.lineno for st in _own_nodes(node) if isinstance(st, kinds) and
                      isinstance(st.value, ast.Call) and _called(st.value) in names)
    taken: set[int] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Await):
            taken.add(id(n.value))
        elif isinstance(n, ast.Call):
            taken.update(id(a) for a in (*n.args, *(k.value for k in n.keywords)))
        elif isinstance(n, (ast.Return, ast.Assign, ast.AnnAssign, ast.NamedExpr)) and n.value is not None:
            taken.add(id(n.value))
    return sorted(n.lineno for n in ast.walk(node) if isinstance(n, ast.Call) and _called(n) in names
                  and id(n) not in taken)


def _always_leaves(st: ast.stmt) -> bool:
    """Whether control never goes on past the statement: a `return`, `raise`, `continue` or `break`; an `if` whose
    arms (an `else` included) all leave; a `with` whose body leaves, and not by a `raise` (its context manager may
    swallow the exception); a `try` whose body and handlers leave (or whose
    `finally` does); a `while True:` without a `break` of its own."""
    def block(stmts: list[ast.stmt]) -> bool:
        return any(_always_leaves(s) for s in stmts)

    if isinstance(st, (ast.Return, ast.Raise, ast.Continue, ast.Break)):
        return True
    if isinstance(st, ast.If):
        return bool(st.orelse) and block(st.body) and block(st.orelse)
    if isinstance(st, (ast.With, ast.AsyncWith)):
        # a `return` leaves whatever the context manager does; an exception it may swallow (`pytest.raises`,
        # `suppress`), and the code below then runs
        return block(st.body) and not any(isinstance(n, ast.Raise) for n in ast.walk(st))
    if isinstance(st, ast.Try) or type(st).__name__ == "TryStar":
        if st.finalbody and block(st.finalbody):
            return True
        return block(st.body) and all(block(h.body) for h in st.handlers)
    if isinstance(st, ast.While):
        forever = isinstance(st.test, ast.Constant) and bool(st.test.value)
        breaks = any(isinstance(n, ast.Break) for n in _loop_own(st))
        return forever and not breaks
    return False


def _loop_own(loop: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a loop's body, not those of loops or functions nested in it (their `break` is theirs)."""
    todo = [*loop.body]
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef, ast.AsyncFunctionDef,
                                 ast.ClassDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))


def _attributes_taken(recipe_id: str, rel: str, before: str, after: str, tree: ast.Module,
                      done: list[tuple[StepReport, Changed | None]]) -> list[SpecpatchError]:
    """A method or attribute a class of the file defined before the recipe and no longer does (a rename, a
    removal), while a method of that class still reads it on `self` in the patched file: AttributeError at the
    first call (a hostile round: `A.old` renamed to `A.new`, and the release's `A.user2` calling `self.old()`).
    Judged only for a class whose bases the file defines too (a base from elsewhere may give it), that takes no
    attributes by a name read at run time."""
    from .moved_attributes import _read_class

    try:
        old_tree = ast.parse(before)
    except (SyntaxError, ValueError, RecursionError):
        return []
    old_classes = {c.name: c for c in old_tree.body if isinstance(c, ast.ClassDef)}
    new_classes = {c.name: c for c in tree.body if isinstance(c, ast.ClassDef)}
    lines = after.splitlines()
    errors: list[SpecpatchError] = []
    for name, node in new_classes.items():
        if name not in old_classes:
            continue
        chain, ok, seen = [node], True, {name}
        while ok and chain:
            here = chain.pop()
            for b in here.bases:
                base = b.id if isinstance(b, ast.Name) else None
                if base in ("object",) or (base in new_classes and base in seen):
                    continue
                if base in new_classes:
                    seen.add(base)
                    chain.append(new_classes[base])
                else:
                    ok = False
        if not ok:
            continue
        was, _, _ = _read_class(old_classes[name])
        now, dynamic, _ = _read_class(node)
        for other in seen - {name}:
            more, more_dynamic, _ = _read_class(new_classes[other])
            now, dynamic = now | more, dynamic or more_dynamic
        gone = was - now
        if not gone or dynamic:
            continue
        for fn in node.body:
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or not fn.args.args:
                continue
            me = fn.args.args[0].arg
            for n in ast.walk(fn):
                read = _self_read(n, me)
                if read is not None and read in gone:
                    owner = next((r for r, c in reversed(done) if c is not None and r.op in _TAKING), None)
                    line = lines[n.lineno - 1].strip() if 0 < n.lineno <= len(lines) else ""
                    how = f"{me}.{read}" if isinstance(n, ast.Attribute) else ast.unparse(n)
                    errors.append(UndefinedNameError(
                        f"`{name}` no longer defines `{read}` once the recipe's code is in, and `{name}.{fn.name}` "
                        f"still reads `{how}` (line {n.lineno}: `{line}`): AttributeError when it runs",
                        location=Location(recipe=recipe_id, step=owner.index if owner else None,
                                          op=owner.op if owner else None, file=rel,
                                          anchor=owner.anchor if owner else None, line=n.lineno)))
                    gone = gone - {read}
    return errors


def _self_read(node: ast.AST, me: str) -> str | None:
    """The attribute of the instance `me` that `node` reads, raising AttributeError if it is missing: `me.name`,
    or `getattr(me, "name")` (without a default); else None."""
    if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and isinstance(node.value, ast.Name) \
            and node.value.id == me:
        return node.attr
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" \
            and len(node.args) == 2 and not node.keywords and isinstance(node.args[0], ast.Name) \
            and node.args[0].id == me and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
        return node.args[1].value
    return None


def _module_getattr(module: ast.Module) -> bool:
    """Whether the module defines a module-level `__getattr__` (PEP 562), also inside an `if`/`else` or `try` at
    module level (vLLM's `__init__.py`: `if TYPE_CHECKING: ... else: def __getattr__(name): ...`)."""
    todo = list(module.body)
    while todo:
        stmt = todo.pop()
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == "__getattr__":
            return True
        if isinstance(stmt, (ast.If, ast.Try, ast.With)) or type(stmt).__name__ == "TryStar":
            for part in ("body", "orelse", "finalbody"):
                todo += getattr(stmt, part, [])
            for handler in getattr(stmt, "handlers", []):
                todo += handler.body
    return False


def submodule_of(folder: Path) -> Callable[[str], bool]:
    """Whether a name is a submodule of the package whose folder is `folder` (`name.py` or `name/` in it): what a
    package's `__init__.py` may list in `__all__` without binding it."""
    return lambda name: (folder / f"{name}.py").is_file() or (folder / name).is_dir()


def _undefined_names(recipe_id: str, rel: str, before: str, after: str, tree: ast.Module,
                     done: list[tuple[StepReport, Changed | None]], *,
                     submodule: Callable[[str], bool] | None = None) -> list[SpecpatchError]:
    """`undefined_names_added`, each name charged to the step whose code holds it (else the file's last changed
    step), at its line in the patched file: code of the recipe that would raise NameError, most often because
    upstream removed an import the code relied on."""
    import re

    lines = after.splitlines()
    errors: list[SpecpatchError] = []
    for name, lineno, local in undefined_names_added(before, after, tree=tree, new=_new_lines(before, lines, done),
                                                     filename=rel, submodule=submodule):
        word = re.compile(rf"(?<![\w.]){re.escape(name)}\b")
        owner = next((r for r, c in done if c is not None and c.inserted and r.lines
                      and r.lines[0] <= lineno <= r.lines[1]), None) \
            or next((r for r, c in reversed(done) if c is not None and any(word.search(code_of(c.module, n))
                                                                            for n in c.inserted)), None) \
            or next((r for r, c in reversed(done) if c is not None), None)
        line = lines[lineno - 1].strip() if 0 < lineno <= len(lines) else ""
        said = (f"`{name}` is read before the function assigns it once the recipe's code is in (line {lineno}: "
                f"`{line}`): an assignment anywhere in a function (or a `global` taken away) makes the name local "
                f"throughout, and the read raises UnboundLocalError") if local else \
            f"`{name}` is not defined in `{rel}` once the recipe's code is in (line {lineno}: `{line}`)"
        errors.append(UndefinedNameError(
            said,
            location=Location(recipe=recipe_id, step=owner.index if owner else None, op=owner.op if owner else None,
                              file=rel, anchor=owner.anchor if owner else None, line=lineno)))
    return errors


def _init_reads_early(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, why) for each `self.attribute` that a class's `__init__` reads, when it runs, above every
    line of it that assigns the attribute (in source order, any arm counting as assigned; an attribute it never
    assigns may come from a base class), and that the class does not provide otherwise: not in its body, not assigned by another of its methods (`__init__` may call it), not after a
    call of a base class's `__init__`. Reads in a lambda or nested def run later and are left out; so is every
    attribute once the function passes `self` to a call or reads `self.__dict__`."""
    found: list[tuple[int, str]] = []
    for cls in (n for n in _nodes(tree) if isinstance(n, ast.ClassDef)):
        init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        if init is None or not init.args.args:
            continue
        me = init.args.args[0].arg
        provided = {t.id for n in cls.body for t in _targets(n) if isinstance(t, ast.Name)}
        provided |= {n.name for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        for method in cls.body:
            if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) and method is not init \
                    and method.args.args:
                other = method.args.args[0].arg
                provided |= {n.attr for n in ast.walk(method) if isinstance(n, ast.Attribute)
                             and isinstance(n.value, ast.Name) and n.value.id == other
                             and not isinstance(n.ctx, ast.Load)}
        events: list[tuple[int, int, str, str]] = []  # (line, column, kind, attribute)
        todo: list[ast.AST] = list(init.body)
        rebound = False
        while todo and not rebound:
            node = todo.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue  # runs when called, later
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == me:
                events.append((node.lineno, node.col_offset, "read" if isinstance(node.ctx, ast.Load) else "set",
                               node.attr))
            elif isinstance(node, ast.Call) and (
                    isinstance(node.func, ast.Attribute) and node.func.attr == "__init__"
                    or any(isinstance(a, ast.Name) and a.id == me for a in (*node.args, *(k.value for k in
                                                                                         node.keywords)))):
                events.append((node.lineno, node.col_offset, "all", ""))  # a base's __init__, or `self` handed on
            elif isinstance(node, ast.Name) and node.id == me and isinstance(node.ctx, ast.Store):
                rebound = True  # `self` rebound: not followed
            todo.extend(ast.iter_child_nodes(node))
        assigned = {attr for *_, kind, attr in events if kind == "set"}  # what the function itself sets, below
        seen: set[str] = set()
        for lineno, _, kind, attr in sorted(events) if not rebound else ():
            if kind == "all":
                break
            if kind == "set":
                seen.add(attr)
            elif attr not in seen and attr in assigned and attr not in provided:
                found.append((lineno, f"reads `{me}.{attr}` in `{cls.name}.__init__` above every assignment of it "
                                      f"there: AttributeError at every construction of `{cls.name}`"))
                seen.add(attr)
    return found


def _targets(node: ast.AST) -> list[ast.AST]:
    """The names a class-body statement binds at its top level (assignments, annotated ones, for, with, import)."""
    if isinstance(node, ast.Assign):
        return [t for target in node.targets for t in ast.walk(target)]
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        return [node.target]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [ast.Name(id=(a.asname or a.name).split(".")[0]) for a in node.names]
    if isinstance(node, (ast.If, ast.Try, ast.For, ast.While, ast.With)):
        return [t for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt) for t in _targets(child)]
    return []


def undefined_names_added(before: str, after: str, *, tree: ast.Module | None = None, new: set[int] | None = None,
                          filename: str = "<patched>",
                          star_names: Callable[[str], frozenset[str] | None] | None = None,
                          submodule: Callable[[str], bool] | None = None) -> list[tuple[str, int, bool]]:
    """The names the patched text `after` reads at run time and does not define (pyflakes' "undefined name", as at
    import and at the first call of a function, and a name `__all__` lists that the module does not bind, unless it
    serves names through a module `__getattr__`; and its "local variable referenced before assignment": a function
    that assigns a name anywhere reads it as its own local everywhere, so a read above the assignment raises
    UnboundLocalError) that the original `before` did not already read undefined, each once, with the line of its
    first use in `after` and whether it is such a local.
    `apply` refuses them; `port` refuses the steps that read them.

    Both texts are read as they run (`_as_run`): what `if TYPE_CHECKING:` imports is not bound, and annotations the
    interpreter does not evaluate are not read (a name imported for type checkers only, read by a step's code,
    raises NameError at the first call; pyflakes alone takes it for bound). pyflakes reads the patched module with
    the functions and classes the change left alone cut down to stubs that bind their names (a few ms for sglang's
    8,000-line server_args.py, not 60), unless the change took out a line (an import, or an assignment the rest of its scope may read); only
    when it finds something is the whole original read, to leave out what was undefined before the change. `new`:
    the patched lines the change wrote (by default, those whose text the original has fewer times). `after` must
    parse (`tree`, if given, is its parse; it is left as it was). In a package's `__init__.py`, where pyflakes lets
    `__all__` list anything (a submodule is imported by `from package import *`), a listed name the module does not
    bind counts when `submodule` says it is no submodule either (`from sglang import *` raises AttributeError)."""
    from collections import Counter

    from pyflakes import checker, messages

    undo: list = []  # what reading a tree as it runs changed in it, put back before returning

    def undefined(module: ast.Module) -> list[messages.Message]:
        if star_names is not None:
            _expand_stars(module, star_names, undo)
        init = os.path.basename(filename) == "__init__.py"
        found = [m for m in checker.Checker(module, filename=f"{filename}.as-module" if init else filename).messages
                 if isinstance(m, (messages.UndefinedName, messages.UndefinedExport, messages.UndefinedLocal))]
        if init:  # pyflakes' own leave for a package, kept for its submodules (or for all, not knowing them)
            found = [m for m in found if not isinstance(m, messages.UndefinedExport)
                     or submodule is not None and not submodule(m.message_args[0])]
        if _module_getattr(module):  # a module that serves names on demand (PEP 562): `__all__` may list them
            found = [m for m in found if not isinstance(m, messages.UndefinedExport)]
        return found

    if tree is None:
        tree = ast.parse(after)
    if new is None:
        new = _new_lines(before, after.splitlines(), ())
    made_local = _made_local(tree, new)
    gone = Counter(before.splitlines()) - Counter(after.splitlines())
    # a line the change took out (an import, an assignment a function's later lines read) may leave a name undefined
    # anywhere in its scope: then the whole module is read, not the changed scopes alone
    if not any(line.strip() and not line.strip().startswith("#") for line in gone) \
            and not _restoring(undo, undefined(_as_run(_changed_scopes(tree, new), undo))):
        return made_local
    found = _restoring(undo, undefined(_as_run(tree, undo)))  # the whole module: a stub may have hidden a binding (`global x` in a function)
    if not found:
        return made_local
    try:
        known = {m.message_args[0] for m in undefined(_as_run(ast.parse(before), []))}
    except (SyntaxError, ValueError):
        known = set()
    out: list[tuple[str, int, bool]] = []
    for m in found:
        name = m.message_args[0]
        if name not in known and all(name != n for n, _, _ in out):
            out.append((name, m.lineno, isinstance(m, messages.UndefinedLocal)))
    return out + [x for x in made_local if all(x[0] != n for n, _, _ in out)]


def _made_local(tree: ast.Module, new: set[int]) -> list[tuple[str, int, bool]]:
    """Names a function reads and that only the change's lines bind in it, by the forms pyflakes' "referenced
    before assignment" does not follow: an `import`, a nested `def` or `class`, a walrus (in a comprehension too).
    Any binding in a function makes the name local throughout it, so a read above the new binding (of a global or
    builtin before the change) raises UnboundLocalError: (name, the read's line, True), each once."""
    out: list[tuple[str, int, bool]] = []
    if not new:
        return out
    low, high = min(new), max(new)
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or fn.end_lineno < low or fn.lineno > high \
                or not any(line in new for line in range(fn.lineno, fn.end_lineno + 1)):
            continue  # only functions the change wrote lines in can have a binding of its
        a = fn.args
        params = {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if x is not None}
        binds: dict[str, list[tuple[int, bool]]] = {}  # name -> (line, by a form pyflakes does not follow)
        reads: dict[str, list[int]] = {}
        declared: set[str] = set()

        def visit(node: ast.AST, at: int) -> None:
            """`at`: the line of the statement being read (a walrus binds when its statement runs: a read in the
            same statement, `[n for x in xs if (n := f(x))]`, is no read above it)."""
            for child in ast.iter_child_nodes(node):
                line = child.lineno if isinstance(child, ast.stmt) else at
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    binds.setdefault(child.name, []).append((child.lineno, True))
                    # its decorators, defaults (and a class's bases) run here, its body in a scope of its own
                    outer = [*child.decorator_list]
                    if isinstance(child, ast.ClassDef):
                        outer += [*child.bases, *(k.value for k in child.keywords)]
                    else:
                        outer += [*child.args.defaults, *(d for d in child.args.kw_defaults if d is not None)]
                    for expr in outer:
                        visit_expr(expr)
                    continue
                if isinstance(child, ast.Lambda):
                    continue
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    for alias in child.names:
                        if alias.name != "*":
                            binds.setdefault((alias.asname or alias.name).split(".")[0], []).append((line, True))
                elif isinstance(child, (ast.Global, ast.Nonlocal)):
                    declared.update(child.names)
                elif isinstance(child, ast.NamedExpr) and isinstance(child.target, ast.Name):
                    binds.setdefault(child.target.id, []).append((line, True))
                elif isinstance(child, ast.Name):
                    if isinstance(child.ctx, ast.Load):
                        reads.setdefault(child.id, []).append(child.lineno)
                    else:
                        binds.setdefault(child.id, []).append((child.lineno, False))
                elif isinstance(child, ast.ExceptHandler) and child.name:
                    binds.setdefault(child.name, []).append((child.lineno, False))
                elif isinstance(child, (ast.MatchAs, ast.MatchStar)) and child.name:
                    binds.setdefault(child.name, []).append((child.lineno, False))
                visit(child, line)

        def visit_expr(node: ast.AST) -> None:
            for n in ast.walk(node):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                    reads.setdefault(n.id, []).append(n.lineno)

        # the body only: the function's own annotations, defaults and decorators run in the scope around it
        visit(ast.Module(body=fn.body, type_ignores=[]), fn.lineno)
        for name, where in binds.items():
            if name in params or name in declared or not all(line in new for line, _ in where) \
                    or not any(unfollowed for _, unfollowed in where):
                continue  # local before the change too, or pyflakes' own case
            first = min(line for line, _ in where)
            above = sorted(line for line in reads.get(name, ()) if line < first)
            if above and all(name != n for n, _, _ in out):
                out.append((name, above[0], True))
    return out


def _restoring(undo: list, value: Any) -> Any:
    """`value`, once the changes logged in `undo` are put back, last first (the tree is the caller's again)."""
    while undo:
        obj, field, old = undo.pop()
        if field is None:
            obj[:] = old
        else:
            setattr(obj, field, old)
    return value


def _expand_stars(tree: ast.Module, star_names: Callable[[str], frozenset[str] | None], undo: list) -> None:
    """Each module-level `from M import *` whose names `star_names(M)` can tell (a module of the package: its
    `__all__`, else its public names) made explicit in `tree`, so that pyflakes judges reads against them (with a
    star import it judges nothing: "may be undefined, or defined from star imports")."""
    for i, st in enumerate(tree.body):
        if isinstance(st, ast.ImportFrom) and any(a.name == "*" for a in st.names):
            names = star_names(("." * st.level) + (st.module or ""))
            if names is not None:
                undo.append((tree.body, None, list(tree.body)))
                tree.body[i] = ast.copy_location(ast.ImportFrom(module=st.module, level=st.level, names=[
                    ast.alias(name=n) for n in sorted(names)] or [ast.alias(name="__name__")]), st)


def _star_reads(recipe_id: str, target: Target, rel_pkg: str, rel: str, before: str, after: str,
                done: list[tuple[StepReport, Changed | None]], planned: dict[Path, bytes]) -> list[SpecpatchError]:
    """The undefined-name check again for a file that star-imports modules of its package, their names read as the
    recipe leaves them: a name the recipe's code reads that none of them gives (`__all__` included) raises
    NameError, though pyflakes alone would take it for one of theirs."""
    def star_names(dotted: str) -> frozenset[str] | None:
        if dotted.startswith("."):
            base = PurePosixPath(rel_pkg).parent.parts
            level = len(dotted) - len(dotted.lstrip("."))
            base = base[:len(base) - (level - 1)] if level > 1 else base
            dotted = ".".join([target.package, *base, *([dotted.lstrip(".")] if dotted.lstrip(".") else [])])
        if dotted.split(".")[0] != target.package:
            return None  # another library's names: not read
        there = _module_path(target.package_dir, dotted)
        if not isinstance(there, Path):
            return None
        source = there / "__init__.py" if there.is_dir() else there
        try:
            text = planned[source].decode("utf-8") if source in planned else source.read_text(encoding="utf-8")
            tree = ast.parse(text)
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError, RecursionError):
            return None
        names = _names_bound_in(text)
        if names is None:
            return None
        listed = next((st.value for st in tree.body if isinstance(st, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in st.targets)), None)
        if listed is not None:
            try:
                return frozenset(ast.literal_eval(listed))
            except (ValueError, SyntaxError, TypeError):
                return None
        return frozenset(n for n in names if not n.startswith("_"))

    lines = after.splitlines()
    errors: list[SpecpatchError] = []
    for name, lineno, local in undefined_names_added(before, after, new=_new_lines(before, lines, done),
                                                     filename=rel, star_names=star_names):
        if local:
            continue  # the first check says it
        owner = _step_at(done, lineno)
        line = lines[lineno - 1].strip() if 0 < lineno <= len(lines) else ""
        errors.append(UndefinedNameError(
            f"`{name}` is not defined in `{rel}` once the recipe's code is in (line {lineno}: `{line}`), nor given "
            f"by the modules it star-imports (`from ... import *`: their `__all__`, else their public names)",
            location=Location(recipe=recipe_id, step=owner.index if owner else None, op=owner.op if owner else None,
                              file=rel, anchor=owner.anchor if owner else None, line=lineno)))
    return errors


def _as_run(tree: ast.Module, undo: list) -> ast.Module:
    """`tree` (changed in place, each change logged in `undo` as (node, field, old value), (list, None, old items)
    to be put back) as the interpreter runs it, for the undefined-name check: the bodies of `if
    TYPE_CHECKING:` (`typing.TYPE_CHECKING`) blocks are `pass` (their `else:` stays), and the annotations the
    interpreter does not evaluate are gone: all of them under `from __future__ import annotations` (but a field's
    annotation that calls something: metadata read at run time); else those of local variables and the quoted parts
    of the others (a signature's and a module or class field's annotations are evaluated when the def or the class
    statement runs)."""
    lazy = any(isinstance(s, ast.ImportFrom) and s.module == "__future__" and any(a.name == "annotations"
                                                                                 for a in s.names)
               for s in tree.body)

    def unquoted(node: ast.expr | None, *, read: bool = False) -> ast.expr | None:
        """`read`: evaluated whatever `lazy` says (a field's annotation with a call in it)."""
        if node is None or lazy and not read:
            return None
        for sub in ast.walk(node):  # a forward reference in quotes is not evaluated
            for name, value in ast.iter_fields(sub):
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    undo.append((sub, name, value))
                    setattr(sub, name, ast.copy_location(ast.Constant(None), value))
                elif isinstance(value, list):
                    undo.append((value, None, list(value)))
                    value[:] = [ast.copy_location(ast.Constant(None), v) if isinstance(v, ast.Constant)
                                and isinstance(v.value, str) else v for v in value]
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return None
        return node

    def walk(body: list[ast.stmt], local: bool) -> None:
        """Statements only (annotations and `if` blocks are theirs): far cheaper than visiting every node."""
        for st in body:
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                undo.append((st, "returns", st.returns))
                st.returns = unquoted(st.returns)
                for arg in (*st.args.posonlyargs, *st.args.args, *st.args.kwonlyargs, st.args.vararg, st.args.kwarg):
                    if arg is not None:
                        undo.append((arg, "annotation", arg.annotation))
                        arg.annotation = unquoted(arg.annotation)
                walk(st.body, True)
                continue
            if isinstance(st, ast.AnnAssign):  # a local's annotation is never evaluated
                # a field's annotation that calls something (`A[int, Arg(help=..., choices=CHOICES)]`, sglang
                # 0.5.23's server arguments) is metadata a library reads at run time (`typing.get_type_hints`):
                # evaluated then, under `from __future__ import annotations` too
                called = lazy and not local and any(isinstance(n, ast.Call) for n in ast.walk(st.annotation))
                undo.append((st, "annotation", st.annotation))
                kept = None if local else unquoted(st.annotation, read=called)
                st.annotation = kept if kept is not None else ast.copy_location(ast.Constant(None), st.annotation)
                continue
            if isinstance(st, ast.If) and type_checking_test(st.test):
                undo.append((st, "body", st.body))
                st.body = [ast.copy_location(ast.Pass(), st)]
            if isinstance(st, ast.ClassDef):
                walk(st.body, False)
                continue
            for part in ("body", "orelse", "finalbody"):
                block = getattr(st, part, None)
                if isinstance(block, list):
                    walk(block, local)
            for handler in getattr(st, "handlers", ()):
                walk(handler.body, local)
            for case in getattr(st, "cases", ()):  # match statements
                walk(case.body, local)

    walk(tree.body, False)
    # a string in a subscript outside annotations (`LoadGroup = Union["GroupCoordinator", None]`, a type alias; `cast`
    # and `TypeVar(bound=...)` likewise) is a forward reference Python never evaluates, which pyflakes reads as code
    for node in [n for n in ast.walk(tree) if isinstance(n, (ast.Subscript, ast.Call))]:
        if isinstance(node, ast.Subscript) or isinstance(node.func, (ast.Name, ast.Attribute)) \
                and (node.func.id if isinstance(node.func, ast.Name) else node.func.attr) in ("cast", "TypeVar"):
            unquoted(node, read=True)
    return tree  # the nodes it puts in carry their locations (ast.copy_location)


def _new_lines(before: str, after_lines: list[str],
               done: Sequence[tuple[StepReport, Changed | None]]) -> set[int]:
    """The line numbers of the patched file that the change wrote: those whose text the original has fewer times
    (counted in order), and the lines each step reports for its inserted code."""
    from collections import Counter

    left = Counter(before.splitlines())
    new: set[int] = set()
    for number, line in enumerate(after_lines, start=1):
        if left[line] > 0:
            left[line] -= 1
        else:
            new.add(number)
    for report, changed in done:
        if changed is not None and report.lines:
            new.update(range(report.lines[0], report.lines[1] + 1))
    return new


def _changed_scopes(tree: ast.Module, new: set[int]) -> ast.Module:
    """The module with each function and class that holds no new line cut down to a stub binding its name (a class
    that holds one keeps its own statements, its untouched methods cut down the same way)."""

    def touched(node: ast.AST) -> bool:
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        return any(first <= n <= node.end_lineno for n in new)

    def node(kind: type, where: ast.stmt, **fields: Any) -> ast.stmt:
        if "type_params" in kind._fields:  # Python 3.12+
            fields.setdefault("type_params", [])
        return kind(**fields, lineno=where.lineno, col_offset=where.col_offset)

    def cut(body: list[ast.stmt]) -> list[ast.stmt]:
        out = []
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and not touched(stmt):
                stmt = node(ast.FunctionDef, stmt, name=stmt.name, body=[ast.Pass()], decorator_list=[],
                            returns=None, args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[],
                                                             defaults=[]))
            elif isinstance(stmt, ast.ClassDef):
                if touched(stmt):
                    stmt = node(ast.ClassDef, stmt, **{f: getattr(stmt, f) for f in stmt._fields if f != "body"},
                                body=cut(stmt.body) or [ast.Pass()])
                else:
                    stmt = node(ast.ClassDef, stmt, name=stmt.name, bases=[], keywords=[], body=[ast.Pass()],
                                decorator_list=[])
            out.append(stmt)
        return out

    return ast.fix_missing_locations(ast.Module(body=cut(tree.body), type_ignores=[]))


def _written_lines(before: str, after: str) -> set[int]:
    """The 1-based lines of `after` that a line diff from `before` says were inserted or replaced."""
    import difflib

    matcher = difflib.SequenceMatcher(None, before.splitlines(), after.splitlines(), autojunk=False)
    return {j + 1 for tag, _, _, j1, j2 in matcher.get_opcodes() if tag in ("insert", "replace")
            for j in range(j1, j2)}


def _offset_of_line(text: str, line: int | None) -> int:
    if not line:
        return 0
    offset = 0
    for _ in range(line - 1):
        offset = text.find("\n", offset) + 1
        if offset == 0:
            return 0
    return offset


def _line(text: str, module: cst.Module, node: cst.CSTNode | None,
          seen: dict[int, tuple[cst.CSTNode, int | None]]) -> int | None:
    if node is None:
        return None
    if id(node) not in seen:  # steps often anchor on the same node (a method, then the call at its end)
        code = code_of(module, node)
        line = line_of_text(text, code)
        if line is None and isinstance(node, cst.BaseExpression) and code.strip():
            # an expression inside a line (a literal, a call's arguments): libcst writes it back as it stands, so
            # its text is in the file; its line when it is there once
            at = text.find(code.strip())
            line = text.count("\n", 0, at) + 1 if at >= 0 and text.find(code.strip(), at + 1) < 0 else None
        seen[id(node)] = (node, line)
    return seen[id(node)][1]


def _with_candidate_lines(err: SpecpatchError, module: cst.Module, original: cst.Module) -> SpecpatchError:
    """Give the error's candidates exact line numbers (position metadata: only paid on this error path), in the
    file as it is on disk where the node is still the original's (earlier steps leave untouched code as it was),
    else in the file as the recipe's earlier steps left it."""
    nodes = [c.node for c in err.candidates if c.node is not None and c.line is None]
    if nodes:
        lines = dict(zip(map(id, nodes), lines_of(original, nodes))) if original is not module else {}
        rest = [n for n in nodes if lines.get(id(n)) is None]
        if rest:
            lines.update(zip(map(id, rest), lines_of(module, rest)))
        err.candidates = tuple(Candidate(c.text, lines.get(id(c.node), c.line), c.node) for c in err.candidates)
    return err

def moved_elsewhere(op: Operation, package_dir: Path, rel_pkg: str, text: str,
                    texts: dict[str, str] | None = None) -> list[Candidate]:
    """Where the names a step anchors on stand in other files of the package, when its own file (`text`) no longer
    has them: a class, a function or method, a dataclass field (`after` of `add_dataclass_field`), an argparse flag.
    Asked only when a step's anchor is not found (it reads the package's files): upstream moved a field into a
    namespace class of another module, a method into a mixin. A name found in more than three other files says
    nothing (`forward`), nor does one the file still has. `texts`: the package's files already read (file -> text,
    relative to `package_dir`)."""
    import re

    wanted: list[tuple[str, str, str]] = []  # (what, name, pattern of a line that defines it)
    for option in ("cls", "function", "within"):
        value = getattr(op, option, None)
        if isinstance(value, str) and value:
            parts = value.split(".")
            for i, part in enumerate(parts):
                kind = "class" if option == "cls" or i < len(parts) - 1 else "function"
                wanted.append((kind, part, rf"^\s*class\s+{re.escape(part)}\b" if kind == "class"
                               else rf"^\s*(?:async\s+)?def\s+{re.escape(part)}\b"))
    if op.op == "add_dataclass_field" and isinstance(getattr(op, "after", None), str):
        wanted.append(("field", op.after, rf"^[ \t]+{re.escape(op.after)}\s*:"))
    if op.op == "add_method" and isinstance(getattr(op, "after", None), str):
        wanted.append(("function", op.after, rf"^\s*(?:async\s+)?def\s+{re.escape(op.after)}\b"))
    flag = getattr(op, "after_flag", None)
    if isinstance(flag, str) and flag:
        wanted.append(("flag", flag, rf"""["']{re.escape(flag)}["']"""))
    wanted = [(k, n, p) for k, n, p in dict.fromkeys(wanted) if not re.search(p, text, re.M)]
    if not wanted:
        return []
    found: dict[str, list[str]] = {}
    for other, data in (texts if texts is not None else package_texts(package_dir)).items():
        if other == rel_pkg:
            continue
        for kind, name, pattern in wanted:
            if name not in data:
                continue
            hit = re.search(pattern, data, re.M)
            if hit:
                line = data.count("\n", 0, hit.start()) + 1
                found.setdefault(f"{kind} `{name}`", []).append(f"`{other}` line {line}")
    return [Candidate(f"{what} is in {', '.join(places)} (moved there?)")
            for what, places in found.items() if len(places) <= 3]


def package_texts(package_dir: Path) -> dict[str, str]:
    """Every Python file under `package_dir` (relative path -> text, undecodable bytes replaced); unreadable ones
    left out."""
    texts: dict[str, str] = {}
    for path in _package_modules(package_dir):
        with contextlib.suppress(OSError):
            if _source_file(path):
                texts[path.relative_to(package_dir).as_posix()] = path.read_text(encoding="utf-8", errors="replace")
    return texts


def _package_modules(package_dir: Path) -> list[Path]:
    """The package's `.py` files, sorted, less those of specpatch's state folder (a bare package folder named as
    the target keeps it inside: its backups are no modules of the package)."""
    from .target import STATE_DIRNAME

    return [p for p in sorted(package_dir.rglob("*.py"))
            if STATE_DIRNAME not in p.relative_to(package_dir).parts]


def _source_file(path: Path) -> bool:
    """A regular file of at most 16 MiB: what the checks that read the whole package open (a FIFO or a device named
    `x.py` would hang or never end)."""
    info = os.stat(path)
    return stat.S_ISREG(info.st_mode) and info.st_size <= 16 << 20
