"""The `moved upstream` rule of `specpatch port`: a step whose code reads an attribute of `self` (or of `self.x`,
an attribute whose class the release the recipe was made on tells) that the object had in that release and no
longer has in the release it is ported to, while the name lives on elsewhere (upstream moved it into another
class). The name alone cannot tell this: `self.scheduler.stream_output` reads a name the release still defines,
in `SchedulerOutputStreamer`, a component the scheduler holds, not in the scheduler any more.

The classes an object `self` of class `C` may be are `C`'s *family*: `C`, the classes it inherits from, the classes
that inherit from it (a mixin's scheduler) and theirs, as far as the package defines them (by name). An attribute is
judged only where the evidence is plain: some class of the family defines it in the base release (`def B`, `B = ...`
or `B: T` in the class, `self.B = ...`, `setattr(self, "B", ...)` or `self.register_buffer("B", ...)` and torch's
other `nn.Module` setters in a method), and in the release no class of the family does, none of them takes
attributes by a name read at run time (`setattr(self, name, ...)`, `__getattr__`, `self.__dict__`), and the family
does not inherit from a class outside the package that it did not before.
Everything is read from the `_ReleaseIndex` of each release (`texts`, `tree`), parsing only the files that define
the classes asked about."""

from __future__ import annotations

import ast
import bisect
import re
import textwrap
from typing import Any, Iterator

from .operations._code import imported_module

_CLASS_HEAD = re.compile(r"^[ \t]*class\s+(\w+)\s*\(([^)]*)\)", re.M)
_FAMILY_CAP = 80  #: a family larger than this (a base class of every model) is not judged
_HARMLESS = frozenset({"object", "ABC", "Generic", "Protocol", "Enum", "IntEnum", "str", "int", "NamedTuple",
                       "TypedDict", "Exception"})

ClassKey = tuple[str, str]  #: (file, class name)


class Classes:
    """The top-level classes of one release, asked for by name, with what each defines."""

    def __init__(self, index: Any) -> None:
        self.index = index
        self._by_name: dict[str, list[ClassKey]] = {}
        self._subclasses: dict[str, set[ClassKey]] | None = None
        self._nodes: dict[ClassKey, ast.ClassDef | None] = {}
        self._facts: dict[ClassKey, tuple[frozenset[str], bool, dict[str, set[str | None]]]] = {}
        self._defining: dict[str, list[str]] = {}
        self._families: dict[tuple[str, str | None], tuple[list[ClassKey], frozenset[str]] | None] = {}

    def node(self, key: ClassKey) -> ast.ClassDef | None:
        if key not in self._nodes:
            tree = self.index.tree(key[0])
            self._nodes[key] = next((c for c in (tree.body if tree else []) if isinstance(c, ast.ClassDef)
                                     and c.name == key[1]), None)
        return self._nodes[key]

    def named(self, name: str, prefer: str | None = None) -> list[ClassKey]:
        """The classes called `name`; only the one of the file `prefer` when that file has one."""
        if name not in self._by_name:
            self._by_name[name] = [(rel, name) for rel in self.index.files_defining_class(name)]
        found = self._by_name[name]
        return [k for k in found if k[0] == prefer] or found

    def subclasses(self, name: str) -> list[ClassKey]:
        if self._subclasses is None:
            self._subclasses = {}
            for rel, text in self.index.texts().items():
                if "class " not in text:
                    continue
                for m in _CLASS_HEAD.finditer(text):
                    for word in set(re.findall(r"\w+", m.group(2))):
                        self._subclasses.setdefault(word, set()).add((rel, m.group(1)))
        return [k for k in sorted(self._subclasses.get(name, ())) if name in self.bases(k)]

    def bases(self, key: ClassKey) -> list[str]:
        node = self.node(key)
        return [n for n in map(_type_name, node.bases) if n] if node is not None else []

    def family(self, name: str, prefer: str | None = None) -> tuple[list[ClassKey], frozenset[str]] | None:
        """The family of the class `name` (itself, its ancestors, its descendants and theirs) and the names of the
        bases none of the package's classes is (outside it); None when the class is not there or the family is
        too large to judge."""
        if (name, prefer) in self._families:
            return self._families[(name, prefer)]
        start = self.named(name, prefer)
        family: list[ClassKey] = []
        outside: set[str] = set()

        def up(key: ClassKey) -> None:
            if key in family:
                return
            family.append(key)
            for base in self.bases(key):
                found = self.named(base, key[0])
                if not found:
                    outside.add(base)
                for b in found:
                    up(b)

        down, seen = list(start), set(start)
        while down and len(family) <= _FAMILY_CAP:
            key = down.pop()
            up(key)
            for sub in self.subclasses(key[1]):
                if sub not in seen:
                    seen.add(sub)
                    down.append(sub)
        out = (family, frozenset(outside - _HARMLESS)) if start and len(family) <= _FAMILY_CAP else None
        self._families[(name, prefer)] = out
        return out

    def facts(self, key: ClassKey) -> tuple[frozenset[str], bool, dict[str, set[str | None]]]:
        """`_read_class` of the class (nothing for a class that is not there)."""
        if key not in self._facts:
            node = self.node(key)
            self._facts[key] = _read_class(node) if node is not None else (frozenset(), False, {})
        return self._facts[key]

    def defined(self, key: ClassKey) -> tuple[frozenset[str], bool]:
        """The attributes the class defines, and whether it takes some by a name read at run time."""
        return self.facts(key)[:2]

    def defining(self, name: str, near: list[ClassKey], limit: int = 3) -> tuple[list[str], int]:
        """Up to `limit` classes of the release that define `name`, those whose name the files of `near` (a family)
        mention first (a component the family holds), and how many there are in all. Read from the text, for the
        message only: a line `def name(`, `self.name = `/`: `, or `name = `/`: ` one level in, under a `class` at the
        margin."""
        if name not in self._defining:
            n = re.escape(name)
            form = re.compile(rf"^[ \t]+(?:async\s+)?def\s+{n}\s*\(|^[ \t]+self\.{n}\s*[:=](?!=)"
                              rf"|^(?: {{4}}|\t){n}\s*[:=](?!=)", re.M)
            found: set[str] = set()
            for text in self.index.texts().values():
                if name not in text:
                    continue
                hits = [m.start() for m in form.finditer(text)]
                if not hits:
                    continue
                margin = [(m.start(), m.group(1)) for m in re.finditer(r"^(?:class\s+(\w+)|[^\s#@)\]}])", text, re.M)]
                for at in hits:
                    k = bisect.bisect_right(margin, (at, "")) - 1
                    if k >= 0 and margin[k][1]:
                        found.add(margin[k][1])
            self._defining[name] = sorted(found)
        found = self._defining[name]
        texts = [self.index.texts().get(rel, "") for rel in {k[0] for k in near}]
        unique = sorted(found, key=lambda c: (not any(re.search(rf"\b{c}\b", t) for t in texts), c))
        return unique[:limit], len(unique)


