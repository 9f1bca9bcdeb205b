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
  batch and channel sizes that it reads (`inherits_channels_last`). Stored contiguous, it was written twice, NCHW for
  the sum and NHWC for the convolution, by one transposing kernel: 4.2 ms of ResNet-50's 12 on
  the H100. A 4-D value that reads no such buffer (attention's scores in a ViT) keeps the
  contiguous layout its matmuls want;
* graph outputs keep eager's strides (lower/graph.py copies at the edge where they differ).
"as_traced" (the default until the GPU calibration of the decision) keeps the traced layouts."""
from __future__ import annotations

import torch

from ..ir import expr as ex

aten = torch.ops.aten
CONVOLUTIONS = (aten.convolution.default, aten._convolution.default)


def channels_last_strides(size) -> tuple:
    """Strides of a dense (N, C, H, W) tensor in NHWC memory order."""
    n, c, h, w = size
    return (h * w * c, 1, w * c, c)


def plans_channels_last(options, target, args) -> bool:
    """A 2-D convolution (4-D input) under conv_layout="channels_last"."""
    return options.conv_layout == "channels_last" and target in CONVOLUTIONS and len(args[0].size) == 4


def channels_last_meta(meta):
    """The convolution's traced result with channels-last strides."""
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
                _same_nonunit_strides(layout.size, layout.stride, channels_last_strides(tuple(layout.size))):
            return True
    return False


def _same_nonunit_strides(size, a, b) -> bool:
    """Equal strides wherever the dim has more than one element (a size-1 dim's stride is free)."""
    return all(x == y for s, x, y in zip(size, a, b) if s != 1)
