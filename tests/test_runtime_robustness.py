"""Robustness of the backend and the compile workers: dynamic shapes stay dynamic through the
inference runner's convention check; a worker's pipes above descriptor 1024 and stray output on a
worker's stdout do not fail or hang a compile."""
import os
import sys
import threading

import pytest
import torch

from tritonize.backend import make_backend
from tritonize.runtime.heuristics import KernelShape, candidates
from tritonize.runtime.loader import load_source_module
from tritonize.runtime.triton_compile import ArgSpec, CompileJob, CompilePool

TARGET = ("cuda", 90, 32)
SOURCE = '''
import triton
import triton.language as tl
from tritonize.runtime import triton_helpers as helpers
{prelude}

@triton.jit
def review_kernel(in_ptr0, out_ptr0, XBLOCK: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    tl.store(out_ptr0 + xindex, helpers.maximum(tl.load(in_ptr0 + xindex), 0.0))
'''


@pytest.fixture
def triton_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    return tmp_path / "triton"


def job_for(prelude=""):
    module = load_source_module(SOURCE.format(prelude=prelude), "kernel", interpret=False)
    config = candidates(KernelShape("pointwise", 4096), "default", True)[0]
    spec = ArgSpec(0, (("fp32", True), ("fp32", True)))
    return module, CompileJob(module.__file__, "review_kernel", spec, tuple(sorted(config.blocks.items())),
                              config.num_warps, config.num_stages, TARGET)


# Comparing a symbolic size with a real one would add a guard (Eq(s0, 8)) to the shape env and
# specialize the graph.
def _f(x):
    return (x.sin() * 2).sum(0)


def test_mark_dynamic_is_not_specialized_by_the_backend(monkeypatch):
    monkeypatch.setenv("TRITONIZE_CACHE", "0")
    torch._dynamo.reset()
    x = torch.randn(8, 4)
    torch._dynamo.mark_dynamic(x, 0)
    compiled = torch.compile(_f, backend=make_backend())
    torch.testing.assert_close(compiled(x), _f(x))


def test_dynamic_true_compiles_one_graph_for_all_sizes(monkeypatch):
    monkeypatch.setenv("TRITONIZE_CACHE", "0")
    torch._dynamo.reset()
    recorder = []
    compiled = torch.compile(_f, backend=make_backend(recorder=recorder), dynamic=True)
    for n in (8, 16, 32):
        x = torch.randn(n, 4)
        torch.testing.assert_close(compiled(x), _f(x))
    assert recorder.count("graph") == 1


# select.select refuses descriptors >= 1024; a worker's problem must never fail the compile.
def test_a_worker_pipe_above_fd_1024_does_not_fail_the_compile(triton_cache):
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1200:
        pytest.skip("needs RLIMIT_NOFILE >= 1200")
    module, job = job_for()
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    pool = CompilePool("processes", workers=1)
    try:
        pool.warm_up()  # worker pipes are now above 1024
        assert pool._all_processes[0].process.stdout.fileno() >= 1024
        pool.submit(module.review_kernel, job).result()
    finally:
        pool.shutdown()
        for fd in held:
            os.close(fd)


# Output on the worker's fd 1 without a newline would glue itself to a REPLY line.
def test_stdout_chatter_in_the_worker_does_not_hang_the_request(triton_cache):
    from tritonize.runtime.compile_processes import WorkerProcess

    module, job = job_for(prelude='import os\nos.write(1, b"note: ")')
    worker = WorkerProcess()
    result = []
    thread = threading.Thread(target=lambda: result.append(worker.compile(job)), daemon=True)
    try:
        assert worker.ping() is None
        thread.start()
        thread.join(60)
        assert not thread.is_alive(), "request() is stuck waiting for a REPLY line"
        assert result == [None]
    finally:
        if worker.process is not None:
            worker.process.kill()
        thread.join(5)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_while_a_thread_holds_the_runtime_locks_can_compile():
    """A DataLoader worker forked while the GPU runtime's background start holds a lock must not
    deadlock on it."""
    from tritonize.runtime import launcher, triton_compile

    pool = triton_compile.shared_pool()
    environment_lock = launcher.CudaEnvironment._shared_lock
    held, release = threading.Event(), threading.Event()

    def hold():
        with triton_compile._TRITON_HASH_LOCK, pool._lock, environment_lock:
            held.set()
            release.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    held.wait(10)
    try:
        pid = os.fork()
        if pid == 0:  # the child: every lock must be free
            ok = all(lock.acquire(timeout=2) for lock in (
                triton_compile._TRITON_HASH_LOCK, triton_compile.shared_pool()._lock,
                launcher.CudaEnvironment._shared_lock))
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
    finally:
        release.set()
        thread.join(10)
    assert os.waitstatus_to_exitcode(status) == 0
