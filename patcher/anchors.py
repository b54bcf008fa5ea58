"""Selectors such as `ServerArgs.add_cli_args` -> exactly one libcst node, or an error listing near candidates.

Nodes are addressed by a *path*: the chain of nodes from the module down to the node. libcst trees are immutable,
so an edit rebuilds only the nodes along that path (`replace_at`), which is much cheaper than a full-tree transform.
"""

from __future__ import annotations

import ast
import difflib
import functools
import re
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import unicodedata

import libcst as cst

from .errors import AnchorAmbiguous, AnchorNotFound, Candidate

if TYPE_CHECKING:
    from .patterns import Pattern

NodePath = tuple[cst.CSTNode, ...]  # module, ..., node

_COMPOUND_WITH_BODIES = (cst.If, cst.Else, cst.Try, cst.TryStar, cst.ExceptHandler, cst.ExceptStarHandler,
                         cst.Finally, cst.With, cst.For, cst.While, cst.Match, cst.MatchCase)


# --------------------------------------------------------------------------------------------------- source helpers


_CODE_OF: "OrderedDict[tuple[int, str, str], tuple[cst.CSTNode, str]]" = OrderedDict()


def code_of(module: cst.Module, node: cst.CSTNode) -> str:
    """The source of `node` without its leading comment/blank lines. Remembered for the last nodes asked (a node
    is immutable, and its code depends only on it and the module's indent and newline; each entry holds its node,
    so that its id is not reused): the checks of one file ask for the same classes and methods step after step."""
    key = (id(node), module.default_indent, module.default_newline)
    hit = _CODE_OF.get(key)
    if hit is not None and hit[0] is node:
        _CODE_OF.move_to_end(key)
        return hit[1]
    bare = node
    if hasattr(bare, "leading_lines"):
        bare = bare.with_changes(leading_lines=())
    if isinstance(bare, (cst.FunctionDef, cst.ClassDef)) and bare.lines_after_decorators:
        bare = bare.with_changes(lines_after_decorators=())
    text = module.code_for_node(bare)
    _CODE_OF[key] = (node, text)
    if len(_CODE_OF) > 2048:
        _CODE_OF.popitem(last=False)
    return text


def line_of_text(text: str, snippet: str, start: int = 0) -> int | None:
    """1-based line where the lines of `snippet` occur in `text` (at or after offset `start`), whatever their
    indentation: libcst renders a nested node relative to its block, so its continuation lines are re-indented."""
    lines = [ln.strip() for ln in snippet.strip("\n").splitlines()]
    if not lines or not lines[0]:
        return None
    # A text line matches a snippet line when it is that line between spaces/tabs, maybe before a "\r". Search for
    # the first line only and compare the next ones in place: one regex of a whole method's lines costs more to
    # compile than the rest of the step.
    first = re.compile(r"^[ \t]*" + re.escape(lines[0]) + r"[ \t]*\r?$", re.M)
    pos = start
    while (m := first.search(text, pos)) is not None:
        end = m.end()  # at the "\n" ending the line, or the end of the text
        for ln in lines[1:]:
            if end >= len(text):
                break
            nxt = text.find("\n", end + 1)
            nxt = len(text) if nxt == -1 else nxt
            row = text[end + 1:nxt]
            if (row[:-1] if row.endswith("\r") else row).strip(" \t") != ln:
                break
            end = nxt
        else:
            return text.count("\n", 0, m.start()) + 1
        pos = m.start() + 1
    return None


def normalized(code: str) -> str | None:
    """A formatting-independent fingerprint of Python code (its AST), or None if it does not parse.

    Docstrings are compared by their text without its common indentation (`inspect.cleandoc`): code inserted at a
    deeper indentation carries its docstrings' continuation lines along, and is still the same code. Every other
    string is compared by its value: `"\\n"` and `"\\n\\n"` are not the same separator."""
    import inspect
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(code).replace("\r\n", "\n"))
    except SyntaxError:
        return None
    for constant in docstring_constants(tree):
        if "\n" in constant.value:
            constant.value = inspect.cleandoc(constant.value)
    return ast.dump(tree)


