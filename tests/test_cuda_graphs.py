"""mode="reduce-overhead": CUDA graph recordings (runtime/cuda_graphs.py, cudagraphs/).

On the CPU the recordings use FakeCapture (a replay re-runs the wrapper and writes its results
into the memory the recording returned first, as a CUDA replay does), so what the runner decides
(what is read in place, what is copied, when to record again, which outputs to evacuate) is
checked against eager here; on the GPU (TRITONIZE_TEST_DEVICE=cuda) the same tests capture real
CUDA graphs. Every test compares with eager, and checks the caller's inputs and kept outputs.
"""
from __future__ import annotations

import re
import warnings
import weakref

import torch

import tritonize
from tritonize.backend import make_backend
from tritonize.cudagraphs.plan import capture_plan
from tritonize.runtime import cuda_graph_pool, cuda_graphs
from helpers import assert_same


def compiled(fn, device, recorder=None, dynamic=None, **options):
    torch._dynamo.reset()
    capture = "fake" if device == "cpu" else "cuda"
    opts = tritonize.make_options({"cudagraph_capture": capture, **options}, mode="reduce-overhead")
    return torch.compile(fn, backend=make_backend(opts, recorder), dynamic=dynamic)


def notes(recorder) -> list[str]:
    return [note for art in recorder if art != "graph" for note in art.notes]


def recorded(recorder) -> int:
    return sum(note.startswith("CUDA graphs: recorded sizes") for note in notes(recorder))


def mlp(device):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
                               torch.nn.Linear(32, 8)).to(device)


def test_replays_match_eager_and_record_once(device):
    model, recorder = mlp(device), []
    f = compiled(model, device, recorder)
    with torch.no_grad():
        for step in range(5):
            x = torch.randn(4, 16, device=device)
            assert_same(f(x), model(x))
    assert recorded(recorder) == 1, notes(recorder)
    assert any("static input" in note for note in notes(recorder))


def test_kept_outputs_are_never_overwritten(device, repoint):
    """The caller keeps every output (and a view of one) across replays: each keeps its value."""
    model = mlp(device)
    f = compiled(model, device)
    kept, expected = [], []
    with torch.no_grad():
        for step in range(6):
            x = torch.randn(4, 16, device=device)
            out = f(x)
            kept.append(out[:, 2:] if step % 2 else out)
            expected.append(model(x)[:, 2:] if step % 2 else model(x))
        for k, e in zip(kept, expected):
            assert_same(k, e)


def test_dropped_outputs_cost_no_copy(device, monkeypatch, repoint):
    model, moved = mlp(device), []
    real = cuda_graph_pool.evacuate
    monkeypatch.setattr(cuda_graph_pool, "evacuate", lambda storage, refs: moved.append(1) or real(storage, refs))
    f = compiled(model, device)
    with torch.no_grad():
        for step in range(5):
            x = torch.randn(4, 16, device=device)
            assert_same(f(x).sum(), model(x).sum())
    assert not moved
    with torch.no_grad():
        kept = f(x)
        f(x)
    assert len(moved) == 1
    assert_same(kept, model(x))


def test_input_mutation_happens_in_the_caller_tensor(device):
    """A KV-cache-like buffer written with index_copy_ every call: the caller's tensor is
    updated as eager updates it, and the update is part of the recording."""
    cache = torch.zeros(2, 10, 4, device=device)
    expected_cache = cache.clone()

    def step(cache, k, pos):
        cache.index_copy_(1, pos, k)
        return cache.sum(1) * 2

    recorder = []
    f = compiled(step, device, recorder)
    for t in range(6):
        k = torch.randn(2, 1, 4, device=device)
        pos = torch.tensor([t], device=device)
        out = f(cache, k, pos)
        assert_same(out, step(expected_cache, k, pos))
        assert_same(cache, expected_cache)
    assert any("1 input mutation(s) inside the graph" in note for note in notes(recorder)), notes(recorder)
    assert recorded(recorder) == 1


def test_output_viewing_an_input_views_the_callers_tensor(device):
    def fn(x, y):
        return x.t(), (x + y).relu()

    f = compiled(fn, device)
    for step in range(4):
        x, y = torch.randn(3, 5, device=device), torch.randn(3, 5, device=device)
        view, out = f(x, y)
        assert_same(out, fn(x, y)[1])
        assert view.data_ptr() == x.data_ptr() and view.stride() == (1, 5)
        assert_same(view, x.t())


def test_moved_parameter_records_again(device):
    model, recorder = mlp(device), []
    f = compiled(model, device, recorder)
    x = torch.randn(4, 16, device=device)
    with torch.no_grad():
        for step in range(3):
            assert_same(f(x), model(x))
        model[0].weight.data = model[0].weight.data * 0.5  # new memory, same shape
        for step in range(3):
            assert_same(f(x), model(x))
    assert recorded(recorder) == 2, notes(recorder)


