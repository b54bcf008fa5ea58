def _apply_tenant_label(self):
    """Check `tenant` and report it as the `{{label}}` metrics label (added by specpatch)."""
    if self.tenant is None:
        return
    limit = {{max_length}}
    if not isinstance(self.tenant, str) or not 0 < len(self.tenant) <= limit:
        raise ValueError(
            f"tenant must be a non-empty string of at most {limit} characters, got {self.tenant!r}."
        )
    self.custom_labels = {**(self.custom_labels or {}), "{{label}}": self.tenant}
