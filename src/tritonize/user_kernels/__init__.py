"""User-written @triton.jit kernels inside compiled code (not implemented yet: issue 6)."""
