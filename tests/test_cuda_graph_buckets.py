"""CUDA graphs' padding to size buckets (option cudagraph_buckets; cudagraphs/padding.py decides
where it is legal, runtime/cuda_graph_buckets.py pads and cuts back).

Every test compares with eager (values, strides, the caller's inputs, kept outputs); on the CPU
the recordings are FakeCapture's, on the GPU (TRITONIZE_TEST_DEVICE=cuda) real CUDA graphs.
"""
from __future__ import annotations

import pytest
import torch

import tritonize
from tritonize.backend import make_backend
from tritonize.caching import dynamo_cache
from tritonize.runtime.cuda_graph_buckets import Padder, PaddingPlan, bucket_for
from helpers import assert_same

BUCKETS = (2, 4, 8, 16)


def compiled(fn, device, recorder=None, buckets=BUCKETS, dynamic=True, **options):
    torch._dynamo.reset()
    capture = "fake" if device == "cpu" else "cuda"
    opts = tritonize.make_options({"cudagraph_capture": capture, "cudagraph_buckets": buckets, **options},
                                  mode="reduce-overhead")
    return torch.compile(fn, backend=make_backend(opts, recorder), dynamic=dynamic)


def batch_of(batch: int, device, width: int = 4) -> torch.Tensor:
    """A (batch, width) input whose batch alone is a symbolic size."""
    x = torch.randn(batch, width, device=device)
    torch._dynamo.mark_dynamic(x, 0)
    return x


def notes(recorder) -> list[str]:
    return [note for art in recorder if art != "graph" for note in art.notes]


def recorded_sizes(recorder) -> list[str]:
    return [note.split("recorded sizes ")[1].split(":")[0] for note in notes(recorder)
            if note.startswith("CUDA graphs: recorded sizes")]


def refusals(recorder) -> str:
    return "\n".join(note for note in notes(recorder) if "is not padded" in note)


def padded(recorder) -> bool:
    return any("padded up to the next of the buckets" in note for note in notes(recorder))


def mlp(device):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
                               torch.nn.Linear(32, 8)).to(device)


def test_batches_share_the_recording_of_their_bucket(device, repoint):
    """Batches 3..8 run at buckets 4 and 8: two recordings; every output (kept across replays)
    has eager's values and strides, and the inputs are untouched."""
    model, recorder = mlp(device), []
    f = compiled(model, device, recorder)
    kept = []
    with torch.no_grad():
        for batch in (3, 5, 3, 6, 7, 4, 8, 3, 5):
            x = torch.randn(batch, 16, device=device)
            before = x.clone()
            out = f(x)
            assert out.shape == (batch, 8) and out.stride() == (8, 1)
            assert_same(out, model(x))
            assert_same(x, before)
            kept.append((out, model(x)))
    for out, expected in kept:
        assert_same(out, expected)
    assert padded(recorder), notes(recorder)
    assert sorted(recorded_sizes(recorder)) == ["(4, (4, 16))", "(8, (8, 16))"], notes(recorder)


def test_padded_rows_never_reach_the_callers(device):
    """Rows computed at the bucket's size (a normalisation by the row's spread, a log) are cut
    away; the caller's rows are eager's."""
    def fn(x):
        centred = x - x.mean(-1, keepdim=True)
        return centred / centred.std(-1, keepdim=True), torch.log(x.abs()).sum(-1)

    recorder = []
    f = compiled(fn, device, recorder)
    for batch in (3, 3, 3, 5):
        x = torch.randn(batch, 6, device=device) + 0.1
        assert_same(f(x), fn(x))
    assert padded(recorder), notes(recorder)


def test_a_size_above_the_largest_bucket_is_recorded_as_it_is(device):
    model, recorder = mlp(device), []
    f = compiled(model, device, recorder, buckets=(4,))
    with torch.no_grad():
        for batch in (6, 6, 6, 3, 3, 3):
            x = torch.randn(batch, 16, device=device)
            assert_same(f(x), model(x))
    assert sorted(recorded_sizes(recorder)) == ["(4, (4, 16))", "(6, (6, 16))"], notes(recorder)