def test_weights_swapped_back_and_forth_replay_their_recordings(device):
    """Two sets of weights swapped in turn (`.data`): each set's recording is kept, and a swap
    back replays it (a parameter's move is forced, but a kept recording reading it in place
    needs no recording)."""
    model, recorder = mlp(device), []
    f = compiled(model, device, recorder)
    x = torch.randn(4, 16, device=device)
    weights = [model[0].weight.data, model[0].weight.data * 0.5]
    with torch.no_grad():
        for step in range(3 * cuda_graphs.MAX_RECORDINGS_OF_A_KEY):
            model[0].weight.data = weights[step % 2]
            assert_same(f(x), model(x))
    assert recorded(recorder) == 2, notes(recorder)


def test_a_dynamo_cache_hit_reads_parameters_in_place_as_a_fresh_compile(device, cache):
    """A graph from the Dynamo-level cache has no AOTAutograd metadata: its static inputs (the
    parameters) are read from Dynamo's graph, so a second process reads them in place as the
    first did (they were copied before, or demoted to copies once moved)."""
    from tritonize.caching import dynamo_cache

    model = mlp(device)
    x = torch.randn(4, 16, device=device)
    for attempt in ("miss", "hit"):
        recorder = []
        f = compiled(model, device, recorder)
        with torch.no_grad():
            for step in range(3):
                assert_same(f(x), model(x))
        assert notes(recorder)[0].endswith("6 static input(s), 0 input mutation(s) inside the graph"), \
            (attempt, notes(recorder))
    assert dynamo_cache.STATS["hit"] == 1, dynamo_cache.STATS


def test_a_copied_input_that_stops_moving_is_read_in_place(device):
    """An input that moved while the graph warmed up is copied; once it stays at one address for
    PROMOTE_AFTER calls the graph is recorded again reading it in place (its new contents count
    at every call), and if it moves after all it is copied again, and read in place again once it
    settles (a training loop's first steps move a backward's gradient a few times), after twice
    as many calls at each promotion. (Every tensor stays alive: a new address at every move.)"""
    def fn(x):
        return (x * 3).relu() + 1

    recorder, alive = [], []

    def fresh(n):
        alive.extend(torch.randn(4, 6, device=device) for _ in range(n))
        return alive[-n:]

    f = compiled(fn, device, recorder)
    for x in fresh(3):  # distinct addresses while warming up
        assert_same(f(x), fn(x))
    assert notes(recorder)[-1].endswith("0 input(s) in place, 1 copied"), notes(recorder)
    steady = fresh(1)[0]
    for step in range(cuda_graphs.PROMOTE_AFTER + 2):
        steady.normal_()  # same address, new contents
        assert_same(f(steady), fn(steady))
    assert notes(recorder)[-1].endswith("1 input(s) in place, 0 copied"), notes(recorder)
    for x in fresh(6):  # moving again: read in place where it went, then copied after a second move
        assert_same(f(x), fn(x))
    in_place = [note.endswith("1 input(s) in place, 0 copied") for note in notes(recorder)
                if note.startswith("CUDA graphs: recorded sizes")]
    assert in_place == [False, True, True, False], notes(recorder)
    for patience in (2 * cuda_graphs.PROMOTE_AFTER, 4 * cuda_graphs.PROMOTE_AFTER):
        settled = fresh(1)[0]  # it settles again, elsewhere
        for step in range(patience - 1):
            settled.normal_()
            assert_same(f(settled), fn(settled))
        assert notes(recorder)[-1].endswith("0 input(s) in place, 1 copied"), (patience, notes(recorder))
        settled.normal_()  # the patience-th call in a row at one address: read in place
        assert_same(f(settled), fn(settled))
        assert notes(recorder)[-1].endswith("1 input(s) in place, 0 copied"), (patience, notes(recorder))
        for x in fresh(2):
            assert_same(f(x), fn(x))
    # the first, 3 for the first promotion (in place where it moved first), 2 for each later one
    assert recorded(recorder) == 8, notes(recorder)
    assert not any("run plain launches" in note for note in notes(recorder)), notes(recorder)


