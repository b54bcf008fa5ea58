"""replace_statements: one statement or a run, at any depth, matched as code; empty replacement; wrapping."""

from __future__ import annotations

from op_helpers import cannot, check, op, unchanged

from patcher.errors import AnchorAmbiguous, AnchorNotFound, Conflict, ReadBeforeSet


def rep(match: str, code: str = "", within: str | None = "W.f", **extra):
    return op("replace_statements", match=match, code=code, **({"within": within} if within else {}), **extra)


BEFORE = """
    class W:
        def f(self, batch):
            # about prepare
            self.prepare(batch)
            if batch.big:
                out = self.verify(batch, mode=1)
            else:
                out = None
            return out
    """


def test_one_statement_in_a_nested_block_ignoring_formatting():
    check(rep("out = self.verify(batch,\n    mode=1)  # formatted otherwise", "out = self.verify(batch, mode=2)"),
          BEFORE, """
        class W:
            def f(self, batch):
                # about prepare
                self.prepare(batch)
                if batch.big:
                    out = self.verify(batch, mode=2)
                else:
                    out = None
                return out
        """)


def test_a_compound_statement_and_the_comment_above_stays():
    check(rep("self.prepare(batch)\nif batch.big:\n    out = self.verify(batch, mode=1)\nelse:\n    out = None",
              "out = self.verify(batch, mode=1) if batch.big else None"), BEFORE, """
        class W:
            def f(self, batch):
                # about prepare
                out = self.verify(batch, mode=1) if batch.big else None
                return out
        """)


def test_wrapping_the_match():
    check(rep("self.prepare(batch)", "with self.lock:\n    self.prepare(batch)"), BEFORE, """
        class W:
            def f(self, batch):
                # about prepare
                with self.lock:
                    self.prepare(batch)
                if batch.big:
                    out = self.verify(batch, mode=1)
                else:
                    out = None
                return out
        """)


def test_empty_code_deletes_and_a_second_run_finds_it_gone():
    check(rep("self.prepare(batch)"), BEFORE, """
        class W:
            def f(self, batch):
                if batch.big:
                    out = self.verify(batch, mode=1)
                else:
                    out = None
                return out
        """)


def test_insertion_with_context_keeps_blank_lines_of_the_code():
    check(rep("self.prepare(batch)", "self.prepare(batch)\n\nself.count += 1"), BEFORE, """
        class W:
            def f(self, batch):
                # about prepare
                self.prepare(batch)

                self.count += 1
                if batch.big:
                    out = self.verify(batch, mode=1)
                else:
                    out = None
                return out
        """)


def test_module_level_without_within():
    check(rep("X = 1", "X = 2", within=None), """
        import os
        X = 1
        def f():
            Y = 1
        """, """
        import os
        X = 2
        def f():
            Y = 1
        """)


def test_already_applied_up_to_comments():
    unchanged(rep("out = None", "out = 0"), BEFORE.replace("out = None", "out = (0)  # done"))


def test_near_miss_other_code_is_not_touched_and_candidates_are_named():
    cannot(rep("out = self.verify(batch, mode=3)", "out = 1"), BEFORE, AnchorNotFound,
           mentions=("W.f",), candidates=("out = self.verify(batch, mode=1)",))


def test_near_miss_in_another_class():
    cannot(rep("self.prepare(batch)", within="V.f"), BEFORE, AnchorNotFound, mentions=("V",))


def test_ambiguous_run():
    cannot(rep("x = 1", "x = 2", within=None), """
        def f():
            x = 1
        def g():
            x = 1
        """, AnchorAmbiguous, candidates=("x = 1",))


def test_an_added_statement_already_elsewhere_is_a_conflict_unless_allowed():
    before = """
        def f(self):
            self.a()
            if x:
                self.b()
        """
    cannot(rep("self.a()", "self.a()\nself.b()", within="f"), before, Conflict, mentions=("self.b()",),
           candidates=("self.b()",))
    check(rep("self.a()", "self.a()\nself.b()", within="f", if_present_elsewhere="apply"), before, """
        def f(self):
            self.a()
            self.b()
            if x:
                self.b()
        """)


def test_emptying_a_block_is_refused():
    cannot(rep("out = None"), BEFORE, Conflict, mentions=("empty block",))