def test_a_graph_from_the_dynamo_cache_keys_its_recordings_by_the_symbolic_shapes(device, cache):
    """A hit of the Dynamo-level cache gets this call's real tensors from Dynamo; which sizes are
    symbolic comes from the traced inputs, so its recordings are keyed as a fresh compile's (the
    tensor's shape with the size argument; not the size argument alone)."""
    model = mlp(device)
    for attempt in ("miss", "hit"):
        recorder = []
        f = compiled(model, device, recorder, buckets=(4,))
        with torch.no_grad():
            for batch in (6, 6, 6):
                x = torch.randn(batch, 16, device=device)
                assert_same(f(x), model(x))
        assert recorded_sizes(recorder) == ["(6, (6, 16))"], (attempt, notes(recorder))
    assert dynamo_cache.STATS["hit"] == 1, dynamo_cache.STATS


def test_size_arguments_are_padded_with_the_tensors(device):
    """A size that reaches the graph as an int (x.view(n, -1)) is padded with the tensors."""
    def fn(x):
        n = x.shape[0]
        return (x.view(n, -1) * 2).relu().view(n, 2, -1)

    recorder = []
    f = compiled(fn, device, recorder)
    for batch in (3, 3, 3, 7):
        x = torch.randn(batch, 2, 5, device=device)
        out = f(x)
        assert_same(out, fn(x))
        assert out.stride() == fn(x).stride()
    assert padded(recorder), notes(recorder)


