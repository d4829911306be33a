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

from dataclasses import dataclass

import numpy as np

from kvbench.errors import SpecError


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
