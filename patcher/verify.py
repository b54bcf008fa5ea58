"""Checks after a patch: syntax of the touched files, an import smoke test and the recipe's probes, each a `Check`.

`verify_tree` is the sequence that apply and verify both run; the functions below it are its steps.

The smoke test and the probes run in a subprocess of the *target's* interpreter (``--python``, by default the
current one): ``python -I -u patcher/_smoke.py CONFIG``. ``-I`` keeps that interpreter's own site-packages but
drops PYTHON* variables, the user site and the script's folder, and the working folder is a scratch folder, so
nothing of specpatch's checkout leaks in. The runner is a standalone stdlib-only file, executed by path, because the
target's interpreter need not have specpatch installed. It puts the target's import root first on ``sys.path`` and
checks that every module of the target package really came from there. ``HF_HUB_OFFLINE`` and
``TRANSFORMERS_OFFLINE`` default to 1 in the subprocess: an import must not wait on a network.

Stubs. ``verify.stubs`` names top-level modules (GPU-only native packages: sgl_kernel, flashinfer, ...). A
meta-path finder placed first on ``sys.meta_path`` serves those names and everything below them, and nothing else
(stubbing every missing module breaks on typing machinery and on stdlib modules that probe optional imports). A stub
module is a package, so ``import sgl_kernel.ops`` and ``from sgl_kernel import x`` work; any public attribute of it
is a *stub class*: usable in ``Optional[...]``, ``isinstance`` (always False) and as a base class, and its own
attributes are stub classes too; calling one returns a ``MagicMock``. Dunder lookups raise AttributeError, so code
that probes ``__typing_subst__`` sees "absent"; but a stub package answers ``__version__ = "0.0.0"`` and
``importlib.metadata.version()`` gives the same (libraries such as transformers 5 read the version of every
importable package and fail on a module that has a ``__file__`` and no version). A stub replaces an installed copy of the same
name; the checks' ``data`` lists the stubs used and those that replaced an installed package. The target package
itself and standard-library names are never stubbed.

Shims. ``verify.shims`` are Python files beside the recipe that the runner executes (``runpy``, in order) after the
stub finder is in place and before the first import or the probe, in both the patched and the pristine processes.
They stand in for what only a GPU build defines: e.g. a name that a module of the target defines only under CUDA and
another module imports unconditionally. A shim that raises fails every import of the run (and the probe) with its
traceback; it must not touch what the patch changes, since the pristine comparison runs it too.

Differential smoke test. A module that fails (or hangs) with the patched files is imported again from a pristine
tree: a scratch folder in which the touched files get their original bytes and every other entry is a symlink to the
target's (cheap: only the folders on the way to a touched file are real). If the pristine import fails the same way,
the check is ``environment`` (the environment cannot import it; the patch is not blamed); if it imports, or fails in
a different way, the check stays ``failed``. The same holds for ``import <package>`` itself, which decides whether
the smoke test runs at all: when it fails with the patched files and passes from the pristine tree, the patch broke
the package (a check ``import <package>`` fails, and the rest is skipped), and so when the pristine tree fails in
another way; when both fail alike, the environment cannot import the package and the smoke test and probes are
skipped, unverified.

Probe convention. A probe is a Python script beside the recipe (``verify.probes[].path``), run as ``__main__`` with
the same ``sys.path`` and stubs as the smoke test, so it imports the patched package. It gets these environment
variables: ``SPECPATCH_PARAMS`` (JSON of the recipe's parameters), ``SPECPATCH_TARGET_ROOT`` (the folder the user
named), ``SPECPATCH_IMPORT_ROOT`` (the folder on ``sys.path``), ``SPECPATCH_PACKAGE_DIR``, ``SPECPATCH_PACKAGE``,
``SPECPATCH_TARGET_VERSION`` and ``SPECPATCH_VARIANT`` (the variant whose steps the target's ledger records for the
recipe, empty without one: a probe picks its per-release adapter by that name). It reports with lines on its
standard output:

    PROBE-OK: <what was proven>
    PROBE-FAIL: <what is wrong>
    PROBE-SKIP: <why this environment cannot run the probe>

It passes when it exits 0 and printed no ``PROBE-FAIL`` line; it is ``skipped`` when it exits 0 having printed
``PROBE-SKIP`` and no ``PROBE-OK``; it is ``environment`` when it dies, with no ``PROBE-FAIL`` line, on
``ModuleNotFoundError`` of a module outside the target's package, or on an ``ImportError`` of a name from one
(``cannot import name 'X' from 'transformers...'``: the interpreter lacks a dependency, or has another version of
it: no verdict on the patch, as the smoke test's pristine comparison would say); any other exit (an uncaught exception exits 1) fails
it. The check's message is
its last ``PROBE-*`` lines, or else the last line of its output. Its working folder is a scratch folder, its
standard input is empty, and the interpreter exits as soon as the script ends (``atexit`` handlers do not run); a
probe that runs past ``timeout`` is killed with its whole process group.
"""

