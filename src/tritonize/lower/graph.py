"""lower_graph: aten FX graph -> GraphIR. The only place that walks torch.fx graphs.

Each call_function node goes to its lowering (lower/registry.py); ops with no lowering, or whose
lowering declines the arguments, run through aten (lower/fallback.py). Graph outputs are realized
with the strides eager gives them. Outputs that are views of one tensor in eager (`return a, a[1:]`,
two views of an intermediate) are views of one buffer here too: AOTAutograd hands them to the
caller as they are, and a later graph that writes through one must be seen through the other.
"""
from __future__ import annotations

import dataclasses
import operator

import sympy
import torch
import torch.fx
from torch._subclasses.fake_tensor import unset_fake_temporarily

from ..codegen.ops_table import TRITON_DTYPES
from ..errors import CompileError, Unsupported
from ..ir import expr as ex
from ..ir.nodes import (
    GraphIR,
    GraphOutput,
    InputBuffer,
    Layout,
    OpaqueInput,
    TensorValue,
    buffer_value,
    contiguous_strides,
    strided_view_of,
)
from . import (  # noqa: F401  (registers lowerings)
    creation, depthwise, indexing, movement, pointwise, pooling, random, reductions, scans, scatter, scatter_reduce,
    special, symbolic, unbacked, user_kernel, views,
)
from ..ir.sizes import (
    UNBACKED_GUESS, SizeOracle, any_symbolic, as_size, example_value, is_symbolic, same_strides, size_symbols,
    without_max_one,
)
from .context import LoweringContext, needs_neg_resolved
from .conv_layout import keeps_planned_layout
from .dtypes import symbolic_size
from .fallback import MATMUL_OPS, call_through_aten, is_extern
from .product_rows import PRODUCT_OPERANDS, padded_row_strides
from .host_values import move_size_values_to_host
from .registry import find_lowering

aten = torch.ops.aten
VIEW_OPS = {aten.view, aten._unsafe_view, aten.reshape, aten.permute, aten.transpose, aten.t,
            aten.expand, aten.squeeze, aten.unsqueeze, aten.slice, aten.select, aten.narrow,
            aten.alias, aten.as_strided, aten.diagonal, aten.detach}
# Copies that lowering may turn into views of a stored value (_output_views).
VIEWING_COPIES = {aten.clone, aten.contiguous, aten.alias_copy, aten.lift_fresh_copy}
# Ops whose results (taken with getitem) are views of their first argument.
MULTI_VIEW_OPS = {aten.split, aten.split_with_sizes, aten.unbind, aten.chunk, aten.tensor_split}


def lower_graph(gm: torch.fx.GraphModule, example_inputs, options) -> GraphIR:
    ctx = LoweringContext(options, SizeOracle.of(example_inputs))
    env = ctx.values  # as_strided reads the value of the node that owns its input's storage
    inputs: list[InputBuffer] = []
    arg_names: list[str] = []
    symbol_sources: dict = {}
    outputs: list[GraphOutput] = []
    shared_bases = _output_bases(gm)
    ctx.output_views = _output_views(gm)
    input_updates = _input_updates(gm)
    saved = _saved_outputs(gm)
    for node in gm.graph.nodes:
        ctx.current_node = node
        if node.op == "placeholder":
            example = example_inputs[len(arg_names)]
            env[node] = _lower_input(ctx, node, example, len(arg_names), inputs, symbol_sources)
            arg_names.append(node.name)
        elif node.op == "get_attr":
            env[node] = _lower_constant(ctx, node, _fetch_attr(gm, node.target))
        elif node.op == "call_function":
            env[node] = _with_traced_sizes(ctx, _lower_call(ctx, node, env), node)
            if not unbacked.bind_unbacked(ctx, node, env[node]):  # aten's result tells the size
                env[node] = _call_through_aten(ctx, node, _arguments(node, env), "its result's size depends on the data")
                unbacked.bind_unbacked(ctx, node, env[node])
            if node in shared_bases:
                env[node] = _realize_shared_base(ctx, node, env[node], input_updates.get(node),
                                                 _updated_input_through_a_view(node, input_updates))
            if node in saved:
                env[node] = _stored_where_computed(ctx, node, env[node])
        elif node.op == "output":
            user_visible = node.meta.get("user_visible_output_idxs")  # a forward graph's (backend.py)
            returned = _flatten_outputs(node.args[0])
            outputs = [_lower_output(ctx, n, env, saved=user_visible is not None and k not in user_visible)
                       for k, n in enumerate(returned)]
            outputs = _apart_as_in_eager(ctx, returned, outputs)
    graph = GraphIR(inputs, ctx.operations, outputs, ctx.constants, ctx.buffers, arg_names, symbol_sources,
                    ctx.sizes, set(ctx.unbacked))
    check_symbols_bound(graph)
    move_size_values_to_host(graph)
    return graph


