"""Random straight-line programs (tests/fuzz_programs.py) against eager (tests/fuzz_check.py).

A fixed set of seeds: pointwise chains and broadcasts, views, reductions, norms, scans, in-place
writes to intermediates and inputs, indexing with repeated indices, cat and pad, user Triton
kernels, f32/bf16/f16/i32/bool, and training programs whose gradients are compared. A failure
prints the program; `bench/fuzz.py --seed S --n 1` shrinks it to a reproducer. Long runs: bench/fuzz.py.
"""
import pytest

import fuzz_check
import fuzz_programs
from conftest import DEVICE

SEEDS = range(300)


@pytest.mark.parametrize("seed", SEEDS)
def test_random_program_matches_eager(seed):
    program = fuzz_programs.generate(seed)
    problems = fuzz_check.check_program(program, DEVICE)
    assert not problems, "\n".join(problems) + "\n\n" + program.source()


def test_program_text_runs_on_its_own():
    """The printed program is the one that runs: the same text gives the same function."""
    program = fuzz_programs.generate(7)
    fn, make_inputs = fuzz_check.load(program)
    assert "def program(" in program.source() and "def make_inputs(device)" in program.source()
    first, second = fn(*make_inputs(DEVICE)), fn(*make_inputs(DEVICE))
    assert all((a == b).all() for a, b in zip(first, second))
