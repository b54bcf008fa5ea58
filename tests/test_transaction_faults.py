"""Safety under failure: an exception or a kill -9 at every step of apply, recovery and rollback leaves the tree
original or fully patched (never mixed), and the next command says which and finishes the job."""

from __future__ import annotations

import errno
import os
import random
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

import pytest

from patcher import transaction
from patcher.errors import StateError
from patcher.ledger import State
from txn_support import (FILES, ORIGINAL, THREE_FIELDS, apply, leftovers, make_tree, patched_tree, recipe, snapshot,
                         target_of)

REPO = Path(__file__).resolve().parents[1]

#: every fault-injection point of a 3-file apply, in order; the last three are after all files are written
APPLY_LABELS = (["apply:backups-written", "apply:journal-written"]
                + [f"apply:{step}:{rel}" for rel in FILES for step in ("temp-written", "after-write")]
                + ["apply:ledger-written", "apply:journal-removed"])
ALL_WRITTEN = APPLY_LABELS.index(f"apply:after-write:{FILES[-1]}")
ROLLBACK_LABELS = (["rollback:kept-written", "rollback:journal-written"]
                   + [f"rollback:restored:{rel}" for rel in FILES]
                   + ["rollback:ledger-written", "rollback:journal-removed"])


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_tree(tmp_path / "target")


@pytest.fixture
def target(root: Path):
    return target_of(root)


@pytest.fixture
def three(tmp_path: Path):
    return recipe(tmp_path, THREE_FIELDS)


@pytest.fixture
def patched(tmp_path: Path):
    return patched_tree(tmp_path)


@pytest.fixture(autouse=True)
def no_fault():
    yield
    transaction._fault = None


def raise_at(label: str):
    def hook(step: str) -> None:
        if step == label:
            raise RuntimeError(f"injected failure at {step}")
    return hook