def test_an_input_that_returns_to_an_address_replays_its_recording(device):
    """A recording replaced because an input it read in place moved is kept: when the input
    returns to that address (a training loop's gradient moves between a few blocks, and every
    recording changes the allocator's free blocks), the kept recording replays and nothing is
    recorded again. A recording that copies is not kept (its buffer would hold memory), and
    gives way to a kept one only once the input stayed at its address for the patience."""
    def fn(x):
        return (x * 3).relu() + 1

    recorder = []
    f = compiled(fn, device, recorder)
    first, second, third = (torch.randn(4, 6, device=device) for _ in range(3))
    for x in (first, first, second):  # found stable at first, read in place where it moved
        x.normal_()
        assert_same(f(x), fn(x))
    assert recorded(recorder) == 2, notes(recorder)
    for x in (first, second) * 4:
        x.normal_()
        before = x.clone()
        assert_same(f(x), fn(before))
        assert_same(x, before)
    assert recorded(recorder) == 2, notes(recorder)
    assert "CUDA graphs: sizes (): a kept recording replayed where moved inputs returned" in notes(recorder)
    x = third.normal_()  # a quick second move to a new address: copied
    assert_same(f(x), fn(x))
    assert notes(recorder)[-1].endswith("0 input(s) in place, 1 copied"), notes(recorder)
    for x in (first, third) * 10:  # between a kept recording's address and a copied one: no
        x.normal_()  # recording (the copying one replays; a switch would drop it, and record again)
        before = x.clone()
        assert_same(f(x), fn(before))
        assert_same(x, before)
    assert recorded(recorder) == 3, notes(recorder)
    pool = cuda_graph_pool.pool_for("fake" if device == "cpu" else "cuda", torch.device(device))
    held = len(pool.recordings)  # the copying recording and the two kept ones
    for _ in range(cuda_graphs.PROMOTE_AFTER):  # settled where a kept recording reads it: that one
        x = second.normal_()  # replays after the patience, instead of a recording
        assert_same(f(x), fn(x))
    assert recorded(recorder) == 3, notes(recorder)
    assert len(pool.recordings) == held - 1  # (the copying one left, and its buffer)
    for x in (first, second) * 2:
        x.normal_()
        assert_same(f(x), fn(x))
    assert recorded(recorder) == 3, notes(recorder)


def test_kept_recordings_leave_the_pool_with_their_graph(device):
    """The kept recordings of a compiled graph leave the pool when the graph goes
    (torch._dynamo.reset()), as its current ones do."""
    import gc

    def fn(x):
        return (x * 3).relu() + 1

    pool = cuda_graph_pool.pool_for("fake" if device == "cpu" else "cuda", torch.device(device))
    gc.collect()
    before = len(pool.recordings)
    f = compiled(fn, device)
    first, second, third = (torch.randn(4, 6, device=device) for _ in range(3))
    for x in (first, first, second, first, third):
        assert_same(f(x), fn(x))
    assert len(pool.recordings) >= before + 2
    del f
    torch._dynamo.reset()
    gc.collect()
    pool.release_pending()
    assert len(pool.recordings) == before


def test_a_parameter_that_keeps_moving_ends_in_plain_launches(device):
    """A parameter is read in place; one replaced at every call records again each time, up to
    MAX_RECORDINGS_OF_A_KEY recordings of the key, which then runs plain launches (said in
    explain()) and still matches eager."""
    model, recorder = mlp(device), []
    f = compiled(model, device, recorder)
    x = torch.randn(4, 16, device=device)
    old = []  # (kept alive: every weight at a new address, none where a kept recording reads one)
    with torch.no_grad():
        for step in range(cuda_graphs.MAX_RECORDINGS_OF_A_KEY + 4):
            old.append(model[0].weight.data)
            model[0].weight.data = model[0].weight.data * 0.5  # new memory, same shape
            assert_same(f(x), model(x))
    assert recorded(recorder) == cuda_graphs.MAX_RECORDINGS_OF_A_KEY, notes(recorder)
    assert any("run plain launches: the addresses of inputs" in note for note in notes(recorder)), notes(recorder)


def test_an_input_found_stable_that_moves_once_is_read_in_place_where_it_settles(device):
    """An input read in place because it stayed put while warming up moves: the next recording
    reads it in place at its new address (no buffer to copy into, no plain call: either would
    move a backward's gradient again, as freeing its old buffer moved it); a second move right
    after copies it."""
    def fn(x):
        return (x * 3).relu() + 1

    recorder = []
    f = compiled(fn, device, recorder)
    first, settled, third = (torch.randn(4, 6, device=device) for _ in range(3))
    for x in (first, first, settled):
        x.normal_()
        assert_same(f(x), fn(x))
    in_place = [note for note in notes(recorder) if note.startswith("CUDA graphs: recorded sizes")]
    assert [note.endswith("1 input(s) in place, 0 copied") for note in in_place] == [True, True], in_place
    assert "CUDA graphs: sizes (): input(s) [0] read in place moved" in notes(recorder), notes(recorder)
    third.normal_()
    assert_same(f(third), fn(third))
    assert notes(recorder)[-1].endswith("0 input(s) in place, 1 copied"), notes(recorder)


