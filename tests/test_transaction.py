"""The transaction's contract without crashes: exact rollback, refusals that touch nothing, lock, drift, order."""

from __future__ import annotations

import compileall
import json
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from patcher import engine, transaction
from patcher.errors import (AnchorNotFound, ChangedDuringApply, DriftError, ExitCode, LockTimeout,
                            RollbackBlocked, StateError)
from patcher.ledger import State
from txn_support import (BROKEN, FILES, MORE_A, ORIGINAL, THREE_FIELDS, apply, leftovers, make_tree, patched_tree,
                         recipe, snapshot, target_of, tree_hash)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_tree(tmp_path / "target")


@pytest.fixture
def target(root: Path):
    return target_of(root)


@pytest.fixture
def three(tmp_path: Path):
    return recipe(tmp_path, THREE_FIELDS)


def edit(path: Path, extra: bytes = b"# local tweak\n") -> bytes:
    data = path.read_bytes() + extra
    path.write_bytes(data)
    return data


# --------------------------------------------------------------------------------------------------- apply + rollback


def test_commit_then_rollback_gives_back_every_byte_and_mode(root, target, three, tmp_path):
    record = apply(target, three)

    assert record is not None and [f.rel for f in record.files] == FILES
    assert (record.recipe, record.recipe_version, record.params, record.variant) == ("three-fields", 2,
                                                                                      {"default": 5}, None)
    after = snapshot(root)
    assert after == patched_tree(tmp_path)
    assert after["pkg/a.py"][0].count(b"z: int = 5") == 1
    b_bytes, b_mode = after["pkg/b.py"]
    assert b_mode == 0o755 and b_bytes.count(b"\n") == b_bytes.count(b"\r\n")  # CRLF kept, mode kept
    assert after["pkg/c.py"][1] == 0o640 and not after["pkg/c.py"][0].endswith(b"\n")
    assert {f.rel: f.sha_after for f in record.files} == {
        rel: __import__("hashlib").sha256(after[rel][0]).hexdigest() for rel in FILES}

    report = transaction.rollback(target)

    assert report.exit_code == ExitCode.OK and not report.noop
    assert report.restored == FILES
    assert snapshot(root) == ORIGINAL
    assert transaction.applied_records(target) == []
    assert not (target.state_dir / record.record_dir).exists()  # backups go with the record
    assert not (target.state_dir / "journal.json").exists() and leftovers(root) == []


def test_state_folder_has_a_gitignore_and_git_does_not_see_it(root, target, three):
    apply(target, three)
    assert (target.state_dir / ".gitignore").read_text() == "*\n"
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    out = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=all"],
                         capture_output=True, text=True, check=True).stdout
    assert "pkg/a.py" in out and ".specpatch" not in out


def test_applying_again_finds_it_applied_and_writes_nothing(root, target, three):
    apply(target, three)
    before = tree_hash(root)
    assert apply(target, three) is None
    assert tree_hash(root) == before and len(transaction.applied_records(target)) == 1


def test_stale_bytecode_is_removed_on_apply_and_rollback(root, target, three):
    cache = root / "pkg" / "__pycache__"

    def compiled() -> set[str]:
        compileall.compile_dir(str(root / "pkg"), quiet=1)
        compileall.compile_dir(str(root / "pkg"), quiet=1, optimize=1)
        (cache / "ab.cpython-311.pyc").write_bytes(b"not ours")  # a module whose name starts with "a"
        return {p.name for p in cache.iterdir()}

    assert any(n.startswith("a.") for n in compiled())
    apply(target, three)
    left = {p.name for p in cache.iterdir()}
    assert not any(n.startswith(("a.", "b.", "c.")) for n in left)
    assert {"ab.cpython-311.pyc"} < left and any(n.startswith("__init__.") for n in left)

    compiled()
    report = transaction.rollback(target)
    left = {p.name for p in cache.iterdir()}
    assert not any(n.startswith(("a.", "b.", "c.")) for n in left) and "ab.cpython-311.pyc" in left
    assert {Path(p).name.split(".")[0] for p in report.removed_bytecode} == {"a", "b", "c"}


