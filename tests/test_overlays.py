"""Variants as overlays (patcher/recipe_overlays.py): `extends`, step changes, additions and removals by name, merged
checks, constants and pieces; and each bad overlay refused with the recipe, the variant, the step and the line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from packaging.version import Version

from patcher.errors import ExitCode, RecipeError
from patcher.recipe import load_recipe

RECIPE = """\
id: demo
title: Demo
target: {package: sglang, versions: ">=0.5.4"}
params:
  n: {type: int, default: 3}
constants:
  kind: req
steps:
  - name: field
    op: add_dataclass_field
    file: srt/server_args.py
    class: ServerArgs
    after: a
    code: "b: int = {{n}}"
  - name: method
    op: add_method
    file: srt/server_args.py
    class: ServerArgs
    after: __init__
    code_file: method.py
  - name: call
    op: insert_statements
    file: srt/server_args.py
    function: ServerArgs.__post_init__
    at: end
    code: self.check()
verify:
  imports: [sglang.srt.server_args]
  stubs: [sgl_kernel]
  probes:
    - {name: args, path: probes/args.py, description: the flag}
    - {name: worker, path: probes/worker.py}
variants:
  - name: newest
    versions: ">=0.5.10"
    extends: middle
    change_steps:
      method: {pieces: {check: "return 3\\n"}}
    add_steps:
      - {name: extra, after_step: field, op: add_import, file: srt/server_args.py, code: import os}
  - name: middle
    versions: ">=0.5.8,<0.5.10"
    extends: oldest
    remove_steps: [call]
    constants: {kind: batch}
    change_steps:
      field: {after: z}
    verify:
      probes: [{name: worker, path: probes/worker_new.py}]
  - name: oldest
    versions: "<0.5.8"
    change_steps:
      method: {pieces_file: old/method.py}
    verify:
      stubs: [sgl_kernel, vllm]
"""

METHOD = """\
def check(self):
    self.count_per_{{kind}} = {{n}}
    # <piece check>
    return 1
    # </piece>
    # <piece extra>
    # </piece>
"""

OLD_METHOD = """\
    # <piece check>
    if self.old:
        return 2
    # </piece>
