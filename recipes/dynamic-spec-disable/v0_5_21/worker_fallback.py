                # <piece catch-up-tp-group>
                self.draft_worker.draft_runner.tp_group,
                owns_attention=self.draft_worker.draft_owns_attention,
                # </piece>
