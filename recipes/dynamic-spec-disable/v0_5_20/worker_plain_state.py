# <piece draft-extend-backend>
# As the draft worker makes its own (init_attention_backend): the DSA top-k seed
# and the QSA profile travel as arguments; the draft runner carries its attention
# backend.
draft_extend_backend = DraftBackendFactory(
    dw.draft_runner,
    self.topk,
    0,
    seed_dsa_topk_from_draft_extend=dw.seed_dsa_topk_from_draft_extend,
    qsa_profile=parse_qsa_profile(dw.draft_runner.model_config.hf_config),
).create_draft_extend_backend()
# </piece>
