"""patcher.model: plain YAML data -> frozen dataclasses by their type hints, every problem with its location; and the
JSON Schema of the same models, checked with an independent validator (jsonschema) against the shipped recipes."""

from __future__ import annotations

import dataclasses
import pickle
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import pytest
import yaml

from patcher.model import Problem, Tagged, ValidationError, json_schema, option, options, validate
from patcher.operations.base import REGISTRY, Operation, register
from patcher.recipe import Recipe, TargetSpec, json_schema as recipe_schema

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True, kw_only=True)
class Scalars:
    """Every scalar rule."""

    s: str = "x"
    i: int = 0
    f: float = 0.0
    b: bool = False
    n: None = None
    p: Path = Path(".")
    any: Any = None


@dataclass(frozen=True, kw_only=True)
class Inner:
    """A nested model."""

    name: str
    size: int = 1


@dataclass(frozen=True, kw_only=True)
class Outer:
    """Containers, unions, aliases, checks."""

    cls: str = option(alias="class", description="the class")
    kind: Literal["a", "b"] = "a"
    items: tuple[int, ...] = ()
    table: dict[str, Inner] = option(default_factory=dict)
    inner: Inner | None = None
    value: int | float | str | bool = 0
    even: int = option(default=0, check=lambda v: _even(v))
    code: str = option(default="ab", pattern=r"^[a-z]+$")
    hidden: str = option(default="", exclude=True)


def _even(value: int) -> None:
    if value % 2:
        raise ValueError(f"{value} is odd")


@dataclass(frozen=True, kw_only=True)
class Cat:
    """A cat."""

    kind: Literal["cat"]
    lives: int = 9


@dataclass(frozen=True, kw_only=True)
class Dog:
    """A dog."""

    kind: Literal["dog"]
    good: bool = True


@dataclass(frozen=True, kw_only=True)
class Pets:
    """A tagged union, a cross-field check and a dependent option."""

    pets: tuple[Annotated[Union[Cat, Dog], Tagged("kind")], ...] = ()
    low: int = 0
    high: int = 0
    mode: Literal["x", "y"] = option(default="x", requires="target")
    target: str | None = None

    def __post_init__(self) -> None:
        if self.low > self.high:
            raise ValueError(f"low {self.low} is above high {self.high}")


def problems(model: type, data: Any) -> list[tuple[tuple, str]]:
    with pytest.raises(ValidationError) as info:
        validate(model, data)
    return [(e.loc, e.type) for e in info.value.errors]


def only_problem(model: type, data: Any) -> Problem:
    with pytest.raises(ValidationError) as info:
        validate(model, data)
    assert len(info.value.errors) == 1, info.value
    return info.value.errors[0]


# --------------------------------------------------------------------------------------------------- type rules


def test_scalars_accept_their_own_type():
    got = validate(Scalars, {"s": "t", "i": 3, "f": 1.5, "b": True, "n": None, "p": "a/b", "any": [1]})
    assert got == Scalars(s="t", i=3, f=1.5, b=True, n=None, p=Path("a/b"), any=[1])
    assert isinstance(got.p, Path)


def test_float_takes_an_int_and_makes_it_a_float():
    got = validate(Scalars, {"f": 3})
    assert got.f == 3.0 and type(got.f) is float


@pytest.mark.parametrize("key, value", [
    ("s", 3), ("s", None), ("s", ["a"]),
    ("i", True), ("i", "3"), ("i", 3.0),     # no bool for int, no conversion from a string or a float
    ("f", "1.5"), ("f", False),
    ("b", 1), ("b", "true"),
    ("n", 0),
    ("p", 3),
])
def test_scalars_refuse_other_types(key, value):
    err = only_problem(Scalars, {key: value})
    assert (err.loc, err.type) == ((key,), "type_error")
    assert err.msg.startswith("expected ") and "got " in err.msg


