"""Launching generated kernels with their heuristic launch configuration."""
from __future__ import annotations

from .heuristics import pick_config
from .loader import load_source_module


class GeneratedKernel:
    """A compiled (GPU) or interpreted (CPU) kernel with a fixed grid and block sizes."""

    def __init__(self, fn, name: str, kind: str, sizes: tuple[int, int, int], hint: str, on_gpu: bool):
        self.fn = fn
        self.name = name
        self.kind = kind
        xnumel, ynumel, rnumel = sizes
        self.config = pick_config(kind, xnumel, ynumel, rnumel, on_gpu, hint)
        self.launch_kwargs = dict(self.config.blocks)
        if on_gpu:
            self.launch_kwargs["num_warps"] = self.config.num_warps
        self.runner = fn[self.config.grid]

    def __call__(self, *args):
        self.runner(*args, **self.launch_kwargs)

    def __repr__(self) -> str:
        return f"GeneratedKernel({self.name}, {self.kind}, grid={self.config.grid}, {self.config.blocks})"


def load_kernel(source: str, name: str, *, kind: str = "pointwise", xnumel: int, ynumel: int = 1,
                rnumel: int = 1, hint: str = "", device: str = "cuda"):
    on_gpu = device != "cpu"
    module = load_source_module(source, "kernel", interpret=not on_gpu)
    return GeneratedKernel(getattr(module, name), name, kind, (xnumel, ynumel, rnumel), hint, on_gpu)
