"""The OpInfo sweep: every (op_db entry, dtype) pair the device supports, through tritonize vs eager.

Library used by tests/test_opinfo_sweep.py, and a standalone triage script:

    python tests/opinfo_sweep.py [--device cpu] [--dtypes float32,int64,...] [--filter SUBSTR]
                                 [--json out.json] [--write-expected] [--jobs N] [-v] [--dynamic]
                                 [--against-float64] [--samples N]

prints a summary (pairs, pass, pass with no fallback, fail, eager errors, skipped; total and per
dtype), the failures grouped by cause and the most common fallback ops. `--write-expected`
rewrites tests/opinfo_expected_failures.py (EXPECTED_FAILURES and SLOW) from the run: run it on
the full sweep (all dtypes, no --filter) after the compiler changed.

The pairs: for each op_db entry, each dtype of SWEEP_DTYPES (float32, float64, float16, bfloat16,
int32, int64, bool, int8, uint8, int16) in `op.supported_dtypes(device)`. Complex and other
dtypes are not swept (our kernels do not generate them; such ops run through aten).

What one pair does (run_entry_full):
  * the first sample of `op.sample_inputs(device, dtype, requires_grad=False)` (seed 0); with
    --samples N the first N (0: all), each compiled afresh, the pair's result that of its worst sample
    (merge_samples);
  * the tensor leaves of (sample.input, sample.args, sample.kwargs) -- pytree-flattened, so a list
    of tensors works -- are the inputs of the compiled function; everything else is closed over;
  * eager and `tritonize.run_and_explain` (a fresh compilation: its outputs, and the report
    with the fallbacks) each get their own copy of the inputs
    (storage cloned, strides and aliasing kept); the outputs
    and the inputs after the call (in-place ops) are compared by the rule in tests/opinfo_compare.py
    (same-dtype eager reference, per-dtype tolerances; fp16/bf16 may match the fp32-upcast
    reference instead).

Statuses:
  pass                  compiled result matches eager
  fail                  anything else: an exception while compiling or running (one-line reason),
                        or a mismatch
  eager_error           eager itself raises on the sample (or the pair has no sample): not counted
  skip_nondeterministic the result is random or uninitialized: not counted. The rule: the OpInfo
                        says so (`has_nondeterministic_output`: empty, empty_like, new_empty, ...),
                        or the op draws from the RNG (NONDETERMINISTIC below: rand*, normal,
                        bernoulli, the dropouts in training mode, rrelu in training mode,
                        fractional max pooling, ...) -- eager and compiled code draw different
                        numbers -- or it exposes uninitialized memory (resize_).
"pass with no fallback" is a pass whose tritonize.explain report has no fallbacks at all.
--dynamic compiles each sample with torch.compile(dynamic=True): every size symbolic (issue 17's
sweep: a graph our symbolic lowering cannot take runs through aten as a whole, a fallback).
--against-float64 (issue 21; float16 and bfloat16 pairs only, the default dtypes then) judges each
pair against a float64 reference instead: tritonize's error no worse than eager's. The rule and
its statuses (no_worse, worse, float64_error, float64_changed, no_upcast) are in
tests/opinfo_float64.py; the report lists every worse pair with both errors.
"""
from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import pathlib
import sys
import tempfile
import time
import warnings

_TESTS = pathlib.Path(__file__).resolve().parent
_SRC = _TESTS.parent / "src"
for _p in (str(_SRC), str(_TESTS)):
    if _p not in sys.path:
        sys.path.insert(0, _p)
os.environ.setdefault("TRITONIZE_CACHE_DIR", tempfile.mkdtemp(prefix="tritonize-test-cache-"))

import torch  # noqa: E402

import tritonize  # noqa: E402
from opinfo_compare import LOW_PRECISION, Call, compare_with_eager, entry_id  # noqa: E402
from opinfo_float64 import against_float64 as judge_against_float64  # noqa: E402
from opinfo_report import (  # noqa: E402,F401  (re-exported for tests/test_opinfo_sweep.py)
    EXPECTED_FILE,
    SLOW_SECONDS,
    expected_failures,
    key_text,
    one_line,
    print_report,
    result_key,
    slow_entries,
    summarize,
    summarize_by_dtype,
    summary_line,
    dtype_table,
    float64_dtype_table,
    print_float64_report,
    summarize_float64_by_dtype,
    generated_frame,
    tritonize_frame,
    write_expected,
)

SWEEP_DTYPES = ("float32", "float64", "float16", "bfloat16", "int32", "int64", "bool",
                "int8", "uint8", "int16")

