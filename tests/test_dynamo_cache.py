"""The Dynamo-level cache: a second process skips AOTAutograd for inference graphs; graphs whose
AOTAutograd calling convention is not trivial are never stored; what the key depends on; damaged
and dangling entries; explain() on a hit."""
import json
import os
import pathlib
import subprocess
import sys

import pytest
import torch
import torch.nn as nn

import tritonize
from tritonize.caching import dynamo_cache, graph_cache
from helpers import assert_same

SRC = str(pathlib.Path(__file__).resolve().parents[1] / "src")


def compile_fresh(fn):
    """torch.compile(fn) as a new process would: Dynamo's in-memory caches emptied first."""
    torch._dynamo.reset()
    return torch.compile(fn, backend="tritonize")


def dynamo_entries(cache) -> list:
    directory = cache / "dynamo"
    return sorted(directory.iterdir()) if directory.exists() else []


# ----------------------------------------------------------------------------- a second process

PROCESS_SCRIPT = """
import json, sys, torch, torch.nn as nn
import tritonize, tritonize.backend
from tritonize.caching import dynamo_cache, graph_cache

from tritonize.runtime import launcher

aot_calls, timings = [], []
original = tritonize.backend.aot_module_simplified
tritonize.backend.aot_module_simplified = lambda *a, **k: aot_calls.append(1) or original(*a, **k)
time_many = launcher.CudaEnvironment.time_many  # GPU autotuning (never called on the CPU)
launcher.CudaEnvironment.time_many = lambda self, launches: timings.append(1) or time_many(self, launches)

import precompile_models  # tests/: the same small models as the precompile tests

name, device = sys.argv[1], sys.argv[2]
model, x = precompile_models.build(name, device)
with torch.no_grad():
    expected = model(x)
    out = torch.compile(model, backend="tritonize")(x)
torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
print("RESULT " + json.dumps({"dynamo": dict(dynamo_cache.STATS), "graph": dict(graph_cache.STATS),
                              "aot_calls": len(aot_calls), "timings": len(timings),
                              "out": out.cpu().flatten().tolist()}))
"""


