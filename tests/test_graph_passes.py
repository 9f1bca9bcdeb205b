"""Passes over Dynamo's graph before AOTAutograd (src/tritonize/graph_passes.py)."""
import re

import pytest
import torch
import torch.nn.functional as F

from helpers import check
from tritonize.graph_passes import contiguous_attention_masks


def captured_graph(fn, *args):
    graphs = []

    def spy(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    torch.compile(fn, backend=spy)(*args)
    (gm,) = graphs
    return gm


def broadcast_mask(device, batch=2, length=16):
    """A padding mask as transformers builds it under torch.compile: stride 0 in the last dim."""
    keep = torch.arange(length, device=device) < length - 3
    return keep[None, None, :, None].expand(batch, 1, length, length)


def attention_with_mask(q, k, v, mask):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def attention_with_positional_mask(q, k, v, mask):
    return F.scaled_dot_product_attention(q, k, v, mask, 0.0, False)


def test_strided_masks_are_copied_contiguous(device):
    q = torch.randn(2, 4, 16, 8, device=device)
    for fn in (attention_with_mask, attention_with_positional_mask):
        gm = captured_graph(fn, q, q, q, broadcast_mask(device))
        assert contiguous_attention_masks(gm) == 1
        nodes = [n for n in gm.graph.nodes if n.op in ("call_function", "call_method")]
        copy = [n for n in nodes if n.target == "contiguous"]
        sdpa = [n for n in nodes if n.target is F.scaled_dot_product_attention]
        assert len(copy) == 1 and copy[0] in sdpa[0].all_input_nodes


def test_contiguous_and_absent_masks_are_left_alone(device):
    q = torch.randn(2, 4, 16, 8, device=device)
    dense = broadcast_mask(device).contiguous()
    assert contiguous_attention_masks(captured_graph(attention_with_mask, q, q, q, dense)) == 0
    assert contiguous_attention_masks(captured_graph(lambda a: F.scaled_dot_product_attention(a, a, a), q)) == 0


@pytest.mark.parametrize("fn", [attention_with_mask, attention_with_positional_mask])
def test_attention_with_a_broadcast_mask_matches_eager(device, fn):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 16, 8, device=device) for _ in range(3))
    report = check(fn, q, k, v, broadcast_mask(device), atol=1e-5, rtol=1e-5)
    assert not report.fallbacks and report.externs


def test_attention_kernels_receive_the_mask_layout_they_were_traced_with(device):
    """A broadcast mask that is a graph input: the pass's `.contiguous()` becomes an aten.clone we
    lower as a view, so the attention extern must realize the mask with a contiguous last dim."""
    q = torch.randn(2, 4, 16, 8, device=device)
    mask = torch.randn(2, 1, 16, 1, device=device).expand(2, 1, 16, 16)  # additive, stride 0 last
    report = check(attention_with_mask, q, q, q, mask, atol=1e-5, rtol=1e-5)
    lines = report.wrapper.splitlines()
    (call,) = [line for line in lines if "aten._scaled_dot_product" in line]
    mask_name = call.split("attn_mask=")[1].split(")")[0] if "attn_mask=" in call else \
        call.split("(")[1].split(",")[3].strip()
    (allocation,) = [line for line in lines if line.strip().startswith(f"{mask_name} = empty_strided")]
    # The CPU trace keeps the mask (2, 1, 16, 16); CUDA's efficient-attention trace expands it over
    # the heads first. Either way the realized mask is dense with a contiguous last dim.
    strides = allocation.split("), (")[1].split(")")[0]
    assert strides.endswith("16, 1") and strides.startswith("256, 256" if device == "cpu" else "1024, 256"), allocation


@pytest.mark.parametrize("dynamic", [False, True])
def test_a_computed_attention_bias_is_stored_in_aligned_rows(device, dynamic):
    """The memory-efficient attention kernel needs every stride of its bias but the last to be a
    multiple of 16 bytes; eager pads rows to 16 elements. A bias we compute (here 11 keys long,
    and symbolic under dynamic=True) is stored with rows padded the same way (lower/fallback.py,
    ALIGNED_BIAS_ARGUMENT). The op has no CPU kernel: there the wrapper's allocation is checked
    and the call is expected to raise; on CUDA the result is compared with eager's."""
    from tritonize.backend import make_backend

    def biased_attention(q, bias):
        return torch.ops.aten._scaled_dot_product_efficient_attention(q, q, q, bias * 2 - 1, False)[0]

    def eager_with_aligned_bias(q, bias):  # eager's op rejects the dense bias: pad its rows
        rows = torch.empty(*bias.shape[:-1], -(-bias.shape[-1] // 16) * 16, device=bias.device)
        aligned = rows[..., :bias.shape[-1]].copy_(bias * 2 - 1)
        return torch.ops.aten._scaled_dot_product_efficient_attention(q, q, q, aligned, False)[0]

    recorder = []
    compiled = torch.compile(biased_attention, backend=make_backend(recorder=recorder), dynamic=dynamic)
    for n in (11, 13) if dynamic else (11,):
        q = torch.randn(2, 3, n, 8, device=device)
        bias = torch.randn(2, 3, n, n, device=device)
        if device == "cpu":
            with pytest.raises(NotImplementedError):
                compiled(q, bias)
        else:
            before = bias.clone()
            torch.testing.assert_close(compiled(q, bias), eager_with_aligned_bias(q, bias), atol=1e-5, rtol=1e-5)
            assert torch.equal(bias, before)
    lines = [r for r in recorder if r != "graph"][-1].wrapper.splitlines()
    (call,) = [line for line in lines if "aten._scaled_dot_product" in line]
    bias_name = call.split("(")[1].split(",")[3].strip()
    (allocation,) = [line for line in lines if line.strip().startswith(f"{bias_name} = empty_strided")]
    if dynamic:  # rows of 16 * ceil(n / 16) elements, n a size symbol
        assert re.search(r"16 \* \(\(\((s\d+) \+ 15\) // 16\)\), 1\)", allocation), allocation
    else:
        assert "(528, 176, 16, 1)" in allocation, allocation


def test_an_attention_bias_already_in_aligned_rows_is_passed_as_it_is(device):
    """A bias input that is a slice of aligned rows (here 32 elements wide, not the 16 we would pad
    to) goes to the memory-efficient attention as it is: no copy (lower/fallback._has_aligned_rows)."""
    from tritonize.backend import make_backend

    def attention(q, bias):
        return torch.ops.aten._scaled_dot_product_efficient_attention(q, q, q, bias, False)[0]

    recorder = []
    compiled = torch.compile(attention, backend=make_backend(recorder=recorder))
    q = torch.randn(2, 3, 11, 8, device=device)
    bias = torch.randn(2, 3, 11, 32, device=device)[..., :11]  # aligned rows, wider than ours
    if device == "cpu":
        with pytest.raises(NotImplementedError):
            compiled(q, bias)
    else:
        torch.testing.assert_close(compiled(q, bias), attention(q, bias), atol=1e-5, rtol=1e-5)
    wrapper = [r for r in recorder if r != "graph"][-1].wrapper
    (call,) = [line for line in wrapper.splitlines() if "aten._scaled_dot_product" in line]
    assert call.split("(", 1)[1].split(",")[3].strip() == "arg1_1", wrapper