# Ops that draw from the RNG or expose uninitialized memory (see the module docstring). Entry ids.
NONDETERMINISTIC = frozenset({
    "bernoulli", "cauchy", "exponential", "geometric", "log_normal", "multinomial",
    "normal", "normal.in_place", "normal.number_mean", "uniform",
    "rand_like", "randn", "randn_like", "randint", "randint_like",
    "nn.functional.dropout", "nn.functional.dropout2d", "nn.functional.dropout3d",
    "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout.with_train",
    "nn.functional.rrelu",  # its sample has training=True
    "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d",
    "resize_",  # grows into uninitialized memory
    # uninitialized memory (has_nondeterministic_output is not set on every torch version)
    "empty", "empty_like", "empty_permuted", "empty_strided", "new_empty", "new_empty_strided",
    "torch.ops.aten._efficient_attention_forward",  # returns the RNG seed and offset it drew
    "torch.ops.aten._flash_attention_forward",  # the same (CUDA only)
})

# Why an entry cannot pass, where the one-line error does not say it (entry id -> reason);
# --write-expected writes these instead of the generated reasons.
_UINT8_UPSAMPLE = ("eager's uint8 upsampling kernel rounds in fixed point; the graph tritonize gets is "
                   "torch's float decomposition (applied at the Autograd key, before any backend), which "
                   "differs from eager by 1 on some elements; tritonize matches the decomposition exactly")
KNOWN_REASONS: dict[str, str] = {
    "nn.functional.interpolate.bilinear": _UINT8_UPSAMPLE,
    "nn.functional.interpolate.bicubic": _UINT8_UPSAMPLE,
    "nn.functional.upsample_bilinear": _UINT8_UPSAMPLE,
}


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def sweep_pairs(device: str = "cpu", dtypes=SWEEP_DTYPES, substring: str | None = None) -> list:
    """(op, dtype) for each op_db entry and each of `dtypes` it supports on `device`, entry-major
    in op_db order."""
    from torch.testing._internal.common_methods_invocations import op_db

    device_type = torch.device(device).type
    wanted = [getattr(torch, d) if isinstance(d, str) else d for d in dtypes]
    pairs = []
    for op in op_db:
        if substring and substring not in entry_id(op):
            continue
        supported = op.supported_dtypes(device_type)
        pairs += [(op, dtype) for dtype in wanted if dtype in supported]
    return pairs


def sweep_entries(device: str = "cpu", dtype: torch.dtype = torch.float32) -> list:
    """The op_db entries that support `dtype` on `device`, in op_db order."""
    return [op for op, _ in sweep_pairs(device, [dtype])]


def is_elementwise(op) -> bool:
    """A unary or binary ufunc OpInfo (the elementwise entries of op_db)."""
    from torch.testing._internal.opinfo.core import BinaryUfuncInfo, UnaryUfuncInfo

    return isinstance(op, (UnaryUfuncInfo, BinaryUfuncInfo))


def is_nondeterministic(op) -> bool:
    return bool(getattr(op, "has_nondeterministic_output", False)) or entry_id(op) in NONDETERMINISTIC \
        or op.name in NONDETERMINISTIC


# ---------------------------------------------------------------------------------------------
# one pair


@contextlib.contextmanager
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def run_entry_full(op, device: str = "cpu", dtype: torch.dtype = torch.float32, dynamic: bool = False,
                   against_float64: bool = False, samples: int = 1) -> dict:
    """One pair (module docstring). against_float64: judged against the float64 reference
    (tests/opinfo_float64.py); fp16/bf16 pairs only. samples: run the first `samples` samples, 0
    for all of them (merge_samples makes one result of them)."""
    if against_float64 and dtype not in LOW_PRECISION:
        raise ValueError(f"against_float64 judges float16 and bfloat16 pairs, not {dtype}")
    start = time.perf_counter()
    result = {"id": entry_id(op), "dtype": dtype_name(dtype), "status": "fail", "category": None,
              "detail": "", "reference": None, "fallbacks": {}, "graphs": None, "kernels": None,
              "externs": {}, "tritonize_frame": None, "generated_frame": None}
    try:
        with _quiet():
            _run(op, device, dtype, result, dynamic, against_float64, samples)
    except Exception as err:  # never let one pair break the sweep
        result.update(status="fail", category="sweep_error", detail=f"sweep: {one_line(err)}")
    finally:
        torch._dynamo.reset()
    result["time_s"] = round(time.perf_counter() - start, 3)
    return result


