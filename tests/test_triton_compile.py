"""Compiling generated kernels for an NVIDIA target without a GPU: Triton compiles to PTX and a
cubin on any machine, so the compile path, its specialization and the pools run on the CPU."""
import json
import os
import pathlib
import subprocess
import sys
import threading
import time

import pytest
import torch

from tritonize.runtime.heuristics import KernelShape, candidates
from tritonize.runtime.loader import load_source_module
from tritonize.runtime.triton_compile import ArgSpec, CompileJob, CompilePool, compile_config, pointer_type

SOURCE = '''
import triton
import triton.language as tl
from tritonize.runtime import triton_helpers as helpers


@triton.jit
def compile_test_kernel(in_ptr0, in_ptr1, out_ptr0, XBLOCK: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    tmp0 = tl.load(in_ptr0 + xindex)
    tmp1 = tl.load(in_ptr1 + xindex).to(tl.float32)
    tl.store(out_ptr0 + xindex, helpers.maximum(tmp0, tmp1))
'''
TARGET = ("cuda", 90, 32)


@pytest.fixture
def triton_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    return tmp_path / "triton"


def jobs_for(module, configs, spec):
    return [CompileJob(module.__file__, "compile_test_kernel", spec, tuple(sorted(c.blocks.items())),
                       c.num_warps, c.num_stages, TARGET) for c in configs]


def load():
    return load_source_module(SOURCE, "kernel", interpret=False)


def test_specialization_reaches_the_compiled_kernel(triton_cache):
    module = load()
    shape = KernelShape("pointwise", 1 << 20)
    (config,) = candidates(shape, "default", on_gpu=True)
    aligned = ArgSpec(0, (("fp32", True), ("bf16", True), ("fp32", True)))
    unaligned = ArgSpec(0, (("fp32", True), ("bf16", False), ("fp32", True)))
    (job_a,) = jobs_for(module, [config], aligned)
    (job_u,) = jobs_for(module, [config], unaligned)
    kernel_a = compile_config(module.compile_test_kernel, job_a)
    kernel_u = compile_config(module.compile_test_kernel, job_u)
    assert kernel_a.metadata.num_warps == config.num_warps and kernel_a.hash != kernel_u.hash
    assert kernel_a.asm["ttir"].count("tt.divisibility = 16") == 3
    assert kernel_u.asm["ttir"].count("tt.divisibility = 16") == 2
    assert "bf16" in kernel_a.asm["ttir"] and ".target sm_90" in kernel_a.asm["ptx"]
    assert len(kernel_a.asm["cubin"]) > 0


@pytest.mark.parametrize("how", ["threads", "serial", "processes"])
def test_pools_compile_every_config(triton_cache, how):
    module = load()
    shape = KernelShape("pointwise", 1 << 20)
    configs = candidates(shape, "max-autotune", on_gpu=True)[:2 if how != "processes" else 1]
    spec = ArgSpec.assumed([torch.float32, torch.bfloat16, torch.float32], 0)
    pool = CompilePool(how, workers=2)
    try:
        pool.warm_up(wait=True)  # processes: the jobs go to the workers (none is still starting)
        handles = [pool.submit(module.compile_test_kernel, job) for job in jobs_for(module, configs, spec)]
        kernels = [h.result() for h in handles]
    finally:
        pool.shutdown()
    assert [k.metadata.num_warps for k in kernels] == [c.num_warps for c in configs]
    assert pool.finished == pool.submitted == len(configs)
    # A worker process and this one agree on Triton's cache key: one cache entry per config.
    entries = [d for d in os.listdir(triton_cache) if not d.startswith(".")]
    assert len([d for d in entries if any(f.endswith(".cubin") for f in os.listdir(triton_cache / d))]) == len(configs)


def test_compile_errors_reach_the_caller(triton_cache):
    module = load()
    spec = ArgSpec(0, (("fp32", True),))  # two pointer arguments short
    (job,) = jobs_for(module, candidates(KernelShape("pointwise", 1024), "default", True), spec)
    handle = CompilePool("serial").submit(module.compile_test_kernel, job)
    with pytest.raises(TypeError, match="no argument for parameter in_ptr1"):
        handle.result()


