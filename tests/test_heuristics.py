"""Launch heuristics (runtime/heuristics.py): the measured first picks for a table of shapes, the
alternatives default mode times, every candidate within the bounds codegen relies on (masks are
left out when a size is a multiple of the largest block), and the hints codegen gives them."""
import dataclasses
import itertools

import pytest
import torch
import triton

import tritonize

from tritonize.runtime.heuristics import (
    MAX_BLOCK_1D, MAX_BLOCK_2D, MAX_GRID, MAX_RBLOCK_LOOPED, MAX_XBLOCK_REDUCTION, DeviceInfo, KernelShape,
    candidates, halved_rblock, is_valid, make_config, neighbors, pick_config,
)

H100 = DeviceInfo()

# (kind, xnumel, ynumel, rnumel, hint) -> first pick on the GPU: (blocks, num_warps), the defaults
# measured on an H100 (docs/benchmarks.md); the runtime times alternatives only after them
GPU_PICKS = [
    (("pointwise", 16384 * 4096, 1, 1, None), ({"XBLOCK": 2048}, 4)),  # measured best on an H100
    (("pointwise", 100_000, 1, 1, None), ({"XBLOCK": 2048}, 4)),
    (("pointwise", 1000, 1, 1, None), ({"XBLOCK": 1024}, 4)),
    (("pointwise", 1, 1, 1, None), ({"XBLOCK": 1}, 1)),
    (("pointwise", 4096, 4096, 1, None), ({"YBLOCK": 128, "XBLOCK": 128}, 4)),  # transpose tile
    (("pointwise", 3, 100_000, 1, None), ({"YBLOCK": 128, "XBLOCK": 4}, 4)),  # thin x
    (("pointwise", 100_000, 3, 1, None), ({"YBLOCK": 4, "XBLOCK": 128}, 4)),
    (("persistent_reduction", 16384, 1, 4096, None), ({"XBLOCK": 1}, 8)),  # softmax rows
    (("persistent_reduction", 100_000, 1, 16, None), ({"XBLOCK": 128}, 4)),  # tiny rows
    (("persistent_reduction", 1000, 1, 8192, None), ({"XBLOCK": 1}, 8)),
    (("persistent_reduction", 64, 1, 64, None), ({"XBLOCK": 32}, 4)),
    (("persistent_reduction", 4096, 1, 64, "outer"), ({"XBLOCK": 32}, 4)),  # >= 32 rows: coalesced
    (("persistent_reduction", 16, 1, 64, "outer"), ({"XBLOCK": 16}, 4)),
    (("scan", 1024, 1, 1000, None), ({"XBLOCK": 2}, 4)),
    (("looped_scan", 1024, 1, 100_000, None), ({"XBLOCK": 1, "RBLOCK": 1024}, 4)),
    (("looped_scan", 1024, 1, 100_000, "outer"), ({"XBLOCK": 64, "RBLOCK": 32}, 4)),
    (("reduction", 8192, 1, 32000, None), ({"XBLOCK": 1, "RBLOCK": 4096}, 4)),  # inner, long rows
    (("reduction", 100_000, 1, 100, None), ({"XBLOCK": 1, "RBLOCK": 128}, 4)),  # no hint: as inner
    (("reduction", 4096, 1, 100_000, "outer"), ({"XBLOCK": 64, "RBLOCK": 256}, 8)),
    (("reduction", 4096, 1, 100_000, "inner"), ({"XBLOCK": 1, "RBLOCK": 4096}, 4)),
    (("reduction", 10, 1, 1000, None), ({"XBLOCK": 1, "RBLOCK": 1024}, 4)),  # clamped to the row
]


@pytest.mark.parametrize("shape, expected", GPU_PICKS, ids=[str(s) for s, _ in GPU_PICKS])
def test_first_pick_on_the_gpu(shape, expected):
    kind, x, y, r, hint = shape
    config = pick_config(kind, x, y, r, on_gpu=True, hint=hint, device=H100)
    assert (config.blocks, config.num_warps) == expected
    assert config.grid == (make_config(KernelShape(kind, x, y, r, hint), *expected).grid)


CPU_PICKS = [
    (("pointwise", 16384 * 4096, 1, 1), {"XBLOCK": 8192}),  # fewer interpreted programs
    (("pointwise", 1000, 1, 1), {"XBLOCK": 1024}),
    (("pointwise", 4096, 4096, 1), {"YBLOCK": 128, "XBLOCK": 128}),
    (("persistent_reduction", 16384, 1, 4096), {"XBLOCK": 16}),
    (("reduction", 8192, 1, 32000), {"XBLOCK": 16, "RBLOCK": 4096}),
]