from __future__ import annotations

import collections
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from .results import CheckKind, CheckStatus

if TYPE_CHECKING:
    from .recipe import Probe, VerifySpec
    from .target import Target

SYNTAX, IMPORT, PROBE = CheckKind.SYNTAX, CheckKind.IMPORT, CheckKind.PROBE
PASSED, FAILED, ENVIRONMENT, SKIPPED, TIMEOUT = (CheckStatus.PASSED, CheckStatus.FAILED, CheckStatus.ENVIRONMENT,
                                                 CheckStatus.SKIPPED, CheckStatus.TIMEOUT)
RUNNER = Path(__file__).with_name("_smoke.py")
OUTPUT_TAIL_LINES = 30  #: lines of a subprocess's output kept in a check's details
CAN_IMPORT_TIMEOUT = 120.0  #: seconds allowed for `import <package>` by can_import_target
_MARK = re.compile(r"^PROBE-(OK|FAIL|SKIP):\s?(.*)$")


@dataclass(frozen=True)
class Check:
    """The outcome of one check: a file's syntax, one module's import, or one probe."""

    kind: CheckKind
    name: str  #: the file, module or probe checked
    status: CheckStatus
    message: str = ""  #: one line, for a table
    details: str = ""  #: several lines: a traceback's end, a caret, the end of a probe's output
    seconds: float = 0.0  #: time the check took (for an import: the import alone, measured in the subprocess)
    data: Mapping[str, Any] = field(default_factory=dict)  #: facts for --json: stubs used, pristine error, exit code

    def __post_init__(self) -> None:  # a plain string is accepted and stored as its member (an unknown one raises)
        object.__setattr__(self, "kind", CheckKind(self.kind))
        object.__setattr__(self, "status", CheckStatus(self.status))

    @property
    def blocking(self) -> bool:
        """True when the check speaks against the patch: it failed or timed out. `environment` and `skipped` do not."""
        return self.status.blocking

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "status": self.status, "message": self.message,
                "details": self.details, "seconds": round(self.seconds, 3), "data": dict(self.data)}


# ---------------------------------------------------------------------------------------------- the sequence


@dataclass(frozen=True)
class Verification:
    """The checks of a patched tree, in the order they ran, and what they may not claim."""

    checks: tuple[Check, ...] = ()
    notes: tuple[str, ...] = ()  #: why the smoke test and probes did not run, when they did not
    unverified: tuple[str, ...] = ()  #: the spec's `import M` / `probe P` that did not run to a verdict

    @property
    def failed(self) -> bool:
        return any(c.blocking for c in self.checks)


def verify_tree(target: Target, spec: VerifySpec, files: Iterable[Path], *, recipe_folder: Path,
                params: Mapping[str, Any], pristine: Callable[[], Mapping[str, bytes | None]],
                python: str | os.PathLike | None = None, smoke: bool = True) -> Verification:
    """The one verification sequence, of apply and of verify: the syntax of `files`, then (unless `smoke` is off or
    `python` cannot import the target) the import smoke test of `spec.imports` and the probes. `pristine` gives the
    original bytes of the touched files (read only when an import is run), for the differential smoke test."""
    checks = check_syntax(files, relative_to=target.root)
    if not smoke:
        return Verification(tuple(checks), ("--no-smoke: the import smoke test and probes were skipped",),
                            unverified(spec, checks))
    py = python or sys.executable
    can, why, imported, details = _try_import(py, [target.import_root], target, spec.stubs, requires=spec.requires)
    broken = _import_broken_by_patch(py, target, spec.stubs, why, details, pristine()) if imported else None
    if broken is not None:
        why = f"`import {target.package}` fails with the patched files"
        checks.append(broken)
        checks += [Check(IMPORT, m, SKIPPED, why) for m in dict.fromkeys(spec.imports) if m != target.package]
        checks += [Check(PROBE, p.name or p.path, SKIPPED, why) for p in spec.probes]
        return Verification(tuple(checks), (), unverified(spec, checks))
    if not can:
        checks += [Check(IMPORT, m, SKIPPED, why) for m in dict.fromkeys(spec.imports)]
        checks += [Check(PROBE, p.name or p.path, SKIPPED, why) for p in spec.probes]
        note = (f"this environment cannot import {target.package} ({why}): smoke test and probes skipped; run "
                f"`specpatch verify --python PY` where it can")
        return Verification(tuple(checks), (note,), unverified(spec, checks))
    checks += smoke_import(target, spec, python=py, pristine=pristine(), recipe_folder=recipe_folder)
    checks += run_probes(target, spec, recipe_folder, python=py, params=params)
    return Verification(tuple(checks), (), unverified(spec, checks))


