        # <piece input-ids>
        input_ids=next_draft_input.bonus_tokens.to(torch.int64),
        # </piece>
            # <piece draft-token>
            bonus_tokens=next_draft_input.bonus_tokens,
            # </piece>