def test_an_input_read_in_place_for_long_that_moves_is_read_in_place_where_it_went(device):
    """A found-stable input that moves after the key's patience (PROMOTE_AFTER replays in a row,
    before any promotion) at one address (as a training loop's gradient does once when the
    program calls torch.cuda.empty_cache()) is read in place at its new address, even after an
    earlier move; one that moves a replay sooner is copied."""
    def fn(x):
        return (x * 3).relu() + 1

    for replays, read_in_place in ((cuda_graphs.PROMOTE_AFTER, True), (cuda_graphs.PROMOTE_AFTER - 1, False)):
        recorder = []
        f = compiled(fn, device, recorder)
        first, second, third = (torch.randn(4, 6, device=device) for _ in range(3))
        # warm-up and recording at first; second: moved once, recorded, replayed `replays` times
        for x in [first, first] + [second] * replays + [third]:
            x.normal_()
            before = x.clone()
            assert_same(f(x), fn(before))
            assert_same(x, before)
        in_place = [note.endswith("1 input(s) in place, 0 copied") for note in notes(recorder)
                    if note.startswith("CUDA graphs: recorded sizes")]
        assert in_place == [True, True, read_in_place], (replays, notes(recorder))


def test_an_input_rotating_through_buffers_records_a_logarithmic_number_of_times(device):
    """An input that moves through more buffers than a key keeps recordings for, staying a few
    calls at each (a ring of buffers), never runs plain, matches eager at every call, and costs
    recordings that grow with the log of the calls: each re-read after the patience doubles it."""
    def fn(x):
        return (x * 3).relu() + 1

    recorder = []
    f = compiled(fn, device, recorder)
    ring = [torch.randn(4, 6, device=device) for _ in range(cuda_graphs.MAX_VARIANTS_OF_A_KEY + 2)]
    calls = 0
    for turn in range(40):
        for _ in range(cuda_graphs.PROMOTE_AFTER + 1):
            x = ring[turn % len(ring)].normal_()
            before = x.clone()
            assert_same(f(x), fn(before))
            assert_same(x, before)
            calls += 1
    assert recorded(recorder) <= 2 * calls.bit_length(), (recorded(recorder), notes(recorder))
    assert not any("run plain launches" in note for note in notes(recorder)), notes(recorder)


def test_a_promotion_is_not_reported_as_a_move(device):
    """explain() names inputs read in place that moved; a copied input promoted to be read in
    place (it stopped moving) is no such move. (The review's case.)"""
    def fn(x):
        return (x * 3).relu() + 1

    recorder = []
    f = compiled(fn, device, recorder)
    for x in [torch.randn(4, 6, device=device) for _ in range(3)]:
        assert_same(f(x), fn(x))
    steady = torch.randn(4, 6, device=device)
    for _ in range(cuda_graphs.PROMOTE_AFTER + 2):
        steady.normal_()
        assert_same(f(steady), fn(steady))
    assert notes(recorder)[-1].endswith("1 input(s) in place, 0 copied"), notes(recorder)
    assert not any("read in place moved" in note for note in notes(recorder)), notes(recorder)


