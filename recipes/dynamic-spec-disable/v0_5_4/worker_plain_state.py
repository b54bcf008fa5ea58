        # <piece target-backend>
        # This release's _get_attention_backend takes no argument: the backend registry reads the
        # runner's init_new_workspace (restored below).
        model_runner.init_new_workspace = True
        target_backend = model_runner._get_attention_backend()
        # </piece>
            # <piece target-graph-class>
            graph_runner_cls = NPUGraphRunner if model_runner.device == "npu" else CudaGraphRunner
            # </piece>
