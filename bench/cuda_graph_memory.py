"""Where CUDA graphs' memory goes (issue 18): a model's step with and without mode="reduce-overhead",
on the GPU, each in a process of its own.

    PYTHONPATH=src python3 bench/cuda_graph_memory.py --models gpt2,llama --mode training

Per model and back end: peak memory over 5 steps after WARM_STEPS steps, empty_cache() and 5 more
(--keep-cache: no empty_cache(), what a loop that never empties its cache holds) (the state a training
loop runs in: a backward's incoming gradient settles at one address after a few steps and is then
read in place by a new recording, runtime/cuda_graphs.PROMOTE_AFTER): max_memory_reserved, what
the process holds, graph pools included (the figure to compare), and max_memory_allocated (weights
included; under reduce-overhead it leaves out the pool memory that replays hand out, which the
allocator counts as free between captures: runtime/cuda_graph_pool.py). For reduce-overhead also
the graph pool's size, the pool memory of the recordings' outputs (in training the forward's
outputs are the activations saved for the backward) and their input buffers (copies of inputs
whose address changes).
The step is bench/models.py's (inference: forward under no_grad in bf16; training: autocast bf16,
loss = output.float().square().mean(), backward). LOG_ADDRESSES=1 prints the addresses of each
graph call's large inputs (which ones move from step to step), the large copied inputs, and each
graph's CUDA-graph notes (which inputs read in place moved and made it record again).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import model_zoo  # noqa: E402


WARM_STEPS = 30  # a training loop's state: copied inputs that settle are read in place after a few promotions
_LOGGED_RUNNERS: list = []  # the GraphRunners seen by log_addresses


def measure(model_name: str, mode: str, backend: str, batch: int | None, keep_cache: bool) -> dict:
    from models import Workload  # (bench/models.py: the suite's own workload)

    torch.manual_seed(0)
    spec = model_zoo.SPECS_BY_NAME[model_name]
    workload = Workload(spec, mode, False, "cuda", batch)
    if backend.endswith("-ro") and os.environ.get("LOG_ADDRESSES"):
        common.import_tritonize()
        log_addresses()
    step = workload.step_fn(common.build_backend(backend, workload.forward_fn()))
    for _ in range(WARM_STEPS):
        step()
    torch.cuda.synchronize()
    if not keep_cache:  # (--keep-cache: what a user sees, the warm-up's cached blocks included)
        torch.cuda.empty_cache()
        for _ in range(5):  # (the cache's release moves eager tensors: a moved input records once more)
            step()
        torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    result = {"peak": torch.cuda.max_memory_allocated(), "allocated": torch.cuda.memory_allocated(),
              "reserved": torch.cuda.max_memory_reserved(), **reserved_by_pool()}
    if backend.endswith("-ro"):
        result.update(recording_bytes())
    if os.environ.get("POOL_DETAIL"):
        print_segments()
    for runner in _LOGGED_RUNNERS:  # (LOG_ADDRESSES: why each graph was recorded again)
        print("\n".join(f"{runner.name}: {note}" for note in runner.notes), file=sys.stderr)
    return result


def reserved_by_pool() -> dict:
    """The memory the caching allocator holds, split into its default pool and every other pool
    (CUDA graph pools: ours, or Inductor's) at the end of the run; without empty_cache() the
    reserved bytes of a pool never shrink, so these add up to the peak."""
    default = others = 0
    for segment in torch.cuda.memory_snapshot():
        if tuple(segment.get("segment_pool_id", (0, 0))) == (0, 0):
            default += segment["total_size"]
        else:
            others += segment["total_size"]
    return {"default_pool": default, "other_pools": others}


def print_segments() -> None:
    """POOL_DETAIL=1: each pool's segments at the end (reserved memory only grows without
    empty_cache(), so this is the peak's layout): sizes and what is allocated in them, in MiB."""
    pools: dict = {}
    for segment in torch.cuda.memory_snapshot():
        pool = "default" if tuple(segment.get("segment_pool_id", (0, 0))) == (0, 0) else "graph"
        pools.setdefault(pool, []).append((segment["total_size"] >> 20, segment["allocated_size"] >> 20,
                                           segment["segment_type"]))
    for pool, segments in pools.items():
        total, allocated = sum(s[0] for s in segments), sum(s[1] for s in segments)
        listed = " ".join(f"{size}/{used}" for size, used, _ in sorted(segments, reverse=True)[:40])
        print(f"segments {pool}: {len(segments)} segments, {total} MiB, {allocated} MiB allocated; "
              f"size/allocated: {listed}", file=sys.stderr)


def recording_bytes() -> dict:
    from tritonize.runtime import cuda_graph_pool

    outputs = buffers = count = pool_bytes = 0
    copied = []
    for pool in cuda_graph_pool._POOLS.values():
        handle = pool._handle
        pool_bytes += 0 if handle is None else sum(segment["total_size"] for segment in torch.cuda.memory_snapshot()
                          if tuple(segment.get("segment_pool_id", ())) == tuple(handle))
        for recording in pool.recordings:
            count += 1
            outputs += sum(nbytes for _, nbytes, _ in recording.storages)
            buffers += sum(buffer.untyped_storage().nbytes() for _, buffer in recording.copies)
            copied += [f"{position}:{tuple(buffer.shape)}" for position, buffer in recording.copies
                       if buffer.untyped_storage().nbytes() > 2**20]
    print("copied inputs over 1 MiB: " + ", ".join(copied), file=sys.stderr)
    return {"recordings": count, "outputs": outputs, "buffers": buffers, "pool": pool_bytes}


def log_addresses() -> None:
    """Print the addresses of every graph call's large tensor inputs (to see which move)."""
    from tritonize.runtime import cuda_graphs

    original = cuda_graphs.GraphRunner.__call__

    def call(self, args):
        if self not in _LOGGED_RUNNERS:
            _LOGGED_RUNNERS.append(self)
        big = [(i, x.data_ptr() % 2**32) for i, x in enumerate(args)
               if isinstance(x, torch.Tensor) and x.untyped_storage().nbytes() > 64 * 2**20]
        print(f"{self.name}: {big}", file=sys.stderr)
        return original(self, args)

    cuda_graphs.GraphRunner.__call__ = call


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="gpt2,llama")
    parser.add_argument("--mode", default="training", choices=["inference", "training"])
    parser.add_argument("--backends", default="tritonize,tritonize-ro")
    parser.add_argument("--batch", type=int)
    parser.add_argument("--keep-cache", action="store_true",
                        help="no torch.cuda.empty_cache() after the warm-up steps (what a training loop holds)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="processes per (model, back end); the row is the median run by reserved bytes "
                             "(plain launches on the convnets vary by up to 20%% from run to run)")
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print("RESULT " + json.dumps(measure(*args.worker[:2], args.worker[2], args.batch, args.keep_cache)))
        return
    print(common.environment_line("cuda"))
    rows = []
    for model in args.models.split(","):
        for backend in args.backends.split(","):
            runs = [run_worker(model, backend, args) for _ in range(args.repeat)]
            results = sorted((r for r in runs if r is not None), key=lambda r: r["reserved"])
            if not results:
                rows.append((model, backend, "fails (stderr says why)"))
                continue
            r = results[(len(results) - 1) // 2]  # (the median run by reserved bytes; the lower of two)
            mib = {k: f"{v / 2**20:.0f}" for k, v in r.items() if k != "recordings"}
            rows.append((model, backend, mib["peak"], mib["reserved"], mib["default_pool"], mib["other_pools"],
                         mib["allocated"], mib.get("pool", "-"), mib.get("outputs", "-"), mib.get("buffers", "-"),
                         r.get("recordings", "-"), " ".join(f"{x['reserved'] / 2**20:.0f}" for x in results)))
    headers = ["model", "backend", "peak allocated MiB", "peak reserved MiB", "default pool MiB", "other pools MiB",
               "allocated after MiB", "graph pool MiB", "recording outputs MiB", "input buffers MiB", "recordings",
               "reserved MiB, every run"]
    print(common.format_markdown(headers, [row + ("",) * (len(headers) - len(row)) for row in rows]))


def run_worker(model: str, backend: str, args) -> dict | None:
    """One (model, back end) measured in a process of its own (None if it failed: the reason goes
    to stderr); prints what POOL_DETAIL and LOG_ADDRESSES asked the worker for."""
    command = [sys.executable, __file__, "--worker", model, args.mode, backend]
    command += ["--batch", str(args.batch)] if args.batch else []
    command += ["--keep-cache"] if args.keep_cache else []
    done = subprocess.run(command, capture_output=True, text=True, timeout=400)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if not lines:
        print(f"{model} {backend} fails: " + (done.stderr.strip().splitlines() or ["?"])[-1][:200], file=sys.stderr)
        return None
    if os.environ.get("POOL_DETAIL"):
        print("\n".join(line for line in done.stderr.splitlines() if line.startswith("segments ")))
    if os.environ.get("LOG_ADDRESSES"):
        print("\n".join(line for line in done.stderr.splitlines() if "graph" in line or "copied" in line))
    return json.loads(lines[-1][len("RESULT "):])

if __name__ == "__main__":
    main()