def test_bytecode_behind_a_link_or_a_folder_of_that_name_is_left_alone(root, target, three, tmp_path):
    # a hostile round: `__pycache__` linked to a folder outside the target; apply deleted `a.*.pyc` there (files
    # that are not specpatch's). A folder named like a stale .pyc stopped the commit after the files were written
    outside = tmp_path / "outside-cache"
    outside.mkdir()
    for name in ("a.cpython-311.pyc", "a.keep-me.pyc", "b.other.pyc"):
        (outside / name).write_bytes(b"someone else's")
    (root / "pkg" / "__pycache__").symlink_to(outside, target_is_directory=True)
    apply(target, three)
    assert sorted(p.name for p in outside.iterdir()) == ["a.cpython-311.pyc", "a.keep-me.pyc", "b.other.pyc"]
    transaction.rollback(target)
    assert len(list(outside.iterdir())) == 3
    (root / "pkg" / "__pycache__").unlink()
    (root / "pkg" / "__pycache__" / "a.cpython-311.pyc").mkdir(parents=True)
    apply(target, three)
    assert (root / "pkg" / "__pycache__" / "a.cpython-311.pyc").is_dir()


# --------------------------------------------------------------------------------------------------- refusals


def test_a_plan_with_errors_is_refused_and_the_tree_is_unchanged(root, target, tmp_path):
    before = tree_hash(root)
    plan_ = engine.plan(recipe(tmp_path, BROKEN), target)
    assert plan_.errors and any(f.changed for f in plan_.files)  # a.py would change: the refusal must hold it back
    with transaction.target_lock(target) as lock, pytest.raises(AnchorNotFound):
        transaction.commit(plan_, lock)
    assert tree_hash(root) == before
    assert transaction.applied_records(target) == [] and transaction.status(target).pending is None
    assert not list((target.state_dir).glob("records/*"))


def test_a_lock_file_removed_while_held_stops_the_commit_before_it_writes(root, target, three):
    # a hostile round: the lock file was deleted during an apply; a second specpatch made a new one, locked it and
    # committed beside the first (which then failed with exit 1, or, paused, lost its backups to the second's sweep)
    before = snapshot(root)
    with transaction.target_lock(target) as lock:
        plan_ = engine.plan(three, target)
        lock.path.unlink()
        with pytest.raises(LockTimeout, match="removed or replaced while specpatch held it") as info:
            transaction.commit(plan_, lock)
    assert info.value.exit_code == ExitCode.LOCKED and snapshot(root) == before
    with transaction.target_lock(target) as lock:  # a lock taken on the new file works as before
        assert transaction.commit(engine.plan(three, target), lock) is not None


def test_a_plan_made_before_a_change_is_refused(root, target, three):
    # under the lock, only another program can have written it: not a bug of specpatch (a hostile round: exit 1)
    with transaction.target_lock(target) as lock:
        plan_ = engine.plan(three, target)
        edited = edit(root / "pkg" / "b.py")
        with pytest.raises(ChangedDuringApply, match="pkg/b.py.*changed since the plan") as info:
            transaction.commit(plan_, lock)
    assert info.value.exit_code == ExitCode.LOCKED
    assert (root / "pkg" / "b.py").read_bytes() == edited
    assert snapshot(root)["pkg/a.py"] == ORIGINAL["pkg/a.py"]
    assert transaction.applied_records(target) == []


