"""A corpus of user Triton kernels with the exact arguments each one writes and reads.

Each case gives the kernel, a function that builds launch arguments for a device, and the
expected result of `tritonize.analyze_kernel`. `gpu_only` marks kernels that cannot run in
Triton's interpreter (inline PTX, host TMA descriptors); their analysis still runs anywhere.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import torch
import triton
import triton.language as tl


# --- plain, in place, atomics -------------------------------------------------------------------
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.jit
def add_one_inplace_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1, mask=mask)


@triton.jit
def atomic_sum_kernel(x_ptr, sum_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.atomic_add(sum_ptr, tl.sum(x, axis=0))


@triton.jit
def atomic_max_kernel(x_ptr, max_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=float("-inf"))
    tl.atomic_max(max_ptr, tl.max(x, axis=0))


@triton.jit
def spin_lock_kernel(lock_ptr, counter_ptr):
    while tl.atomic_cas(lock_ptr, 0, 1) == 1:
        pass
    tl.store(counter_ptr, tl.load(counter_ptr) + 1)
    tl.atomic_xchg(lock_ptr, 0)


# --- loops and branches ----------------------------------------------------------------------
@triton.jit
def pointer_loop_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * n_cols
    out_row = out_ptr + row * n_cols
    for start in range(0, n_cols, BLOCK):
        cols = tl.arange(0, BLOCK)
        mask = start + cols < n_cols
        tl.store(out_row + cols, tl.load(x_row + cols, mask=mask) * 2, mask=mask)
        x_row += BLOCK
        out_row += BLOCK


@triton.jit
def while_pointer_kernel(x_ptr, count_ptr, out_ptr):
    count = tl.load(count_ptr)
    i = 0
    dst = out_ptr
    while i < count:
        tl.store(dst, tl.load(x_ptr + i) * 3)
        dst += 1
        i += 1


@triton.jit
def branch_kernel(flag_ptr, a_ptr, b_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if tl.load(flag_ptr) > 0:
        tl.store(a_ptr + offs, tl.full([BLOCK], 1.0, tl.float32), mask=mask)
    else:
        tl.store(b_ptr + offs, tl.full([BLOCK], 2.0, tl.float32), mask=mask)


@triton.jit
def select_pointer_kernel(src_ptr, pos_ptr, neg_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(src_ptr + offs, mask=mask)
    tl.store(tl.where(v > 0, pos_ptr + offs, neg_ptr + offs), v, mask=mask)


@triton.jit
def early_return_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if pid * BLOCK >= n:
        return
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) - 1, mask=mask)


# --- helpers through tt.call -----------------------------------------------------------------
@triton.jit
def store_helper(ptr, value, mask):
    tl.store(ptr, value, mask=mask)


@triton.jit
def twice_store_helper(ptr, value, mask):
    store_helper(ptr, value * 2, mask)


@triton.jit
def load_helper(ptr, mask):
    return tl.load(ptr, mask=mask)


@triton.jit
def offset_helper(ptr, offset):
    return ptr + offset


@triton.jit
def helper_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    store_helper(out_ptr + offs, load_helper(x_ptr + offs, mask), mask)


@triton.jit
def nested_helper_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    twice_store_helper(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask)


@triton.jit
def pointer_helper_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(offset_helper(out_ptr, offs), tl.load(offset_helper(x_ptr, offs), mask=mask) + 5, mask=mask)


@triton.jit
def helper_twice_kernel(x_ptr, out1_ptr, out2_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    store_helper(out1_ptr + offs, x + 1, mask)
    store_helper(out2_ptr + offs, x + 2, mask)


# --- reductions and scans ----------------------------------------------------------------------
@triton.jit
def row_sum_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(x, axis=0))


@triton.jit
def maximum_combine(a, b):
    return tl.maximum(a, b)


@triton.jit
def custom_reduce_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + cols, mask=cols < n, other=float("-inf"))
    tl.store(out_ptr, tl.reduce(x, 0, maximum_combine))


@triton.jit
def cumsum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    tl.store(out_ptr + cols, tl.cumsum(tl.load(x_ptr + cols, mask=mask, other=0.0), 0), mask=mask)


@triton.jit
def add_combine(a, b):
    return a + b


@triton.jit
def custom_scan_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + cols, mask=mask, other=0.0)
    tl.store(out_ptr + cols, tl.associative_scan(x, 0, add_combine), mask=mask)


# --- stores guarded by constants ---------------------------------------------------------------
@triton.jit
def constexpr_guarded_kernel(x_ptr, out_ptr, aux_ptr, n, WRITE_AUX: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * 2, mask=mask)
    if WRITE_AUX:
        tl.store(aux_ptr + offs, x, mask=mask)


@triton.jit
def scalar_flag_kernel(x_ptr, out_ptr, aux_ptr, n, write_aux, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * 2, mask=mask)
    if write_aux:
        tl.store(aux_ptr + offs, x, mask=mask)


# --- scatter and gather through loaded indices -------------------------------------------------
@triton.jit
def scatter_kernel(src_ptr, idx_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    idx = tl.load(idx_ptr + offs, mask=mask, other=0)
    tl.store(out_ptr + idx, tl.load(src_ptr + offs, mask=mask), mask=mask)


@triton.jit
def scatter_add_kernel(src_ptr, idx_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    idx = tl.load(idx_ptr + offs, mask=mask, other=0)
    tl.atomic_add(out_ptr + idx, tl.load(src_ptr + offs, mask=mask), mask=mask)


@triton.jit
def gather_kernel(src_ptr, idx_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    idx = tl.load(idx_ptr + offs, mask=mask, other=0)
    tl.store(out_ptr + offs, tl.load(src_ptr + idx, mask=mask), mask=mask)


# --- autotune and heuristics -------------------------------------------------------------------
@triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 64}, num_warps=2)], key=["n"])
@triton.jit
def autotuned_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.autotune(configs=[triton.Config({"BLOCK": 16, "EXTRA": False}), triton.Config({"BLOCK": 32, "EXTRA": True})],
                 key=["n"])
@triton.jit
def config_guarded_kernel(x_ptr, out_ptr, aux_ptr, n, BLOCK: tl.constexpr, EXTRA: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + 1, mask=mask)
    if EXTRA:
        tl.store(aux_ptr + offs, x, mask=mask)


@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def heuristic_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(out_ptr + offs, tl.load(x_ptr + offs) * 4)
    else:
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 4, mask=mask)


@triton.autotune(configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 128})], key=["n"])
@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def autotuned_heuristic_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(out_ptr + offs, tl.load(x_ptr + offs) - 3)
    else:
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) - 3, mask=mask)


# --- 2-D, dot, descriptors, barriers -------------------------------------------------------
@triton.jit
def transpose_kernel(x_ptr, out_ptr, rows, cols, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)[:, None]
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)[None, :]
    mask = (r < rows) & (c < cols)
    tl.store(out_ptr + c * rows + r, tl.load(x_ptr + r * cols + c, mask=mask), mask=mask)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    m = tl.arange(0, M)[:, None]
    n = tl.arange(0, N)[None, :]
    k = tl.arange(0, K)
    a = tl.load(a_ptr + m * K + k[None, :])
    b = tl.load(b_ptr + k[:, None] * N + n)
    tl.store(c_ptr + m * N + n, tl.dot(a, b))


@triton.jit
def device_descriptor_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    desc = tl.make_tensor_descriptor(out_ptr, shape=[n], strides=[1], block_shape=[BLOCK])
    desc.store([0], tl.load(x_ptr + tl.arange(0, BLOCK)))


@triton.jit
def barrier_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.debug_barrier()
    tl.store(out_ptr + offs, x, mask=mask)


# --- GPU only: inline asm and host TMA descriptors; and pointer chasing ----------------------
@triton.jit
def inline_asm_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, PURE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=PURE, pack=1)
    tl.store(out_ptr + offs, y, mask=mask)


@triton.jit
def tma_copy_kernel(in_desc, out_desc, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    r = tl.program_id(0) * BLOCK_R
    c = tl.program_id(1) * BLOCK_C
    out_desc.store([r, c], in_desc.load([r, c]) * 2)


@triton.jit
def pointer_chase_kernel(table_ptr, a_ptr, b_ptr):
    address = tl.load(table_ptr)
    tl.store(address.to(tl.pointer_type(tl.float32)), 1.0)


# --- the cases -------------------------------------------------------------------------------
@dataclasses.dataclass
class Case:
    name: str
    kernel: object
    make_args: Callable[[str], tuple[tuple, dict]]
    mutated: tuple[str, ...]
    read: tuple[str, ...]
    exact: bool = True
    gpu_only: bool = False

    def __repr__(self) -> str:
        return self.name


def _f(*shape, device="cpu"):
    return torch.randn(*shape, device=device)


def _idx(n, device):
    return torch.randperm(n, device=device)


def _descriptors(device):
    from triton.tools.tensor_descriptor import TensorDescriptor

    return (TensorDescriptor.from_tensor(_f(64, 64, device=device), [32, 32]),
            TensorDescriptor.from_tensor(_f(64, 64, device=device), [32, 32])), {"BLOCK_R": 32, "BLOCK_C": 32}


CASES = [
    Case("add", add_kernel, lambda d: ((_f(100, device=d), _f(100, device=d), _f(100, device=d), 100), {"BLOCK": 32}),
         ("out_ptr",), ("x_ptr", "y_ptr")),
    Case("add_one_inplace", add_one_inplace_kernel, lambda d: ((_f(100, device=d), 100), {"BLOCK": 32}),
         ("x_ptr",), ("x_ptr",)),
    Case("atomic_sum", atomic_sum_kernel, lambda d: ((_f(100, device=d), torch.zeros(1, device=d), 100), {"BLOCK": 32}),
         ("sum_ptr",), ("x_ptr", "sum_ptr")),
    Case("atomic_max", atomic_max_kernel, lambda d: ((_f(100, device=d), torch.zeros(1, device=d), 100), {"BLOCK": 32}),
         ("max_ptr",), ("x_ptr", "max_ptr")),
    Case("spin_lock_cas", spin_lock_kernel,
         lambda d: ((torch.zeros(1, dtype=torch.int32, device=d), torch.zeros(1, device=d)), {}),
         ("lock_ptr", "counter_ptr"), ("lock_ptr", "counter_ptr")),
    Case("pointer_loop", pointer_loop_kernel, lambda d: ((_f(4, 40, device=d), _f(4, 40, device=d), 40), {"BLOCK": 16}),
         ("out_ptr",), ("x_ptr",)),
    Case("while_pointer", while_pointer_kernel,
         lambda d: ((_f(10, device=d), torch.tensor([7], dtype=torch.int32, device=d), _f(10, device=d)), {}),
         ("out_ptr",), ("x_ptr", "count_ptr")),
    Case("branch", branch_kernel,
         lambda d: ((torch.ones(1, device=d), _f(50, device=d), _f(50, device=d), 50), {"BLOCK": 64}),
         ("a_ptr", "b_ptr"), ("flag_ptr",)),
    Case("select_pointer", select_pointer_kernel,
         lambda d: ((_f(50, device=d), _f(50, device=d), _f(50, device=d), 50), {"BLOCK": 64}),
         ("pos_ptr", "neg_ptr"), ("src_ptr",)),
    Case("early_return", early_return_kernel, lambda d: ((_f(100, device=d), _f(100, device=d), 100), {"BLOCK": 32}),
         ("out_ptr",), ("x_ptr",)),
    Case("helper_call", helper_kernel, lambda d: ((_f(100, device=d), _f(100, device=d), 100), {"BLOCK": 32}),
         ("out_ptr",), ("x_ptr",)),
    Case("nested_helper_call", nested_helper_kernel, lambda d: ((_f(100, device=d), _f(100, device=d), 100), {"BLOCK": 32}),
         ("out_ptr",), ("x_ptr",)),
    Case("helper_returns_pointer", pointer_helper_kernel,
         lambda d: ((_f(100, device=d), _f(100, device=d), 100), {"BLOCK": 32}), ("out_ptr",), ("x_ptr",)),
    Case("helper_called_twice", helper_twice_kernel,
         lambda d: ((_f(100, device=d), _f(100, device=d), _f(100, device=d), 100), {"BLOCK": 32}),
         ("out1_ptr", "out2_ptr"), ("x_ptr",)),
    Case("row_sum_reduction", row_sum_kernel, lambda d: ((_f(8, 30, device=d), _f(8, device=d), 30), {"BLOCK": 32}),
         ("out_ptr",), ("x_ptr",)),
    Case("custom_reduce", custom_reduce_kernel, lambda d: ((_f(30, device=d), _f(1, device=d), 30), {"BLOCK": 32}),
         ("out_ptr",), ("x_ptr",)),
    Case("cumsum_scan", cumsum_kernel, lambda d: ((_f(30, device=d), _f(30, device=d), 30), {"BLOCK": 32}),
         ("out_ptr",), ("x_ptr",)),
    Case("custom_scan", custom_scan_kernel, lambda d: ((_f(30, device=d), _f(30, device=d), 30), {"BLOCK": 32}),
         ("out_ptr",), ("x_ptr",)),
    Case("constexpr_guard_off", constexpr_guarded_kernel,
         lambda d: ((_f(40, device=d), _f(40, device=d), _f(40, device=d), 40), {"WRITE_AUX": False, "BLOCK": 64}),
         ("out_ptr",), ("x_ptr",)),
    Case("constexpr_guard_on", constexpr_guarded_kernel,
         lambda d: ((_f(40, device=d), _f(40, device=d), _f(40, device=d), 40), {"WRITE_AUX": True, "BLOCK": 64}),
         ("out_ptr", "aux_ptr"), ("x_ptr",)),
    Case("scalar_flag_folded_off", scalar_flag_kernel,
         lambda d: ((_f(40, device=d), _f(40, device=d), _f(40, device=d), 40, False), {"BLOCK": 64}),
         ("out_ptr",), ("x_ptr",)),
    Case("scalar_flag_folded_on", scalar_flag_kernel,
         lambda d: ((_f(40, device=d), _f(40, device=d), _f(40, device=d), 40, True), {"BLOCK": 64}),
         ("out_ptr", "aux_ptr"), ("x_ptr",)),
    Case("scatter_loaded_indices", scatter_kernel,
         lambda d: ((_f(64, device=d), _idx(64, d), _f(64, device=d), 64), {"BLOCK": 32}),
         ("out_ptr",), ("src_ptr", "idx_ptr")),
    Case("scatter_add_atomic", scatter_add_kernel,
         lambda d: ((_f(64, device=d), _idx(64, d), torch.zeros(64, device=d), 64), {"BLOCK": 32}),
         ("out_ptr",), ("src_ptr", "idx_ptr", "out_ptr")),
    Case("gather_loaded_indices", gather_kernel,
         lambda d: ((_f(64, device=d), _idx(64, d), _f(64, device=d), 64), {"BLOCK": 32}),
         ("out_ptr",), ("src_ptr", "idx_ptr")),
    Case("autotuned", autotuned_add_kernel,
         lambda d: ((_f(100, device=d), _f(100, device=d), _f(100, device=d), 100), {}), ("out_ptr",), ("x_ptr", "y_ptr")),
    Case("autotuned_config_guard", config_guarded_kernel,
         lambda d: ((_f(100, device=d), _f(100, device=d), _f(100, device=d), 100), {}),
         ("out_ptr", "aux_ptr"), ("x_ptr",)),
    Case("heuristics", heuristic_kernel, lambda d: ((_f(100, device=d), _f(100, device=d), 100), {"BLOCK": 32}),
         ("out_ptr",), ("x_ptr",)),
    Case("autotuned_heuristics", autotuned_heuristic_kernel,
         lambda d: ((_f(128, device=d), _f(128, device=d), 128), {}), ("out_ptr",), ("x_ptr",)),
    Case("transpose_2d", transpose_kernel,
         lambda d: ((_f(20, 30, device=d), _f(30, 20, device=d), 20, 30), {"BLOCK_R": 16, "BLOCK_C": 16}),
         ("out_ptr",), ("x_ptr",)),
    Case("matmul_dot", matmul_kernel,
         lambda d: ((_f(16, 16, device=d), _f(16, 16, device=d), _f(16, 16, device=d)), {"M": 16, "N": 16, "K": 16}),
         ("c_ptr",), ("a_ptr", "b_ptr")),
    Case("device_descriptor", device_descriptor_kernel,
         lambda d: ((_f(32, device=d), _f(32, device=d), 32), {"BLOCK": 32}), ("out_ptr",), ("x_ptr",), gpu_only=True),
    Case("debug_barrier", barrier_kernel, lambda d: ((_f(100, device=d), _f(100, device=d), 100), {"BLOCK": 32}),
         ("out_ptr",), ("x_ptr",)),
    Case("inline_asm_pure", inline_asm_kernel,
         lambda d: ((_f(100, device=d), _f(100, device=d), 100), {"BLOCK": 32, "PURE": True}),
         ("out_ptr",), ("x_ptr",), gpu_only=True),
    Case("inline_asm_impure", inline_asm_kernel,
         lambda d: ((_f(100, device=d), _f(100, device=d), 100), {"BLOCK": 32, "PURE": False}),
         ("x_ptr", "out_ptr"), ("x_ptr", "out_ptr"), exact=False, gpu_only=True),
    Case("host_tma_descriptors", tma_copy_kernel, _descriptors, ("out_desc",), ("in_desc",), gpu_only=True),
    Case("pointer_chasing", pointer_chase_kernel,
         lambda d: ((torch.zeros(1, dtype=torch.int64, device=d), _f(4, device=d), _f(4, device=d)), {}),
         ("table_ptr", "a_ptr", "b_ptr"), ("table_ptr", "a_ptr", "b_ptr"), exact=False, gpu_only=True),
]
