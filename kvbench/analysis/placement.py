"""Placement rules: which write stream (NVMe FDP reclaim-unit handle, or stream) each write goes to (registry).

The FTL model (:mod:`kvbench.analysis.ftl`) keeps one open erase block per stream, so pages of different
streams never share an erase block. Separating writes whose lifetimes differ lets GC find blocks that died
together (few valid pages to copy): the device WAF falls; writes of one lifetime gain nothing. A rule says
which label of a write picks its stream, and where GC copies go:

- ``none``: one stream (the drive without FDP).
- ``tier``: the stream is the tier (store) the write belongs to, for one drive holding several tiers' stores
  (labels from an I/O plan's targets).
- ``lifetime``: the stream is the write's expected lifetime class, shortest first (labels from the source:
  the ``classes`` pattern, or a KV store's prediction such as prefix depth).
- ``age``: host writes all go to stream 0; GC moves the pages it copies one stream older (a page that survived a
  clean is colder). Needs no host hint: what a drive can do alone.
Classes beyond the drive's streams share its last stream.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kvbench.errors import SpecError
from kvbench.units import format_bytes


@dataclass(frozen=True)
class Placement:
    name: str
    label: str | None          # the write label that picks the stream (None: every host write in stream 0)
    gc_stream: str             # kvbench.analysis.ftl.GC_STREAMS
    rule: str                  # the rule, stated for reports

    def streams(self, labels: dict, n: int, k: int, source: str = "the write source") -> np.ndarray:
        """Stream of each of ``n`` writes on a drive with ``k`` streams, from the source's ``labels``."""
        if self.label is None or k <= 1:
            return np.zeros(n, dtype=np.int64)
        lab = labels.get(self.label)
        if lab is None:
            have = ", ".join(labels) or "none"
            raise SpecError(f"placement {self.name!r} needs {self.label} labels, which {source} does not carry "
                            f"(it has: {have})", f"use --placement age or none, or a source with {self.label} labels")
        return np.minimum(np.asarray(lab, dtype=np.int64), k - 1)


PLACEMENTS: dict[str, Placement] = {
    "none": Placement("none", None, "same", "one stream: every write shares the open erase block"),
    "tier": Placement("tier", "tier", "same", "stream = the tier (store) a write belongs to"),
    "lifetime": Placement("lifetime", "lifetime", "same",
                          "stream = the write's expected lifetime class, shortest first; GC keeps a stream's pages "
                          "in that stream"),
    "age": Placement("age", None, "age", "host writes to stream 0; GC copies one stream older per clean survived"),
}


def get_placement(name: str) -> Placement:
    try:
        return PLACEMENTS[str(name).lower()]
    except KeyError:
        raise SpecError(f"unknown placement rule {name!r}", f"choose one of: {', '.join(PLACEMENTS)}") from None