def test_a_file_another_program_rewrites_while_the_apply_writes_is_left_as_found(root, target, three):
    # a hostile round: `pip install` of another release landed between commit's check and its writes; the apply put
    # 0.5.9's patched bytes over 0.5.10's files (exit 0), and rollback then wrote 0.5.9's originals there
    def upgrade(step):
        if step == "apply:after-write:pkg/a.py":
            upgrade.b = edit(root / "pkg" / "b.py", b"# the new release\n")

    transaction._fault = upgrade
    try:
        with transaction.target_lock(target) as lock:
            with pytest.raises(ChangedDuringApply, match="pkg/b.py.*changed while the apply was writing") as info:
                transaction.commit(engine.plan(three, target), lock)
    finally:
        transaction._fault = None
    assert info.value.exit_code == ExitCode.LOCKED
    now = snapshot(root)
    assert now["pkg/b.py"][0] == upgrade.b  # the other program's bytes, as it left them
    assert now["pkg/a.py"] == ORIGINAL["pkg/a.py"] and now["pkg/c.py"] == ORIGINAL["pkg/c.py"]
    assert transaction.applied_records(target) == [] and transaction.status(target).pending is None


def test_a_release_that_changes_while_the_apply_writes_undoes_it(root, three):
    (root / "pkg" / "_version.py").write_text('__version__ = "1.0"\n')
    target = target_of(root)
    assert str(target.version) == "1.0"

    def upgrade(step):
        if step == "apply:after-write:pkg/c.py":
            (root / "pkg" / "_version.py").write_text('__version__ = "1.1"\n')

    transaction._fault = upgrade
    try:
        with transaction.target_lock(target) as lock:
            with pytest.raises(ChangedDuringApply, match="_version.py now says 1.1, the plan was for 1.0"):
                transaction.commit(engine.plan(three, target), lock)
    finally:
        transaction._fault = None
    now = snapshot(root)
    assert all(now[rel] == ORIGINAL[rel] for rel in FILES)
    assert transaction.applied_records(target) == []


def test_an_entry_retired_while_its_edits_were_away_is_applied_again_when_they_come_back(root, target, three):
    # a safety round: apply, `git stash` (the files original again), a verify (which retired the entry), `git stash
    # pop` (the patched bytes back): rollback said "nothing to roll back" and left the tree patched
    apply(target, three)
    patched = snapshot(root)
    for rel in FILES:
        (root / rel).write_bytes(ORIGINAL[rel][0])
    with transaction.target_lock(target):
        assert [r.record.recipe for r in transaction.retire_stale(target)] == ["three-fields"]
    assert transaction.applied_records(target) == []
    for rel in FILES:
        (root / rel).write_bytes(patched[rel][0])
    # status and check read it as applied before a writing command records it so (hostile round 13, newcomer 06:
    # status said "no recipe applied" and check "not recorded by specpatch" while rollback rolled it back)
    seen = transaction.status(target)
    assert [r.recipe for r in seen.applied] == ["three-fields"] and not seen.retired
    report = transaction.rollback(target)
    assert sorted(report.restored) == sorted(FILES), report
    assert all(snapshot(root)[rel][0] == ORIGINAL[rel][0] for rel in FILES)
    # half of them back is not the entry's tree: it stays history
    apply(target, three)
    for rel in FILES:
        (root / rel).write_bytes(ORIGINAL[rel][0])
    with transaction.target_lock(target):
        transaction.retire_stale(target)
    (root / FILES[0]).write_bytes(patched[FILES[0]][0])
    with transaction.target_lock(target):
        transaction.retire_stale(target)
    assert transaction.applied_records(target) == []


def test_a_patched_file_deleted_under_an_installed_package_is_drift_not_an_uninstall(root, target, three):
    # hostile round 13 (newcomer 08): the files of an entry deleted while the package stayed (its __init__.py and
    # version there) retired it as "uninstalled": verify and rollback --force said nothing was applied, and the
    # backups were never used again
    apply(target, three)
    for rel in FILES:
        (root / rel).unlink()
    with transaction.target_lock(target):
        assert transaction.retire_stale(target) == []
    assert [r.recipe for r in transaction.applied_records(target)] == ["three-fields"]
    report = transaction.rollback(target, force=True)
    assert sorted(report.restored) == sorted(FILES), report
    assert all(snapshot(root)[rel][0] == ORIGINAL[rel][0] for rel in FILES)
    # the package folder gone with them: an uninstall, retired as before
    apply(target, three)
    import shutil

    shutil.rmtree(target.package_dir)
    with transaction.target_lock(target):
        assert [r.record.recipe for r in transaction.retire_stale(target)] == ["three-fields"]


