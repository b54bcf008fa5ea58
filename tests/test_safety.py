"""Issue 12, through the real command line on files of the real sglang 0.5.9 release: one identity per target file,
no write through a link out of the package, parameters as literals, names compared as Python compares them, a
strict YAML loader, OS errors and interrupts with their documented exit codes, and a deleted state folder seen from
the tree.

Each test builds a small site-packages tree from the release's own bytes (`sglang/__init__.py`, `_version.py`,
`srt/server_args.py`, the dist-info) and a recipe in tmp_path written for the case.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
OK, INTERNAL, BAD_INPUT, CANNOT_APPLY, DRIFT, SYSTEM = 0, 1, 2, 3, 5, 8
SERVER_ARGS = "sglang/srt/server_args.py"


def specpatch(*args: str, recipes: Path | None = None, preexec=None, env: dict | None = None,
              code: str | None = None) -> subprocess.CompletedProcess:
    """`python -m patcher ARGS` (or `python -c CODE ARGS`), no colour, the recipe folder on the recipe path."""
    full_env = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": str(REPO), **(env or {})}
    if recipes is not None:
        full_env["SPECPATCH_RECIPE_PATH"] = str(recipes)
    cmd = [sys.executable, "-m", "patcher", *args] if code is None else [sys.executable, "-c", code, *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=full_env, timeout=600, cwd=REPO,
                          preexec_fn=preexec)


@pytest.fixture
def site(tmp_path, sglang_release) -> Path:
    """A site-packages folder holding the real 0.5.9 files a recipe of these tests touches."""
    release = sglang_release("0.5.9")
    dest = tmp_path / "site"
    for rel in ("sglang/__init__.py", "sglang/_version.py", "sglang/version.py", "sglang/srt/__init__.py",
                SERVER_ARGS):
        if (release / rel).exists():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(release / rel, dest / rel)
    shutil.copytree(next(release.glob("sglang-*.dist-info")), dest / "sglang-0.5.9.dist-info")
    return dest


def snapshot(root: Path) -> dict[str, str]:
    """sha256 and mode of every file outside the state folder."""
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() + oct(p.stat().st_mode)
            for p in sorted(root.rglob("*")) if p.is_file() and ".specpatch" not in p.parts
            and "__pycache__" not in p.parts}


def recipe(folder: Path, body: str, name: str = "case", files: dict[str, str | bytes] | None = None) -> Path:
    """Write `folder/name.yaml` (id and target added) and its files beside it; returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    head = f"id: {name}\ntitle: a test case\ntarget: {{package: sglang}}\n"
    (folder / f"{name}.yaml").write_text(head + textwrap.dedent(body), encoding="utf-8")
    for rel, data in (files or {}).items():
        path = folder / name / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return folder


FIELD = """\
  - op: add_dataclass_field
    file: {file}
    class: ServerArgs
    after: {after}
    code: "{code}"
"""


def fields(*items: tuple[str, str, str]) -> str:
    return "steps:\n" + "".join(FIELD.format(file=f, after=a, code=c) for f, a, c in items)


def assert_error(done: subprocess.CompletedProcess, code: int, *texts: str) -> None:
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    for text in texts:
        assert text in done.stderr, (text, done.stderr)


# --------------------------------------------------------------------------------------------------- identity


def test_one_file_spelled_two_ways_is_planned_once_and_rolls_back(site, tmp_path):
    recipes = recipe(tmp_path / "r", fields(("./srt/server_args.py", "speculative_accept_threshold_acc", "aa: int = 1"),
                                            ("srt/server_args.py", "speculative_accept_threshold_single",
                                             "bb: int = 2"),
                                            ("srt//server_args.py", "speculative_num_draft_tokens", "cc: int = 3")))
    before = snapshot(site)
    done = specpatch("apply", "case", "--target", str(site), "--no-smoke", recipes=recipes)
    assert done.returncode == OK, done.stderr
    text = (site / SERVER_ARGS).read_text()
    assert all(f"    {f}: int = {n}\n" in text for f, n in (("aa", 1), ("bb", 2), ("cc", 3)))  # no edit lost
    assert specpatch("verify", "--target", str(site), "--no-smoke", recipes=recipes).returncode == OK
    done = specpatch("rollback", "--target", str(site), recipes=recipes)
    assert done.returncode == OK, done.stderr
    assert snapshot(site) == before


def test_a_link_inside_the_package_is_the_file_it_points_to(site, tmp_path):
    (site / "sglang/srt/args_link.py").symlink_to("server_args.py")
    recipes = recipe(tmp_path / "r", fields(("srt/args_link.py", "speculative_accept_threshold_acc", "aa: int = 1"),
                                            ("srt/server_args.py", "speculative_accept_threshold_single",
                                             "bb: int = 2")))
    done = specpatch("apply", "case", "--target", str(site), "--no-smoke", recipes=recipes)
    assert done.returncode == OK, done.stderr
    text = (site / SERVER_ARGS).read_text()
    assert "    aa: int = 1\n" in text and "    bb: int = 2\n" in text
    assert (site / "sglang/srt/args_link.py").is_symlink()


def test_rollback_never_writes_through_a_link_out_of_the_package(site, tmp_path):
    recipes = recipe(tmp_path / "r", fields(("srt/server_args.py", "speculative_accept_threshold_acc", "aa: int = 1")))
    assert specpatch("apply", "case", "--target", str(site), "--no-smoke", recipes=recipes).returncode == OK
    outside = tmp_path / "elsewhere.py"
    outside.write_bytes((site / SERVER_ARGS).read_bytes())  # the patched bytes: a plain rollback would match them
    (site / SERVER_ARGS).unlink()
    (site / SERVER_ARGS).symlink_to(outside)
    for force in ([], ["--force"]):
        done = specpatch("rollback", "--target", str(site), *force, recipes=recipes)
        assert_error(done, BAD_INPUT, "leads out of the package", "server_args.py")
        assert outside.read_bytes() == (site / SERVER_ARGS).read_bytes()
        assert b"aa: int = 1" in outside.read_bytes()  # not written through
    done = specpatch("verify", "--target", str(site), "--no-smoke", recipes=recipes)
    assert_error(done, BAD_INPUT, "leads out of the package")


