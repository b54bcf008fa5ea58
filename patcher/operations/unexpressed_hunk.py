"""`unexpressed_hunk`: a hunk of an imported patch that `specpatch import` could not express as a semantic edit.

Example (written by `specpatch import`, never by hand)::

    - op: unexpressed_hunk
      file: srt/layers/foo.py
      hunk: "@@ -120,7 +120,7 @@ class Foo:"
      reason: the hunk only changes comments
      diff_file: foo-h3.diff                      # the hunk's lines, for the person who ports it

The step always answers *cannot apply*, naming the hunk and why it was not expressed: a recipe with such a step is
never applied in part, and the hunk is never dropped silently. Replace the step by real operations (or delete it
once the change is not wanted) to make the recipe apply.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import libcst as cst

from ..errors import Candidate, HunkNotExpressed, Location
from ..model import option
from .base import CannotApply, Operation, Outcome, register


@register
@dataclass(frozen=True, kw_only=True)
class UnexpressedHunk(Operation):
    """Refuse: a hunk of an imported patch that is not expressed as semantic edits."""

    op: Literal["unexpressed_hunk"]
    hunk: str = option(description="the hunk's header in the patch, e.g. '@@ -120,7 +120,7 @@'")
    reason: str = option(default="", description="why the importer could not express it")
    diff: str = option(default="", description="the hunk's lines")

    def describe(self) -> str:
        return f"hunk `{self.hunk}` (not expressed: {self.reason or 'see the diff'})"

    def anchor(self) -> str:
        return self.hunk

    def apply(self, module: cst.Module) -> Outcome:
        lines = [ln for ln in self.diff.splitlines() if ln[:1] in "+-"][:3]
        return CannotApply(HunkNotExpressed(
            f"hunk `{self.hunk}` of the imported patch is not expressed as a semantic edit"
            + (f": {self.reason}" if self.reason else ""), candidates=[Candidate(ln) for ln in lines], location=Location(anchor=self.anchor())))
