"""The sum_first experiment's kernels (bench/sum_first_kernels.py) against eager `x.sum(0)`.

On the CPU the kernels run in Triton's interpreter (a copy of the module loaded with
TRITON_INTERPRET set only while it loads); with TRITONIZE_TEST_DEVICE=cuda they are compiled.
Every form runs with several splits (so the counters and atomics decide who finishes), masked
row ends, both program orders, per-call and persistent buffers. The interpreter runs programs one
after another, so on the CPU the last program of each block is always the one that finishes; a
counter that starts wrong shows that the counter is what decides. Also:
the full sweep's configs all fit the 16384x4096 shape, the kernels compile for sm_90 without a
GPU, and the bench script's CPU smoke run checks every variant "ok".
"""
import os
import subprocess
import sys

import pytest
import torch

from conftest import DEVICE

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "bench"))
import sum_first_kernels  # noqa: E402
import sum_first_variants  # noqa: E402

C = sum_first_kernels.Config
SHAPE = (96, 256)
CONFIGS = [
    C("split2", splits=4, xblock=32, rblock=8, fin_xblock=64),
    C("split2", splits=2, xblock=64, rblock=16, fin_xblock=128, evict=False),
    C("semaphore", splits=5, xblock=32, rblock=8),  # chunks of 20 rows: masked ends
    C("semaphore", splits=4, xblock=64, rblock=8, split_fastest=True),
    C("semaphore", splits=3, xblock=128, rblock=32, evict=False),  # 32 rows in one masked tile
    C("semaphore", splits=24, xblock=32, rblock=4),  # more splits than FIN_ROWS (16)
    C("semaphore", splits=1, xblock=32, rblock=16),  # whole columns: one program a column block
    C("atomic", splits=3, xblock=32, rblock=16),
    C("atomic", splits=7, xblock=64, rblock=8, split_fastest=True),
    C("rows", splits=5, xblock=256, rblock=4),  # whole rows, bands of 19 and 20 rows
    C("rows", splits=4, xblock=64, rblock=8),  # a column block at a time
    C("rows", splits=7, xblock=128, rblock=2, evict=False),
]


@pytest.fixture(scope="module")
def kernels():
    return sum_first_kernels if DEVICE == "cuda" else sum_first_kernels.interpreted_copy()


def make_input(shape=SHAPE, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=generator, dtype=torch.bfloat16).to(DEVICE)


def assert_sum(out, x):
    """bf16 result within one bf16 rounding of the fp32 sum (and so close to eager's)."""
    expected = x.float().sum(0)
    assert out.dtype == x.dtype and out.shape == expected.shape
    torch.testing.assert_close(out.float(), expected, rtol=1e-2, atol=1e-2 * float(expected.abs().max()))
    torch.testing.assert_close(out, x.sum(0), rtol=2e-2, atol=2e-2 * float(expected.abs().max()))


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"{c.form}-{c.label().replace(' ', '-')}")
def test_form_matches_eager_per_call_and_persistent(kernels, config):
    x = make_input()
    out = torch.full((SHAPE[1],), float("nan"), dtype=x.dtype, device=DEVICE)
    assert_sum(kernels.run(config, x, out=out), x)  # per call: fresh zeroed buffers; every element written
    workspace = kernels.make_workspace(config, *SHAPE, DEVICE)
    for seed in (1, 2):  # the same buffers twice: the kernel must leave them zeroed
        y = make_input(seed=seed)
        assert_sum(kernels.run(config, y, workspace), y)
        if workspace.zeroed is not None:
            assert workspace.zeroed.count_nonzero().item() == 0


@pytest.mark.parametrize("form", ["semaphore", "atomic"])
def test_the_counter_decides_which_program_writes(kernels, form):
    """Column block 1's counter starts at `splits`: no program of that block ever sees
    splits - 1 arrivals, so its outputs stay unwritten; the other blocks are right."""
    config = C(form, splits=4, xblock=64, rblock=8)
    x = make_input()
    workspace = kernels.make_workspace(config, *SHAPE, DEVICE)
    workspace.counters[1] = config.splits
    out = torch.full((SHAPE[1],), float("nan"), dtype=x.dtype, device=DEVICE)
    kernels.run(config, x, workspace, out=out)
    assert out[64:128].isnan().all()
    assert_sum(torch.cat([out[:64], out[128:]]), torch.cat([x[:, :64], x[:, 128:]], 1))
    assert workspace.counters.tolist() == [0, config.splits + config.splits, 0, 0]


