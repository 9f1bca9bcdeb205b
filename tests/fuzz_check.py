"""Runs one fuzz program (tests/fuzz_programs.py) three ways and lists what tritonize got wrong.

The three runs: eager in the program's dtype, eager in float64 (the reference: every float input
upcast), and torch.compile(backend="tritonize") in the program's dtype. What is checked:
- outputs: dtype, shape, requires_grad and strides (on dims longer than 1) equal eager's (or, where
  they differ, those of the functional graph AOTAutograd hands every back end); float values
  are as close to the float64 run as eager's are (`ERROR_SLACK` times eager's worst error, plus a
  floor per dtype), NaN/inf where eager has them (a finite value close to the float64 run is
  allowed where eager alone overflowed); integer and bool values equal eager's exactly;
- inputs: bit-identical when eager leaves them alone, otherwise changed as eager changes them;
- aliasing: an output that is a view of an input in eager still follows that input after a later
  in-place update of it (what a user of the view observes);
- training programs: gradients of a weighted sum of the outputs, against float64 like outputs.
"""
from __future__ import annotations

import traceback

import torch

ERROR_SLACK = 4.0
FLOOR = {torch.float32: 2e-5, torch.float64: 1e-9, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def load(program):
    """(program function, make_inputs function) from the program's text."""
    import torch.nn.functional as F
    import triton

    import tritonize
    import user_kernel_corpus

    namespace = {"torch": torch, "F": F, "triton": triton, "tritonize": tritonize}
    namespace.update({name: getattr(user_kernel_corpus, name) for name in program.kernels})
    exec(compile(program.source(), f"<fuzz seed {program.seed}>", "exec"), namespace)
    return namespace["program"], namespace["make_inputs"]


def upcast(t: torch.Tensor) -> torch.Tensor:
    if not t.is_floating_point():
        return t.clone()
    return t.detach().double().requires_grad_(t.requires_grad)


def close_enough(actual, eager, ref) -> str | None:
    """None if float `actual` is as close to `ref` as eager's value is; else what is wrong.
    NaN/inf where eager has them, except where eager overflowed in its dtype and the float64 run
    did not: there `actual` may be finite (computed in a wider type), within the same bound."""
    a, e, r = actual.detach().double(), eager.detach().double(), ref.detach().double()
    eager_overflowed = ~e.isfinite() & r.isfinite() & a.isfinite()
    same = (a.isnan() == e.isnan()) & (a.isinf() == e.isinf())
    if not bool((same | eager_overflowed).all()):
        return "NaN/inf positions differ from eager's"
    both_inf = a.isinf() & e.isinf()
    if not torch.equal(a[both_inf], e[both_inf]):
        return "infinities differ from eager's"
    finite = a.isfinite() & r.isfinite()  # (where eager overflowed too)
    if not bool(finite.any()):
        return None
    eager_finite = finite & e.isfinite()
    err_actual = (a - r)[finite].abs().max().item()
    err_eager = (e - r)[eager_finite].abs().max().item() if bool(eager_finite.any()) else 0.0
    bound = ERROR_SLACK * err_eager + FLOOR[eager.dtype] * (1 + r[finite].abs().max().item())
    if err_actual > bound:
        return f"max error vs float64 {err_actual:.3g} > bound {bound:.3g} (eager's error {err_eager:.3g})"
    return None


def compare_tensor(what, actual, eager, ref) -> list:
    if not isinstance(actual, torch.Tensor) or not isinstance(eager, torch.Tensor):
        return [] if actual == eager else [f"{what}: {actual!r} != eager {eager!r}"]
    if actual.dtype != eager.dtype or actual.shape != eager.shape:
        return [f"{what}: {actual.dtype}{tuple(actual.shape)} != eager {eager.dtype}{tuple(eager.shape)}"]
    if actual.requires_grad != eager.requires_grad:
        return [f"{what}: requires_grad {actual.requires_grad} != eager {eager.requires_grad}"]
    problems = []
    long_dims = [d for d in range(actual.dim()) if actual.shape[d] > 1]
    if [actual.stride(d) for d in long_dims] != [eager.stride(d) for d in long_dims]:
        problems.append(f"{what}: strides {actual.stride()} != eager {eager.stride()}")
    if eager.is_floating_point():
        wrong = close_enough(actual, eager, ref)
    else:
        wrong = None if torch.equal(actual.cpu(), eager.cpu()) else "values differ from eager's"
    if wrong:
        problems.append(f"{what}: {wrong}")
    return problems


def compare_inputs(original, actual, eager, ref) -> list:
    problems = []
    for k, (o, a, e, r) in enumerate(zip(original, actual, eager, ref)):
        if torch.equal(o, e.detach()):
            if not torch.equal(o, a.detach()):
                problems.append(f"input {k}: changed, eager leaves it alone")
        else:
            problems += compare_tensor(f"input {k} (mutated)", a, e, r)
    return problems


def aliased_outputs(outputs, inputs) -> list:
    """(output index, input index) where eager's output shares the input's storage."""
    pairs = []
    for j, out in enumerate(outputs):
        for k, inp in enumerate(inputs):
            if isinstance(out, torch.Tensor) and out.untyped_storage().data_ptr() == inp.untyped_storage().data_ptr():
                pairs.append((j, k))
    return pairs


def check_aliasing(runs, pairs) -> list:
    """Write each aliased input in place in all three runs; its outputs must follow as in eager."""
    problems = []
    with torch.no_grad():
        for j, k in pairs:
            for inputs, _ in runs:
                if inputs[k].dtype != torch.bool:
                    inputs[k].add_(1)
            (comp_in, comp_out), (eager_in, eager_out), (ref_in, ref_out) = runs
            problems += [p + " (after writing the input it views in eager)"
                         for p in compare_tensor(f"output {j}", comp_out[j], eager_out[j], ref_out[j])]
    return problems


def loss_grads(program, inputs, outputs):
    """`.grad` of the inputs requiring grad after backward() of sum_j (out_j * w_j).sum(), with fixed
    weights (AccumulateGrad gives .grad the input's layout, as a user sees it)."""
    wanted = [t for name, t in zip(program.input_names, inputs) if name in program.grad_inputs]
    terms = []
    for out in outputs:
        if isinstance(out, torch.Tensor) and out.requires_grad:
            w = torch.arange(out.numel(), device=out.device, dtype=torch.float64).cos().reshape(out.shape)
            terms.append((out.double() * w).sum())
    if not terms:
        return []
    sum(terms).backward()
    return [t.grad for t in wanted]


def check_program(program, device: str, backend="tritonize", dynamic: bool = False) -> list:
    """The problems tritonize (or another torch.compile `backend`) has with `program` on `device`
    (empty when it matches eager). dynamic: compiled with dynamic=True, every size symbolic (the
    programs spell some sizes out, so they run at their own sizes only)."""
    fn, make_inputs = load(program)
    original = [t.detach().clone() for t in make_inputs(device)]
    eager_in, comp_in = make_inputs(device), make_inputs(device)
    ref_in = [upcast(t) for t in make_inputs(device)]
    try:
        eager_out, ref_out = fn(*eager_in), fn(*ref_in)
        eager_grads, ref_grads = (loss_grads(program, eager_in, eager_out), loss_grads(program, ref_in, ref_out)) \
            if program.training else ([], [])
    except Exception as e:  # the generator made a program eager rejects: its bug, reported as such
        return [f"invalid program (eager raises {type(e).__name__}: {str(e).splitlines()[0]})"]
    torch._dynamo.reset()
    try:
        compiled = torch.compile(fn, backend=backend, fullgraph=True, dynamic=True if dynamic else None)
        comp_out = compiled(*comp_in)
        comp_grads = loss_grads(program, comp_in, comp_out) if program.training else []
    except Exception as e:
        tail = traceback.format_exception_only(type(e), e)[-1].strip()
        return [f"tritonize raises {tail[:2000]}"]
    problems = []
    if len(comp_out) != len(eager_out):
        return [f"{len(comp_out)} outputs, eager has {len(eager_out)}"]
    for j, (c, e, r) in enumerate(zip(comp_out, eager_out, ref_out)):
        found = compare_tensor(f"output {j}", c, e, r)
        if found and all("strides" in p for p in found) and \
                _aot_eager_strides(fn, make_inputs, device, j, dynamic) == c.stride():
            found = []  # the functional graph's strides: every torch.compile back end returns them
        problems += found
    for k, (c, e, r) in enumerate(zip(comp_grads, eager_grads, ref_grads)):
        if (c is None) != (e is None):
            problems.append(f"grad of input {k}: {c is None and 'None' or 'a tensor'}, eager's is not")
        elif c is not None:
            problems += compare_tensor(f"grad of input {k}", c, e, r)
    problems += compare_inputs(original, comp_in, eager_in, ref_in)
    pairs = aliased_outputs(eager_out, eager_in)
    if pairs and not problems:
        problems += check_aliasing([(comp_in, comp_out), (eager_in, eager_out), (ref_in, ref_out)], pairs)
    return problems


def _aot_eager_strides(fn, make_inputs, device, j, dynamic=False):
    """Output j's strides under torch.compile(backend="aot_eager"): the strides the functional aten
    graph gives it. They differ from eager's where an intermediate is written in place by an op
    whose functional form lays its result out differently (x.scatter_add_ keeps a transposed x's
    strides, aten.scatter_add returns a contiguous tensor); no back end sees the difference."""
    torch._dynamo.reset()
    out = torch.compile(fn, backend="aot_eager", fullgraph=True, dynamic=True if dynamic else None)(*make_inputs(device))[j]
    torch._dynamo.reset()
    return out.stride()
