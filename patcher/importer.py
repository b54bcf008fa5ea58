"""`specpatch import`: lift a unified diff into a recipe of semantic steps, and port a recipe to another release.

How a patch is lifted (`lift`):

1. The diff is read (`parse_patch`: git or GNU format; `a/python/sglang/x.py`, `sglang/x.py` or package-relative
   paths; what a section changes besides its hunks, and sections that are not unified diffs, are reported as not
   lifted; several sections for one file apply in order) and its hunks are applied, exactly (no fuzz; a hunk may
   sit at another line), to the pristine release.
2. Each hunk is cut into *units*: its runs of changed lines (merged with the next run while the file between them
   does not parse). For each unit, the file before and after it are parsed, and the statements that differ are
   located by walking both trees down to the innermost block that holds the whole difference.
3. Candidate steps are built for that difference, the most robust first: `add_method`, `add_dataclass_field`,
   `add_import`, `add_argparse_argument`, `add_definition` for insertions; `add_keyword_argument`,
   `add_element`, `add_parameter`, then `replace_expression` for a change inside one statement; then
   `replace_statements` with more and more context, then with the whole enclosing statement; a statement the
   function has more than once is first anchored by the header of its block (`inside:`), when the function has
   that header once. The first candidate that, applied to the file before the unit, renders *exactly* the file
   after it, and finds itself already applied on a second run, is kept. So a lifted recipe round-trips by construction: applied to the release it was
   lifted from, it reproduces the patched files byte for byte (`lift` checks this again with the written recipe).
4. A unit with no such candidate becomes an `unexpressed_hunk` step that refuses with the hunk's header: never a
   silent drop.

`port` plans a recipe on another release step by step, and says per step: applied, already present upstream (the
step found its change already there, so it is never applied twice), upstream in another form (the step cannot apply,
but every line it adds is already in the file: `upstream_evidence`), or refused, with the error and near candidates.
"""

from __future__ import annotations

import ast
import contextlib
import difflib
import functools
from collections import Counter
import os
import re
import shutil
import textwrap
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Iterable, Iterator, Sequence

import libcst as cst

from .anchors import (NodePath, _block_indent, _path_to_block, body_of, bracket_depth, child_blocks, indent_of,
                      too_deep)
from .errors import Location, PatchError, SpecpatchError, UsageError, VersionUnsupported
from .model import validate
from .recipe_model import first_release
from .operations.add_argparse_argument import flags_of
from .operations.add_dataclass_field import field_name
from .operations.add_definition import defined_names
from .operations.add_import import _as_ast, _is_import_line, _statement, bindings
from .operations._code import caching
from . import moved_attributes
from .operations.base import REGISTRY, AlreadyApplied, Changed, Operation

# --------------------------------------------------------------------------------------------------- the diff

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")


@dataclass
class Hunk:
    """One hunk of a file's diff."""

    old_start: int
    old_len: int
    new_start: int
    new_len: int
    header: str  #: the `@@ ... @@ context` line
    lines: list[str]  #: ' ', '-', '+' lines and `\\ No newline` markers, without their "\n"
    number: int = 0  #: 1-based, in the file
    #: which section of the patch for this file it came from (0 for the first): a patch of several commits has a
    #: section per commit, each numbered against the file as the sections before left it
    section: int = 0

    @property
    def text(self) -> str:
        return "\n".join([self.header, *self.lines]) + "\n"


@dataclass
class FilePatch:
    """The hunks of one file; paths relative to the package folder (None for /dev/null)."""

    old: str | None
    new: str | None
    hunks: list[Hunk] = field(default_factory=list)
    moved: str | None = None  #: "rename" or "copy" when git's header says `rename from` / `copy from`
    #: what the section does that no hunk carries, or that import cannot read, each `kind: why` (a mode change, a
    #: binary file, a combined or context diff, a `diff -r` `Only in` line): reported as not lifted, never dropped
    notes: list[str] = field(default_factory=list)

    @property
    def path(self) -> str:
        return self.new or self.old or "?"


def package_relative(raw: str, package: str = "sglang") -> str | None:
    """`a/python/sglang/srt/x.py`, `sglang/srt/x.py`, `srt/x.py`, `./srt/x.py` or a GNU diff's
    `../checkout/python/sglang/srt/x.py` -> `srt/x.py`; None for /dev/null."""
    path = raw.split("\t")[0].strip()
    if path == "/dev/null":
        return None
    parts = [p for p in PurePosixPath(path).parts if p not in (".", "/")]
    if parts[:1] in (["a"], ["b"]):
        parts = parts[1:]
    for k in range(len(parts) - 1):  # the package folder of a checkout (`python/sglang/`), wherever it is
        if parts[k:k + 2] == ["python", package]:
            return _inside(parts[k + 2:], raw)
    while parts[:1] == [".."]:
        parts = parts[1:]
    if package in parts[:-1]:  # an unpacked package (`sglang/srt/x.py`), under any folder
        parts = parts[parts.index(package) + 1:]
    return _inside(parts, raw)


def packages_named(text: str) -> set[str]:
    """The engines (`target.PACKAGES`) whose package folder the patch's file names name: `a/python/sglang/...`,
    `a/vllm/...`, `sglang/...` (empty when its paths are package-relative, `srt/x.py`)."""
    from .target import PACKAGES

    found: set[str] = set()
    for line in text.splitlines():
        if not line.startswith(("--- ", "+++ ", "diff --git ")):
            continue
        for raw in line.split()[1:]:
            parts = [p for p in PurePosixPath(raw.split("\t")[0]).parts if p not in (".", "/", "a", "b", "..")]
            for name, info in PACKAGES.items():
                root = [*PurePosixPath(info.checkout_src).parts, name] if info.checkout_src else [name]
                if parts[:len(root)] == root or parts[:1] == [name]:
                    found.add(name)
    return found


def _inside(parts: list[str], raw: str) -> str:
    """The package-relative path with its `..` resolved (`srt/../x.py` is `x.py`); UsageError when it climbs out of
    the package (the recipe written from it could not be loaded)."""
    out: list[str] = []
    for part in parts:
        if part != "..":
            out.append(part)
        elif out:
            out.pop()
        else:
            raise PatchError(f"the patch's path `{raw.split(chr(9))[0].strip()}` leads out of the package")
    return "/".join(out)


_DATE = re.compile(r"\t(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)? ([+-]\d{4})\s*$")


def _epoch(header: str) -> bool:
    """Is a `---`/`+++` line dated at the Unix epoch, in its own time zone (what `diff -N` writes for a file one
    tree lacks: `1970-01-01 08:00:00.000000000 +0800`)?"""
    from datetime import datetime

    m = _DATE.search(header)
    return bool(m) and datetime.strptime(" ".join(m.groups()), "%Y-%m-%d %H:%M:%S %z").timestamp() == 0


def _same_file(old: str | None, new: str | None) -> tuple[str | None, str | None]:
    """Without git's `rename from`, the `---` and `+++` lines of a section name one file, by two paths when the diff
    is of two trees (`diff -ruN orig/ patched/`, `git diff --no-index orig patched`, `--- ./srt/x.py` / `+++
    ../checkout/python/sglang/srt/x.py`): the file is the part the two paths share at their end (`srt/x.py`), the
    leading folders where they differ being the trees' (what `patch -p` strips). Paths whose file names differ
    (`x.py.orig` / `x.py`) are kept as they are: `lift` takes the one the release has."""
    if old is None or new is None or old == new:
        return old, new
    a, b = PurePosixPath(old).parts, PurePosixPath(new).parts
    n = 0
    while n < min(len(a), len(b)) and a[len(a) - 1 - n] == b[len(b) - 1 - n]:
        n += 1
    if n:
        tail = "/".join(a[len(a) - n:])
        return tail, tail
    return old, new


def _tree_folders(old: str | None, new: str | None) -> tuple[str, str] | None:
    """The two trees' leading folders that `_same_file` strips from a section's paths (`orig`, `patched` for
    `orig/srt/x.py` / `patched/srt/x.py`); None when it strips none."""
    if old is None or new is None or old == new:
        return None
    tail, other = _same_file(old, new)
    if tail != other:  # no common end: one file by two names (`x.py.orig` / `x.py`)
        return None
    cut = len(PurePosixPath(tail).parts)
    return "/".join(PurePosixPath(old).parts[:-cut]), "/".join(PurePosixPath(new).parts[:-cut])


def _strip_trees(files: list[FilePatch], trees: list[tuple[str, str]]) -> None:
    """A renamed or copied file's two paths with the trees' leading folders stripped, as the other sections' are:
    `git diff --no-index -M orig patched` names a rename `orig/srt/x.py` -> `patched/srt/y.py`, which no common
    end of the two paths tells apart from the trees; the folders the other sections' paths lead with do."""
    for f in files:
        if not f.moved or f.old is None or f.new is None:
            continue
        for a, b in trees:
            if (not a or f.old.startswith(a + "/")) and (not b or f.new.startswith(b + "/")):
                f.old, f.new = f.old[len(a) + 1 if a else 0:], f.new[len(b) + 1 if b else 0:]
                break


