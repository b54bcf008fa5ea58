"""Which calls of a module run which of its functions: one resolver, both ways, for the operations' checks.

A call is resolved only where the module itself tells what it runs; anything else (a name the calling function
binds, an instance of another module's class, an attribute of a parameter) is "cannot tell" and checked by nobody.
The forms understood, for a function `f`, a class `C` (its `__init__`) and a method `m` of `C`:

    f(...)      C(...)      self.m(...) / cls.m(...)     C.m(...)     C().m(...)     super().m(...)
    e.m(...) after `e = C(...)`, the only binding of `e` in the calling function
    cls(...) in a classmethod, type(self)(...) and self.__class__(...) in a method: the class around it

`self.m` and `super().m` are looked up as Python does, through the classes of the module the class derives from;
`self.m(...)` in a subclass that does not define `m` runs `C.m`. How many of the callee's first parameters the call
fills without an argument is given with it ("skip": 1 for a bound method's instance or a class's `self`, 0 for a
function, a static method, or `C.m(obj, ...)`, which passes the instance by position).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

Def = cst.FunctionDef


def _body(node: cst.CSTNode) -> list[cst.CSTNode]:
    body = getattr(node, "body", None)
    return list(body.body) if isinstance(body, cst.IndentedBlock) else []


def _decorators(fn: Def) -> set[str]:
    return {d.decorator.value for d in fn.decorators if isinstance(d.decorator, cst.Name)}


def base_names(module: cst.Module, cls: cst.ClassDef) -> list[str]:
    """The last dotted part of each base class written in `cls`'s header, in order (`pkg.Base` is `Base`)."""
    return [module.code_for_node(b.value).strip().split(".")[-1] for b in cls.bases if b.keyword is None]


def module_classes(module: cst.Module) -> dict[str, cst.ClassDef]:
    """The module-level classes by name (the last definition of a name wins, as when the module runs)."""
    return {n.name.value: n for n in module.body if isinstance(n, cst.ClassDef)}


def subclasses(module: cst.Module, name: str) -> set[str]:
    """`name` and the module-level classes that inherit from it, through one another."""
    classes = [n for n in module.body if isinstance(n, cst.ClassDef)]
    out, grew = {name}, True
    while grew:
        grew = False
        for c in classes:
            if c.name.value not in out and set(base_names(module, c)) & out:
                out.add(c.name.value)
                grew = True
    return out


_NEUTRAL = {"object", "ABC", "Generic", "Protocol"}  # bases that define no method a call of the module runs


def _lookup(module: cst.Module, cls: cst.ClassDef, name: str, *, own: bool = True,
            seen: frozenset[str] = frozenset()) -> Def | None:
    """The method `name` that `cls` (or, with `own=False`, only its bases) has, looked up depth-first through its
    bases, left to right, as long as they are classes of the module: None when none defines it, or when a base from
    elsewhere comes first (it may define it)."""
    if own:
        found = [n for n in _body(cls) if isinstance(n, Def) and n.name.value == name]
        if found:
            return found[-1]
    classes = module_classes(module)
    for base in base_names(module, cls):
        if base.split("[")[0] in _NEUTRAL:
            continue
        if base not in classes or base in seen or classes[base] is cls:
            return None
        hit = _lookup(module, classes[base], name, seen=seen | {cls.name.value})
        if hit is not None:
            return hit
    return None


def dataclass_decorator_options(module: cst.Module, cls: cst.ClassDef) -> dict[str, str] | None:
    """The options of a class's `@dataclass` (`@dataclass`, `@dataclasses.dataclass(...)`) as text, among its
    decorators; None when none of them is `dataclass`."""
    for d in cls.decorators:
        dec = d.decorator
        head = module.code_for_node(dec.func if isinstance(dec, cst.Call) else dec).strip().split(".")[-1]
        if head == "dataclass":
            return {a.keyword.value: module.code_for_node(a.value).strip() for a in getattr(dec, "args", ())
                    if a.keyword is not None}
    return None


