"""Variants as overlays: `extends`, step changes by name, merged checks and constants, named pieces of code.

Runs on the recipe's plain data (after `patcher.recipe_yaml` has read it and its included files, before the models
validate it) and gives every variant its expanded `steps` and `verify`, so that the rest of specpatch sees plain
variants. The rules (docs/writing-recipes.md, "Variants"):

- a *root* variant has its own `steps` (and, when given, its own `verify`, which replaces the recipe's);
- any other variant is an *overlay* (its `kind` is its base's unless it says): it starts from the variant it `extends` (expanded first; a cycle is
  refused), or from the recipe's steps and checks without `extends`, then: `remove_steps` drops steps by name, `change_steps` changes the
  options of steps by name (a value replaces, null removes the option, `code` resets the inherited pieces), and
  `add_steps` inserts new steps (`after_step:` / `before_step:` a step name, else last); its `verify` is merged
  over the base's (mappings key by key, `probes` by name, other lists replaced);
- `constants` (the recipe's, then each base's, then the variant's own) are values for `{{name}}` in the steps'
  code, placed by the parameter templating of `patcher.params` (a literal, the characters of a string, a name);
- a step's code may mark named *pieces*, `# <piece NAME>` ... `# </piece>` lines; a change's `pieces: {NAME:
  code}` (or `pieces_file:`, a file of such pieces) replaces the code between the markers, re-indented to them;
  the marker lines never reach the output.

Errors name the variant and the step, at the line of the option at fault.
"""

from __future__ import annotations

import copy
import difflib
import re
from typing import Any, Callable

from .model import options
from .operations.base import REGISTRY
from .params import render
from .recipe_yaml import LineMap

_OVERLAY_KEYS = ("extends", "change_steps", "add_steps", "remove_steps")
_PIECE_OPEN = re.compile(r"^(?P<indent>[ \t]*)# <piece (?P<name>[A-Za-z0-9_.-]+)>[ \t]*$")
_PIECE_CLOSE = re.compile(r"^[ \t]*# </piece>[ \t]*$")
_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")

Fail = Callable[[tuple, str], Exception]


class _Step:
    """A step being built: its options, and where each came from (a path into the data, for the line map)."""

    def __init__(self, data: dict, loc: tuple) -> None:
        self.data = copy.deepcopy(data)
        self.loc = loc  #: the step's own place
        self.origin = {key: loc + (key,) for key in data}  #: option -> where its value was given
        #: piece -> (code, the indentation it was written at, where it was given)
        self.pieces: dict[str, tuple[str, str, tuple]] = {}

    @property
    def name(self) -> Any:
        return self.data.get("name")

    def copy(self) -> "_Step":
        new = _Step.__new__(_Step)
        new.data, new.loc = copy.deepcopy(self.data), self.loc
        new.origin, new.pieces = dict(self.origin), dict(self.pieces)
        return new


