# <piece hidden-states>
hidden_size, hidden_dtype = get_draft_recurrent_hidden_state_spec(
    self.draft_worker.draft_runner
)
if hidden_size is not None:
    next_draft_input.hidden_states = torch.zeros(
        (bs, hidden_size), dtype=hidden_dtype, device=self.device
    )
# </piece>