def _saved_outputs(gm: torch.fx.GraphModule) -> set:
    """A forward graph's outputs that only the backward reads (backend.mark_user_visible_outputs)."""
    output = gm.graph.output_node()
    user_visible = output.meta.get("user_visible_output_idxs")
    if user_visible is None:
        return set()
    return {n for k, n in enumerate(_flatten_outputs(output.args[0]))
            if k not in user_visible and isinstance(n, torch.fx.Node) and n.op == "call_function"}


def _stored_where_computed(ctx, node, value):
    """A value saved for the backward, stored where the graph computes it, in the layout its
    output takes (_lower_output), rather than when the output is lowered at the graph's end:
    AOTAutograd's partitioner builds the forward in the joint graph's order, where a value only
    saved (a bf16 copy of an activation, a max pool's window offsets) comes after the whole
    forward. Stored here, its kernel fuses with its producer's, and its inputs die where they
    would without it."""
    meta = node.meta.get("val")
    if not isinstance(value, TensorValue) or not isinstance(meta, torch.Tensor) or value.dtype not in TRITON_DTYPES \
            or strided_view_of(value, ctx.sizes) is not None or any(s == 0 for s in value.size) \
            or _aliases_input(node):
        return value
    if keeps_planned_layout(ctx.options, value, None, ctx.buffers):
        stride = ctx.shared_strides(value)
    else:
        stride = dense_strides(meta)
        if not same_strides(value.size, stride, symbolic_size(meta.stride())):
            return value  # returned in a layout of its own (an expanded value, stored dense)
    buffer = ctx.compute_buffer(value, stride)
    return buffer_value(buffer.name, buffer.layout)


def _lower_input(ctx, node, example, position, inputs, symbol_sources):
    if isinstance(example, torch.SymInt):
        value = as_size(example)
        if is_symbolic(value) and value.is_Symbol:
            symbol_sources.setdefault(value, node.name)
        return value
    if _is_opaque(example):
        return OpaqueInput(node.name)
    if not isinstance(example, torch.Tensor):
        raise Unsupported(f"graph input {node.name} is a {type(example).__name__}, not a tensor")
    size = tuple(as_size(s) for s in example.shape)
    stride = tuple(as_size(s) for s in example.stride())
    offset = as_size(example.storage_offset())
    if is_symbolic(offset) and offset.is_Symbol:  # (a view a graph break hands over: logits[:, :-1])
        symbol_sources.setdefault(offset, f"{node.name}.storage_offset()")
    elif is_symbolic(offset):
        offset = None  # not readable as one symbol: as_strided over this input says so (context.py)
    for method, values in (("size", size), ("stride", stride)):
        for k, s in enumerate(values):
            if is_symbolic(s) and s.is_Symbol:
                symbol_sources.setdefault(s, f"{node.name}.{method}({k})")
    layout = Layout(size, stride, 0, example.dtype, example.device)
    buffer = InputBuffer(node.name, layout, position, needs_neg_resolved(example), is_host_scalar(example))
    ctx.add_buffer(buffer)
    ctx.storage_offsets[buffer.name] = offset
    inputs.append(buffer)
    return buffer_value(buffer.name, layout)


def _is_opaque(example) -> bool:
    """A ScriptObject (a process group, a torchbind object), real or as AOTAutograd fakes it."""
    from torch._library.fake_class_registry import FakeScriptObject

    return isinstance(example, (torch.ScriptObject, FakeScriptObject))


HOST_SCALAR_DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16,
                      torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)


def is_host_scalar(example: torch.Tensor) -> bool:
    """A 0-d CPU tensor input: kernels take its value, read on the host (InputBuffer.host_scalar)."""
    return example.dim() == 0 and example.device.type == "cpu" and example.dtype in HOST_SCALAR_DTYPES


