        # <piece result-extra>
        # The target's routed-expert capture of this step (keyed by the KV slot of the token),
        # handed to the scheduler as verify() does.
        routed_experts_output=target_result.routed_experts_output,
        # </piece>
