"""Graph operators for user kernel calls made through `tritonize.wrap_triton`.

Two higher-order operators, with the argument layout of torch's `triton_kernel_wrapper_*` so
that one lowering serves both families:

* `tritonize_kernel_mutation(kernel_idx, constant_args_idx, grid, tma_descriptor_metadata,
  kwargs)`: the call as written; the kernel writes its arguments in place, nothing is returned.
* `tritonize_kernel_functional(..., tensors_to_clone)`: the same call on clones of the tensors
  the kernel writes, returning {name: clone}. Functionalization (AOTAutograd, export) turns the
  first into the second, choosing `tensors_to_clone` with our mutation analysis.

The kernel and the arguments that are not graph values (ints, dtypes, launch options) live in
torch's kernel side table; `grid` holds one grid per autotune config. Run outside a compiler,
the operators launch the kernel (compiled on a GPU, interpreted on the CPU); under fake tensors
they only describe their outputs. Autograd passes through: like torch's, user kernels have no
derivative (wrap them in an autograd.Function).
"""
from __future__ import annotations

from typing import Any

import torch
import torch.utils._pytree as pytree
from torch._C import DispatchKey
from torch._higher_order_ops.triton_kernel_wrap import kernel_side_table
from torch._ops import HigherOrderOperator
from torch._prims_common import clone_preserve_strides
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import (
    ProxyTorchDispatchMode,
    disable_proxy_modes_tracing,
    track_tensor_tree,
)

from .binding import split_options
from .launch import launch_user_kernel


class _UserKernelOperator(HigherOrderOperator):
    def _get_overloaded_args(self, args, kwargs):
        # Tensors sit inside the `kwargs` dict argument: subclasses there must dispatch too.
        found = list(super()._get_overloaded_args(args, kwargs))
        inner = kwargs.get("kwargs")
        if isinstance(inner, dict):
            found += [v for v in inner.values()
                      if isinstance(v, torch.Tensor) and torch._C._dispatch_keys(v).has("Python")]
        return tuple(found)


class UserKernelMutation(_UserKernelOperator):
    def __init__(self) -> None:
        super().__init__("tritonize_kernel_mutation")

    def __call__(self, kernel_idx, constant_args_idx, grid, tma_descriptor_metadata, kwargs):
        return super().__call__(kernel_idx=kernel_idx, constant_args_idx=constant_args_idx, grid=grid,
                                tma_descriptor_metadata=tma_descriptor_metadata, kwargs=kwargs)


class UserKernelFunctional(_UserKernelOperator):
    def __init__(self) -> None:
        super().__init__("tritonize_kernel_functional")

    def __call__(self, kernel_idx, constant_args_idx, grid, tma_descriptor_metadata, kwargs,
                 tensors_to_clone):
        return super().__call__(kernel_idx=kernel_idx, constant_args_idx=constant_args_idx, grid=grid,
                                tma_descriptor_metadata=tma_descriptor_metadata, kwargs=kwargs,
                                tensors_to_clone=tensors_to_clone)


tritonize_kernel_mutation = UserKernelMutation()
tritonize_kernel_functional = UserKernelFunctional()


def call_values(kernel_idx: int, constant_args_idx: int, kwargs: dict):
    """(kernel, every argument and launch option by name) for a captured call."""
    kernel = kernel_side_table.get_kernel(kernel_idx)
    return kernel, {**kwargs, **kernel_side_table.get_constant_args(constant_args_idx)}


# --- the mutation operator ----------------------------------------------------------------------
@tritonize_kernel_mutation.py_impl(DispatchKey.CompositeExplicitAutograd)
def _mutation_dense(*, kernel_idx, constant_args_idx, grid, tma_descriptor_metadata, kwargs):
    kernel, values = call_values(kernel_idx, constant_args_idx, kwargs)
    launch_user_kernel(kernel, grid, values, tma_descriptor_metadata)


@tritonize_kernel_mutation.py_impl(FakeTensorMode)
def _mutation_fake(mode, *, kernel_idx, constant_args_idx, grid, tma_descriptor_metadata, kwargs):
    return None


@tritonize_kernel_mutation.py_impl(DispatchKey.Meta)
def _mutation_meta(*, kernel_idx, constant_args_idx, grid, tma_descriptor_metadata, kwargs):
    return None


