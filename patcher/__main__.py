"""`python -m patcher`: the specpatch command line."""

from .cli import main

main()