def killed_at(label: str, work) -> int:
    """Run `work` in a forked child that SIGKILLs itself at step `label`; return the child's exit code."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 0
        try:
            transaction._fault = lambda step: os.kill(os.getpid(), signal.SIGKILL) if step == label else None
            work()
        except BaseException:
            traceback.print_exc()
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def assert_consistent(root: Path, target, patched) -> str:
    """The tree is exactly original (nothing recorded) or exactly patched (recorded once); returns which."""
    now = snapshot(root)
    recorded = [r.recipe for r in transaction.applied_records(target)]
    assert leftovers(root) == []
    assert transaction.status(target).pending is None
    if now == ORIGINAL:
        assert recorded == []
        assert not list(target.state_dir.glob("records/*"))
        return "original"
    assert now == patched, "mixed tree: " + ", ".join(r for r in FILES if now[r] not in (ORIGINAL[r], patched[r]))
    assert recorded == ["three-fields"]
    return "patched"


def assert_rollback_restores(root: Path, target) -> None:
    transaction.rollback(target)
    assert snapshot(root) == ORIGINAL and transaction.applied_records(target) == []


def test_the_labels_are_the_documented_ones(target, three):
    seen: list[str] = []
    transaction._fault = seen.append
    apply(target, three)
    transaction.rollback(target)
    assert seen == APPLY_LABELS + ROLLBACK_LABELS
    for label in {s.split(":")[0] + ":" + s.split(":")[1] for s in seen}:
        assert f"``{label}" in transaction.__doc__


# --------------------------------------------------------------------------------------------------- exceptions


@pytest.mark.parametrize("label", APPLY_LABELS)
def test_an_exception_at_any_step_restores_or_commits(root, target, three, patched, label):
    transaction._fault = raise_at(label)
    with pytest.raises(RuntimeError, match="injected failure"):
        apply(target, three)
    transaction._fault = None

    report = transaction.recover(target)

    past_commit_point = APPLY_LABELS.index(label) > ALL_WRITTEN
    if label == "apply:ledger-written":  # the ledger had it; only the journal was left
        assert report is not None and report.outcome == "completed"
    else:
        assert report is None  # the in-process undo cleaned up everything itself
    assert assert_consistent(root, target, patched) == ("patched" if past_commit_point else "original")
    assert_rollback_restores(root, target)


def test_a_failing_restore_keeps_the_journal_for_the_next_command(root, target, three, patched):
    def hook(step: str) -> None:
        if step in ("apply:after-write:pkg/b.py", "undo:restored:pkg/a.py"):
            raise RuntimeError(step)

    transaction._fault = hook
    with pytest.raises(StateError, match="restoring the files failed too"):
        apply(target, three)
    transaction._fault = None
    assert transaction.status(target).pending is not None

    report = transaction.recover(target)
    assert report.outcome == "rolled_back" and "rolled back 3 files" in report.message
    assert assert_consistent(root, target, patched) == "original"


@pytest.mark.parametrize("before_journal", [True, False])
def test_an_apply_the_system_stops_and_cannot_undo_says_which_files_are_patched(root, target, three, patched,
                                                                                 before_journal):
    """Hostile round 12 (installs): a device that kept failing writes stopped the apply after one file and its undo
    too: exit 8 with "the tree was left whole" over a half-patched tree. Past the journal the error names each file
    as it is and the journal that finishes the rollback; before it no file of the target was touched."""
    from patcher.errors import OSFailure

    failing = "apply:backups-written" if before_journal else "apply:after-write:pkg/b.py"

    def hook(step: str) -> None:
        if step == failing or step.startswith("undo:"):
            raise OSError(errno.ENOSPC, "No space left on device", str(root / "pkg/b.py"))

    transaction._fault = hook
    with pytest.raises(OSFailure) as info:
        apply(target, three)
    transaction._fault = None
    hint = info.value.hint
    if before_journal:
        assert "left whole" in hint and "part-way" not in hint, hint
        assert snapshot(root) == ORIGINAL
    else:
        assert "left whole" not in hint and "stopped part-way" in hint, hint
        # the undo put one file back before it failed too: the other is still patched, the third was never written
        assert hint.count(" patched") == 1 and "pkg/c.py original" in hint, hint
        assert transaction.recover(target).outcome == "rolled_back"
        assert snapshot(root) == ORIGINAL


def test_an_apply_without_room_to_finish_or_undo_is_refused_before_a_file_is_replaced(root, target, three,
                                                                                         monkeypatch):
    """Past its backups and journal, the apply checks the device has room for each file's new bytes and, should a
    write fail, for putting the old ones back; without it, no file of the target is replaced."""
    real = os.statvfs

    class Full:
        def __init__(self, st):
            self.f_frsize, self.f_bavail = st.f_frsize, 1

    monkeypatch.setattr(transaction.os, "statvfs", lambda path: Full(real(path)))
    with pytest.raises(OSError) as info:
        apply(target, three)
    assert info.value.errno == errno.ENOSPC and "no file of the target was written" in str(info.value)
    monkeypatch.undo()
    assert snapshot(root) == ORIGINAL and transaction.status(target).pending is None
    assert transaction.applied_records(target) == []


def test_an_upgrade_that_replaces_a_file_while_its_new_bytes_are_written_keeps_its_file(root, target, three,
                                                                                          patched):
    """Hostile round 12 (installs): pip replaced a file after the apply had checked it, while its new bytes were
    being written; the rename put them over the new release's file (lost), and the undo then put the old release's
    bytes back. The file is looked at again right before the rename."""
    from patcher.errors import ChangedDuringApply

    upgraded = b"# the next release's b.py\n"

    def hook(step: str) -> None:
        if step == "apply:temp-written:pkg/b.py":
            (root / "pkg/b.py").write_bytes(upgraded)

    transaction._fault = hook
    with pytest.raises(ChangedDuringApply, match="changed while the apply was writing"):
        apply(target, three)
    transaction._fault = None
    assert (root / "pkg/b.py").read_bytes() == upgraded
    assert (root / "pkg/a.py").read_bytes() == ORIGINAL["pkg/a.py"][0]
    assert transaction.status(target).pending is None and transaction.applied_records(target) == []


def test_a_command_the_system_stops_over_an_interrupted_apply_says_the_tree_is_part_way(root, target, three,
                                                                                         monkeypatch):
    """Hostile round 12 (installs): after an apply killed half-way, a rollback on a file system gone read-only said
    "the tree was left whole"."""
    from patcher import api
    from patcher.errors import OSFailure

    assert killed_at("apply:after-write:pkg/a.py", lambda: apply(target, three)) == -signal.SIGKILL

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", str(root / "pkg/a.py"))

    monkeypatch.setattr(transaction, "recover", read_only)
    with pytest.raises(OSFailure) as info:
        api.rollback(target)
    assert "part-way" in info.value.hint and "left whole" not in info.value.hint, info.value.hint


# --------------------------------------------------------------------------------------------------- kill -9


@pytest.mark.parametrize("label", APPLY_LABELS)
def test_a_kill_at_any_step_of_apply_is_recovered(root, target, three, patched, label):
    assert killed_at(label, lambda: apply(target, three)) == -signal.SIGKILL

    step = APPLY_LABELS.index(label)
    journal_left = APPLY_LABELS.index("apply:journal-written") <= step <= APPLY_LABELS.index("apply:ledger-written")
    assert (transaction.status(target).pending is not None) == journal_left
    report = transaction.recover(target)

    expected = "patched" if step >= ALL_WRITTEN else "original"
    if not journal_left:
        assert report is None
    else:
        assert report.kind == "apply" and report.recipe == "three-fields" and report.files == FILES
        assert report.outcome == ("completed" if expected == "patched" else "rolled_back")
        assert report.message.startswith(f"found an interrupted apply of three-fields at {report.started}: ")
    assert assert_consistent(root, target, patched) == expected
    if expected == "original":  # and it can be applied again
        assert apply(target, three) is not None
    assert_rollback_restores(root, target)


@pytest.mark.parametrize("apply_label,recover_label", [
    ("apply:after-write:pkg/b.py", "recover:restored:pkg/a.py"),
    ("apply:after-write:pkg/b.py", "recover:restored:pkg/b.py"),
    ("apply:after-write:pkg/b.py", "recover:restored:pkg/c.py"),
    ("apply:after-write:pkg/b.py", "recover:journal-removed"),
    ("apply:temp-written:pkg/c.py", "recover:restored:pkg/a.py"),
    ("apply:after-write:pkg/c.py", "recover:ledger-written"),
    ("apply:after-write:pkg/c.py", "recover:journal-removed"),
])
def test_a_kill_during_recovery_is_recovered_by_the_next_command(root, target, three, patched, apply_label,
                                                                   recover_label):
    assert killed_at(apply_label, lambda: apply(target, three)) == -signal.SIGKILL
    assert killed_at(recover_label, lambda: transaction.recover(target)) == -signal.SIGKILL

    transaction.recover(target)
    transaction.recover(target)  # and once more: nothing left to do

    expected = "patched" if apply_label == "apply:after-write:pkg/c.py" else "original"
    assert assert_consistent(root, target, patched) == expected
    if expected == "patched":
        assert_rollback_restores(root, target)


@pytest.mark.parametrize("label", ROLLBACK_LABELS)
def test_a_kill_at_any_step_of_rollback_is_finished_by_the_next_command(root, target, three, patched, label):
    apply(target, three)
    assert killed_at(label, lambda: transaction.rollback(target)) == -signal.SIGKILL

    report = transaction.recover(target)

    if label in ("rollback:kept-written", "rollback:journal-removed"):
        assert report is None
    else:
        assert report.kind == "rollback" and report.outcome == "rolled_back"
        assert report.message.startswith("found an interrupted rollback of three-fields")
    if label == "rollback:kept-written":  # killed before its journal: the rollback never started
        assert assert_consistent(root, target, patched) == "patched"
        assert_rollback_restores(root, target)
    else:
        assert assert_consistent(root, target, patched) == "original"
        assert not list(target.state_dir.glob("records/*"))


def test_a_kill_during_a_forced_rollback_keeps_the_local_version_once(root, target, three, patched):
    apply(target, three)
    edited = (root / "pkg/a.py").read_bytes() + b"# mine\n"
    (root / "pkg/a.py").write_bytes(edited)

    assert killed_at("rollback:restored:pkg/b.py",
                     lambda: transaction.rollback(target, force=True)) == -signal.SIGKILL
    report = transaction.recover(target)

    assert report.kept == []  # the local version was kept before the journal, not again by the recovery
    assert assert_consistent(root, target, patched) == "original"
    kept = list((target.state_dir / "kept").rglob("a.py.*"))
    assert [k.read_bytes() for k in kept] == [edited]


def test_a_file_rewritten_between_crash_and_recovery_is_left_as_found(root, target, three, patched):
    # the apply wrote a.py and b.py, then died; before the next command a hand edit (or a reinstall) rewrote a.py
    assert killed_at("apply:after-write:pkg/b.py", lambda: apply(target, three)) == -signal.SIGKILL
    mine = b"# someone's version\n"
    (root / "pkg/a.py").write_bytes(mine)

    report = transaction.recover(target)

    # only what the apply wrote is undone: our backup would put old bytes over a version we did not write
    assert report.outcome == "rolled_back" and report.restored == ["pkg/b.py"] and report.left == ["pkg/a.py"]
    assert "pkg/a.py" in report.message and "left as found" in report.message
    assert snapshot(root) == {**ORIGINAL, "pkg/a.py": (mine, ORIGINAL["pkg/a.py"][1])}
    # the backups go with the record: a's original bytes stay at hand, named in the message; "rolled back 2 files"
    [kept] = report.originals
    assert Path(kept).read_bytes() == ORIGINAL["pkg/a.py"][0] and kept in report.message
    assert "rolled back 2 files" in report.message
    assert transaction.applied_records(target) == [] and transaction.status(target).pending is None
    assert leftovers(root) == [] and not list(target.state_dir.glob("records/*"))


def apply_verifying(target, rcp):
    """`specpatch apply` with its checks: the commit's journal stays `verifying` until the checks pass."""
    from patcher import engine

    with transaction.target_lock(target) as lock:
        return transaction.commit(engine.plan(rcp, target), lock, verifying=True)