def _type_name(node: ast.AST | None) -> str | None:
    """The class an annotation or a base class names: `X`, `mod.X`, `"X"`, `Optional[X]`, `X | None`, `Generic[T]`
    (`Generic`)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            return _type_name(ast.parse(node.value, mode="eval").body)
        except SyntaxError:
            return None
    if isinstance(node, ast.Subscript):
        if _type_name(node.value) == "Optional":
            return _type_name(node.slice)
        return _type_name(node.value)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        sides = [s for s in (node.left, node.right) if not (isinstance(s, ast.Constant) and s.value is None)]
        return _type_name(sides[0]) if len(sides) == 1 else None
    return None


def _class_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of a class body, those under an `if`/`try` at class level included."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.If, ast.Try)):
            for part in (stmt.body, stmt.orelse, *(h.body for h in getattr(stmt, "handlers", [])),
                         getattr(stmt, "finalbody", [])):
                yield from _class_level(part)


def _methods(node: ast.ClassDef) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    return (s for s in _class_level(node.body) if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)))


def _self_of(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    args = fn.args.posonlyargs + fn.args.args
    return args[0].arg if args else None


#: torch's `nn.Module` methods that set an attribute of `self` by the name they are given
_NAMED_SETTERS = frozenset({"register_buffer", "register_parameter", "register_module", "add_module"})


def _named_setter(call: ast.Call, me: str | None) -> ast.expr | None:
    """The name argument of `self.register_buffer("B", ...)` and its kin (which define `self.B`), else None."""
    f = call.func
    if isinstance(f, ast.Attribute) and f.attr in _NAMED_SETTERS and isinstance(f.value, ast.Name) \
            and f.value.id == me:
        return call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "name"),
                                                   ast.Constant(None))
    return None


def _class_level_names(node: ast.ClassDef) -> set[str]:
    """The names a class body binds at its own level: methods, nested classes, fields and class attributes."""
    out: set[str] = set()
    for stmt in _class_level(node.body):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(stmt.name)
        elif isinstance(stmt, ast.Assign):
            out |= {t.id for t in stmt.targets if isinstance(t, ast.Name)}
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            out.add(stmt.target.id)
    return out


def _read_class(node: ast.ClassDef) -> tuple[frozenset[str], bool, dict[str, set[str | None]]]:
    """What a class defines, whether it takes attributes by a name read at run time, and per attribute of `self`
    what its assignments say of its class: a class name (an annotation, a parameter annotated), `call:T` (a call
    `T(...)`, a class only when the package has one called so), None (another value; `= None` says nothing)."""
    out = _class_level_names(node)
    dynamic = bool(out & {"__getattr__", "__getattribute__"})
    types: dict[str, set[str | None]] = {}
    for stmt in _class_level(node.body):
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            types.setdefault(stmt.target.id, set()).add(_type_name(stmt.annotation))
    for fn in _methods(node):
        me = _self_of(fn)
        params = {a.arg: a.annotation for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs}
        for sub in ast.walk(fn):
            if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == me:
                if isinstance(sub.ctx, ast.Store):
                    out.add(sub.attr)
                elif sub.attr == "__dict__":
                    dynamic = True
            elif isinstance(sub, ast.Call) and ((named := _named_setter(sub, me)) is not None
                                                or isinstance(sub.func, ast.Name) and sub.func.id == "setattr"
                                                and sub.args and isinstance(sub.args[0], ast.Name)
                                                and sub.args[0].id == me):
                name = named if named is not None else sub.args[1] if len(sub.args) > 1 else None
                if isinstance(name, ast.Constant) and isinstance(name.value, str):
                    out.add(name.value)
                else:
                    dynamic = True
            elif isinstance(sub, (ast.Assign, ast.AnnAssign)):
                note = sub.annotation if isinstance(sub, ast.AnnAssign) else None
                value = sub.value
                for t in (sub.targets if isinstance(sub, ast.Assign) else [sub.target]):
                    if not (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == me):
                        continue
                    if note is not None:
                        kind = _type_name(note)
                    elif isinstance(value, ast.Constant) and value.value is None:
                        continue
                    elif isinstance(value, ast.Call) and (called := _type_name(value.func)):
                        kind = f"call:{called}"
                    elif isinstance(value, ast.Name) and params.get(value.id) is not None:
                        kind = _type_name(params[value.id])
                    else:
                        kind = None
                    types.setdefault(t.attr, set()).add(kind)
    return frozenset(out), dynamic, types


def attribute_type(classes: Classes, family: list[ClassKey], attr: str) -> str | None:
    """The class of `self.<attr>` in the family, when every assignment of it says the same one: an annotation
    (`x: T`, `self.x: T = ...`), a constructor call `T(...)` of a class of the package, or a parameter annotated `T`
    (`self.scheduler = scheduler`, `scheduler: "Scheduler"`). `= None` says nothing; any other value, None."""
    seen: set[str | None] = set()
    for key in family:
        for kind in classes.facts(key)[2].get(attr, ()):
            if kind is not None and kind.startswith("call:"):
                kind = kind[5:] if classes.named(kind[5:]) else None
            seen.add(kind)
    if len(seen) != 1:
        return None
    name = seen.pop()
    return name if name and classes.named(name) else None


def reads(code: str, match: str | None) -> tuple[set[tuple[str | None, str]], set[str]]:
    """The attributes the code reads, as (None, B) for `self.B` and (x, B) for `self.x.B`, less the words of the
    code it matches; and the attributes of `self` the code itself defines (assigns, or a method it adds). Code in a
    class the step adds is left out (its `self` is another object)."""
    text = textwrap.dedent(code).strip("\n")
    tree = None
    for form in (text, f"(\n{text}\n)"):
        try:
            tree = ast.parse(form)
            break
        except SyntaxError:
            continue
    if tree is None:
        return set(), set()
    found: set[tuple[str | None, str]] = set()
    own: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.ClassDef):
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            own.add(node.name)
        if isinstance(node, ast.Attribute):
            value = node.value
            if isinstance(value, ast.Name) and value.id == "self":
                if isinstance(node.ctx, ast.Store):
                    own.add(node.attr)
                else:
                    found.add((None, node.attr))
            elif isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and value.value.id == "self" \
                    and not isinstance(node.ctx, ast.Store):
                found.add((value.attr, node.attr))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    known = set(re.findall(r"\w+", match)) if isinstance(match, str) else set()
    return {(x, b) for x, b in found if b not in known}, own


def _def_at(tree: ast.Module | None, dotted: str) -> ast.stmt | None:
    """The class or function `dotted` (`f`, `C`, `C.f`, `C.f.inner`) of a module, else None."""
    body: list[ast.stmt] = tree.body if tree is not None else []
    node: ast.stmt | None = None
    for part in dotted.split("."):
        node = next((s for s in _class_level(body) if isinstance(s, (ast.ClassDef, ast.FunctionDef,
                                                                       ast.AsyncFunctionDef)) and s.name == part), None)
        if node is None:
            return None
        body = node.body
    return node


def _function_at(tree: ast.Module | None, dotted: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    node = _def_at(tree, dotted)
    return node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def _stored(node: ast.AST) -> set[str]:
    """The names a function or snippet binds (assignments, loop targets, `with ... as`, walrus, `del`, nested
    defs): a parameter among them may hold another object by the time it is read."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)} \
        | {n.name for n in ast.walk(node) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def parameter_types(fn: ast.FunctionDef | ast.AsyncFunctionDef | None) -> dict[str, str]:
    """The parameters of a function annotated with one class (`batch: ScheduleBatch`, `"ScheduleBatch"`,
    `Optional[ScheduleBatch]`), less those its body binds again: parameter -> class name."""
    if fn is None:
        return {}
    again = _stored(ast.Module(body=fn.body, type_ignores=[]))
    out = {}
    for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs:
        kind = _type_name(a.annotation) if a.annotation is not None else None
        if kind and a.arg not in again:
            out[a.arg] = kind
    return out


