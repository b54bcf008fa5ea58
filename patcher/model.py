"""Plain YAML data -> frozen dataclasses, checked against their type hints; and the JSON Schema of such models.

A *model* is a frozen, keyword-only dataclass whose fields say what a YAML mapping may hold::

    @dataclass(frozen=True, kw_only=True)
    class Probe:
        \"\"\"A behaviour check run after the patch.\"\"\"

        path: str = option(description="a Python script beside the recipe")
        timeout: float = 300.0

`validate(Probe, {"path": "p.py", "timeout": 60})` returns `Probe(path="p.py", timeout=60.0)`, or raises a
`ValidationError` that lists every problem found in the data (not only the first), each a `Problem` with a location
(`("steps", 3, "code")`: keys and list indices from the top of the data), a type (`"missing"`, `"extra_forbidden"`,
`"type_error"`, `"value_error"`, ...) and a message.

The rules, by type hint. They are strict: YAML already gives typed values, so no string is turned into a number and
no number into a string.

- `str`, `bool`, `None`; `int` (a bool is not an int); `float` (an int is accepted and made a float); `Path` (from a
  string); `Any` (anything, as is).
- `Literal[a, b]`: a value equal to one of them and of the same type.
- `X | Y`: `None` for `None` when the union has it; else the member whose type is exactly the value's type, else
  the first member that accepts the value.
- `tuple[X, ...]`: from a list (or a tuple), item by item.  `dict[str, X]`: from a mapping, key by key.
- a model: from a mapping (an instance of the model is taken as is), option by option, recursively.
- `Annotated[A | B | C, Tagged("op")]`: a mapping whose `op` value picks the model, each member declaring `op` as a
  `Literal` of its own tag (a "discriminated union").

Fields are declared with `option(...)` when they need more than a type and a default: a `description` (for the JSON
Schema), an `alias` (the YAML name, e.g. `class` for the attribute `cls`; the attribute name is accepted too), a
regex `pattern` for a string, a `check` (a function of the value that raises ValueError), `requires` (another option
that must be set when this one is given) and `exclude` (set by Python code only: neither read from the data nor in
the schema). Keys a model does not declare are refused. A field without a default is required.

Checks that involve several fields go in the model's `__post_init__`, raising ValueError: the validator reports it
at the model's location. Type rules and option checks run when data is validated; `__post_init__` runs on every
construction, `dataclasses.replace` included: a model built directly in Python (`Probe(path="p.py")`) gets only
those, the caller being trusted with the types.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import types
import typing
from pathlib import Path, PurePath
from typing import Annotated, Any, Callable, Literal, TypeVar, Union

__all__ = ["Option", "Problem", "Tagged", "ValidationError", "json_schema", "option", "options", "validate"]

T = TypeVar("T")
MISSING = dataclasses.MISSING
_NONE = type(None)
_META = "specpatch.model"  # the key of an option's settings in `dataclasses.Field.metadata`


# --------------------------------------------------------------------------------------------------- declaring


@dataclasses.dataclass(frozen=True)
class Tagged:
    """Marks a union of models as picked by the value of one of their options: `Annotated[A | B, Tagged("op")]`."""

    key: str  #: the option each member declares as a `Literal` of its tag, e.g. "op"


@dataclasses.dataclass(frozen=True)
class Option:
    """One field of a model as the data sees it."""

    name: str  #: the attribute, e.g. "cls"
    key: str  #: the name in the data, e.g. "class" (the alias when there is one, else `name`)
    type: Any  #: the resolved type hint
    required: bool  #: no default and no default factory
    default: Any = MISSING  #: the default value, or a default factory's value, or MISSING
    description: str = ""
    pattern: str | None = None  #: a regex a string value must contain a match of (JSON Schema semantics)
    check: Callable[[Any], object] | None = None  #: raises ValueError for a bad value
    requires: str | None = None  #: the attribute of another option that must be set (not None) with this one

    @property
    def names(self) -> tuple[str, ...]:
        """The keys the data may use for this option: the alias first, then the attribute name."""
        return (self.key,) if self.key == self.name else (self.key, self.name)


def option(*, default: Any = MISSING, default_factory: Callable[[], Any] | Any = MISSING, description: str = "",
           alias: str | None = None, pattern: str | None = None, check: Callable[[Any], object] | None = None,
           requires: str | None = None, exclude: bool = False) -> Any:
    """A dataclass field with the settings the validator and the JSON Schema read (see the module's docstring)."""
    settings = {"description": description, "alias": alias, "pattern": pattern, "check": check,
                "requires": requires, "exclude": exclude}
    return dataclasses.field(default=default, default_factory=default_factory, metadata={_META: settings})


@functools.cache
def options(model: type) -> tuple[Option, ...]:
    """The options of a model (its dataclass fields, less the excluded ones), in declaration order."""
    hints = typing.get_type_hints(model, include_extras=True)
    out = []
    for f in dataclasses.fields(model):
        settings = f.metadata.get(_META, {})
        if settings.get("exclude"):
            continue
        if f.default is not MISSING:
            default = f.default
        elif f.default_factory is not MISSING:
            default = f.default_factory()
        else:
            default = MISSING
        out.append(Option(
            name=f.name, key=settings.get("alias") or f.name, type=hints[f.name], default=default,
            required=f.default is MISSING and f.default_factory is MISSING,
            description=settings.get("description", ""), pattern=settings.get("pattern"),
            check=settings.get("check"), requires=settings.get("requires")))
    return tuple(out)


@functools.cache
def _tags(union: Any, key: str) -> dict[Any, type]:
    """{tag: model} of a tagged union, read from each member's `Literal` option `key`."""
    table: dict[Any, type] = {}
    for member in typing.get_args(union):
        hint = next(o.type for o in options(member) if o.key == key)
        if typing.get_origin(hint) is not Literal:
            raise TypeError(f"{member.__name__}.{key} must be a Literal to tag a union, not {hint!r}")
        table.update(dict.fromkeys(typing.get_args(hint), member))
    return table


# --------------------------------------------------------------------------------------------------- validating


@dataclasses.dataclass(frozen=True)
class Problem:
    """One thing wrong with the data."""

    loc: tuple[str | int, ...]  #: where: keys and list indices from the top of the data
    type: str  #: "missing", "extra_forbidden", "type_error", "literal_error", "pattern_mismatch", "value_error", ...
    msg: str  #: what, in a sentence fragment, e.g. "expected a string, got a list"


class ValidationError(ValueError):
    """The data does not fit the model; `errors` holds every problem found: in each mapping, the unknown keys first,
    then the options in the order the model declares them."""

    def __init__(self, model: type, errors: list[Problem]):
        self.model = model
        self.errors = tuple(errors)
        count = f"{len(errors)} problem{'s' if len(errors) != 1 else ''}"
        lines = [f"  {'.'.join(map(str, e.loc)) or '(top)'}: {e.msg}" for e in errors]
        super().__init__("\n".join([f"{count} in {model.__name__}:", *lines]))


def validate(model: type[T], data: Any, **excluded: Any) -> T:
    """Build `model` from plain data (dicts, lists, scalars), or raise ValidationError listing every problem.
    `excluded` gives the values of the model's excluded options (those set by Python code, not by the data)."""
    errors: list[Problem] = []
    value = _model(model, data, (), errors, excluded)
    if errors:
        raise ValidationError(model, errors)
    return value


def _model(model: type, data: Any, loc: tuple, errors: list[Problem], excluded: dict | None = None) -> Any:
    if isinstance(data, model):
        return data
    if not isinstance(data, dict):
        errors.append(Problem(loc, "type_error", f"expected a mapping of {model.__name__} options, got {_kind(data)}"))
        return None
    before = len(errors)
    opts = options(model)
    known = {name for o in opts for name in o.names}
    # unknown keys first: a typo in a key usually explains a "missing" error that comes with it
    errors += [Problem(loc + (key,), "extra_forbidden", f"unknown option `{key}`" + _guess(key, known))
               for key in data if key not in known]
    values: dict[str, Any] = {}
    for o in opts:
        given = [name for name in o.names if name in data]
        if not given:
            if o.required:
                errors.append(Problem(loc + (o.key,), "missing", f"missing option `{o.key}`"))
            continue
        if len(given) > 1:
            errors.append(Problem(loc + (o.name,), "duplicate", f"`{o.key}` and `{o.name}` are one option: give one"))
            continue
        where, count = loc + (given[0],), len(errors)
        value = _value(o.type, data[given[0]], where, errors)
        if len(errors) == count:
            _check_option(o, value, where, errors)
        values[o.name] = value
    for o in opts:
        if o.requires and o.name in values and values.get(o.requires) is None:
            other = next(p.key for p in opts if p.name == o.requires)
            errors.append(Problem(loc + (o.key,), "value_error", f"`{o.key}` goes with `{other}`, which is not set"))
    if len(errors) > before:
        return None
    try:
        return model(**values, **(excluded or {}))
    except ValueError as exc:  # a __post_init__ check
        errors.append(Problem(loc, "value_error", str(exc)))
        return None


def _check_option(o: Option, value: Any, loc: tuple, errors: list[Problem]) -> None:
    if o.pattern is not None and isinstance(value, str) and not re.search(o.pattern, value):
        errors.append(Problem(loc, "pattern_mismatch", f"{value!r} does not match the pattern {o.pattern!r}"))
    if o.check is not None:
        try:
            o.check(value)
        except ValueError as exc:
            errors.append(Problem(loc, "value_error", str(exc)))


#: scalar type -> (accepts the value?, its name in messages)
_SCALARS: dict[Any, tuple[Callable[[Any], bool], str]] = {
    str: (lambda v: isinstance(v, str), "a string"),
    bool: (lambda v: isinstance(v, bool), "a boolean"),
    int: (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    float: (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), "a number"),
    _NONE: (lambda v: v is None, "null"),
    Path: (lambda v: isinstance(v, (str, PurePath)), "a path (a string)"),
}


def _value(hint: Any, value: Any, loc: tuple, errors: list[Problem]) -> Any:
    """`value` checked (and converted where the rules say so) against `hint`; problems are appended to `errors`."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        tag = next((a for a in hint.__metadata__ if isinstance(a, Tagged)), None)
        return _value(args[0], value, loc, errors) if tag is None else _tagged(args[0], tag.key, value, loc, errors)
    if hint is Any:
        return value
    if hint in _SCALARS:
        accepts, name = _SCALARS[hint]
        if not accepts(value):
            errors.append(Problem(loc, "type_error", f"expected {name}, got {_kind(value)}"))
            return None
        return float(value) if hint is float else Path(value) if hint is Path else value
    if origin is Literal:
        if not any(type(value) is type(a) and value == a for a in args):
            errors.append(Problem(loc, "literal_error", f"expected {_describe(hint)}, got {value!r}"))
        return value
    if origin in (Union, types.UnionType):
        return _union(args, value, loc, errors)
    if origin is tuple:
        if len(args) != 2 or args[1] is not Ellipsis:
            raise TypeError(f"only tuple[X, ...] is supported, not {hint!r}")
        if not isinstance(value, (list, tuple)):
            errors.append(Problem(loc, "type_error", f"expected a list, got {_kind(value)}"))
            return None
        return tuple(_value(args[0], item, loc + (i,), errors) for i, item in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            errors.append(Problem(loc, "type_error", f"expected a mapping, got {_kind(value)}"))
            return None
        return {_value(args[0], k, loc + (k,), errors): _value(args[1], v, loc + (k,), errors)
                for k, v in value.items()}
    if dataclasses.is_dataclass(hint):
        return _model(hint, value, loc, errors)
    raise TypeError(f"patcher.model cannot validate the type {hint!r}")


def _union(members: tuple, value: Any, loc: tuple, errors: list[Problem]) -> Any:
    if value is None and _NONE in members:
        return None
    others = [m for m in members if m is not _NONE]
    if len(others) == 1:  # `X | None`: X's own problems, at their own locations
        return _value(others[0], value, loc, errors)
    for member in sorted(others, key=lambda m: m is not type(value)):  # stable: the exact type first
        trial: list[Problem] = []
        result = _value(member, value, loc, trial)
        if not trial:
            return result
    errors.append(Problem(loc, "type_error", f"expected {' or '.join(map(_describe, others))}, got {_kind(value)}"))
    return None


def _tagged(union: Any, key: str, value: Any, loc: tuple, errors: list[Problem]) -> Any:
    table = _tags(union, key)
    if not isinstance(value, dict):
        errors.append(Problem(loc, "type_error", f"expected a mapping with `{key}`, got {_kind(value)}"))
        return None
    if key not in value:
        errors.append(Problem(loc + (key,), "missing", f"missing option `{key}`"))
        return None
    tag = value[key]
    try:
        model = table.get(tag)
    except TypeError:  # an unhashable tag, such as a list
        model = None
    if model is None:
        errors.append(Problem(loc + (key,), "union_tag_invalid",
                              f"`{key}: {tag}` is not one of: {', '.join(map(str, table))}"))
        return None
    return _model(model, value, loc, errors)


def _kind(value: Any) -> str:
    """What a YAML value is, for messages: `a list`, `the string 'x'`, `null`."""
    if value is None:
        return "null"
    if isinstance(value, (bool, int, float, str)):
        name = {bool: "boolean", int: "integer", float: "number", str: "string"}[type(value)]
        return f"the {name} {_short(value)}"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"a {type(value).__name__}"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _describe(hint: Any) -> str:
    """A type as messages name it: `a string`, `'body' or 'else'`, `a list`."""
    origin = typing.get_origin(hint)
    if hint in _SCALARS:
        return _SCALARS[hint][1]
    if origin is Literal:
        return " or ".join(map(repr, typing.get_args(hint)))
    if origin is tuple:
        return "a list"
    if origin is Annotated:
        return _describe(typing.get_args(hint)[0])
    return "a mapping"  # a dict, a model, a tagged union


# --------------------------------------------------------------------------------------------------- JSON Schema


#: which options of which model may also be given as `X_file: path` (a loader's include convention): (model, option)
FileOptions = Callable[[type, Option], bool]


def json_schema(model: type, *, file_options: FileOptions | None = None) -> dict:
    """JSON Schema (2020-12) of the data `validate(model, ...)` accepts: the model's own object schema, with the
    models it uses under `$defs` (by class name). Names are the data's (aliases), as are the defaults.

    With `file_options`, each option it accepts gets a twin `X_file` (a string: the path of a file that holds the
    value); a required option is then required as `X` or as `X_file`, and `requires` accepts either spelling."""
    defs: dict[str, dict] = {}
    schema = _object_schema(model, defs, file_options)
    if defs:
        schema["$defs"] = dict(sorted(defs.items()))
    return schema


def _object_schema(model: type, defs: dict[str, dict], file_options: FileOptions | None = None) -> dict:
    properties, required, dependent, either = {}, [], {}, []
    from_file = {o.key for o in options(model) if file_options is not None and file_options(model, o)}
    for o in options(model):
        prop = _type_schema(o.type, defs, file_options)
        prop["title"] = o.key.replace("_", " ").title()
        if o.description:
            prop["description"] = o.description
        if o.pattern is not None:
            prop["pattern"] = o.pattern
        if o.default is not MISSING:
            prop["default"] = _json(o.default)
        if o.required and o.key in from_file:
            either.append({"oneOf": [{"required": [o.key]}, {"required": [f"{o.key}_file"]}]})
        elif o.required:
            required.append(o.key)
        if o.requires:
            dependent[o.key] = [p.key for p in options(model) if p.name == o.requires]
        properties[o.key] = prop
        if o.key in from_file:
            properties[f"{o.key}_file"] = {"type": "string", "title": f"{prop['title']} (from a file)",
                                           "description": f"read `{o.key}` from this file, relative to the "
                                                          f"recipe's folder"}
    schema: dict[str, Any] = {"title": model.__name__, "type": "object"}
    doc = (model.__doc__ or "").strip()
    if doc and not doc.startswith(f"{model.__name__}("):  # not the signature dataclasses writes when there is none
        schema["description"] = doc
    schema["properties"] = properties
    if required:
        schema["required"] = required
    if either:
        schema["allOf"] = either
    if dependent and from_file:  # either spelling of the option and of what it needs
        schema["dependentSchemas"] = {
            name: {"allOf": [{"anyOf": [{"required": [n]}, {"required": [f"{n}_file"]}]} for n in needs]}
            for key, needs in dependent.items() for name in (key, f"{key}_file")}
    elif dependent:
        schema["dependentRequired"] = dependent
    schema["additionalProperties"] = False
    return schema


def _type_schema(hint: Any, defs: dict[str, dict], file_options: FileOptions | None = None) -> dict:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        tag = next((a for a in hint.__metadata__ if isinstance(a, Tagged)), None)
        if tag is None:
            return _type_schema(args[0], defs, file_options)
        table = _tags(args[0], tag.key)
        refs = {t: _type_schema(m, defs, file_options)["$ref"] for t, m in table.items()}
        return {"oneOf": [{"$ref": r} for r in dict.fromkeys(refs.values())],
                "discriminator": {"propertyName": tag.key, "mapping": refs}}
    simple = {str: "string", bool: "boolean", int: "integer", float: "number", _NONE: "null"}
    if hint in simple:
        return {"type": simple[hint]}
    if hint is Path:
        return {"type": "string", "format": "path"}
    if hint is Any:
        return {}
    if origin is Literal:
        kinds = {simple.get(type(a)) for a in args}
        out: dict[str, Any] = {"const": args[0]} if len(args) == 1 else {"enum": list(args)}
        return {**out, "type": kinds.pop()} if len(kinds) == 1 and None not in kinds else out
    if origin in (Union, types.UnionType):
        return {"anyOf": [_type_schema(m, defs, file_options) for m in args]}
    if origin is tuple:
        return {"type": "array", "items": _type_schema(args[0], defs, file_options)}
    if origin is dict:
        return {"type": "object", "additionalProperties": _type_schema(args[1], defs, file_options)}
    if dataclasses.is_dataclass(hint):
        if hint.__name__ not in defs:
            defs[hint.__name__] = {}  # placed first: a model that refers to itself stops here
            defs[hint.__name__] = _object_schema(hint, defs, file_options)
        return {"$ref": f"#/$defs/{hint.__name__}"}
    raise TypeError(f"patcher.model has no JSON Schema for the type {hint!r}")


def _json(value: Any) -> Any:
    """A default as the data would write it: models as mappings by their data names, tuples as lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {o.key: _json(getattr(value, o.name)) for o in options(type(value))}
    if isinstance(value, (list, tuple)):
        return [_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _json(v) for k, v in value.items()}
    if isinstance(value, PurePath):
        return str(value)
    return value


def _guess(key: object, known: set[str]) -> str:
    """`; did you mean `x`?` for the known option nearest a mistyped key (`varients`, `probe`), else nothing."""
    import difflib

    guess = difflib.get_close_matches(str(key), sorted(known), n=1)
    return f"; did you mean `{guess[0]}`?" if guess else ""
