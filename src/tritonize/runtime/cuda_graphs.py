"""CUDA graphs for mode="reduce-overhead" (issue 18; the design: docs/design.md, "CUDA graphs").

A `GraphRunner` stands in for one compiled graph's wrapper `call(args)`. Per size key (the
values of the graph's size symbols, read from the inputs; one key for a static graph) the first
call runs plain (Triton compiles and tunes, the libraries initialise), the second records a CUDA
graph into the device's shared pool, and every later call replays it.

- **Fixed inputs** are read in place by the recording: parameters and buffers, inputs the graph
  mutates, tensors that live in another recording's outputs or fixed inputs (a forward's saved
  activations reaching the backward), and tensors found at the same address at the warm-up call
  and the recording call (never a padded input). Their addresses are compared at every call; a
  change records again (an input that was only found stable is read in place at its new
  address, and copied after a second move: `_after_a_move`; a backward's incoming gradient is
  read in place by a key's first recording wherever it is, and copied only after its fourth
  move). A fixed input in pool memory is handed to
  the capture without the caller's reference, so the capture can free it after its last read
  and reuse its memory (`_capture_inputs`).
- **Other tensor inputs** are copied into the recording's own buffers before each replay (on
  CUDA, pool memory the capture frees after the input's last read, except where padding grows
  the input: `_transient_buffer`). One
  that then stays at one address for PROMOTE_AFTER calls is read in place by a new recording
  (`_promote`); each promotion of a key doubles the calls the next one waits for, so an input
  that settles and moves again and again costs recordings that grow with the log of the calls.
  Only a key's first recording and those forced by a moved parameter or mutated input count
  towards MAX_RECORDINGS_OF_A_KEY.
- **Variants.** A recording replaced because inputs it reads in place moved is kept (if it
  copies nothing and the pool reuses memory, up to MAX_VARIANTS_OF_A_KEY recordings of a key):
  a call whose inputs are where a kept recording reads them replays that one instead of
  recording again (a training loop's gradient moves between a few addresses; each recording
  changes the allocator's free blocks and moves it again). A recording that copies gives way to
  a kept one only at a promotion (`_variant_in_place`).
- **Outputs** live in pool memory that replays write. Each call hands them out as new storages
  over that memory, listed by the pool, which evacuates before a replay whatever the caller
  still holds where the replay writes (runtime/cuda_graph_pool.py, which also keeps the
  allocator's view of the pool right for the next capture). An output that views an input is
  rebuilt from the caller's own input; the new value of a mutated input is written into the
  input inside the graph.

The capture itself is pluggable: `CudaCapture` records with torch.cuda.CUDAGraph; `FakeCapture`
(tests on the CPU) re-runs the wrapper and copies its results into the memory the recording
returned first, which is what a replay does to that memory.
"""
from __future__ import annotations

import dataclasses
import functools
import warnings
import weakref

import torch

from torch.multiprocessing.reductions import StorageWeakRef

from . import cuda_graph_pool as memory
from .cuda_graph_buckets import Padder, cut, leading_region
from .cuda_graph_pool import GraphPool, alias_of, copied, storage_over, tensor_meta, tensor_on
from .wrapper_support import reserve_split_counters

PROMOTE_AFTER = 3  # replays in a row with a copied input at one address before it is read in place (doubled
# at each promotion of the key)
TANGENT_MOVES_IN_PLACE = 3  # moves of a backward's incoming gradient after which it is copied (if it
# stayed put fewer than `_patience` replays): GPT-2's training moves it three times in its first steps
MAX_VARIANTS_OF_A_KEY = 4  # recordings of one key kept at once: its current one, and earlier ones that copy
# nothing, for the addresses their inputs were found at (a gradient that returns to one replays it)
MAX_RECORDINGS_OF_A_KEY = 6  # records of one key before giving up on it, counting the first and those forced
# by the move of a parameter or a mutated input (an input in pool memory that moves is either the output of a
# graph that recorded again, which its own limits bound, or one evacuated out of the pool: the next
# recording copies it)


# ----------------------------------------------------------------------------- the plan


@dataclasses.dataclass(frozen=True)
class CapturePlan:
    """What compiling decided about a graph's inputs (capture_plan.py builds it).

    static: input positions read in place (parameters, buffers, saved tensors of parameters);
    mutations: (output position, input position) for each output that is the new value of a
    mutated input; key: (input position, "int" | "shape" | "host") for what the size key reads;
    refusal: why this graph cannot be captured at all, or None; tangents: a backward graph's
    incoming gradients (read in place by a key's first recording: `_fixed_positions`)."""

    static: frozenset = frozenset()
    mutations: tuple = ()
    key: tuple = ()
    refusal: str | None = None
    tangents: frozenset = frozenset()