def test_a_change_of_comments_only_is_told_apart_by_the_text():
    check(rep("out = None", "out = None  # nothing to verify"), BEFORE,
          BEFORE.replace("out = None", "out = None  # nothing to verify"))


# ------------------------------------------------------------------ by its header: a block of `...`

WITH = """
    class P:
        def __init__(self, size):
            with (
                use_pool(self.pool)
                if self.pool
                else nullcontext()
            ):
                self.buf = [zeros(size) for _ in range(3)]
            self.done = True
    """


def test_a_header_is_replaced_and_the_block_kept_as_the_release_has_it():
    step = rep("with (use_pool(self.pool) if self.pool else nullcontext()):\n    ...",
               "with (\n    (use_pool(self.pool) if self.pool else nullcontext()),\n    region(KV),\n):\n    ...",
               within="P.__init__")
    # upstream edited the block (`size` became `buf_size + 1`): the header still matches
    check(step, WITH.replace("zeros(size)", "zeros(size + 1)"), """
        class P:
            def __init__(self, size):
                with (
                    (use_pool(self.pool) if self.pool else nullcontext()),
                    region(KV),
                ):
                    self.buf = [zeros(size + 1) for _ in range(3)]
                self.done = True
        """)


def test_a_def_renamed_by_its_header_onto_a_name_the_block_defines_is_a_conflict():
    # a hostile round: `def old(self): ...` -> `def new(self): ...` where the release's class already has its own
    # `new`: applied, the class defined `new` twice and upstream's, later in the body, silently won
    step = op("replace_statements", within="A", match="def old(self):\n    ...\n", code="def new(self):\n    ...\n")
    cannot(step, """
        class A:
            def old(self):
                return 1

            def new(self):
                return 2
        """, Conflict, mentions=("already defines `new`",))
    check(step, """
        class A:
            def old(self):
                return 1
        """, """
        class A:
            def new(self):
                return 1
        """)


def test_a_header_keeps_the_else_arm_and_refuses_when_gone_or_ambiguous():
    before = """
        def f(x):
            if x > 1:
                a = 1
            else:
                a = 2
            return a
        """
    check(rep("if x > 1:\n    ...", "if x > 2:\n    ...", within="f"), before, """
        def f(x):
            if x > 2:
                a = 1
            else:
                a = 2
            return a
        """)
    cannot(rep("if x > 5:\n    ...", "if x > 2:\n    ...", within="f"), before, AnchorNotFound,
           candidates=("if x > 1:",))
    twice = before.replace("return a", "if x > 1:\n                a = 3\n            return a")
    cannot(rep("if x > 1:\n    ...", "if x > 2:\n    ...", within="f"), twice, AnchorAmbiguous)


def test_a_literal_stub_body_is_still_a_header_and_code_that_is_not_a_header_matches_exactly():
    before = """
        def f(x):
            with a():
                y = 1
        """
    # `code` is not a header: the match is the statement with `...` as its body, which is not there
    cannot(rep("with a():\n    ...", "with b():\n    y = 1", within="f"), before, AnchorNotFound)
    check(rep("with a():\n    ...", "with a(), b():\n    ...", within="f"), before, """
        def f(x):
            with a(), b():
                y = 1
        """)


def test_a_new_header_leaves_the_docstring_of_the_block_it_keeps_where_it_is():
    # a decorator added to a method whose docstring spans lines: the docstring is the release's, not moved right
    step = rep("def prepare(\n    self, path: str\n) -> str:\n    ...", "@traced\ndef prepare(\n    self, path: str\n) -> str:\n    ...",
               within="L")
    check(step, '''
        class L:
            def prepare(
                self, path: str
            ) -> str:
                """Prepare the weights.

                Downloads them first."""
                return path
        ''', '''
        class L:
            @traced
            def prepare(
                self, path: str
            ) -> str:
                """Prepare the weights.

                Downloads them first."""
                return path
        ''')