def _trace(mode, operator, node_args: dict[str, Any]):
    with disable_proxy_modes_tracing():
        out = operator(**node_args)
    proxy_args = pytree.tree_map(mode.tracer.unwrap_proxy, node_args)
    out_proxy = mode.tracer.create_proxy("call_function", operator, (), proxy_args,
                                         name=operator.__name__ + "_proxy")
    return track_tensor_tree(out, out_proxy, constant=None, tracer=mode.tracer)


@tritonize_kernel_mutation.py_impl(ProxyTorchDispatchMode)
def _mutation_proxy(mode, **node_args):
    _trace(mode, tritonize_kernel_mutation, node_args)
    return None


@tritonize_kernel_mutation.py_functionalize_impl
def _mutation_functionalize(ctx, kernel_idx, constant_args_idx, grid, tma_descriptor_metadata, kwargs):
    from .mutation import analyze_call

    unwrapped = ctx.unwrap_tensors(kwargs)
    kernel, values = call_values(kernel_idx, constant_args_idx, unwrapped)
    access = analyze_call(split_options(kernel, values), tma_descriptor_metadata)
    tensors_to_clone = [name for name in access.mutated if isinstance(kwargs.get(name), torch.Tensor)]
    with ctx.redispatch_to_next():
        outputs = tritonize_kernel_functional(
            kernel_idx=kernel_idx, constant_args_idx=constant_args_idx, grid=grid,
            tma_descriptor_metadata=tma_descriptor_metadata, kwargs=unwrapped,
            tensors_to_clone=tensors_to_clone)
    for name, output in outputs.items():
        original = kwargs[name]
        ctx.replace(original, output)
        ctx.mark_mutation_hidden_from_autograd(original)
        ctx.commit_update(original)
        ctx.sync(original)
    return None


# --- the functional operator --------------------------------------------------------------------
@tritonize_kernel_functional.py_impl(DispatchKey.CompositeExplicitAutograd)
def _functional_dense(*, kernel_idx, constant_args_idx, grid, tma_descriptor_metadata, kwargs,
                      tensors_to_clone):
    kwargs = {k: clone_preserve_strides(v) if k in tensors_to_clone else v for k, v in kwargs.items()}
    tritonize_kernel_mutation(kernel_idx=kernel_idx, constant_args_idx=constant_args_idx, grid=grid,
                              tma_descriptor_metadata=tma_descriptor_metadata, kwargs=kwargs)
    return {k: v for k, v in kwargs.items() if k in tensors_to_clone}


@tritonize_kernel_functional.py_impl(FakeTensorMode)
def _functional_fake(mode, *, kernel_idx, constant_args_idx, grid, tma_descriptor_metadata, kwargs,
                     tensors_to_clone):
    with mode:
        return {k: clone_preserve_strides(v) for k, v in kwargs.items() if k in tensors_to_clone}


@tritonize_kernel_functional.py_impl(ProxyTorchDispatchMode)
def _functional_proxy(mode, **node_args):
    return _trace(mode, tritonize_kernel_functional, node_args)


@tritonize_kernel_functional.py_functionalize_impl
def _functional_functionalize(ctx, kernel_idx, constant_args_idx, grid, tma_descriptor_metadata, kwargs,
                              tensors_to_clone):
    unwrapped = ctx.unwrap_tensors(kwargs)
    with ctx.redispatch_to_next():
        outputs = tritonize_kernel_functional(
            kernel_idx=kernel_idx, constant_args_idx=constant_args_idx, grid=grid,
            tma_descriptor_metadata=tma_descriptor_metadata, kwargs=unwrapped,
            tensors_to_clone=tensors_to_clone)
        return ctx.wrap_tensors(outputs)


def _pass_through(operator) -> None:
    keys = [DispatchKey.PythonDispatcher, DispatchKey.PythonTLSSnapshot, DispatchKey.ADInplaceOrView,
            DispatchKey.BackendSelect, DispatchKey.AutocastCPU, DispatchKey.AutocastCUDA,
            DispatchKey.AutogradCPU, DispatchKey.AutogradCUDA]
    for key in keys:
        operator.fallthrough(key)


_pass_through(tritonize_kernel_mutation)
_pass_through(tritonize_kernel_functional)

USER_KERNEL_OPERATORS = (tritonize_kernel_mutation, tritonize_kernel_functional)
