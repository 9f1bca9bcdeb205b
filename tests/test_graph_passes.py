"""Passes over Dynamo's graph before AOTAutograd (src/tritonize/graph_passes.py)."""
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
        copy, sdpa = [n for n in nodes if n.target == "contiguous"], [n for n in nodes if n.target is F.scaled_dot_product_attention]
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
