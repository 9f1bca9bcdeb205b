"""Host cost of a kernel-suite case's call (GPU): how long the host takes to issue one call, per back end.

    PYTHONPATH=src python3 bench/host_cost.py --cases dwconv_bn_silu,conv_bn_relu_residual
    PYTHONPATH=src python3 bench/host_cost.py --cases dwconv_bn_silu --profile 25

Each case's calls are issued behind a sleeping kernel (torch.cuda._sleep) long enough that the GPU
runs none of them while the host issues them: the time to issue them is the host's alone (no
synchronization inside, fewer launches than the launch queue holds), at the suite's sizes. A dynamic compile's call pays more on the host than a static one
(Dynamo's symbolic guards, the wrapper's size arithmetic); when a case's GPU time is short, that
shows in the suite's timings (bench/kernels.py times each call with events after an L2 flush, so a
call whose host time exceeds the flush's leaves the GPU waiting). --profile N: cProfile of each
tritonize back end's calls, the N entries of largest own time.
"""
import argparse
import cProfile
import io
import os
import pstats
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from kernels import CASES_BY_NAME  # noqa: E402

HEADERS = ["case", "backend", "host us/call"]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default="dwconv_bn_silu,conv_bn_relu_residual")
    parser.add_argument("--backends", default="eager,dynamo,dynamo-dynamic,tritonize,tritonize-dynamic,"
                                                "inductor,inductor-dynamic",
                        help="bench/common.py's back ends, and dynamo / dynamo-dynamic: Dynamo's graph "
                             "run by its \"eager\" back end (Dynamo's own cost of a call, static and dynamic)")
    parser.add_argument("--iters", type=int, default=100, help="calls a timing (their launches must fit the queue)")
    parser.add_argument("--rounds", type=int, default=5, help="the fastest round counts")
    parser.add_argument("--profile", type=int, default=0, metavar="N")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--small", action="store_true", help="bench/kernels.py's small sizes")
    return parser.parse_args(argv)


DYNAMO_ONLY = ("dynamo", "dynamo-dynamic")


def build(backend, fn):
    if backend in DYNAMO_ONLY:
        return torch.compile(common.private_copy(fn), backend="eager", dynamic=backend == "dynamo-dynamic" or None)
    return common.build_backend(backend, fn)


def host_us_per_call(fn, calls):
    """Microseconds the host takes to issue one call, the GPU held busy meanwhile."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    torch.cuda._sleep(int(3e8))  # about 0.15 s of GPU cycles, far more than the calls take to issue
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / calls * 1e6


def profile_lines(fn, iters, top):
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(iters):
        fn()
    torch.cuda.synchronize()
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(top)
    return ["    " + line for line in text.getvalue().splitlines() if line.strip()][-top - 1:]


def main(argv=None):
    args = parse_args(argv)
    dtype = getattr(torch, args.dtype)
    print(common.environment_line("cuda"))
    rows, profiles = [], []
    for name in common.parse_list(args.cases, list(CASES_BY_NAME), "cases"):
        case = CASES_BY_NAME[name]
        inputs = case.make_inputs("cuda", dtype, args.small)
        calls = {}
        for backend in common.parse_list(args.backends, common.KNOWN_BACKENDS + DYNAMO_ONLY, "back ends"):
            compiled = build(backend, case.fn)
            calls[backend] = lambda compiled=compiled: compiled(*inputs)
            calls[backend]()
        best = {backend: min(host_us_per_call(call, args.iters) for _ in range(args.rounds))
                for backend, call in calls.items()}
        rows += [[name, backend, us] for backend, us in best.items()]
        if args.profile:
            for backend in (b for b in calls if b.startswith("tritonize")):
                profiles += [f"{name} {backend}:"] + profile_lines(calls[backend], 200, args.profile)
    print(common.format_table(HEADERS, rows))
    print("\n".join(profiles))
    return 0


if __name__ == "__main__":
    sys.exit(main())