class Block(torch.nn.Module):
    def __init__(self, width=32, heads=4):
        super().__init__()
        self.ln = torch.nn.LayerNorm(width)
        self.attn = torch.nn.MultiheadAttention(width, heads, batch_first=True)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(width, 64), torch.nn.GELU(), torch.nn.Linear(64, width))

    def forward(self, x):
        y = self.ln(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        return x + self.mlp(x)


def test_a_transformer_pads_its_batch_but_not_its_sequence(device):
    """Attention mixes along the sequence (its keys), so only the batch is padded; a merged
    batch x sequence dimension (the projections' rows) is followed through the reshapes."""
    torch.manual_seed(0)
    model, recorder = Block().to(device).eval(), []
    f = compiled(model, device, recorder)
    with torch.no_grad():
        for batch, length in ((3, 5), (3, 5), (3, 5), (5, 5), (7, 5), (6, 5), (3, 6)):
            x = torch.randn(batch, length, 32, device=device)
            assert_same(f(x), model(x))
    assert padded(recorder), notes(recorder)
    assert "attends along" in refusals(recorder), notes(recorder)
    assert sorted(recorded_sizes(recorder))[:2] == ["(4, 5, (4, 5, 32))", "(8, 5, (8, 5, 32))"], notes(recorder)


@pytest.mark.parametrize("fn, why", [
    (lambda x: x.sum(0) * 2, "reduces along"),
    (lambda x: x.cumsum(0) + 1, "mixes elements along"),
    (lambda x: x.softmax(0), "reduces along"),
    (lambda x: x.t() @ x, "contracts along"),
    (lambda x: x / x.shape[0], "as a number"),
    (lambda x: x[1:] * 2, "slices"),
    (lambda x: x.reshape(x.shape[1], x.shape[0]) + 1, "reshapes across"),
    (lambda x: torch.sort(x, 0)[0], "not known to keep"),
], ids=["sum", "cumsum", "softmax", "contraction", "size-as-number", "slice", "reshape", "unknown-op"])
def test_operations_that_mix_along_the_size_refuse_padding(device, fn, why):
    recorder = []
    f = compiled(fn, device, recorder, dynamic=None)
    for batch in (3, 3, 3, 5):
        x = batch_of(batch, device)
        assert_same(f(x), fn(x))
    assert not padded(recorder), notes(recorder)
    assert why in refusals(recorder), notes(recorder)
    assert "(4, " not in " ".join(recorded_sizes(recorder))


@pytest.mark.parametrize("fn", [lambda x: x.softmax(-1), lambda x: x.sum(1), lambda x: x.cumsum(1)],
                         ids=["softmax", "sum", "cumsum"])
def test_operations_along_other_dimensions_allow_padding(device, fn):
    recorder = []
    f = compiled(fn, device, recorder, dynamic=None)
    for batch in (3, 3, 3, 5):
        x = batch_of(batch, device)
        assert_same(f(x), fn(x))
    assert padded(recorder), notes(recorder)


def test_input_mutation_and_aliased_outputs_refuse_padding(device):
    def mutate(x):
        x.mul_(2)
        return x + 1

    def alias(x):
        return x[:, :2], x + 1

    for fn, why in ((mutate, "mutates an input"), (alias, "aliases")):
        recorder = []
        f = compiled(fn, device, recorder)
        for batch in (3, 3, 3):
            x = torch.randn(batch, 4, device=device)
            expected_x = x.clone()
            assert_same(f(x), fn(expected_x))
            assert_same(x, expected_x)
        assert why in refusals(recorder), notes(recorder)


def test_without_buckets_every_size_is_recorded(device):
    model, recorder = mlp(device), []
    f = compiled(model, device, recorder, buckets=())
    with torch.no_grad():
        for batch in (3, 3, 3, 5, 5, 5):
            x = torch.randn(batch, 16, device=device)
            assert_same(f(x), model(x))
    assert sorted(recorded_sizes(recorder)) == ["(3, (3, 16))", "(5, (5, 16))"]


def test_a_dynamo_cache_hit_pads_from_the_stored_plan(cache, device):
    def fn(x):
        return (x * 2).relu() + 1

    for attempt in range(2):
        recorder = []
        f = compiled(fn, device, recorder, dynamic=None)
        for batch in (3, 3, 3):
            x = batch_of(batch, device)
            assert_same(f(x), fn(x))
        assert padded(recorder), notes(recorder)
        assert [size[:2] for size in recorded_sizes(recorder)] == ["(4"], notes(recorder)
    assert dynamo_cache.STATS == {"miss": 1, "store": 1, "hit": 1}, dynamo_cache.STATS


def test_plans_round_trip_through_json_and_buckets_respect_guards():
    plan = PaddingPlan(symbols=("s0",), upper=(10,), inputs=((0, 0, 0, 1), (1, -1, 0, 1)), outputs=((0, 0, 0),),
                       refused=(("s1", "attends"),))
    assert PaddingPlan.from_json(plan.to_json()) == plan
    assert bucket_for(3, (2, 4, 16), None) == 4
    assert bucket_for(5, (2, 4, 16), 10) == 5  # 16 is past the symbol's guards: exact size
    assert bucket_for(17, (2, 4, 16), None) == 17
    with pytest.raises(ValueError, match="cudagraph_buckets"):
        tritonize.make_options({"cudagraph_buckets": (0, 4)})


def check_batches(fn, device, make, batches=(3, 3, 3, 5, 6)):
    """fn compiled with buckets, called at several batch sizes (make(batch) -> inputs, batch dims
    marked dynamic), each result compared with eager; returns the recorder's refusals."""
    recorder = []
    f = compiled(fn, device, recorder, dynamic=None)
    for batch in batches:
        inputs = make(batch)
        assert_same(f(*inputs), fn(*inputs))
    return refusals(recorder), padded(recorder)


def dynamic_batch(x):
    torch._dynamo.mark_dynamic(x, 0)
    return x


def test_a_slice_that_starts_at_the_size_is_not_padded(device):
    """t[n:n + 1] picks another row of t once n is padded."""
    def fn(x, t):
        return x * t[x.shape[0]:x.shape[0] + 1]

    why, was_padded = check_batches(fn, device, lambda b: (dynamic_batch(torch.randn(b, 4, device=device)),
                                                          torch.randn(20, 4, device=device)))
    assert not was_padded and "as a number" in why, why


def test_padded_rows_copy_a_real_row(device):
    """Ids minus one and a remainder by a divisor: padded rows copy the first real row, so no
    index leaves the table and no divisor is zero."""
    weight = torch.randn(10, 4, device=device)

    def shifted(ids):
        return torch.nn.functional.embedding(ids - 1, weight)

    def remainder(a, d):
        return (a % d).float()

    _, was_padded = check_batches(shifted, device, lambda b: (
        dynamic_batch(torch.randint(1, 10, (b, 3), device=device)),))
    assert was_padded
    _, was_padded = check_batches(remainder, device, lambda b: (
        dynamic_batch(torch.randint(0, 50, (b, 3), device=device)),
        dynamic_batch(torch.randint(1, 7, (b, 3), device=device))))
    assert was_padded


def test_positions_along_the_size_are_not_padded(device):
    """arange(n) padded would number rows past the table."""
    weight = torch.randn(10, 4, device=device)

    def fn(x):
        return x + torch.nn.functional.embedding(torch.arange(x.shape[0], device=x.device), weight)

    why, was_padded = check_batches(fn, device, lambda b: (dynamic_batch(torch.randn(b, 4, device=device)),),
                                    batches=(9, 9, 9, 7))
    assert not was_padded and "numbers the positions" in why, why


def test_an_input_whose_strides_hold_the_size_is_not_padded(device):
    def fn(x, y):
        return x * 2, y + 1

    recorder = []
    f = compiled(fn, device, recorder)
    for batch in (3, 3, 3):
        x, base = torch.randn(batch, 7, device=device), torch.randn(5, batch, device=device)
        assert_same(f(x, base[:, :2]), fn(x, base[:, :2]))
    assert "strides depend on" in refusals(recorder), notes(recorder)


def test_an_attention_mask_lined_up_differently_is_not_padded(device):
    """The mask's rows run batch-major where the queries' run the other way: padding would give
    each query another mask (the mask may come as a keyword argument)."""
    heads, length, width = 2, 3, 4

    def fn(x, kx, vx, m):
        s = x.shape[1]
        q, k, v = (t.reshape(2 * s, heads, length, width) for t in (x, kx, vx))
        mask = m.reshape(2 * s, 1, length, length)
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask) \
            .reshape(2, s, heads, length, width).sum(0)

    def make(batch):
        x, k, v = (torch.randn(2, batch, heads, length, width, device=device) for _ in range(3))
        for t in (x, k, v):
            torch._dynamo.mark_dynamic(t, 1)
        return x, k, v, dynamic_batch(torch.randn(batch, 2, 1, length, length, device=device))

    why, was_padded = check_batches(fn, device, make, batches=(3, 3, 3, 5))
    assert not was_padded, why


