"""The expression-level operations: replace_expression, add_keyword_argument, add_element, add_parameter."""

from __future__ import annotations

import libcst as cst
import pytest
from op_helpers import cannot, check, op, unchanged

from patcher.errors import AnchorAmbiguous, AnchorNotFound, Conflict
from patcher.model import ValidationError
from patcher.operations.base import Changed

CONFIG = """
    class ModelConfig:
        def __init__(self, hf_config, is_draft_model):
            if is_draft_model and hf_config.architectures[0] in [
                "DeepseekV3ForCausalLM",
                "GlmMoeDsaForCausalLM",
            ]:
                hf_config.architectures[0] = "DeepseekV3ForCausalLMNextN"
            self.queue = DecodePreallocQueue(
                req_to_token_pool=self.req_to_token_pool,
                transfer_backend=self.transfer_backend,
            )
            self.other = make(1, (2, 3), mode="a")

        def other(self):
            names = ["DeepseekV3ForCausalLM"]
    """


# ----------------------------------------------------------------------------------------------- replace_expression


def test_replace_expression_in_a_nested_position():
    check(op("replace_expression", within="ModelConfig.__init__", match='make(1, (2,3), mode = "a")',
             code='make(1, (2, 3), mode="b")'), CONFIG, CONFIG.replace('mode="a"', 'mode="b"'))


def test_replace_expression_wrapping_the_match_is_idempotent():
    check(op("replace_expression", match="hf_config.architectures[0]", code="str(hf_config.architectures[0])",
             within="ModelConfig.__init__"), """
        class ModelConfig:
            def __init__(self, hf_config):
                return hf_config.architectures[0]
        """, """
        class ModelConfig:
            def __init__(self, hf_config):
                return str(hf_config.architectures[0])
        """)


@pytest.mark.parametrize("match, code, before, after", [
    # a hostile round: the release wrapped the matched `a + b` in parentheses; they were dropped, and
    # `(a + b) * scale` became `a + b + c * scale`
    ("a + b", "a + b + c", "total = (a + b) * scale\n", "total = (a + b + c) * scale\n"),
    # no parentheses around the place, but the code around it binds tighter than the new code
    ("n", "n + 1", "total = n * scale\n", "total = (n + 1) * scale\n"),
    ("x", "x if x else y", "f(x.attr)\n", "f((x if x else y).attr)\n"),
    ("pair", "a, b", "f(pair, 3)\n", "f((a, b), 3)\n"),
    # where the new code reads the same without them, none are added; a match that holds them replaces them
    ("a + b", "a + b + c", "total = a + b + d\n", "total = a + b + c + d\n"),
    ("n", "n + 1", "f(n, 2)\n", "f(n + 1, 2)\n"),
    ("(a + b)", "a", "total = (a + b) * s\n", "total = a * s\n"),
    # one `and` chain (slime's `is_channel_group and is_static` -> `... and input_quant_none and ...`)
    ("x", "x and y", "ok = x and z\n", "ok = x and y and z\n"),
])
def test_replace_expression_keeps_the_new_code_one_expression_where_it_lands(match, code, before, after):
    check(op("replace_expression", match=match, code=code), before, after)


def test_replace_expression_near_miss_and_attribute_names_are_not_expressions():
    # `queue` as the attr of `self.queue` is not the expression `queue`
    cannot(op("replace_expression", match="queue", code="q"), CONFIG, AnchorNotFound)
    cannot(op("replace_expression", match='make(1, (2, 3), mode="c")', code="x"), CONFIG, AnchorNotFound,
           candidates=('make(1, (2, 3), mode="a")',))


def test_replace_expression_ambiguous():
    cannot(op("replace_expression", match='"DeepseekV3ForCausalLM"', code='"X"'), CONFIG, AnchorAmbiguous)


def test_replace_expression_already_applied():
    unchanged(op("replace_expression", match='mode="z"', code='1') if False else
              op("replace_expression", match='make(0)', code='make(1, (2, 3), mode="a")'), CONFIG)


# ----------------------------------------------------------------------------------------------- add_keyword_argument


@pytest.mark.parametrize("call, before", [
    ("g(...)", "def g(x, y=0):\n    return x\n\n\ndef f(x):\n    return g(x, 1)\n"),
    ("Box(...)", "class Box:\n    def __init__(self, x, y=0):\n        pass\n\n\ndef f(x):\n    return Box(x, 1)\n"),
    ("self.g(...)", "class A:\n    def g(self, x, y=0):\n        pass\n\n    def f(self, x):\n        return self.g(x, 1)\n"),
])
def test_add_keyword_argument_refuses_a_keyword_the_call_passes_by_position(call, before):
    # a hostile round: `g(x)` -> `g(x, y=1)`; the release passes `y` by position, `g(x, 1)`: the port gave
    # `g(x, 1, y=1)`, a TypeError at the first call
    cannot(op("add_keyword_argument", call=call, code="y=1"), before, Conflict, mentions=("by position",))


def test_add_keyword_argument_beside_positional_arguments_of_other_parameters_or_an_unknown_callee():
    check(op("add_keyword_argument", call="g(...)", code="y=1"),
          "def g(x, z=0, y=0):\n    return x\n\n\ndef f(x):\n    return g(x, 1)\n",
          "def g(x, z=0, y=0):\n    return x\n\n\ndef f(x):\n    return g(x, 1, y=1)\n")
    check(op("add_keyword_argument", call="h(...)", code="y=1"), "def f(x):\n    return h(x, 1)\n",
          "def f(x):\n    return h(x, 1, y=1)\n")


def test_keyword_argument_in_a_call_written_one_argument_per_line():
    check(op("add_keyword_argument", within="ModelConfig.__init__", call="DecodePreallocQueue(...)",
             code="enable_profiling=True"), CONFIG, CONFIG.replace(
        "transfer_backend=self.transfer_backend,\n",
        "transfer_backend=self.transfer_backend,\n                enable_profiling=True,\n"))


def test_keyword_argument_after_a_keyword_on_one_line():
    check(op("add_keyword_argument", call="make(...)", after="mode", code="fast=False"), CONFIG,
          CONFIG.replace('mode="a")', 'mode="a", fast=False)'))
    check(op("add_keyword_argument", call="f(a)", code="b=2"), "x = f(a)\n", "x = f(a, b=2)\n")


def test_keyword_argument_conflict_near_miss_and_ambiguity():
    cannot(op("add_keyword_argument", call="make(...)", code='mode="b"'), CONFIG, Conflict, mentions=("mode",))
    cannot(op("add_keyword_argument", call="make(2, ...)", code="fast=1"), CONFIG, AnchorNotFound,
           candidates=('make(1, (2, 3), mode="a")',))
    cannot(op("add_keyword_argument", call="f(...)", code="b=1"), "f(1)\nf(2)\n", AnchorAmbiguous)
    unchanged(op("add_keyword_argument", call="make(1, ...)", code='mode = "a"'), CONFIG)


def test_keyword_argument_recipe_errors():
    with pytest.raises(ValidationError, match="keyword argument"):
        op("add_keyword_argument", call="f(...)", code="1")
    with pytest.raises(ValidationError, match="pattern of a call"):
        op("add_keyword_argument", call="f", code="a=1")


def test_a_call_moved_to_another_function_is_named_there():
    # hostile round 13 (10, a newcomer's port): "no call matching `uvicorn.run(app, ...)`" named neither the function
    # searched nor where the call went (upstream moved it to `_setup_and_run_http_server`)
    before = ("def launch_server(app):\n    _setup_and_run_http_server(app)\n\n\n"
              "def _setup_and_run_http_server(app):\n    uvicorn.run(app, host=h, port=p)\n")
    err = cannot(op("add_keyword_argument", within="launch_server", call="uvicorn.run(...)", code="loop='uvloop'"),
                 before, AnchorNotFound)
    assert "in `launch_server`" in err.message, err.message
    assert [c.text for c in err.candidates] == ["`uvicorn.run(app, host=h, port=p)` in `_setup_and_run_http_server`"]


