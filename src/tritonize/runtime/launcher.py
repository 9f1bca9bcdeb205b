"""Generated kernels as the wrapper sees them: `load_kernel(...)` once at import, then
`kernel(*pointers)` per call.

On the CPU (Triton's interpreter) a kernel runs with the heuristic's first config, no timing.

On the GPU:
1. At import, when the wrapper gives the argument dtypes, the candidate configs (or the one the
   autotune cache remembers) start compiling in the shared pool (runtime/triton_compile.py), so
   all kernels of a graph compile together.
2. The first call computes the specialization from the real arguments (dtypes, 16-byte
   alignment, device), waits for those compiles (or starts them if the specialization differs
   from the assumed one), loads the binaries, and, when there is more than one candidate,
   autotunes on the real arguments with the written ones protected (runtime/autotune.py,
   runtime/benchmarking.py). The choice goes to the autotune cache.
3. Every later call goes through a generated launch function (runtime/fast_launch.py) whose
   guard sends a different specialization back to step 2 for that specialization.
Symbolic sizes: a specialization also holds the size bucket (each numel rounded up to a power
of two, computed from the size arguments): a bucket's first call picks configs for the bucket's
sizes and autotunes them (the autotune cache is keyed by bucket, not by the first size seen),
and the launcher's guard checks that the numels are still in its bucket. Buckets whose picks are
the same configs share one compiled binary.
Everything that touches the GPU is in `CudaEnvironment`; tests pass a fake one.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import re
import threading
import warnings

import triton
from triton.runtime.errors import InterpreterError

from . import autotune, autotune_cache
from .benchmarking import WrittenArgs, written_params
from .heuristics import DeviceInfo, KernelShape, candidates, even_source, grid_source, uses_heavy_math
from .interpreter_checks import IndexOutOfBoundsError, IntegerDivisionByZeroError
from .loader import load_source_module
from .progress import wait_all
from .triton_compile import NUMBER_KINDS, ArgSpec, CompileJob, supports_pdl

log = logging.getLogger("tritonize.autotune")


class GeneratedKernel:
    """A kernel with its launch config; calling it launches on the given pointers (and, for
    symbolic sizes, the size arguments the grid is computed from at each launch)."""

    def __init__(self, fn, name: str, shape: KernelShape, config, numel_exprs: dict | None = None):
        self.fn, self.name, self.shape, self.config = fn, name, shape, config
        # symbolic sizes: the numels' source over the kernel's parameters; None if static
        self.numel_exprs = numel_exprs
        self._grid_functions: dict = {}  # config's blocks -> args -> grid (symbolic sizes)
        # symbolic sizes: args -> (xnumel, ynumel, rnumel), whose powers of two are the bucket
        self._numels = _numels_function(fn, numel_exprs) if numel_exprs else None
        self._known_numels = [numel_exprs.get(n, "1").strip().isdigit() for n in NUMEL_NAMES] if numel_exprs else []
        self.has_even = "EVEN" in fn.arg_names  # a reduction of symbolic sizes (heuristics.even_source)
        self._even_functions: dict = {}  # config's blocks -> args -> EVEN

    def bucket(self, args) -> tuple:
        """The size bucket of a launch: each symbolic numel rounded up to a power of two."""
        return tuple(n if known else triton.next_power_of_2(max(1, n))
                     for n, known in zip(self._numels(*args), self._known_numels))

    def bucket_shape(self, bucket) -> KernelShape:
        return dataclasses.replace(self.shape, xnumel=bucket[0], ynumel=bucket[1], rnumel=bucket[2])

    @property
    def kind(self) -> str:
        return self.shape.kind

    def grid_for(self, config, args) -> tuple:
        """The launch grid: the config's own for static sizes, else from the size arguments, by
        the same source (heuristics.grid_source) the GPU's generated launchers compute it with."""
        if self.numel_exprs is None:
            return config.grid
        key = tuple(sorted(config.blocks.items()))
        grid = self._grid_functions.get(key)
        if grid is None:
            grid = self._grid_functions[key] = _grid_function(self.fn, config, self.numel_exprs, self.shape.split)
        return grid(*args)

    def even_for(self, config, args) -> bool | None:
        """The EVEN constexpr of a launch of `config` (None: the kernel has none)."""
        if not self.has_even:
            return None
        key = tuple(sorted(config.blocks.items()))
        even = self._even_functions.get(key)
        if even is None:
            even = self._even_functions[key] = _even_function(self.fn, config, self.numel_exprs, self.shape.split)
        return bool(even(*args))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name}, {self.kind}, grid={self.config.grid}, {self.config})"