def test_commit_refuses_without_the_lock(root, target, three):
    with transaction.target_lock(target) as lock:
        plan_ = engine.plan(three, target)
    with pytest.raises(StateError, match="without holding its lock"):
        transaction.commit(plan_, lock)
    assert snapshot(root) == ORIGINAL


# --------------------------------------------------------------------------------------------------- lock


def test_lock_times_out_with_a_clear_error(root, target):
    held, done = threading.Event(), threading.Event()

    def holder():
        with transaction.target_lock(target):
            held.set()
            done.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        held.wait(10)
        with pytest.raises(LockTimeout) as info:
            with transaction.target_lock(target, timeout=0.2):
                pass
    finally:
        done.set()
        thread.join()
    assert info.value.exit_code == ExitCode.LOCKED
    assert str(root) in info.value.message and "0.2 s" in info.value.message


def test_lock_is_reentrant_in_one_thread(target):
    with transaction.target_lock(target) as outer:
        with transaction.target_lock(target, timeout=0) as inner:
            assert inner is outer
            assert transaction.recover(target) is None
        assert outer.held
    assert not outer.held


def test_two_applies_at_once_apply_once(root, target, three):
    barrier = threading.Barrier(2)
    results: list = []

    def run():
        barrier.wait()
        results.append(apply(target_of(root), three))

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r is None for r in results) == [False, True]
    assert (root / "pkg" / "a.py").read_bytes().count(b"z: int = 5") == 1
    assert len(transaction.applied_records(target)) == 1


# --------------------------------------------------------------------------------------------------- drift


def test_a_hand_edit_blocks_rollback_and_shows_the_change(root, target, three):
    apply(target, three)
    edited = edit(root / "pkg" / "a.py")
    before = tree_hash(root)

    with pytest.raises(DriftError) as info:
        transaction.rollback(target)

    err = info.value
    assert err.exit_code == ExitCode.DRIFT and "pkg/a.py" in err.message and err.location.file == "pkg/a.py"
    assert "+# local tweak" in err.details and "--- a/pkg/a.py" in err.details
    assert tree_hash(root) == before and (root / "pkg" / "a.py").read_bytes() == edited
    assert len(transaction.applied_records(target)) == 1 and transaction.status(target).pending is None
    states = {s.rel: s.state for s in transaction.file_states(target, transaction.applied_records(target)[0])}
    assert states == {"pkg/a.py": "modified", "pkg/b.py": "intact", "pkg/c.py": "intact"}


def test_force_restores_and_keeps_the_local_version(root, target, three):
    apply(target, three)
    edited = edit(root / "pkg" / "a.py")

    report = transaction.rollback(target, force=True)

    assert snapshot(root) == ORIGINAL
    assert len(report.kept) == 1
    kept = Path(report.kept[0])
    assert kept.read_bytes() == edited
    assert kept.is_relative_to(target.state_dir / "kept" / "pkg") and kept.name.startswith("a.py.")
    assert str(kept) in report.message


def test_a_recipe_applied_twice_is_checked_whole_before_any_rollback(root, target, three):
    # a hand edit dropped the recipe's edit of a.py, a second apply wrote it again (a second entry, of a.py alone):
    # rolling the recipe back would undo the second entry, then stop at the first (a.py is not what it wrote),
    # leaving the tree half rolled back; the first entry is checked, as the second's rollback will leave a.py, first
    from patcher import api

    apply(target, three)
    mine = ORIGINAL["pkg/a.py"][0] + b"# my note\n"
    (root / "pkg/a.py").write_bytes(mine)
    apply(target, three)
    assert [len(r.files) for r in transaction.applied_records(target)] == [3, 1]
    before = tree_hash(root)

    with pytest.raises(DriftError) as info:
        api.rollback(target, "three-fields")

    assert "pkg/a.py" in info.value.message and "earlier entry" in info.value.message
    assert "nothing was rolled back" in info.value.message and "+# my note" in info.value.details
    assert tree_hash(root) == before and len(transaction.applied_records(target)) == 2

    report = api.rollback(target, "three-fields", force=True)  # both entries; the hand edit is kept aside

    assert snapshot(root) == ORIGINAL and transaction.applied_records(target) == []
    assert [Path(k).read_bytes() for k in report.kept] == [mine]