# ----------------------------------------------------------------------------- captures


class CudaCapture:
    """Records with a CUDA graph into one memory pool, on the pool's capture stream.

    release_cache: give the allocator's cached free blocks back to the driver first (as
    torch.cuda.graph always does), so that the pool can take the memory a warm-up call cached.
    Recording again in the steady state keeps them, unless the device has less memory free than
    emptying the cache would give back (`_memory_is_tight`: a capture that runs out of memory
    turns the graph's CUDA graphs off): emptying the cache would move the caller's next eager tensors (a backward's incoming
    gradient) to new addresses, and a moved input read in place makes the graph record again."""

    def __init__(self, handle, stream, release_cache: bool):
        self.handle = handle
        self.stream = stream
        self.release_cache = release_cache
        self.graph = None

    def record(self, run):
        """Capture `run`. cuBLAS keeps a workspace per stream; the capture's stream would get
        one of its own besides the caller's (32 MiB on Hopper, for the program's life), so the
        workspaces are dropped before and after: the capture's lands in the pool, free to reuse
        once the graph is recorded (as Inductor's cudagraph trees do). The counters of split
        reductions for the capture stream are made before, outside the pool."""
        with torch.cuda.device(self.stream.device):
            torch.cuda.synchronize()
            if self.release_cache or _memory_is_tight():
                torch.cuda.empty_cache()
            self.graph = torch.cuda.CUDAGraph()
            reserve_split_counters(torch.cuda.current_device(), self.stream.cuda_stream)
            torch._C._cuda_clearCublasWorkspaces()
            try:
                with torch.cuda.stream(self.stream):
                    self.graph.capture_begin(self.handle, capture_error_mode="thread_local")
                    try:
                        outputs = run()
                    finally:
                        self.graph.capture_end()
            finally:
                torch._C._cuda_clearCublasWorkspaces()
        return outputs

    def replay(self) -> None:
        self.graph.replay()


class FakeCapture:
    """The CPU stand-in: a replay re-runs the wrapper and writes its results into the tensors the
    recording returned, as a CUDA graph's replay writes its outputs' memory again."""

    def __init__(self):
        self.run = None
        self.outputs = ()
        self.recorded_this_call = False

    def record(self, run):
        self.run = run
        self.outputs = run()
        self.recorded_this_call = True  # (a CUDA capture runs nothing: the first replay does)
        return self.outputs

    def replay(self) -> None:
        if self.recorded_this_call:
            self.recorded_this_call = False
            return
        for recorded, fresh in zip(self.outputs, self.run()):
            if isinstance(recorded, torch.Tensor) and recorded.data_ptr() != fresh.data_ptr():
                with torch.no_grad():
                    recorded.copy_(fresh)


# ----------------------------------------------------------------------------- outputs


@dataclasses.dataclass
class OutputSpec:
    """How a replay's output is built: kind "pool" (a, meta: storage index and tensor metadata),
    "input" (a: input position; view: size, stride, offset from the input's own offset),
    "mutated" (a: the input position it is the new value of), "value" (a: the object itself)."""

    kind: str
    a: object = None
    meta: dict | None = None


def _describe_outputs(outputs, inputs, mutated: dict):
    """OutputSpecs for what the recording returned, and the pool storages they use
    [(data_ptr, nbytes, device)]."""
    by_storage = {x.untyped_storage().data_ptr(): i for i, x in enumerate(inputs)
                  if isinstance(x, torch.Tensor)}
    storages: dict = {}
    specs = []
    for position, out in enumerate(outputs):
        if not isinstance(out, torch.Tensor):
            specs.append(OutputSpec("value", out))
            continue
        if position in mutated:
            specs.append(OutputSpec("mutated", mutated[position]))
            continue
        base = out.untyped_storage().data_ptr()
        meta = tensor_meta(out)
        if base in by_storage:
            source = inputs[by_storage[base]]
            meta["storage_offset"] -= source.storage_offset()
            specs.append(OutputSpec("input", by_storage[base], meta))
            continue
        index = storages.setdefault(base, (len(storages), out.untyped_storage().nbytes(), out.device))[0]
        specs.append(OutputSpec("pool", index, meta))
    return specs, [(ptr, nbytes, device) for ptr, (_, nbytes, device) in storages.items()]


# ----------------------------------------------------------------------------- recordings