def test_a_method_the_class_already_defines_is_never_added_a_second_time():
    # `code` keeps the matched method and adds two after it; the release already has one of them, in its own form
    step = rep("def infos(self):\n    return 1", "def infos(self):\n    return 1\n\n"
               "def get_copy(self, idx):\n    return idx\n\ndef load_copy(self, idx):\n    return idx\n",
               within="P", if_present_elsewhere="apply")
    cannot(step, """
        class P:
            def infos(self):
                return 1

            def get_copy(self, idx, extra=None):
                return (idx, extra)
        """, Conflict, mentions=("already defines `get_copy`",), candidates=("def get_copy",))
    # the same code there (up to comments), or nothing there: the methods are added
    check(step, """
        class P:
            def infos(self):
                return 1

            def get_copy(self, idx):  # upstream's own copy
                return idx
        """, """
        class P:
            def infos(self):
                return 1

            def get_copy(self, idx):
                return idx

            def load_copy(self, idx):
                return idx

            def get_copy(self, idx):  # upstream's own copy
                return idx
        """)
    check(step, """
        class P:
            def infos(self):
                return 1
        """, """
        class P:
            def infos(self):
                return 1

            def get_copy(self, idx):
                return idx

            def load_copy(self, idx):
                return idx
        """)


# ------------------------------------------------------------------ inside: the block named by its header

CHAIN = """
    class W:
        def f(self, polls):
            for req, poll in polls:
                if req.skip:
                    undone.append(req)
                    continue
                if poll in [Poll.Waiting, Poll.Sending]:
                    undone.append(req)
                elif poll == Poll.Done:
                    done.append(req)
                else:
                    undone.append(req)
    """

TIMED = "if late(req):\n    done.append(req)\nelse:\n    undone.append(req)"


def test_inside_replaces_the_statement_of_that_block_only_and_finds_it_applied():
    rep_in = rep("undone.append(req)", TIMED, inside="if poll in [Poll.Waiting, Poll.Sending]:")
    # without `inside`, three statements match
    cannot(rep("undone.append(req)", TIMED), CHAIN, AnchorAmbiguous, mentions=("3 runs",))
    check(rep_in, CHAIN, CHAIN.replace(
        "                if poll in [Poll.Waiting, Poll.Sending]:\n                    undone.append(req)\n",
        "                if poll in [Poll.Waiting, Poll.Sending]:\n                    if late(req):\n"
        "                        done.append(req)\n                    else:\n                        undone.append(req)\n"))


def test_inside_matches_an_elif_arm_after_upstream_reordered_the_chain():
    reordered = CHAIN.replace(
        "                if poll in [Poll.Waiting, Poll.Sending]:\n                    undone.append(req)\n"
        "                elif poll == Poll.Done:\n                    done.append(req)\n",
        "                if poll == Poll.Done:\n                    self.release(req)\n                    done.append(req)\n"
        "                elif poll in [Poll.Waiting,\n                              Poll.Sending]:  # in flight\n"
        "                    undone.append(req)\n")
    check(rep("undone.append(req)", TIMED, inside="if poll in [Poll.Waiting, Poll.Sending]:"), reordered,
          reordered.replace("  # in flight\n                    undone.append(req)\n",
                            "  # in flight\n                    if late(req):\n                        done.append(req)\n"
                            "                    else:\n                        undone.append(req)\n"))


def test_inside_refuses_naming_a_missing_or_ambiguous_header():
    cannot(rep("undone.append(req)", TIMED, inside="if poll == Poll.Sending:"), CHAIN, AnchorNotFound,
           mentions=("no block `if poll == Poll.Sending:`", "`W.f`"))
    twice = CHAIN.replace("                if req.skip:", "                if poll == Poll.Done:\n"
                          "                    pass\n                if req.skip:")
    cannot(rep("done.append(req)", "", inside="elif poll == Poll.Done:"), twice, AnchorAmbiguous,
           mentions=("2 blocks have the header `elif poll == Poll.Done:`",))
    # the block is there but does not hold the statements
    cannot(rep("done.append(req)", "x = 1", inside="if poll in [Poll.Waiting, Poll.Sending]:"), CHAIN,
           AnchorNotFound, mentions=("inside `if poll in [Poll.Waiting, Poll.Sending]:`",))


def test_inside_else_is_the_else_right_after_the_arm():
    check(rep("undone.append(req)", "stay(req)", inside="elif poll == Poll.Done:", inside_else=True), CHAIN,
          CHAIN.replace("                else:\n                    undone.append(req)\n",
                        "                else:\n                    stay(req)\n"))


