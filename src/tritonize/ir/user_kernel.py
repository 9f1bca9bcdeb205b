"""UserKernelCall: a user's Triton kernel launched from the wrapper, in the operation list.

It reads its tensor arguments (views of buffers, like an extern call's) and writes some of them.
In the functional graphs we compile, a written argument's new value is a new buffer (an output);
where that buffer comes from is decided after lowering (schedule/reinplace.py):

* in place: the kernel writes the argument's own buffer, and the output is that buffer again
  (allowed when nothing reads the old contents afterwards);
* clone: the argument is copied first and the kernel writes the copy (`clones` says why).

It quacks like an ExternCall where the rest of the compiler only needs reads and outputs:
`args`/`kwargs` hold the TensorArgs it reads, `outputs` hold `.buffer`s, and `kind`, `target`,
`origin` print it.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from .nodes import Buffer


@dataclasses.dataclass
class UserKernelOutput:
    """The value of argument `arg_name` after the kernel ran."""

    buffer: Buffer
    arg_name: str
    path: tuple = ()


@dataclasses.dataclass
class UserKernelCall:
    name: str                    # the launcher's name in the wrapper
    kernel: Any                  # the Triton kernel (jit, autotune or heuristics object)
    kernel_name: str
    grids: list                  # one grid per autotune config
    tma_metadata: dict
    args: dict[str, Any]         # parameter -> TensorArg (graph tensors) or a Python value
    outputs: list[UserKernelOutput]
    # Arguments that are graph inputs themselves (not a copy or view of one) which the traced
    # program writes through this kernel: only these may be overwritten in place.
    writes_graph_inputs: tuple[str, ...]
    access_note: str             # how the written set was found (for the report)
    origin: str
    in_place: set[str] = dataclasses.field(default_factory=set)
    clones: dict[str, str] = dataclasses.field(default_factory=dict)  # argument -> why copied
    kind: str = "user"

    @property
    def kwargs(self) -> dict:
        return {}

    @property
    def target(self) -> str:
        return self.kernel_name

    @property
    def reason(self) -> str:
        return self.access_note

    def output_for(self, arg_name: str) -> UserKernelOutput:
        return next(o for o in self.outputs if o.arg_name == arg_name)