def expand(data: dict, lines: LineMap, fail: Fail) -> None:
    """Give every variant of `data` its expanded `steps`, `verify` and `constants`, and render the constants and
    pieces of the recipe's own steps; `lines` gets the line of every expanded option. Raises `fail(loc, message)`."""
    variants = data.get("variants") or []
    if not isinstance(variants, list):
        return  # the model says what is wrong with it
    base_constants = _constants(data.get("constants"), ("constants",), fail)
    base_steps = _steps(data.get("steps"), ("steps",), fail)
    recipe_base = (base_steps, data.get("verify"), base_constants)
    by_name: dict[str, int] = {}
    for vi, variant in enumerate(variants):
        if isinstance(variant, dict) and isinstance(variant.get("name"), str):
            if variant["name"] in by_name:  # `extends` and `--variant` would take the first without a word
                raise fail(("variants", vi, "name"), f"two variants are named `{variant['name']}` (variants "
                                                     f"{by_name[variant['name']] + 1} and {vi + 1}); variant names "
                                                     f"are unique")
            by_name[variant["name"]] = vi
    done: dict[int, tuple[list[_Step], Any, dict]] = {}

    def resolve(vi: int, chain: tuple[str, ...]) -> tuple[list[_Step], Any, dict]:
        if vi in done:
            return done[vi]
        variant = variants[vi]
        name = variant.get("name")
        where = ("variants", vi)
        if "steps" in variant:  # a root: its own steps, and its own checks when it gives them
            given = [k for k in _OVERLAY_KEYS if k in variant]
            if given:
                raise fail(where + ("steps",), f"variant `{name}` has `steps` (its own list) and extends or changes "
                                               f"steps ({', '.join(given)}): give one")
            result = (_steps(variant["steps"], where + ("steps",), fail), variant.get("verify"),
                      {**base_constants, **_constants(variant.get("constants"), where + ("constants",), fail)})
            done[vi] = result
            return result
        parent = variant.get("extends")
        if parent is None:
            steps, verify, constants = recipe_base
        else:
            if parent not in by_name:
                guess = difflib.get_close_matches(str(parent), list(by_name), n=1)
                raise fail(where + ("extends",), f"variant `{name}` extends `{parent}`, which is no variant of the "
                                                 f"recipe" + (f"; did you mean `{guess[0]}`?" if guess else ""))
            if parent in chain or parent == name:
                cycle = " -> ".join([*(chain[chain.index(parent):] if parent in chain else ()), name, parent])
                raise fail(where + ("extends",), f"variant `{name}` extends `{parent}`, a cycle: {cycle}")
            steps, verify, constants = resolve(by_name[parent], chain + (name,))
        steps = _overlay_steps([s.copy() for s in steps], variant, where, fail)
        verify = _merge(copy.deepcopy(verify), variant["verify"]) if variant.get("verify") is not None else verify
        constants = {**constants, **_constants(variant.get("constants"), where + ("constants",), fail)}
        done[vi] = (steps, verify, constants)
        return done[vi]

    def kind_of(vi: int, seen: tuple[int, ...] = ()) -> Any:
        """A variant's declared `kind`, else the kind of the variant it extends (cycles are refused above)."""
        variant = variants[vi]
        parent = variant.get("extends")
        if "kind" in variant or not isinstance(parent, str) or parent not in by_name or vi in seen:
            return variant.get("kind")
        return kind_of(by_name[parent], seen + (vi,))

    for vi, variant in enumerate(variants):
        if not isinstance(variant, dict):
            continue
        steps, verify, constants = resolve(vi, ())
        if (kind := kind_of(vi)) is not None:
            variant["kind"] = kind
        variant["steps"] = [_finish(s, ("variants", vi, "steps", i), constants, data, lines, fail, variant.get("name"))
                            for i, s in enumerate(steps)]
        if verify is not None:
            variant["verify"] = verify
        variant["constants"] = constants
    if isinstance(data.get("steps"), list):
        data["steps"] = [_finish(s, s.loc, base_constants, data, lines, fail, None) for s in base_steps]


def _steps(raw: Any, loc: tuple, fail: Fail) -> list[_Step]:
    if not isinstance(raw, list):
        return []
    for i, step in enumerate(raw):
        if not isinstance(step, dict):
            raise fail(loc + (i,), "a step is a mapping with `op`, `file` and the operation's options")
    return [_Step(step, loc + (i,)) for i, step in enumerate(raw)]


def _constants(raw: Any, loc: tuple, fail: Fail) -> dict:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise fail(loc, "`constants` maps names to values (strings, numbers, booleans)")
    for name, value in raw.items():
        text = getattr(value, "text", None)
        if isinstance(value, float) and text is not None and _dropped_digits(text):
            # `2.10` is the number 2.1: a version written unquoted loses a digit when it is placed into code
            raise fail(loc + (name,), f"constant `{name}` is written `{text}`, and YAML reads it as the number "
                                      f"{float(value)!r}: write it in quotes if it is text (a version), or without "
                                      f"the trailing zero if the number is meant")
        if not isinstance(value, (str, int, float, bool)):
            raise fail(loc + (name,), f"constant `{name}` is a {type(value).__name__}: a constant is a string, a "
                                      f"number or a boolean")
    return dict(raw)


