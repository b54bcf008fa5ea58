"""`python -m patcher`: the specpatch command line."""

from .cli import run

run()