def _git_paths(rest: str, package: str) -> tuple[str | None, str | None]:
    """The two paths of a `diff --git A B` line, package-relative: split at the space where both halves name one file
    (a path may hold spaces), else in the middle. Only read for a section with no `---`/`+++` lines (a pure rename,
    a mode change, a binary file)."""
    def rel(raw: str) -> str | None:
        try:
            return package_relative(raw.strip('"'), package)
        except UsageError:
            return None

    spaces = [k for k, c in enumerate(rest) if c == " "]
    for k in spaces:
        if rel(rest[:k]) is not None and rel(rest[:k]) == rel(rest[k + 1:]):
            return rel(rest[:k]), rel(rest[k + 1:])
    k = spaces[len(spaces) // 2] if spaces else len(rest)
    return rel(rest[:k]), rel(rest[k + 1:])


@dataclass
class _GitHeader:
    """What the lines of a `diff --git` section say before its `---`/`+++` lines (or instead of them)."""

    paths: tuple[str | None, str | None]  #: from the `diff --git` line
    moved: str | None = None  #: "rename" or "copy"
    source: str | None = None  #: `rename from` / `copy from`
    dest: str | None = None  #: `rename to` / `copy to`
    modes: list[str] = field(default_factory=list)  #: `old mode` and `new mode`
    created: bool = False  #: `new file mode`
    deleted: bool = False  #: `deleted file mode`
    binary: str | None = None  #: the line that says the file is binary
    used: bool = False  #: a `---`/`+++` pair came, and took what this says

    def notes(self) -> list[str]:
        """What the header changes that no hunk carries: `kind: why`, as lift reports it."""
        out = []
        if len(self.modes) == 2 and not self.created and not self.deleted:
            out.append(f"mode change: {self.modes[0]} -> {self.modes[1]}; recipes edit a file's text, not its mode")
        if self.binary:
            kind = "new binary file" if self.created else "deleted binary file" if self.deleted else "binary file"
            held = "its `GIT binary patch` is left out" if self.binary == "GIT binary patch" else \
                f"`{self.binary}`: the diff holds none of its bytes"
            out.append(f"{kind}: {held}; recipes edit Python source")
        return out

    def file(self, same=None) -> FilePatch | None:
        """The file of a section with no `---`/`+++` lines (a pure rename or copy, a mode change, a binary file, an
        empty file added or deleted); None when the header says nothing a recipe would miss. `same` stands for
        `_same_file` (parse_patch's, which notes the trees' folders)."""
        if self.used or not (self.moved or self.modes or self.created or self.deleted or self.binary):
            return None
        old, new = self.source or self.paths[0], self.dest or self.paths[1]
        if not self.moved:
            old, new = (same or _same_file)(old, new)
        return FilePatch(None if self.created else old, None if self.deleted else new, moved=self.moved,
                         notes=self.notes())


_BINARY = re.compile(r"^Binary files (.+) and (.+) differ$")
_ONLY_IN = re.compile(r"^Only in (.+?): (.+)$")
#: kinds of notes that say a section is one import cannot read (not a unified diff)
UNREAD = ("combined diff", "context diff", "only in one tree")


def _lines_past_hunk(lines: list[str], i: int) -> int | None:
    """The index of a `+` or `-` line that follows a hunk's counted lines before anything else begins (another hunk,
    another file, a commit's text, format-patch's `-- ` signature): a change the header does not count, which
    reading by the header would drop in silence. None when there is none."""
    for k in range(i, len(lines)):
        body = lines[k]
        if body == "-- " or body.startswith(("@@", "diff ", "Index: ")) or \
                (body.startswith("--- ") and k + 1 < len(lines) and lines[k + 1].startswith("+++ ")):
            return None
        if body[:1] in ("+", "-"):
            return k
        if body[:1] not in (" ", ""):
            return None
    return None


def parse_patch(text: str, package: str = "sglang") -> list[FilePatch]:
    """The files and hunks of a unified diff; UsageError (exit 2) when it holds none or a hunk is cut short.

    What a section says besides its hunks (git's renames, copies, mode changes, binary files, empty files added or
    deleted) and sections that are not unified diffs (`diff --cc`, `diff -c`, `diff -r`'s `Only in`) come back as
    files with `notes`, so that lift reports them; several sections for one file (commits one after the other) are
    one file whose hunks apply in order (`Hunk.section`)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if _sent_as_crlf(lines):  # the patch as a whole was converted to CRLF (unix2dos, a mail client): one "\r" a
        lines = [ln[:-1] if ln.endswith("\r") else ln for ln in lines]  # line is the patch's, not the file's
    files: list[FilePatch] = []
    git: _GitHeader | None = None  #: the `diff --git` header of the section being read
    current: FilePatch | None = None  #: the file hunks attach to
    unread: str | None = None  #: "combined" or "context" inside such a section: its lines are not unified hunks

    def rel(raw: str) -> str | None:
        return package_relative(raw, package)

    def note(path: str | None, why: str) -> None:
        files.append(FilePatch(path, path, notes=[why]))

    trees: list[tuple[str, str]] = []  #: the two trees' leading folders, where a section's paths show them

    def same(old: str | None, new: str | None) -> tuple[str | None, str | None]:
        folders = _tree_folders(old, new)
        if folders is not None and folders not in trees:
            trees.append(folders)
        return _same_file(old, new)

    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(("diff ", "Index: ", "Only in ")):  # a new section
            made = git.file(same) if git is not None else None
            if made is not None:
                files.append(made)
            git, current, unread = None, None, None
            only = _ONLY_IN.match(line)
            if line.startswith("diff --git "):
                git = _GitHeader(_git_paths(line[len("diff --git "):], package))
            elif line.startswith(("diff --cc ", "diff --combined ")):
                note(rel(line.split(" ", 2)[2]), f"combined diff: `{line}`, a merge commit's, is not a unified diff; "
                                                 "import leaves it out: take the merge's diff against its first "
                                                 "parent, `git diff M^ M`")
                unread = "combined"
            elif only:
                note(rel(f"{only.group(1)}/{only.group(2)}"), f"only in one tree: `{line}`: a new or deleted file "
                                                              "whose text `diff -r` without `-N` leaves out; make the "
                                                              "diff with `diff -ruN`")
            i += 1
            continue
        if line.startswith("*** ") and i + 2 < len(lines) and lines[i + 1].startswith("--- ") and \
                lines[i + 2].startswith("*" * 15):
            note(rel(line[4:]) or rel(lines[i + 1][4:]), f"context diff: `*** {line[4:].split(chr(9))[0]}`, `diff "
                                                         "-c`'s, is not a unified diff; import leaves it out: make "
                                                         "the diff with `diff -u`")
            git, current, unread = None, None, "context"
            i += 3
            continue
        pair = line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")
        # a context diff ends where a unified one begins; a combined one (whose own `---`/`+++` lines are followed
        # by a `@@@` header) where a `---`/`+++` pair is followed by a unified `@@ -` header: a unified section
        # pasted after it with no `diff` line between is read, not swallowed
        ends = pair and (unread == "context" or (
            unread == "combined" and i + 2 < len(lines) and _HUNK.match(lines[i + 2]) is not None))
        if unread and not ends:
            i += 1
            continue
        unread = None
        binary = _BINARY.match(line)
        if binary and (git is None or git.used):  # GNU `diff -r` of a binary file: a section of its own
            old, new = same(rel(binary.group(1)), rel(binary.group(2)))
            files.append(FilePatch(old, new, notes=[f"binary file: `{line}`: the diff holds none of its bytes; "
                                                    "recipes edit Python source"]))
            i += 1
            continue
        if git is not None and not git.used:
            for prefix, moved, end in (("rename from ", "rename", "source"), ("rename to ", "rename", "dest"),
                                       ("copy from ", "copy", "source"), ("copy to ", "copy", "dest")):
                if line.startswith(prefix):
                    git.moved = moved
                    setattr(git, end, rel(line[len(prefix):]))
            if line.startswith(("old mode ", "new mode ")):
                git.modes.append(line.split()[-1])
            git.created = git.created or line.startswith("new file mode ")
            git.deleted = git.deleted or line.startswith("deleted file mode ")
            if line == "GIT binary patch" or binary:
                git.binary = line
        if pair:
            old, new = rel(line[4:]), rel(lines[i + 1][4:])
            # `diff -N` names the side a file is missing from by its path, dated at the epoch, not /dev/null
            old, new = (None if _epoch(line) else old), (None if _epoch(lines[i + 1]) else new)
            moved = git.moved if git is not None else None
            notes = git.notes() if git is not None else []
            if git is not None:
                git.used = True
            current = FilePatch(*((old, new) if moved else same(old, new)), moved=moved, notes=notes)
            files.append(current)
            i += 2
            continue
        m = _HUNK.match(line)
        if m and current is not None:
            old_len = int(m.group(2)) if m.group(2) is not None else 1
            new_len = int(m.group(4)) if m.group(4) is not None else 1
            hunk = Hunk(int(m.group(1)), old_len, int(m.group(3)), new_len, line, [],
                        len(current.hunks) + 1)
            i += 1
            old_seen = new_seen = 0
            while i < len(lines) and (old_seen < old_len or new_seen < new_len or lines[i].startswith("\\")):
                body = lines[i]
                tag = body[:1]
                if tag == "\\":
                    hunk.lines.append(body)
                elif tag in (" ", "-", "+") or body in ("", "\r"):
                    body = body if tag in (" ", "-", "+") else " " + body  # some tools strip the space of an
                    # empty context line
                    hunk.lines.append(body)
                    old_seen += body[0] in " -"
                    new_seen += body[0] in " +"
                else:
                    break
                i += 1
            if old_seen != old_len or new_seen != new_len:
                raise PatchError(f"hunk `{line}` of `{current.path}` is cut short: expected {old_len} old and "
                                 f"{new_len} new lines, found {old_seen} and {new_seen}")
            extra = _lines_past_hunk(lines, i)
            if extra is not None:
                raise PatchError(f"hunk `{line}` of `{current.path}` is longer than its header says: line "
                                 f"{extra + 1} of the patch, `{lines[extra][:80]}`, changes code after its "
                                 f"{old_len} old and {new_len} new lines (a header counted by hand?); `patch` "
                                 "and `git apply` refuse it too")
            current.hunks.append(hunk)
            continue
        i += 1
    made = git.file(same) if git is not None else None
    if made is not None:
        files.append(made)
    _strip_trees(files, trees)
    files = _in_order([f for f in files if f.hunks or f.notes or f.moved or f.old != f.new])
    if not any(f.hunks for f in files) and all(f.notes and f.notes[0].startswith(UNREAD) for f in files):
        raise PatchError("the patch holds no hunk" + (" import can read: " if files else "") + "; ".join(
            f"{f.path}: {f.notes[0]}" for f in files[:3]) + ("" if files else ": is it a unified diff (`git diff`, "
                                                                "`diff -u`)?"))
    for f in files:  # read with surrogateescape: bytes that are not UTF-8 are kept as lone surrogates
        name = f.new or f.old or ""
        bad = next(((h, ln) for h in f.hunks for ln in h.lines if _NOT_UTF8.search(ln)), None)
        if name.endswith(".py") and bad:
            raise PatchError(f"hunk `{bad[0].header}` of `{name}` holds bytes that are not UTF-8 (`"
                             f"{bad[1].encode('utf-8', 'backslashreplace').decode()[:80]}`): the release's Python "
                             "files are UTF-8; re-encode the patch")
    return files


def _sent_as_crlf(lines: list[str]) -> bool:
    """Does every line that frames the patch (`diff `, `+++ `, a `@@ -` hunk header) end in "\\r"? Then the patch
    as a whole was converted to CRLF and each line's last "\\r" is not the file's; a patch of a CRLF file made by
    git or diff ends only its hunks' lines in "\\r", its framing lines in "\\n"."""
    framing = [ln for ln in lines if ln.startswith(("diff ", "+++ ")) or _HUNK.match(ln)]
    return bool(framing) and all(ln.endswith("\r") for ln in framing)


def _in_order(files: list[FilePatch]) -> list[FilePatch]:
    """Sections that edit a file an earlier section of the patch edits (a patch of several commits, concatenated)
    joined to that one: their hunks follow its hunks, numbered on, and apply to the file as those left it, as `patch`
    applies them. A section that adds, deletes, renames or copies the file in between ends the run."""
    out: list[FilePatch] = []
    edited: dict[str, FilePatch] = {}
    for f in files:
        edit = f.old is not None and f.old == f.new and not f.moved and bool(f.hunks)
        first = edited.get(f.old) if edit else None
        if first is not None:
            section = first.hunks[-1].section + 1
            for h in f.hunks:
                h.number, h.section = len(first.hunks) + 1, section
                first.hunks.append(h)
            first.notes += [n for n in f.notes if n not in first.notes]
            continue
        for path in (f.old, f.new):
            edited.pop(path, None)
        if edit:
            edited[f.old] = f
        out.append(f)
    return out


_NOT_UTF8 = re.compile("[\udc80-\udcff]")


# --------------------------------------------------------------------------------------------------- applying


@dataclass
class Unit:
    """A run of changed lines of one hunk (or a few runs merged), applied to the file in order."""

    hunk: Hunk
    start: int  #: 0-based index of the first old line it replaces, in the file as it is before the unit
    old: list[str]  #: the lines it removes (with their line ends)
    new: list[str]  #: the lines it adds


def _split(text: str) -> list[str]:
    """Lines with their line ends (only "\\n" ends a line, as in diffs)."""
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


#: why a hunk is not lifted when the file has its new lines instead of its old ones (what `patch` calls "reversed
#: (or previously applied)")
REVERSED = "its old lines are not in the file, its new lines are: a reversed patch, or a change already made"
NOT_IN_FILE = "its old lines are not in the file"
#: why a hunk does not apply to the release it is lifted on (units_of)
UNMATCHED = (REVERSED, NOT_IN_FILE)


def units_of(text: str, fp: FilePatch) -> tuple[list[Unit], list[tuple[Hunk, str]]]:
    """The file's hunks cut into units, positioned on `text` (each after the previous ones); hunks whose old lines
    are not in the file come back apart, with why."""
    lines = _split(text)
    units: list[Unit] = []
    bad: list[tuple[Hunk, str]] = []
    delta, section = 0, 0
    for hunk in fp.hunks:
        if hunk.section != section:  # a later section of the patch counts its lines in the file as it is now
            delta, section = 0, hunk.section
        old = [ln[1:] for ln in hunk.lines if ln[:1] in " -"]
        at = _find(lines, old, hunk.old_start - 1 + delta if hunk.old_len else hunk.old_start + delta)
        if at is None:
            new = [ln[1:] for ln in hunk.lines if ln[:1] in " +"]
            there = _find(lines, new, hunk.new_start - 1 + delta) is not None
            bad.append((hunk, REVERSED if there else NOT_IN_FILE))
            continue
        pos, run_old, run_new = at, [], []
        runs: list[tuple[int, list[str], list[str]]] = []
        body = hunk.lines
        # the lines a hunk adds end as the patch says; but when the file's lines end in "\r\n" where the hunk's old
        # lines show none (the patch's carriage returns were lost: read with universal newlines, or converted
        # to CRLF as a whole and back), its new lines end in "\r\n" like the file's
        there = lines[at:at + len(old)] or lines
        crlf = bool(there) and not any(o.endswith("\r") for o in old) and \
            all(ln.endswith("\r\n") for ln in there if ln.endswith("\n")) and any(ln.endswith("\n") for ln in there)
        # and the reverse: every line of the hunk ends in "\r" where the file's lines end in "\n" alone (the hunk's
        # lines gained carriage returns on the way: an editor or a mail client, the patch's framing lines kept LF)
        lf = bool(there) and all(ln.endswith("\r") for ln in body if ln[:1] in " -+") and \
            not any(ln.endswith("\r\n") for ln in there) and any(ln.endswith("\n") for ln in there)
        for k, ln in enumerate(body):
            tag = ln[:1]
            if tag == "\\":
                continue
            no_eol = k + 1 < len(body) and body[k + 1].startswith("\\")
            if tag == " ":
                if run_old or run_new:
                    runs.append((pos - len(run_old), run_old, run_new))
                    run_old, run_new = [], []
                pos += 1
            elif tag == "-":
                run_old.append(lines[pos])
                pos += 1
            else:
                text = ln[1:-1] if lf else ln[1:]
                run_new.append(text + ("" if no_eol else "\r\n" if crlf and not ln.endswith("\r") else "\n"))
        if run_old or run_new:
            runs.append((pos - len(run_old), run_old, run_new))
        shift = 0
        for start, o, n in runs:
            units.append(Unit(hunk, start + shift, o, n))
            lines[start + shift:start + shift + len(o)] = n
            shift += len(n) - len(o)
        delta += shift
    return units, bad


def _find(lines: list[str], old: list[str], guess: int) -> int | None:
    """Where the old lines of a hunk sit: at `guess`, else the nearest place they match exactly."""
    def at(i: int) -> bool:
        return 0 <= i and i + len(old) <= len(lines) and all(
            lines[i + k].rstrip("\n").rstrip("\r") == old[k].rstrip("\r") for k in range(len(old)))

    guess = max(0, min(guess, len(lines)))
    for d in range(0, len(lines) + 1):
        for i in (guess - d, guess + d):
            if at(i):
                return i
    return None


# --------------------------------------------------------------------------------------------------- lifting


@dataclass
class LiftedStep:
    """A step of the lifted recipe, with the hunk it came from."""

    file: str
    hunk: Hunk
    options: dict[str, Any]  #: the step's YAML options (op included)
    operation: Operation | None = None
    hunks: tuple[int, ...] = ()  #: the numbers of the hunks it expresses, when a change spans several (else `hunk`)


@dataclass
class HunkReport:
    file: str
    hunk: Hunk
    steps: list[str] = field(default_factory=list)  #: ops that express it
    reason: str | None = None  #: why (a part of) it was not expressed
    note: str | None = None  #: why it needs no step (it only adds whitespace at the end of blank lines)

    @property
    def lifted(self) -> bool:
        return self.reason is None


@dataclass
class Lifted:
    """The outcome of lifting a patch on one release: the steps, and per hunk what expresses it."""

    steps: list[LiftedStep]
    hunks: list[HunkReport]
    expected: dict[str, bytes]  #: package-relative path -> the file patched with the diff
    skipped: list[tuple[str, str]]  #: (path, why) of files the recipe cannot touch
    #: path -> (the file the recipe makes, the number of lines the diff adds with whitespace only): for files where
    #: the diff adds blank lines that end in spaces, which no operation writes; the recipe leaves them empty
    trimmed: dict[str, tuple[bytes, int]] = field(default_factory=dict)
    #: path -> the number of its hunks that do not apply to this release (their old lines are not in the file): its
    #: `expected` file lacks them, so a round trip can match it without reproducing the patch
    unmatched: dict[str, int] = field(default_factory=dict)

    @property
    def lifted(self) -> int:
        return sum(h.lifted for h in self.hunks)


def lift(package_dir: Path, patch_text: str, *, package: str = "sglang") -> Lifted:
    """Lift `patch_text` against the pristine package at `package_dir` (not modified)."""
    files = parse_patch(patch_text, package)
    steps: list[LiftedStep] = []
    reports: list[HunkReport] = []
    expected: dict[str, bytes] = {}
    trimmed: dict[str, tuple[bytes, int]] = {}
    unmatched: dict[str, int] = {}
    skipped: list[tuple[str, str]] = []

    def skip(fp: FilePatch, why: str, reason: str) -> None:
        """The file is not lifted: said once for the file (`why`), and for each of its hunks (`reason`)."""
        skipped.append((fp.path, why))
        reports.extend(HunkReport(fp.path, h, reason=reason) for h in fp.hunks)

    added = {fp.new for fp in files if fp.new is not None and (fp.old is None or fp.moved)}
    for fp in files:
        skipped.extend((fp.path, why) for why in fp.notes)  # a mode change, a binary file, a section not read
        if fp.notes and not fp.hunks:
            continue
        if fp.old is not None and fp.new is not None and fp.old != fp.new and not fp.moved:
            # one file by two names (`x.py.orig` / `x.py`), not a rename: the one the release has
            fp.old = fp.new = next((p for p in (fp.old, fp.new) if (package_dir / p).is_file()), fp.old)
        if fp.old is None or fp.new is None or fp.old != fp.new or fp.moved:
            why = "new file" if fp.old is None else "deleted file" if fp.new is None else \
                "copied file" if fp.moved == "copy" else "renamed file"
            source = f" from {fp.old}" if fp.moved and fp.old is not None else ""
            skip(fp, f"{why}{source}: recipes edit existing files only", why)
            continue
        path = package_dir / fp.old
        if not path.is_file():
            if fp.old in added:
                skip(fp, "a file an earlier section of the patch creates (new, renamed or copied): recipes edit "
                         "existing files only", "file the patch adds")
            else:
                skip(fp, "not in this release", "file not in this release")
            continue
        raw = path.read_bytes()
        if not fp.path.endswith(".py"):
            skip(fp, "not a Python file", "not a Python file")
            continue
        added = "\n".join(ln[1:] for h in fp.hunks for ln in h.lines if ln[:1] == "+")
        deep = too_deep(raw) or ("its lines nest brackets too deeply to be parsed" if bracket_depth(added) > 150
                                 else None)
        if deep:  # libcst's native parser would overflow its stack (a segmentation fault, no exception)
            skip(fp, f"cannot be parsed: {deep}", "nested too deeply to parse")
            continue
        with caching():
            try:
                file_steps, file_reports, final, made = _lift_file(fp, raw)
            except RecursionError:  # libcst walks nested code recursively (`1 + 1 + ...` 500 times)
                skip(fp, "cannot be parsed: nested too deeply for specpatch's parser", "nested too deeply to parse")
                continue
            finally:
                _TEXTS.clear()
        steps += file_steps
        reports += file_reports
        expected[fp.path] = final
        if made is not None:
            trimmed[fp.path] = made
        missed = sum(r.reason in UNMATCHED for r in file_reports)
        if missed:
            unmatched[fp.path] = missed
    return Lifted(steps, reports, expected, skipped, trimmed, unmatched)


def _trim_blank_lines(text: str, units: list[Unit]) -> tuple[list[Unit], int]:
    """The units with the lines they add that hold only whitespace made empty (no operation writes spaces on a blank
    line: code is re-indented), less the units that then change nothing, and how many lines were trimmed; the units
    as they are when that would change what the code means (spaces inside a string literal)."""
    out, count = [], 0
    for u in units:
        new = [ln if ln.strip() or ln in ("\n", "\r\n") or not ln.endswith("\n") else
               ("\r\n" if ln.endswith("\r\n") else "\n") for ln in u.new]
        count += sum(a != b for a, b in zip(new, u.new))
        if new != u.old:  # else only whitespace at the end of blank lines changed: nothing left to do (as many
            out.append(Unit(u.hunk, u.start, u.old, new))  # lines: the next units' places hold)
    if not count:
        return units, 0
    try:
        same = ast.dump(ast.parse("".join(_apply_units(_split(text), units)))) \
            == ast.dump(ast.parse("".join(_apply_units(_split(text), out))))
    except (SyntaxError, ValueError):
        same = False
    return (out, count) if same else (units, 0)


def _lift_file(fp: FilePatch, raw: bytes) -> tuple[list[LiftedStep], list[HunkReport], bytes,
                                                    tuple[bytes, int] | None]:
    module = cst.parse_module(raw)
    text = module.code
    units, bad = units_of(text, fp)
    reports = {h.number: HunkReport(fp.path, h) for h in fp.hunks}
    for hunk, why in bad:
        reports[hunk.number].reason = why
    literal = "".join(_apply_units(_split(text), units)).encode(module.encoding)
    units, trimmed = _trim_blank_lines(text, [Unit(u.hunk, u.start, u.old, u.new) for u in units])
    for h in fp.hunks:
        if not any(u.hunk is h for u in units) and reports[h.number].reason is None:
            reports[h.number].note = "it only adds whitespace at the end of blank lines: no step"
    expected = "".join(_apply_units(_split(text), units)).encode(module.encoding)
    made = (expected, trimmed) if trimmed else None
    try:
        final = cst.parse_module(expected)
    except cst.ParserSyntaxError as exc:
        for r in reports.values():
            r.reason = r.reason or f"the patched file does not parse (line {exc.raw_line})"
        return [LiftedStep(fp.path, h, {"op": "unexpressed_hunk", "hunk": h.header, "diff": h.text,
                                        "reason": "the patched file does not parse"}) for h in fp.hunks], \
            list(reports.values()), literal, None
    steps: list[LiftedStep] = []
    lines = _split(text)
    k = 0
    while k < len(units):
        # the text after units k..j: merge the next units while the file does not parse in between
        j, target = k, None
        while j < len(units):
            lines_after = _apply_units(lines, units[k:j + 1])
            try:
                target_module = cst.parse_module("".join(lines_after).encode(module.encoding),
                                                 config=cst.PartialParserConfig(encoding=module.encoding))
                target = ("".join(lines_after), target_module, lines_after)
                break
            except cst.ParserSyntaxError:
                j += 1
        if target is None:
            for u in units[k:]:
                reports[u.hunk.number].reason = "the patched file does not parse"
            break
        after_text, after_module, lines_after = target
        chosen = None
        for end in range(j, min(j + 6, len(units))):  # a unit that no candidate expresses: try with the next ones
            if end > j:
                lines_after = _apply_units(lines, units[k:end + 1])
                after_text = "".join(lines_after)
                try:
                    after_module = cst.parse_module(after_text.encode(module.encoding))
                except cst.ParserSyntaxError:
                    continue
            chosen = _express(module, after_module, after_text, final=final)
            if chosen is not None:
                j = end
                break
        hunks = list(dict.fromkeys(u.hunk.number for u in units[k:j + 1]))
        first = units[k].hunk
        if chosen is None:
            # go on from the text after units k..j only (the loop above may have tried more)
            lines_after = _apply_units(lines, units[k:j + 1])
            after_module = cst.parse_module("".join(lines_after).encode(module.encoding))
            reports[first.number].reason = reports[first.number].reason or "no operation reproduces it exactly"
            steps.append(LiftedStep(fp.path, first, {
                "op": "unexpressed_hunk", "hunk": first.header, "reason": "no operation reproduces it exactly",
                "diff": first.text}))
            module = after_module  # go on from the patched text: later hunks are still lifted
        else:
            ops, module = chosen
            for o in ops:
                steps.append(LiftedStep(fp.path, first, o, hunks=tuple(hunks) if len(hunks) > 1 else ()))
                for h in hunks:
                    reports[h].steps.append(o["op"])
        lines = _split(module.code) if chosen is not None else lines_after
        k = j + 1
    for hunk, why in bad:  # never a silent drop: a step that refuses, named after the hunk
        steps.append(LiftedStep(fp.path, hunk, {"op": "unexpressed_hunk", "hunk": hunk.header, "reason": why,
                                                "diff": hunk.text}))
    return steps, list(reports.values()), literal, made


def _apply_units(lines: list[str], units: Sequence[Unit]) -> list[str]:
    out = list(lines)
    for u in units:
        out[u.start:u.start + len(u.old)] = u.new
    return out


# --------------------------------------------------------------------------------------------------- expressing


@dataclass
class _Site:
    """Where two versions of a file differ: statements [i1:i2] of the block owned by `mpath[-1]` in the old module
    became statements [j1:j2] of the block owned by `npath[-1]` in the new one."""

    mpath: NodePath
    i1: int
    i2: int
    npath: NodePath
    j1: int
    j2: int


def _express(old: cst.Module, new: cst.Module, new_text: str, *, final: cst.Module,
             depth: int = 0) -> tuple[list[dict], cst.Module] | None:
    """The first candidate list of steps that turns `old` into exactly `new_text`, with the module it gives."""
    headed = _leading_comments(old, new, new_text)
    if headed is not None:
        return headed
    site = _site(old, (old,), new, (new,))
    if site is None:
        return None
    pieces = _pieces(old, new, site) if depth < 2 else None
    if pieces:
        steps: list[dict] = []
        current = old
        for piece in pieces:
            done = _express(current, piece, piece.code, final=final, depth=depth + 1)
            if done is None:
                break
            steps += done[0]
            current = done[1]
        else:
            if current.code == new_text:
                return steps, current
    if len(site.mpath) == 1:
        top = range(site.i1, site.i2)
    else:
        top = range(list(old.body).index(site.mpath[1]), list(old.body).index(site.mpath[1]) + 1)
    for candidate in _candidates(old, new, site):
        candidate = [_with_role(step, old) for step in candidate]
        result = _try(candidate, old, new, new_text, top, final)
        if result is not None:
            return candidate, result
    return None


def _with_role(step: dict, module: cst.Module) -> dict:
    """A `replace_expression` step with what the statement holding its expression does in the release the patch
    was made on (`statement:`): applied on a release where the expression sits in a statement of another kind, it
    refuses instead of editing that statement (`port` compares with the base release too; `apply` has only this)."""
    if step.get("op") != "replace_expression" or "statement" in step:
        return step
    from .operations.replace_expression import ReplaceExpression

    try:
        role = ReplaceExpression(op="replace_expression", file="-", match=step["match"], code=step["code"],
                                 within=step.get("within")).statement_role(module)
    except Exception:  # noqa: BLE001 - a candidate that does not even build: `_try` refuses it
        return step
    return {**step, "statement": role} if role else step


def _leading_comments(old: cst.Module, new: cst.Module, new_text: str) -> tuple[list[dict], cst.Module] | None:
    """A change of the module's leading comment lines alone (a licence header, an SPDX line): one
    `replace_leading_comments` step, when putting the new lines in gives exactly `new_text`."""
    def text(module: cst.Module) -> str:
        return cst.Module(body=[], header=module.header).code if module.header else ""

    before, after = text(old), text(new)
    if before == after or any(line.strip() and not line.lstrip().startswith("#")
                              for line in (before + after).splitlines()):
        return None
    step = {"op": "replace_leading_comments", "match": before.replace("\r\n", "\n"),
            "code": after.replace("\r\n", "\n")}
    result = old.with_changes(header=new.header)
    return ([step], result) if result.code == new_text else None


def _key(module: cst.Module, stmt: cst.CSTNode) -> str:
    """What pairs two versions of a statement: a def's or class's name, else its kind and first words."""
    if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
        return f"def {stmt.name.value}"
    words = re.split(r"[^\w.]+", module.code_for_node(stmt.with_changes(leading_lines=())
                                                     if hasattr(stmt, "leading_lines") else stmt).strip())
    return f"{type(stmt).__name__} {' '.join(words[:2])}"


def _pieces(m: cst.Module, n: cst.Module, site: _Site) -> list[cst.Module] | None:
    """When a site holds several changes (a changed def beside a new one), the modules after each of them in turn,
    so that each is lifted on its own (and by its most robust operation); None when it is one change."""
    ms, ns = list(body_of(site.mpath[-1])), list(body_of(site.npath[-1]))
    old, new = ms[site.i1:site.i2], ns[site.j1:site.j2]
    if len(old) == 1 and len(new) == 1 and type(old[0]) is type(new[0]) and _one_block(old[0]) \
            and _one_block(new[0]) and m.code_for_node(old[0].body) != n.code_for_node(new[0].body):
        # its header (signature, decorators, test) and its body both changed: first the header, then the body
        header = new[0].with_changes(body=old[0].body)
        if _texts(m, [header]) != _texts(m, old):
            body = list(ms)
            body[site.i1] = header
            return [_with_block(site.mpath, body), _with_block(site.mpath, [*ms[:site.i1], new[0], *ms[site.i2:]])]
    if len(old) + len(new) <= 2 and (len(old) == 1 or not old):
        return None
    ops = difflib.SequenceMatcher(None, [_key(m, s) for s in old], [_key(n, s) for s in new],
                                  autojunk=False).get_opcodes()
    chunks = []
    for tag, a1, a2, b1, b2 in ops:
        if tag == "equal":
            chunks += [(a, a + 1, b, b + 1) for a, b in zip(range(a1, a2), range(b1, b2))]
        else:
            chunks.append((a1, a2, b1, b2))
    chunks = [c for c in chunks if _texts(m, old[c[0]:c[1]]) != _texts(n, new[c[2]:c[3]])]
    for k in range(len(chunks) - 1, 0, -1):
        (a1, a2, b1, b2), (c1, c2, d1, d2) = chunks[k - 1], chunks[k]
        if a1 == a2 and (c1, c2, d1, d2) == (a2, a2 + 1, b2, b2 + 1) and _blank_lines_above(old[c1], new[d1]):
            chunks[k - 1:k + 1] = [(a1, c2, b1, d2)]  # statements inserted, a blank line below them: one change
    if len(chunks) < 2:
        return None
    out, shift, body = [], 0, list(ms)
    for a1, a2, b1, b2 in chunks:
        at = site.i1 + a1 + shift
        body[at:at + (a2 - a1)] = new[b1:b2]
        shift += (b2 - b1) - (a2 - a1)
        below = at + (b2 - b1)
        if a1 == a2 < len(old) and b2 < len(new) and _takes_lead(m, old[a2], new[b1], new[b2]):
            # the statements inserted take the leading lines of the one below them (a section's heading, a
            # paragraph's blank line): the insertion moves them, whatever else changes in that statement
            body[below] = body[below].with_changes(leading_lines=new[b2].leading_lines)
        piece = _with_block(site.mpath, body)
        if not out or piece.code != out[-1].code:
            out.append(piece)
    return out if len(out) > 1 else None


def _takes_lead(m: cst.Module, below: cst.CSTNode, first: cst.CSTNode, below_now: cst.CSTNode) -> bool:
    """Do statements inserted above `below` (the first of them `first`) take its leading lines (comments, blank
    lines), of which `below_now` (its new version) keeps blank lines at most?"""
    now = tuple(getattr(below_now, "leading_lines", ()))
    return bool(getattr(below, "leading_lines", ())) and _lead_text(m, first) == _lead_text(m, below) \
        and all(line.comment is None for line in now) and _lead_text(m, below_now) != _lead_text(m, below)


def _blank_lines_above(old: cst.CSTNode, new: cst.CSTNode) -> int:
    """The blank lines `new` has at the top of its leading lines more than `old`, when that is all that differs
    between them (the blank line a patch leaves below the statements it inserts), else 0."""
    lead_old, lead_new = tuple(getattr(old, "leading_lines", ())), tuple(getattr(new, "leading_lines", ()))
    k = len(lead_new) - len(lead_old)
    if k <= 0 or any(line.comment is not None for line in lead_new[:k]):
        return 0
    return k if new.with_changes(leading_lines=lead_old).deep_equals(old) else 0


def _one_block(stmt: cst.CSTNode) -> bool:
    """A compound statement with one block of statements (a def, a class, a `with`, a loop without `else`)."""
    if isinstance(stmt, (cst.FunctionDef, cst.ClassDef, cst.With)):
        return isinstance(stmt.body, cst.IndentedBlock)
    if isinstance(stmt, (cst.For, cst.While)):
        return stmt.orelse is None and isinstance(stmt.body, cst.IndentedBlock)
    return False


def _with_block(path: NodePath, statements: list) -> cst.Module:
    from .anchors import replace_at

    owner = path[-1]
    if isinstance(owner, cst.Module):
        return owner.with_changes(body=tuple(statements))
    return replace_at(path, owner.with_changes(body=owner.body.with_changes(body=tuple(statements))))


def _renders_as(current: cst.Module, old: cst.Module, new: cst.Module, want: str, top: range) -> bool:
    """Does `current` (`old` after a candidate) render as `want` (the text of `new`)? Top-level statements the
    candidate left alone, outside the site, are the same in all three: only the others are rendered."""
    if len(current.body) != len(new.body) or len(old.body) != len(new.body) \
            or not current.with_changes(body=()).deep_equals(new.with_changes(body=())):
        return current.code == want
    for i, (c, o, n) in enumerate(zip(current.body, old.body, new.body)):
        if c is o and i not in top:
            continue
        if current.code_for_node(c) != new.code_for_node(n):
            return False
    return True


def _try(candidate: list[dict], module: cst.Module, new: cst.Module, want: str, top: range,
         final: cst.Module) -> cst.Module | None:
    try:
        ops = [validate(REGISTRY[c["op"]], {"file": "x.py", **c}) for c in candidate]
    except Exception:  # noqa: BLE001 - a candidate the model refuses (bad code for that op) is just not taken
        return None
    current = module
    for o in ops:
        try:
            out = o.apply(current)
        except SpecpatchError:
            return None
        if not isinstance(out, Changed):
            return None
        current = out.module
    if not _renders_as(current, module, new, want, top):
        return None
    # a second apply of the whole recipe must find every step applied: checked on the fully patched file (a step
    # that describes a state some later step changes again would refuse there, and never be seen upstream)
    again = final
    for o in ops:  # a second run must find every step applied
        try:
            if not isinstance(o.apply(again), AlreadyApplied):
                return None
        except SpecpatchError:
            return None
    return current


_TEXTS: dict[int, tuple[cst.CSTNode, str]] = {}


def _texts(module: cst.Module, stmts: Sequence[cst.CSTNode]) -> list[str]:
    """The code of statements (remembered by node while a file is lifted: most nodes live through many units)."""
    out = []
    for s in stmts:
        hit = _TEXTS.get(id(s))
        if hit is None or hit[0] is not s:
            hit = _TEXTS[id(s)] = (s, module.code_for_node(s))
        out.append(hit[1])
    return out


def _site(m: cst.Module, mpath: NodePath, n: cst.Module, npath: NodePath) -> _Site | None:
    ms, ns = list(body_of(mpath[-1])), list(body_of(npath[-1]))
    # the statements before and after the change are equal as trees: cheaper to see than rendering them
    pre = 0
    while pre < min(len(ms), len(ns)) and ms[pre].deep_equals(ns[pre]):
        pre += 1
    post = 0
    while post < min(len(ms), len(ns)) - pre and ms[-1 - post].deep_equals(ns[-1 - post]):
        post += 1
    mid_m, mid_n = ms[pre:len(ms) - post], ns[pre:len(ns) - post]
    ops = [o for o in difflib.SequenceMatcher(None, _texts(m, mid_m), _texts(n, mid_n), autojunk=False).get_opcodes()
           if o[0] != "equal"]
    if not ops:
        return None
    i1, i2, j1, j2 = ops[0][1] + pre, ops[-1][2] + pre, ops[0][3] + pre, ops[-1][4] + pre
    if i2 - i1 == 1 and j2 - j1 == 1 and type(ms[i1]) is type(ns[j1]) \
            and isinstance(ms[i1], cst.BaseCompoundStatement):
        inner = _inside_compound(m, mpath + (ms[i1],), n, npath + (ns[j1],))
        if inner is not None:
            return inner
    return _Site(mpath, i1, i2, npath, j1, j2)


def _owners(stmt: cst.CSTNode) -> list[cst.CSTNode]:
    """The nodes that own the statement blocks of a compound statement, in order."""
    if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
        return [stmt]
    return [b for b in child_blocks(stmt)]


def _inside_compound(m: cst.Module, mpath: NodePath, n: cst.Module, npath: NodePath) -> _Site | None:
    """The site inside two versions of one compound statement, when only one of its blocks differs."""
    mo, no = _owners(mpath[-1]), _owners(npath[-1])
    if len(mo) != len(no) or any(not isinstance(getattr(b, "body", None), cst.IndentedBlock) for b in mo + no):
        return None
    if not all(_same_header(a, b) for a, b in zip(mo, no)):
        return None
    # by their code when the trees differ: a block an earlier step of the same hunk rebuilt (its statements parsed
    # again at their indentation) is not deep-equal to the parsed file, but holds the same code
    differ = [(a, b) for a, b in zip(mo, no)
              if not a.body.deep_equals(b.body) and m.code_for_node(a.body) != n.code_for_node(b.body)]
    if len(differ) != 1:
        return None
    a, b = differ[0]
    ma = mpath if a is mpath[-1] else _path_to_block(mpath, a)
    nb = npath if b is npath[-1] else _path_to_block(npath, b)
    return _site(m, ma, n, nb)


_BLOCK_FIELDS = frozenset({"body", "orelse", "handlers", "finalbody", "cases"})


def _same_header(a: cst.CSTNode, b: cst.CSTNode) -> bool:
    """Are two block owners equal but for their blocks (the test, signature, decorators, comments, layout)?"""
    if type(a) is not type(b):
        return False
    for name in a.__dataclass_fields__:
        if name in _BLOCK_FIELDS:
            continue
        va, vb = getattr(a, name), getattr(b, name)
        if isinstance(va, cst.CSTNode):
            if not isinstance(vb, cst.CSTNode) or not va.deep_equals(vb):
                return False
        elif isinstance(va, (list, tuple)):
            if not isinstance(vb, (list, tuple)) or len(va) != len(vb) or not all(
                    x.deep_equals(y) if isinstance(x, cst.CSTNode) else x == y for x, y in zip(va, vb)):
                return False
        elif va != vb:
            return False
    return True


def _dotted(path: NodePath) -> str | None:
    names = [p.name.value for p in path if isinstance(p, (cst.FunctionDef, cst.ClassDef))]
    return ".".join(names) or None


def _innermost_def(path: NodePath) -> NodePath | None:
    for k in range(len(path) - 1, -1, -1):
        if isinstance(path[k], (cst.FunctionDef, cst.ClassDef)):
            return path[:k + 1]
    return None


def _code(module: cst.Module, path: NodePath, stmts: Sequence[cst.CSTNode], *, lead: bool = True) -> str:
    """The statements as recipe code: at column 0, multi-line strings moved left with them (an operation puts them
    back at the block's indentation, strings included)."""
    indent = indent_of(path + (stmts[0],)) if stmts else ""
    block = getattr(path[-1], "body", None)
    if stmts and isinstance(block, cst.IndentedBlock) and not any(c is stmts[0] for c in block.body):
        # a statement made anew for the code (its leading lines changed): it stands in that block all the same
        indent = indent_of(path) + _block_indent(block, path[0])
    out = []
    for k, s in enumerate(stmts):
        if not lead and k == 0 and hasattr(s, "leading_lines"):
            s = s.with_changes(leading_lines=())
        if indent:
            s = s.visit(_StringDedent(indent))
        out.append(module.code_for_node(s))
    return "".join(out)


class _StringDedent(cst.CSTTransformer):
    def __init__(self, indent: str) -> None:
        self.indent = indent

    def leave_SimpleString(self, original: cst.SimpleString, updated: cst.SimpleString) -> cst.SimpleString:
        if "\n" not in updated.value:
            return updated
        first, *rest = updated.value.split("\n")
        rest = [ln[len(self.indent):] if ln.startswith(self.indent) else ln for ln in rest]
        return updated.with_changes(value="\n".join([first, *rest]))

    def leave_FormattedStringText(self, original, updated):
        if "\n" not in updated.value:
            return updated
        first, *rest = updated.value.split("\n")
        rest = [ln[len(self.indent):] if ln.startswith(self.indent) else ln for ln in rest]
        return updated.with_changes(value="\n".join([first, *rest]))


def _lead_text(module: cst.Module, stmt: cst.CSTNode) -> str:
    return "".join(module.code_for_node(line) for line in getattr(stmt, "leading_lines", ()))


def _candidates(m: cst.Module, n: cst.Module, site: _Site) -> Iterator[list[dict]]:
    ms, ns = list(body_of(site.mpath[-1])), list(body_of(site.npath[-1]))
    old, new = ms[site.i1:site.i2], ns[site.j1:site.j2]
    owner = site.mpath[-1]
    scope_path = _innermost_def(site.mpath)
    scope = _dotted(scope_path) if scope_path else None
    if not old and new:
        yield from _insertions(m, n, site, ms, new, owner, scope)
    fn = _innermost_def(site.mpath)
    if len(old) == 1 and len(new) > 1 and fn is not None and isinstance(fn[-1], cst.FunctionDef) \
            and not isinstance(owner, (cst.Module, cst.ClassDef)) and (blank := _blank_lines_above(old[0], new[-1])):
        # statements inserted above a statement that got a blank line at its top: an insertion, spaced below
        inserted = _Site(site.mpath, site.i1, site.i1, site.npath, site.j1, site.j2 - 1)
        for steps in _statement_insertions(m, inserted, ms, _code(n, site.npath, new[:-1]), fn):
            yield [{**step, "blank_lines_after": blank} for step in steps]
    if len(old) == 1 and len(new) > 1 and _takes_lead(m, old[0], new[0], new[-1]) \
            and new[-1].with_changes(leading_lines=old[0].leading_lines).deep_equals(old[0]):
        # statements inserted above one whose leading lines (a section's heading, a paragraph's blank line) they
        # take: before it (a definition spaced from it by the blank lines it keeps)
        if isinstance(owner, cst.Module) and _is_import_line(old[0]) and all(map(_is_import_line, new[:-1])):
            # imports put at the top of an import section (above its first line, taking its blank line): each one
            # where it sorts, so that one a release already has is already there and the others still land
            yield [{"op": "add_import", "code": _code(n, site.npath, [s], lead=False).strip(), "sorted": True}
                   for s in new[:-1]]
        if isinstance(owner, cst.ClassDef):
            yield from _documented_fields(n, site, ms, site.i1, new[:-1], _dotted(site.mpath))
        if isinstance(owner, cst.Module) and defined_names(old[0]):
            spacing = tuple(new[-1].leading_lines)
            code = _code(n, site.npath, [new[0].with_changes(leading_lines=spacing), *new[1:-1]])
            yield [{"op": "add_definition", "before": defined_names(old[0])[0], "code": code}]
        elif fn is not None and isinstance(fn[-1], cst.FunctionDef) and not new[-1].leading_lines \
                and not isinstance(owner, (cst.Module, cst.ClassDef)):
            inserted = _Site(site.mpath, site.i1, site.i1, site.npath, site.j1, site.j2 - 1)
            yield from _statement_insertions(m, inserted, ms, _code(n, site.npath, new[:-1], lead=False), fn)
    if isinstance(owner, cst.Module) and len(old) == 1 and len(new) == 1:
        yield from _import_merges(old[0], new[0])
    if len(old) == 1 and len(new) == 1 and type(old[0]) is type(new[0]) \
            and _lead_text(m, old[0]) == _lead_text(n, new[0]):
        yield from _expression_edits(m, n, site.mpath + (old[0],), old[0], new[0], scope)
    if len(old) == 1 and len(new) == 1:
        yield from _header_replacement(m, n, site, old[0], new[0], scope)
    yield from _replacements(m, n, site, ms, ns, scope, inside=_inside_of(m, site.mpath, scope_path))
    # the whole enclosing statement, up to the def that holds the site
    path, npath = site.mpath, site.npath
    while len(path) > 1 and not isinstance(path[-1], (cst.Module, cst.ClassDef)):
        stmt_m, stmt_n = _statement_of(path), _statement_of(npath)
        if stmt_m is None or stmt_n is None:
            return
        (pm, im), (pn, jn) = stmt_m, stmt_n
        up = _Site(pm, im, im + 1, pn, jn, jn + 1)
        up_scope_path = _innermost_def(pm)
        yield from _replacements(m, n, up, list(body_of(pm[-1])), list(body_of(pn[-1])),
                                 _dotted(up_scope_path) if up_scope_path else None)
        if isinstance(path[-1], cst.FunctionDef):
            return
        path, npath = pm, pn


def _header_replacement(m, n, site, old, new, scope) -> Iterator[list[dict]]:
    """A compound statement whose header alone changed (a `with`'s items, an `if`'s test): `replace_statements` of
    the header (a block of `...`), so that the step survives upstream editing the statement's block."""
    from .operations.replace_statements import _DOTS, _HEADED

    if type(old) is not type(new) or not isinstance(old, _HEADED) or not isinstance(old.body, cst.IndentedBlock) \
            or not isinstance(new.body, cst.IndentedBlock):
        return
    if m.code_for_node(old.body) != n.code_for_node(new.body) or not _lead_text(n, new).startswith(_lead_text(m, old)):
        return
    before, after = getattr(old, "orelse", None), getattr(new, "orelse", None)
    if (before is None) != (after is None):
        return  # an `elif`/`else` arm added or removed: not a change of the header alone
    if before is not None and m.code_for_node(before) != n.code_for_node(after):
        return

    def header(node, keep=()):
        changes = {"body": _DOTS, "leading_lines": keep}
        if getattr(node, "orelse", None) is not None:
            changes["orelse"] = None
        return node.with_changes(**changes)

    lead = tuple(new.leading_lines)[len(old.leading_lines):]
    within = {"within": scope} if scope else {}
    yield [{"op": "replace_statements", "match": _code(m, site.mpath, [header(old)], lead=False),
            "code": _code(n, site.npath, [header(new, lead)]), **within}]


def _import_merges(old: cst.CSTNode, new: cst.CSTNode) -> Iterator[list[dict]]:
    """Names added to a module's `from a.b import (...)` list: one `add_import` with `merge` a name, placed after
    the name it follows, so that the step survives upstream adding or removing other names of that list."""
    if not (_is_import_line(old) and _is_import_line(new) and len(old.body) == len(new.body) == 1):
        return
    a, b = old.body[0], new.body[0]
    if not (isinstance(a, cst.ImportFrom) and isinstance(b, cst.ImportFrom)) \
            or isinstance(a.names, cst.ImportStar) or isinstance(b.names, cst.ImportStar):
        return
    was, now = _as_ast(a), _as_ast(b)
    if (was.module, was.level) != (now.module, now.level):
        return
    had = [bd.text for bd in bindings(was)]
    got = bindings(now)
    if [bd.text for bd in got if bd.text in had] != had or len(got) == len(had):
        return  # a name removed or reordered: not only additions
    steps, after = [], None
    first_kept = next(bd.source[3] for bd in got if bd.text in had)
    for bd in got:
        if bd.text in had:
            after = bd.source[3]
            continue
        step = {"op": "add_import", "code": _statement(now, [bd]), "merge": True}
        if after:
            step["after"] = after
        else:  # a name put first in the list: before the name the list started with
            step["before"] = first_kept
        steps.append(step)
        after = bd.source[3]
    yield steps


def _statement_of(path: NodePath) -> tuple[NodePath, int] | None:
    """The block owner and index of the statement that holds the block owned by `path[-1]`."""
    for k in range(len(path) - 2, -1, -1):
        statements = list(body_of(path[k]))
        for i, s in enumerate(statements):
            if s is path[k + 1]:
                return path[:k + 1], i
    return None


def _insertions(m, n, site, ms, new, owner, scope) -> Iterator[list[dict]]:
    i = site.i1
    prev = ms[i - 1] if i > 0 else None
    if isinstance(owner, cst.ClassDef):
        cls = _dotted(site.mpath)
        if all(isinstance(s, cst.FunctionDef) for s in new):
            if isinstance(prev, cst.FunctionDef) or i == len(ms):
                steps, after = [], prev.name.value if isinstance(prev, cst.FunctionDef) else None
                for s in new:
                    step = {"op": "add_method", "class": cls, "code": _code(n, site.npath, [s])}
                    if after:
                        step["after"] = after
                    steps.append(step)
                    after = s.name.value
                yield steps
        if all(field_name(s) for s in new) and prev is not None and field_name(prev):
            steps, after = [], field_name(prev)
            for s in new:
                steps.append({"op": "add_dataclass_field", "class": cls, "after": after,
                              "code": _code(n, site.npath, [s], lead=False).strip()})
                after = field_name(s)
            yield steps
        yield from _documented_fields(n, site, ms, i, new, cls)
    if isinstance(owner, cst.Module):
        if all(_is_import_line(s) for s in new):
            yield [{"op": "add_import", "code": _code(n, site.npath, [s], lead=False).strip()} for s in new]
            # an import put in the middle of a sorted block: where it sorts (it follows the block's own changes)
            yield [{"op": "add_import", "code": _code(n, site.npath, [s], lead=False).strip(), "sorted": True}
                   for s in new]
        code = _code(n, site.npath, new)
        if prev is not None and defined_names(prev):
            yield [{"op": "add_definition", "after": defined_names(prev)[0], "code": code}]
        if i < len(ms) and defined_names(ms[i]):
            yield [{"op": "add_definition", "before": defined_names(ms[i])[0], "code": code}]
        if i == len(ms):
            yield [{"op": "add_definition", "code": code}]
    fn = _innermost_def(site.mpath)
    if prev is not None and fn is not None and isinstance(fn[-1], cst.FunctionDef) and flags_of(prev) \
            and all(flags_of(s) for s in new):
        steps, after = [], flags_of(prev)[0]
        for s in new:
            steps.append({"op": "add_argparse_argument", "function": _dotted(fn), "after_flag": after,
                          "code": _code(n, site.npath, [s], lead=False)})
            after = flags_of(s)[0]
        yield steps
    if fn is not None and isinstance(fn[-1], cst.FunctionDef) and not isinstance(owner, (cst.Module, cst.ClassDef)):
        yield from _statement_insertions(m, site, ms, _code(n, site.npath, new), fn)


def _documented_fields(n, site, ms, i: int, new, cls: str) -> Iterator[list[dict]]:
    """Fields each with its docstring below it (vLLM's config classes) put below a field and its docstring:
    `add_dataclass_field` steps whose code holds both (the blank lines above the first kept with it)."""
    from .operations.add_dataclass_field import _is_doc

    units = [new[k:k + 2] for k in range(0, len(new), 2)]
    above = ms[i - 2] if i > 1 and _is_doc(ms[i - 1]) else None
    if units and all(len(u) == 2 and field_name(u[0]) and _is_doc(u[1]) for u in units) \
            and above is not None and field_name(above):
        steps, after = [], field_name(above)
        for u in units:
            steps.append({"op": "add_dataclass_field", "class": cls, "after": after,
                          "code": _code(n, site.npath, u)})
            after = field_name(u[0])
        yield steps


def _statement_insertions(m, site, ms, new_code: str, fn: NodePath) -> Iterator[list[dict]]:
    """Statements inserted into a function: `insert_statements` after the statement above them, else before the one
    below, each first as a pattern whose calls take any arguments (it survives upstream renaming an argument or
    adding one), then as written. A pattern that matches more than one statement of the function is not taken."""
    i = site.i1
    function = _dotted(fn)
    sides = (("after", ms[i - 1] if i > 0 else None), ("before", ms[i] if i < len(ms) else None))

    def patterns(stmt) -> list[str]:
        if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
            text = m.code_for_node(stmt.body[0]).strip()
        else:
            text = _block_pattern(stmt)  # a compound statement: by its header(s), whatever its blocks hold
        return [p for p in dict.fromkeys((_any_arguments(text), text)) if p] if text else []

    for k, (at, stmt) in enumerate(sides):
        other = sides[1 - k][1]
        # the statement on the other side, as a second anchor for when upstream rewrites the first: taken only
        # when it alone matches in the function (else the fallback could land anywhere)
        fallback = next((p for p in patterns(other) if _unique_in(m, fn, p)), None)
        for pattern in patterns(stmt):
            step = {"op": "insert_statements", "function": function, "at": at, "match": pattern, "code": new_code,
                    "if_present_elsewhere": "refuse"}
            if fallback:
                yield [{**step, "fallback_match": fallback}]
            yield [step]
    if i == 0 and site.mpath[-1] is fn[-1]:
        # code put at the top of the function's body (above a comment that stays with the statement below it, where
        # `before` that statement takes the comment above the code): `at: start`, whatever the first statement is
        yield [{"op": "insert_statements", "function": function, "at": "start", "code": new_code,
                "if_present_elsewhere": "refuse"}]
    # the statement next to the insertion is there more than once in the function: anchored by the header of its
    # block (`inside: if poll == KVPoll.Bootstrapping:`) when that header is unique in the function, the code at
    # the block's top when it went there (it survives upstream rewriting the block's first statement), else next
    # to the statement, which must then be unique among the block's own statements
    block = _inside_of(m, site.mpath, fn)
    if block is None:
        return
    inside, bpath = block
    unique = [any(_unique_in(m, fn, p) for p in patterns(stmt)) for _, stmt in sides]
    steps = []
    if i == 0:
        # code put at the top of the block: there, whether or not the statement below is unique (when the same hunk
        # edits that statement too, a step anchored on it does not find it in the patched file)
        steps.append({"op": "insert_statements", "function": function, "at": "start", "code": new_code, **inside})
    for (at, stmt), alone in zip(sides, unique):
        if alone:
            continue  # unique in the function: the step above is the choice
        steps += [{"op": "insert_statements", "function": function, "at": at, "match": pattern, "code": new_code,
                   **inside} for pattern in patterns(stmt) if _unique_in(m, bpath, pattern, own=True)]
    # code the patch puts in two arms of one `if`: the second step finds the first's code in the function, so the
    # step that refuses a statement already there cannot lift it; the one that adds it anyway comes after it (the
    # context of the whole chain, the choice before, held the first arm's code too)
    for refuse in ("refuse", "apply"):
        for step in steps:
            yield [{**step, "if_present_elsewhere": refuse}]


def _block_pattern(stmt: cst.CSTNode) -> str | None:
    """A compound statement as a pattern that matches it whatever its blocks hold: its headers with `...` blocks
    (`if x:` / `...` / `else:` / `...`; an `elif` chain is an `else:` block), or None for another statement (a def,
    a class, a `match`: those are not insertion anchors)."""
    from .operations._code import _DOTS

    dots_else = cst.Else(body=_DOTS)
    if isinstance(stmt, (cst.If, cst.For, cst.While, cst.With)):
        changes = {"body": _DOTS, "leading_lines": ()}
        if getattr(stmt, "orelse", None) is not None:
            changes["orelse"] = dots_else
        node = stmt.with_changes(**changes)
    elif isinstance(stmt, cst.Try):
        node = stmt.with_changes(body=_DOTS, leading_lines=(),
                                 handlers=[h.with_changes(body=_DOTS) for h in stmt.handlers],
                                 orelse=dots_else if stmt.orelse is not None else None,
                                 finalbody=cst.Finally(body=_DOTS) if stmt.finalbody is not None else None)
    else:
        return None
    text = cst.Module(body=[]).code_for_node(node)
    try:
        return ast.unparse(ast.parse(text)).strip()
    except SyntaxError:
        return None


def _inside_of(m: cst.Module, mpath: NodePath, fn: NodePath | None) -> tuple[dict, NodePath] | None:
    """The options that name the block owned by `mpath[-1]` by its header (`inside`, with `inside_else` for the
    `else:` of an `if`/`elif` arm) and the block's path, when it is an `if`/`elif` arm, an `else:` right after one,
    a `with`, `for` or `while` of the function `fn` whose header no other block of the function has; else None."""
    from .operations._code import header_text, inside_block

    if fn is None or not isinstance(fn[-1], cst.FunctionDef) or mpath[-1] is fn[-1]:
        return None
    owner, else_arm = mpath[-1], False
    if isinstance(owner, cst.Else) and len(mpath) > 1 and isinstance(mpath[-2], cst.If) \
            and mpath[-2].orelse is owner:
        arm, else_arm = mpath[-2], True
    elif isinstance(owner, (cst.If, cst.With, cst.For, cst.While)):
        arm = owner
    else:
        return None
    header = header_text(arm)
    if not header:
        return None
    try:
        found = inside_block(m, fn, header, else_arm=else_arm)
    except (SpecpatchError, ValueError):
        return None  # not unique in the function (or not a header `inside` reads)
    if found[-1] is not owner:
        return None
    return ({"inside": header, **({"inside_else": True} if else_arm else {})}), found


def _unique_in(module: cst.Module, fn: NodePath, pattern: str, *, own: bool = False) -> bool:
    """Does exactly one statement of the function (with `own`: of the block `fn[-1]` owns, not of blocks nested in
    it) match the code pattern?"""
    from .anchors import statements_matching
    from .patterns import Pattern

    try:
        found = statements_matching(module, fn, Pattern.parse(pattern))
    except Exception:  # noqa: BLE001 - a text that is not a pattern is no anchor
        return False
    return len([s for s in found if not own or s[-2] is fn[-1]]) == 1


class _AnyArguments(ast.NodeTransformer):
    def visit_Call(self, node: ast.Call) -> ast.Call:
        node.func = self.visit(node.func)
        node.args, node.keywords = [ast.Constant(...)], []
        return node


def _any_arguments(text: str) -> str | None:
    """The statement as a pattern whose calls take any arguments (`polls = poll(...)`), or None without a call."""
    try:
        tree = ast.parse(textwrap.dedent(text))
    except SyntaxError:
        return None
    if not any(isinstance(node, ast.Call) for node in ast.walk(tree)):
        return None
    return ast.unparse(_AnyArguments().visit(tree)).strip()


def _expression_edits(m, n, spath, old, new, scope) -> Iterator[list[dict]]:
    """Edits inside one statement: the smallest differing nodes, then the expressions around them."""
    chain = _differing_chain(old, new)
    if not chain:
        return
    mo, no = chain[-1]
    within = {"within": scope} if scope else {}
    if isinstance(mo, cst.Call) and isinstance(no, cst.Call) and mo.func.deep_equals(no.func):
        added = _one_added(mo.args, no.args)
        if added is not None and no.args[added].keyword is not None:
            arg = no.args[added]
            step = {"op": "add_keyword_argument", "call": f"{_flat(m, mo.func)}(...)",
                    "code": _flat(n, arg.with_changes(comma=cst.MaybeSentinel.DEFAULT)) + _own_comment(arg),
                    **within}
            before = no.args[added - 1] if added > 0 else None
            if added < len(no.args) - 1 and before is not None and before.keyword is not None:
                step["after"] = before.keyword.value
            if added == len(no.args) - 1 or "after" in step:
                yield [step]
                yield [{**step, "call": _flat(m, mo)}]
    if isinstance(mo, (cst.List, cst.Tuple, cst.Set)) and type(mo) is type(no):
        added = _one_added(mo.elements, no.elements)
        if added:
            bare = cst.MaybeSentinel.DEFAULT  # an element as written, `*X` of an unpacking included
            yield [{"op": "add_element", "after": _flat(m, mo.elements[added - 1].with_changes(comma=bare)),
                    "code": _flat_item(n, no.elements[added], no), **within}]
    if isinstance(mo, cst.Dict) and isinstance(no, cst.Dict):
        added = _one_added(mo.elements, no.elements)
        if added and isinstance(no.elements[added], cst.DictElement) \
                and isinstance(mo.elements[added - 1], cst.DictElement):
            # an entry of a dict display (vLLM's `environment_variables`): after the entry above it, by its key,
            # with the comment lines the patch put above it
            def comments(element) -> list[str]:
                ws = element.comma.whitespace_after if isinstance(element.comma, cst.Comma) else None
                return [e.comment.value for e in getattr(ws, "empty_lines", ()) if e.comment is not None]

            had = comments(mo.elements[added - 1])
            lead = [c for c in comments(no.elements[added - 1]) if c not in had]
            entry = _flat_item(n, no.elements[added], no)
            yield [{"op": "add_element", "after": _flat(m, mo.elements[added - 1].key),
                    "code": "".join(f"{c}\n" for c in lead) + entry, **within}]
    if isinstance(mo, cst.Parameters) and isinstance(no, cst.Parameters) and isinstance(old, cst.FunctionDef):
        added = _one_added(mo.params, no.params)
        fn = _dotted(spath)
        if added is not None:
            step = {"op": "add_parameter", "function": fn,
                    "code": _flat(n, no.params[added].with_changes(comma=cst.MaybeSentinel.DEFAULT))
                    + _own_comment(no.params[added])}
            if 0 < added < len(no.params) - 1:  # the last plain one goes last: after those upstream appends
                step["after"] = no.params[added - 1].name.value
            yield [step]
        kw = _one_added(mo.kwonly_params, no.kwonly_params)
        if kw is not None:  # a keyword-only parameter: after the one it follows, or first after `*` / `*args`
            yield [{"op": "add_parameter", "function": fn,
                    "code": _flat(n, no.kwonly_params[kw].with_changes(comma=cst.MaybeSentinel.DEFAULT)),
                    "after": no.kwonly_params[kw - 1].name.value if kw > 0 else "*"}]
    exprs = [(a, b) for a, b in chain if isinstance(a, cst.BaseExpression) and isinstance(b, cst.BaseExpression)]
    # a bare literal (`"3"` -> `"10"`, `2.0`, `True`) says nothing about where it is: in the next release the same
    # literal elsewhere in the function takes the edit, or the new value anywhere in it reads as "already applied".
    # The expression around it (`os.getenv("REQUEST_TIMEOUT", "3")`) anchors it; with none, the statement does
    # (`DEFAULT_SIZE = 1 << 16`: a `replace_statements` candidate, further on)
    named = [(a, b) for a, b in exprs if not _bare_literal(a)]
    for a, b in reversed(named[-4:]):
        yield [{"op": "replace_expression", "match": _flat(m, a), "code": n.code_for_node(b), **within}]


def _bare_literal(node: cst.CSTNode) -> bool:
    """A number, a string (plain or concatenated), `True`/`False`/`None`, a sign on one, or arithmetic of them
    (`1 << 16`, `60 * 60`): no name in it."""
    if isinstance(node, cst.UnaryOperation):
        return _bare_literal(node.expression)
    if isinstance(node, cst.BinaryOperation):
        return _bare_literal(node.left) and _bare_literal(node.right)
    if isinstance(node, cst.Name):
        return node.value in ("True", "False", "None")
    return isinstance(node, (cst.SimpleString, cst.ConcatenatedString, cst.Integer, cst.Float, cst.Imaginary))


def _flat(module: cst.Module, node: cst.CSTNode) -> str:
    """A node's code; when it spans lines, it is kept as written (the operations read it inside parentheses)."""
    return module.code_for_node(node).strip()


def _flat_item(module: cst.Module, item: cst.CSTNode, literal: cst.CSTNode) -> str:
    """An item of a literal as `add_element` reads its code: continuation lines relative to the item's first line
    (the operation puts them back at the items' indentation), the comment at the end of its line after it."""
    from .operations._code import unindent
    from .operations.add_element import item_indent

    text = _flat(module, item.with_changes(comma=cst.MaybeSentinel.DEFAULT))
    indent = item_indent(literal)
    text = unindent(text, indent) if indent else text
    return text + _own_comment(item, literal)


def _own_comment(item: cst.CSTNode, literal: cst.CSTNode | None = None) -> str:
    """The comment ending an item's line (`timeout=30,  # seconds`), as `  # ...` to put after its code, else "".
    libcst keeps it after the item's comma, after a last argument or parameter without one, or before the closing
    bracket of a literal after its last item."""
    ws = item.comma.whitespace_after if isinstance(item.comma, cst.Comma) else None
    if not isinstance(ws, cst.ParenthesizedWhitespace):
        ws = getattr(item, "whitespace_after_arg", None) or getattr(item, "whitespace_after_param", None)
    if not isinstance(ws, cst.ParenthesizedWhitespace) and literal is not None and literal.elements \
            and literal.elements[-1] is item:
        ws = next((b.whitespace_before for b in (getattr(literal, "rbracket", None), getattr(literal, "rbrace", None),
                                                 *(getattr(literal, "rpar", None) or ())[-1:]) if b is not None), None)
    if isinstance(ws, cst.ParenthesizedWhitespace) and ws.first_line.comment is not None:
        return "  " + ws.first_line.comment.value
    return ""


def _one_added(old: Sequence[cst.CSTNode], new: Sequence[cst.CSTNode]) -> int | None:
    """The index of the one item `new` adds to `old` (commas and layout aside), else None."""
    if len(new) != len(old) + 1:
        return None
    def same(a, b):
        return a.with_changes(comma=cst.MaybeSentinel.DEFAULT).deep_equals(b.with_changes(comma=cst.MaybeSentinel.DEFAULT))
    for k in range(len(new)):
        if all(same(a, b) for a, b in zip(old, [*new[:k], *new[k + 1:]])):
            return k
    return None


def _differing_chain(a: cst.CSTNode, b: cst.CSTNode) -> list[tuple[cst.CSTNode, cst.CSTNode]]:
    """Pairs of nodes from `a`/`b` down to the smallest pair that holds every difference."""
    chain = [(a, b)]
    while True:
        if type(a) is not type(b):
            if isinstance(a, cst.BaseExpression) and isinstance(b, cst.BaseExpression):
                return chain  # one expression put for another (`self.x` -> `x`): the smallest replacement
            return chain[:-1] if len(chain) > 1 else chain
        ca, cb = a.children, b.children
        if len(ca) != len(cb):
            return chain
        diff = [(x, y) for x, y in zip(ca, cb) if not x.deep_equals(y)]
        if len(diff) != 1:
            return chain
        a, b = diff[0]
        chain.append((a, b))


def _comments_above(m, n, site, ms, ns) -> dict | None:
    """A `replace_leading_comments` step with `above` when the site's statements are the same code and only the
    comment lines above the first differ (a reworded comment above a function or a statement): anchored on that
    statement (a compound one by its header), not on the code around it, which upstream may edit."""
    from .operations.replace_statements import _DOTS, _HEADED

    old, new = ms[site.i1:site.i2], ns[site.j1:site.j2]
    if not old or len(old) != len(new) or not all(hasattr(s, "leading_lines") for s in (old[0], new[0])):
        return None
    bare = [s.with_changes(leading_lines=()) for s in (old[0], new[0])]
    if not bare[0].deep_equals(bare[1]) or not all(a.deep_equals(b) for a, b in zip(old[1:], new[1:])):
        return None

    from .operations.replace_leading_comments import _comment_lines

    def lines(stmt: cst.CSTNode) -> str:  # the block the operation replaces: the comment lines right above
        return "".join(line + "\n" for line in _comment_lines(stmt.leading_lines))

    match, code = lines(old[0]), lines(new[0])
    if match == code:
        return None
    stmt = bare[0]
    if isinstance(stmt, _HEADED) and getattr(stmt, "orelse", None) is None:
        changes = {"body": _DOTS}
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            changes["lines_after_decorators"] = ()
        stmt = stmt.with_changes(**changes)
    elif not isinstance(stmt, cst.SimpleStatementLine):
        return None
    return {"op": "replace_leading_comments", "above": _code(m, site.mpath, [stmt], lead=False), "match": match,
            "code": code}


def _replacements(m, n, site, ms, ns, scope, inside: tuple[dict, NodePath] | None = None) -> Iterator[list[dict]]:
    """`replace_statements` of the site, then with 1-2 statements of context on each side. With `inside` (the
    options naming the site's block by its header, and the block's path): when the site's statements are there more
    than once in the function but once in the block, the site alone inside that block comes right after the site
    alone (before any context, which upstream may edit)."""
    from .operations._code import blocks_under, fingerprint
    from .operations.replace_statements import _runs

    within = {"within": scope} if scope else {}
    comments = _comments_above(m, n, site, ms, ns)
    if comments is not None:  # the code is the same, only the comment lines above it changed
        yield [{**comments, **within}]
    seen = set()
    for above, below in ((0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (2, 1)):
        i1, i2 = site.i1 - above, site.i2 + below
        j1, j2 = site.j1 - above, site.j2 + below
        if i1 < 0 or j1 < 0 or i2 > len(ms) or j2 > len(ns) or i2 <= i1:
            continue
        if (i1, i2) in seen:
            continue
        seen.add((i1, i2))
        old, new = ms[i1:i2], ns[j1:j2]
        old_lead, new_lead = (_lead_text(m, old[0]), _lead_text(n, new[0]) if new else "")
        if new and not new_lead.startswith(old_lead):
            continue
        match = _code(m, site.mpath, old, lead=False)
        code = ""
        if new:
            first = new[0].with_changes(leading_lines=tuple(new[0].leading_lines)[len(old[0].leading_lines):])
            code = _code(n, site.npath, [first, *new[1:]])
        step = {"op": "replace_statements", "match": match, "code": code, **within}
        yield [step]
        yield [{**step, "if_present_elsewhere": "apply"}]
        if (above, below) == (0, 0) and inside is not None:
            opts, bpath = inside
            keys = [fingerprint(m, s) for s in old]
            fn = _innermost_def(site.mpath)
            if fn is not None and None not in keys and len(_runs(m, list(blocks_under(fn)), old, keys)) > 1 \
                    and len(_runs(m, [(bpath, body_of(bpath[-1]))], old, keys)) == 1:
                yield [{**step, **opts}]
                yield [{**step, **opts, "if_present_elsewhere": "apply"}]


# --------------------------------------------------------------------------------------------------- the recipe


#: how the description of a recipe `import` wrote begins: what tells an earlier import's output, which a re-import
#: replaces, from a recipe someone wrote, which it never overwrites
LIFTED_BY = "Lifted by `specpatch import`"


def write_recipe(lifted: Lifted, out: Path, *, package: str, release: str, source: str) -> Path:
    """Write the recipe (`out`, a .yaml path) and its code files (in the folder named after it, beside it).

    Both are written to a temporary folder beside `out`, then swapped in (`_swap_in`): a failure on the way leaves
    the earlier recipe, if any, as it was and loadable. Only what an earlier import wrote there is replaced
    (`_earlier_output` refuses anything else), so import never deletes a file it did not write."""
    import tempfile

    import yaml

    recipe_id = out.stem
    _earlier_output(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=f".{recipe_id}.import-", dir=out.parent))
    except OSError as exc:
        raise _write_failure(exc, out) from None
    folder = stage / recipe_id
    keep = False
    try:
        taken: set[str] = set()
        steps = []
        for s in lifted.steps:
            parts = PurePosixPath(s.file).with_suffix("").parts
            base = "-".join(parts[-2:]).replace("_", "-").lower()
            name = f"{base}-h{s.hunk.number}-{_what(s.options)}"
            count = 1
            while (name if count == 1 else f"{name}-{count}") in taken:
                count += 1
            name = name if count == 1 else f"{name}-{count}"
            taken.add(name)
            step: dict[str, Any] = {"name": name, "op": s.options["op"], "file": s.file,
                                    "group": f"h{s.hunk.number}"}
            for key, value in s.options.items():
                if key == "op":
                    continue
                one_line = value.rstrip("\n") if isinstance(value, str) else value
                if isinstance(value, str) and ("\n" in one_line or one_line != one_line.strip()):
                    short = name[len(base) + 1:]
                    rel = PurePosixPath(PurePosixPath(s.file).with_suffix("").as_posix()) / f"{short}{_ext(key)}"
                    path = folder / rel
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(value.encode("utf-8"))
                    step[f"{key}_file"] = rel.as_posix()
                else:
                    step[key] = one_line
            steps.append(step)
        data = {"id": recipe_id, "version": 1, "title": f"{source} as semantic steps",
                "description": _description(lifted, package=package, release=release, source=source),
                "target": {"package": package, "versions": f">={release}"}, "steps": steps}
        text = yaml.safe_dump(data, sort_keys=False, width=120, allow_unicode=True)
        (stage / "recipe.yaml").write_text(_stamped(text, folder), encoding="utf-8")
        _swap_in(stage, out)
    except OSError as exc:
        raise _write_failure(exc, out) from None
    except SpecpatchError:  # the earlier code folder could not be put back: it stays in `stage`, which the error names
        keep = True
        raise
    finally:
        if not keep:
            shutil.rmtree(stage, ignore_errors=True)
    return out


def _description(lifted: Lifted, *, package: str, release: str, source: str) -> str:
    """What the recipe holds, exactly: the hunks expressed, those written as steps that refuse, and what has no step
    at all (files the recipe cannot touch, changes no hunk carries), which applying the recipe leaves out."""
    refusing = {(s.file, s.hunk.number) for s in lifted.steps if s.options["op"] == "unexpressed_hunk"}
    missed = [h for h in lifted.hunks if not h.lifted]
    refused = sum((h.file, h.hunk.number) in refusing for h in missed)
    parts = [f"{lifted.lifted} expressed as semantic steps"]
    if refused:
        parts.append(f"{refused} as {'a step that refuses' if refused == 1 else 'steps that refuse'} "
                     "(`unexpressed_hunk`, named after the hunk: port it by hand)")
    if len(missed) > refused:
        parts.append(f"{len(missed) - refused} with no step")
    text = f"{LIFTED_BY} from {source} on {package} {release}: {len(lifted.hunks)} hunks, {', '.join(parts)}."
    if lifted.skipped:
        text += (" No step makes these changes (applying the recipe leaves them out): "
                 + "; ".join(f"{p} ({why})" for p, why in lifted.skipped) + ".")
    return text


_STAMP = "# written by `specpatch import`; a re-import replaces it only while it and its code are as written: "


def _stamped(text: str, folder: Path) -> str:
    """The recipe's YAML with a first line that holds a digest of it and of its code files (in `folder`)."""
    return f"{_STAMP}{_digest(text, folder, _files_under(folder) if folder.is_dir() else ())}\n{text}"


def _digest(text: str, folder: Path, files: Iterable[str]) -> str:
    """A digest of a recipe's YAML and of its code `files` (relative to `folder`; one missing counts as empty)."""
    import hashlib

    h = hashlib.sha256(text.encode("utf-8"))
    for rel in sorted(files):
        path = folder / rel
        data = os.readlink(path).encode() if path.is_symlink() else path.read_bytes() if path.is_file() else b""
        h.update(b"\0" + rel.encode("utf-8") + b"\0" + data)
    return h.hexdigest()[:32]


def _earlier_output(out: Path) -> set[str]:
    """The code files (relative to the folder NAME/ beside NAME.yaml) that the recipe an earlier import wrote at `out`
    references: what a re-import replaces. UsageError (exit 2) where writing `out` would replace anything else: a
    NAME.yaml that import did not write, a file in NAME/ that it does not reference (`-o recipes.yaml` beside a
    `recipes/` folder of other recipes), NAME.yaml or NAME/ that is a symbolic link, or not a file or a folder."""
    import yaml

    folder = out.parent / out.stem
    for path, what in ((out, "the recipe"), (folder, "the folder of its code")):
        if path.is_symlink():
            raise UsageError(f"-o {out}: {path}, {what}, is a symbolic link (to {os.readlink(path)}): import writes "
                             "the recipe and its code folder beside each other and replaces them whole",
                             hint="choose another -o, or remove the link (its target is left as it is)")
    if out.exists() and not out.is_file():
        raise UsageError(f"-o {out}: {out} is not a file", hint="choose another -o")
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"-o {out}: {folder} is a file, where import keeps the recipe's code",
                         hint="choose another -o, or move that file away")
    referenced: set[str] = set()
    if out.exists():
        try:
            data = yaml.safe_load(out.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            data = None
        if not isinstance(data, dict) or not str(data.get("description", "")).startswith(LIFTED_BY):
            raise UsageError(f"-o {out}: {out} exists and is not a recipe `specpatch import` wrote: import would "
                             "overwrite it", hint="choose another -o, or move that file away")
        referenced = set(_file_options(data))
        first, _, rest = out.read_text(encoding="utf-8").partition("\n")
        if not first.startswith(_STAMP) or first[len(_STAMP):] != _digest(rest, folder, referenced):
            raise UsageError(f"-o {out}: {out} or its code in {folder}/ changed since `specpatch import` wrote them "
                             "(or they hold no digest of what it wrote): a re-import would replace those edits",
                             hint="choose another -o, or move the edited recipe and its folder away first")
    strays = sorted(p for p in _files_under(folder) if p not in referenced) if folder.is_dir() else []
    if strays:
        named = ", ".join(f"{folder.name}/{p}" for p in strays[:3]) + (
            f" and {len(strays) - 3} more" if len(strays) > 3 else "")
        whose = f"the earlier {out.name} does not reference" if out.exists() else f"no {out.name} references"
        raise UsageError(f"-o {out}: {folder}/ holds files that {whose} ({named}): import keeps the recipe's code in "
                         f"that folder and replaces it whole, and deletes no file it did not write",
                         hint=f"choose another -o (a NAME.yaml whose folder NAME/ beside it is free or import's own), "
                              f"or move those files out of {folder}/")
    return referenced


def _file_options(data: Any) -> Iterator[str]:
    """The paths of a recipe's `X_file:` options (its code files), at any depth."""
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(key, str) and key.endswith("_file") and key != "file" and isinstance(value, str):
                yield PurePosixPath(value).as_posix()
            else:
                yield from _file_options(value)
    elif isinstance(data, list):
        for item in data:
            yield from _file_options(item)


def _files_under(folder: Path) -> list[str]:
    """Every file under `folder`, relative to it, symbolic links (to folders too) counted as files, not followed."""
    out = []
    for root, dirs, files in os.walk(folder):
        here = Path(root).relative_to(folder)
        out += [(here / name).as_posix() for name in files]
        out += [(here / name).as_posix() for name in dirs if (Path(root) / name).is_symlink()]
    return out


def _swap_in(stage: Path, out: Path) -> None:
    """Put the recipe written in `stage` (`recipe.yaml`, and its code folder named after it) in place of the earlier
    one at `out`, if any, whose code folder goes into `stage` (to be deleted with it). The yaml is replaced last, in
    one rename; on an OSError the folders are put back first and the error raised; a SpecpatchError that names where
    the earlier folder is when it could not be put back."""
    folder, new_folder, earlier = out.parent / out.stem, stage / out.stem, stage / "earlier"
    undo = []
    try:
        if folder.exists():
            os.rename(folder, earlier)
            undo.append((earlier, folder))
        if new_folder.exists():
            os.rename(new_folder, folder)
            undo.append((folder, new_folder))
        os.replace(stage / "recipe.yaml", out)
    except OSError as exc:
        for src, dst in reversed(undo):
            try:
                os.rename(src, dst)
            except OSError:
                err = _write_failure(exc, out)
                err.hint = f"the earlier code folder could not be put back: it is {earlier}; move it to {folder}"
                raise err from None
        raise


def _write_failure(exc: OSError, out: Path) -> SpecpatchError:
    """The system's refusal to write the recipe, saying what it is: nothing was replaced."""
    import errno

    from .errors import OSFailure, os_failure

    if exc.errno == errno.EEXIST and exc.filename and not os.path.isdir(exc.filename):
        # a folder on the way to `-o` is a file (`-o /dev/null/x.yaml`): mkdir says EEXIST, the user's path is wrong
        exc = NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), exc.filename)
    err = os_failure(exc, f"writing the recipe {out}")
    own = err.hint[:-len(OSFailure.hint)].rstrip("; ") if err.hint.endswith(OSFailure.hint) else err.hint
    err.hint = (f"{own}; " if own else "") + (f"nothing was replaced: {out.name} and {out.stem}/ beside it are as "
                                              "they were before the import")
    return err


