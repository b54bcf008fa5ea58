"""`add_import`: add an import statement to a module, at the end of its leading block of imports.

Example::

    - op: add_import
      file: srt/speculative/eagle_worker_v2.py
      code: "from sglang.srt.managers.scheduler import GenerationBatchResult"

`code` is one `import x`, `import x.y as z` or `from a.b import c, d as e` (relative imports too; `*` is refused).

*Already imported* means: a statement directly in the module body (anywhere in it, not only in the leading block)
imports the same thing under the same name, e.g. `from a.b import c` is there when the module has
`from a.b import (c, d, e)`. Imports inside a top-level `if`/`try` (such as `if TYPE_CHECKING:`) do not count:
they may not run. When only some names are missing, the new statement imports just those, on one line.

Where: after the last plain (unconditional) import statement of the module's *leading import block*, which starts
after the docstring and ends at the first statement that is neither an import nor an `if`/`try` made only of imports
and `pass` (so `if TYPE_CHECKING:` blocks are passed over, while `logger = ...`, a `def`, a `class` or a `try` with an
`except ImportError: x = None` fallback end the block). A module without imports gets the new one after its
docstring (or at the top). A `from __future__ import ...` goes after the docstring and the other `__future__` imports.

With `merge: true` (a `from` import only), the missing names join the module's own `from a.b import ...` statement
of the same module instead, in its layout: `after: c` places them after the name `c`, `before: c` (for names a
patch put first in the list) before it, at the end of the list when `c` is not in it; that is how a patch that adds
one name to a parenthesized import list is carried to a release whose list has changed around it. Without such a statement, a new one is added as above. Example::

    - op: add_import
      file: srt/models/deepseek_nextn.py
      code: "from sglang.srt.layers.attention.nsa.utils import is_nsa_enable_prefill_cp"
      merge: true
      after: cp_all_gather_rerange_output

With `sorted: true` (what `specpatch import` writes for an import a patch put in the middle of a sorted block), the
new statement goes where it sorts in the leading block instead of at its end: in the section (a run of import
lines between blank lines) whose lines are in isort's order (`import x` lines, then `from x import` lines, each by
module name, case aside) and whose first and last lines it sorts between, after the last line that sorts before
it; when sections of the block import from its top-level package (`sglang`), only those (`from sglang.srt.x import
y` sorts between `from dataclasses` and `from typing` too). So `import os` added after `import contextlib` lands after the `import logging` a later release put there. When
no section is sorted around it, it goes at the end of the block as without `sorted`.

Answers: *changed*; *already applied* (every name is already imported so); *cannot apply* (a conflict: a requested
name is already bound by another top-level import, e.g. `from x import c` when the recipe imports `c` from `a.b`;
or the same thing is imported under another alias, e.g. `import numpy` when the recipe asks for
`import numpy as np`: the recipe should use the module's own name for it). Relative and absolute imports of the
same module are different imports to this check.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass
from typing import Literal

import libcst as cst

from ..anchors import (child_blocks, code_of, insert_after, insert_before, is_docstring, parse_statements,
                       walk_statements)
from ..errors import Candidate, Conflict
from ..model import option
from .base import AlreadyApplied, Changed, Operation, Outcome, attempt, register


@dataclass(frozen=True)
class Binding:
    """One name an import statement binds: `bound` in the module refers to `source` (as written in `text`)."""

    bound: str  #: the module-level name, e.g. `np` for `import numpy as np`, `a` for `import a.b`
    source: tuple  #: what is imported: ("import", "numpy") or ("from", level, "a.b", "c")
    alias: str | None  #: the `as` name, if any
    text: str  #: `numpy as np`, `c`, `d as e` (the alias as it is written in a statement)

    @property
    def value(self) -> tuple:
        """What `bound` refers to: `import a.b` binds `a` to the package `a`."""
        if self.source[0] == "import" and self.alias is None:
            return ("import", self.source[1].split(".")[0])
        return self.source


def bindings(stmt: ast.stmt) -> list[Binding]:
    """The names an `ast.Import` / `ast.ImportFrom` binds (empty for any other statement)."""
    from ..anchors import ident  # names bind as Python compares them (NFKC)

    if isinstance(stmt, ast.Import):
        return [Binding(ident(a.asname or a.name.split(".")[0]), ("import", a.name), a.asname,
                        f"{a.name} as {a.asname}" if a.asname else a.name) for a in stmt.names]
    if isinstance(stmt, ast.ImportFrom):
        return [Binding(ident(a.asname or a.name), ("from", stmt.level, stmt.module or "", a.name), a.asname,
                        f"{a.name} as {a.asname}" if a.asname else a.name) for a in stmt.names]
    return []


#: id(import node) -> (the node, its bindings): libcst nodes are immutable, and a recipe of many imports into one
#: file would read every import line again for each step (quadratic: 1,000 steps took 19 s). The node is kept so
#: that its id is not reused while the entry lives.
_BINDINGS: dict[int, tuple[cst.CSTNode, list[Binding]]] = {}


def _bindings_of(node: cst.Import | cst.ImportFrom) -> list[Binding]:
    hit = _BINDINGS.get(id(node))
    if hit is not None and hit[0] is node:
        return hit[1]
    if len(_BINDINGS) > 100_000:
        _BINDINGS.clear()
    found = bindings(_as_ast(node))
    _BINDINGS[id(node)] = (node, found)
    return found


def _as_ast(node: cst.Import | cst.ImportFrom) -> ast.Import | ast.ImportFrom:
    """The `ast` form of an import, read from the libcst node (rendering each import of a module costs more)."""

    def dotted(name: cst.BaseExpression | None) -> str:
        if isinstance(name, cst.Attribute):
            return f"{dotted(name.value)}.{name.attr.value}"
        return name.value if isinstance(name, cst.Name) else ""

    def alias(a: cst.ImportAlias) -> ast.alias:
        asname = a.asname.name.value if a.asname and isinstance(a.asname.name, cst.Name) else None
        return ast.alias(dotted(a.name), asname)

    if isinstance(node, cst.Import):
        return ast.Import([alias(a) for a in node.names])
    names = [ast.alias("*")] if isinstance(node.names, cst.ImportStar) else [alias(a) for a in node.names]
    return ast.ImportFrom(dotted(node.module) or None, names, len(node.relative))


def _is_import_line(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body)


def _is_future_line(stmt: cst.CSTNode) -> bool:
    return _is_import_line(stmt) and all(
        isinstance(s, cst.ImportFrom) and isinstance(s.module, cst.Name) and s.module.value == "__future__"
        for s in stmt.body)


def _only_imports(stmt: cst.CSTNode) -> bool:
    """An `if`/`try` whose every block holds only imports and `pass` (e.g. `if TYPE_CHECKING:` imports)."""
    if not isinstance(stmt, (cst.If, cst.Try)):
        return False
    for block in child_blocks(stmt):
        for path in walk_statements((block,)):
            s = path[-1]
            if not (_is_import_line(s) or isinstance(s, (cst.If, cst.Try, cst.Else))
                    or (isinstance(s, cst.SimpleStatementLine) and all(isinstance(x, cst.Pass) for x in s.body))):
                return False
    return True


@register
@dataclass(frozen=True, kw_only=True)
class AddImport(Operation):
    """Add an import statement at the end of the module's leading import block, unless it is already imported."""

    op: Literal["add_import"]
    code: str = option(check=lambda code: _parse_import(code),
                       description="one import statement: `import x`, `import x as y`, `from a.b import c, d as e`")
    merge: bool = option(default=False, description="a `from` import: add the missing names to the module's own "
                         "`from` statement of that module (if it has one) instead of a new statement")
    after: str | None = option(default=None, description="with `merge`: the imported name the new names follow "
                               "in that statement (default, or when it is not there: the end of its list)")
    before: str | None = option(default=None, description="with `merge`, instead of `after`: the imported name the "
                                "new names precede (when it is not there: the end of its list)")

    sorted: bool = option(default=False, description="place the new statement where it sorts in its section of the "
                          "leading import block (isort order), not at the block's end")

    def __post_init__(self) -> None:
        if (self.merge or self.after or self.before) and not isinstance(_parse_import(self.code), ast.ImportFrom):
            raise ValueError("`merge`, `after` and `before` are for a `from ... import ...` statement")
        if (self.after or self.before) and not self.merge:
            raise ValueError("`after` and `before` place names in an existing import statement: that needs "
                             "`merge: true`")
        if self.after and self.before:
            raise ValueError("give `after` or `before`, not both")

    def describe(self) -> str:
        return f"add `{' '.join(self.code.split())}`"

    def anchor(self) -> str:
        return "the module's imports"

    @attempt
    def apply(self, module: cst.Module) -> Outcome:
        wanted = _parse_import(self.code)
        existing: list[tuple[Binding, cst.CSTNode]] = []
        for stmt in module.body:
            if _is_import_line(stmt):
                for small in stmt.body:
                    existing.extend((b, stmt) for b in _bindings_of(small))
        missing: list[Binding] = []
        found: list[cst.CSTNode] = []
        for want in bindings(wanted):
            clash = [(b, s) for b, s in existing if b.bound == want.bound and b.value != want.value]
            if clash:
                b, s = clash[0]
                raise Conflict(f"`{want.bound}` is already imported from elsewhere: `{_line(module, s)}`",
                               candidates=[Candidate(f"`{_line(module, s)}`", node=s)])
            same = [s for b, s in existing if b.source == want.source and b.alias == want.alias]
            if same:
                found.append(same[0])
                continue
            other = [(b, s) for b, s in existing if b.source == want.source]
            if other:
                b, s = other[0]
                raise Conflict(f"`{want.text}` is already imported as `{b.bound}`: `{_line(module, s)}`",
                               hint="use the module's own name for it in the recipe, or import it under that alias",
                               candidates=[Candidate(f"`{_line(module, s)}`", node=s)])
            missing.append(want)
        if not missing:
            return AlreadyApplied(found[0] if found else None)
        from .add_definition import _bound_in

        # a module-level def, class, assignment, loop or `with` target, `except ... as`, or a function's `global`
        defined = _bound_in(module.body, imports=False)
        for want in missing:
            if want.bound in defined:
                s = defined[want.bound]
                shown = ast.unparse(ast.parse(textwrap.dedent(code_of(module, s)))).splitlines()[0]
                raise Conflict(f"`{want.bound}` is already bound by the module: `{shown}`; the import would be "
                               "rebound by it, or rebind it", candidates=[Candidate(f"`{shown}`", node=s)])
        if self.merge:
            merged = self._merge(module, wanted, missing)
            if merged is not None:
                return merged
        code = self.code if len(missing) == len(wanted.names) else _statement(wanted, missing)
        new = parse_statements(code, module, what="code")
        where = self._where(module, wanted)
        if self.sorted:
            place = _sorted_place(module, wanted)
            if place is not None and place[1] == "before":
                # at the top of its section: the new line takes the section's blank line (or heading comment)
                return Changed(insert_before((module, place[0]), new), inserted=tuple(new), anchor=place[0])
            where = place[0] if place is not None else where
        if where is None:
            if not module.body:
                return Changed(module.with_changes(body=tuple(new)), inserted=tuple(new))
            return Changed(insert_before((module, module.body[0]), new), inserted=tuple(new))
        return Changed(insert_after((module, where), new), inserted=tuple(new), anchor=where)

    def _merge(self, module: cst.Module, wanted: ast.ImportFrom, missing: list[Binding]) -> Outcome | None:
        """The module with `missing` added to its own `from` statement of `wanted`'s module (the one that holds
        `after` or `before`, else the first), or None when it has none."""
        from ._code import insert_item

        same = []
        for stmt in module.body:
            if _is_import_line(stmt) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.ImportFrom) \
                    and not isinstance(stmt.body[0].names, cst.ImportStar):
                have = _as_ast(stmt.body[0])
                if have.module == wanted.module and have.level == wanted.level:
                    same.append(stmt)
        if not same:
            return None

        def names(stmt: cst.SimpleStatementLine) -> list[str]:
            return [a.name for a in _as_ast(stmt.body[0]).names]

        neighbour = self.after or self.before
        stmt = next((s for s in same if neighbour in names(s)), same[0])
        node: cst.ImportFrom = stmt.body[0]
        listed = names(stmt)
        if neighbour in listed:
            index = listed.index(neighbour) + (1 if self.after else 0)
        else:
            index = len(listed)
        opening = node.lpar.whitespace_after if node.lpar else None
        items = list(node.names)
        for b in missing:
            alias = cst.parse_statement(_statement(wanted, [b])).body[0].names[0]
            items = insert_item(items, index, alias, opening)
            index += 1
        if not node.lpar and isinstance(items[-1].comma, cst.Comma):
            items[-1] = items[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        changed = stmt.with_changes(body=(node.with_changes(names=tuple(items)),))
        body = tuple(changed if s is stmt else s for s in module.body)
        return Changed(module.with_changes(body=body), inserted=(changed,), anchor=stmt)

    def _where(self, module: cst.Module, wanted: ast.stmt) -> cst.CSTNode | None:
        """The statement the new import follows: last import of the leading block, else the docstring, else None."""
        body = list(module.body)
        start = 1 if body and is_docstring(body[0]) else 0
        last_future: cst.CSTNode | None = None
        last_import: cst.CSTNode | None = None
        for stmt in body[start:]:
            if _is_future_line(stmt):
                last_future = last_import = stmt
            elif _is_import_line(stmt):
                last_import = stmt
            elif not _only_imports(stmt):
                break
        docstring = body[0] if start else None
        if isinstance(wanted, ast.ImportFrom) and wanted.module == "__future__" and not wanted.level:
            return last_future or docstring
        return last_import or docstring


def _sort_key(node: cst.CSTNode) -> tuple[int, str]:
    """isort's order within a section: `import x` lines first, then `from x import` lines, by module, case aside."""
    first = _as_ast(node.body[0])
    if isinstance(first, ast.Import):
        return 0, first.names[0].name.lower()
    return 1, ("." * first.level + (first.module or "")).lower()


def _sorted_place(module: cst.Module, wanted: ast.stmt) -> tuple[cst.CSTNode, str] | None:
    """Where `wanted` sorts in the leading block: (the import line it follows, "after") in a sorted section it falls
    inside; else (the first line of a sorted section of its kind, "before") when it sorts before that line (`import
    contextlib` above `import datetime`: a patch puts imports at a section's top too). Its kind: the standard
    library, or its top-level package where sections import from it (isort's sections, which keep them apart)."""
    if isinstance(wanted, ast.Import):
        key = (0, wanted.names[0].name.lower())
    else:
        key = (1, ("." * wanted.level + (wanted.module or "")).lower())
    body = list(module.body)
    start = 1 if body and is_docstring(body[0]) else 0
    sections: list[list[cst.CSTNode]] = []
    for stmt in body[start:]:
        if _is_import_line(stmt) and not _is_future_line(stmt):
            blank = any(not line.comment for line in stmt.leading_lines)
            if blank or not sections:
                sections.append([])
            sections[-1].append(stmt)
        elif _is_future_line(stmt):
            sections.append([])
        elif _only_imports(stmt):
            sections.append([])
        else:
            break
    # the sections that import from its top-level package, when some do: `from sglang.x import y` sorts inside the
    # standard library's section too (`from dataclasses` ... `from typing`), which isort keeps apart
    top = key[1].split(".")[0]
    home = [sec for sec in sections if any(_sort_key(s)[1].split(".")[0] == top for s in sec)]
    for section in home or sections:
        keys = [_sort_key(s) for s in section]
        if len(keys) >= 2 and keys == sorted(keys) and keys[0] <= key <= keys[-1]:
            return [s for s, k in zip(section, keys) if k <= key][-1], "after"
    # above a section: the first sorted one whose every line is of its kind (sglang's own imports, or the standard
    # library's), that it sorts before
    stdlib = _stdlib(top)
    for section in home or [sec for sec in sections if stdlib and all(_stdlib(_sort_key(s)[1]) for s in sec)]:
        keys = [_sort_key(s) for s in section]
        if len(keys) >= 2 and keys == sorted(keys) and key < keys[0]:
            return section[0], "before"
    return None


def _stdlib(module: str) -> bool:
    """Is the module (dotted, absolute) of the standard library?"""
    import sys

    top = module.split(".")[0]
    return bool(top) and not module.startswith(".") and top in getattr(sys, "stdlib_module_names", ())


def _parse_import(code: str) -> ast.Import | ast.ImportFrom:
    """The one import statement of `code`; ValueError (a recipe error at load time) for anything else."""
    try:
        body = ast.parse(textwrap.dedent(code).strip()).body
    except SyntaxError as exc:
        raise ValueError(f"`code` is not valid Python: {exc.msg}") from None
    if len(body) != 1 or not isinstance(body[0], (ast.Import, ast.ImportFrom)):
        raise ValueError(f"`code` must be one import statement, got {code.strip()!r}")
    if any(a.name == "*" for a in body[0].names):
        raise ValueError("`from ... import *` is not supported: name the imports")
    return body[0]


def _statement(wanted: ast.Import | ast.ImportFrom, names: list[Binding]) -> str:
    """An import statement like `wanted` for only some of its names."""
    listed = ", ".join(b.text for b in names)
    if isinstance(wanted, ast.Import):
        return f"import {listed}"
    return f"from {'.' * wanted.level}{wanted.module or ''} import {listed}"


def _line(module: cst.Module, stmt: cst.CSTNode) -> str:
    """An import statement on one line, for messages."""
    return ast.unparse(ast.parse(textwrap.dedent(code_of(module, stmt))))