def test_one_recording_per_size_up_to_the_limit(device):
    def fn(x):
        return torch.softmax(x * 3, dim=-1) + 1

    recorder = []
    f = compiled(fn, device, recorder, dynamic=True, cudagraph_sizes=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in (3, 5, 7, 3, 5, 7, 3, 5, 7):
            x = torch.randn(n, 6, device=device)
            assert_same(f(x), fn(x))
    graphs = [art for art in recorder if art != "graph"]
    # distinct sizes recorded per graph (a size is recorded again when an input it read in place,
    # only found at a stable address, moves; a GPU may guard and compile twice)
    per_graph = [len({n.split(":")[1] for n in art.notes if n.startswith("CUDA graphs: recorded sizes")})
                 for art in graphs]
    assert max(per_graph) == 2 and all(n <= 2 for n in per_graph), notes(recorder)
    assert any("more sizes than cudagraph_sizes=2" in str(w.message) for w in caught)


def test_training_steps_match_eager(device):
    torch.manual_seed(0)
    model = mlp(device)
    reference = mlp(device)
    recorder = []
    f = compiled(model, device, recorder)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    for step in range(5):
        x = torch.randn(4, 16, device=device)
        for net, optimizer, call in ((model, opt, f), (reference, ref_opt, reference)):
            optimizer.zero_grad()
            loss = call(x).square().mean()
            loss.backward()
            optimizer.step()
        assert_same(loss, reference(x).square().mean() * 0 + loss)
        for p, q in zip(model.parameters(), reference.parameters()):
            assert_same(p, q, atol=1e-5, rtol=1e-4)
    roles = {art.role for art in recorder if art != "graph"}
    assert roles == {"forward", "backward"}
    # the forward once (or twice, reading more in place); the backward's first recording reads
    # its incoming gradient in place: where that moves (on the CPU it lands elsewhere at every
    # step), again in place after its first TANGENT_MOVES_IN_PLACE moves, then copied
    for art in recorder:
        if art == "graph":
            continue
        in_place = [int(note.split(": ")[2].split()[0]) for note in art.notes
                    if note.startswith("CUDA graphs: recorded sizes")]
        if art.role == "forward":
            assert len(in_place) in (1, 2) and in_place == sorted(set(in_place)), art.notes
        else:
            assert 1 <= len(in_place) <= 2 + cuda_graphs.TANGENT_MOVES_IN_PLACE, art.notes


def test_two_forwards_before_backward(device, repoint):
    """Gradient accumulation: the first forward's saved tensors are alive at the second replay."""
    torch.manual_seed(0)
    model, reference = mlp(device), mlp(device)
    f = compiled(model, device)
    for step in range(4):
        xs = [torch.randn(4, 16, device=device) for _ in range(2)]
        for net, call in ((model, f), (reference, reference)):
            net.zero_grad()
            losses = [call(x).square().mean() for x in xs]
            sum(losses).backward()
        for p, q in zip(model.parameters(), reference.parameters()):
            assert_same(p.grad, q.grad, atol=1e-5, rtol=1e-4)


def test_plan_reads_aot_metadata_and_refuses_what_cannot_be_captured(device):
    """Parameters are static, data-dependent sizes are refused, and on the CPU a real capture is
    refused with the reason."""
    seen = []

    def spy(gm, example_inputs):
        from functorch.compile import make_boxed_func
        from torch._functorch.aot_autograd import aot_module_simplified

        def inference(g, inputs):
            seen.append(capture_plan(g, inputs, "inference", "fake"))
            seen.append(capture_plan(g, inputs, "inference", "cuda"))
            return make_boxed_func(g)

        return aot_module_simplified(gm, example_inputs, fw_compiler=inference)

    model = torch.nn.Linear(4, 4)
    with torch.no_grad():
        torch.compile(model, backend=spy)(torch.randn(2, 4))
    fake, real = seen
    assert fake.static == {0, 1} and fake.refusal is None and fake.key == ()
    assert real.refusal == "a CPU graph (mode='reduce-overhead' has no effect on the CPU)"

    torch._dynamo.reset()
    seen.clear()
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        torch.compile(lambda x: torch.nonzero(x).float().sum(), backend=spy)(torch.randn(5))
    assert seen[0].refusal.startswith("data-dependent sizes")


def test_symbolic_graph_key_reads_sizes(device):
    seen = []

    def spy(gm, example_inputs):
        from functorch.compile import make_boxed_func
        from torch._functorch.aot_autograd import aot_module_simplified

        def inference(g, inputs):
            seen.append(capture_plan(g, inputs, "inference", "fake"))
            return make_boxed_func(g)

        return aot_module_simplified(gm, example_inputs, fw_compiler=inference)

    torch.compile(lambda x, y: x * 2 + y, backend=spy, dynamic=True)(torch.randn(3, 4), torch.randn(4))
    kinds = sorted(kind for _, kind in seen[0].key)
    assert "shape" in kinds and "int" in kinds


def test_kept_outputs_of_several_sizes(device, repoint):
    """Recordings of several sizes share one pool: outputs kept from one size survive replays of
    the others (on the GPU, a later capture may have put its outputs in memory an earlier one
    writes)."""
    def fn(x):
        return (x.sin() * 2).cumsum(-1) + x.square().sum(-1, keepdim=True)

    f = compiled(fn, device, dynamic=True)
    kept = []
    for step in range(3):
        for n in (2, 9, 5):
            x = torch.randn(n, 33, device=device)
            kept.append((f(x), fn(x)))
    for out, expected in kept:
        assert_same(out, expected)


def test_recordings_leave_the_pool_with_their_graph(device):
    """A compiled function that is dropped takes its recordings (and their memory) with it; an
    output the caller still holds keeps its value."""
    import gc

    model = mlp(device)
    pool = cuda_graph_pool.pool_for("fake" if device == "cpu" else "cuda", torch.device(device))
    torch._dynamo.reset()
    gc.collect()
    before = len(pool.recordings)
    f = compiled(model, device)
    with torch.no_grad():
        x = torch.randn(4, 16, device=device)
        for _ in range(3):
            kept = f(x)
    assert len(pool.recordings) == before + 1
    del f
    torch._dynamo.reset()
    gc.collect()
    assert len(pool.recordings) == before
    with torch.no_grad():
        assert_same(kept, model(x))


def test_a_compiled_optimizer_step_updates_parameters_as_eager(device):
    """torch.compile(opt.step) under reduce-overhead: Adam's parameters, moments and step counts
    are mutated inside the recording (AOTAutograd's static inputs), the gradients copied in."""
    import copy

    torch.manual_seed(0)
    model = mlp(device)
    reference = copy.deepcopy(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    reference_opt = torch.optim.Adam(reference.parameters(), lr=1e-2)
    recorder = []
    step = compiled(opt.step, device, recorder)
    for _ in range(5):
        x = torch.randn(4, 16, device=device)
        for m in (model, reference):
            m.zero_grad()
            m(x).square().mean().backward()
        step()
        reference_opt.step()
        for p, q in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-5)
    for p, q in zip(opt.state.values(), reference_opt.state.values()):
        torch.testing.assert_close(p["exp_avg_sq"], q["exp_avg_sq"], rtol=1e-5, atol=1e-6)
    assert recorded(recorder) >= 1, notes(recorder)
    assert any(re.search(r"\b[1-9]\d* input mutation\(s\) inside the graph", note) for note in notes(recorder)), \
        notes(recorder)



def test_a_replay_moves_only_held_outputs_outside_what_its_capture_left_alone(device, repoint):
    """The pool's rule (runtime/cuda_graph_pool.py): before a replay, a handed-out storage the
    caller holds is evacuated unless it lay in memory live through the replay's whole capture;
    one the caller dropped is forgotten. Evacuated tensors keep their values."""
    pool = cuda_graph_pool.GraphPool("fake", torch.device(device))

    class Owner:
        copy_out = False

    owner = Owner()
    memory = [torch.arange(4.0, device=device) + 10 * i for i in range(3)]
    handed = []
    for m in memory:
        storage = cuda_graph_pool.storage_over(m.untyped_storage().data_ptr(), m.untyped_storage().nbytes(),
                                               m.device)
        tensor = cuda_graph_pool.tensor_on(storage, cuda_graph_pool.tensor_meta(m))
        pool.hand_out(storage, (storage.data_ptr(), storage.nbytes()), [weakref.ref(tensor)], owner)
        handed.append(tensor)
    del storage, tensor
    inside, outside, dropped = handed
    del handed
    kept = frozenset({(memory[0].data_ptr(), memory[0].untyped_storage().nbytes())})
    del dropped
    assert pool.before_replay(kept)
    assert inside.data_ptr() == memory[0].data_ptr()
    assert outside.data_ptr() != memory[1].data_ptr()
    assert_same(outside, torch.arange(4.0, device=device) + 10)
    memory[1].fill_(-1)  # what a replay writes there no longer reaches the caller's tensor
    assert_same(outside, torch.arange(4.0, device=device) + 10)
    assert [h.ptr for h in pool.handed] == [memory[0].data_ptr()]
    assert not owner.copy_out


def test_the_backwards_capture_frees_saved_activations_after_their_last_read(device):
    """Training under reduce-overhead: where the pool reuses memory (CUDA), the saved activations
    reach the backward's capture without the caller's reference, die after their last read and
    give their memory to the backward; gradients match eager's at every step, and outputs the
    caller keeps across steps keep their values."""
    torch.manual_seed(0)
    model, reference = mlp(device), mlp(device)
    recorder = []
    f = compiled(model, device, recorder)
    kept = []
    for step in range(6):
        x = torch.randn(4, 16, device=device)
        for net, call in ((model, f), (reference, reference)):
            net.zero_grad()
            out = call(x)
            out.square().mean().backward()
            if net is model:
                kept.append((out.detach(), reference(x).detach()))
        for p, q in zip(model.parameters(), reference.parameters()):
            assert_same(p.grad, q.grad, atol=1e-5, rtol=1e-4)
    for out, expected in kept:
        assert_same(out, expected, atol=1e-5, rtol=1e-4)
    backward_notes = [note for art in recorder if art != "graph" and art.role == "backward" for note in art.notes]
    freed = [int(re.search(r"(\d+) freed inside", note).group(1)) for note in backward_notes
             if "freed inside the graph" in note]
    if device == "cpu":  # FakeCapture keeps its inputs: no reuse
        assert not freed, backward_notes
    else:
        assert freed and min(freed) > 0, backward_notes


def test_training_with_batch_norm_records_forward_and_backward(device):
    """A training forward that mutates its inputs (batch norm's running statistics): the new
    values the capture wrote into the inputs die after it, and the backward is still recorded
    (on CUDA, restoring the pool's allocator state before its capture accounts for them).
    Gradients and running statistics match eager's."""
    import copy

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                torch.nn.Flatten(), torch.nn.Linear(8 * 6 * 6, 4)).to(device)
    reference = copy.deepcopy(model)
    recorder = []
    f = compiled(model, device, recorder)
    for step in range(5):
        x = torch.randn(2, 3, 8, 8, device=device)
        for net, call in ((model, f), (reference, reference)):
            net.zero_grad()
            call(x).square().mean().backward()
        for p, q in zip(model.parameters(), reference.parameters()):
            assert_same(p.grad, q.grad, atol=1e-4, rtol=1e-3)
        assert_same(model[1].running_mean, reference[1].running_mean, atol=1e-5, rtol=1e-4)
    for art in recorder:
        if art != "graph":
            assert not any("off, every call" in note for note in art.notes), art.notes
            assert any(note.startswith("CUDA graphs: recorded sizes") for note in art.notes), art.notes