def check_symbols_bound(graph: GraphIR) -> None:
    """Every symbol a size uses can be read at run time: from an input, or (data-dependent)
    from the aten call that decides it."""
    used = set()
    for buffer in graph.buffers.values():
        used |= size_symbols(buffer.layout.size + buffer.layout.stride + (buffer.layout.offset,))
    for out in graph.outputs:  # views of inputs returned as eager laid them out
        if out.view is not None:
            used |= size_symbols(tuple(out.view.size) + tuple(out.view.stride) + (out.view.offset,))
    missing = used - set(graph.symbol_sources) - graph.unbacked_symbols
    if missing:
        raise Unsupported(f"sizes {sorted(map(str, missing))} cannot be read from the graph's inputs")


def _fetch_attr(gm, target: str):
    value = gm
    for part in target.split("."):
        value = getattr(value, part)
    return value


def _lower_constant(ctx, node, tensor):
    if not isinstance(tensor, torch.Tensor):
        return tensor
    if tensor.dim() == 0 and tensor.dtype in TRITON_DTYPES:
        # A 0-d constant (`y[mask] = 0.5` holds 0.5 as one, on the CPU even in a GPU graph) is a
        # number, as eager treats 0-d CPU tensors: its value goes into the kernels, never a pointer.
        with unset_fake_temporarily():  # compile_graph runs under AOTAutograd's fake mode
            value = tensor.item()
        return TensorValue((), tensor.dtype, tensor.device, ex.constant(value, tensor.dtype))
    return ctx.constant_value(f"const_{node.name}", tensor)


def _lower_call(ctx, node, env):
    if node.target is operator.getitem:
        container, index = node.args
        return env[container][index]
    args, kwargs = _arguments(node, env)
    extern = is_extern(node.target, ctx.options) and not depthwise.generates(node, ctx.options)
    lowering = None if extern else find_lowering(node.target)
    reason = "no lowering" if lowering is None and not extern else ""
    unsupported = _unsupported_dtype(node)
    if lowering is not None and unsupported is not None:
        lowering, reason = None, f"dtype {unsupported} is not generated"
    if lowering is not None:
        try:
            value = lowering(ctx, node, *args, **kwargs)
        except Unsupported as err:
            reason = str(err)
        except TypeError as err:
            if not _symbolic_size_question(err):
                raise CompileError("lowering", f"{type(err).__name__}: {err}", node) from err
            # a lowering that needs a size as a number (or a comparison of symbolic sizes that
            # only a guard could answer): this op runs through aten, the graph stays generated
            reason = f"symbolic sizes ({err})"
        except CompileError:
            raise  # already names the stage and node
        except Exception as err:
            raise CompileError("lowering", f"{type(err).__name__}: {err}", node) from err
        else:
            if isinstance(value, TensorValue):
                value = dataclasses.replace(value, origins=_origins(args, node))
                return ctx.maybe_realize_shared(value, _data_readers(node), _readers_from_memory(node),
                                                _product_operand_strides(ctx, node, value))
            return value
    return _call_through_aten(ctx, node, (args, kwargs), reason)


# Ops that take a tensor for its size, dtype, device and layout only, not its elements.
LIKE_OPS = {aten.zeros_like, aten.ones_like, aten.empty_like, aten.full_like, aten.rand_like, aten.randn_like,
            aten.randint_like, aten.new_zeros, aten.new_ones, aten.new_empty, aten.new_full, aten.new_empty_strided,
            aten.sym_size, aten.sym_stride, aten.sym_numel, aten.sym_storage_offset}


def _data_readers(node) -> int:
    """The node's users that read its elements: not zeros_like(x) and its kin, which read its
    size and layout only. (A backward recomputing log_softmax took zeros_like(it) for a second
    reader, and stored it in a kernel of its own.)"""
    return sum(1 for user in node.users
               if getattr(user.target, "overloadpacket", None) not in LIKE_OPS or node in user.args[1:]
               or node in user.kwargs.values())


def _readers_from_memory(node) -> int:
    """How many matmuls read the node's value, directly or through views: each reads it from
    memory, in whatever strides. A value two consumers read is then stored once when one of them
    is a matmul, not once for it and again inside another consumer's kernel, nor once for each
    matmul in its own layout. (Attention and convolution are not counted: they need their
    operands in given layouts, which a view of the shared value may not have. Nor is the graph's
    output: a saved value stored apart from its consumer's kernel can cost a kernel more, where
    the fusion of same-shaped kernels would recompute it in one.)"""
    return sum(getattr(reader.target, "overloadpacket", None) in MATMUL_OPS for reader, _ in _readers_through_views(node))