def _dropped_digits(text: str) -> bool:
    """Whether a float written so (`2.10`, `1.20`) ends its fraction with a zero that the number drops: most often
    a version, which placed as the number loses a digit. `0.9`, `1.0`, `1e-06`, `1.0e-6` are numbers as written."""
    return re.fullmatch(r"[-+]?[0-9_]*\.[0-9_]*[1-9_][0-9_]*0", text.strip()) is not None


def _overlay_steps(steps: list[_Step], variant: dict, where: tuple, fail: Fail) -> list[_Step]:
    name = variant.get("name")
    names = [s.name for s in steps]

    def find(step_name: Any, loc: tuple, what: str) -> int:
        if step_name not in names:
            guess = difflib.get_close_matches(str(step_name), [n for n in names if isinstance(n, str)], n=1)
            base = f"variant `{variant['extends']}`" if variant.get("extends") else "the recipe"
            raise fail(loc, f"variant `{name}` {what} step `{step_name}`, which {base} does not have"
                            + (f"; did you mean `{guess[0]}`?" if guess else ""))
        return names.index(step_name)

    removed = variant.get("remove_steps") or []
    if not isinstance(removed, list):
        raise fail(where + ("remove_steps",), "`remove_steps` is a list of step names")
    for i, step_name in enumerate(removed):
        del steps[find(step_name, where + ("remove_steps", i), "removes")]
        names = [s.name for s in steps]
    changes = variant.get("change_steps") or {}
    if not isinstance(changes, dict) or not all(isinstance(c, dict) for c in changes.values()):
        raise fail(where + ("change_steps",), "`change_steps` maps step names to the options they change, "
                                              "e.g. {worker-fallback: {code_file: v2/fallback.py}}")
    for step_name, change in changes.items():
        loc = where + ("change_steps", step_name)
        step = steps[find(step_name, loc, "changes")]
        if {"op", "name"} & set(change):
            raise fail(loc, f"variant `{name}` changes the `op` or `name` of step `{step_name}`; a change keeps "
                            f"them (remove the step and add another)")
        _change(step, change, loc, fail, name)
    for i, raw in enumerate(variant.get("add_steps") or []):
        loc = where + ("add_steps", i)
        if not isinstance(raw, dict):
            raise fail(loc, "a step is a mapping with `op`, `file` and the operation's options")
        raw = dict(raw)
        after, before, pieces = raw.pop("after_step", None), raw.pop("before_step", None), raw.pop("pieces", None)
        if after is not None and before is not None:
            raise fail(loc, f"variant `{name}`: a new step goes `after_step` or `before_step`, not both")
        if raw.get("name") in names:
            raise fail(loc + ("name",), f"variant `{name}` adds step `{raw['name']}`, which its base already has "
                                        f"(change it with `change_steps`)")
        step = _Step(raw, loc)
        _take_pieces(step, pieces, loc + ("pieces",), fail, name)
        if after is not None:
            steps.insert(find(after, loc + ("after_step",), "places a new step after") + 1, step)
        elif before is not None:
            steps.insert(find(before, loc + ("before_step",), "places a new step before"), step)
        else:
            steps.append(step)
        names = [s.name for s in steps]
    return steps


def _change(step: _Step, change: dict, loc: tuple, fail: Fail, variant: Any) -> None:
    for key, value in change.items():
        if key == "pieces":
            continue
        if key == "code":
            step.pieces = {}  # new code: the pieces given for the old one do not apply
        if value is None:
            step.data.pop(key, None)
            step.origin.pop(key, None)
        else:
            step.data[key] = copy.deepcopy(value)
            step.origin[key] = loc + (key,)
    _take_pieces(step, change.get("pieces"), loc + ("pieces",), fail, variant)