def test_a_graphs_output_fed_back_stays_copied(device):
    """h = f(h): from the recording on, the input is the graph's own last output, at one address
    in the pool. It is not promoted to be read in place (recording again would evacuate it and
    move it again): one recording, and every value as eager's."""
    def fn(x):
        return torch.tanh(x * 0.9 + 0.1)

    recorder = []
    f = compiled(fn, device, recorder)
    h = torch.randn(4, 6, device=device)
    expected = h.clone()
    with torch.no_grad():
        for step in range(cuda_graphs.PROMOTE_AFTER + 4):
            h = f(h)
            expected = fn(expected)
            assert_same(h, expected)
    assert recorded(recorder) == 1, notes(recorder)


def test_a_graph_dropped_during_a_capture_leaves_the_pool_after_it(device):
    """The garbage collector may drop a compiled graph while the pool captures or evacuates
    (`busy`): its recordings wait in `pending` and leave once the pool is free again."""
    pool = cuda_graph_pool.GraphPool("fake", torch.device(device))

    class Recording:
        storages: list = []

    recording = Recording()
    pool.recordings.append(recording)
    pool.busy += 1
    pool.release_later({(): recording})
    assert pool.recordings == [recording] and pool.pending
    pool.busy -= 1
    pool.release_pending()
    assert pool.recordings == [] and not pool.pending