def _product_operand_strides(ctx, node, value):
    """Padded row strides for a value an mm or addmm reads as an operand (lower/product_rows.py),
    unless a graph output views it; None to store it as usual."""
    if node in ctx.output_views or not isinstance(value, TensorValue) or not _product_operand(node):
        return None
    return padded_row_strides(ctx.options, value.size, value.dtype, value.device)


def _product_operand(node) -> bool:
    """Whether an mm or addmm reads the node's value as an operand, directly or through views."""
    return any(any(i < len(reader.args) and reader.args[i] is read for i in PRODUCT_OPERANDS.get(reader.target, ()))
               for reader, read in _readers_through_views(node))


def _readers_through_views(node):
    """(reader, what it reads: node or a view of it) for each of node's users, and for the users of
    the views among them, down to users that are not view ops."""
    for user in node.users:
        if getattr(user.target, "overloadpacket", None) in VIEW_OPS:
            yield from _readers_through_views(user)
        else:
            yield user, node


def _arguments(node, env) -> tuple:
    """The node's args and kwargs with each FX node replaced by what it lowered to."""
    return torch.fx.node.map_arg(node.args, lambda n: env[n]), torch.fx.node.map_arg(node.kwargs, lambda n: env[n])


def _call_through_aten(ctx, node, arguments: tuple, reason: str):
    args, kwargs = arguments
    try:
        return call_through_aten(ctx, node, args, kwargs, reason)
    except Unsupported:
        raise
    except Exception as err:
        raise CompileError("lowering", f"{type(err).__name__}: {err}", node) from err


def _with_traced_sizes(ctx, value, node):
    """value with the sizes the ShapeEnv knows to be constants where our lowering has an
    expression for them: x[1::3] of s0 rows has (s0 + 1) // 3 rows, and once torch broadcast it
    against another tensor Dynamo has guarded that it is 1 (the trace may say 1 too). A size of
    1 must be seen as 1, or a broadcast of it reads past its end."""
    if not isinstance(value, TensorValue) or not any(is_symbolic(s) for s in value.size):
        return value
    meta = node.meta.get("val")
    traced = symbolic_size(meta.shape) if isinstance(meta, torch.Tensor) and meta.dim() == value.rank \
        else (None,) * value.rank
    size = tuple(_constant_size(ctx, ours, t) for ours, t in zip(value.size, traced))
    return value if size == tuple(value.size) else dataclasses.replace(value, size=size)


def _constant_size(ctx, ours, traced):
    if not is_symbolic(ours):
        return ours
    if isinstance(traced, int):
        return traced
    if ours.is_Symbol or ours.is_Mul or ctx.sizes is None:  # (a size >= 2, or a product of them)
        return ours
    return 1 if ctx.sizes.known_equal(ours, 1) else ours


def _origins(args, node) -> tuple[str, ...]:
    found: list[str] = []

    def visit(v):
        if isinstance(v, TensorValue):
            found.extend(v.origins)
        elif isinstance(v, (list, tuple)):
            for x in v:
                visit(x)

    visit(args)
    return tuple(dict.fromkeys(found + [node.name]))


def _unsupported_dtype(node):
    """A dtype our kernels do not handle (complex, float8...) among the node's tensors, or None."""
    values = [node.meta.get("val")] + [a.meta.get("val") for a in node.all_input_nodes]
    for value in values:
        for leaf in (value if isinstance(value, (list, tuple)) else [value]):
            if isinstance(leaf, torch.Tensor) and leaf.dtype not in TRITON_DTYPES:
                return leaf.dtype
    return None


def _flatten_outputs(value):
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def _view_base(node):
    """The node whose storage eager's `node` shares: up through view ops (and getitem of a
    multi-output view op) to the first node that makes a tensor of its own."""
    while isinstance(node, torch.fx.Node) and node.op == "call_function":
        if node.target is operator.getitem:
            container = node.args[0]
            if getattr(container.target, "overloadpacket", None) not in MULTI_VIEW_OPS:
                return node
            node = container.args[0]
        elif getattr(node.target, "overloadpacket", None) in VIEW_OPS:
            node = node.args[0]
        else:
            return node
    return node


