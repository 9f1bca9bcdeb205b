"""sum_first experiment (issue 4): can one kernel beat today's two-kernel split reduction?

    PYTHONPATH=src python3 bench/sum_first_variants.py                 # full sweep, <= ~3 min (H100)
    PYTHONPATH=src python3 bench/sum_first_variants.py --quick         # ~1 min subset
    PYTHONPATH=src python3 bench/sum_first_variants.py --out $OUT      # also write .md and .json
    PYTHONPATH=src python3 bench/sum_first_variants.py --device cpu --small   # smoke test (interpreter)

`x.sum(0)` of a bf16 16384x4096 matrix, timed for (bench/sum_first_kernels.py has the kernels):
  eager, inductor, tritonize   references (the compilers only in the full run; tritonize when
                               importable, i.e. PYTHONPATH=src)
  split2                       today's generated form re-implemented: 2 kernels, fp32 partials
  split2-kernel1-only          its first kernel alone (checked through partials.sum(0)): the
                               most that removing kernel 2 could gain
  semaphore-{percall,persist}  1 kernel, partials in a workspace, the last program of a column
                               block sums them (counter per block)
  atomic-{percall,persist}     1 kernel, fp32 atomics into acc[cols], last program casts
  rows-{percall,persist}       1 kernel, persistent grid (a multiple of the SM count), each
                               program streams a band of rows; atomics, one counter
"percall" zeroes its counters (and acc) with one torch.zeros a call, inside the timed region;
"persist" allocates them once, outside it, and relies on the kernel leaving them zeroed.

Timing: each variant's median over --iters calls, each call preceded by a 256 MB memset that
flushes L2 and each timed alone with CUDA events (the way triton.testing.do_bench times, which
bench/kernels.py uses); variants interleaved in --rounds rounds, the fastest round's median
counts (the shared H100 has slow spells). The best of each form and the references are then
timed again in --final-rounds interleaved rounds ("final" table), with their device launches
counted by torch.profiler. Bytes = the input read once + the output written once. Each variant's
output is checked against x.float().sum(0) after its first call and again after all its timed
calls (so a counter left non-zero by one call would show), with the kernel suite's bf16
tolerance (|err| <= 1e-2 max|ref| + 2e-2 |ref|); "persist" also checks its buffers ended zeroed.

The sweep (about 40 kernels in the full run) is pruned around the compiler's current config
(16 splits, 64 columns x 256 rows, 8 warps, 1 stage, evict_first), one setting changed at a
time, plus a few combinations: splits 8/16/32/64 and 33/66 (a grid that is a whole number of
waves on 132 SMs), tiles 64x32..256 / 128x64..128 / 256x32..64 (fp32 accumulators of at most
16K elements, so no spills at 8 warps), 4 or 8 warps, 1-3 stages, with and without
evict_first, and the program order. A wider grid was not worth its compile time: ~150
variants of the two-kernel form stayed within 76-78% (docs/benchmarks.md).
--budget-s stops compiling new variants (the rest are listed as skipped) so the run ends in time.
On the CPU (--device cpu --small: 96x256, a few small configs) the kernels run in Triton's
interpreter and times are perf_counter medians: a smoke test of this script, not a measurement.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import sum_first_kernels  # noqa: E402

FULL_SHAPE, SMALL_SHAPE = (16384, 4096), (96, 256)
FORMS = ("split2", "semaphore", "atomic", "rows")
HEADERS = ["variant", "config", "regs", "time us", "GB/s", "% copy", "max err", "check"]
FINAL_HEADERS = ["variant", "config", "launches", "time us", "GB/s", "% copy", "check"]


# ----------------------------------------------------------------------------- variants


@dataclass
class Variant:
    """One timed callable. `group` is the form (and counter mode); `fn` returns the output."""
    group: str
    config: str
    fn: Callable[[], torch.Tensor]
    kernel_config: object = None  # a sum_first_kernels.Config
    workspace: object = None  # sum_first_kernels.Workspace: persistent buffers, checked zeroed at the end
    regs: str = "-"
    to_result: Callable | None = None  # what fn returns -> the sum (diagnostics returning partials)
    times_us: list = field(default_factory=list)
    check: str = "not run"
    max_err: float | None = None

    @property
    def best_us(self) -> float | None:
        return min(self.times_us) if self.times_us else None


def sweep(sms: int, quick: bool, cols: int = FULL_SHAPE[1]) -> list[sum_first_kernels.Config]:
    """Kernel configs for the full shape, in priority order: the --quick set first (so a
    --budget-s cut, or a crash, leaves the most telling ones measured), then the rest."""
    C = sum_first_kernels.Config
    aligned = sms // math.gcd(cols // 64, sms)  # splits making 64-column blocks x splits a multiple of sms
    core = [C("split2"), C("semaphore"), C("semaphore", splits=aligned),
            C("semaphore", xblock=128, rblock=128), C("atomic"),
            C("rows", splits=sms, xblock=cols, rblock=2),
            C("rows", splits=2 * sms, xblock=cols, rblock=4, num_warps=16),
            # one wave of programs that each own whole columns (or half of them): no partials
            # to speak of, deterministic, the finish is a 32/64-column store
            # the two kernels, kernel 2 launched early (Hopper's programmatic dependent launch)
            C("split2", num_stages=2, pdl="wait"), C("split2", num_stages=2, pdl="trigger"),
            C("split2", pdl="wait"), C("split2", pdl="trigger")]
    if quick:
        return core
    rest = [
        # semaphore: one setting of the center (16 splits, 64x256, 8 warps, 1 stage) at a time
        C("semaphore", splits=32), C("semaphore", splits=8),
        C("semaphore", splits=64), C("semaphore", splits=2 * aligned),
        C("semaphore", xblock=256, rblock=64),
        C("semaphore", rblock=128), C("semaphore", rblock=64, num_warps=4),
        C("semaphore", rblock=32, num_warps=4), C("semaphore", rblock=128, num_warps=4),
        C("semaphore", num_stages=2), C("semaphore", num_stages=3),
        C("semaphore", evict=False), C("semaphore", split_fastest=True),
        # semaphore: combinations
        C("semaphore", splits=32, xblock=128, rblock=128),
        C("semaphore", splits=aligned, xblock=128, rblock=128),
        C("semaphore", splits=64, xblock=128, rblock=64, num_warps=4),
        C("semaphore", splits=32, rblock=128, num_warps=4, num_stages=2),
        C("semaphore", xblock=128, rblock=64, num_warps=4, num_stages=2),
        C("semaphore", rblock=64, num_warps=4, num_stages=3),
        C("semaphore", xblock=256, rblock=32, num_stages=2),
        C("semaphore", xblock=128, rblock=128, num_stages=2),
        C("semaphore", splits=aligned, num_stages=2),
        # fp32 atomics
        C("atomic", splits=aligned), C("atomic", splits=32),
        C("atomic", xblock=128, rblock=128), C("atomic", splits=64, xblock=128, rblock=64, num_warps=4),
        # persistent row bands
        C("rows", splits=sms, xblock=cols, rblock=4),
        C("rows", splits=sms, xblock=cols, rblock=2, num_warps=16),
        C("rows", splits=sms, xblock=cols, rblock=4, num_warps=16, num_stages=2),
        C("rows", splits=sms, xblock=cols, rblock=8, num_warps=16),
        C("rows", splits=2 * sms, xblock=cols, rblock=2),
        C("rows", splits=sms, xblock=1024, rblock=8),
        C("rows", splits=4 * sms, xblock=1024, rblock=8, num_warps=4),
        # the two-kernel form with pipelining, for comparison
        C("split2", num_stages=2),
        # kernel 1's tile, splits, warps and stages with kernel 2 under PDL (as generated since
        # 2026-11-24): kernel 1 alone is timed for each, so this maps kernel 1's ceiling
        *[C("split2", splits=s, xblock=x, rblock=r, num_warps=w, num_stages=st, pdl="wait")
          for s, x, r, w, st in [(16, 128, 128, 8, 1), (16, 128, 128, 8, 2), (16, 256, 64, 8, 1),
                                 (16, 512, 32, 8, 1), (8, 64, 256, 8, 2), (32, 64, 256, 8, 1),
                                 (32, 64, 128, 4, 2), (16, 64, 128, 4, 3), (16, 64, 512, 8, 1),
                                 (16, 64, 256, 16, 1), (8, 128, 256, 16, 2), (64, 64, 256, 8, 1),
                                 (16, 32, 512, 8, 1), (4, 64, 256, 8, 3), (16, 64, 256, 4, 2),
                                 (32, 128, 128, 8, 1)]],
    ]
    return core + rest


def small_sweep() -> list[sum_first_kernels.Config]:
    """For --small (96x256): every form, with several splits, masked ends and both orders."""
    C = sum_first_kernels.Config
    return [C("split2", splits=4, xblock=32, rblock=8, fin_xblock=64),
            C("semaphore", splits=5, xblock=32, rblock=8), C("semaphore", splits=1, xblock=32, rblock=16),
            C("semaphore", splits=4, xblock=64, rblock=16, split_fastest=True, evict=False),
            C("atomic", splits=3, xblock=32, rblock=16),
            C("rows", splits=5, xblock=256, rblock=4), C("rows", splits=4, xblock=64, rblock=8)]


def kernel_variants(K, config, x: torch.Tensor, registers: dict) -> list[Variant]:
    """split2: one variant (its partials allocated a call, as the generated wrapper does);
    single-kernel forms: per-call zeroing and persistent buffers, sharing one compiled kernel."""
    def per_call():
        return K.run(config, x, compiled=registers.setdefault(config, []))

    workspace = K.make_workspace(config, *x.shape, x.device)
    if config.form == "split2":
        def kernel1_only():
            K.run(config, x, workspace, launches=1)
            return workspace.partials

        # kernel 1 alone: the most a single kernel of the same shape could gain over split2
        return [Variant("split2", config.label(), per_call, config),
                Variant("split2-kernel1-only", config.label(), kernel1_only, config,
                        to_result=lambda partials: partials.sum(0))]
    return [Variant(f"{config.form}-percall", config.label(), per_call, config),
            Variant(f"{config.form}-persist", config.label(),
                    lambda: K.run(config, x, workspace), config, workspace)]


def reference_variants(x: torch.Tensor, with_compilers: bool) -> list[Variant]:
    def sum_first(t):
        return t.sum(0)

    out = [Variant("eager", "torch.sum(x, 0)", lambda: sum_first(x))]
    if with_compilers:
        for backend in ("inductor", "tritonize"):
            try:
                compiled = common.build_backend(backend, sum_first)
            except ImportError as exc:
                print(f"note: {backend} left out ({exc})")
                continue
            out.append(Variant(backend, f"torch.compile(backend={backend!r})",
                               lambda compiled=compiled: compiled(x)))
    return out


# ----------------------------------------------------------------------------- measuring


class Timer:
    """Median of `iters` single calls, each after an L2-flushing memset, CUDA events around it
    (on the CPU: perf_counter around each call, no flush)."""

    def __init__(self, iters: int, device: str):
        self.iters = iters
        self.cuda = device == "cuda"
        self.flush = torch.empty(int(256e6 // 4), dtype=torch.int32, device="cuda") if self.cuda else None

    def median_us(self, fn) -> float:
        fn()
        if not self.cuda:
            times = []
            for _ in range(self.iters):
                start = time.perf_counter()
                fn()
                times.append(time.perf_counter() - start)
            return statistics.median(times) * 1e6
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(self.iters)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(self.iters)]
        for start, end in zip(starts, ends):
            self.flush.zero_()
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)) * 1e3


def check_output(out: torch.Tensor, ref: torch.Tensor) -> tuple[str, float]:
    """('ok' or 'MISMATCH', max |out - ref|) with the kernel suite's bf16 tolerance."""
    error = (out.double() - ref.double()).abs()
    scale = ref.double().abs()
    bad = bool((error > 1e-2 * float(scale.max()) + 2e-2 * scale).any()) or not torch.isfinite(out).all()
    return ("MISMATCH" if bad else "ok"), float(error.max())