class InterpretedKernel(GeneratedKernel):
    """CPU: Triton's interpreter with the heuristic's first pick."""

    def __init__(self, fn, name: str, shape: KernelShape, numel_exprs=None):
        super().__init__(fn, name, shape, candidates(shape, "default", on_gpu=False)[0], numel_exprs)
        self.runner = fn[self.config.grid]
        self.constants = launch_constants(fn, pdl=False)
        self._bucket_configs: dict = {}  # symbolic sizes: bucket -> the first pick for its sizes

    def __call__(self, *args):
        config, runner = self.config, self.runner
        if self.numel_exprs is not None:  # a size bucket's config (an adaptive reduction's body)
            bucket = self.bucket(args)
            if bucket not in self._bucket_configs:
                self._bucket_configs[bucket] = candidates(self.bucket_shape(bucket), "default", on_gpu=False)[0]
            config = self._bucket_configs[bucket]
            runner = self.fn[self.grid_for(config, args)]
        constants = self.constants if not self.has_even else dict(self.constants, EVEN=self.even_for(config, args))
        try:
            runner(*args, **config.blocks, **constants)
        except InterpreterError as err:  # a bad index or divisor is the user's error: say it plainly
            cause = err.__cause__
            if isinstance(cause, (IndexOutOfBoundsError, IntegerDivisionByZeroError)):
                raise type(cause)(f"{cause} (kernel {self.name})") from None
            raise


class CudaEnvironment:
    """The GPU side of launching: compile pool, target, device facts, loading, timing."""

    _shared = None
    _shared_lock = threading.Lock()
    _started: set = set()  # devices start_in_background started (once each)
    _pool_started = False  # whether start_in_background started the compile pool (once)

    def __init__(self):
        import torch

        from .fast_launch import cuda_device_getter, cuda_stream_getter
        from .triton_compile import shared_pool

        self.torch = torch
        self.pool = shared_pool()
        self.stream = cuda_stream_getter()
        self.current_device = cuda_device_getter()
        self._targets: dict = {}
        self._targets_lock = threading.Lock()

    @property
    def fast_path(self) -> bool:
        """Whether a kernel's first call may build a fast launcher: not while Triton launch hooks
        (a profiler) are installed, since the fast path does not call them. Asked on the slow
        path only; launchers built before a hook was installed stay in use."""
        from .fast_launch import launch_hooks_active

        return not launch_hooks_active()

    @classmethod
    def shared(cls) -> "CudaEnvironment":
        with cls._shared_lock:
            if cls._shared is None:
                cls._shared = cls()
            return cls._shared

    def device_index(self) -> int:
        return self.torch.cuda.current_device()

    def target(self, index: int) -> tuple:
        with self._targets_lock:  # the first call creates Triton's driver: once, on one thread
            if index not in self._targets:
                from .triton_compile import current_target

                with self.torch.cuda.device(index):
                    self._targets[index] = current_target()
            return self._targets[index]

    @classmethod
    def start_in_background(cls, index: int, compiling: bool = True) -> threading.Thread | None:
        """Create the environment and Triton's driver for device `index` on a background thread.
        The driver's first use builds (cold) or loads its C utilities with the system compiler,
        about half a second; started when a graph for this device reaches the backend, it
        overlaps AOTAutograd's trace instead of holding up the first kernel's load. With
        `compiling` (the graph missed the Dynamo-level cache), the compile pool starts too
        (worker processes take a moment), and Triton hashes its installation (the first step
        of every compile, about a second). None when there is nothing left to start."""
        shared = cls._shared
        start_pool = compiling and not cls._pool_started
        load_target = index not in cls._started and not (shared is not None and index in shared._targets)
        if not (start_pool or load_target):
            return None
        if start_pool:
            cls._pool_started = True
        if load_target:
            cls._started.add(index)

        def start():
            from .triton_compile import hash_triton_installation

            try:
                environment = cls.shared()
                if start_pool:  # compile threads, and worker processes if configured
                    environment.pool.warm_up()
                environment.target(index)
                if start_pool:
                    hash_triton_installation()  # each compile's first step: done once, meanwhile
            except Exception as err:  # noqa: BLE001  (only a head start: the first kernel meets it again)
                log.debug("tritonize: starting the GPU runtime for device %d failed: %s", index, err)

        thread = threading.Thread(target=start, daemon=True, name="tritonize-cuda-start")
        thread.start()
        return thread

    def device_info(self, index: int) -> DeviceInfo:
        props = self.torch.cuda.get_device_properties(index)
        return DeviceInfo(props.multi_processor_count, getattr(props, "regs_per_multiprocessor", 65536),
                          getattr(props, "max_threads_per_multi_processor", 2048), getattr(props, "warp_size", 32))

    def gpu_name(self, index: int) -> str:
        return self.torch.cuda.get_device_name(index)

    def load(self, compiled, index: int):
        from .fast_launch import load_on_device

        return load_on_device(compiled, index)

    def time_many(self, launches) -> list[float]:
        from .benchmarking import time_on_gpu_interleaved

        return time_on_gpu_interleaved(launches)

    def counts(self) -> tuple[int, int]:
        return self.pool.finished, self.pool.submitted


