"""The OpInfo sweep (see tests/opinfo_sweep.py): every (op_db entry, dtype) pair the device under
test (TRITONIZE_TEST_DEVICE) supports, its first sample through tritonize vs eager.

Which pairs: TRITONIZE_OPINFO_DTYPES="all" runs every pair the standalone sweep runs (all ten
dtypes); a comma-separated list of dtype names runs every entry in those dtypes. By default
(unset) the subset that keeps `make test` short: every float32 pair, and in the other dtypes of
TEST_DTYPES the elementwise entries (unary and binary ufunc OpInfos, where the dtype rules of
the pointwise lowering live) -- about a third of all pairs. The standalone
`python tests/opinfo_sweep.py` always runs all of them and reports the figures.

* a pair in the expected-failure table (tests/opinfo_expected_failures.py) must fail: it is
  reported as xfail, and an unexpected pass fails, asking to remove the pair from the table;
* any other pair must pass; eager errors and random/uninitialized ops are skipped (not counted).

Summary: "opinfo sweep: pairs=N pass=P (..%) pass_no_fallback=Q (..%) fail=F (eager errors E, skipped S)"
is written to the terminal when the session ends (also without -s). Under pytest-xdist each worker
only sees its share of the entries: every worker's line, and the total once the last worker
finishes, come out in pytest's "warnings summary" (workers have no terminal). The standalone
`python tests/opinfo_sweep.py` always gives the true total. TRITONIZE_OPINFO_SUMMARY=path
appends the summary line(s) to that file as well.

Regenerate the table after compiler changes: python tests/opinfo_sweep.py --write-expected
"""
from __future__ import annotations

import json
import math
import os
import pathlib
import tempfile
import warnings

import pytest
import torch

import opinfo_sweep as sweep
from conftest import DEVICE

# The default subset's dtypes (the elementwise entries only, except float32).
TEST_DTYPES = ("float32", "float64", "float16", "bfloat16", "int32", "int64", "bool")


def _pairs() -> list:
    wanted = os.environ.get("TRITONIZE_OPINFO_DTYPES", "").strip()
    if wanted == "all":
        return sweep.sweep_pairs(DEVICE, sweep.SWEEP_DTYPES)
    if wanted:
        return sweep.sweep_pairs(DEVICE, [d.strip() for d in wanted.split(",") if d.strip()])
    return [(op, dtype) for op, dtype in sweep.sweep_pairs(DEVICE, TEST_DTYPES)
            if dtype == torch.float32 or sweep.is_elementwise(op)]


PAIRS = _pairs()
EXPECTED_FAILURES = sweep.expected_failures(DEVICE)
SLOW = sweep.slow_entries()
RESULTS: dict[tuple, dict] = {}


class OpInfoSweepSummary(UserWarning):
    """Carries the sweep's summary line to the controller's terminal under pytest-xdist."""


def _emit(request, line: str) -> None:
    config = request.config
    if os.environ.get("TRITONIZE_OPINFO_SUMMARY"):
        with open(os.environ["TRITONIZE_OPINFO_SUMMARY"], "a") as f:
            f.write(line + "\n")
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capman = config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and not hasattr(config, "workerinput"):
        if capman is not None:
            with capman.global_and_fixture_disabled():
                reporter.write_line("\n" + line)
        else:
            reporter.write_line("\n" + line)
    else:  # an xdist worker: its output is discarded, but warnings reach the controller
        print(line)
        warnings.warn(OpInfoSweepSummary(line))


def _merged_total(results: list[dict]) -> list[dict] | None:
    """Under xdist: share this worker's results through a directory for this test run; the worker
    that finds every worker's file there returns all results (None before that)."""
    uid, count = os.environ.get("PYTEST_XDIST_TESTRUNUID"), os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not (uid and count and worker):
        return None
    directory = pathlib.Path(tempfile.gettempdir()) / f"tritonize-opinfo-{uid}"
    directory.mkdir(exist_ok=True)
    tmp = directory / f".{worker}.tmp"
    tmp.write_text(json.dumps(results))
    os.replace(tmp, directory / f"{worker}.json")
    files = sorted(directory.glob("*.json"))
    if len(files) < int(count):
        return None
    return [r for f in files for r in json.loads(f.read_text())]


