"""render_wrapper: GraphIR + Schedule + kernels -> the Python wrapper module's source.

The wrapper is a standalone module: kernel definitions (source inline, loaded once), and
`call(args)` that checks input sizes and strides, allocates buffers with empty_strided (or takes
over a freed buffer's storage where the memory plan says so: codegen/memory_plan.py), launches
kernels and aten calls in schedule order, deletes each buffer after its last use, and returns the
outputs. A graph on one CUDA device first makes that
device current, then allocates with `empty_strided_cuda` (no device argument to parse) and
launches through each kernel's `launch` attribute (its fast path, one Python call less). Run as a script it benchmarks itself on random
inputs. Values that have no source form (tensor constants, odd arguments) go in CONSTANTS, which
the loader fills in.
"""
from __future__ import annotations

import dataclasses
import re

import sympy
import torch

from ..ir.nodes import ExternCall, GraphIR, HostValueBuffer, OpaqueInput, TensorArg, contiguous_strides
from ..ir.sizes import same_strides
from ..ir.scatter import ScatterOp
from ..ir.user_kernel import UserKernelCall
from ..lower.product_rows import MIN_PADDED_MATMUL_MACS
from ..schedule.fusion import KernelGroup, reads_of
from ..schedule.memory_order import last_uses
from ..schedule.steps import step_reads
from .index_printer import print_condition, print_index, print_number
from .kernel import host_scalar_argument
from .memory_plan import MemoryPlan, plan_memory
from .size_hoisting import hoist_size_expressions
from .user_kernel import user_kernel_lines

aten = torch.ops.aten
PADDABLE_MATMULS = {aten.mm.default: 1, aten.addmm.default: 2}  # -> position of b ([K, N])
# aten ops whose result is always a new tensor in contiguous strides, whatever their arguments'
# layouts (cuBLAS computes into another layout and copies back where it must)
CONTIGUOUS_RESULTS = frozenset({aten.mm.default, aten.addmm.default, aten.bmm.default})


class WrapperWriter:
    def __init__(self, graph: GraphIR, device: str):
        self.graph = graph
        self.device = device
        self.constants: dict = dict(graph.constants)
        self.lines: list[str] = []
        self.cuda_index = _single_cuda_index(graph)

    def allocation(self, layout) -> str:
        """The expression that allocates a buffer of this layout."""
        size, stride = sizes_text(layout.size), sizes_text(layout.stride)
        if layout.device.type == "cuda" and self.cuda_index is not None:
            return f"empty_strided_cuda({size}, {stride}, {layout.dtype})"
        return f"empty_strided({size}, {stride}, dtype={layout.dtype}, device={str(layout.device)!r})"

    def allocation_at(self, layout, storage_offset) -> str:
        """A buffer of this layout that starts `storage_offset` elements into its storage."""
        flat = dataclasses.replace(layout, size=(storage_offset + layout.storage_span(),), stride=(1,))
        return (f"reinterpret_tensor({self.allocation(flat)}, {sizes_text(layout.size)}, "
                f"{sizes_text(layout.stride)}, {print_index(storage_offset)})")

    def kernel_call(self, kernel_var: str) -> str:
        """How the wrapper calls a generated kernel: on the GPU through its fast launch path."""
        return f"{kernel_var}.launch" if self.device == "cuda" else kernel_var


    # --- values as source text -----------------------------------------------------------------
    def value_text(self, value, fresh_result: bool = False) -> str:
        """fresh_result: the value is an argument of an aten call whose results are fresh tensors,
        so a view may skip autograd's bookkeeping (reinterpret_tensor); anything that may escape
        (returned, or aliased by a fallback's result) is a real view (view_tensor)."""
        if isinstance(value, TensorArg):
            if value.is_plain:
                return value.buffer_name
            view = "reinterpret_tensor" if fresh_result else "view_tensor"
            return (f"{view}({value.buffer_name}, {sizes_text(value.size)}, "
                    f"{sizes_text(value.stride)}, {print_index(value.offset)})")
        if value is None or isinstance(value, (bool, int, str)):
            return repr(value)
        if isinstance(value, OpaqueInput):  # passed on as the caller gave it
            return value.name
        if isinstance(value, sympy.Expr):  # a symbolic size: the wrapper has its symbols bound
            return print_index(value)
        if isinstance(value, (sympy.core.relational.Relational, sympy.logic.boolalg.BooleanAtom)):
            return print_condition(value)  # a comparison of sizes (a SymBool the graph returns)
        if isinstance(value, float):
            return print_number(value)
        if isinstance(value, (torch.dtype, torch.layout, torch.memory_format)):
            return str(value)
        if isinstance(value, torch.device):
            return f'torch.device("{value}")'
        if isinstance(value, list):
            return "[" + ", ".join(self.value_text(v, fresh_result) for v in value) + "]"
        if isinstance(value, tuple):
            inner = ", ".join(self.value_text(v, fresh_result) for v in value)
            return f"({inner},)" if len(value) == 1 else f"({inner})"
        name = f"const{len(self.constants)}"
        self.constants[name] = value
        return f'CONSTANTS["{name}"]'


