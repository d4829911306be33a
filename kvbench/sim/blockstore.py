"""Block-store layouts: where a tier puts each KV block on its device (pure bookkeeping, no I/O).

A store hands out *slots* of ``slot_bytes`` (the block size rounded up to the 4 KiB I/O alignment) and says
which ranges become free so that they may be trimmed. Two layouts, which give the drive very different write
patterns (and so different device write amplification):

- ``slot``: fixed slots with a FIFO free list. A freed slot goes to the back of the list, so it is reused
  as late as possible (fewer read-after-write hazards in flight); ``spare_slots`` beyond the cache capacity
  keep the list non-empty. Writes are random block-sized overwrites.
- ``log``: the device is cut into large segments; blocks are appended at the head segment. A segment whose
  blocks all died returns to the free list; when the head needs a segment and none is free, the oldest
  sealed segment is reclaimed and its live blocks are dropped (the tier treats them as evictions, as flash
  caches with region eviction do). Writes are sequential within segments; trims are whole segments.

Both return trims as ``(first_slot, n_slots)`` so the planner turns them into byte ranges.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import Callable

import numpy as np

from kvbench.errors import SpecError
from kvbench.units import format_bytes

ALIGN = 4096


def slot_bytes_for(block_bytes: int, align: int = ALIGN) -> int:
    """Bytes a block occupies on a device: the full block, rounded up to the I/O alignment."""
    return -(-int(block_bytes) // align) * align


class SlotStore:
    """Fixed slots, FIFO free list. ``footprint_bytes = (capacity + spare) * slot_bytes``."""

    layout = "slot"

    def __init__(self, capacity_blocks: int, slot_bytes: int, *, spare_slots: int = 64, trim: bool = False):
        if capacity_blocks < 1:
            raise SpecError("slot store: capacity below one block", "give a larger tier capacity")
        self.capacity_blocks = int(capacity_blocks)
        self.slot_bytes = int(slot_bytes)
        self.n_slots = self.capacity_blocks + max(0, int(spare_slots))
        self.trim_enabled = trim
        self._free: deque = deque(range(self.n_slots))
        self.used = 0

    @property
    def footprint_bytes(self) -> int:
        return self.n_slots * self.slot_bytes

    def alloc(self, key: int) -> tuple[int, list, list]:
        """A free slot for ``key``, keys the layout forced out to get it (none here) and trims (none)."""
        if not self._free:
            raise RuntimeError("slot store full: the tier's policy must evict before allocating")
        self.used += 1
        return self._free.popleft(), [], []

    def free(self, slot: int) -> list:
        """Release a slot; returns the ranges to trim as [(first_slot, n_slots)]."""
        self._free.append(slot)
        self.used -= 1
        return [(slot, 1)] if self.trim_enabled else []


class LogStore:
    """Append-only segments; reclaim the oldest sealed segment when no free segment is left.

    ``footprint_bytes = (ceil(capacity / segment_slots) + spare_segments) * segment_slots * slot_bytes``.
    ``alloc`` returns the keys a reclaim dropped; the caller evicts them from its policy.
    """

    layout = "log"

    def __init__(self, capacity_blocks: int, slot_bytes: int, *, segment_bytes: int = 64 << 20,
                 spare_segments: int = 1, trim: bool = False):
        if capacity_blocks < 1:
            raise SpecError("log store: capacity below one block", "give a larger tier capacity")
        self.capacity_blocks = int(capacity_blocks)
        self.slot_bytes = int(slot_bytes)
        self.segment_slots = max(1, int(segment_bytes) // self.slot_bytes)
        self.n_segments = -(-self.capacity_blocks // self.segment_slots) + max(1, int(spare_segments))
        self.n_slots = self.n_segments * self.segment_slots
        self.trim_enabled = trim
        self.slot_key = np.zeros(self.n_slots, dtype=np.uint64)
        self.slot_live = np.zeros(self.n_slots, dtype=bool)
        self.seg_live = np.zeros(self.n_segments, dtype=np.int64)
        self._free_segs: deque = deque(range(1, self.n_segments))
        self._sealed: OrderedDict = OrderedDict()      # sealed segments, oldest first (O(1) removal)
        self._head, self._pos = 0, 0
        self.used = 0
        self.reclaimed_segments = 0
        self.dropped_blocks = 0

    @property
    def footprint_bytes(self) -> int:
        return self.n_slots * self.slot_bytes

    def _trim_seg(self, seg: int) -> list:
        return [(seg * self.segment_slots, self.segment_slots)] if self.trim_enabled else []

    def alloc(self, key: int) -> tuple[int, list, list]:
        """Append slot for ``key``; returns (slot, keys dropped by a reclaim, trims)."""
        dropped, trims = [], []
        if self._pos == self.segment_slots:
            if self.seg_live[self._head] == 0:       # everything in it died while it was the head
                self._free_segs.append(self._head)
                trims += self._trim_seg(self._head)
            else:
                self._sealed[self._head] = None
            if self._free_segs:
                self._head = self._free_segs.popleft()
            else:
                seg = self._sealed.popitem(last=False)[0]
                lo = seg * self.segment_slots
                live = np.flatnonzero(self.slot_live[lo:lo + self.segment_slots])
                dropped = self.slot_key[lo + live].tolist()
                self.slot_live[lo:lo + self.segment_slots] = False
                self.used -= live.size
                self.seg_live[seg] = 0
                self.reclaimed_segments += 1
                self.dropped_blocks += live.size
                trims += self._trim_seg(seg)
                self._head = seg
            self._pos = 0
        slot = self._head * self.segment_slots + self._pos
        self._pos += 1
        self.slot_key[slot] = key
        self.slot_live[slot] = True
        self.seg_live[self._head] += 1
        self.used += 1
        return slot, dropped, trims

    def free(self, slot: int) -> list:
        """A block died (evicted/expired/moved): a segment with no live block left returns to the free list."""
        if not self.slot_live[slot]:
            return []
        self.slot_live[slot] = False
        self.used -= 1
        seg = slot // self.segment_slots
        self.seg_live[seg] -= 1
        if self.seg_live[seg] == 0 and seg != self._head:
            if self._sealed.pop(seg, 0) is not None:       # not sealed (values are None)
                return []
            self._free_segs.append(seg)
            return self._trim_seg(seg)
        return []


STORES: dict[str, Callable[..., object]] = {"slot": SlotStore, "log": LogStore}


def fit_store(layout: str, capacity_bytes: int, slot_bytes: int, *, segment_bytes: int = 64 << 20,
              spare_slots: int = 64) -> tuple[int, dict, str]:
    """A store whose footprint is at most ``capacity_bytes``: the spare room comes out of the capacity.

    Returns (cache blocks the tier's policy may hold, the store's keyword arguments, a note saying what the
    spare room cost). Slot layout: ``capacity_bytes // slot_bytes`` slots, of which up to ``spare_slots``
    (at most 1/16 of them) stay spare. Log layout: whole segments, one of them spare.
    """
    slot_bytes = int(slot_bytes)
    n_slots = int(capacity_bytes) // slot_bytes
    if layout == "log":
        seg_slots = max(1, int(segment_bytes) // slot_bytes)
        n_seg = n_slots // seg_slots
        if n_seg < 2:
            raise SpecError(f"log store: {format_bytes(capacity_bytes)} holds {n_seg} segment(s) of "
                            f"{format_bytes(seg_slots * slot_bytes)}; the log needs at least 2 (one spare)",
                            f"give --segment <= {format_bytes(max(slot_bytes, capacity_bytes // 2))} or a larger "
                            "capacity")
        blocks = (n_seg - 1) * seg_slots
        note = (f"{n_seg} segments of {format_bytes(seg_slots * slot_bytes)}, 1 spare: the cache holds {blocks} "
                f"blocks ({format_bytes(blocks * slot_bytes)}) of the {format_bytes(capacity_bytes)} given")
        return blocks, {"segment_bytes": seg_slots * slot_bytes, "spare_segments": 1}, note
    spare = min(int(spare_slots), n_slots // 16)
    blocks = n_slots - spare
    note = (f"{n_slots} slots of {format_bytes(slot_bytes)}, {spare} spare: the cache holds {blocks} blocks "
            f"({format_bytes(blocks * slot_bytes)}) of the {format_bytes(capacity_bytes)} given")
    return blocks, {"spare_slots": spare}, note


def make_store(layout: str, capacity_blocks: int, slot_bytes: int, *, trim: bool = False, **kw):
    """Build a store by layout name (``slot`` or ``log``)."""
    try:
        cls = STORES[layout]
    except KeyError:
        raise SpecError(f"unknown block-store layout {layout!r}", f"use one of {', '.join(STORES)}") from None
    return cls(capacity_blocks, slot_bytes, trim=trim, **kw)


def describe(store) -> str:
    return (f"{store.layout} store: {store.n_slots} slots of {format_bytes(store.slot_bytes)}, "
            f"footprint {format_bytes(store.footprint_bytes)}")
