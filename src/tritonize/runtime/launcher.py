"""Launching generated kernels with their heuristic launch configuration."""
from __future__ import annotations

from triton.runtime.errors import InterpreterError

from .heuristics import pick_config
from .interpreter_checks import IndexOutOfBoundsError
from .loader import load_source_module


class GeneratedKernel:
    """A compiled (GPU) or interpreted (CPU) kernel with a fixed grid and block sizes."""

    def __init__(self, fn, name: str, kind: str, sizes: tuple[int, int, int], hint: str, on_gpu: bool,
                 checks: bool = False):
        self.fn = fn
        self.name = name
        self.kind = kind
        xnumel, ynumel, rnumel = sizes
        self.config = pick_config(kind, xnumel, ynumel, rnumel, on_gpu, hint)
        self.launch_kwargs = dict(self.config.blocks)
        if on_gpu:
            self.launch_kwargs["num_warps"] = self.config.num_warps
            if checks:  # bounds checks are device asserts: compiled in only in debug mode
                self.launch_kwargs.update(debug=True, sanitize_overflow=False)
        self.on_gpu = on_gpu
        self.runner = fn[self.config.grid]

    def __call__(self, *args):
        if self.on_gpu:
            self.runner(*args, **self.launch_kwargs)
            return
        try:
            self.runner(*args, **self.launch_kwargs)
        except InterpreterError as err:  # an index out of bounds is the user's error: say it plainly
            if isinstance(err.__cause__, IndexOutOfBoundsError):
                raise IndexOutOfBoundsError(f"{err.__cause__} (kernel {self.name})") from None
            raise

    def __repr__(self) -> str:
        return f"GeneratedKernel({self.name}, {self.kind}, grid={self.config.grid}, {self.config.blocks})"


def load_kernel(source: str, name: str, *, kind: str = "pointwise", xnumel: int, ynumel: int = 1,
                rnumel: int = 1, hint: str = "", device: str = "cuda", checks: bool = False):
    """checks: the kernel calls runtime/index_checks.py (bounds checks of indirect indices)."""
    on_gpu = device != "cpu"
    module = load_source_module(source, "kernel", interpret=not on_gpu)
    return GeneratedKernel(getattr(module, name), name, kind, (xnumel, ynumel, rnumel), hint, on_gpu, checks)
