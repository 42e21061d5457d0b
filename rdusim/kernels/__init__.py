"""PyTorch reference kernels for compressed KV caches (the only package that imports torch)."""