def _run(op, device, dtype, result, dynamic: bool = False, against_float64: bool = False, samples: int = 1) -> None:
    if is_nondeterministic(op):
        result.update(status="skip_nondeterministic", detail="random or uninitialized output")
        return
    torch.manual_seed(0)
    try:
        chosen = list(itertools.islice(op.sample_inputs(device, dtype, requires_grad=False), samples or None))
    except Exception as err:
        result.update(status="eager_error", detail=f"sample_inputs: {one_line(err)}")
        return
    if not chosen:
        result.update(status="eager_error", detail="no sample input")
        return
    outcomes = []
    for k, sample in enumerate(chosen):
        if k:
            torch._dynamo.reset()  # each sample compiled afresh, as the first (no automatic dynamic shapes)
        outcome = {"sample": k}
        _run_sample(op, sample, dtype, outcome, dynamic, against_float64)
        outcomes.append(outcome)
    if len(outcomes) == 1:
        del outcomes[0]["sample"]
        result.update(outcomes[0])
    else:
        result.update(merge_samples(outcomes))


def _run_sample(op, sample, dtype, result, dynamic: bool, against_float64: bool) -> None:
    """One sample: eager, tritonize, then the comparison; the outcome's fields into `result`."""
    call = Call(op, sample)
    eager_inputs = call.fresh_inputs()
    try:
        expected = call.fn(*eager_inputs)
    except Exception as err:
        result.update(status="eager_error", detail=f"eager: {one_line(err)}")
        return

    try:
        compiled_inputs = call.fresh_inputs()
        actual, report = tritonize.run_and_explain(call.fn, *compiled_inputs, dynamic=True if dynamic else None)
        result.update(fallbacks=dict(report.fallbacks), graphs=report.graphs, kernels=len(report.kernels),
                      externs=dict(report.externs))
    except Exception as err:
        frame = tritonize_frame(err)
        result.update(status="fail", category="tritonize_error" if frame else "error",
                      detail=f"compiled run: {one_line(err)}", tritonize_frame=frame,
                      generated_frame=generated_frame(err))
        return
    if against_float64:
        result.update(judge_against_float64(op, call, dtype, actual, compiled_inputs, expected, eager_inputs))
        return
    try:
        reference = compare_with_eager(op, call, actual, compiled_inputs, expected, eager_inputs)
    except AssertionError as err:
        result.update(status="fail", category="wrong_result", detail=f"mismatch: {' '.join(str(err).split())[:300]}")
        return
    result.update(status="pass", category=None, detail="", reference=reference)


# The outcome that stands for a pair of several samples: the first of the lowest rank (a no_worse
# pair: the sample closest to its bound). An unjudged float64 sample the ordinary rule fails
# ranks before no_worse, so it is not hidden by the judged ones.
_SAMPLE_RANK = {"worse": 0, "fail": 1, "unjudged_ordinary_fail": 2, "no_worse": 3, "pass": 3,
                "float64_error": 4, "float64_changed": 4, "no_upcast": 4, "eager_error": 5}


def _sample_rank(outcome: dict) -> tuple:
    status = outcome["status"]
    if outcome.get("ordinary") == "fail":
        status = "unjudged_ordinary_fail"
    margin = (outcome.get("errors") or {}).get("margin", 0.0)
    return (_SAMPLE_RANK[status], -margin if status == "no_worse" else 0.0, outcome["sample"])


def merge_samples(outcomes: list[dict]) -> dict:
    """One result for a pair run on several samples: the fields of the outcome that stands for it
    (_SAMPLE_RANK), `sample` its index, `samples` how many ran (eager errors included), and the
    fallbacks, graphs and kernels of all of them together."""
    merged = dict(min(outcomes, key=_sample_rank))
    merged["samples"] = len(outcomes)
    fallbacks: dict = {}
    for outcome in outcomes:
        for name, count in outcome.get("fallbacks", {}).items():
            fallbacks[name] = fallbacks.get(name, 0) + count
    merged["fallbacks"] = fallbacks
    for key in ("graphs", "kernels"):
        counts = [o[key] for o in outcomes if o.get(key) is not None]
        merged[key] = sum(counts) if counts else None
    return merged


# ---------------------------------------------------------------------------------------------
# standalone


def _run_chunk(args) -> list[dict]:
    keys, device, dynamic, against_float64, samples = args
    dtypes = sorted({d for _, d in keys})
    by_key = {(entry_id(op), dtype_name(dt)): (op, dt) for op, dt in sweep_pairs(device, dtypes)}
    results = []
    for key in keys:
        op, dtype = by_key[key]
        results.append(run_entry_full(op, device, dtype, dynamic, against_float64, samples))
    return results