def _dataclass_options(module: cst.Module, cls: cst.ClassDef) -> dict[str, str] | None:
    """`dataclass_decorator_options` of a class whose one decorator is `@dataclass`: None when it has another
    decorator too (what that one does to the `__init__` cannot be told)."""
    return dataclass_decorator_options(module, cls) if len(cls.decorators) == 1 else None


def _dataclass_fields(module: cst.Module, cls: cst.ClassDef, seen: frozenset[str] = frozenset()
                      ) -> list[tuple[str, bool]] | None:
    """The parameters the generated `__init__` of a dataclass of the module takes, in order, each with whether it
    is keyword-only: its bases' (dataclasses of the module) first. None when it cannot be told (a base from
    elsewhere, a base that is no dataclass, `init=False`)."""
    options = _dataclass_options(module, cls)
    if options is None or options.get("init") == "False":
        return None
    out: list[tuple[str, bool]] = []
    classes = module_classes(module)
    for base in base_names(module, cls):
        if base.split("[")[0] in _NEUTRAL:
            continue
        if base not in classes or base in seen:
            return None
        inherited = _dataclass_fields(module, classes[base], seen | {cls.name.value})
        if inherited is None:
            return None
        out = [f for f in out if f[0] not in {n for n, _ in inherited}] + inherited
    kw = options.get("kw_only") == "True"
    for stmt in _body(cls):
        small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
        if not isinstance(small, cst.AnnAssign) or not isinstance(small.target, cst.Name):
            continue
        note = module.code_for_node(small.annotation.annotation)
        if "KW_ONLY" in note:
            kw = True
            continue
        if "ClassVar" in note:
            continue
        value = small.value
        flat = "".join(module.code_for_node(value).split()) if value is not None else ""
        name = small.target.value
        if isinstance(value, cst.Call) and module.code_for_node(value.func).split(".")[-1] == "field" \
                and "init=False" in flat:
            out = [f for f in out if f[0] != name]  # redeclared `init=False`: a base's parameter no more
            continue
        out = [f for f in out if f[0] != name] + [(name, kw or "kw_only=True" in flat)]
    return out


def _dataclass_init(module: cst.Module, cls: cst.ClassDef) -> Def | None:
    """The `__init__` a dataclass of the module without one of its own gets (`@dataclass` leaves an own one as it
    is: `_init_of` reads that first), as a def: its parameters, defaults left out; None when it cannot be told."""
    fields = _dataclass_fields(module, cls)
    if fields is None:
        return None
    plain = [n for n, k in fields if not k]
    kwonly = [n for n, k in fields if k]
    params = ", ".join(["self", *plain, *(["*", *kwonly] if kwonly else [])])
    return cst.parse_statement(f"def __init__({params}):\n    pass\n")


def _init_of(module: cst.Module, cls: cst.ClassDef, seen: frozenset[str] = frozenset()) -> Def | None:
    """The `__init__` a call of the class runs: its own; the one a dataclass generates; a NamedTuple's (its
    fields); the first base's, through the classes of the module; `object`'s (no parameter) for a class with no
    base but those that define none. None when it cannot be told: another decorator, a metaclass, a `__new__`, a
    base from elsewhere."""
    own = [n for n in _body(cls) if isinstance(n, Def) and n.name.value == "__init__"]
    if own:
        return own[-1]
    if cls.decorators:
        return _dataclass_init(module, cls)  # a dataclass writes its own `__init__`; another decorator: unknown
    bound = {n.name.value for n in _body(cls) if isinstance(n, (Def, cst.ClassDef))} | {
        t.target.value for n in _body(cls) if isinstance(n, cst.SimpleStatementLine) for a in n.body
        if isinstance(a, cst.Assign) for t in a.targets if isinstance(t.target, cst.Name)}
    if any(b.keyword is not None for b in cls.bases) or {"__new__", "__init__", "__call__"} & bound:
        return None  # a metaclass, a `__new__`, an `__init__ = ...`: what the call takes is theirs
    bases = [b for b in base_names(module, cls) if b.split("[")[0] not in _NEUTRAL]
    if len(bases) > 1:
        return _lookup(module, cls, "__init__")  # the method resolution order across several bases
    if bases == ["NamedTuple"]:
        names = [s.body[0].target.value for s in _body(cls) if isinstance(s, cst.SimpleStatementLine)
                 and len(s.body) == 1 and isinstance(s.body[0], cst.AnnAssign) and isinstance(s.body[0].target, cst.Name)]
        return cst.parse_statement(f"def __init__({', '.join(['self', *names])}):\n    pass\n")
    if not bases:
        return cst.parse_statement("def __init__(self):\n    pass\n")  # `object.__init__` takes nothing
    classes = module_classes(module)
    if bases[0] not in classes or bases[0] in seen:
        return None
    return _init_of(module, classes[bases[0]], seen | {cls.name.value})