def _single_cuda_index(graph: GraphIR) -> int | None:
    """The index of the one CUDA device the graph's buffers live on; None with none or several."""
    devices = {b.layout.device for b in graph.buffers.values() if b.layout.device.type == "cuda"}
    if len(devices) != 1:
        return None
    (device,) = devices
    return device.index if device.index is not None else 0


def host_values(graph: GraphIR) -> list:
    return [b for b in graph.buffers.values() if isinstance(b, HostValueBuffer)]


def sizes_text(values) -> str:
    """A tuple of sizes or strides as source; symbolic ones over the wrapper's bound symbols."""
    texts = [print_index(v) for v in values]
    return f"({', '.join(texts)}{',' if len(texts) == 1 else ''})"


def render_wrapper(graph: GraphIR, steps: list, kernels: dict, kernel_sources: dict,
                   device: str, title: str, mode: str = "default") -> tuple[str, dict, MemoryPlan]:
    """kernels: id(KernelGroup) -> kernel variable name; kernel_sources: name -> RenderedKernel.
    mode: the autotuning mode the runtime uses for every kernel. Returns the source, the
    CONSTANTS it needs and its memory plan."""
    writer = WrapperWriter(graph, device)
    last_use = last_uses(steps, graph, lambda step: step_reads(step, reads_of))
    memory = plan_memory(graph, steps, last_use)
    body = _render_call(writer, graph, steps, kernels, memory, last_use)
    header = [f"# {title}", "# Generated by tritonize. Run as a script to benchmark on random inputs.",
              "import torch", "from tritonize.runtime.wrapper_support import (",
              "    assert_size_stride, benchmark_main, current_cuda_device, empty_strided, empty_strided_cuda,",
              "    ensure_layout, load_kernel, matmul_aligned, reinterpret_tensor, split_counters, split_workspace,",
              "    view_tensor,", ")", "",
              "aten = torch.ops.aten", "prims = torch.ops.prims", "CONSTANTS = {}", ""]
    if host_values(graph):
        position = header.index("aten = torch.ops.aten")
        header[position:position] = ["from tritonize.runtime import host_math", ""]
    for name, kernel in kernel_sources.items():
        header.append("")
        header.append(f"# aten nodes: {', '.join(kernel.origins)}")
        checks = ", checks=True" if kernel.checks else ""
        header.append(f"{name} = load_kernel('''")
        header.append(kernel.source.rstrip("\n"))
        numels = f", numel_exprs={kernel.numel_exprs!r}" if kernel.numel_exprs else ""
        numels += f", split={kernel.split}" if kernel.split > 1 else ""
        header.append(f"''', {name!r}, kind={kernel.kind!r}, xnumel={kernel.xnumel}, ynumel={kernel.ynumel}, "
                      f"rnumel={kernel.rnumel}, hint={kernel.hint!r}, device={device!r}{checks}, mode={mode!r}"
                      f"{numels},")
        header.append(f"    arg_dtypes={_arg_dtypes(graph, kernel.arg_names)})")
    specs = [f"    ({_example(graph, b.layout.size)}, {_example(graph, b.layout.stride)}, {b.layout.dtype}, "
             f"{str(b.layout.device)!r})," for b in graph.inputs]
    footer = ["", "", "INPUTS = [", *specs, "]", "", 'if __name__ == "__main__":',
              "    benchmark_main(call, INPUTS)", ""]
    return "\n".join(header + ["", ""] + body + footer), writer.constants, memory


def _example(graph: GraphIR, values) -> tuple:
    """Sizes at the example the graph was compiled for (the script benchmarks on those)."""
    return tuple(graph.sizes.hint(v) if graph.sizes is not None else int(v) for v in values)


