                # <piece catch-up-scope>
                with draft_tp_context(
                # </piece>
                # <piece catch-up-tp-group>
                self.draft_worker.draft_owns_attention
                # </piece>