def test_apply_refuses_a_step_file_that_leaves_the_package_through_a_link(site, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy2(site / SERVER_ARGS, outside / "server_args.py")
    (site / "sglang/srt/ext").symlink_to(outside)
    recipes = recipe(tmp_path / "r", fields(("srt/ext/server_args.py", "speculative_accept_threshold_acc",
                                             "aa: int = 1")))
    before = (outside / "server_args.py").read_bytes()
    done = specpatch("apply", "case", "--target", str(site), "--no-smoke", recipes=recipes)
    assert_error(done, BAD_INPUT, "resolves outside the package")
    assert (outside / "server_args.py").read_bytes() == before


# --------------------------------------------------------------------------------------------------- parameters


PARAMS = """\
params:
  mode: {type: str, default: padded}
  ratio: {type: float, default: 0.5}
  n: {type: int, default: 0}
steps:
  - op: add_dataclass_field
    file: srt/server_args.py
    class: ServerArgs
    after: speculative_accept_threshold_acc
    code: 'spec_mode: str = "{{mode}}"'
  - op: add_dataclass_field
    file: srt/server_args.py
    class: ServerArgs
    after: speculative_accept_threshold_single
    code: "spec_ratio: float = {{ratio}}"
  - op: add_dataclass_field
    file: srt/server_args.py
    class: ServerArgs
    after: speculative_num_draft_tokens
    code: "spec_n: int = {{n}}"
"""


def _field_values(path: Path) -> dict[str, object]:
    tree = ast.parse(path.read_bytes())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ServerArgs")
    out = {}
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and node.target.id.startswith("spec_"):
            out[node.target.id] = ast.literal_eval(node.value)  # a literal, or this raises
    return out


@pytest.mark.parametrize("value", ['padded") or __import__("os").system("touch PWNED") or ("',
                                   "a\\\" + str(__import__('os').getpid()) + \"", 'two\nlines', "ünïcode ' \""])
def test_a_str_parameter_is_a_string_literal_whatever_its_value(site, tmp_path, value):
    recipes = recipe(tmp_path / "r", PARAMS)
    done = specpatch("apply", "case", "--target", str(site), "--no-smoke", "--param", f"mode={value}",
                     "--param", "n=-3", recipes=recipes)
    assert done.returncode == OK, done.stderr
    assert _field_values(site / SERVER_ARGS) == {"spec_mode": value, "spec_ratio": 0.5, "spec_n": -3}
    assert not (REPO / "PWNED").exists() and not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize("given", ["nan", "inf", "-inf", "1e999"])
def test_a_float_parameter_that_no_literal_writes_is_refused(site, tmp_path, given):
    recipes = recipe(tmp_path / "r", PARAMS)
    before = snapshot(site)
    done = specpatch("apply", "case", "--target", str(site), "--no-smoke", "--param", f"ratio={given}",
                     recipes=recipes)
    assert_error(done, BAD_INPUT, "ratio", "not a finite number")
    assert snapshot(site) == before


@pytest.mark.parametrize("default, type_", [('"os.getpid()"', "int"), ("true", "int"), ('"x"', "float"),
                                            ("1", "str"), ("1", "bool")])
def test_a_parameter_default_of_the_wrong_type_is_refused_at_load(site, tmp_path, default, type_):
    body = PARAMS.replace("  n: {type: int, default: 0}", f"  n: {{type: {type_}, default: {default}}}")
    recipes = recipe(tmp_path / "r", body)
    done = specpatch("apply", "case", "--target", str(site), "--no-smoke", "--dry-run", recipes=recipes)
    assert_error(done, BAD_INPUT, "invalid recipe", "default of parameter `n`", f"declared `{type_}`")
    assert "case.yaml:" in done.stderr  # the recipe's line


def test_a_parameter_where_no_value_can_go_is_refused(site, tmp_path):
    body = PARAMS.replace('code: "spec_n: int = {{n}}"', 'code: "spec_{{mode}}: int = 1"')
    recipes = recipe(tmp_path / "r", body)
    done = specpatch("apply", "case", "--target", str(site), "--no-smoke", "--param", "mode=a = 1; import os; b",
                     recipes=recipes)
    assert_error(done, BAD_INPUT, "bad parameter value", "not an identifier")


# --------------------------------------------------------------------------------------------------- names


def test_a_method_name_that_python_reads_as_an_existing_one_conflicts(site, tmp_path):
    body = """\
    steps:
      - op: add_method
        file: srt/server_args.py
        class: ServerArgs
        code: |
          def __post_ini\uff54__(self):
              pass
    """  # FULLWIDTH LATIN SMALL LETTER T: Python reads `__post_iniｔ__` as `__post_init__` (NFKC)
    recipes = recipe(tmp_path / "r", body)
    before = snapshot(site)
    done = specpatch("apply", "case", "--target", str(site), "--no-smoke", recipes=recipes)
    assert_error(done, CANNOT_APPLY, "conflicting definition", "already has a method `__post_init__`")
    assert snapshot(site) == before


def test_a_fullwidth_field_name_is_the_existing_field(site, tmp_path):
    name = "speculative_accept_threshold_\uff41cc"  # fullwidth "a": the existing field for Python
    recipes = recipe(tmp_path / "r", fields(("srt/server_args.py", "speculative_accept_threshold_single",
                                             f"{name}: int = 7")))
    before = snapshot(site)
    done = specpatch("apply", "case", "--target", str(site), "--no-smoke", recipes=recipes)
    assert_error(done, CANNOT_APPLY, "conflicting definition", "already has a field")
    assert snapshot(site) == before


def test_a_field_named_like_a_method_and_a_method_named_like_a_field_conflict(site, tmp_path):
    field = fields(("srt/server_args.py", "speculative_accept_threshold_acc", "add_cli_args: int = 1"))
    method = """\
    steps:
      - op: add_method
        file: srt/server_args.py
        class: ServerArgs
        code: |
          def speculative_accept_threshold_acc(self):
              return 1.0
    """
    for text in (field, method):
        recipes = recipe(tmp_path / "r", text)
        before = snapshot(site)
        done = specpatch("apply", "case", "--target", str(site), "--no-smoke", recipes=recipes)
        assert_error(done, CANNOT_APPLY, "conflicting definition", "would replace it")
        assert snapshot(site) == before


# --------------------------------------------------------------------------------------------------- recipes


ONE = fields(("srt/server_args.py", "speculative_accept_threshold_acc", "aa: int = 1"))


@pytest.mark.parametrize("case, body, files, message", [
    ("duplicate code", ONE + '    code: "bb: int = 2"\n', None, "key `code` is given twice"),
    ("duplicate steps", ONE + ONE, None, "key `steps` is given twice"),
    ("duplicate nested", "params:\n  a: {type: int, default: 1, default: 2}\n" + ONE, None,
     "key `default` is given twice"),
    ("deep flow", "extra: " + "[" * 5000 + "]" * 5000 + "\n" + ONE, None, "nested deeper than"),
    ("deep block", "".join("  " * i + f"k{i}:\n" for i in range(200)) + "  " * 200 + "v: 1\n" + ONE, None,
     "nested deeper than"),
    ("self include", "variants_file: v.yaml\n" + ONE, {"v.yaml": "- name: a\n  versions: '>=0'\n  steps_file: "
                                                                  "v.yaml\n"}, "includes itself"),
    ("include chain", "variants_file: v.yaml\n" + ONE, {"v.yaml": "- name: a\n  versions: '>=0'\n  steps_file: "
                                                                  "w.yaml\n", "w.yaml": "- {op: add_import, "
                                                                  "file: x.py, code_file: ../case.yaml}\n"},
     "leaves the recipe's folder"),
    ("package", ONE, None, None),
    ("same names", ONE.replace("  - op:", "  - name: same\n    op:") * 1 + ONE.replace("steps:\n", "").replace(
        "  - op:", "  - name: same\n    op:").replace("aa: int = 1", "bb: int = 2"), None,
     "two steps are named `same`"),
    ("no steps", "steps: []\n", None, "has no steps"),
    # hostile round 12 (a newcomer): a placeholder in an option that takes none was looked for literally ("anchor
    # not found", exit 3, "this release may have moved the code")
    ("placeholder in an anchor", "params:\n  suffix: {type: str, default: acc}\n" + ONE.replace(
        "speculative_accept_threshold_acc", "speculative_accept_threshold_{{suffix}}"), None,
     "`{{suffix}}` in `after` is not filled in"),
    # hostile round 12 (a newcomer): a copied variant kept its name; `extends` and --variant took the first
    ("variant range admits nothing", "variants:\n  - {name: v, versions: '>=0.5.13,<0.5.3'}\n" + ONE, None,
     "it admits no release the recipe is for"),
    ("same variant names", "variants:\n  - {name: v, versions: '<0.5.9', steps: []}\n  - {name: v, versions: "
                           "'>=0.5.9'}\n" + ONE, None, "two variants are named `v`"),
    ("negative timeout", ONE + "verify:\n  timeout: -1\n", None, "positive number of seconds"),
    ("negative probe timeout", ONE + "verify:\n  probes: [{path: p.py, timeout: -5}]\n", {"p.py": "pass\n"},
     "positive number of seconds"),
    ("statement as an import", ONE + 'verify:\n  imports: ["os; import sys"]\n', None, "is not a module name"),
    ("path as an import", ONE + 'verify:\n  imports: ["../../x"]\n', None, "is not a module name"),
    ("nul in file", ONE.replace("file: srt/server_args.py", 'file: "srt/server\\0args.py"'), None,
     "NUL or control character"),
    ("non-utf8 code", "steps:\n  - op: add_method\n    file: srt/server_args.py\n    class: ServerArgs\n"
                      "    code_file: m.py\n", {"m.py": b"def f(self):\n    return '\xff\xfe'\n"}, "is not UTF-8"),
    ("too big included", "steps:\n  - op: add_method\n    file: srt/server_args.py\n    class: ServerArgs\n"
                         "    code_file: m.py\n", {"m.py": "# x\n" * 300_000}, "larger than"),
])
def test_an_ambiguous_or_wrong_recipe_is_refused_with_its_line(site, tmp_path, case, body, files, message):
    if case == "package":
        recipes = recipe(tmp_path / "r", body)
        text = (recipes / "case.yaml").read_text().replace("package: sglang", "package: vllm")
        (recipes / "case.yaml").write_text(text)
    else:
        recipes = recipe(tmp_path / "r", body, files=files)
    before = snapshot(site)
    done = specpatch("apply", "case", "--target", str(site), "--no-smoke", "--package", "sglang", recipes=recipes)
    if case == "package":
        assert_error(done, BAD_INPUT, "patches the package `vllm`; the target is `sglang`")
    else:
        assert_error(done, BAD_INPUT, "invalid recipe", message)
    assert snapshot(site) == before
    assert not (site / ".specpatch" / "ledger.json").exists()


def test_a_target_file_that_is_not_utf8_is_bad_input(site, tmp_path):
    path = site / SERVER_ARGS
    path.write_bytes(path.read_bytes().replace(b"class ServerArgs:", b"class ServerArgs:  # \xff\xfe", 1))
    recipes = recipe(tmp_path / "r", ONE)
    done = specpatch("apply", "case", "--target", str(site), "--no-smoke", recipes=recipes)
    assert_error(done, BAD_INPUT, "server_args.py")


# --------------------------------------------------------------------------------------------------- the machine


def _fsize(limit: int):
    def set_limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))  # Python ignores SIGXFSZ: writes get EFBIG

    return set_limit


