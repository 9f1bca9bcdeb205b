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
sizes, at most MAX_TAPS taps (7x7), floating dtypes. Whether it beats cuDNN per shape is measured
on the GPU (`bench/kernels.py --cases dwconv_bn_silu` with back end tritonize-dwgen); until then
the option is off by default ("library").
"""
from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily

from ..ir import expr as ex
from ..ir.nodes import TensorValue, buffer_value
from ..ir.symbols import dim_vars
from .dtypes import upcast
from .pointwise import output_of
from .pooling import MAX_TAPS, add_to, all_of, window_axes, window_taps
from .registry import lowering

aten = torch.ops.aten
FLOATS = (torch.float32, torch.float16, torch.bfloat16)


def generates(node: torch.fx.Node, options) -> bool:
    """Whether this convolution node is generated here rather than called through aten."""
    if node.target is not aten.convolution.default or getattr(options, "depthwise_conv", "library") != "generated":
        return False
    x, weight = (a.meta.get("val") if isinstance(a, torch.fx.Node) else None for a in node.args[:2])
    if x is None or weight is None or x.dim() != 4 or weight.dim() != 4 or x.dtype not in FLOATS:
        return False
    transposed, groups = node.args[6], node.args[8]
    sizes = [*x.shape, *weight.shape]
    if transposed or not all(isinstance(s, int) for s in sizes):
        return False
    channels = x.shape[1]
    return (groups == channels and weight.shape[0] == channels and weight.shape[1] == 1
            and weight.shape[2] * weight.shape[3] <= MAX_TAPS)


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
