"""Small targets and recipes shared by the transaction tests: a fake package `pkg/` with LF, CRLF and odd modes."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from patcher import engine, transaction
from patcher.ledger import TMP_SUFFIX
from patcher.recipe import Recipe, parse_recipe
from patcher.target import Target, find_target

#: the original tree: path -> (bytes, mode); b.py is CRLF and executable, c.py has no final newline
ORIGINAL: dict[str, tuple[bytes, int]] = {
    "pkg/__init__.py": (b'"""A fake package."""\n', 0o644),
    "pkg/a.py": (b"from dataclasses import dataclass\n\n\n@dataclass\nclass A:\n    x: int = 0\n    y: int = 1\n",
                 0o644),
    "pkg/b.py": (b"#!/usr/bin/env python\r\nfrom dataclasses import dataclass\r\n\r\n\r\n@dataclass\r\nclass B:\r\n"
                 b"    x: int = 0\r\n    y: str = 'b'\r\n", 0o755),
    "pkg/c.py": (b"from dataclasses import dataclass\n\n@dataclass\nclass C:\n    x: float = 0.5  # the anchor\n"
                 b"    y: int = 2", 0o640),
}
FILES = ["pkg/a.py", "pkg/b.py", "pkg/c.py"]  #: the files THREE_FIELDS changes, in plan order

THREE_FIELDS = """\
id: three-fields
version: 2
title: Add a field to three classes
target: {package: pkg}
params:
  default: {default: 5, type: int}
steps:
  - op: add_dataclass_field
    file: a.py
    class: A
    after: x
    code: "z: int = {{default}}"
  - op: add_dataclass_field
    file: b.py
    class: B
    after: x
    code: "z: int = {{default}}"
  - op: add_dataclass_field
    file: c.py
    class: C
    after: x
    code: "z: int = {{default}}"
"""

MORE_A = """\
id: more-a
title: Another field in A
target: {package: pkg}
steps:
  - op: add_dataclass_field
    file: a.py
    class: A
    after: y
    code: "w: int = 9"
"""

BROKEN = """\
id: broken
title: One good step, one missing anchor
target: {package: pkg}
steps:
  - op: add_dataclass_field
    file: a.py
    class: A
    after: x
    code: "z: int = 1"
  - op: add_dataclass_field
    file: b.py
    class: B
    after: no_such_field
    code: "z: int = 1"
"""


def make_tree(root: Path) -> Path:
    """Write ORIGINAL under `root` (exact bytes and modes) and return `root`."""
    for rel, (data, mode) in ORIGINAL.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        os.chmod(path, mode)
    return root


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under `root` except the state folder and bytecode: path -> (bytes, mode)."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and not rel.startswith(".specpatch/") and "__pycache__" not in rel:
            out[rel] = (path.read_bytes(), stat.S_IMODE(os.stat(path).st_mode))
    return out


def tree_hash(root: Path) -> str:
    h = hashlib.sha256()
    for rel, (data, mode) in snapshot(root).items():
        h.update(f"{rel}\0{mode:o}\0".encode() + hashlib.sha256(data).digest())
    return h.hexdigest()


def recipe(tmp: Path, text: str) -> Recipe:
    rid = text.split("\n", 1)[0].split(":", 1)[1].strip()
    path = tmp / "recipes" / f"{rid}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return parse_recipe(text, path)


def target_of(root: Path) -> Target:
    return find_target(root, package="pkg")


def apply(target: Target, rcp: Recipe, params: dict[str, str] | None = None, *, timeout: float = 30):
    """What `specpatch apply` does, minus verification: lock, recover, plan, commit."""
    with transaction.target_lock(target, timeout=timeout) as lock:
        transaction.recover(target)
        return transaction.commit(engine.plan(rcp, target, params), lock)


def patched_tree(tmp: Path, text: str = THREE_FIELDS) -> dict[str, tuple[bytes, int]]:
    """The snapshot of a fresh tree with `text` applied (built in a scratch folder)."""
    root = make_tree(tmp / "reference-patched")
    apply(target_of(root), recipe(tmp, text))
    return snapshot(root)


def leftovers(root: Path) -> list[str]:
    """Temporary files of atomic writes left in the package."""
    return sorted(p.relative_to(root).as_posix() for p in root.rglob(f"*{TMP_SUFFIX}"))
