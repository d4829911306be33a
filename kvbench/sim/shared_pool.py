"""N compiled tier hierarchies whose last tier is one pool (a cluster's shared L4), in one state.

The compiled form of :func:`kvbench.cluster.nodes.share_tier` (reference hierarchies whose last tier's policy,
store and residency map are the first node's): the kernel (:mod:`kvbench.sim.tiers_kernel`) runs each member as
it runs a :class:`~kvbench.sim.tiers.Hierarchy`, unchanged; this module lays the members out in one buffer
with the layout functions of :mod:`kvbench.sim.tiers` and keeps the pool's row current in the member that runs.
"""

from __future__ import annotations

import numpy as np

from kvbench.errors import SpecError
from kvbench.sim.tiers import (TIER_NAMES, Hierarchy, HierarchySpec, _aligned_zeros, _init_tier, _lay_tier,
                               _region_spans)


class SharedPool:
    """``n_nodes`` compiled hierarchies of one spec whose last tier (a cluster's L4) is one pool, in one state.

    The compiled form of the reference's sharing (:func:`kvbench.cluster.nodes.share_tier`: every node's last
    tier is the first node's policy, store and residency map; its counters and its admission policy stay the
    node's own). One int64 buffer holds a header per node (its tier rows and globals, as a Hierarchy's state
    begins) and then the regions of every tier instance (each node's own tiers, the pool once) and of each node's
    admission arrays; member i's state is the buffer from its header on (a view), its globals point at the same
    regions, its rows at its own tiers and, for the last tier, at the pool's. So the kernel runs a member as it
    runs a Hierarchy, unchanged.

    A tier row mixes the pool's state (lists, free lists, store positions) with the node's counters and
    admission fields (``NODE_FIELDS``): the pool's part is current in the row of the member that ran last
    (``owner``), and :meth:`activate` copies it (and the request mark, which must never repeat across nodes: a
    slot's mark says a request wrote it) into the next member's row before that member runs or is inspected.
    Nodes are laid out whole at once (the largest pool a tier can need; pages are touched as they fill), for
    requests of up to ``max_request_blocks`` blocks: a longer request is an error, not a relayout.
    """

    def __init__(self, spec: HierarchySpec, n_nodes: int, max_request_blocks: int | None = None):
        from kvbench.sim import tiers_kernel as K

        if n_nodes < 1:
            raise SpecError("a shared pool needs at least one node", "give --nodes 1 or more")
        self.spec, self.n = spec, int(n_nodes)
        members = [_PoolMember(self, i) for i in range(self.n)]
        m0 = members[0]
        T = len(m0._sizes)
        self.shared = T - 1                    # the pool: the last tier
        if T > 4:
            raise SpecError("more than four tiers", "give at most l1..l4")
        pec = max(256, max(0, int(max_request_blocks or 0)) + 16)
        self.most = most = pec - 16            # the longest request the layout takes
        self.hdr = hdr = -(-(K.GB + K.NG) // K.NW) * K.NW          # a header per node, on cache lines
        size = {n: 0 for n in K.INT_ARRAYS + K.FLOAT_ARRAYS}
        size["TTL"] = 4
        inst = [(i, t) for i in range(self.n) for t in range(self.shared)] + [(-1, self.shared)]
        rows = np.zeros((len(inst), K.NFIELDS), dtype=np.int64)
        for k, (_, t) in enumerate(inst):
            nmax = Hierarchy._pool_max(m0._sizes[t], pec)
            _lay_tier(K, rows[k], m0._sizes[t], nmax, nmax, pec, size)
        adm = m0._adm["size"]                  # each node's own admission arrays, side by side
        for n in K.FIXED_ARRAYS:
            size[n] = self.n * adm[n]
        spans, ev_base = _region_spans(K, size, self.n * hdr)
        evcap = max(1024, 2 * m0._ev_need(most))
        buf = _aligned_zeros(ev_base + 8 * evcap)
        arrs = {n: (buf[b:b + w].view(np.float64) if n in K.FLOAT_ARRAYS else buf[b:b + w])
                for n, (b, w) in spans.items()}
        arrs["TTL"][:T] = [z["ttl"] or 0.0 for z in m0._sizes]
        for k, (_, t) in enumerate(inst):
            _init_tier(K, rows[k], m0._sizes[t], arrs)
        xlen = int(rows[:, K.NN].max()) + pec + 16
        for i, m in enumerate(members):
            off = i * hdr
            A = buf[off:]
            I, G = A[:K.GB].reshape(4, K.NFIELDS), A[K.GB:K.GB + K.NG]
            own = {}
            for n, (b, w) in spans.items():
                if n in K.FIXED_ARRAYS:
                    b += i * adm[n]
                    own[n] = arrs[n][i * adm[n]:(i + 1) * adm[n]]
                G[getattr(K, "B_" + n)] = b - off
            G[K.B_EV], G[K.G_EVCAP] = ev_base - off, evcap
            G[K.G_SUMSEGS], G[K.G_MAXSEGS] = sum(m0._segs), max(m0._segs)
            I[:self.shared] = rows[i * self.shared:(i + 1) * self.shared]
            I[self.shared] = rows[-1]
            m._adm_init(I, own)
            m._set_globals(G)
            m._attach(A, I[:T], G, pec, np.zeros(xlen, np.int64))
        self.buf, self.members = buf, members
        keep = sorted(set(range(K.NFIELDS)) - set(self.node_fields(K)))
        cuts = [j + 1 for j in range(len(keep) - 1) if keep[j + 1] != keep[j] + 1]
        # the pool's fields of the last row as runs of consecutive fields: (first word, end) from a header
        self._pool_runs = [(self.shared * K.NFIELDS + r[0], self.shared * K.NFIELDS + r[-1] + 1)
                           for r in np.split(np.array(keep), cuts)]
        self._tiers_of = {}             # names -> the tier indices cached_prefix asks
        self._prefix = np.zeros(self.n, np.int64)
        self.owner = 0
        self._mark = K.GB + K.G_MARK
        self._K = K
        m0._load_kernel()

    @staticmethod
    def node_fields(K) -> tuple:
        """A tier row's fields that stay each node's own in the pool's row: its counters and its admission
        policy's (the reference keeps ``c`` and ``admission`` per node; its admission arrays are its own)."""
        return (K.C_HIT_BLOCKS, K.C_HIT_READS, K.C_CREATE, K.C_PROMOTE, K.C_DEMOTE_READS, K.C_DEMOTE_WRITES,
                K.C_TRIMS, K.C_EVICT, K.C_EXPIRE, K.C_RECLAIM, K.C_PEAK, K.C_REJECT,
                K.ADM, K.ADMG0, K.ADMG1, K.ADEPTH, K.ABEYOND, K.ALIMIT, K.AMINB, K.AWIN, K.SKB, K.SKW, K.SKSH,
                K.SKSAMP, K.SKINC, K.SKRES, K.GAPK, K.GAPSET)

    def activate(self, i: int) -> None:
        """Make member i's copy of the pool's row (and the request mark) current, before it runs or is read."""
        o = self.owner
        if i != o:
            src, dst, buf = o * self.hdr, i * self.hdr, self.buf
            for a, b in self._pool_runs:
                buf[dst + a:dst + b] = buf[src + a:src + b]
            buf[dst + self._mark] = buf[src + self._mark]
            self.owner = i

    def cached_prefix(self, keys, now: float, names=TIER_NAMES) -> list[int]:
        """Every member's :meth:`Hierarchy.cached_prefix` of ``keys`` over its tiers in ``names``, in one call."""
        tiers = self._tiers_of.get(names)
        if tiers is None:
            tiers = self._tiers_of[names] = np.array(self.members[0]._present(names), np.int64)
        if self.shared in tiers:
            return [mb.cached_prefix(keys, now, names) for mb in self.members]
        k = np.asarray(keys, dtype=np.uint64).view(np.int64)
        self._K.cached_prefix_nodes(self.buf, self.hdr, tiers, k, float(now), self._prefix)
        return self._prefix.tolist()


class _PoolMember(Hierarchy):
    """One node of a :class:`SharedPool`: a compiled Hierarchy whose state is its view of the pool's buffer."""

    def __new__(cls, *args, **kwargs):
        return object.__new__(cls)

    def __init__(self, pool: SharedPool, index: int):
        self.pool, self.index = pool, index
        self._describe(pool.spec)

    def _attach(self, A, I, G, pec: int, xbuf) -> None:
        self._A, self._I, self._G, self._pec, self._xbuf = A, I, G, pec, xbuf
        self._one = None
        self._evcap = int(G[self._K.G_EVCAP])
        self._req = 0

    def _sync(self) -> None:
        self.pool.activate(self.index)

    def _build(self, pec: int) -> None:
        raise RuntimeError(f"shared pool: a request of more than {self.pool.most} blocks (laid out for "
                           f"{self.pool.most}; give SharedPool the trace's longest request)")

    def _grow_events(self) -> None:            # laid out for the longest request: cannot happen
        raise RuntimeError("shared pool: the event rows ran out")

    def cached_prefix(self, keys, now: float, names=TIER_NAMES) -> int:
        if self.spec.tiers[self.pool.shared].name in names:
            self.pool.activate(self.index)
        return super().cached_prefix(keys, now, names)