class Recording:
    """One captured graph for one size key: its inputs, its outputs, and the pool memory its
    replays leave alone."""

    def __init__(self, capture, fixed: list, fixed_ptrs: list, copies: list, specs: list,
                 storages: list, inputs: list):
        self.capture = capture
        self.fixed = fixed  # input positions read in place
        self.fixed_ptrs = fixed_ptrs  # their addresses
        self.found_stable: frozenset = frozenset()  # fixed only because they stayed put (may be copied instead)
        self.found_stable_ptrs: list = []  # [(input position, address)] of those
        self.copies = copies  # [(input position, our buffer)]
        self.transient: frozenset = frozenset()  # copied positions whose buffers a replay may write over
        self.specs = specs
        self.storages = storages  # [(data_ptr, nbytes, device)] of pool memory the outputs use
        self.places = [(ptr, nbytes) for ptr, nbytes, _ in storages]
        self.inputs = inputs  # what the capture read (our buffers; fixed inputs through our own aliases)
        self.left_alone = frozenset()  # (data_ptr, nbytes) of handed-out storages live through the whole capture
        self.released: list = []  # fixed inputs handed over to the capture (pool memory), not read by outputs
        self.checkpoint = None  # the pool's allocator state after the capture (CUDA, memory reused)
        self.capture_outputs = None  # the capture's outputs, where the pool does not reuse memory
        self.copy_out = False  # hand out copies: set once a kept output could not be evacuated
        self.reads_args = [spec.a for spec in specs if spec.kind in ("mutated", "input")]  # outputs built from inputs
        self.regions: dict = {}  # (input position, caller's shape) -> the first rows of our buffer
        self.cut: dict = {}  # padded calls' sizes -> cut_metas
        self.watched: dict = {}  # copied input position -> [its last address, calls in a row there]
        self.replays = 0
        self.key = None  # the size key it was recorded for

    def found_stable_in_place(self, args) -> bool:
        """The inputs read in place only because they stayed put are where this call has them (a
        first test, cheaper than comparing every fixed input: a backward has hundreds)."""
        return all(args[i].data_ptr() == ptr for i, ptr in self.found_stable_ptrs)

    def steady_inputs(self, args, patience: int) -> list:
        """The watched copied inputs found at one address `patience` calls in a row."""
        steady = []
        for position, seen in self.watched.items():
            ptr = args[position].data_ptr()
            seen[1] = seen[1] + 1 if ptr == seen[0] else 1
            seen[0] = ptr
            if seen[1] >= patience:
                steady.append(position)
        return steady

    def region(self, position: int, buffer: torch.Tensor, shape) -> torch.Tensor:
        """The part of a padded input's buffer that a smaller call's input fills."""
        key = (position, shape)
        if key not in self.regions:
            self.regions[key] = leading_region(buffer, shape)
        return self.regions[key]

    def cut_metas(self, padder, pairs) -> dict:
        """Output position -> its tensor metadata at the caller's sizes (a padded call's)."""
        key = tuple(pairs)
        if key not in self.cut:
            shapes = padder.shapes([spec.meta["size"] if spec.meta else None for spec in self.specs], pairs)
            self.cut[key] = {position: {**self.specs[position].meta, "size": size}
                             for position, size in shapes.items() if self.specs[position].meta}
        return self.cut[key]

    def owns(self, data_ptr: int) -> bool:
        return any(start <= data_ptr < start + nbytes for start, nbytes, _ in self.storages)

    def outputs_for(self, pool: GraphPool, args, metas: dict | None = None) -> list:
        """This replay's outputs, handed out through `pool`; `metas`: output position -> metadata at a
        smaller size (a padded call's: cut_metas)."""
        storages = [storage_over(ptr, nbytes, device) for ptr, nbytes, device in self.storages]
        if self.copy_out:
            storages = [copied(storage) for storage in storages]
        refs = [[] for _ in storages]
        outputs = []
        for position, spec in enumerate(self.specs):
            if spec.kind == "pool":
                meta = metas.get(position, spec.meta) if metas else spec.meta
                tensor = tensor_on(storages[spec.a], meta)
                if not memory.REPOINT_STORAGES:  # (evacuate's route without storage re-pointing)
                    refs[spec.a].append(weakref.ref(tensor))
                outputs.append(tensor)
            elif spec.kind == "mutated":
                outputs.append(args[spec.a])
            elif spec.kind == "input":
                source, meta = args[spec.a], spec.meta
                outputs.append(source.as_strided(meta["size"], meta["stride"],
                                                 source.storage_offset() + meta["storage_offset"]))
            else:
                outputs.append(spec.a)
        if not self.copy_out:
            for storage, place, tensors in zip(storages, self.places, refs):
                pool.hand_out(storage, place, tensors, self)
        return outputs