def _skip(fn: Def, bound: bool) -> int:
    kinds = _decorators(fn)
    if "staticmethod" in kinds:
        return 0
    return 1 if bound or "classmethod" in kinds else 0


def binds(fn: Def, name: str) -> bool:
    """Whether a function binds `name` itself: a parameter, an assignment or loop target, an import, `as`."""
    params = fn.params
    if any(p.name.value == name for p in (*params.posonly_params, *params.params, *params.kwonly_params)) or any(
            isinstance(p, cst.Param) and p.name.value == name for p in (params.star_arg, params.star_kwarg)):
        return True
    found = []

    class Visit(cst.CSTVisitor):
        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            if isinstance(node.target, cst.Name) and node.target.value == name:
                found.append(node)

        def visit_AsName(self, node: cst.AsName) -> None:
            if isinstance(node.name, cst.Name) and node.name.value == name:
                found.append(node)

        def visit_ImportAlias(self, node: cst.ImportAlias) -> None:
            if node.asname is None and isinstance(node.name, cst.Name) and node.name.value == name:
                found.append(node)

        def visit_For(self, node: cst.For) -> None:
            if isinstance(node.target, cst.Name) and node.target.value == name:
                found.append(node)

    fn.body.visit(Visit())
    return bool(found)


def callee(module: cst.Module, path: tuple[cst.CSTNode, ...], call: cst.Call) -> tuple[Def | None, int]:
    """The function of the module a call runs, and how many of its first parameters the call fills without an
    argument; (None, 0) when the module does not tell. `path` is the chain of nodes from the module down to the
    call (the enclosing classes and functions are read from it)."""
    func = call.func
    functions = [n for n in path if isinstance(n, Def)]
    cls = next((n for n in reversed(path) if isinstance(n, cst.ClassDef)), None)
    classes = module_classes(module)
    at = next((i for i, n in enumerate(path) if n is cls), len(path))
    method = next((n for n in path[at + 1:] if isinstance(n, Def)), None)  # the method of the class around it
    if _self_type_call(func, method):
        init = _init_of(module, cls)
        return (init, 1) if init is not None else (None, 0)
    if isinstance(func, cst.Name):
        if any(binds(f, func.value) for f in functions):
            return None, 0  # a parameter, local or import of that name in the calling function: not the module's
        found = [n for n in module.body if isinstance(n, (Def, cst.ClassDef)) and n.name.value == func.value]
        if not found:
            return None, 0
        if isinstance(found[-1], cst.ClassDef):
            init = _init_of(module, found[-1])
            return (init, 1) if init is not None else (None, 0)
        return found[-1], 0
    if not isinstance(func, cst.Attribute):
        return None, 0
    owner, name = func.value, func.attr.value
    if isinstance(owner, cst.Name) and owner.value in ("self", "cls") and cls is not None and functions:
        first = (method.params.posonly_params or method.params.params or (None,))[0] if method else None
        if first is None or first.name.value != owner.value:
            return None, 0
        fn = _lookup(module, cls, name)
        return (fn, _skip(fn, True)) if fn is not None else (None, 0)
    if isinstance(owner, cst.Name) and owner.value in classes and not any(binds(f, owner.value) for f in functions):
        fn = _lookup(module, classes[owner.value], name)
        return (fn, _skip(fn, False)) if fn is not None else (None, 0)
    made = instance_of(functions[-1], owner.value) if isinstance(owner, cst.Name) and functions else None
    if made in classes:  # `e = Eng()` then `e.step(...)` in one function
        fn = _lookup(module, classes[made], name)
        return (fn, _skip(fn, True)) if fn is not None else (None, 0)
    if isinstance(owner, cst.Call) and isinstance(owner.func, cst.Name):
        if owner.func.value == "super" and cls is not None:
            bases = [b for b in base_names(module, cls) if b.split("[")[0] not in _NEUTRAL]
            if name == "__init__" and len(bases) == 1 and bases[0] in classes:
                fn = _init_of(module, classes[bases[0]])  # a dataclass base's generated one too
            else:
                fn = _lookup(module, cls, name, own=False)
        elif owner.func.value in classes and not any(binds(f, owner.func.value) for f in functions):
            fn = _lookup(module, classes[owner.func.value], name)
        else:
            fn = None
        return (fn, _skip(fn, True)) if fn is not None else (None, 0)
    return None, 0


