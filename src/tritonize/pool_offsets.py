"""max_pool2d's indices saved for the backward as int8 offsets within each window (issue 19).

A training forward saves max_pool2d_with_indices' indices for its backward: one int64 (8 bytes)
per output element, ResNet-50's largest saved value after its activations (49 MiB at batch 32).
Each index points into its own pooling window, so its position in the window, kh * kW + kw, says
the same thing in one byte when the window has at most 127 elements (Inductor saves the same,
through prims of its own). After AOTAutograd's partition, for each saved indices tensor of a
max pool with static sizes:

* the forward computes the offsets from the indices and saves them instead:
      ih, iw = idx // W, idx % W
      kh = (ih - (oh * sH - pH)) / dH,  kw = (iw - (ow * sW - pW)) / dW
* the backward rebuilds the indices from them before any use (its placeholder of the saved
  node's name receives them):
      ih = oh * sH - pH + kh * dH,  iw = ow * sW - pW + kw * dW,  idx = ih * W + iw
  (oh, ow: the output position, from aranges), with kh, kw = divmod(offset, kW).

Both are pointwise aten ops our kernels fuse: into the pool's kernel in the forward (the int64
indices are then never stored), into the pool's backward in the backward. The forward's output
and the backward's input at that position change together (AOTAutograd hands the saved values
over by position, the backward's placeholder keeps the saved node's name); their example values
(fake tensors) are computed by the fake mode of the graph.
"""
from __future__ import annotations

import operator

import torch
from torch._guards import detect_fake_mode

aten = torch.ops.aten
MAX_WINDOW = torch.iinfo(torch.int8).max


def save_pool_offsets(forward: torch.fx.GraphModule, backward: torch.fx.GraphModule, num_fwd_outputs: int) -> None:
    """Rewrite a partition in place (module docstring). Saved values are the forward's outputs
    from num_fwd_outputs on; the backward receives each as the placeholder of the saved node's
    name. (Not by position: the forward returns its saved tensors before its saved sizes, the
    backward takes the sizes first.)"""
    output = forward.graph.output_node()
    saved = list(output.args[0][num_fwd_outputs:])
    placeholders = {n.name: n for n in backward.graph.nodes if n.op == "placeholder"}
    changed = False
    for position, node in enumerate(saved):
        pool = _pool_of_indices(node)
        if pool is None or node.name not in placeholders:
            continue
        geometry = _geometry(pool)
        if geometry is None:
            continue
        received = placeholders[node.name]
        if not _same_value(received, node):
            continue
        offsets = _offsets_in_forward(forward.graph, node, geometry)
        saved[position] = offsets
        _indices_in_backward(backward.graph, received, offsets.meta["val"], geometry)
        changed = True
    if changed:
        output.args = (tuple(output.args[0][:num_fwd_outputs]) + tuple(saved),) + tuple(output.args[1:])
        forward.recompile()
        backward.recompile()


def _pool_of_indices(node):
    """The max_pool2d_with_indices call whose indices (its second result) `node` is."""
    if not (isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target is operator.getitem
            and node.args[1] == 1):
        return None
    pool = node.args[0]
    return pool if getattr(pool, "target", None) is aten.max_pool2d_with_indices.default else None