SPLIT_ARGUMENT_DTYPES = {"split_workspace": "torch.float32", "split_counters": "torch.int32"}  # codegen/outer_split.py


def _arg_dtypes(graph: GraphIR, names: list[str]) -> str:
    """The kernel's pointer dtypes (of its first call's buffers), so compiling can start at import."""
    dtypes = [SPLIT_ARGUMENT_DTYPES.get(n.split("(")[0]) or (str(graph.buffers[n].layout.dtype) if n in graph.buffers else None)
              for n in names]
    if None in dtypes:
        return "None"
    return f"({', '.join(dtypes)}{',' if len(dtypes) == 1 else ''})"


def _render_call(writer: WrapperWriter, graph: GraphIR, steps: list, kernels: dict, memory: MemoryPlan,
                 last_use: dict) -> list[str]:
    lines = ["def call(args):"]
    if writer.cuda_index is not None:
        lines += [f"    if current_cuda_device() != {writer.cuda_index}:  # buffers and launches below use cuda:{writer.cuda_index}",
                  f"        with torch.cuda.device({writer.cuda_index}):",
                  "            return call(args)"]
    names = graph.arg_names or [b.name for b in graph.inputs]
    if names:
        lines.append(f"    {', '.join(names)}, = args")
    lines.append("    args.clear()")
    lines += [f"    {symbol} = {source}" for symbol, source in graph.symbol_sources.items()]
    symbols_bound = len(lines)
    kernel_args = {a for step in steps if isinstance(step, (KernelGroup, ScatterOp)) for a in kernels[id(step)][1]}
    for b in graph.inputs:
        if b.host_scalar and host_scalar_argument(b.name) in kernel_args:
            # kernels take its value: .item() checks it holds one number, all the graph assumed
            # (Dynamo passes each float attribute this way under dynamic=True: no assert a call)
            lines.append(f"    {host_scalar_argument(b.name)} = {b.name}.item()")
            continue
        lines.append(f"    assert_size_stride({b.name}, {sizes_text(b.layout.size)}, {sizes_text(b.layout.stride)}, "
                     f"{b.name!r})")
        if b.neg_bit:  # kernels read memory: the negation torch keeps as a flag is applied first
            lines.append(f"    {b.name} = {b.name}.resolve_neg()")
    for b in host_values(graph):  # numbers computed from sizes alone (lower/host_values.py)
        if host_scalar_argument(b.name) in kernel_args:
            lines.append(f"    {host_scalar_argument(b.name)} = {b.source}")
    for name in graph.constants:
        lines.append(f'    {name} = CONSTANTS["{name}"]')
    lines.append(f"    # memory plan: peak {memory.peak / 2**20:.2f} MiB at step {memory.peak_step} (example sizes), "
                 f"{len(memory.reuse)} reuse(s), {len(memory.in_place)} kernel(s) in place")
    shared_pads = _shared_pad_steps(steps)
    for i, step in enumerate(steps):
        if i in shared_pads and i - 1 not in shared_pads:
            lines.append("    pads = {}  # padded operand copies its products share (matmul_aligned)")
        if isinstance(step, KernelGroup):
            lines += _kernel_lines(writer, step, kernels[id(step)], memory)
        elif isinstance(step, UserKernelCall):
            lines += user_kernel_lines(writer, step)
        elif isinstance(step, ScatterOp):  # writes into its (allocated) target in place
            kernel_var, args = kernels[id(step)]
            lines.append(f"    {writer.kernel_call(kernel_var)}({', '.join(args)})  # scatter ({step.mode}) into {step.target}")
        else:
            lines += _extern_lines(writer, step, set(last_use), pads=i in shared_pads)
        if i in shared_pads and i + 1 not in shared_pads:
            lines.append("    del pads")
        if memory.deleted.get(i):
            lines.append(f"    del {', '.join(memory.deleted[i])}")
    outs = ", ".join(writer.value_text(o.view) if o.view is not None else writer.value_text(o.value)
                     for o in graph.outputs)
    lines.append(f"    return ({outs}{',' if len(graph.outputs) == 1 else ''})")
    lines = _without_asserts_of_unread_inputs(lines, [b.name for b in graph.inputs])
    # each size expression used more than once is computed once a call, after the symbols
    return hoist_size_expressions(lines, symbols_bound, {str(s) for s in graph.symbol_sources})


