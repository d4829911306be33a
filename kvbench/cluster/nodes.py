"""Serving nodes of a simulated cluster: each a :class:`kvbench.sim.tiers.Hierarchy` and a prefill queue.

The tier hierarchy is the one ``replay kv`` simulates, built from the same spec, so one node is exactly a
``replay kv --dry-run``:

* :func:`share_tier`: every node's L4 is *the same* tier (one policy, store and residency map), so a block one
  node wrote into the pool is a hit for every node, its capacity is the pool's, and evictions are global. The
  per-node counters stay per node (who read and wrote what). Sharing reaches into the tier records
  (``Hierarchy.tier(name)``: ``policy``, ``store``, ``meta``), which only the Python
  :class:`~kvbench.sim.tiers.ReferenceHierarchy` keeps as objects: nodes with an L4 pool run it; nodes without
  one run the compiled :class:`~kvbench.sim.tiers.Hierarchy` (identical results: tests/cluster/test_nodes.py).
* :meth:`Node.cached_prefix`: the leading blocks of a request a node holds in its own tiers (L1-L3), asked of
  each tier's policy with ``contains`` (no recency change): what a cache-aware router's index knows.

The queue: ``lanes`` prefill slots (GPUs) per node, first come first served; a request starts on the lane
that frees first, loads its hits, then prefills its uncached suffix.
"""

from __future__ import annotations

from kvbench.sim.tiers import Hierarchy, HierarchySpec, ReferenceHierarchy

LOCAL_TIERS = ("l1", "l2", "l3")
SHARED_TIERS = ("l4",)                  # one pool for every node (share_tier)


class Lanes:
    """A node's prefill lanes (GPUs): first come first served, a request on the lane that frees first."""

    def __init__(self, lanes: int):
        self.free = [0.0] * lanes

    def load(self, now: float) -> float:
        """Outstanding prefill work (s): what the lanes still have queued or running at ``now``."""
        return sum(f - now for f in self.free if f > now)

    def start(self, now: float) -> tuple[int, float]:
        """The lane a request arriving at ``now`` takes and when it starts there."""
        lane = min(range(len(self.free)), key=lambda j: (self.free[j], j))
        return lane, max(now, self.free[lane])

    def finish(self, lane: int, done: float) -> None:
        self.free[lane] = done


class Node:
    """One serving node: its tier hierarchy, its prefill lanes and its L4 link calendar."""

    def __init__(self, index: int, spec: HierarchySpec, lanes: int, link):
        self.index = index
        # a shared tier is shared as Python objects (share_tier); the compiled Hierarchy keeps its tiers in arrays
        shared = any(t.name in SHARED_TIERS for t in spec.tiers)
        self.hier = ReferenceHierarchy(spec) if shared else Hierarchy(spec)
        self.lanes = Lanes(lanes)
        self.link = link
        self.store_log: list = []       # its L3/L4 write and trim events, per request: kvbench.cluster.wear

    def load(self, now: float) -> float:
        return self.lanes.load(now)

    def cached_prefix(self, keys, now: float) -> int:
        """Leading blocks of ``keys`` held (and not past their retention) in this node's own tiers (L1-L3), by
        the policies' side-effect-free ``contains``: recency untouched."""
        return self.hier.cached_prefix(keys, now, LOCAL_TIERS)

    def held(self) -> set:
        """Block keys this node holds in L1-L3 (for duplication across nodes)."""
        out: set = set()
        names = {t.spec.name for t in self.hier.tiers}
        for n in LOCAL_TIERS:
            if n in names:
                out |= self.hier.resident(n)
        return out


def share_tier(nodes: list[Node], name: str = "l4") -> None:
    """Make tier ``name`` of every node the first node's: one pool, one capacity, one residency map."""
    if not nodes:
        return
    try:
        pool = nodes[0].hier.tier(name)
    except KeyError:
        return
    for node in nodes[1:]:
        t = node.hier.tier(name)
        t.policy, t.store, t.meta = pool.policy, pool.store, pool.meta
