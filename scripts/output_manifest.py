"""Record, or check, the bytes a recipe writes on each release: sha256 of every file `apply` changes.

For each release, the pristine wheel (fetched into the cache when missing, `patcher.fetch`) is copied to a scratch
folder, the recipe is applied there with its default parameters (`patcher.api.apply_recipe`, no smoke test: the
checks read the bytes, they never change them), and every file whose bytes differ from the pristine copy's is hashed.
The variant's checks (imports, stubs, probes) are recorded beside the hashes. A refused release is recorded as
refused. The manifest is JSON::

    {"recipe": "dynamic-spec-disable", "releases": {"0.5.9": {"variant": "fallback-0.5.9", "outcome": "changed",
     "verify": {"imports": [...], "probes": [...], ...}, "files": {"sglang/srt/server_args.py": "<sha256>", ...}}}}

    scripts/output_manifest.py --write                      # record every release into the manifest
    scripts/output_manifest.py                              # check every release against it (exit 1 on a difference)
    scripts/output_manifest.py --versions 0.5.5,0.5.16      # only these
    scripts/output_manifest.py --recipe dynamic-spec-disable-vllm --write   # vLLM: the package is the recipe's

The package fetched is the recipe's (`target.package`); the default releases and manifest are that package's
(RELEASES) and tests/output-manifest/<recipe id>.json.

The manifest proves that a change of the recipe's files (a new layout, shared snippets, overlays) leaves what it
writes byte for byte the same on every release.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from patcher import api  # noqa: E402
from patcher.fetch import fetch_release  # noqa: E402
from patcher.recipe import load_recipe  # noqa: E402
from patcher.target import find_target  # noqa: E402

#: the default releases per package: sglang's are tests/test_matrix.py KNOWN and every post release; vLLM's are the releases
#: tests/test_vllm.py tries (CI_RELEASES: each wheel is 300-480 MB): both ends of the backport and of the alias, and
#: alias-0.34
POST = ["0.5.4.post1", "0.5.4.post2", "0.5.4.post3", "0.5.5.post1", "0.5.5.post2", "0.5.5.post3", "0.5.6.post1",
        "0.5.6.post2", "0.5.8.post1", "0.5.10.post1", "0.5.12.post1", "0.5.13.post1", "0.5.15.post1"]
RELEASES = {"sglang": [f"0.5.{minor}" for minor in range(4, 24)] + POST,
            "vllm": ["0.12.0", "0.23.0", "0.24.0", "0.33.0", "0.34.0"]}
MANIFESTS = ROOT / "tests" / "output-manifest"
MANIFEST = MANIFESTS / "dynamic-spec-disable.json"
STATE = ".specpatch"  #: the target's state folder (ledger, backups): specpatch's, not the patched output


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _tree(root: Path) -> dict[str, Path]:
    return {p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*"))
            if p.is_file() and STATE not in p.relative_to(root).parts}


def _checks(spec) -> dict:
    """The selected checks, as plain data: a layout change of the recipe must not change them either."""
    return {"imports": list(spec.imports), "stubs": list(spec.stubs), "requires": list(spec.requires),
            "shims": list(spec.shims), "timeout": spec.timeout,
            "probes": [{"path": p.path, "name": p.name, "description": p.description, "timeout": p.timeout}
                       for p in spec.probes]}


def release_output(recipe_ref: str, version: str, scratch: Path) -> dict:
    """What applying `recipe_ref` with default parameters writes on a pristine copy of its package's `version`."""
    recipe = load_recipe(recipe_ref)
    package = recipe.target.package
    pristine = fetch_release(package, version)
    copy = scratch / f"{package}-{version}"
    shutil.copytree(pristine, copy, symlinks=True)
    try:
        target = find_target(copy, package=package, assume_version=version)
        result = api.apply_recipe(recipe, target, smoke=False)
        selection = result.plan.selection
        variant, checks = selection.variant, _checks(selection.verify)
        if result.outcome == "refused":
            return {"variant": variant, "outcome": "refused", "verify": checks, "files": {}}
        if result.outcome != "changed":
            raise SystemExit(f"{version}: apply ended `{result.outcome}` (exit {int(result.exit_code)}): "
                             f"{result.error or [str(e) for e in result.plan.errors]}")
        before, after = _tree(pristine), _tree(copy)
        files = {rel: _digest(p) for rel, p in after.items()
                 if rel not in before or p.read_bytes() != before[rel].read_bytes()}
        gone = sorted(set(before) - set(after))
        if gone:
            raise SystemExit(f"{version}: apply removed {', '.join(gone)}")
        return {"variant": variant, "outcome": "changed", "verify": checks, "files": files}
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--recipe", default="dynamic-spec-disable", help="a recipe id or the path of its .yaml")
    ap.add_argument("--manifest", type=Path, default=None,
                    help="default: tests/output-manifest/<recipe id>.json")
    ap.add_argument("--versions", default=None, help="comma-separated releases (default: the package's RELEASES)")
    ap.add_argument("--write", action="store_true", help="record the releases into the manifest instead of checking")
    args = ap.parse_args(argv)
    recipe = load_recipe(args.recipe)
    if args.manifest is None:
        args.manifest = MANIFESTS / f"{recipe.id}.json"
    if args.versions is None:
        args.versions = ",".join(RELEASES.get(recipe.target.package, []))
    versions = [v for v in args.versions.split(",") if v]
    recorded = json.loads(args.manifest.read_text()) if args.manifest.exists() else {"releases": {}}
    differ = []
    with tempfile.TemporaryDirectory(prefix="specpatch-manifest-") as tmp:
        for version in versions:
            got = release_output(args.recipe, version, Path(tmp))
            if args.write:
                recorded["releases"][version] = got
                print(f"{version}: {got['variant']} {got['outcome']}, {len(got['files'])} files recorded")
                continue
            want = recorded["releases"].get(version)
            if want is None:
                print(f"{version}: not in {args.manifest}")
                differ.append(version)
            elif got != want:
                changed = sorted(k for k in set(got["files"]) | set(want["files"])
                                 if got["files"].get(k) != want["files"].get(k))
                print(f"{version}: DIFFERENT: variant {want['variant']} -> {got['variant']}, outcome "
                      f"{want['outcome']} -> {got['outcome']}, checks "
                      f"{'same' if got.get('verify') == want.get('verify') else 'changed'}, files: "
                      f"{', '.join(changed) or 'none'}")
                differ.append(version)
            else:
                print(f"{version}: identical ({got['variant']}, {len(got['files'])} files)")
    if args.write:
        recorded["recipe"] = args.recipe
        recorded["releases"] = dict(sorted(recorded["releases"].items(), key=lambda kv: _key(kv[0])))
        args.manifest.write_text(json.dumps({"recipe": recorded["recipe"], "releases": recorded["releases"]},
                                            indent=1) + "\n")
        return 0
    print(f"{len(versions) - len(differ)} identical, {len(differ)} different")
    return 1 if differ else 0


def _key(version: str):
    from packaging.version import Version

    return Version(version)


if __name__ == "__main__":
    raise SystemExit(main())
