"""Behaviour probe of the one-token-graph fallback on sglang 0.5.13 - 0.5.14 (the ScheduleBatch / on_publish
contract), on CPU.

The checks are _worker_contract.py's, run with this probe's adapters (_releases.ON_PUBLISH_BY_VARIANT, chosen by the
variant the engine applied, SPECPATCH_VARIANT) on their scene, _scene_schedule_batch.py.
"""

import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the recipe folder
sys.path.insert(1, os.path.dirname(os.path.abspath(__file__)))
import _worker_contract  # noqa: E402
import _releases  # noqa: E402

if __name__ == "__main__":
    _worker_contract.main(_releases.ON_PUBLISH_BY_VARIANT)
