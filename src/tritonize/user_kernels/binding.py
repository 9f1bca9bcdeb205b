"""What a call of a user Triton kernel means, before it is analyzed, captured or launched.

A user kernel is a `triton.jit` function, possibly wrapped in `triton.heuristics` and one
`triton.autotune` layer. A call `kernel[grid](*args, **kwargs)` is normalized here into:

* `arguments`: every kernel parameter the caller gave, by name;
* `options`: launch options that are not parameters (num_warps, num_stages, ...);
* per autotune config, the parameters the config and the heuristics add (`resolve`), and the
  grid evaluated with them (`grids_per_config`).

Errors name the kernel and the argument. This module is imported by generated wrappers (through
launch.py) and by the compiler, so it imports only torch and triton.
"""
from __future__ import annotations

import dataclasses
from typing import Any

# Keyword arguments of a launch that configure compilation instead of binding a parameter.
LAUNCH_OPTIONS = frozenset({
    "num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion", "launch_cooperative_grid",
    "launch_pdl", "waves_per_eu", "matrix_instr_nonkdim", "kpack", "debug", "sanitize_overflow",
    "instrumentation_mode", "num_buffers_warp_spec", "num_consumer_groups", "num_cpu_threads",
})


class UserKernelError(TypeError):
    """A user kernel call that cannot mean anything: names the kernel and the argument."""


def triton_classes():
    from triton.runtime.autotuner import Autotuner, Heuristics
    from triton.runtime.jit import JITFunction

    return JITFunction, Autotuner, Heuristics


def is_user_kernel(obj) -> bool:
    return isinstance(obj, triton_classes())


def base_function(kernel):
    """The triton.jit function under any heuristics/autotune layers."""
    jit_function, autotuner, heuristics = triton_classes()
    layer = kernel
    while isinstance(layer, (autotuner, heuristics)):
        layer = layer.fn
    if not isinstance(layer, jit_function):
        raise UserKernelError(
            f"{type(kernel).__name__} is not a Triton kernel: expected a function decorated with "
            "@triton.jit (optionally under @triton.autotune / @triton.heuristics)")
    return layer


def kernel_name(kernel) -> str:
    return base_function(kernel).fn.__name__


def autotuner_of(kernel):
    """The kernel's single autotune layer, or None. Nested autotuners are rejected."""
    _, autotuner, heuristics = triton_classes()
    found = []
    layer = kernel
    while isinstance(layer, (autotuner, heuristics)):
        if isinstance(layer, autotuner):
            found.append(layer)
        layer = layer.fn
    if len(found) > 1:
        raise UserKernelError(f"kernel {kernel_name(kernel)}: more than one @triton.autotune layer")
    return found[0] if found else None


@dataclasses.dataclass
class BoundCall:
    kernel: Any
    arguments: dict[str, Any]  # kernel parameter -> value, as the caller gave them
    options: dict[str, Any]    # launch options (num_warps, ...)

    @property
    def name(self) -> str:
        return kernel_name(self.kernel)


def bind_arguments(kernel, args: tuple, kwargs: dict) -> BoundCall:
    """Match a call's arguments to the kernel's parameters, as `kernel[grid](*args, **kwargs)` would."""
    jit = base_function(kernel)
    name = jit.fn.__name__
    params = list(jit.arg_names)
    if len(args) > len(params):
        raise UserKernelError(
            f"kernel {name} takes {len(params)} arguments ({', '.join(params)}), "
            f"but {len(args)} were given positionally")
    arguments = dict(zip(params, args))
    options = {}
    for key, value in kwargs.items():
        if key in params:
            if key in arguments:
                raise UserKernelError(f"kernel {name} got two values for argument '{key}'")
            arguments[key] = value
        elif key in LAUNCH_OPTIONS:
            options[key] = value
        else:
            raise UserKernelError(f"kernel {name} has no parameter '{key}' (parameters: {', '.join(params)})")
    return BoundCall(kernel, arguments, options)


def split_options(kernel, values: dict) -> BoundCall:
    """Bind a flat name -> value dict (parameters and launch options mixed), as graphs store them."""
    return bind_arguments(kernel, (), values)


def first_config(autotuner, arguments: dict):
    """The config a CPU launch uses: the first one left after the autotuner's early pruning."""
    configs = list(autotuner.configs)
    prune = getattr(autotuner, "early_config_prune", None)
    if prune is not None:
        configs = list(prune(configs, dict(arguments)))
        if not configs:
            raise UserKernelError(f"kernel {kernel_name(autotuner)}: early_config_prune left no config")
    return configs[0]


@dataclasses.dataclass
class ResolvedCall:
    jit: Any                   # the triton.jit function
    arguments: dict[str, Any]  # every parameter: given, set by configs and heuristics, or default
    options: dict[str, Any]
    config: Any = None         # the autotune config used, if any


def resolve(call: BoundCall, config=None) -> ResolvedCall:
    """Apply heuristics and one autotune config (default: `first_config`) down to the jit function."""
    jit_function, autotuner, heuristics = triton_classes()
    arguments, options = dict(call.arguments), dict(call.options)
    layer, chosen = call.kernel, None
    while not isinstance(layer, jit_function):
        if isinstance(layer, heuristics):
            for key, heuristic in layer.values.items():
                arguments[key] = heuristic(dict(arguments))
        elif isinstance(layer, autotuner):
            chosen = config if config is not None else first_config(layer, arguments)
            arguments.update(chosen.kwargs)
            options.update(config_options(chosen))
        layer = layer.fn
    for param in layer.params:  # defaults last, as Triton applies them: configs may set them
        if param.name not in arguments and param.has_default:
            arguments[param.name] = param.default
    missing = [p for p in layer.arg_names if p not in arguments]
    if missing:
        raise UserKernelError(f"kernel {call.name}: missing argument(s) {', '.join(repr(m) for m in missing)}")
    return ResolvedCall(layer, arguments, options, chosen)


def config_options(config) -> dict:
    options = {"num_warps": config.num_warps, "num_stages": config.num_stages}
    if getattr(config, "num_ctas", 1) != 1:
        options["num_ctas"] = config.num_ctas
    if getattr(config, "maxnreg", None) is not None:
        options["maxnreg"] = config.maxnreg
    return options


def evaluate_grid(kernel_label: str, grid, meta: dict) -> tuple:
    """A grid as a tuple of 1 to 3 sizes; callable grids get the meta-parameters."""
    if grid is None:
        raise UserKernelError(f"kernel {kernel_label} launched without a grid: use kernel[grid](...)")
    value = grid(meta) if callable(grid) else grid
    value = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if not 1 <= len(value) <= 3:
        raise UserKernelError(f"kernel {kernel_label}: a grid has 1 to 3 dimensions, got {value!r}")
    return value


def grids_per_config(call: BoundCall, grid) -> list[tuple]:
    """One grid per autotune config (one grid when the kernel is not autotuned)."""
    tuner = autotuner_of(call.kernel)
    if tuner is None:
        return [evaluate_grid(call.name, grid, resolve(call).arguments)]
    return [evaluate_grid(call.name, grid, resolve(call, config).arguments) for config in tuner.configs]
