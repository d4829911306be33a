"""Block-store layouts: where a tier puts each KV block on its device (pure bookkeeping, no I/O).

A store hands out *slots* of ``slot_bytes`` (the block size rounded up to the 4 KiB I/O alignment) and says
which ranges become free so that they may be trimmed. Two layouts, which give the drive very different write
patterns (and so different device write amplification):

- ``slot``: fixed slots with a FIFO free list. A freed slot goes to the back of the list, so it is reused
  as late as possible (fewer read-after-write hazards in flight); ``spare_slots`` beyond the cache capacity
  (about the reads in flight, :func:`spare_slots_for`) keep the list non-empty. Writes are random block-sized overwrites.
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

    def __init__(self, capacity_blocks: int, slot_bytes: int, *, spare_slots: int = 0, trim: bool = False):
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


def spare_slots_for(qd: int, io_bytes: int, slot_bytes: int) -> int:
    """Spare slots a slot store keeps beyond its cache so that a freed slot is not rewritten while a read of it
    may still be in flight: at most ``qd`` I/Os of ``io_bytes`` are in flight, and issued in block order they
    cover ``ceil(qd * io / slot) + 1`` slots (the +1: a window straddling two blocks), never more than ``qd``.
    (The replay's fences keep a plan exact whatever the spare; the spare only keeps fences rare.) 0 when
    nothing is asynchronous: a dry run, or a DRAM arena whose copies are synchronous."""
    if qd <= 0:
        return 0
    io = min(int(io_bytes), int(slot_bytes))
    return int(min(qd, -(-qd * io // int(slot_bytes)) + 1))


def fit_store(layout: str, capacity_bytes: int, slot_bytes: int, *, segment_bytes: int = 64 << 20,
              spare_slots: int = 0) -> tuple[int, dict, str]:
    """The store of a tier of ``capacity_bytes``: the cache holds ``capacity_bytes // slot_bytes`` blocks (a
    tier of X bytes caches X bytes of KV, as the hit-ratio curve assumes) and the store's overhead goes on top.

    Returns (cache blocks the tier's policy may hold, the store's keyword arguments, a note stating the
    overhead). Slot layout: ``spare_slots`` more slots (:func:`spare_slots_for`). Log layout: the cache in
    whole segments plus one spare segment the head can always move to.
    """
    slot_bytes = int(slot_bytes)
    blocks = int(capacity_bytes) // slot_bytes
    if layout == "log":
        seg_slots = max(1, int(segment_bytes) // slot_bytes)
        n_seg = -(-blocks // seg_slots) + 1
        extra = n_seg * seg_slots - blocks
        note = (f"the cache holds {blocks} blocks ({format_bytes(blocks * slot_bytes)}); the log store adds "
                f"{format_bytes(extra * slot_bytes)} on top (whole segments of {format_bytes(seg_slots * slot_bytes)}, "
                f"1 spare): footprint {format_bytes(n_seg * seg_slots * slot_bytes)}")
        return blocks, {"segment_bytes": seg_slots * slot_bytes, "spare_segments": 1}, note
    spare = max(0, int(spare_slots))
    note = (f"the cache holds {blocks} blocks ({format_bytes(blocks * slot_bytes)}); "
            + (f"the store adds {spare} spare slot{'s' if spare != 1 else ''} ({format_bytes(spare * slot_bytes)}) on "
               f"top for reads in flight: footprint {format_bytes((blocks + spare) * slot_bytes)}" if spare else
               "no spare slots (no read is in flight when a slot is reused)"))
    return blocks, {"spare_slots": spare}, note


def capacity_within(layout: str, limit_bytes: int, slot_bytes: int, *, segment_bytes: int = 64 << 20,
                    spare_slots: int = 0) -> int:
    """The largest capacity (whole slots, bytes) whose store, overhead included (:func:`fit_store`), fits in
    ``limit_bytes``: a tier confined to a test region caches the region less its store's overhead."""
    slot_bytes = int(slot_bytes)
    slots = int(limit_bytes) // slot_bytes
    if layout == "log":
        seg_slots = max(1, int(segment_bytes) // slot_bytes)
        blocks = (slots // seg_slots - 1) * seg_slots
    else:
        blocks = slots - max(0, int(spare_slots))
    return max(0, blocks) * slot_bytes


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
