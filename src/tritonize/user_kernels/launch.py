"""Launching a captured user kernel call: from generated wrappers, graph HOPs and eager code.

A captured call is the kernel, its constant arguments and launch options, one grid per autotune
config (evaluated when the call was captured), TMA descriptor metadata, and at launch time the
tensors (and symbolic scalars). On a GPU the kernel is launched as the user would: Triton's own
autotuner and heuristics run, and a grid selector picks the grid of the config Triton chose. On
the CPU the kernel runs in Triton's interpreter with the first config (after early pruning).

Imported by generated wrappers: imports only torch, triton and the runtime-safe user_kernels
modules (binding, interpret), never the compiler.
"""
from __future__ import annotations

from typing import Any

import torch

from .binding import (
    UserKernelError,
    autotuner_of,
    base_function,
    first_config,
    kernel_name,
    resolve,
    split_options,
)
from .interpret import run_interpreted


def make_tensor_descriptors(arguments: dict, tma_metadata: dict) -> dict:
    """Graphs carry TMA descriptors as (tensor, metadata); rebuild the descriptors for a launch."""
    if not tma_metadata:
        return arguments
    arguments = dict(arguments)
    for name, meta in tma_metadata.items():
        kind, payload = meta
        if kind == "stable":
            from triton.tools.tensor_descriptor import TensorDescriptor

            arguments[name] = TensorDescriptor.from_tensor(arguments[name], list(payload[0]))
        elif kind == "experimental":
            from triton.tools import experimental_descriptor as experimental

            dims, block_dims, element_size = payload
            create = experimental.create_1d_tma_descriptor if len(dims) == 1 else experimental.create_2d_tma_descriptor
            arguments[name] = create(arguments[name].data_ptr(), *dims, *block_dims, element_size)
        else:
            raise UserKernelError(f"argument {name}: unknown TMA descriptor kind {kind!r}")
    return arguments


def config_index(kernel, config) -> int:
    tuner = autotuner_of(kernel)
    return 0 if tuner is None or config is None else list(tuner.configs).index(config)


class GridSelector:
    """The grid for the config Triton's autotuner chose, recognized by its meta-parameters."""

    def __init__(self, kernel, grids: list):
        self.name = kernel_name(kernel)
        self.configs = list(autotuner_of(kernel).configs)
        self.grids = grids

    def __call__(self, meta: dict) -> tuple:
        for config, grid in zip(self.configs, self.grids):
            if all(meta.get(k) == v for k, v in config.kwargs.items()):
                return grid
        raise UserKernelError(f"kernel {self.name}: no captured grid for meta-parameters {meta}")


def _leading_positional(param_names, arguments: dict) -> tuple[list, dict]:
    """Pass the leading parameters positionally: Triton's autotuner hooks see positional args only."""
    positional, rest = [], dict(arguments)
    for name in param_names:
        if name not in rest:
            break
        positional.append(rest.pop(name))
    return positional, rest


def launch_compiled(kernel, grids: list, values: dict, tma_metadata: dict) -> None:
    call = split_options(kernel, values)
    arguments = make_tensor_descriptors(call.arguments, tma_metadata)
    grid = grids[0] if len(grids) == 1 else GridSelector(kernel, grids)
    positional, keyword = _leading_positional(base_function(kernel).arg_names, arguments)
    kernel[grid](*positional, **keyword, **call.options)


def launch_interpreted(kernel, grids: list, values: dict, tma_metadata: dict) -> None:
    call = split_options(kernel, values)
    tuner = autotuner_of(kernel)
    config = first_config(tuner, call.arguments) if tuner is not None else None
    resolved = resolve(call, config)
    if config is not None and config.pre_hook is not None:
        config.pre_hook({**resolved.arguments, **config.all_kwargs()})
    grid = grids[config_index(kernel, config)] if len(grids) > 1 else grids[0]
    run_interpreted(resolved.jit, grid, make_tensor_descriptors(resolved.arguments, tma_metadata))


def on_gpu(values: dict) -> bool:
    """Whether a call's tensors (or the tensors under its TMA descriptors) live on a GPU."""
    tensors = [getattr(v, "base", v) for v in values.values()]
    return any(isinstance(t, torch.Tensor) and t.device.type != "cpu" for t in tensors)


def launch_user_kernel(kernel, grids: list, values: dict, tma_metadata: dict | None = None) -> None:
    """Launch `kernel` on `values` (parameters and launch options by name)."""
    launch = launch_compiled if on_gpu(values) else launch_interpreted
    launch(kernel, grids, values, tma_metadata or {})


class UserKernelLauncher:
    """One captured call site in a generated wrapper: everything but the tensors is fixed, or,
    with symbolic sizes, given at each call too (the sizes as arguments, `_grids` computed by
    the wrapper from its bound symbols)."""

    def __init__(self, kernel, constants: dict[str, Any], grids: list, tma_metadata: dict):
        self.kernel = kernel
        self.constants = dict(constants)
        self.grids = [tuple(g) for g in grids]
        self.tma_metadata = dict(tma_metadata)

    def __call__(self, /, _grids=None, **arguments) -> None:
        grids = self.grids if _grids is None else [tuple(g) for g in _grids]
        launch_user_kernel(self.kernel, grids, {**arguments, **self.constants}, self.tma_metadata)

    def __repr__(self) -> str:
        return f"UserKernelLauncher({kernel_name(self.kernel)}, grids={self.grids})"