def unverified(spec: VerifySpec, checks: Iterable[Check]) -> tuple[str, ...]:
    """The spec's imports and probes that did not run to a verdict (skipped, environment problem, never started),
    as `import M` / `probe P`: what "verified" may not claim."""
    ran = {(c.kind, c.name) for c in checks if c.status.ran}
    wanted = [(IMPORT, m) for m in dict.fromkeys(spec.imports)] + [(PROBE, p.name or p.path) for p in spec.probes]
    return tuple(f"{kind} {name}" for kind, name in wanted if (kind, name) not in ran)


# ------------------------------------------------------------------------------------------------------- syntax


def check_syntax(paths: Iterable[Path | str], *, python: str | os.PathLike | None = None,
                 relative_to: Path | None = None) -> list[Check]:
    """Compile every file. In this interpreter by default; in `python` when it is another one, whose grammar is the
    one that matters for the target. Names are shown relative to `relative_to` when given."""
    paths = [Path(p) for p in paths]

    def shown(path: Path) -> str:
        if relative_to is not None and path.is_relative_to(relative_to):
            return path.relative_to(relative_to).as_posix()
        return str(path)

    if python is not None and not _same_interpreter(python):
        return _check_syntax_in(python, paths, shown)
    checks = []
    for path in paths:
        start = time.perf_counter()
        try:
            source = path.read_bytes()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # SyntaxWarning (invalid escapes) is not our verdict
                compile(source, str(path), "exec", dont_inherit=True)
        except SyntaxError as exc:
            checks.append(_syntax_failure(shown(path), exc.msg, exc.lineno, exc.offset, exc.text,
                                          time.perf_counter() - start))
            continue
        except (OSError, ValueError) as exc:  # unreadable, or a NUL byte in the source
            checks.append(Check(SYNTAX, shown(path), FAILED, f"{type(exc).__name__}: {exc}",
                                seconds=time.perf_counter() - start))
            continue
        checks.append(Check(SYNTAX, shown(path), PASSED, "compiles", seconds=time.perf_counter() - start))
    return checks


def _syntax_failure(name: str, msg: str, line: int | None, column: int | None, text: str | None,
                    seconds: float) -> Check:
    where = f"line {line}" + (f", column {column}" if column else "") if line else "unknown line"
    details = ""
    if text:
        source_line = text.rstrip("\n")
        details = source_line + ("\n" + " " * max((column or 1) - 1, 0) + "^" if column else "")
    return Check(SYNTAX, name, FAILED, f"{where}: {msg}", details, seconds, {"line": line, "column": column})


def _check_syntax_in(python: str | os.PathLike, paths: list[Path], shown) -> list[Check]:
    run = _run(python, {"mode": "compile", "files": [str(p) for p in paths]}, timeout=120.0)
    done = {r["file"]: r for r in run.events("compiled")}
    checks = []
    for path in paths:
        record = done.get(str(path))
        if record is None:
            why = run.start_error or ("timed out" if run.timed_out else _last_line(run.output) or "no result")
            checks.append(Check(SYNTAX, shown(path), ENVIRONMENT, f"could not compile in {python}: {why}",
                                "\n".join(run.output)))
        elif record["ok"]:
            checks.append(Check(SYNTAX, shown(path), PASSED, f"compiles with {python}", seconds=record["seconds"]))
        else:
            err = record["error"]
            if "line" in err:
                checks.append(_syntax_failure(shown(path), err["message"], err.get("line"), err.get("column"),
                                              err.get("text"), record["seconds"]))
            else:
                checks.append(Check(SYNTAX, shown(path), FAILED, f"{err['type']}: {err['message']}",
                                    seconds=record["seconds"]))
    return checks