def test_a_missing_file_is_drift_and_force_recreates_it(root, target, three):
    record = apply(target, three)
    (root / "pkg" / "b.py").unlink()
    assert [s.state for s in transaction.file_states(target, record)] == ["intact", "missing", "intact"]
    with pytest.raises(DriftError, match=r"pkg/b.py \(missing\)"):
        transaction.rollback(target)
    assert not (root / "pkg" / "b.py").exists()

    report = transaction.rollback(target, force=True)
    assert snapshot(root) == ORIGINAL and report.kept == []


def test_a_mode_changed_since_apply_is_drift_and_force_puts_the_original_back(root, target, three):
    """`chmod +x` on a patched file: rollback used to put the original mode back without a word."""
    apply(target, three)
    a = root / "pkg" / "a.py"
    before = a.stat().st_mode & 0o7777
    a.chmod(before | 0o111)
    with pytest.raises(DriftError) as info:
        transaction.rollback(target)
    assert f"pkg/a.py (mode {before:04o} -> {before | 0o111:04o})" in info.value.message
    assert "only the mode changed" in info.value.details
    assert a.stat().st_mode & 0o111  # nothing rolled back

    report = transaction.rollback(target, force=True)
    assert snapshot(root) == ORIGINAL and report.kept == []  # bytes and modes: nothing of the user's to keep


def test_rollback_follows_the_order_of_application(root, target, three, tmp_path):
    apply(target, three)
    apply(target, recipe(tmp_path, MORE_A))
    before = tree_hash(root)

    with pytest.raises(RollbackBlocked) as info:
        transaction.rollback(target, "three-fields")
    assert "`more-a`" in info.value.message and "pkg/a.py" in info.value.message
    assert info.value.exit_code == ExitCode.CANNOT_APPLY and tree_hash(root) == before

    assert transaction.rollback(target).record.recipe == "more-a"  # default: the last applied
    assert snapshot(root) == patched_tree(tmp_path)
    assert transaction.rollback(target, "three-fields").record.recipe == "three-fields"
    assert snapshot(root) == ORIGINAL


def test_a_second_rollback_is_a_clear_no_op(root, target, three):
    apply(target, three)
    transaction.rollback(target)
    before = tree_hash(root)

    again = transaction.rollback(target)
    named = transaction.rollback(target, "three-fields")

    for report in (again, named):
        assert report.noop and report.exit_code == ExitCode.OK and report.message.startswith("nothing to roll back")
    assert "`three-fields` is not applied" in named.message
    assert tree_hash(root) == before


def test_rollback_of_a_never_patched_target_creates_no_state(target):
    assert transaction.rollback(target).noop
    assert transaction.recover(target) is None
    assert not target.state_dir.exists()


# --------------------------------------------------------------------------------------------------- queries


def test_status_lists_applied_recipes_as_json(root, target, three, tmp_path):
    apply(target, three, {"default": "7"})
    apply(target, recipe(tmp_path, MORE_A))

    report = transaction.status(target)
    data = json.loads(json.dumps(report.to_dict()))

    assert [r["recipe"] for r in data["applied"]] == ["three-fields", "more-a"]
    first = data["applied"][0]
    assert first["recipe_version"] == 2 and first["params"] == {"default": 7} and first["seq"] == 1
    assert first["package"] == "pkg" and first["applied_at"].endswith("+00:00")
    assert [(f["rel"], f["mode"]) for f in first["files"]] == [("pkg/a.py", "0644"), ("pkg/b.py", "0755"),
                                                               ("pkg/c.py", "0640")]
    assert all(len(f["sha_before"]) == len(f["sha_after"]) == 64 for f in first["files"])
    assert data["pending"] is None and data["target"] == str(root)


