"""Serving nodes of a simulated cluster: each a :class:`kvbench.sim.tiers.Hierarchy` and a prefill queue.

The tier hierarchy is the one ``replay kv`` simulates, built from the same spec, so one node is exactly a
``replay kv --dry-run``:

* :func:`node_hierarchies`: every node's L4 is *the same* tier (one policy, store and residency map), so a
  block one node wrote into the pool is a hit for every node, its capacity is the pool's, and evictions are
  global. The per-node counters and admission policies stay per node (who read and wrote what). Compiled, the
  nodes are the members of one :class:`~kvbench.sim.shared_pool.SharedPool` (one state; identical results:
  tests/cluster/test_nodes.py); where some tier's admission policy has no compiled form, they are
  Python :class:`~kvbench.sim.tiers.ReferenceHierarchy` objects whose L4 records are the first node's
  (:func:`share_tier`). Nodes without an L4 pool are separate compiled
  :class:`~kvbench.sim.tiers.Hierarchy` objects (tests/cluster/test_nodes.py).
* :meth:`Node.cached_prefix`: the leading blocks of a request a node holds in its own tiers (L1-L3), asked of
  each tier's policy with ``contains`` (no recency change): what a cache-aware router's index knows.

The queue: ``lanes`` prefill slots (GPUs) per node, first come first served; a request starts on the lane
that frees first, loads its hits, then prefills its uncached suffix.
"""

from __future__ import annotations

from kvbench.sim.shared_pool import SharedPool
from kvbench.sim.tiers import Hierarchy, HierarchySpec, ReferenceHierarchy, compiled

LOCAL_TIERS = ("l1", "l2", "l3")
SHARED_TIERS = ("l4",)                  # one pool for every node (share_tier)


class Lanes:
    """A node's prefill lanes (GPUs): first come first served, a request on the lane that frees first."""

    def __init__(self, lanes: int):
        self.free = [0.0] * lanes

    def load(self, now: float) -> float:
        """Outstanding prefill work (s): what the lanes still have queued or running at ``now``."""
        s = 0                           # as sum(): an idle node's load is 0
        for f in self.free:
            if f > now:
                s += f - now
        return s

    def start(self, now: float) -> tuple[int, float]:
        """The lane a request arriving at ``now`` takes and when it starts there."""
        lane = min(range(len(self.free)), key=lambda j: (self.free[j], j))
        return lane, max(now, self.free[lane])

    def finish(self, lane: int, done: float) -> None:
        self.free[lane] = done


class Node:
    """One serving node: its tier hierarchy, its prefill lanes and its L4 link calendar."""

    def __init__(self, index: int, spec: HierarchySpec, lanes: int, link, hier=None):
        self.index = index
        self.hier = hier if hier is not None else node_hierarchies(spec, 1)[0]
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


def pool_compiled(spec: HierarchySpec) -> bool:
    """Whether nodes sharing an L4 pool run compiled (a SharedPool): every tier's admission policy has a
    compiled form. Otherwise they run the reference (same results, Python speed)."""
    return compiled(spec)


def node_hierarchies(spec: HierarchySpec, n_nodes: int, max_request_blocks: int | None = None) -> list:
    """The tier hierarchies of ``n_nodes`` nodes of ``spec`` (``max_request_blocks``: the trace's longest request),
    the dispatch in one place: without a shared tier, a compiled Hierarchy each; with the L4 pool, the members of
    one compiled SharedPool, or (:func:`pool_compiled` false) reference hierarchies sharing it as objects."""
    if not any(t.name in SHARED_TIERS for t in spec.tiers):
        return [Hierarchy(spec) for _ in range(n_nodes)]
    if pool_compiled(spec):
        return SharedPool(spec, n_nodes, max_request_blocks).members
    hiers = [ReferenceHierarchy(spec) for _ in range(n_nodes)]
    share_tier(hiers, SHARED_TIERS[0])
    return hiers


def share_tier(hiers: list, name: str = "l4") -> None:
    """Make tier ``name`` of every (reference) hierarchy the first one's: one pool, one capacity, one residency
    map (each keeps its counters and admission policy)."""
    if not hiers:
        return
    try:
        pool = hiers[0].tier(name)
    except KeyError:
        return
    for h in hiers[1:]:
        t = h.tier(name)
        t.policy, t.store, t.meta = pool.policy, pool.store, pool.meta
