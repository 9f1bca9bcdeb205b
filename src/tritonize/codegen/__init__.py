"""Code generation: Triton kernel source and the Python wrapper module."""