@pytest.mark.parametrize("verb", ["apply", "rollback"])
def test_a_write_the_system_refuses_exits_8_with_the_file_and_errno_and_the_tree_whole(site, tmp_path, verb):
    recipes = recipe(tmp_path / "r", ONE)
    original = snapshot(site)
    if verb == "rollback":
        assert specpatch("apply", "case", "--target", str(site), "--no-smoke", recipes=recipes).returncode == OK
    before = snapshot(site)
    args = ("apply", "case", "--no-smoke") if verb == "apply" else ("rollback",)
    done = specpatch(*args, "--target", str(site), recipes=recipes, preexec=_fsize(64 * 1024))
    assert_error(done, SYSTEM, "File too large [EFBIG]", "server_args.py", "the tree was left whole")
    assert snapshot(site) == before  # untouched (apply) or still patched (rollback): never half-written
    if verb == "rollback":
        assert specpatch("rollback", "--target", str(site), recipes=recipes).returncode == OK
        assert snapshot(site) == original


def _chattr(flag: str, *paths: Path) -> bool:
    try:
        return subprocess.run(["chattr", flag, *map(str, paths)], capture_output=True).returncode == 0
    except OSError:
        return False


def test_an_immutable_file_is_an_unusable_target_and_nothing_is_written(site, tmp_path):
    recipes = recipe(tmp_path / "r", ONE)
    path = site / SERVER_ARGS
    folder = path.parent
    if os.geteuid() != 0 and not _chattr("+i", path):
        os.chmod(folder, 0o555)  # not root: a read-only folder refuses the atomic replace the same way
    else:
        assert _chattr("+i", folder), "chattr +i is needed for this test (root on a file system that has it)"
    try:
        before = snapshot(site)
        done = specpatch("apply", "case", "--target", str(site), "--no-smoke", recipes=recipes)
        assert_error(done, BAD_INPUT, "Operation not permitted" if os.geteuid() == 0 else "Permission denied",
                     "srt")
        assert snapshot(site) == before
    finally:
        _chattr("-i", folder)
        os.chmod(folder, 0o755)


