"""The per-call path of a compiled kernel: one generated Python function per kernel variant.

Triton's `kernel[grid](*args)` binds arguments to parameters, recomputes the specialization key
(types, alignment), looks up its cache, and asks the driver to validate each pointer, on every
call. The wrapper's calls are the same every time, so all of that is done once, when the variant
is built, and the generated function does only this:

    def launch(in_ptr0, in_ptr1, out_ptr0):
        _p0 = in_ptr0.data_ptr(); _p1 = in_ptr1.data_ptr(); _p2 = out_ptr0.data_ptr()
        if (_p0 | _p1 | _p2) & 15 or in_ptr0.dtype is not _d0 ... or _device() != 0:
            return _fallback(in_ptr0, in_ptr1, out_ptr0)
        _run(256, 1, 1, _stream(0), _function, _metadata, None, None, None, _p0, _p1, _p2, 1024)

The guard checks what the variant was compiled for (each aligned pointer still aligned, the
element types, the current device); anything else goes to `_fallback`, which finds or builds the
right variant. Pointers are passed as integers, which Triton's launcher takes without a driver
query. Block sizes are appended where the kernel's signature has them.

`build_host_launcher` keeps one lock per launcher shape for the life of the process (a few
dozen at most), so that alike launchers are built one at a time.
"""
from __future__ import annotations

import dataclasses
import os
import threading
from typing import Callable

from .triton_compile import ALIGNMENT, INT32_MAX, INT_KINDS, NUMBER_KINDS, ArgSpec


@dataclasses.dataclass
class LoadedKernel:
    """A compiled kernel loaded on a device: what the launcher call needs."""

    run: Callable  # triton's launcher: run(gx, gy, gz, stream, function, metadata, launch_md, enter, exit, *args)
    function: int
    packed_metadata: object
    n_regs: int = 0
    n_spills: int = 0


def load_on_device(compiled, device_index: int) -> LoadedKernel:
    """Load a CompiledKernel's binary on the device (Triton does this lazily on first launch)."""
    import torch

    with torch.cuda.device(device_index):
        run = compiled.run  # the property loads the module and builds the launcher
    return LoadedKernel(run, compiled.function, compiled.packed_metadata,
                        int(getattr(compiled, "n_regs", 0) or 0), int(getattr(compiled, "n_spills", 0) or 0))


def build_host_launcher(compiled) -> None:
    """Build the host-side launcher a CompiledKernel's first load needs, without loading the
    kernel. Triton 3.6 compiles a small C module per kernel signature with the system compiler
    (about half a second) and keeps it in its cache; doing it here, in a compile worker, takes
    that off the thread that launches. Kernels whose launchers are alike (launcher_shape) build
    one at a time, so the second finds the first's module in Triton's cache instead of running
    the compiler again at the same moment. Needs Triton's active driver, which the caller has
    already created (concurrent first uses of it are not safe)."""
    from triton.runtime import driver

    with _LAUNCHER_BUILDS.lock_for(launcher_shape(compiled)):
        driver.active.launcher_cls(compiled.src, compiled.metadata)


def launcher_shape(compiled) -> tuple:
    """What a Triton launcher's C source depends on, as far as we can tell: the kind of each
    parameter (any pointer is a device pointer, whatever its element type) and the launch
    flags. Only a hint for build_host_launcher: two kernels it confuses build one after the other."""
    signature = getattr(compiled.src, "signature", {}) or {}
    kinds = tuple("*" if str(kind).startswith("*") else str(kind) for kind in signature.values())
    flags = tuple(getattr(compiled.metadata, flag, None) for flag in ("launch_pdl", "launch_cooperative_grid"))
    return kinds + flags


class _KeyedLocks:
    """One lock per key, created on first use (a forked child starts with none held)."""

    def __init__(self):
        self._guard = threading.Lock()
        self._locks: dict = {}
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._guard, self._locks = threading.Lock(), {}

    def lock_for(self, key) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())


_LAUNCHER_BUILDS = _KeyedLocks()


def launch_hooks_active() -> bool:
    """Triton's launch hooks (profilers such as proton) need the generic launch path."""
    try:
        from triton import knobs

        hooks = (knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook)
    except (ImportError, AttributeError):
        return False
    return any(hook_installed(hook) for hook in hooks)


