"""Compiling one kernel config with Triton, in parallel, without Triton's per-call binding.

A kernel's specialization (`ArgSpec`) is what Triton's JIT would derive from the arguments: each
pointer's element type and whether its address is a multiple of 16. `compile_config` builds
Triton's `ASTSource` from it and the config's block sizes and calls `triton.compile` with an
explicit target, so compilation needs no GPU and no Python-level argument binding; Triton's own
binary cache (TRITON_CACHE_DIR) makes a second compile of the same thing a file read.

`CompilePool` runs compiles concurrently, in one of three ways (TRITONIZE_COMPILE_POOL; the
default is "processes" on machines with 8 CPUs or more, else "threads"):
* "threads": a thread pool in this process. Triton releases the GIL in its C++ passes
  and runs ptxas as a subprocess, but its front end (Python AST to Triton IR) holds it, so
  threads contend with each other and with whatever else this process does meanwhile;
* "processes": the same threads, each with a worker process (runtime/compile_processes.py,
  runtime/compile_worker.py: Triton only, no torch, started in a fraction of a second) that
  compiles the job into Triton's disk cache first; the thread then compiles it again, a cache
  hit. The workers start with `warm_up` (the GPU runtime's start, for a graph the Dynamo-level
  cache did not have) or at the first compile that misses the Triton-binary index, and live as
  long as this process;
* "serial": compile when the result is needed (no pool).
bench/compile_pool.py measures the three on the same kernels.
TRITONIZE_COMPILE_WORKERS sets the pool size (default: CPUs, at most 16).
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import os
import queue
import threading
import time

import torch

from . import compile_worker, triton_binaries
from .compile_worker import compile_options

log = logging.getLogger("tritonize.compile")

_POINTER_TYPES = {
    torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.float64: "fp64",
    torch.int8: "i8", torch.int16: "i16", torch.int32: "i32", torch.int64: "i64",
    torch.uint8: "u8", torch.bool: "i1",
}
for _name, _code in [("uint16", "u16"), ("uint32", "u32"), ("uint64", "u64"), ("float8_e4m3fn", "fp8e4nv"),
                     ("float8_e5m2", "fp8e5"), ("float8_e4m3fnuz", "fp8e4b8"), ("float8_e5m2fnuz", "fp8e5b16")]:
    if hasattr(torch, _name):
        _POINTER_TYPES[getattr(torch, _name)] = _code

ALIGNMENT = 16


def pointer_type(dtype) -> str | None:
    return _POINTER_TYPES.get(dtype)


INT_KINDS = ("#i32", "#i64")  # int (size) arguments: "#" tells them from pointers to ints
FLOAT_KIND = "#fp64"  # a float argument (a host scalar's value, lower/graph.py is_host_scalar)
NUMBER_KINDS = INT_KINDS + (FLOAT_KIND,)
INT32_MAX = 2**31 - 1


@dataclasses.dataclass(frozen=True)
class ArgSpec:
    """The specialization of a launch: device index, and per argument (element type, 16-byte
    aligned) for a pointer or (INT_KINDS entry, multiple of 16) for an int (a symbolic size):
    Triton's JIT specializes both the same way (`tt.divisibility`); (FLOAT_KIND, False) for a
    float."""

    device: int
    args: tuple

    @classmethod
    def of(cls, args, device: int) -> "ArgSpec | None":
        """From real arguments; None when one is neither a tensor of a type Triton takes nor an int."""
        found = []
        for arg in args:
            if type(arg) is int:
                found.append((INT_KINDS[0] if abs(arg) <= INT32_MAX else INT_KINDS[1], arg % ALIGNMENT == 0))
                continue
            if type(arg) is float:
                found.append((FLOAT_KIND, False))
                continue
            kind = pointer_type(arg.dtype) if isinstance(arg, torch.Tensor) else None
            if kind is None:
                return None
            found.append((kind, arg.data_ptr() % ALIGNMENT == 0))
        return cls(device, tuple(found))

    @classmethod
    def assumed(cls, dtypes, device: int) -> "ArgSpec | None":
        """What fresh allocations of these dtypes give (every pointer aligned)."""
        kinds = [pointer_type(d) for d in dtypes]
        if any(k is None for k in kinds):
            return None
        return cls(device, tuple((k, True) for k in kinds))


@dataclasses.dataclass(frozen=True)
class CompileJob:
    """Everything a compile needs, picklable for worker processes."""

    module_path: str
    kernel_name: str
    spec: ArgSpec
    blocks: tuple  # ((name, value), ...)
    num_warps: int
    num_stages: int
    target: tuple  # (backend, arch, warp_size)
    debug: bool = False  # device asserts compiled in (kernels that check indirect indices)

    def options(self) -> dict:
        return compile_options(self.num_warps, self.num_stages, self.debug, dict(self.blocks))


def supports_pdl(target: tuple) -> bool:
    """Whether kernels for `target` may be launched with programmatic dependent launch: CUDA
    compute capability 9.0 or later, a Triton with grid dependency control, and not turned off
    with TRITONIZE_PDL=0."""
    import os

    from . import triton_helpers

    backend, arch = target[0], target[1]
    if backend != "cuda" or triton_helpers.gdc_wait is None or os.environ.get("TRITONIZE_PDL", "1") == "0":
        return False
    return isinstance(arch, int) and arch >= 90


def current_target() -> tuple:
    from triton.runtime import driver

    target = driver.active.get_current_target()
    return (target.backend, target.arch, target.warp_size)


def build_source(jit_fn, job: CompileJob, target):
    """Triton's ASTSource for this specialization and these block sizes."""
    return compile_worker.build_source(jit_fn, job.kernel_name, job.spec.args, dict(job.blocks), target)


