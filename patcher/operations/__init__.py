"""Operations: one module each; importing this package registers them all in `REGISTRY`."""

from . import add_argparse_argument, add_dataclass_field  # noqa: F401  (registration side effect)
from .base import REGISTRY, AlreadyApplied, CannotApply, Changed, Operation, Outcome

__all__ = ["REGISTRY", "AlreadyApplied", "CannotApply", "Changed", "Operation", "Outcome"]
