            # <piece draft-input>
            bonus_tokens=tokens, new_seq_lens=new_seq_lens, verify_done=verify_done
            # </piece>
        # <piece result-extra>
        # The target's routed-expert capture of this step (keyed by the KV slot of the token),
        # handed to the scheduler as verify() does.
        routed_experts_output=target_result.routed_experts_output,
        indexer_topk_output=target_result.indexer_topk_output,
        # The scheduler reads the tokens at this stride (0.5.12+ records it on the result).
        speculative_num_draft_tokens=self.speculative_num_draft_tokens,
        # </piece>