def test_pointer_types():
    assert [pointer_type(d) for d in (torch.float32, torch.bfloat16, torch.bool, torch.int64, torch.uint8)] == \
        ["fp32", "bf16", "i1", "i64", "u8"]
    assert pointer_type(torch.complex64) is None
    x = torch.zeros(10)
    assert ArgSpec.of([x, x[1:]], 0).args == (("fp32", True), ("fp32", False))
    assert ArgSpec.of([x, 3.0], 0).args == (("fp32", True), ("#fp64", False))  # a host scalar's value
    assert ArgSpec.of([x, True], 0) is None  # neither a tensor nor a number the kernels take
    assert ArgSpec.of([x, 3 + 1j], 0) is None


MIXED = """
import torch
from tritonize.runtime.loader import load_source_module
from tritonize.runtime.triton_compile import ArgSpec, CompileJob, compile_config
import test_triton_compile as t
load_source_module(t.SOURCE, "kernel", interpret=True)  # a CPU kernel first: imports the helpers
module = load_source_module(t.SOURCE, "kernel", interpret=False)
spec = ArgSpec.assumed([torch.float32, torch.bfloat16, torch.float32], 0)
job = CompileJob(module.__file__, "compile_test_kernel", spec, (("XBLOCK", 256),), 4, 1, t.TARGET)
print("compiled", compile_config(module.compile_test_kernel, job).metadata.num_warps)
"""