def run_process(cache, *args) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SRC, str(pathlib.Path(__file__).parent)]),
               TRITONIZE_CACHE_DIR=str(cache), TRITON_CACHE_DIR=str(cache / "triton"))
    env.pop("TRITONIZE_CACHE", None)
    result = subprocess.run([sys.executable, "-c", PROCESS_SCRIPT, *args], capture_output=True, text=True,
                            timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(line for line in result.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def files_under(directory: pathlib.Path) -> dict:
    return {str(p): p.stat().st_mtime_ns for p in directory.rglob("*") if p.is_file()} if directory.exists() else {}


@pytest.mark.parametrize("name", ["mlp", "transformer_block"])
def test_second_process_hits_and_skips_aot_autograd(cache, device, name):
    """The warm process runs neither AOTAutograd nor our compiler; on a GPU it also compiles no
    Triton kernel (Triton's cache and the autotune cache are left as they were) and times nothing."""
    cold = run_process(cache, name, device)
    assert cold["dynamo"] == {"miss": 1, "store": 1} and cold["aot_calls"] == 1
    before = files_under(cache / "triton"), files_under(cache / "autotune")
    warm = run_process(cache, name, device)
    assert warm["dynamo"] == {"hit": 1} and warm["aot_calls"] == 0
    assert warm["graph"] == {"hit": 1}  # the compiled graph came from the graph cache
    assert warm["out"] == cold["out"]  # same code, same inputs: the same bits (each matched eager)
    assert warm["timings"] == 0 and (files_under(cache / "triton"), files_under(cache / "autotune")) == before
    if device == "cuda":
        assert before[0], "the cold process compiled no Triton kernel into TRITON_CACHE_DIR"


# ----------------------------------------------------------------------------- never stored


def run_twice_unstored(cache, fn, make_args):
    """Compile and run twice as fresh processes would; neither may store a Dynamo entry."""
    results = []
    for _ in range(2):
        args = make_args()
        results.append((compile_fresh(fn)(*args), args))
    assert dynamo_cache.STATS == {"miss": 2, "not_stored": 2}, dynamo_cache.STATS
    assert dynamo_entries(cache) == []
    return results


def test_graphs_traced_under_other_size_guards_are_told_apart(cache, device):
    """`a[:a.shape[0] // 2 - 1] * b` traced with a's slice as long as b (10 and 4 rows), then with
    it 1 row long (4 and 6 rows, a broadcast): the same graph text and size ranges, other guards
    (Eq(s0 // 2 - 1, s1) against Eq(s0 // 2 - 1, 1)). The second compile must not get the first's
    graph from the caches (it returned 1 row where eager gives 6)."""
    def fn(a, b):
        return a[: a.shape[0] // 2 - 1] * b

    compiled = torch.compile(fn, backend="tritonize", dynamic=True)
    for rows_a, rows_b in ((10, 4), (4, 6)):
        a, b = torch.randn(rows_a, 3, device=device), torch.randn(rows_b, 3, device=device)
        assert_same(compiled(a, b), fn(a, b))


def test_an_int_input_the_trace_specialized_is_not_reused_for_other_values(cache, device):
    """`x[:, -k:]` with dynamic=True: traced at k=1, AOTAutograd's trace adds Eq(k, 1) and the
    graph returns one column; at k=2 Dynamo's graph, ranges and guards are the same as at k=1
    (the key is made before the trace), so the entry must carry the trace's guards (a review of
    the twenty-first session: k=2 and k=3 returned one column)."""
    def fn(x, k):
        return x[:, -k:].t().contiguous()

    compiled = torch.compile(fn, backend="tritonize", dynamic=True)
    x = torch.randn(6, 8, device=device)
    for k in (1, 2, 3, 1):
        assert_same(compiled(x, k), fn(x, k))


def test_input_mutation_is_not_stored(cache, device):
    def fn(x):
        x.add_(1)
        return x.sin()

    base = torch.randn(8, device=device)
    for out, (x,) in run_twice_unstored(cache, fn, lambda: (base.clone(),)):
        expected_x = base.clone()
        assert_same(out, fn(expected_x))
        assert_same(x, expected_x)


def test_output_that_is_a_view_of_an_input_is_not_stored(cache, device):
    def fn(x):
        return x.t(), x.sin()

    x = torch.randn(4, 6, device=device)
    for (view, sine), _ in run_twice_unstored(cache, fn, lambda: (x,)):
        assert view._base is x or view.data_ptr() == x.data_ptr()
        assert_same((view, sine), fn(x))


def test_outputs_viewing_other_outputs_are_stored_and_hit_as_they_compiled(cache, device):
    """In an inference graph, AOTAutograd returns a view of an intermediate as the compiled graph
    returns it (its metadata says non_alias): the convention is trivial, and a hit returns what
    the compiled graph returns, as the AOTAutograd path does."""
    def fn(x):
        y = x.sin() + 1
        return y, y.view(-1)

    x = torch.randn(4, 6, device=device)
    shared = []
    for expected_stats in ({"miss": 1, "store": 1}, {"miss": 1, "store": 1, "hit": 1}):
        y, flat = compile_fresh(fn)(x)
        assert dynamo_cache.STATS == expected_stats
        assert_same((y, flat), fn(x))
        shared.append(flat.data_ptr() == y.data_ptr())
    assert shared[0] == shared[1]


def test_training_graphs_are_not_stored(cache, device):
    def fn(x, w):
        return (x @ w).relu().sum()

    x, w = torch.randn(4, 5, device=device), torch.randn(5, 3, device=device)
    leaf = w.clone().requires_grad_(True)
    fn(x, leaf).backward()
    for out, (_, compiled_leaf) in run_twice_unstored(cache, fn, lambda: (x, w.clone().requires_grad_(True))):
        out.backward()
        assert_same(out, fn(x, w))
        assert_same(compiled_leaf.grad, leaf.grad)


# ----------------------------------------------------------------------------- what the key depends on


def test_a_different_constant_misses_and_the_same_one_hits(cache, device):
    def make(scale):
        def fn(x):
            return (x * scale).sin()
        return fn

    x = torch.randn(8, device=device)
    assert_same(compile_fresh(make(2.0))(x), make(2.0)(x))
    assert_same(compile_fresh(make(3.0))(x), make(3.0)(x))
    assert dynamo_cache.STATS == {"miss": 2, "store": 2}
    assert_same(compile_fresh(make(2.0))(x), make(2.0)(x))
    assert_same(compile_fresh(make(3.0))(x), make(3.0)(x))
    assert dynamo_cache.STATS == {"miss": 2, "store": 2, "hit": 2}


def test_functions_torch_builds_in_a_factory_are_keyed_by_their_public_name(cache, device):
    """F.max_pool2d is `boolean_dispatch.<locals>.fn` (ResNet-50 missed the cache for it); it is
    keyed as torch.nn.functional.max_pool2d, and return_indices still tells the variants apart."""
    import torch.nn.functional as F

    def pool(x):
        return F.max_pool2d(x, 3, 2, 1) * 2

    def pool_with_indices(x):
        values, indices = F.max_pool2d(x, 3, 2, 1, return_indices=True)
        return values * 2, indices

    x = torch.randn(2, 3, 8, 8, device=device)
    with torch.no_grad():
        for fn in (pool, pool_with_indices, pool):
            assert_same(compile_fresh(fn)(x), fn(x))
    assert dynamo_cache.STATS == {"miss": 2, "store": 2, "hit": 1}


def test_a_different_tensor_constant_misses(cache, device):
    def make(values):
        def fn(x):
            return x + torch.tensor(values, device=x.device)
        return fn

    x = torch.randn(3, device=device)
    assert_same(compile_fresh(make([1.0, 2.0, 3.0]))(x), make([1.0, 2.0, 3.0])(x))
    assert_same(compile_fresh(make([1.0, 2.0, 4.0]))(x), make([1.0, 2.0, 4.0])(x))
    assert dynamo_cache.STATS == {"miss": 2, "store": 2}


def test_different_strides_miss(cache, device):
    def fn(x):
        return x.sin() * 2

    x = torch.randn(4, 6, device=device)
    transposed = torch.randn(6, 4, device=device).t()  # the same size, other strides
    assert_same(compile_fresh(fn)(x), fn(x))
    assert_same(compile_fresh(fn)(transposed), fn(transposed))
    assert dynamo_cache.STATS == {"miss": 2, "store": 2}
    out = compile_fresh(fn)(transposed)
    assert_same(out, fn(transposed))
    assert dynamo_cache.STATS["hit"] == 1


def test_autocast_is_part_of_the_key_and_a_hit_runs_like_aot_autograd(cache, device):
    """Under autocast the trace applied it (bf16 matmul): a hit must run with autocast off, as
    AOTAutograd's wrapper does, or the wrapper's aten calls would be cast again."""
    def fn(a, b):
        return (a @ b).relu() + 1

    a, b = torch.randn(8, 16, device=device), torch.randn(16, 8, device=device)
    assert_same(compile_fresh(fn)(a, b), fn(a, b))
    with torch.autocast(device, dtype=torch.bfloat16):
        expected = fn(a, b)
        cold = compile_fresh(fn)(a, b)
        assert dynamo_cache.STATS == {"miss": 2, "store": 2}
        warm = compile_fresh(fn)(a, b)
    assert dynamo_cache.STATS["hit"] == 1
    assert cold.dtype == warm.dtype == expected.dtype == torch.bfloat16
    assert_same(warm, expected)
    assert torch.equal(warm, cold)


def test_a_hit_calls_the_graph_as_aot_autograd_calls_an_inference_graph():
    """Boxed arguments (the list is the graph's to clear), grad mode off, autocast off when the
    trace ran under autocast, outputs as a list; the caller's modes are restored afterwards."""
    seen = []

    class FakeGraph:
        def __call__(self, args):
            seen.append((len(args), torch.is_grad_enabled(), torch.is_autocast_enabled("cpu")))
            total = args[0] + args[1]
            args.clear()
            return (total,)

    for disable_autocast in (True, False):
        hit = dynamo_cache.CachedInference(FakeGraph(), disable_autocast)
        with torch.enable_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            out = hit(torch.ones(2), torch.ones(2))
            assert torch.is_grad_enabled() and torch.is_autocast_enabled("cpu")
        assert isinstance(out, list) and len(out) == 1 and torch.equal(out[0], torch.full((2,), 2.0))
    assert seen == [(2, False, False), (2, False, True)]


def test_grad_mode_is_part_of_the_key(cache, device):
    model = nn.Linear(8, 4).to(device)
    x = torch.randn(2, 8, device=device)
    with torch.no_grad():
        assert_same(compile_fresh(model)(x), model(x))
    out = compile_fresh(model)(x)  # grad on, parameters need grad: a training graph
    assert out.requires_grad and dynamo_cache.STATS == {"miss": 2, "store": 1, "not_stored": 1}
    with torch.no_grad():
        hit = compile_fresh(model)(x)
    assert dynamo_cache.STATS["hit"] == 1 and not hit.requires_grad
    assert_same(hit, model(x).detach())


def test_graphs_the_key_cannot_describe_are_compiled_every_time(cache, device):
    """A user function allowed in the graph: its code is not in the key."""
    @torch._dynamo.allow_in_graph
    def helper(x):
        return x * 3

    def fn(x):
        return helper(x.sin()) + 1

    x = torch.randn(8, device=device)
    for _ in range(2):
        assert_same(compile_fresh(fn)(x), fn(x))
    assert dynamo_cache.STATS == {"uncached": 2} and dynamo_entries(cache) == []
    with pytest.raises(dynamo_cache.NotCacheable):
        dynamo_cache.function_name(helper)
    assert dynamo_cache.function_name(torch.ops.aten.add.Tensor) == "torch.ops.aten.add.Tensor"


# ----------------------------------------------------------------------------- entries


def test_damaged_entry_is_a_miss_and_is_rewritten(cache, device, caplog):
    def fn(x):
        return x.cos() * 2

    x = torch.randn(8, device=device)
    compile_fresh(fn)(x)
    (entry,) = dynamo_entries(cache)
    data = entry.read_bytes()
    entry.write_bytes(data[:-5] + b"XXXXX")
    dynamo_cache.STATS.clear()
    with caplog.at_level("DEBUG", logger="tritonize.cache"):
        assert_same(compile_fresh(fn)(x), fn(x))
    assert dynamo_cache.STATS == {"miss": 1, "store": 1} and "damaged entry" in caplog.text
    assert entry.read_bytes() == data
    assert_same(compile_fresh(fn)(x), fn(x))
    assert dynamo_cache.STATS["hit"] == 1


def test_entry_whose_graph_is_gone_is_a_miss_and_is_rewritten(cache, device):
    def fn(x):
        return x.exp() - 1

    x = torch.randn(8, device=device)
    compile_fresh(fn)(x)
    for path in (cache / "graphs").iterdir():
        path.unlink()
    dynamo_cache.STATS.clear()
    graph_cache.STATS.clear()
    assert_same(compile_fresh(fn)(x), fn(x))
    assert dynamo_cache.STATS == {"miss": 1, "store": 1} and graph_cache.STATS == {"miss": 1, "store": 1}
    assert_same(compile_fresh(fn)(x), fn(x))
    assert dynamo_cache.STATS["hit"] == 1


def test_explain_on_a_hit_reports_the_kernels(cache, device):
    def fn(x, y):
        return torch.relu(x @ y).sum(1) + y.mean()

    x, y = torch.randn(4, 4, device=device), torch.randn(4, 4, device=device)
    cold = tritonize.explain(fn, x, y)
    warm = tritonize.explain(fn, x, y)
    assert dynamo_cache.STATS == {"miss": 1, "store": 1, "hit": 1}
    assert warm.kernels and [(k.name, k.source) for k in warm.kernels] == [(k.name, k.source) for k in cold.kernels]
    assert str(warm) == str(cold) and "inference" in str(warm)


def test_caching_off_dynamo_cache_off_and_debug_dir_bypass(cache, device, monkeypatch, tmp_path):
    def fn(x):
        return x.tanh()

    x = torch.randn(8, device=device)
    monkeypatch.setenv("TRITONIZE_CACHE", "0")
    for _ in range(2):
        assert_same(compile_fresh(fn)(x), fn(x))
    assert dynamo_cache.STATS == {"uncached": 2} and dynamo_entries(cache) == []
    monkeypatch.delenv("TRITONIZE_CACHE")
    monkeypatch.setenv("TRITONIZE_DYNAMO_CACHE", "0")  # this cache alone: the graph cache still hits
    dynamo_cache.STATS.clear()
    graph_cache.STATS.clear()
    for _ in range(2):
        assert_same(compile_fresh(fn)(x), fn(x))
    assert dynamo_cache.STATS == {"uncached": 2} and dynamo_entries(cache) == []
    assert graph_cache.STATS == {"miss": 1, "store": 1, "hit": 1}
    monkeypatch.delenv("TRITONIZE_DYNAMO_CACHE")
    dynamo_cache.STATS.clear()
    with tritonize.config.patch(debug_dir=str(tmp_path / "debug")):
        for _ in range(2):
            assert_same(compile_fresh(fn)(x), fn(x))
    assert dynamo_cache.STATS == {"uncached": 2} and dynamo_entries(cache) == []


# ----------------------------------------------------------------------------- symbolic sizes


def compile_fresh_dynamic(fn):
    torch._dynamo.reset()
    return torch.compile(fn, backend="tritonize", dynamic=True)


def marked_dynamic_dims(tensor) -> set:
    """The dims AOTAutograd's runtime wrapper marked dynamic: newer torch's unguarded attribute,
    or the weak indices older torch (2.11) sets."""
    marked = getattr(tensor, "_dynamo_propagated_dynamic_indices", None)
    return marked if marked is not None else tensor._dynamo_weak_dynamic_indices


def test_outputs_are_marked_as_older_aot_autograd_marks_them_where_torch_lacks_the_helper(monkeypatch):
    """torch 2.11 has no mark_dynamo_propagated_dynamic_indices: a symbolic graph still compiles,
    and its outputs carry the weak dynamic indices that torch's own runtime wrapper sets there."""
    from torch._functorch._aot_autograd import runtime_wrappers

    monkeypatch.delattr(runtime_wrappers, "mark_dynamo_propagated_dynamic_indices", raising=False)
    mark = dynamo_cache._dynamic_marker()
    tensor = torch.zeros(2, 3)
    mark(tensor, {0})
    mark(tensor, {1})
    assert tensor._dynamo_weak_dynamic_indices == {0, 1}
    assert not hasattr(tensor, "_dynamo_propagated_dynamic_indices")


def test_a_symbolic_graph_hits_at_other_sizes_with_its_guards_installed(cache, device):
    """Keyed by its sizes' expressions and ranges, not this call's sizes: a fresh compile at
    other sizes hits, and the size guards the compile added are Dynamo's guards again."""
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    def fn(x, y):
        return (x * 2 + y).softmax(-1)

    for rows, cols in ((5, 7), (9, 3), (6, 11)):
        x, y = torch.randn(rows, cols, device=device), torch.randn(cols, device=device)
        out = compile_fresh_dynamic(fn)(x, y)
        assert_same(out, fn(x, y))
        assert 0 in marked_dynamic_dims(out)  # marked as AOTAutograd marks them
        [entry] = _debug_get_cache_entry_list(fn.__code__)
        assert "2147483647" in str(entry.guard_manager)  # the int32-indexing guard
    assert dynamo_cache.STATS == {"miss": 1, "store": 1, "hit": 2}


def test_a_symbolic_graph_with_specialized_dims_takes_the_direct_path(cache, device):
    """Dynamo passes a dim it specialized (the 3 of a 3x3 kernel, under dynamic=True) as a SymInt
    of a constant expression, where AOTAutograd's trace has the int: the same input all the same,
    so the graph is stored and runs without AOTAutograd's runtime wrapper (host time a call,
    issue 17's kernel suite: a dynamic convolution's call took 35% longer on the host)."""
    import torch.nn.functional as F

    def fn(x, weight, residual):
        return torch.relu(F.conv2d(x, weight, padding=1) + residual)

    for size in (6, 9):
        x, weight = torch.randn(2, 4, size, size, device=device), torch.randn(4, 4, 3, 3, device=device)
        residual = torch.randn(2, 4, size, size, device=device)
        assert_same(compile_fresh_dynamic(fn)(x, weight, residual), fn(x, weight, residual))
    assert dynamo_cache.STATS == {"miss": 1, "store": 1, "hit": 1}


def test_a_symbolic_graph_whose_stored_guard_fails_here_is_compiled_afresh(cache, device, monkeypatch):
    from tritonize.ir.sizes import SizeOracle

    def fn(x):
        return x.cos() - 1

    compile_fresh_dynamic(fn)(torch.randn(6, 4, device=device))
    monkeypatch.setattr(SizeOracle, "holds_at_hint", lambda self, condition: False)  # sizes past the guard
    x = torch.randn(6, 4, device=device)
    assert_same(compile_fresh_dynamic(fn)(x), fn(x))
    assert dynamo_cache.STATS["hit"] == 0 and dynamo_cache.STATS["miss"] == 2
