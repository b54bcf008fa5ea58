# <piece signature>
self, batch: ScheduleBatch, on_publish=None, grammar_barrier=None
# </piece>
# <piece grammar-barrier>
if grammar_barrier is not None and batch.has_grammar:
    # The scheduler does not wait for the previous step's result before this one when the
    # batch has a grammar (EAGLE advances the grammar state inside verify, through this
    # barrier): advance it over the tokens the previous step committed before the
    # target's sampler builds its grammar mask from it.
    grammar_barrier()
# </piece>
