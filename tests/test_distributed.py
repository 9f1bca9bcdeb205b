"""torch.distributed's functional collectives in compiled functions (issue 22): their own kind of
operation (explain() lists them with their sizes; no fallback warning), started early and waited
late in the schedule (schedule/collectives.py), their buffers never reused while they may still be
read; the results of two gloo ranks on the CPU against eager's; and training in the three setups
(DDP, FSDP2, tensor parallel) on two gloo ranks against eager's."""
import json
import os
import pathlib
import subprocess
import sys
import warnings

import pytest
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as fc

import tritonize
from tritonize.caching import dynamo_cache, graph_cache
from conftest import DEVICE
from helpers import assert_same

WORKER = pathlib.Path(__file__).with_name("distributed_worker.py")
TRAINING = pathlib.Path(__file__).with_name("distributed_training.py")
SRC = str(pathlib.Path(__file__).resolve().parents[1] / "src")

# torch 2.13 names it all_gather_single (all_gather_tensor deprecated); torch 2.11 has the old name only
all_gather = getattr(fc, "all_gather_single", None) or fc.all_gather_tensor


@pytest.fixture
def world_of_one(tmp_path, device):
    """This process as a group of one rank, gloo on the CPU, NCCL on the GPU (the collectives
    run, and return their input)."""
    backend = "nccl" if device == "cuda" else "gloo"
    dist.init_process_group(backend, store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1,
                            device_id=torch.device("cuda", 0) if device == "cuda" else None)
    yield dist.group.WORLD
    dist.destroy_process_group()


def _schedule_of(fn, *args) -> list[str]:
    """The wrapper's calls in order: 'kernel' for a generated kernel, else the aten op's name."""
    report = tritonize.explain(fn, *args)
    body = report.wrapper[report.wrapper.index("def call("):]
    lines = [line.strip() for line in body.splitlines()]
    order = []
    for line in lines:
        if "_c10d_functional." in line:
            order.append(line.split("_c10d_functional.")[1].split(".")[0])
        elif line.startswith("triton_"):
            order.append("kernel")
    return order


