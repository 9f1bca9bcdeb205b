"""Host overhead per kernel launch (GPU): tritonize's fast path vs Triton's kernel[grid] vs Inductor.

    PYTHONPATH=src python3 bench/launch_overhead.py              # about 1 minute on an H100
    PYTHONPATH=src python3 bench/launch_overhead.py --iters 500

Three measurements, each a row (a failure is a row saying so):
  launch     one tiny generated kernel (1000 elements) launched back to back, no synchronization in
             between: tritonize's generated launcher, `kernel[grid](...)` on the same Triton
             function, and Triton's CompiledKernel runner. Host microseconds per launch.
  chain100   a graph of 100 tiny kernels (each step slices one element off and does x * 0.5 + 0.25;
             every step is an output, so neither compiler can fuse steps; x * 0.5 + 0.25 so values
             settle instead of growing, and rounding differences do not compound): eager, Inductor and
             tritonize, whole calls back to back, the back ends taking turns over 5 rounds (the
             fastest round counts). us/call, and us/launch = us/call / launches
             (device activities per call, from torch.profiler; allocation and the wrapper's own
             work are included, as a user sees them).
  single     the same with one step: the cost of one call of a one-kernel graph.
"gpu us/call" is the device time of one call (CUDA events): when it is close to "us/call" the
row is bound by the GPU, not by the host, and us/launch is an upper bound on the host overhead.
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

HEADERS = ["case", "path", "launches", "us/call", "us/launch", "gpu us/call", "note"]
TINY = '''
import triton
import triton.language as tl


@triton.jit
def tiny_launch_kernel(in_ptr0, out_ptr0, XBLOCK: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    xmask = xindex < 1000
    tmp0 = tl.load(in_ptr0 + xindex, xmask, other=0)
    tl.store(out_ptr0 + xindex, tmp0 * 1.5 + 0.25, xmask)
'''


def host_us_per_call(fn, iters):
    """Microseconds per call, calls back to back, synchronized only at the ends."""
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / iters * 1e6


def gpu_us_per_call(fn):
    return common.time_iterations(fn, "cuda", warmup=3, iters=20) * 1e6


def row(case, path, fn, iters, launches=None, note="", us=None):
    try:
        if us is None or us == float("inf"):
            us = host_us_per_call(fn, iters)
        if launches is None:
            launches = common.count_device_kernels(fn, "cuda")
        gpu = gpu_us_per_call(fn)
        per_launch = us / launches if launches else None
        return [case, path, launches, us, per_launch, gpu, note]
    except Exception as exc:  # a failure is a row
        return [case, path, "-", "-", "-", "-", common.describe_error(exc)]


def kernel_rows(iters):
    from tritonize.runtime.launcher import load_kernel

    x = torch.randn(1000, device="cuda")
    out = torch.empty_like(x)
    kernel = load_kernel(TINY, "tiny_launch_kernel", kind="pointwise", xnumel=1000, device="cuda",
                         arg_dtypes=(torch.float32, torch.float32))
    kernel(x, out)
    torch.cuda.synchronize()
    ok = "ok" if torch.allclose(out, x * 1.5 + 0.25) else "MISMATCH"
    config = kernel.config
    rows = [row("launch", "tritonize fast path", lambda: kernel(x, out), iters, 1, f"{ok}; {config}")]
    jit_fn, grid = kernel.fn, config.grid
    rows.append(row("launch", "triton kernel[grid]", lambda: jit_fn[grid](
        x, out, XBLOCK=config.blocks["XBLOCK"], num_warps=config.num_warps), iters, 1))
    try:
        compiled = jit_fn.warmup(x, out, grid=grid, XBLOCK=config.blocks["XBLOCK"], num_warps=config.num_warps)
        runner = compiled[grid + (1,) * (3 - len(grid))]
        rows.append(row("launch", "triton CompiledKernel[grid]", lambda: runner(x, out, config.blocks["XBLOCK"]),
                        iters, 1))
    except Exception as exc:
        rows.append(["launch", "triton CompiledKernel[grid]", "-", "-", "-", "-", common.describe_error(exc)])
    return rows


def chain(steps):
    def fn(x):
        outs = []
        for _ in range(steps):
            x = x[1:] * 0.5 + 0.25
            outs.append(x)
        return outs
    return fn


def graph_rows(case, steps, backends, iters, rounds=5):
    """Every back end compiled first, then timed in `rounds` interleaved rounds (eager, Inductor,
    tritonize, eager, ...); a row keeps its fastest round. The shared host has slow spells that
    moved single measurements by ~30%; taking turns gives each back end the same spells."""
    rows, compiled = [], {}
    x = torch.randn(1000 + steps, device="cuda")
    fn = chain(steps)
    expected = fn(x)
    common.reset_compiler_state()
    for backend in backends:
        try:
            run = common.build_backend(backend, fn)  # a private copy each: no reset in between
            actual = run(x)
            ok = all(torch.allclose(a, e) for a, e in zip(actual, expected))
            compiled[backend] = (run, "ok" if ok else "MISMATCH")
        except Exception as exc:
            rows.append([case, backend, "-", "-", "-", "-", common.describe_error(exc)])
    best = {backend: float("inf") for backend in compiled}
    for _ in range(rounds):
        for backend, (run, _) in compiled.items():
            try:
                best[backend] = min(best[backend], host_us_per_call(lambda: run(x), iters))
            except Exception as exc:
                compiled[backend] = (run, common.describe_error(exc))
    for backend, (run, note) in compiled.items():
        rows.append(row(case, backend, lambda: run(x), iters, note=note, us=best[backend]))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iters", type=int, default=300, help="calls per measurement")
    parser.add_argument("--steps", type=int, default=100, help="kernels in the chain graph")
    parser.add_argument("--backends", default=",".join(common.BACKENDS))
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("launch_overhead.py measures GPU launches; CUDA is not available")
    common.import_tritonize()
    backends = common.parse_list(args.backends, common.BACKENDS, "back ends")
    print(common.environment_line("cuda"), flush=True)
    rows = []
    for part in (lambda: kernel_rows(args.iters * 10),
                 lambda: graph_rows(f"chain{args.steps}", args.steps, backends, args.iters),
                 lambda: graph_rows("single", 1, backends, args.iters * 10)):
        try:
            new = part()
        except Exception as exc:
            new = [["?", "?", "-", "-", "-", "-", common.describe_error(exc)]]
        for r in new:
            print("  " + "  ".join(common.format_cell(c) for c in r), flush=True)
        rows += new
    print()
    print(common.format_table(HEADERS, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
