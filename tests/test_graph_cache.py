"""The compiled-graph cache: stable keys across processes, hits that restore explain() data,
damaged entries, what the key depends on, and caching turned off."""
import os
import pathlib
import subprocess
import sys

import pytest
import torch

import tritonize
from tritonize.caching import graph_cache
from tritonize.runtime import disk_cache
from helpers import assert_same

SRC = str(pathlib.Path(__file__).resolve().parents[1] / "src")


def model(x, y):
    return (x.t() + y).sin() * torch.tensor([1.0, 2.0, 3.0], device=x.device)


def run_twice(fn, *args):
    """Compile and run `fn` twice, from scratch each time (explain() resets Dynamo first)."""
    return tritonize.explain(fn, *args), tritonize.explain(fn, *args)


def test_second_compile_is_a_hit_with_the_same_results_and_report(cache, device):
    x, y = torch.randn(3, 3, device=device), torch.randn(3, 3, device=device)
    report = tritonize.explain(model, x, y)
    assert graph_cache.STATS == {"miss": 1, "store": 1}
    hit_report = tritonize.explain(model, x, y)
    assert graph_cache.STATS["hit"] == 1
    assert [(k.name, k.kind, k.source, k.fused_nodes) for k in hit_report.kernels] == \
        [(k.name, k.kind, k.source, k.fused_nodes) for k in report.kernels]
    assert hit_report.wrapper == report.wrapper and str(hit_report) == str(report)
    torch._dynamo.reset()
    assert_same(torch.compile(model, backend="tritonize")(x, y), model(x, y))


def test_fallbacks_and_externs_survive_the_cache(cache, device):
    def with_extern(a, b):
        return torch.relu(a @ b) + 1

    a, b = torch.randn(4, 5, device=device), torch.randn(5, 6, device=device)
    cold = tritonize.explain(with_extern, a, b)
    warm = tritonize.explain(with_extern, a, b)
    assert graph_cache.STATS["hit"] == 1
    assert warm.externs == cold.externs and warm.fallbacks == cold.fallbacks and sum(cold.externs.values()) >= 1


def test_key_depends_on_what_changes_the_code(cache, device):
    keys = set()
    cases = [(torch.randn(3, 3), torch.randn(3, 3)), (torch.randn(3, 4), torch.randn(4, 3)),
             (torch.randn(3, 3, dtype=torch.float64), torch.randn(3, 3, dtype=torch.float64)),
             (torch.randn(3, 3).t(), torch.randn(3, 3))]
    original = graph_cache.graph_key

    def recording(gm, inputs, options):
        key = original(gm, inputs, options)
        keys.add(key)
        return key

    graph_cache.graph_key = recording
    try:
        for x, y in cases:
            torch._dynamo.reset()
            torch.compile(model, backend="tritonize")(x.to(device), y.to(device))
        torch._dynamo.reset()
        tritonize.compile(model, mode="max-autotune")(*[t.to(device) for t in cases[0]])
    finally:
        graph_cache.graph_key = original
    assert len(keys) == len(cases) + 1 and None not in keys


def test_constants_are_part_of_the_key_and_of_the_module(cache, device):
    """Two graphs that differ only in a tensor constant's values: both right, side by side."""
    def make(values):
        def fn(x):
            return x * torch.tensor(values, device=x.device)
        return fn

    x = torch.randn(3, device=device)
    first, second = make([1.0, 2.0, 3.0]), make([5.0, 6.0, 7.0])
    compiled_first = torch.compile(first, backend="tritonize")
    assert_same(compiled_first(x), first(x))
    compiled_second = torch.compile(second, backend="tritonize")
    assert_same(compiled_second(x), second(x))
    assert_same(compiled_first(x), first(x))
    assert graph_cache.STATS["miss"] == 2