_TRITON_HASH_LOCK = threading.Lock()


def hash_triton_installation() -> None:
    """compile_worker.hash_triton_installation, by one thread at a time: the first caller
    computes it (about a second), the others wait for it instead of computing it too."""
    with _TRITON_HASH_LOCK:
        compile_worker.hash_triton_installation()


def compile_config(jit_fn, job: CompileJob, before_compiling=None):
    """A triton CompiledKernel (not yet loaded on a device). A compile done before, in any
    process, is read from Triton's cache through our index (runtime/triton_binaries.py), without
    `triton.compile`; otherwise `before_compiling(job)` runs first (a worker process's compile)."""
    from triton.backends.compiler import GPUTarget

    target = GPUTarget(*job.target)
    source = build_source(jit_fn, job, target)
    query = _index_lookup(source, job, target)
    known = triton_binaries.load(query) if query is not None else None
    if known is not None:
        return known
    hash_triton_installation()
    if before_compiling is not None:
        before_compiling(job)
    compiled = compile_worker.compile_source(source, target, job.options())
    if query is not None:
        triton_binaries.store(query, compiled)
    return compiled


_INDEX_UNAVAILABLE_SAID: list = []  # the index failing on this Triton is said once, at info level


def _index_lookup(source, job: CompileJob, target) -> triton_binaries.Lookup | None:
    """This compile's Triton-binary index lookup; None when the index cannot be used."""
    try:
        return triton_binaries.lookup(source, job.options(), target)
    except Exception as err:  # noqa: BLE001  (the index is a shortcut; triton.compile is the way)
        if not _INDEX_UNAVAILABLE_SAID:
            _INDEX_UNAVAILABLE_SAID.append(True)
            log.info("tritonize: the Triton-binary index is unavailable with this Triton (%s: %s); "
                     "every kernel goes through triton.compile", type(err).__name__, err)
        return None


# ----------------------------------------------------------------------------- the pool


class _Deferred:
    """A result computed by the first caller of result() (serial mode)."""

    def __init__(self, compute):
        self._compute = compute
        self._lock = threading.Lock()
        self._done = False
        self._value = self._error = None

    def result(self):
        with self._lock:
            if not self._done:
                try:
                    self._value = self._compute()
                except Exception as err:  # kept and re-raised to every caller
                    self._error = err
                self._done = True
        if self._error is not None:
            raise self._error
        return self._value


def _prepare_quietly(prepare, compiled) -> None:
    try:
        prepare(compiled)
    except Exception as err:  # noqa: BLE001  (repeated, and reported, where the kernel loads)
        log.debug("preparing %s failed: %s", compiled, err)


PROCESSES_FROM_CPUS = 8  # the default pool is "processes" on machines with this many CPUs


def pool_settings() -> tuple[str, int]:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    default = "processes" if cpus >= PROCESSES_FROM_CPUS else "threads"
    how = (os.environ.get("TRITONIZE_COMPILE_POOL") or default).strip().lower()
    if how not in ("threads", "processes", "serial"):
        raise ValueError(f"TRITONIZE_COMPILE_POOL={how!r}: expected threads, processes or serial")
    workers = int(os.environ.get("TRITONIZE_COMPILE_WORKERS") or min(16, cpus))
    return how, max(1, workers)