@pytest.mark.parametrize("shape, blocks", CPU_PICKS, ids=[str(s) for s, _ in CPU_PICKS])
def test_first_pick_on_the_cpu(shape, blocks):
    assert pick_config(*shape, on_gpu=False).blocks == blocks
    assert len(candidates(KernelShape(*shape), "max-autotune", on_gpu=False)) == 1  # no timing on the CPU


def test_grids():
    assert pick_config("pointwise", 10_000, 1, 1, True).grid == (triton.cdiv(10_000, 2048),)
    config = pick_config("pointwise", 1000, 300, 1, True)
    assert config.grid == (triton.cdiv(1000, config.blocks["XBLOCK"]) * triton.cdiv(300, config.blocks["YBLOCK"]),)
    assert pick_config("reduction", 333, 1, 5000, True).grid == (333,)


# Default mode on the GPU: the first pick, then the alternatives timed against it
DEFAULT_MODE = [
    (("reduction", 4096, 1, 100_000, "outer"), [({"XBLOCK": 64, "RBLOCK": 256}, 8), ({"XBLOCK": 64, "RBLOCK": 128}, 8),
                                            ({"XBLOCK": 16, "RBLOCK": 256}, 4)]),
    (("reduction", 8192, 1, 32000, "inner"), [({"XBLOCK": 1, "RBLOCK": 4096}, 4), ({"XBLOCK": 1, "RBLOCK": 2048}, 8)]),
    (("reduction", 100_000, 1, 100, "inner"), [({"XBLOCK": 1, "RBLOCK": 128}, 4), ({"XBLOCK": 4, "RBLOCK": 128}, 4)]),
    (("reduction", 96, 1, 1000, None), [({"XBLOCK": 1, "RBLOCK": 1024}, 4), ({"XBLOCK": 64, "RBLOCK": 256}, 8)]),
    (("persistent_reduction", 1000, 1, 8192, None), [({"XBLOCK": 1}, 8), ({"XBLOCK": 1}, 16)]),
    (("persistent_reduction", 4096, 1, 16, "outer"), [({"XBLOCK": 128}, 4), ({"XBLOCK": 128}, 8), ({"XBLOCK": 32}, 4)]),
    (("scan", 1024, 1, 1000, None), [({"XBLOCK": 2}, 4), ({"XBLOCK": 2}, 8), ({"XBLOCK": 1}, 4)]),
    (("looped_scan", 1024, 1, 100_000, None), [({"XBLOCK": 1, "RBLOCK": 1024}, 4)]),
    (("pointwise", 4096, 4096, 1, None), [({"YBLOCK": 128, "XBLOCK": 128}, 4)]),
]


@pytest.mark.parametrize("shape, expected", DEFAULT_MODE, ids=[str(s) for s, _ in DEFAULT_MODE])
def test_default_mode_times_the_pick_and_its_alternatives(shape, expected):
    configs = candidates(KernelShape(*shape), "default", on_gpu=True, device=H100)
    assert [(c.blocks, c.num_warps) for c in configs] == expected
    wide = candidates(KernelShape(*shape), "max-autotune", on_gpu=True, device=H100)
    assert wide[:len(configs)] == configs  # max-autotune starts from the same list

SHAPES = [KernelShape(kind, x, y, r, hint)
          for kind, x, y, r, hint in itertools.chain(
              ((k, x, 1, 1, None) for k in ["pointwise"] for x in (1, 7, 1000, 8192, 123_457, 2**26, 2**33)),
              (("pointwise", x, y, 1, None) for x, y in [(3, 5), (4096, 4096), (1, 10**6), (10**6, 2), (300, 257)]),
              ((k, x, 1, r, h) for k in ("persistent_reduction", "scan")
               for x, r in [(1, 1), (1, 8192), (5, 3), (16384, 4096), (10**6, 16), (257, 700)]
               for h in (None, "inner", "outer")),
              ((k, x, 1, r, h) for k in ("reduction", "looped_scan") for x, r in [(1, 10**8), (7, 9000), (8192, 32000), (10**5, 100), (2**20, 2**14)]
               for h in (None, "inner", "outer")))]


