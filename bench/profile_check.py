"""tritonize.profile's bandwidth against the kernel suite's, case by case (issue 24's check: within 5%).

    PYTHONPATH=src python3 bench/profile_check.py [--cases softmax,sum_last] [--device cuda] [--small]

For each case of bench/kernels.py: the suite's figure (the compiled case timed with do_bench; bytes:
each input read once and each output written once) and the profile's (tritonize.profile of the case:
the bytes its rows count over the GPU time it measured for them, a run). On the CPU the profile has
no times: its column says so.
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import kernels  # noqa: E402


def check_case(case, device, dtype, small) -> list:
    import tritonize

    torch.manual_seed(0)
    inputs = case.make_inputs(device, dtype, small)
    nbytes = kernels.bytes_moved(inputs, case.fn(*inputs))
    common.reset_compiler_state()
    compiled = common.build_backend("tritonize", case.fn)
    compiled(*inputs)
    suite_gbs = nbytes / common.median_time_s(lambda: compiled(*inputs), device) / 1e9
    prof = tritonize.profile(case.fn, *inputs)
    if not prof.runs or not prof.kernel_s:
        return [case.name, suite_gbs, "n/a (not timed)", "", prof.bytes]
    counted = [r for r in prof.rows if r.kind != "other"]
    profile_gbs = sum(r.bytes for r in counted) / sum(r.time_s or 0.0 for r in counted) / 1e9
    return [case.name, suite_gbs, profile_gbs, profile_gbs / suite_gbs, prof.bytes]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(kernels.CASES_BY_NAME))
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--small", action="store_true")
    parser.add_argument("--dtype", default="bfloat16")
    args = parser.parse_args(argv)
    names = common.parse_list(args.cases, list(kernels.CASES_BY_NAME), "cases", strict=False)
    rows = [check_case(kernels.CASES_BY_NAME[n], args.device, getattr(torch, args.dtype), args.small) for n in names]
    headers = ["case", "suite GB/s", "profile GB/s", "profile / suite", "profile bytes"]
    print(common.format_table(headers, rows))
    ratios = [r[3] for r in rows if isinstance(r[3], float)]
    if ratios:
        print(f"within 5%: {sum(abs(x - 1) <= 0.05 for x in ratios)} of {len(ratios)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