def parameter_reads(code: str, match: str | None, outer: dict[str, str]) -> set[tuple[str, str, str]]:
    """The attributes the code reads on a parameter whose class an annotation tells, as (parameter, class,
    attribute): the parameters of the function the step lands in (`outer`, as `parameter_types` gives them) and
    those of the functions the code itself defines. Left out: a parameter the code binds again, the words of the
    code it matches, code in a class the code defines."""
    text = textwrap.dedent(code).strip("\n")
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return set()
    found: set[tuple[str, str, str]] = set()

    def visit(node: ast.AST, params: dict[str, str]) -> None:
        if isinstance(node, ast.ClassDef):
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            mine = parameter_types(node)
            names = {a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs}
            params = {**{k: v for k, v in params.items() if k not in names}, **mine}
        if isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Store) \
                and isinstance(node.value, ast.Name) and node.value.id in params:
            found.add((node.value.id, params[node.value.id], node.attr))
        for child in ast.iter_child_nodes(node):
            visit(child, params)

    top = {k: v for k, v in outer.items() if k not in _stored(tree)}
    visit(tree, top)
    known = set(re.findall(r"\w+", match)) if isinstance(match, str) else set()
    return {(p, k, b) for p, k, b in found if b not in known}


def judge(classes: Classes, release: Classes, name: str, base_file: str, release_name: str, release_file: str,
          attr: str) -> str | None:
    """Why `attr`, read on an object of class `name` (`release_name` in the release), moved upstream; None when it
    did not, or when the evidence is weak (see the module's docstring)."""
    before = classes.family(name, base_file)
    after = release.family(release_name, release_file)
    if before is None or after is None:
        return None
    had = [k[1] for k in before[0] if attr in classes.defined(k)[0]]
    if not had:
        return None  # the base release never defined it there (another library's, or made at run time)
    if any(attr in release.defined(k)[0] or release.defined(k)[1] for k in after[0]):
        return None
    if after[1] - before[1]:
        return None  # a base class outside the package the family did not have before may bring it
    now, count = release.defining(attr, after[0])
    where = (f"now in {', '.join(f'`{c}`' for c in now)}{f' and {count - len(now)} more classes' if count > len(now) else ''}"
             if now else "defined by no class of the release")
    return (f"`{attr}` is defined by {', '.join(f'`{c}`' for c in sorted(set(had)))} in the base release and by no "
            f"such class in the release ({where})")