def _ext(key: str) -> str:
    """The code file's ending: `h4-add-method-clear.code.py`, `h2-replace-statements.match.py`, `h7-....diff`."""
    return ".diff" if key == "diff" else f".{key}.py"


def _what(options: dict[str, Any]) -> str:
    """A short, readable part of a step name: the op and the name it adds, when it has one."""
    op = options["op"].replace("_", "-")
    for key in ("code",):
        text = options.get(key) or ""
        found = re.search(r"\b(?:def|class)\s+([A-Za-z_]\w*)", text) or re.match(r"\s*([A-Za-z_]\w*)\s*[:=]", text)
        if found and options["op"] in ("add_method", "add_definition", "add_dataclass_field", "add_parameter",
                                         "add_keyword_argument"):
            return f"{op}-{found.group(1).replace('_', '-').lower()}"[:60]
    return op


# --------------------------------------------------------------------------------------------------- round trip


@dataclass
class RoundTrip:
    """The written recipe planned on the release it was lifted from, file by file against the patched files."""

    identical: list[str]
    different: list[str]
    errors: list[str]
    #: files identical to the patched ones but for the whitespace the diff puts on blank lines (path -> how many
    #: such lines), which the recipe leaves empty: not byte-identical, and said so
    blank_whitespace: dict[str, int] = field(default_factory=dict)
    #: files some of whose hunks do not apply to the release (path -> how many): neither identical nor different,
    #: as what they are compared with lacks those hunks
    unmatched: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.different and not self.errors and not self.unmatched

    @property
    def files(self) -> int:
        return len(self.identical) + len(self.different) + len(self.blank_whitespace) + len(self.unmatched)