@pytest.mark.parametrize("label", ["apply:after-write:pkg/b.py", "apply:ledger-written"])
def test_an_upgrade_between_crash_and_recovery_is_not_undone(root, target, three, patched, label):
    """A killed apply (while writing, or before its checks ran), then `pip install --upgrade` before the next
    command: the new release's files (rewritten, one moved away) stay as the upgrade left them; only the file the
    upgrade did not touch is restored."""
    assert killed_at(label, lambda: apply_verifying(target, three)) == -signal.SIGKILL
    upgraded = b"# the next release's a.py\n"
    (root / "pkg/a.py").write_bytes(upgraded)
    (root / "pkg/c.py").unlink()  # moved elsewhere by the new release

    report = transaction.recover(target)

    assert report.outcome == "rolled_back" and sorted(report.left) == ["pkg/a.py", "pkg/c.py"]
    assert report.restored == ["pkg/b.py"]
    assert (root / "pkg/a.py").read_bytes() == upgraded and not (root / "pkg/c.py").exists()
    assert snapshot(root)["pkg/b.py"] == ORIGINAL["pkg/b.py"]
    assert transaction.applied_records(target) == [] and transaction.status(target).pending is None


def test_commit_and_rollback_refuse_while_a_journal_is_pending(root, target, three):
    assert killed_at("apply:after-write:pkg/a.py", lambda: apply(target, three)) == -signal.SIGKILL
    with transaction.target_lock(target) as lock:
        from patcher import engine

        with pytest.raises(StateError, match="interrupted apply of three-fields"):
            transaction.commit(engine.plan(three, target), lock)
    with pytest.raises(StateError, match="pending"):
        transaction.rollback(target)
    pending = transaction.status(target).to_dict()["pending"]
    assert pending["kind"] == "apply" and pending["recipe"] == "three-fields" and pending["files"] == FILES


