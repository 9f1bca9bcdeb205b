"""Are the default launch configs good enough? Default mode vs max-autotune on the kernel suite (GPU).

    PYTHONPATH=src python3 bench/autotune_check.py                 # every case of bench/kernels.py
    PYTHONPATH=src python3 bench/autotune_check.py --cases softmax,layer_norm

For each case of bench/kernels.py it compiles the function with tritonize twice, in
mode="default" (the heuristic's pick, or a few candidates timed) and in mode="max-autotune" (a wide
candidate set refined by coordinate descent), checks both against eager, and times one call of each
(triton.testing.do_bench median). "default/max" above 1 means the default configs are slower; the
goal (issue 5) is at most 1.10 on every case. The configs each mode chose are listed per kernel.
The tritonize caches live in a fresh temporary directory, so every run tunes from scratch.
A failure is a row, not a crash.
"""
import argparse
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import kernels  # noqa: E402

HEADERS = ["case", "default us", "max-autotune us", "default/max", "kernels", "check", "note"]
GOAL = 1.10


class KernelRecorder:
    """Remembers every GPU kernel the runtime loads, to report the config it ended with."""

    def __init__(self):
        from tritonize.runtime import launcher

        self.launcher, self.kernels = launcher, []
        self.original = launcher.GpuKernel.__init__

    def __enter__(self):
        recorder = self

        def init(kernel, *args, **kwargs):
            recorder.original(kernel, *args, **kwargs)
            recorder.kernels.append(kernel)

        self.launcher.GpuKernel.__init__ = init
        return self

    def __exit__(self, *exc):
        self.launcher.GpuKernel.__init__ = self.original

    def configs(self):
        return {k.name: str(k.config) for k in self.kernels}


def run_mode(case, mode, inputs, expected):
    import tritonize

    common.reset_compiler_state()
    with KernelRecorder() as recorder:
        fn = tritonize.compile(case.fn, mode=mode)
        check = kernels.check_against(fn(*inputs), expected)
    seconds = common.median_time_s(lambda: fn(*inputs), "cuda")
    return seconds, check, recorder.configs()


def run_case(case, dtype):
    torch.manual_seed(0)
    try:
        inputs = case.make_inputs("cuda", dtype, False)
        expected = case.fn(*inputs)
        default_s, check_d, configs_d = run_mode(case, "default", inputs, expected)
        max_s, check_m, configs_m = run_mode(case, "max-autotune", inputs, expected)
    except Exception as exc:  # a row, not a crash
        torch.cuda.empty_cache()
        return [case.name, "-", "-", "-", "-", "-", common.describe_error(exc)], []
    ratio = default_s / max_s
    note = "" if ratio <= GOAL else f"default slower than {GOAL:.2f}x"
    check = check_d if check_d != "ok" else check_m
    details = [f"    {name}: default {configs_d.get(name, '?')} | max-autotune {configs_m.get(name, '?')}"
               for name in sorted(set(configs_d) | set(configs_m))]
    del inputs, expected
    torch.cuda.empty_cache()
    return [case.name, default_s * 1e6, max_s * 1e6, ratio, len(configs_d), check, note], details


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", default=",".join(kernels.CASES_BY_NAME))
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    parser.add_argument("--markdown", metavar="FILE")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("autotune_check.py times GPU kernels; CUDA is not available")
    os.environ["TRITONIZE_CACHE_DIR"] = tempfile.mkdtemp(prefix="tritonize-autotune-check-")
    common.import_tritonize()
    names = common.parse_list(args.cases, list(kernels.CASES_BY_NAME), "cases", strict=False)
    environment = common.environment_line("cuda")
    print(environment, flush=True)
    rows = []
    for name in names:
        row, details = run_case(kernels.CASES_BY_NAME[name], getattr(torch, args.dtype))
        rows.append(row)
        print("  " + "  ".join(common.format_cell(c, 2) for c in row), flush=True)
        print("\n".join(details), flush=True)
    ratios = [r[3] for r in rows if isinstance(r[3], float)]
    print()
    print(common.format_table(HEADERS, rows))
    summary = (f"default/max-autotune: max {max(ratios):.3f}, geomean {common.geomean(ratios):.3f} over {len(ratios)} "
               f"cases (goal <= {GOAL}: {'met' if max(ratios) <= GOAL else 'NOT met'})") if ratios else "no case ran"
    print(summary)
    if args.markdown:
        with open(args.markdown, "w") as out:
            out.write(f"{environment}, {args.dtype}\n\n{common.format_markdown(HEADERS, rows)}\n\n- {summary}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
