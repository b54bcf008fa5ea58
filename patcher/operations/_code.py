"""Helpers shared by the code-matching operations: scopes, blocks at any depth, code fingerprints, expressions."""

from __future__ import annotations

import ast
import contextlib
import textwrap
from pathlib import PurePosixPath
from typing import Any, Callable, Iterator, Sequence

import libcst as cst

from ..anchors import (NodePath, body_of, code_of, find_def, normalized, parsed_statements, type_checking_test,
                       walk_statements)
from ..errors import AnchorNotFound, RecipeError


def scope_path(module: cst.Module, within: str | None) -> NodePath:
    """The path of the class or function `within` names (dotted), or of the module when it is None."""
    return (module,) if not within else find_def(module, within)


def module_assignments(module: cst.Module, name: str) -> list[tuple[cst.SimpleStatementLine, cst.BaseSmallStatement]]:
    """(line, assignment) for each `name = ...` or `name: T [= ...]` at the module's own level (a line of several
    statements gives each of its assignments)."""
    return [(st, small) for st in module.body if isinstance(st, cst.SimpleStatementLine) for small in st.body
            if isinstance(small, (cst.Assign, cst.AnnAssign)) and any(
                isinstance(t, cst.Name) and t.value == name
                for t in ([x.target for x in small.targets] if isinstance(small, cst.Assign) else [small.target]))]


def expression_scope(module: cst.Module, within: str | None) -> NodePath:
    """`scope_path`, and for the operations on expressions also a variable the module assigns once at its own level
    (`within: multimodal_model_archs` for the list `multimodal_model_archs = [...]`): that statement."""
    try:
        return scope_path(module, within)
    except AnchorNotFound as exc:
        if not within or "." in within:
            raise
        found = [st for st, _ in module_assignments(module, within) if len(st.body) == 1]
        if len(found) == 1:
            return (module, found[0])
        exc.message = exc.message.replace("no definition", "no definition or module-level variable", 1) + (
            f" (it assigns `{within}` {len(found)} times at its top level)" if found else "")
        raise


def blocks_under(path: NodePath) -> Iterator[tuple[NodePath, Sequence[cst.CSTNode]]]:
    """Every statement block under `path[-1]`, itself included, at any depth (nested defs too), as
    (path of the block's owner, its statements), in source order."""
    yield path, body_of(path[-1])
    seen: set[int] = {id(path[-1])}
    for spath in walk_statements(path, into_defs=True):
        owner = spath[-2]
        if id(owner) not in seen:
            seen.add(id(owner))
            yield spath[:-1], body_of(owner)


#: node id -> (node, fingerprint) while `caching()` is on: libcst trees are immutable and an edit rebuilds only the
#: nodes on its path, so the importer, which tries many steps on one file, reads each statement once
_CACHE: dict[int, tuple[cst.CSTNode, str | None]] | None = None


@contextlib.contextmanager
def caching() -> Iterator[None]:
    """Remember statement fingerprints by node for the duration (the nodes are kept alive meanwhile)."""
    global _CACHE
    saved, _CACHE = _CACHE, {}
    try:
        yield
    finally:
        _CACHE = saved


def fingerprint(module: cst.Module, node: cst.CSTNode) -> str | None:
    """The code of a statement up to formatting and comments (an AST dump), None if `ast` cannot read it."""
    if _CACHE is None:
        return normalized(code_of(module, node))
    hit = _CACHE.get(id(node))
    if hit is not None and hit[0] is node:
        return hit[1]
    value = normalized(code_of(module, node))
    _CACHE[id(node)] = (node, value)
    return value


def parse_block(code: str, module: cst.Module, *, what: str = "code") -> list[cst.BaseStatement]:
    """Recipe statements parsed for `module` (its newline and indentation); unlike `anchors.parse_statements`, blank
    lines at the top of the code are kept (they belong to the first statement, as its leading lines)."""
    text = textwrap.dedent(code.replace("\r\n", "\n")).rstrip()
    if not text.strip():
        return []
    return parsed_statements(text + "\n", module, what=what)