def round_trip(recipe_path: Path, package_dir: Path, expected: dict[str, bytes],
               trimmed: dict[str, tuple[bytes, int]] | None = None,
               unmatched: dict[str, int] | None = None) -> RoundTrip:
    """Plan the recipe (as loaded from disk) on the pristine package and compare each file with `expected`; a file
    that is, instead, `trimmed`'s text (the diff's blank lines left empty: `Lifted.trimmed`) is said so apart, and so
    is a file some of whose hunks do not apply to the release (`Lifted.unmatched`), whatever its bytes."""
    from .recipe import load_recipe

    recipe = load_recipe(recipe_path)
    results = port(recipe, package_dir, hold_together=False)
    identical, different, blank = [], [], {}
    unmatched = dict(unmatched or {})
    for rel, want in expected.items():
        got = results.files.get(rel)
        if rel in unmatched:
            continue
        if got == want:
            identical.append(rel)
        elif trimmed and rel in trimmed and got == trimmed[rel][0]:
            blank[rel] = trimmed[rel][1]
        else:
            different.append(rel)
    errors = [f"{s.file} [{s.name}]: {s.message}" for s in results.steps if s.status == "refused"]
    if not errors and not different:
        errors = _apply_checks(recipe, package_dir)
    return RoundTrip(identical, different, errors, blank, unmatched)


