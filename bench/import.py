"""Benchmark of `specpatch import` against `patch --fuzz 2`: lift a team's patch on its release, port it to a later one.

    python bench/import.py PATCH --base 0.5.9 --later 0.5.12.post1 [--truth TEAM_PATCH_FOR_LATER] [--json OUT]

Prints, in one run:

- the hunks of PATCH, how many were lifted into semantic steps, and whether the recipe reproduces the patched base
  release byte for byte (file by file);
- on the later release, per hunk: applied, already upstream (every step of the hunk found its change there),
  upstream in another form (every step is already upstream or refused with all the lines it adds found in the
  release), or refused (a step refused, with the reason);
- with --truth (the team's own patch for the later release, the ground truth of a correct port), each hunk of PATCH
  put in a class and scored, for specpatch and for `patch -p2 --fuzz 2` applied to the same pristine release:

  class of a hunk, by comparing it with the team's patch and the later release:
    carried   a hunk of the team's patch for that file has the same changed lines, in a row (its `-` and `+` lines,
              whitespace aside; the team's hunk may hold more)
    adapted   not carried, but at least half of its added lines are in the team's patch for that file
    upstream  not in the team's patch, and at least 80% of its added lines are already in the later release's file
    dropped   the rest (the team did not port it)

  scores, from the resulting files (so both tools are measured the same way): a hunk is cut into its change groups
  (added lines with one line of context on each side, whitespace aside); it *landed as the team's port* when every
  group occurs as many times in the tool's files as in the team's (at least once); it was *applied wrongly* when a
  group occurs more often in the tool's files than in the team's (code the team does not have, or twice).
  A second, looser figure, *landed in the team's context*, reads the context from the team's files instead of the
  hunk: a group's added lines must sit between the same neighbouring lines, as many times, in the tool's files as in
  the team's (for a group with no added line that is not blank, the first rule): a hunk whose context lines upstream
  edited (so that no port can have them) is then still seen landing where the team put it.

  A hunk of a file the later release renamed, whose steps `port` followed to another file, is classed and scored in
  that file (the team's port of it is there too), for both tools.

The patches are read from wherever they are (keep other projects' patches out of this repository), in any path
style `specpatch import` reads (`a/python/sglang/srt/x.py`, `./srt/x.py`, a `diff -ruN` of two trees): `patch`
is given each rewritten from its parsed hunks with `a/python/sglang/` paths.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from patcher import importer  # noqa: E402
from patcher.fetch import fetch_release  # noqa: E402
from patcher.recipe import load_recipe  # noqa: E402

PACKAGE = "sglang"


def norm(line: str) -> str:
    return " ".join(line.split())


@dataclass
class HunkInfo:
    file: str
    hunk: importer.Hunk
    groups: list[str] = field(default_factory=list)  #: change groups, normalized
    blocks: list[list[str]] = field(default_factory=list)  #: each group's added lines, normalized
    added: list[str] = field(default_factory=list)  #: normalized non-blank added lines
    changed: tuple = ()  #: (-, +) lines normalized, for "carried"
    klass: str = ""
    where: str = ""  #: the file the hunk is scored in: its own, or the one `port` followed a renamed file to


def _lifted_from_recipe(recipe, files: list[importer.FilePatch], base_pkg: Path) -> importer.Lifted:
    """What `importer.lift` returned, read back from a recipe it wrote (step names carry the hunk numbers)."""
    hunks = {(fp.path, h.number): h for fp in files for h in fp.hunks}
    steps, reports = [], {}
    for s in recipe.steps:
        number = int(re.search(r"-h(\d+)-", s.name).group(1))
        hunk = hunks[(s.file, number)]
        steps.append(importer.LiftedStep(s.file, hunk, {"op": s.op}))
        report = reports.setdefault((s.file, number), importer.HunkReport(s.file, hunk))
        report.steps.append(s.op)
        if s.op == "unexpressed_hunk":
            report.reason = getattr(s, "reason", "") or "not expressed"
    expected = {}
    for fp in files:
        path = base_pkg / fp.path
        if fp.old and path.is_file():
            text = path.read_bytes().decode()
            units, _ = importer.units_of(text, fp)
            expected[fp.path] = "".join(importer._apply_units(importer._split(text), units)).encode()
        for h in fp.hunks:
            reports.setdefault((fp.path, h.number), importer.HunkReport(fp.path, h, reason="no step"))
    return importer.Lifted(steps, list(reports.values()), expected, [])


def hunk_info(fp: importer.FilePatch, h: importer.Hunk) -> HunkInfo:
    info = HunkInfo(fp.path, h)
    lines = [ln for ln in h.lines if not ln.startswith("\\")]
    info.added = [norm(ln[1:]) for ln in lines if ln[:1] == "+" and ln[1:].strip()]
    info.changed = tuple((ln[0], norm(ln[1:])) for ln in lines if ln[:1] in "+-" and ln[1:].strip())
    i = 0
    while i < len(lines):
        if lines[i][:1] in "+-":
            j = i
            while j < len(lines) and lines[j][:1] in "+-":
                j += 1
            before = [norm(lines[i - 1][1:])] if i > 0 else []
            after = [norm(lines[j][1:])] if j < len(lines) else []
            plus = [norm(ln[1:]) for ln in lines[i:j] if ln[:1] == "+"]
            if any(p for p in plus) or any(ln[1:].strip() for ln in lines[i:j]):
                info.groups.append("\n".join(before + plus + after))
                info.blocks.append(plus)
            i = j
        else:
            i += 1
    return info


def _contains(seq: tuple, sub: tuple) -> bool:
    """Is `sub` a contiguous part of `seq` (a team hunk may hold a base hunk and more)?"""
    n = len(sub)
    return n > 0 and any(seq[k:k + n] == sub for k in range(len(seq) - n + 1))


def count(text_lines: list[str], group: str) -> int:
    want = group.split("\n")
    n = len(want)
    return sum(1 for k in range(len(text_lines) - n + 1) if text_lines[k:k + n] == want)


def contexts(text_lines: list[str], block: list[str]) -> Counter:
    """Where `block` occurs in the file: a count per (line before, line after)."""
    n = len(block)
    return Counter((text_lines[k - 1] if k else None, text_lines[k + n] if k + n < len(text_lines) else None)
                   for k in range(len(text_lines) - n + 1) if text_lines[k:k + n] == block)


def landed_in_context(info: HunkInfo, ours: list[str], theirs: list[str]) -> bool:
    """Every group's added lines sit between the same neighbours, as often, in `ours` as in `theirs`."""
    if not info.groups:
        return False
    for group, block in zip(info.groups, info.blocks):
        if any(block):
            want = contexts(theirs, block)
            if not want or contexts(ours, block) != want:
                return False
        elif not (count(ours, group) == count(theirs, group) >= 1):
            return False
    return True