"""


def folder(tmp_path: Path) -> Path:
    (tmp_path / "demo" / "old").mkdir(parents=True)
    (tmp_path / "demo" / "probes").mkdir()
    for name in ("args.py", "worker.py", "worker_new.py"):
        (tmp_path / "demo" / "probes" / name).write_text("print('ok')\n")
    (tmp_path / "demo" / "method.py").write_text(METHOD)
    (tmp_path / "demo" / "old" / "method.py").write_text(OLD_METHOD)
    return tmp_path


def load(tmp_path: Path, text: str = RECIPE):
    path = folder(tmp_path) / "demo.yaml"
    path.write_text(textwrap.dedent(text))
    return load_recipe(path)


def refused(tmp_path: Path, text: str) -> RecipeError:
    with pytest.raises(RecipeError) as info:
        load(tmp_path, text)
    assert info.value.exit_code == ExitCode.BAD_INPUT
    assert info.value.location.file == str(tmp_path / "demo.yaml")
    return info.value


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_the_recipes_own_steps_get_their_constants_and_lose_the_piece_markers(tmp_path):
    recipe = load(tmp_path)
    assert recipe.steps[1].code == "def check(self):\n    self.count_per_req = {{n}}\n    return 1\n"
    assert recipe.constants == {"kind": "req"}


def test_an_overlay_of_the_recipe_changes_a_step_through_a_pieces_file(tmp_path):
    oldest = load(tmp_path).select(Version("0.5.7"))
    assert [s.name for s in oldest.steps] == ["field", "method", "call"]
    assert oldest.steps[1].code == ("def check(self):\n    self.count_per_req = {{n}}\n"
                                    "    if self.old:\n        return 2\n")
    # the checks: merged over the recipe's (stubs replaced, probes kept)
    assert oldest.verify.stubs == ("sgl_kernel", "vllm")
    assert [p.path for p in oldest.verify.probes] == ["probes/args.py", "probes/worker.py"]


def test_extends_inherits_the_changes_of_a_chain_and_builds_on_them(tmp_path):
    recipe = load(tmp_path)
    middle, newest = recipe.select(Version("0.5.8")), recipe.select(Version("0.5.10"))
    # middle: oldest's piece, its own constant, `call` removed, `field` moved, probe `worker` changed by name
    assert [s.name for s in middle.steps] == ["field", "method"]
    assert middle.steps[0].after == "z" and middle.steps[0].code == "b: int = {{n}}"
    assert "self.count_per_batch = {{n}}" in middle.steps[1].code and "return 2" in middle.steps[1].code
    assert [(p.name, p.path, p.description) for p in middle.verify.probes] == [
        ("args", "probes/args.py", "the flag"), ("worker", "probes/worker_new.py", "")]
    assert middle.verify.stubs == ("sgl_kernel", "vllm")
    # newest: all of that, its own piece, and a step added after `field`
    assert [s.name for s in newest.steps] == ["field", "extra", "method"]
    assert newest.steps[0].after == "z"
    assert newest.steps[2].code == "def check(self):\n    self.count_per_batch = {{n}}\n    return 3\n"
    assert newest.verify == middle.verify


def test_parameters_stay_for_the_apply_and_are_rendered_then(tmp_path):
    step = load(tmp_path).select(Version("0.5.10")).steps[2]
    assert step.placeholders() == {"n"}
    assert step.render_params({"n": 8}).code == "def check(self):\n    self.count_per_batch = 8\n    return 3\n"


def test_new_code_drops_the_pieces_given_for_the_old_code(tmp_path):
    text = RECIPE.replace("      field: {after: z}\n", "      field: {after: z}\n      method: {code_file: plain.py}\n")
    path = folder(tmp_path) / "demo.yaml"
    (tmp_path / "demo" / "plain.py").write_text("def check(self):\n    return 0\n")
    path.write_text(text)
    with pytest.raises(RecipeError) as info:  # newest gives piece `check` for code that has none
        load_recipe(path)
    assert "variant `newest`, step `method`: no piece `check` in the step's code" in info.value.message
    path.write_text(text.replace('    change_steps:\n      method: {pieces: {check: "return 3\\n"}}\n', ""))
    middle = load_recipe(path).select(Version("0.5.8"))  # oldest's piece is not carried into the new code
    assert middle.steps[1].code == "def check(self):\n    return 0\n"


def test_a_root_variant_has_its_own_steps_and_checks(tmp_path):
    text = RECIPE.replace("variants:\n", """variants:
  - name: root
    versions: ">=0.5.4,<0.5.5"
    steps:
      - {name: only, op: add_import, file: srt/server_args.py, code: import sys}
    verify:
      imports: [sglang.srt.server_args]