def hook_installed(hook) -> bool:
    """Whether a launch-hook knob holds a hook. Triton up to 3.4 keeps one callable or None there;
    from 3.5 on a `HookChain`, present even when empty, whose `calls` lists the hooks added."""
    if hook is None:
        return False
    calls = getattr(hook, "calls", None)
    if isinstance(calls, (list, tuple)):
        return len(calls) > 0
    return True


def generate_launcher(params: list[str], blocks: dict, grid: tuple, spec: ArgSpec, dtypes: list,
                      kernel: LoadedKernel, stream: Callable, current_device: Callable,
                      fallback: Callable, name: str = "launch", extra_checks=()) -> Callable:
    """The guarded fast launch function for one variant (see the module docstring). Int
    arguments (symbolic sizes) are passed as they are and guarded like pointers: the same
    divisibility by 16, and an int32 one within int32; `grid` may then be source text over the
    parameters (one expression per grid dim), computed at each launch. extra_checks: more guard
    conditions (true: the variant does not apply), such as a size bucket's bounds."""
    positional = [p for p in params if p not in blocks]
    if len(positional) != len(spec.args):
        raise TypeError(f"{name}: {len(positional)} pointer parameters, specialization has {len(spec.args)}")
    ints = {p for p, (kind, _) in zip(positional, spec.args) if kind in NUMBER_KINDS}  # passed as they are
    pointer_of = {p: (p if p in ints else f"_p{i}") for i, p in enumerate(positional)}
    reads = "; ".join(f"{pointer_of[p]} = {p}.data_ptr()" for p in positional if p not in ints)
    lines = [f"def {name}({', '.join(positional)}):"] + ([f"    {reads}"] if reads else [])
    lines.append(f"    if {' or '.join(_guard_checks(positional, ints, pointer_of, spec) + list(extra_checks))}:")
    lines.append(f"        return _fallback({', '.join(positional)})")
    grid3 = tuple(grid) + (1,) * (3 - len(grid))
    call_args = [pointer_of[p] if p in pointer_of else repr(int(blocks[p])) for p in params]
    launch_line = (f"    _run({grid3[0]}, {grid3[1]}, {grid3[2]}, _stream({spec.device}), _function, _metadata, "
                   f"None, None, None{''.join(', ' + a for a in call_args)})")
    lines.append(launch_line)
    # The same launch without the guard: for timing, and for the fallback once it has chosen.
    lines.append(f"def {name}_unchecked({', '.join(positional)}):")
    if reads:
        lines.append(f"    {reads}")
    lines.append(launch_line)
    namespace = {"_run": kernel.run, "_function": kernel.function, "_metadata": kernel.packed_metadata,
                 "_stream": stream, "_device": current_device, "_fallback": fallback}
    namespace.update({f"_d{i}": dtype for i, dtype in enumerate(dtypes)})
    source = "\n".join(lines) + "\n"
    exec(compile(source, f"<tritonize launcher {name}>", "exec"), namespace)
    launcher = namespace[name]
    launcher.unchecked = namespace[f"{name}_unchecked"]
    launcher.source = source
    return launcher


def _guard_checks(positional, ints, pointer_of, spec: ArgSpec) -> list[str]:
    """What must hold for the variant to apply: each aligned pointer still aligned, each int
    argument as divisible by 16 as it was (and an int32 one within int32), the element types,
    the device."""
    checks = []
    aligned = [pointer_of[p] for p, (_, is_aligned) in zip(positional, spec.args) if is_aligned and p not in ints]
    if aligned:
        checks.append(f"({' | '.join(aligned)}) & {ALIGNMENT - 1}")
    for p, (kind, divisible) in zip(positional, spec.args):
        if p in ints and kind in INT_KINDS:
            checks.append(f"({p} & {ALIGNMENT - 1} {'!=' if divisible else '=='} 0)")
            if kind == INT_KINDS[0]:
                checks.append(f"{p} > {INT32_MAX}")
    checks += [f"{p}.dtype is not _d{i}" for i, p in enumerate(positional) if p not in ints]
    checks.append(f"_device() != {spec.device}")
    return checks


def cuda_stream_getter() -> Callable:
    """device index -> the current raw CUDA stream (torch's C entry when it exists)."""
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw
    return lambda index: torch.cuda.current_stream(index).cuda_stream


def cuda_device_getter() -> Callable:
    import torch

    return getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device