def moved_upstream(before: dict[int, Any], ops: list[tuple[int, Any]], release: Any, base: Any,
                   added: set[str]) -> dict[int, str]:
    """Steps whose code reads `self.B` or `self.x.B` where `B` moved upstream (`judge`). `before`: each step as the
    recipe has it (its class in the base release), `ops`: as `port` plans it (a class followed through a rename
    has the new name); `added`: the names steps of the recipe add (a step that adds `B` is that step's business).
    Step index -> why it is refused."""
    then, now = Classes(base), Classes(release)
    out: dict[int, str] = {}
    for index, op in ops:
        old = before.get(index, op)
        code = getattr(op, "code", None)
        if op.op == "unexpressed_hunk" or not isinstance(code, str):
            continue
        anchors = [(getattr(old, f), getattr(op, f)) for f in ("cls", "function", "within")
                   if isinstance(getattr(op, f, None), str) and isinstance(getattr(old, f, None), str)]
        heads = [(a.split(".")[0], b.split(".")[0]) for a, b in anchors]
        head = next(((a, b) for a, b in heads if (old.file, a) in then.named(a, old.file)), None)
        whys = _parameter_whys(then, now, old, op, code, anchors, added)
        found, own = reads(code, getattr(op, "match", None)) if head is not None else (set(), set())
        for x, attr in sorted(found, key=lambda r: (r[0] or "", r[1])):
            if attr in own or attr in added or (x is not None and (x in own or x in added)):
                continue
            if x is None:
                why = judge(then, now, head[0], old.file, head[1], op.file, attr)
                shown = f"`self.{attr}`"
            else:
                fam_then, fam_now = then.family(head[0], old.file), now.family(head[1], op.file)
                kind = attribute_type(then, fam_then[0], x) if fam_then else None
                kind_now = attribute_type(now, fam_now[0], x) if fam_now else None
                if kind is None or kind_now is None:
                    continue  # what `self.x` is cannot be told in one of the releases
                why = judge(then, now, kind, "", kind_now, "", attr)
                shown = f"`self.{x}.{attr}` (`self.{x}`: `{kind_now}`)"
            if why:
                whys.append(f"{shown}: {why}")
        if whys:
            followed = f" (in `{head[1]}`, followed from `{head[0]}`)" if head and head[0] != head[1] else ""
            out[index] = (f"it reads{followed} " + "; ".join(whys) + ": upstream moved or removed "
                          + ("it" if len(whys) == 1 else "them") + ", and the code would raise `AttributeError`")
    return out


