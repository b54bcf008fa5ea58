            # <piece moe-a2a>
            or cfg.moe_a2a_backend in ("none", "flashinfer")
            # </piece>