# --- the KV store's own write stream ------------------------------------------------------------------------
def store_ftl_config(top_bytes: int, slot_bytes: int, *, op: float, erase_block_bytes: int, gc: str,
                     streams: int = 1, gc_stream: str = "same"):
    """A modelled drive just larger than a store whose writes reach ``top_bytes``: at least 64 erase units
    (erase unit = min(the given one, top / 64 in whole MiB, at least 1 MiB): exactly that size, whatever the
    slot), pages of gcd(slot, erase unit) (coarsened further to keep the model <= 4M pages, never to the unit).
    (A KV block at least as large as the erase unit is written and trimmed in whole erase units: WAF 1 on any
    layout.) A given unit that is not a whole number of at least two 4 KiB pages is refused."""
    from kvbench.analysis import ftl

    ftl.erase_unit_pages(erase_block_bytes, ftl.MIN_PAGE_BYTES)           # the given unit is one the model can hold
    erase = min(int(erase_block_bytes), max(1 << 20, (top_bytes // 64) >> 20 << 20))
    # a store writes and trims whole slots, so pages of gcd(slot, erase unit) count exactly what smaller ones
    # would (a slot's pages always share their validity): the coarsest exact page, at least 4 KiB, two per unit
    page, block_pages = ftl.erase_unit_pages(erase, math.gcd(int(slot_bytes), erase), max_page_bytes=slot_bytes,
                                             too_many=lambda pg: -(-top_bytes // pg) * (1.0 + op) > (1 << 22))
    # >= 64 erase units, and enough that the spare holds the GC reserve and one open block per stream
    blocks = max(64, math.ceil((3 + streams) / op) + 1, -(-(-(-top_bytes // page)) // block_pages))
    return ftl.FtlConfig(user_bytes=blocks * block_pages * page, page_size=page, op=op, block_pages=block_pages,
                         gc=gc, streams=streams, gc_stream=gc_stream)


def lifetime_classes(slots: np.ndarray, nslots: np.ndarray, is_write: np.ndarray, classes: int) -> np.ndarray:
    """Lifetime class (0 = shortest) of each write of a store's write/trim stream: its lifetime is the number
    of store events until the next write or trim of its slot (never: longest); classes split the lifetimes
    at their quantiles. Trims get class 0 (they write nothing)."""
    n = len(slots)
    rep = np.repeat(np.arange(n), nslots)                    # one row per slot an event covers
    slot = np.repeat(slots, nslots) + (np.arange(rep.size) - np.repeat(np.cumsum(nslots) - nslots, nslots))
    order = np.lexsort((rep, slot))
    s, e = slot[order], rep[order]
    nxt = np.full(rep.size, np.iinfo(np.int64).max, dtype=np.int64)
    same = s[1:] == s[:-1]
    nxt[order[:-1][same]] = e[1:][same]
    never = np.iinfo(np.int64).max
    life = np.full(n, never, dtype=np.int64)
    np.minimum.at(life, rep, np.where(nxt == never, never, nxt - rep))
    out = np.zeros(n, dtype=np.int64)
    w = np.flatnonzero(is_write)
    if classes <= 1 or w.size == 0:
        return out
    finite = life[w][life[w] < never]
    cuts = np.quantile(finite, np.arange(1, classes) / classes) if finite.size else np.zeros(classes - 1)
    out[w] = np.searchsorted(cuts, life[w], side="left")
    return out


def kv_store_waf(trace, *, block_bytes: int, l3_blocks: int, layout: str, rule: str, streams: int, op: float,
                 erase_block_bytes: int, gc: str, admission: str = "all", writes: float = 3.0,
                 from_request: int = 0) -> dict:
    """Device WAF of the L3 store's own write/trim stream (the tier simulation at ``l3_blocks``, trim on) on one
    stream and on ``streams`` streams under ``rule``. Lifetime labels are the lifetimes the simulation measured
    (an oracle: the most a lifetime predictor can buy). ``from_request``: the requests before it only warm the
    store (a plan's --warmup): the whole trace is simulated, the FTL is fed the writes and trims from it on."""
    from kvbench.analysis import ftl
    from kvbench.sim.tiers import EV_TRIM, EV_WRITE, Hierarchy, HierarchySpec, TierSpec

    p = get_placement(rule)
    if p.label == "tier":
        raise SpecError("plan models one L3 store: placement by tier needs several stores on one drive",
                        "use kvbench ftl --plan PLAN.npy --placement tier, or --placement lifetime/age here")
    probe = HierarchySpec(tiers=(TierSpec("l3", 1),), block_bytes=block_bytes)
    slot = probe.slot_bytes
    h = Hierarchy(HierarchySpec((TierSpec("l3", max(1, l3_blocks) * slot, layout=layout, trim=True,
                                          admission=admission),), block_bytes))
    _, ev = h.run(trace.timestamp_s, trace.offsets, trace.keys)
    ev = ev[((ev["op"] == EV_WRITE) | (ev["op"] == EV_TRIM)) & (ev["request"] >= from_request)]
    w = ev["op"] == EV_WRITE
    if not w.any():
        return {"rule": p.name, "streams": streams, "waf": None, "waf_one_stream": None,
                "note": "the policy writes nothing to the store" + (" after the warm-up" if from_request else "")}
    top = int((ev["slot"] + ev["nslots"]).max()) * slot
    ops = np.where(w, ftl.OP_WRITE, ftl.OP_TRIM).astype(np.uint8)
    ext = ftl.bytes_to_pages(ops, ev["slot"].astype(np.int64) * slot, ev["nslots"].astype(np.int64) * slot,
                             store_ftl_config(top, slot, op=op, erase_block_bytes=erase_block_bytes, gc=gc).page_size)
    labels = {"lifetime": lifetime_classes(ev["slot"].astype(np.int64), ev["nslots"].astype(np.int64), w, streams)}
    one_cfg = store_ftl_config(top, slot, op=op, erase_block_bytes=erase_block_bytes, gc=gc)
    sep_cfg = store_ftl_config(top, slot, op=op, erase_block_bytes=erase_block_bytes, gc=gc, streams=streams,
                               gc_stream=p.gc_stream)
    one = ftl.simulate(one_cfg, extents=ext, writes=writes, warmup=0.5).waf
    sep = ftl.simulate(sep_cfg, extents=(*ext, p.streams(labels, len(ev), streams, source="the KV store")),
                       writes=writes, warmup=0.5).waf
    return {"rule": p.name, "statement": p.rule, "streams": streams, "waf": sep, "waf_one_stream": one,
            "waf_reduction": 1.0 - sep / one if one else None, "store_writes": int(w.sum()),
            "source": (f"FTL model fed the tier simulation's L3 writes and trims ({layout} store, "
                       f"{l3_blocks:,} blocks"
                       + (f"; from request {from_request:,}, the warm-up's end" if from_request else "")
                       + f"), op {op:g}, {format_bytes(one_cfg.block_pages * one_cfg.page_size)} "
                       "erase units" + ("; lifetime classes from the lifetimes the simulation measured (an "
                                        "oracle: the most a predictor can buy)" if p.label == "lifetime" else ""))}