def _output_views(gm: torch.fx.GraphModule) -> set:
    """The nodes whose memory a graph output may be, here or in eager: each output and, up its
    chain, what it views (any op whose schema says view, reshape, getitem of a multi-output op,
    and clone, which lowering makes a view of a stored value). They keep eager's layout: padded
    rows (lower/product_rows.py) would cost a copy at the graph's edge."""
    output = next(n for n in gm.graph.nodes if n.op == "output")
    nodes: set = set()
    for node in _flatten_outputs(output.args[0]):
        while isinstance(node, torch.fx.Node) and node not in nodes:
            nodes.add(node)
            node = _viewed_input(node)
    return nodes


def _viewed_input(node):
    """The node whose memory `node`'s value may share (_output_views), or None."""
    if node.op != "call_function" or not node.args:
        return None
    if node.target is operator.getitem or isinstance(node.target, torch._ops.OpOverload) and (
            node.target.is_view or node.target.overloadpacket in VIEW_OPS | VIEWING_COPIES):
        return node.args[0]
    return None


def _output_bases(gm: torch.fx.GraphModule) -> set:
    """Computed nodes to lay out as eager does because graph outputs are views of them: those whose
    storage several outputs share in eager, and those under an output whose eager layout is not
    dense (a step slice, an expand: strides only a view of a base laid out as eager's can have).
    Outputs of inputs' storage are regenerated from the inputs by AOTAutograd."""
    output = next(n for n in gm.graph.nodes if n.op == "output")
    counts: dict = {}
    for out in _flatten_outputs(output.args[0]):
        if isinstance(out, torch.fx.Node) and isinstance(out.meta.get("val"), torch.Tensor):
            base = _view_base(out)
            sparse_view = base is not out and not _is_dense(out.meta["val"])
            counts[base] = counts.get(base, 0) + (2 if sparse_view else 1)
    return {base for base, n in counts.items() if n > 1 and base.op == "call_function"}


def _realize_shared_base(ctx, node, value, updated_input=None, viewed_input=None):
    """The base of several outputs in one buffer laid out as eager's (their views then read it):
    kept as it is when it already is such a view of a computed buffer. updated_input: the graph
    input this node is the new value of (see `_input_updates`); viewed_input: the one a view of
    this node is the new value of (`_updated_input_through_a_view`)."""
    meta = node.meta.get("val")
    if not isinstance(value, TensorValue) or not isinstance(meta, torch.Tensor):
        return value
    input_strides = _updated_input_strides(ctx, updated_input, meta)
    if input_strides is None and viewed_input is not None:
        input_strides = _strides_through_a_reshape(ctx, viewed_input, meta)
        updated_input = viewed_input if input_strides is not None else None
    view = strided_view_of(value)
    if (view is not None and not isinstance(ctx.buffers[view[0]], InputBuffer)
            and same_strides(value.size, view[2], input_strides or symbolic_size(meta.stride()))):
        if input_strides:
            ctx.input_layout_buffers.add(view[0])
        return value
    buffer = ctx.compute_buffer(value, input_strides or dense_strides(meta))
    if input_strides:  # at the input's storage offset too: AOTAutograd compares those
        buffer.storage_offset = ctx.storage_offsets[updated_input.name]
        ctx.input_layout_buffers.add(buffer.name)
    return buffer_value(buffer.name, buffer.layout)


def _updated_input_strides(ctx, updated_input, meta) -> tuple | None:
    """A symbolic graph's new value of a mutated input, when other outputs are views of it, is
    laid out as the input is. AOTAutograd copies it into the input and rebuilds those views from
    the input: with symbolic sizes it cannot replay the views, so it reinterprets the input with
    the layout of our outputs' base, which must then be the input's (fuzz seed 8174: a reshape
    of a step-sliced input that is then written by index_put_ read the wrong elements)."""
    if updated_input is None:
        return None
    layout = ctx.buffers[updated_input.name].layout
    if layout.size != symbolic_size(meta.shape) or not any_symbolic(layout.size + layout.stride):
        return None
    if ctx.storage_offsets.get(updated_input.name) is None:  # not readable as one symbol
        return None
    return layout.stride


