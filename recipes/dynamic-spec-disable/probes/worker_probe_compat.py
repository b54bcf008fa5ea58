"""The fallback behaviour probe under the name the 0.5.4-0.5.5 variants give it in variants.yaml:
worker_probe.py's contract, with the release adapter of the variant applied (SPECPATCH_VARIANT, _releases.py)."""

import os
import runpy

runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker_probe.py"), run_name="__main__")