# ------------------------------------------------------------------------------------------ import smoke test


def smoke_import(target: Target, verify_spec: VerifySpec, *, python: str | os.PathLike = sys.executable,
                 pristine: Mapping[str, bytes | None] | None = None, timeout: float | None = None,
                 recipe_folder: Path | None = None) -> list[Check]:
    """Import each of `verify_spec.imports` in one subprocess of `python`, the target first on sys.path and
    `verify_spec.stubs` stubbed; one Check per module.

    `pristine` maps each touched file (relative to the target's root, as `Target.rel` gives it, or to the package
    folder, or absolute) to its original bytes, or None for a file the patch created. With it, a module that fails
    is imported again from a pristine tree, and a failure shared by both is reported as `environment`. `timeout`
    (default `verify_spec.timeout`) bounds each subprocess; past it the process group is killed, the module being
    imported is reported as `timeout` and the ones after it as `skipped`. `verify_spec.shims` are relative to
    `recipe_folder`.
    """
    modules = list(dict.fromkeys(verify_spec.imports))
    if not modules:
        return []
    limit = verify_spec.timeout if timeout is None else timeout
    shims = _shim_paths(verify_spec, recipe_folder)
    checks = _import_checks(python, [target.import_root], target.package, verify_spec.stubs, modules, limit, shims)
    suspects = [c for c in checks if c.blocking]
    if not suspects:
        return checks
    if pristine is None:
        note = {"differential": "not run: no pristine bytes were given"}
        return [_with(c, data={**c.data, **note}) if c.blocking else c for c in checks]
    with tempfile.TemporaryDirectory(prefix="specpatch-pristine-") as scratch:
        root = build_pristine_tree(target, pristine, Path(scratch))
        again = _import_checks(python, [root, target.import_root], target.package, verify_spec.stubs,
                               [c.name for c in suspects], limit, shims)
        roots = (str(root), str(target.import_root))
    by_name = {c.name: c for c in again}
    return [_judge(c, by_name[c.name], roots) if c.blocking else c for c in checks]


def _shim_paths(verify_spec: VerifySpec, folder: Path | None) -> list[str]:
    """The absolute paths of `verify_spec.shims`; each must be a file inside `folder` (the recipe's)."""
    if not verify_spec.shims:
        return []
    if folder is None:
        raise ValueError("verify.shims are relative to the recipe's folder: pass recipe_folder")
    paths = []
    for rel in verify_spec.shims:
        script = _in_folder(Path(folder), rel)
        if script is None:
            raise ValueError(f"shim `{rel}` leaves the recipe's folder {folder}")
        paths.append(str(script))
    return paths


def _in_folder(folder: Path, rel: str) -> Path | None:
    """The resolved path of the script `rel` of the recipe folder `folder`; None when it leaves the folder."""
    script = (folder / rel).resolve()
    if PurePosixPath(rel).is_absolute() or not script.is_relative_to(folder.resolve()):
        return None
    return script


def _import_checks(python: str | os.PathLike, paths: Sequence[Path], package: str, stubs: Sequence[str],
                   modules: list[str], timeout: float, shims: Sequence[str] = ()) -> list[Check]:
    config = {"mode": "import", "paths": [str(p) for p in paths], "package": package, "stubs": list(stubs),
              "shims": list(shims), "modules": modules,
              "dump_after": max(timeout - min(5.0, timeout * 0.1), 0.05)}
    run = _run(python, config, timeout=timeout)
    env = run.first("env")
    if env is None:  # the interpreter did not start, or the runner could not run in it
        why = run.start_error or f"the smoke-test runner did not start in {python}: {_last_line(run.output)}"
        return [Check(IMPORT, m, ENVIRONMENT, why, "\n".join(run.output), data={"python": str(python)})
                for m in modules]
    base = {"python": env["executable"], "python_version": env["python"], "stubs": env["stubs"],
            "stubs_replacing_installed": env["stubs_replacing_installed"], "stubs_refused": env["stubs_refused"]}
    ends = {r["module"]: r for r in run.events("end")}
    started = {r["module"] for r in run.events("start")}
    checks = []
    for module in modules:
        record = ends.get(module)
        if record is not None:
            data = {**base, "stubs_used": record["stubs_used"]}
            if record["ok"]:
                used = record["stubs_used"]
                msg = f"imported in {record['seconds']:.1f} s" + (f"; stubs: {', '.join(used)}" if used else "")
                checks.append(Check(IMPORT, module, PASSED, msg, seconds=record["seconds"],
                                    data={**data, "file": record.get("file")}))
            else:
                err = record["error"]
                data["error"] = err
                if err.get("missing") and err["missing"].split(".")[0] not in stubs:
                    data["hint"] = (f"`{err['missing']}` is not installed in {env['executable']}: install it, or "
                                    f"list it in verify.stubs if it is a GPU-only native package")
                checks.append(Check(IMPORT, module, FAILED, _one_line(f"{err['type']}: {err['message']}"),
                                    "\n".join(err["traceback"]), record["seconds"], data))
        elif module in started and run.timed_out:
            checks.append(Check(IMPORT, module, TIMEOUT,
                                f"no result within {timeout:g} s: the process group was killed",
                                "\n".join(run.output), run.seconds, dict(base)))
        elif module in started:
            checks.append(Check(IMPORT, module, FAILED,
                                f"the interpreter died while importing it (exit code {run.returncode})",
                                "\n".join(run.output), run.seconds, {**base, "exit": run.returncode}))
        else:
            checks.append(Check(IMPORT, module, SKIPPED, "not reached: an earlier import timed out or crashed",
                                data=dict(base)))
    return checks