def docstring_constants(tree: ast.AST) -> list[ast.Constant]:
    """The string constants of `tree` that document something: the first statement of a module, class or def, and a
    string statement right below an assignment of a module or class body (an attribute's docstring, as vLLM's config
    fields have). They move with the code they document (their indentation is no part of what they say)."""
    out: list[ast.Constant] = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for i, stmt in enumerate(node.body):
            if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
                    and isinstance(stmt.value.value, str)):
                continue
            if i == 0 or not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                    and isinstance(node.body[i - 1], (ast.Assign, ast.AnnAssign)):
                out.append(stmt.value)
    return out


def same_code(a: str, b: str) -> bool:
    """True when two snippets are the same code up to formatting and comments."""
    na = normalized(a)
    return na is not None and na == normalized(b)


def near(name: str, names: Sequence[str], n: int = 5) -> list[str]:
    """Names close to `name`, best first (for "did you mean" and candidate lists)."""
    return difflib.get_close_matches(name, list(dict.fromkeys(names)), n=n, cutoff=0.5)


# --------------------------------------------------------------------------------------------------- tree walking


def body_of(node: cst.CSTNode) -> Sequence[cst.CSTNode]:
    """The statements directly inside a module, class, function or compound statement's block."""
    if isinstance(node, cst.Module):
        return node.body
    body = getattr(node, "body", None)
    if isinstance(body, (cst.IndentedBlock, cst.SimpleStatementSuite)):
        return body.body
    if isinstance(body, (list, tuple)):
        return body
    return ()