@pytest.fixture(scope="session", autouse=True)
def _opinfo_summary(request):
    yield
    if not RESULTS:
        return
    results = list(RESULTS.values())
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    line = sweep.summary_line(results)
    slow = [f"{sweep.key_text(sweep.result_key(r))} {r['time_s']:.0f}s"
            for r in results if r["time_s"] > sweep.SLOW_SECONDS]
    if slow:
        line += f"; slow: {', '.join(slow)}"
    if worker:
        _emit(request, f"{line} [xdist worker {worker}: its share only]")
        total = _merged_total(results)
        if total is not None:
            _emit(request, f"{sweep.summary_line(total)} [all xdist workers]")
    else:
        _emit(request, line)


def _param(op, dtype):
    key = (sweep.entry_id(op), sweep.dtype_name(dtype))
    return pytest.param(op, dtype, id=sweep.key_text(key), marks=[pytest.mark.slow] if key in SLOW else [])


@pytest.mark.parametrize("op,dtype", [_param(op, dtype) for op, dtype in PAIRS])
def test_opinfo(op, dtype):
    r = sweep.run_entry_full(op, DEVICE, dtype)
    key = sweep.result_key(r)
    RESULTS[key] = r
    eid, status = sweep.key_text(key), r["status"]
    if status in ("eager_error", "skip_nondeterministic"):
        pytest.skip(f"{status}: {r['detail']}")
    if key in EXPECTED_FAILURES:
        if status == "pass":
            pytest.fail(f"{eid} passes now but is in the expected-failure table: remove it from "
                        f"tests/opinfo_expected_failures.py (or run python tests/opinfo_sweep.py "
                        f"--write-expected)", pytrace=False)
        pytest.xfail(f"expected failure ({EXPECTED_FAILURES[key]}); got: {r['detail']}")
    if status != "pass":
        frame = f"\n  last tritonize frame: {r['tritonize_frame']}" if r["tritonize_frame"] else ""
        if r.get("generated_frame"):
            frame += f"\n  in {r['generated_frame']}"
        pytest.fail(f"{eid}: {r['category']}: {r['detail']}{frame}\n  fallbacks: {r['fallbacks']}",
                    pytrace=False)
    in_scope = sweep.is_elementwise(op) and not dtype.is_complex and op.name not in COMPLEX_CASTS
    core = core_fallbacks(r["fallbacks"]) if in_scope else []
    assert not core, f"{eid}: an elementwise entry fell back on ops of aten's core set: {core}"


# Casts to complex dtypes: complex tensors are out of scope (their `_to_copy` runs through aten).
COMPLEX_CASTS = {"cfloat", "cdouble", "chalf"}


def core_fallbacks(fallbacks) -> list[str]:
    """The fallback ops (by their "aten.name.overload" text) that carry torch's `core` tag: an
    elementwise entry must run those as generated kernels (issue 2)."""
    core = []
    for name in fallbacks:
        namespace, op, overload = name.split(".")
        packet = getattr(getattr(torch.ops, namespace), op, None)
        overload_op = getattr(packet, overload, None) if packet is not None else None
        if overload_op is not None and torch.Tag.core in overload_op.tags:
            core.append(name)
    return core


# ---------------------------------------------------------------------------------------------
# the sweep against float64 (issue 21; tests/opinfo_float64.py)

# Cheap elementwise, reduction and norm entries, on their first few samples.
FLOAT64_ENTRIES = ("exp", "mul", "nn.functional.gelu", "var", "cumsum", "nn.functional.layer_norm")
FLOAT64_SAMPLES = 4
# Entries judged on every sample: diff's n-th differences amplify roundings. Samples failed by one
# element while differences were stored (rounded) every second step; a stencil is now recomputed,
# so every sample rounds once, at the end.
FLOAT64_EVERY_SAMPLE = ("diff",)


