"""Shared set-up of the dynamic-spec-disable probes: sys.path, stubs when run by hand, and the PROBE-* reporting.

`specpatch verify` runs a probe with the patched target first on sys.path and the recipe's stubs installed. Run by
hand (`python probes/worker_probe_graphs.py` with SPECPATCH_IMPORT_ROOT set), the probe installs the same kind of stubs
itself for the GPU-only packages that are not importable.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import traceback
from typing import Callable

GPU_ONLY = ("sgl_kernel", "flashinfer", "torchvision", "deep_gemm")


class _Stubs(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """A stand-in used only when the probe runs outside `specpatch verify` (which brings its own stubs)."""

    def __init__(self, names):
        self.names = set(names)

    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in self.names:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        from unittest import mock

        module = mock.MagicMock(name=spec.name)
        module.__path__, module.__spec__, module.__name__, module.__file__ = [], spec, spec.name, "<stub>"
        module.__version__ = "0.0.0"  # as verify's stubs answer: transformers 5 parses torchvision's version
        return module

    def exec_module(self, module):
        pass


def setup() -> dict:
    """Put the target first on sys.path (when named by SPECPATCH_IMPORT_ROOT), stub what is missing; the params."""
    root = os.environ.get("SPECPATCH_IMPORT_ROOT")
    if root and (not sys.path or sys.path[0] != root):
        sys.path.insert(0, root)
    missing = [name for name in GPU_ONLY if _absent(name)]
    if missing:
        sys.meta_path.insert(0, _Stubs(missing))
    return json.loads(os.environ.get("SPECPATCH_PARAMS") or "{}")


def _absent(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is None
    except (ImportError, ValueError):
        return True


SKIPPED = object()  #: what a check returns after printing its own PROBE-SKIP line


class Report:
    """Runs named checks; each prints PROBE-OK or PROBE-FAIL; `finish` exits non-zero if any failed."""

    def __init__(self):
        self.failed = 0

    def run(self, name: str, check: Callable[[], str | None]) -> None:
        try:
            detail = check()
        except AssertionError as exc:
            self.failed += 1
            print(f"PROBE-FAIL: {name}: {exc}", flush=True)
        except Exception as exc:  # a crash of the code under test is a failure of that check, not of the probe
            self.failed += 1
            print(f"PROBE-FAIL: {name}: {type(exc).__name__}: {exc}", flush=True)
            traceback.print_exc(file=sys.stderr)
        else:
            if detail is not SKIPPED:
                print(f"PROBE-OK: {name}" + (f": {detail}" if detail else ""), flush=True)

    def gate(self, name: str, check: Callable[[], str | None]) -> None:
        """Run a check the others stand on (the patch is there, the flag parses): when it fails, stop here."""
        self.run(name, check)
        if self.failed:
            self.finish()

    def finish(self) -> None:
        sys.stdout.flush()
        sys.exit(1 if self.failed else 0)


def adapter(by_variant: dict, where: str):
    """The release adapter of the variant the engine applied (SPECPATCH_VARIANT), or a PROBE-FAIL saying that
    `where` has none for it."""
    variant = os.environ.get("SPECPATCH_VARIANT", "")
    if variant not in by_variant:
        print(f"PROBE-FAIL: no release adapter for the variant `{variant}` (SPECPATCH_VARIANT) in {where}: it "
              f"knows {', '.join(repr(v) for v in by_variant)}", flush=True)
        sys.exit(1)
    return by_variant[variant]()


def usage_error(parse, *argv: str, fragments: tuple[str, ...] = ()) -> str:
    """`parse(*argv)` must stop as argparse does on a bad value: exit status 2 and a one-line error naming the flag
    on stderr (not a traceback from later in start-up). Returns that line."""
    import contextlib
    import io

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parse(*argv)
    except SystemExit as exc:
        line = (err.getvalue().strip().splitlines() or [""])[-1]
        assert exc.code == 2, f"exit status {exc.code}, not argparse's 2: {line}"
        missing = [f for f in fragments if f not in line]
        assert not missing, f"argparse's error lacks {missing}: {line}"
        return line
    raise AssertionError(f"{' '.join(argv[-2:])} was not refused by the parser")