def test_literal_wants_one_of_its_values_of_the_same_type():
    assert validate(Outer, {"class": "C", "kind": "b"}).kind == "b"
    err = only_problem(Outer, {"class": "C", "kind": "c"})
    assert err.type == "literal_error" and err.msg == "expected 'a' or 'b', got 'c'"
    assert problems(Pets, {"pets": [{"kind": "cat", "lives": True}]}) == [(("pets", 0, "lives"), "type_error")]


@pytest.mark.parametrize("value, expected", [(3, 3), (2.5, 2.5), ("x", "x"), (True, True), (False, False)])
def test_union_picks_the_member_of_the_exact_type(value, expected):
    got = validate(Outer, {"class": "C", "value": value}).value
    assert got == expected and type(got) is type(expected)


def test_union_prefers_the_exact_type_to_an_earlier_member_that_converts():
    @dataclass(frozen=True, kw_only=True)
    class Number:
        x: float | int = 0

    assert type(validate(Number, {"x": 3}).x) is int and type(validate(Number, {"x": 2.5}).x) is float


def test_union_refusal_names_every_member():
    err = only_problem(Outer, {"class": "C", "value": [1]})
    assert err.loc == ("value",) and err.type == "type_error"
    assert err.msg == "expected an integer or a number or a string or a boolean, got a list"


def test_optional_model_reports_the_inner_problems_where_they_are():
    assert validate(Outer, {"class": "C", "inner": None}).inner is None
    assert validate(Outer, {"class": "C", "inner": {"name": "n"}}).inner == Inner(name="n")
    assert problems(Outer, {"class": "C", "inner": {"size": "big"}}) == [
        (("inner", "name"), "missing"), (("inner", "size"), "type_error")]


def test_tuple_from_a_list_item_by_item():
    assert validate(Outer, {"class": "C", "items": [1, 2]}).items == (1, 2)
    assert problems(Outer, {"class": "C", "items": [1, "2", 3, None]}) == [
        (("items", 1), "type_error"), (("items", 3), "type_error")]
    assert problems(Outer, {"class": "C", "items": "12"}) == [(("items",), "type_error")]  # a string is no list


def test_dict_key_by_key():
    got = validate(Outer, {"class": "C", "table": {"x": {"name": "n", "size": 2}}})
    assert got.table == {"x": Inner(name="n", size=2)}
    assert problems(Outer, {"class": "C", "table": {"x": {"name": 1}, 5: {"name": "n"}}}) == [
        (("table", "x", "name"), "type_error"), (("table", 5), "type_error")]
    assert problems(Outer, {"class": "C", "table": [1]}) == [(("table",), "type_error")]


def test_nested_model_must_be_a_mapping_and_an_instance_is_taken_as_is():
    assert problems(Outer, {"class": "C", "inner": "n"}) == [(("inner",), "type_error")]
    inner = Inner(name="n")
    assert validate(Outer, {"class": "C", "inner": inner}).inner is inner
    assert problems(Outer, ["class"]) == [((), "type_error")]


def test_unsupported_type_hint_is_a_programming_error():
    @dataclass(frozen=True, kw_only=True)
    class Odd:
        tags: set = dataclasses.field(default_factory=set)

    with pytest.raises(TypeError, match="cannot validate"):
        validate(Odd, {"tags": [1]})


# --------------------------------------------------------------------------------------------------- options


def test_required_missing_and_defaults():
    assert problems(Inner, {}) == [(("name",), "missing")]
    a, b = validate(Outer, {"class": "C"}), validate(Outer, {"class": "D"})
    assert a.table == {} and a.table is not b.table  # default_factory: one value each
    assert a == Outer(cls="C")


def test_alias_and_attribute_name_are_both_accepted_but_not_together():
    assert validate(Outer, {"class": "C"}).cls == "C"
    assert validate(Outer, {"cls": "C"}).cls == "C"
    err = only_problem(Outer, {"class": "C", "cls": "D"})
    assert err.type == "duplicate" and "`class` and `cls`" in err.msg
    err = only_problem(Outer, {})
    assert err.loc == ("class",) and err.msg == "missing option `class`"  # the data's name