def test_the_near_calls_offered_are_the_likest_of_the_same_function():
    # hostile round 14 (a team): the candidates were the first five `parser.add_argument(...)` calls, never the flag's
    flags = "".join(f'    parser.add_argument("--flag-{i}", type=int)\n' for i in range(8))
    before = f"def add_cli_args(parser):\n{flags}"
    err = cannot(op("add_keyword_argument", within="add_cli_args", call='parser.add_argument("--flag-7", 1)',
                    code="default=2"), before, AnchorNotFound)
    assert err.candidates[0].text == '`parser.add_argument("--flag-7", type=int)`', err.candidates


# ----------------------------------------------------------------------------------------------- add_element
def test_add_element_within_a_variable_of_the_module_picks_its_literal():
    # hostile round 14 (a team's recipe): `"CLIPModel"` is in two lists of sglang's model_config.py; `within:
    # multimodal_model_archs` said "no definition `multimodal_model_archs` in the module" (within took defs only)
    before = 'archs = ["CLIPModel", "A"]\nother = ["CLIPModel"]\n'
    check(op("add_element", within="archs", after='"CLIPModel"', code='"NewModel"'), before,
          before.replace('"CLIPModel", "A"', '"CLIPModel", "NewModel", "A"'))
    err = cannot(op("add_element", within="archz", after='"CLIPModel"', code='"NewModel"'), before, AnchorNotFound)
    assert "no definition or module-level variable `archz`" in err.message, err.message




def test_element_after_a_named_one_in_a_multiline_list():
    check(op("add_element", within="ModelConfig.__init__", after='"DeepseekV3ForCausalLM"',
             code='"DeepseekV32ForCausalLM"'), CONFIG, CONFIG.replace(
        '"DeepseekV3ForCausalLM",\n', '"DeepseekV3ForCausalLM",\n                "DeepseekV32ForCausalLM",\n', 1))


def test_element_at_the_end_of_a_one_line_tuple_and_set():
    check(op("add_element", after="3", code="4"), "x = (2, 3)\n", "x = (2, 3, 4)\n")
    check(op("add_element", after="'a'", code="'b'"), "S = {'a'}\n", "S = {'a', 'b'}\n")


def test_element_already_there_anywhere_in_the_literal():
    unchanged(op("add_element", after="1", code="3"), "x = [3, 1, 2]\n")


def test_element_in_every_literal_that_holds_the_anchor_is_already_applied():
    # upstream split one list into two (a dict entry and a tuple), each with the new element: nothing to add, where
    # one literal without it would be ambiguous
    text = 'ATTRS = {"image": ["thw", "hws", "grid"]}\n\ndef pick():\n    return ("grid", "thw", "hws")\n'
    unchanged(op("add_element", after='"hws"', code='"grid"'), text)
    cannot(op("add_element", after='"hws"', code='"grid"'), text.replace('("grid", ', '('), AnchorAmbiguous)


def test_element_near_miss_and_ambiguity():
    cannot(op("add_element", within="ModelConfig.__init__", after='"DeepseekV4ForCausalLM"', code='"X"'), CONFIG,
           AnchorNotFound, candidates=('"DeepseekV3ForCausalLM"',))
    cannot(op("add_element", after='"DeepseekV3ForCausalLM"', code='"X"'), CONFIG, AnchorAmbiguous)


# ----------------------------------------------------------------------------------------------- add_parameter


def test_parameter_after_a_named_one_and_at_the_end():
    check(op("add_parameter", function="ModelConfig.__init__", after="hf_config", code="revision"),
          CONFIG, CONFIG.replace("(self, hf_config, is_draft_model)", "(self, hf_config, revision, is_draft_model)"))
    check(op("add_parameter", function="f", code="c=None"), """
        def f(
            a,
            b,
        ):
            pass
        """, """
        def f(
            a,
            b,
            c=None,
        ):
            pass
        """)


def test_parameter_before_star_args():
    check(op("add_parameter", function="f", code="c=1"), "def f(a, *args, **kw):\n    pass\n",
          "def f(a, c=1, *args, **kw):\n    pass\n")


def test_parameter_first_after_the_star_is_keyword_only():
    check(op("add_parameter", function="f", after="*", code="layer: int = 0"), """
        def f(
            self,
            k: int,
            *,
            grouped: bool = False,
        ):
            pass
        """, """
        def f(
            self,
            k: int,
            *,
            layer: int = 0,
            grouped: bool = False,
        ):
            pass
        """)
    check(op("add_parameter", function="f", after="*", code="b=1"), "def f(a, *args, c=2):\n    pass\n",
          "def f(a, *args, b=1, c=2):\n    pass\n")
    check(op("add_parameter", function="f", after="*", code="b=1"), "def f(\n    a,\n    *args,\n):\n    pass\n",
          "def f(\n    a,\n    *args,\n    b=1,\n):\n    pass\n")
    cannot(op("add_parameter", function="f", after="*", code="b=1"), "def f(a):\n    pass\n", AnchorNotFound,
           mentions=("`*`",))


def test_parameter_without_default_after_defaults_is_refused():
    cannot(op("add_parameter", function="f", code="b"), "def f(a=1):\n    pass\n", Conflict, mentions=("default",))


def test_parameter_conflict_and_near_miss():
    unchanged(op("add_parameter", function="f", code="a : int=1"), "def f(a: int = 1):\n    pass\n")
    cannot(op("add_parameter", function="f", code="a: int = 2"), "def f(a: int = 1):\n    pass\n", Conflict)
    cannot(op("add_parameter", function="f", after="bb", code="c=1"), "def f(b):\n    pass\n", AnchorNotFound,
           candidates=("b",))
    cannot(op("add_parameter", function="g", code="c=1"), "def f(b):\n    pass\n", AnchorNotFound)


@pytest.mark.parametrize("function, after, before", [
    ("f", "a", "def f(a, b):\n    return a\n\n\ndef g():\n    return f(1, 2)\n"),
    ("P.__init__", "policy", "class P:\n    def __init__(self, policy, cache):\n        pass\n\n\n"
                             "def make():\n    return P(1, 2)\n"),
    ("P.m", "a", "class P:\n    def m(self, a, b):\n        pass\n\n    def n(self):\n        return self.m(1, 2)\n"),
])
def test_add_parameter_refuses_a_place_that_callers_of_the_module_fill_by_position(function, after, before):
    # a newcomer's find: `add_parameter after: policy` put a parameter in the middle of `SchedulePolicy.__init__`;
    # its caller passes every argument by position, so each took the wrong parameter
    cannot(op("add_parameter", function=function, after=after, code="mode=None"), before, Conflict,
           mentions=("by position",))


def test_add_parameter_beside_callers_that_pass_keywords_or_too_few_positions():
    before = "def f(a, b=0):\n    return a\n\n\ndef g():\n    return f(1, b=2)\n"
    check(op("add_parameter", function="f", after="a", code="mode=None"), before,
          before.replace("def f(a, b=0)", "def f(a, mode=None, b=0)"))


def test_add_parameter_in_the_middle_applies_where_the_recipe_rewrites_the_callers_too():
    # the team's own patch: a parameter in the middle, and its callers updated by another step of the recipe
    before = "def f(a, b):\n    return a\n\n\ndef g():\n    return f(1, 2)\n"
    param = op("add_parameter", function="f", after="a", code="mode")
    caller = op("replace_expression", match="f(1, 2)", code="f(1, None, 2)")
    outcome = param.among([param, caller]).apply(cst.parse_module(before))
    assert isinstance(outcome, Changed), outcome