def _in_a_graph_pool(ptr: int) -> bool:
    for segment in torch.cuda.memory_snapshot():
        if segment["address"] <= ptr < segment["address"] + segment["total_size"]:
            return tuple(segment.get("segment_pool_id", (0, 0))) != (0, 0)
    return False


def test_a_copied_inputs_buffer_is_filled_after_the_evacuation(device):
    """A copied input's buffer is pool memory on CUDA, which the capture allocated and later
    captures may use between replays: graph b's capture may put its output over graph a's
    buffer. Before a's replay the output the caller keeps is evacuated, then a's buffer filled:
    every kept value is eager's, and the buffers lie in the graph pool, not between the caller's
    eager tensors."""
    def fa(x):
        return x * 2 + 1

    def fb(w):
        return torch.sin(w)

    recorder = []
    f_a = compiled(fa, device, recorder)  # (compiled() resets Dynamo: b is compiled after it, on the same pool)
    f_b = torch.compile(fb, backend=make_backend(tritonize.make_options(
        {"cudagraph_capture": "fake" if device == "cpu" else "cuda"}, mode="reduce-overhead"), recorder))
    w = torch.randn(32, 32, device=device)
    inputs, kept, over_a_buffer = [], [], False  # (every input kept: each lands at a new address, so it is copied)
    for step in range(6):
        inputs.append(torch.randn(32, 32, device=device))
        kept.append((f_a(inputs[-1]), fa(inputs[-1])))
        kept.append((f_b(w), fb(w)))
        buffers = {buffer.data_ptr() for pool in cuda_graph_pool._POOLS.values() for r in pool.recordings
                   for _, buffer in r.copies}
        over_a_buffer |= kept[-1][0].data_ptr() in buffers
        w.add_(0.5)
    for out, expected in kept:
        assert_same(out, expected)
    copying = [r for pool in cuda_graph_pool._POOLS.values() for r in pool.recordings if r.copies]
    assert copying, notes(recorder)
    if device != "cpu":  # (the case this tests: b's output was handed out over a's buffer)
        assert all(_in_a_graph_pool(buffer.data_ptr()) for r in copying for _, buffer in r.copies)
        assert over_a_buffer