def _geometry(pool) -> dict | None:
    """Window, stride, padding, dilation and the input's and output's planes, all static; None
    when a size is symbolic or the window has more than 127 elements."""
    x, kernel = pool.args[0], list(pool.args[1])
    stride = list(pool.args[2]) if len(pool.args) > 2 and pool.args[2] else kernel
    padding = pool.args[3] if len(pool.args) > 3 else 0
    dilation = pool.args[4] if len(pool.args) > 4 else 1
    pair = (lambda v: list(v) * (2 // len(v)) if isinstance(v, (list, tuple)) else [v, v])
    kernel, stride, padding, dilation = pair(kernel), pair(stride), pair(padding), pair(dilation)
    size_in, size_out = x.meta["val"].shape, pool.meta["val"][1].shape
    sizes = [*size_in[-2:], *size_out[-2:], *kernel, *stride, *padding, *dilation]
    if not all(isinstance(s, int) for s in sizes) or kernel[0] * kernel[1] > MAX_WINDOW:
        return None
    return {"in": tuple(size_in[-2:]), "out": tuple(size_out[-2:]), "kernel": kernel, "stride": stride,
            "padding": padding, "dilation": dilation, "device": x.meta["val"].device}


def _same_value(received, sent) -> bool:
    a, b = received.meta.get("val"), sent.meta.get("val")
    return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == b.dtype == torch.int64 \
        and a.shape == b.shape


class _Builder:
    """Appends aten calls after a node, each with its example value computed in the graph's
    fake mode."""

    def __init__(self, graph: torch.fx.Graph, after: torch.fx.Node, fake_mode):
        self.graph, self.last, self.fake_mode = graph, after, fake_mode

    def call(self, target, *args, **kwargs) -> torch.fx.Node:
        with self.graph.inserting_after(self.last):
            node = self.graph.call_function(target, args, kwargs)
        values = [a.meta["val"] if isinstance(a, torch.fx.Node) else a for a in args]
        with self.fake_mode:
            node.meta["val"] = target(*values, **kwargs)
        self.last = node
        return node

    def window_origins(self, geometry) -> tuple:
        """(oh * sH - pH) as a column and (ow * sW - pW) as a row: each output position's first
        input row and column."""
        (out_h, out_w), device = geometry["out"], geometry["device"]
        (sh, sw), (ph, pw) = geometry["stride"], geometry["padding"]
        rows = self.call(aten.arange.start_step, -ph, out_h * sh - ph, sh, dtype=torch.int64, device=device)
        rows = self.call(aten.view.default, rows, [out_h, 1])
        cols = self.call(aten.arange.start_step, -pw, out_w * sw - pw, sw, dtype=torch.int64, device=device)
        return rows, cols


def _offsets_in_forward(graph, indices, geometry) -> torch.fx.Node:
    build = _Builder(graph, indices, detect_fake_mode([indices.meta["val"]]))
    width = geometry["in"][1]
    (dh, dw), kw = geometry["dilation"], geometry["kernel"][1]
    rows, cols = build.window_origins(geometry)
    ih = build.call(aten.div.Tensor_mode, indices, width, rounding_mode="floor")
    iw = build.call(aten.sub.Tensor, indices, build.call(aten.mul.Tensor, ih, width))
    kh = build.call(aten.div.Tensor_mode, build.call(aten.sub.Tensor, ih, rows), dh, rounding_mode="floor")
    kc = build.call(aten.div.Tensor_mode, build.call(aten.sub.Tensor, iw, cols), dw, rounding_mode="floor")
    offsets = build.call(aten.add.Tensor, build.call(aten.mul.Tensor, kh, kw), kc)
    return build.call(aten._to_copy.default, offsets, dtype=torch.int8)


def _indices_in_backward(graph, received, offsets_value, geometry) -> None:
    """The placeholder now receives the offsets; every reader of it gets the rebuilt indices."""
    readers = list(received.users)
    received.meta["val"] = _like(received, offsets_value)
    build = _Builder(graph, _last_placeholder(graph), detect_fake_mode([received.meta["val"]]))
    width = geometry["in"][1]
    (dh, dw), kw = geometry["dilation"], geometry["kernel"][1]
    rows, cols = build.window_origins(geometry)
    wide = build.call(aten._to_copy.default, received, dtype=torch.int64)
    kh = build.call(aten.div.Tensor_mode, wide, kw, rounding_mode="floor")
    kc = build.call(aten.sub.Tensor, wide, build.call(aten.mul.Tensor, kh, kw))
    ih = build.call(aten.add.Tensor, rows, build.call(aten.mul.Tensor, kh, dh))
    iw = build.call(aten.add.Tensor, cols, build.call(aten.mul.Tensor, kc, dw))
    indices = build.call(aten.add.Tensor, build.call(aten.mul.Tensor, ih, width), iw)
    for reader in readers:
        reader.replace_input_with(received, indices)


def _like(received, offsets_value):
    """The backward's example value for the offsets: int8, in the placeholder's own fake mode."""
    fake_mode = detect_fake_mode([received.meta["val"]])
    with fake_mode:
        return torch.empty_strided(offsets_value.shape, offsets_value.stride(), dtype=torch.int8,
                                   device=offsets_value.device)


def _last_placeholder(graph) -> torch.fx.Node:
    return [n for n in graph.nodes if n.op == "placeholder"][-1]