def calls_in_classes(module: cst.Module) -> list[tuple[cst.Call, cst.ClassDef | None]]:
    """Every call of the module with the class whose body (methods included) holds it, if any."""
    return [(call, cls) for call, cls, _ in calls_in_scopes(module)]


def calls_in_scopes(module: cst.Module) -> list[tuple[cst.Call, cst.ClassDef | None, Def | None]]:
    """Every call of the module with the class whose body (methods included) holds it and the innermost function
    that holds it, if any."""
    found: list[tuple[cst.Call, cst.ClassDef | None, Def | None]] = []
    classes: list[cst.ClassDef] = []
    functions: list[Def] = []

    class _Visitor(cst.CSTVisitor):
        def visit_ClassDef(self, node: cst.ClassDef) -> None:
            classes.append(node)

        def leave_ClassDef(self, node: cst.ClassDef) -> None:
            classes.pop()

        def visit_FunctionDef(self, node: Def) -> None:
            functions.append(node)

        def leave_FunctionDef(self, node: Def) -> None:
            functions.pop()

        def visit_Call(self, node: cst.Call) -> None:
            found.append((node, classes[-1] if classes else None, functions[-1] if functions else None))

    module.visit(_Visitor())
    return found


def instance_of(fn: Def, name: str) -> str | None:
    """The class `C` when the function binds `name` once, by `name = C(...)` (a local instance: `e = Eng()` then
    `e.step(...)`), else None (a parameter, bound twice, in a loop, by anything else)."""
    params = fn.params
    if any(p.name.value == name for p in (*params.posonly_params, *params.params, *params.kwonly_params)) or any(
            isinstance(p, cst.Param) and p.name.value == name for p in (params.star_arg, params.star_kwarg)):
        return None
    made: list[str | None] = []  # per binding of `name`: the class it is made of, None for any other binding

    def other(node: cst.CSTNode | None) -> None:
        if isinstance(node, cst.Name) and node.value == name:
            made.append(None)

    class Visit(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            if any(isinstance(t.target, cst.Name) and t.target.value == name for t in node.targets):
                value = node.value
                one = len(node.targets) == 1 and isinstance(value, cst.Call) and isinstance(value.func, cst.Name)
                made.append(value.func.value if one else None)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            other(node.target)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            other(node.target)

        def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
            other(node.target)

        def visit_AsName(self, node: cst.AsName) -> None:  # `with ... as e`, `except ... as e`, `import x as e`
            other(node.name)

        def visit_ImportAlias(self, node: cst.ImportAlias) -> None:
            if node.asname is None:
                other(node.name)

        def visit_For(self, node: cst.For) -> None:
            for n in _names_in(node.target):
                other(n)

        def visit_Global(self, node: cst.Global) -> None:
            for n in node.names:
                other(n.name)

        def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
            for n in node.names:
                other(n.name)

    fn.body.visit(Visit())
    return made[0] if len(made) == 1 else None


def _names_in(target: cst.BaseExpression) -> list[cst.Name]:
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _names_in(e.value)]
    return []


