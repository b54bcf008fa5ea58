"""Subprocess runner of patcher.verify: imports modules or runs a probe inside the *target's* interpreter.

This file is executed by path (``python -I _smoke.py CONFIG.json``) by an interpreter that may not have specpatch
installed, so it uses the standard library only and keeps to Python 3.8 syntax. It is not imported by specpatch.

CONFIG is a JSON object:

    mode       "import" | "probe" | "compile"
    paths      folders put first on sys.path, in order (the target's import root first)
    package    the target's top-level package; modules of it must come from `paths`
    stubs      top-level module names served by a stub finder (GPU-only native packages)
    shims      scripts run (runpy) after the stub finder is installed and before any import or the probe
    modules    "import": the modules to import, in order
    require    "import": top-level names that must be installed (found, not imported)
    dump_after "import": seconds after which faulthandler dumps every thread's stack to stderr (to show a hang)
    probe      "probe": the script to run as __main__
    files      "compile": the files to compile
    results    a file to which one JSON object per line is appended as work progresses
    parent     the pid of the specpatch that runs this one (Linux: this runner dies with it)

The parent reads `results` even after it killed this process, so each record is flushed at once.
"""

import faulthandler
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import time
import traceback
import types

STUB_ORIGIN = "specpatch-stub"
TRACEBACK_LINES = 12


class _Results(object):
    def __init__(self, path):
        self._file = open(path, "a", encoding="utf-8")

    def write(self, **record):
        self._file.write(json.dumps(record, default=str) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())


# ------------------------------------------------------------------------------------------------------ stubs


def _mock(name):
    from unittest import mock

    return mock.MagicMock(name=name)


class _StubMeta(type):
    """Metaclass of stub attributes: a class answers isinstance, subclassing and typing (`Optional[X]`) correctly,
    which a MagicMock does not; any attribute of it is another stub class, and calling it returns a MagicMock."""

    def __getattr__(cls, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)  # typing, copy, pickle and inspect probe dunders: say "absent"
        child = _stub_class(name, cls.__module__, cls.__qualname__ + "." + name)
        type.__setattr__(cls, name, child)
        return child

    def __call__(cls, *args, **kwargs):
        if cls.__dict__.get("_specpatch_stub"):
            return _mock(cls.__module__ + "." + cls.__qualname__ + "()")
        return type.__call__(cls, *args, **kwargs)  # a real subclass of a stub: build a real instance

    def __getitem__(cls, item):
        return cls  # `Stub[int]` used as a generic alias

    def __iter__(cls):
        return iter(())

    def __bool__(cls):
        return True

    def __repr__(cls):
        return "<specpatch stub %s.%s>" % (cls.__module__, cls.__qualname__)


class _StubBase(object):
    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _mock(type(self).__qualname__ + "()." + name)


def _stub_class(name, module, qualname):
    cls = _StubMeta(name, (_StubBase,), {"__module__": module, "__qualname__": qualname, "_specpatch_stub": True})
    return cls


class StubModule(types.ModuleType):
    """A stub module: a package (submodules import), and any public attribute is a stub class."""

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        value = _stub_class(name, self.__name__, name)
        setattr(self, name, value)
        return value


class StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves a StubModule for the listed top-level names and everything below them, and nothing else."""

    def __init__(self, names):
        self.names = frozenset(names)
        self.used = set()

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".", 1)[0] in self.names:
            return importlib.machinery.ModuleSpec(fullname, self, origin=STUB_ORIGIN, is_package=True)
        return None

    def create_module(self, spec):
        module = StubModule(spec.name)
        module.__path__ = []
        module.__file__ = "<%s>/%s/__init__.py" % (STUB_ORIGIN, spec.name.replace(".", "/"))
        # a module with a __file__ looks installed: give it the version its metadata gives (see find_distributions)
        module.__version__ = "0.0.0"
        return module

    def exec_module(self, module):
        self.used.add(module.__name__.split(".", 1)[0])

    def find_distributions(self, context=None):
        """Stubbed names also look installed to importlib.metadata, as version 0.0.0: libraries that read the
        version of every importable package (transformers 5 does) would otherwise fail on "N/A"."""
        name = getattr(context, "name", None)
        if name is None:
            return iter(())
        wanted = name.replace("-", "_").lower()
        matches = [n for n in self.names if n.replace("-", "_").lower() == wanted]
        return iter([_StubDistribution(matches[0])] if matches else [])


try:
    import importlib.metadata as _metadata
except ImportError:  # Python < 3.8 has no importlib.metadata: nothing to answer
    _metadata = None

if _metadata is not None:
    class _StubDistribution(_metadata.Distribution):
        """The metadata of a stubbed package: its name and version 0.0.0, no files."""

        def __init__(self, name):
            self._name = name

        def read_text(self, filename):
            if filename == "METADATA":
                return "Metadata-Version: 2.1\nName: %s\nVersion: 0.0.0\n" % self._name
            return None

        def locate_file(self, path):
            return os.path.join("<%s>" % STUB_ORIGIN, self._name, str(path))


def _refused_stub(name, package):
    """Names that must never be stubbed: the target itself, the standard library, and what is already imported."""
    stdlib = getattr(sys, "stdlib_module_names", ())
    if name == package:
        return "it is the target package"
    if name in sys.builtin_module_names or name in stdlib:
        return "it is part of the standard library"
    if name in sys.modules:
        return "it is already imported"
    return None


def _setup(config, results):
    """Put the target first on sys.path and install the stub finder; report what the stubs replace."""
    for path in reversed(config.get("paths", [])):
        sys.path.insert(0, os.path.abspath(path))
    names, refused, installed = [], {}, []
    for name in config.get("stubs", []):
        why = _refused_stub(name, config.get("package"))
        if why:
            refused[name] = why
            continue
        names.append(name)
        if importlib.machinery.PathFinder.find_spec(name, sys.path) is not None:
            installed.append(name)  # a real copy exists; the stub still wins, and the report says so
    finder = StubFinder(names)
    sys.meta_path.insert(0, finder)
    results.write(event="env", python=sys.version.split()[0], executable=sys.executable, stubs=names,
                  stubs_refused=refused, stubs_replacing_installed=installed)
    return finder


# ------------------------------------------------------------------------------------------------------ modes


def _error(exc):
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    text = "".join(lines).rstrip("\n").splitlines()
    kind = type(exc).__qualname__
    if type(exc).__module__ not in ("builtins", "__main__"):
        kind = type(exc).__module__ + "." + kind
    err = {"type": kind, "message": str(exc), "traceback": text[-TRACEBACK_LINES:]}
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        err["missing"] = exc.name
    return err


def _outside(module, package, paths):
    """The file of a module of the target package, when it was not loaded from `paths` (something shadowed it)."""
    if module.__name__.split(".", 1)[0] != package:
        return None
    where = getattr(module, "__file__", None)
    if not where:
        return None
    where = os.path.abspath(where)
    for root in paths:
        if where.startswith(os.path.join(os.path.abspath(root), "")):
            return None
    return where


def _run_shims(config):
    """Run the shims in order; the error of the first one that raises (as _error gives it), or None."""
    import runpy

    for path in config.get("shims", []):
        try:
            runpy.run_path(path, run_name="__specpatch_shim__")
        except BaseException as exc:  # noqa: B036 - reported as the failure of everything that follows it
            err = _error(exc)
            err["message"] = "the verify shim %s failed: %s: %s" % (os.path.basename(path), err["type"],
                                                                      err["message"])
            err["type"] = "ShimError"
            return err
    return None


def _run_imports(config, results, finder):
    package, paths = config.get("package"), config.get("paths", [])
    missing = [name for name in config.get("require", [])
               if name not in finder.names and importlib.util.find_spec(name) is None]
    if missing:
        results.write(event="require", missing=missing)
    shim_error = _run_shims(config)
    for name in config.get("modules", []):
        results.write(event="start", module=name)
        start = time.perf_counter()
        if shim_error is not None:
            results.write(event="end", module=name, ok=False, seconds=0.0, error=shim_error,
                          stubs_used=sorted(finder.used))
            continue
        try:
            module = __import__(name, fromlist=["__name__"])
            where = _outside(module, package, paths)
            if where:
                raise ImportError("%s was imported from %s, not from %s" % (name, where, paths[0]))
        except BaseException as exc:  # noqa: B036 - the import is the thing under test; SystemExit included
            results.write(event="end", module=name, ok=False, seconds=time.perf_counter() - start,
                          error=_error(exc), stubs_used=sorted(finder.used))
            continue
        results.write(event="end", module=name, ok=True, seconds=time.perf_counter() - start,
                      file=getattr(module, "__file__", None), stubs_used=sorted(finder.used))
    return 0


def _run_probe(config, results, finder):
    import runpy

    path = config["probe"]
    sys.argv = [path]
    code = 0
    shim_error = _run_shims(config)
    if shim_error is not None:
        print("\n".join(shim_error["traceback"]), file=sys.stderr)
        print("PROBE-FAIL: " + shim_error["message"])
        results.write(event="probe-end", exit=1, stubs_used=sorted(finder.used))
        return 1
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: B036 - a probe's crash is its failure, reported with its traceback
        traceback.print_exc()
        code = 1
    results.write(event="probe-end", exit=code, stubs_used=sorted(finder.used))
    return code


def _run_compile(config, results):
    code = 0
    for path in config.get("files", []):
        start = time.perf_counter()
        try:
            with open(path, "rb") as f:
                compile(f.read(), path, "exec", dont_inherit=True)
        except SyntaxError as exc:
            results.write(event="compiled", file=path, ok=False, seconds=time.perf_counter() - start,
                          error={"type": type(exc).__name__, "message": exc.msg, "line": exc.lineno,
                                 "column": exc.offset, "text": exc.text})
            code = 1
            continue
        except (OSError, ValueError) as exc:
            results.write(event="compiled", file=path, ok=False, seconds=time.perf_counter() - start,
                          error={"type": type(exc).__name__, "message": str(exc)})
            code = 1
            continue
        results.write(event="compiled", file=path, ok=True, seconds=time.perf_counter() - start)
    return code


def _die_with_parent(parent):
    """On Linux, have the kernel kill this runner when specpatch dies (a kill -9 during the checks: the next command
    undoes the apply, and the probe must not run on, orphaned). The runner's own interpreter sets it: no code runs
    between fork and exec in specpatch."""
    if not parent or not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - no libc prctl here: the checks run as before
        return
    if os.getppid() != parent:  # specpatch died before the signal was set
        os._exit(1)


def main(argv):
    with open(argv[1], encoding="utf-8") as f:
        config = json.load(f)
    _die_with_parent(config.get("parent"))
    results = _Results(config["results"])
    mode = config["mode"]
    if mode == "compile":
        code = _run_compile(config, results)
    else:
        finder = _setup(config, results)
        if mode == "import":
            if config.get("dump_after"):
                faulthandler.dump_traceback_later(config["dump_after"], exit=False)
            code = _run_imports(config, results, finder)
            faulthandler.cancel_dump_traceback_later()
        elif mode == "probe":
            code = _run_probe(config, results, finder)
        else:
            raise SystemExit("unknown mode %r" % (mode,))
    results.write(event="done", exit=code)
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter shutdown: imported modules may have started threads or atexit work that would hang here.
    os._exit(code)


if __name__ == "__main__":
    main(sys.argv)
