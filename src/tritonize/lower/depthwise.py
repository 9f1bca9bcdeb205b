"""Depthwise 2-D convolutions as generated kernels (option `depthwise_conv="generated"`).

A depthwise convolution (groups == input channels == output channels, one filter of
kernel_h x kernel_w taps per channel) reads each input element only kernel_h * kernel_w times,
from its neighbours: memory-bound, no reduction across channels. aten's NCHW CUDA kernel for it
is generic and slow (issue 20: 4.25 ms of a ConvNeXt step); cuDNN's NHWC kernel is fast but is
a library call, so the batch norm and activation after it are another kernel that reads and
writes the whole map again.

Here the convolution is a pointwise value over the output, unrolled like a pooling window
(lower/pooling.py's window_taps): out[n, c, oh, ow] = bias[c] + sum over taps (i, j) inside the input
of x[n, c, oh*s - p + i*d, ow*s - p + j*d] * w[c, 0, i, j], accumulated in float32 for
fp16/bf16 (as cuDNN accumulates) and rounded once to the output dtype. Its consumers (batch norm,
SiLU, a layer norm's first pass) fuse after it, and in channels-last memory order the loads along
channels are contiguous. The input is stored first (its producer is not recomputed at every tap).

Which convolutions: 2-D, not transposed, groups == channels with one filter each, static spatial
sizes, at most MAX_TAPS taps (7x7), floating dtypes. "generated" takes all of them; "auto" (the
default) those `measured_faster` names, in graphs whose convolutions run channels-last (inference
on CUDA in fp16/bf16, lower/conv_layout.py), the layout it was measured in.
"""
from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily

from ..ir import expr as ex
from ..ir.nodes import TensorValue, buffer_value
from ..ir.symbols import dim_vars
from .dtypes import upcast
from .pointwise import output_of
from .pooling import MAX_TAPS, add_to, all_of, pair, window_axes, window_taps
from .registry import lowering

aten = torch.ops.aten
FLOATS = (torch.float32, torch.float16, torch.bfloat16)


def generates(node: torch.fx.Node, options) -> bool:
    """Whether this convolution node is generated here rather than called through aten."""
    mode = getattr(options, "depthwise_conv", "library")
    if node.target is not aten.convolution.default or mode == "library":
        return False
    x, weight = (a.meta.get("val") if isinstance(a, torch.fx.Node) else None for a in node.args[:2])
    if x is None or weight is None or x.dim() != 4 or weight.dim() != 4 or x.dtype not in FLOATS:
        return False
    transposed, groups = node.args[6], node.args[8]
    sizes = [*x.shape, *weight.shape]
    if transposed or not all(isinstance(s, int) for s in sizes):
        return False
    channels = x.shape[1]
    depthwise = (groups == channels and weight.shape[0] == channels and weight.shape[1] == 1
                 and weight.shape[2] * weight.shape[3] <= MAX_TAPS)
    if not depthwise or mode == "generated":
        return depthwise
    return options.conv_layout == "channels_last" and measured_faster(tuple(weight.shape[2:]), node.args[3],
                                                                      node.args[5], node.meta["val"].numel())


SMALL_OUTPUT = 2**19  # elements


def measured_faster(kernel: tuple, stride, dilation, output_elements: int) -> bool:
    """The rule of option depthwise_conv="auto": whether the generated kernel (with the batch
    norm and activation after it) beat cuDNN's NHWC depthwise kernel (and a kernel for the rest)
    at this shape in bench/depthwise_sweep.py (H100, bf16, channels-last; docs/benchmarks.md,
    twenty-sixth session). It did for 3x3 windows of stride 2 (0.7 and 0.9 of cuDNN's time; a
    5x5 window of stride 2 was 1.2) and for outputs of at most SMALL_OUTPUT elements (a batch of
    one: 0.4 at 7x7, level at 5x5), where cuDNN's kernel fills the GPU poorly. It lost on the
    other eleven of sixteen shapes (1.1-1.9: 5x5 and 7x7 windows of stride 1 read each input
    25-49 times from cache, where cuDNN keeps a row of them in registers)."""
    if output_elements <= SMALL_OUTPUT:
        return True
    op = "depthwise convolution"
    return tuple(kernel) == (3, 3) and pair(stride, "stride", op) == (2, 2) and pair(dilation, "dilation", op) == (1, 1)


@lowering(aten.convolution.default)
def lower_depthwise_convolution(ctx, node, x, weight, bias, stride, padding, dilation, transposed,
                                output_padding, groups):
    """Reached only for convolutions `generates` accepted (lower/graph.py asks it first)."""
    out_size, out_dtype, device = output_of(node)
    kernel = (int(weight.size[2]), int(weight.size[3]))
    axes = window_axes("depthwise convolution", x.size, out_size[-2:], kernel, stride, padding, dilation)
    x = ctx.realize_value(x)  # each input element is read by every tap that covers it
    compute = upcast(out_dtype)
    taps = _tap_major(ctx, node.args[1], weight, kernel, compute, device)
    n, c, oh, ow = dim_vars(4)
    total = None
    for i, j, h, w, checks in window_taps(axes, oh, ow):
        value = ex.to_dtype(x.at([n, c, h, w]), compute)
        mask = all_of(checks)
        term = ex.op("mul", value if mask is None else ex.masked(mask, value, 0),
                     ex.to_dtype(taps.at([i, j, c]), compute), dtype=compute)
        total = add_to(total, term)
    if bias is not None:
        total = ex.op("add", total, ex.to_dtype(bias.at([c]), compute), dtype=compute)
    return TensorValue(out_size, out_dtype, device, ex.to_dtype(total, out_dtype))


def _tap_major(ctx, weight_node, weight: TensorValue, kernel: tuple, compute: torch.dtype, device) -> TensorValue:
    """The filter as (kernel_h, kernel_w, channels), channels innermost, in the dtype the
    convolution accumulates in (no conversion at each tap of each element). In (channels, 1, kh,
    kw) order neighbouring channels' weights of one tap are kh * kw elements apart, so the 32
    lanes of a warp, which hold neighbouring channels in channels-last order, read each tap's
    weights from up to 32 cache lines; here they read one. A frozen filter is reordered at
    compile time; any other is copied by a kernel of its own (kh * kw * channels elements) each
    call."""
    channels = int(weight.size[0])
    size = (kernel[0], kernel[1], channels)
    if kernel == (1, 1):
        body = ex.to_dtype(weight.at([dim_vars(3)[2], 0, 0, 0]), compute)
        return TensorValue(size, compute, device, body)
    if isinstance(weight_node, torch.fx.Node) and weight_node.op == "get_attr":
        frozen = ctx.constants[f"const_{weight_node.name}"]
        with unset_fake_temporarily():
            reordered = frozen.reshape(channels, *kernel).permute(1, 2, 0).to(compute).contiguous()
        return ctx.constant_value(f"const_{weight_node.name}_taps", reordered)
    i, j, c = dim_vars(3)
    body = ex.to_dtype(weight.at([c, 0, i, j]), compute)
    buffer = ctx.compute_buffer(TensorValue(size, compute, device, body))
    return buffer_value(buffer.name, buffer.layout)
