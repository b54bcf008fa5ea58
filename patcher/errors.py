"""The one error catalogue of specpatch: every failure has a title, a hint, an exit code and a location."""

from __future__ import annotations

from dataclasses import dataclass, field

from .results import ExitCode  # noqa: F401 - the exit codes and their meanings live in results


@dataclass(frozen=True)
class Location:
    """Where an error happened: as much of recipe, step, file, line and anchor as is known."""

    recipe: str | None = None  #: recipe id or recipe file
    step: int | None = None  #: 1-based step number
    op: str | None = None  #: operation kind of the step
    file: str | None = None  #: file path, relative to the target when possible
    line: int | None = None  #: line in `file` (a recipe line for recipe errors)
    anchor: str | None = None  #: the anchor the step looked for

    def merged(self, other: "Location") -> "Location":
        """Fill the fields this location lacks from `other` (inner knowledge wins)."""
        return Location(
            **{k: getattr(self, k) if getattr(self, k) is not None else getattr(other, k) for k in self.__dataclass_fields__}
        )

    def render(self) -> str:
        parts: list[str] = []
        if self.file:
            parts.append(f"{self.file}:{self.line}" if self.line else self.file)
        ctx = [p for p in (self.recipe, f"step {self.step}" if self.step else None, self.op) if p]
        if ctx:
            parts.append(f"[{', '.join(ctx)}]")
        return " ".join(parts)


@dataclass(frozen=True)
class Candidate:
    """A near miss for an anchor: what was found instead, and on which line."""

    text: str
    line: int | None = None
    node: object = field(default=None, compare=False, repr=False)  #: the syntax node, to compute `line` lazily

    def render(self) -> str:
        return f"{self.text} (line {self.line})" if self.line else self.text