def result_of(variant: Variant, out):
    return variant.to_result(out) if variant.to_result else out


def register_note(handles: list) -> str:
    """'regs' cell: registers (and spills) of the compiled kernels one call launched."""
    parts = []
    for handle in handles:
        regs, spills = getattr(handle, "n_regs", None), getattr(handle, "n_spills", 0)
        if regs is not None:
            parts.append(f"{regs}" + (f"+{spills}sp" if spills else ""))
    return "/".join(parts) or "-"


def prepare(variant: Variant, ref: torch.Tensor, registers: dict) -> None:
    """First call (compiles), its check and the registers; failures are recorded, not raised."""
    try:
        out = variant.fn()
        common.synchronize(ref.device)
    except Exception as exc:  # noqa: BLE001 - one failing config must not stop the sweep
        variant.check = common.describe_error(exc)
        return
    variant.check, variant.max_err = check_output(result_of(variant, out), ref)
    if variant.kernel_config is not None:
        handles = registers.get(variant.kernel_config, [])
        variant.regs = register_note(handles[:2])


def recheck(variant: Variant, ref: torch.Tensor) -> None:
    """After all timed calls: the output again and (persistent buffers) that they ended zeroed."""
    if not variant.times_us:
        return
    check, err = check_output(result_of(variant, variant.fn()), ref)
    common.synchronize(ref.device)
    if check != "ok":
        variant.check = f"{check} after timing"
    elif variant.workspace is not None and variant.workspace.zeroed.count_nonzero().item():
        variant.check = "MISMATCH buffers not zeroed"
    variant.max_err = max(variant.max_err or 0.0, err)