class _Pending:
    """Compiles under way for one specialization (and, for symbolic sizes, one size bucket)."""

    def __init__(self, configs, handles, cache_key, from_cache, shape: KernelShape, bucket=None, even_of=None):
        self.configs, self.handles = configs, handles
        self.cache_key, self.from_cache = cache_key, from_cache
        self.shape, self.bucket = shape, bucket
        self.even_of = even_of or (lambda config: None)  # config -> its EVEN at the launch's sizes


class GpuKernel(GeneratedKernel):
    """GPU: compiled ahead where possible, autotuned on first call, launched by a fast path."""

    def __init__(self, fn, name: str, source: str, shape: KernelShape, mode: str, module_path: str,
                 arg_dtypes=None, env=None, debug: bool = False, numel_exprs=None):
        self.env = env or CudaEnvironment.shared()
        self.debug = debug  # compiled with device asserts (the kernel checks indirect indices)
        device = self.env.device_index()
        self.configs = candidates(shape, mode, on_gpu=True, device=self.env.device_info(device))
        super().__init__(fn, name, shape, self.configs[0], numel_exprs)
        self.source, self.mode, self.module_path = source, mode, module_path
        self.params = list(fn.arg_names)
        runtime_constants = launch_constants(fn, pdl=False)
        constants = set(self.config.blocks) | set(runtime_constants) | {"EVEN"}
        self.positional = [p for p in self.params if p not in constants]
        self._device_constants: dict = {}  # device index -> what _constants returns
        self.written = [self.positional.index(p) for p in written_params(source, self.positional)]
        self._bucket_configs: dict = {}  # bucket -> candidate configs for its sizes
        self._bucket_choices: dict = {}  # bucket -> the config chosen for it
        self._compiles: dict = {}  # (config, ArgSpec, EVEN or None) -> compile handle, shared by buckets
        # ArgSpec; (ArgSpec, bucket); or with EVEN (ArgSpec, bucket, EVEN) -> guarded launch function
        self.variants: dict = {}
        self._hot_spec = None  # the ArgSpec of the variant self.launch goes to
        self.pending: dict = {}  # ArgSpec -> _Pending started at import (static sizes)
        self.launch = self._fallback
        self._lock = threading.RLock()
        if arg_dtypes is not None and self._numels is None:
            spec = ArgSpec.assumed(arg_dtypes, device)
            if spec is not None and len(spec.args) == len(self.positional):
                self.pending[spec] = self._submit(spec)

    def __call__(self, *args):
        return self.launch(*args)

    # --- compiling ---------------------------------------------------------------------------
    def _constants(self, device: int) -> dict:
        """Constexprs set by the runtime rather than the config: PDL where the device has it
        (decided once per device; the generic path asks on every call)."""
        if device not in self._device_constants:
            self._device_constants[device] = launch_constants(self.fn, pdl=supports_pdl(self.env.target(device)))
        return self._device_constants[device]

    def _blocks(self, config, device: int, even: bool | None) -> dict:
        """The constexprs of a compile: the config's, the device's, EVEN where the kernel has it."""
        blocks = dict(config.blocks, **self._constants(device))
        if even is not None:
            blocks["EVEN"] = even
        return blocks

    def _job(self, config, spec: ArgSpec, even: bool | None = None) -> CompileJob:
        blocks = self._blocks(config, spec.device, even)
        return CompileJob(self.module_path, self.name, spec, tuple(sorted(blocks.items())),
                          config.num_warps, config.num_stages, self.env.target(spec.device), self.debug)

    def _compile(self, config, spec: ArgSpec, even: bool | None = None):
        """Start compiling one config (once per specialization and EVEN: size buckets share it);
        the worker also builds its host launcher."""
        from .fast_launch import build_host_launcher

        key = (config, spec, even)
        if key not in self._compiles:
            job = self._job(config, spec, even)
            self._compiles[key] = self.env.pool.submit(self.fn, job, prepare=build_host_launcher)
        return self._compiles[key]

    def _submit(self, spec: ArgSpec, use_cache: bool = True, bucket=None, args=None) -> _Pending:
        """Compiles of the candidates of a specialization (and bucket). A kernel with EVEN
        compiles each candidate with the EVEN the launch's `args` give it; a bucket already tuned
        compiles its choice alone (a launch whose sizes fill the tiles, or no longer do)."""
        def even_of(config):
            return self.even_for(config, args)

        if self.has_even and bucket in self._bucket_choices:
            choice = self._bucket_choices[bucket]
            return _Pending([choice], [self._compile(choice, spec, even_of(choice))], None, True,
                            self.bucket_shape(bucket), bucket, even_of)
        shape, configs = self._shape_and_configs(bucket)
        key, cached = None, None
        if len(configs) > 1 or autotune.is_max_autotune(self.mode):
            key = autotune_cache.cache_key(self.source, shape, spec, self.mode,
                                           self.env.gpu_name(spec.device), configs)
            cached = autotune_cache.load(key, shape) if use_cache else None
            if cached is not None:
                configs = [cached]
        handles = [self._compile(c, spec, even_of(c)) for c in configs]
        return _Pending(configs, handles, key, cached is not None, shape, bucket, even_of)

    def _shape_and_configs(self, bucket) -> tuple:
        """The kernel's shape and candidates: the example's, or a size bucket's."""
        if bucket is None:
            return self.shape, self.configs
        shape = self.bucket_shape(bucket)
        if bucket not in self._bucket_configs:
            device = self.env.device_info(self.env.device_index())
            self._bucket_configs[bucket] = candidates(shape, self.mode, on_gpu=True, device=device)
        return shape, self._bucket_configs[bucket]

    def _compile_many(self, spec: ArgSpec, pending: _Pending):
        known = dict(zip(pending.configs, pending.handles))

        def compile_many(configs):
            handles = [known.get(c) or self._compile(c, spec, pending.even_of(c)) for c in configs]
            results = wait_all(handles, "compiling kernels", self.env.counts)
            return [r if isinstance(r, Exception) else self._variant(c, r, spec, pending.bucket, pending.even_of(c))
                    for c, r in zip(configs, results)]
        return compile_many

    def _variant(self, config, compiled, spec: ArgSpec, bucket=None, even: bool | None = None):
        from .fast_launch import generate_launcher

        try:
            loaded = self.env.load(compiled, spec.device)
        except Exception as err:  # out of resources (shared memory, threads) on this device
            return err
        dtypes = [_torch_dtype(kind) for kind, _ in spec.args]
        blocks = self._blocks(config, spec.device, even)
        grid = config.grid if self.numel_exprs is None else grid_source(config, self.numel_exprs, self.shape.split)
        checks = self._bucket_checks(bucket)
        if even is not None:  # a launch whose sizes fill the tiles, or no longer do, goes elsewhere
            condition = even_source(config, self.numel_exprs, self.shape.split)
            checks.append(f"not ({condition})" if even else f"({condition})")
        launcher = generate_launcher(self.params, blocks, grid, spec, dtypes, loaded,
                                     self.env.stream, self.env.current_device, self._fallback,
                                     name=_identifier(self.name), extra_checks=checks)
        return autotune.Variant(config, launcher.unchecked, loaded.n_regs, loaded.n_spills, launcher)

    def _bucket_checks(self, bucket) -> list[str]:
        """Guard conditions (true: not this bucket) over the size arguments."""
        if bucket is None:
            return []
        checks = []
        for name, top, known in zip(NUMEL_NAMES, bucket, self._known_numels):
            if known:
                continue
            text = self.numel_exprs[name]
            checks.append(f"({text}) > {top}" + (f" or ({text}) <= {top // 2}" if top > 1 else ""))
        return checks

    # --- choosing ----------------------------------------------------------------------------
    def _fallback(self, *args):
        """First call, and any call whose specialization the fast path was not built for."""
        spec = ArgSpec.of(args, self.env.device_index()) if len(args) == len(self.positional) else None
        if spec is None or not self.env.fast_path or any(p.startswith("_") for p in self.positional):
            return self._generic(*args)
        bucket = None if self._numels is None else self.bucket(args)
        key = self._variant_key(spec, bucket, args)
        launcher = self.variants.get(key)
        if launcher is None:
            with self._lock:
                launcher = self.variants.get(key)
                if launcher is None:
                    try:
                        launcher = self._build(spec, args, bucket)
                    except Exception as err:  # noqa: BLE001  (reported, then Triton's own path decides)
                        return self._give_up_fast_path(err, *args)
                self.variants[self._variant_key(spec, bucket, args)] = launcher
        if self._hot_spec is None or _pointer_kinds(spec) == _pointer_kinds(self._hot_spec):
            # Only the size arguments changed (a graph with symbolic sizes called at a new size:
            # 16 | 131 no longer, another bucket): calls go straight to this variant from now on. A
            # launch with another pointer alignment stays on this path: it is one call site, and
            # a less aligned variant would also pass the guards of aligned calls.
            self.launch, self._hot_spec = launcher, spec
        return launcher.unchecked(*args)

    def _variant_key(self, spec: ArgSpec, bucket, args):
        """What a launch's variant is found by: the specialization, the size bucket, and for a
        kernel with EVEN the value the bucket's chosen config gives these sizes (None before the
        bucket is tuned)."""
        if bucket is None:
            return spec
        if not self.has_even:
            return (spec, bucket)
        choice = self._bucket_choices.get(bucket)
        return (spec, bucket, None if choice is None else self.even_for(choice, args))

    def _give_up_fast_path(self, err: Exception, *args):
        """Our compile or launch glue failed: say so and use Triton's launch path for this kernel
        (where a real error in the kernel is raised by Triton itself)."""
        warnings.warn(f"tritonize: kernel {self.name}: autotuned fast launch unavailable "
                      f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}); "
                      f"launching through Triton with {self.config}")
        self.launch = self._generic
        return self._generic(*args)

    def _build(self, spec: ArgSpec, args, bucket=None):
        pending = self.pending.pop(spec, None) if bucket is None else None  # (compiles started at import)
        pending = pending or self._submit(spec, bucket=bucket, args=args)
        try:
            selection = self._select(spec, pending, args)
        except autotune.NoUsableConfig:
            if not pending.from_cache:
                raise
            log.debug("tritonize: cached config of %s does not compile here; tuning again", self.name)
            pending = self._submit(spec, use_cache=False, bucket=bucket, args=args)
            selection = self._select(spec, pending, args)
        self.config = selection.best.config
        if bucket is not None:
            self._bucket_choices[bucket] = self.config
        if pending.cache_key is not None and selection.reason == "timed":
            autotune_cache.store(pending.cache_key, self.name, self.config, selection.timings, self.mode)
        return selection.best.guarded

    def _select(self, spec: ArgSpec, pending: _Pending, args) -> autotune.Selection:
        """Autotune on the real arguments; the written ones are cloned (or saved) only if a
        timing run happens."""
        device = self.env.device_info(spec.device)
        protected = WrittenArgs(args, self.written)
        safe_args = []

        def time_variants(variants):
            if not safe_args:
                safe_args.append(protected.__enter__())
            return self.env.time_many([_launcher(v.launch, safe_args[0]) for v in variants])

        try:
            return autotune.select(self.name, pending.shape, pending.configs, self._compile_many(spec, pending),
                                   time_variants, "default" if pending.from_cache else self.mode, device)
        finally:
            if safe_args:
                protected.__exit__(None, None, None)

    def _generic(self, *args):
        """Triton's own launch path (unusual arguments, or launch hooks installed). Symbolic
        sizes: the config chosen for the launch's bucket, or the bucket's first pick (an adaptive
        reduction's config decides which body runs, and the persistent one covers its bucket only)."""
        config = self.config
        if self._numels is not None:
            bucket = self.bucket(args)
            config = self._bucket_choices.get(bucket) or self._shape_and_configs(bucket)[1][0]
        extra = {"debug": True, "sanitize_overflow": False} if self.debug else {}
        extra["enable_fp_fusion"] = False  # as compile_options (runtime/compile_worker.py)
        extra.update(self._constants(self.env.device_index()))
        if self.has_even:
            extra["EVEN"] = self.even_for(config, args)
        if extra.get("PDL"):
            extra["launch_pdl"] = True
        self.fn[self.grid_for(config, args)](*args, **config.blocks, num_warps=config.num_warps,
                                             num_stages=config.num_stages, **extra)


