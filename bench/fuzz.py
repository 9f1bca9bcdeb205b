"""Long runs of the program fuzzer (tests/fuzz_programs.py) against eager, on the CPU or a GPU.

    PYTHONPATH=src python3 bench/fuzz.py --n 2000 --device cpu --seed 0
    PYTHONPATH=src python3 bench/fuzz.py --n 500 --device cuda --seed 100000 --max-ops 14 --no-shrink
    PYTHONPATH=src python3 bench/fuzz.py --n 500 --dynamic      # compiled with dynamic=True

Programs `seed .. seed+n-1` are generated, run eagerly (in their dtype and in float64) and through
torch.compile(backend="tritonize"), and compared by tests/fuzz_check.py. Each failure prints its
seed, what was wrong, and a reproducer: the program with every statement removed that the failure
does not need (greedy shrinking, skipped with --no-shrink), as Python text that runs on its own
(from the tests/ directory, for the corpus kernels). Exits 1 when any program failed.
"""
import argparse
import os
import re
import sys
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
import fuzz_check  # noqa: E402
import fuzz_programs  # noqa: E402


def kinds(problems) -> set:
    """Problems with their numbers blanked: a shrunk program must fail the same way."""
    return {re.sub(r"-?\d[\d.e+-]*", "#", p) for p in problems}


def shrink(program, problems, device, budget_s=60.0, dynamic=False):
    """Drops statements one at a time, last first, while the program still fails the same way."""
    wanted, deadline = kinds(problems), time.monotonic() + budget_s
    changed = True
    while changed and time.monotonic() < deadline:
        changed = False
        for index in reversed(range(len(program.stmts))):
            smaller = program.without(index) if index < len(program.stmts) else None
            if smaller is not None and wanted & kinds(fuzz_check.check_program(smaller, device, dynamic=dynamic)):
                program, changed = smaller, True
    return program


def reproducer(program, device, dynamic=False) -> str:
    return (program.header() + "\n" + program.source() + "\n"
            f"args = make_inputs({device!r})\n"
            f"print(torch.compile(program, backend='tritonize'{', dynamic=True' if dynamic else ''})(*args))\n"
            "print(program(*make_inputs(%r)))\n" % device)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=200, help="how many programs")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--seed", type=int, default=0, help="the first program's seed")
    parser.add_argument("--max-ops", type=int, default=7, help="longest program, in statements")
    parser.add_argument("--no-shrink", action="store_true", help="print failing programs whole")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    parser.add_argument("--dynamic", action="store_true", help="compile with dynamic=True (symbolic sizes)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    failed, start = [], time.monotonic()
    for seed in range(args.seed, args.seed + args.n):
        program = fuzz_programs.generate(seed, max_ops=args.max_ops)
        problems = fuzz_check.check_program(program, args.device, dynamic=args.dynamic)
        if problems:
            failed.append(seed)
            small = program if args.no_shrink else shrink(program, problems, args.device, dynamic=args.dynamic)
            print(f"=== FAIL seed {seed} (--max-ops {args.max_ops})\n" + "\n".join(problems[:8]))
            print(reproducer(small, args.device, args.dynamic), flush=True)
        elif not args.quiet and (seed - args.seed + 1) % 50 == 0:
            print(f"... {seed - args.seed + 1} programs, {len(failed)} failed, "
                  f"{time.monotonic() - start:.0f}s", flush=True)
    print(f"{args.n} programs (seeds {args.seed}..{args.seed + args.n - 1}) on {args.device}"
          f"{' with dynamic=True' if args.dynamic else ''}: "
          f"{len(failed)} failed {failed} in {time.monotonic() - start:.0f}s")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