def test_the_rows_counter_decides_which_program_writes(kernels):
    config = C("rows", splits=4, xblock=256, rblock=8)
    x = make_input()
    workspace = kernels.make_workspace(config, *SHAPE, DEVICE)
    workspace.counters[0] = 1  # the output is written when 3 of 4 programs have added
    out = torch.full((SHAPE[1],), float("nan"), dtype=x.dtype, device=DEVICE)
    kernels.run(config, x, workspace, out=out)
    if DEVICE == "cpu":  # programs run in order: the 4th program's band is missing
        assert (out.float() - x.float().sum(0)).abs().max() > 1.0
        assert_sum(out, x[:72])
    workspace.counters[0] = config.splits
    out.fill_(float("nan"))
    kernels.run(config, x, workspace, out=out)
    assert out.isnan().all()


def test_split2_kernel1_alone_leaves_the_partials(kernels):
    config = C("split2", splits=4, xblock=32, rblock=8, fin_xblock=64)
    x = make_input()
    workspace = kernels.make_workspace(config, *SHAPE, DEVICE)
    kernels.run(config, x, workspace, launches=1)
    expected = x.float().reshape(4, 24, SHAPE[1]).sum(1)
    torch.testing.assert_close(workspace.partials, expected, rtol=1e-5, atol=1e-4)


def test_configs_that_do_not_fit_are_refused_with_the_reason(kernels):
    x = make_input()
    with pytest.raises(ValueError, match="split2 needs 5 splits"):
        kernels.run(C("split2", splits=5, xblock=32, rblock=8), x)
    with pytest.raises(ValueError, match="not a multiple of the column block 96"):
        kernels.run(C("semaphore", splits=4, xblock=96, rblock=8), x)
    with pytest.raises(ValueError, match="give 48"):  # 50 chunks of 2 rows are 48 chunks
        kernels.run(C("semaphore", splits=50, xblock=32, rblock=2), x)
    with pytest.raises(ValueError, match="contiguous 2-D"):
        kernels.run(C("semaphore", splits=4, xblock=32, rblock=8), x.t())


@pytest.mark.parametrize("sms", [132, 114])
def test_every_sweep_config_fits_the_benchmark_shape(sms):
    """The GPU run must not lose a config to a shape error (H100 SXM and PCIe SM counts)."""
    rows, cols = sum_first_variants.FULL_SHAPE
    for quick in (False, True):
        for config in sum_first_variants.sweep(sms, quick):
            launches = sum_first_kernels.plan(config, rows, cols)
            assert launches and all(launch.grid[0] > 0 for launch in launches)


def test_single_kernel_forms_compile_for_sm90_with_their_synchronization(tmp_path, monkeypatch):
    """Without a GPU: the counter is an acq_rel gpu-scope atomic after a barrier, and the
    finisher reads the other programs' partials through L2 (.cg)."""
    from tritonize.runtime.triton_compile import ArgSpec, CompileJob, compile_config

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    kinds = {"x": "bf16", "out": "bf16", "partials": "fp32", "acc": "fp32", "counters": "i32"}
    for config in [C("semaphore", splits=33), C("atomic"), C("rows", splits=132, xblock=4096, rblock=2)]:
        (launch,) = sum_first_kernels.plan(config, *sum_first_variants.FULL_SHAPE)
        constants = dict(launch.constants)
        warps, stages = constants.pop("num_warps"), constants.pop("num_stages")
        spec = ArgSpec(0, tuple((kinds[name], True) for name in launch.pointers))
        job = CompileJob(sum_first_kernels.__file__, launch.kernel.__name__, spec,
                         tuple(sorted(constants.items())), warps, stages, ("cuda", 90, 32))
        ptx = compile_config(launch.kernel, job).asm["ptx"]
        assert "atom.global.gpu.acq_rel.add" in ptx and "ld.global.cg" in ptx, config
        assert ptx.index("bar.sync") < ptx.index("atom.global.gpu.acq_rel.add"), config
        assert "evict_first" in ptx


def test_bench_script_smoke_run_on_cpu():
    """The bench script end to end on the CPU (--small): every variant checks ok, the final
    table has each form, and the verdict compares the single kernels with split2."""
    command = [sys.executable, os.path.join(REPO, "bench", "sum_first_variants.py"), "--device", "cpu",
               "--small", "--rounds", "1", "--final-rounds", "1", "--iters", "1"]
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "src"))
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    groups = {"eager", "split2", "split2-kernel1-only", "semaphore-percall", "semaphore-persist",
              "atomic-percall", "atomic-persist", "rows-percall", "rows-persist"}
    rows = [line for line in result.stdout.splitlines()  # table rows (progress lines are indented)
            if line.split() and line.split()[0] in groups and not line.startswith(" ")]
    assert {line.split()[0] for line in rows} == groups, result.stdout
    assert len(rows) > 2 * len(groups) and all(line.rstrip().endswith(" ok") for line in rows), result.stdout
    assert "best single kernel:" in result.stdout and "split2" in result.stdout
