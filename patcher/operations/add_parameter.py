"""`add_parameter`: add a parameter to a function, after a named parameter or at the end of its parameters.

Example (sglang 0.5.9)::

    - op: add_parameter
      file: srt/managers/scheduler.py
      function: Scheduler.process_batch_result     # dotted, as in insert_statements
      after: batch                                  # optional; default: after the last plain parameter
      code: "launch_done: Optional[threading.Event] = None"

`code` is one parameter as written in a `def` (annotation and default allowed). It goes right after `after` (a
positional or keyword-only parameter: the new one is of the same kind; `after: "*"` makes it the first keyword-only
parameter, right after `*` or `*args`), or, without `after`, after the last plain parameter (before `*args`,
keyword-only parameters and `**kwargs`). Its layout follows its neighbours (one per line in a signature written one
parameter per line). The patched file must compile: a parameter without a default after one
with a default is refused then, with nothing written.

Answers: *changed*; *already applied* (the function has a parameter of that name whose code is the same);
*cannot apply* (the function or `after` is missing, or a conflict: a parameter of that name with other code).
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from typing import Literal

import libcst as cst

from ..anchors import find_function, near, same_code
from ..errors import AnchorNotFound, Candidate, Conflict, FailsAtRunTime, FlowChanged, RecipeError
from ..model import option
from ._calls import calls_to
from ._code import (added_before, insert_item, line_text, load_check, past, split_comment, with_comment,
                    without_comment)
from .base import AlreadyApplied, Changed, Operation, Outcome, attempt, register


def _parameter(code: str) -> cst.Param:
    code, _ = split_comment(code)  # a comment ending its line is put on the line of the new parameter
    try:
        params = cst.parse_statement(f"def f({code.strip()}):\n    pass\n").params
    except cst.ParserSyntaxError:
        raise RecipeError(f"`code` must be one parameter, e.g. `x: int = 0`, got {line_text(code)!r}") from None
    plain = [*params.posonly_params, *params.params, *params.kwonly_params]
    if len(plain) != 1 or params.star_arg is not cst.MaybeSentinel.DEFAULT or params.star_kwarg is not None:
        raise RecipeError(f"`code` must be one parameter, e.g. `x: int = 0`, got {line_text(code)!r}")
    return plain[0]


def _first_comma(fn: cst.FunctionDef) -> cst.Comma:
    """The comma after a signature's only parameter, laid out as the line break after `(` says (one per line), else
    followed by a space."""
    ws = fn.whitespace_before_params
    return cst.Comma(whitespace_after=ws if isinstance(ws, cst.ParenthesizedWhitespace) else cst.SimpleWhitespace(" "))


@register
@dataclass(frozen=True, kw_only=True)
class AddParameter(Operation):
    """Add a parameter to a function's signature."""

    op: Literal["add_parameter"]
    function: str = option(description="the function, dotted, e.g. Scheduler.process_batch_result")
    code: str = option(check=load_check(_parameter), description="the parameter, e.g. 'x: int = 0'")
    after: str | None = option(default=None, description="the parameter the new one follows ('*': first "
                               "keyword-only); default: the last plain one")

    def describe(self) -> str:
        where = f"after `{self.after}`" if self.after else "at the end"
        return f"add parameter `{line_text(self.code)}` to `{self.function}` {where}"

    def anchor(self) -> str:
        return f"{self.function}({self.after or ''})"

    #: set by `among`, not by recipes: another step of the recipe, in this file, writes a call of the function (the
    #: recipe moves its callers' arguments itself)
    callers_changed: bool = option(default=False, exclude=True)
    #: the parameters earlier steps of the recipe add after the same parameter of the function (set by `among`): the
    #: new one goes after them, in recipe order
    placed_before: tuple[str, ...] = option(default=(), exclude=True)

    def among(self, steps) -> "AddParameter":
        from dataclasses import replace

        name = self.function.rsplit(".", 1)[-1]
        name = self.function.rsplit(".", 2)[-2] if name == "__init__" and "." in self.function else name
        # another step writes calls of it: in its code, or a keyword it adds to one (`call: self.process(...)`)
        touched = any(s is not self and (f"{name}(" in (getattr(s, "code", None) or "")
                                         or s.op == "add_keyword_argument" and f"{name}(" in s.call) for s in steps)
        before = added_before(self, steps, self.after, lambda s: s.function, lambda s: s.after,
                              lambda s: _parameter(s.code).name.value)
        if touched or before:
            return replace(self, callers_changed=touched, placed_before=before)
        return self

    def _refuse_shifting_callers(self, module: cst.Module, fpath, field: str, index: int) -> None:
        """A plain parameter put before others moves them one place right: a call in this module that passes
        them by position (or unpacks `*ARGS` into it), or that the module hands the function on to as a value
        (`map(f, xs, ys)`, `Thread(target=f, args=...)`), would bind its arguments to the wrong parameters (a
        TypeError at best). Put last before `*args`, it takes what a call passed into `*args`."""
        fn = fpath[-1]
        params = fn.params
        before = len(params.posonly_params) + index if field == "params" else index  # in the positional list
        following = [p.name.value for p in [*params.posonly_params, *params.params][before:]]
        spill = isinstance(params.star_arg, cst.Param)
        if not following and not spill:
            return
        taken = f"`{following[0]}`" if following else f"an argument to `*{params.star_arg.name.value}`"
        for call, offset in calls_to(module, fpath):
            positional = sum(1 for a in call.args if a.keyword is None and not a.star) + offset
            if positional > before or any(a.star == "*" for a in call.args):  # what `*ARGS` unpacks goes by position
                text = line_text(module.code_for_node(call))
                what = f"passes {taken} by position" if not any(a.star == "*" for a in call.args) else \
                    "unpacks its arguments by position (`*`)"
                raise Conflict(f"`{text}` {what}: put before {taken}, the new parameter would take its argument",
                               candidates=[Candidate(f"`{text}`", node=call)])
        if following:
            # `map(add, xs, ys)`, `Thread(target=add, args=(1, 2))`: what calls it there passes by position too
            _refuse_passed_as_value(module, fpath, None, f"passes its arguments by position: put before {taken}, "
                                                          f"the new parameter would take one of them")

    @staticmethod
    def _refuse_capturing_keywords(module: cst.Module, fpath, name: str, kwargs: str) -> None:
        """A function with `**kwargs` that a call of the module passes `name=` to (meant for `kwargs`, passed on
        to something else): the new parameter `name` would take it, and what `kwargs` passes on would lose it."""
        for call, _ in calls_to(module, fpath):
            if any(a.keyword is not None and a.keyword.value == name for a in call.args):
                text = line_text(module.code_for_node(call))
                raise Conflict(f"`{text}` passes `{name}=` into `**{kwargs}`: the new parameter `{name}` would take "
                               f"it, and what `**{kwargs}` passes it on to would not get it",
                               candidates=[Candidate(f"`{text}`", node=call)])

    def _refuse_hiding(self, module: cst.Module, fn: cst.FunctionDef, new: cst.Param) -> None:
        """A parameter the function cannot be given, or that changes what its body reads: a property's accessor
        takes `self` (and the value) only, so one without a default is never filled (TypeError at every access);
        one named like a name the body reads from outside (`logger`, `time`) hides it, and a call without the
        argument gets the default instead."""
        import ast

        name = new.name.value
        kinds = {"property", "cached_property", "functools.cached_property"}
        if new.default is None and any(
                (text := module.code_for_node(d.decorator)) in kinds or text.endswith((".setter", ".getter",
                                                                                         ".deleter"))
                for d in fn.decorators):
            raise FailsAtRunTime(f"`{self.function}` is a property's accessor: Python calls it with the instance (and the "
                           f"value) only, so `{name}` without a default is never given, a TypeError at every access",
                           candidates=[Candidate(f"`def {fn.name.value}(...)`", node=fn)])
        try:
            tree = ast.parse(textwrap.dedent(module.code_for_node(fn.with_changes(decorators=()))))
        except (SyntaxError, ValueError, RecursionError):
            return
        body = [n for st in tree.body[0].body for n in ast.walk(st)]
        read = {n.id for n in body if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        bound = {n.id for n in body if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
        same = isinstance(new.default, cst.Name) and new.default.value == name  # `logger=logger`: what it read
        if name in read - bound and not same:
            raise FlowChanged(f"`{self.function}` reads `{name}` from outside it (a name of the module or a builtin): "
                           f"a parameter `{name}` would hide it, and a call without the argument would read the "
                           f"parameter's default instead", candidates=[Candidate(f"`def {fn.name.value}(...)`",
                                                                                  node=fn)])

    def _refuse_unfilled_callers(self, module: cst.Module, fpath, new: cst.Param, position: int | None) -> None:
        refuse_unfilled_calls(module, fpath, new.name.value, position, "the new parameter")
        _refuse_passed_as_value(module, fpath, new.name.value)

    def _misplaced(self, params: cst.Parameters, param: cst.Param) -> str | None:
        """Where a parameter of the step's code stands otherwise than the step puts it (`after`, or after the last
        plain parameter): another kind (keyword-only, positional-only), or another place among the positional ones;
        None when it stands there."""
        kinds = {"posonly_params": "positional-only", "params": "positional", "kwonly_params": "keyword-only"}
        field = next((f for f in kinds if any(q is param for q in getattr(params, f))), None)
        if field is None:
            return "it is `*` or `**` there"
        others = {f: [q.name.value for q in getattr(params, f) if q is not param] for f in kinds}
        index = [q is param for q in getattr(params, field)].index(True)
        if self.after == "*":
            want = ("kwonly_params", past(others["kwonly_params"], 0, self.placed_before))
        elif self.after is None:
            want = ("params", None)
        else:
            where = next((f for f in kinds if self.after in others[f]), None)
            if where is None:
                return f"`{self.after}` is not a parameter there"
            want = (where, past(others[where], others[where].index(self.after) + 1, self.placed_before))
        if want[0] != field:
            return f"it is {kinds[field]} there, where the step makes it {kinds[want[0]]}"
        if want[1] is not None and want[1] != index:
            return (f"it stands at place {index + 1} of the {kinds[field]} parameters there, where the step puts it at "
                    f"{want[1] + 1}" + (f", right after `{self.after}`" if self.after != "*" else ""))
        return None

    @attempt
    def apply(self, module: cst.Module) -> Outcome:
        new = _parameter(self.code)
        fpath = find_function(module, self.function)
        fn = fpath[-1]
        params = fn.params
        everything = [*params.posonly_params, *params.params, *params.kwonly_params]
        for extra in (params.star_arg, params.star_kwarg):
            if isinstance(extra, cst.Param):
                everything.append(extra)
        have = [p for p in everything if p.name.value == new.name.value]
        if have:
            text = module.code_for_node(have[0].with_changes(comma=cst.MaybeSentinel.DEFAULT))
            if same_code(f"def f({text}): pass", f"def f({split_comment(self.code)[0].strip()}): pass"):
                misplaced = self._misplaced(params, have[0])
                if misplaced is None:
                    return AlreadyApplied(fn)
                raise Conflict(f"`{self.function}` already has the parameter `{line_text(text)}`, but {misplaced}: "
                               f"a call that passes it as the step places it would bind another parameter (or raise "
                               f"TypeError)", candidates=[Candidate(f"`def {fn.name.value}("
                                                                    f"{line_text(module.code_for_node(params))})`",
                                                                    node=fn)])
            raise Conflict(f"`{self.function}` already has a parameter `{new.name.value}`: `{line_text(text)}`",
                           candidates=[Candidate(f"`{line_text(text)}`", node=fn)])
        self._refuse_hiding(module, fn, new)
        field = "params"
        if self.after == "*":
            if params.star_arg is cst.MaybeSentinel.DEFAULT:
                raise AnchorNotFound(f"`{self.function}` has no `*` or `*args` (no keyword-only parameters)",
                                     candidates=[Candidate(f"`def {fn.name.value}(...)`", node=fn)])
            field, index = "kwonly_params", 0
            index = past([p.name.value for p in params.kwonly_params], 0, self.placed_before)  # in recipe order
        elif self.after is None:
            index = len(params.params)
        else:
            for field in ("posonly_params", "params", "kwonly_params"):
                names = [p.name.value for p in getattr(params, field)]
                if self.after in names:
                    index = past(names, names.index(self.after) + 1, self.placed_before)  # in recipe order
                    break
            else:
                raise AnchorNotFound(f"`{self.function}` has no parameter `{self.after}`",
                                     candidates=[Candidate(f"`{n}`") for n in
                                                 near(self.after, [p.name.value for p in everything])])
        star = params.star_arg
        if field == "kwonly_params" and index == 0 and isinstance(star, (cst.ParamStar, cst.Param)):
            # first after `*` / `*args`: laid out as the star is (its comma says how the list goes on)
            sep = star.comma if isinstance(star.comma, cst.Comma) else cst.Comma(
                whitespace_after=cst.SimpleWhitespace(" "))
            if params.kwonly_params:
                items = [new.with_changes(comma=sep), *params.kwonly_params]
            else:  # `*args` closing the list: it takes the comma of the parameter before it, the new one its own
                before = params.params[-1].comma if params.params else None
                layout = before if isinstance(before, cst.Comma) else _first_comma(fn)
                held = getattr(star, "whitespace_after_param", None)
                if isinstance(held, cst.ParenthesizedWhitespace) and isinstance(
                        layout.whitespace_after, cst.ParenthesizedWhitespace):
                    # `*args  # va` then `)`: the comment stays on the `*args` line, the line break before `)` goes
                    # after the new parameter
                    first = held.first_line
                    if first.comment is not None and not first.whitespace.value:
                        first = first.with_changes(whitespace=cst.SimpleWhitespace("  "))
                    layout = layout.with_changes(whitespace_after=layout.whitespace_after.with_changes(
                        first_line=first, empty_lines=()))
                    new = new.with_changes(whitespace_after_param=without_comment(held))
                    star = star.with_changes(whitespace_after_param=cst.SimpleWhitespace(""))
                items = [new.with_changes(comma=star.comma)]
                params = params.with_changes(star_arg=star.with_changes(comma=layout))
        else:
            if field in ("posonly_params", "params") and not self.callers_changed:
                self._refuse_shifting_callers(module, fpath, field, index)
            items = insert_item(getattr(params, field), index, new, fn.whitespace_before_params)
        if isinstance(params.star_kwarg, cst.Param) and not self.callers_changed \
                and forwards_keyword(module.code_for_node(fn), params.star_kwarg.name.value, new.name.value):
            self._refuse_capturing_keywords(module, fpath, new.name.value, params.star_kwarg.name.value)
        if new.default is None and not self.callers_changed:
            position = (len(params.posonly_params) + index if field == "params" else index) \
                if field != "kwonly_params" else None
            self._refuse_unfilled_callers(module, fpath, new, position)
        if field == "params" and index == len(params.params) and (
                params.star_arg is not cst.MaybeSentinel.DEFAULT or params.kwonly_params or params.star_kwarg):
            # something follows the plain parameters: the new last one needs its comma, laid out as the others (the
            # only one: as the line break after `(` says, one per line)
            last = items[-1]
            if not isinstance(last.comma, cst.Comma):
                items[-1] = last.with_changes(comma=items[-2].comma if len(items) > 1 else _first_comma(fn))
        _, comment = split_comment(self.code)
        if comment is not None:
            at = next(i for i, p in enumerate(items) if p.name.value == new.name.value)
            placed = with_comment(list(items), at, comment)
            if placed is None:
                raise Conflict(f"the signature of `{self.function}` is written on one line: the code's comment has no "
                               f"line of its own there; leave it out of the code",
                               candidates=[Candidate(f"`def {fn.name.value}(...)`", node=fn)])
            items = placed[0]
        try:
            changed = fn.with_changes(params=params.with_changes(**{field: items}))
        except cst.CSTValidationError as exc:
            raise Conflict(f"`{self.code.strip()}` cannot go there: {exc}",
                           candidates=[Candidate(f"`def {fn.name.value}(...)`", node=fn)]) from None
        from ..anchors import replace_at

        return Changed(replace_at(fpath, changed), inserted=(), anchor=fn)


def forwards_keyword(code: str, kwargs: str, name: str) -> bool:
    """Whether a function (its code) passes `**kwargs` on to another call without taking `name` out of it first by
    name (`kwargs.pop("name")`, `.get`, `kwargs["name"]`): then a caller's `name=` is meant for what it calls,
    and a new parameter `name` would take it. A function that reads the keyword itself meant it for itself."""
    import ast
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(code))
    except (SyntaxError, ValueError, RecursionError):
        return True
    for node in ast.walk(tree):
        key = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("pop", "get") \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == kwargs and node.args:
            key = node.args[0]
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == kwargs:
            key = node.slice
        if isinstance(key, ast.Constant) and key.value == name:
            return False
    return any(isinstance(node, ast.Call) and any(k.arg is None and isinstance(k.value, ast.Name)
                                                  and k.value.id == kwargs for k in node.keywords)
               for node in ast.walk(tree))


def _refuse_passed_as_value(module: cst.Module, fpath, name: str | None, why: str | None = None) -> None:
    """A function of the module's top level that the module hands on as a value (`sorted(items, key=keyfn)`,
    `partial(work, 1)`, `handlers = [on_done]`): whoever calls it there passes what it passed before, not the new
    required parameter `name` (TypeError there). Its calls by name are `refuse_unfilled_calls`' matter."""
    import ast

    if len(fpath) != 2:
        return
    fn = fpath[-1].name.value
    from ..anchors import module_code

    text = module_code(module)
    if not re.search(rf"\b{re.escape(fn)}\b(?!\s*\()", text):
        return  # only called (or defined): no walk
    tree = ast.parse(text)
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == fn and isinstance(node.ctx, ast.Load) and id(node) not in called:
            line = text.splitlines()[node.lineno - 1].strip()
            why = why or (f"passes no `{name}`, which the new parameter requires (no default): TypeError when it is "
                          f"called")
            raise Conflict(f"the module hands `{fn}` on as a value (`{line_text(line)}`): what calls it there {why}",
                           candidates=[Candidate(f"`{line_text(line)}`")])


def refuse_unfilled_calls(module: cst.Module, fpath, name: str, position: int | None, what: str) -> None:
    """A parameter `name` without a default (`what` requires it): a call in this module that passes it neither by
    keyword nor (for a plain one, at `position` of the positional list) by position raises TypeError."""
    for call, offset in calls_to(module, fpath):
        if any(a.star for a in call.args) or any(a.keyword is not None and a.keyword.value == name
                                                 for a in call.args):
            continue
        positional = sum(1 for a in call.args if a.keyword is None) + offset
        if position is None or positional <= position:
            text = line_text(module.code_for_node(call))
            raise Conflict(f"`{text}` does not pass `{name}`, which {what} requires (no default): TypeError at that "
                           f"call", candidates=[Candidate(f"`{text}`", node=call)])
