"""OpInfo sweep: a sample as a function of its tensors, fresh input copies, and the comparison rule.

The comparison rule (compare_with_eager):
  * outputs and the inputs after the call (in-place ops) are compared leaf by leaf with
    torch.testing.assert_close: dtype, device and layout checked, equal_nan=True; non-tensor
    leaves with ==;
  * tolerances per dtype (tests/helpers.tolerances): fp32 1.3e-5 / 1e-5, fp64 1e-7, fp16/bf16
    2e-2, integers and bool exact; fp32 ops listed in LOOSE_TOLERANCE get 1e-4;
  * the reference is eager in the same dtype, like torch's own OpInfo tests. For fp16/bf16 there
    is a second reference: eager run on the sample upcast to fp32 (every fp16/bf16 tensor leaf
    converted), its results rounded back to the dtype eager gives. tritonize computes fp16/bf16
    ops in fp32 and rounds once at the end, where eager may round after each step of a composite
    op; a result within tolerance of either reference passes (the result's "reference" field says
    which one it matched).
"""
from __future__ import annotations

import math

import torch
import torch.utils._pytree as pytree

from helpers import tolerances

LOW_PRECISION = (torch.float16, torch.bfloat16)

# Op-aware tolerances (entry id or op name -> assert_close kwargs), for float32 ops whose
# compiled form legitimately reassociates or uses other transcendental implementations.
LOOSE = {"atol": 1e-4, "rtol": 1e-4}
LOOSE_TOLERANCE: dict[str, dict] = {}


def entry_id(op) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def tolerance_for(op, expected: torch.Tensor) -> dict:
    tol = LOOSE_TOLERANCE.get(entry_id(op)) or LOOSE_TOLERANCE.get(op.name)
    if tol and expected.dtype in (torch.float32, torch.complex64):
        return dict(tol)
    return tolerances(expected.dtype)


# ---------------------------------------------------------------------------------------------
# inputs


def copy_leaves(leaves: list) -> list:
    """Copy the tensor leaves: storages cloned once each (aliasing among inputs is kept), then each
    tensor re-viewed with its own size, stride and offset."""
    storages: dict = {}
    out = []
    for leaf in leaves:
        if not isinstance(leaf, torch.Tensor):
            out.append(leaf)
            continue
        if leaf.layout != torch.strided or leaf.is_quantized or type(leaf) is not torch.Tensor:
            out.append(leaf.clone())
            continue
        storage = leaf.untyped_storage()
        key = (storage.data_ptr(), storage.nbytes()) if storage.nbytes() else id(leaf)
        if key not in storages:
            storages[key] = storage.clone()
        t = torch.empty(0, dtype=leaf.dtype, device=leaf.device)
        t.set_(storages[key], leaf.storage_offset(), leaf.size(), leaf.stride())
        out.append(t)
    return out


class Call:
    """A sample as a function of its tensor leaves: `fn(*tensors)` calls the op."""

    def __init__(self, op, sample):
        self.leaves, self.spec = pytree.tree_flatten((sample.input, list(sample.args), dict(sample.kwargs)))
        self.tensor_pos = [i for i, x in enumerate(self.leaves) if isinstance(x, torch.Tensor)]
        self.op_fn = op.op
        self.fn = self.with_leaves(self.leaves)

    def with_leaves(self, leaves: list):
        """`fn(*tensors)` calling the op with these non-tensor leaves (the tensors go where the
        sample has its tensors)."""
        func, spec, pos = self.op_fn, self.spec, self.tensor_pos

        def fn(*tensors):
            filled = list(leaves)
            for i, t in zip(pos, tensors):
                filled[i] = t
            inp, args, kwargs = pytree.tree_unflatten(filled, spec)
            return func(inp, *args, **kwargs)

        return fn

    def fresh_inputs(self) -> list:
        return copy_leaves([self.leaves[i] for i in self.tensor_pos])

    def has_low_precision(self) -> bool:
        return any(self.leaves[i].dtype in LOW_PRECISION for i in self.tensor_pos)

    def upcast_reference(self, like_outputs, like_inputs):
        """(outputs, inputs after the call) of eager run on the sample upcast to fp32, each tensor
        rounded back to the dtype of its counterpart in like_*; None when eager cannot run it."""
        inputs = [t.float() if t.dtype in LOW_PRECISION else t for t in self.fresh_inputs()]
        try:
            outputs = self.fn(*inputs)
        except Exception:
            return None
        try:
            return _cast_like(outputs, like_outputs), _cast_like(inputs, like_inputs)
        except (TypeError, ValueError):  # different structure: no reference
            return None


def _cast_like(values, like):
    leaves, spec = pytree.tree_flatten(values)
    like_leaves = pytree.tree_leaves(like)
    if len(leaves) != len(like_leaves):
        raise ValueError("different number of leaves")
    cast = [v.to(w.dtype) if isinstance(v, torch.Tensor) and isinstance(w, torch.Tensor) else v
            for v, w in zip(leaves, like_leaves)]
    return pytree.tree_unflatten(cast, spec)


# ---------------------------------------------------------------------------------------------
# comparison


def _same_scalar(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


def compare(op, actual, expected, what: str = "output") -> None:
    a_leaves, e_leaves = pytree.tree_leaves(actual), pytree.tree_leaves(expected)
    if len(a_leaves) != len(e_leaves):
        raise AssertionError(f"{what}: {len(a_leaves)} leaves, eager has {len(e_leaves)}")
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves)):
        if isinstance(e, torch.Tensor):
            if not isinstance(a, torch.Tensor):
                raise AssertionError(f"{what}[{i}]: got {type(a).__name__}, eager gives a tensor")
            try:
                torch.testing.assert_close(a, e, equal_nan=True, check_dtype=True, check_device=True,
                                           check_layout=True, **tolerance_for(op, e))
            except AssertionError as err:
                raise AssertionError(f"{what}[{i}]: {_mismatch_summary(err)}") from None
        elif not _same_scalar(a, e):
            raise AssertionError(f"{what}[{i}]: got {a!r}, eager gives {e!r}")


def _mismatch_summary(err: AssertionError) -> str:
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    keep = [ln for ln in lines if ln.startswith(("Mismatched", "Greatest", "Expected", "The values for attribute"))]
    return "; ".join(keep) if keep else (lines[0] if lines else "mismatch")


def compare_with_eager(op, call: Call, actual, compiled_inputs, expected, eager_inputs) -> str:
    """Raise AssertionError unless the compiled results match a reference (module docstring);
    return the reference matched: "eager" or "eager_fp32"."""
    try:
        compare(op, actual, expected, "output")
        compare(op, compiled_inputs, eager_inputs, "input after call")
        return "eager"
    except AssertionError:
        if not call.has_low_precision():
            raise
        reference = call.upcast_reference(expected, eager_inputs)
        if reference is None:
            raise
        try:
            compare(op, actual, reference[0], "output")
            compare(op, compiled_inputs, reference[1], "input after call")
        except AssertionError:
            pass
        else:
            return "eager_fp32"
        raise
