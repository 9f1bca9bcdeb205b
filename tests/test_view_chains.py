"""Seeded random chains of views over cat and pad results, against eager (issue 25, bug 6's class).

A chain starts from cat (two or three pieces) or constant_pad_nd, whose index maps carry masks
and shifted indices, and applies one to four of reshape, flatten, slice (steps, negative
bounds), flip, roll, narrow, select, unfold and transpose. Their composition exercises the index
simplification in ir/symbols.py (FloorDiv, ModularIndexing, combine_digits) on flipped and
shifted indices. Seed 68 failed before FloorDiv/ModularIndexing kept their arguments
non-negative.
"""
import random

import pytest
import torch
import torch.nn.functional as F

from helpers import assert_same

SEEDS = range(40, 80)


def _factor(n: int, rng: random.Random) -> list[int]:
    dims = []
    while n > 1 and len(dims) < 3:
        d = rng.choice([d for d in range(2, n + 1) if n % d == 0])
        dims.append(d)
        n //= d
    dims += [n] if n > 1 else []
    rng.shuffle(dims)
    return dims or [1]


def _random_view(rng: random.Random, t: torch.Tensor):
    """One view op for a tensor shaped like t (a meta tensor); None when the pick does not apply."""
    name = rng.choice(["reshape", "slice", "flip", "roll", "narrow", "select", "unfold", "transpose",
                       "flatten"]) if t.dim() else "reshape"
    dim = rng.randrange(t.dim()) if t.dim() else 0
    n = t.shape[dim] if t.dim() else 1
    if name == "reshape":
        new = _factor(t.numel(), rng)
        return lambda x: x.reshape(new)
    if name == "flatten":
        return lambda x: x.reshape(-1)
    if name == "slice":
        start = rng.randint(-n, n - 1) if n > 1 else 0
        end, step = rng.choice([None, rng.randint(-n, n)]), rng.randint(1, 3)
        return lambda x: x[(slice(None),) * dim + (slice(start, end, step),)]
    if name == "flip":
        dims = sorted(rng.sample(range(t.dim()), rng.randint(1, t.dim())))
        return lambda x: x.flip(dims)
    if name == "roll":
        shift = rng.randint(-3, 3)
        return lambda x: x.roll(shift, dim)
    if name == "narrow":
        if n < 1:
            return None
        start = rng.randrange(n)
        length = rng.randint(1, n - start)
        return lambda x: x.narrow(dim, start, length)
    if name == "select":
        if n < 1 or t.dim() < 2:
            return None
        position = rng.randint(-n, n - 1)
        return lambda x: x.select(dim, position)
    if name == "unfold":
        if n < 1:
            return None
        size, step = rng.randint(1, n), rng.randint(1, 2)
        return lambda x: x.unfold(dim, size, step)
    if t.dim() < 2:  # transpose
        return None
    a, b = rng.sample(range(t.dim()), 2)
    return lambda x: x.transpose(a, b)


def _random_case(seed: int, device: str):
    rng = random.Random(seed)
    rank = rng.randint(1, 3)
    shape = [rng.randint(1, 4) for _ in range(rank)]
    base = rng.choice(["cat", "pad", "cat3"])
    if base.startswith("cat"):
        dim = rng.randrange(rank)
        shapes = []
        for _ in range(2 if base == "cat" else 3):
            piece = list(shape)
            piece[dim] = rng.randint(1, 3)
            shapes.append(piece)
        args = [torch.randn(s, device=device) for s in shapes]

        def start(*xs):
            return torch.cat(xs, dim)
    else:
        pad = [rng.randint(0, 2) for _ in range(2 * rng.randint(1, rank))]
        args = [torch.randn(shape, device=device)]

        def start(x):
            return F.pad(x, pad, value=7.0)
    t = start(*[a.to("meta") for a in args])
    views = []
    for _ in range(rng.randint(1, 4)):
        view = _random_view(rng, t)
        try:
            shaped = view(t) if view is not None else None
        except (RuntimeError, IndexError):
            shaped = None
        if shaped is not None and shaped.numel() > 0:
            views.append(view)
            t = shaped

    def fn(*xs):
        y = start(*xs)
        for view in views:
            y = view(y)
        return y * 1

    return fn, args


@pytest.mark.parametrize("seed", SEEDS)
def test_random_view_chain_over_cat_or_pad(device, seed):
    fn, args = _random_case(seed, device)
    expected = fn(*args)
    torch._dynamo.reset()
    actual = torch.compile(fn, backend="tritonize", fullgraph=True)(*args)
    assert actual.shape == expected.shape
    assert [st for st, n in zip(actual.stride(), actual.shape) if n > 1] == \
        [st for st, n in zip(expected.stride(), expected.shape) if n > 1]
    assert_same(actual, expected)