def _parse_dtypes(text: str) -> tuple[str, ...]:
    names = tuple(d.strip() for d in text.split(",") if d.strip())
    for name in names:
        if not isinstance(getattr(torch, name, None), torch.dtype):
            raise SystemExit(f"--dtypes: {name!r} is not a torch dtype")
    return names


def run_pairs(pairs: list, device: str, jobs: int = 1, verbose: bool = False, dynamic: bool = False,
              against_float64: bool = False, samples: int = 1) -> list[dict]:
    if jobs <= 1:
        results = []
        for op, dtype in pairs:
            r = run_entry_full(op, device, dtype, dynamic, against_float64, samples)
            results.append(r)
            if verbose:
                print(f"{key_text(result_key(r))}: {r['status']} {r['time_s']:.1f}s {r['detail'][:150]}", flush=True)
        return results
    import multiprocessing as mp

    keys = [(entry_id(op), dtype_name(dt)) for op, dt in pairs]
    chunks = [keys[k::jobs * 8] for k in range(jobs * 8)]
    results = []
    with mp.get_context("spawn").Pool(jobs) as pool:
        tasks = [(c, device, dynamic, against_float64, samples) for c in chunks if c]
        for chunk in pool.imap_unordered(_run_chunk, tasks):
            results += chunk
    order = {k: n for n, k in enumerate(keys)}
    return sorted(results, key=lambda r: order[result_key(r)])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default=os.environ.get("TRITONIZE_TEST_DEVICE", "cpu"))
    ap.add_argument("--dtypes", "--dtype", default=None,
                    help="comma-separated dtype names (default: all swept dtypes; float16,bfloat16 "
                         "with --against-float64)")
    ap.add_argument("--filter", default=None, help="only entries whose id contains this substring")
    ap.add_argument("--json", default=None, help="write the per-pair results here")
    ap.add_argument("--write-expected", action="store_true",
                    help=f"rewrite {EXPECTED_FILE.name} from this run's failures (full runs only)")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each pair as it finishes")
    ap.add_argument("--dynamic", action="store_true", help="compile with dynamic=True (symbolic sizes)")
    ap.add_argument("--against-float64", action="store_true",
                    help="fp16/bf16: no worse than eager against a float64 reference (tests/opinfo_float64.py)")
    ap.add_argument("--samples", type=int, default=1,
                    help="run each pair on its first N samples, 0 for all (default 1); the pair's result is "
                         "its worst sample's")
    args = ap.parse_args(argv)
    dtypes = _parse_dtypes(args.dtypes or ("float16,bfloat16" if args.against_float64 else ",".join(SWEEP_DTYPES)))
    if args.against_float64 and not {getattr(torch, d) for d in dtypes} <= set(LOW_PRECISION):
        raise SystemExit("--against-float64 judges float16 and bfloat16 only")
    pairs = sweep_pairs(args.device, dtypes, args.filter)
    start = time.perf_counter()
    results = run_pairs(pairs, args.device, args.jobs, args.verbose, args.dynamic, args.against_float64,
                        args.samples)
    wall = time.perf_counter() - start
    (print_float64_report if args.against_float64 else print_report)(results)
    print(f"wall time {wall:.0f} s ({args.jobs} job(s)), device {args.device}, dtypes {','.join(dtypes)}, "
          f"samples per pair {args.samples}")
    if args.json:
        meta = {"device": args.device, "dtypes": dtypes, "filter": args.filter, "wall_s": round(wall, 1),
                "samples": args.samples,
                "summary": summarize(results), "by_dtype": summarize_by_dtype(results),
                "torch": torch.__version__, "against_float64": args.against_float64}
        if args.against_float64:
            meta["by_dtype"] = summarize_float64_by_dtype(results)
            del meta["summary"]
        pathlib.Path(args.json).write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    if args.write_expected:
        if args.dynamic or args.against_float64:
            print("--write-expected ignored with --dynamic or --against-float64 "
                  "(the expected failures are the static sweep's)")
        elif args.filter or set(dtypes) != set(SWEEP_DTYPES) or args.samples != 1:
            print("--write-expected ignored with --filter, --dtypes or --samples (it needs a full run)")
        else:
            write_expected(results, args.device, known_reasons=KNOWN_REASONS)
            print(f"wrote {EXPECTED_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