def test_replace_expression_with_its_statements_kind_refuses_one_in_a_statement_of_another_kind():
    # a hostile round: `x.a` -> `(x.a, x.b)` in `items.sort(key=lambda x: x.a)`; the release renamed the lambda's
    # parameter and reads `x.a` in a new `print(x.a)`: `apply` rewrote the print. The lifter now writes what the
    # statement does (`statement:`), and the step refuses another kind
    step = op("replace_expression", within="f", match="x.a", code="(x.a, x.b)", statement="a call of items.sort")
    cannot(step, "def f(items):\n    items.sort(key=lambda it: it.a)\n    for x in items:\n        print(x.a)\n",
           AnchorNotFound, mentions=("is in a call of print here", "a call of items.sort"))
    check(step, "def f(items):\n    items.sort(key=lambda x: x.a)\n",
          "def f(items):\n    items.sort(key=lambda x: (x.a, x.b))\n")


def test_replace_expression_with_its_statements_kind_picks_the_match_in_a_statement_of_that_kind():
    # a tester's round: upstream put `if hip: x = x.to(dtype)` above the step's `w, _ = self.proj(x)`; port refused
    # "3 expressions match `x`", counting the two in the new assignment to `x`
    step = op("replace_expression", within="f", match="x", code="x.float()", statement="an assignment to w, _")
    before = "def f(self, x, hip):\n    if hip:\n        x = x.to(self.dtype)\n    w, _ = self.proj(x)\n    return w\n"
    check(step, before, before.replace("self.proj(x)", "self.proj(x.float())"))
    # two in statements of that kind: still ambiguous; none, and one of another kind: refused as before
    cannot(step, before.replace("    return w\n", "    w, _ = self.proj(x)\n    return w\n"), AnchorAmbiguous)
    cannot(step, "def f(self, x):\n    y = self.proj(x)\n    return y\n", AnchorNotFound,
           mentions=("is in an assignment to y here",))


@pytest.mark.parametrize("before, says", [
    # a hostile round: both "changed", exit 0, and TypeError at the call
    ('def sample(xs, **kw):\n    return kw\n\n\ndef run():\n    return sample([1], **{"temperature": 0.5})\n',
     "already passes `temperature` in a `**{...}` argument"),
    ("def sample(xs, top_k=1):\n    return xs\n\n\ndef run():\n    return sample([1])\n",
     "`sample`, which the module defines, takes no parameter `temperature`"),
    # hostile round 13 (18): a dict of the module unpacked into the call already carries it
    ('OPTS = {"temperature": 1.0}\n\n\ndef sample(xs, **kw):\n    return kw\n\n\ndef run():\n'
     '    return sample([1], **OPTS)\n', "already passes `temperature` in `**OPTS` (a dict of the module)"),
    # (17): caught by `**kw` and passed on whole to a function of the module that does not take it
    ("def inner(xs, top_k=1):\n    return xs\n\n\ndef sample(xs, **kw):\n    return inner(xs, **kw)\n\n\n"
     "def run():\n    return sample([1])\n", "`sample` passes its `**kw` on to `inner`, which takes no parameter"),
    # (17): a builtin, whose signature says it takes no such keyword
    ("def run():\n    return sorted([1])\n", "`sorted`, a builtin, takes no keyword `temperature`"),
])
def test_a_keyword_the_call_or_its_callee_cannot_take_is_a_conflict(before, says):
    call = "sorted(...)" if "sorted" in before else "sample(...)"
    step = op("add_keyword_argument", call=call, code="temperature=0.7", within="run")
    err = cannot(step, before, Conflict)
    assert says in err.message, err.message


@pytest.mark.parametrize("before, call, code, after", [
    ('OPTS = {"top_k": 1}\n\n\ndef sample(xs, **kw):\n    return kw\n\n\ndef run():\n    return sample([1], **OPTS)\n',
     "sample(...)", "temperature=0.7", "sample([1], temperature=0.7, **OPTS)"),
    ("def sorted(xs, **kw):\n    return xs\n\n\ndef run():\n    return sorted([1])\n",  # the module's own `sorted`
     "sorted(...)", "temperature=0.7", "sorted([1], temperature=0.7)"),
    ("def run():\n    return max([1], key=None)\n", "max(...)", "default=0", "max([1], key=None, default=0)"),
    ("def inner(xs, temperature=1):\n    return xs\n\n\ndef sample(xs, **kw):\n    return inner(xs, **kw)\n\n\n"
     "def run():\n    return sample([1])\n", "sample(...)", "temperature=0.7", "sample([1], temperature=0.7)"),
])
def test_a_keyword_a_dict_of_the_module_or_a_builtin_can_take_is_added(before, call, code, after):
    step = op("add_keyword_argument", call=call, code=code, within="run")
    check(step, before, before[:before.rindex("return ") + 7] + after + "\n")


@pytest.mark.parametrize("before, call, within", [
    # the call is resolved as `add_parameter` resolves it (one resolver, `operations/_calls.py`): a method the
    # class inherits from a class of the module, `super()`, `Cls.m`, `Cls().m`, an `__init__` inherited; each was
    # "changed", exit 0, and TypeError at the call
    ("class Base:\n    def sample(self, xs):\n        return xs\n\n\nclass Sub(Base):\n    def run(self):\n"
     "        return self.sample([1])\n", "self.sample(...)", "Sub.run"),
    ("class Base:\n    def sample(self, xs):\n        return xs\n\n\nclass Sub(Base):\n    def sample(self, xs):\n"
     "        return super().sample(xs)\n", "super().sample(...)", "Sub.sample"),
    ("class Base:\n    @staticmethod\n    def sample(xs):\n        return xs\n\n\ndef run():\n"
     "    return Base.sample([1])\n", "Base.sample(...)", "run"),
    ("class Base:\n    def sample(self, xs):\n        return xs\n\n\ndef run():\n    return Base().sample([1])\n",
     "Base().sample(...)", "run"),
    ("class Base:\n    def __init__(self, xs):\n        self.xs = xs\n\n\nclass Sub(Base):\n    pass\n\n\n"
     "def run():\n    return Sub([1])\n", "Sub(...)", "run"),
    # hostile round 15 (21): `super().__init__(...)` of a dataclass base runs the `__init__` it generates
    ("@dataclass\nclass Base:\n    xs: int = 0\n\n\nclass Sub(Base):\n    def __init__(self):\n"
     "        super().__init__(1)\n", "super().__init__(...)", "Sub.__init__"),
])
def test_a_keyword_the_callee_cannot_take_is_a_conflict_however_the_module_calls_it(before, call, within):
    step = op("add_keyword_argument", call=call, code="temperature=0.7", within=within)
    err = cannot(step, before, Conflict)
    assert "takes no parameter `temperature`" in err.message, err.message
    # a base class from another module first: what runs cannot be told, the keyword is added
    other = before.replace("class Sub(Base):", "class Sub(torch.nn.Module, Base):")
    if other != before and not call.startswith("super"):
        outcome = step.apply(cst.parse_module(other))
        assert isinstance(outcome, Changed), outcome


def test_a_keyword_for_a_parameter_another_step_adds_or_kwargs_takes_is_added():
    step = op("add_keyword_argument", call="sample(...)", code="temperature=0.7", within="run")
    check(step, "def sample(xs, **kw):\n    return kw\n\n\ndef run():\n    return sample([1])\n",
          "def sample(xs, **kw):\n    return kw\n\n\ndef run():\n    return sample([1], temperature=0.7)\n")
    param = op("add_parameter", function="sample", code="temperature=1.0")
    alone = "def sample(xs):\n    return xs\n\n\ndef run():\n    return sample([1])\n"
    check(step.among([param, step]), alone, alone.replace("sample([1])", "sample([1], temperature=0.7)"))