def _judge(patched: Check, pristine: Check, roots: tuple[str, ...]) -> Check:
    """Blame the patch, or the environment, by comparing the patched import with the pristine one."""
    data = {**patched.data, "pristine": pristine.to_dict()}
    if pristine.status is PASSED:
        return _with(patched, status=FAILED, message=f"{patched.message} (imports fine from the pristine files)",
                     data={**data, "differential": "pristine passed"})
    if pristine.status in (SKIPPED, ENVIRONMENT):  # not reached, or the interpreter did not start
        return _with(patched, data={**data, "differential": f"not compared: {pristine.message}"})
    if _signature(patched, roots) == _signature(pristine, roots):
        return _with(patched, status=ENVIRONMENT, message=f"fails from the pristine files too: {patched.message}",
                     data={**data, "differential": "pristine fails the same way"})
    return _with(patched, status=FAILED,
                 message=f"{patched.message} (the pristine files fail differently: {pristine.message})",
                 data={**data, "differential": "pristine fails differently"})


def _signature(check: Check, roots: tuple[str, ...]) -> tuple[str, str]:
    """What must be equal for two failures to be "the same": status and error, with paths and addresses masked."""
    err = check.data.get("error") or {}
    text = f"{err.get('type', '')}: {err.get('message', check.message)}" if check.status is FAILED else ""
    for root in roots:
        text = text.replace(root, "<root>")
    return check.status, re.sub(r"0x[0-9a-fA-F]+", "0x?", text)


def build_pristine_tree(target: Target, pristine: Mapping[str, bytes | None], dest: Path) -> Path:
    """Lay out `dest/<package>` as the target's package with the `pristine` bytes in place of the touched files, and
    return `dest` (the import root of the copy). Folders on the way to a touched file are real; every other entry
    is a symlink into the target (a copy where symlinks are not possible). Old bytecode is never linked."""
    from .target import STATE_DIRNAME

    replace = {_package_rel(target, key): data for key, data in pristine.items()}
    real_dirs = {PurePosixPath(".")}
    for rel in replace:
        real_dirs.update(rel.parents)
    top = dest / target.package_dir.name
    link = _Linker()

    def lay(src: Path, dst: Path, rel: PurePosixPath) -> None:
        dst.mkdir(parents=True, exist_ok=True)
        with os.scandir(src) as entries:
            for entry in entries:
                here = rel / entry.name
                if entry.name in ("__pycache__", STATE_DIRNAME) or here in replace:
                    continue
                if here in real_dirs and entry.is_dir(follow_symlinks=False):
                    lay(Path(entry.path), dst / entry.name, here)
                else:
                    link(Path(entry.path), dst / entry.name)

    lay(target.package_dir, top, PurePosixPath("."))
    for rel, data in replace.items():
        if data is not None:
            (top / rel).parent.mkdir(parents=True, exist_ok=True)
            (top / rel).write_bytes(data)
    return dest


