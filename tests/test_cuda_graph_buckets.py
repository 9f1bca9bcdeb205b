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
from tritonize.runtime.cuda_graph_buckets import PaddingPlan, bucket_for
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
    """Zeros in padded rows give NaN and -inf there (log, a normalisation by the row's spread);
    the caller's rows see none of it."""
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
