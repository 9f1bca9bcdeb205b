"""A seeded generator of random straight-line PyTorch programs, for fuzzing tritonize against eager.

`generate(seed)` returns a `Program`: the text of a Python function `program(...)` and of a function
`make_inputs(device)` that builds its arguments. Both texts are what runs (they are exec'd), so the
printed text of a failing seed is its reproducer. The checker lives in tests/fuzz_check.py.

Values are tracked as `Var`s with shape, kind ('f' float of the program's dtype, 'i' int, 'b' bool)
and the facts that decide which ops are valid on them:
- `root`: the variable whose storage a view reads, so an in-place op knows what else it changes;
- `expanded`: overlapping memory (eager refuses to write it);
- `exact`: its values are the same bits in every precision (an input, or a view of one not yet
  written). Discrete results (comparisons, argmax, cummax indices) are made only from exact values,
  otherwise fp32-kept intermediates of the compiled bf16 program would legitimately flip them.
Training programs (inputs requiring grad, gradients compared) write in place only to fresh clones,
which is what keeps them valid for autograd.
"""
from __future__ import annotations

import dataclasses
import random

FLOAT_DTYPES = ["torch.float32", "torch.bfloat16", "torch.float16"]


@dataclasses.dataclass
class Var:
    name: str
    shape: tuple
    kind: str  # 'f', 'i' or 'b'
    root: str
    expanded: bool = False
    exact: bool = False
    is_input: bool = False


@dataclasses.dataclass
class Stmt:
    text: str  # one or more lines, without indentation
    defines: tuple  # names this statement binds
    uses: tuple  # names it reads


@dataclasses.dataclass
class Program:
    seed: int
    dtype: str
    training: bool
    input_lines: list  # lines of make_inputs(device), each binding one input
    input_names: list
    grad_inputs: list  # names of inputs that require grad (training)
    stmts: list
    returns: list
    kernels: set  # corpus kernel names the program launches

    def source(self) -> str:
        """The program and its inputs as Python text (what runs, and the reproducer)."""
        lines = [f"# fuzz seed {self.seed}, dtype {self.dtype}, training={self.training}",
                 "def make_inputs(device):",
                 "    g = torch.Generator().manual_seed(%d)" % self.seed]
        lines += ["    " + line for line in self.input_lines]
        lines.append("    return [%s]" % ", ".join(self.input_names))
        lines += ["", "", "def program(%s):" % ", ".join(self.input_names)]
        for stmt in self.stmts:
            lines += ["    " + line for line in stmt.text.split("\n")]
        lines.append("    return (%s,)" % ", ".join(self.returns))
        return "\n".join(lines) + "\n"

    def header(self) -> str:
        """Imports a reproducer needs before source()."""
        names = sorted(self.kernels)
        head = "import torch\nimport torch.nn.functional as F\nimport triton\nimport tritonize\n"
        if names:
            head += "from user_kernel_corpus import %s\n" % ", ".join(names)
        return head

    def without(self, index: int) -> "Program | None":
        """The program with statement `index` removed, or None if a later statement needs it."""
        gone = set(self.stmts[index].defines)
        rest = self.stmts[:index] + self.stmts[index + 1:]
        if any(gone & set(s.uses) for s in rest):
            return None
        returns = [r for r in self.returns if r not in gone]
        if not returns:
            return None
        return dataclasses.replace(self, stmts=rest, returns=returns)


