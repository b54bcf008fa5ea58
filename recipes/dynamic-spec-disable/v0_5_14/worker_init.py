# <piece build>
# The one-token state is built by init_cuda_graphs (worker-build-call): this release
# allocates the KV pools and builds the attention backends and graphs after __init__.
# </piece>
