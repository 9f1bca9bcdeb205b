"""The memory of CUDA graph recordings (issue 18; design: docs/design.md, "CUDA graphs", Memory).

All recordings of a device capture into one private memory pool (`GraphPool`). A replay writes
again all the pool memory its capture used; nothing is allocated during a replay.

- **Handed-out storages.** Each replay hands its outputs out as new storages over their pool
  memory (`storage_over`: no ownership). The pool lists them (`Handed`, weak references), so it
  knows which pool memory the caller still holds.
- **What a replay may overwrite.** Everything in the pool except the memory that stayed live
  through its whole capture (`kept`: the storages live when the capture began and still alive at
  its end). Before a replay every handed-out storage the caller holds outside that memory is
  evacuated (`evacuate`: its bytes copied to fresh memory, the storage re-pointed), so an output
  the caller kept is never overwritten.
- **What the allocator knows (CUDA).** After a capture the pool's allocator state is saved
  (`Checkpoint`) and the capture's own output tensors are dropped: their blocks count as free
  while replays write them, which is harmless because only captures allocate from the pool.
  Before the next capture the allocator state of the recording replayed last is restored and
  every live handed-out storage is given the allocator's deleter (`before_capture`), so the new
  capture sees exactly the live memory, and a storage that dies during it (a backward's saved
  activation after its last use) frees its block for the capture to reuse. That reuse is what
  keeps training with graphs near the memory of plain launches.

`FakeCapture` (tests on the CPU) keeps its outputs and never reuses memory: `reuses_memory` is
off there, and the rules above reduce to evacuating what the caller holds.
"""
from __future__ import annotations

import dataclasses
import os

import torch
from torch.multiprocessing.reductions import StorageWeakRef

# torch 2.12 and later can re-point a storage at other memory (every view follows); 2.11 cannot
REPOINT_STORAGES = hasattr(torch.UntypedStorage, "_swap_data_ptr_")


# ----------------------------------------------------------------------------- storages


def storage_over(data_ptr: int, nbytes: int, device: torch.device):
    """A new storage object over memory it does not own."""
    return torch._C._construct_storage_from_data_pointer(data_ptr, device, nbytes)


def tensor_on(storage, meta: dict) -> torch.Tensor:
    if meta["device"].type == "cuda":
        return torch._C._construct_CUDA_Tensor_From_Storage_And_Metadata(meta, storage)
    return torch.empty(0, dtype=meta["dtype"], device=meta["device"]).set_(
        storage, meta["storage_offset"], meta["size"], meta["stride"])


def tensor_meta(x: torch.Tensor) -> dict:
    """What `tensor_on` needs to build a tensor like x over another storage."""
    return {"size": tuple(x.shape), "stride": tuple(x.stride()), "dtype": x.dtype, "device": x.device,
            "storage_offset": x.storage_offset()}


def alias_of(x: torch.Tensor) -> torch.Tensor:
    """The same memory through a storage of our own, which does not count as the caller's."""
    storage = x.untyped_storage()
    return tensor_on(storage_over(storage.data_ptr(), storage.nbytes(), x.device), tensor_meta(x))


def evacuate(storage, tensors) -> bool:
    """Move a handed-out storage's bytes out of pool memory, so that a replay cannot overwrite
    them: copy them to fresh memory and re-point the storage (so every view of it follows) with
    torch's `_swap_data_ptr_`. Where torch lacks it (2.11), re-point the tensors we handed out
    (`tensors`: weak references) with `.data`, which works only when the caller made no views of
    its own. False when neither can be done."""
    if REPOINT_STORAGES:
        storage._swap_data_ptr_(copied(storage))
        return True
    alive = [t for t in (ref() for ref in tensors) if t is not None]
    if torch._C._storage_Use_Count(storage._cdata) != 1 + len(alive):  # (ours, and those tensors)
        return False
    fresh = copied(storage)
    for t in alive:
        t.data = tensor_on(fresh, tensor_meta(t))
    return True


def copied(storage):
    fresh = torch.empty(storage.nbytes(), dtype=torch.uint8, device=storage.device).untyped_storage()
    fresh.copy_(storage)
    return fresh


class Handed:
    """A storage handed out over pool memory: a weak reference to it, the weak references to the
    tensors built on it (evacuate's route without storage re-pointing), where it is ((address,
    bytes): `place`), and the recording whose replay made it."""

    __slots__ = ("ref", "tensors", "place", "owner")

    def __init__(self, storage, place: tuple, tensors, owner):
        self.ref = StorageWeakRef(storage)
        self.tensors = tensors
        self.place = place
        self.owner = owner

    @property
    def ptr(self) -> int:
        return self.place[0]

    def held(self) -> bool:
        return not self.ref.expired()

    def storage(self):
        return torch.UntypedStorage._new_with_weak_ptr(self.ref.cdata)

    def evacuate(self) -> bool:
        storage = self.storage()
        return evacuate(storage, self.tensors)


