"""The vocabulary of outcomes: every status a step, an apply, a file, a check or a command can have, the exit codes
with their meanings (the README's table is this table), and the one JSON encoding of every `--json` output.

Standard library only: the CLI imports it to build `--help`, which must stay fast. The statuses are `str` enums, so
a status compares equal to its string (`StepStatus.CHANGED == "changed"`), prints as it (`f"{status}"` is
`changed`) and is written to JSON as that string: the output of `--json` is the same as when they were strings.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import Any


class StrEnum(str, Enum):
    """`enum.StrEnum` for Python 3.10: a member is its value wherever a string is expected (format, str, JSON)."""

    __str__ = str.__str__
    __format__ = str.__format__

    @property
    def words(self) -> str:
        """The value for a human: `already_applied` -> `already applied`."""
        return self.value.replace("_", " ")


# --------------------------------------------------------------------------------------------------- statuses


class StepStatus(StrEnum):
    """What one step of a recipe does to its file (an operation's answer)."""

    CHANGED = "changed"
    ALREADY_APPLIED = "already_applied"  #: the equivalent code is there: nothing to do
    CANNOT_APPLY = "cannot_apply"  #: anchor missing or ambiguous, a conflicting definition


class ApplyOutcome(StrEnum):
    """What `apply` did (or, for a dry run, would do)."""

    CHANGED = "changed"  #: written and checked
    ALREADY_APPLIED = "already_applied"
    WOULD_CHANGE = "would_change"  #: a dry run that would write
    PLANNED = "planned"  #: planned, not written yet (only seen inside apply, before the commit)
    CANNOT_APPLY = "cannot_apply"
    REFUSED = "refused"  #: the release is refused by the recipe (its variant says what to do instead)
    VERIFY_FAILED = "verify_failed"  #: written, a check failed, rolled back


class FileBytes(StrEnum):
    """A file a ledger entry recorded, as it is on disk now (`transaction.file_states`)."""

    INTACT = "intact"  #: the patched bytes
    MODIFIED = "modified"
    MISSING = "missing"


class Transaction(StrEnum):
    """What a journal (a transaction in progress) does."""

    APPLY = "apply"
    ROLLBACK = "rollback"


class RecoveryOutcome(StrEnum):
    """What `recover` made of an interrupted transaction."""

    COMPLETED = "completed"  #: the apply was finished
    ROLLED_BACK = "rolled_back"  #: the files are original again


class FileVerdict(StrEnum):
    """`verify`: a recorded file, judged."""

    INTACT = "intact"
    DRIFT = "drift"  #: changed since apply, the recipe's edits still in it
    LOST = "lost"  #: missing, or the recipe's edits are gone from it


class CheckState(StrEnum):
    """`check`: is the recipe applied and intact?"""

    APPLIED = "applied"
    WOULD_CHANGE = "would_change"
    DRIFT = "drift"
    CANNOT_APPLY = "cannot_apply"
    REFUSED = "refused"
    UNFINISHED = "unfinished"  #: an interrupted apply or rollback is pending


class CheckKind(StrEnum):
    """What a verification check looks at."""

    SYNTAX = "syntax"
    IMPORT = "import"
    PROBE = "probe"


class CheckStatus(StrEnum):
    """The verdict of one verification check."""

    PASSED = "passed"
    FAILED = "failed"
    ENVIRONMENT = "environment"  #: the environment cannot run it (the pristine files fail the same way)
    SKIPPED = "skipped"
    TIMEOUT = "timeout"

    @property
    def blocking(self) -> bool:
        """Speaks against the patch."""
        return self in (CheckStatus.FAILED, CheckStatus.TIMEOUT)

    @property
    def ran(self) -> bool:
        """Ran to a verdict about the patch (what "verified" may claim)."""
        return self in (CheckStatus.PASSED, CheckStatus.FAILED, CheckStatus.TIMEOUT)


class TryOutcome(StrEnum):
    """`try`: the outcome on a pristine release."""

    APPLIED_AND_VERIFIED = "applied_and_verified"
    ALIAS_VERIFIED = "alias_verified"  #: the variant configures an upstream mechanism instead of patching one in
    APPLIED_NOT_VERIFIED = "applied_not_verified"
    REFUSED = "refused"
    CANNOT_APPLY = "cannot_apply"
    VERIFY_FAILED = "verify_failed"


class VariantKind(StrEnum):
    """What a recipe's variant does on its releases."""

    PATCH = "patch"  #: patches the change in
    ALIAS = "alias"  #: upstream ships the mechanism: the variant only maps the recipe's flag onto it


# --------------------------------------------------------------------------------------------------- exit codes


class ExitCode(IntEnum):
    """Process exit codes; their meanings are `EXIT_CODES`."""

    OK = 0
    INTERNAL = 1
    BAD_INPUT = 2
    CANNOT_APPLY = 3
    VERIFY_FAILED = 4
    DRIFT = 5
    LOCKED = 6
    WOULD_CHANGE = 7
    SYSTEM = 8
    INTERRUPTED = 130  #: SIGINT; SIGTERM exits 143 (128 + the signal, as shells do)
    PIPE_CLOSED = 141  #: 128 + SIGPIPE: the reader closed the output pipe


@dataclass(frozen=True)
class ExitMeaning:
    """One row of the exit-code table."""

    codes: tuple[int, ...]
    short: str  #: a few words, for `specpatch --help`
    meaning: str  #: the README's sentence


#: The exit codes and what they mean: the README's "Exit codes" table and `--help` are rendered from it.
EXIT_CODES: tuple[ExitMeaning, ...] = (
    ExitMeaning((ExitCode.OK,), "ok", 'success, including "already applied" and "nothing to roll back"'),
    ExitMeaning((ExitCode.INTERNAL,), "internal error (a bug)", "internal error (a bug in specpatch)"),
    ExitMeaning((ExitCode.BAD_INPUT,), "bad input",
                "bad input: a broken recipe (file and line given; also duplicate YAML keys, a parameter of the wrong "
                "type), an unusable target (another package than the recipe's, a file or folder the system will not "
                "let specpatch write: permission, read-only file system, immutable file; a link out of the package), "
                "a target file with a syntax error or not in its encoding, a damaged state folder, a bad option; "
                "`import`: a patch with no hunk it can read, an `-o` that would replace a file import did not write "
                "(a `recipes/` folder beside `-o recipes.yaml`), its own output edited since, or a symbolic link"),
    ExitMeaning((ExitCode.CANNOT_APPLY,), "cannot apply",
                "cannot apply: anchor missing or ambiguous, a file the step edits not in this release (moved or "
                "renamed upstream), conflicting definition, a patched file that reads a name "
                "it does not define, a recipe that would not find its own change on a second run, release outside "
                "the recipe's range or refused by it; nothing written; "
                "`rollback`: a recipe applied later changed the same files (roll it back first); `import`: a part of "
                "the patch not lifted (a step that refuses, or a file or change with no step: new, deleted, renamed, "
                "binary, a mode change, a section that is not a unified diff), the recipe written"),
    ExitMeaning((ExitCode.VERIFY_FAILED,), "verification failed",
                "verification failed: syntax, import smoke test or a probe; an apply was rolled back; `test`: a "
                "fixture case failed"),
    ExitMeaning((ExitCode.DRIFT,), "drift",
                "drift or lost edits: a patched file changed since apply (verify, check, rollback without `--force`), "
                "or while apply's checks ran (another program rewrote it: apply undoes its edits where they are still "
                "there); the recipe's edits are in the tree but no ledger records them (the state folder was deleted); "
                "`check`: also an interrupted apply or rollback"),
    ExitMeaning((ExitCode.LOCKED,), "locked",
                "locked: another specpatch holds the target's lock past `--lock-timeout`; `check`: an apply or "
                "rollback is running now; `apply`: another program wrote a file of the plan while it ran (nothing "
                "written)"),
    ExitMeaning((ExitCode.WOULD_CHANGE,), "would change (`check`)",
                "`check`: not applied yet, the recipe would change the target, also after a reinstall or upgrade of "
                "the package (`verify RECIPE` of a recipe never applied, too)"),
    ExitMeaning((ExitCode.SYSTEM,), "the system failed a write (no space)",
                "the system failed a write or read (no space left, quota, file size limit, I/O error): the file and "
                "the errno are named, the tree was left whole (untouched, restored, or still fully patched)"),
    ExitMeaning((ExitCode.INTERRUPTED, 143), "interrupted",
                "interrupted by Ctrl-C (SIGINT) or SIGTERM: an apply in progress was undone, a rollback finished, "
                "and the line `interrupted (SIGNAL): ...` says which"),
    ExitMeaning((ExitCode.PIPE_CLOSED,), "output pipe closed",
                "the reader closed the output pipe (`specpatch show` piped into `head`), as for any program a closed pipe stops "
                "(128 + SIGPIPE)"),
)


def exit_code_table() -> str:
    """The README's "Exit codes" table, in Markdown."""
    rows = ["| code | meaning |", "|---|---|"]
    rows += [f"| {', '.join(map(str, m.codes))} | {m.meaning} |" for m in EXIT_CODES]
    return "\n".join(rows)


def exit_code_summary() -> str:
    """`0 ok, 1 internal error (a bug), ...`: the exit codes in one sentence, for `--help`."""
    return ", ".join(f"{'/'.join(map(str, m.codes))} {m.short}" for m in EXIT_CODES)


# --------------------------------------------------------------------------------------------------- JSON


def dumps(data: Any) -> str:
    """The JSON of every `--json` output: indented by 2, statuses as their strings, anything else (a path, a
    release) as its `str`."""
    return json.dumps(data, indent=2, default=str)


# --------------------------------------------------------------------------------------------------- results
#
# What the use cases of `patcher.api` answer: built once, when the command has decided, and never changed after.
# `to_dict` is the `--json` output of the command (written with `dumps`).


def _dict(value: Any) -> Any:
    return value.to_dict() if hasattr(value, "to_dict") else value


@dataclass(frozen=True)
class ApplyResult:
    """Everything an apply did (or a dry run would do), for rendering and JSON."""

    plan: Any  #: the engine's Plan
    dry_run: bool
    outcome: ApplyOutcome
    exit_code: ExitCode = ExitCode.OK
    recovery: Any = None  #: what the start-of-command recovery found (a RecoveryReport), if anything
    record: Any = None  #: the ledger record written by the commit
    checks: tuple[Any, ...] = ()  #: verify.Check, in the order they ran
    notes: tuple[str, ...] = ()
    error: Any = None  #: a SpecpatchError of the apply itself (a refused release), beside the plan's errors
    unverified: tuple[str, ...] = ()  #: checks of the recipe that did not run (`import m`, `probe p`)

    def to_dict(self) -> dict[str, Any]:
        p = self.plan
        return {
            "ok": self.exit_code == ExitCode.OK, "exit_code": int(self.exit_code), "outcome": self.outcome,
            "dry_run": self.dry_run, "recipe": p.recipe.id, "recipe_version": p.recipe.version,
            "variant": p.selection.variant, "variant_reason": p.selection.reason,
            "target": {"root": str(p.target.root), "layout": p.target.layout, "package": p.target.package,
                       "version": str(p.target.version) if p.target.version else None,
                       "version_source": p.target.version_source},
            "params": p.params,
            "unverified": list(self.unverified),
            "steps": [s.to_dict() for s in p.steps],
            "files": [{"file": f.rel, "changed": f.changed} for f in p.files],
            "errors": [e.to_dict() for e in p.errors] + ([self.error.to_dict()] if self.error else []),
            "checks": [c.to_dict() for c in self.checks],
            "recovery": _dict(self.recovery),
            "notes": list(self.notes),
            "diff": p.diff(),
        }


@dataclass(frozen=True)
class RecipeVerification:
    """`verify` of one applied recipe."""

    record: Any  #: the ledger's AppliedRecord
    files: tuple[dict[str, Any], ...] = ()  #: per file: {"file", "state" (a FileVerdict), "sha256", ...}
    checks: tuple[Any, ...] = ()
    notes: tuple[str, ...] = ()
    unverified: tuple[str, ...] = ()  #: the recipe's imports and probes that did not run

    @property
    def drifted(self) -> list[str]:
        return [f["file"] for f in self.files if f["state"] is FileVerdict.DRIFT]

    @property
    def lost(self) -> list[str]:
        return [f["file"] for f in self.files if f["state"] is FileVerdict.LOST]

    def to_dict(self) -> dict[str, Any]:
        r = self.record
        return {"recipe": r.recipe, "recipe_version": r.recipe_version, "variant": r.variant, "release": r.release,
                "params": r.params, "files": list(self.files), "checks": [c.to_dict() for c in self.checks],
                "notes": list(self.notes), "unverified": list(self.unverified)}


@dataclass(frozen=True)
class VerifyResult:
    """`verify` of a target: every applied recipe (or one)."""

    target: Any
    recipes: tuple[RecipeVerification, ...] = ()
    recovery: Any = None
    message: str = ""
    exit_code: ExitCode = ExitCode.OK
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        t = self.target
        return {"ok": self.exit_code == ExitCode.OK, "exit_code": int(self.exit_code), "message": self.message,
                "target": str(t.root), "release": str(t.version) if t.version else None,
                "release_source": t.version_source, "recipes": [r.to_dict() for r in self.recipes],
                "recovery": _dict(self.recovery), "notes": list(self.notes)}


@dataclass(frozen=True)
class CheckResult:
    """`check`: is the recipe applied and intact? (No writes.)"""

    plan: Any
    state: CheckState
    message: str
    files: tuple[dict[str, Any], ...] = ()  #: the recorded files: {"file", "state" (a FileBytes), "sha256", ...}
    exit_code: ExitCode = ExitCode.OK

    def to_dict(self) -> dict[str, Any]:
        p = self.plan
        return {"ok": self.exit_code == ExitCode.OK, "exit_code": int(self.exit_code), "state": self.state,
                "message": self.message, "recipe": p.recipe.id, "variant": p.selection.variant,
                "target": str(p.target.root), "files": list(self.files), "steps": [s.to_dict() for s in p.steps],
                "errors": [e.to_dict() for e in p.errors], "diff": p.diff()}


@dataclass(frozen=True)
class TryResult:
    """`try`: apply and verify on a scratch copy of a pristine release."""

    version: str
    folder: Any  #: the kept tree (a Path), if --keep
    apply: ApplyResult | None
    verify: VerifyResult | None
    seconds: float
    exit_code: ExitCode
    outcome: TryOutcome
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.exit_code == ExitCode.OK, "exit_code": int(self.exit_code), "version": self.version,
                "outcome": self.outcome, "message": self.message, "seconds": round(self.seconds, 2),
                "kept": str(self.folder) if self.folder else None,
                "apply": self.apply.to_dict() if self.apply else None,
                "verify": self.verify.to_dict() if self.verify else None}