def normalized_files(root: Path, rels: set[str]) -> dict[str, list[str]]:
    out = {}
    for rel in rels:
        p = root / rel
        out[rel] = [norm(ln) for ln in p.read_text(errors="replace").splitlines()] if p.is_file() else []
    return out


def run_patch(patch: Path, tree: Path, fuzz: int) -> tuple[str, int]:
    """`patch -p2` of `patch` in `tree` (the folder that holds the package), its files named as `specpatch import`
    reads them whatever the team's path style (`./srt/x.py`, `../checkout/python/sglang/srt/x.py`)."""
    same = tree / f"{patch.stem}.canonical.patch"
    same.write_text(canonical(patch.read_text(errors="surrogateescape")), errors="surrogateescape")
    done = subprocess.run(["patch", "-p2", f"--fuzz={fuzz}", "-N", "-t", "--no-backup-if-mismatch", "-r", "-",
                           "-i", str(same)], cwd=tree, capture_output=True, text=True)
    same.unlink()
    return done.stdout + done.stderr, done.returncode


def canonical(text: str) -> str:
    """The diff written again from its parsed files and hunks, each file named `a/python/sglang/<path>` (files with
    no hunk, such as a mode change or a pure rename, left out: `patch` has nothing to apply there)."""
    out = []
    for fp in importer.parse_patch(text, PACKAGE):
        if not fp.hunks:
            continue
        out.append(f"--- {f'a/python/{PACKAGE}/{fp.old}' if fp.old else '/dev/null'}\n"
                   f"+++ {f'b/python/{PACKAGE}/{fp.new}' if fp.new else '/dev/null'}\n")
        out += [h.text for h in fp.hunks]
    return "".join(out)


