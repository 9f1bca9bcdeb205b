"""Where a model's step spends its GPU time, per back end: the top kernels by CUDA time.

    PYTHONPATH=src python3 bench/profile_model.py --model bert --backends eager,tritonize

Builds the model as bench/models.py does (random weights, inference in bf16 or training under
autocast), warms up, then profiles a few steps with torch.profiler and prints, per back end, the
step time and the kernels that take the most device time, with their call counts. Used to find
what makes a back end slower than another on a model.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import model_zoo  # noqa: E402
from models import Workload  # noqa: E402


def warmed_step(spec, mode, backend):
    """One step of the model compiled by the back end, after three warm-up steps."""
    common.reset_compiler_state()
    torch.manual_seed(0)
    workload = Workload(spec, mode, small=False, device="cuda")
    step = workload.step_fn(common.build_backend(backend, workload.forward_fn()))
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    return step


def profile_backend(spec, mode, backend, steps, top):
    step = warmed_step(spec, mode, backend)
    seconds = common.median_time_s(step, "cuda")
    activities = [torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    print(f"\n=== {spec.name} {mode} {backend}: {seconds * 1e3:.2f} ms a step")
    print_top_kernels(prof, steps, top)


def device_time_us(event) -> float:
    for name in ("self_device_time_total", "self_cuda_time_total"):  # renamed across torch versions
        if hasattr(event, name):
            return getattr(event, name)
    return 0.0


def print_top_kernels(prof, steps, top):
    """Kernels by device time a step: time, share, launches a step, name."""
    events = [e for e in prof.key_averages() if device_time_us(e) > 0]
    total = sum(device_time_us(e) for e in events)
    print(f"  device time a step: {total / steps / 1e3:.2f} ms")
    for event in sorted(events, key=device_time_us, reverse=True)[:top]:
        us = device_time_us(event)
        print(f"  {us / steps / 1e3:7.3f} ms {100 * us / total:5.1f}%  x{event.count // steps:<4} {event.key[:90]}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, choices=list(model_zoo.SPECS_BY_NAME))
    parser.add_argument("--mode", default="inference", choices=["inference", "training"])
    parser.add_argument("--backends", default="eager,tritonize")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    spec = model_zoo.SPECS_BY_NAME[args.model]
    for backend in args.backends.split(","):
        profile_backend(spec, args.mode, backend, args.steps, args.top)


if __name__ == "__main__":
    main()
