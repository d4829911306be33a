"""``session``: consistent hashing of the conversation's identity, so a conversation stays on one node.

The identity is the request's first block that is not shared: blocks held by more than ``shared_fraction`` of
all requests (a system prompt every request starts with, as in the Mooncake traces) are skipped; the next
block (prefix-chained: it names the conversation's first turn) is hashed onto a ring of ``vnodes`` points per
node. Adding or removing a node moves only the conversations of the ring arcs it owns.
"""

from __future__ import annotations

import bisect

import numpy as np

from kvbench.cluster.routers import Router


def splitmix64(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = np.asarray(x, dtype=np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


class SessionRouter(Router):
    name = "session"
    options = {"shared_fraction": 0.5, "vnodes": 64}

    def __init__(self, n_nodes, seed=0, **opts):
        super().__init__(n_nodes, seed, **opts)
        v = int(self.opts["vnodes"])
        ids = np.arange(self.n * v, dtype=np.uint64)
        points = splitmix64(ids ^ np.uint64(self.seed * 0x5851F42D4C957F2D % (1 << 64)))
        order = np.argsort(points)
        self.ring = points[order].tolist()
        self.owner = (order // v).tolist()
        self.shared: set = set()
        self.stats = {"shared_prefix_blocks": 0}

    def prepare(self, trace) -> None:
        """The shared blocks: keys present in more than ``shared_fraction`` of the requests."""
        if trace.n_requests == 0:
            return
        keys, counts = np.unique(trace.keys, return_counts=True)
        self.shared = set(keys[counts > float(self.opts["shared_fraction"]) * trace.n_requests].tolist())
        self.stats["shared_prefix_blocks"] = len(self.shared)

    def identity(self, keys) -> int:
        for k in keys:
            if k not in self.shared:
                return int(k)
        return int(keys[-1]) if len(keys) else 0

    def node_of(self, identity: int) -> int:
        h = int(splitmix64(np.array([identity], dtype=np.uint64))[0])
        i = bisect.bisect_left(self.ring, h)
        return self.owner[i % len(self.ring)]

    def route(self, req, view) -> int:
        return self.node_of(self.identity(req.keys))


ROUTER = SessionRouter