def run_rounds(variants: list[Variant], timer: Timer, rounds: int) -> None:
    for _ in range(rounds):
        for variant in variants:
            if variant.check == "ok" or variant.times_us:
                variant.times_us.append(timer.median_us(variant.fn))


# ----------------------------------------------------------------------------- reporting


def bytes_moved(shape) -> int:
    rows, cols = shape
    return rows * cols * 2 + cols * 2


def row(variant: Variant, copy_gbs: float, shape, best=None, launches=None) -> list:
    us = best if best is not None else variant.best_us
    gbs = bytes_moved(shape) / (us * 1e-6) / 1e9 if us else None
    pct = 100 * gbs / copy_gbs if gbs else None
    if launches is not None:
        return [variant.group, variant.config, launches, us, gbs, pct, variant.check]
    err = "-" if variant.max_err is None else f"{variant.max_err:.3g}"
    return [variant.group, variant.config, variant.regs, us, gbs, pct, err, variant.check]


def best_per_group(variants: list[Variant]) -> dict[str, Variant]:
    best: dict[str, Variant] = {}
    for v in variants:
        if v.check == "ok" and v.best_us is not None:
            if v.group not in best or v.best_us < best[v.group].best_us:
                best[v.group] = v
    return best


def count_launches(variant: Variant, device: str) -> str:
    try:
        names = common.device_kernel_names(variant.fn, device)
    except Exception as exc:  # noqa: BLE001
        return f"? ({type(exc).__name__})"
    return "n/a" if names is None else str(len(names))