def _without_asserts_of_unread_inputs(lines: list[str], names: list[str]) -> list[str]:
    """Drop the size assert of an input nothing in the call reads (a weight frozen into
    constants, lower/freezing.py): nothing assumes its layout, and it costs a call per input."""
    body = [line for line in lines if not line.lstrip().startswith(("assert_size_stride(", "del "))
            and not line.rstrip().endswith("= args")]
    words = set(re.findall(r"\w+", "\n".join(body)))
    unread = {n for n in names if n not in words}
    return [line for line in lines
            if not any(line.lstrip().startswith(f"assert_size_stride({n}, ") for n in unread)]


def _kernel_lines(writer: WrapperWriter, group: KernelGroup, kernel_var: str, memory: MemoryPlan) -> list[str]:
    lines = []
    for buffer in group.stored:
        old = memory.reuse.get(buffer.name)
        if buffer.name in memory.in_place:  # the kernel reads each element there before writing it
            lines.append(f"    {buffer.name} = {memory.in_place[buffer.name]}  # in place over it")
        elif buffer.storage_offset != 0:  # (never reused into: memory_plan.reusable_into)
            lines.append(f"    {buffer.name} = {writer.allocation_at(buffer.layout, buffer.storage_offset)}")
        elif old is not None and writer.graph.buffers[old].layout == buffer.layout:
            lines.append(f"    {buffer.name} = {old}; del {old}  # reuse")
        elif old is not None:
            lines.append(f"    {buffer.name} = reinterpret_tensor({old}, {sizes_text(buffer.layout.size)}, "
                         f"{sizes_text(buffer.layout.stride)}, 0); del {old}  # reuse {old}'s storage")
        else:
            lines.append(f"    {buffer.name} = {writer.allocation(buffer.layout)}")
    args = kernel_var[1]
    lines.append(f"    {writer.kernel_call(kernel_var[0])}({', '.join(args)})")
    return lines


def _shared_pad_steps(steps: list) -> set[int]:
    """Positions of padded products (aligns_matmul) that follow one another with nothing in
    between and read a buffer in common: such a run shares the padded copies of its operands (the
    gradient of odd-width logits, read by the LM head's two backward products; the shared dict
    holds each copied operand to the run's end). Only a run: a kernel or a call in
    between may write an operand's memory in place (the memory plan reuses buffers, and a
    kernel's store moves no version counter), and a copy made before would be stale (a review
    of the twenty-first session: x @ W1 -> gelu in place -> @ W2 -> gelu into the same
    buffer -> @ W3 read the first gelu's copy)."""
    padded = [isinstance(step, ExternCall) and aligns_matmul(step) for step in steps]

    def share(i: int) -> bool:  # steps i and i + 1: padded products reading a buffer in common
        return padded[i] and padded[i + 1] and bool(_operand_buffers(steps[i]) & _operand_buffers(steps[i + 1]))

    return {i for i in range(len(steps)) if (i > 0 and share(i - 1)) or (i + 1 < len(steps) and share(i))}


def _operand_buffers(call: ExternCall) -> set:
    return {a.buffer_name for a in call.args if isinstance(a, TensorArg)}