def parse_expression(code: str, *, what: str = "code") -> cst.BaseExpression:
    """One expression of recipe code; it may span lines (it is read inside parentheses)."""
    text = textwrap.dedent(code.replace("\r\n", "\n")).strip()
    try:
        ast.parse(text, mode="eval")
    except SyntaxError as exc:
        try:  # continuation lines copied from inside brackets (`a is None\n    or b is None`): read in them
            ast.parse(f"(\n{text}\n)", mode="eval")
        except SyntaxError:
            raise RecipeError(f"the step's {what} must be one Python expression, got {text[:80]!r}: {exc.msg}") \
                from None
    try:
        if "\n" not in text:
            return cst.parse_expression(text)
        wrapped = cst.parse_expression(f"({text})")
    except cst.ParserSyntaxError:
        # Python reads it (a comment at its end, past the expression): libcst keeps comments on nodes, and one
        # after the last token belongs to no node of an expression
        raise RecipeError(f"the step's {what} ends with a comment, which an expression has no place for: "
                          f"{text.splitlines()[-1].strip()[:80]!r}; move it into the code or leave it out") from None
    # drop only the parentheses added here
    return wrapped.with_changes(lpar=wrapped.lpar[1:], rpar=wrapped.rpar[:-1])


def expression_key(code: str) -> str | None:
    """An expression up to formatting and comments (an AST dump), None if it does not parse."""
    try:
        return ast.dump(ast.parse(textwrap.dedent(code).strip(), mode="eval").body)
    except SyntaxError:
        try:  # continuation lines of a multi-line expression read alone
            return ast.dump(ast.parse(f"({textwrap.dedent(code).strip()})", mode="eval").body)
        except SyntaxError:
            return None


def node_key(module: cst.Module, node: cst.CSTNode) -> str | None:
    return expression_key(module.code_for_node(node))


class _Collector(cst.CSTVisitor):
    def __init__(self, kinds: tuple[type, ...]) -> None:
        self.kinds = kinds
        self.found: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, self.kinds):
            self.found.append(node)
        return True


def nodes_under(node: cst.CSTNode, kinds: tuple[type, ...]) -> list[cst.CSTNode]:
    """Every node of one of `kinds` under `node` (itself included), in source order."""
    visitor = _Collector(kinds)
    node.visit(visitor)
    return visitor.found


def contains(outer: cst.CSTNode, inner: cst.CSTNode) -> bool:
    """Is `inner` (by identity) `outer` or one of its descendants?"""
    if outer is inner:
        return True
    return any(contains(child, inner) for child in outer.children)


WITHIN = "the class or function to search, dotted; default: the whole module"
EXPRESSION_WITHIN = ("the class or function to search, dotted, or a variable the module assigns once at its top "
                     "level (`NAME = [...]`); default: the whole module")


def check_expression(code: str) -> None:
    """Option check at load time: `code` is one Python expression."""
    if expression_key(code) is None:
        raise ValueError(f"must be one Python expression, got {line_text(code)!r}")


def load_check(parse):
    """An option check at load time from a parser that raises RecipeError: the error as a ValueError, which the
    loader reports with the step's line."""
    def check(code: str) -> None:
        try:
            parse(code)
        except RecipeError as exc:
            raise ValueError(exc.message) from None
    return check


def first_line(module: cst.Module, node: cst.CSTNode) -> str:
    """The first line of a node's code, stripped (for candidate lists)."""
    text = code_of(module, node).strip()
    return text.splitlines()[0] if text else text


def line_text(code: str) -> str:
    """A snippet shown on one line in messages."""
    text = " ".join(code.split())
    return text if len(text) <= 80 else text[:77] + "..."


def line_text_against(code: str, other: str) -> str:
    """`line_text` of `code`, but around where it first differs from `other` when both are longer than a message
    shows: a near candidate cut at the same point as the anchor would read the same, and hide what upstream
    changed."""
    text, want = " ".join(code.split()), " ".join(other.split())
    if len(text) <= 80:
        return text
    at = next((i for i, (a, b) in enumerate(zip(text, want)) if a != b), min(len(text), len(want)))
    if at < 60:
        return text[:77] + "..."
    start = at - 30
    return "..." + text[start:start + 74] + ("..." if start + 74 < len(text) else "")