def test_a_field_the_class_already_binds_is_never_added_a_second_time():
    # a hostile port: the hunk added `routed_experts_output` beside `next_draft_input`; the later release has that
    # field elsewhere in the dataclass, in its own form: replacing `next_draft_input` by both gave the field twice
    step = rep("next_draft_input: Optional[int] = None",
               "next_draft_input: Optional[int] = None\n\nrouted_experts_output: Optional[list] = None\n",
               within="Result", if_present_elsewhere="apply")
    cannot(step, """
        @dataclass
        class Result:
            next_draft_input: Optional[int] = None
            other: int = 0
            routed_experts_output: Optional["RoutedExpertsOutput"] = None
        """, Conflict, mentions=("already binds `routed_experts_output`",),
           candidates=("routed_experts_output: Optional[\"RoutedExpertsOutput\"] = None",))
    # a module constant too; a function's local variable is rebound as code does, not a conflict
    cannot(rep("A = 1", "A = 1\nB = 2", within=None, if_present_elsewhere="apply"), """
        A = 1
        B = 3
        """, Conflict, mentions=("already binds `B`",))
    check(rep("a = 1", "a = 1\nb = 2", within="f", if_present_elsewhere="apply"), """
        def f():
            a = 1
            b = 3
            return a + b
        """, """
        def f():
            a = 1
            b = 2
            b = 3
            return a + b
        """)


def test_a_removal_whose_statement_upstream_edited_is_not_already_applied():
    # a hostile round: the step removes `topk_output = dispatch_output.topk_output`; the next release has it as
    # `topk_output = dispatch_output.topk_output.to(x)`: "no run matches" read as "already removed"
    step = rep("topk_output = dispatch_output.topk_output", "", within="f")
    cannot(step, """
        def f(dispatch_output, x):
            topk_output = dispatch_output.topk_output.to(x)
            return topk_output
        """, AnchorNotFound, mentions=("upstream may have edited it",),
           candidates=("topk_output = dispatch_output.topk_output.to(x)",))
    # another statement binding the name, unlike the removed one, and a release without it: already applied
    unchanged(step, """
        def f(dispatch_output, x):
            topk_output = compute_topk(x, k=8, renormalize=True)
            return topk_output
        """)
    unchanged(step, """
        def f(dispatch_output, x):
            return x
        """)


def test_a_comment_change_does_not_bring_back_the_base_wording_over_upstreams():
    # a hostile round (trtllm_mla_backend.py h2 on 0.5.12): the step rewrites only a comment; matched "up to
    # comments", it replaced upstream's newer wording (`num_correct_drafts_per_req`) with the patch's
    step = rep("n = self.count(batch)  # num_accepted_drafts_per_req", "n = self.count(batch)  # accepted drafts",
               within="W.f")
    base = """
        class W:
            def f(self, batch):
                n = self.count(batch)  # num_accepted_drafts_per_req
                return n
        """
    check(step, base, base.replace("# num_accepted_drafts_per_req", "# accepted drafts"))
    cannot(step, base.replace("num_accepted_drafts_per_req", "num_correct_drafts_per_req"), AnchorNotFound,
           mentions=("upstream reworded them",), candidates=("n = self.count(batch)",))


def test_a_removal_whose_statements_upstream_moved_into_a_helper_is_not_already_applied():
    # a hostile round: the patch removes `del d["y"]` from `f`; upstream moved that statement into `_cleanup(d)`,
    # which `f` calls: "already applied", and the release still deleted "y"
    step = op("replace_statements", within="f", match='del d["y"]\n', code="")
    cannot(step, """
        def _cleanup(d):
            del d["y"]


        def f(d):
            d.pop("x", None)
            _cleanup(d)
            return d
        """, AnchorNotFound, mentions=("the module has them in `_cleanup`",))
    unchanged(step, """
        def f(d):
            d.pop("x", None)
            return d
        """)