def test_status_names_the_files_edited_since_their_last_recipe(root, target, three, tmp_path):
    # hostile round 13 (11): `status` showed a hand-edited entry exactly like an intact one (`check` said drift)
    apply(target, three)
    apply(target, recipe(tmp_path, MORE_A))
    assert transaction.status(target).edited == {}
    (root / "pkg" / "b.py").write_bytes((root / "pkg" / "b.py").read_bytes() + b"# by hand\n")
    (root / "pkg" / "a.py").write_bytes((root / "pkg" / "a.py").read_bytes() + b"# by hand\n")
    report = transaction.status(target)
    # a.py's last writer is more-a (entry 2), b.py's three-fields (entry 1)
    assert report.edited == {1: ["pkg/b.py"], 2: ["pkg/a.py"]}
    assert [r["edited"] for r in report.to_dict()["applied"]] == [["pkg/b.py"], ["pkg/a.py"]]


def test_pristine_and_patched_bytes_of_a_record(root, target, three):
    record = apply(target, three)
    assert transaction.pristine_files(target, record) == {rel: ORIGINAL[rel][0] for rel in FILES}
    assert transaction.patched_files(target, record) == {rel: (root / rel).read_bytes() for rel in FILES}
    states = transaction.file_states(target, record)
    assert [s.state for s in states] == ["intact"] * 3 and states[1].mode == 0o755
    assert states[0].current == (root / "pkg/a.py").read_bytes()


def test_a_damaged_backup_refuses_rollback(root, target, three):
    record = apply(target, three)
    State.of(target).path(record.files[2].backup).write_bytes(b"garbage")
    before = tree_hash(root)
    with pytest.raises(StateError, match="pkg/c.py.*damaged"):
        transaction.rollback(target)
    assert tree_hash(root) == before


def test_a_symlinked_file_is_written_through(root, target, three):
    real = root / "pkg" / "real_c.py"
    os.replace(root / "pkg" / "c.py", real)
    (root / "pkg" / "c.py").symlink_to("real_c.py")
    apply(target, three)
    assert (root / "pkg" / "c.py").is_symlink() and b"z: int = 5" in real.read_bytes()
    transaction.rollback(target)
    assert (root / "pkg" / "c.py").is_symlink() and real.read_bytes() == ORIGINAL["pkg/c.py"][0]


@pytest.mark.parametrize("change", ["chmod", "immutable"])
def test_a_recipe_applied_twice_is_refused_whole_for_a_mode_or_an_immutable_file_of_its_earlier_entry(
        root, target, three, change):
    # a hostile round: the newer entry was rolled back, then a chmod (a mode drift) or `chattr +i` (the preflight)
    # of a file only the earlier entry wrote stopped the rollback half-way
    from patcher import api
    from patcher.errors import OSFailure

    apply(target, three)
    (root / "pkg/b.py").write_bytes(ORIGINAL["pkg/b.py"][0])  # a partial reinstall of b.py
    apply(target, three)
    assert [len(r.files) for r in transaction.applied_records(target)] == [3, 1]
    c = root / "pkg/c.py"
    if change == "chmod":
        c.chmod(0o600)
        expected = (DriftError,)
    else:
        assert subprocess.run(["chattr", "+i", str(c)]).returncode == 0, "chattr +i is needed (root, CI runs as root)"
        expected = (OSFailure,)
    before = tree_hash(root)
    try:
        with pytest.raises(expected) as info:
            api.rollback(target, "three-fields")
        assert "nothing was rolled back" in info.value.message + info.value.hint
        assert tree_hash(root) == before and len(transaction.applied_records(target)) == 2
    finally:
        subprocess.run(["chattr", "-i", str(c)])