def child_blocks(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Nodes with statement bodies nested in a compound statement (if/elif/else, try/except/finally, ...)."""
    if isinstance(node, cst.If):
        yield node
        if node.orelse is not None:
            yield from child_blocks(node.orelse)
    elif isinstance(node, cst.Else):
        yield node
    elif isinstance(node, (cst.Try, cst.TryStar)):
        yield node
        yield from node.handlers
        if node.orelse is not None:
            yield node.orelse
        if node.finalbody is not None:
            yield node.finalbody
    elif isinstance(node, (cst.For, cst.While)):
        yield node
        if node.orelse is not None:
            yield node.orelse
    elif isinstance(node, cst.With):
        yield node
    elif isinstance(node, cst.Match):
        yield from node.cases


def walk_statements(path: NodePath, *, into_defs: bool = False) -> Iterator[NodePath]:
    """Every statement under `path[-1]`, depth first, with its path; into nested defs/classes only if asked."""
    for stmt in body_of(path[-1]):
        spath = path + (stmt,)
        yield spath
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            if into_defs:
                yield from walk_statements(spath, into_defs=True)
            continue
        for block in child_blocks(stmt):
            bpath = spath if block is stmt else _path_to_block(spath, block)
            yield from walk_statements(bpath, into_defs=into_defs)


def _path_to_block(stmt_path: NodePath, block: cst.CSTNode) -> NodePath:
    """Path from the module to a nested block (an `else`, a handler) of the statement at the end of `stmt_path`."""
    stmt = stmt_path[-1]
    chain: list[cst.CSTNode] = []

    def find(node: cst.CSTNode) -> bool:
        if node is block:
            return True
        for child in node.children:
            if isinstance(child, (cst.If, cst.Else, cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally, cst.MatchCase)):
                chain.append(child)
                if find(child):
                    return True
                chain.pop()
        return False

    find(stmt)
    return stmt_path + tuple(chain)


def _defs(path: NodePath, kind: type) -> Iterator[NodePath]:
    """Class or function definitions visible at the level of `path[-1]` (looking through if/try blocks)."""
    for spath in walk_statements(path):
        if isinstance(spath[-1], kind):
            yield spath


def _dotted_defs(module: cst.Module) -> dict[str, cst.CSTNode]:
    """Every class and function of the module by its dotted path (`ServerArgs.__post_init__`), nested ones too."""
    out: dict[str, cst.CSTNode] = {}

    def walk(path: NodePath, prefix: str) -> None:
        for p in _defs(path, (cst.ClassDef, cst.FunctionDef)):
            name = prefix + p[-1].name.value
            out.setdefault(name, p[-1])
            walk(p, name + ".")

    walk((module,), "")
    return out


def ident(name: str) -> str:
    """A name as Python compares identifiers: NFKC-normalised (PEP 3131), so that `ｆoo` and `foo` are one name."""
    return unicodedata.normalize("NFKC", name) if not name.isascii() else name


def class_members(cpath: NodePath) -> dict[str, cst.CSTNode]:
    """Every name a class body binds (methods, nested classes, fields and plain assignments, also inside its
    if/try blocks), NFKC-normalised, to the first statement that binds it."""
    members: dict[str, cst.CSTNode] = {}
    for p in walk_statements(cpath):
        stmt = p[-1]
        names: list[str] = []
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            names.append(stmt.name.value)
        elif isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                    names.append(small.target.value)
                elif isinstance(small, cst.Assign):
                    names += [t.target.value for t in small.targets if isinstance(t.target, cst.Name)]
        for name in names:
            members.setdefault(ident(name), stmt)
    return members


def find_def(module: cst.Module, dotted: str, *, what: str = "definition") -> NodePath:
    """Resolve `A.B.c` to the single class or function definition it names (looking through if/try blocks); a
    property's accessor is named by `.getter`, `.setter` or `.deleter` after it (`Key.value.setter`)."""
    path: NodePath = (module,)
    parts = dotted.split(".")
    depth = 0
    while depth < len(parts):
        part = parts[depth]
        kind = (cst.ClassDef, cst.FunctionDef)
        found = [p for p in _defs(path, kind) if ident(p[-1].name.value) == ident(part)]
        where = ".".join(parts[:depth]) or "the module"
        if not found:
            nodes = {p[-1].name.value: p[-1] for p in _defs(path, kind)}
            candidates = [Candidate(f"`{n}`", node=nodes[n]) for n in near(part, list(nodes))]
            # the likeliest slips: a method named without its class (`__post_init__` for `ServerArgs.__post_init__`)
            # or the path begun with the module's (`sglang.srt.server_args.ServerArgs`): the defs of that name
            # deeper in the module, by the path that names them
            deeper = _dotted_defs(module)
            tail = ".".join(parts[depth:])
            named = [n for n in deeper if n.endswith("." + tail) or n == tail] or \
                [n for k in range(1, len(parts)) for n in deeper if n == ".".join(parts[k:])]
            candidates += [Candidate(f"`{n}`", node=deeper[n]) for n in named[:3] if f"`{n}`" not in
                           {c.text for c in candidates}]
            raise AnchorNotFound(
                f"no {what} `{part}` in {where}" + (f" (looking for `{dotted}`)" if depth else "")
                + ("; a dotted path starts at the module's top level (the module is the step's `file:`)"
                   if named else ""),
                candidates=candidates,
            )
        found = _run_time(found, where)
        if len(found) > 1 and all(accessor(p[-1]) for p in found):
            # a property's getter, setter and deleter share its name: `Key.value.setter` names one
            wanted = parts[depth + 1] if depth + 1 < len(parts) else None
            chosen = [p for p in found if accessor(p[-1]) == wanted]
            if len(chosen) != 1:
                raise AnchorAmbiguous(
                    f"`{part}` is a property defined {len(found)} times in {where} (its accessors)",
                    candidates=[Candidate(f"`{'.'.join(parts[:depth + 1])}.{accessor(p[-1])}`", node=p[-1])
                                for p in found],
                    hint="name one accessor: add `.getter`, `.setter` or `.deleter` to the anchor",
                )
            found, depth = chosen, depth + 1
        if len(found) > 1:
            raise AnchorAmbiguous(
                f"`{part}` is defined {len(found)} times in {where}",
                candidates=[Candidate(f"`{part}`", node=p[-1]) for p in found],
            )
        path = found[0]
        depth += 1
    return path


def _run_time(found: list[NodePath], where: str) -> list[NodePath]:
    """The definitions of one name that the interpreter runs: `@overload` stubs left out beside the function they
    describe, and one under `if TYPE_CHECKING:` beside one that is not (the typing stub of a name bound otherwise at
    run time). A definition under `if TYPE_CHECKING:` alone is refused: an edit there would never run."""
    if not found:
        return found
    typed = [p for p in found if type_checking_only(p)]
    if typed and len(typed) == len(found):
        raise AnchorNotFound(f"`{found[0][-1].name.value}` is defined in {where} under `if TYPE_CHECKING:` only, for "
                             "type checkers: the interpreter never runs it, so an edit there would never run",
                             candidates=[Candidate(f"`{found[0][-1].name.value}`", node=found[0][-1])],
                             hint="edit what binds the name at run time (the `else:` arm, or the assignment below)")
    found = [p for p in found if p not in typed]
    stubs = [p for p in found if isinstance(p[-1], cst.FunctionDef) and any(
        (d.decorator.value if isinstance(d.decorator, cst.Name) else
         d.decorator.attr.value if isinstance(d.decorator, cst.Attribute) else "") == "overload"
        for d in p[-1].decorators)]
    return [p for p in found if p not in stubs] if len(stubs) < len(found) else found


def type_checking_only(path: NodePath) -> bool:
    """Whether the statement at the end of `path` is in the body of an `if TYPE_CHECKING:` (not its `else:`)."""
    for i, node in enumerate(path[:-1]):
        if isinstance(node, cst.If) and type_checking_test(node.test) and any(s is path[i + 1] for s in body_of(node)):
            return True
    return False


def type_checking_test(test: Any) -> bool:
    """Is an `if` test `TYPE_CHECKING` or `X.TYPE_CHECKING` (a block type checkers read and the interpreter skips)?
    Takes an `ast` or a libcst expression."""
    if isinstance(test, (ast.Name, cst.Name)):
        return (test.id if isinstance(test, ast.Name) else test.value) == "TYPE_CHECKING"
    if isinstance(test, ast.Attribute):
        return test.attr == "TYPE_CHECKING"
    return isinstance(test, cst.Attribute) and test.attr.value == "TYPE_CHECKING"


def accessor(node: cst.CSTNode) -> str | None:
    """Which accessor of a property a function is: "getter" (`@property`, `@<name>.getter`), "setter"
    (`@<name>.setter`) or "deleter"; None for any other function."""
    if not isinstance(node, cst.FunctionDef):
        return None
    for d in node.decorators:
        dec = d.decorator
        if isinstance(dec, cst.Name) and dec.value in ("property", "cached_property"):
            return "getter"
        if isinstance(dec, cst.Attribute) and isinstance(dec.value, cst.Name) and dec.value.value == node.name.value \
                and dec.attr.value in ("getter", "setter", "deleter"):
            return dec.attr.value
    return None


def find_class(module: cst.Module, dotted: str) -> NodePath:
    path = find_def(module, dotted, what="class")
    if not isinstance(path[-1], cst.ClassDef):
        raise AnchorNotFound(f"`{dotted}` is a function, not a class")
    return path


def find_function(module: cst.Module, dotted: str) -> NodePath:
    path = find_def(module, dotted, what="function")
    if not isinstance(path[-1], cst.FunctionDef):
        raise AnchorNotFound(f"`{dotted}` is a class, not a function")
    return path


def lines_of(module: cst.Module, nodes: Sequence[cst.CSTNode]) -> list[int | None]:
    """Exact 1-based start lines of `nodes` (uses position metadata: only on error paths, it costs a full pass)."""
    from libcst.metadata import MetadataWrapper, PositionProvider

    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    return [positions[n].start.line if n in positions else None for n in nodes]


# --------------------------------------------------------------------------------------------------- editing


def _replace_child(parent: cst.CSTNode, old: cst.CSTNode, new: cst.CSTNode | Sequence[cst.CSTNode]) -> cst.CSTNode:
    """Return `parent` with its direct child `old` replaced by `new` (one node, or several in a sequence field)."""
    for name in parent.__dataclass_fields__:
        value = getattr(parent, name)
        if value is old:
            return parent.with_changes(**{name: new})
        if isinstance(value, (list, tuple)) and any(v is old for v in value):
            out: list[cst.CSTNode] = []
            for v in value:
                if v is old:
                    out.extend(new if isinstance(new, (list, tuple)) else [new])
                else:
                    out.append(v)
            return parent.with_changes(**{name: tuple(out)})
        if isinstance(value, cst.CSTNode) and not isinstance(value, (cst.BaseExpression,)):
            # blocks sit one level down (FunctionDef.body is an IndentedBlock holding the statements)
            if any(c is old for c in body_of_block(value)):
                return parent.with_changes(**{name: _replace_child(value, old, new)})
    raise LookupError(f"{type(old).__name__} is not a child of {type(parent).__name__}")


def body_of_block(node: cst.CSTNode) -> Sequence[cst.CSTNode]:
    if isinstance(node, (cst.IndentedBlock, cst.SimpleStatementSuite)):
        return node.body
    return ()


def replace_at(path: NodePath, new: cst.CSTNode | Sequence[cst.CSTNode]) -> cst.Module:
    """Replace `path[-1]` by `new` and rebuild the ancestors on the path; returns the new module."""
    replacement: cst.CSTNode | Sequence[cst.CSTNode] = new
    for depth in range(len(path) - 1, 0, -1):
        replacement = _replace_child(path[depth - 1], path[depth], replacement)
    assert isinstance(replacement, cst.Module)
    return replacement


def _block_indent(block: cst.CSTNode, module: cst.Module) -> str:
    indent = getattr(block, "indent", None)
    return module.default_indent if indent is None else indent


def indent_of(path: NodePath) -> str:
    """The absolute indentation of the statement at `path[-1]` (the sum of its enclosing blocks' indents)."""
    module = path[0]
    assert isinstance(module, cst.Module)
    out = ""
    for parent, child in zip(path, path[1:]):
        block = getattr(parent, "body", None)
        if isinstance(block, cst.IndentedBlock) and any(c is child for c in block.body):
            out += _block_indent(block, module)
    return out


def fit(new_stmts: Sequence[cst.CSTNode], indent: str, module: cst.Module) -> list[cst.CSTNode]:
    """Re-parse recipe statements at their final indentation, so that multi-line strings (docstrings) written
    relative to the snippet's column 0 move with the code; a no-op at module level."""
    if not indent or not new_stmts:
        return list(new_stmts)
    nl = module.default_newline
    code = cst.Module(body=tuple(new_stmts), default_indent=module.default_indent, default_newline=nl).code
    wrapped = "if True:" + nl + indent_code(code, indent)
    parsed = cst.parse_module(wrapped, config=parsing_config(module))
    return list(parsed.body[0].body.body)


_CODE: "OrderedDict[int, tuple[cst.Module, str]]" = OrderedDict()


def module_code(module: cst.Module) -> str:
    """`module.code`, remembered for the last few modules (libcst nodes take no weak reference: each entry holds its
    module, so that its id is not reused): the checks that first ask whether a name occurs at all."""
    hit = _CODE.get(id(module))
    if hit is not None and hit[0] is module:
        _CODE.move_to_end(id(module))
        return hit[1]
    text = module.code
    _CODE[id(module)] = (module, text)
    while len(_CODE) > 8:
        _CODE.popitem(last=False)
    return text


def indent_code(code: str, indent: str) -> str:
    """`code` with `indent` before each line that holds code, as `textwrap.indent`, but not before a line that
    begins inside a multi-line string other than a docstring: a template or prompt keeps its value (a docstring
    moves with the code, as it is written relative to it)."""
    inside = string_continuation_lines(code)
    rows = code.splitlines(keepends=True)
    return "".join(r if not r.strip() or i in inside else indent + r for i, r in enumerate(rows, 1))


def string_continuation_lines(code: str) -> set[int]:
    """The lines (1-based) of `code` that begin inside a multi-line string or f-string that is no docstring;
    none when `code` does not parse alone."""
    import io
    import tokenize

    try:
        tree = ast.parse(code)
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (SyntaxError, ValueError, tokenize.TokenError, RecursionError, MemoryError):
        return set()
    docstrings = {c.lineno for c in docstring_constants(tree)}
    start_kind, end_kind = getattr(tokenize, "FSTRING_START", None), getattr(tokenize, "FSTRING_END", None)
    out: set[int] = set()
    opened: list[int] = []
    for tok in tokens:
        if start_kind is not None and tok.type == start_kind:
            opened.append(tok.start[0])
            continue
        if end_kind is not None and tok.type == end_kind and opened:
            first, last = opened.pop(), tok.end[0]
        elif tok.type == tokenize.STRING:
            first, last = tok.start[0], tok.end[0]
        else:
            continue
        if last > first and first not in docstrings and not opened:
            out.update(range(first + 1, last + 1))
    return out


def insert_after(path: NodePath, new_stmts: Sequence[cst.CSTNode]) -> cst.Module:
    """Insert statements right after the statement at `path[-1]`, in the same block."""
    return replace_at(path, [path[-1], *fit(new_stmts, indent_of(path), path[0])])


def insert_before(path: NodePath, new_stmts: Sequence[cst.CSTNode]) -> cst.Module:
    """Insert statements right before the statement at `path[-1]`; its leading comments move above the new code."""
    anchor = path[-1]
    new_stmts = fit(new_stmts, indent_of(path), path[0])
    lead = getattr(anchor, "leading_lines", ())
    if lead and new_stmts:
        first = new_stmts[0]
        new_stmts = [first.with_changes(leading_lines=tuple(lead) + tuple(first.leading_lines)), *new_stmts[1:]]
        anchor = anchor.with_changes(leading_lines=())
    return replace_at(path, [*new_stmts, anchor])


def set_block_body(path: NodePath, statements: Sequence[cst.CSTNode], *,
                   placed: Sequence[cst.CSTNode] = ()) -> cst.Module:
    """Replace the statements of the block owned by `path[-1]` (a def, class or compound statement). New statements
    are fitted to the block's indentation, except those of `placed` (already there: a new header on the release's
    block, whose strings must not move)."""
    owner = path[-1]
    body = owner.body
    if isinstance(body, cst.SimpleStatementSuite):
        raise AnchorNotFound("the block is written on one line (`if x: y`); specpatch only edits indented blocks")
    existing = {id(stmt) for stmt in (*body.body, *placed)}
    indent = indent_of(path) + _block_indent(body, path[0])
    fitted = [stmt if id(stmt) in existing else fit([stmt], indent, path[0])[0] for stmt in statements]
    return replace_at(path, owner.with_changes(body=body.with_changes(body=tuple(fitted))))


def parsing_config(module: cst.Module) -> cst.PartialParserConfig:
    """`module.config_for_parsing`, built once per encoding, indent and newline (it validates its fields each time)."""
    # libcst infers a form feed at the start of an indented line into the indent, and then refuses it back
    indent = module.default_indent.replace("\x0c", "") or "    "
    return _parsing_config(module.encoding, indent, module.default_newline)


@functools.lru_cache(maxsize=32)
def _parsing_config(encoding: str, indent: str, newline: str) -> cst.PartialParserConfig:
    return cst.PartialParserConfig(encoding=encoding, default_indent=indent, default_newline=newline)


_BRACKETS = bytes(range(256)).translate(None, b"()[]{}")  #: every byte but the brackets (to delete them)
#: nesting above which a source is checked with Python's own parser first: libcst's native parser overflows its stack
#: (a segmentation fault, no Python exception) on some thousands of levels; Python refuses more than 200
_DEEP = 100


def bracket_depth(source: str | bytes) -> int:
    """The deepest nesting of brackets in `source`, counting those in strings and comments too (an upper bound of
    sorts: cheap, a few ms for sglang's largest file)."""
    data = source.encode("utf-8", "surrogatepass") if isinstance(source, str) else source
    depth = deepest = 0
    for b in data.translate(None, _BRACKETS):
        depth = depth + 1 if b in b"([{" else depth - 1
        deepest = max(deepest, depth)
    return deepest


def too_deep(source: str | bytes) -> str | None:
    """Why libcst must not be given `source`, or None: brackets nested past what Python's own parser accepts (checked
    with `ast` only when a count of the brackets alone, strings and comments included, passes `_DEEP`)."""
    import ast

    data = source.encode("utf-8", "surrogatepass") if isinstance(source, str) else source
    if bracket_depth(data) <= _DEEP:
        return None
    try:
        ast.parse(data)
    except (SyntaxError, ValueError) as exc:
        return f"{getattr(exc, 'msg', exc)} (line {getattr(exc, 'lineno', '?')})"
    except (RecursionError, MemoryError):
        return "nested too deeply to be parsed"
    return None


def refuse_unparsable(text: str, what: str) -> None:
    """RecipeError for recipe code libcst must not be given: nested past Python's parser, or holding a NUL byte."""
    from .errors import RecipeError

    problem = too_deep(text) or ("it holds a NUL byte" if "\0" in text else None)
    if problem:
        raise RecipeError(f"the step's {what} is not valid Python: {problem}")


def parse_statements(code: str, module: cst.Module, *, what: str = "code") -> list[cst.BaseStatement]:
    """Parse recipe code into statements that use the target module's newline and indentation."""
    import textwrap

    return parsed_statements(textwrap.dedent(code.replace("\r\n", "\n")).strip("\n") + "\n", module, what=what)


def parsed_statements(text: str, module: cst.Module, *, what: str = "code") -> list[cst.BaseStatement]:
    """Recipe code (dedented, ending with a newline) parsed for `module`: its newline (inside multi-line strings
    too: CRLF files stay CRLF) and its parser's Python version; comments above the first statement stay with it."""
    from .errors import RecipeError

    refuse_unparsable(text, what)
    try:
        parsed = cst.parse_module(text.replace("\n", module.default_newline), config=parsing_config(module))
    except cst.ParserSyntaxError as exc:
        line = exc.raw_line
        try:  # Python's own parser names the line a tokenizer error is on (libcst's says 1 for mixed tabs)
            ast.parse(text)
        except SyntaxError as own:
            line = own.lineno or line
        except (ValueError, RecursionError):
            pass
        raise RecipeError(f"the step's {what} is not valid Python: {exc.message} (line {line})") from None
    try:  # libcst reads newer syntax than the running interpreter, whose `ast` every check of specpatch reads
        ast.parse(text)
    except SyntaxError as exc:
        import sys

        version = ".".join(map(str, sys.version_info[:2]))
        raise RecipeError(f"the step's {what} is not Python {version}, the Python specpatch runs on (line "
                          f"{exc.lineno}: {exc.msg}): newer syntax (`def f[T]`, `type X = ...`) cannot be checked",
                          hint="run specpatch with the Python the server runs, or write the code for this one") from None
    except (ValueError, RecursionError):
        pass
    body = list(parsed.body)
    if body and parsed.header:
        # libcst gives comments above the first statement to the module header: keep them with the statement
        body[0] = body[0].with_changes(leading_lines=(*parsed.header, *body[0].leading_lines))
    return body


def iter_calls_named(stmt: cst.CSTNode, attr: str) -> Iterator[cst.Call]:
    """Top-level calls of a simple statement whose function is `<anything>.attr(...)` or `attr(...)`."""
    if not isinstance(stmt, cst.SimpleStatementLine):
        return
    for small in stmt.body:
        value = getattr(small, "value", None)
        if isinstance(value, cst.Call):
            fn = value.func
            name = fn.attr.value if isinstance(fn, cst.Attribute) else fn.value if isinstance(fn, cst.Name) else None
            if name == attr:
                yield value


def string_value(node: cst.BaseExpression) -> str | None:
    """The value of a plain string literal node (no f-strings), else None."""
    if isinstance(node, cst.SimpleString):
        raw = node.value
        # `"--flag"` without prefix, backslash or triple quotes is its text: ast.literal_eval (what libcst's
        # evaluated_value runs) would say the same, at a cost that shows on the hundreds of flags of add_cli_args
        if raw[0] in "'\"" and raw[:3] != raw[0] * 3 and "\\" not in raw and "\0" not in raw:
            return raw[1:-1]
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None



# --------------------------------------------------------------------------------------------------- code patterns


def statement_ast(module: cst.Module, stmt: cst.CSTNode) -> ast.stmt | None:
    """The `ast` of one statement (simple or compound), or None for a `a; b` line or code `ast` cannot parse."""
    import textwrap

    try:
        body = ast.parse(textwrap.dedent(code_of(module, stmt))).body
    except SyntaxError:
        return None
    return body[0] if len(body) == 1 else None


def expression_ast(module: cst.Module, expr: cst.BaseExpression) -> ast.expr | None:
    """The `ast` of an expression node (e.g. an `if` test, parentheses and line breaks included)."""
    try:
        return ast.parse(module.code_for_node(expr).strip(), mode="eval").body
    except SyntaxError:
        return None


def is_docstring(stmt: cst.CSTNode) -> bool:
    """True for a statement that is a lone string literal (a docstring when it comes first in its block)."""
    return (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr)
            and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))


