"""tritonize.profile's bandwidth against the kernel suite's, case by case (issue 24's check: within 5%).

    PYTHONPATH=src python3 bench/profile_check.py [--cases softmax,sum_last] [--device cuda] [--small]

For each case of bench/kernels.py, one byte count (the suite's: each input read once and each output
written once) over two times: the suite's (the compiled case timed with do_bench, L2 flushed before
each call) and the profile's (tritonize.profile of the case: the GPU time of all its rows a run, each
run after an L2 flush). do_bench's events add a fixed latency to every call (about 3 us on an
H100), measured here on a 32 KB case and taken off the suite's time in a second ratio. The last
column is the profile's own byte count over the suite's: 1.0 for a
case of one kernel; a case of several kernels also counts what they pass to one another. On the
CPU the profile has no times: its column says so.
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import kernels  # noqa: E402


def check_case(case, device, dtype, small, latency_s) -> list:
    suite_s, profile_s, nbytes, prof = _two_times(case.fn, case.make_inputs(device, dtype, small))
    rows, byte_ratio = len(prof.rows), prof.bytes / nbytes
    if profile_s is None:
        return [case.name, nbytes / suite_s / 1e9, "n/a (not timed)", "", "", "", rows, byte_ratio]
    suite_gbs, profile_gbs = nbytes / suite_s / 1e9, nbytes / profile_s / 1e9
    net = profile_gbs / (nbytes / (suite_s - latency_s) / 1e9) if suite_s > 2 * latency_s else "n/a (near the latency)"
    return [case.name, suite_gbs, profile_gbs, profile_gbs / suite_gbs, (suite_s - profile_s) * 1e6,
            net, rows, byte_ratio]


def _two_times(fn, inputs) -> tuple:
    """(the suite's seconds a call, the profile's GPU seconds a run or None on the CPU, the suite's
    bytes, the profile)."""
    import tritonize

    torch.manual_seed(0)
    nbytes = kernels.bytes_moved(inputs, fn(*inputs))
    common.reset_compiler_state()
    compiled = common.build_backend("tritonize", fn)
    compiled(*inputs)
    suite_s = common.median_time_s(lambda: compiled(*inputs), inputs[0].device)
    prof = tritonize.profile(fn, *inputs)
    return suite_s, (prof.kernel_s if prof.runs else None), nbytes, prof


def launch_latency_s(device) -> float:
    """The suite's time of a one-kernel case that moves 32 KB, less the profile's time of its
    kernel: what do_bench's events add to every call (the stream's steps from the start event to
    the kernel and from the kernel to the end event). 0 on the CPU."""
    suite_s, profile_s, _, _ = _two_times(lambda x: x + 1, [torch.randn(4096, device=device)])
    return 0.0 if profile_s is None else suite_s - profile_s


def _ratio(value):
    return f"{value:.3f}" if isinstance(value, float) else value


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(kernels.CASES_BY_NAME))
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--small", action="store_true")
    parser.add_argument("--dtype", default="bfloat16")
    args = parser.parse_args(argv)
    names = common.parse_list(args.cases, list(kernels.CASES_BY_NAME), "cases", strict=False)
    latency_s = launch_latency_s(args.device)
    rows = [check_case(kernels.CASES_BY_NAME[n], args.device, getattr(torch, args.dtype), args.small, latency_s)
            for n in names]
    headers = ["case", "suite GB/s", "profile GB/s", "profile / suite", "suite - profile us",
               "profile / suite less latency", "rows", "profile bytes / suite's"]
    print(common.format_table(headers, [[_ratio(c) if i in (3, 5) else c for i, c in enumerate(r)] for r in rows]))
    print(f"the suite's fixed latency a call (a 32 KB case, do_bench less the profile): {latency_s * 1e6:.2f} us")
    for column, label in ((3, "profile / suite"), (5, "profile / suite less latency")):
        ratios = [r[column] for r in rows if isinstance(r[column], float)]
        if ratios:
            print(f"{label} within 5%: {sum(abs(x - 1) <= 0.05 for x in ratios)} of {len(ratios)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