class _Expressions(cst.CSTVisitor):
    """Collects expression nodes of some kinds, leaving out names that are not expressions (the `attr` of
    `a.attr`, a keyword's name, the name of a def, class, parameter or import)."""

    def __init__(self, kinds: tuple[type, ...]) -> None:
        self.kinds = kinds
        self.found: list[cst.CSTNode] = []
        self.paths: dict[int, tuple[cst.CSTNode, ...]] = {}
        self.skip: set[int] = set()
        self.stack: list[cst.CSTNode] = []

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.stack.append(node)
        if isinstance(node, cst.Attribute):
            self.skip.add(id(node.attr))
        elif isinstance(node, cst.Arg) and node.keyword is not None:
            self.skip.add(id(node.keyword))
        elif isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Param)):
            self.skip.add(id(node.name))
        elif isinstance(node, (cst.Import, cst.ImportFrom)):
            return False  # on_leave still runs: it pops
        if isinstance(node, self.kinds) and id(node) not in self.skip:
            self.found.append(node)
            self.paths[id(node)] = tuple(self.stack)
        return True


class Expressions(list):
    """The expression nodes found under a scope, with the path to each (to replace one without a full-tree pass)."""

    def __init__(self, found: list[cst.CSTNode], paths: dict[int, tuple[cst.CSTNode, ...]],
                 scope: tuple[cst.CSTNode, ...]) -> None:
        super().__init__(found)
        self._paths, self._scope = paths, scope

    def replace(self, node: cst.CSTNode, new: cst.CSTNode) -> cst.Module:
        """The module with `node` (one of these) replaced by `new`; only the nodes above it are rebuilt."""
        from ..anchors import _replace_child

        path = self._scope[:-1] + self._paths[id(node)]
        replacement: cst.CSTNode = new
        for depth in range(len(path) - 1, 0, -1):
            replacement = _replace_child(path[depth - 1], path[depth], replacement)
        assert isinstance(replacement, cst.Module)
        return replacement


def expressions_under(scope: tuple[cst.CSTNode, ...], kinds: tuple[type, ...]) -> Expressions:
    """Expression nodes of `kinds` under `scope[-1]` (a path from the module), in source order (see `_Expressions`
    for what is left out)."""
    visitor = _Expressions(kinds)
    scope[-1].visit(visitor)
    return Expressions(visitor.found, visitor.paths, scope)


def insert_item(items: Sequence, index: int, new, opening: object = None, closing: object = None) -> list:
    """A copy of a comma-separated list of nodes (call arguments, literal elements, parameters) with `new` at
    `index`, its commas laid out like those of its neighbours; `opening` is the whitespace after the opening
    bracket (it says how items of a multi-line list are indented), `closing` the whitespace before the closing
    bracket: the comment at the end of the last item's line, which libcst keeps there (or after a call's last
    argument, a signature's last parameter), stays on that item's line when `new` goes after it (the caller takes
    it off `closing` with `without_comment`)."""
    items = list(items)
    space = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    if not items:
        return [new.with_changes(comma=cst.MaybeSentinel.DEFAULT)]
    indent = item_indent(opening, items)
    if indent:
        new = new.visit(Shift(indent))  # a multi-line item's continuation lines at the items' indentation
    if index < len(items):
        ref = items[index - 1] if index > 0 else items[0]
        comma = _uncommented(ref.comma) if isinstance(ref.comma, cst.Comma) else space
        after = ref.comma.whitespace_after if isinstance(ref.comma, cst.Comma) else None
        if index > 0 and isinstance(after, cst.ParenthesizedWhitespace) and after.empty_lines:
            # the comment and blank lines above the next item stay above it: the new item goes above them
            items[index - 1] = ref.with_changes(comma=ref.comma.with_changes(
                whitespace_after=after.with_changes(empty_lines=())))
        items.insert(index, new.with_changes(comma=comma))
        return items
    last = items[-1]
    if len(items) >= 2 and isinstance(items[-2].comma, cst.Comma):
        sep = items[-2].comma
    elif isinstance(opening, cst.ParenthesizedWhitespace):
        sep = cst.Comma(whitespace_after=opening)
    else:
        sep = space
    trailing = _uncommented(last.comma) if isinstance(last.comma, cst.Comma) else cst.MaybeSentinel.DEFAULT
    # the last item keeps the comment of its own line (`timeout=30,  # seconds`), with the layout of the others
    own = last.comma.whitespace_after if isinstance(last.comma, cst.Comma) else None
    first = own.first_line if isinstance(own, cst.ParenthesizedWhitespace) else None
    before_close = closing.last_line.value if isinstance(closing, cst.ParenthesizedWhitespace) else ""
    for field in ("whitespace_after_arg", "whitespace_after_param"):
        held = getattr(last, field, None)
        if isinstance(held, cst.ParenthesizedWhitespace):
            before_close = before_close or held.last_line.value
            # `b=2  # two` (or `b=2`) then `)` on its own line: the comment goes with `b=2,`, the line break before
            # `)` after the new item
            if held.first_line.comment is not None:
                first = first or held.first_line
            last = last.with_changes(**{field: cst.SimpleWhitespace("")})
            new = new.with_changes(**{field: without_comment(held)})
    if isinstance(closing, cst.ParenthesizedWhitespace) and closing.first_line.comment is not None:
        first = first or closing.first_line
    if first is not None and first.comment is not None and not first.whitespace.value:
        first = first.with_changes(whitespace=cst.SimpleWhitespace("  "))
    layout = sep.whitespace_after
    if isinstance(layout, cst.ParenthesizedWhitespace):
        # the layout of the others, not the comment lines above the item that follows them
        sep = sep.with_changes(whitespace_after=layout.with_changes(first_line=first or cst.TrailingWhitespace(),
                                                                    empty_lines=()))
    elif first is not None and first.comment is not None:
        # items in a row (`a, b,  # note`) or one item: the comment ends its line, so the new item starts the next
        if indent is None:
            # the column of the closing bracket on its own line (aligned under the items), else one level in
            indent = before_close or "    "
        sep = cst.Comma(whitespace_after=cst.ParenthesizedWhitespace(
            first_line=first, indent=True, last_line=cst.SimpleWhitespace(indent)))
    items[-1] = last.with_changes(comma=sep)
    items.append(new.with_changes(comma=trailing))
    return items


