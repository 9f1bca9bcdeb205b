"""Random straight-line programs (tests/fuzz_programs.py) against eager (tests/fuzz_check.py).

A fixed set of seeds: pointwise chains and broadcasts, views, reductions, norms, scans, in-place
writes to intermediates and inputs, indexing with repeated indices, cat and pad, user Triton
kernels, f32/bf16/f16/i32/bool, and training programs whose gradients are compared. A failure
prints the program; `bench/fuzz.py --seed S --n 1` shrinks it to a reproducer. Long runs: bench/fuzz.py.
"""
import pytest
import torch

import fuzz_check
import fuzz_programs
from conftest import DEVICE

SEEDS = range(300)
DYNAMIC_SEEDS = range(1000, 1080)


@pytest.mark.parametrize("seed", SEEDS)
def test_random_program_matches_eager(seed):
    program = fuzz_programs.generate(seed)
    problems = fuzz_check.check_program(program, DEVICE)
    assert not problems, "\n".join(problems) + "\n\n" + program.source()


@pytest.mark.parametrize("seed", DYNAMIC_SEEDS)
def test_random_program_with_symbolic_sizes_matches_eager(seed):
    """The same programs compiled with dynamic=True: every size symbolic (at the program's own
    sizes: some statements spell sizes out). `bench/fuzz.py --dynamic` runs more."""
    program = fuzz_programs.generate(seed)
    problems = fuzz_check.check_program(program, DEVICE, dynamic=True)
    assert not problems, "\n".join(problems) + "\n\n" + program.source()


def test_program_text_runs_on_its_own():
    """The printed program is the one that runs: the same text gives the same function."""
    program = fuzz_programs.generate(7)
    fn, make_inputs = fuzz_check.load(program)
    assert "def program(" in program.source() and "def make_inputs(device)" in program.source()
    first, second = fn(*make_inputs(DEVICE)), fn(*make_inputs(DEVICE))
    assert all((a == b).all() for a, b in zip(first, second))


def _off_by_a_little(gm, example_inputs):
    """A wrong back end: every float output is 1e-3 too large."""
    def run(*args):
        return [o + 1e-3 if o.is_floating_point() else o for o in gm(*args)]
    return run


def _forgets_input_writes(gm, example_inputs):
    """A wrong back end: runs the graph on copies, so writes to inputs are lost."""
    def run(*args):
        return gm(*[a.clone() for a in args])
    return run


def test_checker_catches_wrong_values():
    program = next(p for p in map(fuzz_programs.generate, range(100)) if p.dtype == "torch.float32")
    problems = fuzz_check.check_program(program, DEVICE, backend=_off_by_a_little)
    assert any("max error vs float64" in p for p in problems), problems


def test_checker_catches_lost_input_writes():
    def writes_input(p):
        return any(line.startswith(f"{p.input_names[0]}.") for s in p.stmts for line in s.text.split("\n"))

    program = next(p for p in map(fuzz_programs.generate, range(200)) if writes_input(p))
    problems = fuzz_check.check_program(program, DEVICE, backend=_forgets_input_writes)
    assert any(p.startswith("input 0") for p in problems), problems


def test_checker_lets_a_wider_type_stay_finite_where_eager_alone_overflowed():
    """fuzz seed 8292: an fp16 RMS norm's backward overflows in eager (inf), not in float64 nor
    in a compiled kernel that computes in float32; a finite value close to float64 is right, a
    far one or a new infinity is not."""
    inf = float("inf")
    eager = torch.tensor([1.0, inf, -inf, 2.0], dtype=torch.float16)
    ref = torch.tensor([1.0, 0.15, -3.96, 2.0], dtype=torch.float64)
    close = torch.tensor([1.0, 0.1505, -3.961, 2.0], dtype=torch.float16)
    assert fuzz_check.close_enough(close, eager, ref) is None
    far = torch.tensor([1.0, 0.9, -3.95, 2.0], dtype=torch.float16)
    assert "max error vs float64" in fuzz_check.close_enough(far, eager, ref)
    new_infinity = torch.tensor([inf, 0.15, -3.96, 2.0], dtype=torch.float16)
    assert fuzz_check.close_enough(new_infinity, eager, ref) == "NaN/inf positions differ from eager's"
    lost_infinity = torch.tensor([1.0, 0.15, -3.96, 2.0], dtype=torch.float16)
    ref_inf = torch.tensor([1.0, inf, -3.96, 2.0], dtype=torch.float64)
    assert fuzz_check.close_enough(lost_infinity, eager, ref_inf) == "NaN/inf positions differ from eager's"


def test_a_square_normalized_over_one_element_cancels_exactly(device):
    """fuzz seed 20627 (GPU): v6 = v4 * v4 is an output and layer_norm(v6, (1,)) recomputes it in
    the same kernel; contracted into an fma, v4 * v4 - mean lost its rounding and, divided by
    sqrt(eps), gave 2.6e-5 where eager gives exactly 0. Eager's rounding of every op is kept."""
    import tritonize
    from helpers import assert_same

    def program(x):
        v4 = torch.where(x > -1, x, 0.0).amax(1, keepdim=True)
        v6 = v4 * v4
        return v6, torch.nn.functional.layer_norm(v6, (1,))

    g = torch.Generator().manual_seed(20627)
    x = (torch.randn((7, 3), generator=g) * 3).to(device).t()
    actual, report = tritonize.run_and_explain(program, x)
    assert not report.fallbacks
    assert_same(actual, program(x), atol=0, rtol=0)


def test_long_run_script_runs(tmp_path):
    """bench/fuzz.py runs a few programs on the CPU and exits 0 when all match."""
    import os
    import subprocess
    import sys

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.path.join(repo, "src"))
    result = subprocess.run([sys.executable, os.path.join(repo, "bench", "fuzz.py"), "--n", "3", "--device", "cpu",
                             "--seed", "0"], capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 programs (seeds 0..2) on cpu: 0 failed" in result.stdout