class _Linker:
    """Symlink, or copy once symlinks turn out not to be allowed here."""

    def __init__(self) -> None:
        self.symlinks = True

    def __call__(self, src: Path, dst: Path) -> None:
        if self.symlinks:
            try:
                os.symlink(src.absolute(), dst, target_is_directory=src.is_dir())
                return
            except OSError:
                self.symlinks = False
        if src.is_dir():
            shutil.copytree(src, dst, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dst)


def _package_rel(target: Target, key: str) -> PurePosixPath:
    """A touched file's path relative to the package folder, from a root-relative, package-relative or absolute key."""
    package_dir = Path(os.path.normpath(target.package_dir.absolute()))
    given = Path(key)
    candidates = [given] if given.is_absolute() else [target.root / given, target.package_dir / given]
    for candidate in candidates:
        path = Path(os.path.normpath(candidate.absolute()))
        if path != package_dir and path.is_relative_to(package_dir):
            return PurePosixPath(path.relative_to(package_dir).as_posix())
    raise ValueError(f"`{key}` is not a file inside the package folder {package_dir}")


# ------------------------------------------------------------------------------------------------------- probes


def run_probes(target: Target, verify_spec: VerifySpec, recipe_folder: Path, *,
               python: str | os.PathLike = sys.executable, params: Mapping[str, Any] | None = None) -> list[Check]:
    """Run each of `verify_spec.probes` (paths relative to `recipe_folder`) in a subprocess of `python`, with the
    smoke test's sys.path and stubs; one Check per probe. See the module docstring for the probe convention."""
    shims = _shim_paths(verify_spec, recipe_folder) if verify_spec.probes else []
    variant = _applied_variant(target, Path(recipe_folder).name) if verify_spec.probes else ""
    return [_run_probe(target, verify_spec.stubs, shims, Path(recipe_folder), probe, python, dict(params or {}),
                       variant) for probe in verify_spec.probes]


def _applied_variant(target: Target, recipe_id: str) -> str:
    """The variant the ledger records for `recipe_id` (the recipe folder's name is its id), or ""."""
    from .errors import StateDamaged
    from .ledger import State

    try:
        records = [r for r in State.of(target).read_ledger().applied if r.recipe == recipe_id]
    except StateDamaged:  # verify reports the damage itself; the probe runs without a variant
        return ""
    return (records[-1].variant or "") if records else ""


def _run_probe(target: Target, stubs: Sequence[str], shims: Sequence[str], folder: Path, probe: Probe,
               python: str | os.PathLike, params: dict[str, Any], variant: str = "") -> Check:
    name = probe.name or probe.path
    script = _in_folder(folder, probe.path)
    if script is None:
        return Check(PROBE, name, FAILED, f"`{probe.path}` leaves the recipe's folder {folder}")
    if not script.is_file():
        return Check(PROBE, name, FAILED, f"no probe script `{probe.path}` in {folder}")
    env = {
        "SPECPATCH_PARAMS": json.dumps(params, default=str),
        "SPECPATCH_TARGET_ROOT": str(target.root),
        "SPECPATCH_IMPORT_ROOT": str(target.import_root),
        "SPECPATCH_PACKAGE_DIR": str(target.package_dir),
        "SPECPATCH_PACKAGE": target.package,
        "SPECPATCH_TARGET_VERSION": str(target.version or ""),
        "SPECPATCH_VARIANT": variant,
    }
    config = {"mode": "probe", "paths": [str(target.import_root)], "package": target.package, "stubs": list(stubs),
              "shims": list(shims), "probe": str(script)}
    run = _run(python, config, timeout=probe.timeout, env=env)
    end = run.first("probe-end")
    data: dict[str, Any] = {"path": probe.path, "exit": run.returncode,
                            "stubs_used": end["stubs_used"] if end else None}
    details = "\n".join(run.output)
    if run.start_error:
        return Check(PROBE, name, ENVIRONMENT, run.start_error, seconds=run.seconds, data=data)
    if run.timed_out:
        return Check(PROBE, name, TIMEOUT, f"no result within {probe.timeout:g} s: the process group was killed",
                     details, run.seconds, data)
    marks = collections.defaultdict(list)
    for kind, text in run.marks:
        marks[kind].append(text)
    fallback = _last_line(run.output)
    missing = re.match(r"(?:ModuleNotFoundError|ImportError): (?:No module named '([\w.]+)'|cannot import name "
                       r"'\w+' from '([\w.]+)')", fallback or "")
    module = (missing.group(1) or missing.group(2)) if missing else None
    if run.returncode != 0 and not marks["FAIL"] and module and module.split(".")[0] != target.package:
        # the probe died importing a third-party module this interpreter lacks (as the smoke test's pristine
        # comparison would say): the environment cannot run it, which is not a verdict on the patch
        return Check(PROBE, name, ENVIRONMENT, f"this environment lacks `{module}` as the package needs it "
                     f"({fallback}): the probe could not run", details, run.seconds, data)
    if run.returncode != 0 or marks["FAIL"]:
        text = "; ".join(marks["FAIL"][-3:]) or fallback or "no output"
        if run.returncode != 0:
            text += f" (exit code {run.returncode})"
        return Check(PROBE, name, FAILED, _one_line(text), details, run.seconds, data)
    if marks["SKIP"] and not marks["OK"]:
        return Check(PROBE, name, SKIPPED, _one_line("; ".join(marks["SKIP"][-3:])), details, run.seconds, data)
    text = "; ".join(marks["OK"][-3:]) or fallback or "exit code 0"
    return Check(PROBE, name, PASSED, _one_line(text), details, run.seconds, data)