def test_unknown_keys_are_refused_first():
    assert problems(Inner, {"size": "x", "nmae": "n"}) == [
        (("nmae",), "extra_forbidden"), (("name",), "missing"), (("size",), "type_error")]


def test_pattern():
    assert validate(Outer, {"class": "C", "code": "abc"}).code == "abc"
    err = only_problem(Outer, {"class": "C", "code": "ab1"})
    assert err.type == "pattern_mismatch" and "^[a-z]+$" in err.msg


def test_check_runs_on_a_value_of_the_right_type_only():
    err = only_problem(Outer, {"class": "C", "even": 3})
    assert (err.loc, err.type, err.msg) == (("even",), "value_error", "3 is odd")
    assert problems(Outer, {"class": "C", "even": "3"}) == [(("even",), "type_error")]


def test_excluded_option_is_set_by_python_only():
    assert "hidden" not in [o.name for o in options(Outer)]
    assert problems(Outer, {"class": "C", "hidden": "h"}) == [(("hidden",), "extra_forbidden")]
    assert validate(Outer, {"class": "C"}, hidden="h").hidden == "h"
    assert "hidden" not in json_schema(Outer)["properties"]


def test_post_init_problem_is_reported_at_the_model_and_only_when_the_fields_are_right():
    assert problems(Pets, {"low": 2, "high": 1}) == [((), "value_error")]
    assert problems(Pets, {"low": 2, "high": "1"}) == [(("high",), "type_error")]
    with pytest.raises(ValueError, match="above"):  # direct construction runs it too
        Pets(low=2, high=1)


def test_requires():
    assert validate(Pets, {"mode": "y", "target": "t"}).mode == "y"
    err = only_problem(Pets, {"mode": "y"})
    assert (err.loc, err.msg) == (("mode",), "`mode` goes with `target`, which is not set")
    assert problems(Pets, {"mode": "y", "target": None}) == [(("mode",), "value_error")]


# --------------------------------------------------------------------------------------------------- tagged unions


def test_tagged_union_picks_the_model_by_its_tag():
    got = validate(Pets, {"pets": [{"kind": "dog"}, {"kind": "cat", "lives": 3}]})
    assert got.pets == (Dog(kind="dog"), Cat(kind="cat", lives=3))


@pytest.mark.parametrize("pet, loc, kind", [
    ({"lives": 3}, ("pets", 0, "kind"), "missing"),
    ({"kind": "cow"}, ("pets", 0, "kind"), "union_tag_invalid"),
    ({"kind": ["cat"]}, ("pets", 0, "kind"), "union_tag_invalid"),
    ("cat", ("pets", 0), "type_error"),
    ({"kind": "dog", "lives": 3}, ("pets", 0, "lives"), "extra_forbidden"),  # the dog's options, not the cat's
])
def test_tagged_union_problems(pet, loc, kind):
    err = only_problem(Pets, {"pets": [pet]})
    assert (err.loc, err.type) == (loc, kind)


def test_unknown_tag_lists_the_known_ones():
    assert only_problem(Pets, {"pets": [{"kind": "cow"}]}).msg == "`kind: cow` is not one of: cat, dog"


# --------------------------------------------------------------------------------------------------- errors


def test_every_problem_is_collected_with_a_readable_message():
    data = {"pets": [{"kind": "cat", "lives": "x"}, {"kind": "cow"}, {"kind": "dog", "good": 1}], "low": "a"}
    with pytest.raises(ValidationError) as info:
        validate(Pets, data)
    err = info.value
    assert isinstance(err, ValueError) and err.model is Pets
    assert [e.loc for e in err.errors] == [("pets", 0, "lives"), ("pets", 1, "kind"), ("pets", 2, "good"), ("low",)]
    text = str(err)
    assert text.splitlines()[0] == "4 problems in Pets:"
    assert "  pets.0.lives: expected an integer, got the string 'x'" in text