def statements_matching(module: cst.Module, path: NodePath, pattern: "Pattern", *,
                        into_defs: bool = False) -> list[NodePath]:
    """Statements under `path[-1]` (any block depth, not inside nested defs unless `into_defs`) that match a code
    pattern."""
    want = cst.BaseCompoundStatement if pattern.is_compound else cst.SimpleStatementLine
    out: list[NodePath] = []
    for spath in walk_statements(path, into_defs=into_defs):
        stmt = spath[-1]
        if isinstance(stmt, want) and not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) != 1):
            tree = statement_ast(module, stmt)
            if tree is not None and pattern.matches_statement(tree):
                out.append(spath)
    return out


def near_statements(module: cst.Module, path: NodePath, pattern: "Pattern", n: int = 5) -> list[Candidate]:
    """Statements under `path[-1]` that look like the pattern, best first (for "anchor not found" errors)."""
    from .patterns import COMPOUND

    by_text: dict[str, cst.CSTNode] = {}
    for spath in walk_statements(path):
        tree = statement_ast(module, spath[-1])
        if tree is None or (isinstance(tree, COMPOUND) != pattern.is_compound):
            continue
        text = ast.unparse(tree).split("\n", 1)[0]
        by_text.setdefault(text, spath[-1])
    return [Candidate(f"`{t}`", node=by_text[t]) for t in near(pattern.describe().split("\n", 1)[0], list(by_text), n)]


def if_statements(path: NodePath) -> Iterator[NodePath]:
    """Every `if` under `path[-1]` (any depth, not inside nested defs), `elif`s included, with their paths."""
    for spath in walk_statements(path):
        node = spath[-1]
        while isinstance(node, cst.If):
            yield spath if node is spath[-1] else _path_to_block(spath, node)
            node = node.orelse


def else_arm(if_path: NodePath) -> NodePath | None:
    """Path to the final `else:` of the if/elif chain that starts at `if_path[-1]`, or None if it has none."""
    node = if_path[-1]
    while isinstance(node, cst.If) and isinstance(node.orelse, cst.If):
        node = node.orelse
    if not isinstance(node, cst.If) or node.orelse is None:
        return None
    return _path_to_block(if_path, node.orelse)