def test_orphan_backups_of_a_kill_before_the_journal_are_swept(root, target, three):
    assert killed_at("apply:backups-written", lambda: apply(target, three)) == -signal.SIGKILL
    assert list(target.state_dir.glob("records/*"))
    assert transaction.recover(target) is None
    assert not list(target.state_dir.glob("records/*")) and snapshot(root) == ORIGINAL


# --------------------------------------------------------------------------------------------------- real processes


CHILD = r"""
import os, signal, sys, time
from pathlib import Path
from patcher import engine, transaction
from patcher.recipe import load_recipe
from patcher.target import find_target

root, recipe_path, op, mode, arg = sys.argv[1:6]
target = find_target(Path(root), package="pkg")

def hook(step):
    if mode == "kill-at" and step == arg:
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "slow":
        time.sleep(float(arg))

transaction._fault = hook
with transaction.target_lock(target, timeout=60) as lock:
    print("locked", flush=True)
    report = transaction.recover(target)
    if report:
        print(report.message, flush=True)
    if op == "apply":
        plan = engine.plan(load_recipe(recipe_path), target)
        print("already" if transaction.commit(plan, lock) is None else "applied", flush=True)
    else:
        print(transaction.rollback(target).message, flush=True)
"""


def child(root: Path, recipe_path: Path, op: str, mode: str = "none", arg: str = "") -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen([sys.executable, "-c", CHILD, str(root), str(recipe_path), op, mode, arg],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)


