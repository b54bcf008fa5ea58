"""patcher.results: one table of exit codes (the README's and `--help`'s), statuses that are their strings."""

from __future__ import annotations

import json
import re
from pathlib import Path

from patcher import results
from patcher.errors import ExitCode, SpecpatchError
from patcher.results import CheckStatus, StepStatus

README = Path(__file__).resolve().parent.parent / "README.md"


def readme_exit_table() -> str:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    return "\n".join(line for line in section.strip().splitlines() if line.startswith("|"))


def test_the_readme_table_is_the_table():
    assert readme_exit_table() == results.exit_code_table()


def test_every_exit_code_has_one_meaning():
    listed = [code for row in results.EXIT_CODES for code in row.codes]
    assert len(listed) == len(set(listed))
    assert set(ExitCode) <= set(listed)
    assert 143 in listed  # SIGTERM: 128 + 15


def test_help_lists_the_codes_of_the_table():
    from typer.testing import CliRunner

    from patcher.cli import app

    done = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "400", "NO_COLOR": "1", "TERM": "dumb"})
    text = " ".join(done.output.split())
    assert results.exit_code_summary() in text


def test_error_exit_codes_come_from_the_table():
    assert ExitCode is results.ExitCode
    codes = {row.codes[0] for row in results.EXIT_CODES}
    for cls in [SpecpatchError, *_subclasses(SpecpatchError)]:
        assert cls.exit_code in codes, cls


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def test_a_status_is_its_string():
    assert StepStatus.ALREADY_APPLIED == "already_applied"
    assert f"{StepStatus.CHANGED}" == "changed" and str(StepStatus.CHANGED) == "changed"
    assert StepStatus.ALREADY_APPLIED.words == "already applied"
    assert StepStatus("cannot_apply") is StepStatus.CANNOT_APPLY
    assert {"changed": 1}[StepStatus.CHANGED] == 1


def test_json_writes_statuses_as_strings():
    data = {"status": CheckStatus.PASSED, "exit_code": ExitCode.DRIFT, "path": Path("/x")}
    assert json.loads(results.dumps(data)) == {"status": "passed", "exit_code": 5, "path": "/x"}
    assert results.dumps(data) == json.dumps({"status": "passed", "exit_code": 5, "path": "/x"}, indent=2)


def test_check_status_blocking_and_ran():
    assert {s for s in CheckStatus if s.blocking} == {CheckStatus.FAILED, CheckStatus.TIMEOUT}
    assert {s for s in CheckStatus if s.ran} == {CheckStatus.PASSED, CheckStatus.FAILED, CheckStatus.TIMEOUT}
    assert re.fullmatch(r"[a-z_]+", CheckStatus.ENVIRONMENT)