def test_an_output_in_a_copied_inputs_freed_buffer_is_no_view_of_the_input(device):
    """On CUDA the capture frees a copied input's buffer after its last read, and a later output
    of the same size may take its memory: that output is the graph's own, not a view of the
    caller's input (which a replay would otherwise hand out for it)."""
    w = torch.randn(64, 64, device=device) / 8

    def fn(x):
        return (x @ w) @ w

    recorder = []
    f = compiled(fn, device, recorder)
    inputs, in_the_buffer = [], False  # (every input kept: each call's lands at a new address, so it is copied)
    with torch.no_grad():
        for step in range(5):
            inputs.append(torch.randn(64, 64, device=device))
            out = f(inputs[-1])
            buffers = {buffer.data_ptr() for pool in cuda_graph_pool._POOLS.values() for r in pool.recordings
                       for _, buffer in r.copies}
            in_the_buffer |= out.data_ptr() in buffers
            assert_same(out, fn(inputs[-1]), atol=1e-5, rtol=1e-4)
    assert any(re.search(r"recorded sizes .*, [1-9] copied", note) for note in notes(recorder)), notes(recorder)
    if device != "cpu":  # (the case this tests: the output took the freed buffer's memory)
        assert in_the_buffer


def test_a_backwards_first_recording_reads_its_incoming_gradient_in_place(device):
    """The warm-up step runs plain launches, so the incoming gradient's address at the second
    step says nothing of a training loop's later ones: the backward's first recording reads it
    in place (a copy would grow the pool for good). The gradient is made at a new address at
    every step (earlier ones kept alive), so it moves: read in place again after each of its
    first TANGENT_MOVES_IN_PLACE moves, then copied. Gradients match eager's at every step."""
    torch.manual_seed(0)
    model, reference = mlp(device), mlp(device)
    recorder = []
    f = compiled(model, device, recorder)
    kept = []  # (every step's incoming gradient kept alive: the next lands elsewhere)
    x = torch.randn(4, 16, device=device)  # (one input for all steps: only the gradient moves)
    for step in range(cuda_graphs.TANGENT_MOVES_IN_PLACE + 4):
        gradient = torch.randn(4, 8, device=device)
        for net, call in ((model, f), (reference, reference)):
            net.zero_grad()
            out = call(x)
            kept.append(gradient.clone())
            out.backward(kept[-1])
        for p, q in zip(model.parameters(), reference.parameters()):
            assert_same(p.grad, q.grad, atol=1e-5, rtol=1e-4)
    backward = [note for art in recorder if art != "graph" and art.role == "backward" for note in art.notes
                if note.startswith("CUDA graphs: recorded sizes")]
    moves = cuda_graphs.TANGENT_MOVES_IN_PLACE
    assert [re.search(r"(\d+) copied", note).group(1) for note in backward] == ["0"] * (1 + moves) + ["1"], backward


def test_a_fresh_host_scalar_at_every_call_matches_eager(device):
    """A 0-d CPU tensor made anew at each call (on CUDA a host scalar: its value is in the size
    key) is copied into a buffer that outlives the capture (on CUDA not pool memory, which the
    capture would free after the wrapper read it; writing into it then would be a write into
    freed host memory, which this test sees only if it crashes): every call matches eager."""
    def fn(x, scale):
        return x * scale + 1

    recorder = []
    f = compiled(fn, device, recorder)
    x = torch.randn(8, device=device)
    scales = []  # (every scalar kept: each call's lands at a new address, so it is copied)
    with torch.no_grad():
        for step in range(5):
            scales.append(torch.tensor(2.0))
            assert_same(f(x, scales[-1]), fn(x, scales[-1]))
    assert recorded(recorder) == 1, notes(recorder)


def test_a_gradient_read_in_place_by_the_first_recording_stays_in_place_when_another_input_settles(device):
    """The backward's first recording reads its incoming gradient in place where it differs from
    the warm-up call's; a later recording made for another reason (the saved input x, copied at
    first, settles and is promoted, in the forward and then in the backward) reads the gradient
    in place too, where it still is, instead of copying it. Gradients match eager's at every step."""
    torch.manual_seed(0)
    model, reference = mlp(device), mlp(device)
    recorder = []
    f = compiled(model, device, recorder)
    xs = [torch.randn(4, 16, device=device) for _ in range(2)]
    gradients = [torch.randn(4, 8, device=device) for _ in range(2)]
    for step in range(4 + 2 * cuda_graphs.PROMOTE_AFTER):
        x, gradient = xs[min(step, 1)], gradients[min(step, 1)]  # (both move once, then stay)
        for net, call in ((model, f), (reference, reference)):
            net.zero_grad()
            call(x).backward(gradient)
        for p, q in zip(model.parameters(), reference.parameters()):
            assert_same(p.grad, q.grad, atol=1e-5, rtol=1e-4)
    backward = [note for art in recorder if art != "graph" and art.role == "backward" for note in art.notes
                if note.startswith("CUDA graphs: recorded sizes")]
    # (recorded again when the forward's promotion of x moves the saved activations, and at the
    # backward's own promotion of x: the gradient is never among the copied)
    assert [int(re.search(r"(\d+) copied", note).group(1)) for note in backward] == [1] * (len(backward) - 1) + [0], \
        backward
