# <piece view>
# Fields that a model override or a resolution pass declares (multi-layer EAGLE for
# MiMo-V2 and Step-3.5, DP attention and the MoE set-up for DeepSeek context parallel)
# reach the fields only when the resolution ends (materialize_declarations), after
# this check: they are read through the resolving view, as this release's hooks do.
from sglang.srt.arg_groups.overrides import resolved_view

cfg = resolved_view(self)
# </piece>
