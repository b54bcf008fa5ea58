"""Rules of a patched file's tree that Python accepts and that go wrong when the code runs, each a function of the
tree giving `(line, why)` per finding. The engine charges a finding to the step whose code holds the line, and
only when the original file does not give the same `why` (the release's own are not the recipe's doing), so a
`why` names things, never lines.

- `builtins_shadowed`: a module-level binding of a builtin's name the module's own code reads;
- `mutable_defaults_changed`: a function's mutable default value (`acc=[]`) that the function changes;
- `unpacked_wrong`: a tuple literal, or a module name bound once to one, unpacked into another number of names;
- `contextmanager_yields`: a `@contextmanager` function that may yield twice, or end without yielding;
- `readonly_writes`: a method assigning on its instance what it cannot take (a property without a setter, a
  NamedTuple's field, what a `@dataclass(slots=True)` has no slot for);
- `import_time_reads`: a module-level call of a function of the module that reads a global bound further down."""

from __future__ import annotations

import ast
import builtins
from typing import Iterable

_MUTATORS = frozenset({"append", "extend", "insert", "add", "update", "setdefault", "pop", "popitem", "remove",
                       "discard", "clear", "sort", "reverse", "__setitem__"})


_NODES: dict[int, tuple[ast.AST, list[ast.AST]]] = {}


def _nodes(tree: ast.AST) -> list[ast.AST]:
    """`ast.walk(tree)` as a list, kept for the rules that read every node of the same tree (one walk, not one
    each)."""
    hit = _NODES.get(id(tree))
    if hit is None or hit[0] is not tree:
        if len(_NODES) > 16:
            _NODES.clear()
        hit = _NODES[id(tree)] = (tree, list(ast.walk(tree)))
    return hit[1]


def _walk(nodes: Iterable[ast.AST]) -> Iterable[ast.AST]:
    """Every node under `nodes`, what nested functions, classes and lambdas hold left out (their own scopes; the
    def itself is yielded)."""
    todo = list(nodes)
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue  # a def among `nodes` binds its name; its body is another scope
        todo.extend(ast.iter_child_nodes(node))


