import triton
import triton.language as tl
from triton.language.extra import libdevice
from tritonize.runtime import triton_helpers as helpers
from tritonize.runtime import index_checks as checks


@triton.jit
def triton_red_fused_mean_embedding__to_copy_pow_1(in_ptr0, in_ptr1, in_ptr2, in_scalar0, out_ptr0, ks0, ks1, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr, PDL: tl.constexpr):
    helpers.wait_for_previous_grid(PDL)
    # aten nodes: mean, embedding, _to_copy_4, pow_1, convert_element_type_default_3, convert_element_type_default_4, add_tensor, rsqrt, mul_131, _to_copy_5, mul_138
    xnumel = ks0 * ks1
    rnumel = 1024
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    x0 = xindex
    acc4_0 = tl.full([XBLOCK, RBLOCK], 0.0, tl.float32)
    for roffset in range(0, rnumel, RBLOCK):
        rindex = roffset + tl.arange(0, RBLOCK)[None, :]
        rmask = rindex < rnumel
        r0 = rindex
        tmp0 = tl.load(in_ptr0 + x0, xmask, other=0)
        checks.check_index_masked(tmp0, 32000, xmask, 'index out of bounds in aten.embedding.default (node embedding)')
        tmp1 = tl.load(in_ptr1 + tl.where(xmask, (r0 + 1024 * tmp0), 0), xmask, other=0, eviction_policy='evict_last')
        tmp2 = tmp1.to(tl.float32)
        tmp3 = (tmp2 * tmp2)
        acc4_0 = acc4_0 + tmp3
    tmp5 = helpers.sum2(acc4_0, 1)
    for roffset in range(0, rnumel, RBLOCK):
        rindex = roffset + tl.arange(0, RBLOCK)[None, :]
        rmask = rindex < rnumel
        r0 = rindex
        tmp6 = tl.load(in_ptr2 + r0, eviction_policy='evict_last')
        tmp7 = tmp6.to(tl.float32)
        tmp8 = tl.load(in_ptr0 + x0, xmask, other=0)
        checks.check_index_masked(tmp8, 32000, xmask, 'index out of bounds in aten.embedding.default (node embedding)')
        tmp9 = tl.load(in_ptr1 + tl.where(xmask, (r0 + 1024 * tmp8), 0), xmask, other=0, eviction_policy='evict_last')
        tmp10 = tmp9.to(tl.float32)
        tmp11 = tl.div_rn(tmp5, 1024.0)
        tmp12 = tl.full([], in_scalar0, tl.float64)
        tmp13 = tmp12.to(tl.float32)
        tmp14 = (tmp11 + tmp13)
        tmp15 = tl.rsqrt(tmp14)
        tmp16 = (tmp10 * tmp15)
        tmp17 = (tmp7 * tmp16)
        tmp18 = tmp17.to(tl.bfloat16)
        tl.store(out_ptr0 + (r0 + 1024 * x0), tmp18, xmask)
