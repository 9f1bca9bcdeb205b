"""Distributed training steps (issue 22): DDP, FSDP2 and tensor parallel, eager, Inductor and tritonize.

    torchrun --nproc-per-node 2 bench/distributed.py                 # on a host with 2 GPUs
    PYTHONPATH=src python3 bench/distributed.py                      # one process: world size 1
    PYTHONPATH=src python3 bench/distributed.py --device cpu --small # a smoke test (gloo, CPU)

A GPT-2-size decoder of its own (12 blocks, hidden 768, 12 heads, nn.Linear projections so that
the tensor-parallel plan applies: q, k, v and the MLP's first layer column-parallel, the attention's
output and the MLP's second layer row-parallel; heads split across ranks), bf16 autocast on the GPU,
batch 8 x 512 tokens a rank (TP: the same batch on every rank). Setups: "ddp" (DDP around the
compiled model: Dynamo splits the graph at the gradient buckets), "fsdp2" (fully_shard per block,
each block compiled), "tp" (parallelize_module, the whole model compiled). World size 1 runs the
same code paths, collectives included.

Per (setup, back end), rank 0 prints the step time (ms: the back ends' models of a setup are
built side by side and timed in turns for --rounds rounds of --steps steps after --warmup, CUDA
events around each step; the fastest round's median counts) and, from a torch.profiler trace of
two steps (after one it does not record), the compute kernels' GPU time a step, the
communication's GPU time a step (NCCL's kernels, which include their wait for the other ranks:
the rank that waited least is shown) and the share of it that overlaps compute kernels
("overlap"). --profile-top N also prints each row's N longest kernels.
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

HEADERS = ["setup", "backend", "world", "step ms", "compute ms/step", "comm ms/step", "overlap", "note"]
COMM_KERNEL_MARKERS = ("nccl", "gloo", "AllReduce", "AllGather", "ReduceScatter")


class Block(nn.Module):
    def __init__(self, hidden: int, heads: int):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.norm1, self.norm2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.q, self.k, self.v = (nn.Linear(hidden, hidden) for _ in range(3))
        self.o = nn.Linear(hidden, hidden)
        self.fc1, self.fc2 = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)

    def forward(self, x):
        batch, tokens, _ = x.shape
        h = self.norm1(x)
        q, k, v = (p(h).view(batch, tokens, -1, self.head_dim).transpose(1, 2) for p in (self.q, self.k, self.v))
        attention = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(attention.transpose(1, 2).reshape(batch, tokens, -1))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class Decoder(nn.Module):
    def __init__(self, layers: int, hidden: int, heads: int, vocab: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads) for _ in range(layers))
        self.norm, self.head = nn.LayerNorm(hidden), nn.Linear(hidden, vocab, bias=False)

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--setups", default="ddp,fsdp2,tp")
    parser.add_argument("--backends", default="eager,inductor,tritonize")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3, help="timing rounds, the back ends in turns")
    parser.add_argument("--small", action="store_true", help="2 blocks, hidden 64, 16 tokens (a smoke test)")
    parser.add_argument("--markdown", metavar="FILE")
    parser.add_argument("--profile-top", type=int, default=0, metavar="N",
                        help="print each row's N longest kernels (GPU ms a step) from its profile")
    return parser.parse_args(argv)


def sizes(small: bool) -> dict:
    if small:
        return dict(layers=2, hidden=64, heads=4, vocab=512, batch=2, tokens=16)
    return dict(layers=12, hidden=768, heads=12, vocab=50304, batch=8, tokens=512)


def build(setup: str, backend: str, shape: dict, device: torch.device):
    torch.manual_seed(0)
    model = Decoder(shape["layers"], shape["hidden"], shape["heads"], shape["vocab"]).to(device)
    compile_ = (lambda m: m) if backend == "eager" else (lambda m: common.build_backend(backend, m))
    if setup == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        ids = [device.index] if device.type == "cuda" else None
        return DistributedDataParallel(compile_(model), device_ids=ids)
    if setup == "fsdp2":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        # the mesh names the device: fully_shard's default takes CUDA whenever the host has it
        mesh = init_device_mesh(device.type, (dist.get_world_size(),))
        for index, block in enumerate(model.blocks):
            fully_shard(block, mesh=mesh)
            model.blocks[index] = compile_(block)
        return fully_shard(model, mesh=mesh)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    for block in model.blocks:
        parallelize_module(block, mesh, {"q": ColwiseParallel(), "k": ColwiseParallel(), "v": ColwiseParallel(),
                                         "o": RowwiseParallel(), "fc1": ColwiseParallel(), "fc2": RowwiseParallel()})
    return compile_(model)


def step_fn(model, setup: str, shape: dict, device: torch.device, rank: int):
    generator = torch.Generator(device="cpu").manual_seed(1 + (0 if setup == "tp" else rank))
    tokens = torch.randint(0, shape["vocab"], (shape["batch"], shape["tokens"] + 1), generator=generator).to(device)
    # (tensor parallel: the embedding and head stay plain tensors, which foreach ops cannot mix with DTensors)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, foreach=setup != "tp")
    autocast = torch.autocast(device.type, torch.bfloat16) if device.type == "cuda" else torch.autocast("cpu", enabled=False)

    def step():
        with autocast:
            logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.float().flatten(0, 1), tokens[:, 1:].flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return step


def time_steps(step, device: torch.device, steps: int) -> float:
    times = []
    for _ in range(steps):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            step()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        else:
            begin = time.perf_counter()
            step()
            times.append((time.perf_counter() - begin) * 1e3)
    return statistics.median(times)


def overlap_of(step, device: torch.device, steps: int = 2, top: int = 0, title: str = "") -> tuple:
    """(compute kernels' GPU ms a step, communication's GPU ms a step, the share of the latter
    overlapping compute kernels), from a profile of `steps` steps after one step the profiler
    does not record (it absorbs the ranks' skew in starting the profiler, which NCCL's kernels
    would otherwise count as waiting). NCCL's kernels include any wait for the other ranks, so
    the figures come from the rank whose communication took least: the last to arrive. With
    `top`, rank 0 also prints the kernels that took longest (ms a step, launches)."""
    if device.type != "cuda":
        return None, None, None
    from torch.profiler import ProfilerActivity

    kernels = recorded_events(step, steps, ProfilerActivity.CUDA, torch.cuda.synchronize)
    if top and dist.get_rank() == 0:
        print_top_kernels(kernels, steps, top, title)
    measured = [None] * dist.get_world_size()
    dist.all_gather_object(measured, communication_figures(kernels, steps))
    return min(measured, key=lambda figures: figures[1])


def recorded_events(step, steps: int, activity, synchronize) -> list:
    """(start, end, name) of the `activity` events of `steps` calls of `step`, after one call
    the profiler sees but does not record. The schedule runs once (repeat=1): a repeating one
    would start a new, empty cycle after the last step, and that is what `events()` would read."""
    from torch.profiler import profile, schedule

    kinds = {"CUDA": torch.autograd.DeviceType.CUDA, "CPU": torch.autograd.DeviceType.CPU}
    with profile(activities=[activity], schedule=schedule(wait=0, warmup=1, active=steps, repeat=1)) as trace:
        for _ in range(steps + 1):
            step()
            synchronize()
            trace.step()
    return [(e.time_range.start, e.time_range.end, e.name) for e in trace.events()
            if e.device_type == kinds[activity.name]]


def communication_figures(kernels: list, steps: int) -> tuple:
    """(compute ms a step, communication ms a step, overlapped share or None) of one rank's kernels."""
    comm = [(s, e) for s, e, name in kernels if any(m in name for m in COMM_KERNEL_MARKERS)]
    compute = sorted((s, e) for s, e, name in kernels if not any(m in name for m in COMM_KERNEL_MARKERS))
    busy = sum(e - s for s, e in compute) / steps / 1e3
    total = sum(e - s for s, e in comm)
    if not total:
        return busy, 0.0, None
    covered = sum(_covered(s, e, compute) for s, e in comm)
    return busy, total / steps / 1e3, covered / total