def added_before(me, steps: Sequence, anchor: str | None, place: Callable, anchor_of: Callable,
                 key_of: Callable) -> tuple[str, ...]:
    """The keys of the items the steps of the recipe before `me` add after `anchor`, at the same place (`place(step)`
    is the same), or after an item one of them adds (a chain): `me` goes past them, in recipe order. `anchor_of(step)`
    is a step's anchor, `key_of(step)` the key of the item its code adds (None, or RecipeError, when its code does
    not read as one)."""
    if anchor is None:
        return ()
    mine = next(i for i, s in enumerate(steps) if s is me)
    before, chain = [], {anchor}
    for s in steps[:mine]:
        if s.op == me.op and place(s) == place(me) and anchor_of(s) in chain:
            try:
                k = key_of(s)
            except RecipeError:
                continue
            if k is not None:
                before.append(k)
                chain.add(k)
    return tuple(before)


def past(keys: Sequence, at: int, placed: Sequence) -> int:
    """`at`, moved past the items at it whose keys are in `placed` (what earlier steps added there)."""
    while at < len(keys) and keys[at] in placed:
        at += 1
    return at


def literal_edit(code: str, match: str, *, statements: bool = False) -> bool:
    """Whether `code` is `match` with one or two of its literal values changed (`n * 3` for `n * 2`, a reworded
    message): an edit of the very expression (or, with `statements`, of the very statements). Another name,
    attribute or callee is other code, however alike it reads (`max(self.max_prefill_tokens, 2048) * 1.5` beside
    `max(self.chunked_prefill_size, 2048) * 1.5`; not `BatchTokenOutput(rids=r)` for `BatchEmbeddingOutput(rids=r)`)."""
    try:
        if statements:
            a, b = ast.parse(textwrap.dedent(code).strip()).body, ast.parse(textwrap.dedent(match).strip()).body
        else:
            a = ast.parse("(\n" + textwrap.dedent(code).strip() + "\n)", mode="eval").body
            b = ast.parse("(\n" + textwrap.dedent(match).strip() + "\n)", mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return False

    def leaves(x, y) -> int | None:  # how many leaves differ; None when the trees are not of one shape
        if type(x) is not type(y):
            return None
        if isinstance(x, list):
            if len(x) != len(y):
                return None
            counts = [leaves(i, j) for i, j in zip(x, y)]
            return None if None in counts else sum(counts)
        if not isinstance(x, ast.AST):
            return None if x != y else 0  # a name, an attribute, an operator: another expression
        if isinstance(x, ast.Constant):
            return int(x.value != y.value or type(x.value) is not type(y.value))
        total = 0
        for field in x._fields:
            if field in ("ctx", "type_comment"):
                continue
            vx, vy = getattr(x, field, None), getattr(y, field, None)
            if isinstance(x, ast.Call) and field == "func":
                if ast.dump(vx) != ast.dump(vy):
                    return None
                continue
            got = leaves(vx, vy)
            if got is None:
                return None
            total += got
        return total

    try:
        count = leaves(a, b)
    except RecursionError:
        return False
    return count is not None and 1 <= count <= 2


def item_indent(opening: object, items: Sequence) -> str | None:
    """The indentation, beyond the block's, of the items of a list written one item per line (`opening` is the
    whitespace after its opening bracket), else None."""
    for ws in (opening, *(i.comma.whitespace_after for i in items if isinstance(i.comma, cst.Comma))):
        if isinstance(ws, cst.ParenthesizedWhitespace):
            return ws.last_line.value
    return None


class Shift(cst.CSTTransformer):
    """Moves the lines an expression continues on (never those inside a string: they are its value) right."""

    def __init__(self, indent: str) -> None:
        super().__init__()
        self.indent = indent

    def leave_ParenthesizedWhitespace(self, original, updated):
        return updated.with_changes(last_line=cst.SimpleWhitespace(self.indent + updated.last_line.value),
                                    empty_lines=[self._line(e) for e in updated.empty_lines])

    def _line(self, line: cst.EmptyLine) -> cst.EmptyLine:
        return line.with_changes(whitespace=cst.SimpleWhitespace(self.indent + line.whitespace.value)) \
            if line.comment is not None else line


def unindent(text: str, prefix: str) -> str:
    """`text` with `prefix` taken off the start of its continuation lines (not the first) that have it; blank lines,
    and the lines inside a string that spans lines (they are the string's value), are left as they are."""
    import io
    import tokenize

    lines = text.split("\n")
    inside: set[int] = set()  # 0-based lines that continue a multi-line token (a triple-quoted string)
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            inside.update(range(tok.start[0], tok.end[0]))  # rows start+1 .. end, 1-based: 0-based start .. end-1
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return text
    return "\n".join(lines[:1] + [line[len(prefix):] if k not in inside and line.strip() and line.startswith(prefix)
                                  else line for k, line in enumerate(lines[1:], start=1)])


def split_comment(code: str) -> tuple[str, cst.Comment | None]:
    """`code` without the comment ending its last line (`timeout=30  # seconds`), and that comment."""
    import io
    import tokenize

    text = textwrap.dedent(code.replace("\r\n", "\n")).strip()
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return code, None
    meaningful = [t for t in tokens if t.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.ENDMARKER,
                                                       tokenize.INDENT, tokenize.DEDENT)]
    if not meaningful or meaningful[-1].type != tokenize.COMMENT or len(meaningful) < 2:
        return code, None
    comment = meaningful[-1]
    lines = text.split("\n")
    row, col = comment.start
    lines[row - 1] = lines[row - 1][:col].rstrip()
    return "\n".join(lines).rstrip(), cst.Comment(comment.string)


