"""Which arguments a user kernel writes and reads: a data-flow analysis over its TTIR.

Every SSA value gets the set of function parameters it may be derived from (its provenance).
An operation's results derive from all of its operands, except what `tt.load` and atomics
return: data read from memory derives from no parameter (a store through a loaded index still
writes the tensor it is added to, not the index tensor). A pointer read from memory, or an
integer turned into a pointer from nothing we can trace, derives from UNKNOWN.

* Writes: the address operand of tt.store, tt.atomic_*, tt.descriptor_store/reduce/scatter.
* Reads: the address operand of tt.load, tt.descriptor_load/gather and the atomics.
* scf.for / scf.while: loop-carried values join their initial values and what the body yields,
  iterated to a fixed point (a pointer advanced in a loop still points into its parameter).
* scf.if: results join what either branch yields. tt.reduce / tt.scan / tt.map_elementwise:
  their block arguments and results join all their inputs and returns (coarse, never wrong).
* tt.call: the callee is summarized once (which of its parameters it writes and reads, and what
  its results derive from) and the summary is applied at the call; recursion is an error.

Anything this module does not know (an op outside the tables, an op with regions we do not
model, impure inline asm) raises `UnknownOperation`; the caller
then reports every tensor argument as written. An over-approximation is allowed, an
under-approximation never.
"""
from __future__ import annotations

import dataclasses

from .ttir import IrBlock, IrFunction, IrModule, IrOp

UNKNOWN = -1  # provenance of a pointer we cannot trace back to a parameter

# Ops that write memory at the address (or descriptor) given by operand 0.
WRITE_OPS = frozenset({
    "tt.store", "tt.atomic_rmw", "tt.atomic_cas", "tt.atomic_store", "tt.descriptor_store",
    "tt.descriptor_reduce", "tt.descriptor_scatter", "tt.experimental_descriptor_store",
})
# Ops that read memory at operand 0 (atomics read too).
READ_OPS = frozenset({
    "tt.load", "tt.descriptor_load", "tt.descriptor_gather", "tt.atomic_load", "tt.atomic_poll",
    "tt.atomic_rmw", "tt.atomic_cas", "tt.experimental_descriptor_load",
})
# Triton ops that touch no argument memory: results derive from their operands.
PURE_TT_OPS = frozenset({
    "tt.addptr", "tt.advance", "tt.make_tensor_ptr", "tt.make_tensor_descriptor", "tt.splat",
    "tt.unsplat", "tt.expand_dims", "tt.reshape", "tt.broadcast", "tt.cat", "tt.join", "tt.split",
    "tt.trans", "tt.get_program_id", "tt.get_num_programs", "tt.dot", "tt.dot_scaled", "tt.make_range",
    "tt.histogram", "tt.gather", "tt.print", "tt.assert", "tt.int_to_ptr", "tt.ptr_to_int",
    "tt.bitcast", "tt.fp_to_fp", "tt.clampf", "tt.precise_sqrt", "tt.precise_divf", "tt.approx_divf",
    "tt.mulhiui", "tt.extern_elementwise", "tt.reinterpret_tensor_descriptor",
})
PURE_DIALECTS = ("arith.", "math.", "ub.")
PURE_OTHER_OPS = frozenset({"gpu.barrier", "ttg.barrier"})
BRANCHES = frozenset({"cf.br", "cf.cond_br"})  # between the blocks of a function (early returns)
TERMINATORS = frozenset({
    "scf.yield", "scf.condition", "tt.return", "tt.reduce.return", "tt.scan.return",
    "tt.map_elementwise.return",
}) | BRANCHES
# Ops with regions that the analysis models, and the method that does it.
REGION_HANDLERS = {
    "scf.for": "_scf_for", "scf.while": "_scf_while", "scf.if": "_scf_if",
    "tt.reduce": "_combining", "tt.scan": "_combining", "tt.map_elementwise": "_combining",
}


class UnknownOperation(Exception):
    """The analysis met something it cannot reason about: treat every tensor as written."""