def _memory_is_tight() -> bool:
    """The current device has less memory free than empty_cache() would give back: the default
    pool's segments with no block in use (a graph pool's free blocks stay with the pool). True
    where the allocator's snapshot lacks those fields (emptying the cache is torch's default)."""
    free, _ = torch.cuda.mem_get_info()
    device = torch.cuda.current_device()
    try:
        releasable = sum(segment["total_size"] for segment in torch.cuda.memory_snapshot()
                         if segment.get("device", device) == device and segment["allocated_size"] == 0
                         and tuple(segment.get("segment_pool_id", (0, 0))) == (0, 0))
    except KeyError:
        return True
    return free < releasable


# ----------------------------------------------------------------------------- the runner


class GraphRunner:
    """Calls a compiled graph's wrapper through CUDA graph recordings (see the module's text).
    notes: the graph's explain() lines, which this appends to; name: the graph, for messages."""

    def __init__(self, call, plan: CapturePlan, pool: GraphPool, capture_kind: str, max_sizes: int,
                 notes: list, name: str, padder: Padder | None = None):
        self.call = call
        self.padder = padder  # pads calls to size buckets (None: every size is recorded as it is)
        self.plan = plan
        self.pool = pool
        self.capture_kind = capture_kind
        self.max_sizes = max_sizes
        self.notes = notes
        self.name = name
        self.mutated = dict(plan.mutations)
        self.recordings: dict = {}  # key -> its current recording
        self.variants: dict = {}  # id -> a recording kept for its key that is not the current one
        # when the compiled graph goes (torch._dynamo.reset()), its recordings leave the pool (at the
        # pool's next replay or capture: the garbage collector may run this during a capture)
        weakref.finalize(self, pool.release_later, self.recordings, self.variants)
        self.warm: dict = {}  # key -> addresses of the tensor inputs at the last plain call
        self.records_of: dict = {}  # key -> how many times it was recorded, counting only forced records
        self.promotions: dict = {}  # key -> how many times copied inputs of it were promoted
        self.demoted: dict = {}  # key -> input positions that moved while read in place
        self.moves: dict = {}  # key -> {input position found stable: its moves since it was last stable}
        self.refusal = plan.refusal
        self.plain_keys: set = set()
        self._warned = False

    def __call__(self, args):
        if self.refusal is not None:
            return self.call(args)
        # a padded call runs at its bucket's sizes and hands back the caller's sizes
        pairs = self.padder.targets(args) if self.padder is not None else None
        key = () if not self.plan.key else self._key(args if pairs is None else self.padder.stand_ins(args, pairs))
        recording = self.recordings.get(key)
        in_place = recording is not None and self._fixed_in_place(recording, args)
        if recording is not None and not in_place and self.variants:
            recording, in_place = self._variant_in_place(key, recording, args)
        if in_place:
            steady = recording.steady_inputs(args, self._patience(key)) if recording.watched else ()
            if not steady or not self._promote(key, recording, steady):
                return self._replay(recording, args, pairs)
            if self.variants:  # a kept recording may read the promoted inputs in place already
                recording, found = self._variant_in_place(key, recording, args)
                if found:
                    return self._replay(recording, args, pairs)
        if pairs is not None:
            padded = self.padder.pad(args, pairs)
            args.clear()
            args = padded
        return self._without_recording(key, recording, args, pairs)

    def _plain(self, args, pairs):
        """One call launching kernels one by one (outputs cut back for a padded call)."""
        if pairs is None:
            return self.call(args)
        outputs = list(self.call(self.padder.pad(args, pairs)))
        sizes = [tuple(x.shape) if isinstance(x, torch.Tensor) else None for x in outputs]
        return cut(outputs, self.padder.shapes(sizes, pairs))

    def _key(self, args) -> tuple:
        parts = []
        for position, kind in self.plan.key:
            value = args[position]
            parts.append(value if kind == "int" else tuple(value.shape) if kind == "shape" else value.item())
        return tuple(parts)

    @staticmethod
    def _fixed_in_place(recording: Recording, args) -> bool:
        return [args[i].data_ptr() for i in recording.fixed] == recording.fixed_ptrs

    def _replay(self, recording: Recording, args, pairs):
        """Replay with the caller's inputs (at a padded call's own sizes, copied into the first
        rows of the recording's buffers: the rows after them keep earlier calls' values, which no
        real row reads; those buffers are never transient)."""
        for position in recording.released:
            # pool memory its capture reused after their last reads (a backward's saved
            # activations): the caller's references go before the check below, which would
            # otherwise evacuate them (our aliases serve a plain call)
            args[position] = recording.inputs[position]
        if not self.pool.before_replay(recording.left_alone):
            self._say("a kept output could not be moved out of the graph's memory: this call launches "
                      "kernels one by one, and its graph's outputs are copies from now on")
            return self._plain(args, pairs)
        # (after the evacuation: a buffer in pool memory may lie under an output a later capture
        # placed there, which the caller holds)
        copies = recording.copies
        if copies:
            with torch.no_grad():
                for position, buffer in copies:
                    x = args[position]
                    if pairs is not None and x.shape != buffer.shape:
                        buffer = recording.region(position, buffer, x.shape)
                    buffer.copy_(x)
        if self.capture_kind == "fake":  # what a CUDA replay may do to the pool memory it does not leave alone
            # (a FakeCapture that just recorded ran already: its outputs are this call's)
            self.pool.scribble_outside(recording.left_alone, recording if recording.capture.recorded_this_call else None)
        if self.capture_kind == "cuda":
            # Let the caller's inputs go before the replay (a backward's copied gradient is freed
            # where eager's backward would free it); the replay is ordered after on the stream.
            read = {position: args[position] for position in recording.reads_args}
            args.clear()
            args = read
        recording.capture.replay()
        if self.capture_kind == "fake":  # (a CUDA replay's later kernels may write over a transient buffer)
            for position, buffer in recording.copies:
                if position in recording.transient:
                    buffer.untyped_storage().fill_(255)
        recording.replays += 1
        self.pool.replayed(recording.checkpoint)
        metas = None if pairs is None else recording.cut_metas(self.padder, pairs)
        outputs = recording.outputs_for(self.pool, args, metas)
        if isinstance(args, list):
            args.clear()
        return outputs

    def _without_recording(self, key, stale: Recording | None, args, pairs):
        forced = True  # (a first recording counts too)
        if stale is not None:  # a fixed input moved, or a promotion: record again
            moved = [i for i, ptr in zip(stale.fixed, stale.fixed_ptrs) if args[i].data_ptr() != ptr]
            if moved:
                self.notes.append(f"CUDA graphs: sizes {key}: input(s) {moved} read in place moved")
                self._after_a_move(key, stale, moved, args)
            del self.recordings[key]
            self._set_aside(stale)
            forced = any(i in self.plan.static or i in self.mutated.values() for i in moved)
            if forced and self.records_of.get(key, 0) >= MAX_RECORDINGS_OF_A_KEY:
                self._stop_key(key, f"the addresses of inputs {moved} keep changing")
        if key in self.plain_keys:
            return self._plain(args, pairs)
        if key not in self.warm:
            self.warm[key] = [x.data_ptr() if isinstance(x, torch.Tensor) else None for x in args]
            return self._plain(args, pairs)
        if len(self.recordings) >= self.max_sizes:
            self._stop_key(key, f"more sizes than cudagraph_sizes={self.max_sizes}")
            return self._plain(args, pairs)
        return self._record(key, args, pairs, forced)

    def _variant_in_place(self, key, current: Recording, args) -> tuple:
        """(A kept recording of `key` that reads in place every input where this call has it,
        made the key's current one (`current` is set aside), True), else (`current`, False).
        Looked for only when `current` misses or promotes: a copying recording gives way to a
        variant after the promotion's patience, never at once (an input alternating between a
        variant's address and a copied one would record again every other call)."""
        for variant in list(self.variants.values()):
            if variant.key == key and variant.found_stable_in_place(args) and self._fixed_in_place(variant, args):
                del self.variants[id(variant)]
                variant.replays = 0  # (replays in a row: `_after_a_move` reads how long an input stayed put)
                self.recordings[key] = variant
                self._set_aside(current)
                self._note_once(f"sizes {key}: a kept recording replayed where moved inputs returned")
                return variant, True
        return current, False

    def _set_aside(self, recording: Recording) -> None:
        """A recording that is no longer its key's current one: kept as a variant when it copies
        nothing (a variant replays only where every input it reads in place is back; one that
        copies would then be replayed in place of a recording that reads more in place), the
        key's oldest variant leaving past MAX_VARIANTS_OF_A_KEY; otherwise it leaves the pool."""
        if recording.copies or not (self.pool.reuses_memory or self.capture_kind == "fake"):
            self.pool.drop(recording)  # (without reuse, a recording keeps its outputs' memory; FakeCapture's
            # pool keeps them too, but only tests run there, and they check the variants)
            return
        self._drop_variants(recording.key, keep=MAX_VARIANTS_OF_A_KEY - 2)
        self.variants[id(recording)] = recording

    def _drop_variants(self, key, keep: int) -> None:
        """The oldest variants of `key` leave the pool, but the last `keep` (dicts keep their order)."""
        same_key = [variant for variant in self.variants.values() if variant.key == key]
        for oldest in same_key[:max(0, len(same_key) - keep)]:
            del self.variants[id(oldest)]
            self.pool.drop(oldest)

    def _patience(self, key) -> int:
        """Calls in a row at one address before a copied input of `key` is read in place."""
        return PROMOTE_AFTER << self.promotions.get(key, 0)

    def _after_a_move(self, key, stale: Recording, moved: list, args) -> None:
        """Inputs read in place only because they were found stable moved. The first time (for a
        backward's incoming gradient, the first TANGENT_MOVES_IN_PLACE times: a training loop's
        first steps move it while the allocator's blocks settle), or after `_patience` replays in
        a row at their old address (torch.cuda.empty_cache() moves a training loop's gradient
        once), the next recording reads them in place at their new address; otherwise they are
        copied. A re-read after the patience counts as a promotion (the next patience doubles),
        so inputs that rotate through new buffers cost recordings growing with the log of the calls."""
        found_stable = [i for i in moved if i in stale.found_stable]
        moves = self.moves.setdefault(key, {})
        if found_stable and stale.replays >= self._patience(key):
            self.promotions[key] = self.promotions.get(key, 0) + 1
            for position in found_stable:
                moves.pop(position, None)
        warm = self.warm.get(key)
        for position in found_stable:
            allowed = TANGENT_MOVES_IN_PLACE if position in self.plan.tangents else 1
            if moves.get(position, 0) >= allowed:
                self.demoted.setdefault(key, set()).add(position)
            elif warm is not None:
                moves[position] = moves.get(position, 0) + 1
                warm[position] = args[position].data_ptr()

    def _promote(self, key, recording: Recording, steady: list) -> bool:
        """Record again, reading in place the copied inputs that stopped moving (False when all
        of them are a graph's own outputs fed back). A backward's incoming gradient settles only
        once both forward and backward replay: read in place, it needs no buffer. Freeing that
        buffer can move it once more (the allocator's next block for it may be the buffer's), and
        a training loop's first steps move it a few times, so an input may be promoted again
        after it moved; each promotion doubles the wait for the next (`_patience`)."""
        in_pool = [position for position in steady if self.pool.resident(recording.watched[position][0])]
        for position in in_pool:  # a graph's own output fed back (h = f(h)): read in place, the
            del recording.watched[position]  # capture's drop would evacuate it, and it would move again
        steady = [position for position in steady if position not in in_pool]
        if not steady:
            return False
        self.promotions[key] = self.promotions.get(key, 0) + 1
        self.demoted.get(key, set()).difference_update(steady)
        warm = self.warm[key]
        for position in steady:
            warm[position] = recording.watched[position][0]
        return True

    def _stop_key(self, key, reason: str) -> None:
        self.plain_keys.add(key)
        self._drop_variants(key, keep=0)
        self._say(f"sizes {key} run plain launches: {reason}")

    def _note_once(self, text: str) -> None:
        note = f"CUDA graphs: {text}"
        if note not in self.notes:
            self.notes.append(note)

    def _say(self, text: str) -> None:
        self._note_once(text)
        if not self._warned:
            self._warned = True
            warnings.warn(f"tritonize: {self.name}: CUDA graphs: {text}", stacklevel=4)

    def _record(self, key, args, pairs, forced: bool):
        problem = _uncapturable_input(args) if self.capture_kind == "cuda" else None
        if problem is not None:
            return self._refuse(problem, args, pairs)
        try:
            start = self.pool.before_capture()
        except RuntimeError as err:
            return self._refuse(f"memory: {err}", args, pairs)
        fixed, found_stable = self._fixed_positions(key, args)
        transient = {position for position, x in enumerate(args)
                     if position not in fixed and self._transient_buffer(position, x)}
        in_pool = transient if self.capture_kind == "cuda" and self.pool.reuses_memory else set()
        copied, inputs, capture_args, handed_over = self._capture_inputs(args, fixed, start, in_pool)
        capture = CudaCapture(self.pool.handle(), self.pool.capture_stream(), release_cache=forced) \
            if self.capture_kind == "cuda" else FakeCapture()
        buffers = {position: [meta, None] for position, meta in copied.items() if position in in_pool}
        run = functools.partial(run_writing_mutations, self.call, self.plan.mutations, capture_args,
                                self.capture_kind == "cuda", buffers, inputs)
        del capture_args
        self.pool.busy += 1  # (a graph dropped meanwhile leaves the pool after the capture)
        try:
            outputs = capture.record(run)
        except Exception as err:  # a host sync, an allocation the capture forbids, a CPU op
            return self._refuse(f"capture failed: {type(err).__name__}: {str(err).splitlines()[0]}", args, pairs)
        finally:
            self.pool.busy -= 1
        outputs = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
        sources = self._take_back(args, inputs, handed_over)
        for position, (_, ref) in buffers.items():
            if ref.expired():  # (freed after its last read: an output may lie in its memory now)
                sources[position] = None
        specs, storages = _describe_outputs(outputs, sources, self.mutated)
        fixed = sorted(fixed)
        copies = [(position, inputs[position]) for position in copied]
        recording = Recording(capture, fixed, [args[i].data_ptr() for i in fixed], copies, specs, storages, inputs)
        recording.transient = frozenset(transient)
        recording.found_stable = found_stable
        recording.found_stable_ptrs = [(i, ptr) for i, ptr in zip(recording.fixed, recording.fixed_ptrs)
                                       if i in found_stable]
        recording.key = key
        recording.left_alone = frozenset(h.place for h in start if h.held())
        recording.released = [position for position in handed_over if position not in recording.reads_args]
        try:
            recording.checkpoint = self.pool.checkpoint(
                [x.untyped_storage().data_ptr() for x in outputs if isinstance(x, torch.Tensor)], recording.left_alone)
        except RuntimeError as err:  # (an allocator that keeps no checkpoints)
            return self._refuse(f"memory: {str(err).splitlines()[0]}", args, pairs)
        if not self.pool.reuses_memory:
            recording.capture_outputs = outputs  # (where memory is reused, the pool state says what is live)
        del outputs, copies, sources
        self._register(key, recording, sum(ref.expired() for ref, _ in handed_over.values()), forced)
        return self._replay(recording, args, pairs)

    def _register(self, key, recording: Recording, freed: int, forced: bool) -> None:
        """A new recording of `key` joins the pool (its copied inputs watched for promotion; a
        forced one counts towards the key's limit), and explain() says what it reads in place,
        copies, and freed inside the capture."""
        grown = self.padder.grown if self.padder is not None else set()
        recording.watched = {position: [None, 0] for position, _ in recording.copies if position not in grown}
        self.pool.recordings.append(recording)
        self.recordings[key] = recording
        self.records_of[key] = self.records_of.get(key, 0) + forced
        self.notes.append(f"CUDA graphs: recorded sizes {key}: {len(recording.fixed)} input(s) in place, "
                          f"{len(recording.copies)} copied"
                          + (f", {freed} freed inside the graph after their last read" if freed else ""))

    def _transient_buffer(self, position: int, x) -> bool:
        """A copied input whose buffer's bytes need not outlive a replay (each replay fills it
        first): every one but an input padding grows (a smaller call fills its first rows only,
        and the rows after must stay real rows) and a host scalar (a CPU tensor: its value is in
        the size key). On CUDA such buffers are pool memory the capture frees after their last
        read; FakeCapture writes over them after each replay (`_replay`), so the CPU tests see
        any reliance on what a replay left there."""
        grown = self.padder.grown if self.padder is not None else set()
        return isinstance(x, torch.Tensor) and position not in grown and (x.device.type != "cpu" or x.dim() > 0)

    def _capture_inputs(self, args, fixed: set, start: list, in_pool: set):
        """What the recording keeps (`inputs`: our buffers for copied inputs, our aliases of fixed
        ones), what the capture reads, and the fixed inputs handed over to the capture itself:
        where the pool reuses memory, a fixed input that is a handed-out pool storage (a forward's
        saved activation reaching the backward) is passed without the caller's reference, so the
        capture frees it after its last read and reuses its memory ({position: (weak reference to
        its storage, its metadata)}). The copied inputs come as {position: metadata}: their
        buffers are made here, or for the positions `in_pool` by the capture itself
        (`run_writing_mutations`), in pool memory that the capture reuses after their last read.
        A buffer in the default pool would stay between the caller's eager tensors (a backward's
        400 MiB incoming gradient in GPT-2) and make the allocator reserve a segment more there;
        one alive through the whole capture would grow the pool by its size."""
        handed_out = {h.ptr for h in start} if self.pool.reuses_memory else set()
        mutated = set(self.mutated.values())
        copied, inputs, handed_over = {}, list(args), {}
        with torch.no_grad():
            for position, x in enumerate(args):
                if not isinstance(x, torch.Tensor):
                    continue
                if position in fixed:
                    inputs[position] = alias_of(x)  # holding the caller's storage would keep it "live"
                    storage = x.untyped_storage()
                    if storage.data_ptr() in handed_out and position not in mutated:
                        handed_over[position] = (StorageWeakRef(storage), tensor_meta(x))
                    continue
                copied[position] = tensor_meta(x)
                inputs[position] = None if position in in_pool else empty_like_meta(copied[position]).copy_(x)
        capture_args = list(inputs)
        for position in handed_over:
            capture_args[position] = args[position]
            args[position] = inputs[position]
        return copied, inputs, capture_args, handed_over

    @staticmethod
    def _take_back(args, inputs: list, handed_over: dict) -> list:
        """After a capture: a handed-over input that someone else kept alive goes back to args as
        the caller's storage (an output may view it); one that died is no source of outputs (its
        memory may hold one now). Returns what outputs are matched against (`_describe_outputs`)."""
        sources = list(inputs)
        for position, (ref, meta) in handed_over.items():
            if ref.expired():
                sources[position] = None
            else:
                args[position] = tensor_on(torch.UntypedStorage._new_with_weak_ptr(ref.cdata), meta)
        return sources

    def _fixed_positions(self, key, args) -> tuple:
        """Inputs the recording reads in place (module text; never one that padding grows), and
        those of them read in place only because they stayed put. A key's first recording reads a
        backward's incoming gradient in place wherever it is: the warm-up call's plain launches
        left the caller's eager memory unlike a training loop's later steps, so the gradient's
        address then says nothing, and a copy would grow the pool for good by the gradient's size
        (alive at the start of the backward, its peak). If it moves, `_after_a_move` applies."""
        grown = self.padder.grown if self.padder is not None else set()
        demoted = self.demoted.get(key, set())
        warm = self.warm.get(key) or []
        first = key not in self.records_of
        fixed, found_stable = set(), set()
        for position, x in enumerate(args):
            if not isinstance(x, torch.Tensor) or position in grown:
                continue  # (a padded input is a fresh copy at every call, wherever it lands)
            ptr = x.data_ptr()
            if position in self.plan.static or position in self.mutated.values() or self.pool.resident(ptr):
                fixed.add(position)
            elif position not in demoted and position < len(warm) and (
                    warm[position] == ptr or first and position in self.plan.tangents):
                fixed.add(position)
                found_stable.add(position)
                warm[position] = ptr  # (where the gradient was read in place: a later recording reads it there)
        return fixed, frozenset(found_stable)

    def _refuse(self, reason: str, args, pairs):
        self.refusal = reason
        for key in {variant.key for variant in self.variants.values()}:
            self._drop_variants(key, keep=0)
        self._say(f"off, every call launches kernels one by one: {reason}")
        return self._plain(args, pairs)


