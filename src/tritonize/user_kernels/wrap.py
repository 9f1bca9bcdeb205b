"""`tritonize.wrap_triton(kernel)[grid](*args, **kwargs)`: a user kernel call that graphs capture.

The same call works in four places:

* eager code: the kernel is launched directly (compiled on a GPU, interpreted on the CPU);
* make_fx and torch.export (tensors are fake or functional, or a tracing mode is active): the
  call becomes the `tritonize_kernel_mutation` operator (hop.py), which functionalization turns
  into `tritonize_kernel_functional`;
* torch.compile, when Dynamo itself understands Triton kernels (a GPU is present): the plain
  `kernel[grid](...)` call is made, and Dynamo captures it as torch's triton_kernel_wrapper
  operator, as it would without wrap_triton;
* torch.compile without that (a CPU-only machine): Dynamo records one opaque call that, when
  AOTAutograd traces it, emits `tritonize_kernel_mutation`. Grids are evaluated while Dynamo
  traces (one per autotune config), so grid lambdas may close over traced values.
"""
from __future__ import annotations

import torch
from torch._higher_order_ops.triton_kernel_wrap import kernel_side_table

from .binding import UserKernelError, base_function, bind_arguments, grids_per_config
from .hop import tritonize_kernel_mutation
from .launch import launch_user_kernel, on_gpu
from .ttir import is_tensor_descriptor


def wrap_triton(kernel) -> "WrappedKernel":
    """Make `kernel[grid](...)` capturable by torch.compile (tritonize), make_fx and export."""
    if torch.compiler.is_dynamo_compiling() and dynamo_captures_triton():
        # Dynamo holds `kernel` as its own Triton kernel variable, which some torch versions
        # cannot answer isinstance() for: ask nothing of it and let Dynamo capture the launch.
        return WrappedKernel(kernel, None)
    if isinstance(kernel, WrappedKernel):
        return kernel
    if not torch.compiler.is_dynamo_compiling():
        base_function(kernel)  # a clear error now for anything that is not a Triton kernel
    return WrappedKernel(kernel, None)


@torch._dynamo.assume_constant_result
def dynamo_captures_triton() -> bool:
    """True when Dynamo turns `kernel[grid](...)` into torch's HOP by itself (needs a GPU)."""
    from torch.utils._triton import has_triton

    return has_triton()


@torch._dynamo.assume_constant_result
def register_kernel(kernel) -> int:
    return kernel_side_table.add_kernel(kernel)


@torch._dynamo.allow_in_graph
def call_captured_kernel(kernel_idx: int, grids: list, constants: dict, graph_values: dict) -> None:
    """The opaque call Dynamo records; traced by AOTAutograd into tritonize_kernel_mutation."""
    # Split again with real types: symbolic sizes may have come through as "constants".
    graph_values, constants, tma = _split_graph_values({**constants, **graph_values})
    constant_args_idx = kernel_side_table.add_constant_args(constants)
    tritonize_kernel_mutation(kernel_idx=kernel_idx, constant_args_idx=constant_args_idx, grid=grids,
                              tma_descriptor_metadata=tma, kwargs=graph_values)


def _is_graph_value(value) -> bool:
    return isinstance(value, (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool))


def _split_graph_values(values: dict, kernel_label: str = "") -> tuple[dict, dict, dict]:
    """(graph values, constants, TMA metadata): host TMA descriptors travel as their tensor."""
    graph_values, constants, tma = {}, {}, {}
    for name, value in values.items():
        if isinstance(value, (tuple, list)) and any(isinstance(v, torch.Tensor) for v in value):
            raise UserKernelError(f"kernel {kernel_label}: argument '{name}' is a tuple holding tensors, "
                                  "which graphs cannot capture yet; pass the tensors separately")
        if is_tensor_descriptor(value):
            graph_values[name] = value.base
            tma[name] = ("stable", (list(value.block_shape),))
        elif _is_graph_value(value):
            graph_values[name] = value
        else:
            constants[name] = value
    return graph_values, constants, tma


def _being_traced(values: dict) -> bool:
    if torch._C._len_torch_dispatch_stack() > 0:
        return True
    return any(isinstance(v, torch.Tensor) and type(v) not in (torch.Tensor, torch.nn.Parameter)
               for v in values.values())


def triton_grid(grid):
    """`grid` as Triton's own launch and Dynamo's capture take it: a tuple, or a callable
    returning one. wrap_triton also takes a list or a bare size (`kernel[4]`), as evaluate_grid does."""
    if grid is None:
        return grid  # reported by the launch
    if isinstance(grid, (tuple, list)):
        return tuple(grid)
    if callable(grid):
        return lambda meta: _grid_tuple(grid(meta))
    return (grid,)


def _grid_tuple(value) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


class WrappedKernel:
    """A Triton kernel whose calls are captured by graphs; `[grid]` then `(*args, **kwargs)`."""

    def __init__(self, kernel, grid):
        self.kernel = kernel
        self.grid = grid

    def __getitem__(self, grid) -> "WrappedKernel":
        return WrappedKernel(self.kernel, grid)

    def run(self, *args, grid, warmup: bool = False, **kwargs):
        if warmup:
            raise UserKernelError("wrap_triton kernels cannot be warmed up; call them instead")
        return self[grid](*args, **kwargs)

    def __call__(self, *args, **kwargs) -> None:
        if torch.compiler.is_dynamo_compiling():
            return self._capture_in_dynamo(args, kwargs)
        call = bind_arguments(self.kernel, args, kwargs)
        values = {**call.arguments, **call.options}
        if _being_traced(values):
            graph_values, constants, tma = _split_graph_values(values, call.name)
            tritonize_kernel_mutation(
                kernel_idx=kernel_side_table.add_kernel(self.kernel),
                constant_args_idx=kernel_side_table.add_constant_args(constants),
                grid=grids_per_config(call, self.grid), tma_descriptor_metadata=tma, kwargs=graph_values)
        elif on_gpu(values):
            grids_per_config(call, self.grid)  # a bad call or grid fails here, naming the kernel
            self.kernel[triton_grid(self.grid)](*args, **kwargs)
        else:
            launch_user_kernel(self.kernel, grids_per_config(call, self.grid), values)
        return None

    def _capture_in_dynamo(self, args, kwargs) -> None:
        if dynamo_captures_triton():
            self.kernel[triton_grid(self.grid)](*args, **kwargs)
            return None
        call = bind_arguments(self.kernel, args, kwargs)
        grids = grids_per_config(call, self.grid)
        graph_values, constants, _ = _split_graph_values({**call.arguments, **call.options}, call.name)
        call_captured_kernel(register_kernel(self.kernel), grids, constants, graph_values)
        return None

    def __repr__(self) -> str:
        return f"wrap_triton({base_function(self.kernel).fn.__name__})"
