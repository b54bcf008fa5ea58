"""Operations: one module each; importing this package registers them all in `REGISTRY`."""

from . import (  # noqa: F401  (registration side effect)
    add_argparse_argument,
    add_branch,
    add_dataclass_field,
    add_definition,
    add_element,
    add_import,
    add_keyword_argument,
    add_method,
    add_parameter,
    insert_statements,
    replace_expression,
    replace_leading_comments,
    replace_statements,
    unexpressed_hunk,
)
from .base import REGISTRY, AlreadyApplied, CannotApply, Changed, Operation, Outcome

__all__ = ["REGISTRY", "AlreadyApplied", "CannotApply", "Changed", "Operation", "Outcome"]