@pytest.mark.parametrize("op,dtype", [
    pytest.param(op, dtype, id=sweep.key_text((sweep.entry_id(op), sweep.dtype_name(dtype))))
    for op, dtype in sweep.sweep_pairs(DEVICE, ("float16", "bfloat16"))
    if sweep.entry_id(op) in FLOAT64_ENTRIES + FLOAT64_EVERY_SAMPLE])
def test_opinfo_no_worse_than_eager_against_float64(op, dtype):
    samples = 0 if sweep.entry_id(op) in FLOAT64_EVERY_SAMPLE else FLOAT64_SAMPLES
    r = sweep.run_entry_full(op, DEVICE, dtype, against_float64=True, samples=samples)
    assert r["status"] == "no_worse", f"{r['status']}: {r['detail']} {r['errors']}"
    assert r["errors"] is not None and r["errors"]["margin"] <= 1


def _fp16_leaves(values, eager_shift=(), tritonize_shift=()):
    """(tritonize, eager, reference) for a float64 reference: eager and tritonize are its fp16
    rounding, moved by whole fp16 steps at the positions given as {index: steps}."""
    ref = torch.tensor(values, dtype=torch.float64)

    def moved(shifts):
        t = ref.half()
        for i, steps in dict(shifts).items():
            for _ in range(abs(steps)):
                t[i] = torch.nextafter(t[i], torch.tensor(math.copysign(math.inf, steps), dtype=torch.float16))
        return t

    return moved(tritonize_shift), moved(eager_shift), ref


def test_no_worse_rule_on_hand_made_tensors():
    from opinfo_float64 import float_verdict, judge

    values = [4000.3, 1.0 / 3, -7.123456, 0.001234]
    # correctly rounded, and one step off where eager is too: no worse
    assert float_verdict("out", *_fp16_leaves(values)).problem is None
    assert float_verdict("out", *_fp16_leaves(values, {2: 1}, {2: -1})).problem is None
    # eager overflowed in an intermediate where float64 did not: a finite value close to float64 is fine
    tritonize, eager, ref = _fp16_leaves([60000.0, 1.5])
    eager[0] = math.inf
    assert float_verdict("out", tritonize, eager, ref).problem is None
    # 8 steps off on the small element: hidden by the absolute error at 4000 (eps * 4000 = 3.9),
    # caught by the relative one
    off = float_verdict("out", *_fp16_leaves(values, {}, {3: 8}))
    assert off.problem and off.tritonize_abs_eps < 1 < off.tritonize_rel_eps
    # NaN where float64 and eager are finite
    tritonize, eager, ref = _fp16_leaves(values)
    tritonize[1] = math.nan
    assert "NaN/inf" in float_verdict("out", tritonize, eager, ref).problem
    # through judge: outputs and inputs after the call, integer leaves exact
    t, e, r = _fp16_leaves(values)
    index = torch.tensor([0, 3])
    verdicts = judge((t, index), [t], (e, index), [e], (r, index), [r])
    assert [v.problem for v in verdicts] == [None, None, None]
    verdicts = judge((t, index + 1), [t], (e, index), [e], (r, index), [r])
    assert "differ from eager's" in verdicts[1].problem


def test_upcast_keeps_input_aliasing():
    from opinfo_float64 import upcast_tensors

    base = torch.arange(12, dtype=torch.float16)
    a, b, ints = base[2:8].view(2, 3), base.view(3, 4).t(), torch.arange(3)
    up_a, up_b, up_ints = upcast_tensors([a, b, ints])
    assert up_ints is ints and up_a.dtype == up_b.dtype == torch.float64
    assert torch.equal(up_a, a.double()) and torch.equal(up_b, b.double()) and up_b.stride() == b.stride()
    up_a[0, 0] = 100  # base[2] is b[2, 0]
    assert up_b[2, 0].item() == 100
