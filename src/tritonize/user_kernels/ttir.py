"""TTIR for a user kernel call, generated without a GPU, read into plain Python data.

`kernel_ttir(jit, arguments)` runs Triton's own front end (ASTSource.make_ir) for a fixed CUDA
target, so it works on machines with no GPU and no driver. Only dtypes of tensors matter: tensors
become pointer parameters; every other argument (ints, floats, bools, None, dtypes) is folded in
as a compile-time constant, so branches on them disappear from the IR, as they would for that
call. When folding makes the kernel fail to compile (say `n.to(tl.int64)` on a folded int), the
scalars become parameters instead.

The MLIR module is then read into `IrFunction`/`IrBlock`/`IrOp` (plain dataclasses): Triton's
Python bindings expose only a post-order walk over operations, so blocks and regions are
rebuilt from each operation's parent block and its regions' ids. Function parameters keep the
kernel argument they came from (MLIR name locations), which also covers TMA descriptors that
expand into several parameters.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any

import torch

ANALYSIS_TARGET = ("cuda", 90, 32)  # any target works for TTIR; this one has every TMA feature


@dataclasses.dataclass
class IrBlock:
    args: tuple[int, ...]
    ops: list["IrOp"]
    arg_names: tuple[str | None, ...] = ()  # name locations (function parameters have them)


@dataclasses.dataclass
class IrOp:
    name: str
    operands: tuple[int, ...]
    results: tuple[int, ...]
    result_types: tuple[str, ...]
    regions: tuple[tuple[IrBlock, ...], ...]
    attrs: dict[str, Any]


@dataclasses.dataclass
class IrFunction:
    name: str
    params: tuple[int, ...]
    param_names: tuple[str | None, ...]  # the kernel argument each parameter came from
    blocks: tuple[IrBlock, ...]


@dataclasses.dataclass
class IrModule:
    entry: str
    functions: dict[str, IrFunction]
    text: str  # the TTIR, for error messages and debugging


class TtirError(RuntimeError):
    """TTIR could not be generated or read for this call."""


def is_tensor_argument(value) -> bool:
    return isinstance(value, torch.Tensor) or is_tensor_descriptor(value)


def is_tensor_descriptor(value) -> bool:
    try:
        from triton.tools.tensor_descriptor import TensorDescriptor
    except ImportError:
        return False
    return isinstance(value, TensorDescriptor)


def _tensor_type(value) -> str:
    from triton.runtime.jit import mangle_type

    if isinstance(value, torch.Tensor):
        return mangle_type(torch.empty(0, dtype=value.dtype))
    return mangle_type(dummy_descriptor(value.base.dtype, value.block_shape))


def dummy_descriptor(dtype: torch.dtype, block_shape):
    """A host TMA descriptor with the right type over a small real tensor (16-byte rows)."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    per_dim = max(1, 16 // dtype.itemsize)
    base = torch.empty([per_dim] * len(block_shape), dtype=dtype)
    return TensorDescriptor.from_tensor(base, list(block_shape))


def concrete_scalar(value):
    """Symbolic scalars (from dynamic shapes) are analyzed at their hint."""
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        hint = value.node.hint
        return hint if hint is not None else 2
    return value


def _scalar_type(value) -> str:
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        return "i32" if -2**31 <= value < 2**31 else "i64"
    if isinstance(value, float):
        return "fp32"
    raise TtirError(f"cannot pass a {type(value).__name__} as a kernel parameter")


def signature_of(jit, arguments: dict, fold_scalars: bool) -> tuple[dict, dict]:
    """(signature, constexprs) for ASTSource, one entry per kernel parameter."""
    signature, constants = {}, {}
    for param in jit.params:
        value = concrete_scalar(arguments[param.name])
        if param.is_constexpr or value is None:
            signature[param.name], constants[param.name] = "constexpr", value
        elif is_tensor_argument(value):
            signature[param.name] = _tensor_type(value)
        elif fold_scalars:
            signature[param.name], constants[param.name] = "constexpr", value
        else:
            signature[param.name] = _scalar_type(value)
    return signature, constants


def _make_ir(jit, signature: dict, constants: dict):
    from triton._C.libtriton import ir
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import ASTSource, make_backend

    target = GPUTarget(*ANALYSIS_TARGET)
    backend = make_backend(target)
    options = backend.parse_options({})
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    source = ASTSource(jit, signature, constants, {})
    module = source.make_ir(target, options, backend.get_codegen_implementation(options),
                            backend.get_module_map(), context)
    if not module.verify():
        raise TtirError(f"TTIR of kernel {jit.fn.__name__} does not verify")
    return context, module


def kernel_ttir(jit, arguments: dict) -> tuple[IrModule, list[str]]:
    """TTIR for a call with `arguments` (every parameter by name) and notes on how it was made."""
    notes = []
    try:
        context, module = _make_ir(jit, *signature_of(jit, arguments, fold_scalars=True))
    except Exception as folded_error:  # the kernel may need its scalars as run-time values
        notes.append(f"scalars kept as parameters ({type(folded_error).__name__} when folded)")
        try:
            context, module = _make_ir(jit, *signature_of(jit, arguments, fold_scalars=False))
        except Exception as error:
            raise TtirError(f"Triton could not generate TTIR for kernel {jit.fn.__name__}: "
                            f"{type(error).__name__}: {error}") from error
    read = read_module(module)
    del context
    return read, notes


_NAME_LOC = re.compile(r'^loc\("([^"]+)"')


def _location_name(value) -> str | None:
    try:
        match = _NAME_LOC.match(str(value.get_loc()))
    except Exception:
        return None
    return match.group(1) if match else None


def _op_attributes(op, name: str) -> dict:
    attrs: dict = {}
    if name == "tt.func":
        attrs["sym_name"] = op.get_str_attr("sym_name")
    elif name == "tt.call":
        attrs["callee"] = op.get_flat_symbol_ref_attr("callee")
    elif name == "tt.elementwise_inline_asm":
        attrs["pure"] = bool(op.get_bool_attr("pure"))
    return attrs


def read_module(module) -> IrModule:
    """Rebuild the nesting of a Triton MLIR module from its post-order walk."""
    blocks: dict[int, IrBlock] = {}
    region_blocks: dict[int, list[int]] = {}
    functions: dict[str, IrFunction] = {}

    def visit(op) -> None:
        name = op.get_name()
        if name == "builtin.module":
            return
        regions = tuple(tuple(blocks[b] for b in region_blocks.get(op.get_region(i).id(), []))
                        for i in range(op.get_num_regions()))
        results = [op.get_result(i) for i in range(op.get_num_results())]
        ir_op = IrOp(name, tuple(op.get_operand(i).id() for i in range(op.get_num_operands())),
                     tuple(r.id() for r in results), tuple(str(r.get_type()) for r in results),
                     regions, _op_attributes(op, name))
        block = op.get_block()
        if block is not None:
            block_id = block.id()
            if block_id not in blocks:
                args = [block.arg(i) for i in range(block.get_num_arguments())]
                blocks[block_id] = IrBlock(tuple(a.id() for a in args), [],
                                           tuple(_location_name(a) for a in args))
                region_blocks.setdefault(block.get_parent().id(), []).append(block_id)
            blocks[block_id].ops.append(ir_op)
        if name == "tt.func":
            body = regions[0]
            entry = body[0] if body else IrBlock((), [])
            functions[ir_op.attrs["sym_name"]] = IrFunction(
                ir_op.attrs["sym_name"], entry.args, entry.arg_names, body)

    module.walk(visit)
    return IrModule(module.get_entry_func_name(), functions, str(module))