@pytest.mark.parametrize("before, code, says", [
    # a hostile round: each "changed", exit 0; the module's own calls then bound their arguments wrongly or failed
    ("class Base:\n    def m(self, x, y=0):\n        return x, y\n\n\nclass Sub(Base):\n    def m(self, x, y=0):\n"
     "        return super().m(x, y)\n", "z=0", "`super().m(x, y)` passes `y` by position"),
    ("class Base:\n    @classmethod\n    def m(cls, x, y=0):\n        return x, y\n\n    @classmethod\n"
     "    def make(cls):\n        return cls.m(1, 2)\n", "z=0", "`cls.m(1, 2)` passes `y` by position"),
    ("class Base:\n    def m(self, x, y=0):\n        return x, y\n\n\ndef run():\n    return Base().m(1, 2)\n",
     "z=0", "`Base().m(1, 2)` passes `y` by position"),
    ("class Base:\n    def m(self, x, y=0):\n        return x, y\n\n\ndef run():\n    return Base().m(1)\n",
     "budget", "`Base().m(1)` does not pass `budget`"),
])
def test_a_parameter_the_module_calls_would_fill_wrongly_or_not_at_all_is_a_conflict(before, code, says):
    step = op("add_parameter", function="Base.m", code=code, after="x")
    err = cannot(step, before, Conflict)
    assert says in err.message, err.message


def test_a_parameter_put_last_before_star_args_takes_what_calls_passed_into_them():
    step = op("add_parameter", function="g", code="c=0")
    err = cannot(step, "def g(a, b, *rest):\n    return rest\n\n\nX = g(1, 2, 3)\n", Conflict)
    assert "passes an argument to `*rest` by position" in err.message
    check(step, "def g(a, b, *rest):\n    return rest\n\n\nX = g(1, 2)\n",
          "def g(a, b, c=0, *rest):\n    return rest\n\n\nX = g(1, 2)\n")


@pytest.mark.parametrize("before", [
    # a hostile round: `req, out = pair()` became `req, extra, out = pair()`, "changed", then ValueError
    "def f():\n    req, out = pair()\n    return req\n",
    "def f(items):\n    for req, out in items:\n        pass\n",
    "def f(items):\n    return [req for req, out in items]\n",
])
def test_an_unpacking_target_is_not_a_literal_to_add_an_element_to(before):
    cannot(op("add_element", within="f", after="req", code="extra"), before, AnchorNotFound)


def test_a_neighbours_trailing_comment_stays_on_its_line():
    # a hostile round: `timeout=30,  # seconds` gave `timeout=30,` and `retries=3,  # seconds`; an element took a
    # copy of its neighbour's comment
    check(op("add_keyword_argument", call="connect(...)", code="retries=3"),
          "x = connect(\n    host=1,  # where\n    timeout=30,  # seconds\n)\n",
          "x = connect(\n    host=1,  # where\n    timeout=30,  # seconds\n    retries=3,\n)\n")
    check(op("add_element", after='"fa3"', code='"flashinfer"'),
          'B = [\n    "fa3",  # the default\n    "triton",\n]\n',
          'B = [\n    "fa3",  # the default\n    "flashinfer",\n    "triton",\n]\n')


def test_a_required_parameter_is_judged_beside_the_steps_that_pass_it_and_only_on_its_own_calls():
    # a review: refused when the recipe's next step passes it (add_keyword_argument), and over a super().forward()
    # of another class of the module (sglang 0.5.9's gemma3_causal.py)
    param = op("add_parameter", function="A.process", code="tenant")
    keyword = op("add_keyword_argument", call="self.process(...)", code='tenant="x"', within="A.run")
    before = ("class A:\n    def process(self, batch):\n        return batch\n\n    def run(self, b):\n"
              "        return self.process(b)\n")
    check(param.among([param, keyword]), before, before.replace("(self, batch)", "(self, batch, tenant)"))
    other = ("class A:\n    def process(self, batch):\n        return batch\n\n\nclass B(Base):\n"
             "    def process(self, batch):\n        return super().process(batch)\n")
    check(param, other, other.replace("    def process(self, batch):\n        return batch\n",
                                      "    def process(self, batch, tenant):\n        return batch\n", 1))


def test_a_keyword_to_a_callee_the_calling_function_binds_itself_is_added():
    # a review: `create_engine` was a parameter of `launch`, not the module's function, and the step was refused
    step = op("add_keyword_argument", call="create_engine(...)", code="enable_metrics=True", within="launch")
    before = ("def create_engine(path):\n    return path\n\n\ndef launch(create_engine):\n"
              "    return create_engine('m')\n")
    check(step, before, before.replace("create_engine('m')", "create_engine('m', enable_metrics=True)"))


def test_code_found_inside_an_expression_shaped_as_the_match_is_no_evidence_of_the_change():
    # a hostile round: `self.timeout * 2` -> `self.timeout` "already applied" on a release with `self.timeout * 4`
    # (the code stands inside upstream's own product): the change never landed
    step = op("replace_expression", match="self.timeout * 2", code="self.timeout", within="C.deadline")
    cannot(step, "class C:\n    def deadline(self):\n        budget = self.timeout * 4\n        return budget\n",
           AnchorNotFound)
    unchanged(step, "class C:\n    def deadline(self):\n        budget = self.timeout\n        return budget\n")


def test_a_near_candidate_longer_than_a_message_shows_where_it_differs_from_the_match():
    # an import round: the anchor and its candidate were both cut at 80 characters, before `is_neox_style=`, the
    # part upstream changed, and read the same
    call = ("get_rope(rope_head_dim, rotary_dim=rope_head_dim, max_position=max_position_embeddings, "
            "base=rope_theta, rope_scaling=rope_scaling, is_neox_style={}, device=args.device)")
    step = op("replace_expression", within="Indexer.__init__", match=call.format("True"),
              code=call.format("neox()"))
    before = f"class Indexer:\n    def __init__(self):\n        self.rotary_emb = {call.format('is_neox_style')}\n"
    err = cannot(step, before, AnchorNotFound)
    [shown] = [c.text for c in err.candidates]
    assert "is_neox_style=is_neox_style" in shown and shown.startswith("`...")


def test_a_parameter_a_call_passes_into_kwargs_by_keyword_is_a_conflict():
    # a hostile round: `env=None` added to `launch(cmd, **popen_kwargs)` took the `env={...}` a call passed on to
    # subprocess.run: the child lost its environment
    before = ("def launch(cmd, **popen_kwargs):\n    return run(cmd, **popen_kwargs)\n\n\n"
              "def start():\n    return launch(['x'], env={'A': '1'})\n")
    step = op("add_parameter", function="launch", after="cmd", code="env=None")
    cannot(step, before, Conflict, mentions=("passes `env=` into `**popen_kwargs`",))
    check(op("add_parameter", function="launch", after="cmd", code="cwd=None"), before,
          before.replace("def launch(cmd, **popen_kwargs)", "def launch(cmd, cwd=None, **popen_kwargs)"))
    # a review: a function that takes the keyword out of **kwargs itself (sglang 0.5.9's get_processor pops
    # `revision`) meant it for itself: declaring it is a refactor, not a capture
    popped = before.replace("    return run(cmd, **popen_kwargs)\n",
                            "    env = popen_kwargs.pop('env', None)\n    return run(cmd, env, **popen_kwargs)\n")
    check(step, popped, popped.replace("def launch(cmd, **popen_kwargs)", "def launch(cmd, env=None, **popen_kwargs)"))