def _pointer_kinds(spec: ArgSpec) -> tuple:
    """A specialization without its number arguments: (element type, aligned) per pointer."""
    return tuple(arg for arg in spec.args if arg[0] not in NUMBER_KINDS)


def launch_constants(fn, pdl: bool) -> dict:
    """{"PDL": pdl} for a kernel with that constexpr (every generated kernel since it waits for
    the previous grid, codegen/kernel.py's kernel_source); {} for one without."""
    return {"PDL": pdl} if "PDL" in fn.arg_names else {}


def _launcher(launch, args):
    return lambda: launch(*args)


def _after_fork_in_child() -> None:
    """New locks in a forked child (runtime/triton_compile.py says why)."""
    CudaEnvironment._shared_lock = threading.Lock()
    if CudaEnvironment._shared is not None:
        CudaEnvironment._shared._targets_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _identifier(name: str) -> str:
    text = re.sub(r"\W", "_", name)
    return f"launch_{text}"


def _torch_dtype(kind: str):
    from .triton_compile import _POINTER_TYPES

    if kind in NUMBER_KINDS:  # a number argument: no tensor, no dtype to check
        return None
    for dtype, code in _POINTER_TYPES.items():
        if code == kind:
            return dtype
    raise KeyError(kind)


def load_kernel(source: str, name: str, *, kind: str = "pointwise", xnumel: int, ynumel: int = 1,
                rnumel: int = 1, hint: str | None = None, device: str = "cuda", checks: bool = False,
                mode: str = "default", arg_dtypes=None, numel_exprs: dict | None = None, split: int = 1):
    """Load a generated kernel. hint: for reductions, "inner" or "outer" (which way the inputs
    are contiguous), or ""; checks: the kernel calls runtime/index_checks.py (bounds checks of
    indirect indices; on the GPU compiled in debug mode); mode: "default" or "max-autotune"
    (how many configs to try); arg_dtypes: the pointer arguments' dtypes, which let compilation
    start at import. numel_exprs: for symbolic sizes, {"xnumel": source, "ynumel": source} over
    the kernel's parameters; the numels given are then the example's (configs are chosen on
    them) and each launch's grid is computed from its arguments. split: an outer reduction's row
    chunks a column block (codegen/outer_split.py), which multiply its grid."""
    on_gpu = device != "cpu"
    module = load_source_module(source, "kernel", interpret=not on_gpu)
    shape = KernelShape(kind, xnumel, ynumel, rnumel, hint, heavy_math=uses_heavy_math(source), split=split)
    fn = getattr(module, name)
    if not on_gpu:
        return InterpretedKernel(fn, name, shape, numel_exprs)
    return GpuKernel(fn, name, source, shape, mode, module.__file__, arg_dtypes, debug=checks,
                     numel_exprs=numel_exprs)


