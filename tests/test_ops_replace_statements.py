"""replace_statements: one statement or a run, at any depth, matched as code; empty replacement; wrapping."""

from __future__ import annotations

from op_helpers import cannot, check, op, unchanged

from patcher.errors import AnchorAmbiguous, AnchorNotFound, Conflict


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