def test_a_starred_element_is_not_the_element_it_unpacks():
    # a hostile round: `[DEFAULT, *EXTRA]` "already held" `EXTRA`, exit 0, and the list never got the group itself
    step = op("add_element", after="DEFAULT", code="EXTRA")
    check(step, "GROUPS = [DEFAULT, *EXTRA]\n", "GROUPS = [DEFAULT, EXTRA, *EXTRA]\n")
    cannot(op("add_element", after="EXTRA", code="NEW"), "GROUPS = [DEFAULT, *EXTRA]\n", AnchorNotFound)

@pytest.mark.parametrize("before, says", [
    # a hostile round: each "already applied", exit 0, and `fetch("u", 5)` raised TypeError or set `retries`
    ("def fetch(url, *, timeout=30):\n    return url\n", "keyword-only there, where the step makes it positional"),
    ("def fetch(url, retries=3, timeout=30):\n    return url\n", "place 3 of the positional parameters"),
])
def test_a_parameter_of_the_same_code_of_another_kind_or_place_is_a_conflict(before, says):
    step = op("add_parameter", function="fetch", after="url", code="timeout=30")
    err = cannot(step, before, Conflict)
    assert says in err.message, err.message
    unchanged(step, "def fetch(url, timeout=30, retries=3):\n    return url\n")
    unchanged(op("add_parameter", function="fetch", after="*", code="timeout=30"), before.replace(
        "retries=3, timeout=30", "retries=3, *, timeout=30"))


def test_the_code_in_one_statement_of_its_kind_beside_an_edited_match_in_another_is_not_applied():
    # a hostile round: `n * 2` -> `n * 4` in "an assignment to chunk"; upstream split the assignment into two arms,
    # `chunk = n * 4` and `chunk = n * 3`: "already applied", and chunk stayed n * 3 on the other arm
    step = op("replace_expression", within="plan", match="n * 2", code="n * 4", statement="an assignment to chunk")
    before = ("def plan(n, big):\n    if big:\n        chunk = n * 4\n    else:\n        chunk = n * 3\n"
              "    return chunk\n")
    err = cannot(step, before, AnchorNotFound)
    assert "alike `n * 2`" in err.message, err.message
    # another assignment to chunk that holds nothing alike the match is no evidence against it
    unchanged(step, before.replace("chunk = n * 3", "chunk = min(chunk, 10)"))


def test_a_dict_entry_goes_after_the_entry_of_a_key_with_its_comment_lines():
    # a hostile round (vLLM's envs.py): an environment variable added to `environment_variables` could only be a
    # replace_expression of the whole 1,100-line dict, which ported nowhere
    before = ('environment_variables = {\n    # a section\n    "A": lambda: 1,\n    "B": lambda: 2,\n'
              '    # another\n    "D": lambda: 4,\n}\n')
    step = op("add_element", after='"B"', code='"C": lambda: 3')
    check(step, before, before.replace('    "B": lambda: 2,\n', '    "B": lambda: 2,\n    "C": lambda: 3,\n'))
    last = op("add_element", after='"D"', code='# Team patch: a cap.\n"E": lambda: int(os.getenv("E", "0"))')
    check(last, before, before.replace('    "D": lambda: 4,\n', '    "D": lambda: 4,\n    # Team patch: a cap.\n'
                                                                 '    "E": lambda: int(os.getenv("E", "0")),\n'))
    err = cannot(step, before.replace('"D": lambda: 4', '"C": lambda: 30'), Conflict)
    assert "already has the key `\"C\"` with another value" in err.message, err.message
    cannot(op("add_element", after='"Z"', code='"C": 3'), before, AnchorNotFound)


def test_an_item_added_last_does_not_copy_the_comment_above_the_item_before_it():
    # seen with the dict entries: the separator of the last two items was copied with the comment lines it held
    # (`# three` above `3` written again above the new `4`)
    step = op("add_element", after="3", code="4")
    check(step, "X = [\n    1,\n    # three\n    3,\n]\n", "X = [\n    1,\n    # three\n    3,\n    4,\n]\n")
    check(op("add_element", after="1", code="2"), "X = [\n    1,\n    # three\n    3,\n]\n",
          "X = [\n    1,\n    2,\n    # three\n    3,\n]\n")


@pytest.mark.parametrize("kind, options", [
    # hostile round 10 (a fuzzer): each was "internal error" (exit 1), libcst's ParserSyntaxError
    ("replace_expression", {"match": "x * y", "code": "x * (\n    y)  # faster"}),
    ("add_element", {"after": '"c"', "code": '"d"\n# d is new'}),
    ("add_argparse_argument", {"function": "f", "after_flag": "--a",
                               "code": 'parser.add_argument("--extra", type=int, default=0)x'}),
])
def test_code_libcst_cannot_read_is_refused_as_the_steps_code(kind, options):
    from patcher.errors import RecipeError

    step = op(kind, **options)
    with pytest.raises(RecipeError):
        step.apply(cst.parse_module('NAMES = ["c"]\nz = x * y\ndef f(parser):\n    parser.add_argument("--a")\n'))
    assert step.describe()


def test_a_keyword_a_dataclass_of_the_module_has_no_field_for_is_a_conflict():
    # hostile round 10 (a fuzzer): `Args(nope=3)` for a @dataclass without a field `nope` was applied (TypeError at
    # the call); its generated `__init__` takes its fields (its bases' first), not a field(init=False) nor a ClassVar
    before = ("from dataclasses import dataclass, field\n\n\n@dataclass\nclass Base:\n    model: str = 'm'\n\n\n"
              "@dataclass\nclass Args(Base):\n    batch: int = 1\n    cache: dict = field(init=False)\n\n\n"
              "def use():\n    return Args(batch=2)\n")
    for code in ("nope=3", "cache={}"):
        err = cannot(op("add_keyword_argument", call="Args(...)", code=code, within="use"), before, Conflict)
        assert "takes no parameter" in err.message, err.message
    check(op("add_keyword_argument", call="Args(...)", code="model='x'", within="use"), before,
          before.replace("Args(batch=2)", "Args(batch=2, model='x')"))
    # a base from elsewhere: what the `__init__` takes cannot be told
    other = before.replace("class Base:", "class Base(Other):")
    assert isinstance(op("add_keyword_argument", call="Args(...)", code="nope=3", within="use").apply(
        cst.parse_module(other)), Changed)


def test_a_keyword_for_a_field_another_step_adds_to_the_dataclass_is_added():
    # a review (sglang 0.5.9's GenerateReqInput): `tenant=` passed to the dataclass was refused as "takes no
    # parameter" when the step adding the field `tenant` came later in the recipe
    before = ("from dataclasses import dataclass\n\n\n@dataclass\nclass Req:\n    text: str = ''\n\n\n"
              "def make():\n    return Req(text='x')\n")
    step = op("add_keyword_argument", call="Req(...)", code="tenant='t'", within="make")
    field = op("add_dataclass_field", cls="Req", after="text", code="tenant: str = ''")
    cannot(step, before, Conflict)
    check(step.among([step, field]), before, before.replace("Req(text='x')", "Req(text='x', tenant='t')"))


def test_another_expression_of_the_same_shape_beside_the_code_is_no_edit_of_the_match():
    # a review (sglang 0.5.9's server_args: `reserved_mem += max(self.chunked_prefill_size, 2048) * 1.5` in one arm,
    # `max(self.max_prefill_tokens, 2048) * 1.5` in the other): the step's second run took the other arm's for an
    # edit of its match, and the first apply was refused as "would not find its own change"
    before = ("def f(self, chunked):\n    if chunked:\n        reserved_mem += max(self.chunked_prefill_size, 2048) * 1.5\n"
              "    else:\n        reserved_mem += max(self.max_prefill_tokens, 2048) * 1.5\n")
    step = op("replace_expression", within="f", match="max(self.chunked_prefill_size, 2048) * 1.5",
              code="max(self.chunked_prefill_size, 2048) * 2", statement="an assignment to reserved_mem")
    check(step, before, before.replace("chunked_prefill_size, 2048) * 1.5", "chunked_prefill_size, 2048) * 2"))