def _ancestors(classes: Classes, key: ClassKey) -> list[ClassKey]:
    """The package's classes the class `key` inherits from, nearest first (itself left out)."""
    out: list[ClassKey] = []
    todo = [key]
    while todo and len(out) <= _FAMILY_CAP:
        for base in classes.bases(todo.pop(0)):
            for found in classes.named(base, key[0])[:1]:
                if found not in out and found != key:
                    out.append(found)
                    todo.append(found)
    return out


def overrides_upstream(before: dict[int, Any], ops: list[tuple[int, Any]], release: Any,
                       base: Any) -> dict[int, str]:
    """Steps that add a method or a field (`add_method`, `add_dataclass_field`) to a class whose base class in the
    release defines that name while none of its base classes did in the base release: upstream added it there, and
    the step's member would override it for the class, with the callers upstream wrote for its own
    (`self.reset(hard=True)` from the base class's `start()` reaching the patch's `reset(self)`; a field's default
    over upstream's). An override the base release already had is the patch's own choice. Index -> why."""
    then, now = Classes(base), Classes(release)
    out: dict[int, str] = {}
    for index, op in ops:
        if op.op not in ("add_method", "add_dataclass_field") or "." in op.cls:
            continue
        tree = _snippet(op.code)
        names = _class_level_names(ast.ClassDef(name="_", bases=[], keywords=[], body=tree.body, decorator_list=[])) \
            if tree is not None else set()
        if len(names) != 1:
            continue
        [name] = names
        old = before.get(index, op)
        mine = now.named(op.cls, op.file)
        if len(mine) != 1:
            continue
        had: set[str] = set()
        for key in then.named(old.cls, old.file)[:1]:
            for up in _ancestors(then, key):
                node = then.node(up)
                had |= _class_level_names(node) if node is not None else set()
        if name in had:
            continue
        for up in _ancestors(now, mine[0]):
            node = now.node(up)
            if node is not None and name in _class_level_names(node):
                out[index] = (f"it adds `{name}` to `{op.cls}`, whose base class `{up[1]}` (`{up[0]}`) defines "
                              f"`{name}` in this release, and no base class did in the base release: upstream "
                              f"added it, and the step's `{name}` would override it for `{op.cls}`, under the "
                              f"callers upstream wrote for its own")
                break
    return out


