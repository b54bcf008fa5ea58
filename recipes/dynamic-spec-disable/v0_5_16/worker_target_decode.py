# <piece docstring>
"""One DECODE forward of the target with spec_info=None, sampling one token each."""
# The target runs on a copy of the scheduler's ScheduleBatch (this release hands the
# worker the ScheduleBatch itself), so the batch keeps the values the draft catch-up
# reads after this; the hidden states the catch-up reads are asked for with
# capture_hidden_mode, which this release passes to the target worker (ScheduleBatch has
# no capture_hidden_mode / seq_lens_cpu_cache fields any more).
# </piece>
# <piece idle-capture>
# </piece>
# <piece idle-tail>
**dp_counts,
# </piece>
# <piece decode-capture>
# </piece>
# <piece decode-tail>
**dp_counts,
# </piece>
# <piece forward>
return self.target_worker.forward_batch_generation(
    target_batch, capture_hidden_mode=CaptureHiddenMode.FULL
)
# </piece>