def with_comment(items: list, index: int, comment: cst.Comment, closing: object = None) -> tuple[list, object] | None:
    """`items` with `comment` ending the line of `items[index]` (a keyword argument, a parameter, an element), and
    `closing` (the whitespace before the closing bracket) as it then is; None when that line is not its own (the
    list is written on one line)."""
    item = items[index]

    def put(ws: cst.ParenthesizedWhitespace) -> cst.ParenthesizedWhitespace:
        return ws.with_changes(first_line=ws.first_line.with_changes(whitespace=cst.SimpleWhitespace("  "),
                                                                      comment=comment))

    ws = item.comma.whitespace_after if isinstance(item.comma, cst.Comma) else None
    if isinstance(ws, cst.ParenthesizedWhitespace):
        items[index] = item.with_changes(comma=item.comma.with_changes(whitespace_after=put(ws)))
        return items, closing
    for field in ("whitespace_after_arg", "whitespace_after_param"):
        held = getattr(item, field, None)
        if isinstance(held, cst.ParenthesizedWhitespace):
            items[index] = item.with_changes(**{field: put(held)})
            return items, closing
    if index == len(items) - 1 and isinstance(closing, cst.ParenthesizedWhitespace):
        return items, put(closing)
    return None


def without_comment(ws: object) -> object:
    """`ws` without the comment at the end of its first line (a closing bracket's whitespace, after an item that
    `insert_item` gave that comment to)."""
    if isinstance(ws, cst.ParenthesizedWhitespace) and ws.first_line.comment is not None:
        return ws.with_changes(first_line=cst.TrailingWhitespace(newline=ws.first_line.newline))
    return ws