def _updated_input_through_a_view(base, input_updates: dict):
    """The graph input (its placeholder's InputBuffer name is looked up later) whose new value
    is a view of `base`, not `base` itself: `v = x.reshape(-1); v.clamp_(...)` returns the clamped
    flat values as the base and their reshape back as x's new value."""
    for out, placeholder in input_updates.items():
        if out is not base and _view_base(out) is base:
            return placeholder
    return None


def _strides_through_a_reshape(ctx, updated_input, meta) -> tuple | None:
    """Strides for a base whose reshape is a mutated input's new value, such that the reshape is
    laid out as the input (see `_updated_input_strides`): possible when the input is dense up to
    one element step k (strides k times contiguous ones, a step-sliced last dim), where any
    reshape of the same elements keeps that step. Fuzz seed 91084: `x[..., ::2].reshape(-1)`
    clamped in place; the flat output was returned with stride 1, and AOTAutograd rebuilt it on
    the input's storage with that stride."""
    layout = ctx.buffers[updated_input.name].layout
    if not any_symbolic(layout.size + layout.stride) or ctx.storage_offsets.get(updated_input.name) is None:
        return None
    dense = contiguous_strides(layout.size)
    steps = {sympy.simplify(sympy.sympify(st) / d) for st, d, n in zip(layout.stride, dense, layout.size) if n != 1}
    if len(steps) != 1:
        return None
    step = steps.pop()
    return tuple(step * d for d in contiguous_strides(symbolic_size(meta.shape)))


def _input_updates(gm: torch.fx.GraphModule) -> dict:
    """{output node: the placeholder it is the new value of}. AOTAutograd's graphs return the new
    values of the inputs they mutate first, in the order of its metadata's
    `mutated_inp_runtime_indices`, and copy them into the inputs after the call."""
    context = torch._guards.TracingContext.try_get()
    indices = getattr(getattr(context, "fw_metadata", None), "mutated_inp_runtime_indices", None) \
        if context is not None else None
    if not indices:
        return {}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    output = next(n for n in gm.graph.nodes if n.op == "output")
    outputs = _flatten_outputs(output.args[0])
    updates = {}
    for out, k in zip(outputs, indices):
        if isinstance(out, torch.fx.Node) and k < len(placeholders) and _same_meta(out, placeholders[k]):
            updates[out] = placeholders[k]
    return updates


def _same_meta(a: torch.fx.Node, b: torch.fx.Node) -> bool:
    va, vb = a.meta.get("val"), b.meta.get("val")
    return isinstance(va, torch.Tensor) and isinstance(vb, torch.Tensor) and \
        va.shape == vb.shape and va.dtype == vb.dtype


def _aliases_input(node) -> bool:
    """True when eager's output is a view of a graph input (so ours may be one too)."""
    root = _alias_root(node)
    return isinstance(root, torch.fx.Node) and root.op in ("placeholder", "get_attr")


def _apart_as_in_eager(ctx, nodes, outputs) -> list:
    """Outputs that would share one of our buffers where eager's share no storage get a copy of
    their own: our lowering drops clone, so `h.clone()` returned next to h (or next to h saved for
    the backward) was h's buffer, and a caller writing into the clone changed h (backward then
    raised a version-counter error; eager does not). Views of one value (one _view_base) keep
    sharing it. Also keeps two outputs apart that took one read-only aten argument's buffer
    (LoweringContext.stored_for_output)."""
    owners: dict = {}
    kept = []
    for node, out in zip(nodes, outputs):
        meta = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
        if out.view is not None and isinstance(meta, torch.Tensor) and isinstance(ctx.values.get(node), TensorValue):
            owner = _view_base(node)
            if owners.setdefault(out.view.buffer_name, owner) is not owner:
                ctx.current_node = node
                out = GraphOutput(_whole_buffer(ctx, ctx.compute_buffer(ctx.values[node], dense_strides(meta))))
        kept.append(out)
    return kept


def _alias_root(node):
    """The node a chain of views (and split pieces) starts from, or None when a link is no view."""
    while isinstance(node, torch.fx.Node) and node.op == "call_function":
        if node.target is operator.getitem and isinstance(node.args[0], torch.fx.Node) and \
                getattr(node.args[0].target, "overloadpacket", None) in MULTI_VIEW_OPS:
            node = node.args[0]  # one piece of a split: a view of the split's input
        elif getattr(node.target, "overloadpacket", None) not in VIEW_OPS:
            return None
        node = node.args[0]
    return node