def run_writing_mutations(call, mutations, inputs: list, hand_over: bool, buffers: dict, kept: list):
    """What a recording captures: the wrapper, then each mutated input's new value written into it.
    hand_over: the wrapper gets `inputs` itself (it empties the list, so an input it frees after
    its last read dies there: a CUDA capture runs this once); otherwise a copy (FakeCapture runs
    it at every replay). buffers: {input position: [metadata, None]} of copied inputs whose
    buffers the capture allocates first, in its pool: each is placed in `inputs` and, through our
    own alias, in `kept` (the recording's list), so the wrapper frees it after its last read and
    the capture reuses its memory (a replay's first kernels read the copy; later ones may write
    over it). The None becomes a weak reference to the buffer's storage (did it die?)."""
    for position, entry in buffers.items():
        inputs[position] = empty_like_meta(entry[0])
        kept[position] = alias_of(inputs[position])
        entry[1] = StorageWeakRef(inputs[position].untyped_storage())
    targets = [(out_position, inputs[in_position]) for out_position, in_position in mutations]
    outputs = call(inputs if hand_over else list(inputs))
    with torch.no_grad():
        for out_position, target in targets:
            target.copy_(outputs[out_position])
    return outputs


def empty_like_meta(meta: dict) -> torch.Tensor:
    """A new tensor with the size, strides and dtype in `meta` (tensor_meta's), on its device."""
    return torch.empty_strided(meta["size"], meta["stride"], dtype=meta["dtype"], device=meta["device"])


def _uncapturable_input(args) -> str | None:
    for position, x in enumerate(args):
        if isinstance(x, torch.Tensor) and x.device.type == "cpu" and x.dim() > 0:
            return f"input {position} is a CPU tensor"
    return None