SEED = int(os.environ.get("SPECPATCH_FAULT_SEED", "20261129"))


def test_sigkill_of_a_real_process_at_random_steps(root, target, three, patched):
    rng = random.Random(SEED)
    labels = [(op, label) for op, labels in (("apply", APPLY_LABELS), ("rollback", ROLLBACK_LABELS))
              for label in labels]
    for op, label in rng.sample(labels, 6):
        applied = bool(transaction.applied_records(target))
        if op == "rollback" and not applied:
            apply(target, three)
        elif op == "apply" and applied:
            transaction.rollback(target)
        proc = child(root, three.source, op, "kill-at", label)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == -signal.SIGKILL, (label, out, err)
        transaction.recover(target)
        assert_consistent(root, target, patched)
    if transaction.applied_records(target):
        assert_rollback_restores(root, target)


def test_sigkill_of_a_real_process_at_random_moments(root, target, three, patched):
    rng = random.Random(SEED + 1)
    outcomes = set()
    for _ in range(5):
        proc = child(root, three.source, "apply", "slow", "0.03")  # ~0.3 s of steps after planning
        line = proc.stdout.readline()
        assert line == "locked\n", proc.communicate()
        time.sleep(rng.uniform(0.0, 0.4))
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=120)
        report = transaction.recover(target)
        outcomes.add((assert_consistent(root, target, patched), report.outcome if report else None))
        if transaction.applied_records(target):
            assert_rollback_restores(root, target)
    print("outcomes of the kills:", sorted(outcomes, key=str))  # shown with -s: the kills do land mid-transaction


def test_two_processes_applying_at_once_apply_once(root, target, three, patched):
    procs = [child(root, three.source, "apply", "slow", "0.05") for _ in range(2)]
    results = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), results
    assert sorted(out.splitlines()[-1] for out, _ in results) == ["already", "applied"]
    assert assert_consistent(root, target, patched) == "patched"
    assert_rollback_restores(root, target)