def _parameter_whys(then: Classes, now: Classes, old: Any, op: Any, code: str, anchors: list[tuple[str, str]],
                    added: set[str]) -> list[str]:
    """`moved_upstream` for reads on annotated parameters (`batch.B` where `batch: ScheduleBatch`): those of the
    function the step lands in, whose annotation must name a class in both releases, and those of the functions
    the step's code defines."""
    tree = then.index.tree(old.file) if old.file in then.index.texts() else None
    tree_now = now.index.tree(op.file) if op.file in now.index.texts() else None
    fn = next(((a, b) for a, b in anchors if _function_at(tree, a) is not None), None)
    before = parameter_types(_function_at(tree, fn[0])) if fn else {}
    after = parameter_types(_function_at(tree_now, fn[1])) if fn else {}
    outer = {p: k for p, k in before.items() if p in after}
    whys = []
    for param, kind, attr in sorted(parameter_reads(code, getattr(op, "match", None), outer)):
        if attr in added:
            continue
        kind_now = after.get(param, kind) if param in outer and kind == outer[param] else kind
        if not then.named(kind) or not now.named(kind_now):
            continue
        why = judge(then, now, kind, "", kind_now, "", attr)
        if why:
            whys.append(f"`{param}.{attr}` (`{param}`: `{kind_now}`): {why}")
    return whys


# ------------------------------------------------------------------------------------------ removed under readers

class Overlay:
    """A release index (`texts`, `tree`, `files_defining_class`) with some files replaced: the port's planned
    files over the release."""

    def __init__(self, index: Any, texts: dict[str, str]) -> None:
        self.index, self._over = index, texts
        self._texts: dict[str, str] | None = None
        self._trees: dict[str, ast.Module | None] = {}

    def texts(self) -> dict[str, str]:
        if self._texts is None:
            self._texts = {**self.index.texts(), **self._over}
        return self._texts

    def tree(self, rel: str) -> ast.Module | None:
        if rel not in self._over:
            return self.index.tree(rel)
        if rel not in self._trees:
            try:
                self._trees[rel] = ast.parse(self._over[rel])
            except (SyntaxError, ValueError, RecursionError):
                self._trees[rel] = None
        return self._trees[rel]

    def files_defining_class(self, name: str) -> list[str]:
        found = [rel for rel in self.index.files_defining_class(name) if rel not in self._over]
        return found + [rel for rel in sorted(self._over) if any(isinstance(c, ast.ClassDef) and c.name == name
                                                                for c in (self.tree(rel) or ast.Module([], [])).body)]


def _snippet(text: str | None) -> ast.Module | None:
    """A step's `match` or `code` parsed alone; None when there is none or it does not parse alone."""
    if not isinstance(text, str) or not text.strip():
        return None
    try:
        return ast.parse(textwrap.dedent(text).strip("\n"))
    except (SyntaxError, ValueError, RecursionError):
        return None


def removed_attributes(match: str | None, code: str | None) -> set[str]:
    """The attributes of `self` that a step's `match` assigns and its `code` does not: what applying it takes
    away from the object."""
    def stored(tree: ast.Module | None) -> set[str]:
        return {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)
                and isinstance(n.value, ast.Name) and n.value.id == "self"} if tree else set()

    return stored(_snippet(match)) - stored(_snippet(code))


def class_level_names(match: str | None, code: str | None) -> set[str]:
    """The names a step at a class's own level (`within: Class`) defines in its `match` (`def B`, `B = ...`,
    `B: T`) and not in its `code`: a method renamed or removed, a class attribute taken away."""
    def names(tree: ast.Module | None) -> set[str]:
        return _read_class(ast.ClassDef(name="_", bases=[], keywords=[], body=tree.body,
                                        decorator_list=[]))[0] if tree else set()

    return names(_snippet(match)) - names(_snippet(code))