# ------------------------------------------------------------------------------------------ can the env import


def can_import_target(python: str | os.PathLike, target: Target, stubs: Sequence[str] = (), *,
                      requires: Sequence[str] = (), timeout: float = CAN_IMPORT_TIMEOUT) -> tuple[bool, str]:
    """Whether `python` can import the target package at all (with `stubs`), and the names in `requires` are
    installed (found, not imported: e.g. "torch"); the reason, one line, either way. Cheap: `import sglang` alone
    takes well under a second. Apply uses it to decide whether to run the smoke test and the probes."""
    ok, why, _, _ = _try_import(python, [target.import_root], target, stubs, requires=requires, timeout=timeout)
    return ok, why


def _try_import(python: str | os.PathLike, paths: Sequence[Path], target: Target, stubs: Sequence[str], *,
                requires: Sequence[str] = (),
                timeout: float = CAN_IMPORT_TIMEOUT) -> tuple[bool, str, bool, str]:
    """`can_import_target` from `paths`; whether it was the import itself that failed (False when the interpreter
    did not start or a required name is missing: no import ran); the traceback or output tail of a failure."""
    config = {"mode": "import", "paths": [str(p) for p in paths], "package": target.package, "stubs": list(stubs),
              "modules": [target.package], "require": list(requires)}
    run = _run(python, config, timeout=timeout)
    if run.start_error:
        return False, run.start_error, False, ""
    env = run.first("env")
    if env is None:
        return False, f"the smoke-test runner did not start in {python}: {_last_line(run.output)}", False, ""
    missing = run.first("require")
    if missing:
        return False, f"{', '.join(missing['missing'])} not installed in {env['executable']}", False, ""
    end = run.first("end")
    if end is None:
        return False, (f"`import {target.package}` did not finish within {timeout:g} s" if run.timed_out
                       else f"`import {target.package}` crashed the interpreter (exit code {run.returncode})"), \
            True, "\n".join(run.output)
    if not end["ok"]:
        err = end["error"]
        return False, _one_line(f"`import {target.package}` fails in {env['executable']}: {err['type']}: "
                                f"{err['message']}"), True, "\n".join(err["traceback"])
    return True, (f"{env['executable']} (Python {env['python']}) imports {target.package} from {target.import_root} "
                  f"in {end['seconds']:.1f} s"), False, ""


def _import_broken_by_patch(python: str | os.PathLike, target: Target, stubs: Sequence[str], why: str,
                            details: str, pristine: Mapping[str, bytes | None]) -> Check | None:
    """`import <package>` failed with the patched files: a failed check when it imports from the pristine files
    (the patch broke it: a recipe that adds `import missing_module` to a module the package imports), None when the
    pristine files fail too (this environment cannot import the package: nothing is blamed)."""
    with tempfile.TemporaryDirectory(prefix="specpatch-pristine-") as scratch:
        root = build_pristine_tree(target, pristine, Path(scratch))
        ok, other, _, _ = _try_import(python, [root, target.import_root], target, stubs)
        other = other.replace(str(root), str(target.import_root))
    if ok:
        return Check(IMPORT, target.package, FAILED, f"{why} (imports fine from the pristine files)", details,
                     data={"differential": "pristine passed"})
    if re.sub(r"0x[0-9a-fA-F]+", "0x?", other) == re.sub(r"0x[0-9a-fA-F]+", "0x?", why):
        return None
    # the pristine files fail too, but otherwise (numpy missing there; the patch's own ImportError here): as the
    # smoke test judges a module, the patch is blamed for the failure it shows
    return Check(IMPORT, target.package, FAILED, f"{why} (the pristine files fail differently: {other})", details,
                 data={"differential": "pristine fails differently"})