@pytest.mark.parametrize("after", [None, "pkg/a.py"])
def test_a_rollback_the_system_stops_says_whether_the_tree_is_whole(root, target, three, patched, after):
    """An I/O error past the preflight (a race: another program filled the disk): before any file was replaced the
    journal is dropped and the tree is as it was; after one was, the journal stays, the error says so, and the next
    command finishes the rollback."""
    from patcher.errors import OSFailure

    apply(target, three)
    first = f"rollback:restored:{after}" if after else "rollback:journal-written"

    def hook(step: str) -> None:
        if step == first:
            raise OSError(errno.EIO, "Input/output error", str(root / "pkg/b.py"))

    transaction._fault = hook
    with pytest.raises((OSError, OSFailure)) as info:
        transaction.rollback(target)
    transaction._fault = None
    if after is None:
        assert isinstance(info.value, OSError) and snapshot(root) == patched
        assert transaction.status(target).pending is None and len(transaction.applied_records(target)) == 1
    else:
        assert isinstance(info.value, OSFailure) and "[EIO]" in info.value.message
        assert "stopped part-way" in info.value.hint and "left whole" not in info.value.hint
        assert transaction.status(target).pending is not None
        assert transaction.recover(target).outcome == "rolled_back"
        assert snapshot(root) == ORIGINAL and transaction.applied_records(target) == []


def test_a_dry_run_over_an_interrupted_apply_says_so_instead_of_a_diff_of_half_written_files(root, target, three):
    # a hostile round: after an apply killed half-way, `apply --dry-run` diffed the files not yet written ("1 file
    # would change" of 2), exit 0, recovery null
    from patcher import api
    from patcher.errors import PendingTransaction

    assert killed_at("apply:after-write:pkg/a.py", lambda: apply(target, three)) == -signal.SIGKILL
    half = snapshot(root)
    with pytest.raises(PendingTransaction, match="interrupted apply of .* is pending"):
        api.apply_recipe(three, target, dry_run=True)
    assert snapshot(root) == half  # a dry run still writes nothing
    transaction.recover(target)
    assert api.apply_recipe(three, target, dry_run=True).exit_code == 0


def test_a_file_made_a_link_while_the_apply_writes_is_not_written_through(root, target, three, tmp_path):
    # hostile round 10: another program turned a target file into a link to an identical copy outside the target
    # between the plan and the write; the patch went through the link to the outside file, exit 0
    outside = tmp_path / "outside.py"
    rel = FILES[0]

    def relink(step: str) -> None:
        if step == "apply:journal-written":
            path = root / rel
            outside.write_bytes(path.read_bytes())
            path.unlink()
            path.symlink_to(outside)

    transaction._fault = relink
    before = outside.read_bytes() if outside.exists() else None
    with pytest.raises(Exception) as info:
        apply(target, three)
    assert "changed while the apply was writing" in str(info.value)
    assert outside.read_bytes() == ORIGINAL[rel][0] and before is None


def test_a_failure_past_the_commit_point_says_the_apply_is_done(root, target, three, patched):
    # hostile round 10: an I/O error removing the journal after the ledger recorded the apply said "the tree was
    # left whole (restored or untouched)"; the tree was patched and recorded
    def fail(step: str) -> None:
        if step == "apply:ledger-written":
            raise OSError(errno.EIO, "injected")

    real = State.remove_journal
    State.remove_journal = lambda self: fail("apply:ledger-written")
    try:
        with pytest.raises(Exception) as info:
            apply(target, three)
    finally:
        State.remove_journal = real
    assert "is applied and recorded" in info.value.hint and "restored or untouched" not in info.value.hint
    assert snapshot(root) == patched


