"""One rank of tests/test_distributed.py's training runs: `python distributed_training.py SETUP RANK
WORLD STORE_FILE`. Trains a small model for three SGD steps in SETUP, first in eager, then compiled
with tritonize from the same initial weights and data, and prints "RESULT" and a JSON object: the
largest differences of the losses and of the final weights (whole tensors, gathered where
sharded), and what the compiled graphs listed.

Setups: "ddp", DistributedDataParallel around the compiled model (Dynamo splits its graph at the
gradient buckets, DDPOptimizer); "fsdp2", fully_shard per layer with each layer compiled; "tp",
the first linear layer column-parallel and the next row-parallel (DTensor), compiled."""
import json
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

import tritonize

STEPS = 3
WIDTH = 256  # the large layers hold 1 MB of weights each: DDP's 1 MB buckets split Dynamo's graph


def mlp() -> nn.Module:
    torch.manual_seed(0)  # the same weights on every rank, as the setups expect
    return nn.Sequential(nn.Linear(WIDTH, 1024), nn.GELU(), nn.Linear(1024, WIDTH), nn.LayerNorm(WIDTH),
                         nn.Linear(WIDTH, 8))


def ddp(model, compile_):
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(compile_(model), bucket_cap_mb=1)


def fsdp2(model, compile_):
    from torch.distributed.fsdp import fully_shard

    for index, layer in enumerate(model):
        if any(True for _ in layer.parameters()):
            fully_shard(layer)
        model[index] = compile_(layer)
    return fully_shard(model)


def tp(model, compile_):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    return compile_(parallelize_module(model, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()}))


SETUPS = {"ddp": ddp, "fsdp2": fsdp2, "tp": tp}


def full(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor


def train(setup: str, rank: int, compile_):
    model = SETUPS[setup](mlp(), compile_)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.Generator().manual_seed(7)
    losses = []
    for _ in range(STEPS):
        x = torch.randn(12, WIDTH, generator=data)
        if setup != "tp":  # data parallel: each rank its own batch; TP: the same batch on every rank
            x = x + rank
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(float(full(loss.detach())))
    with torch.no_grad():  # an inference call too (DDP's fakified first call of a graph without grad)
        losses.append(float(full(model(torch.randn(12, WIDTH, generator=data)).pow(2).mean())))
    return losses, [full(p.detach()).clone() for p in model.parameters()]


def main(setup: str, rank: int, world: int, store_file: str) -> None:
    dist.init_process_group("gloo", store=dist.FileStore(store_file, world), rank=rank, world_size=world)
    try:
        eager_losses, eager_weights = train(setup, rank, lambda m: m)
        torch._dynamo.reset()
        recorder = []
        backend = tritonize.make_backend(recorder=recorder)
        losses, weights = train(setup, rank, lambda m: torch.compile(m, backend=backend))
        artifacts = [a for a in recorder if a != "graph"]
        print("RESULT " + json.dumps({
            "loss_error": max(abs(a - b) for a, b in zip(losses, eager_losses)),
            "weight_error": max(float((a - b).abs().max()) for a, b in zip(weights, eager_weights)),
            "graphs": [a.role for a in artifacts],
            "collectives": sorted({op for a in artifacts for op, _ in a.collectives}),
            "fallbacks": sorted({op for a in artifacts for op, _ in a.fallbacks}),
            "eager_graphs": [a.eager_reason for a in artifacts if a.eager_reason]}))
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
