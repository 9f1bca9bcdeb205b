"""OpInfo sweep against float64 (issue 21): fp16/bf16 results no worse than eager's.

`python tests/opinfo_sweep.py --against-float64` (run_entry_full(..., against_float64=True)) judges
each float16 / bfloat16 pair by its distance from a float64 reference instead of its distance from
eager. Per sample (the sweep's first sample of each pair; with `--samples N` the first N, 0 for
all of them, the pair then judged by its worst sample):

  * the float64 reference: eager run on the sample upcast (upcast_sample): every fp16/bf16 tensor
    leaf converted to float64 (aliasing among inputs, strides and offsets kept: each storage is
    converted once), and every `torch.float16` / `torch.bfloat16` dtype argument equal to the swept
    dtype replaced by `torch.float64` (factory functions, `dtype=` of reductions and `to`). Integer,
    bool and other floating leaves are left as they are;
  * eager's error: eager in the low-precision dtype against that reference; tritonize's error:
    tritonize's result against it. Outputs and the inputs after the call (in-place ops) are judged
    leaf by leaf (judge).

The "no worse" rule, per tensor leaf (leaf_verdict), all arithmetic in float64:

  * tritonize's leaf has eager's dtype and shape;
  * integer and bool leaves equal eager's exactly, or the float64 run's exactly (the
    result is then recorded as matching float64: ties broken another way, or an integer computed
    from values eager rounded; such leaves are listed in the report);
  * floating leaves (e = eager, a = tritonize, r = reference, eps = the leaf dtype's machine
    epsilon: fp16 2**-10, bf16 2**-7; tiny = its smallest normal number):
      - where r is NaN or +-inf, a equals e or r there (NaN equal to NaN, infinities by sign);
      - where r is finite and e is not (eager overflowed or cancelled inf - inf while float64 did
        not), a equals e there, or is finite and counted in the error bound below;
      - everywhere else (r finite) a must be finite, and two errors, each in units of eps, must
        both hold with SLACK = 0.25:
            absolute:  max|a - r| / (eps * M)            with M = max(|r|, tiny) over the leaf
            relative:  max(|a - r| / (eps * max(|r|, tiny)))   (elementwise, then the max)
        tritonize's <= (1 + SLACK) * eager's + 1.
    The "+ 1" is one epsilon at the reference's magnitude: a correctly rounded result is within
    half of it, so a result eager's own rounding happened to get exact is not failed for one
    rounding of a value computed in float32. The absolute error alone would let small elements
    be wrong under the cover of large ones' rounding (for exp of [-9, 9] in fp16, one eps at the
    largest value, 8103, is 7.9: more than most outputs); the relative error alone would let the
    largest elements drift where eager has a large relative error on some near-zero element.
    Requiring both keeps the rule strict at every scale while a correctly rounded result always
    passes. (It also means that where cancellation amplifies intermediate roundings, e.g. a
    5th-order diff, a compiled result that rounds at other steps than eager can fail on one
    element by chance while its largest error is smaller than eager's.)
  * float64 leaves (float_power, `dtype=torch.float64` arguments: ops that compute in float64
    whatever their input) are held to the ordinary rule instead (float64 tolerances, 1e-7, against
    eager): there eager's computation is the float64 run's own, exact by definition, and any other
    float64 implementation would be "worse" by an ulp;
  * non-tensor leaves equal eager's.

Statuses (besides the sweep's eager_error and skip_nondeterministic):
  no_worse         every leaf satisfies the rule: the pass of this mode
  worse            a leaf does not (wrong dtype/shape, integers differ, NaN/inf, or errors above the
                   bound): a failure; "errors" gives both errors of the worst leaf
  fail             tritonize raised (as in the ordinary sweep): a failure
  float64_error    eager raises on the upcast sample (the op rejects float64, or mixes the upcast
                   leaves with other floating ones it requires to match)
  float64_changed  the float64 run gives another structure, shape or non-floating dtype than eager
                   (the upcast changes the op's behaviour: views of the bits as another dtype, ...)
  no_upcast        the sample has nothing to upcast (no fp16/bf16 tensor or dtype leaf)
The last three are not judged; their "ordinary" field says whether the ordinary rule
(opinfo_compare.compare_with_eager) passes them.
"""
from __future__ import annotations

import dataclasses
import math

import torch
import torch.utils._pytree as pytree

from helpers import tolerances
from opinfo_compare import LOW_PRECISION, Call, _mismatch_summary, _same_scalar, compare_with_eager
from opinfo_report import one_line