# --------------------------------------------------------------------------------------------------- operations


def test_operations_are_models_with_the_yaml_names():
    step = validate(REGISTRY["add_method"], {"op": "add_method", "file": "m.py", "class": "C", "code": "def f(): 1"})
    assert step.cls == "C" and step.after is None
    assert [o.key for o in options(type(step))] == ["op", "file", "name", "group", "class", "code", "after"]
    assert pickle.loads(pickle.dumps(step)) == step and hash(step) == hash(dataclasses.replace(step))
    with pytest.raises(dataclasses.FrozenInstanceError):
        step.code = "x"  # type: ignore[misc]


def test_render_params_is_a_validated_copy():
    step = validate(REGISTRY["insert_statements"], {"op": "insert_statements", "file": "m.py", "function": "f",
                                                   "code": "x = {{n}}", "at": "after", "match": "y = 1"})
    rendered = step.render_params({"n": 4})
    assert type(rendered) is type(step) and rendered.code == "x = 4" and rendered.match == "y = 1"
    assert step.code == "x = {{n}}" and step.placeholders() == {"n"}


def test_register_wants_a_literal_op():
    @dataclass(frozen=True, kw_only=True)
    class Loose(Operation):
        """Not registrable: its `op` is any string."""

    with pytest.raises(TypeError, match="Literal"):
        register(Loose)
    assert "Loose" not in {c.__name__ for c in REGISTRY.values()}


def test_a_second_operation_under_a_registered_name_is_refused():
    # a plugin's class named like a built-in one silently took every recipe's steps of that operation
    from typing import Literal

    @dataclass(frozen=True, kw_only=True)
    class Impostor(Operation):
        """Claims a built-in operation's name."""

        op: Literal["add_method"]

    with pytest.raises(TypeError, match="registered twice"):
        register(Impostor)
    assert REGISTRY["add_method"].__name__ == "AddMethod"


# --------------------------------------------------------------------------------------------------- JSON Schema


def _validator(schema: dict):
    import jsonschema  # a test requirement (pyproject's `test` extra): an independent implementation

    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_schema_of_a_model():
    schema = json_schema(Pets)
    assert schema["title"] == "Pets" and schema["description"].startswith("A tagged union")
    assert schema["additionalProperties"] is False and schema["dependentRequired"] == {"mode": ["target"]}
    pets = schema["properties"]["pets"]["items"]
    assert pets["discriminator"] == {"propertyName": "kind", "mapping": {"cat": "#/$defs/Cat", "dog": "#/$defs/Dog"}}
    assert schema["$defs"]["Cat"]["properties"]["kind"] == {"const": "cat", "type": "string", "title": "Kind"}
    outer = json_schema(Outer)
    assert outer["required"] == ["class"] and outer["properties"]["class"]["description"] == "the class"
    assert outer["properties"]["code"]["pattern"] == "^[a-z]+$"
    assert outer["properties"]["value"]["anyOf"] == [{"type": t} for t in ("integer", "number", "string", "boolean")]


def test_schema_with_file_options_is_generated_with_their_twins():
    """`file_options` picks the options that may be read from a file: each gets an `X_file` twin, a required one is
    required in either spelling, and `requires` accepts either; the others stay as they are."""
    schema = json_schema(Outer, file_options=lambda model, o: o.key in ("class", "code"))
    props = schema["properties"]
    assert props["class_file"]["type"] == "string" and props["code_file"]["type"] == "string"
    assert "kind_file" not in props and "required" not in schema
    assert schema["allOf"] == [{"oneOf": [{"required": ["class"]}, {"required": ["class_file"]}]}]
    check = _validator(schema)
    assert check.is_valid({"class_file": "c.txt"}) and check.is_valid({"class": "C", "code_file": "c.txt"})
    assert not check.is_valid({}) and not check.is_valid({"class": "C", "class_file": "c.txt"})
    assert not check.is_valid({"class": "C", "kind_file": "k.txt"})
    pets = json_schema(Pets, file_options=lambda model, o: o.key in ("mode", "target"))
    assert "dependentRequired" not in pets
    assert pets["dependentSchemas"]["mode_file"] == {
        "allOf": [{"anyOf": [{"required": ["target"]}, {"required": ["target_file"]}]}]}