def _take_pieces(step: _Step, raw: Any, loc: tuple, fail: Fail, variant: Any) -> None:
    if raw is None:
        return
    if isinstance(raw, str):  # `pieces_file:`: a file of `# <piece NAME>` ... `# </piece>` blocks
        try:
            found = _pieces(raw)
        except ValueError as exc:
            raise fail(loc, f"variant `{variant}`, step `{step.name}`: the pieces file: {exc}") from None
        if not found:
            raise fail(loc, f"variant `{variant}`, step `{step.name}`: the pieces file has no `# <piece NAME>` "
                            f"... `# </piece>` block")
        for name, (text, indent, _start, _end) in found.items():
            step.pieces[name] = (text, indent, loc + (name,))
        return
    if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
        raise fail(loc, "`pieces` maps piece names to code (or `pieces_file:` names a file of pieces)")
    for name, text in raw.items():
        step.pieces[name] = (text, "", loc + (name,))


def _pieces(text: str) -> dict[str, tuple[str, str, int, int]]:
    """{name: (code between the markers, the opening marker's indentation, first line, line after the close)};
    lines are indices into text.splitlines(keepends=True). Raises ValueError for unbalanced or nested markers."""
    found: dict[str, tuple[str, str, int, int]] = {}
    rows = text.splitlines(keepends=True)
    open_at: tuple[str, str, int] | None = None
    for i, row in enumerate(rows):
        opened, closed = _PIECE_OPEN.match(row.rstrip("\r\n")), _PIECE_CLOSE.match(row.rstrip("\r\n"))
        if opened:
            if open_at is not None:
                raise ValueError(f"piece `{opened['name']}` opens inside piece `{open_at[0]}` (line {i + 1}); "
                                 f"pieces do not nest")
            if opened["name"] in found:
                raise ValueError(f"two pieces are named `{opened['name']}`")
            open_at = (opened["name"], opened["indent"], i)
        elif closed:
            if open_at is None:
                raise ValueError(f"`# </piece>` at line {i + 1} closes no piece")
            name, indent, start = open_at
            found[name] = ("".join(rows[start + 1:i]), indent, start, i + 1)
            open_at = None
    if open_at is not None:
        raise ValueError(f"piece `{open_at[0]}` is not closed (`# </piece>`)")
    return found


def _reindent(text: str, written_at: str, indent: str) -> str:
    """`text`, written at the indentation `written_at` (its marker's; "" inline), moved to `indent`."""
    if written_at == indent:
        return text
    rows = text.splitlines(keepends=True)
    return "".join(indent + r[len(written_at):] if r.startswith(written_at) and r.strip() else r for r in rows)


def _with_pieces(code: str, pieces: dict[str, tuple[str, str, tuple]], where: str, fail: Fail, loc: tuple
                 ) -> tuple[str, set[str]]:
    """`code` with the given pieces put in place of its own, and every marker line dropped; and the names of the
    pieces it has."""
    try:
        found = _pieces(code)
    except ValueError as exc:
        raise fail(loc, f"{where}: {exc}") from None
    rows = code.splitlines(keepends=True)
    out, i = [], 0
    for name, (text, indent, start, end) in sorted(found.items(), key=lambda kv: kv[1][2]):
        out += rows[i:start]
        if name in pieces:
            new, written_at, _given = pieces[name]
            out.append(_reindent(new if new.endswith("\n") or not new else new + "\n", written_at, indent))
        else:
            out.append(text)
        i = end
    out += rows[i:]
    return "".join(out), set(found)


def _templated_keys(op: Any) -> set[str]:
    model = REGISTRY.get(op) if isinstance(op, str) else None
    if model is None:
        return set()
    return {name for o in options(model) if o.name in model.templated for name in o.names}