def test_damaged_entry_is_recompiled_and_rewritten(cache, device, caplog):
    x, y = torch.randn(3, 3, device=device), torch.randn(3, 3, device=device)
    run_twice(model, x, y)
    (entry,) = (cache / "graphs").iterdir()
    entry.write_bytes(entry.read_bytes()[: len(entry.read_bytes()) // 2])
    graph_cache.STATS.clear()
    torch._dynamo.reset()
    with caplog.at_level("DEBUG", logger="tritonize.cache"):
        out = torch.compile(model, backend="tritonize")(x, y)
    assert_same(out, model(x, y))
    assert graph_cache.STATS == {"miss": 1, "store": 1} and "damaged entry" in caplog.text
    assert disk_cache.read_entry(entry) is not None


def test_caching_off_and_debug_dir_bypass(cache, device, monkeypatch, tmp_path):
    x, y = torch.randn(3, 3, device=device), torch.randn(3, 3, device=device)
    monkeypatch.setenv("TRITONIZE_CACHE", "0")
    run_twice(model, x, y)
    assert graph_cache.STATS == {"uncached": 2} and not (cache / "graphs").exists()
    monkeypatch.delenv("TRITONIZE_CACHE")
    graph_cache.STATS.clear()
    with tritonize.config.patch(debug_dir=str(tmp_path / "debug")):
        run_twice(model, x, y)
    assert graph_cache.STATS == {"uncached": 2}
    assert len(list((tmp_path / "debug").rglob("4_wrapper.py"))) == 2  # every stage dumped both times


KEY_SCRIPT = """
import sys, torch, tritonize
from tritonize.caching import graph_cache
seen = []
original = graph_cache.graph_key
graph_cache.graph_key = lambda *a: seen.append(original(*a)) or seen[-1]
def model(x, y):
    return (x.t() + y).sin() * torch.tensor([1.0, 2.0, 3.0], device=x.device)
x = torch.randn(3, 3, device=sys.argv[1])
out = torch.compile(model, backend="tritonize", dynamic=sys.argv[2] == "dynamic")(x, x)
torch.testing.assert_close(out, model(x, x))
print("KEY", seen[0], dict(graph_cache.STATS))
"""


@pytest.mark.parametrize("sizes", ["static", "dynamic"])
def test_key_is_stable_across_processes_and_a_second_process_hits(cache, device, sizes):
    # The graph cache alone: a Dynamo-level hit would not look the aten graph up. With dynamic
    # sizes the key holds the symbols' names, which Dynamo derives from the inputs' sources.
    env = dict(os.environ, PYTHONPATH=SRC, TRITONIZE_CACHE_DIR=str(cache), TRITONIZE_DYNAMO_CACHE="0")
    outputs = []
    for _ in range(2):
        result = subprocess.run([sys.executable, "-c", KEY_SCRIPT, device, sizes], capture_output=True, text=True,
                                timeout=300, env=env)
        assert result.returncode == 0, result.stderr[-3000:]
        outputs.append(next(line for line in result.stdout.splitlines() if line.startswith("KEY")))
    assert outputs[0].split()[1] == outputs[1].split()[1]
    assert "'miss': 1" in outputs[0] and "'hit': 1" in outputs[1]


def test_graphs_with_user_kernels_are_compiled_every_time(cache, device):
    """A user kernel's launcher lives in the wrapper's CONSTANTS and has no stored form (and the
    graph text names the kernel only by a process-local index): such graphs are never cached."""
    from user_kernel_corpus import add_kernel

    def fn(x, y):
        out = torch.empty_like(x)
        tritonize.wrap_triton(add_kernel)[(4,)](x.sin(), y, out, x.numel(), BLOCK=32)
        return out * 2

    x, y = torch.randn(100, device=device), torch.randn(100, device=device)
    first, second = run_twice(fn, x, y)
    assert graph_cache.STATS == {"miss": 2} and not list((cache / "graphs").iterdir())
    assert [k.name for k in second.user_kernels] == ["add_kernel"]
    torch._dynamo.reset()
    assert_same(torch.compile(fn, backend="tritonize")(x, y), fn(x, y))


def test_training_graphs_hit_with_their_output_strides_and_roles(cache, device):
    """A forward graph that returns a saved tensor dense (normalize's expanded norm) reports its
    real output strides to AOTAutograd; a cache hit must report the same, or the backward graph
    is compiled for the stride-0 layout and its size/stride assert fails."""
    import torch.nn.functional as F

    def fn(x):
        return F.normalize(x, dim=1) + x.std(1, keepdim=True)

    x = torch.randn(4, 5, device=device)
    grads, roles = [], []
    for _ in range(2):
        torch._dynamo.reset()
        recorder: list = []
        compiled = torch.compile(fn, backend=tritonize.backend.make_backend(tritonize.config.make_options(), recorder))
        leaf = x.clone().requires_grad_(True)
        compiled(leaf).square().sum().backward()
        grads.append(leaf.grad)
        roles.append([a.role for a in recorder if a != "graph"])
    assert graph_cache.STATS["hit"] == 2 and graph_cache.STATS["miss"] == 2  # forward and backward
    assert roles[0] == roles[1] == ["forward", "backward"]
    leaf = x.clone().requires_grad_(True)
    fn(leaf).square().sum().backward()
    assert_same(grads[0], leaf.grad)
    assert_same(grads[1], leaf.grad)
    entry = graph_cache._load(next(p for p in (cache / "graphs").iterdir()))
    assert entry.output_strides is not None and all(s is None or isinstance(s, tuple) for s in entry.output_strides)


def test_deterministic_algorithms_are_part_of_the_key(cache, device, monkeypatch):
    """Under torch.use_deterministic_algorithms a float accumulating scatter stays in aten
    (lower/scatter.py): a graph compiled without it (atomic adds) must not be served with it."""
    monkeypatch.setenv("TRITONIZE_DYNAMO_CACHE", "0")  # that key has the flag: test this cache's

    def fn(x, i, v):
        return x.index_put((i,), v, accumulate=True)

    x, v = torch.randn(6, 4, device=device), torch.randn(4, 4, device=device)
    i = torch.tensor([1, 1, 5, 0], device=device)
    assert "aten.index_put.default" not in tritonize.explain(fn, x, i, v).fallbacks
    previous = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        report = tritonize.explain(fn, x, i, v)
    finally:
        torch.use_deterministic_algorithms(previous)
    assert "aten.index_put.default" in report.fallbacks
    assert graph_cache.STATS == {"miss": 2, "store": 2}


def _dynamic_report(fn, *args):
    """fn compiled with dynamic=True from scratch, run on args: (result, Report)."""
    return tritonize.run_and_explain(fn, *args, dynamic=True)


def test_symbolic_graphs_hit_and_reinstall_their_size_guards(cache, device):
    def fn(x):
        return (x * 2 + 1).sum(-1)

    x = torch.randn(5, 7, device=device)
    result, cold = _dynamic_report(fn, x)
    assert graph_cache.STATS == {"miss": 1, "store": 1} and "ks0" in cold.wrapper
    assert cold.guards  # int32 indexing, guarded on the sizes' product
    y = torch.randn(9, 3, device=device)
    warm_result, warm = _dynamic_report(fn, y)
    assert graph_cache.STATS["hit"] == 1 and warm.wrapper == cold.wrapper and warm.guards == cold.guards
    assert_same(warm_result, fn(y))
    assert_same(result, fn(x))


def test_a_stored_guard_that_fails_here_means_compiling_afresh(cache, device, monkeypatch):
    from tritonize.ir.sizes import SizeOracle

    def fn(x):
        return x.cos() - 1

    _dynamic_report(fn, torch.randn(6, 4, device=device))
    monkeypatch.setattr(SizeOracle, "holds_at_hint", lambda self, condition: False)  # sizes past the guard
    result, report = _dynamic_report(fn, torch.randn(6, 4, device=device))
    assert graph_cache.STATS["hit"] == 0 and graph_cache.STATS["miss"] == 2
    assert report.guards


def test_parse_condition_reads_stored_guards_over_this_shape_env():
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    from tritonize.ir.sizes import SizeOracle

    env = ShapeEnv()
    s0 = env.create_unbacked_symint().node.expr  # any symbol the ShapeEnv knows
    oracle = SizeOracle(env)
    condition = graph_cache.parse_condition(f"{s0.name}*3 <= 2147483647", oracle)
    assert condition.free_symbols == {s0}


def test_a_split_chosen_at_small_sizes_is_not_reused_at_large_ones(cache, device):
    """A split count is a heuristic baked in from the example's sizes: an entry is reused only
    where the split comes out the same (it is right everywhere)."""
    def fn(x):
        return x.amax(-1)

    small = torch.randn(8, 20000, device=device)  # few rows: split
    _, cold = _dynamic_report(fn, small)
    assert len(cold.kernels) == 2 and cold.sections[0].choices[0][0] == "split_factor"
    _, again = _dynamic_report(fn, torch.randn(7, 17000, device=device))  # the same split: a hit
    assert graph_cache.STATS["hit"] == 1 and again.wrapper == cold.wrapper
    large = torch.randn(2048, 20000, device=device)  # many rows: no split, compiled afresh
    result, warm = _dynamic_report(fn, large)
    assert graph_cache.STATS["hit"] == 1 and graph_cache.STATS["miss"] == 2 and len(warm.kernels) == 1
    assert_same(result, fn(large))