SLACK = 0.25
# Leaves of these dtypes are eager's own float64 computation: held to the ordinary rule.
FULL_PRECISION = (torch.float64, torch.complex128)


class Float64Changed(Exception):
    """The float64 run's result cannot be compared with eager's leaf by leaf."""


# ---------------------------------------------------------------------------------------------
# the float64 reference


def upcast_tensors(tensors: list) -> list:
    """float64 copies of the fp16/bf16 tensors (others as they are). Each storage is converted
    once and every tensor re-viewed on it with its size, stride and offset, so inputs that alias
    each other still do."""
    converted: dict = {}
    out = []
    for t in tensors:
        if not isinstance(t, torch.Tensor) or t.dtype not in LOW_PRECISION:
            out.append(t)
            continue
        storage = t.untyped_storage() if t.layout == torch.strided and type(t) is torch.Tensor else None
        if storage is None or storage.nbytes() == 0:
            out.append(t.to(torch.float64))
            continue
        key = (storage.data_ptr(), storage.nbytes(), t.dtype)
        if key not in converted:
            flat = torch.empty(0, dtype=t.dtype, device=t.device)
            flat.set_(storage, 0, (storage.nbytes() // t.element_size(),), (1,))
            converted[key] = flat.to(torch.float64)
        view = torch.empty(0, dtype=torch.float64, device=t.device)
        view.set_(converted[key].untyped_storage(), t.storage_offset(), t.size(), t.stride())
        out.append(view)
    return out


def upcast_sample(call: Call, dtype: torch.dtype):
    """(function, inputs, what was upcast) for the float64 run of `call`'s sample: the tensor
    leaves upcast by upcast_tensors, the dtype leaves equal to `dtype` replaced by float64.
    `what` is empty when there was nothing to upcast."""
    inputs = call.fresh_inputs()
    upcast = upcast_tensors(inputs)
    tensors = sum(1 for t, u in zip(inputs, upcast) if u is not t)
    leaves = [torch.float64 if leaf is dtype else leaf for leaf in call.leaves]
    dtypes = sum(1 for leaf in call.leaves if leaf is dtype)
    what = ", ".join(f"{n} {name}" for n, name in ((tensors, "tensors"), (dtypes, "dtype arguments")) if n)
    return call.with_leaves(leaves), upcast, what


def check_comparable(reference, expected, what: str) -> None:
    """Raise Float64Changed unless the float64 run's leaves pair up with eager's: as many leaves,
    tensors where eager has tensors, of eager's shape, floating where eager's are floating and of
    eager's dtype where eager's are integer or bool."""
    r_leaves, e_leaves = pytree.tree_leaves(reference), pytree.tree_leaves(expected)
    if len(r_leaves) != len(e_leaves):
        raise Float64Changed(f"{what}: {len(r_leaves)} leaves in float64, eager has {len(e_leaves)}")
    for i, (r, e) in enumerate(zip(r_leaves, e_leaves)):
        if isinstance(e, torch.Tensor) != isinstance(r, torch.Tensor):
            raise Float64Changed(f"{what}[{i}]: float64 gives {type(r).__name__}, eager {type(e).__name__}")
        if not isinstance(e, torch.Tensor):
            continue
        same_kind = _is_float(r) if _is_float(e) else r.dtype == e.dtype
        if r.shape != e.shape or not same_kind:
            raise Float64Changed(f"{what}[{i}]: float64 gives {_describe(r)}, eager {_describe(e)}")


def _is_float(t: torch.Tensor) -> bool:
    return t.is_floating_point() or t.is_complex()


def _describe(t: torch.Tensor) -> str:
    layout = "" if t.layout == torch.strided else f" {str(t.layout).replace('torch.', '')}"
    return f"{str(t.dtype).replace('torch.', '')}{tuple(t.shape)}{layout}"


# ---------------------------------------------------------------------------------------------
# the rule


@dataclasses.dataclass
class LeafVerdict:
    """The rule's verdict on one leaf. Errors are in units of eps (see the module docstring);
    *_abs are the plain max |x - r|. `problem` is None when the leaf is no worse than eager's."""
    leaf: str
    problem: str | None = None
    tritonize_abs: float = 0.0
    eager_abs: float = 0.0
    tritonize_abs_eps: float = 0.0
    eager_abs_eps: float = 0.0
    tritonize_rel_eps: float = 0.0
    eager_rel_eps: float = 0.0
    matched_float64: bool = False  # an integer leaf that equals the float64 run's, not eager's
    ordinary: bool = False  # a float64 leaf, held to the ordinary rule

    def margin(self) -> float:
        """How close the leaf comes to the bound (above 1: over it)."""
        return max(self.tritonize_abs_eps / ((1 + SLACK) * self.eager_abs_eps + 1),
                   self.tritonize_rel_eps / ((1 + SLACK) * self.eager_rel_eps + 1))


def _wide(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to(torch.complex128 if t.is_complex() else torch.float64)


def _same(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (x == y) | (x.isnan() & y.isnan())


def _max(t: torch.Tensor) -> float:
    return t.max().item() if t.numel() else 0.0


def float_verdict(leaf: str, actual: torch.Tensor, eager: torch.Tensor, ref: torch.Tensor) -> LeafVerdict:
    """The rule for one floating leaf (the module docstring)."""
    a, e, r = _wide(actual), _wide(eager), _wide(ref)
    info = torch.finfo(eager.dtype)
    verdict = LeafVerdict(leaf)
    ref_finite = r.isfinite()
    bad = ~ref_finite & ~(_same(a, e) | _same(a, r))
    if bool(bad.any()):
        verdict.problem = f"{leaf}: where float64 gives NaN/inf ({int(bad.sum())} elements) tritonize differs from both"
        return verdict
    kept_eagers = ref_finite & ~e.isfinite() & _same(a, e)  # eager's NaN/inf, kept
    measured = ref_finite & ~kept_eagers
    eager_measured = ref_finite & e.isfinite()
    lost = measured & ~a.isfinite()
    if bool(lost.any()):
        verdict.problem = (f"{leaf}: tritonize gives NaN/inf at {int(lost.sum())} elements where float64 is finite "
                           f"and eager is not NaN/inf there")
        return verdict
    if not bool(ref_finite.any()):
        return verdict
    magnitude = r[ref_finite].abs()
    scale = max(_max(magnitude), info.tiny) * info.eps
    elementwise = info.eps * r.abs().clamp(min=info.tiny)
    a_err, e_err = (a - r).abs(), (e - r).abs()
    verdict.tritonize_abs, verdict.eager_abs = _max(a_err[measured]), _max(e_err[eager_measured])
    verdict.tritonize_abs_eps, verdict.eager_abs_eps = verdict.tritonize_abs / scale, verdict.eager_abs / scale
    verdict.tritonize_rel_eps = _max((a_err / elementwise)[measured])
    verdict.eager_rel_eps = _max((e_err / elementwise)[eager_measured])
    if verdict.margin() > 1:
        verdict.problem = f"{leaf}: worse than eager against float64 (error / bound {verdict.margin():.2f})"
    return verdict


def exact_verdict(leaf: str, actual: torch.Tensor, eager: torch.Tensor, ref: torch.Tensor) -> LeafVerdict:
    """Integer and bool leaves: equal to eager's, or else to the float64 run's."""
    if torch.equal(actual, eager):
        return LeafVerdict(leaf)
    if torch.equal(actual, ref):
        return LeafVerdict(leaf, matched_float64=True)
    wrong = int((actual != eager).sum())
    return LeafVerdict(leaf, problem=f"{leaf}: {wrong} of {eager.numel()} values differ from eager's "
                                     f"(and from the float64 run's)")


def ordinary_leaf_verdict(leaf: str, actual: torch.Tensor, eager: torch.Tensor) -> LeafVerdict:
    """A float64 leaf: within the ordinary float64 tolerance of eager's (module docstring)."""
    try:
        torch.testing.assert_close(actual, eager, equal_nan=True, **tolerances(torch.float64))
    except AssertionError as err:
        return LeafVerdict(leaf, f"{leaf} (float64, ordinary rule): {_mismatch_summary(err)}", ordinary=True)
    return LeafVerdict(leaf, ordinary=True)


def leaf_verdict(leaf: str, actual, eager, ref) -> LeafVerdict:
    """The rule for one leaf of any kind."""
    if not isinstance(eager, torch.Tensor):
        ok = _same_scalar(actual, eager) or _same_scalar(actual, ref)
        return LeafVerdict(leaf, problem=None if ok else f"{leaf}: got {actual!r}, eager gives {eager!r}")
    if not isinstance(actual, torch.Tensor):
        return LeafVerdict(leaf, problem=f"{leaf}: got {type(actual).__name__}, eager gives a tensor")
    if actual.dtype != eager.dtype or actual.shape != eager.shape or actual.layout != eager.layout:
        return LeafVerdict(leaf, problem=f"{leaf}: got {_describe(actual)}, eager gives {_describe(eager)}")
    if eager.layout != torch.strided:  # sparse: the rule on the dense values
        actual, eager, ref = (t.to_dense() if t.layout != torch.strided else t for t in (actual, eager, ref))
    if eager.dtype in FULL_PRECISION:
        return ordinary_leaf_verdict(leaf, actual, eager)
    if _is_float(eager):
        return float_verdict(leaf, actual, eager, ref)
    return exact_verdict(leaf, actual, eager, ref)


def judge(actual, compiled_inputs, expected, eager_inputs, reference, reference_inputs) -> list[LeafVerdict]:
    """One verdict per leaf of the outputs and of the inputs after the call (module docstring).
    Raises Float64Changed when the float64 run does not pair up with eager."""
    verdicts = []
    for what, a_tree, e_tree, r_tree in (("output", actual, expected, reference),
                                         ("input after call", compiled_inputs, eager_inputs, reference_inputs)):
        check_comparable(r_tree, e_tree, what)
        a_leaves, e_leaves, r_leaves = (pytree.tree_leaves(t) for t in (a_tree, e_tree, r_tree))
        if len(a_leaves) != len(e_leaves):
            verdicts.append(LeafVerdict(what, problem=f"{what}: {len(a_leaves)} leaves, eager has {len(e_leaves)}"))
            continue
        verdicts += [leaf_verdict(f"{what}[{i}]", a, e, r)
                     for i, (a, e, r) in enumerate(zip(a_leaves, e_leaves, r_leaves))]
    return verdicts


def worst(verdicts: list[LeafVerdict]) -> LeafVerdict | None:
    """The failing leaf, else the leaf closest to its bound (None without floating leaves)."""
    failing = [v for v in verdicts if v.problem]
    if failing:
        return failing[0]
    floating = [v for v in verdicts if v.tritonize_abs or v.eager_abs or v.tritonize_rel_eps or v.eager_rel_eps]
    return max(floating, key=lambda v: v.margin()) if floating else None


def errors_record(v: LeafVerdict | None) -> dict | None:
    """The JSON form of a verdict's errors (rounded)."""
    if v is None:
        return None
    fields = dataclasses.asdict(v)
    fields.pop("problem")
    fields["margin"] = v.margin()
    return {k: (float(f"{x:.6g}") if isinstance(x, float) else x) for k, x in fields.items()}


# ---------------------------------------------------------------------------------------------
# one pair


def ordinary_verdict(op, call: Call, actual, compiled_inputs, expected, eager_inputs) -> str:
    """"pass" or "fail" by the ordinary rule (for the pairs this mode cannot judge)."""
    try:
        compare_with_eager(op, call, actual, compiled_inputs, expected, eager_inputs)
    except AssertionError:
        return "fail"
    return "pass"


def against_float64(op, call: Call, dtype, actual, compiled_inputs, expected, eager_inputs) -> dict:
    """The result fields (status, category, detail, errors, upcast, ordinary) of a pair whose eager and
    tritonize runs are done: the float64 run, then the rule."""
    fn, inputs, what = upcast_sample(call, dtype)
    fields = {"upcast": what, "errors": None, "ordinary": None, "category": None, "detail": "",
              "matched_float64": [], "ordinary_leaves": []}
    if not what:
        return _unjudged(fields, "no_upcast", "no fp16/bf16 tensor or dtype argument",
                         op, call, actual, compiled_inputs, expected, eager_inputs)
    try:
        reference = fn(*inputs)
    except Exception as err:
        return _unjudged(fields, "float64_error", f"float64 run: {one_line(err)}",
                         op, call, actual, compiled_inputs, expected, eager_inputs)
    try:
        verdicts = judge(actual, compiled_inputs, expected, eager_inputs, reference, inputs)
    except Float64Changed as err:
        return _unjudged(fields, "float64_changed", str(err), op, call, actual, compiled_inputs, expected, eager_inputs)
    leaf = worst(verdicts)
    fields["errors"] = errors_record(leaf)
    fields["matched_float64"] = [v.leaf for v in verdicts if v.matched_float64]
    fields["ordinary_leaves"] = [v.leaf for v in verdicts if v.ordinary]
    if leaf is not None and leaf.problem:
        return {**fields, "status": "worse", "category": "worse_than_eager", "detail": leaf.problem[:400]}
    return {**fields, "status": "no_worse"}


def _unjudged(fields, status, detail, op, call, actual, compiled_inputs, expected, eager_inputs) -> dict:
    ordinary = ordinary_verdict(op, call, actual, compiled_inputs, expected, eager_inputs)
    return {**fields, "status": status, "detail": detail[:300], "ordinary": ordinary}