class _Uses:
    """Where a release reads and sets an attribute, with the class of the object when the code tells it: `self`
    in a method, a parameter annotated with a class, a local bound only from a call of a class or of a function
    whose return annotation names one (`context = get_forward_context()`), `self.x` whose class its assignments
    tell. A class is (file, name), resolved through the file's own definitions and its `from M import N` of the
    package (by name where neither says, when the release has one class of that name)."""

    def __init__(self, classes: Classes, package: str) -> None:
        self.classes, self.package = classes, package
        self._returns: dict[tuple[str, str], ClassKey | None] = {}

    def _module_file(self, rel: str, node: ast.ImportFrom) -> str | None:
        dotted = imported_module(node, self.package, rel)
        if dotted is None:
            return None
        parts = dotted.split(".")[1:]
        texts = self.classes.index.texts()
        files = ("/".join(parts) + ".py", "/".join([*parts, "__init__.py"])) if parts else ("__init__.py",)
        return next((f for f in files if f in texts), None)

    def resolve(self, rel: str, name: str, want: str = "class") -> tuple[str, ast.AST] | None:
        """The (file, node) a name of file `rel` stands for: its own top-level class or function, else the one a
        `from M import name` brings (one hop further through a re-export)."""
        for _ in range(3):
            tree = self.classes.index.tree(rel) if rel in self.classes.index.texts() else None
            if tree is None:
                return None
            kinds = (ast.ClassDef,) if want == "class" else (ast.FunctionDef, ast.AsyncFunctionDef)
            own = next((n for n in tree.body if isinstance(n, kinds) and n.name == name), None)
            if own is not None:
                return rel, own
            imp = next((n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                        and any((a.asname or a.name) == name for a in n.names)), None)
            if imp is None:
                return None
            name = next(a.name for a in imp.names if (a.asname or a.name) == name)
            rel = self._module_file(rel, imp)
            if rel is None:
                return None
        return None

    def class_key(self, rel: str, name: str | None) -> ClassKey | None:
        if not name:
            return None
        found = self.resolve(rel, name)
        if found is not None:
            return found[0], found[1].name  # type: ignore[attr-defined]
        named = self.classes.named(name)
        return named[0] if len(named) == 1 else None

    def returns(self, rel: str, name: str) -> ClassKey | None:
        """The class a call of the function `name` (as file `rel` sees it) returns, by its annotation."""
        if (rel, name) not in self._returns:
            found = self.resolve(rel, name, "function")
            key = None
            if found is not None and isinstance(found[1], (ast.FunctionDef, ast.AsyncFunctionDef)):
                key = self.class_key(found[0], _type_name(found[1].returns))
            self._returns[(rel, name)] = key
        return self._returns[(rel, name)]

    def uses(self, attr: str) -> Iterator[tuple[str, str, int, str, ClassKey | None, bool]]:
        """(file, function, line, line's text, class of the object or None, set) for each `x.attr` read or set in a
        function of the release."""
        pattern = re.compile(rf"\.{re.escape(attr)}\b")
        for rel, text in self.classes.index.texts().items():
            if not pattern.search(text):
                continue
            tree = self.classes.index.tree(rel)
            if tree is None:
                continue
            lines = text.splitlines()
            yield from self._walk(rel, tree.body, None, "", attr, lines)

    def _walk(self, rel: str, body: list[ast.stmt], cls: ClassKey | None, path: str, attr: str,
              lines: list[str]) -> Iterator[tuple[str, str, int, str, ClassKey | None, bool]]:
        for node in body:
            if isinstance(node, ast.ClassDef):
                yield from self._walk(rel, node.body, (rel, node.name), f"{path}{node.name}.", attr, lines)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield from self._function(rel, node, cls, f"{path}{node.name}", attr, lines)
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                for part in (node.body, getattr(node, "orelse", []), getattr(node, "finalbody", []),
                             *(h.body for h in getattr(node, "handlers", []))):
                    yield from self._walk(rel, part, cls, path, attr, lines)

    def _function(self, rel: str, fn: ast.FunctionDef | ast.AsyncFunctionDef, cls: ClassKey | None, path: str,
                  attr: str, lines: list[str]) -> Iterator[tuple[str, str, int, str, ClassKey | None, bool]]:
        hits = [n for n in ast.walk(fn) if isinstance(n, ast.Attribute) and n.attr == attr]
        if not hits:
            return
        me = _self_of(fn) if cls is not None else None
        params = {a.arg: a.annotation for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs}
        bound: dict[str, list[tuple[bool, ast.expr]]] = {}  #: name -> (an annotation?, value or annotation)
        for n in ast.walk(fn):
            if isinstance(n, ast.Assign):
                for t in n.targets:
                    if isinstance(t, ast.Name):
                        bound.setdefault(t.id, []).append((False, n.value))
            elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
                bound.setdefault(n.target.id, []).append((True, n.annotation))
            elif isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
                bound.setdefault(n.id, [])

        def of(value: ast.expr) -> ClassKey | None:
            if isinstance(value, ast.Name):
                if value.id == me and value.id not in bound:
                    return cls
                if value.id in params and params[value.id] is not None and value.id not in bound:
                    return self.class_key(rel, _type_name(params[value.id]))
                sources = bound.get(value.id)
                if not sources or value.id in params:
                    return None
                keys = {self._source(rel, s) for s in sources}
                return keys.pop() if len(keys) == 1 else None
            if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and value.value.id == me \
                    and cls is not None:
                fam = self.classes.family(cls[1], cls[0])
                kind = attribute_type(self.classes, fam[0], value.attr) if fam else None
                return self.class_key(rel, kind)
            return None

        for hit in hits:
            line = lines[hit.lineno - 1].strip() if hit.lineno <= len(lines) else ""
            yield rel, path, hit.lineno, line, of(hit.value), isinstance(hit.ctx, (ast.Store, ast.Del))

    def _source(self, rel: str, source: tuple[bool, ast.expr]) -> ClassKey | None:
        """The class of what an assignment binds: an annotation (`x: T = ...`), a call of a class or of a
        function with a return annotation; else None."""
        annotation, value = source
        if annotation:
            return self.class_key(rel, _type_name(value))
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
            name = value.func.id
            if self.resolve(rel, name) is not None:
                return self.class_key(rel, name)
            return self.returns(rel, name)
        return None


