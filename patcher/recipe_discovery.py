"""Where recipes are found: the --recipe-path folders, $SPECPATCH_RECIPE_PATH, then the shipped ones; by id or path."""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from .errors import Location, RecipeError, RecipeNotFound
from .recipe_model import RECIPES_DIR, Recipe

_RECIPE_PATH_ENV = "SPECPATCH_RECIPE_PATH"  #: more recipe folders, os.pathsep-separated


def recipe_dirs(extra: list[Path] | None = None) -> list[Path]:
    """Where recipes are looked up: --recipe-path folders, $SPECPATCH_RECIPE_PATH, then the shipped ones."""
    dirs = list(extra or [])
    dirs += [Path(p) for p in os.environ.get(_RECIPE_PATH_ENV, "").split(os.pathsep) if p]
    dirs.append(RECIPES_DIR)
    return dirs


def available(extra: list[Path] | None = None) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for d in recipe_dirs(extra):
        if d.is_dir():
            for f in sorted(d.glob("*.yaml")):
                found.setdefault(f.stem, f)
    return found


def load_recipe(name_or_path: str | Path, extra_dirs: list[Path] | None = None) -> Recipe:
    """Load a recipe by id (searched in the recipe path) or by the path of its YAML file."""
    path = Path(name_or_path)
    if not (path.suffix in (".yaml", ".yml") and path.exists()):
        found = available(extra_dirs)
        if str(name_or_path) not in found:
            guess = difflib.get_close_matches(str(name_or_path), list(found), n=1)
            raise RecipeNotFound(f"no recipe `{name_or_path}`" + (f"; did you mean `{guess[0]}`?" if guess else ""),
                                 location=Location(recipe=str(name_or_path)))
        path = found[str(name_or_path)]
    try:
        text = _read_bounded(path).decode("utf-8")
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise RecipeError(f"cannot read recipe: {exc}", location=Location(recipe=str(path), file=str(path))) from None
    from .recipe import parse_recipe  # noqa: PLC0415  (patcher.recipe imports this module)

    return parse_recipe(text, path)


def _read_bounded(path: Path) -> bytes:
    """A recipe file's bytes: a regular file (a device, FIFO or socket is refused before it is opened: `/dev/zero`
    would fill the memory, a FIFO block for ever), read up to one byte past the size limit (which `parse_recipe`
    then refuses), whatever size the system reports."""
    import stat

    from .recipe_yaml import MAX_RECIPE_BYTES

    if not stat.S_ISREG(os.stat(path).st_mode):
        raise ValueError(f"{path} is not a regular file")
    with open(path, "rb") as f:
        return f.read(MAX_RECIPE_BYTES + 1)