def test_an_import_the_replacement_adds_of_a_name_the_module_defines_is_a_conflict():
    # a hostile round: `import os` -> `import os` + `from sglang.srt.utils import get_device`; the release defines
    # its own `def get_device()` below: applied, the def rebound the import and `run()` called the wrong function
    step = op("replace_statements", match="import os\n",
              code="import os\n\nfrom sglang.srt.utils import get_device\n")
    cannot(step, """
        import os


        def get_device():
            return "cpu"
        """, Conflict, mentions=("already defines `get_device`",))
    check(step, """
        import os


        def run():
            return os.sep
        """, """
        import os

        from sglang.srt.utils import get_device


        def run():
            return os.sep
        """)


def test_a_property_setter_the_block_already_has_is_not_added_a_second_time():
    # a hostile round: getter -> getter + setter, on a release with its own `@x.setter` further down: two setters,
    # upstream's won, and the patch's was dead code (getter, setter and deleter share one name)
    step = op("replace_statements", within="A",
              match="@property\ndef x(self):\n    return self._x\n",
              code="@property\ndef x(self):\n    return self._x\n\n@x.setter\ndef x(self, v):\n    self._x = v\n")
    cannot(step, """
        class A:
            @property
            def x(self):
                return self._x

            @x.setter
            def x(self, v):
                self._x = int(v)
        """, Conflict, mentions=("already defines `x`",))
    check(step, """
        class A:
            @property
            def x(self):
                return self._x
        """, """
        class A:
            @property
            def x(self):
                return self._x

            @x.setter
            def x(self, v):
                self._x = v
        """)


def test_a_removal_from_a_block_whose_statement_another_step_put_elsewhere_in_the_function_is_already_applied():
    # slime's patch moves `state.last = x` out of `if n > 0:` (removed there, inserted below): on the recipe's own
    # result, the removal must read as applied (the statement is in its function, not moved to another one)
    step = op("replace_statements", within="f", inside="if n > 0:", match="state.last = x\n", code="")
    unchanged(step, """
        def f(state, n, x):
            if n > 0:
                state.n = n
            state.last = x
        """)


def test_statements_upstream_moved_to_another_function_are_named_there():
    err = cannot(op("replace_statements", within="Sched.step", match="self.tokens += out.num_tokens",
                    code="self.tokens += out.num_tokens + 1"), """
        class Sched:
            def step(self, batch):
                out = self.run(batch)
                self._after_forward(out)

            def _after_forward(self, out):
                self.tokens += out.num_tokens
        """, AnchorNotFound)
    assert "`self.tokens += out.num_tokens` in `Sched._after_forward`" in [c.text for c in err.candidates], \
        err.candidates


def test_a_header_upstream_decorated_is_named_by_its_def_line():
    # a hostile round: `def f(self, n):` -> `async def f(self, n) -> int:` on a release that decorated f: the near
    # candidate was `def g(self):`, the decorator line of f not looking like a header
    err = cannot(op("replace_statements", within="A", match="def f(self, n): ...",
                    code="async def f(self, n) -> int: ..."), """
        class A:
            @functools.lru_cache(maxsize=None)
            def f(self, n):
                return n

            def g(self):
                return self.f(1)
        """, AnchorNotFound)
    assert [c.text for c in err.candidates][0] == "`def f(self, n):`", err.candidates


def test_a_header_that_makes_a_parameter_required_where_a_call_of_the_module_does_not_pass_it_is_a_conflict():
    # a hostile round: `name="k"` -> `name` in Key.__init__'s header while the module calls `Key()`: TypeError
    step = op("replace_statements", within="Key", match="def __init__(self, name='k'):\n    ...\n",
              code="def __init__(self, name):\n    ...\n")
    before = "class Key:\n    def __init__(self, name='k'):\n        self.name = name\n\n\nDEFAULT = Key()\n"
    err = cannot(step, before, Conflict)
    assert "`Key()` does not pass `name`" in err.message
    fine = before.replace("DEFAULT = Key()", "DEFAULT = Key('x')")
    check(step, fine, fine.replace("name='k'", "name"))


