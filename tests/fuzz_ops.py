"""The statements the fuzzer draws from (tests/fuzz_programs.py): each takes the Builder, appends one
statement and returns None, or returns False when nothing in the pool fits it.

Every op keeps values finite (log and sqrt of |x| + 1, exp of clamped values) and deterministic in
eager: index_put without accumulate and scatter get indices that never repeat where they write,
while index_put(accumulate=True), scatter_add, scatter_reduce (amax, amin, mean) and index_select get
repeated indices on purpose.
"""
from __future__ import annotations

UNARY = ["{x}.sin()", "{x}.cos()", "torch.tanh({x})", "{x}.sigmoid()", "F.gelu({x})", "{x}.relu()",
         "({x}.abs() + 1).sqrt()", "({x}.abs() + 1).log()", "{x} * 0.5 + 1.25", "-{x}",
         "torch.exp({x}.clamp(-3, 3))", "F.silu({x})", "{x}.square()", "{x}.abs()"]
BINARY = ["{a} + {b}", "{a} - {b}", "{a} * {b}", "{a} / ({b}.abs() + 1)", "torch.maximum({a}, {b})",
          "torch.minimum({a}, {b})", "{a} * 0.25 + {b}"]


def _pair(b, kind="f"):
    """Two variables of `kind` that broadcast, and their broadcast shape."""
    from fuzz_programs import broadcast

    a = b.pick(kind)
    if a is None:
        return None
    partners = [v for v in b.vars.values() if v.kind == kind and broadcast(a.shape, v.shape) is not None]
    other = b.rng.choice(partners)
    return a, other, broadcast(a.shape, other.shape)


def _dim(b, var):
    return b.rng.randrange(len(var.shape)) if var.shape else None


# --- pointwise -----------------------------------------------------------------------------------
def unary(b):
    x = b.pick()
    b.emit(b.rng.choice(UNARY).format(x=x.name), [x], x.shape)


def binary(b):
    a, other, shape = _pair(b)
    b.emit(b.rng.choice(BINARY).format(a=a.name, b=other.name), [a, other], shape)


def scalar_chain(b):
    x = b.pick()
    b.emit(f"({x.name} + {b.rng.choice([1, -2, 0.5])}) * {b.rng.choice([3, 0.125, -1.5])}", [x], x.shape)


def compare_where(b):
    """A mask from exact values (same bits in every precision), used by where or masked_fill."""
    from fuzz_programs import broadcast

    src = b.pick("f", lambda v: v.exact) or b.pick("i")
    if src is None:
        return False
    mask = b.emit(f"{src.name} > {b.rng.choice([0, 0.5, -1])}", [src], src.shape, kind="b")
    a = b.pick("f", lambda v: broadcast(v.shape, mask.shape) is not None)
    if a is None:
        return False
    shape = broadcast(a.shape, mask.shape)
    if b.rng.random() < 0.5:
        b.emit(f"torch.where({mask.name}, {a.name}, {b.rng.choice([0.0, -1.0, 2.5])})", [mask, a], shape)
    else:
        other = b.pick("f", lambda v: broadcast(v.shape, shape) is not None)
        b.emit(f"torch.where({mask.name}, {a.name}, {other.name})", [mask, a, other], broadcast(shape, other.shape))


def int_ops(b):
    i = b.pick("i")
    if i is None:
        return False
    op = b.rng.choice(["{i} * 3 + 1", "{i} % 4", "{i} // 2", "{i}.abs()", "{i} & 6", "{i} - {i}.amax()"])
    j = b.emit(op.format(i=i.name), [i], i.shape, kind="i", exact=True)
    if b.rng.random() < 0.5:
        # the dtype of the first input, not a name: the float64 reference run must convert to float64
        b.emit(f"{j.name}.to({b.input_names[0]}.dtype)", [j], j.shape, exact=True)
    elif b.rng.random() < 0.5:
        m = b.emit(f"({j.name} > 0) & ~({i.name} == 2)", [j, i], j.shape, kind="b")
        if m.shape:
            b.emit(f"{m.name}.sum(-1)", [m], m.shape[:-1], kind="i")
    else:
        b.emit(f"{j.name}.cumsum({_dim(b, j) if j.shape else 0})", [j], j.shape, kind="i")


