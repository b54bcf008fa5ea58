"""specpatch: declarative, verified, reversible source patches for ML serving engines such as sglang.

The public API is importable without the CLI::

    from patcher import load_recipe, find_target, plan, apply_recipe
    result = apply_recipe(load_recipe("dynamic-spec-disable"), find_target(Path("/root/sglang")))
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["apply_recipe", "check", "find_target", "load_recipe", "plan", "rollback", "status", "try_recipe",
           "verify_applied", "__version__"]


def __getattr__(name: str):  # lazy: `specpatch --help` must not pay for libcst
    if name in ("apply_recipe", "check", "rollback", "status", "try_recipe"):
        from . import api

        return getattr(api, name)
    if name == "verify_applied":  # `patcher.verify` is the module of checks
        from . import api

        return api.verify
    if name == "load_recipe":
        from .recipe import load_recipe

        return load_recipe
    if name == "find_target":
        from .target import find_target

        return find_target
    if name == "plan":
        from .engine import plan

        return plan
    raise AttributeError(name)
