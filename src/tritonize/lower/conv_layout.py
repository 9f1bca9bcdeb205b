"""Channels-last convolutions (option conv_layout; docs/design.md, "Convolution layouts").

cuDNN's fast convolution kernels read and write NHWC. Handed NCHW tensors, it converts each
input and output around every call. With conv_layout="channels_last":
* a 2-D convolution's input is stored with channels-last strides (the kernel that computes it
  writes them directly; a view of another layout gets a copy) and its result is expected in
  channels-last strides, which torch gives for a channels-last input;
* the kernels between convolutions then read NHWC (the previous result) and write NHWC (the next
  input): a value reaches the convolution that reads it unstored, and is stored in the layout the
  convolution asks for. A layout chosen by propagation (a buffer taking its input's layout) was
  tried and changed no kernel count on conv-bn-relu chains, residual and squeeze-and-excitation
  blocks; it would have cost a copy before a flatten, so it is not built;
* graph outputs keep eager's strides (lower/graph.py copies at the edge where they differ).
"as_traced" (the default until the GPU calibration of the decision) keeps the traced layouts."""
from __future__ import annotations

import torch

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