def test_several_elements_in_one_step_are_refused_at_load():
    # hostile round 11 (a fuzzer): code '"D", "E"' was applied, and the second run did not find it
    with pytest.raises(ValidationError, match="must be one element"):
        op("add_element", after='"C"', code='"D", "E"')
    check(op("add_element", after='"C"', code='("D", "E")'), 'X = ["C"]\n', 'X = ["C", ("D", "E")]\n')


def test_a_case_patterns_capture_is_no_expression_to_replace():
    # hostile round 11 (a fuzzer): `match: a` rewrote the capture of `case [a, *rest]:` into `case [n, *rest]:`,
    # rebinding the parameter `n`, exit 0
    before = "def make(n, xs):\n    match xs:\n        case [a, *rest]:\n            return a\n    return n\n"
    err = cannot(op("replace_expression", within="make", match="rest", code="tail"), before, AnchorNotFound)
    assert "no expression `rest`" in err.message
    check(op("replace_expression", within="make", match="a", code="a + 1", statement="a `return` statement"),
          before, before.replace("return a\n", "return a + 1\n"))


@pytest.mark.parametrize("call, code", [
    # hostile round 11 (a fuzzer): each was applied with exit 0 and raised TypeError at the call
    ("Plain(...)", "u=1"),  # object's __init__ takes nothing
    ("Config(...)", "self=1"),  # the bound instance takes no keyword
    ("Point(...)", "z=2"),  # a NamedTuple's fields
    ("NotDc(...)", "nope=2"),  # a plain subclass runs the dataclass's generated __init__
    ("Child(...)", "a=1"),  # a field redeclared init=False is no parameter
])
def test_a_keyword_no_constructor_of_the_module_takes_is_a_conflict(call, code):
    before = ("from dataclasses import dataclass, field\nfrom typing import NamedTuple\n\n\nclass Plain:\n    u: int = 0\n\n\n"
              "@dataclass\nclass Config:\n    a: int = 0\n\n\nclass Point(NamedTuple):\n    x: int\n    y: int = 0\n\n\n"
              "class NotDc(Config):\n    pass\n\n\n@dataclass\nclass Child(Config):\n    a: int = field(default=5, init=False)\n"
              f"\n\ndef use():\n    return {call.replace('...', '')}\n")
    err = cannot(op("add_keyword_argument", call=call, code=code, within="use"), before, Conflict)
    assert "takes no parameter" in err.message, err.message


def test_an_item_with_comments_keeps_them_on_their_own_lines():
    # fuzzer round 11 (07, 08): a dict entry ending with a comment was refused as "not one expression", and a
    # comment at the end of the last item's line moved to the item added after it (libcst keeps it before the
    # closing bracket)
    before = 'X = [\n    "a",\n    "b",  # bee\n]\nD = {\n    "k": 1,\n    "j": 2,  # jay\n}\n'
    check(op("add_element", after='"b"', code='"c"  # sea'), before,
          before.replace('"b",  # bee\n', '"b",  # bee\n    "c",  # sea\n'))
    check(op("add_element", after='"a"', code='# why\n"z"  # zed'), before,
          before.replace('"a",\n', '"a",\n    # why\n    "z",  # zed\n'))
    check(op("add_element", after='"j"', code='"n": 3  # en'), before,
          before.replace('"j": 2,  # jay\n', '"j": 2,  # jay\n    "n": 3,  # en\n'))
    no_comma = "f(\n    a=1,\n    b=2  # two\n)\n"
    check(op("add_keyword_argument", call="f(...)", code="c=3"), no_comma,
          "f(\n    a=1,\n    b=2,  # two\n    c=3\n)\n")
    # on one line a comment has no line of its own: a conflict that says so, never a comment dropped
    err = cannot(op("add_element", after='"a"', code='"z"  # zed'), 'X = ["a"]\n', Conflict)
    assert "written on one line" in err.message, err.message
    cannot(op("add_element", after='"k"', code='# why\n"n": 3'), 'D = {"k": 1}\n', Conflict)


def test_a_multi_line_item_takes_the_indentation_of_its_neighbours():
    # fuzzer round 11 (08): its continuation lines were written at the code's own indentation, left of the items
    before = "def f():\n    return [\n        a,\n        b,\n    ]\n"
    check(op("add_element", within="f", after="a", code="make(\n    1,\n    2,\n)"), before,
          before.replace("        a,\n", "        a,\n        make(\n            1,\n            2,\n        ),\n"))
    # the same for a keyword argument; the lines inside a string that spans lines are its value: left as they are
    call = "def f():\n    return g(\n        a=1,\n    )\n"
    check(op("add_keyword_argument", call="g(...)", within="f", code='doc=dedent(\n    """one\ntwo"""\n)'), call,
          call.replace("        a=1,\n", '        a=1,\n        doc=dedent(\n            """one\ntwo"""\n        ),\n'))


def test_an_unpacking_is_an_item_of_its_own():
    # fuzzer round 11 (07): `*FLAGS` and `**BASE` were refused as "not one expression"
    step = op("add_element", after="DEFAULT", code="*EXTRA")
    check(step, "GROUPS = [DEFAULT]\n", "GROUPS = [DEFAULT, *EXTRA]\n")
    unchanged(step, "GROUPS = [DEFAULT, *EXTRA]\n")
    check(op("add_element", after="*EXTRA", code="LAST"), "GROUPS = [DEFAULT, *EXTRA]\n",
          "GROUPS = [DEFAULT, *EXTRA, LAST]\n")
    check(op("add_element", after='"a"', code="**BASE"), 'D = {"a": 1}\n', 'D = {"a": 1, **BASE}\n')
    unchanged(op("add_element", after='"a"', code="**BASE"), 'D = {"a": 1, **BASE}\n')
    # `*EXTRA` is not the element EXTRA, and the reverse
    check(op("add_element", after="DEFAULT", code="EXTRA"), "GROUPS = [DEFAULT, *EXTRA]\n",
          "GROUPS = [DEFAULT, EXTRA, *EXTRA]\n")


def test_a_keyword_for_a_positional_only_parameter_is_a_conflict():
    # fuzzer round 12 (F5): `f(b=2, a=5)` for `def f(a=0, /, b=0)` was applied: TypeError at the call (and with
    # `**kw`, the keyword lands there, not in `a`)
    for signature in ("a=0, /, b=0", "a=0, /, b=0, **kw"):
        before = f"def f({signature}):\n    return a\n\n\ndef use():\n    return f(b=2)\n"
        err = cannot(op("add_keyword_argument", call="f(...)", within="use", code="a=5"), before, Conflict)
        assert "positional-only" in err.message, err.message


def test_a_dict_key_given_twice_is_judged_by_the_entry_that_runs():
    # fuzzer round 12 (F2): the first entry was read; the last one is the value, and a `**` after it may reset it
    before = 'D = {\n    "a": 1,\n    "b": 2,\n    "a": 3,\n}\n'
    unchanged(op("add_element", after='"b"', code='"a": 3'), before)
    cannot(op("add_element", after='"b"', code='"a": 1'), before, Conflict)
    err = cannot(op("add_element", after='"b"', code='"a": 1'), 'D = {"a": 1, "b": 2, **B}\n', Conflict)
    assert "may set it again" in err.message, err.message


