"""Channels-last convolutions (option conv_layout; docs/design.md, "Convolution layouts").

cuDNN's fast convolution kernels read and write NHWC. Handed NCHW tensors, it converts each
input and output around every call. With conv_layout="channels_last":
* a 2-D convolution's input is stored with channels-last strides (the kernel that computes it
  writes them directly; a view of another layout gets a copy) and its result is expected in
  channels-last strides, which torch gives for a channels-last input;
* the kernels between convolutions then read NHWC (the previous result) and write NHWC (the next
  input): a value reaches the convolution that reads it unstored, and is stored in the layout the
  convolution asks for;
* a value stored for another reason (read by two consumers: a ResNet block's input, read by its
  first convolution and by the residual sum) takes the layout of the channels-last buffer of its
  batch and channel sizes that it reads (`inherits_channels_last`). Stored contiguous, it was
  written twice, NCHW for the sum and NHWC for the convolution, by one transposing kernel: 4.2 ms
  of ResNet-50's 12 on the H100. An aten op's argument is stored as traced. A 4-D value that reads no such buffer (attention's scores in a ViT) keeps the
  contiguous layout its matmuls want;
* graph outputs keep eager's strides (lower/graph.py copies at the edge where they differ).
"as_traced" keeps the traced layouts. "auto" (the default) decides per aten graph (`decide`):
channels-last for an inference graph with 2-D convolutions on CUDA in fp16/bf16, where the H100
measured it (bench/layout_gpu.sh; docs/benchmarks.md, nineteenth session): ResNet-50 4.9 -> 3.3 ms,
MobileNetV3 5.5 -> 3.0 ms, ViT unchanged. Training graphs stay as traced: channels-last measured
slower there (ResNet-50 20.0 -> 24.8 ms) while the forward still returned its saved activations
NCHW. Under "channels_last" it now returns them NHWC (`keeps_planned_layout`) and the backward's
convolutions read NHWC (`channels_last_arguments`); not measured yet. fp32 is not measured."""
from __future__ import annotations

import dataclasses

import torch

from ..ir import expr as ex
from ..ir.nodes import ComputedBuffer, InputBuffer
from ..ir.sizes import same_strides

aten = torch.ops.aten
CONVOLUTIONS = (aten.convolution.default, aten._convolution.default)


def decide(options, gm, role: str):
    """(options with conv_layout "auto" settled for this aten graph, the report's note or None)."""
    if options.conv_layout != "auto":
        return options, None
    convolutions = [n for n in gm.graph.nodes if n.op == "call_function"
                    and n.target in CONVOLUTIONS + (aten.convolution_backward.default,)
                    and isinstance(n.args[0].meta.get("val"), torch.Tensor) and n.args[0].meta["val"].dim() == 4]
    if not convolutions:
        return dataclasses.replace(options, conv_layout="as_traced"), None
    reason = _why_not_channels_last([n.args[0].meta["val"] for n in convolutions], role)
    layout = "as_traced" if reason else "channels_last"
    note = f"convolution layout: {layout} ({reason or 'inference, 2-D convolutions on CUDA in fp16/bf16'})"
    return dataclasses.replace(options, conv_layout=layout), note


def _why_not_channels_last(conv_inputs, role: str) -> str | None:
    if role != "inference":
        return f"a {role} graph: training keeps the traced layout"
    if any(x.device.type != "cuda" for x in conv_inputs):
        return "not on CUDA"
    if any(x.dtype not in (torch.float16, torch.bfloat16) for x in conv_inputs):
        return "a convolution outside fp16/bf16"
    return None


def channels_last_strides(size) -> tuple:
    """Strides of a dense (N, C, H, W) tensor in NHWC memory order."""
    n, c, h, w = size
    return (h * w * c, 1, w * c, c)


def channels_last_arguments(options, target, args) -> tuple:
    """The positions of a 2-D convolution's activation arguments stored channels-last under
    conv_layout="channels_last": the forward's input; the backward's incoming gradient and input
    (its weight stays as the parameter is). () for any other call."""
    if options.conv_layout != "channels_last":
        return ()
    if target in CONVOLUTIONS and len(args[0].size) == 4:
        return (0,)
    if target == aten.convolution_backward.default and len(args[1].size) == 4:
        return (0, 1)
    return ()


def channels_last_meta(meta):
    """A convolution's traced result with channels-last strides (the backward's: its input's
    gradient, the first of its results); torch gives them for channels-last arguments."""
    if isinstance(meta, (tuple, list)) and meta:
        return type(meta)([channels_last_meta(meta[0]), *meta[1:]])
    if not isinstance(meta, torch.Tensor) or meta.dim() != 4:
        return meta
    return meta.as_strided(meta.shape, channels_last_strides(tuple(meta.shape)))  # (a fake view: no memory)


def inherits_channels_last(options, value, buffers) -> bool:
    """A 4-D value that reads a channels-last 4-D buffer of its own batch and channel sizes (a
    pointwise chain, a pooling), under conv_layout="channels_last": stored channels-last too, so
    that the kernel computing it reads and writes in one memory order."""
    if options.conv_layout != "channels_last" or len(value.size) != 4:
        return False
    for load in ex.loads(value.body):
        layout = buffers[load.args[0]].layout
        if len(layout.size) == 4 and tuple(layout.size[:2]) == tuple(value.size[:2]) and \
                same_strides(layout.size, layout.stride, channels_last_strides(tuple(layout.size))):
            return True
    return False


def keeps_planned_layout(options, value, view, buffers) -> bool:
    """A forward graph's output saved for the backward, under conv_layout="channels_last", is
    returned channels-last as it is (a view of a channels-last buffer we computed, or a value that
    inherits the layout) instead of copied to eager's NCHW: the backward's convolutions and
    kernels read it in that layout, and AOTAutograd learns its strides (backend.report_output_strides)."""
    if options.conv_layout != "channels_last" or len(value.size) != 4:
        return False
    if view is None:
        return inherits_channels_last(options, value, buffers)
    name, size, stride, offset = view
    return not isinstance(buffers[name], InputBuffer) and offset == 0 and \
        same_strides(size, stride, channels_last_strides(tuple(size)))


def layout_copies(graph) -> list:
    """[inside the graph, at its edges]: the buffers that only copy another buffer of their size
    into other strides (a layout conversion: NCHW to NHWC, a transposed clone). At the edges:
    those reading a graph input or written as a graph output (eager's layout, returned)."""
    returned = {out.view.buffer_name for out in graph.outputs if out.view is not None}
    inside = edges = 0
    for op in graph.operations:
        source = _copied_buffer(op, graph.buffers) if type(op) is ComputedBuffer else None  # (not a reduction)
        if source is None or same_strides(op.layout.size, op.layout.stride, source.layout.stride):
            continue
        if isinstance(source, InputBuffer) or op.name in returned:
            edges += 1
        else:
            inside += 1
    return [inside, edges]


def _copied_buffer(op, buffers):
    """The buffer op's body only reads (a load, perhaps converted to another dtype), when it is
    of op's size; else None."""
    body = op.body
    while body.op == "to_dtype":
        body = body.args[0]
    if body.op != "load":
        return None
    source = buffers.get(body.args[0])
    return source if source is not None and tuple(source.layout.size) == tuple(op.layout.size) else None