def test_cpu_and_gpu_kernels_in_one_process(triton_cache):
    """The helpers module GPU kernels call must not be the interpreted one a CPU kernel loaded."""
    root = pathlib.Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=f"{root / 'src'}{os.pathsep}{root / 'tests'}")
    result = subprocess.run([sys.executable, "-c", MIXED], capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0 and "compiled 4" in result.stdout, result.stderr[-3000:]


def test_the_function_hash_is_computed_before_compiles_run(triton_cache):
    """Triton hashes a function lazily behind a placeholder; concurrent compiles must not see it."""
    source = SOURCE.replace("compile_test_kernel", "hash_test_kernel")
    module = load_source_module(source, "kernel", interpret=False)
    fn = module.hash_test_kernel
    assert fn.hash is None
    spec = ArgSpec.assumed([torch.float32, torch.bfloat16, torch.float32], 0)
    job = CompileJob(module.__file__, "hash_test_kernel", spec, (("XBLOCK", 256),), 4, 1, TARGET)
    CompilePool("serial").submit(fn, job)  # nothing compiled yet (serial compiles on result())
    assert len(fn.hash) == 64 and not fn.hash.startswith("recursion")


@pytest.mark.parametrize("how", ["threads", "serial"])
def test_prepare_runs_in_the_worker_after_the_compile_and_its_errors_stay_there(triton_cache, how):
    """GpuKernel has each worker build the kernel's host launcher; a failure there is not the
    compile's (the launching thread meets it again when it loads the kernel)."""
    module = load()
    spec = ArgSpec.assumed([torch.float32, torch.bfloat16, torch.float32], 0)
    (job,) = jobs_for(module, candidates(KernelShape("pointwise", 1024), "default", True), spec)
    prepared, threads = [], []

    def prepare(compiled):
        prepared.append(compiled.metadata.num_warps)
        threads.append(threading.current_thread().name)

    def broken(compiled):
        raise RuntimeError("no C compiler")

    pool = CompilePool(how, workers=2)
    try:
        first = pool.submit(module.compile_test_kernel, job, prepare=prepare).result()
        second = pool.submit(module.compile_test_kernel, job, prepare=broken).result()
    finally:
        pool.shutdown()
    assert prepared == [first.metadata.num_warps] and second.metadata.num_warps == first.metadata.num_warps
    assert threads[0].startswith("tritonize-compile") == (how == "threads")
    begin = min(start for start, _, _ in pool.spans)
    stats = pool.compile_stats(since=begin, slowest=1)
    assert stats["compiles"] == 2 and 0 < stats["compile_s"] and stats["last_end_s"] >= stats["compile_s"] / 2
    assert [name for name, _, _ in stats["slowest"]] == ["compile_test_kernel"]
    assert pool.compile_stats(since=time.perf_counter())["compiles"] == 0


def test_a_worker_process_compiles_into_the_cache_and_reports_errors(triton_cache):
    from tritonize.runtime.compile_processes import WorkerProcess

    module = load()
    spec = ArgSpec.assumed([torch.float32, torch.bfloat16, torch.float32], 0)
    (job,) = jobs_for(module, candidates(KernelShape("pointwise", 4096), "default", True), spec)
    worker = WorkerProcess()
    try:
        assert worker.ping() is None
        assert worker.compile(job) is None
        assert cubin_entries(triton_cache) == 1
        short = CompileJob(job.module_path, job.kernel_name, ArgSpec(0, (("fp32", True),)), job.blocks,
                           job.num_warps, job.num_stages, job.target)
        assert "no argument for parameter in_ptr1" in worker.compile(short)
    finally:
        worker.stop()
    # this process's compile of the same job is the worker's cache entry (no second one)
    assert compile_config(module.compile_test_kernel, job).metadata.num_warps == job.num_warps
    assert cubin_entries(triton_cache) == 1


def cubin_entries(cache) -> int:
    return len([d for d in os.listdir(cache) if any(f.endswith(".cubin") for f in os.listdir(cache / d))])


WORKER_IMPORTS = """
import json, sys
sys.argv = ["compile_worker.py"]
import runpy
sys.stdin = open({message!r})
try:
    runpy.run_path({script!r}, run_name="__main__")
finally:
    print("torch imported:", "torch" in sys.modules, "tritonize.backend" in sys.modules)
"""


def test_the_worker_imports_neither_torch_nor_the_tritonize_package(triton_cache, tmp_path):
    from tritonize.runtime import compile_worker
    from tritonize.runtime.compile_processes import job_message

    module = load()
    spec = ArgSpec.assumed([torch.float32, torch.bfloat16, torch.float32], 0)
    (job,) = jobs_for(module, candidates(KernelShape("pointwise", 8192), "default", True), spec)
    messages = tmp_path / "messages.jsonl"
    messages.write_text(json.dumps(job_message(job)) + "\n")
    code = WORKER_IMPORTS.format(message=str(messages), script=compile_worker.__file__)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert 'REPLY {"error": null}' in result.stdout, result.stdout + result.stderr[-3000:]
    assert "torch imported: False False" in result.stdout + result.stderr  # the worker sends stray stdout to stderr


def test_a_job_that_finds_no_ready_worker_compiles_in_its_thread(triton_cache):
    class Starting:
        asked = 0

        def ready(self):
            return False

        def compile(self, job):
            Starting.asked += 1

    module = load()
    spec = ArgSpec.assumed([torch.float32, torch.bfloat16, torch.float32], 0)
    (job,) = jobs_for(module, candidates(KernelShape("pointwise", 2048), "default", True), spec)
    pool = CompilePool("processes", workers=1)
    pool.warm_up()
    for worker in pool._all_processes:
        worker.stop()
    while not pool._processes.empty():
        pool._processes.get()
    pool._processes.put(Starting())
    try:
        assert pool.submit(module.compile_test_kernel, job).result().metadata.num_warps == job.num_warps
    finally:
        pool.shutdown()
    assert Starting.asked == 0 and cubin_entries(triton_cache) == 1


def test_triton_hashes_its_installation_on_one_thread_at_a_time(monkeypatch):
    from tritonize.runtime import compile_worker, triton_compile

    inside, most = [0], [0]

    def slow_hash():
        inside[0] += 1
        most[0] = max(most[0], inside[0])
        time.sleep(0.05)
        inside[0] -= 1

    monkeypatch.setattr(compile_worker, "hash_triton_installation", slow_hash)
    threads = [threading.Thread(target=triton_compile.hash_triton_installation) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most[0] == 1