@pytest.mark.parametrize("before, after", [
    # fuzzer round 12 (F6, F7): a bare tuple put where commas make other code: subscript elements (a second apply
    # no longer found it), two context managers, two bases; or a syntax error (`if uu, vv:`)
    ("def f(stuff, key):\n    return stuff[key]\n", "def f(stuff, key):\n    return stuff[(uu, vv)]\n"),
    ("def f(key):\n    with key:\n        pass\n", "def f(key):\n    with ((uu, vv)):\n        pass\n"),
    ("class C(key):\n    pass\n", "class C((uu, vv)):\n    pass\n"),
    ("def f(key):\n    if key:\n        pass\n", "def f(key):\n    if (uu, vv):\n        pass\n"),
    ("def f(key):\n    while key:\n        break\n", "def f(key):\n    while (uu, vv):\n        break\n"),
    # where a statement takes a bare tuple, it stays bare
    ("def f(key):\n    return key\n", "def f(key):\n    return uu, vv\n"),
    ("def f(key):\n    x = key\n", "def f(key):\n    x = uu, vv\n"),
])
def test_a_tuple_put_for_one_expression_stays_one_tuple(before, after):
    step = op("replace_expression", match="key", code="uu, vv", statement=None, within=before.split("(")[0]
              .split()[-1])
    check(step, before, after)
    unchanged(step, after)


def test_the_comment_ending_the_last_items_line_stays_when_items_share_a_row():
    # fuzzer round 12 (F1): appended after items written in a row, or after a hanging item, the new item took the
    # row and the comment ending it was dropped
    check(op("add_element", after="b", code="c"), "X = [\n    a, b,  # row note\n]\n",
          "X = [\n    a, b,  # row note\n    c,\n]\n")
    check(op("add_keyword_argument", call="f(...)", code="y=3"), "f(\n    1, x=2,  # note\n)\n",
          "f(\n    1, x=2,  # note\n    y=3,\n)\n")
    check(op("add_element", after="a", code="b"), "X = [a  # note\n     ]\n", "X = [a,  # note\n     b\n     ]\n")


def test_an_expression_continued_as_inside_brackets_is_read_and_written_in_parentheses():
    # fuzzer round 12 (F10): `match`/`code` copied from inside parentheses (`self.a is None\n    or self.b is None`)
    # loaded, then "unexpected indent" (exit 2); as code of an `if` test it would not compile bare
    before = "class S:\n    def check(self):\n        if self.a is None:\n            return 1\n"
    step = op("replace_expression", within="S.check", match="self.a is None",
              code="self.a is None\n    or self.b is None")
    after = before.replace("if self.a is None:", "if (self.a is None\n            or self.b is None):")
    check(step, before, after)
    unchanged(step, after)
    unchanged(op("replace_expression", within="S.check", match="self.a is None\n    or self.b is None",
                 code="self.a is None\n    or self.b is None or self.c"), before.replace(
        "if self.a is None:", "if self.a is None or self.b is None or self.c:"))


def test_steps_adding_after_one_anchor_keep_their_recipe_order():
    # fuzzer round 12 (F8): the second step went right after the anchor, before the first's item: `[1, 11, 10, 2]`
    # (a list's order is its value), and add_parameter's second run refused the recipe as not idempotent
    from patcher import engine
    from patcher.recipe import parse_recipe
    from patcher.target import find_target
    import tempfile
    from pathlib import Path

    cases = [
        ("X = [\n    1,\n    2,\n]\n", [("add_element", "after: '1'", "10"), ("add_element", "after: '1'", "11")],
         "X = [\n    1,\n    10,\n    11,\n    2,\n]\n"),
        ("def f(**k):\n    pass\n\n\nf(a=1, z=0)\n", [("add_keyword_argument", "call: 'f(...)', after: a", "b=2"),
                                                     ("add_keyword_argument", "call: 'f(...)', after: a", "c=3")],
         "def f(**k):\n    pass\n\n\nf(a=1, b=2, c=3, z=0)\n"),
        ("def f(a, z=0):\n    pass\n", [("add_parameter", "function: f, after: a", "b=2"),
                                       ("add_parameter", "function: f, after: a", "c=3")],
         "def f(a, b=2, c=3, z=0):\n    pass\n"),
        # review 12: a chain (c after b, which went after a) is passed over too by a later step after a
        ("def f(a, z=0):\n    pass\n", [("add_parameter", "function: f, after: a", "b=2"),
                                       ("add_parameter", "function: f, after: b", "c=3"),
                                       ("add_parameter", "function: f, after: a", "d=4")],
         "def f(a, b=2, c=3, d=4, z=0):\n    pass\n"),
        ("X = [\n    1,\n    2,\n]\n", [("add_element", "after: '1'", "10"), ("add_element", "after: '10'", "11"),
                                       ("add_element", "after: '1'", "12")],
         "X = [\n    1,\n    10,\n    11,\n    12,\n    2,\n]\n"),
        ("def f(a, *, z=0):\n    pass\n", [("add_parameter", "function: f, after: '*'", "b=2"),
                                           ("add_parameter", "function: f, after: '*'", "c=3")],
         "def f(a, *, b=2, c=3, z=0):\n    pass\n"),
    ]
    for before, steps, after in cases:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            (root / "t" / "sglang").mkdir(parents=True)
            (root / "t" / "sglang" / "__init__.py").write_text("")
            (root / "t" / "sglang" / "_version.py").write_text("__version__ = '0.5.9'\n")
            (root / "t" / "sglang" / "m.py").write_text(before)
            text = "id: order\nversion: 1\ntitle: t\ntarget: {package: sglang}\nsteps:\n" + "".join(
                f"  - {{op: {kind}, file: m.py, {where}, code: \"{code}\"}}\n" for kind, where, code in steps)
            recipe = parse_recipe(text, root / "order.yaml")
            planned = engine.plan(recipe, find_target(root / "t"))
            assert planned.ok, planned.errors
            assert planned.files[0].after.decode() == after, planned.files[0].after.decode()


def test_a_parameter_beside_a_star_in_a_signature_written_one_per_line_gets_its_own_line():
    # fuzzer round 12 (F3, F4): before a lone `*args` it took the `*args` line (`c=2, *args,  # note`); after a
    # `*args` closing the list, it went to column 0 after a line of spaces, and the `*args` line's comment moved
    check(op("add_parameter", function="f", code="c=2"), "def f(\n    *args,  # note\n    b=1,\n):\n    pass\n",
          "def f(\n    c=2,\n    *args,  # note\n    b=1,\n):\n    pass\n")
    check(op("add_parameter", function="f", after="*", code="c=2"), "def f(\n    a,\n    *args  # va\n):\n    pass\n",
          "def f(\n    a,\n    *args,  # va\n    c=2\n):\n    pass\n")
    check(op("add_parameter", function="f", after="*", code="c=2"), "def f(\n    *args\n):\n    pass\n",
          "def f(\n    *args,\n    c=2\n):\n    pass\n")
    check(op("add_parameter", function="f", after="*", code="c=2"), "def f(a, *args):\n    pass\n",
          "def f(a, *args, c=2):\n    pass\n")


def test_a_comment_ending_the_code_of_a_keyword_or_a_parameter_ends_its_line():
    # fuzzer round 12 (F9): refused as "must be one keyword argument" (it is one); add_element kept such a comment
    check(op("add_keyword_argument", call="f(...)", code="timeout=30  # seconds"),
          "def f(*a, **k):\n    pass\n\n\nf(\n    1,\n)\n",
          "def f(*a, **k):\n    pass\n\n\nf(\n    1,\n    timeout=30,  # seconds\n)\n")
    check(op("add_parameter", function="f", code="timeout=30  # seconds"), "def f(\n    a,\n):\n    pass\n",
          "def f(\n    a,\n    timeout=30,  # seconds\n):\n    pass\n")
    # the last one, with no trailing comma: the line break before `)` follows it
    check(op("add_keyword_argument", call="f(...)", code="c=3"), "def f(**k):\n    pass\n\n\nf(\n    a=1,\n    b=2\n)\n",
          "def f(**k):\n    pass\n\n\nf(\n    a=1,\n    b=2,\n    c=3\n)\n")
    err = cannot(op("add_keyword_argument", call="f(...)", code="timeout=30  # seconds"),
                 "def f(*a, **k):\n    pass\n\n\nf(1)\n", Conflict)
    assert "written on one line" in err.message, err.message