""")
    root = load(tmp_path, text).select(Version("0.5.4"))
    assert [s.name for s in root.steps] == ["only"]
    assert root.verify.probes == () and root.verify.stubs == ()


@pytest.mark.parametrize("old, new, message, at", [
    ("    extends: middle\n", "    extends: midle\n",
     "variant `newest` extends `midle`, which is no variant of the recipe; did you mean `middle`?", "extends: midle"),
    ("    extends: oldest\n", "    extends: newest\n",
     "variant `middle` extends `newest`, a cycle: newest -> middle -> newest", "extends: newest"),
    ("      field: {after: z}\n", "      feild: {after: z}\n",
     "variant `middle` changes step `feild`, which variant `oldest` does not have; did you mean `field`?",
     "feild: {after: z}"),
    ("    remove_steps: [call]\n", "    remove_steps: [cal]\n",
     "variant `middle` removes step `cal`, which variant `oldest` does not have; did you mean `call`?",
     "remove_steps: [cal]"),
    ("after_step: field,", "after_step: fields,",
     "variant `newest` places a new step after step `fields`, which variant `middle` does not have",
     "after_step: fields"),
    ("{name: extra, after_step", "{name: field, after_step",
     "variant `newest` adds step `field`, which its base already has", "{name: field, after_step"),
    ('{check: "return 3\\n"}', '{chek: "return 3\\n"}',
     "variant `newest`, step `method`: no piece `chek` in the step's code; did you mean `check`?", "chek"),
    ("      field: {after: z}\n", "      field: {op: add_import}\n",
     "variant `middle` changes the `op` or `name` of step `field`", "field: {op: add_import}"),
    ("    constants: {kind: batch}\n", "    constants: {kind: [batch]}\n",
     "constant `kind` is a list", "constants: {kind: [batch]}"),
    ("    constants: {kind: batch}\n", "    constants: {n: 4}\n",
     "n is a parameter and a constant; give one", None),
    ("    constants: {kind: batch}\n", "    constants: {kind: 'not a name'}\n",
     "variant `newest`, step `method`: parameter `kind` is part of a name", None),
])
def test_a_bad_overlay_names_the_variant_and_the_step_at_its_line(tmp_path, old, new, message, at):
    assert old in RECIPE
    text = RECIPE.replace(old, new)
    err = refused(tmp_path, text)
    assert message in err.message, err.message
    if at is not None:
        assert err.location.line == line_of(text, at), (err.location.line, err.message)


def test_a_variant_with_steps_and_extends_is_refused(tmp_path):
    text = RECIPE.replace("    extends: oldest\n", "    extends: oldest\n    steps: []\n")
    assert "variant `middle` has `steps` (its own list) and extends or changes steps" in refused(tmp_path, text).message


@pytest.mark.parametrize("method, message", [
    ("def check(self):\n    # <piece check>\n    return 1\n", "piece `check` is not closed"),
    ("def check(self):\n    return 1\n    # </piece>\n", "closes no piece"),
    ("def check(self):\n    # <piece a>\n    # <piece b>\n    # </piece>\n    # </piece>\n", "pieces do not nest"),
])
def test_unbalanced_piece_markers_are_refused(tmp_path, method, message):
    folder(tmp_path)
    text = RECIPE.replace("    code_file: method.py\n", "    code_file: broken.py\n")
    (tmp_path / "demo" / "broken.py").write_text(method)
    path = tmp_path / "demo.yaml"
    path.write_text(text)
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    assert message in info.value.message and "step `method`" in info.value.message, info.value.message


def test_a_pieces_file_without_pieces_is_refused(tmp_path):
    folder(tmp_path)
    (tmp_path / "demo" / "old" / "method.py").write_text("    return 2\n")
    path = tmp_path / "demo.yaml"
    path.write_text(RECIPE)
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    assert "variant `oldest`, step `method`: the pieces file has no `# <piece NAME>`" in info.value.message


def test_the_flagship_is_overlays_all_through():
    """Every fallback variant but the eager base overlays another one or the recipe: no copied step lists."""
    from patcher.recipe_yaml import compose_and_load

    folder_ = Path(__file__).resolve().parent.parent / "recipes" / "dynamic-spec-disable"
    variants = compose_and_load((folder_ / "variants.yaml").read_text())[1]
    roots = [v["name"] for v in variants if "steps" in v]
    assert roots == ["alias-0.5.17-namespaced"], roots
    # a variant lists its imports only where the files it patches move (0.5.10: the decode log line moved to
    # observability/; 0.5.13: scheduler_components/): verify's imports are a list, replaced whole
    assert all("verify" not in v or "imports" not in v["verify"] or v["name"] in
               ("alias-0.5.17-namespaced", "fallback-0.5.9", "fallback-0.5.10", "fallback-0.5.13") for v in variants)


def test_an_error_in_an_included_variants_file_points_into_that_file(tmp_path):
    head, variants = RECIPE.split("variants:\n")
    variants = textwrap.dedent(variants.replace("      field: {after: z}\n", "      feild: {after: z}\n"))
    folder(tmp_path)
    (tmp_path / "demo" / "variants.yaml").write_text(variants)
    path = tmp_path / "demo.yaml"
    path.write_text(head + "variants_file: variants.yaml\n")
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    err = info.value
    assert "variant `middle` changes step `feild`" in err.message
    assert err.location.file == str(tmp_path / "demo" / "variants.yaml")
    assert err.location.line == line_of(variants, "feild: {after: z}")


def test_a_constant_as_the_object_of_an_attribute_is_written_as_a_name():
    """`{{view}}.field` reads a field of the object the constant names (a variant reading the resolved configuration
    where its base reads `self`); anywhere else the same constant is a literal, and a value that is no name is
    refused."""
    from patcher.errors import ParamError
    from patcher.params import render

    code = "if {{view}}.enable_dp_attention and {{view}}.dp_size(1) > 1:\n    label = {{view}}\n"
    assert render(code, {"view": "cfg"}) == "if cfg.enable_dp_attention and cfg.dp_size(1) > 1:\n    label = 'cfg'\n"
    assert render(code, {"view": "self"}).startswith("if self.enable_dp_attention and self.dp_size(1)")
    for bad in ("not a name", "class", 3):
        with pytest.raises(ParamError, match="where only a name can stand"):
            render(code, {"view": bad})


@pytest.mark.parametrize("code, rendered", [
    ("self.{{attr}} = 0\n", "self.num_tenants = 0\n"),
    ("def {{attr}}(self):\n    return 1\n", "def num_tenants(self):\n    return 1\n"),
    ("class {{attr}}:\n    pass\n", "class num_tenants:\n    pass\n"),
    ("f({{attr}}=1)\n", "f(num_tenants=1)\n"),
    ("def f({{attr}}=1):\n    global {{attr}}\n", "def f(num_tenants=1):\n    global num_tenants\n"),
    ("{{attr}}: int = 0\nfor {{attr}} in x:\n    pass\n", "num_tenants: int = 0\nfor num_tenants in x:\n    pass\n"),
    ("y = {{attr}}\n", "y = 'num_tenants'\n"),  # a value where a value goes
])
def test_a_placeholder_where_only_a_name_can_stand_is_written_as_a_name(code, rendered):
    # a hostile round: `self.{{attr}}`, `def {{attr}}`, `f({{attr}}=1)` were refused ("not valid Python"), while
    # `self.{{attr}}_total` worked
    from patcher.errors import ParamError
    from patcher.params import render

    assert render(code, {"attr": "num_tenants"}) == rendered
    if "'" not in rendered:
        with pytest.raises(ParamError, match="not an identifier"):
            render(code, {"attr": "not a name"})


def test_yaml_1_1_booleans_stay_text_and_a_float_constant_is_refused(tmp_path):
    # a hostile round: `constants: {torch_min: 2.10, dump_mode: off}` put "2.1" and "False" into the code
    from patcher.recipe_yaml import compose_and_load

    assert compose_and_load("a: off\nb: yes\nc: true\nd: False\n")[1] == {"a": "off", "b": "yes", "c": True,
                                                                          "d": False}
    path = tmp_path / "r.yaml"
    path.write_text("id: r\ntitle: t\ntarget: {package: sglang}\nconstants: {torch_min: 2.10, mode: off}\nsteps:\n"
                    "  - {op: add_import, file: m.py, code: import os}\n")
    with pytest.raises(RecipeError, match="`torch_min` is written `2.10`, and YAML reads it as the number 2.1"):
        load_recipe(path)
    # a number as written is that number (reviews: `headroom: 0.9` per variant, `1.0e-6`, `1e-06` were refused, and
    # `1e-06` was read as a string, placed into code as '1e-06')
    for written, number in (("0.9", 0.9), ("1.0e-6", 1e-06), ("1e-06", 1e-06), ("1e3", 1000.0), ("1.0", 1.0)):
        path.write_text(f"id: r\ntitle: t\ntarget: {{package: sglang}}\nconstants: {{torch_min: {written}}}\n"
                        "steps:\n  - {op: add_import, file: m.py, code: import os}\n")
        value = load_recipe(path).constants["torch_min"]
        assert isinstance(value, float) and value == number, (written, value)


def test_a_pre_release_that_no_variant_holds_is_named_so_with_its_release_s_variant(tmp_path):
    # a hostile round: vllm 0.24.0rc1 fell in no variant (PEP 440 sorts it before 0.24), and the message listed a
    # range `>=0.24,<0.34` that seemed to hold it
    from patcher.errors import VersionUnsupported

    recipe = load(tmp_path)
    with pytest.raises(VersionUnsupported) as info:
        recipe.select(Version("0.5.10rc1"))
    assert "0.5.10rc1 is a pre-release of 0.5.10" in info.value.hint, info.value.hint
    assert "--assume-version 0.5.10" in info.value.hint