def test_a_call_whose_buckets_break_a_guard_runs_at_its_own_sizes():
    """The compiled code may rely on any guard on a padded size (a divisibility, an index width
    over a product of sizes): a call pads only where every one holds at its buckets."""
    plan = PaddingPlan(symbols=("s0",), upper=(None,), inputs=((0, 0, 0, 1),), outputs=((0, 0, 0),),
                       guards=("Eq(Mod(s0, 2), 0)", "s0*s1 <= 40"), readers=(("s0", 0, 0), ("s1", 0, 1)))
    padder = Padder(PaddingPlan.from_json(plan.to_json()), (5, 8))
    assert padder.targets([torch.empty(6, 4)]) == [(6, 8)]  # 8 is even, 8 * 4 <= 40
    assert padder.targets([torch.empty(3, 4)]) is None  # 5 is odd
    assert padder.targets([torch.empty(6, 8)]) is None  # 8 * 8 > 40
    assert padder.targets([torch.empty(8, 4)]) is None  # a bucket already


def test_a_padded_input_is_copied_even_where_it_lands_on_pool_memory(device, monkeypatch):
    """A padded input is a fresh copy at every call: it is never read in place, even when its
    copy happens to land at an address a recording of the pool reads (a stale recording's
    input; seen on the GPU in a worker that ran other tests first)."""
    from tritonize.runtime import cuda_graph_pool

    monkeypatch.setattr(cuda_graph_pool.GraphPool, "resident", lambda self, ptr: True)
    model, recorder = mlp(device), []
    f = compiled(model, device, recorder)
    with torch.no_grad():
        for batch in (3, 5, 3, 6, 7, 8, 5):
            x = torch.randn(batch, 16, device=device)
            assert_same(f(x), model(x))
    assert sorted(recorded_sizes(recorder)) == ["(4, (4, 16))", "(8, (8, 16))"], notes(recorder)
    recorded = [note for note in notes(recorder) if note.startswith("CUDA graphs: recorded sizes")]
    assert all(note.endswith("1 copied") for note in recorded), recorded