NUMEL_NAMES = ("xnumel", "ynumel", "rnumel")


def _numels_function(fn, numel_exprs: dict):
    """args -> (xnumel, ynumel, rnumel) of a launch, from the numels' source over the parameters."""
    params = ", ".join(f"{name}=None" for name in fn.arg_names)
    values = ", ".join(f"({numel_exprs.get(name, '1')})" for name in NUMEL_NAMES)
    return eval(f"lambda {params}: ({values})", {})  # noqa: S307  (our own generated arithmetic)


def _even_function(fn, config, numel_exprs: dict, split: int = 1):
    """args -> whether a launch of `config` fills its tiles (heuristics.even_source)."""
    params = ", ".join(f"{name}=None" for name in fn.arg_names)
    return eval(f"lambda {params}: {even_source(config, numel_exprs, split)}", {})  # noqa: S307


def _grid_function(fn, config, numel_exprs: dict, split: int = 1):
    """args -> the launch grid of `config`, from the numels' source over the kernel's parameters."""
    params = ", ".join(f"{name}=None" for name in fn.arg_names)  # launches pass the leading ones
    text = f"lambda {params}: ({', '.join(grid_source(config, numel_exprs, split))},)"
    return eval(text, {})  # noqa: S307  (our own generated arithmetic over the kernel's parameters)