class SpecpatchError(Exception):
    """Base class: subclasses set `title`, `hint` and `exit_code`; instances carry the message and location."""

    title = "specpatch error"
    hint = ""
    exit_code = ExitCode.INTERNAL

    def __init__(
        self,
        message: str,
        *,
        location: Location | None = None,
        candidates: list[Candidate] | tuple[Candidate, ...] = (),
        hint: str | None = None,
        details: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.location = location or Location()
        self.candidates = tuple(candidates)
        if hint is not None:
            self.hint = hint
        self.details = details

    def at(self, location: Location) -> "SpecpatchError":
        """Add outer context (recipe, step, file) without losing what the lower layer knew."""
        self.location = self.location.merged(location)
        return self

    def __str__(self) -> str:
        where = self.location.render()
        return f"{self.title}: {self.message}" + (f" ({where})" if where else "")

    def to_dict(self) -> dict:
        return {
            "error": type(self).__name__,
            "title": self.title,
            "message": self.message,
            "hint": self.hint,
            "exit_code": int(self.exit_code),
            "location": {k: v for k, v in self.location.__dict__.items() if v is not None},
            "candidates": [{"text": c.text, "line": c.line} for c in self.candidates],
            "details": self.details,
        }


class RecipeError(SpecpatchError):
    title = "invalid recipe"
    hint = "run `specpatch schema` for the recipe format; `specpatch show RECIPE` for a working example"
    exit_code = ExitCode.BAD_INPUT


class RecipeNotFound(RecipeError):
    title = "recipe not found"
    hint = "`specpatch list` shows the available recipes; a path to a .yaml file works too"


class UsageError(SpecpatchError):
    title = "bad command-line value"
    hint = "see `specpatch COMMAND --help`"
    exit_code = ExitCode.BAD_INPUT


class PatchError(UsageError):
    """A patch `specpatch import` cannot read or use: its content, not the command line, is at fault."""

    title = "unusable patch"
    hint = ("`specpatch import` reads a unified diff (`git diff`, `diff -u`, `git format-patch`) made against the "
            "release given with --release")


class ParamError(UsageError):
    """A parameter value that is not of its declared type, or that cannot be written where the recipe puts it."""

    title = "bad parameter value"
    hint = "`specpatch show RECIPE` lists the parameters, their types and defaults"


class TargetError(SpecpatchError):
    title = "unusable target"
    hint = "pass a git checkout (T/python/sglang), a site-packages folder, the package folder, or use --package"
    exit_code = ExitCode.BAD_INPUT


class TargetSyntaxError(SpecpatchError):
    title = "target file does not parse"
    hint = "fix or restore the file first (for example `pip install --force-reinstall --no-deps PACKAGE==VERSION`)"
    exit_code = ExitCode.BAD_INPUT


class VersionUnsupported(SpecpatchError):
    title = "release not supported by this recipe"
    hint = "`specpatch show RECIPE` lists the supported releases; --assume-version overrides a misread version"
    exit_code = ExitCode.CANNOT_APPLY


class FileNotInRelease(SpecpatchError):
    """A file a step edits is not in the release: upstream moved, renamed or removed it, as it moves a function (a
    port's matter, exit 3, not a broken target)."""
    title = "file not in this release"
    hint = "this release may lay its files out differently; `specpatch show RECIPE` lists the releases it supports"
    exit_code = ExitCode.CANNOT_APPLY


class ParamsChanged(SpecpatchError):
    title = "applied with other parameters"
    hint = "a parameter of an applied recipe changes by a rollback, then an apply"
    exit_code = ExitCode.CANNOT_APPLY


class AnchorNotFound(SpecpatchError):
    title = "anchor not found"
    hint = "this release may have moved the code; `specpatch show RECIPE` lists the releases it supports"
    exit_code = ExitCode.CANNOT_APPLY


class NotIdempotent(SpecpatchError):
    title = "recipe would not find its own change on a second run"
    hint = ("planned again on its own result, a step would not answer 'already applied': a second apply or `specpatch "
            "check` would fail or change the file again. A later step of the recipe changes what an earlier one "
            "anchors on or adds, or two steps undo each other: reorder the steps, or anchor on code that stays; "
            "nothing was written")
    exit_code = ExitCode.CANNOT_APPLY


class AnchorAmbiguous(SpecpatchError):
    title = "anchor matched more than once"
    hint = "the recipe must name a unique place; make the anchor more specific"
    exit_code = ExitCode.CANNOT_APPLY


class Conflict(SpecpatchError):
    title = "conflicting definition"
    hint = "the target already defines this name differently; remove the local change or roll back the other recipe"
    exit_code = ExitCode.CANNOT_APPLY


class HunkNotExpressed(SpecpatchError):
    title = "hunk not expressed"
    hint = "`specpatch import` could not turn this hunk into a semantic edit; port it by hand (see docs/import.md)"
    exit_code = ExitCode.CANNOT_APPLY


class RenderError(SpecpatchError):
    title = "patched file does not compile"
    hint = "the recipe's code is wrong for this release; nothing was written"
    exit_code = ExitCode.CANNOT_APPLY


class UndefinedNameError(SpecpatchError):
    title = "patched code uses a name its file does not define"
    hint = ("once patched, the file reads at run time a name it neither imports nor defines (upstream may have "
            "removed or renamed it, it may be imported for type checkers only, or the recipe took out what bound "
            "it): add the import or definition to the recipe, or change the code; nothing was written")
    exit_code = ExitCode.CANNOT_APPLY


class MissingModuleError(SpecpatchError):
    title = "patched code imports a module of the package that the release does not have"
    hint = ("the module was renamed, moved or removed upstream, or is added by a part of the change the recipe does "
            "not carry: import it from where this release has it, or leave the step out; nothing was written")
    exit_code = ExitCode.CANNOT_APPLY


class ReadBeforeSet(Conflict):
    """Upstream's code and the step's disagree on order: an answer of the operation (a CannotApply), as a conflict is."""

    title = "inserted code would read a name before it is set"
    hint = ("the function assigns it only below the place the step puts the code (upstream moved that assignment), "
            "or only on some ways to it: anchor the step where every way has assigned it, or change the code; "
            "nothing was written")
    exit_code = ExitCode.CANNOT_APPLY


class FlowChanged(Conflict):
    title = "the recipe's code would change how a function runs"
    hint = ("Python accepts it, and it does what nobody meant (a generator, a coroutine, a value returned from a "
            "generator): change the code or where it goes; nothing was written")


class FailsAtRunTime(Conflict):
    title = "the patched code would raise when it runs"
    hint = ("Python compiles it, and it raises when it runs (at import, at a construction, a call or an attribute "
            "access): change the code or where it goes; nothing was written")


class Unreachable(Conflict):
    title = "inserted code would never run"
    hint = ("the block ends with a `return`, `raise`, `continue` or `break`: insert `at: before` with `match:` that "
            "statement for code that must run; nothing was written")


class CallMisfit(SpecpatchError):
    title = "a call across modules no longer fits"
    hint = ("a call in one module of the release and a function of another no longer match once patched (a parameter "
            "the recipe adds takes an argument passed by position elsewhere, or a keyword the function does not "
            "take): add the parameter at the end or with a keyword-only `*`, or change the calls too; nothing was "
            "written")
    exit_code = ExitCode.CANNOT_APPLY


class NameTakenError(SpecpatchError):
    title = "patched module loses a name another module imports"
    hint = ("another module of the release imports the name from the patched one (a module upstream added after the "
            "recipe was written, or one the recipe does not change): keep the name (`old = new`), or change that "
            "module too; nothing was written")
    exit_code = ExitCode.CANNOT_APPLY


class DriftError(SpecpatchError):
    title = "patched files changed since apply"
    hint = "review the local change; `specpatch rollback --force` restores the original and keeps your version beside it"
    exit_code = ExitCode.DRIFT


class ChangedDuringApply(SpecpatchError):
    """A file of the plan changed between planning and writing, under specpatch's lock: another program's edit."""

    title = "a file changed while specpatch was applying"
    hint = ("another program (an editor, a package manager) wrote it during the apply, and the apply was not made: "
            "run the command again once that program is done")
    exit_code = ExitCode.LOCKED


class LockTimeout(SpecpatchError):
    title = "target is locked"
    hint = "another specpatch is working on this target; retry when it has finished (or raise --lock-timeout)"
    exit_code = ExitCode.LOCKED


class StateError(SpecpatchError):
    """A misuse of the transaction API by its caller (commit without the lock, a plan gone stale): a bug."""

    title = "specpatch state is inconsistent"
    hint = "inspect TARGET/.specpatch; `specpatch status` shows what is recorded"
    exit_code = ExitCode.INTERNAL


class StateDamaged(StateError):
    """The state folder on disk cannot be trusted (a damaged ledger, journal or backup): bad input, not a bug."""

    title = "the state folder is damaged"
    hint = ("inspect TARGET/.specpatch (ledger.json, journal.json, records/); restore it from a backup, or reinstall "
            "the package and remove the folder")
    exit_code = ExitCode.BAD_INPUT


class StateLost(SpecpatchError):
    """The tree carries a recipe's edits that no ledger records (the state folder was deleted or emptied)."""

    title = "the recipe's edits are in the tree but specpatch has no record of them"
    hint = ("the original bytes are gone with the state folder: reinstall the package (`pip install --force-reinstall "
            "--no-deps PACKAGE==VERSION`) or `git checkout` the files")
    exit_code = ExitCode.DRIFT


class PendingTransaction(SpecpatchError):
    """An interrupted apply or rollback that this command may not finish (the tree is read-only here)."""

    title = "an interrupted transaction is pending"
    hint = "run `specpatch verify` (or apply/rollback) where the tree is writable: it finishes or undoes it first"
    exit_code = ExitCode.DRIFT


class OSFailure(SpecpatchError):
    """The operating system refused a read or write; the exit code follows the errno (see `os_failure`)."""

    title = "the system refused a file operation"
    hint = "the tree was left whole (restored or untouched); fix the cause and run the command again"
    exit_code = ExitCode.SYSTEM


#: errno -> (exit code, hint): a target we may not write is unusable (2); space and I/O are the machine's (8)
_ERRNO_CODES = {
    "EACCES": (ExitCode.BAD_INPUT, "run specpatch as a user who may write the target and its .specpatch folder"),
    "EPERM": (ExitCode.BAD_INPUT, "the file may be immutable (`lsattr FILE`; `chattr -i FILE` as root) or owned by "
                                  "another user"),
    "EROFS": (ExitCode.BAD_INPUT, "the target is on a read-only file system: patch a writable copy (or the image "
                                  "build), not the mounted tree"),
    "ENOENT": (ExitCode.BAD_INPUT, "the path (or a folder on it) does not exist"),
    "ENOTDIR": (ExitCode.BAD_INPUT, "a part of the path is a file, not a folder"),
    "EISDIR": (ExitCode.BAD_INPUT, "the path is a folder, a file was expected"),
    "ENOSPC": (ExitCode.SYSTEM, "free some space on the device (specpatch needs room for the backups and one "
                                "temporary copy of each file), then run the command again"),
    "EDQUOT": (ExitCode.SYSTEM, "the disk quota is exhausted; free some space, then run the command again"),
    "EFBIG": (ExitCode.SYSTEM, "a file size limit (ulimit -f) stopped the write; raise it, then run the command again"),
    "EIO": (ExitCode.SYSTEM, "the device reported an I/O error; check it before running the command again"),
}


def os_failure(exc: OSError, doing: str, *, unfinished: str | None = None) -> OSFailure:
    """An OSError as an error of the catalogue: the file, the errno's name and meaning, a code by errno.
    `unfinished`, when the transaction could not leave the tree whole, says what is pending instead of the usual
    "the tree was left whole"."""
    import errno as _errno
    import os

    name = _errno.errorcode.get(exc.errno or 0, "")
    meaning = os.strerror(exc.errno) if exc.errno else str(exc)
    detail = exc.strerror if exc.errno and exc.strerror and exc.strerror != meaning else None  # our own words
    code, hint = _ERRNO_CODES.get(name, (ExitCode.SYSTEM, OSFailure.hint))
    file = exc.filename if exc.filename is not None else None
    message = (f"{doing}: {meaning}" + (f" [{name}]" if name else "") + (f" on {file}" if file else "")
               + (f": {detail}" if detail else ""))
    if unfinished is not None:
        hint = unfinished if hint == OSFailure.hint else f"{hint}; {unfinished}"
    elif hint != OSFailure.hint:
        hint = f"{hint}; {OSFailure.hint}"
    err = OSFailure(message, location=Location(file=str(file) if file is not None else None), hint=hint)
    err.exit_code = code
    return err


class Interrupted(BaseException):
    """Raised in place of KeyboardInterrupt by the CLI's SIGINT/SIGTERM handler: not a KeyboardInterrupt, so that
    no library turns it into an exit code of its own before specpatch has said what it finished or undid."""

    def __init__(self, signum: int) -> None:
        import signal

        super().__init__(signum)
        self.signum = signum
        self.name = signal.Signals(signum).name


class RollbackBlocked(Conflict):
    title = "a later recipe changed the same files"
    hint = "roll back the later recipe first (`specpatch rollback LATER --target T`), then this one"


class FetchError(SpecpatchError):
    title = "cannot fetch the release"
    hint = "check the package name and version; `pip download --no-deps PACKAGE==VERSION` shows the registry's answer"
    exit_code = ExitCode.BAD_INPUT