def test_a_removal_is_not_done_where_upstream_called_the_same_method_on_another_receiver():
    # a hostile round: `torch.cuda.synchronize()` became `torch.get_device_module(self.device).synchronize()`
    # upstream (as sglang did); removing the first was "already applied" and the sync still ran
    step = op("replace_statements", within="Runner.forward", match="torch.cuda.synchronize()", code="")
    before = ("import torch\n\n\nclass Runner:\n    def forward(self, batch):\n        out = self.model(batch)\n"
              "        torch.get_device_module(self.device).synchronize()\n        return out\n")
    err = cannot(step, before, AnchorNotFound)
    assert "upstream may have edited it" in err.message, err.message
    # another root (`stream`), or another method: gone is gone
    unchanged(step, before.replace("torch.get_device_module(self.device)", "stream"))
    unchanged(step, before.replace("synchronize()", "empty_cache()"))
    # two attributes of an instance are two objects: removing `self.topk_p.zero_()` beside `self.out.zero_()`
    # (a real 0.5.9 case, EAGLEDraftCudaGraphRunner.replay) is done; and an insertion is not judged so
    zero = op("replace_statements", within="Runner.forward", match="self.topk_p.zero_()", code="")
    unchanged(zero, before.replace("torch.get_device_module(self.device).synchronize()", "self.out.zero_()"))
    put = op("insert_statements", function="Runner.forward", at="before", match="return out",
             code="self.topk_p.zero_()")
    check(put, before.replace("torch.get_device_module(self.device).synchronize()", "self.out.zero_()"),
          before.replace("torch.get_device_module(self.device).synchronize()",
                         "self.out.zero_()\n        self.topk_p.zero_()"))


def test_removing_a_call_beside_the_same_call_on_another_named_object_is_done():
    # a review (sglang 0.5.9's server_args: `envs.SGLANG_NSA_FORCE_MLA.set(True)` beside another env var's
    # `.set(True)`): the removal's second run took the other for an edit of it, and the first apply was refused
    before = ("from sglang.srt.environ import envs\n\n\ndef f():\n    envs.SGLANG_A.set(True)\n"
              "    envs.SGLANG_B.set(True)\n")
    step = op("replace_statements", within="f", match="envs.SGLANG_A.set(True)", code="")
    check(step, before, before.replace("    envs.SGLANG_A.set(True)\n", ""))


def test_the_code_elsewhere_beside_the_match_with_another_literal_is_not_applied():
    # hostile round 12 (a newcomer): `match` with a typo ("Enabled" for "Enable"), `code: pass`; the function's
    # unrelated `except ImportError: pass` made it "already applied", exit 0, and the warning stayed
    before = ("def handle(self):\n    if self.target is not None:\n        logger.warning(\"Enable it.\")\n"
              "    try:\n        import deep_gemm\n    except ImportError:\n        pass\n")
    step = op("replace_statements", within="handle", match='logger.warning("Enabled it.")', code="pass")
    err = cannot(step, before, AnchorNotFound)
    assert "with other literal values" in err.message and "Enable it." in str(err.candidates), err.message
    # the step as written for this release applies, and is then applied; another callee is no edited form of it
    right = op("replace_statements", within="handle", match='logger.warning("Enable it.")', code="pass")
    after = before.replace('logger.warning("Enable it.")', "pass")
    check(right, before, after)
    unchanged(right, after)
    unchanged(step, after.replace("        pass\n    try", '        logger.info("Enabled it.")\n    try'))


def test_a_sibling_with_another_literal_beside_the_code_is_no_evidence_against_it():
    # the rule above, beside the code: a warning left alone next to the one that became `pass`, or in the other arm
    # of its `if`, is a sibling; the step applies, and is then applied (a second apply changes nothing)
    for before in ('def f(a):\n    logger.warning("A")\n    logger.warning("B")\n',
                   'def f(a):\n    if a:\n        logger.warning("A")\n    else:\n        logger.warning("B")\n',
                   'def f(a):\n    try:\n        logger.warning("A")\n    except E:\n        logger.warning("B")\n'):
        step = op("replace_statements", within="f", match='logger.warning("A")', code="pass")
        after = before.replace('logger.warning("A")', "pass")
        check(step, before, after)
        unchanged(step, after)


