"""The server-arguments probe under the name the 0.5.4-0.5.6 and 0.5.11-0.5.13 variants give it in variants.yaml:
server_args_probe.py's checks, with the release adapter of the variant applied (SPECPATCH_VARIANT)."""

import os
import runpy

runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "server_args_probe.py"), run_name="__main__")