def _input_alias_view(ctx, node, meta):
    """An output eager returns as a view of a graph input, as eager laid it out (size, stride and
    storage offset from the trace): right at every size, since eager's own result is that view.
    None when the input is not one of our input buffers or the trace has no layout."""
    base = ctx.values.get(_alias_root(node))
    view = strided_view_of(base) if isinstance(base, TensorValue) and isinstance(meta, torch.Tensor) else None
    if view is None or not isinstance(ctx.buffers[view[0]], InputBuffer):
        return None
    offset = as_size(meta.storage_offset()) - ctx.storage_offset_of(view[0])
    return ctx.tensor_arg(view[0], symbolic_size(meta.shape), symbolic_size(meta.stride()), offset)


def _is_dense(meta: torch.Tensor) -> bool:
    stride = symbolic_size(meta.stride())
    return same_strides(symbolic_size(meta.shape), dense_strides(meta), stride)


def dense_strides(meta: torch.Tensor):
    """meta's strides if they describe a dense, non-overlapping layout; else contiguous strides.
    Symbolic strides are ordered by their example values and must then match exactly."""
    size = symbolic_size(meta.shape)
    stride = tuple(without_max_one(s, size) for s in symbolic_size(meta.stride()))
    hints = [example_value(s, fallback=UNBACKED_GUESS) for s in meta.stride()]
    order = sorted((k for k in range(len(size)) if size[k] != 1), key=lambda k: hints[k])
    expected = 1
    for k in order:
        if sympy.expand(stride[k] - expected) != 0:
            return contiguous_strides(size)
        expected = expected * (max(size[k], 1) if isinstance(size[k], int) else size[k])  # as torch's
    return stride


SYMBOLIC_SIZE_QUESTIONS = ("cannot determine truth value of Relational", "Cannot convert symbols to int",
                           "Cannot convert expression to float")


def _symbolic_size_question(err: TypeError) -> bool:
    """sympy's error when a lowering treats a symbolic size as a number."""
    return any(text in str(err) for text in SYMBOLIC_SIZE_QUESTIONS)


def _lower_output(ctx, node, env, saved: bool = False) -> GraphOutput:
    """saved: a forward graph's output that only the backward reads, whose layout may be ours
    (conv_layout.keeps_planned_layout)."""
    if not isinstance(node, torch.fx.Node):
        return GraphOutput(None, node)
    ctx.current_node = node
    value = env[node]
    if not isinstance(value, TensorValue):
        return GraphOutput(None, value)
    meta = node.meta.get("val")
    stride = dense_strides(meta) if isinstance(meta, torch.Tensor) else contiguous_strides(value.size)
    view = strided_view_of(value, ctx.sizes)
    if saved and keeps_planned_layout(ctx.options, value, view, ctx.buffers):
        if view is None:
            stored = ctx.stored_for_output(value, ctx.shared_strides(value))
            return GraphOutput(stored or _whole_buffer(ctx, ctx.compute_buffer(value, ctx.shared_strides(value))))
        return GraphOutput(ctx.realize(value))
    if view is not None:
        from_input = isinstance(ctx.buffers[view[0]], InputBuffer)
        eager_stride = symbolic_size(meta.stride()) if meta is not None else stride
        kept_strides = same_strides(value.size, view[2], eager_stride) or view[0] in ctx.input_layout_buffers
        if kept_strides and (not from_input or _aliases_input(node)):
            return GraphOutput(ctx.realize(value))
    if _aliases_input(node):
        # AOTAutograd rebuilds an output that aliases an input from our result's size, stride
        # and offset, on the input: a copy would give it the wrong elements.
        alias = _input_alias_view(ctx, node, meta)
        if alias is None:
            raise Unsupported(f"output {node.name} is a view of an input that is not expressible as one here")
        return GraphOutput(alias)
    stored = ctx.stored_for_output(value, stride)
    return GraphOutput(stored or _whole_buffer(ctx, ctx.compute_buffer(value, stride)))


def _whole_buffer(ctx, buffer):
    """The new buffer itself as the output: realize() of a load of it would look for a view of it
    and, where symbolic strides hide that (channels-last strides over sizes like s0 - s1 + 3), copy
    it again in contiguous strides, losing eager's layout."""
    layout = buffer.layout
    return ctx.tensor_arg(buffer.name, layout.size, layout.stride, 0)