def test_comment_lines_above_a_new_item_in_a_class_are_at_the_items_column():
    # review 12: they went 4 columns left of the item inside a class or function
    before = 'class W:\n    P = {\n        "a": 1,\n        "c": 3,\n    }\n'
    check(op("add_element", after='"a"', code='# norm weights\n"b": 2'), before,
          before.replace('        "a": 1,\n', '        "a": 1,\n        # norm weights\n        "b": 2,\n'))


def test_a_multi_line_expression_inside_brackets_keeps_its_indentation_and_takes_no_parentheses():
    # review 12 (10b): a call's argument replaced by a conditional on three lines was written `device=(model.device`
    # with its continuation lines at the statement's column, the recipe's own indentation below its first line lost
    before = 'def run(model, get):\n    loader = get(\n        name="x",\n        device=model.device,\n    )\n'
    step = op("replace_expression", within="run", match="model.device",
              code='model.device\n    if model.device is not None\n    else "cuda"')
    after = before.replace("device=model.device,",
                           'device=model.device\n            if model.device is not None\n            else "cuda",')
    check(step, before, after)
    unchanged(step, after)


def test_a_parameter_after_a_row_ending_in_a_comment_goes_under_the_parameters():
    # review 12 (10a): in a signature aligned under its `(`, the new parameter went to column 4, under `def`
    before = "def sig(self, a: int, b: int  # row\n        ):\n    return a\n"
    check(op("add_parameter", function="sig", code="c: int = 0"), before,
          "def sig(self, a: int, b: int,  # row\n        c: int = 0\n        ):\n    return a\n")


def test_a_string_beside_others_is_replaced_without_parentheses():
    # hostile round 13 (upstream 05): an f-string part of an implicit concatenation was put in parentheses, which
    # libcst refuses there: `specpatch import` of a real 0.5.20 -> 0.5.21 diff ended with exit 1
    before = 'def f(self):\n    raise E(\n        f"rank{self.ps.rank} bad: "\n        f"{self.n} more"\n    )\n'
    step = op("replace_expression", within="f", match='f"rank{self.ps.rank} bad: "',
              code='f"rank{self.runner.rank} bad: "')
    check(step, before, before.replace("self.ps.rank", "self.runner.rank"))


def test_a_parameter_a_property_never_gets_or_that_hides_a_name_the_body_reads_is_a_conflict():
    # hostile round 13 (03, 21): `def value(self, scale)` under @property raised TypeError at every access; a
    # parameter `logger=None` of a function that logs through the module's `logger` made every plain call fail
    prop = "class Box:\n    @property\n    def value(self):\n        return 1\n"
    err = cannot(op("add_parameter", function="Box.value", code="scale"), prop, Conflict)
    assert "property's accessor" in err.message, err.message
    check(op("add_parameter", function="Box.value", code="scale=2"), prop, prop.replace("self)", "self, scale=2)"))
    logs = "import logging\nlogger = logging.getLogger()\n\n\ndef handle(x):\n    logger.debug(x)\n"
    err = cannot(op("add_parameter", function="handle", code="logger=None"), logs, Conflict)
    assert "reads `logger` from outside it" in err.message, err.message
    check(op("add_parameter", function="handle", code="logger=logger"), logs,
          logs.replace("handle(x)", "handle(x, logger=logger)"))


@pytest.mark.parametrize("use", ["    return sorted(items, key=keyfn)\n", "    return functools.partial(keyfn, 1)\n",
                                 "    handlers = [keyfn]\n    return handlers\n"])
def test_a_required_parameter_of_a_function_the_module_hands_on_as_a_value_is_a_conflict(use):
    # hostile round 13 (05): `sorted(items, key=keyfn)` after `keyfn` got a required parameter: TypeError, exit 0
    before = f"import functools\n\n\ndef keyfn(item):\n    return item\n\n\ndef order(items):\n{use}"
    err = cannot(op("add_parameter", function="keyfn", after="item", code="reverse"), before, Conflict)
    assert "hands `keyfn` on as a value" in err.message, err.message
    check(op("add_parameter", function="keyfn", after="item", code="reverse=False"), before,
          before.replace("def keyfn(item):", "def keyfn(item, reverse=False):"))


@pytest.mark.parametrize("before, after, code", [
    # hostile round 15 (16): one key to Python, so the step replaced a value, or added nothing, and said "changed"
    ("TABLE = {1: 'low', 2: 'high'}\n", "2", "True: 'flag'"),
    ("MODE_A = 'a'\nTABLE = {MODE_A: 1, 'b': 2}\n", "'b'", "'a': 3"),
    ("SIZES = {1, 2}\n", "2", "1.0"),
])
def test_a_key_equal_to_one_the_literal_has_is_a_conflict(before, after, code):
    within = "SIZES" if before.startswith("SIZES") else "TABLE"
    err = cannot(op("add_element", within=within, after=after, code=code), before, Conflict)
    assert "which Python takes for the new" in err.message, err.message


def test_a_value_is_added_to_a_literal_type_registry():
    # hostile round 15, real code (02): vLLM's `CacheDType = Literal["auto", "fp8", ...]` was "no list, tuple or set
    # literal holds"
    before = 'CacheDType = Literal[\n    "auto",\n    "fp8",\n    "fp8_e5m2",\n]\nMode = typing.Literal["a", "b"]\n'
    check(op("add_element", within="CacheDType", after='"fp8"', code='"team_fp6"'), before,
          before.replace('    "fp8",\n', '    "fp8",\n    "team_fp6",\n'))
    check(op("add_element", within="Mode", after='"b"', code='"c"'), before,
          before.replace('"a", "b"]', '"a", "b", "c"]'))


@pytest.mark.parametrize("use", [
    "TOTAL = list(map(add, [1], [2]))\n",
    "T = threading.Thread(target=add, args=(1, 2))\n",
    "ARGS = (1, 2)\nR = add(*ARGS)\n",
])
def test_a_defaulted_parameter_before_others_of_a_function_called_by_position_elsewhere_is_refused(use):
    # hostile round 15 (13): `scale=1` put after `x` shifted what map(), Thread(args=) and `add(*ARGS)` pass
    before = "import threading\n\n\ndef add(x, y=0):\n    return x + y\n\n\n" + use
    cannot(op("add_parameter", function="add", after="x", code="scale=1"), before, Conflict,
           mentions=("by position",))
    check(op("add_parameter", function="add", code="scale=1"), before,
          before.replace("def add(x, y=0):", "def add(x, y=0, scale=1):"))


def test_a_field_before_others_of_a_dataclass_made_from_an_unpacking_is_refused():
    before = "@dataclass\nclass Cfg:\n    a: int = 0\n    c: int = 0\n\n\nROW = (1, 2)\nCFG = Cfg(*ROW)\n"
    cannot(op("add_dataclass_field", **{"class": "Cfg"}, after="a", code="b: int = 0"), before, Conflict,
           mentions=("unpacks its arguments by position",))
    check(op("add_dataclass_field", **{"class": "Cfg"}, after="c", code="b: int = 0"), before,
          before.replace("    c: int = 0\n", "    c: int = 0\n    b: int = 0\n"))
