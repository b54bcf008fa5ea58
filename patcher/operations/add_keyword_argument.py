"""`add_keyword_argument`: add a keyword argument to the one call that matches a pattern.

Example (sglang 0.5.9, `Scheduler.init_disaggregation`)::

    - op: add_keyword_argument
      file: srt/managers/scheduler.py
      within: Scheduler.init_disaggregation       # optional: a class or function, dotted; default: the module
      call: DecodePreallocQueue(...)              # a pattern of the call (see `patcher.patterns`)
      after: transfer_backend                     # optional: the keyword the new one follows; default: the end
      code: enable_profiling=self.enable_profiling

`call` is a code pattern of one call expression: `f(...)` matches every call of `f` whatever its arguments,
`f(a, ...)` those whose first argument is `a`, whatever follows it (`parser.add_argument("--port", ...)`), and
`f(a, k=...)` those of exactly these arguments (`...` is any one value); it is compared with the calls under `within`
(any depth, or a variable the module assigns at its top level) once
the keyword being added is left out of them, so the pattern still matches after the step has run. It must match
exactly one call. The new argument takes the layout of its neighbours (one per line in a call written one argument
per line, a trailing comma kept).

Answers: *changed*; *already applied* (the call has that keyword with the same value, compared as code);
*cannot apply* (no call or several calls match, with the calls of the same function as candidates; `after` is not
a keyword of the call; or a conflict: the call already passes that keyword with another value).
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass
from typing import Literal

import libcst as cst

from ..anchors import expression_ast, near
from ..errors import AnchorAmbiguous, AnchorNotFound, Candidate, Conflict, RecipeError
from ..model import option
from ..patterns import Pattern
from ._calls import callee
from ._code import (EXPRESSION_WITHIN, added_before, expressions_under, insert_item, line_text, load_check, node_key,
                    parse_expression, past, expression_scope, split_comment, with_comment)
from .base import AlreadyApplied, Changed, Operation, Outcome, attempt, register


def _call_pattern(code: str) -> None:
    pattern = Pattern.parse(code)
    if not isinstance(pattern.node, ast.Call):
        raise ValueError(f"`call` must be a pattern of a call such as `f(...)`, got {line_text(code)!r}")


def _keyword(code: str) -> cst.Arg:
    code, _ = split_comment(code)  # a comment ending its line is put on the line of the new argument
    try:
        arg = parse_expression(f"f({code.strip()})", what="code").args
    except (RecipeError, AttributeError):
        arg = ()
    if len(arg) != 1 or arg[0].keyword is None:
        raise RecipeError(f"`code` must be one keyword argument `name=value`, got {line_text(code)!r}")
    return arg[0]


@register
@dataclass(frozen=True, kw_only=True)
class AddKeywordArgument(Operation):
    """Add `name=value` to the one call that matches the pattern `call`."""

    op: Literal["add_keyword_argument"]
    call: str = option(check=_call_pattern, description="a pattern of the call, e.g. DecodePreallocQueue(...)")
    code: str = option(check=load_check(_keyword), description="the keyword argument, e.g. enable_profiling=True")
    after: str | None = option(default=None, description="the keyword the new one follows; default: the end")
    within: str | None = option(default=None, description=EXPRESSION_WITHIN)
    #: `function:parameter` of the parameters the recipe's add_parameter steps in this file add, and
    #: `__init__:field` of its add_dataclass_field steps (set by `among`)
    parameters_added: tuple[str, ...] = option(default=(), exclude=True)
    #: the keywords earlier steps of the recipe add after the same keyword of the same call (set by `among`): the new
    #: one goes after them, in recipe order
    placed_before: tuple[str, ...] = option(default=(), exclude=True)

    def among(self, steps) -> "AddKeywordArgument":
        from dataclasses import replace

        from .add_parameter import _parameter

        added = []
        for s in steps:
            if s.op == "add_parameter":
                try:
                    # the function of that file, by its dotted name: `Base.step` gaining `trace` is no excuse for
                    # a call that runs `Fast.step`
                    added.append(f"{s.file}::{s.function}:{_parameter(s.code).name.value}")
                except RecipeError:
                    continue
            elif s.op == "add_dataclass_field":  # a field is a parameter of the `__init__` the dataclass gets
                try:
                    field = ast.parse(textwrap.dedent(s.code).strip()).body[0]
                except (SyntaxError, ValueError, RecursionError, IndexError):
                    continue
                if isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name):
                    added.append(f"__init__:{field.target.id}")
        before = added_before(self, steps, self.after, lambda s: (s.call, s.within), lambda s: s.after,
                              lambda s: _keyword(s.code).keyword.value)
        return replace(self, parameters_added=tuple(added), placed_before=before) if added or before else self

    def describe(self) -> str:
        return f"add `{line_text(self.code)}` to the call `{Pattern.parse(self.call)}`" + (
            f" in `{self.within}`" if self.within else "")

    def anchor(self) -> str:
        return f"{self.within or 'the module'}: `{Pattern.parse(self.call)}`"

    @attempt
    def apply(self, module: cst.Module) -> Outcome:
        new = _keyword(self.code)
        name = new.keyword.value
        pattern = Pattern.parse(self.call)
        scope = expression_scope(module, self.within)
        calls = expressions_under(scope, (cst.Call,))
        found = []
        for call in calls:
            tree = expression_ast(module, call)
            if isinstance(tree, ast.Call):
                tree.keywords = [k for k in tree.keywords if k.arg != name]
                if pattern.matches_expression(tree):
                    found.append(call)
        if not found:
            called = ast.unparse(pattern.node.func)
            texts = {line_text(module.code_for_node(c)): c for c in calls}
            same = [t for t, c in texts.items() if line_text(module.code_for_node(c.func)) == called]
            alike = near(str(pattern), same) or same[:5] or near(str(pattern), list(texts))
            candidates = [Candidate(f"`{t}`", node=texts[t]) for t in alike]
            if self.within and not same:
                candidates += _calls_elsewhere(module, called)  # upstream moved the call to another function?
            raise AnchorNotFound(f"no call matching `{pattern}` in `{self.within or 'the module'}`",
                                 candidates=candidates)
        if len(found) > 1:
            raise AnchorAmbiguous(f"{len(found)} calls match `{pattern}`",
                                  candidates=[Candidate(f"`{line_text(module.code_for_node(c))}`", node=c)
                                              for c in found])
        call = found[0]
        args = list(call.args)
        have = [a for a in args if a.keyword is not None and a.keyword.value == name]
        if have:
            if node_key(module, have[0].value) == node_key(module, new.value):
                return AlreadyApplied(call)
            raise Conflict(f"the call already passes `{name}` with another value: "
                           f"`{line_text(module.code_for_node(have[0]))}`",
                           candidates=[Candidate(f"`{line_text(module.code_for_node(call))}`", node=call)])
        packed = [(module.code_for_node(e.key), a) for a in args if a.star == "**"
                  for d in [a.value if isinstance(a.value, cst.Dict) else _module_dict(module, a.value)]
                  if d is not None for e in d.elements if isinstance(e, cst.DictElement)]
        through = next((a for k, a in packed if _string_value(k) == name), None)
        if through is not None:
            shown = "a `**{...}` argument" if isinstance(through.value, cst.Dict) else \
                f"`**{module.code_for_node(through.value)}` (a dict of the module)"
            raise Conflict(f"the call already passes `{name}` in {shown}: "
                           f"`{line_text(module.code_for_node(call))}` (adding `{name}=` would raise TypeError)",
                           candidates=[Candidate(f"`{line_text(module.code_for_node(call))}`", node=call)])
        path = scope[:-1] + calls._paths[id(call)]
        target, skip = callee(module, path, call)
        wrapped = target is not None and any(  # a decorator (a wrapper, a cache) may take other arguments
            not (isinstance(d.decorator, cst.Name) and d.decorator.value in ("staticmethod", "classmethod"))
            for d in target.decorators)
        if target is not None and not wrapped and name in {p.name.value for p in target.params.posonly_params}:
            # `f(a=5)` for `def f(a=0, /, ...)`: TypeError, or, with `**kwargs`, a keyword the parameter never sees
            raise Conflict(f"`{name}` is a positional-only parameter of `{target.name.value}` (before its `/`): "
                           f"passed by keyword it raises TypeError, or lands in `**kwargs`, not in `{name}`",
                           candidates=[Candidate(f"`def {target.name.value}("
                                                 f"{line_text(module.code_for_node(target.params))})`", node=target)])
        # a parameter the call fills without an argument (`self`) takes no keyword: "multiple values"
        if target is not None and not wrapped and target.params.star_kwarg is None and \
                name not in {p.name.value for p in (*[*target.params.posonly_params, *target.params.params][skip:],
                                                     *target.params.kwonly_params)} and \
                f"{self.file}::{_dotted(module, target)}:{name}" not in self.parameters_added and \
                f"{target.name.value}:{name}" not in self.parameters_added:
            raise Conflict(f"`{target.name.value}`, which the module defines, takes no parameter `{name}` (nor "
                           f"`**kwargs`): the call would raise TypeError (upstream renamed or removed it?)",
                           candidates=[Candidate(f"`def {target.name.value}("
                                                 f"{line_text(module.code_for_node(target.params))})`", node=target)])
        if target is not None and not wrapped and target.params.star_kwarg is not None \
                and name not in {p.name.value for p in (*target.params.params, *target.params.kwonly_params)}:
            onward = _forwarded_to_refusal(module, target, name)
            if onward is not None:
                raise Conflict(onward, candidates=[Candidate(f"`def {target.name.value}(...)`", node=target)])
        builtin = _builtin_refusal(module, path, call, name) if target is None else None
        if builtin is not None:
            raise Conflict(builtin, candidates=[Candidate(f"`{line_text(module.code_for_node(call))}`", node=call)])
        if name in _bound_by_position(module, scope[:-1] + calls._paths[id(call)], call):
            raise Conflict(f"the call already passes `{name}` by position: "
                           f"`{line_text(module.code_for_node(call))}` (adding `{name}=` would raise TypeError)",
                           candidates=[Candidate(f"`{line_text(module.code_for_node(call))}`", node=call)])
        if self.after is None:
            index = len(args)
            while index and args[index - 1].star == "**":
                index -= 1
        else:
            keys = [a.keyword.value if a.keyword is not None else None for a in args]
            if self.after not in keys:
                raise AnchorNotFound(f"the call `{pattern}` has no keyword `{self.after}`",
                                     candidates=[Candidate(f"`{k}`") for k in near(self.after, [k for k in keys if k])])
            index = keys.index(self.after) + 1
            index = past(keys, index, self.placed_before)  # steps after the same keyword: in recipe order
        items = insert_item(args, index, new, call.whitespace_before_args)
        _, comment = split_comment(self.code)
        if comment is not None:
            placed = with_comment(items, index, comment)
            if placed is None:
                raise Conflict(f"the call `{line_text(module.code_for_node(call))}` is written on one line: the code's "
                               f"comment has no line of its own there; leave it out of the code",
                               candidates=[Candidate(f"`{line_text(module.code_for_node(call))}`", node=call)])
            items = placed[0]
        changed = call.with_changes(args=items)
        return Changed(calls.replace(call, changed), inserted=(), anchor=call)


def _forwarded_to_refusal(module: cst.Module, target: cst.FunctionDef, name: str) -> str | None:
    """Why `name=`, caught by the `**kwargs` of `target` and passed on whole (`inner(a, **kw)`), fails there: the
    function of the module it is passed to takes no such parameter and no `**kwargs` (TypeError one call down)."""
    from .add_parameter import forwards_keyword

    kwargs = target.params.star_kwarg.name.value
    code = module.code_for_node(target)
    if not forwards_keyword(code, kwargs, name):
        return None
    try:
        tree = ast.parse(textwrap.dedent(code))
    except (SyntaxError, ValueError, RecursionError):
        return None
    defs = {n.name.value: n for n in module.body if isinstance(n, cst.FunctionDef)}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in defs
                and any(k.arg is None and isinstance(k.value, ast.Name) and k.value.id == kwargs for k in node.keywords)):
            continue
        inner = defs[node.func.id].params
        if inner.star_kwarg is None and name not in {p.name.value for p in (*inner.params, *inner.kwonly_params)}:
            return (f"`{target.name.value}` passes its `**{kwargs}` on to `{node.func.id}`, which takes no parameter "
                    f"`{name}` (nor `**kwargs`): the call would raise TypeError there")
    return None


def _calls_elsewhere(module: cst.Module, called: str) -> list[Candidate]:
    """The calls of `called` (the function's text, `uvicorn.run`) anywhere in the module, each named with the
    function or class that holds it: where a call `within` no longer has may have gone."""
    from ._code import expressions_under

    everywhere = expressions_under((module,), (cst.Call,))
    out = []
    for call in everywhere:
        if line_text(module.code_for_node(call.func)) != called:
            continue
        holders = [n.name.value for n in everywhere._paths[id(call)] if isinstance(n, (cst.FunctionDef, cst.ClassDef))]
        where = ".".join(holders) or "the module"
        out.append(Candidate(f"`{line_text(module.code_for_node(call))}` in `{where}`", node=call))
    return out[:3]


def _module_dict(module: cst.Module, value: cst.BaseExpression) -> cst.Dict | None:
    """The dict literal a name stands for when the module binds it once, at its own level, to one (`OPTS = {"b":
    3}` read as `f(**OPTS)`), else None."""
    if not isinstance(value, cst.Name):
        return None
    from ._code import module_assignments

    found = [small.value for st, small in module_assignments(module, value.value) if small is st.body[0]]
    return found[0] if len(found) == 1 and isinstance(found[0], cst.Dict) \
        and f"{value.value}[" not in module.code and f"{value.value}.update" not in module.code else None


def _builtin_refusal(module: cst.Module, path: tuple[cst.CSTNode, ...], call: cst.Call, name: str) -> str | None:
    """Why a builtin the call runs (`print`, `sorted`: a name neither the module nor the calling function binds)
    cannot take the keyword `name`, as its signature says; None when it can or when its signature is not known."""
    import builtins
    import inspect

    from ..anchors import module_code
    from ._calls import binds
    from .add_definition import bound_at_module_level

    func = call.func
    if not isinstance(func, cst.Name) or not hasattr(builtins, func.value) \
            or any(isinstance(n, cst.FunctionDef) and binds(n, func.value) for n in path):
        return None
    try:
        if func.value in bound_at_module_level(ast.parse(module_code(module)).body):
            return None
        signature = inspect.signature(getattr(builtins, func.value))
    except (SyntaxError, ValueError, TypeError, RecursionError):
        return None
    params = signature.parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in params) or any(
            p.name == name and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in params):
        return None
    return f"`{func.value}`, a builtin, takes no keyword `{name}`: the call would raise TypeError"


def _string_value(code: str) -> str | None:
    try:
        value = ast.literal_eval(code)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, str) else None


def _bound_by_position(module: cst.Module, path: tuple[cst.CSTNode, ...], call: cst.Call) -> set[str]:
    """The parameters a call's positional arguments bind, where the module defines what it calls (`callee`).
    Nothing when the callee cannot be read, or the call unpacks `*args`."""
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if any(a.star == "*" for a in call.args) or not positional:
        return set()
    target, skip = callee(module, path, call)
    if target is None:
        return set()
    names = [p.name.value for p in (*target.params.posonly_params, *target.params.params)][skip:]
    return set(names[:len(positional)])


def _dotted(module: cst.Module, target: cst.FunctionDef) -> str:
    """`Class.method` (or `function`) for a def of the module, by where it stands."""
    def find(body, prefix: str) -> str | None:
        for st in body:
            if st is target:
                return prefix + st.name.value
            if isinstance(st, cst.ClassDef):
                found = find(st.body.body, f"{prefix}{st.name.value}.")
                if found is not None:
                    return found
        return None

    return find(module.body, "") or target.name.value
