                # <piece catch-up-tp-group>
                self.draft_worker.parallel_layout
                # </piece>