def _extern_lines(writer: WrapperWriter, call: ExternCall, used: set, pads: bool = False) -> list[str]:
    """The aten call, then each result the rest of the call reads, in the layout the graph expects
    (results nothing reads are dropped unchecked: their layout may even differ from the meta, e.g.
    embedding_bag's auxiliary outputs on the CPU)."""
    target = f"{_op_namespace(call.target)}.{call.target.__name__}"
    fresh = call.kind not in ("fallback", "collective")  # a fallback's result may view its arguments,
    # and a collective's wait returns its argument
    args = [writer.value_text(a, fresh) for a in call.args]
    args += [f"{k}={writer.value_text(v, fresh)}" for k, v in call.kwargs.items()]
    note = f"  # {call.kind}: {call.origin}" + (f" ({call.reason})" if call.reason else "")
    if len(call.outputs) == 1 and call.outputs[0].path == ():
        out = call.outputs[0].buffer
        if aligns_matmul(call):
            out_overload = f"{_op_namespace(call.target)}.{call.target.overloadpacket.__name__}.out"
            if not all(isinstance(s, int) for s in _matmul_sizes(call)):  # whether it pays: per call
                args.append(f"min_macs={MIN_PADDED_MATMUL_MACS}")
            if pads:
                args.append("pads=pads")
            if out.layout.stride[0] != out.layout.size[1]:  # the product in padded rows, as it is
                args.append("padded_rows=True")
            return [f"    {out.name} = matmul_aligned({', '.join([out_overload] + args)}){note}"]
        lines = [f"    {out.name} = {target}({', '.join(args)}){note}", *_after_lines(call, out.name)]
        if call.kind not in ("alloc", "seed") and not _contiguous_as_planned(call, out):
            result = _resolved(out.name, call.outputs[0])
            lines.append(f"    {out.name} = ensure_layout({result}, {sizes_text(out.layout.size)}, "
                         f"{sizes_text(out.layout.stride)})")
        return lines
    lines = [f"    {call.name} = {target}({', '.join(args)}){note}", *_after_lines(call, call.name)]
    for out in call.outputs:
        if out.buffer.name not in used:
            continue
        path = "".join(f"[{k}]" for k in out.path)
        result = _resolved(f"{call.name}{path}", out)
        lines.append(f"    {out.buffer.name} = ensure_layout({result}, {sizes_text(out.buffer.layout.size)}, "
                     f"{sizes_text(out.buffer.layout.stride)})")
    lines.append(f"    del {call.name}")
    return lines


def _contiguous_as_planned(call: ExternCall, out) -> bool:
    """A result that needs no layout check: the graph plans it contiguous and the op always
    returns a new contiguous tensor (a check a call per product: 48 a GPT-2 step)."""
    layout = out.layout
    return (call.kind == "extern" and call.target in CONTIGUOUS_RESULTS and not call.outputs[0].neg_bit
            and same_strides(layout.size, layout.stride, contiguous_strides(layout.size)))


def _after_lines(call: ExternCall, result: str) -> list[str]:
    """What runs right after the call: the data-dependent sizes it decides, bound before any
    layout check reads them, and the graph's asserts on them (lower/unbacked.py)."""
    return [f"    {line.format(result=result)}" for line in call.after]


def _resolved(result: str, out) -> str:
    """The result's text, with torch's lazy negation bit applied to its memory where it has one:
    generated kernels read memory, not the flag."""
    return f"{result}.resolve_neg()" if out.neg_bit else result


def aligns_matmul(call: ExternCall) -> bool:
    """A big mm/addmm (on CUDA, or as option align_matmuls says: call.align_rows) with a leading
    dimension known not to be a multiple of 16 bytes: its output's row width (an odd vocabulary
    size), its depth, or an operand's row stride (the gradient of odd-width logits, transposed).
    Computed on aligned operands (runtime matmul_aligned), else cuBLAS takes an unvectorized
    kernel. Where a size is symbolic, whether the copies pay is decided per call (matmul_aligned's
    min_macs)."""
    if call.kind != "extern" or call.target not in PADDABLE_MATMULS or not call.align_rows:
        return False
    layout = call.outputs[0].buffer.layout
    if layout.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        return False
    if call.target == aten.addmm.default and len(call.args[0].size) != 1:
        return False  # only a bias along the columns is padded
    a, b = call.args[PADDABLE_MATMULS[call.target] - 1], call.args[PADDABLE_MATMULS[call.target]]
    unit = 16 // layout.dtype.itemsize
    leading = [layout.size[1], b.size[0], *_row_strides(a), *_row_strides(b)]
    if not any(isinstance(n, int) and n % unit for n in leading):
        return False
    sizes = _matmul_sizes(call)
    return not all(isinstance(s, int) for s in sizes) or sizes[0] * sizes[1] * sizes[2] >= MIN_PADDED_MATMUL_MACS


def _matmul_sizes(call: ExternCall) -> tuple:
    """(M, N, K) of an mm/addmm call."""
    rows, cols = call.outputs[0].buffer.layout.size
    return rows, cols, call.args[PADDABLE_MATMULS[call.target]].size[0]


def _row_strides(arg) -> list:
    """The strides of a 2-D operand other than its unit one (what cuBLAS takes as its leading
    dimension); none for a dim of size 1."""
    return [st for st, n in zip(arg.stride, arg.size) if st != 1 and n != 1]


def _op_namespace(target) -> str:
    namespace = target.namespace if hasattr(target, "namespace") else "aten"
    return namespace if namespace in ("aten", "prims") else f"torch.ops.{namespace}"