def _module_bindings(body: list[ast.stmt]) -> Iterable[tuple[str, ast.stmt]]:
    """(name, statement) for what the module's own level binds: imports, defs, classes, assignments, in `if`/`try`
    blocks at that level too."""
    for st in body:
        if isinstance(st, (ast.Import, ast.ImportFrom)):
            for a in st.names:
                if a.name != "*":
                    yield (a.asname or a.name).split(".")[0], st
        elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield st.name, st
        elif isinstance(st, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for t in st.targets if isinstance(st, ast.Assign) else [st.target]:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        yield n.id, st
        elif isinstance(st, (ast.If, ast.Try)):
            for block in (st.body, st.orelse, *(h.body for h in getattr(st, "handlers", ())),
                          getattr(st, "finalbody", [])):
                yield from _module_bindings(block)


# the builtins a module's code reads as such: not exceptions (a module's own `TimeoutError` is meant to be caught) or
# what `site` adds for the interactive prompt (`exit`, `help`)
_BUILTINS = frozenset(n for n in dir(builtins) if not n.startswith("_") and n not in (
    "exit", "quit", "help", "copyright", "credits", "license") and not (
    isinstance(getattr(builtins, n), type) and issubclass(getattr(builtins, n), BaseException)))


def builtins_shadowed(tree: ast.Module) -> list[tuple[int, str]]:
    """A builtin's name (`open`, `filter`) the module binds at its own level (an import, a def, an assignment)
    while its code reads the name: every such read gets the module's instead of the builtin."""
    bound = {}
    for name, st in _module_bindings(tree.body):
        if name in _BUILTINS:
            bound.setdefault(name, st)
    if not bound:
        return []
    # `aiter.ops.f(...)`: a read of an attribute of it means the module's (AMD's `aiter`), not the builtin
    values = {id(n.value) for n in _nodes(tree) if isinstance(n, ast.Attribute)}
    read = {n.id for n in _nodes(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in bound
            and id(n) not in values}
    return [(bound[name].lineno, f"binds `{name}` at module level, and the module's own code reads `{name}`, the "
                                 f"builtin: every such read gets the module's `{name}` instead")
            for name in sorted(read)]


def _mutable(node: ast.expr) -> str | None:
    if isinstance(node, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)):
        return ast.unparse(node) if len(ast.unparse(node)) < 40 else type(node).__name__.lower()
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (
            "list", "dict", "set", "bytearray", "defaultdict", "OrderedDict", "deque", "Counter"):
        return f"{node.func.id}(...)"
    return None


def mutable_defaults_changed(tree: ast.Module) -> list[tuple[int, str]]:
    """A parameter whose default is a mutable object (`[]`, `{}`, `set()`) that the function changes in place
    (`acc.append(x)`, `acc[k] = v`, `acc += ...`): the default is made once, so every call that leaves the argument
    out shares, and sees, what the earlier ones put in it."""
    out: list[tuple[int, str]] = []
    for fn in _nodes(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or not (fn.args.defaults or fn.args.kw_defaults):
            continue
        a = fn.args
        positional = [*a.posonlyargs, *a.args]
        pairs = list(zip(positional[len(positional) - len(a.defaults):], a.defaults)) + \
            [(p, d) for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
        mutable = {p.arg: (shown, d) for p, d in pairs if (shown := _mutable(d)) is not None}
        if mutable:  # `acc = list(acc)` first: a copy of its own is changed, not the default
            for node in _walk(fn.body):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    mutable.pop(node.id, None)
        if not mutable:
            continue
        for node in _walk(fn.body):
            name = how = None
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and isinstance(node.func.value, ast.Name) and node.func.attr in _MUTATORS:
                name, how = node.func.value.id, f"{node.func.value.id}.{node.func.attr}(...)"
            elif isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
                for t in node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]:
                    base = t.value if isinstance(t, (ast.Subscript, ast.Attribute)) else \
                        t if isinstance(node, ast.AugAssign) else None
                    if isinstance(base, ast.Name) and base.id in mutable:
                        name, how = base.id, ast.unparse(node).split("\n")[0][:60]
            if name in mutable:
                shown, default = mutable.pop(name)
                out.append((default.lineno, f"gives `{fn.name}`'s parameter `{name}` the default `{shown}`, which "
                                            f"`{fn.name}` changes in place (`{how}`): Python makes a default once, so "
                                            f"each call without `{name}` sees what the earlier ones put in it"))
    return out


def _length(node: ast.expr | None) -> int | None:
    """The number of values of a tuple or list literal without `*` unpacking; None otherwise."""
    if isinstance(node, (ast.Tuple, ast.List)) and not any(isinstance(e, ast.Starred) for e in node.elts):
        return len(node.elts)
    return None


def unpacked_wrong(tree: ast.Module) -> list[tuple[int, str]]:
    """`a, b = ("x", "y", "z")`, `x, y = POINT` where the module binds `POINT` once to a tuple literal of another
    length, `for a, b in PAIRS` where one of the literal's items has another length: ValueError when it runs."""
    once: dict[str, ast.expr] = {}
    seen: set[str] = set()
    for name, st in _module_bindings(tree.body):
        if name in seen:
            once.pop(name, None)
            continue
        seen.add(name)
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
            once[name] = st.value
    # a name some function rebinds with `global` is not the literal any more
    for node in _nodes(tree):
        if isinstance(node, ast.Global):
            for n in node.names:
                once.pop(n, None)
    out: list[tuple[int, str]] = []

    def literal(value: ast.expr) -> tuple[str, ast.expr] | None:
        if isinstance(value, ast.Name) and isinstance(value.ctx, ast.Load) and value.id in once:
            return f"`{value.id}`", once[value.id]
        if isinstance(value, (ast.Tuple, ast.List)):
            return "a literal", value
        return None

    for node in _nodes(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            want, got = _length(node.targets[0]), literal(node.value)
            if want is not None and got is not None and _length(got[1]) not in (None, want):
                out.append((node.lineno, f"unpacks {got[0]} of {_length(got[1])} values into {want} names: "
                                         f"ValueError when it runs"))
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            want, got = _length(node.target), literal(node.iter)
            if want is None or got is None or not isinstance(got[1], (ast.Tuple, ast.List)):
                continue
            wrong = next((n for e in got[1].elts if (n := _length(e)) not in (None, want)), None)
            if wrong is not None:
                out.append((getattr(node, "lineno", None) or node.target.lineno,
                            f"unpacks each item of {got[0]} into {want} names, and one of them has {wrong} values: "
                            f"ValueError when the loop reaches it"))
    return out


Ways = dict  # how a block is left ("go" on below it, "ret"urn, "brk" out of a loop, "cont"inue) -> (fewest, most)
_NONE = float("inf")


def _merge(*ways: Ways) -> Ways:
    out: Ways = {}
    for w in ways:
        for kind, (lo, hi) in w.items():
            was = out.get(kind)
            out[kind] = (lo, hi) if was is None else (min(was[0], lo), max(was[1], hi))
    return out


def _count(node: ast.AST) -> int:
    return sum(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in _walk([node]))


def _yields(stmts: list[ast.stmt]) -> Ways:
    """The yields on the ways through `stmts`, by how each way leaves them (ways that raise are left out)."""
    state: Ways = {"go": (0, 0)}
    for st in stmts:
        if "go" not in state:
            break
        lo, hi = state.pop("go")
        state = _merge(state, {kind: (lo + a, hi + b) for kind, (a, b) in _one(st).items()})
    return state


def _one(st: ast.stmt) -> Ways:
    if isinstance(st, ast.Return):
        return {"ret": (_count(st), _count(st))}
    if isinstance(st, ast.Raise):
        return {}
    if isinstance(st, ast.Break):
        return {"brk": (0, 0)}
    if isinstance(st, ast.Continue):
        return {"cont": (0, 0)}
    if isinstance(st, ast.If):
        return _merge(_yields(st.body), _yields(st.orelse))
    if isinstance(st, ast.Match):
        last = st.cases[-1] if st.cases else None
        total = last is not None and last.guard is None and isinstance(last.pattern, ast.MatchAs) \
            and last.pattern.pattern is None
        return _merge(*(_yields(c.body) for c in st.cases), *([] if total else [{"go": (0, 0)}]))
    if isinstance(st, (ast.For, ast.AsyncFor, ast.While)):
        body = _yields(st.body)
        # a way that loops again and yields: the loop may yield on every turn
        more = 2 if any(hi for kind, (_, hi) in body.items() if kind in ("go", "cont")) else 0
        forever = isinstance(st, ast.While) and isinstance(st.test, ast.Constant) and bool(st.test.value)
        out: Ways = {} if forever else {"go": (0, more)}
        if "brk" in body:
            out = _merge(out, {"go": (body["brk"][0], body["brk"][1] + more)})
        if "ret" in body:
            out = _merge(out, {"ret": (body["ret"][0], body["ret"][1] + more)})
        return out
    if isinstance(st, ast.Try) or type(st).__name__ == "TryStar":
        body = _yields(st.body + st.orelse)
        most = max((hi for _, hi in body.values()), default=0)
        # a handler runs after what the body yielded before the exception (one thrown in at a `yield` included)
        caught = _merge(*(_yields(h.body) for h in st.handlers)) if st.handlers else {}
        ways = _merge(body, {kind: (_NONE, most + hi) for kind, (_, hi) in caught.items()})
        if st.finalbody:
            after = _yields(st.finalbody)
            if "go" not in after:
                return after
            a, b = after["go"]
            ways = {kind: (lo + a, hi + b) for kind, (lo, hi) in ways.items()}
        return ways
    if isinstance(st, (ast.With, ast.AsyncWith)):
        return _yields(st.body)
    if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {"go": (0, 0)}  # its body runs in a scope of its own
    return {"go": (_count(st), _count(st))}


def contextmanager_yields(tree: ast.Module) -> list[tuple[int, str]]:
    """A function decorated `@contextmanager` / `@asynccontextmanager` must yield exactly once on every way through
    it: one that may yield twice raises "generator didn't stop" at the end of the `with`, one that may end without
    yielding "generator didn't yield" at its start."""
    out: list[tuple[int, str]] = []
    for fn in _nodes(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or not fn.decorator_list or not any(
                (d.attr if isinstance(d, ast.Attribute) else getattr(d, "id", "")).endswith("contextmanager")
                for d in fn.decorator_list):
            continue
        if not any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in _walk(fn.body)):
            continue  # a stub (a Protocol's, an abstract method's `...`) is never run as a generator
        ways = [w for k, w in _yields(fn.body).items() if k in ("go", "ret")]
        if not ways:
            continue
        lo, hi = min(lo for lo, _ in ways), max(hi for _, hi in ways)
        own = list(_walk(fn.body))
        if hi > 1:
            line = max((n.lineno for n in own if isinstance(n, (ast.Yield, ast.YieldFrom))), default=fn.lineno)
            out.append((line, f"makes the context manager `{fn.name}` yield more than once on a way through it: "
                                   f"RuntimeError (\"generator didn't stop\") when a `with` of it ends"))
        elif lo == 0:
            line = min((n.lineno for n in own if isinstance(n, ast.Return)), default=fn.lineno)
            out.append((line, f"lets the context manager `{fn.name}` end without yielding on a way through it: "
                                   f"RuntimeError (\"generator didn't yield\") when a `with` of it starts"))
    return out


def _instance_writes(cls: ast.ClassDef) -> Iterable[tuple[ast.AST, ast.Attribute]]:
    """(method, `self.x` node) for each attribute a method of the class assigns or deletes on its instance."""
    for fn in cls.body:
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or not fn.args.args or any(
                isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod") for d in fn.decorator_list):
            continue
        me = fn.args.args[0].arg
        for n in _walk(fn.body):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == me \
                    and isinstance(n.ctx, (ast.Store, ast.Del)):
                yield fn, n


def readonly_writes(tree: ast.Module) -> list[tuple[int, str]]:
    """A method assigning on its instance what the instance cannot take: a property of the class without a setter,
    any attribute of a NamedTuple, an attribute of a `@dataclass(slots=True)` that is none of its fields
    (AttributeError at every call)."""
    out: list[tuple[int, str]] = []
    classes = [n for n in _nodes(tree) if isinstance(n, ast.ClassDef)]
    own = {c.name for c in classes} | {"object", "ABC", "Generic"}

    def last(node: ast.expr) -> str:
        return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")

    for cls in classes:
        decorated = any(isinstance(d, ast.Call) for d in cls.decorator_list)
        bases = {last(b) for b in cls.bases}
        if not decorated and "NamedTuple" not in bases and not any(
                isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                    isinstance(d, ast.Name) and d.id == "property" for d in f.decorator_list) for f in cls.body):
            continue  # nothing it holds takes no assignment: its methods are not read
        plain = bases <= own  # a base from elsewhere may have its own `__setattr__` (torch's `nn.Module`)
        made_anew = any(isinstance(d, ast.Call) and ast.unparse(d.func).split(".")[-1] == "dataclass" and any(
            k.arg == "slots" and isinstance(k.value, ast.Constant) and k.value.value is True for k in d.keywords)
            for d in cls.decorator_list)
        slots = made_anew and not bases - {"object"}
        props = {f.name for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and any(ast.unparse(d) == "property" for d in f.decorator_list)}
        props -= {f.name for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                  and any(ast.unparse(d).endswith((".setter", ".deleter")) for d in f.decorator_list)}
        fields = {st.target.id for st in cls.body if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)}
        if made_anew:  # `slots=True` makes a new class; a method's `super()` still names the old one (before 3.14)
            out += [(n.lineno, f"calls `super()` without arguments in `{cls.name}.{fn.name}`, a method of a "
                               f"`@dataclass(slots=True)`: TypeError (\"obj must be an instance or subtype of type\") "
                               f"at every call on Python before 3.14")
                    for fn in cls.body if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                    for n in _walk(fn.body) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                    and n.func.id == "super" and not n.args][:1]
        for fn, node in _instance_writes(cls):
            if "NamedTuple" in bases:
                why = "a NamedTuple's: AttributeError (can't set attribute)"
            elif node.attr in props and plain and isinstance(node.ctx, ast.Store):
                why = f"a property of `{cls.name}` without a setter: AttributeError"
            elif slots and node.attr not in fields and not node.attr.startswith("__"):
                why = f"no field of `{cls.name}`, a `@dataclass(slots=True)`: AttributeError"
            else:
                continue
            out.append((node.lineno, f"assigns `{ast.unparse(node)}` in `{cls.name}.{fn.name}`, {why} at every call"))
    return out


def import_time_reads(tree: ast.Module) -> list[tuple[int, str]]:
    """A statement of the module's own level that calls a function of the module (`DEFAULT = make()`), when that
    function reads a global the module binds only below the statement: NameError at import."""
    first: dict[str, int] = {}
    for name, st in _module_bindings(tree.body):
        first[name] = min(first.get(name, st.lineno), st.lineno)
    defs = {st.name: st for st in tree.body if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef))}
    out: list[tuple[int, str]] = []
    for st in tree.body:
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.Try)):
            continue
        for call in (n for n in _walk([st]) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)):
            fn = defs.get(call.func.id)
            if fn is None or fn.lineno > st.lineno:
                continue
            a = fn.args
            local = {p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if p is not None}
            local |= {n.id for n in _walk(fn.body) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
            late = sorted(n.id for n in _walk(fn.body) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
                          and n.id not in local and first.get(n.id, 0) > st.lineno)
            if late:
                out.append((st.lineno, f"calls `{fn.name}` at import, which reads `{late[0]}`, bound only further down "
                                       f"the module: NameError when the module is imported"))
                break
    return out