@dataclasses.dataclass
class Checkpoint:
    """The pool's allocator state right after a capture: the blocks we know were allocated in it
    (the capture's outputs and the handed-out storages it left alone), and the others (memory a
    library or earlier capture keeps for the program's life; none is expected)."""

    state: object
    ptrs: frozenset
    others: frozenset
    segments: frozenset  # the pool's segments then (all must still exist for a restore)


def native_allocator() -> bool:
    """The pool's allocator state can be saved and restored: torch's native caching allocator
    (not cudaMallocAsync, which keeps no checkpoints), without expandable segments (which torch
    asserts on when restoring)."""
    config = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "") + "," + os.environ.get("PYTORCH_ALLOC_CONF", "")
    if "expandable_segments:true" in config.replace(" ", "").lower():
        return False
    return torch.cuda.get_allocator_backend() == "native"


# ----------------------------------------------------------------------------- the pool


class GraphPool:
    """The recordings of one device, sharing one memory pool (see the module's text)."""

    def __init__(self, kind: str, device: torch.device):
        self.kind = kind
        self.device = device
        self.reuses_memory = kind == "cuda" and native_allocator()
        self._handle = None
        self._stream = None
        self.recordings: list = []
        self.retired: list = []  # dropped recordings whose outputs the caller holds and we could not move
        self.handed: list[Handed] = []
        self.pending: list = []  # recordings of compiled graphs that went, to release
        self.busy = 0  # inside a capture or an evacuation pass: releases wait in `pending`
        self.last: Checkpoint | None = None  # the allocator state of the recording replayed last

    def handle(self):
        """The CUDA memory pool's id. torch frees a pool once no graph uses it, and a capture into
        a freed pool's id fails an allocator assertion, so an emptied pool gets a new id."""
        if self._handle is None and self.kind == "cuda":
            self._handle = torch.cuda.graph_pool_handle()
        return self._handle

    def capture_stream(self):
        """The side stream every capture into this pool runs on (one stream, so that the
        allocator's blocks of one capture are reusable by the next)."""
        if self._stream is None:
            self._stream = torch.cuda.Stream(self.device)
        return self._stream

    def hand_out(self, storage, place: tuple, tensors, owner) -> None:
        """List a storage handed out over pool memory at `place` (address, bytes)."""
        self.handed.append(Handed(storage, place, tensors, owner))

    def live(self) -> list[Handed]:
        """The handed-out storages the caller still holds (and forget the others)."""
        self.handed = [h for h in self.handed if h.held()]
        return self.handed

    def _protect(self, leaves_alone) -> bool:
        """Evacuate every held storage h for which leaves_alone(h) is false, and forget those the
        caller dropped. False when one could not be moved: it stays listed, its recording hands
        out copies from now on (`copy_out`), and the caller must run plain."""
        remaining, moved_all = [], True
        self.busy += 1
        try:
            for h in self.handed:
                if not h.held():
                    continue
                if leaves_alone(h):
                    remaining.append(h)
                elif not h.evacuate():
                    h.owner.copy_out = True
                    remaining.append(h)
                    moved_all = False
        finally:
            self.busy -= 1
        self.handed = remaining
        if self.retired:
            owners = {id(h.owner) for h in remaining}
            self.retired = [r for r in self.retired if id(r) in owners]
            self._forget_emptied()
        return moved_all

    def before_replay(self, kept: frozenset) -> bool:
        """Evacuate every held storage outside `kept` (the memory a replay leaves alone); False
        when one could not be moved (the call must then run plain)."""
        self.release_pending()
        if not self.handed:  # (the common case of a step whose outputs all died)
            if self.retired:
                self.retired.clear()
                self._forget_emptied()
            return True
        return self._protect(lambda h: h.place in kept)

    def replayed(self, checkpoint: Checkpoint | None) -> None:
        if checkpoint is not None:
            self.last = checkpoint

    # -------------------------------------------------------------- the allocator (CUDA)

    def before_capture(self) -> list[Handed]:
        """Bring the allocator's view of the pool in line with the live handed-out storages (CUDA,
        when memory is reused), and return them: what the capture begins with."""
        self.release_pending()
        live = self.live()
        if not self.reuses_memory or self.last is None:
            return list(live)
        self.busy += 1  # (no recording leaves while the allocator's state is being set)
        try:
            return self._restore(self.last)
        finally:
            self.busy -= 1

    def _restore(self, last: Checkpoint) -> list[Handed]:
        if not self._protect(lambda h: h.ptr in last.ptrs):  # (not expected: every replay evacuates them)
            raise RuntimeError("a kept output outside the pool's last state could not be moved before a capture")
        live = self.live()
        index = self.device.index
        torch.cuda.synchronize(self.device)
        owned = {h.ptr for h in live if torch._C._has_Standard_Deleter(h.ref.cdata)}
        if not torch._C._cuda_checkPoolLiveAllocations(index, self.handle(), owned | last.others):
            # (restoring would free memory someone holds: leave the allocator as it is)
            raise RuntimeError("the graph pool holds memory that no recording accounts for")
        if not last.segments <= self._layout()[0]:
            # (an allocation that failed inside a capture gave free segments back to the device:
            # torch's restore would fail halfway, with every block of the pool freed)
            raise RuntimeError("the graph pool gave memory back since its last state was saved")
        adopt = [h.ref.cdata for h in live if h.ptr not in owned]
        torch._C._cuda_setCheckpointPoolState(index, last.state, [], adopt)
        for ptr in last.ptrs - {h.ptr for h in live}:
            torch._C._cuda_cudaCachingAllocator_raw_delete(ptr)
        return list(live)

    def checkpoint(self, output_ptrs, kept: frozenset) -> Checkpoint | None:
        """The allocator state after a capture (CUDA, when memory is reused), taken while the
        capture's outputs are alive. `output_ptrs`: the storages of all of them (also the new values
        of mutated inputs, which die once written into the inputs); those in the pool are known."""
        if not self.reuses_memory:
            return None
        state = torch._C._cuda_getCheckpointState(self.device.index, self.handle())
        segments, blocks = self._layout()
        known = (frozenset(output_ptrs) & blocks) | frozenset(ptr for ptr, _ in kept)
        return Checkpoint(state, known, frozenset(blocks - known), frozenset(segments))

    def _layout(self) -> tuple[set, set]:
        """The addresses of this pool's segments and of its allocated blocks now (a snapshot of
        the allocator: around captures only)."""
        handle = tuple(self.handle())
        segments, blocks = set(), set()
        for segment in torch.cuda.memory_snapshot():
            if tuple(segment.get("segment_pool_id", ())) != handle:
                continue
            address = segment["address"]
            segments.add(address)
            for block in segment["blocks"]:
                if block["state"] == "active_allocated":
                    blocks.add(address)
                address += block["size"]
        return segments, blocks

    def scribble_outside(self, left_alone: frozenset, spare=None) -> None:
        """FakeCapture (tests on the CPU): write garbage (all bytes 0xff: NaN in floats) over the
        recordings' output memory outside `left_alone`, as a CUDA replay may write over any pool
        memory its capture did not leave alone. A test then fails wherever a tensor the caller
        holds was left there (the rules above failed to evacuate it). `spare`: a recording whose
        outputs this call already wrote."""
        for recording in self.recordings:
            if recording is spare:
                continue
            for ptr, nbytes, device in recording.storages:
                if (ptr, nbytes) not in left_alone:
                    storage_over(ptr, nbytes, device).fill_(255)

    # -------------------------------------------------------------- recordings leaving

    def resident(self, data_ptr: int) -> bool:
        """True for memory a recording of this pool owns (not the addresses of other recordings'
        fixed inputs: the tensors there may have died, and a fresh tensor taken their place)."""
        return any(r.owns(data_ptr) for r in self.recordings)

    def release_later(self, *groups: dict) -> None:
        """A compiled graph went: its recordings (the values of `groups`) leave the pool now, or,
        where this runs from the garbage collector during a capture or an evacuation pass
        (`busy`), right after it."""
        self.pending.extend(groups)
        if not self.busy:
            self.release_pending()

    def release_pending(self) -> None:
        while self.pending and not self.busy:
            recordings = self.pending.pop()
            for recording in list(recordings.values()):
                if recording in self.recordings:
                    self.drop(recording)
            recordings.clear()

    def drop(self, recording) -> None:
        """Forget a recording, evacuating the outputs of its replays that the caller still holds
        (a later capture may reuse their memory). One that cannot be moved keeps the recording (and
        its memory) in `retired` while the caller holds it."""
        if not self._protect(lambda h: h.owner is not recording):
            self.retired.append(recording)
        self.recordings.remove(recording)
        self._forget_emptied()

    def _forget_emptied(self) -> None:
        """An emptied pool takes a new id at its next capture (torch may have freed this one)."""
        if not self.recordings and not self.retired:
            self._handle = None
            self.last = None


_POOLS: dict = {}  # (capture kind, device) -> GraphPool: one pool per device, as the allocator has


def pool_for(kind: str, device: torch.device) -> GraphPool:
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    key = (kind, str(device))
    if key not in _POOLS:
        _POOLS[key] = GraphPool(kind, device)
    return _POOLS[key]