def _uncommented(comma: cst.Comma) -> cst.Comma:
    """A comma laid out as `comma` is, without the comment at the end of its line (it belongs to the item it
    follows)."""
    after = comma.whitespace_after
    if isinstance(after, cst.ParenthesizedWhitespace) and after.first_line.comment is not None:
        return comma.with_changes(whitespace_after=after.with_changes(first_line=cst.TrailingWhitespace(
            newline=after.first_line.newline)))
    return comma


# --------------------------------------------------------------------------------------------------- `inside:`

#: the compound statements whose block `inside` names by their header (an `if` stands for each arm of a chain)
_BLOCK_HEADERS = (ast.If, ast.With, ast.AsyncWith, ast.For, ast.AsyncFor, ast.While)


def header_pattern(text: str) -> "Pattern":
    """`inside`'s text (`if poll == KVPoll.Bootstrapping:`, `elif x:`, `with ctx:`, `for r in reqs:`, `while x:`) as
    a pattern of that statement whose block is `...`; a PatternError (a ValueError) when it is not such a header."""
    from ..patterns import Pattern, PatternError

    text = textwrap.dedent(text.replace("\r\n", "\n")).strip()
    if text.startswith("elif ") or text.startswith("elif("):
        text = text[2:]  # an `elif` arm is matched as an `if`: upstream may turn one into the other
    if text.endswith(":"):
        text += "\n    ..."
    try:
        pattern = Pattern.parse(text)
    except PatternError:
        raise PatternError(f"`inside` must be the header of an `if`/`elif`, `with`, `for` or `while` block, "
                           f"got `{' '.join(text.split())}`") from None
    node = pattern.node
    if not isinstance(node, _BLOCK_HEADERS) or getattr(node, "orelse", None) \
            or not (len(node.body) == 1 and isinstance(node.body[0], ast.Expr)
                    and isinstance(node.body[0].value, ast.Constant) and node.body[0].value.value is Ellipsis):
        raise PatternError(f"`inside` must be the header of an `if`/`elif`, `with`, `for` or `while` block (its "
                           f"line ending with `:`), got `{' '.join(text.split())}`")
    return pattern


_DOTS = cst.IndentedBlock(body=[cst.SimpleStatementLine(body=[cst.Expr(cst.Ellipsis())])])
_HEADER_NODES = (cst.If, cst.With, cst.For, cst.While)


def _header_ast(node: cst.CSTNode) -> ast.stmt | None:
    """A block owner's header as `ast` (its block `...`, no `else`): an `elif` arm reads as an `if`."""
    changes = {"body": _DOTS, "leading_lines": ()}
    if getattr(node, "orelse", None) is not None:
        changes["orelse"] = None
    try:
        return ast.parse(cst.Module(body=[]).code_for_node(node.with_changes(**changes))).body[0]
    except SyntaxError:
        return None


def headed_blocks(scope: NodePath) -> Iterator[NodePath]:
    """The path of every block owner under `scope[-1]` that `inside` can name (each arm of an `if`/`elif` chain, a
    `with`, `for`, `while`), not inside nested defs, in source order."""
    from ..anchors import _path_to_block

    for spath in walk_statements(scope):
        node = spath[-1]
        if isinstance(node, cst.If):
            while isinstance(node, cst.If):
                yield spath if node is spath[-1] else _path_to_block(spath, node)
                node = node.orelse
        elif isinstance(node, _HEADER_NODES):
            yield spath


def header_text(node: cst.CSTNode) -> str:
    """A block owner's header on one line, as `inside` writes it (`if x:` for an `elif x:` arm too)."""
    tree = _header_ast(node)
    return ast.unparse(tree).split("\n", 1)[0] if tree is not None else ""


