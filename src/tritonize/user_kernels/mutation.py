"""Mutation analysis of a user kernel call: which tensor arguments it writes, which it reads.

    tritonize.mutated_arguments(kernel, *args, **kwargs) -> list[str]

takes the arguments you would pass to `kernel[grid](...)`. The kernel's TTIR for those arguments
(ttir.py) is analyzed (analysis.py). An autotuned kernel is analyzed for each of its configs and
the results are joined, so a store guarded by a config's constexpr is not missed. When the
analysis cannot be trusted (an unknown op, impure inline asm, TTIR that cannot be generated), it
says so in the log and reports every tensor argument as both read and written.

Results are cached per kernel and per argument kinds (tensor dtypes, scalar values).
"""
from __future__ import annotations

import dataclasses
import logging

import torch

from .analysis import UNKNOWN, UnknownOperation, summarize_module
from .binding import BoundCall, autotuner_of, bind_arguments, resolve
from .ttir import TtirError, dummy_descriptor, is_tensor_argument, kernel_ttir

log = logging.getLogger("tritonize.user_kernels")

_CACHE: dict = {}


@dataclasses.dataclass(frozen=True)
class KernelAccess:
    """What one kernel call does to its tensor arguments."""

    kernel: str
    mutated: tuple[str, ...]
    read: tuple[str, ...]
    exact: bool = True  # False: the analysis gave up and assumed every tensor is read and written
    reason: str = ""


def mutated_arguments(kernel, *args, **kwargs) -> list[str]:
    """Names of the tensor arguments `kernel[grid](*args, **kwargs)` may write."""
    return list(analyze_kernel(kernel, *args, **kwargs).mutated)


def read_arguments(kernel, *args, **kwargs) -> list[str]:
    """Names of the tensor arguments `kernel[grid](*args, **kwargs)` may read."""
    return list(analyze_kernel(kernel, *args, **kwargs).read)


def analyze_kernel(kernel, *args, **kwargs) -> KernelAccess:
    return analyze_call(bind_arguments(kernel, args, kwargs))


def analyze_call(call: BoundCall, tma_metadata: dict | None = None) -> KernelAccess:
    """Analyze a bound call (tensors may be fake or functional: only their dtypes are used)."""
    call = _with_dummy_descriptors(call, tma_metadata or {})
    tuner = autotuner_of(call.kernel)
    configs = [None] if tuner is None else _distinct_configs(tuner.configs)
    mutated, read, reasons, exact = set(), set(), [], True
    for config in configs:
        resolved = resolve(call, config)
        access = _analyze_resolved(resolved.jit, resolved.arguments)
        mutated |= set(access.mutated)
        read |= set(access.read)
        exact &= access.exact
        if access.reason and access.reason not in reasons:
            reasons.append(access.reason)
    order = [name for name in resolve(call, configs[0]).jit.arg_names]
    return KernelAccess(call.name, tuple(n for n in order if n in mutated), tuple(n for n in order if n in read),
                        exact, "; ".join(reasons))


def _distinct_configs(configs) -> list:
    seen, kept = set(), []
    for config in configs:
        key = repr(sorted(config.kwargs.items()))
        if key not in seen:
            seen.add(key)
            kept.append(config)
    return kept


def _with_dummy_descriptors(call: BoundCall, tma_metadata: dict) -> BoundCall:
    """Graphs carry TMA descriptors as a tensor plus metadata; the analysis needs a descriptor."""
    if not tma_metadata:
        return call
    arguments = dict(call.arguments)
    for name, (kind, payload) in tma_metadata.items():
        if kind != "stable":
            raise UnknownOperation(f"argument {name}: {kind} TMA descriptors are not analyzed")
        arguments[name] = dummy_descriptor(arguments[name].dtype, payload[0])
    return BoundCall(call.kernel, arguments, call.options)


def _cache_key(jit, arguments: dict):
    parts = []
    for name in jit.arg_names:
        value = arguments[name]
        if isinstance(value, torch.Tensor):
            parts.append((name, "tensor", value.dtype))
        elif is_tensor_argument(value):
            parts.append((name, "descriptor", value.base.dtype, tuple(value.block_shape)))
        elif isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return None
        else:
            parts.append((name, type(value).__name__, repr(value)))
    return (jit, tuple(parts))


def _analyze_resolved(jit, arguments: dict) -> KernelAccess:
    key = _cache_key(jit, arguments)
    if key is not None and key in _CACHE:
        return _CACHE[key]
    access = _analyze_uncached(jit, arguments)
    if key is not None:
        _CACHE[key] = access
    return access


def _analyze_uncached(jit, arguments: dict) -> KernelAccess:
    name = jit.fn.__name__
    tensors = [p for p in jit.arg_names if is_tensor_argument(arguments[p])]
    try:
        module, notes = kernel_ttir(jit, arguments)
        summary = summarize_module(module)[module.entry]
        param_names = module.functions[module.entry].param_names
        mutated = _names(summary.writes, param_names, tensors)
        if mutated is None:
            raise UnknownOperation("a store through a pointer that does not come from an argument")
        read = _names(summary.reads, param_names, tensors)
        read = tuple(tensors) if read is None else read
    except (UnknownOperation, TtirError) as error:
        log.warning("user kernel %s: %s; assuming it reads and writes every tensor argument", name, error)
        return KernelAccess(name, tuple(tensors), tuple(tensors), exact=False, reason=str(error))
    return KernelAccess(name, mutated, read, reason="; ".join(notes))


def _names(indices, param_names, tensors: list[str]) -> tuple[str, ...] | None:
    """The tensor arguments behind TTIR parameter indices; None when one is UNKNOWN."""
    if UNKNOWN in indices:
        return None
    found = set()
    for index in indices:
        name = param_names[index] if index < len(param_names) else None
        if name is None:
            raise UnknownOperation(f"TTIR parameter {index} has no argument name")
        found.add(name)
    return tuple(t for t in tensors if t in found)