def removed_under_readers(ops: list[tuple[int, Any]], applied: set[int], planned: dict[str, str], release: Any,
                          base: Any, package: str) -> dict[int, str]:
    """Applied steps that take `self.B` away from a class (their `match` assigns it, their `code` does not) while
    the release, as planned, still reads `B` on an object of that class somewhere (another file included), and no
    class of its family defines it any more, and nothing sets it from outside. A read the base release has too,
    on a line no step of the recipe removes, was the team's to judge and is not counted. Index -> why."""
    todo = {}
    for i, op in ops:
        if i not in applied:
            continue
        attrs = removed_attributes(getattr(op, "match", None), getattr(op, "code", None))
        anchor = next((getattr(op, f) for f in ("within", "cls", "function") if isinstance(getattr(op, f, None), str)),
                      None)
        tree = release.tree(op.file) if op.file in release.texts() else None
        if anchor and isinstance(_def_at(tree, anchor), ast.ClassDef):
            attrs |= class_level_names(getattr(op, "match", None), getattr(op, "code", None))
        if attrs:
            todo[i] = attrs
    if not todo:
        return {}
    now = Classes(Overlay(release, planned))
    then = Classes(base) if base is not None else None
    removed_lines: dict[str, set[str]] = {}
    for _, op in ops:
        match = getattr(op, "match", None)
        if isinstance(match, str):
            removed_lines.setdefault(op.file, set()).update(" ".join(ln.split()) for ln in match.splitlines()
                                                            if ln.strip() and ln.strip() != "...")
    out: dict[int, str] = {}
    op_of = dict(ops)
    for index, attrs in sorted(todo.items()):
        op = op_of[index]
        heads = [getattr(op, f).split(".")[0] for f in ("cls", "function", "within")
                 if isinstance(getattr(op, f, None), str)]
        head = next((h for h in heads if (op.file, h) in now.named(h, op.file)), None)
        fam = now.family(head, op.file) if head else None
        if fam is None or fam[1]:
            continue  # not in a class of the package, or one a base class from outside may give it
        whys = []
        for attr in sorted(attrs):
            if any(attr in now.defined(k)[0] or now.defined(k)[1] for k in fam[0]):
                continue
            members = set(fam[0])
            uses = list(_Uses(now, package).uses(attr))
            outside = [u for u in uses if u[5] and (u[4] in members or (u[4] is None and _mentions(now, u[0], fam[0])))]
            if outside:
                continue  # set from outside the class (or by code whose object cannot be told)
            readers = [u for u in uses if not u[5] and u[4] in members]
            if then is not None and readers:
                old = then.family(head, op.file)
                known = {(u[0], u[1], u[3]) for u in _Uses(then, package).uses(attr)
                         if not u[5] and old is not None and u[4] in set(old[0])
                         and not any(m in " ".join(u[3].split()) for m in removed_lines.get(u[0], ()))}
                readers = [u for u in readers if (u[0], u[1], u[3]) not in known]
            if readers:
                first = readers[0]
                more = f" and {len(readers) - 1} more" if len(readers) > 1 else ""
                whys.append(f"`{attr}`, which no class of `{head}`'s family defines once applied, while the "
                            f"release reads it in `{first[0]}` (line {first[2]}, `{first[1]}`: `{first[3]}`){more}")
        if whys:
            out[index] = ("it removes " + "; ".join(whys) + ", a read the base release did not have: the code would "
                          "raise `AttributeError`; not applied")
    return out


def _mentions(classes: Classes, rel: str, family: list[ClassKey]) -> bool:
    """Whether the file names a class of the family (so an object of unknown class there may be one of them)."""
    text = classes.index.texts().get(rel, "")
    return any(re.search(rf"\b{re.escape(k[1])}\b", text) for k in family)