def copy_release(version: str, dest: Path) -> Path:
    src = fetch_release(PACKAGE, version) / PACKAGE
    shutil.copytree(src, dest / PACKAGE, ignore=shutil.ignore_patterns("__pycache__"))
    return dest / PACKAGE


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("patch", type=Path)
    ap.add_argument("--base", required=True)
    ap.add_argument("--later", required=True)
    ap.add_argument("--truth", type=Path, help="the team's own patch for the later release")
    ap.add_argument("--json", type=Path, help="write the figures and the per-hunk table here")
    ap.add_argument("--keep", type=Path, help="keep the lifted recipe (and its code files) in this folder")
    ap.add_argument("--recipe", type=Path, help="score this recipe, lifted from PATCH by an earlier run (--keep), "
                    "instead of lifting again")
    args = ap.parse_args()
    args.patch = args.patch.resolve()  # patch(1) runs in scratch folders
    args.truth = args.truth.resolve() if args.truth else None
    scratch = Path(tempfile.mkdtemp(prefix="bench-import-"))
    try:
        return run(args, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run(args, scratch: Path) -> int:
    text = args.patch.read_text()
    files = importer.parse_patch(text, PACKAGE)
    base_pkg = fetch_release(PACKAGE, args.base) / PACKAGE
    t0 = time.perf_counter()
    if args.recipe:  # a recipe lifted by an earlier run (--keep): its steps name their hunks
        recipe_path = args.recipe
        lifted = _lifted_from_recipe(load_recipe(recipe_path), files, base_pkg)
    else:
        lifted = importer.lift(base_pkg, text, package=PACKAGE)
        recipe_path = importer.write_recipe(lifted, scratch / "recipes" / "bench-lifted.yaml", package=PACKAGE,
                                            release=args.base, source=args.patch.name)
    lift_s = time.perf_counter() - t0
    rt = importer.round_trip(recipe_path, base_pkg, lifted.expected, lifted.trimmed, lifted.unmatched)
    if args.keep:
        shutil.copytree(recipe_path.parent, args.keep, dirs_exist_ok=True)
    recipe = load_recipe(recipe_path)
    later_pkg = fetch_release(PACKAGE, args.later) / PACKAGE
    t0 = time.perf_counter()
    ported = importer.port(recipe, later_pkg, base_dir=base_pkg)
    port_s = time.perf_counter() - t0

    # per hunk: the ported steps' answers
    by_hunk: dict[tuple[str, int], list[importer.PortedStep]] = {}
    for ls, ps in zip(lifted.steps, ported.steps):
        for number in ls.hunks or (ls.hunk.number,):  # a change two hunks make (one call's arguments): both
            by_hunk.setdefault((ls.file, number), []).append(ps)
    infos = [hunk_info(fp, h) for fp in files for h in fp.hunks]
    for info in infos:  # a file upstream renamed, which `port` followed: scored where its steps went
        moved = {s.file for s in by_hunk.get((info.file, info.hunk.number), [])}
        info.where = moved.pop() if len(moved) == 1 else info.file

    blank_only = {(h.file, h.hunk.number) for h in lifted.hunks if h.note}

    def answer(info: HunkInfo) -> str:
        steps = by_hunk.get((info.file, info.hunk.number), [])
        if not steps:
            # a hunk that only puts spaces on blank lines needs no step: nothing to port
            return "no_step" if (info.file, info.hunk.number) in blank_only else "refused"
        statuses = {s.status for s in steps}
        if statuses == {"already_upstream"}:
            return "already_upstream"
        if statuses <= {"already_upstream", "upstream_other_form"}:
            return "upstream_other_form"  # a step refused, with every line it adds found in the release
        if statuses & {"refused", "upstream_other_form", "skipped"}:
            return "refused"
        return "applied"

    answers = Counter(answer(i) for i in infos)
    out: dict = {
        "patch": args.patch.name, "base": args.base, "later": args.later, "hunks": len(infos),
        "lifted": lifted.lifted, "steps": len(lifted.steps),
        "ops": dict(Counter(s.options["op"] for s in lifted.steps).most_common()),
        "round_trip_identical_files": len(rt.identical),
        "round_trip_files": rt.files,
        "round_trip_blank_line_whitespace": rt.blank_whitespace,
        "round_trip_hunks_not_applying": rt.unmatched,
        "round_trip_refused_steps": len(rt.errors), "lift_seconds": round(lift_s, 1), "port_seconds": round(port_s, 1),
        "later": {"applied": answers["applied"], "already_upstream": answers["already_upstream"],
                  "upstream_other_form": answers["upstream_other_form"],
                  "refused": answers["refused"], "no_step": answers["no_step"]},
    }
    print(f"{args.patch.name}: {len(infos)} hunks in {len(files)} files; lifted {lifted.lifted} "
          f"({len(lifted.steps)} steps) in {lift_s:.0f} s")
    blank = (f", {len(rt.blank_whitespace)} identical but for spaces on {sum(rt.blank_whitespace.values())} blank "
             f"lines the patch adds" if rt.blank_whitespace else "")
    unmatched = (f", {len(rt.unmatched)} not judged ({sum(rt.unmatched.values())} hunks do not apply to "
                 f"{args.base})" if rt.unmatched else "")
    print(f"  round trip on {args.base}: {len(rt.identical)}/{rt.files} files byte-identical{blank}{unmatched}; "
          f"{len(rt.errors)} step(s) refused there")
    print(f"  on {args.later} (port, {port_s:.0f} s): {answers['applied']} hunks applied, "
          f"{answers['already_upstream']} already upstream, {answers['upstream_other_form']} upstream in another "
          f"form, {answers['refused']} refused"
          + (f", {answers['no_step']} with no step (only spaces on blank lines)" if answers["no_step"] else ""))

    if args.truth:
        out["truth"] = score(args, infos, ported, answer, scratch)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


def score(args, infos: list[HunkInfo], ported, answer, scratch: Path) -> dict:
    truth_files = importer.parse_patch(args.truth.read_text(), PACKAGE)
    truth_changed: dict[str, set] = {}
    truth_added: dict[str, set] = {}
    for fp in truth_files:
        for h in fp.hunks:
            hi = hunk_info(fp, h)
            truth_changed.setdefault(fp.path, set()).add(hi.changed)
            truth_added.setdefault(fp.path, set()).update(hi.added)
    later_pkg = fetch_release(PACKAGE, args.later) / PACKAGE
    rels = {i.where or i.file for i in infos}
    later_lines = normalized_files(later_pkg, rels)
    for info in infos:
        f = info.where or info.file
        if any(_contains(t, info.changed) for t in truth_changed.get(f, set())):
            info.klass = "carried"
        elif info.added and sum(a in truth_added.get(f, set()) for a in info.added) * 2 >= len(info.added):
            info.klass = "adapted"
        elif info.added and sum(a in set(later_lines[f]) for a in info.added) >= 0.8 * len(info.added):
            info.klass = "upstream"
        else:
            info.klass = "dropped"

    # the team's port, specpatch's port and patch --fuzz 2, each on a pristine copy of the later release
    team_tree = copy_release(args.later, scratch / "team")
    team_log, team_rc = run_patch(args.truth, team_tree.parent, 0)
    ours_tree = copy_release(args.later, scratch / "ours")
    for rel, data in ported.files.items():
        (ours_tree / rel).write_bytes(data)
    fuzz_tree = copy_release(args.later, scratch / "fuzz")
    fuzz_log, _ = run_patch(args.patch, fuzz_tree.parent, 2)
    team = normalized_files(team_tree, rels)
    trees = {"specpatch": normalized_files(ours_tree, rels), "patch --fuzz 2": normalized_files(fuzz_tree, rels)}

    classes = Counter(i.klass for i in infos)
    result: dict = {"classes": dict(classes), "team_patch_applied_cleanly": team_rc == 0, "tools": {}}
    print(f"  against {args.truth.name} (applied {'cleanly' if team_rc == 0 else 'WITH ERRORS'} to {args.later}): "
          + ", ".join(f"{classes[k]} {k}" for k in ("carried", "adapted", "upstream", "dropped")))
    rows = []
    for tool, files in trees.items():
        tally: Counter = Counter()
        for info in infos:
            f = info.where or info.file
            ours = [count(files[f], g) for g in info.groups]
            theirs = [count(team[f], g) for g in info.groups]
            landed = bool(info.groups) and all(o == t and t >= 1 for o, t in zip(ours, theirs))
            wrong = any(o > t for o, t in zip(ours, theirs))
            tally[(info.klass, "landed")] += landed
            in_context = landed_in_context(info, files[f], team[f])
            tally[(info.klass, "landed_context")] += in_context
            tally[(info.klass, "wrong")] += wrong
            if tool == "specpatch":
                tally[(info.klass, answer(info))] += 1
                rows.append({"file": info.file, "hunk": info.hunk.header.split("@@")[1].strip(), "class": info.klass,
                             "specpatch": answer(info), "landed": landed, "wrong": wrong,
                             "landed_context": in_context, **({"scored_in": f} if f != info.file else {})})
        per = {k: {m: tally[(k, m)] for m in ("landed", "landed_context", "wrong", "applied", "already_upstream",
                                               "upstream_other_form", "refused")}
               for k in ("carried", "adapted", "upstream", "dropped")}
        result["tools"][tool] = per
        print(f"  {tool}:")
        for k in ("carried", "adapted", "upstream", "dropped"):
            extra = ""
            if tool == "specpatch":
                extra = (f"; answers: {per[k]['applied']} applied, {per[k]['already_upstream']} already upstream, "
                         f"{per[k]['upstream_other_form']} upstream in another form, {per[k]['refused']} refused")
            print(f"    {k:9} {classes[k]:3}: {per[k]['landed']:3} landed as the team's port, "
                  f"{per[k]['wrong']:3} applied wrongly{extra}")
        print(f"    (landed in the team's context: " + ", ".join(
            f"{k} {per[k]['landed_context']}" for k in ("carried", "adapted", "upstream", "dropped")) + ")")
    fuzz_failed = sum(1 for ln in fuzz_log.splitlines() if "FAILED" in ln)
    fuzz_fuzzed = sum(1 for ln in fuzz_log.splitlines() if "with fuzz" in ln)
    result["patch_fuzz2"] = {"failed_hunks": fuzz_failed, "applied_with_fuzz": fuzz_fuzzed,
                             "missing_files": sum(1 for ln in fuzz_log.splitlines() if "No file to patch" in ln
                                                  or "can't find file" in ln)}
    print(f"  patch --fuzz 2 said: {fuzz_failed} hunks FAILED, {fuzz_fuzzed} applied with fuzz")
    if team_rc != 0:
        print("  the team's patch did not apply cleanly:\n" + "\n".join(team_log.splitlines()[-10:]))
    result["hunks"] = rows
    return result


if __name__ == "__main__":
    raise SystemExit(main())