def verdict(final: dict[str, float], copy_gbs: float, shape) -> list[str]:
    """Lines comparing the best single-kernel form with split2 in the final rounds."""
    def pct(us):
        return 100 * bytes_moved(shape) / (us * 1e-6) / 1e9 / copy_gbs

    lines = []
    split2 = final.get("split2")
    singles = {g: us for g, us in final.items() if g.split("-")[0] in ("semaphore", "atomic", "rows")}
    if split2 is None or not singles:
        return ["verdict: not enough variants ran (split2 and one single-kernel form needed)"]
    group, us = min(singles.items(), key=lambda item: item[1])
    lines.append(f"best single kernel: {group} {us:.1f} us = {pct(us):.1f}% of copy; "
                 f"split2 {split2:.1f} us = {pct(split2):.1f}%; "
                 f"difference {split2 - us:+.1f} us ({pct(us) - pct(split2):+.1f} points)")
    if "split2-kernel1-only" in final:
        k1 = final["split2-kernel1-only"]
        lines.append(f"split2's kernel 1 alone: {k1:.1f} us = {pct(k1):.1f}% of copy "
                     f"(kernel 2 and the gap cost {split2 - k1:.1f} us)")
    for mode in ("percall", "persist"):
        of_mode = {g: t for g, t in singles.items() if g.endswith(mode)}
        if of_mode:
            g, t = min(of_mode.items(), key=lambda item: item[1])
            lines.append(f"best {mode}: {g} {t:.1f} us = {pct(t):.1f}% of copy")
    return lines


# ----------------------------------------------------------------------------- main


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a ~1 minute subset")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--small", action="store_true", help="96x256 and small configs (CPU smoke test)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--final-rounds", type=int, default=5)
    parser.add_argument("--iters", type=int, default=200, help="timed calls a round")
    parser.add_argument("--forms", default="split2,semaphore,atomic,rows",
                        help="comma-separated kernel forms to sweep (references always run)")
    parser.add_argument("--budget-s", type=float, default=None,
                        help="stop compiling new variants after this many seconds (default 150, quick 45)")
    parser.add_argument("--no-compilers", action="store_true", help="leave out inductor and tritonize")
    parser.add_argument("--out", default=None, help="directory for sum_first_variants.md/.json")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("CUDA is not available (use --device cpu --small for a smoke test)")
    args.forms = common.parse_list(args.forms, FORMS, "forms")
    if args.budget_s is None:
        args.budget_s = 45.0 if args.quick else 150.0
    return args


