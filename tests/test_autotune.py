"""Autotuning logic with a fake compiler and a fake timer (no GPU): selection, spills, failures,
register-pressure variants, coordinate descent, and protecting the arguments a kernel writes."""
import pytest
import torch

from tritonize.runtime import autotune
from tritonize.runtime.benchmarking import WrittenArgs, written_params
from tritonize.runtime.heuristics import DeviceInfo, KernelShape, candidates, make_config

H100 = DeviceInfo()


class FakeCompiler:
    """compile_many for autotune.select: Variants whose registers/spills/failures come from tables."""

    def __init__(self, spills=None, regs=None, fails=()):
        self.spills, self.regs, self.fails = spills or {}, regs or {}, set(fails)
        self.compiled = []

    def __call__(self, configs):
        out = []
        for c in configs:
            self.compiled.append(c)
            key = _key(c)
            if key in self.fails:
                out.append(RuntimeError(f"out of resources for {c}"))
            else:
                out.append(autotune.Variant(c, launch=lambda: None, n_regs=self.regs.get(key, 32),
                                            n_spills=self.spills.get(key, 0)))
        return out


def _key(config):
    return tuple(sorted(config.blocks.items())) + (config.num_warps, config.num_stages)


class FakeTimer:
    """time_variants for autotune.select: seconds from cost(config); `calls` lists each call's
    configs (one call times its variants together, taking turns on a GPU)."""

    def __init__(self, cost):
        self.cost, self.timed, self.calls = cost, [], []

    def __call__(self, variants):
        configs = [v.config for v in variants]
        self.calls.append(configs)
        self.timed += configs
        return [self.cost(c) for c in configs]


SHAPE = KernelShape("reduction", 100_000, 1, 8192)


def cfg(x, r, warps, stages=1, shape=SHAPE):
    return make_config(shape, {"XBLOCK": x, "RBLOCK": r}, warps, stages)


def test_fastest_config_wins():
    configs = [cfg(1, 2048, 8), cfg(64, 32, 8), cfg(1, 1024, 4)]
    times = {_key(configs[0]): 3e-3, _key(configs[1]): 1e-3, _key(configs[2]): 2e-3}
    timer = FakeTimer(lambda c: times[_key(c)])
    result = autotune.select("k", SHAPE, configs, FakeCompiler(), timer, "default", H100)
    assert result.best.config == configs[1] and result.reason == "timed"
    assert timer.calls == [configs] and result.timings[configs[0]] == 3e-3  # timed together


def test_a_single_candidate_is_not_timed():
    timer = FakeTimer(lambda c: 1.0)
    result = autotune.select("k", SHAPE, [cfg(1, 2048, 8)], FakeCompiler(), timer, "default", H100)
    assert result.reason == "only one config" and timer.timed == []


def test_spilling_configs_are_dropped():
    configs = [cfg(1, 2048, 8), cfg(64, 32, 8)]
    compiler = FakeCompiler(spills={_key(configs[1]): 12})
    timer = FakeTimer(lambda c: 1e-3 if c == configs[1] else 5e-3)  # the spilling one would be faster
    result = autotune.select("k", SHAPE, configs, compiler, timer, "default", H100)
    assert result.best.config == configs[0] and configs[1] not in timer.timed


def test_when_all_spill_the_least_spilling_remain():
    configs = [cfg(1, 2048, 8), cfg(64, 32, 8), cfg(1, 1024, 4)]
    compiler = FakeCompiler(spills={_key(configs[0]): 40, _key(configs[1]): 8, _key(configs[2]): 8})
    timer = FakeTimer(lambda c: 1e-3 if c == configs[2] else 2e-3)
    result = autotune.select("k", SHAPE, configs, compiler, timer, "default", H100)
    assert set(timer.timed) == {configs[1], configs[2]} and result.best.config == configs[2]


def test_configs_that_fail_to_compile_or_run_are_skipped():
    configs = [cfg(1, 2048, 8), cfg(64, 32, 8), cfg(1, 1024, 4)]
    compiler = FakeCompiler(fails=[_key(configs[0])])

    def cost(c):
        if c == configs[1]:
            raise RuntimeError("launch failed")
        return 2e-3

    result = autotune.select("k", SHAPE, configs, compiler, FakeTimer(cost), "default", H100)
    assert result.best.config == configs[2] and result.timings[configs[1]] == float("inf")
    with pytest.raises(autotune.NoUsableConfig, match="no launch config compiled"):
        autotune.select("k", SHAPE, configs[:1], compiler, FakeTimer(cost), "default", H100)


def test_register_pressure_adds_a_half_rblock_variant():
    configs = [cfg(1, 2048, 8), cfg(64, 32, 8)]
    compiler = FakeCompiler(regs={_key(configs[0]): 200})
    halved = cfg(1, 1024, 8)
    timer = FakeTimer(lambda c: 1e-3 if c == halved else 2e-3)
    result = autotune.select("k", SHAPE, configs, compiler, timer, "default", H100)
    assert compiler.compiled == configs + [halved]
    assert result.best.config == halved and result.compiled == 3