@pytest.mark.parametrize("damage", ["ledger", "journal", "backup", "state-file", "lock-link", "record-dir"])
def test_a_damaged_state_folder_is_bad_input_not_a_bug(site, tmp_path, damage):
    recipes = recipe(tmp_path / "r", ONE)
    assert specpatch("apply", "case", "--target", str(site), "--no-smoke", recipes=recipes).returncode == OK
    state = site / ".specpatch"
    if damage == "ledger":
        (state / "ledger.json").write_text("{not json")
    elif damage == "journal":
        (state / "journal.json").write_text('{"format": 1, "kind": "apply"}')
    elif damage == "backup":
        next((state / "records").rglob("before/**/server_args.py")).write_bytes(b"damaged")
    elif damage == "record-dir":  # an entry naming another folder: the sweep of leftovers removed every backup
        import json

        ledger = json.loads((state / "ledger.json").read_text())
        ledger["applied"][0]["record_dir"] = "."
        (state / "ledger.json").write_text(json.dumps(ledger))
    elif damage == "lock-link":  # was exit 8 (ELOOP, "the system refused"), though nothing failed but the state
        outside = tmp_path / "outside-lock"
        outside.write_text("precious\n")
        (state / "lock").unlink()
        (state / "lock").symlink_to(outside)
    else:
        shutil.rmtree(state)
        state.write_text("not a folder")
    done = specpatch("rollback", "--target", str(site), recipes=recipes)
    if damage == "lock-link":
        assert outside.read_text() == "precious\n"
    if damage == "record-dir":
        assert list((state / "records").rglob("before/**/server_args.py")), "the backups were swept away"
    assert_error(done, BAD_INPUT, "the state folder is damaged" if damage != "state-file" else "is not a folder")


# --------------------------------------------------------------------------------------------------- interrupts


RUNNER = """\
import os, signal, sys
from patcher import transaction
from patcher.cli import main
label, signame = os.environ["AT"], os.environ["SIG"]
def hook(step):
    if step == label:
        os.kill(os.getpid(), getattr(signal, signame))
transaction._fault = hook
sys.argv = ["specpatch", *sys.argv[1:]]
main()
"""


@pytest.mark.parametrize("signame, code", [("SIGINT", 130), ("SIGTERM", 143)])
def test_an_interrupted_apply_undoes_itself_and_says_so(site, tmp_path, signame, code):
    recipes = recipe(tmp_path / "r", ONE)
    before = snapshot(site)
    done = specpatch("apply", "case", "--target", str(site), "--no-smoke", recipes=recipes, code=RUNNER,
                     env={"AT": f"apply:after-write:{SERVER_ARGS}", "SIG": signame})
    assert done.returncode == code, done.stderr
    assert f"interrupted ({signame}): the apply of case was undone" in done.stderr
    assert snapshot(site) == before
    assert not (site / ".specpatch" / "journal.json").exists()


@pytest.mark.parametrize("signame, code", [("SIGINT", 130), ("SIGTERM", 143)])
def test_an_interrupted_rollback_finishes_in_process(site, tmp_path, signame, code):
    recipes = recipe(tmp_path / "r", fields(("srt/server_args.py", "speculative_accept_threshold_acc", "aa: int = 1"),
                                            ("srt/server_args.py", "speculative_accept_threshold_single",
                                             "bb: int = 2")))
    before = snapshot(site)
    assert specpatch("apply", "case", "--target", str(site), "--no-smoke", recipes=recipes).returncode == OK
    done = specpatch("rollback", "--target", str(site), recipes=recipes, code=RUNNER,
                     env={"AT": "rollback:journal-written", "SIG": signame})
    assert done.returncode == code, done.stderr
    assert f"interrupted ({signame})" in done.stderr
    assert snapshot(site) == before  # finished here, not left to the next command
    assert not (site / ".specpatch" / "journal.json").exists()


def test_ctrl_c_during_planning_prints_a_clear_line(site, tmp_path):
    recipes = recipe(tmp_path / "r", ONE)
    code = ("import os, signal, sys\nfrom patcher import engine\nfrom patcher.cli import main\n"
            "real = engine._plan_file\n"
            "def slow(*a, **k):\n    os.kill(os.getpid(), signal.SIGINT)\n    return real(*a, **k)\n"
            "engine._plan_file = slow\nsys.argv = ['specpatch', *sys.argv[1:]]\nmain()\n")
    done = specpatch("apply", "case", "--target", str(site), "--no-smoke", recipes=recipes, code=code)
    assert done.returncode == 130, done.stderr
    assert "interrupted (SIGINT)" in done.stderr and "Aborted" not in done.stderr


# --------------------------------------------------------------------------------------------------- lost state


def test_a_deleted_state_folder_on_a_patched_tree_is_not_a_clean_tree(site, tmp_path):
    recipes = recipe(tmp_path / "r", ONE)
    assert specpatch("apply", "case", "--target", str(site), "--no-smoke", recipes=recipes).returncode == OK
    shutil.rmtree(site / ".specpatch")
    for args in (("rollback",), ("rollback", "case"), ("verify", "--no-smoke")):
        done = specpatch(*args, "--target", str(site), recipes=recipes)
        assert_error(done, DRIFT, "the edits of case are in", "no record of them")
    pristine = tmp_path / "pristine"
    shutil.copytree(site, pristine)
    (pristine / SERVER_ARGS).write_bytes(
        (pristine / SERVER_ARGS).read_bytes().replace(b"    aa: int = 1\n", b""))
    done = specpatch("rollback", "--target", str(pristine), recipes=recipes)
    assert done.returncode == OK and "nothing to roll back" in done.stderr, done.stderr


