"""Reductions of symbolic sizes launched with EVEN (codegen/reduction_kernel.py,
heuristics.even_source): a launch whose sizes fill every tile drops the masks of the symbolic
bounds, as a static kernel of those sizes has none; other sizes keep them. Values and strides
equal eager's at sizes of both kinds, and both kinds are launched."""
from __future__ import annotations

import pytest
import torch
from helpers import assert_same

import tritonize
from tritonize.runtime import launcher
from tritonize.runtime.heuristics import LaunchConfig, even_source

from conftest import DEVICE


def _config(**blocks):
    return LaunchConfig(grid=(1,), blocks=blocks, num_warps=4)


def test_the_condition_covers_the_symbolic_numels_only():
    symbolic = {"xnumel": "ks0", "ynumel": "1", "rnumel": "ks1"}
    assert even_source(_config(XBLOCK=64, RBLOCK=128, PERSISTENT=1), symbolic) == "(ks0) % 64 == 0 and (ks1) == 128"
    assert even_source(_config(XBLOCK=64, RBLOCK=128, PERSISTENT=0), symbolic, split=32) == \
        "(ks0) % 64 == 0 and (ks1) % 4096 == 0"
    assert even_source(_config(XBLOCK=8, RBLOCK=256), {"xnumel": "ks0*ks1", "rnumel": "4096"}) == "(ks0*ks1) % 8 == 0"
    assert even_source(_config(XBLOCK=8, RBLOCK=256, PERSISTENT=0), {"xnumel": "96", "rnumel": "ks0"}) == \
        "(ks0) % 256 == 0"
    split = {"xnumel": "32 * ks0", "rnumel": "((ks1 + 31) // 32)", "even_when": "((ks1 - 32 * ((ks1 // 32)))) == 0"}
    assert even_source(_config(XBLOCK=64, RBLOCK=64, PERSISTENT=0), split) == \
        "(32 * ks0) % 64 == 0 and (((ks1 + 31) // 32)) % 64 == 0 and ((ks1 - 32 * ((ks1 // 32)))) == 0"


def _kernel_sources(fn, example, dynamic):
    recorder = []
    torch.compile(fn, backend=tritonize.make_backend(recorder=recorder), dynamic=dynamic)(example)
    return [k.source for art in recorder if art != "graph" for k in art.kernels]


def test_a_split_reductions_last_chunk_bound_takes_even_with_its_condition():
    """Few long rows are split into chunks at lowering (lower/reductions.py); with symbolic rows
    the last chunk's bound r < rows - split * chunk holds for every r when the split divides the
    rows: the bound is or-ed with EVEN and that divisibility joins the launch's condition."""
    recorder = []
    torch.compile(lambda x: x.sum(-1), backend=tritonize.make_backend(recorder=recorder), dynamic=True)(
        torch.randn(2, 16384, device=DEVICE))
    (art,) = [r for r in recorder if r != "graph"]
    partial = art.kernels[0].source
    assert ") | EVEN" in partial.split("tmp0 = ")[1].splitlines()[0], partial
    assert "even_when': '((ks1 - 16 * ((ks1 // 16)))) == 0'" in art.wrapper or \
        "even_when': '((ks0 - 16 * ((ks0 // 16)))) == 0'" in art.wrapper, art.wrapper


def test_only_the_symbolic_bounds_masks_take_even_and_static_kernels_are_unchanged():
    (dynamic,) = _kernel_sources(lambda x: x.sum(0), torch.randn(4096, 96, device=DEVICE), True)
    assert "EVEN: tl.constexpr" in dynamic
    assert "xmask = (xindex < xnumel) | EVEN" in dynamic and "rmask = (rindex < rend) | EVEN" in dynamic
    assert "rmask = (rindex < rnumel) | EVEN" in dynamic  # the persistent body's
    (static,) = _kernel_sources(lambda x: x.sum(0), torch.randn(4096, 96, device=DEVICE), False)
    assert "EVEN" not in static


PROGRAMS = {
    "sum_first": lambda x: x.sum(0),  # outer: split into row chunks at large sizes
    "sum_last": lambda x: x.sum(-1),
    "softmax": lambda x: torch.softmax(x, -1),
    "var_mean": lambda x: torch.var_mean(x, dim=-1),
    "amax_first": lambda x: x.amax(0),
    "layer_norm": lambda x: torch.nn.functional.layer_norm(x, x.shape[-1:]),
}
SHAPES = [(4096, 128), (4096, 96), (64, 64), (1000, 37), (2048, 256), (4100, 130)]
# few long rows: split into chunks at lowering (16 of the first call's 16384, 32 of its rows)
SPLIT_PROGRAMS = {
    "split_sum_last": (lambda x: x.sum(-1), [(2, 16384), (2, 16390), (3, 32768), (2, 20000)]),
    "split_amax_last": (lambda x: x.amax(-1), [(2, 16384), (2, 16390), (1, 32768)]),
    "split_sum_first": (lambda x: x.sum(0), [(16384, 8), (16390, 8), (32768, 16), (20000, 3)]),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS) + sorted(SPLIT_PROGRAMS))
def test_sizes_that_fill_the_tiles_and_sizes_that_do_not(name, monkeypatch):
    launched = []
    even_for = launcher.GeneratedKernel.even_for

    def recording(self, config, args):
        even = even_for(self, config, args)
        launched.append((self.kind, "even_when" in (self.numel_exprs or {}), even))
        return even

    monkeypatch.setattr(launcher.GeneratedKernel, "even_for", recording)
    fn, shapes = SPLIT_PROGRAMS[name] if name in SPLIT_PROGRAMS else (PROGRAMS[name], SHAPES)
    compiled = torch.compile(fn, backend="tritonize", dynamic=True)
    for shape in shapes:
        x = torch.randn(shape, device=DEVICE)
        actual, expected = compiled(x.clone()), fn(x)
        assert_same(actual, expected, atol=1e-4, rtol=1e-4)
    launched = [entry for entry in launched if entry[2] is not None]
    assert {True, False} <= {even for _, _, even in launched}, launched
    if name in SPLIT_PROGRAMS:  # the chunks' kernel itself, both ways
        assert {True, False} <= {even for _, chunked, even in launched if chunked}, launched