def _apply_checks(recipe, package_dir: Path) -> list[str]:
    """What `specpatch apply` checks past each step's own answer (the patched file's undefined names, a second run
    of each step on the recipe's own result), on the pristine release: the recipe must apply there as written."""
    from .engine import plan
    from .target import find_target

    try:
        planned = plan(recipe, find_target(package_dir, package=recipe.target.package,
                                           assume_version=base_release(recipe)))
    except SpecpatchError as exc:
        return [str(exc)]
    return [str(e) for e in planned.errors]


# --------------------------------------------------------------------------------------------------- porting


@dataclass
class PortedStep:
    index: int
    name: str | None
    op: str
    file: str
    status: str  #: applied | already_upstream | upstream_other_form | refused | skipped
    message: str = ""
    candidates: tuple[str, ...] = ()
    error: SpecpatchError | None = None
    evidence: tuple[str, ...] = ()  #: upstream_other_form: the step's added lines found in the release, with lines


@dataclass
class Ported:
    """A recipe planned step by step on a release: each step's answer, and the files with the steps that applied."""

    steps: list[PortedStep]
    files: dict[str, bytes]  #: package-relative path -> bytes after the applied steps (unchanged files too)

    def count(self, status: str) -> int:
        return sum(s.status == status for s in self.steps)


_STATUS = {"changed": "applied", "already_applied": "already_upstream", "cannot_apply": "refused"}
_NOT_APPLIED = frozenset({"refused", "skipped", "upstream_other_form"})


def port(recipe, package_dir: Path, *, skip: Sequence[str] = (), base_dir: Path | None = None,
         hold_together: bool = True, selection=None) -> Ported:
    """Plan every step of `recipe` on the package at `package_dir` (nothing is written): a step that cannot apply
    is reported and left out, the others go on. This is a report, not an apply: `specpatch apply` still applies a
    recipe whole or not at all.

    Past each step's own answer, the steps are held together (`consistent`): a step that the user skips (`skip`:
    step names or shell patterns of them, e.g. `managers-tp-worker-h2-*`) is reported `skipped`; the steps of a
    group (one hunk) that edit one place stand or fall together; a step that uses a name only refused or skipped steps would add, or
    that adds names only refused or skipped steps use, is refused, naming that name and those steps; an applied
    step whose added lines the release already has (all of them) is upstream in another form; a step whose code
    reads a name the planned file does not define (`undefined_after`: apply's NameError check) is refused. The
    files are then planned again without the steps so left out, until nothing more is. `base_dir`, the release the recipe was
    made on: a line counts as upstream's only when that release does not have it, and a step that uses a name it
    defines that the release mentions nowhere is refused (`removed_upstream`), so is one that reads `self.B` or
    `self.x.B` where `B` left that object's classes (`moved_attributes`). `hold_together=False` gives each
    step's own answer only (the round trip). `selection`: the steps to plan (`port_selection`: a variant's), by
    default the recipe's own."""
    with caching():
        return _port(recipe, package_dir, tuple(skip), base_dir, hold_together,
                     selection if selection is not None else recipe.select(None))


def port_selection(recipe, release: str, variant: str | None = None):
    """What `specpatch port` plans on `release`: the variant named `variant`; else, for a recipe with variants, the
    one whose range admits the release (none admitting it is refused, naming the variant to try with --variant);
    else the recipe's own steps, whatever its range says (porting is planning a recipe past its range)."""
    from packaging.version import InvalidVersion, Version

    if variant is not None:
        return recipe.select_variant(variant)
    if not recipe.variants:
        return recipe.select(None)
    try:
        version = Version(release)
    except InvalidVersion:
        raise UsageError(f"--release {release!r} is not a version") from None
    try:
        selection = recipe.select(version)
    except VersionUnsupported as exc:
        nearest = recipe.nearest_variant(version)
        raise VersionUnsupported(
            exc.message, location=exc.location,
            hint=(f"to see how a variant's steps carry over to {release}, name it: --variant {nearest.name} (the "
                  f"variant of the releases nearest below {release})" if nearest else
                  "name the variant whose steps to plan there: --variant NAME (`specpatch show` lists them)")) \
            from None
    if selection.refuse:
        nearest = recipe.nearest_variant(version)
        raise VersionUnsupported(f"variant `{selection.variant}` refuses {recipe.target.package} {release}: "
                                 f"{selection.refuse}", location=Location(recipe=recipe.id),
                                 hint=f"to see how a variant's steps carry over to {release}, name it: --variant "
                                      f"{nearest.name}" if nearest else None)
    return selection


def _port(recipe, package_dir: Path, skip: tuple[str, ...], base_dir: Path | None, hold_together: bool,
          selection) -> Ported:
    import fnmatch

    values = recipe.resolve_params({})
    ops = list(enumerate((s.render_params(values) for s in selection.steps), start=1))
    held: dict[int, tuple[str, str]] = {}  #: index -> (status, why): steps left out before planning
    for index, op in ops:
        hit = next((p for p in skip if p == op.name or (op.name and fnmatch.fnmatchcase(op.name, p))), None)
        if hit is not None:
            held[index] = ("skipped", f"skipped by the user (`--skip {hit}`)")
    unmatched = [p for p in skip if not any(p == op.name or (op.name and fnmatch.fnmatchcase(op.name, p))
                                            for _, op in ops)]
    if unmatched:
        raise UsageError(f"--skip: no step of `{recipe.id}` is named {', '.join(f'`{p}`' for p in unmatched)} "
                         "(`specpatch show` lists the step names)")
    moved: dict[int, str] = {}
    was = {i: op.file for i, op in ops}
    release = _ReleaseIndex(package_dir)  #: read once, for following renamed files and finding classes
    base = _ReleaseIndex(base_dir) if base_dir is not None else None
    if base is not None:
        before = dict(ops)
        ops, moved = follow_renamed(ops, package_dir, base_dir, release, base)
        for index, why in foreign_self(before, ops, moved, package_dir).items():
            held.setdefault(index, ("refused", why))
    for index, why in defined_elsewhere(ops, release).items():
        held.setdefault(index, ("refused", why))
    if base is not None:
        for index, why in removed_upstream(ops, release, base).items():
            held.setdefault(index, ("refused", why))
        added = {_bare(n) for _, op in ops for n in step_names(op)[0]}
        for index, why in moved_attributes.moved_upstream(before, ops, release, base, added).items():
            held.setdefault(index, ("refused", why))
        for index, why in moved_attributes.overrides_upstream(before, ops, release, base).items():
            held.setdefault(index, ("refused", why))
        for index, why in locals_taken(before, ops, release, base).items():
            held.setdefault(index, ("refused", why))
    renamed = {op.file: was[i] for i, op in ops if i in moved}  #: the file in the release -> in the base
    by_file: dict[str, list[tuple[int, Operation]]] = {}
    for index, op in ops:
        by_file.setdefault(op.file, []).append((index, op))
    pristine: dict[str, str] = {}
    planned: dict[str, tuple[list[PortedStep], bytes | None]] = {}
    todo = set(by_file)
    standing: set[int] = set()
    for _ in range(8):
        for rel in todo:
            planned[rel] = _plan_file(recipe, rel, by_file[rel], package_dir, held, pristine, standing, release)
        steps = sorted((s for rel in planned for s in planned[rel][0]), key=lambda s: s.index)
        if not hold_together:
            break
        base_texts = None
        if base_dir:
            base_texts = _texts_of(base_dir, [renamed.get(rel, rel) for rel in by_file])
            base_texts.update({new: base_texts.pop(old, "") for new, old in renamed.items()})
        more = consistent(ops, steps, pristine, base_texts)
        for index, why in undefined_after(ops, steps, planned, pristine, base_texts, package_dir).items():
            more.setdefault(index, why)
        for index, why in missing_modules_after(ops, steps, planned, pristine, package_dir,
                                                recipe.target.package, base_dir).items():
            more.setdefault(index, why)
        for index, why in expressions_moved(ops, steps, pristine, base_texts).items():
            more.setdefault(index, why)
        for index, why in keywords_without_parameter(ops, steps).items():
            more.setdefault(index, why)
        for index, why in calls_misfit_after(ops, steps, planned, pristine, package_dir,
                                             recipe.target.package).items():
            more.setdefault(index, why)
        for index, why in (*removals_moved(ops, steps, release, base).items(),
                           *replacements_elsewhere(ops, steps, pristine, base_texts).items()):
            more.setdefault(index, why)
            standing.add(index)  # its "already applied" is the very answer the rule refutes
        changed = {rel: text for rel, text, _ in _changed_by_applied(ops, steps, planned, pristine)}
        for index, why in moved_attributes.removed_under_readers(
                ops, {s.index for s in steps if s.status == "applied"}, changed, release, base,
                recipe.target.package).items():
            more.setdefault(index, ("refused", why))
        new = {i: v for i, v in more.items() if i not in held}
        if not new:
            break
        held.update(new)
        todo = {op.file for i, op in ops if i in new}
    for s in steps:
        if s.index in moved:
            s.message = f"{moved[s.index]}{'; ' + s.message if s.message else ''}"
    files = {rel: data for rel, (_, data) in planned.items() if data is not None}
    return Ported(steps, files)


# --------------------------------------------------------------------------------------------------- renamed files

_ANCHOR_FIELDS = ("cls", "function", "within")


def _anchor_fields(op: Operation) -> tuple[str, ...]:
    """The options of a step that name a class or module-level function it anchors on (dotted from it)."""
    return (*_ANCHOR_FIELDS, "after", "before") if op.op == "add_definition" else _ANCHOR_FIELDS