def apply_until_the_probe_runs(tmp_path: Path, probe_tail: str):
    """`specpatch apply` of a one-field recipe on the toy tree, in a process of its own, returned once its probe (which
    writes its pid, then runs `probe_tail`) is running: (the process, the target, the recipe folder, the probe's pid,
    the target's snapshot before)."""
    target = tmp_path / "t"
    shutil.copytree(REPO / "tests/recipes/fixtures/toy-greeting/baseline/before", target)
    pid_file = tmp_path / "probe.pid"
    recipes = recipe(tmp_path / "r", f"""\
    steps:
      - op: add_dataclass_field
        file: srt/greeter.py
        class: Greeter
        after: punctuation
        code: "volume: int = 1"
    verify:
      probes: [{{path: slow.py}}]
    """, files={"slow.py": f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n{probe_tail}"})
    before = snapshot(target)
    env = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": str(REPO), "SPECPATCH_RECIPE_PATH": str(recipes)}
    proc = subprocess.Popen([sys.executable, "-m", "patcher", "apply", "case", "--target", str(target)], cwd=REPO,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(600):
        if pid_file.exists() and pid_file.read_text():
            break
        time.sleep(0.1)
    assert pid_file.exists(), proc.communicate(timeout=60)
    return proc, target, recipes, int(pid_file.read_text()), before


def test_ctrl_c_during_a_probe_kills_it_and_rolls_the_apply_back(tmp_path):
    proc, target, _, probe, before = apply_until_the_probe_runs(tmp_path, "time.sleep(120)\n")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted (SIGINT): case was applied, then rolled back before its checks had finished" in err
    assert snapshot(target) == before
    with pytest.raises(ProcessLookupError):
        os.kill(probe, 0)  # the probe's process group went with it


def test_a_kill_9_during_the_checks_leaves_an_apply_the_next_command_rolls_back(tmp_path):
    # the checks had not said yes: the apply is not done, so the next command undoes it (it used to find a committed
    # ledger entry and no journal, and `check` called the unchecked apply "applied and intact")
    proc, target, recipes, probe, before = apply_until_the_probe_runs(
        tmp_path, "time.sleep(30)\nraise SystemExit('PROBE-FAIL: never reached')\n")
    proc.kill()
    proc.communicate(timeout=60)
    for _ in range(100):  # the runner dies with specpatch (Linux: its parent-death signal), not orphaned
        stat = Path(f"/proc/{probe}/stat")
        if not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
            break
        time.sleep(0.1)
    else:
        os.killpg(probe, signal.SIGKILL)
        pytest.fail("the probe ran on after specpatch was killed")
    assert snapshot(target) != before  # written, its checks unfinished
    check = specpatch("check", "case", "--target", str(target), recipes=recipes)
    assert check.returncode == DRIFT, check.stdout + check.stderr  # an interrupted apply, not "applied and intact"
    done = specpatch("rollback", "--target", str(target), recipes=recipes)
    assert "found an interrupted apply of case" in done.stderr and "rolled back" in done.stderr, done.stderr
    assert snapshot(target) == before


def test_an_output_file_that_cannot_be_written_is_bad_input(site, tmp_path):
    recipes = recipe(tmp_path / "r", ONE)
    done = specpatch("apply", "case", "--target", str(site), "--dry-run", "--diff-out",
                     str(tmp_path / "no-such-folder" / "x.diff"), recipes=recipes)
    assert_error(done, BAD_INPUT, "does not exist", "no-such-folder")


def test_a_link_in_the_state_folder_that_leads_out_is_refused(site, tmp_path):
    recipes = recipe(tmp_path / "r", ONE)
    assert specpatch("apply", "case", "--target", str(site), "--no-smoke", recipes=recipes).returncode == OK
    records = site / ".specpatch" / "records"
    record = next(records.iterdir())
    outside = tmp_path / "outside-record"
    shutil.move(record, outside)
    record.symlink_to(outside)
    done = specpatch("rollback", "--target", str(site), recipes=recipes)
    assert_error(done, BAD_INPUT, "leads out of it")


@pytest.mark.parametrize("name", ["journal.json", "ledger.json"])
def test_a_linked_journal_or_ledger_is_refused_and_nothing_outside_is_written(site, tmp_path, name):
    # the link would have the history written to (and read from) a file outside the target
    recipes = recipe(tmp_path / "r", ONE)
    outside = tmp_path / "outside.json"
    outside.write_text('{"format": 1, "applied": [], "retired": [], "next_seq": 1}\n')
    before, tree = outside.read_bytes(), snapshot(site)
    (site / ".specpatch").mkdir()
    (site / ".specpatch" / name).symlink_to(outside)
    done = specpatch("apply", "case", "--target", str(site), "--no-smoke", recipes=recipes)
    assert_error(done, BAD_INPUT, f"{name} is not a regular file (or is a link)")
    assert outside.read_bytes() == before and snapshot(site) == tree


@pytest.mark.parametrize("ledger", ['{"format": 1, "applied": "x", "next_seq": 1}',
                                    '{"format": 1, "applied": [1], "next_seq": 1}',
                                    '{"format": 1, "applied": {"a": 1}, "next_seq": 1}'])
def test_a_ledger_of_the_wrong_shape_is_a_damaged_state_folder(site, tmp_path, ledger):
    recipes = recipe(tmp_path / "r", ONE)
    (site / ".specpatch").mkdir()
    (site / ".specpatch" / "ledger.json").write_text(ledger)
    for args in (("status",), ("verify", "--no-smoke"), ("apply", "case", "--no-smoke")):
        done = specpatch(*args, "--target", str(site), recipes=recipes)
        assert done.returncode == BAD_INPUT and "is damaged" in done.stderr, (args, done.stderr)


@pytest.fixture
def small_disk(tmp_path):
    """`small_disk(kib)`: a tmpfs of that size mounted in tmp_path (root only: said in the skip reason), unmounted
    at the end; yields the mount point."""
    mounts = []

    def make(kib: int) -> Path:
        point = tmp_path / f"disk{len(mounts)}"
        point.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={kib}k", "tmpfs", str(point)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()}): a real ENOSPC/EROFS needs root")
        mounts.append(point)
        return point

    yield make
    for point in mounts:
        subprocess.run(["umount", "-l", str(point)], capture_output=True)


def _size_kib(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) // 1024


def test_no_space_left_during_apply_is_exit_8_and_the_tree_is_untouched(site, tmp_path, small_disk):
    disk = small_disk(_size_kib(site) + 120)  # room for the tree, not for the backups of server_args.py
    target = disk / "site"
    shutil.copytree(site, target)
    recipes = recipe(tmp_path / "r", ONE)
    before = snapshot(target)
    done = specpatch("apply", "case", "--target", str(target), "--no-smoke", recipes=recipes)
    assert_error(done, SYSTEM, "No space left on device [ENOSPC]", "free some space")
    assert snapshot(target) == before


def test_a_read_only_file_system_is_an_unusable_target_for_apply_and_rollback(site, tmp_path, small_disk):
    disk = small_disk(_size_kib(site) * 4 + 512)
    target = disk / "site"
    shutil.copytree(site, target)
    recipes = recipe(tmp_path / "r", ONE)
    assert specpatch("apply", "case", "--target", str(target), "--no-smoke", recipes=recipes).returncode == OK
    patched = snapshot(target)
    subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
    try:
        done = specpatch("rollback", "--target", str(target), recipes=recipes)
        assert_error(done, BAD_INPUT, "Read-only file system [EROFS]", "read-only file system")
        assert snapshot(target) == patched  # still fully patched: nothing half-restored
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(disk)], check=True)
    assert specpatch("rollback", "--target", str(target), recipes=recipes).returncode == OK


