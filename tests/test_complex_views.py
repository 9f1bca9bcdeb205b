"""Conjugate and negative views: torch keeps conj() and _neg_view() as flags on a tensor, not in
its memory. Complex ops run through aten (which honours the flags), but a real tensor carrying the
negation flag (z.conj().imag, view_as_real of a negated complex tensor, a caller's _neg_view) is
read by our kernels from memory: the flag must be applied first. Compared with eager."""
from __future__ import annotations

import pytest
import torch

from conftest import DEVICE
from helpers import assert_same


def compiled_matches_eager(fn, *args):
    torch._dynamo.reset()
    expected = fn(*args)
    actual = torch.compile(fn, backend="tritonize")(*args)
    assert_same(actual, expected)
    assert actual.dtype == expected.dtype and actual.is_conj() == expected.is_conj()
    return actual


def complex_input(*shape):
    return torch.randn(*shape, dtype=torch.complex64, device=DEVICE)


CONJ_CASES = {
    "real_plus_imag": lambda z: z.conj().real + z.conj().imag,  # issue 25 bug 3
    "imag_sum": lambda z: z.conj().imag.sum(),
    "imag_times_two": lambda z: z.conj().imag * 2,
    "abs": lambda z: z.conj().abs() + 1,
    "conj_physical": lambda z: torch.view_as_real(z.conj_physical()) * 2,
    "resolve_conj": lambda z: torch.view_as_real(z.conj().resolve_conj()) + 1,
    "conj_times_other": lambda z: torch.view_as_real(z.conj() * (z + 1)) + 0,
    "returned_conj": lambda z: (z * 2).conj(),
    "view_as_real_of_neg": lambda z: torch.view_as_real(torch._neg_view(z)) * 2,
}


@pytest.mark.parametrize("case", sorted(CONJ_CASES))
def test_conjugate_view(case):
    z = complex_input(4, 3)
    compiled_matches_eager(CONJ_CASES[case], z)
    assert torch.equal(z, z.clone())  # the input is left as it was (no NaN games: plain values)


def test_input_already_conjugated():
    z = complex_input(5)
    compiled_matches_eager(lambda z: z.real + z.imag, z.conj())
    compiled_matches_eager(lambda z: z.conj().imag * 2, z.conj())


NEG_CASES = {
    "neg_view_times_two": lambda x: torch._neg_view(x) * 2,
    "resolve_neg": lambda x: torch._neg_view(x).resolve_neg() + 1,
    "neg_view_returned": lambda x: torch._neg_view(x * 2),
    "neg_view_sum": lambda x: torch._neg_view(x).sum(0),
}


@pytest.mark.parametrize("case", sorted(NEG_CASES))
def test_negative_view(case):
    compiled_matches_eager(NEG_CASES[case], torch.randn(4, 3, device=DEVICE))


@pytest.mark.parametrize("fn", [lambda x: x * 2, lambda x: x + 0, lambda x: x.t().sum(1)],
                         ids=["mul", "add_zero", "sum"])
def test_input_with_negation_flag(fn):
    """A caller's tensor that carries the negation flag: its memory holds -x."""
    x = torch._neg_view(torch.randn(4, 3, device=DEVICE))
    before = x.clone()
    compiled_matches_eager(fn, x)
    assert x.is_neg() and torch.equal(x, before)