def main(argv=None):
    args = parse_args(argv)
    start = time.perf_counter()
    cuda = args.device == "cuda"
    K = sum_first_kernels if cuda else sum_first_kernels.interpreted_copy()
    shape = SMALL_SHAPE if args.small else FULL_SHAPE
    env = common.environment_line(args.device)
    sms = torch.cuda.get_device_properties(0).multi_processor_count if cuda else 4
    copy_gbs = common.copy_bandwidth_gbs(args.device)
    print(f"{env}; {sms} SMs; copy bandwidth: {copy_gbs:.1f} GB/s", flush=True)
    torch.manual_seed(0)
    x = torch.randn(shape, device=args.device, dtype=torch.bfloat16)
    ref = x.float().sum(0)
    timer = Timer(args.iters, args.device)
    registers: dict = {}

    variants = reference_variants(x, with_compilers=cuda and not (args.quick or args.no_compilers))
    for v in variants:
        prepare(v, ref, registers)
    skipped = []
    configs = small_sweep() if args.small else sweep(sms, args.quick)
    for config in [c for c in configs if c.form in args.forms]:
        if time.perf_counter() - start > args.budget_s:
            skipped.append(f"{config.form} {config.label()}")
            continue
        for v in kernel_variants(K, config, x, registers):
            prepare(v, ref, registers)
            if v.check == "ok":
                v.times_us.append(timer.median_us(v.fn))  # round 1, while its kernel is warm
            progress = row(v, copy_gbs, shape)
            print(f"  {v.group:20s} {v.config:34s} {v.check:10s} {v.best_us or float('nan'):7.1f} us "
                  f"{progress[5] or float('nan'):5.1f}% copy  regs {v.regs}", flush=True)
            variants.append(v)
    for v in variants:
        if v.kernel_config is None and v.check == "ok":
            v.times_us.append(timer.median_us(v.fn))
    run_rounds(variants, timer, args.rounds - 1)
    for v in variants:
        recheck(v, ref)

    print(f"\n{env}; bf16 {shape[0]}x{shape[1]}, {bytes_moved(shape) / 1e6:.1f} MB; "
          f"copy bandwidth: {copy_gbs:.1f} GB/s")
    print(f"all variants (fastest of {args.rounds} interleaved rounds, {args.iters} calls each):")
    rows = [row(v, copy_gbs, shape) for v in variants]
    print(common.format_table(HEADERS, rows))
    if skipped:
        print(f"skipped (budget {args.budget_s:.0f} s): {', '.join(skipped)}")

    finalists = list(best_per_group(variants).values())
    for v in finalists:
        v.times_us = []
    run_rounds(finalists, timer, args.final_rounds)
    final_rows = [row(v, copy_gbs, shape, v.best_us, count_launches(v, args.device)) for v in finalists]
    print(f"\nbest config per variant, re-timed together ({args.final_rounds} interleaved rounds; "
          "launches = device activities a call, torch.profiler):")
    print(common.format_table(FINAL_HEADERS, final_rows))
    lines = verdict({v.group: v.best_us for v in finalists}, copy_gbs, shape)
    print("\n".join(lines))
    print(f"total {time.perf_counter() - start:.0f} s")
    if args.out:
        write_outputs(args.out, env, copy_gbs, rows, final_rows, lines, skipped)
    return rows, final_rows, lines


def write_outputs(out_dir, env, copy_gbs, rows, final_rows, lines, skipped):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "sum_first_variants.md"), "w") as f:
        f.write(f"{env}; copy bandwidth: {copy_gbs:.1f} GB/s\n\n")
        f.write(common.format_markdown(FINAL_HEADERS, final_rows) + "\n\n")
        f.write("\n".join(f"- {line}" for line in lines) + "\n\n")
        f.write(common.format_markdown(HEADERS, rows) + "\n")
        if skipped:
            f.write(f"\nskipped: {', '.join(skipped)}\n")
    with open(os.path.join(out_dir, "sum_first_variants.json"), "w") as f:
        json.dump({"environment": env, "copy_gbs": copy_gbs, "headers": HEADERS, "rows": rows,
                   "final_headers": FINAL_HEADERS, "final_rows": final_rows, "verdict": lines,
                   "skipped": skipped}, f, indent=1, default=str)


if __name__ == "__main__":
    main()