def inside_block(module: cst.Module, scope: NodePath, inside: str, *, else_arm: bool = False,
                 where: str = "the module") -> NodePath:
    """The path of the one block (its owner: an `if`/`elif` arm, a `with`, `for` or `while`; with `else_arm`, the
    `else:` right after that `if`/`elif` arm) whose header matches `inside`, under `scope[-1]`. AnchorNotFound
    naming `inside` when no header matches (with the headers that look alike) or the arm has no `else:`;
    AnchorAmbiguous when several do."""
    from ..anchors import _path_to_block, near
    from ..errors import AnchorAmbiguous, AnchorNotFound, Candidate

    pattern = header_pattern(inside)
    shown = " ".join(textwrap.dedent(inside).split())
    found, seen = [], {}
    for bpath in headed_blocks(scope):
        tree = _header_ast(bpath[-1])
        if tree is None:
            continue
        if pattern.matches_statement(tree):
            found.append(bpath)
        seen.setdefault(ast.unparse(tree).split("\n", 1)[0], bpath[-1])
    if not found:
        raise AnchorNotFound(f"no block `{shown}` in {where}",
                             candidates=[Candidate(f"`{t}`", node=seen[t]) for t in near(shown, list(seen))])
    if len(found) > 1:
        raise AnchorAmbiguous(f"{len(found)} blocks have the header `{shown}` in {where}",
                              candidates=[Candidate(f"`{header_text(b[-1])}`", node=b[-1]) for b in found])
    bpath = found[0]
    if not else_arm:
        return bpath
    arm = bpath[-1]
    if not isinstance(arm, cst.If) or not isinstance(arm.orelse, cst.Else):
        raise AnchorNotFound(f"the block `{shown}` in {where} is not followed by an `else:` arm",
                             candidates=[Candidate(f"`{header_text(arm)}`", node=arm)])
    return _path_to_block(bpath, arm.orelse)


#: the description of the `inside_else` option, in the operations that take `inside`
INSIDE_ELSE = "with `inside` an `if`/`elif` header: the `else:` block right after that arm"


def check_inside(inside: str | None, inside_else: bool) -> None:
    """Load-time checks of the `inside`/`inside_else` options (a ValueError names the problem)."""
    if inside is None:
        if inside_else:
            raise ValueError("`inside_else` goes with `inside`, the header of the `if`/`elif` arm the `else:` follows")
        return
    pattern = header_pattern(inside)
    if inside_else and not isinstance(pattern.node, ast.If):
        raise ValueError("`inside_else` needs `inside` to be an `if`/`elif` header")


def inside_words(inside: str | None, inside_else: bool) -> str:
    """`inside `if x:`` or `in the `else:` after `if x:``, for messages."""
    shown = " ".join(textwrap.dedent(inside or "").split())
    return f"in the `else:` after `{shown}`" if inside_else else f"inside `{shown}`"


def imported_module(node: Any, package: str, rel_pkg: str) -> str | None:
    """The dotted module an `ast` import-from of the file `rel_pkg` (relative to `package`'s folder) reads, when it
    is one of `package`'s own (relative levels resolved against the file's place: an `__init__.py` is its folder's
    own package); None for another package's module, or a relative import that climbs above `package`."""
    if node.level:
        here = [package, *PurePosixPath(rel_pkg).parent.parts]
        if node.level - 1 >= len(here):
            return None
        return ".".join(here[:len(here) - (node.level - 1)] + ([node.module] if node.module else []))
    if node.module and node.module.split(".")[0] == package:
        return node.module
    return None


def dotted_owner(path: NodePath) -> str:
    """`A.f` (in backquotes) for a block in method `f` of class `A`; `the module` at its top."""
    names = [n.name.value for n in path if isinstance(n, (cst.FunctionDef, cst.ClassDef))]
    return f"`{'.'.join(names)}`" if names else "the module"


def on_a_shared_line(module: cst.Module, scope: NodePath, match: str) -> str:
    """"; it shares its line ..." when a statement of `scope` that is `match` (compared as code) stands on one line
    with others (`reserved = 16; chunk = 256`, `if n < 0: n = 0`): specpatch anchors on whole lines and blocks, so
    such a statement is not found as one; else ""."""
    import ast
    import textwrap

    try:
        want = [ast.dump(s) for s in ast.parse(textwrap.dedent(match).strip()).body]
    except (SyntaxError, ValueError, RecursionError):
        return ""
    if len(want) != 1:
        return ""
    for node in _walk_all(scope[-1]):
        if isinstance(node, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) and (
                len(node.body) > 1 or isinstance(node, cst.SimpleStatementSuite)):
            for small in node.body:
                try:
                    got = [ast.dump(s) for s in ast.parse(module.code_for_node(small).strip()).body]
                except (SyntaxError, ValueError, RecursionError):
                    continue
                if got == want:
                    how = "a one-line block" if isinstance(node, cst.SimpleStatementSuite) else "`;`"
                    return (f"; it is there on a line it shares with other statements ({how}): specpatch anchors "
                            f"on whole lines; split the line in the release's code, or use `replace_expression`")
    return ""


def _walk_all(node: cst.CSTNode):
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        todo.extend(n.children)
