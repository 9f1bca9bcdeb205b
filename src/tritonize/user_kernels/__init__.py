"""User-written @triton.jit kernels inside compiled code.

* `wrap_triton(kernel)[grid](*args, **kwargs)`: a kernel call that torch.compile (tritonize),
  make_fx and torch.export capture, and that runs directly in eager code (wrap.py, hop.py).
* `mutated_arguments(kernel, *args, **kwargs)` / `read_arguments(...)` / `analyze_kernel(...)`:
  which tensor arguments a call writes and reads, from the kernel's TTIR (mutation.py,
  analysis.py, ttir.py), generated without a GPU.
* Launching captured calls from generated wrappers: launch.py (with binding.py and
  interpret.py, it never imports the compiler).

Kernel calls that Dynamo captures by itself on a GPU (torch's triton_kernel_wrapper operators)
and ours are lowered by lower/user_kernel.py into `UserKernelCall` (ir/user_kernel.py).
"""
from .binding import UserKernelError
from .mutation import KernelAccess, analyze_kernel, mutated_arguments, read_arguments
from .wrap import wrap_triton

__all__ = ["KernelAccess", "UserKernelError", "analyze_kernel", "mutated_arguments", "read_arguments",
           "wrap_triton"]
