"""Our decomposition table: torch._decomp's core set, minus the ops we lower (or call) ourselves.

AOTAutograd applies it while tracing, so composite ops (silu, hardswish, addcmul, softplus...)
arrive as the primitive elementwise ops our lowerings fuse. lower/own_decompositions.py adds ours
for ops torch has none for (adaptive pooling with uneven windows, searchsorted).
"""
from __future__ import annotations

import functools

import torch
from torch._decomp import core_aten_decompositions, get_decompositions

from . import own_decompositions

aten = torch.ops.aten

# Ops we lower directly (one expression is better than the decomposition's several).
KEEP = [aten.clamp_min, aten.clamp_max, aten.floor_divide, aten.frac, aten.zeros, aten.ones,
        aten.zeros_like, aten.ones_like, aten.empty_like, aten.new_zeros, aten.new_ones,
        aten.new_empty, aten.arange, aten.isfinite, aten.fill, aten.t, aten.transpose,
        aten.squeeze, aten.clip,
        # var_mean's mean comes from its variance's passes (lower/reductions.py), not sum / n;
        # its default and dim overloads are composite and arrive as var_mean.correction
        aten.var_mean,
        # torch's select_scatter decomposition is a where() that promotes (int64 x, fp32 src gives
        # fp32); eager casts src to x's dtype, as lower/movement.py does
        aten.select_scatter,
        # attention stays one library call (an extern), not a decomposed softmax(QK^T)V
        aten._scaled_dot_product_flash_attention_for_cpu,
        # lower/scatter.py lowers these with eager's index rules: torch decomposes index_add and
        # index_copy into index_put, whose indices wrap like Python's, where eager rejects a
        # negative index; and index_fill (which accepts one) into index_copy (which does not)
        aten.index_add, aten.index_add_, aten.index_copy, aten.index_copy_, aten.index_fill,
        aten.index_fill_]

EXTRA = [aten.hardsigmoid, aten.hardswish, aten.silu, aten.mish, aten.softplus, aten.logit,
         aten.lerp, aten.addcmul, aten.addcdiv, aten.log_sigmoid_forward, aten.logaddexp,
         aten.logaddexp2, aten.xlogy, aten.sgn, aten.nan_to_num, aten.deg2rad, aten.rad2deg,
         aten.threshold, aten.hardshrink, aten.softshrink, aten.celu, aten.selu, aten.relu6,
         aten.heaviside, aten.sinc, aten.square, aten.masked_fill, aten.where, aten.expand_copy,
         aten.rsub, aten.special_xlog1py, aten.special_entr, aten.isposinf, aten.isneginf,
         # normalizations and composite reductions become the reductions lower/reductions.py fuses
         aten._softmax, aten._log_softmax, aten.native_layer_norm, aten.native_group_norm,
         aten.native_batch_norm, aten._native_batch_norm_legit, aten._native_batch_norm_legit_functional,
         aten._native_batch_norm_legit_no_training, aten.linalg_vector_norm,
         aten.std_mean, aten.std, aten._softmax_backward_data, aten._log_softmax_backward_data,
         aten.native_layer_norm_backward, aten.native_batch_norm_backward, aten.logsumexp,
         # index arithmetic over gathers, lowered to pointwise kernels: adaptive average pooling,
         # bucketize (an unrolled binary search)
         aten._adaptive_avg_pool2d, aten.bucketize,
         # compositions of ops we lower: a matrix-vector product plus a vector, a norm of a
         # difference, batch norm with its running statistics
         aten.addmv, aten.dist, aten._batch_norm_with_update_functional]


@functools.lru_cache(None)
def decomposition_table(fallback_random: bool = False) -> dict:
    """`fallback_random`: keep random ops whole (bernoulli(x) decomposes to rand_like(x) < x,
    which draws other numbers than eager's bernoulli), so that aten runs them as eager does."""
    table = dict(core_aten_decompositions())
    table.update(get_decompositions(EXTRA))
    for packet in KEEP:
        for overload in packet.overloads():
            table.pop(getattr(packet, overload), None)
    table.update(own_decompositions.TABLE)  # (some handle a case of a KEEP op, else NotImplemented)
    if fallback_random:  # composite ops (lstm, sdpa...) decompose under autograd anyway, as in eager
        implicit = torch._C.DispatchKey.CompositeImplicitAutograd
        table = {op: fn for op, fn in table.items()
                 if not is_random_op(op) or op.has_kernel_for_dispatch_key(implicit)}
    return table


def is_random_op(target) -> bool:
    """An op that draws from torch's generator (rand, bernoulli, native_dropout, randperm...)."""
    return torch.Tag.nondeterministic_seeded in getattr(target, "tags", ())