def test_one_package_named_two_ways_has_one_lock(tmp_path):
    # hostile round 10: `apply --target T` and `apply --target T/pkg` at once each took the lock of their own state
    # folder, both applied, and every later command said "two state folders"
    from patcher.errors import LockTimeout
    from patcher.target import find_target

    root = make_tree(tmp_path / "t")
    (root / "pkg" / "_version.py").write_text("__version__ = '1.0'\n")
    first, second = find_target(root, package="pkg"), find_target(root / "pkg", package="pkg")
    assert first.state_dir != second.state_dir
    with transaction.target_lock(first, timeout=5):
        with pytest.raises(LockTimeout):
            with transaction.target_lock(second, timeout=0.3):
                pass


def test_a_file_another_program_rewrites_while_the_checks_run_is_no_success(root, target, three):
    # hostile round 15, installs (05): a `pip install --force-reinstall` during the checks put the release's files
    # back, and apply still said "applied and verified" (exit 0) over a pristine or half-patched tree
    from patcher import api
    from patcher.errors import DriftError

    before = snapshot(root)
    rel = FILES[0]

    def reinstall(step: str) -> None:
        if step == "apply:ledger-written":  # the commit is done; the checks come next
            (root / rel).write_bytes(ORIGINAL[rel][0])

    transaction._fault = reinstall
    with pytest.raises(DriftError, match="another program rewrote") as caught:
        api.apply_recipe(three, target, smoke=False)
    transaction._fault = None
    assert caught.value.exit_code == 5 and caught.value.location.file.endswith(rel), caught.value.location
    assert snapshot(root) == before  # the other files undone: the tree is the release's
    assert not transaction.applied_records(target) and leftovers(root) == []


def test_status_of_a_rollback_killed_part_way_calls_no_file_edited(root, target, three):
    # hostile round 15, installs (01): the files the killed rollback had restored were "edited ... rollback refuses
    # it without --force"; the next plain rollback finishes it
    apply(target, three)
    assert killed_at(f"rollback:restored:{FILES[0]}", lambda: transaction.rollback(target)) == -signal.SIGKILL
    report = transaction.status(target)
    assert report.pending is not None and report.pending.kind == "rollback"
    assert report.edited == {} and report.stale == {}
    transaction.recover(target)  # what the next command does first: it finishes the rollback
    assert snapshot(root) == ORIGINAL and transaction.applied_records(target) == []


def test_a_rollback_without_room_for_its_ledger_is_refused_before_a_file_is_restored(root, target, three, patched,
                                                                                     monkeypatch):
    # hostile round 15, installs (06): the room check counted the files only; every file was restored, then the
    # ledger's write failed: exit 8, "stopped part-way", the journal left
    apply(target, three)

    class Tight:  # room for one file's copy and the 64 KiB spared, not for the ledger's new copy too
        f_frsize, f_bavail = 1, 64 * 1024 + 1024

    monkeypatch.setattr(transaction.os, "statvfs", lambda path: Tight())
    with pytest.raises(OSError) as info:
        transaction.rollback(target)
    assert info.value.errno == errno.ENOSPC and "nothing was rolled back" in str(info.value)
    monkeypatch.undo()
    assert snapshot(root) == patched and transaction.status(target).pending is None


def test_a_bytecode_cache_that_cannot_be_written_does_not_stop_an_apply_or_a_rollback(root, target, three, patched,
                                                                                      monkeypatch):
    # hostile round 15, installs (02): a `__pycache__` the system will not let us write (chattr +i) holding a
    # patched module's .pyc stopped the rollback after every file was restored, the journal left, and every later
    # command exited 2
    cache = root / "pkg" / "__pycache__"
    cache.mkdir()
    (cache / "a.cpython-311.pyc").write_bytes(b"old")
    real = Path.unlink

    def refuse(self, missing_ok=False):
        if self.parent.name == "__pycache__":
            raise PermissionError(errno.EPERM, "Operation not permitted", str(self))
        return real(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", refuse)
    apply(target, three)
    assert snapshot(root) == patched and transaction.status(target).pending is None
    transaction.rollback(target)
    assert snapshot(root) == ORIGINAL and transaction.status(target).pending is None