class RecursiveKernel(Exception):
    """A kernel function calls itself (directly or not): an error, not a guess."""


@dataclasses.dataclass(frozen=True)
class FunctionSummary:
    writes: frozenset   # parameter indices (or UNKNOWN) the function may write through
    reads: frozenset
    returns: tuple      # per result: the parameter indices (or UNKNOWN) it derives from


def _is_pointer(type_text: str) -> bool:
    return "!tt.ptr" in type_text or "!tt.tensordesc" in type_text


class FunctionAnalysis:
    """Provenance of every value of one function, to a fixed point."""

    def __init__(self, module: IrModule, function: IrFunction, summarize):
        self.module = module
        self.function = function
        self.summarize = summarize  # name -> FunctionSummary (memoized, recursion-checked)
        self.provenance: dict[int, frozenset] = {}
        self.writes: set = set()
        self.reads: set = set()
        self.returns: list[frozenset] = []
        self.changed = False

    def of(self, value: int) -> frozenset:
        return self.provenance.get(value, frozenset())

    def union(self, values) -> frozenset:
        out: frozenset = frozenset()
        for v in values:
            out |= self.of(v)
        return out

    def join(self, value: int, sources) -> None:
        old = self.of(value)
        new = old | frozenset(sources)
        if new != old:
            self.provenance[value] = new
            self.changed = True

    def run(self) -> FunctionSummary:
        # Early returns split a function into blocks joined by cf branches. The blocks are
        # analyzed as one (flow-insensitively); a block argument may receive any branch operand.
        blocks = self.function.blocks
        branches = [op for block in blocks for op in block.ops if op.name in BRANCHES]
        for index, param in enumerate(self.function.params):
            self.join(param, {index})
        self.changed = True
        while self.changed:
            self.changed = False
            branch_sources = self.union(v for op in branches for v in op.operands)
            for block in blocks[1:]:
                for arg in block.args:
                    self.join(arg, branch_sources)
            for block in blocks:
                self.visit_block(block)
        return FunctionSummary(frozenset(self.writes), frozenset(self.reads), tuple(self.returns))

    # --- operations ----------------------------------------------------------------------------
    def visit_block(self, block: IrBlock) -> None:
        for op in block.ops:
            self.visit(op)

    def visit(self, op: IrOp) -> None:
        name = op.name
        if name in WRITE_OPS:
            self._grow(self.writes, self.of(op.operands[0]))
        if name in READ_OPS:
            self._grow(self.reads, self.of(op.operands[0]))
        if name in WRITE_OPS or name in READ_OPS:
            self._memory_results(op)
        elif name == "tt.call":
            self._call(op)
        elif name == "tt.return":
            self._return(op)
        elif name in REGION_HANDLERS:
            getattr(self, REGION_HANDLERS[name])(op)
        elif name in TERMINATORS:
            pass  # read by the op that owns the block
        elif name == "tt.elementwise_inline_asm":
            if not op.attrs.get("pure", False):
                raise UnknownOperation("inline asm that is not pure may write any memory")
            self._pure(op)
        elif name in PURE_TT_OPS or name in PURE_OTHER_OPS or name.startswith(PURE_DIALECTS):
            if op.regions:
                raise UnknownOperation(f"operation {name} has regions")
            self._pure(op)
        else:
            raise UnknownOperation(f"operation {name} is not known to the analysis")

    def _grow(self, target: set, sources: frozenset) -> None:
        if not sources <= target:
            target |= sources
            self.changed = True

    def _pure(self, op: IrOp) -> None:
        sources = self.union(op.operands)
        if op.name == "tt.int_to_ptr" and not sources:
            sources = frozenset({UNKNOWN})
        for result in op.results:
            self.join(result, sources)

    def _memory_results(self, op: IrOp) -> None:
        for result, type_text in zip(op.results, op.result_types):
            if _is_pointer(type_text):
                self.join(result, {UNKNOWN})  # a pointer loaded from memory: could point anywhere

    def _call(self, op: IrOp) -> None:
        callee = op.attrs.get("callee")
        if callee not in self.module.functions:
            raise UnknownOperation(f"call to unknown function {callee}")
        summary = self.summarize(callee)
        args = [self.of(a) for a in op.operands]

        def mapped(sources) -> frozenset:
            out: frozenset = frozenset()
            for s in sources:
                out |= frozenset({UNKNOWN}) if s == UNKNOWN or s >= len(args) else args[s]
            return out

        self._grow(self.writes, mapped(summary.writes))
        self._grow(self.reads, mapped(summary.reads))
        for result, sources in zip(op.results, summary.returns):
            self.join(result, mapped(sources))

    def _return(self, op: IrOp) -> None:
        while len(self.returns) < len(op.operands):
            self.returns.append(frozenset())
        for i, value in enumerate(op.operands):
            if not self.of(value) <= self.returns[i]:
                self.returns[i] = self.returns[i] | self.of(value)
                self.changed = True

    # --- region operations ---------------------------------------------------------------------
    @staticmethod
    def _single_block(op: IrOp, region: int) -> IrBlock:
        blocks = op.regions[region]
        if len(blocks) != 1:
            raise UnknownOperation(f"{op.name} region {region} has {len(blocks)} blocks")
        return blocks[0]

    @staticmethod
    def _terminator(block: IrBlock) -> IrOp | None:
        return block.ops[-1] if block.ops and block.ops[-1].name in TERMINATORS else None

    def _yielded(self, block: IrBlock, index: int) -> frozenset:
        term = self._terminator(block)
        if term is None or index >= len(term.operands):
            return frozenset()
        return self.of(term.operands[index])

    def _scf_for(self, op: IrOp) -> None:
        body = self._single_block(op, 0)
        lower, upper, step, *inits = op.operands
        self.join(body.args[0], self.union([lower, upper, step]))
        for i, init in enumerate(inits):
            self.join(body.args[i + 1], self.of(init) | self._yielded(body, i))
        self.visit_block(body)
        for i, result in enumerate(op.results):
            self.join(result, self.of(body.args[i + 1]) | self._yielded(body, i))

    def _scf_while(self, op: IrOp) -> None:
        before, after = self._single_block(op, 0), self._single_block(op, 1)
        for i, init in enumerate(op.operands):
            self.join(before.args[i], self.of(init) | self._yielded(after, i))
        self.visit_block(before)
        condition = self._terminator(before)
        forwarded = condition.operands[1:] if condition is not None else ()
        for i, value in enumerate(forwarded):
            if i < len(after.args):
                self.join(after.args[i], self.of(value))
            if i < len(op.results):
                self.join(op.results[i], self.of(value))
        self.visit_block(after)

    def _scf_if(self, op: IrOp) -> None:
        branches = [self._single_block(op, r) for r in range(len(op.regions)) if op.regions[r]]
        for block in branches:
            self.visit_block(block)
        for i, result in enumerate(op.results):
            for block in branches:
                self.join(result, self._yielded(block, i))

    def _combining(self, op: IrOp) -> None:
        blocks = [b for region in op.regions for b in region]
        sources = self.union(op.operands)
        for block in blocks:
            term = self._terminator(block)
            if term is not None:
                sources |= self.union(term.operands)
        for block in blocks:
            for arg in block.args:
                self.join(arg, sources)
            self.visit_block(block)
        for result in op.results:
            self.join(result, sources)


def summarize_module(module: IrModule) -> dict[str, FunctionSummary]:
    """Summaries of the entry function and everything it calls (memoized; recursion raises)."""
    summaries: dict[str, FunctionSummary | None] = {}

    def summarize(name: str) -> FunctionSummary:
        if name in summaries:
            found = summaries[name]
            if found is None:
                raise RecursiveKernel(f"function {name} calls itself: recursion is not supported")
            return found
        summaries[name] = None
        summary = FunctionAnalysis(module, module.functions[name], summarize).run()
        summaries[name] = summary
        return summary

    summarize(module.entry)
    return {k: v for k, v in summaries.items() if v is not None}
