"""Probe of request-tenant-label: run by `specpatch verify` with the patched sglang first on sys.path."""

import json
import os

from sglang.srt.managers.io_struct import GenerateReqInput

params = json.loads(os.environ.get("SPECPATCH_PARAMS") or "{}")
label, limit = params.get("label", "tenant"), int(params.get("max_length", 64))

single = GenerateReqInput(text="hi", tenant="acme", custom_labels={"team": "search"})
single.normalize_batch_and_arguments()
assert single.custom_labels == {"team": "search", label: "acme"}, single.custom_labels
print(f"PROBE-OK: a single request reports {label}=acme beside its own labels")

batch = GenerateReqInput(text=["a", "b"], tenant="acme")
batch.normalize_batch_and_arguments()
assert [batch[i].custom_labels for i in range(2)] == [{label: "acme"}] * 2
print("PROBE-OK: each request of a batch inherits the label")

plain = GenerateReqInput(text="hi")
plain.normalize_batch_and_arguments()
assert plain.custom_labels is None
print("PROBE-OK: a request without a tenant is unchanged")

for bad in ("", "x" * (limit + 1)):
    try:
        GenerateReqInput(text="hi", tenant=bad).normalize_batch_and_arguments()
    except ValueError as exc:
        assert "tenant must be" in str(exc)
    else:
        print(f"PROBE-FAIL: tenant {bad[:10]!r}... (length {len(bad)}) was accepted")
        raise SystemExit(1)
print(f"PROBE-OK: an empty tenant and one longer than {limit} characters are refused")