# --- views ---------------------------------------------------------------------------------------
def view(b):
    x = b.pick("f") if b.rng.random() < 0.8 else (b.pick("i") or b.pick("f"))
    shape, rng = x.shape, b.rng
    choices = []
    if len(shape) >= 2:
        perm = list(range(len(shape)))
        rng.shuffle(perm)
        new = tuple(shape[p] for p in perm)
        choices.append((f"{x.name}.permute{tuple(perm)}", new, False))
        choices.append((f"{x.name}.transpose(0, -1)", (shape[-1],) + shape[1:-1] + (shape[0],), False))
    if shape and shape[0] > 1:
        start, step = rng.randrange(shape[0] - 1), rng.choice([1, 2, 3])
        n = len(range(start, shape[0], step))
        choices.append((f"{x.name}[{start}::{step}]", (n,) + shape[1:], False))
        choices.append((f"{x.name}.select(0, {rng.randrange(shape[0])})", shape[1:], False))
    if len(shape) >= 2 and shape[-1] > 2:
        choices.append((f"{x.name}[..., 1::2]", shape[:-1] + (len(range(1, shape[-1], 2)),), False))
    if 1 in shape:
        d = shape.index(1)
        new = shape[:d] + (3,) + shape[d + 1:]
        choices.append((f"{x.name}.expand{new}", new, True))
    if len(shape) <= 2:
        choices.append((f"{x.name}.unsqueeze(0).expand(2, {', '.join(map(str, shape))})", (2,) + shape, True))
        choices.append((f"{x.name}.unsqueeze(-1)", shape + (1,), False))
    numel = 1
    for s in shape:
        numel *= s
    choices.append((f"{x.name}.reshape(-1)", (numel,), False))
    if numel % 2 == 0:
        choices.append((f"{x.name}.reshape(2, -1)", (2, numel // 2), False))
    text, new, expanded = rng.choice(choices)
    # reshape may copy or view; counting it as a view is the safe side for writes and exactness.
    b.emit(text, [x], new, kind=x.kind, view_of=x, exact=x.exact, expanded=expanded)


# --- reductions, norms, scans ----------------------------------------------------------------------
def reduction(b):
    x = b.pick("f", lambda v: len(v.shape) >= 1)
    if x is None:
        return False
    d = _dim(b, x)
    keep = b.rng.random() < 0.3
    kept = x.shape[:d] + ((1,) if keep else ()) + x.shape[d + 1:]
    op = b.rng.choice(["sum", "mean", "amax", "amin", "var", "norm", "logsumexp"])
    text = {"norm": f"torch.linalg.vector_norm({x.name}, dim={d}, keepdim={keep})",
            "var": f"{x.name}.var({d}, keepdim={keep})" if x.shape[d] > 1 else f"{x.name}.sum({d}, keepdim={keep})",
            "logsumexp": f"torch.logsumexp({x.name}, {d}, keepdim={keep})"}.get(op, f"{x.name}.{op}({d}, keepdim={keep})")
    b.emit(text, [x], kept)


def full_reduction(b):
    x = b.pick()
    b.emit(f"{x.name}.{b.rng.choice(['sum', 'mean', 'amax'])}()", [x], ())


def arg_reduction(b):
    x = b.pick("f", lambda v: v.exact and len(v.shape) >= 1)
    if x is None:
        return False
    d = _dim(b, x)
    b.emit(f"{x.name}.{b.rng.choice(['argmax', 'argmin'])}({d})", [x], x.shape[:d] + x.shape[d + 1:], kind="i")


def softmax(b):
    x = b.pick("f", lambda v: len(v.shape) >= 1)
    if x is None:
        return False
    fn = b.rng.choice(["torch.softmax", "torch.log_softmax"])
    b.emit(f"{fn}({x.name}, {_dim(b, x)})", [x], x.shape)


def norm(b):
    x = b.pick("f", lambda v: len(v.shape) >= 1)
    if x is None:
        return False
    last = x.shape[-1]
    if b.rng.random() < 0.5:
        w = b.pick("f", lambda v: v.shape == (last,))
        if w is not None and b.rng.random() < 0.7:
            b.emit(f"F.layer_norm({x.name}, ({last},), {w.name}, {w.name} * 0.5)", [x, w], x.shape)
        else:
            b.emit(f"F.layer_norm({x.name}, ({last},))", [x], x.shape)
    else:
        b.emit(f"{x.name} * torch.rsqrt({x.name}.pow(2).mean(-1, keepdim=True) + 1e-6)", [x], x.shape)


def scan(b):
    x = b.pick("f", lambda v: len(v.shape) >= 1)
    if x is None:
        return False
    d = _dim(b, x)
    if x.exact and not b.training and b.rng.random() < 0.4:
        b.emit(f"{x.name}.cummax({d}).indices", [x], x.shape, kind="i")
    elif b.rng.random() < 0.5:
        b.emit(f"{x.name}.cummax({d}).values", [x], x.shape)
    else:
        b.emit(f"{x.name}.cumsum({d})", [x], x.shape)


def matmul(b):
    x = b.pick("f", lambda v: len(v.shape) == 2)
    if x is None:
        return False
    y = b.pick("f", lambda v: len(v.shape) == 2 and v.shape[0] == x.shape[1])
    if y is None:
        b.emit(f"{x.name} @ {x.name}.t()", [x], (x.shape[0], x.shape[0]))
    else:
        b.emit(f"{x.name} @ {y.name}", [x, y], (x.shape[0], y.shape[1]))


# --- in place ------------------------------------------------------------------------------------
def inplace(b):
    from fuzz_programs import broadcast

    if b.training:
        src = b.pick("f")
        target = b.clone_for_write(src)
    else:
        target = b.pick(b.rng.choice("ffi"), b.writable) or b.pick("f", b.writable)
        if target is None:
            return False
    t, shape = target.name, target.shape
    # An operand sharing the target's storage may overlap it partially, which eager refuses.
    other = b.pick(target.kind, lambda v: v.root != target.root and broadcast(v.shape, shape) == shape)
    forms = [f"{t}.mul_(2)", f"{t}.add_(1)"]
    if target.kind == "f":
        forms += [f"{t}.clamp_(min=-0.5)" if not b.training else f"{t}.mul_(-0.5)"]
    if other is not None:
        forms += [f"{t}.add_({other.name})", f"{t}.sub_({other.name})"]
    if shape and shape[0] > 1:
        forms += [f"{t}[1:] *= 2", f"{t}[::2] += 1"]
        if other is not None and len(other.shape) < len(shape):
            forms.append(f"{t}[1:] += {other.name}")
    if len(shape) >= 2 and shape[-1] > 1:
        forms.append(f"{t}[:, ::2].{'zero_()' if not b.training else 'mul_(3)'}")
    text = b.rng.choice(forms)
    b.emit_inplace(text, target, [other] if other is not None and other.name in text else [])


# --- indexing ------------------------------------------------------------------------------------
def _randint(high, shape):
    from fuzz_programs import shape_text

    return f"torch.randint(0, {high}, {shape_text(shape)}, generator=g)"


def _unique_along(dim, high, shape):
    """Indices < high, never repeated along `dim` (scatter without reduction stays deterministic)."""
    from fuzz_programs import shape_text

    full = tuple(high if i == dim else s for i, s in enumerate(shape))
    cut = ", ".join(f":{s}" for s in shape)
    return f"torch.argsort(torch.rand({shape_text(full)}, generator=g), dim={dim})[{cut}]"


def gather(b):
    x = b.pick("f", lambda v: len(v.shape) == 2)
    if x is None:
        return False
    d = b.rng.randrange(2)
    shape = (b.rng.randint(1, x.shape[0]), b.rng.randint(1, x.shape[1]))
    idx = b.add_index_input(_randint(x.shape[d], shape))
    b.emit(f"torch.gather({x.name}, {d}, {idx})", [x], shape)


def index_select(b):
    x = b.pick("f", lambda v: len(v.shape) >= 1)
    if x is None:
        return False
    d = _dim(b, x)
    n = b.rng.randint(1, 6)
    idx = b.add_index_input(_randint(x.shape[d], (n,)))
    b.emit(f"{x.name}.index_select({d}, {idx})", [x], x.shape[:d] + (n,) + x.shape[d + 1:])


def index_put(b):
    x = b.pick("f", lambda v: len(v.shape) >= 1 and not v.expanded)
    if x is None:
        return False
    accumulate = b.rng.random() < 0.6
    n = b.rng.randint(1, 5 if accumulate else x.shape[0])
    text = _randint(x.shape[0], (n,)) if accumulate else f"torch.randperm({x.shape[0]}, generator=g)[:{n}]"
    idx = b.add_index_input(text)
    vals = b.pick("f", lambda v: v.shape == x.shape[1:])
    vals_text = vals.name if vals is not None else "1.5"
    expand = f".expand({shape_of(x.shape[1:])})" if len(x.shape) > 1 else ""
    uses = [x] + ([vals] if vals is not None else [])
    # values read from x's own storage while writing it: eager refuses the overlap
    inplace = b.writable(x) and b.rng.random() < 0.5 and (vals is None or vals.root != x.root)
    if inplace and not accumulate and b.rng.random() < 0.5:
        b.emit_inplace(f"{x.name}[{idx}] = {vals_text}", x, uses[1:])
    elif inplace:
        b.emit_inplace(f"{x.name}.index_put_(({idx},), torch.as_tensor({vals_text}, dtype={x.name}.dtype, device={x.name}.device)"
                       f"{expand}, accumulate={accumulate})", x, uses[1:])
    else:
        b.emit(f"{x.name}.index_put(({idx},), torch.as_tensor({vals_text}, dtype={x.name}.dtype, device={x.name}.device)"
               f"{expand}, accumulate={accumulate})", uses, x.shape)


def shape_of(shape) -> str:
    return ", ".join(map(str, shape)) if shape else ""


def scatter(b):
    x = b.pick("f", lambda v: len(v.shape) == 2 and not v.expanded)
    if x is None:
        return False
    d = b.rng.randrange(2)
    add = b.rng.random() < 0.6
    src = b.pick("f", lambda v: len(v.shape) == 2 and v.shape[0] <= x.shape[0] and v.shape[1] <= x.shape[1])
    shape = (b.rng.randint(1, src.shape[0]), b.rng.randint(1, src.shape[1]))
    idx = b.add_index_input(_randint(x.shape[d], shape) if add else _unique_along(d, x.shape[d], shape))
    fn = "scatter_add" if add else "scatter"
    # src cut to the index's shape: eager's backward rejects a larger src.
    src_text = f"{src.name}[:{shape[0]}, :{shape[1]}]"
    if add and not b.training and b.rng.random() < 0.4:  # repeated indices reduced by max, min or mean
        reduce = b.rng.choice(["amax", "amin", "mean"])
        include_self = b.rng.random() < 0.5
        b.emit(f"{x.name}.scatter_reduce({d}, {idx}, {src_text}, {reduce!r}, include_self={include_self})",
               [x, src], x.shape)
        return None
    if b.writable(x) and src.root != x.root and b.rng.random() < 0.4:
        b.emit_inplace(f"{x.name}.{fn}_({d}, {idx}, {src_text})", x, [src])
    else:
        b.emit(f"{x.name}.{fn}({d}, {idx}, {src_text})", [x, src], x.shape)


# --- cat, pad --------------------------------------------------------------------------------------
def cat(b):
    x = b.pick("f", lambda v: len(v.shape) >= 1)
    if x is None:
        return False
    d = _dim(b, x)
    same = [v for v in b.vars.values() if v.kind == "f" and len(v.shape) == len(x.shape)
            and all(s == t for i, (s, t) in enumerate(zip(v.shape, x.shape)) if i != d)]
    y = b.rng.choice(same)
    shape = x.shape[:d] + (x.shape[d] + y.shape[d],) + x.shape[d + 1:]
    b.emit(f"torch.cat([{x.name}, {y.name}], {d})", [x, y], shape)


def pad(b):
    x = b.pick("f", lambda v: len(v.shape) >= 1)
    if x is None:
        return False
    left, right = b.rng.randint(0, 2), b.rng.randint(0, 2)
    value = b.rng.choice(["", ", value=0.5"])
    if len(x.shape) >= 2 and b.rng.random() < 0.5:
        top, bottom = b.rng.randint(0, 2), b.rng.randint(0, 1)
        shape = x.shape[:-2] + (x.shape[-2] + top + bottom, x.shape[-1] + left + right)
        b.emit(f"F.pad({x.name}, ({left}, {right}, {top}, {bottom}){value})", [x], shape)
    else:
        b.emit(f"F.pad({x.name}, ({left}, {right}){value})", [x], x.shape[:-1] + (x.shape[-1] + left + right,))


# --- user Triton kernels ---------------------------------------------------------------------------
GRID = "(triton.cdiv({n}.numel(), 32),)"


def user_kernel(b):
    """A corpus kernel: add_kernel writing an out= buffer, add_one_inplace_kernel writing a
    contiguous value in place (an input itself when it is one), atomic_sum_kernel (float32 only).
    Not in bf16 programs: Triton's interpreter writes bf16 wrongly, so eager's own run is garbage."""
    x = b.pick("f", lambda v: not v.expanded)
    if x is None:
        return False
    if b.dtype == "torch.bfloat16":
        return False  # Triton's CPU interpreter stores bf16 as garbage (eager's call too)
    choice = b.rng.choice(["add", "inplace", "atomic"] if b.dtype == "torch.float32" else ["add", "inplace"])
    c = b.emit(f"{x.name}.contiguous()", [x], x.shape, view_of=x, exact=x.exact)
    if choice == "add":
        y = b.pick("f", lambda v: v.shape == x.shape)
        d = b.emit(f"{y.name}.contiguous()", [y], y.shape, view_of=y, exact=y.exact)
        out = b.emit(f"torch.empty_like({c.name})", [c], c.shape)
        b.kernels.add("add_kernel")
        b.emit_inplace(f"tritonize.wrap_triton(add_kernel)[{GRID.format(n=c.name)}]"
                       f"({c.name}, {d.name}, {out.name}, {c.name}.numel(), BLOCK=32)", out, [c, d])
    elif choice == "inplace":
        b.kernels.add("add_one_inplace_kernel")
        b.emit_inplace(f"tritonize.wrap_triton(add_one_inplace_kernel)[{GRID.format(n=c.name)}]"
                       f"({c.name}, {c.name}.numel(), BLOCK=32)", c, [])
    else:
        s = b.emit(f"torch.zeros(1, device={c.name}.device, dtype={c.name}.dtype)", [c], (1,))
        b.kernels.add("atomic_sum_kernel")
        b.emit_inplace(f"tritonize.wrap_triton(atomic_sum_kernel)[{GRID.format(n=c.name)}]"
                       f"({c.name}, {s.name}, {c.name}.numel(), BLOCK=32)", s, [c])


def _user_kernel_if_writable(b):
    # The in-place kernel writes x's storage when x is contiguous; that must be a writable value.
    return False if b.training else user_kernel(b)


OPS = [(unary, 6), (binary, 6), (scalar_chain, 2), (compare_where, 2), (int_ops, 2), (view, 6),
       (reduction, 3), (full_reduction, 1), (arg_reduction, 1), (softmax, 2), (norm, 2), (scan, 2),
       (matmul, 1), (inplace, 4), (gather, 1), (index_select, 1), (index_put, 2), (scatter, 2), (cat, 2),
       (pad, 2), (_user_kernel_if_writable, 2)]
TRAINING_OPS = [(unary, 6), (binary, 6), (scalar_chain, 2), (compare_where, 1), (view, 6), (reduction, 3),
                (full_reduction, 1), (softmax, 2), (norm, 2), (scan, 2), (matmul, 1), (inplace, 2),
                (gather, 1), (index_select, 1), (index_put, 1), (scatter, 1), (cat, 2), (pad, 2)]