def test_a_single_candidate_with_register_pressure_is_timed_against_its_variant():
    compiler = FakeCompiler(regs={_key(cfg(1, 2048, 8)): 200})
    timer = FakeTimer(lambda c: c.blocks["RBLOCK"] * 1e-6)
    result = autotune.select("k", SHAPE, [cfg(1, 2048, 8)], compiler, timer, "default", H100)
    assert result.best.config == cfg(1, 1024, 8)


def test_coordinate_descent_walks_to_the_optimum():
    shape = KernelShape("pointwise", 2**24)
    best_xblock, best_warps = 4096, 8

    def cost(c):  # a bowl around (4096, 8) in log2 space
        import math
        return 1e-3 * (1 + (math.log2(c.blocks["XBLOCK"] / best_xblock)) ** 2
                       + (math.log2(c.num_warps / best_warps)) ** 2)

    start = [make_config(shape, {"XBLOCK": 512}, 1)]
    compiler, timer = FakeCompiler(), FakeTimer(cost)
    result = autotune.select("k", shape, start, compiler, timer, "max-autotune", H100)
    assert result.best.config.blocks == {"XBLOCK": best_xblock} and result.best.config.num_warps == best_warps
    steps = [c for call in timer.calls[1:] for c in call[1:]]
    assert len(set(steps)) == len(steps) and not set(steps) & set(timer.calls[0])  # neighbors: once each
    for before, call in zip(timer.calls, timer.calls[1:]):  # the incumbent is timed again with them
        assert call[0] == min(before, key=cost)
    default = autotune.select("k", shape, start, FakeCompiler(), FakeTimer(cost), "default", H100)
    assert default.best.config == start[0]  # default mode: no descent


def test_descent_compares_with_the_incumbent_timed_alongside():
    """The start was timed during a slow spell (2x): a neighbor slower than the start's real time
    but faster than its spell time must not win."""
    shape = KernelShape("pointwise", 2**24)
    start = [make_config(shape, {"XBLOCK": 1024}, 4)]
    calls = []

    def timer(variants):
        calls.append(variants)
        spell = 2.0 if len(calls) == 1 else 1.0
        return [spell * (1e-3 if v.config == start[0] else 1.5e-3) for v in variants]

    result = autotune.select("k", shape, start, FakeCompiler(), timer, "max-autotune", H100)
    assert result.best.config == start[0] and len(calls) == 2 and calls[1][0].config == start[0]


def test_max_autotune_tries_more_than_default():
    shape = KernelShape("persistent_reduction", 16384, 1, 4096)
    assert len(candidates(shape, "max-autotune", True)) > len(candidates(shape, "default", True))


# ----------------------------------------------------------------------------- written arguments


def test_written_params_from_the_source():
    source = "tmp0 = tl.load(in_ptr0 + x)\ntl.store(out_ptr0 + (x), tmp0, xmask)\ntl.atomic_add(out_ptr1 + x, 1)\n"
    assert written_params(source, ["in_ptr0", "out_ptr0", "out_ptr1"]) == ["out_ptr0", "out_ptr1"]
    indirect = "p = out_ptr0 + x\ntl.store(p, 1)\n"
    assert written_params(indirect, ["in_ptr0", "out_ptr0"]) == ["in_ptr0", "out_ptr0"]
    assert written_params("tl.load(in_ptr0)", ["in_ptr0"]) == []


def fake_inplace_kernel(inout, inp, out):
    """What a kernel that reads and writes `inout` does: timing it twice would change results."""
    inout.add_(inp)
    out.copy_(inout * 2)


@pytest.mark.parametrize("out_of_memory", [False, True])
def test_timing_runs_never_change_the_arguments(monkeypatch, out_of_memory):
    inout = torch.arange(6.0).reshape(2, 3).t()  # strided: clones must keep the strides
    inp, out = torch.ones(3, 2), torch.zeros(3, 2)
    expected_inout, expected_out = inout + 1, (inout + 1) * 2
    if out_of_memory:
        def no_memory(tensor):
            raise torch.OutOfMemoryError("no memory for a clone")
        monkeypatch.setattr("tritonize.runtime.benchmarking.clone_preserving_strides", no_memory)
    args = [inout, inp, out]
    with WrittenArgs(args, written=[0, 2]) as safe:
        assert (safe[0] is not inout) != out_of_memory and safe[1] is inp
        if not out_of_memory:
            assert safe[0].stride() == inout.stride() and torch.equal(safe[0], inout)
        for _ in range(5):  # the timing runs
            fake_inplace_kernel(*safe)
    fake_inplace_kernel(*args)  # the real call, once
    assert torch.equal(inout, expected_inout) and torch.equal(out, expected_out)