class CompilePool:
    def __init__(self, how: str = "threads", workers: int = 4):
        self.how, self.workers = how, workers
        self._executor = None
        self._processes: queue.SimpleQueue | None = None  # idle WorkerProcesses ("processes")
        self._all_processes: list = []
        self._owner = os.getpid()  # a forked child starts its own threads and workers
        self._lock = threading.Lock()
        self.submitted = 0
        self.finished = 0
        # (start, end, kernel name) of each compile on time.perf_counter's clock, for reports.
        self.spans: list[tuple[float, float, str]] = []

    def _pool(self):
        with self._lock:
            if self._owner != os.getpid():
                self._executor, self._processes, self._all_processes = None, None, []
                self._owner = os.getpid()
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(
                    self.workers, thread_name_prefix="tritonize-compile")
            return self._executor

    def _idle_workers(self) -> queue.SimpleQueue | None:
        """The queue of idle worker processes ("processes"), starting them on first use (warm_up
        or a compile that missed the Triton-binary index). None once shut down."""
        with self._lock:
            if self._processes is None and self._executor is not None and self.how == "processes":
                from .compile_processes import WorkerProcess

                self._processes = queue.SimpleQueue()
                self._all_processes = [WorkerProcess() for _ in range(self.workers)]
                for worker in self._all_processes:
                    worker.start()
                    self._processes.put(worker)
            return self._processes

    def warm_up(self, wait: bool = False) -> None:
        """Start the pool now, worker processes included; with `wait`, until every worker
        process has imported Triton."""
        if self.how == "serial":
            return
        self._pool()
        self._idle_workers()
        if wait and self.how == "processes":
            idle = [self._processes.get() for _ in self._all_processes]  # no compile shares them
            try:
                for worker in idle:
                    worker.ping()
            finally:
                for worker in idle:
                    self._processes.put(worker)

    def _in_a_process(self, job: CompileJob) -> None:
        """Have an idle, ready worker process compile `job` into Triton's cache (and wait for
        it); nothing when there is none (compile_processes.py says why)."""
        processes = self._idle_workers()
        try:
            worker = processes.get_nowait() if processes is not None else None
        except queue.Empty:
            worker = None
        if worker is None:
            return
        try:
            problem = worker.compile(job) if worker.ready() else None
        except Exception as err:  # noqa: BLE001  (a worker only saves time: never fail the compile)
            problem = f"{type(err).__name__}: {err}"
        finally:
            processes.put(worker)
        if problem is not None:
            log.debug("worker process: %s: %s", job.kernel_name, problem)

    def submit(self, jit_fn, job: CompileJob, prepare=None):
        """A handle whose result() is the CompiledKernel (or raises the compile error).
        `prepare(compiled)`, if given, runs after a successful compile in the same worker: host
        work the first launch would otherwise do on the caller's thread (its errors are ignored
        there; the caller meets them again when it does that work itself)."""
        with self._lock:
            self.submitted += 1
        # Triton computes a function's hash lazily, with a placeholder while it does: compute it
        # here, once, so that concurrent compiles of this function never see the placeholder.
        getattr(jit_fn, "cache_key", None)

        def compile_here():
            start = time.perf_counter()
            try:
                # after a worker process's compile, triton.compile here is a cache hit
                compiled = compile_config(jit_fn, job, self._in_a_process if self.how == "processes" else None)
                if prepare is not None:
                    _prepare_quietly(prepare, compiled)
                return compiled
            finally:
                with self._lock:
                    self.finished += 1
                    self.spans.append((start, time.perf_counter(), job.kernel_name))

        if self.how == "serial":
            return _Deferred(compile_here)
        return self._pool().submit(compile_here)

    def compile_stats(self, since: float = 0.0, slowest: int = 5) -> dict:
        """Compiles that started at or after `since` (time.perf_counter): how many, their summed
        seconds, the seconds from `since` to the last one's end, and the `slowest` ones as
        [kernel name, started at (s after since), seconds]."""
        with self._lock:
            spans = [s for s in self.spans if s[0] >= since]
        if not spans:
            return {"compiles": 0, "compile_s": 0.0, "last_end_s": 0.0, "slowest": []}
        longest = sorted(spans, key=lambda s: s[0] - s[1])[:slowest]
        return {"compiles": len(spans), "compile_s": sum(end - start for start, end, _ in spans),
                "last_end_s": max(end for _, end, _ in spans) - since,
                "slowest": [[name, round(start - since, 3), round(end - start, 3)] for start, end, name in longest]}

    def shutdown(self) -> None:
        with self._lock:
            executor, self._executor = self._executor, None
            processes, self._all_processes, self._processes = self._all_processes, [], None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
        for worker in processes:
            worker.stop()


_SHARED: dict = {}
_SHARED_LOCK = threading.Lock()


def _after_fork_in_child() -> None:
    """A forked child has only the forking thread: locks another thread held at the fork would
    never be released there, and the parent's compile threads and workers are not its own. New
    locks, and each shared pool starts afresh when first used (CompilePool._pool)."""
    global _TRITON_HASH_LOCK, _SHARED_LOCK
    _TRITON_HASH_LOCK, _SHARED_LOCK = threading.Lock(), threading.Lock()
    for pool in _SHARED.values():
        pool._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def shared_pool() -> CompilePool:
    """The process's pool, created on first use with the environment's settings."""
    settings = pool_settings()
    with _SHARED_LOCK:
        pool = _SHARED.get(settings)
        if pool is None:
            pool = _SHARED[settings] = CompilePool(*settings)
        return pool
