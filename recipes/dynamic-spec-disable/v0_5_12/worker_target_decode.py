            # <piece input-ids>
            input_ids=batch.spec_info.bonus_tokens.to(torch.int64),
            # </piece>