def test_verify_and_check_read_a_read_only_tree_without_writing(site, tmp_path, small_disk):
    """A patched install on a read-only file system (a container's read-only root, a mounted image) is verified,
    not refused: there is nothing to lock, recover or retire there. An interrupted transaction is reported (exit 5),
    since only a writable tree can finish or undo it."""
    disk = small_disk(_size_kib(site) * 4 + 512)
    target = disk / "site"
    shutil.copytree(site, target)
    never = disk / "never"  # a tree specpatch never touched: no state folder to create
    shutil.copytree(site, never)
    recipes = recipe(tmp_path / "r", ONE)
    assert specpatch("apply", "case", "--target", str(target), "--no-smoke", recipes=recipes).returncode == OK
    subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
    try:
        for args, code in ((("verify",), OK), (("verify", "case"), OK), (("check", "case"), OK)):
            done = specpatch(*args, "--target", str(target), "--no-smoke", recipes=recipes) if args[0] == "verify" \
                else specpatch(*args, "--target", str(target), recipes=recipes)
            assert done.returncode == code, (args, done.stdout, done.stderr)
            assert "Traceback" not in done.stderr
        done = specpatch("verify", "--target", str(never), "--no-smoke", recipes=recipes)
        assert done.returncode == OK, done.stderr
        assert "nothing to verify" in done.stdout + done.stderr
        assert not (never / ".specpatch").exists()
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(disk)], check=True)
    # an apply interrupted between its journal and its first write, then the tree made read-only
    assert specpatch("rollback", "--target", str(target), recipes=recipes).returncode == OK
    code = RUNNER.replace("os.kill(os.getpid(), getattr(signal, signame))", "os._exit(9)")
    done = specpatch("apply", "case", "--target", str(target), "--no-smoke", recipes=recipes, code=code,
                     env={"AT": "apply:journal-written", "SIG": "SIGKILL"})
    assert done.returncode == 9, done.stderr
    before = snapshot(target)
    subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
    try:
        done = specpatch("verify", "--target", str(target), "--no-smoke", recipes=recipes)
        assert_error(done, DRIFT, "an interrupted apply of case", "where the tree is writable")
        assert snapshot(target) == before
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(disk)], check=True)
    assert specpatch("verify", "--target", str(target), "--no-smoke", recipes=recipes).returncode == OK


def test_verify_and_rollback_of_a_never_patched_target_write_nothing_there(site, tmp_path):
    recipes = recipe(tmp_path / "r", ONE)
    before = sorted(p.relative_to(site) for p in site.rglob("*"))
    for args in (("verify", "--no-smoke"), ("verify", "case", "--no-smoke"), ("rollback",), ("status",)):
        done = specpatch(*args, "--target", str(site), recipes=recipes)
        assert done.returncode in (OK, 7) and "Traceback" not in done.stderr, (args, done.stderr)
        assert "cannot be written" not in done.stderr
    assert sorted(p.relative_to(site) for p in site.rglob("*")) == before  # no .specpatch/ left behind


TWO_FILES = ONE + "  - op: add_import\n    file: version.py\n    code: import os\n"


def test_rolling_back_a_recipe_applied_again_over_a_partial_reinstall_rolls_back_every_entry(site, tmp_path):
    # the second apply writes only the reinstalled file (a second ledger entry): a rollback of the recipe used to
    # undo that entry alone, leaving the first entry's other files patched and calling it done
    recipes = recipe(tmp_path / "r", TWO_FILES)
    original = snapshot(site)
    pristine = (site / SERVER_ARGS).read_bytes()
    assert specpatch("apply", "case", "--target", str(site), "--no-smoke", recipes=recipes).returncode == OK
    (site / SERVER_ARGS).write_bytes(pristine)  # a reinstall of one file
    again = specpatch("apply", "case", "--target", str(site), "--no-smoke", recipes=recipes)
    assert again.returncode == OK and "(1 file(s))" in again.stderr, again.stderr
    done = specpatch("rollback", "case", "--target", str(site), recipes=recipes)
    assert done.returncode == OK, done.stderr
    assert snapshot(site) == original
    check = specpatch("check", "case", "--target", str(site), recipes=recipes)
    assert check.returncode == 7 and "is not applied" in check.stderr + check.stdout