def test_siblings_of_the_same_shape_in_other_blocks_are_no_evidence_against_the_code():
    # review 12: `self.chunked_prefill_size = 16384` -> `32768` in one GPU tier of sglang 0.5.9's
    # `_handle_gpu_memory_settings` was refused on its second run (the other tiers' values read as "the match with
    # other literal values"), and so was silencing one of a function's warnings
    tiers = ("def tune(self, mem):\n    if mem < 20:\n        self.chunk = 2048\n    elif mem < 60:\n"
             "        self.chunk = 8192\n    else:\n        self.chunk = 16384\n")
    step = op("replace_statements", within="tune", match="self.chunk = 16384", code="self.chunk = 32768")
    check(step, tiers, tiers.replace("16384", "32768"))
    unchanged(step, tiers.replace("16384", "32768"))
    warnings = ('def handle(self):\n    if self.a:\n        logger.warning("Radix cache is disabled because of a.")\n'
                '    if self.b:\n        logger.warning("Overlap schedule is turned off for b.")\n')
    silence = op("replace_statements", within="handle", code="pass",
                 match='logger.warning("Radix cache is disabled because of a.")')
    check(silence, warnings, warnings.replace('logger.warning("Radix cache is disabled because of a.")', "pass"))
    unchanged(silence, warnings.replace('logger.warning("Radix cache is disabled because of a.")', "pass"))


def test_code_reading_a_local_set_only_below_or_on_one_branch_above_is_refused():
    """Round 13, 26b: `return 0` -> `return v` where only `if flag:` binds `v` raises UnboundLocalError on the
    other way; what the replaced statements read already, or what every way binds, is fine."""
    before = """
        def pick(flag):
            if flag:
                v = 1
            else:
                u = 2
            if flag:
                print(v)
            w = 0
            late = 3
            return w
        """
    one_arm = op("replace_statements", within="pick", match="return w", code="return v")
    cannot(one_arm, before, ReadBeforeSet, mentions=("reads `v`", "in a branch"))
    cannot(op("replace_statements", within="pick", match="w = 0", code="w = late"), before, ReadBeforeSet,
           mentions=("reads `late`",))
    check(op("replace_statements", within="pick", match="print(v)", code="print(v, 1)"), before,
          before.replace("print(v)", "print(v, 1)"))  # the release reads `v` there already
    check(op("replace_statements", within="pick", match="w = 0", code="w = flag"), before,
          before.replace("w = 0", "w = flag"))
    both = before.replace("        u = 2", "        v = 2")
    check(op("replace_statements", within="pick", match="return w", code="return v"), both,
          both.replace("return w", "return v"))
    header = op("replace_statements", within="pick", match="if flag:\n    print(v)", code="if flag and w:\n    print(v)")
    cannot(header, before, ReadBeforeSet, mentions=("reads `w`",))
    cannot(op("replace_statements", within="pick", match="while flag:\n    ...", code="while w:\n    ..."), """
        def pick(flag):
            while flag:
                flag = 0
            w = 0
            return w
        """, ReadBeforeSet, mentions=("reads `w`",))


def test_a_replacement_reads_a_local_under_the_test_that_binds_it():
    before = """
        def decode(plan):
            if plan is not None:
                rank = plan.rank
            confidence = None
            return confidence
        """
    code = "if plan is not None:\n    plan.apply(rank)"
    check(op("replace_statements", within="decode", match="confidence = None", code=code), before,
          before.replace("confidence = None", "if plan is not None:\n                plan.apply(rank)"))


def test_wrapping_one_of_several_calls_that_differ_in_their_text_is_applied_once():
    """Hostile round 15, real code (01): vLLM 0.23's `AsyncLLM.encode` logs four `logger.info("Request %s ...")`;
    wrapping one in `if VERBOSE:` applied, then its second run took the others for an edited match."""
    before = """
        def encode(rid, log):
            try:
                return rid
            except ValueError:
                if log:
                    logger.info("Request %s aborted.", rid)
            except KeyError:
                if log:
                    logger.info("Request %s failed.", rid)
        """
    code = 'if VERBOSE:\n    logger.info("Request %s failed.", rid)'
    check(op("replace_statements", within="encode", match='logger.info("Request %s failed.", rid)', code=code),
          before, before.replace('                    logger.info("Request %s failed.", rid)',
                                 '                    if VERBOSE:\n'
                                 '                        logger.info("Request %s failed.", rid)'))
