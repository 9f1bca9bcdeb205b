"""Dtype rules for lowering: which dtype an op computes in, and reading FX node metadata."""
from __future__ import annotations

import torch

from ..errors import Unsupported
from ..ir.sizes import as_size, is_symbolic


def upcast(dtype: torch.dtype) -> torch.dtype:
    """fp16/bf16 compute in fp32; bool arithmetic computes in int32 (True + True is True)."""
    if dtype in (torch.float16, torch.bfloat16):
        return torch.float32
    return dtype


def arithmetic_dtype(dtype: torch.dtype) -> torch.dtype:
    if dtype == torch.bool:
        return torch.int32
    return upcast(dtype)


def meta_value(node):
    val = node.meta.get("val") if hasattr(node, "meta") else None
    if val is None and isinstance(getattr(node, "target", None), torch._ops.HigherOrderOperator):
        val = _fake_result(node)
    if val is None:
        raise Unsupported(f"no shape metadata for {node}")
    return val


def _fake_result(node):
    """What a higher-order op returns, run on its arguments' fake values: AOTAutograd records no
    metadata on some (run_and_save_rng_state and run_with_rng_state, which activation
    checkpointing puts around a random op so that backward draws the same numbers)."""
    args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: n.meta.get("val"))
    fake_mode = torch._guards.detect_fake_mode(torch.utils._pytree.tree_leaves((args, kwargs)))
    if fake_mode is None:
        return None
    try:
        with fake_mode:
            return node.target(*args, **kwargs)
    except Exception as err:
        raise Unsupported(f"no shape metadata for {node} ({type(err).__name__}: {err})") from err


def static_size(shape) -> tuple[int, ...]:
    """The sizes as ints, for lowerings that need them known (Unsupported when symbolic)."""
    sizes = symbolic_size(shape)
    if any(is_symbolic(s) for s in sizes):
        raise Unsupported(f"symbolic sizes {list(sizes)} are not lowered for this op yet")
    return sizes


def symbolic_size(shape) -> tuple:
    """The sizes as ints, or sympy expressions over the ShapeEnv's symbols (ir/sizes.py)."""
    return tuple(as_size(s) for s in shape)


def result_type_of(args) -> torch.dtype:
    """torch's type promotion over the tensor/scalar arguments of an FX node."""
    operands = []
    for a in args:
        if hasattr(a, "meta"):
            operands.append(a.meta["val"])
        elif isinstance(a, (bool, int, float)):
            operands.append(a)
    if len(operands) == 1:
        x = operands[0]
        return x.dtype if isinstance(x, torch.Tensor) else torch.tensor(x).dtype
    result = torch.result_type(operands[0], operands[1])
    for extra in operands[2:]:
        result = torch.promote_types(result, torch.result_type(extra, extra))
    return result


def scalar_as_eager_reads(value, dtype: torch.dtype, device: torch.device, on_cuda_too: bool = False):
    """A Python scalar operand of an op whose inputs eager converts to `dtype`, as eager's kernel
    reads it. On the CPU, TensorIterator converts a scalar to a low-precision float dtype before
    the kernel runs (bf16 x == 3.14 compares with 3.140625); CUDA's arithmetic kernels read the
    scalar in their fp32 compute type, unrounded, but its comparison kernels read it in the
    tensor's own dtype, rounded (`on_cuda_too`). Ops whose CPU kernels also read it unrounded
    (mul, div) do not call this. Elsewhere the conversion to the compute dtype is exact or the
    constant's own."""
    rounds_here = on_cuda_too or torch.device(device).type == "cpu"
    if dtype in (torch.float16, torch.bfloat16) and rounds_here \
            and isinstance(value, (int, float)) and not isinstance(value, bool):
        return torch.tensor(value, dtype=dtype).item()
    return value