def test_edits_a_change_of_release_left_in_place_stay_recorded_and_roll_back(tmp_path, sglang_release):
    # a git checkout keeps local edits to files both releases have alike: every file still has the bytes the
    # apply wrote, so the entry still describes them (it was retired: rollback said "nothing to roll back" and left
    # them, check called them "applied by hand or by another tool")
    git = ["git", "-c", "user.email=a@b", "-c", "user.name=a", "-c", "advice.detachedHead=false"]
    root = tmp_path / "repo"
    src = sglang_release("0.5.9")
    pkg = root / "python" / "sglang"
    for rel in ("__init__.py", "_version.py", "version.py", "srt/server_args.py"):
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / "sglang" / rel, pkg / rel)

    def run(*args: str) -> None:
        subprocess.run([*git, "-C", str(root), *args], check=True, capture_output=True)

    run("init", "-q"), run("add", "-A"), run("commit", "-qm", "r"), run("tag", "v0.5.9")
    (pkg / "README.txt").write_text("another release\n")
    run("add", "-A"), run("commit", "-qm", "p"), run("tag", "v0.5.9.post1"), run("checkout", "-q", "v0.5.9")
    recipes = recipe(tmp_path / "r", TWO_FILES)
    done = specpatch("apply", "case", "--target", str(root), "--no-smoke", recipes=recipes)
    assert done.returncode == OK, done.stderr
    run("checkout", "-q", "v0.5.9.post1")  # the edits come along: both files are the same in both commits
    check = specpatch("check", "case", "--target", str(root), recipes=recipes)
    assert check.returncode == OK and "applied and intact" in check.stderr + check.stdout, check.stderr
    done = specpatch("rollback", "--target", str(root), recipes=recipes)
    assert done.returncode == OK and "rolled back case" in done.stderr, done.stderr
    status = subprocess.run([*git, "-C", str(root), "status", "--porcelain"], capture_output=True, text=True)
    assert status.stdout.strip() in ("", "?? .specpatch/"), status.stdout


def _fill(disk: Path, leave_kib: int) -> None:
    """Leave about `leave_kib` KiB free on the tmpfs `disk`."""
    st = os.statvfs(disk)
    free = st.f_bavail * st.f_frsize
    (disk / "filler").write_bytes(b"\0" * max(free - leave_kib * 1024, 0))


@pytest.mark.parametrize("leave_kib", [8, 64])
def test_a_rollback_without_room_is_refused_before_it_touches_a_file(site, tmp_path, small_disk, leave_kib):
    # found by a hostile round: with too little room the rollback restored version.py, then died on server_args.py
    # (ENOSPC), leaving the tree half rolled back, and the help said "the tree was left whole"
    disk = small_disk(_size_kib(site) * 4 + 1024)
    target = disk / "site"
    shutil.copytree(site, target)
    recipes = recipe(tmp_path / "r", TWO_FILES)
    original = snapshot(target)
    assert specpatch("apply", "case", "--target", str(target), "--no-smoke", recipes=recipes).returncode == OK
    patched = snapshot(target)
    _fill(disk, leave_kib)
    done = specpatch("rollback", "--target", str(target), recipes=recipes)
    assert_error(done, SYSTEM, "No space left on device [ENOSPC]", "nothing was rolled back", "the tree was left whole")
    assert snapshot(target) == patched and not (target / ".specpatch" / "journal.json").exists()
    (disk / "filler").unlink()
    assert specpatch("rollback", "--target", str(target), recipes=recipes).returncode == OK
    assert snapshot(target) == original


def test_a_rollback_over_an_immutable_file_is_refused_before_it_touches_a_file(site, tmp_path):
    recipes = recipe(tmp_path / "r", TWO_FILES)
    original = snapshot(site)
    assert specpatch("apply", "case", "--target", str(site), "--no-smoke", recipes=recipes).returncode == OK
    patched = snapshot(site)
    path = site / SERVER_ARGS
    assert _chattr("+i", path), "chattr +i is needed for this test (root on a file system that has it)"
    try:
        done = specpatch("rollback", "--target", str(site), recipes=recipes)
        assert_error(done, BAD_INPUT, "immutable", "nothing was rolled back", "server_args.py")
        assert snapshot(site) == patched
    finally:
        _chattr("-i", path)
    assert specpatch("rollback", "--target", str(site), recipes=recipes).returncode == OK
    assert snapshot(site) == original


@pytest.mark.parametrize("damage", [
    lambda e: e.pop("files"),  # rollback said "rolled back: 0 files" on a patched tree, and swept the backups
    lambda e: e.update(files=[]),
    lambda e: e.update(params=[1]),
    lambda e: e["files"][0].update(sha_after=None),
    lambda e: e["files"][0].update(sha_after=float("nan")),
    lambda e: e.update(seq="1"),
])
def test_an_entry_of_the_wrong_shape_is_a_damaged_state_folder_and_nothing_is_swept(site, tmp_path, damage):
    recipes = recipe(tmp_path / "r", ONE)
    done = specpatch("apply", "case", "--target", str(site), "--no-smoke", recipes=recipes)
    assert done.returncode == 0, done.stderr
    path = site / ".specpatch" / "ledger.json"
    data = json.loads(path.read_text())
    damage(data["applied"][0])
    path.write_text(json.dumps(data))
    tree, records = snapshot(site), sorted(p.name for p in (site / ".specpatch" / "records").iterdir())
    for args in (("status",), ("check", "case"), ("verify", "--no-smoke"), ("rollback",)):
        done = specpatch(*args, "--target", str(site), recipes=recipes)
        assert done.returncode == BAD_INPUT and "is damaged" in done.stderr, (args, done.returncode, done.stderr)
    assert snapshot(site) == tree
    assert sorted(p.name for p in (site / ".specpatch" / "records").iterdir()) == records


def test_a_ledger_nested_too_deeply_is_a_damaged_state_folder(site, tmp_path):
    recipes = recipe(tmp_path / "r", ONE)
    (site / ".specpatch").mkdir()
    (site / ".specpatch" / "ledger.json").write_text("[" * 100000 + "]" * 100000)
    done = specpatch("status", "--target", str(site), recipes=recipes)
    assert done.returncode == BAD_INPUT and "nested too deeply" in done.stderr, done.stderr


def test_apply_over_a_hand_edit_of_its_own_code_is_drift_not_a_second_copy(site, tmp_path):
    # a hostile round: an operator put a line between the anchor and the inserted statement; the second apply
    # inserted the statement again (the effect doubled), exit 0
    recipes = recipe(tmp_path / "r", """\
        steps:
          - op: insert_statements
            file: srt/server_args.py
            function: ServerArgs.__post_init__
            at: start
            code: self.team_budget = 2
        """)
    assert_error(specpatch("apply", "case", "--target", str(site), "--no-smoke", recipes=recipes), OK)
    path = site / SERVER_ARGS
    text = path.read_text()
    path.write_text(text.replace("        self.team_budget = 2\n", "        self.team_budget = 3\n", 1))
    edited = snapshot(site)
    assert_error(specpatch("apply", "case", "--target", str(site), "--no-smoke", recipes=recipes), DRIFT,
                 "changed since (by hand?)", "`sglang/srt/server_args.py`")
    assert snapshot(site) == edited