def print_top_kernels(kernels: list, steps: int, top: int, title: str) -> None:
    totals, counts = {}, {}
    for start, end, name in kernels:
        totals[name] = totals.get(name, 0) + end - start
        counts[name] = counts.get(name, 0) + 1
    busy = sum(totals.values()) / steps / 1e3
    print(f"kernels {title}: {busy:.2f} ms a step in {len(kernels) // steps} launches", flush=True)
    for name in sorted(totals, key=totals.get, reverse=True)[:top]:
        print(f"  {totals[name] / steps / 1e3:8.3f} ms  x{counts[name] // steps:<4} {name[:110]}", flush=True)


def _covered(start: int, end: int, intervals: list) -> int:
    """How much of [start, end) the sorted intervals cover (their union)."""
    covered, reach = 0, start
    for s, e in intervals:
        if e <= reach or s >= end:
            continue
        s = max(s, reach)
        covered += min(e, end) - s
        reach = min(e, end)
    return covered


def run_setup(setup: str, backends: list, shape: dict, device: torch.device, args) -> list:
    """One row per back end. The back ends' models are built side by side and timed in turns,
    round after round (a slow spell of the host, or of the other rank, falls on all of them);
    each keeps its fastest round's median. A back end that fails is a row saying why."""
    rank, world = dist.get_rank(), dist.get_world_size()
    common.reset_compiler_state()
    steps, failures = {}, {}
    for backend in backends:
        try:
            step = step_fn(build(setup, backend, shape, device), setup, shape, device, rank)
            for _ in range(args.warmup):
                step()
            steps[backend] = step
        except Exception as exc:  # noqa: BLE001  (every rank fails alike: the model and inputs are the same)
            failures[backend] = common.describe_error(exc)
    best = {backend: float("inf") for backend in steps}
    for _ in range(args.rounds):
        for backend, step in steps.items():
            best[backend] = min(best[backend], time_steps(step, device, args.steps))
    rows = []
    for backend in backends:
        if backend in failures:
            rows.append([setup, backend, world, "-", "-", "-", "-", failures[backend]])
            continue
        try:
            busy, comm_ms, overlap = overlap_of(steps[backend], device, top=args.profile_top, title=f"{setup} {backend}")
        except Exception as exc:  # noqa: BLE001  (the profile's failure is a note; the time stands)
            rows.append([setup, backend, world, best[backend], "-", "-", "-", common.describe_error(exc)])
            continue
        rows.append([setup, backend, world, best[backend], busy if busy is not None else "-",
                     comm_ms if comm_ms is not None else "-", f"{overlap:.0%}" if overlap is not None else "-", ""])
    return rows


def main(argv=None) -> int:
    args = parse_args(argv)
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    device = torch.device(args.device, int(os.environ.get("LOCAL_RANK", 0))) if args.device == "cuda" \
        else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29541")
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo", rank=rank, world_size=world)
    try:
        shape = sizes(args.small)
        rows = []
        backends = common.parse_list(args.backends, common.KNOWN_BACKENDS, "back ends")
        for setup in common.parse_list(args.setups, ["ddp", "fsdp2", "tp"], "setups"):
            rows += run_setup(setup, backends, shape, device, args)
            if rank == 0:  # each setup's rows as they come: a run cut off by a time limit keeps them
                for row in rows[-len(backends):]:
                    print("row:", " | ".join(str(cell) for cell in row), flush=True)
        if rank == 0:
            print(common.environment_line(str(device.type)))
            print(common.format_table(HEADERS, rows))
            if args.markdown:
                with open(args.markdown, "w") as out:
                    out.write(common.format_markdown(HEADERS, rows) + "\n")
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