@pytest.mark.parametrize("mode", ["default", "max-autotune"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_every_candidate_respects_the_codegen_bounds(shape, mode):
    configs = candidates(shape, mode, on_gpu=True)
    assert configs and len(set(configs)) == len(configs)
    for config in configs + [n for c in configs for n in neighbors(shape, c)]:
        assert is_valid(shape, config), config
        for name, value in config.blocks.items():
            assert value & (value - 1) == 0  # powers of two
            limit = {"pointwise": MAX_BLOCK_2D if shape.is_2d else MAX_BLOCK_1D}.get(shape.kind, MAX_XBLOCK_REDUCTION)
            if name != "RBLOCK":
                assert value <= limit
            if name == "XBLOCK":
                assert value <= triton.next_power_of_2(shape.xnumel)
            if name == "RBLOCK":  # codegen leaves rmask out when RBLOCK divides this
                assert value <= min(MAX_RBLOCK_LOOPED, triton.next_power_of_2(shape.rnumel))
        assert "RBLOCK" in config.blocks if shape.kind in ("reduction", "looped_scan") else "RBLOCK" not in config.blocks
        assert 1 <= config.grid[0] <= MAX_GRID
        assert config.num_warps in (1, 2, 4, 8, 16, 32)


def test_default_mode_compiles_few_candidates():
    for shape in SHAPES:
        count = len(candidates(shape, "default", on_gpu=True))
        assert count == 1 if shape.kind == "pointwise" else count <= 3, (shape, count)
    wide = [len(candidates(s, "max-autotune", on_gpu=True)) for s in SHAPES if s.xnumel >= 8192]
    assert min(wide) >= 3


def test_invalid_configs_are_rejected():
    shape = KernelShape("pointwise", 2**20)
    assert not is_valid(shape, make_config(shape, {"XBLOCK": MAX_BLOCK_1D * 2}, 4))
    assert not is_valid(shape, make_config(shape, {"XBLOCK": 1000}, 4))
    assert not is_valid(shape, make_config(shape, {"XBLOCK": 1024}, 3))
    assert not is_valid(shape, make_config(shape, {"XBLOCK": 1024, "RBLOCK": 4}, 4))
    reduction = KernelShape("reduction", 1024, 1, 1024)
    assert not is_valid(reduction, make_config(reduction, {"XBLOCK": 256, "RBLOCK": 8}, 4))
    with pytest.raises(ValueError, match="unknown kernel kind"):
        KernelShape("matmul", 4)


def test_neighbors_double_and_halve_one_field():
    shape = KernelShape("reduction", 4096, 1, 4096)
    start = make_config(shape, {"XBLOCK": 4, "RBLOCK": 256}, 4)
    found = {(c.blocks["XBLOCK"], c.blocks["RBLOCK"], c.num_warps, c.num_stages) for c in neighbors(shape, start)}
    assert found == {(8, 256, 4, 1), (2, 256, 4, 1), (4, 512, 4, 1), (4, 128, 4, 1), (4, 256, 8, 1),
                     (4, 256, 2, 1), (4, 256, 4, 2)}


def test_halved_rblock_when_registers_limit_occupancy():
    shape = KernelShape("reduction", 100_000, 1, 8192)
    config = make_config(shape, {"XBLOCK": 1, "RBLOCK": 2048}, 8)
    # 128 registers a thread x 256 threads: 2 programs an SM, 264 at once < 100000 programs.
    halved = halved_rblock(shape, config, n_regs=128, device=H100)
    assert halved.blocks == {"XBLOCK": 1, "RBLOCK": 1024} and halved.num_warps == 8
    assert halved_rblock(shape, config, n_regs=32, device=H100) is None  # full occupancy already
    few_rows = KernelShape("reduction", 100, 1, 8192)
    assert halved_rblock(few_rows, make_config(few_rows, {"XBLOCK": 1, "RBLOCK": 2048}, 8), 128, H100) is None
    small = make_config(shape, {"XBLOCK": 1, "RBLOCK": 64}, 8)
    assert halved_rblock(shape, small, 255, H100) is None
    persistent = KernelShape("persistent_reduction", 100_000, 1, 2048)
    assert halved_rblock(persistent, make_config(persistent, {"XBLOCK": 1}, 8), 255, H100) is None


# The measured defaults as main's heuristics table states them (runtime/heuristics.py's first picks)
@pytest.mark.parametrize("kind, x, r, hint, on_gpu, blocks, warps", [
    ("persistent_reduction", 16384, 4096, "inner", True, {"XBLOCK": 1}, 8),       # softmax, var_mean
    ("persistent_reduction", 16384, 1000, "inner", True, {"XBLOCK": 2}, 4),
    ("persistent_reduction", 4096, 128, "inner", True, {"XBLOCK": 16}, 4),
    ("persistent_reduction", 4096, 16, "outer", True, {"XBLOCK": 128}, 4),
    ("reduction", 65536, 1024, "outer", True, {"XBLOCK": 64, "RBLOCK": 256}, 8),
    ("reduction", 8192, 32000, "inner", True, {"XBLOCK": 1, "RBLOCK": 4096}, 4),
    ("persistent_reduction", 16384, 4096, "inner", False, {"XBLOCK": 16}, 8),  # CPU: big blocks
])
def test_reduction_configs(kind, x, r, hint, on_gpu, blocks, warps):
    config = pick_config(kind, x, 1, r, on_gpu, hint)
    assert (config.blocks, config.num_warps) == (blocks, warps)
    assert config.grid == (-(-x // blocks["XBLOCK"]),)


@pytest.mark.parametrize("fn, hint", [
    (lambda t: t.sum(-1), "inner"),
    (lambda t: t.sum(0), "outer"),
    (lambda t: torch.softmax(t, -1), "inner"),
])
def test_codegen_hints(fn, hint):
    report = tritonize.explain(fn, torch.randn(64, 64))
    assert f"hint={hint!r}" in report.wrapper, report.wrapper


@pytest.mark.parametrize("fn, hint", [
    # llama's first RMSNorm: the loaded token ids are contiguous along the rows, the gathered
    # embedding rows along the reduced dim (an "outer" hint gave 12 programs of 64 rows: 8x slower)
    (lambda ids, w, s: torch.nn.functional.embedding(ids, w).pow(2).mean(-1), "inner"),
    # a vector read by every row says nothing of the layout: the rows it scales say it
    (lambda ids, w, s: (s[:, None] * w).sum(-1), "inner"),
    (lambda ids, w, s: (s[:, None] * w).sum(0), "outer"),
])
def test_hints_follow_the_streamed_loads(fn, hint):
    args = (torch.randint(0, 100, (4, 25)), torch.randn(100, 1024), torch.randn(100))
    report = tritonize.explain(fn, *args)
    assert f"hint={hint!r}" in report.wrapper, report.wrapper
    # sums of 1024 float32 products in another order than eager's
    torch.testing.assert_close(tritonize.compile(fn)(*args), fn(*args), rtol=2e-5, atol=1e-4)


def test_a_streamed_index_that_is_not_affine_leaves_the_hint_to_the_next_load():
    """A repeat's index (ModularIndexing along x) decides nothing; the vector added along x does."""
    fn = lambda x, v: (x.repeat(1, 2) + v).sum(0)  # noqa: E731
    args = (torch.randn(512, 128), torch.randn(256))
    report = tritonize.explain(fn, *args)
    assert "hint='outer'" in report.wrapper, report.wrapper
    torch.testing.assert_close(tritonize.compile(fn)(*args), fn(*args), rtol=2e-5, atol=1e-4)


def test_trigonometric_kernels_hold_four_elements_a_thread_on_the_gpu():
    from tritonize.runtime.heuristics import uses_heavy_math

    rotary = "    tmp17 = tl.cos(tmp16)\n    tmp26 = tl.sin(tmp16)\n"
    assert uses_heavy_math(rotary) and uses_heavy_math("x = libdevice.tan(y)")
    assert not uses_heavy_math("x = tl.exp(y) + libdevice.tanh(z)  # cosine, sinus")
    heavy = KernelShape("pointwise", 524288, heavy_math=True)
    pick = candidates(heavy, "default", on_gpu=True)[0]
    assert (pick.blocks["XBLOCK"], pick.num_warps) == (512, 4)
    plain = candidates(KernelShape("pointwise", 524288), "default", on_gpu=True)[0]
    assert (plain.blocks["XBLOCK"], plain.num_warps) == (2048, 4)
    assert candidates(heavy, "default", on_gpu=False)[0].blocks == candidates(
        KernelShape("pointwise", 524288), "default", on_gpu=False)[0].blocks
    small = candidates(KernelShape("pointwise", 300, heavy_math=True), "default", on_gpu=True)[0]
    assert small.blocks["XBLOCK"] == 512 and small.num_warps == 4
    # 2-D tiles (Llama's rotary kernel: 64 wide, 65536 rows): 512 elements, not 128x64
    tile = candidates(KernelShape("pointwise", 64, 65536, heavy_math=True), "default", on_gpu=True)[0]
    assert (tile.blocks["YBLOCK"], tile.blocks["XBLOCK"], tile.num_warps) == (8, 64, 4)
    wide = candidates(KernelShape("pointwise", 4096, 4096, heavy_math=True), "default", on_gpu=True)[0]
    assert (wide.blocks["YBLOCK"], wide.blocks["XBLOCK"]) == (4, 128)
    narrow = candidates(KernelShape("pointwise", 2, 65536, heavy_math=True), "default", on_gpu=True)[0]
    assert (narrow.blocks["YBLOCK"], narrow.blocks["XBLOCK"]) == (128, 2)  # never above a plain tile
    plain_tile = candidates(KernelShape("pointwise", 64, 65536), "default", on_gpu=True)[0]
    assert (plain_tile.blocks["YBLOCK"], plain_tile.blocks["XBLOCK"]) == (128, 64)


@pytest.mark.parametrize("rnumel, hint, persistent", [(100, "inner", True), (8192, "inner", True),
                                                      (8193, "inner", False), (64, "outer", True),
                                                      (65, "outer", False), (300, None, True)])
def test_an_adaptive_reduction_takes_the_configs_of_its_bucket_body(rnumel, hint, persistent):
    """Symbolic row length: a bucket whose rows fit in registers gets the persistent kind's
    configs with RBLOCK = the row's power of two; longer rows the looped kind's."""
    from tritonize.runtime.heuristics import adaptive_body, body_config, neighbors

    shape = KernelShape("adaptive_reduction", 4096, 1, rnumel, hint)
    body = adaptive_body(shape)
    assert body.kind == ("persistent_reduction" if persistent else "reduction")
    for mode in ("default", "max-autotune"):
        configs = candidates(shape, mode, on_gpu=True)
        assert [body_config(body, c) for c in configs] == candidates(body, mode, on_gpu=True)
        for config in configs:
            assert config.blocks["PERSISTENT"] == int(persistent) and is_valid(shape, config)
            if persistent:
                assert config.blocks["RBLOCK"] == triton.next_power_of_2(rnumel)
            assert all(is_valid(shape, step) for step in neighbors(shape, config))
    wrong_body = dict(configs[0].blocks, PERSISTENT=1 - int(persistent))
    assert not is_valid(shape, dataclasses.replace(configs[0], blocks=wrong_body))


@pytest.mark.parametrize("columns, programs", [(768, 96), (1024, 128), (2048, 256)])
def test_an_outer_reduction_of_few_columns_also_tries_narrow_programs(columns, programs):
    """A layer norm's weight gradient sums 768 columns over 1048 rows: programs of 64 columns
    leave most SMs idle (12 programs), so narrower ones are timed too."""
    shape = KernelShape("reduction", columns, 1, 1048, "outer")
    grids = [config.grid[0] for config in candidates(shape, "default", on_gpu=True, device=H100)]
    assert grids[0] == columns // 64 and programs in grids[1:], grids


def test_an_outer_reduction_of_many_columns_keeps_its_wide_programs():
    shape = KernelShape("reduction", 64 * H100.sm_count, 1, 1048, "outer")
    assert {config.blocks["XBLOCK"] for config in candidates(shape, "default", on_gpu=True, device=H100)} == {64}


@pytest.mark.parametrize("columns, rows, split", [(768, 1048, 16), (8192, 16000, 2), (300, 2048, 32)])
def test_a_split_outer_reduction_times_chunk_sized_tiles(columns, rows, split):
    """codegen/outer_split.py: the grid holds SPLIT programs a column block; RBLOCK never passes
    the chunk's power of two, and the alternatives stay at most 32 x 512 (a long chunk offered
    32 x 4096 tiles before)."""
    shape = KernelShape("reduction", columns, 1, rows, "outer", split=split)
    configs = candidates(shape, "default", on_gpu=True, device=H100)
    chunk = triton.next_power_of_2(-(-rows // split))
    assert configs[0].grid[0] == -(-columns // configs[0].blocks["XBLOCK"]) * split
    assert all(c.blocks["RBLOCK"] <= chunk for c in configs), [str(c) for c in configs]
    assert all(c.blocks["XBLOCK"] * c.blocks["RBLOCK"] <= 64 * 512 for c in configs), [str(c) for c in configs]
