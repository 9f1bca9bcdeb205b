"""The buffers live at a training or inference step's measured peak, by the line that allocated them.

    PYTHONPATH=src python3 bench/peak_breakdown.py --model mobilenetv3 --mode training --backends tritonize,inductor

Builds the model as bench/models.py does, runs a few steps, then records the CUDA caching
allocator's history (torch.cuda.memory._record_memory_history, Python frames only) over one step.
Replaying the allocations and frees of that step gives the moment the allocated bytes peak (the
weights, gradients and caches allocated before the step are counted once, as a base) and the
blocks live then. Those are grouped by the first frame outside torch's own package (a line of the
compiled wrapper, of the model or of this bench) and printed largest first.
"""
import argparse
import collections
import linecache
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_zoo  # noqa: E402
from profile_model import warmed_step  # noqa: E402


def _origin(frames):
    """The first frame (innermost first) that is not torch's own code: file:line function."""
    for frame in frames:
        name = frame.get("filename", "")
        if "/torch/" not in name and "/triton/" not in name:
            text = linecache.getline(name, frame.get("line", 0)).strip()[:110]
            return f"{os.path.basename(name)}:{frame.get('line')} {text}"
    return "torch internals"


def live_at_peak(snapshot):
    """(peak bytes above the step's start, {origin: [bytes, count]} of the blocks then live)."""
    live, total, peak, at_peak = {}, 0, 0, {}
    for event in snapshot["device_traces"][torch.cuda.current_device()]:
        if event["action"] == "alloc":
            live[event["addr"]] = (event["size"], _origin(event.get("frames", [])))
            total += event["size"]
            if total > peak:
                peak, at_peak = total, dict(live)
        elif event["action"] == "free_requested" and event["addr"] in live:
            total -= live.pop(event["addr"])[0]
    groups = collections.defaultdict(lambda: [0, 0])
    for size, origin in at_peak.values():
        groups[origin][0] += size
        groups[origin][1] += 1
    return peak, groups


def breakdown(spec, mode, backend, top):
    step = warmed_step(spec, mode, backend)
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.memory._record_memory_history(max_entries=500000, stacks="python")
    step()
    torch.cuda.synchronize()
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    peak, groups = live_at_peak(snapshot)
    mib = 2 ** 20
    print(f"\n=== {spec.name} {mode} {backend}: allocated before the step {base / mib:.1f} MiB, "
          f"step's peak above it {peak / mib:.1f} MiB (max_memory_allocated {torch.cuda.max_memory_allocated() / mib:.1f})")
    files = collections.Counter()
    for origin, (size, _) in groups.items():
        files[origin.split(":")[0]] += size
    print("  by file: " + ", ".join(f"{name} {size / mib:.1f} MiB" for name, size in files.most_common(6)))
    for origin, (size, count) in sorted(groups.items(), key=lambda item: -item[1][0])[:top]:
        print(f"  {size / mib:9.1f} MiB  x{count:<4d} {origin}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True, choices=list(model_zoo.SPECS_BY_NAME))
    parser.add_argument("--mode", default="training", choices=["inference", "training"])
    parser.add_argument("--backends", default="tritonize,inductor")
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args()
    for backend in args.backends.split(","):
        breakdown(model_zoo.SPECS_BY_NAME[args.model], args.mode, backend, args.top)


if __name__ == "__main__":
    main()
