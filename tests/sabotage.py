"""Breaking a patched tree on purpose, to show a probe catches it: each breakage is a regex replacement in one file,
applied to its own overlay of the tree, and a probe run on every overlay in parallel."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Callable


def overlay(source: Path, dest: Path, rel: str, text: str) -> None:
    """`dest` mirrors `source` through symlinks, except the file `rel` (written with `text`) and its folders."""
    parts = Path(rel).parts
    src, dst = source, dest
    for part in parts:
        dst.mkdir(parents=True, exist_ok=True)
        for entry in src.iterdir():
            if entry.name != part and entry.name != "__pycache__":
                (dst / entry.name).symlink_to(entry)
        src, dst = src / part, dst / part
    dst.write_text(text)


def run_broken(patched: Path, rel: str, breakages: list[tuple], mktemp: Callable[[str], Path],
               run: Callable[[Path], Any]) -> dict[str, Any]:
    """{name: run(overlay root)} for each (name, pattern, replacement, ...) of `breakages` applied to the file
    `rel` of `patched`; a breakage whose pattern does not match exactly once maps to a message saying so."""
    from concurrent.futures import ThreadPoolExecutor

    original = (patched / rel).read_text()
    jobs: dict[str, Path | str] = {}
    for name, pattern, replacement, *_ in breakages:
        text, count = re.subn(pattern, replacement, original)
        if count != 1:
            jobs[name] = f"the breakage matches {count} times in the patched worker, not once"
            continue
        compile(text, rel, "exec")
        root = mktemp(f"broken-{name}")
        overlay(patched, root, rel, text)
        jobs[name] = root
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        futures = {name: pool.submit(run, root) for name, root in jobs.items() if isinstance(root, Path)}
        return {name: futures[name].result() if name in futures else jobs[name] for name in jobs}


def patched_releases(request, tmp_path_factory, sglang_release, recipe, interpreters: dict[str, str]):
    """A factory for module-scoped fixtures: get(release) is (interpreter, a copy of the release with the recipe's
    variant `fallback-<release>` applied by the engine, that variant), built once per module. `interpreters` maps a
    release to the conftest fixture of the interpreter in which it imports."""
    import shutil

    from patcher.engine import plan
    from patcher.target import find_target

    built = {}

    def get(version: str):
        if version not in built:
            root = tmp_path_factory.mktemp(f"sglang-{version}-patched")
            shutil.copytree(sglang_release(version) / "sglang", root / "sglang",
                            ignore=shutil.ignore_patterns("__pycache__"))
            result = plan(recipe, find_target(root, assume_version=version))
            assert result.ok, [str(e) for e in result.errors]
            assert result.selection.variant == f"fallback-{version}"
            for f in result.changed_files:
                f.path.write_bytes(f.after)
            built[version] = request.getfixturevalue(interpreters[version]), root, result.selection.variant
        return built[version]

    return get
