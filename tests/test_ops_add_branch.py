"""add_branch: an `if CONDITION: return CALL` guard at the start of a function or of one arm of a matched `if`."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from op_helpers import cannot, check, op, unchanged

from patcher.errors import AnchorAmbiguous, AnchorNotFound, Conflict
from patcher.model import ValidationError
from patcher.operations.base import AlreadyApplied, Changed

EXTEND = "model_worker_batch.forward_mode.is_extend() or model_worker_batch.is_extend_in_batch"


def branch(**options):
    return op("add_branch", **{"function": "W.forward", "condition": "self.small(batch)",
                               "call": "self.plain(batch)", **options})


FORWARD = """
    class W:
        def forward(self, batch):
            if (
                batch.mode.is_extend()
                or batch.extend_in_batch
            ):
                return self.prefill(batch)
            else:
                # decode
                out = self.decode(batch)
                return out
    """


def test_start_of_function_after_docstring():
    check(branch(), """
        class W:
            def forward(self, batch):
                \"\"\"Docstring.\"\"\"
                return 1
        """, """
        class W:
            def forward(self, batch):
                \"\"\"Docstring.\"\"\"
                if self.small(batch):
                    return self.plain(batch)
                return 1
        """)


def test_else_arm_of_a_matched_if():
    check(branch(branch_if="batch.mode.is_extend() or batch.extend_in_batch"), FORWARD, """
        class W:
            def forward(self, batch):
                if (
                    batch.mode.is_extend()
                    or batch.extend_in_batch
                ):
                    return self.prefill(batch)
                else:
                    if self.small(batch):
                        return self.plain(batch)
                    # decode
                    out = self.decode(batch)
                    return out
        """)


def test_body_arm_with_wildcard_pattern():
    check(branch(branch_if="batch.mode.is_extend() or ...", arm="body"), FORWARD, """
        class W:
            def forward(self, batch):
                if (
                    batch.mode.is_extend()
                    or batch.extend_in_batch
                ):
                    if self.small(batch):
                        return self.plain(batch)
                    return self.prefill(batch)
                else:
                    # decode
                    out = self.decode(batch)
                    return out
        """)


def test_elif_chain_else_is_the_final_else_and_elif_tests_match():
    check(branch(branch_if="a"), """
        class W:
            def forward(self, batch):
                if a:
                    x = 1
                elif b:
                    x = 2
                else:
                    x = 3
        """, """
        class W:
            def forward(self, batch):
                if a:
                    x = 1
                elif b:
                    x = 2
                else:
                    if self.small(batch):
                        return self.plain(batch)
                    x = 3
        """)
    check(branch(branch_if="b", arm="body"), """
        class W:
            def forward(self, batch):
                if a:
                    x = 1
                elif b:
                    x = 2
        """, """
        class W:
            def forward(self, batch):
                if a:
                    x = 1
                elif b:
                    if self.small(batch):
                        return self.plain(batch)
                    x = 2
        """)


def test_multi_line_condition_is_parenthesized():
    check(branch(condition="batch.size() > 8\nand not batch.extend"), """
        class W:
            def forward(self, batch):
                return 1
        """, """
        class W:
            def forward(self, batch):
                if (
                    batch.size() > 8
                    and not batch.extend
                ):
                    return self.plain(batch)
                return 1
        """)


def test_already_applied_ignores_formatting():
    unchanged(branch(), """
        class W:
            def forward(self, batch):
                if (self.small(batch)):  # formatted differently
                    return self.plain(
                        batch
                    )
                return 1
        """)


def test_near_miss_similar_test_is_not_the_anchor_and_nested_defs_do_not_count():
    cannot(branch(branch_if="batch.mode.is_extend()"), """
        class W:
            def forward(self, batch):
                def inner():
                    if batch.mode.is_extend():
                        pass
                if batch.mode.is_extend() or batch.extend_in_batch:
                    return 1
                else:
                    return 2
        """, AnchorNotFound, mentions=("batch.mode.is_extend()", "W.forward"),
           candidates=("if batch.mode.is_extend() or batch.extend_in_batch:",))


def test_near_miss_guard_deeper_in_the_arm_is_not_applied():
    check(branch(), """
        class W:
            def forward(self, batch):
                x = 1
                if self.small(batch):
                    return self.plain(batch)
        """, """
        class W:
            def forward(self, batch):
                if self.small(batch):
                    return self.plain(batch)
                x = 1
                if self.small(batch):
                    return self.plain(batch)
        """)


def test_missing_else_arm():
    cannot(branch(branch_if="a"), """
        class W:
            def forward(self, batch):
                if a:
                    pass
        """, AnchorNotFound, mentions=("no `else` arm",), candidates=("if a:",))


def test_missing_function():
    cannot(branch(), """
        class W:
            def forwards(self, batch):
                pass
        """, AnchorNotFound, mentions=("forward",), candidates=("forwards",))


def test_ambiguous_if():
    cannot(branch(branch_if="batch.mode.is_extend() or ..."), """
        class W:
            def forward(self, batch):
                if batch.mode.is_extend() or a:
                    pass
                if batch.mode.is_extend() or b:
                    pass
        """, AnchorAmbiguous, candidates=("if batch.mode.is_extend() or a:", "if batch.mode.is_extend() or b:"))


def test_conflict_same_condition_other_body():
    cannot(branch(branch_if="a"), """
        class W:
            def forward(self, batch):
                if a:
                    pass
                else:
                    if self.small(batch):
                        return None
        """, Conflict, mentions=("if self.small(batch):",), candidates=("if self.small(batch):",))


def test_crlf():
    check(branch(branch_if="a"), """
        class W:
            def forward(self, batch):
                if a:
                    pass
                else:
                    pass
        """, """
        class W:
            def forward(self, batch):
                if a:
                    pass
                else:
                    if self.small(batch):
                        return self.plain(batch)
                    pass
        """, newline="\r\n")


def test_tabs_nested_in_with():
    check(branch(branch_if="a"), """
        class W:
            def forward(self, batch):
                with ctx:
                    if a:
                        pass
                    else:
                        pass
        """, """
        class W:
            def forward(self, batch):
                with ctx:
                    if a:
                        pass
                    else:
                        if self.small(batch):
                            return self.plain(batch)
                        pass
        """, tabs=True)


@pytest.mark.parametrize("options, message", [
    ({"arm": "body"}, "`arm` goes with `branch_if`"),
    ({"branch_if": "x = 1"}, "an expression"),
    ({"branch_if": "a or"}, "not valid Python"),
    ({"branch_if": "a", "arm": "elif"}, "body"),
])
def test_recipe_errors_at_load_time(options, message):
    with pytest.raises(ValidationError, match=message):
        branch(**options)


@pytest.mark.sglang
def test_sglang_059_forward_batch_generation(sglang_release):
    worker = sglang_release("0.5.9") / "sglang/srt/speculative/eagle_worker_v2.py"
    step = op("add_branch", function="EAGLEWorkerV2.forward_batch_generation", branch_if=EXTEND, arm="else",
              condition="self._spec_disabled_for(model_worker_batch)",
              call="self._forward_without_spec(model_worker_batch)")
    before = worker.read_text()
    out = step.apply(cst.parse_module(before))
    assert isinstance(out, Changed)
    anchor = "        else:\n            if model_worker_batch.spec_info is None:\n"
    assert before.count(anchor) == 1
    assert out.module.code == before.replace(anchor, (
        "        else:\n"
        "            if self._spec_disabled_for(model_worker_batch):\n"
        "                return self._forward_without_spec(model_worker_batch)\n"
        "            if model_worker_batch.spec_info is None:\n"))
    assert isinstance(step.apply(cst.parse_module(out.module.code)), AlreadyApplied)


def test_a_guard_in_a_generator_is_a_conflict():
    # `return CALL` ends a generator: the caller never sees the value (a @contextmanager raises "did not yield")
    from patcher.errors import Conflict

    step = op("add_branch", function="device_context", condition="device is None", call='torch.device("cpu")')
    cannot(step, """
        @contextmanager
        def device_context(device):
            with torch.device(device):
                yield
        """, Conflict, mentions=("generator",))
    # a nested generator does not make its parent one
    check(step, """
        def device_context(device):
            def gen():
                yield device
            return gen
        """, """
        def device_context(device):
            if device is None:
                return torch.device("cpu")
            def gen():
                yield device
            return gen
        """)


def test_a_guard_in_init_is_a_conflict():
    # a hostile round: `return self._init_default()` in `__init__`: TypeError "__init__() should return None"
    step = op("add_branch", function="Key.__init__", condition="name is None", call="self._init_default()")
    cannot(step, "class Key:\n    def __init__(self, name):\n        self.name = name\n", Conflict,
           mentions=("must return None",))