def _self_type_call(func: cst.BaseExpression, method: Def | None) -> bool:
    """`cls(...)` in a classmethod, `type(self)(...)` / `self.__class__(...)` in a method: a construction of the
    class around it (or of a subclass, which the checks take as the class)."""
    if method is None:
        return False
    first = (method.params.posonly_params or method.params.params or (None,))[0]
    if first is None:
        return False
    me = first.name.value
    if isinstance(func, cst.Name):
        return func.value == me and "classmethod" in _decorators(method)
    if isinstance(func, cst.Call) and isinstance(func.func, cst.Name) and func.func.value == "type":
        return len(func.args) == 1 and isinstance(func.args[0].value, cst.Name) and func.args[0].value.value == me
    return isinstance(func, cst.Attribute) and func.attr.value == "__class__" \
        and isinstance(func.value, cst.Name) and func.value.value == me


def calls_to(module: cst.Module, fpath: tuple[cst.CSTNode, ...]) -> Iterator[tuple[cst.Call, int]]:
    """The calls of the module that run the function at `fpath` (the chain module .. function), each with how many
    positional parameters the call fills without an argument: the forms of the module docstring, and `self.m(...)`
    in a subclass of the module, which may run it."""
    fn = fpath[-1]
    cls = next((n for n in reversed(fpath[:-1]) if isinstance(n, cst.ClassDef)), None)
    kinds = _decorators(fn)
    static, classmethod = "staticmethod" in kinds, "classmethod" in kinds
    name = fn.name.value
    family = subclasses(module, cls.name.value) if cls is not None else set()  # `self.m` in them may run it
    classes = module_classes(module)
    for call, owner_cls, scope in calls_in_scopes(module):
        func, offset = call.func, 0
        if cls is None:
            hit = isinstance(func, cst.Name) and func.value == name and len(fpath) == 2
        elif name == "__init__":
            # `C(...)`, and `cls(...)` / `type(self)(...)` in a class of the family that gets this `__init__`
            hit, offset = isinstance(func, cst.Name) and func.value == cls.name.value or (
                owner_cls is not None and owner_cls.name.value in family and _self_type_call(func, scope)
                and _init_of(module, owner_cls) is fn), 1
        elif isinstance(func, cst.Attribute) and func.attr.value == name and isinstance(func.value, cst.Name) \
                and scope is not None and (made := instance_of(scope, func.value.value)) in family \
                and _lookup(module, classes[made], name) is fn:
            hit, offset = True, 0 if static else 1  # `e = Eng()` then `e.step(...)`
        else:
            owner = func.value if isinstance(func, cst.Attribute) else None
            inside = owner_cls is not None and owner_cls.name.value in family
            via_super = isinstance(owner, cst.Call) and isinstance(owner.func, cst.Name) \
                and owner.func.value == "super"
            hit = isinstance(func, cst.Attribute) and func.attr.value == name and (
                isinstance(owner, cst.Name) and owner.value in ("self", "cls") and inside
                or isinstance(owner, cst.Name) and owner.value == cls.name.value
                or via_super and inside and owner_cls is not cls
                or isinstance(owner, cst.Call) and isinstance(owner.func, cst.Name)
                and owner.func.value == cls.name.value)
            # `Cls.m(x)` passes the instance by position; the others (and a classmethod) are bound
            bound = classmethod or not (isinstance(owner, cst.Name) and owner.value == cls.name.value)
            offset = 1 if bound and not static else 0
        if hit:
            yield call, offset


def calls_by_name(module: cst.Module, name: str) -> list[cst.Call]:
    """The calls `name(...)` and `<x>.name(...)` of a module that pass arguments by position (the generated
    `__init__` of a dataclass has no def to resolve to)."""
    from ..anchors import module_code

    found: list[cst.Call] = []
    if not re.search(rf"\b{re.escape(name)}\s*\(", module_code(module)):
        return found  # not called at all: no walk over a large module
    for call, _ in calls_in_classes(module):
        f = call.func
        called = f.value if isinstance(f, cst.Name) else f.attr.value if isinstance(f, cst.Attribute) else None
        if called == name and any(a.keyword is None for a in call.args):
            found.append(call)
    return found