def broadcast(a: tuple, b: tuple):
    """The broadcast shape of a and b, or None if they do not broadcast."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and 1 not in (x, y):
            return None
        out.append(max(x, y))
    return tuple(reversed(out))


def shape_text(shape) -> str:
    return str(tuple(shape))


class Builder:
    """Grows one program: a pool of variables and the statements that define them."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.seed = seed
        self.training = self.rng.random() < 0.2
        self.dtype = self.rng.choices(FLOAT_DTYPES, weights=[3, 1, 1])[0]
        self.vars: dict[str, Var] = {}
        self.input_lines, self.input_names, self.grad_inputs = [], [], []
        self.stmts: list[Stmt] = []
        self.kernels: set = set()
        self.counter = 0
        self.rows, self.cols = self.rng.choice([3, 4, 5, 8]), self.rng.choice([4, 6, 7, 16])

    # --- names and inputs ------------------------------------------------------------------------
    def fresh(self, prefix="v") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def add_input(self, shape, kind="f") -> Var:
        name = self.fresh("x" if kind == "f" else "n")
        shape = tuple(shape)
        layout = self.rng.choice(["", "", "t", "step"]) if len(shape) == 2 else ""
        made = tuple(reversed(shape)) if layout == "t" else shape
        if layout == "step":
            made = made[:-1] + (made[-1] * 2,)
        if kind == "f":
            dtype = self.dtype
            text = f"torch.randn({shape_text(made)}, generator=g).to(device=device, dtype={dtype})"
        else:
            text = f"torch.randint(-5, 6, {shape_text(made)}, generator=g).to(device=device, dtype=torch.int32)"
        text += {"": "", "t": ".t()", "step": "[..., ::2]"}[layout]
        if kind == "f" and self.training:
            text += ".requires_grad_()"
            self.grad_inputs.append(name)
        self.input_lines.append(f"{name} = {text}")
        self.input_names.append(name)
        var = Var(name, shape, kind, root=name, exact=True, is_input=True)
        self.vars[name] = var
        return var

    def add_index_input(self, text: str) -> str:
        name = self.fresh("idx")
        self.input_lines.append(f"{name} = {text}.to(device)")
        self.input_names.append(name)
        return name

    # --- statements --------------------------------------------------------------------------------
    def emit(self, expr: str, uses, shape, kind="f", view_of: Var | None = None, exact=False,
             expanded=False) -> Var:
        name = self.fresh()
        root = view_of.root if view_of is not None else name
        var = Var(name, tuple(shape), kind, root, expanded=expanded or (view_of is not None and view_of.expanded),
                  exact=exact)
        self.vars[name] = var
        self.stmts.append(Stmt(f"{name} = {expr}", (name,), tuple(u.name for u in uses)))
        return var

    def emit_inplace(self, text: str, target: Var, uses) -> None:
        """An in-place statement: every value sharing target's storage stops being exact."""
        if target.kind == "f":
            for var in self.vars.values():
                if var.root == target.root:
                    var.exact = False
        self.stmts.append(Stmt(text, (), tuple(u.name for u in uses) + (target.name,)))

    def pick(self, kind="f", pred=lambda v: True) -> Var | None:
        choices = [v for v in self.vars.values() if v.kind == kind and pred(v)]
        if not choices:
            return None
        recent = choices[-4:]
        return self.rng.choice(recent if self.rng.random() < 0.6 else choices)

    def writable(self, var: Var) -> bool:
        """May an in-place op write var? Not overlapping memory; in training, nothing at all
        (training writes only to fresh clones, see clone_for_write)."""
        return not var.expanded and not self.training

    def clone_for_write(self, var: Var) -> Var:
        return self.emit(f"{var.name}.clone()", [var], var.shape, var.kind)


def generate(seed: int, n_ops: int | None = None, max_ops: int = 7) -> Program:
    """The program of `seed`: a few inputs, then `n_ops` random statements (2 to `max_ops` when not
    given), then some returns."""
    from fuzz_ops import OPS, TRAINING_OPS

    b = Builder(seed)
    rng = b.rng
    b.add_input((b.rows, b.cols))
    if rng.random() < 0.6:
        b.add_input(rng.choice([(b.rows, b.cols), (b.cols,), (b.rows, 1), (b.cols, b.rows)]))
    if not b.training and rng.random() < 0.3:
        b.add_input((b.rows, b.cols), kind="i")
    ops = TRAINING_OPS if b.training else OPS
    names, weights = zip(*ops)
    for _ in range(n_ops if n_ops is not None else rng.randint(2, max_ops)):
        for _attempt in range(10):
            if rng.choices(names, weights)[0](b) is not False:
                break
    returns = _pick_returns(b)
    return Program(seed, b.dtype, b.training, b.input_lines, b.input_names, b.grad_inputs, b.stmts, returns,
                   b.kernels)


def _pick_returns(b: Builder) -> list:
    computed = [v for v in b.vars.values() if not v.is_input]
    if b.training:
        computed = [v for v in computed if v.kind == "f"]
    if not computed:
        computed = [v for v in b.vars.values() if v.kind == "f"]
    chosen = [computed[-1]]
    for var in computed[:-1]:
        if b.rng.random() < 0.3:
            chosen.append(var)
    return [v.name for v in chosen]
