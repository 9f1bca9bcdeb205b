"""One rank of tests/test_distributed.py's multi-process runs: `python distributed_worker.py CASE
RANK WORLD STORE_FILE`. Joins a gloo process group through a file store, runs CASE compiled with
tritonize and in eager on this rank's inputs, and prints "RESULT" and a JSON object: whether the
values, strides and inputs agree, and what explain() listed."""
import json
import sys

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as fc

import tritonize

# torch 2.13 names it all_gather_single (all_gather_tensor deprecated); torch 2.11 has the old name only
all_gather = getattr(fc, "all_gather_single", None) or fc.all_gather_tensor


def all_reduce_between_kernels(x, y):
    a = fc.all_reduce(x * 2, "sum", dist.group.WORLD)
    z = y.sin() + 1
    return a + z, a.cos()


def gather_and_scatter(x):
    gathered = all_gather(x.relu(), 0, dist.group.WORLD)
    scattered = fc.reduce_scatter_tensor(gathered * 3, "sum", 0, dist.group.WORLD)
    return gathered.sum(0), scattered - x


def all_reduce_of_a_reduction(x, w):
    rows = (x @ w).softmax(-1)
    total = fc.all_reduce(rows.sum(0), "sum", dist.group.WORLD)
    return rows * total, fc.all_reduce(x.mean(), "avg", dist.group.WORLD)


CASES = {
    "all_reduce_between_kernels": (all_reduce_between_kernels, lambda g: (torch.randn(8, 4, generator=g),
                                                                          torch.randn(8, 4, generator=g))),
    "gather_and_scatter": (gather_and_scatter, lambda g: (torch.randn(6, 5, generator=g),)),
    "all_reduce_of_a_reduction": (all_reduce_of_a_reduction, lambda g: (torch.randn(7, 9, generator=g),
                                                                        torch.randn(9, 9, generator=g))),
}


def main(case: str, rank: int, world: int, store_file: str) -> None:
    dist.init_process_group("gloo", store=dist.FileStore(store_file, world), rank=rank, world_size=world)
    try:
        fn, make_inputs = CASES[case]
        inputs = make_inputs(torch.Generator().manual_seed(100 + rank))
        kept = [t.clone() for t in inputs]
        expected = fn(*[t.clone() for t in inputs])
        report = tritonize.explain(fn, *inputs)
        torch._dynamo.reset()
        actual = torch.compile(fn, backend="tritonize")(*inputs)
        same = all(torch.allclose(a, e, atol=1e-5, rtol=1e-5) and a.stride() == e.stride()
                   for a, e in zip(actual, expected))
        print("RESULT " + json.dumps({
            "same": same, "inputs_kept": all(torch.equal(a, b) for a, b in zip(inputs, kept)),
            "collectives": [op for op, _ in report.collectives],
            "fallbacks": sorted(report.fallbacks), "max_error": max(float((a - e).abs().max())
                                                                     for a, e in zip(actual, expected))}))
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
