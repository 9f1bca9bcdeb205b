"""Lowering of user Triton kernel calls: the functional HOPs -> UserKernelCall.

Graphs hold user kernels as `triton_kernel_wrapper_functional` (torch's, captured by Dynamo on a
GPU) or `tritonize_kernel_functional` (ours, from tritonize.wrap_triton). Both carry a kernel
side-table index, constant arguments, one grid per autotune config, TMA metadata, the graph
tensors by parameter name, and `tensors_to_clone`: the arguments the graph treats as written.

Lowering realizes each tensor argument with exactly the strides it was traced with (the kernel
indexes raw memory); an argument that comes straight from `empty*` becomes an uninitialized
allocation, not a zero-filled buffer. Our own mutation analysis decides what the kernel writes:
each written argument gets an output buffer, and the HOP's result maps every name in
`tensors_to_clone` to its value after the call (the unchanged input when the analysis proves
the kernel does not write it). Whether the kernel writes in place or into a copy is decided
later (schedule/reinplace.py).
"""
from __future__ import annotations

import torch
from torch._higher_order_ops.triton_kernel_wrap import (
    kernel_side_table,
    triton_kernel_wrapper_functional,
    triton_kernel_wrapper_mutation,
)

from ..errors import CompileError
from ..ir.nodes import Buffer, Layout, TensorArg, TensorValue, buffer_value
from ..ir.sizes import is_symbolic
from ..ir.user_kernel import UserKernelCall, UserKernelOutput
from ..user_kernels.binding import UserKernelError, kernel_name, split_options
from ..user_kernels.hop import tritonize_kernel_functional, tritonize_kernel_mutation
from ..user_kernels.mutation import analyze_call
from .registry import lowering
from .dtypes import symbolic_size

aten = torch.ops.aten
EMPTY_OPS = {aten.empty.memory_format, aten.empty_like.default, aten.empty_strided.default,
             aten.new_empty.default, aten.new_empty_strided.default}


@lowering(triton_kernel_wrapper_functional, tritonize_kernel_functional)
def lower_user_kernel(ctx, node, *, kernel_idx, constant_args_idx, grid, tma_descriptor_metadata,
                      kwargs, tensors_to_clone):
    kernel = kernel_side_table.get_kernel(kernel_idx)
    constants = kernel_side_table.get_constant_args(constant_args_idx)
    fx_values = node.kwargs["kwargs"]
    args = {name: _argument(ctx, fx_values[name], value) for name, value in kwargs.items()}
    written, note = _written_arguments(node, kernel, fx_values, kwargs, constants, tma_descriptor_metadata,
                                       ctx.sizes)
    call = UserKernelCall(ctx.new_name("user_kernel"), kernel, kernel_name(kernel), [tuple(g) for g in grid],
                          dict(tma_descriptor_metadata), {**args, **constants}, [],
                          _written_graph_inputs(fx_values, tensors_to_clone), note, ctx.origin())
    result = {}
    for name in written:
        arg = args[name]
        layout = Layout(arg.size, arg.stride, 0, kwargs[name].dtype, kwargs[name].device)
        buffer = Buffer(ctx.new_name(), layout)
        ctx.add_buffer(buffer)
        call.outputs.append(UserKernelOutput(buffer, name))
        result[name] = buffer_value(buffer.name, layout)
    ctx.operations.append(call)
    for name in tensors_to_clone:
        result.setdefault(name, kwargs[name])  # proven not written: the value is unchanged
    return result


@lowering(triton_kernel_wrapper_mutation, tritonize_kernel_mutation)
def lower_user_kernel_mutation(ctx, node, **kwargs):
    raise CompileError("lowering", "a user kernel call that writes in place reached the compiler; "
                       "graphs must be functionalized (AOTAutograd does this)", node)


def _written_graph_inputs(fx_values, tensors_to_clone) -> tuple[str, ...]:
    """The written arguments that are graph inputs as they are: the program overwrites its
    caller's tensor there. An argument computed from an input (`x.clone()`, `x[1:]`, `x + 0`)
    may lower to a view of the input's buffer, but the caller's tensor must keep its contents."""
    return tuple(name for name in tensors_to_clone
                 if getattr(fx_values[name], "op", None) == "placeholder")


def _argument(ctx, fx_value, value):
    """A graph value passed to the kernel: tensors become buffer views with the traced strides."""
    if not isinstance(value, TensorValue):
        return value
    meta = fx_value.meta["val"]
    stride = symbolic_size(meta.stride())  # never int(): that would specialize a symbolic size
    kernel_node, ctx.current_node = ctx.current_node, fx_value  # the buffer holds fx_value's value
    try:
        if getattr(fx_value, "target", None) in EMPTY_OPS:
            return _uninitialized(ctx, meta, stride)
        return ctx.realize(value, stride)
    finally:
        ctx.current_node = kernel_node


def _uninitialized(ctx, meta: torch.Tensor, stride) -> TensorArg:
    """Memory the kernel will fill: allocated, never zeroed."""
    size = symbolic_size(meta.shape)
    result = ctx.extern_call(aten.empty_strided.default, (list(size), list(stride)),
                             {"dtype": meta.dtype, "device": meta.device}, meta, "alloc")
    return ctx.realize(result)


def _written_arguments(node, kernel, fx_values, kwargs, constants, tma_metadata, sizes):
    """(tensor arguments the kernel may write, a note on how that was decided). A symbolic size
    is analyzed at its example value, as Triton would specialize it."""
    examples = {name: fx_values[name].meta["val"] if isinstance(value, TensorValue)
                else sizes.hint(value) if is_symbolic(value) else value
                for name, value in kwargs.items()}
    try:
        access = analyze_call(split_options(kernel, {**examples, **constants}), tma_metadata)
    except UserKernelError as error:
        raise CompileError("lowering", str(error), node) from error
    tensors = [name for name, value in kwargs.items() if isinstance(value, TensorValue)]
    note = "" if access.exact else f"analysis gave up ({access.reason}): every tensor is treated as written"
    return [name for name in access.mutated if name in tensors], note