def test_collectives_are_listed_with_their_sizes_and_are_no_fallback(world_of_one, device):
    def fn(x, y):
        return fc.all_reduce(x * 2, "sum", dist.group.WORLD) + y, all_gather(y.exp(), 0, dist.group.WORLD)

    x, y = torch.randn(8, 4, device=device), torch.randn(8, 4, device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "ops run through aten" warning
        report = tritonize.explain(fn, x, y)
        torch._dynamo.reset()
        assert_same(torch.compile(fn, backend="tritonize")(x, y), fn(x, y))
    assert report.collectives == [["_c10d_functional.all_reduce.default", 128],
                                  ["_c10d_functional.all_gather_into_tensor.default", 128]]
    assert not report.fallbacks
    assert "collective _c10d_functional.all_reduce.default x1: 128 B" in str(report)
    assert "2 collective(s), 0 fallback(s)" in str(report)


def test_a_graph_cache_hit_lists_its_collectives(world_of_one, cache, device):
    """The entry stores the collectives (two ranks share a cache directory: one rank's compile is
    the other's hit, whose explain() listed none)."""
    def fn(x):
        return fc.all_reduce(x.exp(), "sum", dist.group.WORLD) * 2

    for _ in range(2):
        torch._dynamo.reset()
        report = tritonize.explain(fn, torch.randn(4, 4, device=device))
        assert report.collectives == [["_c10d_functional.all_reduce.default", 64]], report
    assert graph_cache.STATS.get("hit", 0) + dynamo_cache.STATS.get("hit", 0) >= 1  # the second was a hit


def test_a_collective_starts_before_independent_work_and_is_waited_for_at_its_first_use(world_of_one, device):
    """Traced: x's kernel, y's kernel, the all_reduce of x's and its wait at once, then the use.
    Scheduled: the all_reduce right after x's kernel and its wait just before the use, so the
    communication overlaps y's kernel."""
    c10d = torch.ops._c10d_functional
    group = world_of_one.group_name

    def fn(x, y):
        doubled = x * 2
        z = (y.sin() + 1).sum(-1)
        a = c10d.wait_tensor(c10d.all_reduce(doubled, "sum", group))
        return a.cos(), z

    x, y = torch.randn(16, device=device), torch.randn(8, 4, device=device)
    assert _schedule_of(fn, x, y) == ["kernel", "all_reduce", "kernel", "wait_tensor", "kernel"]
    torch._dynamo.reset()
    assert_same(torch.compile(fn, backend="tritonize")(x, y), fn(x, y))


def test_collectives_keep_their_order_and_their_dependencies(world_of_one, device):
    """The second all_reduce reads the first one's result: it starts after that wait; the two
    starts keep the program's order (every rank must issue them alike)."""
    def fn(x, y):
        a = fc.all_reduce(x.relu(), "sum", dist.group.WORLD)
        b = fc.all_reduce(y.abs(), "max", dist.group.WORLD)
        c = fc.all_reduce(a * 2, "sum", dist.group.WORLD)
        return c + b

    x, y = torch.randn(6, 3, device=device), torch.randn(6, 3, device=device)
    order = [step for step in _schedule_of(fn, x, y) if step != "kernel"]
    assert order == ["all_reduce", "all_reduce", "wait_tensor", "all_reduce", "wait_tensor", "wait_tensor"]
    torch._dynamo.reset()
    assert_same(torch.compile(fn, backend="tritonize")(x, y), fn(x, y))


def test_random_numbers_drawn_through_aten_keep_their_order_around_a_collective(world_of_one, device):
    """Option fallback_random draws eager's numbers from eager's generator: the producer of a
    collective's input (the second rand) must not move above the first rand (the second
    review's find: both outputs differed from eager's)."""
    def fn(x):
        a = torch.rand(8, device=x.device) + x
        b = torch.rand(8, device=x.device) * 2
        return a, fc.all_reduce(b, "sum", dist.group.WORLD)

    compiled = torch.compile(fn, backend="tritonize", options={"fallback_random": True})
    x = torch.zeros(8, device=device)
    torch.manual_seed(0)
    expected = fn(x)
    torch.manual_seed(0)
    actual = compiled(x)
    assert all(torch.equal(a, e) for a, e in zip(actual, expected))


def test_a_collective_input_is_not_reused_while_the_collective_may_read_it(world_of_one, device):
    """x * 2 dies at the all_reduce's start; the memory plan must not hand its storage to the
    next kernel's output, which the GPU could write while the communication still reads it."""
    def fn(x, y):
        a = fc.all_reduce(x * 2, "sum", dist.group.WORLD)
        return a + (y * 3).exp()

    report = tritonize.explain(fn, torch.randn(64, 64, device=device), torch.randn(64, 64, device=device))
    start = report.wrapper.index("all_reduce.default(")
    argument = report.wrapper[start:].split("(")[1].split(",")[0]
    later = report.wrapper[start:]
    assert f"reinterpret_tensor({argument}" not in later and f"= {argument}; del {argument}" not in later


def run_two_ranks(tmp_path, script: pathlib.Path, case: str) -> list[dict]:
    """Each rank's RESULT object, the two ranks run as processes of one gloo group."""
    store = tmp_path / "store"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SRC, str(WORKER.parent)]),
               TRITONIZE_CACHE_DIR=str(tmp_path / "cache"))
    ranks = [subprocess.Popen([sys.executable, str(script), case, str(rank), "2", str(store)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for rank in range(2)]
    results = []
    for process in ranks:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err[-3000:]
        results.append(json.loads(next(l for l in out.splitlines() if l.startswith("RESULT "))[len("RESULT "):]))
    return results


@pytest.mark.skipif(DEVICE != "cpu", reason="two ranks on the one GPU the tests have: gloo on the CPU only")
@pytest.mark.parametrize("case", ["all_reduce_between_kernels", "gather_and_scatter", "all_reduce_of_a_reduction"])
def test_two_ranks_match_eager(tmp_path, case):
    for result in run_two_ranks(tmp_path, WORKER, case):
        assert result["same"] and result["inputs_kept"], result
        assert result["collectives"] and not result["fallbacks"], result


@pytest.mark.skipif(DEVICE != "cpu", reason="two ranks on the one GPU the tests have: gloo on the CPU only")
@pytest.mark.parametrize("setup", ["ddp", "fsdp2", "tp"])
def test_two_ranks_train_as_eager(tmp_path, setup):
    """Three SGD steps of a small MLP, compiled against eager, in each setup
    (tests/distributed_training.py): DDP around the compiled model (Dynamo splits its graph at
    the 1 MB gradient buckets), FSDP2 with each layer sharded and compiled, tensor parallel
    linear layers (DTensor: the graph holds the row-parallel layer's all_reduce and carries the
    process group as an opaque input)."""
    for result in run_two_ranks(tmp_path, TRAINING, setup):
        assert result["loss_error"] < 1e-4 and result["weight_error"] < 1e-5, result
        assert not result["fallbacks"] and not result["eager_graphs"], result
        assert "forward" in result["graphs"] and "backward" in result["graphs"], result
        if setup == "ddp":  # the buckets split the graph: two forward graphs, two backward
            assert result["graphs"].count("forward") >= 2, result
        if setup == "tp":
            assert result["collectives"] == ["_c10d_functional.all_reduce.default"], result