def test_apply_over_a_hand_edited_value_of_its_own_code_that_now_refuses_is_drift_not_a_conflict(site, tmp_path):
    # a hostile round: an operator changed the default the recipe's field has (8 -> 16); the next apply said
    # "conflict ... roll back the other recipe" (exit 3), where check said drift (5)
    recipes = recipe(tmp_path / "r", """\
        steps:
          - op: add_dataclass_field
            file: srt/server_args.py
            class: ServerArgs
            after: port
            code: "team_budget: int = 8"
        """)
    assert_error(specpatch("apply", "case", "--target", str(site), "--no-smoke", recipes=recipes), OK)
    path = site / SERVER_ARGS
    path.write_text(path.read_text().replace("team_budget: int = 8", "team_budget: int = 16", 1))
    edited = snapshot(site)
    assert_error(specpatch("apply", "case", "--target", str(site), "--no-smoke", recipes=recipes), DRIFT,
                 "changed since (by hand?)", "no longer find their own code")
    assert_error(specpatch("check", "case", "--target", str(site), recipes=recipes), DRIFT)
    assert snapshot(site) == edited


def test_an_edited_recipe_that_cannot_apply_over_its_own_earlier_code_says_to_roll_it_back(site, tmp_path):
    # hostile round 13 (newcomer 05): the recipe's default edited after its apply; the next apply said "remove the
    # local change or roll back the other recipe", where there is neither
    text = """\
        steps:
          - op: add_dataclass_field
            file: srt/server_args.py
            class: ServerArgs
            after: port
            code: "team_budget: int = 8"
        """
    assert_error(specpatch("apply", "case", "--target", str(site), "--no-smoke", recipes=recipe(tmp_path / "r", text)),
                 OK)
    applied = snapshot(site)
    edited = recipe(tmp_path / "r2", text.replace("= 8", "= 16"))
    for dry in ((), ("--dry-run",)):
        assert_error(specpatch("apply", "case", "--target", str(site), "--no-smoke", *dry, recipes=edited),
                     CANNOT_APPLY, "case is applied here already, as the recipe was then", "specpatch rollback case")
    assert snapshot(site) == applied


def test_a_later_recipe_on_the_same_file_is_no_hand_edit_for_the_first_ones_upgrade(site, tmp_path):
    # a review: team-utils v1, then another recipe on the same file, then team-utils v2: refused as drift (5),
    # though verify and check said the tree was as the ledger has it
    first = """\
        steps:
          - op: insert_statements
            file: srt/server_args.py
            function: ServerArgs.__post_init__
            at: start
            code: self.team_a = 1
        """
    recipes = recipe(tmp_path / "r", first, name="teama")
    recipe(tmp_path / "r", first.replace("team_a", "team_b"), name="teamb")
    for name in ("teama", "teamb"):
        assert_error(specpatch("apply", name, "--target", str(site), "--no-smoke", recipes=recipes), OK)
    second = ("          - op: insert_statements\n            file: srt/server_args.py\n"
              "            function: ServerArgs.__post_init__\n            at: start\n            code: self.team_a2 = 2\n")
    first = first.rstrip(" ")
    recipe(tmp_path / "r", first + second, name="teama")  # its next version
    assert_error(specpatch("apply", "teama", "--target", str(site), "--no-smoke", recipes=recipes), OK)
    # and a real hand edit next to its code is still drift
    path = site / SERVER_ARGS
    path.write_text(path.read_text().replace("        self.team_a2 = 2\n", "        self.team_a2 = 3\n", 1))
    recipe(tmp_path / "r", first + second + second.replace("team_a2 = 2", "team_a3 = 3"), name="teama")
    assert_error(specpatch("apply", "teama", "--target", str(site), "--no-smoke", recipes=recipes), DRIFT)


# --------------------------------------------------------------------------------------------------- hostile round 10


def _applied(site: Path, tmp_path: Path) -> Path:
    recipes = recipe(tmp_path / "r", ONE)
    assert_error(specpatch("apply", "case", "--target", str(site), "--no-smoke", recipes=recipes), OK)
    return recipes


def test_a_records_folder_that_is_a_link_is_damage_and_nothing_behind_it_is_removed(site, tmp_path):
    # the sweep of leftover record folders followed a `records` link (backups moved to another disk) and removed
    # the folders it found there, outside the target, with exit 0
    recipes = _applied(site, tmp_path)
    state = site / ".specpatch"
    elsewhere = tmp_path / "elsewhere"
    shutil.move(str(state / "records"), str(elsewhere))
    (elsewhere / "projectA").mkdir()
    (state / "records").symlink_to(elsewhere)
    done = specpatch("verify", "--target", str(site), "--no-smoke", recipes=recipes)
    assert_error(done, BAD_INPUT, "is not a folder of the state folder")
    assert (elsewhere / "projectA").is_dir()


def test_backups_the_ledger_lost_are_damage_not_leftovers_to_remove(site, tmp_path):
    # ledger.json gone (or another target's copied in): "nothing to verify", exit 0, and every backup of the
    # original bytes removed while the files stayed patched
    recipes = _applied(site, tmp_path)
    state = site / ".specpatch"
    records = sorted(p.name for p in (state / "records").iterdir())
    (state / "ledger.json").unlink()
    done = specpatch("verify", "--target", str(site), "--no-smoke", recipes=recipes)
    assert_error(done, BAD_INPUT, "ledger.json is missing")
    assert sorted(p.name for p in (state / "records").iterdir()) == records


def test_the_state_folders_gitignore_is_never_written_through_a_link(site, tmp_path):
    recipes = recipe(tmp_path / "r", ONE)
    (site / ".specpatch").mkdir()
    (site / ".specpatch" / ".gitignore").symlink_to(tmp_path / "outside-made")
    done = specpatch("apply", "case", "--target", str(site), "--no-smoke", recipes=recipes)
    assert_error(done, BAD_INPUT, "is not a regular file (or is a link)")
    assert not (tmp_path / "outside-made").exists()


def test_a_backup_is_readable_by_whom_the_file_is_no_more(site, tmp_path):
    (site / SERVER_ARGS).chmod(0o600)
    _applied(site, tmp_path)
    backups = [p for p in (site / ".specpatch" / "records").rglob("server_args.py")]
    assert backups and all(p.stat().st_mode & 0o077 == 0 for p in backups), [oct(p.stat().st_mode) for p in backups]