def follow_renamed(ops: list[tuple[int, Operation]], package_dir: Path,
                   base_dir: Path, index: "_ReleaseIndex | None" = None, base_index: "_ReleaseIndex | None" = None,
                   ) -> tuple[list[tuple[int, Operation]], dict[int, str]]:
    """Steps whose anchors left their file moved to where the anchors now live. A file counts as left when the
    release does not have it (the base release does), or when the release's file no longer defines any of the
    classes and module-level functions the file's steps anchor on (a module upstream turned into a re-export shim,
    `from .new_home import *`, and moved its code elsewhere). Each anchor is found in the release by its name or,
    for a class upstream renamed too, as the one class of the release that has three fifths of its methods or more
    (more than any other class). Everything must point to one file, the same for all the file's steps, else nothing
    moves (the steps refuse, naming the missing file or anchor). A class upstream renamed in the same file, beside
    anchors still there, is renamed in the steps. Returns the steps (moved ones rewritten: file, and a renamed class
    in `class`/`function`/`within`) and, per moved step, the note that says so."""
    import dataclasses

    rels = sorted({op.file for _, op in ops if (base_dir / op.file).is_file()})
    if not rels:
        return ops, {}
    index, base_index = index or _ReleaseIndex(package_dir), base_index or _ReleaseIndex(base_dir)
    verdicts: dict[str, tuple[str, dict[str, str], str]] = {}
    for rel in rels:
        there = (package_dir / rel).is_file()
        tree = base_index.tree(rel) if rel in base_index.texts() else None  # parsed once, shared with the rules
        if tree is None:
            continue
        classes = {c.name: {f.name for f in c.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
                   for c in tree.body if isinstance(c, ast.ClassDef)}
        functions = {f.name for f in tree.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
        heads = {getattr(op, f).split(".")[0] for _, op in ops if op.file == rel for f in _anchor_fields(op)
                 if isinstance(getattr(op, f, None), str)}
        heads = {h for h in heads if h in classes or h in functions}
        if not heads:
            continue
        missing = set(heads)
        if there:
            now = index.tree(rel) if rel in index.texts() else None
            if now is None:
                continue
            missing -= {d.name for d in now.body
                        if isinstance(d, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))}
            if not missing:
                continue
        targets, renames, whys = set(), {}, []
        for head in sorted(missing):
            found = index.find_class(head, classes[head]) if head in classes else index.find_function(head)
            if found is None:
                break
            where, name, why = found
            if name != head and base_index.has_class(name):
                break  # a class the base release already had is another class, not this one renamed
            targets.add(where)
            if name != head:
                renames[head] = name
            whys.append(why)
        else:
            if len(targets) != 1:
                continue
            target = targets.pop()
            if there and missing != heads and target != rel:
                continue  # some anchors are still in the file: only a class renamed beside them is followed
            if not there:
                why = f"`{rel}` is not in the release: followed to `{target}`, where "
            elif target != rel:
                gone = ", ".join(f"`{h}`" for h in sorted(missing))
                why = f"`{rel}` no longer defines {gone}: followed to `{target}`, where "
            else:
                why = f"in `{rel}`, "
            verdicts[rel] = (target, renames, why + "; ".join(whys))
    if not verdicts:
        return ops, {}
    out, notes = [], {}
    for i, op in ops:
        if op.file in verdicts:
            target, renames, why = verdicts[op.file]
            changes: dict[str, Any] = {"file": target}
            for f in _anchor_fields(op):
                value = getattr(op, f, None)
                if isinstance(value, str) and value.split(".")[0] in renames:
                    head, _, rest = value.partition(".")
                    changes[f] = renames[head] + ("." + rest if rest else "")
            op = dataclasses.replace(op, **changes)
            notes[i] = why
        out.append((i, op))
    return out, notes


def defined_elsewhere(ops: Sequence[tuple[int, Operation]], release: "_ReleaseIndex") -> dict[int, str]:
    """`add_definition` steps whose classes the release already defines, every one of them, in another module of
    the package: upstream added the feature in its own place (a model's NextN variant in its own file), and a
    second class of the same name would be registered or imported twice. Step index -> why it is refused."""
    wanted: dict[int, list[str]] = {}
    for index, op in ops:
        code = getattr(op, "code", None)
        if op.op != "add_definition" or not isinstance(code, str):
            continue
        tree = _parsed(textwrap.dedent(code).strip("\n"))
        classes = [c.name for c in (tree.body if tree else []) if isinstance(c, ast.ClassDef)]
        if classes:
            wanted[index] = classes
    if not wanted:
        return {}
    out: dict[int, str] = {}
    for index, op in ops:
        if index not in wanted:
            continue
        homes = {}
        for name in wanted[index]:
            where = [rel for rel in release.files_defining_class(name) if rel != op.file]
            if len(where) != 1:
                break
            homes[name] = where[0]
        else:
            places = sorted(set(homes.values()))
            out[index] = ("conflicting definition: the release already defines "
                          + ", ".join(f"`{n}`" for n in wanted[index]) + f" in {', '.join(f'`{p}`' for p in places)}"
                          + " (upstream added it in another module); not applied")
    return out


def removed_upstream(ops: Sequence[tuple[int, Operation]], release: "_ReleaseIndex",
                     base: "_ReleaseIndex") -> dict[int, str]:
    """Steps whose added code uses a name (an attribute `.x` or `self.x`, a function, a keyword) that the base
    release defines (`def x`, `class x`, `x = ...`, `.x = ...`, `x: T`) and that the release does not mention
    anywhere, in no file, while no step of the recipe adds it: upstream removed or renamed it, and the code would
    raise `AttributeError` or `NameError` there (`req.check_finished()` once `Req` lost it). Step index -> why it
    is refused."""
    named = [(index, op, step_names(op)) for index, op in ops]
    added = {_bare(n) for _, _, (adds, _) in named for n in adds}
    words = None
    older: bool | None = None  # a port to a release before the base: not removed, not there yet
    out: dict[int, str] = {}
    for index, op, (_, uses) in named:
        if op.op == "unexpressed_hunk":
            continue  # it refuses anyway
        candidates = {_bare(n) for n in uses} - added
        words = words if words is not None or not candidates else release.words()
        candidates = {n for n in candidates if n not in words} - _bound_anywhere(op) if candidates else set()
        gone = {n: where for n in sorted(candidates) if (where := base.defines(n))}
        if gone:
            shown = ", ".join(f"`{n}` ({where})" for n, where in gone.items())
            if older is None:
                older = (lambda r, b: r is not None and b is not None and r < b)(release.version(), base.version())
            them = "it" if len(gone) == 1 else "them"
            out[index] = (f"it uses {shown}, which the base release defines and the release mentions nowhere: "
                          + (f"this release, older than the base, does not have {them} yet" if older else
                             f"upstream removed or renamed {them}"))
    return out


def locals_taken(before: dict[int, Operation], ops: Sequence[tuple[int, Operation]], release: "_ReleaseIndex",
                 base: "_ReleaseIndex") -> dict[int, str]:
    """`insert_statements` steps whose code binds a name that the function binds in the release (a parameter, a
    local) and did not in the base release: upstream's own variable now, which the step's assignment would
    overwrite (`limit = n + 1` over upstream's new parameter `limit`, the caller's value lost). Index -> why."""
    from .moved_attributes import _function_at

    def _stored(node: ast.AST) -> set[str]:
        """The names a function or snippet binds in its own scope: not a comprehension's, lambda's or nested
        def's (their variables are theirs), but a nested def's name."""
        out: set[str] = set()
        todo = [node]
        while todo:
            n = todo.pop()
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
                out.add(n.id)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n is not node:
                out.add(n.name)
                continue
            if isinstance(n, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
                todo.extend(sub for sub in ast.walk(n) if isinstance(sub, ast.NamedExpr))  # a walrus leaks out
                continue
            todo.extend(ast.iter_child_nodes(n))
        return out

    out: dict[int, str] = {}
    for index, op in ops:
        if op.op != "insert_statements" or not op.function:
            continue
        code = _parsed(textwrap.dedent(op.code))
        old = before.get(index, op)
        now = _function_at(release.tree(op.file) if op.file in release.texts() else None, op.function)
        then = _function_at(base.tree(old.file) if old.file in base.texts() else None, old.function)
        if code is None or now is None or then is None:
            continue

        def bound(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
            a = fn.args
            params = {p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if p is not None}
            return params | {n for stmt in fn.body for n in _stored(stmt)}

        taken = sorted((_stored(code) & bound(now)) - bound(then))
        if taken:
            shown = ", ".join(f"`{n}`" for n in taken)
            out[index] = (f"it assigns {shown}, which `{op.function}` binds in this release (a parameter or a local "
                          f"upstream added) and did not in the base release: the step would overwrite upstream's "
                          f"value")
    return out


def _bound_anywhere(op: Operation) -> set[str]:
    """Every name the step's code binds at any depth (a nested def, a parameter, a loop or comprehension target)."""
    code = getattr(op, "code", None)
    tree = _parsed(textwrap.dedent(code).strip("\n")) if isinstance(code, str) else None
    if tree is None:
        return set()
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.arg):
            out.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
    return out


def foreign_self(before: dict[int, Operation], ops: list[tuple[int, Operation]], moved: dict[int, str],
                 package_dir: Path) -> dict[int, str]:
    """Steps followed into a class upstream renamed whose code reads an attribute of `self` that the new class never
    has: the methods match, but `self` is another object there (a scheduler mixin turned into a component that
    holds the scheduler as `self.scheduler`), and the code would read a missing attribute or test `hasattr` in vain.
    Step index -> why it is refused. A class with a base class (whose attributes it may inherit) is not judged."""
    out: dict[int, str] = {}
    classes: dict[tuple[str, str], set[str] | None] = {}
    for index, op in ops:
        old = before.get(index)
        if index not in moved or old is None:
            continue
        pairs = [(getattr(op, f).split(".")[0], getattr(old, f).split(".")[0]) for f in _anchor_fields(op)
                 if isinstance(getattr(op, f, None), str) and isinstance(getattr(old, f, None), str)]
        renamed = next(((new, was) for new, was in pairs if new != was), None)
        if renamed is None:
            continue
        reads = _self_reads(op)
        if not reads:
            continue
        key = (op.file, renamed[0])
        if key not in classes:
            classes[key] = _self_attributes(package_dir / op.file, renamed[0])
        have = classes[key]
        lacking = sorted(reads - have) if have is not None else []
        if lacking:
            out[index] = (f"`{renamed[0]}` (followed from `{renamed[1]}`) never has "
                          + ", ".join(f"`self.{a}`" for a in lacking)
                          + ", which the step reads: `self` is another object there")
    return out


def _self_reads(op: Operation) -> set[str]:
    """The attributes of `self` that a step's code reads and does not set, less those its `match` already reads."""
    code = getattr(op, "code", None)
    if not isinstance(code, str) or not code.strip():
        return set()
    text = textwrap.dedent(code).strip("\n")
    tree = _parsed(text) or _parsed(f"(\n{text}\n)")
    if tree is None:
        return set()
    reads, sets = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            (sets if isinstance(node.ctx, ast.Store) else reads).add(node.attr)
    match = getattr(op, "match", None)
    known = set(_WORD.findall(match)) if isinstance(match, str) else set()
    return reads - sets - known


def _self_attributes(path: Path, cls: str) -> set[str] | None:
    """What `self` has in the class `cls` of `path`: its methods, class attributes and every `self.x` its code
    mentions; None when the class is not there or has a base class other than `object`."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError):
        return None
    node = next((c for c in tree.body if isinstance(c, ast.ClassDef) and c.name == cls), None)
    if node is None or any(not (isinstance(b, ast.Name) and b.id == "object") for b in node.bases):
        return None
    have = moved_attributes._class_level_names(node)
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == "self":
            have.add(sub.attr)
    return have


class _ReleaseIndex:
    """The classes and module-level functions of a release's Python files, read when first asked."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._texts: dict[str, str] | None = None
        self._trees: dict[str, ast.Module | None] = {}
        self._words: set[str] | None = None
        self._class_heads: dict[str, list[str]] | None = None

    def version(self) -> "Version | None":
        """The release's version, from its dist-info folder's name or its `version.py`/`_version.py`; None when
        neither tells."""
        from packaging.version import InvalidVersion, Version

        found = [p.name[len(self.root.name) + 1:-len(".dist-info")]
                 for p in self.root.parent.glob(f"{self.root.name}-*.dist-info")]
        for name in ("version.py", "_version.py"):
            match = re.search(r"""__version__\s*=\s*["']([^"']+)["']""", self.texts().get(name, ""))
            if match:
                found.append(match.group(1))
        for text in found:
            try:
                return Version(text)
            except InvalidVersion:
                continue
        return None

    def texts(self) -> dict[str, str]:
        if self._texts is None:
            self._texts = {}
            for path in sorted(self.root.rglob("*.py")):
                try:
                    self._texts[path.relative_to(self.root).as_posix()] = path.read_text(encoding="utf-8",
                                                                                        errors="replace")
                except OSError:
                    pass
        return self._texts

    def words(self) -> set[str]:
        """Every identifier the release's Python files mention (code, strings and comments alike)."""
        if self._words is None:
            found = re.compile(r"[A-Za-z_]\w*")
            self._words = set()
            for text in self.texts().values():
                self._words.update(found.findall(text))
        return self._words

    def tree(self, rel: str) -> ast.Module | None:
        if rel not in self._trees:
            try:
                self._trees[rel] = ast.parse(self.texts()[rel])
            except (SyntaxError, ValueError):  # ValueError: a null byte (Python 3.11)
                self._trees[rel] = None
        return self._trees[rel]

    def body(self, rel: str) -> list[ast.stmt]:
        """The module-level statements of `rel`; none for a file Python cannot parse (it defines nothing to follow)."""
        tree = self.tree(rel)
        return tree.body if tree is not None else []

    def files_defining_class(self, name: str) -> list[str]:
        if self._class_heads is None:  # the files with a line `class X` at the margin, by X: read once
            self._class_heads = {}
            for rel, text in self.texts().items():
                for found in dict.fromkeys(re.findall(r"^class\s+(\w+)", text, re.M)):
                    self._class_heads.setdefault(found, []).append(rel)
        return [rel for rel in self._class_heads.get(name, ())
                if any(isinstance(c, ast.ClassDef) and c.name == name for c in self.body(rel))]

    def has_class(self, name: str) -> bool:
        return bool(self.files_defining_class(name))

    def find_class(self, name: str, methods: set[str]) -> tuple[str, str, str] | None:
        """(file, class name, why) of the class `name` in the release, by its name (one file), else by its methods."""
        by_name = self.files_defining_class(name)
        if len(by_name) == 1:
            return by_name[0], name, f"`{name}` is defined"
        if by_name or len(methods) < 3:
            return None
        scores = []
        for rel, text in self.texts().items():
            if sum(f"def {m}(" in text for m in methods) * 5 < 3 * len(methods):
                continue
            for c in self.body(rel):
                if isinstance(c, ast.ClassDef):
                    have = {f.name for f in c.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
                    scores.append((len(methods & have), rel, c.name))
        scores.sort(reverse=True)
        if not scores or scores[0][0] * 5 < 3 * len(methods) or (len(scores) > 1 and scores[1][0] == scores[0][0]):
            return None
        shared, rel, cls = scores[0]
        return rel, cls, f"`{name}` is `{cls}` ({shared} of its {len(methods)} methods)"

    def defines(self, name: str) -> str | None:
        """The first file (by path) where the release defines `name`: `def name(`, `class name`, an assignment
        to `name` or `.name`, or an annotated `name: T` (a field, a parameter on its own line); else None."""
        if name not in self.words():
            return None
        n = re.escape(name)
        found = re.compile(rf"\bdef\s+{n}\s*\(|\bclass\s+{n}\b|(?:\.|^[ \t]*){n}\s*(?::[^=\n]*)?=(?!=)", re.M)
        return next((rel for rel, text in self.texts().items() if name in text and found.search(text)), None)

    def find_function(self, name: str) -> tuple[str, str, str] | None:
        hits = [rel for rel, text in self.texts().items() if f"def {name}(" in text
                and any(isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name == name
                        for f in self.body(rel))]
        return (hits[0], name, f"`{name}` is defined") if len(hits) == 1 else None


def _plan_file(recipe, rel: str, ops: list[tuple[int, Operation]], package_dir: Path,
               held: dict[int, tuple[str, str]], pristine: dict[str, str],
               standing: set[int] | frozenset[int] = frozenset(), release: "_ReleaseIndex | None" = None,
               ) -> tuple[list[PortedStep], bytes | None]:
    """One file's steps planned in order on the pristine file, leaving out the `held` ones. A held refusal of a step
    that answers "already applied" reads as upstream's code, except for the `standing` ones (a rule said why that
    answer is wrong there)."""
    from .engine import _with_candidate_lines, moved_elsewhere
    from .errors import AnchorNotFound, Location
    from .operations.base import CannotApply

    path = package_dir / rel
    steps: list[PortedStep] = []
    if not path.is_file():
        return [PortedStep(i, op.name, op.op, rel, "refused", f"`{rel}` is not in the release") for i, op in ops], None
    raw = path.read_bytes()
    try:
        module = cst.parse_module(raw)
    except cst.ParserSyntaxError as exc:
        return [PortedStep(i, op.name, op.op, rel, "refused", f"does not parse: {exc.message}") for i, op in ops], None
    pristine.setdefault(rel, module.code)
    original = module
    for index, op in ops:
        if index in held:
            status, why = held[index]
            if status == "refused" and index not in standing and _already_there(op, module):
                # a rule read the step's code as unsafe here, but the release already has that code: upstream's
                status, why = "already_upstream", ""
            steps.append(PortedStep(index, op.name, op.op, rel, status, why))
            continue
        try:
            outcome = op.among([o for _, o in ops]).apply(module)
        except SpecpatchError as exc:
            outcome = CannotApply(exc)
        status = _STATUS[outcome.status]
        if isinstance(outcome, Changed):
            module = outcome.module
            steps.append(PortedStep(index, op.name, op.op, rel, status))
        elif isinstance(outcome, CannotApply):
            # lines of the release's file where the candidate is the release's own code, not counting the lines
            # earlier steps inserted above it
            err = _with_candidate_lines(outcome.error, module, original)
            adder = _anchor_added_by(op, [(j, o) for j, o in ops if j < index], steps) if isinstance(
                err, AnchorNotFound) else None
            if adder is not None:
                # its anchor is code an earlier step of the recipe adds, and that step is not applied: say so, not
                # "anchor not found" with the release's near names (a chain of methods, each after the one before)
                name, by = adder
                err.message, err.candidates = (f"its anchor `{name}` is what `{by.name or f'step {by.index}'}` "
                                               f"adds, and that step is not applied ({by.status}); "
                                               f"not applied (anchor: {op.anchor()})"), ()
            elif isinstance(err, AnchorNotFound):
                err.candidates = (*err.candidates, *moved_elsewhere(
                    op, package_dir, rel, pristine[rel], release.texts() if release is not None else None))
            cands = tuple(c.render() for c in err.candidates)
            err.at(Location(recipe=recipe.id, step=index, op=op.op, file=rel, anchor=op.anchor()))
            message = err.message if adder is not None else f"{err.title}: {err.message}"
            # the release's own lines, not those earlier steps of the recipe just added (a decorator added twice)
            evidence = upstream_evidence(op, pristine[rel])
            if evidence:
                status = "upstream_other_form"
                message = (f"the release seems to have this change in another form: {len(evidence)} added "
                           f"line(s) of the step are there ({'; '.join(evidence[:3])}); not applied. {message}")
            steps.append(PortedStep(index, op.name, op.op, rel, status, message, cands, err, evidence))
        else:
            steps.append(PortedStep(index, op.name, op.op, rel, status))
    for step in steps:
        # what `apply` asks of each step before it writes (`engine._second_run`): planned again on the file as the
        # recipe leaves it, it must find its own change; one that would not is left out, as apply would refuse it
        if step.status != "applied":
            continue
        op = dict(ops)[step.index]
        try:
            again = op.among([o for _, o in ops]).apply(module)
        except SpecpatchError:
            again = None
        if not isinstance(again, AlreadyApplied):
            why = "it would change the file again" if isinstance(again, Changed) else (
                f"{again.error.title}: {again.error.message}" if isinstance(again, CannotApply) else "it fails")
            held[step.index] = ("refused", f"applied to `{rel}` as the recipe leaves it, the step does not find "
                                           f"its own change ({why}): a second apply or `specpatch check` would fail")
            return _plan_file(recipe, rel, ops, package_dir, held, pristine, standing, release)
    if any(s.status == "applied" for s in steps) and _compile_error(module.code, rel) is not None:
        # Python refuses the planned file (`global x` after a read of `x`, `return` outside a function...): what
        # `apply` finds before writing. The first applied step after which the file no longer compiles is left out
        culprit = _first_breaking(recipe, rel, ops, raw, held)
        if culprit is not None:
            held[culprit[0]] = ("refused", f"once applied, `{rel}` does not compile: {culprit[1]}")
            return _plan_file(recipe, rel, ops, package_dir, held, pristine, standing, release)
    try:
        return steps, module.bytes
    except UnicodeEncodeError as exc:  # code the file's declared encoding cannot hold: nothing of it is planned
        why = (f"the code holds {exc.object[exc.start:exc.end]!r}, which `{rel}`'s declared encoding "
               f"({module.encoding}) cannot represent")
        return [PortedStep(s.index, s.name, s.op, rel, "refused", why) if s.status == "applied" else s
                for s in steps], None


#: the options that name what a step anchors on: a class, a function or method, a name it goes after or before
_NAMED_ANCHORS = ("cls", "function", "within", "after", "before")


def _anchor_added_by(op: Operation, earlier: Sequence[tuple[int, Operation]],
                     planned: Sequence[PortedStep]) -> tuple[str, PortedStep] | None:
    """For a step whose anchor is not found: (the name, the planned answer of the earlier step of its file that adds
    it), when that step is not applied (refused, skipped, upstream in another form); else None. Its anchor was the
    recipe's own code (`add_method` after the method the step before it adds), not the release's."""
    wanted = [part for field_ in _NAMED_ANCHORS if isinstance(value := getattr(op, field_, None), str)
              for part in value.split(".")]
    answers = {s.index: s for s in planned}
    for name in wanted:
        for j, other in reversed(earlier):
            said = answers.get(j)
            if said is None or said.status not in _NOT_APPLIED:
                continue
            if name in {_bare(n) for n in step_names(other)[0]}:
                return name, said
    return None


def _compile_error(code: str, rel: str) -> str | None:
    try:
        compile(code, rel, "exec", dont_inherit=True)
    except SyntaxError as exc:
        return f"{exc.msg} (line {exc.lineno})"
    except (ValueError, RecursionError, MemoryError) as exc:
        return str(exc)
    return None


def _first_breaking(recipe, rel: str, ops: list[tuple[int, Operation]], raw: bytes,
                    held: dict[int, tuple[str, str]]) -> tuple[int, str] | None:
    """(index, why) of the first step that, applied on top of the ones before it, leaves a file Python refuses."""
    module = cst.parse_module(raw)
    if _compile_error(module.code, rel) is not None:
        return None  # the release's own file does not compile: not a step's doing
    for index, op in ops:
        if index in held:
            continue
        try:
            outcome = op.among([o for _, o in ops]).apply(module)
        except SpecpatchError:
            continue
        if isinstance(outcome, Changed):
            why = _compile_error(outcome.module.code, rel)
            if why is not None:
                return index, why
            module = outcome.module
    return None


def _already_there(op: Operation, module: cst.Module) -> bool:
    """Does the step answer *already applied* on `module`? (What it would add is there, upstream's own code.)"""
    try:
        return op.apply(module).status == "already_applied"
    except SpecpatchError:
        return False


def read_skip_file(path: Path) -> list[str]:
    """The step names or patterns of a skip file: one a line; blank lines and `#` comments aside."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read the skip file {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"the skip file {path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return [line.split("#", 1)[0].strip() for line in text.splitlines() if line.split("#", 1)[0].strip()]


def base_release(recipe, selection=None) -> str | None:
    """The release a recipe was made on, when its range says it: X of `>=X` (what `specpatch import` writes); for
    a variant, X of its range's `>=X`."""
    if selection is not None and selection.variant is not None:
        variant = next((v for v in recipe.variants if v.name == selection.variant), None)
        return first_release(variant.versions) if variant is not None else None
    m = re.fullmatch(r"\s*>=\s*([\w.+!-]+)\s*", recipe.target.versions or "")
    return m.group(1) if m else None


# --------------------------------------------------------------------------------------------------- consistency

_WORD = re.compile(r"[A-Za-z_]\w*")


def step_names(op: Operation) -> tuple[set[str], set[str]]:
    """The names a step adds (defs, classes, assigned names and attributes, fields, imported names) and the names
    its added code uses (names, `self.x`, `.x` for an attribute of another object, keyword arguments), both less
    those of the code it matches; (set(), set()) when its code does not parse. A method that calls the method of
    the same name on another object (a layer of a call chain) uses that name."""
    code, match = getattr(op, "code", None), getattr(op, "match", None)
    if op.op == "add_branch":  # the guard it writes: `if <condition>: return <call>`
        code = f"if {op.condition}:\n    return {op.call}\n"
    if op.op == "unexpressed_hunk":  # what its `+` lines would add (a field, a helper) is not there either
        code = "\n".join(ln[1:] for ln in op.diff.splitlines() if ln[:1] == "+")
        match = "\n".join(ln[1:] for ln in op.diff.splitlines() if ln[:1] == "-")
    if not isinstance(code, str) or not code.strip():
        return set(), set()
    text = textwrap.dedent(code).strip("\n")
    tree = _code_tree(op, text) if op.op != "unexpressed_hunk" else _parsed_lines(text)
    if tree is None:
        return set(), set()
    defines, attributes, uses = _tree_names(tree)
    defines.discard("_w_")
    uses.discard("_w_")
    if op.op == "add_parameter":
        defines = set()  # a parameter is local to its function
    if isinstance(match, str):
        known = set(_WORD.findall(match))
        defines -= known
        attributes -= known
        uses -= known
    if op.op == "add_element" and isinstance(tree.body[0].value, ast.Tuple) \
            and isinstance(tree.body[0].value.elts[0], ast.Name):
        defines.add(tree.body[0].value.elts[0].id)  # a name joining a tuple may be assigned (`a, b = f()`) or read
    elif op.op != "add_import":
        uses -= defines | attributes
    scope = _local_scope(op)
    if scope:  # a name a function's statements assign is that function's own
        defines = {f"{scope}::{n}" for n in defines}
    return defines | attributes, uses


#: how a step's code is made a module to parse: a keyword, a parameter, an element or an expression alone is not one
_WRAPPED = {"add_keyword_argument": "_w_({})", "add_parameter": "def _w_({}): pass", "add_element": "({},)",
            "replace_expression": "(\n{}\n)"}


def _code_tree(op: Operation, text: str) -> ast.Module | None:
    """The step's code (dedented) parsed as a module, wrapped as its operation needs (`_w_` names the wrapper; a
    dict entry of `add_element` as a dict)."""
    return _parsed(_WRAPPED.get(op.op, "{}").format(text)) or (
        _parsed("{" + text + "}") if op.op == "add_element" else None)


def _parsed(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except SyntaxError:
        return None


def _parsed_lines(text: str) -> ast.Module | None:
    """A hunk's added lines as code: all of them when they parse together, else each line that parses alone (a
    hunk cuts statements anywhere)."""
    whole = _parsed(text)
    if whole is not None:
        return whole
    trees = [t for line in text.splitlines() if line.strip() and (t := _parsed(line.strip())) is not None]
    return ast.Module(body=[stmt for t in trees for stmt in t.body], type_ignores=[]) if trees else None


def _local_scope(op: Operation) -> str | None:
    """`file::function` for a step whose statements go inside a function (their names are locals), else None."""
    where = getattr(op, "function", None) or getattr(op, "within", None)
    if op.op not in ("insert_statements", "replace_statements", "replace_expression", "add_element",
                     "add_keyword_argument") or not where:
        return None
    last = where.split(".")[-1]
    return None if last[:1].isupper() else f"{op.file}::{where}"


def _place(op: Operation) -> str:
    """The function, class or module a step edits: the steps of one group that edit one place are one change."""
    return getattr(op, "function", None) or getattr(op, "within", None) or getattr(op, "cls", None) or "the module"


def _bare(name: str) -> str:
    return name.rsplit("::", 1)[-1].rsplit(".", 1)[-1]


def _tree_names(tree: ast.AST) -> tuple[set[str], set[str], set[str]]:
    """(names the code binds at its own level, attributes it assigns, names and attributes it reads)."""
    defines: set[str] = set()
    attributes: set[str] = set()
    uses: set[str] = set()
    top = list(getattr(tree, "body", []))
    for stmt in top:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defines.add(stmt.name)
            if isinstance(stmt, ast.ClassDef):
                # a class the code adds brings its members: a field `val_start: int`, a class attribute, a method,
                # read as `p.val_start` by other steps (the names of a class a step adds are the recipe's own)
                attributes.update(_class_members(stmt))
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for alias in stmt.names:
                defines.add((alias.asname or alias.name).split(".")[0])
                if isinstance(stmt, ast.ImportFrom):
                    uses.add(alias.name)
    targets = _top_targets(top)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if not isinstance(node.ctx, ast.Store):
                uses.add(node.id)
            elif node in targets:
                defines.add(node.id)
        elif isinstance(node, ast.Attribute):
            if isinstance(node.ctx, ast.Store):
                attributes.add(node.attr)
            else:  # `self.x` may be the step's own method; `a.b.x` is another object's
                own = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
                uses.add(f"self.{node.attr}" if own else f".{node.attr}")
        elif isinstance(node, ast.keyword) and node.arg:
            uses.add(node.arg)
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
                and isinstance(node.slice.value, str) and node.slice.value.isidentifier():
            # a name read through a string key: vLLM's flags read their config field as
            # `**scheduler_kwargs["prefill_boost_tokens"]` (KeyError when the field is not there)
            uses.add(node.slice.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node in top:
            defines.add(node.target.id)
    return defines, attributes, uses - {"self", "cls"}


def _class_members(cls: ast.ClassDef) -> set[str]:
    """The names a class body defines: its methods and nested classes, its fields (`x: T`) and class attributes
    (`x = ...`)."""
    out: set[str] = set()
    for stmt in cls.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(stmt.name)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            out.add(stmt.target.id)
        elif isinstance(stmt, ast.Assign):
            out.update(t.id for target in stmt.targets for t in ast.walk(target) if isinstance(t, ast.Name))
    return out


def _top_targets(top: list[ast.stmt]) -> set[ast.AST]:
    """The Name nodes that statements of the step's own block assign (not those inside its defs)."""
    out: set[ast.AST] = set()
    for stmt in top:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                out.add(node)
    return out


def _texts_of(root: Path, rels) -> dict[str, str]:
    out = {}
    for rel in rels:
        try:
            out[rel] = (root / rel).read_text(encoding="utf-8", errors="replace")
        except OSError:
            pass
    return out


def consistent(ops: Sequence[tuple[int, Operation]], steps: Sequence[PortedStep], pristine: dict[str, str],
               base: dict[str, str] | None = None) -> dict[int, tuple[str, str]]:
    """The applied steps that must be left out so that what is applied holds together, with why (index -> (status,
    message)); `pristine` holds the release's text of the recipe's files, `base` (when known) the text of the
    release the recipe was made on. Rules, applied until none fires:

    - a step of a group in which a step that edits the same function, class or module level is refused,
      skipped or upstream in another form is refused (the edits of one hunk to one place stand or fall together;
      imports aside, which stand or fall by their names);
    - a step that uses a name the release does not have, which other steps add and one of them is refused or
      skipped (a layer of a call chain, a field, a helper that did not land), is refused: applied, it would call
      what is not there (when steps of its own file add the name, only those count: a field of the same name in
      another file's class is another field); an unexpressed hunk adds the names its `+` lines define;
    - a step whose added names (not in the release) are used by other steps, all of them refused or skipped, is
      refused: applied, it would be dead code of a change that did not land;
    - an applied step whose added lines are all in the release already (`upstream_evidence`) is upstream in
      another form: applied, it would do twice what upstream does (with `base`: lines the base release did not
      have, so that code the change copies from elsewhere in the file is not taken for upstream's)."""
    status = {s.index: s.status for s in steps}
    op_of = dict(ops)
    out: dict[int, tuple[str, str]] = {}
    words: set[str] = set()
    for text in pristine.values():
        words.update(_WORD.findall(text))
    names = {i: step_names(op) for i, op in ops}
    file_words: dict[str, set[str]] = {}  # the words of a file of the release, read once
    providers: dict[str, list[int]] = {}
    users: dict[str, list[int]] = {}
    same_file: dict[tuple[str, str], list[int]] = {}  # (file, name) -> the steps of that file that use the name
    local: dict[str, set[str] | None] = {}

    def new(n: str) -> bool:
        """Not in the release: a local of a function (`file::function::name`) when that function does not mention
        it (the word in some other place of the file is another name), any other name when no file mentions it."""
        scope, _, name = n.rpartition("::")
        if scope and "::" in scope:
            if scope not in local:
                local[scope] = _function_words(pristine, scope)
            if local[scope] is not None:
                return name not in local[scope]
        return _bare(n) not in words

    def keys_of(n: str, scope: str | None) -> list[str]:
        """The keys under which a name a step uses is followed: as a local of its function, and as itself."""
        keys = [f"{scope}::{n}"] if scope and "." not in n and new(f"{scope}::{n}") else []
        return keys + [k for k in dict.fromkeys((n, _bare(n))) if new(k)]

    for i, (defines, uses) in names.items():
        scope = _local_scope(op_of[i])
        for n in filter(new, defines):
            providers.setdefault(n, []).append(i)
        for n in uses:
            for key in keys_of(n, scope):
                users.setdefault(key, []).append(i)
            same_file.setdefault((op_of[i].file, _bare(n)), []).append(i)

    def related(i: int, j: int) -> bool:
        """Does step j's definition reach step i? An import binds its names for its own file only; an import of
        another file reads the names of the module it imports from (a helper defined there)."""
        return j != i and (op_of[j].op != "add_import" or op_of[j].file == op_of[i].file)
    groups: dict[tuple[str, str, str], list[int]] = {}
    for i, op in ops:
        if op.group:
            groups.setdefault((op.file, op.group, _place(op)), []).append(i)

    def down(i: int) -> bool:
        """Not applied for a reason that leaves what it adds out of the release (refused or skipped)."""
        return status.get(i) in ("refused", "skipped") or out.get(i, ("",))[0] == "refused"

    def label(i: int) -> str:
        return f"`{op_of[i].name or f'step {i}'}`"

    for i, s in status.items():  # upstream in another form, past the step's own answer
        if s == "applied" and op_of[i].file in pristine:
            evidence = upstream_evidence(op_of[i], pristine[op_of[i].file], strict=True,
                                         base=None if base is None else base.get(op_of[i].file, ""))
            if evidence:
                out[i] = ("upstream_other_form", "the release has this change in another form: every line the step "
                          f"adds is there ({'; '.join(evidence[:3])}); not applied")
            elif base is not None:
                guards = upstream_guards(op_of[i], pristine[op_of[i].file], base.get(op_of[i].file, ""))
                if guards:
                    out[i] = ("upstream_other_form", "the release has this change in another form: "
                              f"`{_place(op_of[i])}` now tests {'; '.join(guards[:3])}, which the base release's "
                              "did not, where the step adds an `if` of that test: upstream handles the case its own "
                              "way, and both would run; not applied")
    flips = _default_flips(ops, base)
    changed = True
    while changed:
        changed = False
        for i, op in ops:
            if down(i) or status.get(i) != "applied":
                continue
            why = None
            for j, (owner, param, tied, default) in flips.items():
                if j == i or op_of[j].file != op.file or not (
                        down(j) or "upstream_other_form" in (status.get(j), out.get(j, ("",))[0])):
                    continue
                read = _reads_tied(op, owner, tied)
                if read:
                    why = (f"it reads `{read}`, whose default {label(j)} changes (`{param}={default}`), and that step "
                           "is not applied: the code assumes the new default")
                    break
            if op.group and op.op != "add_import":
                # a step of the group that is not applied because it is upstream in another form counts too: its
                # anchor is gone and the evidence is lines of the file, so its siblings would apply half the hunk.
                # Imports stand or fall by their names (the rules below, and the planned file's undefined names),
                # not with their hunk: a dead one does not take down one that applied code reads
                fallen = [j for j in groups[(op.file, op.group, _place(op))] if j != i and op_of[j].op != "add_import"
                          and (down(j) or "upstream_other_form" in (status.get(j), out.get(j, ("",))[0]))]
                if fallen:
                    why = (f"another step of its group (`{op.group}`) in `{_place(op)}` is not applied: "
                           f"{label(fallen[0])}")
            defines, uses = names[i]
            scope = _local_scope(op)
            for n in sorted(uses):
                keys = keys_of(n, scope)
                adders = [j for k in keys for j in providers.get(k, []) if related(i, j)]
                # two steps that add one name (a field of two classes) are told apart by their file, when they can be
                gone = [j for j in [j for j in adders if op_of[j].file == op.file] or adders if down(j)]
                if why is None and gone:
                    why = (f"it uses `{_bare(n)}`, which the release does not have and {label(gone[0])} (not "
                           "applied) adds")
            # an import, or a module-level definition, binds its names in its own file: new there when that file
            # does not mention them (another file of the release that does has a name of its own: its `_is_hip`)
            module_level = op.op in ("add_import", "add_definition")
            if module_level and op.file not in file_words:
                file_words[op.file] = set(_WORD.findall(pristine.get(op.file, "")))
            fresh = (lambda n, held=file_words.get(op.file, set()): _bare(n) not in held) if module_level else new
            # (an import's names are used by the steps of its own file only; a definition's by those and by the
            # steps of other files that use a name no file of the release has)
            mine = {n: [j for j in same_file.get((op.file, _bare(n)), []) if j != i] for n in defines}
            if op.op == "add_import":
                using = mine
            else:
                using = {n: [*dict.fromkeys([*(mine[n] if module_level else []),
                                             *(j for j in users.get(n, []) if related(j, i))])] for n in defines}
            added = [n for n in sorted(filter(fresh, defines)) if using[n]]
            if why is None and added and all(down(j) for n in added for j in using[n]):
                j = using[added[0]][0]
                why = (f"it adds `{'`, `'.join(map(_bare, added[:3]))}`, which only steps that are not applied use "
                       f"({label(j)})")
            if why:
                out[i] = ("refused", f"{why}; not applied (anchor: {op.anchor()})")
                changed = True
    return out


def _default_flips(ops: Sequence[tuple[int, Operation]], base: dict[str, str] | None
                   ) -> dict[int, tuple[str, str, set[str], str]]:
    """The steps that change the default of a parameter in a function's header (a header-only `replace_statements`),
    each with the class (or function) it is in, the parameter, what carries it in the base release (`self.x = p`
    in that function), and the new default: code of other steps that reads those assumes the new default."""
    out: dict[int, tuple[str, str, set[str], str]] = {}
    for i, op in ops:
        if op.op != "replace_statements" or not getattr(op, "match", None) or not getattr(op, "code", None):
            continue
        try:
            old, new = (ast.parse(textwrap.dedent(t)).body for t in (op.match, op.code))
        except (SyntaxError, ValueError, RecursionError):
            continue
        if len(old) != 1 or len(new) != 1 or not all(isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                                                     for f in (old[0], new[0])):
            continue

        def defaults(fn: ast.FunctionDef) -> dict[str, str]:
            a = fn.args
            positional = [*a.posonlyargs, *a.args]
            out_ = {p.arg: ast.unparse(d) for p, d in zip(positional[len(positional) - len(a.defaults):], a.defaults)}
            out_.update({p.arg: ast.unparse(d) for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
            return out_

        was, now = defaults(old[0]), defaults(new[0])
        flipped = [p for p in was.keys() & now.keys() if was[p] != now[p]]
        if not flipped:
            continue
        owner = (getattr(op, "within", None) or new[0].name).split(".")[0]
        tied: set[str] = set()
        for fn in _functions_named(base.get(op.file, "") if base else "", new[0].name):
            for node in ast.walk(fn):
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id == flipped[0]:
                    tied.update(f"self.{t.attr}" for t in node.targets if isinstance(t, ast.Attribute))
        out[i] = (owner, flipped[0], tied, now[flipped[0]])
    return out


def _functions_named(text: str, name: str) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return []
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name]


def _reads_tied(op: Operation, owner: str, tied: set[str]) -> str | None:
    """What of `tied` (`self.x`) the step's code or match reads in the class or function `owner`, else None."""
    place = getattr(op, "within", None) or getattr(op, "function", None) or getattr(op, "cls", None) or ""
    if place.split(".")[0] != owner:
        return None
    for text in (getattr(op, "code", None) or "", getattr(op, "match", None) or ""):
        try:
            tree = ast.parse(textwrap.dedent(text))
        except (SyntaxError, ValueError, RecursionError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self" \
                    and f"self.{node.attr}" in tied:
                return f"self.{node.attr}"
    return None


def undefined_after(ops: Sequence[tuple[int, Operation]], steps: Sequence[PortedStep],
                    planned: dict[str, tuple[list[PortedStep], bytes | None]], pristine: dict[str, str],
                    base: dict[str, str] | None = None, package_dir: Path | None = None) -> dict[int, tuple[str, str]]:
    """The applied steps whose code reads a name that the planned file does not define and the release's file did
    not read undefined (`engine.undefined_names_added`, the check `apply` makes): applied, the code would raise
    NameError, most often because upstream removed an import, renamed a local or a helper the code relied on. Each
    name is charged to the applied steps of its file whose code reads it (else whose code holds the word); with
    `base`, the message names the base release's statement that bound it (`import time`). Index -> (status, why)."""
    from .engine import submodule_of, undefined_names_added

    op_of = dict(ops)
    out: dict[int, tuple[str, str]] = {}
    for rel, text, steps_here in _changed_by_applied(ops, steps, planned, pristine):
        mine = [i for i, _ in steps_here]
        try:
            found = undefined_names_added(pristine[rel], text, filename=rel, submodule=submodule_of(
                (package_dir / rel).parent) if package_dir is not None else None)
        except (SyntaxError, ValueError, RecursionError):
            continue  # the file's own checks say what is wrong with it
        for name, _, local in found:
            word = re.compile(rf"(?<![\w.]){re.escape(name)}\b")
            # the steps whose code reads it; else those whose `match` took away what bound it (the release's own
            # code still reads it: a hunk that removed `x = ...` because another hunk, not applied, rewrote x's
            # readers); else every applied step of the file, as apply would refuse the whole file
            readers = [i for i in mine if name in _free_names(op_of[i])] or \
                [i for i in mine if word.search(getattr(op_of[i], "code", None) or "")]
            removers = [] if readers else [i for i in mine if name in _match_binds(op_of[i])] or list(mine)
            had = _module_bindings(base[rel]).get(name) if base and base.get(rel) and \
                _module_bindings(base[rel]) is not None else None
            was = f"`{rel}` had it in the base release (`{had}`), this release does not" if had else \
                f"`{rel}` does not define it in this release"
            if local:  # the name is bound, in the function: a read above its assignment
                for i in readers or list(mine):
                    out.setdefault(i, ("refused", f"with it applied, a function reads `{name}` before it assigns it "
                                                  f"(an assignment anywhere in a function makes the name local): "
                                                  f"UnboundLocalError; not applied (anchor: {op_of[i].anchor()})"))
                continue
            for i in readers:
                out.setdefault(i, ("refused", f"it uses `{name}`: {was}, and no applied step adds it (applied, the "
                                              f"code would raise NameError); not applied (anchor: {op_of[i].anchor()})"))
            for i in removers:
                what = "it removes the statement that binds" if name in _match_binds(op_of[i]) else \
                    "with it applied, the file no longer binds"
                out.setdefault(i, ("refused", f"{what} `{name}`, which the release's own code still reads (a step "
                                              f"that rewrote those reads is not applied); applied, the code would "
                                              f"raise NameError; not applied (anchor: {op_of[i].anchor()})"))
    return out


def expressions_moved(ops: Sequence[tuple[int, Operation]], steps: Sequence[PortedStep], pristine: dict[str, str],
                      base: dict[str, str] | None) -> dict[int, tuple[str, str]]:
    """The applied `replace_expression` steps whose expression sits, in the release, in a statement of another kind
    than in the base release (`ReplaceExpression.statement_role`): upstream rewrote the statement it was in, and
    the same expression elsewhere (now an `if` test where it was an assignment's value) would take an edit meant for
    the other place (`x` -> `x is not None` turned into `... x is not None ... is None`). Index -> (status, why)."""
    if not base:
        return {}
    applied = {s.index for s in steps if s.status == "applied"}
    out: dict[int, tuple[str, str]] = {}
    for index, op in ops:
        if index not in applied or op.op != "replace_expression" or op.file not in pristine or not base.get(op.file):
            continue
        try:
            then = op.statement_role(cst.parse_module(base[op.file]))
            now = op.statement_role(cst.parse_module(pristine[op.file]))
        except (cst.ParserSyntaxError, RecursionError, SpecpatchError):
            continue
        if then and now and then != now:
            match = " ".join(op.match.split())
            out[index] = ("refused", f"`{match}` is in {now} in this release, in {then} in the base "
                                     f"release: upstream rewrote the statement around it, and the edit would land "
                                     f"in another one; not applied (anchor: {op.anchor()})")
    return out


def replacements_elsewhere(ops: Sequence[tuple[int, Operation]], steps: Sequence[PortedStep],
                           pristine: dict[str, str], base: dict[str, str] | None) -> dict[int, tuple[str, str]]:
    """The `replace_statements` steps that answer "already upstream" because their `code` stands somewhere under
    `within`, while the block that held `match` in the base release (an `if` arm, a loop, a `with`: by its header)
    is still there in the release and does not hold it: the code found is another block's own (`x = 5` of a new
    `elif` arm, where the patch set `x = 5` in the `if` arm), and the change is not there. A block upstream
    rewrote (its header gone) says nothing. Index -> (status, why)."""
    from .operations._code import line_text

    if not base:
        return {}
    upstream = {s.index for s in steps if s.status == "already_upstream"}
    out: dict[int, tuple[str, str]] = {}
    for index, op in ops:
        if (index not in upstream or op.op != "replace_statements" or not op.code.strip() or op.inside is not None
                or op.file not in pristine or not base.get(op.file)):
            continue
        try:
            then, now = cst.parse_module(base[op.file]), cst.parse_module(pristine[op.file])
        except (cst.ParserSyntaxError, RecursionError):
            continue
        was = op.homes(then, "match")
        if len(was) != 1 or not was[0]:
            continue  # not one run in the base, or in the function's own body (always there)
        homes = op.homes(now, "code")
        if homes and was[0] not in homes and was[0] in op.headers(now):
            shown = ", ".join(f"`{h}`" if h else "the body of `" + (op.within or "the module") + "`"
                              for h in dict.fromkeys(homes))
            out[index] = ("refused", f"`{line_text(op.code)}` stands in {shown} in this release, not in `{was[0]}`, "
                                     f"the block that held `{line_text(op.match)}` in the base release (still "
                                     f"there): another block's own code, not this change; not taken as already "
                                     f"upstream (anchor: {op.anchor()})")
    return out


def keywords_without_parameter(ops: Sequence[tuple[int, Operation]],
                               steps: Sequence[PortedStep]) -> dict[int, tuple[str, str]]:
    """The applied `add_keyword_argument` steps that pass a keyword to a function whose parameter of that name an
    `add_parameter` step of the recipe adds, while that step is refused or skipped: the release's function has no
    such parameter, or one of that name with another meaning (why the parameter step refused), and the keyword
    would reach it (`scale=3` into upstream's `scale="linear"`). Index -> (status, why)."""
    from .operations.add_keyword_argument import _keyword
    from .operations.add_parameter import _parameter

    status = {s.index: s.status for s in steps}
    adds: dict[tuple[str, str], tuple[int, Operation]] = {}
    for index, op in ops:
        if op.op == "add_parameter":
            with contextlib.suppress(SpecpatchError):
                adds[(op.function.split(".")[-1], _parameter(op.code).name.value)] = (index, op)
    out: dict[int, tuple[str, str]] = {}
    for index, op in ops:
        if op.op != "add_keyword_argument" or status.get(index) != "applied":
            continue
        try:
            keyword = _keyword(op.code).keyword.value
        except SpecpatchError:
            continue
        called = op.call.split("(", 1)[0].strip().split(".")[-1]
        found = adds.get((called, keyword))
        if found is not None and status.get(found[0]) in ("refused", "skipped"):
            j, param = found
            out[index] = ("refused", f"it passes `{keyword}` to `{called}`, whose parameter `{keyword}` step {j} "
                                     f"(`{param.name or param.op}`) adds, which is {status[j]}: the keyword would "
                                     f"reach the release's `{called}` without it, or its own `{keyword}` of "
                                     f"another meaning; not applied (anchor: {op.anchor()})")
    return out


def removals_moved(ops: Sequence[tuple[int, Operation]], steps: Sequence[PortedStep], release: "_ReleaseIndex",
                   base: "_ReleaseIndex | None") -> dict[int, tuple[str, str]]:
    """The removals (`replace_statements` with empty `code`) that answer "already upstream" while their statements,
    gone from the step's file, stand in another file of the release more often than in that file of the base
    release: upstream moved them into another module (a helper the function now calls), where they still run.
    (Moved within the file, the operation itself refuses.) Only statements that say something by themselves count
    (`_statement_key`: not `x = 1` or `return x`). Index -> (status, why)."""
    if base is None:
        return {}
    upstream = {s.index for s in steps if s.status == "already_upstream"}
    out: dict[int, tuple[str, str]] = {}
    for index, op in ops:
        if index not in upstream or op.op != "replace_statements" or (op.code or "").strip():
            continue
        # an import gone from one module and found in another is no code moved (another module's own import)
        keys = [key for key, _ in _statements_of(op.match) or () if not key.startswith(("Import(", "ImportFrom("))]
        if not keys:
            continue
        words = set(re.findall(r"[A-Za-z_]\w*", op.match))
        mine = release.texts().get(op.file, "")
        for rel, text in release.texts().items():
            if rel == op.file or not all(w in text for w in words):
                continue
            # a helper the step's function now calls: a function of a module the step's file names (imports);
            # a module's own constant or logger (`_is_hip = is_hip()`), or a line of a class the file never
            # uses, is that module's, not the code moved
            if not re.search(rf"\b{re.escape(PurePosixPath(rel).stem)}\b", mine):
                continue
            now = _statement_index(text)
            then = _statement_index(base.texts().get(rel, ""))
            if all(len(now.get(k, ())) > len(then.get(k, ())) for k in keys) \
                    and _in_functions(text, [now[k][0] for k in keys]):
                first = " ".join(op.match.strip().splitlines()[0].split())
                out[index] = ("refused", f"`{first}` is gone from `{op.file}`, but `{rel}` has it (line "
                                         f"{now[keys[0]][0]}), which the base release's does not: upstream moved "
                                         f"it there, where it still runs; not taken as already upstream (anchor: "
                                         f"{op.anchor()})")
                break
    return out


def _changed_by_applied(ops: Sequence[tuple[int, Operation]], steps: Sequence[PortedStep],
                        planned: dict[str, tuple[list[PortedStep], bytes | None]],
                        pristine: dict[str, str]) -> Iterator[tuple[str, str, list[tuple[int, Operation]]]]:
    """(file, planned text, its applied steps) for each planned file that the applied steps changed."""
    applied = {s.index for s in steps if s.status == "applied"}
    for rel, (_, data) in planned.items():
        if data is None or rel not in pristine:
            continue
        mine = [(i, op) for i, op in ops if op.file == rel and i in applied]
        if not mine:
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue  # the file's own checks say what is wrong with it
        if text != pristine[rel]:
            yield rel, text, mine


def calls_misfit_after(ops: Sequence[tuple[int, Operation]], steps: Sequence[PortedStep],
                       planned: dict[str, tuple[list[PortedStep], bytes | None]], pristine: dict[str, str],
                       package_dir: Path, package: str) -> dict[int, tuple[str, str]]:
    """The applied steps that make a call across modules no longer fit (the check `apply` makes,
    `engine._calls_across_modules`): a call the step adds that the other module's function cannot take (a keyword it
    has no parameter for), or a signature it changes that another module's call no longer fits. Each charged to the
    applied steps of its file whose code holds the call's line, else to all of them. Index -> (status, why)."""
    from types import SimpleNamespace

    from .engine import _calls_across_modules

    target = SimpleNamespace(package=package, package_dir=package_dir,  # files named as port names them
                             rel=lambda path: path.relative_to(package_dir).as_posix())
    overlay = {package_dir / rel: data for rel, (_, data) in planned.items() if data is not None}
    out: dict[int, tuple[str, str]] = {}
    for rel, text, mine in _changed_by_applied(ops, steps, planned, pristine):
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError):
            continue  # the file's own checks say what is wrong with it
        lines = text.splitlines()
        for error in _calls_across_modules("port", target, rel, rel, package_dir / rel, pristine[rel], tree, [],
                                           overlay):
            line = error.location.line
            said = lines[line - 1].strip() if line and 0 < line <= len(lines) else ""
            # the call's whole text (it may span lines: `ModelRunner(\n ..., load_group=load_group)`), for the steps
            # whose code is in it (a keyword a step added), when the line alone names none
            spans = [n.end_lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and n.lineno == line]
            whole = " ".join("".join(lines[line - 1:max(spans)]).split()) if line and spans else ""
            holders = [i for i, op in mine if said and said in (getattr(op, "code", None) or "")] or \
                [i for i, op in mine if whole and (code := " ".join((getattr(op, "code", None) or "").split()))
                 and code in whole] or [i for i, _ in mine]
            for i in holders:
                out.setdefault(i, ("refused", f"{error.message}; not applied (anchor: {dict(ops)[i].anchor()})"))
    return out


def missing_modules_after(ops: Sequence[tuple[int, Operation]], steps: Sequence[PortedStep],
                          planned: dict[str, tuple[list[PortedStep], bytes | None]], pristine: dict[str, str],
                          package_dir: Path, package: str, base_dir: Path | None = None) -> dict[int, tuple[str, str]]:
    """The applied steps whose code imports a module of the package that the release does not have, or a name such
    a module does not define (the check `apply` makes, `engine.missing_imports`; with `base_dir`, a module whose
    folder upstream removed counts too): applied, the file would raise ImportError at start-up, most often because
    upstream moved the module. Each import is charged to the applied steps of its file whose code holds its line.
    Index -> (status, why)."""
    from .engine import _TAKING, importers_of, missing_imports

    out: dict[int, tuple[str, str]] = {}
    overlay = {package_dir / rel: data for rel, (_, data) in planned.items() if data is not None}
    for rel, text, mine in _changed_by_applied(ops, steps, planned, pristine):
        try:
            missing = missing_imports(ast.parse(text), package, package_dir, rel, base_dir, planned=overlay)
            if missing:
                had = {w for _, w, _ in missing_imports(ast.parse(pristine[rel]), package, package_dir, rel,
                                                        base_dir, planned=overlay)}
                missing = [m for m in missing if m[1] not in had]
        except (SyntaxError, ValueError, RecursionError):
            continue  # the file's own checks say what is wrong with it
        lines = text.splitlines()
        for node, what, why in missing:
            line = lines[node.lineno - 1].strip() if 0 < node.lineno <= len(lines) else ""
            last = what.rsplit(".", 1)[-1]
            holders = [i for i, op in mine if line and line in (getattr(op, "code", None) or "")] or \
                [i for i, op in mine if re.search(rf"\b{re.escape(last)}\b", getattr(op, "code", None) or "")]
            kind = "a module" if what.startswith("module ") else "a name"
            for i in holders:
                out.setdefault(i, ("refused", f"it imports {why}, {kind} this release does not have (moved or removed "
                                              f"upstream?); applied, `{rel}` would raise ImportError; not applied "
                                              f"(anchor: {dict(ops)[i].anchor()})"))
        taking = any(op.op in _TAKING for _, op in mine)
        for other, line_no, name, dotted in (importers_of(package, package_dir, rel, package_dir / rel, overlay)
                                             if taking else ()):
            holders = [i for i, op in mine if name in _match_binds(op)] or [i for i, _ in mine]
            for i in holders:
                out.setdefault(i, ("refused", f"once applied, `{rel}` no longer defines `{name}`, which `{other}` "
                                              f"uses from `{dotted}` (line {line_no}): that module would raise "
                                              f"ImportError or AttributeError; not applied (anchor: "
                                              f"{dict(ops)[i].anchor()})"))
    return out



def _match_binds(op: Operation) -> set[str]:
    """The names a step's `match` binds (assignments, imports, defs, loop targets...) that its `code` does not:
    what applying the step takes away."""
    match = getattr(op, "match", None)
    if not isinstance(match, str) or not match.strip():
        return set()

    def binds(text: str) -> set[str]:
        try:
            tree = ast.parse(textwrap.dedent(text).strip("\n"))
        except (SyntaxError, ValueError, RecursionError):
            return set()
        out: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                out.add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.add(node.name)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                out.update((a.asname or a.name).split(".")[0] for a in node.names)
        return out

    return binds(match) - binds(getattr(op, "code", None) or "")


_BUILTINS = frozenset(dir(__import__("builtins")))


def _free_names(op: Operation) -> set[str]:
    """The plain names a step's code reads and does not bind itself (assignments, parameters, imports, loop and
    comprehension targets, defs), builtins aside: what must come from the function or the module around it."""
    code = getattr(op, "code", None)
    if op.op in ("unexpressed_hunk", "add_import") or not isinstance(code, str) or not code.strip():
        return set()
    tree = _code_tree(op, textwrap.dedent(code).strip("\n"))
    if tree is None:
        return set()
    read, bound = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (bound if isinstance(node.ctx, (ast.Store, ast.Del)) else read).add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return read - bound - _BUILTINS - {"_w_", "self", "cls", "__class__"}


@functools.lru_cache(maxsize=64)
def _module_bindings(text: str) -> dict[str, str] | None:
    """The names a module binds at its own level (imports, defs, classes, assignments, also under a top-level
    `if`/`try`/`with`), each with the first line of the statement that binds it; None when the module does not
    parse or has a `from x import *` (whose names cannot be told)."""
    tree = _parsed_once(text)
    if tree is None:
        return None
    lines = text.splitlines()
    out: dict[str, str] = {}

    def visit(stmts: list[ast.stmt]) -> bool:
        for st in stmts:
            names: list[str] = []
            if isinstance(st, (ast.Import, ast.ImportFrom)):
                if any(a.name == "*" for a in st.names):
                    return False
                names = [(a.asname or a.name).split(".")[0] for a in st.names]
            elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names = [st.name]
            elif isinstance(st, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = st.targets if isinstance(st, ast.Assign) else [st.target]
                names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
            elif isinstance(st, (ast.If, ast.Try, ast.With, ast.For, ast.While)) or \
                    (hasattr(ast, "TryStar") and isinstance(st, ast.TryStar)):
                blocks = [getattr(st, f, []) for f in ("body", "orelse", "finalbody")]
                blocks += [h.body for h in getattr(st, "handlers", [])]
                if isinstance(st, (ast.For, ast.With)):
                    targets = [st.target] if isinstance(st, ast.For) else [w.optional_vars for w in st.items]
                    names = [n.id for t in targets if t is not None for n in ast.walk(t) if isinstance(n, ast.Name)]
                if not all(visit(b) for b in blocks):
                    return False
            for n in names:
                out.setdefault(n, lines[st.lineno - 1].strip() if st.lineno <= len(lines) else n)
        return True

    return out if visit(tree.body) else None


def _function_words(texts: dict[str, str], scope: str) -> set[str] | None:
    """The words of the function `scope` (`file::Class.method`) in the release's text of that file; None when the
    file or the function is not there."""
    rel, _, dotted = scope.partition("::")
    return _words_of_def(texts.get(rel, ""), dotted)


@functools.lru_cache(maxsize=256)
def _words_of_def(text: str, dotted: str) -> frozenset[str] | None:
    tree = _parsed_once(text)
    if tree is None:
        return None
    node: ast.AST = tree
    for part in dotted.split("."):
        node = next((d for d in getattr(node, "body", []) if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                            ast.ClassDef)) and d.name == part), None)
        if node is None:
            return None
    lines = text.splitlines()[node.lineno - 1:node.end_lineno]
    return frozenset(_WORD.findall("\n".join(lines)))


@functools.lru_cache(maxsize=16)
def _parsed_once(text: str) -> ast.Module | None:
    return _parsed(text)


_TRIVIAL = re.compile(r"^(?:[\W_]*|(?:else|try|finally|pass|return|break|continue|None|True|False|self|async|await)"
                      r"\W*)$")


def _norm(line: str) -> str:
    """A line of code as the evidence compares it: comments and spacing aside, a trailing comma aside."""
    line = line.split("  #", 1)[0] if "  #" in line else line
    return " ".join(line.split()).rstrip(",").strip()


def _distinct(code: str) -> list[str]:
    """The lines of `code` that say something (not a bracket, a keyword alone, a comment or a short word)."""
    out = []
    for raw in textwrap.dedent(code).splitlines():
        line = _norm(raw)
        if len(line) < 8 or line.startswith("#") or _TRIVIAL.match(line) or not re.search(r"[A-Za-z_]\w", line):
            continue
        out.append(line)
    return out


def upstream_evidence(op: Operation, text: str, *, strict: bool = False, base: str | None = None) -> tuple[str, ...]:
    """For a step that cannot apply: what it adds (its code less what it matches) that the release already has, each
    with its line number, when it is all there (at least one, four fifths of it past three); else (). A refusal
    whose additions are all in the file is upstream having adopted the change in another form (reordered,
    reformatted, moved within the file): reported as such, and still never applied. `strict` (for a step that could
    apply): all of it, two at least, and imports are left to their own answer.

    A step that adds statements is compared statement by statement (the code, formatting and comments aside: a call
    upstream wrapped on three lines is the same statement; a longer line that begins with the step's is not); a
    one-line change inside a statement (a keyword, an element, a parameter) is found inside a line, as whole
    tokens."""
    code = getattr(op, "code", None)
    if not isinstance(code, str) or not code.strip() or (strict and op.op == "add_import"):
        return ()
    if op.op == "add_import":
        return _bound_elsewhere(code, text)
    match = getattr(op, "match", None)
    units = _statements_of(code) if op.op in _STATEMENT_OPS else None
    if units is not None:
        matched = {key for key, _ in _statements_of(match) or ()} if isinstance(match, str) else set()
        added = [key for key, _ in units if key not in matched]
        release = _statement_index(text)
        # shown where the step works when it is there too (a file may have it in several functions)
        start, end = _span_of(text, getattr(op, "function", None) or getattr(op, "within", None))
        where = {key: next((n for n in lines if start <= n <= end), lines[0]) for key, lines in release.items()}
        now = {key: len(lines) for key, lines in release.items()}
        had = {key: len(lines) for key, lines in _statement_index(base).items()} if base is not None else {}
    else:
        added = _distinct(code)
        if isinstance(match, str):
            matched_lines = set(_distinct(match))
            added = [line for line in added if line not in matched_lines]
        where = {}
        for number, raw in enumerate(text.splitlines(), start=1):
            where.setdefault(_norm(raw), number)
        # one line: found inside a line of the release too (a keyword argument among others), as whole tokens
        if len(added) == 1 and added[0] not in where:
            at = next((n for l, n in where.items() if _inside_line(added[0], l)), None)
            if at:
                where[added[0]] = at
        now = Counter(_norm(raw) for raw in text.splitlines())
        had = Counter(_norm(raw) for raw in base.splitlines()) if base is not None else Counter()
    if not added:
        return ()
    lines = text.splitlines()
    hits = [f"line {where[key]}: `{lines[where[key] - 1].strip()}`" for key in added if key in where]
    if strict:  # all of it is there, and two statements (lines) at least are more often there than in the base
        fresh = sum(now.get(key, 0) > had.get(key, 0) for key in added)
        return tuple(hits) if len(hits) == len(added) and fresh >= 2 else ()
    need = len(added) if len(added) <= 3 else -(-4 * len(added) // 5)
    return tuple(hits) if len(hits) >= max(1, need) else ()


def _span_of(text: str, dotted: str | None) -> tuple[int, int]:
    """The lines of the function or class `dotted` in `text`, or (0, 0) when it is not found (or not asked)."""
    from .moved_attributes import _def_at

    if not dotted:
        return 0, 0
    try:
        fn = _def_at(ast.parse(text), dotted)
    except (SyntaxError, ValueError, RecursionError):
        return 0, 0
    return (fn.lineno, fn.end_lineno or fn.lineno) if fn is not None else (0, 0)


def upstream_guards(op: Operation, text: str, base: str) -> tuple[str, ...]:
    """For a step that puts an `if` block into a function: the `if` (or `elif`) statements of that function in the
    release whose test is the one of an `if` the step adds, and which the function has more often than it had in the
    base release (`base`), each with its line; else (). Upstream that guards the very case the team's `if` guards,
    in the function the step edits, has handled it its own way: the step's body under that test need not be
    upstream's (`x = x + extra` beside upstream's `residual = residual + extra` above it), so the lines it adds are
    not there for `upstream_evidence` to find, and applied, the case is handled twice. Only `if` tests that read a
    name are compared: a loop or a `with` of the same header is too common to tell a feature by."""
    where = getattr(op, "function", None) or getattr(op, "within", None)
    code = getattr(op, "code", None)
    if op.op not in ("insert_statements", "replace_statements") or not where or not isinstance(code, str):
        return ()
    tree = _parsed(textwrap.dedent(code))
    match = getattr(op, "match", None)
    before = _parsed(textwrap.dedent(match)) if isinstance(match, str) else None
    if tree is None:
        return ()
    had_in_match = {ast.dump(s.test) for s in ast.walk(before) if isinstance(s, ast.If)} if before else set()
    tests = [ast.dump(s.test) for s in tree.body if isinstance(s, ast.If)
             and any(isinstance(n, (ast.Name, ast.Attribute)) for n in ast.walk(s.test))]
    tests = [t for t in dict.fromkeys(tests) if t not in had_in_match]
    if not tests:
        return ()
    now, had = _ifs_of_def(text, where), _ifs_of_def(base, where)
    if now is None:
        return ()
    lines = text.splitlines()
    return tuple(f"`{lines[now[t][0] - 1].strip()}` (line {now[t][0]})" for t in tests
                 if len(now.get(t, ())) > len((had or {}).get(t, ())))


@functools.lru_cache(maxsize=256)
def _ifs_of_def(text: str, dotted: str) -> dict[str, list[int]] | None:
    """The tests of the `if`/`elif` statements of the function `dotted` in `text` (dumped), each with its lines;
    None when the function is not there."""
    node: ast.AST | None = _parsed_once(text)
    for part in dotted.split("."):
        if node is None:
            return None
        node = next((d for d in getattr(node, "body", []) if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                            ast.ClassDef)) and d.name == part), None)
    if node is None:
        return None
    out: dict[str, list[int]] = {}
    for n in ast.walk(node):
        if isinstance(n, ast.If):
            out.setdefault(ast.dump(n.test), []).append(n.lineno)
    for found in out.values():
        found.sort()
    return out


#: the operations whose code is statements (compared as statements by upstream_evidence)
_STATEMENT_OPS = frozenset({"insert_statements", "replace_statements", "add_method", "add_definition",
                            "add_dataclass_field", "add_argparse_argument"})
_BLOCKS = ("body", "orelse", "handlers", "finalbody", "cases")


def _statement_key(node: ast.stmt) -> str | None:
    """A statement as upstream_evidence compares it: its code without positions (a compound statement: its header
    only), or None for one that says nothing by itself (`pass`, `return`, `try:`, a docstring, `x = 1`)."""
    if isinstance(node, (ast.Pass, ast.Break, ast.Continue, ast.Try, ast.Global, ast.Nonlocal)) or (
            isinstance(node, ast.Return) and (node.value is None or isinstance(node.value, (ast.Name, ast.Constant)))
    ) or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
        return None
    head = node
    if any(getattr(node, name, None) for name in _BLOCKS):
        head = type(node)(**{name: ([] if name in _BLOCKS else getattr(node, name, None))
                             for name in node._fields})
    try:
        said = ast.unparse(head)
    except Exception:  # noqa: BLE001 - a header ast cannot write back: compare it by its dump alone
        said = ""
    if said and len(" ".join(said.split())) < 8:
        return None
    return ast.dump(head)


def _statements_of(code: str) -> list[tuple[str, int]] | None:
    """(key, line) of each statement of `code` that says something, nested ones included; None if it does not parse
    as statements."""
    try:
        tree = ast.parse(textwrap.dedent(code))
    except (SyntaxError, ValueError):
        return None
    return [(key, node.lineno) for node in ast.walk(tree) if isinstance(node, ast.stmt)
            for key in [_statement_key(node)] if key is not None]


def _in_functions(text: str, lines: list[int]) -> bool:
    """Whether each of the lines stands in a function (a def's body) of the module's text."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return False
    spans = [(n.body[0].lineno, n.end_lineno) for n in ast.walk(tree)
             if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return all(any(a <= line <= b for a, b in spans) for line in lines)


@functools.lru_cache(maxsize=16)
def _statement_index(text: str) -> dict[str, list[int]]:
    """The statements of a release's file, each key with the lines where it stands ({} if the file does not
    parse)."""
    index: dict[str, list[int]] = {}
    for key, line in _statements_of(text) or ():
        index.setdefault(key, []).append(line)
    for lines in index.values():
        lines.sort()
    return index


def _inside_line(fragment: str, line: str) -> bool:
    """Is `fragment` (12 characters at least) in `line` as whole tokens: not the tail or head of a longer name?"""
    if len(fragment) < 12:
        return False
    start = line.find(fragment)
    while start != -1:
        end = start + len(fragment)
        if not (start and _IDENT_CHAR.match(line[start - 1]) and _IDENT_CHAR.match(fragment[0])) and not (
                end < len(line) and _IDENT_CHAR.match(line[end]) and _IDENT_CHAR.match(fragment[-1])):
            return True
        start = line.find(fragment, start + 1)
    return False


_IDENT_CHAR = re.compile(r"\w")


def _bound_elsewhere(code: str, text: str) -> tuple[str, ...]:
    """For an import that cannot apply: where the release's module-level imports already bind each of its names
    (from another module: upstream moved the name), or () when one of them is not bound."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return ()
    bound: dict[str, int] = {}
    for stmt in tree.body:
        for b in bindings(stmt):
            bound.setdefault(b.bound, stmt.lineno)
    wanted = [b.bound for b in bindings(ast.parse(textwrap.dedent(code).strip()).body[0])]
    lines = text.splitlines()
    if not wanted or any(name not in bound for name in wanted):
        return ()
    return tuple(f"line {bound[n]}: `{lines[bound[n] - 1].strip()}` binds `{n}`" for n in wanted)


# --------------------------------------------------------------------------------------------------- the command


@dataclass
class ImportResult:
    recipe: Path
    lifted: Lifted
    round_trip: RoundTrip

    @property
    def exit_code(self) -> int:
        if not self.round_trip.ok or self.lifted.lifted < len(self.lifted.hunks) or self.lifted.skipped:
            return 3
        return 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "recipe": str(self.recipe), "hunks": len(self.lifted.hunks), "lifted": self.lifted.lifted,
            "steps": len(self.lifted.steps),
            "not_lifted": [{"file": h.file, "hunk": h.hunk.header, "reason": h.reason}
                           for h in self.lifted.hunks if not h.lifted],
            "skipped_files": [{"file": p, "reason": why} for p, why in self.lifted.skipped],
            "round_trip": {"identical": self.round_trip.identical, "different": self.round_trip.different,
                           "errors": self.round_trip.errors,
                           "identical_but_blank_line_whitespace": self.round_trip.blank_whitespace,
                           "hunks_not_applying": self.round_trip.unmatched},
            "exit_code": self.exit_code,
        }


def import_patch(patch: Path, *, package: str | None, release: str, out: Path | None = None) -> ImportResult:
    """Read the patch, fetch the pristine release, lift, write the recipe, check its round trip. Without `package`,
    the engine the patch's paths name (`a/vllm/...`), else sglang; a `package` other than the only one they name is
    refused before anything is fetched."""
    from .fetch import fetch_release

    try:
        # bytes as they are: a "\r" ending a hunk's line is a CRLF file's (read_text would make it "\n")
        text = patch.read_bytes().decode("utf-8", errors="surrogateescape")
    except OSError as exc:
        raise UsageError(f"cannot read the patch {patch}: {exc.strerror}") from None
    named = packages_named(text)
    inferred = package is None
    if package is None:
        package = next(iter(named)) if len(named) == 1 else "sglang"
    elif len(named) == 1 and package not in named:
        other = next(iter(named))
        raise UsageError(f"{patch.name} changes files of {other} (its paths are `{other}/...`), and --package is "
                         f"{package}", hint=f"pass --package {other} (or leave --package out: the patch's paths "
                                            f"name the package)")
    out = out or Path(f"{_slug(patch.stem)}.yaml")
    if out.suffix not in (".yaml", ".yml") or not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", out.stem):
        raise UsageError(f"-o must be a .yaml path whose name is kebab-case (the recipe id), got {out}")
    _earlier_output(out)  # before the release is fetched and the patch lifted: refuse at once what would be lost
    try:
        package_dir = fetch_release(package, release) / package
    except SpecpatchError as exc:
        if inferred:  # say where the package came from: the patch's paths, or the default
            exc.hint = (f"{package} was taken from {'the patch' + chr(39) + 's paths' if named else 'the default'} "
                        f"(no --package); {exc.hint}")
        raise
    lifted = lift(package_dir, text, package=package)
    tried = [h for h in lifted.hunks if h.reason not in ("new file", "deleted file", "renamed file", "copied file",
                                                         "file not in this release", "file the patch adds",
                                                         "not a Python file")]
    if tried and all(h.reason == REVERSED for h in tried):
        # every hunk is there the other way round: the diff was made with its two trees swapped
        raise PatchError(f"{patch.name} looks reversed: in {package} {release}, none of its {len(tried)} hunks "
                         f"finds its old lines, and each finds its new lines",
                         hint="make the diff from the release to the patched tree (`diff -ruN release patched`), or "
                              "reverse it (`patch -R`, `interdiff`, or swap the two trees), then import it")
    if not lifted.steps:
        # a recipe has at least one step: say why there is none instead of writing one that does not load
        blank = sorted({h.file for h in lifted.hunks if h.note})
        raise PatchError(f"nothing in {patch.name} edits an existing file of {package} {release}: "
                         + "; ".join([*(f"{p} ({why})" for p, why in lifted.skipped),
                                      *(f"{p} (only spaces on blank lines)" for p in blank)]),
                         hint="recipes edit files the release has; check the patch's paths and --release")
    write_recipe(lifted, out, package=package, release=release, source=patch.name)
    return ImportResult(out, lifted, round_trip(out, package_dir, lifted.expected, lifted.trimmed,
                                                             lifted.unmatched))


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "imported"