# ------------------------------------------------------------------------------------------------- subprocess


@dataclass
class _Run:
    """What one runner subprocess left: its result records, exit, output tail and PROBE-* lines."""

    records: list[dict[str, Any]]
    returncode: int | None
    timed_out: bool
    seconds: float
    output: list[str]  #: the last OUTPUT_TAIL_LINES lines of stdout and stderr, interleaved
    marks: list[tuple[str, str]] = field(default_factory=list)  #: ("OK" | "FAIL" | "SKIP", message) in order
    start_error: str | None = None  #: the interpreter could not be started

    def events(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("event") == kind]

    def first(self, kind: str) -> dict[str, Any] | None:
        found = self.events(kind)
        return found[0] if found else None


def _run(python: str | os.PathLike, config: dict[str, Any], *, timeout: float,
         env: Mapping[str, str] | None = None) -> _Run:
    """Run the runner in `python` with `config`, in a new session (process group) that is killed at `timeout`
    and, after a normal exit, cleared of anything the child left running."""
    _sweep_runs()
    with tempfile.TemporaryDirectory(prefix=f"specpatch-run-{os.getpid()}-") as tmp:
        work = Path(tmp)
        results, out, cwd = work / "results.jsonl", work / "output.txt", work / "cwd"
        cwd.mkdir()
        results.touch()
        (work / "config.json").write_text(json.dumps({**config, "results": str(results), "parent": os.getpid()}),
                                          encoding="utf-8")
        # -B: no __pycache__ in the target (nor in the recipe folder) from the smoke test and the probes
        argv = [os.fspath(python), "-I", "-B", "-u", str(RUNNER), str(work / "config.json")]
        start = time.monotonic()
        with out.open("wb") as sink:
            try:
                proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
                                        env=_child_env(env), start_new_session=True)
            except OSError as exc:
                return _Run([], None, False, 0.0, [], start_error=f"cannot start {python}: {exc.strerror or exc}")
            timed_out = False
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
            except BaseException:  # an interrupt while waiting: the child's own session would outlive us
                _kill_group(proc)
                proc.wait()
                raise
            _kill_group(proc)
            proc.wait()
        seconds = time.monotonic() - start
        tail: collections.deque[str] = collections.deque(maxlen=OUTPUT_TAIL_LINES)
        marks = []
        with out.open("r", encoding="utf-8", errors="replace") as text:
            for line in text:
                line = line.rstrip("\r\n")
                tail.append(line[:500])
                if m := _MARK.match(line):
                    marks.append((m.group(1), m.group(2).strip()))
        return _Run(_read_records(results), proc.returncode, timed_out, seconds, list(tail), marks)


def _read_records(path: Path) -> list[dict[str, Any]]:
    records = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:  # the last line of a killed runner may be cut short
            continue
    return records


def _sweep_runs() -> None:
    """Remove the scratch folders of runs whose specpatch is gone (killed with -9: no `finally` ran)."""
    root = Path(tempfile.gettempdir())
    try:
        entries = list(root.glob("specpatch-run-*-*"))
    except OSError:
        return
    for entry in entries:
        pid = entry.name.split("-")[2]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(entry, ignore_errors=True)
        except (PermissionError, OSError):
            pass  # alive (another user's), or cannot tell: left alone


def _kill_group(proc: subprocess.Popen) -> None:
    if hasattr(os, "killpg"):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass  # the group is already gone
    elif proc.poll() is None:
        proc.kill()


def _child_env(extra: Mapping[str, str] | None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra or {})
    # No network during an import: a hub lookup would hang on a closed machine instead of failing.
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    return env


def _same_interpreter(python: str | os.PathLike) -> bool:
    found = shutil.which(os.fspath(python)) or os.fspath(python)
    try:
        return os.path.samefile(found, sys.executable)
    except OSError:
        return False


def _with(check: Check, **changes: Any) -> Check:
    from dataclasses import replace

    return replace(check, **changes)


def _last_line(lines: Sequence[str]) -> str:
    for line in reversed(lines):
        if line.strip():
            return line.strip()
    return ""


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
