"""Parallel compilation: serial vs a thread pool vs a process pool, on the same kernels.

    PYTHONPATH=src python3 bench/compile_pool.py                    # 24 kernels, every pool, CPUs workers
    PYTHONPATH=src python3 bench/compile_pool.py --kernels 8 --workers 2

Compiles distinct generated-style kernels (a fused pointwise chain and a row reduction, with a
constant that differs per kernel so nothing is shared) for the current GPU, or for sm_90 when
there is none: Triton compiles to a cubin without a GPU, so this measures the same work on any
machine. Each pool starts from an empty Triton cache. "start s" is the time to start the pool's
workers (processes import Triton); "total s" includes it. runtime/triton_compile.py uses the
pool named by TRITONIZE_COMPILE_POOL (threads by default); this script says which is faster here.
"""
import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

KERNEL = '''
import triton
import triton.language as tl
from triton.language.extra import libdevice
from tritonize.runtime import triton_helpers as helpers


@triton.jit
def bench_pool_kernel_{index}(in_ptr0, in_ptr1, out_ptr0, out_ptr1, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    rindex = tl.arange(0, RBLOCK)[None, :]
    tmp0 = tl.load(in_ptr0 + (rindex + 1024 * xindex)).to(tl.float32)
    tmp1 = tl.load(in_ptr1 + rindex).to(tl.float32)
    tmp2 = tmp0 * {scale} + tmp1
    tmp3 = libdevice.tanh(tmp2) * 0.5 + helpers.maximum(tmp2, tmp0)
    tmp4 = tl.sum(tmp3, 1)[:, None]
    tmp5 = tl.exp(tmp3 - tl.max(tmp3, 1)[:, None])
    tl.store(out_ptr0 + (rindex + 1024 * xindex), (tmp5 / tl.sum(tmp5, 1)[:, None]).to(tl.bfloat16))
    tl.store(out_ptr1 + xindex, tmp4)
'''


def make_jobs(count, target):
    import torch

    from tritonize.runtime.loader import load_source_module
    from tritonize.runtime.triton_compile import ArgSpec, CompileJob

    spec = ArgSpec.assumed([torch.bfloat16, torch.bfloat16, torch.bfloat16, torch.float32], 0)
    jobs = []
    for index in range(count):
        module = load_source_module(KERNEL.format(index=index, scale=1.0 + index / 1000), "kernel", interpret=False)
        name = f"bench_pool_kernel_{index}"
        blocks = (("RBLOCK", 1024), ("XBLOCK", 1 + index % 2))
        jobs.append((getattr(module, name), CompileJob(module.__file__, name, spec, blocks, 8, 1, target)))
    return jobs


def run_pool(how, workers, jobs):
    from tritonize.runtime.triton_compile import CompilePool

    cache = tempfile.mkdtemp(prefix="tritonize-bench-triton-")
    os.environ["TRITON_CACHE_DIR"] = cache
    try:
        start = time.perf_counter()
        pool = CompilePool(how, workers)
        pool.warm_up(wait=True)  # processes: until every worker has imported Triton
        started = time.perf_counter() - start
        handles = [pool.submit(fn, job) for fn, job in jobs]
        errors = 0
        for handle in handles:
            try:
                handle.result()
            except Exception as exc:  # a row says so; the run goes on
                errors += 1
                print(f"  {how}: {common.describe_error(exc)}", flush=True)
        total = time.perf_counter() - start
        pool.shutdown()
        return started, total, errors
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kernels", type=int, default=24)
    parser.add_argument("--workers", type=int, default=min(16, os.cpu_count() or 1))
    parser.add_argument("--pools", default="serial,threads,processes")
    args = parser.parse_args(argv)
    common.import_tritonize()
    from tritonize.runtime.triton_compile import current_target

    try:
        target = current_target()
    except Exception:  # no GPU: compile for an H100 anyway
        target = ("cuda", 90, 32)
    print(f"target {target}, {args.kernels} kernels, {args.workers} workers, {os.cpu_count()} CPUs", flush=True)
    rows, serial = [], None
    for how in common.parse_list(args.pools, ["serial", "threads", "processes"], "pools"):
        jobs = make_jobs(args.kernels, target)  # fresh JIT objects: nothing memoized between pools
        started, total, errors = run_pool(how, args.workers, jobs)
        serial = total if how == "serial" else serial
        speedup = serial / total if serial else None
        rows.append([how, 1 if how == "serial" else args.workers, args.kernels, started, total,
                     total / args.kernels * 1e3, speedup, errors])
        print("  " + "  ".join(common.format_cell(c, 2) for c in rows[-1]), flush=True)
    print()
    print(common.format_table(["pool", "workers", "kernels", "start s", "total s", "ms/kernel",
                               "speedup", "errors"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
