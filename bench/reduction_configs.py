"""Launch-config sweep for generated reduction kernels (GPU): which XBLOCK / RBLOCK / num_warps
reaches the most bandwidth on the kernel suite's reduction cases. Feeds runtime/heuristics.py.

    PYTHONPATH=src python3 bench/reduction_configs.py [--cases softmax,sum_last,...]

For each case the default compile is timed first (default mode: the heuristic's candidates,
timed); then the case's big reduction kernel (the one over >= 1M elements) is forced to each
candidate config (the rest keep the heuristics) and the whole compiled function is timed again.
Prints the best few configs per case. bench/autotune_check.py compares default mode with
max-autotune instead.
"""
from __future__ import annotations

import argparse
import itertools
import os

import torch
import triton
import triton.testing

import tritonize  # noqa: F401  (registers the backend)
from tritonize.runtime import heuristics, launcher, loader

from kernels import CASES  # bench/kernels.py

REDUCTION_KINDS = ("persistent_reduction", "reduction")
DEFAULT_CASES = "softmax,attn_softmax,sum_last,sum_first,var_mean,layer_norm,cross_entropy"


def candidates(kind: str, hint: str, rnumel: int):
    if kind == "persistent_reduction":
        rblock = triton.next_power_of_2(rnumel)
        for xblock, warps in itertools.product([1, 2, 4, 8, 16, 32], [2, 4, 8, 16]):
            if 256 <= xblock * rblock <= 16384:
                yield {"XBLOCK": xblock}, warps
        return
    shapes = ([(32, 64), (64, 64), (64, 128), (128, 32), (128, 64), (64, 256)] if hint == "outer"
              else [(1, 512), (1, 1024), (1, 2048), (1, 4096), (2, 1024), (2, 2048), (4, 512), (8, 256)])
    for (xblock, rblock), warps in itertools.product(shapes, [4, 8, 16]):
        yield {"XBLOCK": xblock, "RBLOCK": rblock}, warps


def forced_candidates(original, seen: list, forced):
    """runtime/launcher.py's candidate list, with the big reduction kernel forced to one config."""
    def pick(shape, mode, on_gpu, device=None):
        if shape.kind in REDUCTION_KINDS and shape.xnumel * shape.rnumel >= 1 << 20:
            seen.append((shape.kind, shape.hint or "", shape.xnumel, shape.rnumel))
            if forced is not None:
                blocks, warps = forced
                return [heuristics.make_config(shape, blocks, warps)]
        return original(shape, mode, on_gpu, device)
    return pick


def time_case(fn, args, forced, seen):
    original = launcher.candidates
    launcher.candidates = forced_candidates(original, seen, forced)
    try:
        loader._MODULES.clear()  # the wrapper re-imports and picks configs again
        torch._dynamo.reset()
        compiled = torch.compile(fn, backend="tritonize")
        compiled(*args)
        return triton.testing.do_bench(lambda: compiled(*args), return_mode="median")
    except Exception as err:  # a config that does not compile (too many registers...) is a row
        print(f"    {forced}: {type(err).__name__}: {str(err).splitlines()[0][:100]}")
        return None
    finally:
        launcher.candidates = original


def sweep(case, copy_gbs):
    args = case.make_inputs("cuda", torch.bfloat16, False)
    nbytes = sum(a.numel() * a.element_size() for a in args if isinstance(a, torch.Tensor))
    out = case.fn(*args)
    nbytes += sum(o.numel() * o.element_size() for o in (out if isinstance(out, tuple) else (out,)))
    seen: list = []
    base = time_case(case.fn, args, None, seen)
    if not seen:
        print(f"{case.name}: no large reduction kernel")
        return
    kind, hint, xnumel, rnumel = seen[0]
    default = heuristics.pick_config(kind, xnumel, 1, rnumel, True, hint)
    print(f"{case.name}: {kind} ({hint}) x={xnumel} r={rnumel}; default {default.blocks} "
          f"w{default.num_warps}: {base * 1e3:.1f} us {100 * nbytes / base / 1e6 / copy_gbs:.1f}%")
    rows = []
    for forced in candidates(kind, hint, rnumel):
        ms = time_case(case.fn, args, forced, [])
        if ms is not None:
            rows.append((ms, forced))
    rows.sort(key=lambda r: r[0])
    for ms, (blocks, warps) in rows[:5]:
        print(f"    {str(blocks):32s} w{warps:<3d} {ms * 1e3:8.1f} us {100 * nbytes / ms / 1e6 / copy_gbs:5.1f}%")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", default=DEFAULT_CASES)
    parser.add_argument("--looped", action="store_true",
                        help="generate looped kernels even where the row fits in registers")
    options = parser.parse_args()
    names = options.cases.split(",")
    if options.looped:
        from tritonize.codegen import reduction_kernel
        reduction_kernel.MAX_PERSISTENT_RBLOCK = 1
    os.environ["TRITONIZE_CACHE"] = "0"  # every forced config compiled and timed afresh
    src = torch.empty(2**29, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    copy_gbs = 2 * src.numel() / triton.testing.do_bench(lambda: dst.copy_(src), return_mode="median") / 1e6
    del src, dst
    print(f"copy bandwidth {copy_gbs:.0f} GB/s")
    for case in CASES:
        if case.name in names:
            sweep(case, copy_gbs)


if __name__ == "__main__":
    main()