def _finish(step: _Step, loc: tuple, constants: dict, data: dict, lines: LineMap, fail: Fail,
            variant: Any) -> dict:
    """The step as plain data: pieces put in, marker lines gone, constants rendered; its lines mapped at `loc`."""
    where = f"variant `{variant}`, step `{step.name}`" if variant is not None else f"step `{step.name}`"
    out = dict(step.data)
    out.pop("pieces", None)
    params = data.get("params") if isinstance(data.get("params"), dict) else {}
    clash = set(params) & set(constants)
    if clash:
        raise fail(("constants",), f"{', '.join(sorted(clash))} is a parameter and a constant; give one")
    lines.copy_line(loc, step.loc, lines.get(loc[:-1]) or lines.get((), 1))
    for key in out:
        lines.copy_line(loc + (key,), step.origin.get(key), lines[loc])
        if loc + (key,) not in lines.files and loc in lines.files and step.origin.get(key) is None:
            lines.files[loc + (key,)] = lines.files[loc]
    # constants go in the templated options and in any step's `code` (a recipe's own names: an operation whose code
    # takes no parameters, such as add_definition, still reads a variant's constants)
    keys, have = _templated_keys(out.get("op")) | {"code"}, set()
    for key, value in out.items():
        if not isinstance(value, str):
            continue
        if "# <piece " in value or "# </piece>" in value:
            value, names = _with_pieces(value, step.pieces, where, fail, loc + (key,))
            have |= names
        if key in keys and constants and set(_PLACEHOLDER.findall(value)) & set(constants):
            value = _render_constants(value, constants, where, loc + (key,), fail)
        elif key not in keys and (named := set(_PLACEHOLDER.findall(value)) & (set(params) | set(constants))):
            # left as written, `after: max_queued_{{suffix}}` would be looked for literally: "anchor not found"
            raise fail(loc + (key,), f"{where}: `{{{{{sorted(named)[0]}}}}}` in `{key}` is not filled in: only "
                                     f"{', '.join(f'`{k}`' for k in sorted(keys))} take{'s' if len(keys) == 1 else ''} "
                                     f"parameters and constants")
        out[key] = value
    for name, (_text, _indent, given) in step.pieces.items():
        if name not in have:
            guess = difflib.get_close_matches(name, sorted(have), n=1)
            raise fail(given, f"{where}: no piece `{name}` in the step's code"
                              + (f"; did you mean `{guess[0]}`?" if guess else
                                 f"; it has: {', '.join(sorted(have)) or 'none'}"))
    return out


def _render_constants(text: str, constants: dict, where: str, loc: tuple, fail: Fail) -> str:
    """`{{name}}` of each constant placed by the parameter templating; other placeholders (the recipe's params,
    filled in when it is applied) kept as they are."""
    keep: dict[str, str] = {}

    def hold(m: re.Match) -> str:
        if m.group(1) in constants:
            return m.group(0)
        token = f"__specpatch_keep_{len(keep)}__"
        keep[token] = m.group(0)
        return token

    held = _PLACEHOLDER.sub(hold, text)
    try:
        out = render(held, constants, what="code")
    except Exception as exc:  # a ParamError: a constant where no value can go
        raise fail(loc, f"{where}: {getattr(exc, 'message', exc)}") from None
    for token, placeholder in keep.items():
        out = out.replace(token, placeholder)
    return out


def _merge(base: Any, over: Any) -> Any:
    """`over` merged into `base`: mappings key by key (null removes a key), lists of named mappings (probes) by
    name, anything else replaced."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for key, value in over.items():
            if value is None:
                out.pop(key, None)
            else:
                out[key] = _merge(base.get(key), value)
        return out
    if (isinstance(base, list) and isinstance(over, list) and over
            and all(isinstance(x, dict) and "name" in x for x in base + over)):
        out = list(base)
        names = [x["name"] for x in out]
        for item in over:
            if item["name"] in names:
                out[names.index(item["name"])] = _merge(out[names.index(item["name"])], item)
            else:
                out.append(item)
                names.append(item["name"])
        return out
    return copy.deepcopy(over)