@pytest.mark.parametrize("data", [
    {"class": "C", "kind": "b", "items": [1], "table": {"t": {"name": "n"}}, "inner": None, "value": "v", "code": "z"},
    {"class": "C", "kind": "c"}, {"class": "C", "items": ["1"]}, {"class": "C", "extra": 1}, {"kind": "a"},
    {"class": "C", "table": {"t": {"size": 2}}}, {"class": "C", "code": "Z"}, {"class": "C", "inner": {"name": 1}},
])
def test_schema_and_validator_agree(data):
    """What the validator accepts the schema accepts, and the other way round (for what a schema can say)."""
    by_validator = True
    try:
        validate(Outer, data)
    except ValidationError:
        by_validator = False
    assert _validator(json_schema(Outer)).is_valid(data) == by_validator


def test_recipe_schema_accepts_the_shipped_and_test_recipes_as_written():
    schema = recipe_schema()
    check = _validator(schema)
    variants = _validator({"$defs": schema["$defs"], "type": "array", "items": {"$ref": "#/$defs/Variant"}})
    recipes = sorted((ROOT / "recipes").glob("*.yaml")) + sorted((ROOT / "tests" / "recipes").glob("*.yaml"))
    assert recipes
    for path in recipes:
        data = yaml.safe_load(path.read_text())
        assert [e.message for e in check.iter_errors(data)] == [], path
        if "variants_file" in data:
            more = yaml.safe_load((path.parent / data["id"] / data["variants_file"]).read_text())
            assert [e.message for e in variants.iter_errors(more)] == [], path


@pytest.mark.parametrize("change", [
    {"titel": "x"},
    {"id": "Not Kebab"},
    {"target": {"package": "sglang", "version": ">=1"}},
    {"steps": [{"op": "add_method", "file": "m.py", "class": "C"}]},                     # no code
    {"steps": [{"op": "add_metod", "file": "m.py", "class": "C", "code": "def f(): 1"}]},
    {"steps": [{"op": "add_branch", "file": "m.py", "function": "f", "condition": "c", "call": "g()", "arm": "body"}]},
    {"steps": [{"op": "add_import", "file": "m.py", "code": "import os", "code_file": "x.py"}]},
    {"params": {"n": {"type": "int"}}},
])
def test_recipe_schema_refuses_what_the_loader_refuses(change):
    good = {"id": "demo", "title": "T", "target": {"package": "sglang"},
            "steps": [{"op": "add_branch", "file": "m.py", "function": "f", "condition": "c", "call": "g()",
                       "branch_if_file": "test.py", "arm": "body"}]}
    check = _validator(recipe_schema())
    assert check.is_valid(good)
    assert not check.is_valid({**good, **change})


def test_recipe_models_keep_their_api():
    assert TargetSpec(package="sglang").versions == ""
    assert [o.key for o in options(Recipe)] == ["id", "version", "title", "description", "target", "params", "constants",
                                                "steps", "verify", "variants"]  # `source` is Python's only


def test_specpatch_does_not_import_pydantic():
    """The recipe model is the standard library's: pydantic's import and schema build cost ~0.1 s and ~13 MB."""
    probe = "import sys, patcher.api, patcher.cli; patcher.api.load_recipe('dynamic-spec-disable'); " \
            "print('pydantic' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "False", done.stderr
