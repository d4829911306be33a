"""``session``: consistent hashing of the conversation's identity, so a conversation stays on one node.

Where the trace names conversations (Bailian: ``chat_id`` and ``parent_chat_id``), the identity is the
conversation's first turn, followed up the parent chain. Otherwise it is the request's first block that is not shared: blocks held by more than ``shared_fraction`` of
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
    ranges = {"shared_fraction": (0.0, 1.0), "vnodes": (1, 65536)}

    def __init__(self, n_nodes, seed=0, **opts):
        super().__init__(n_nodes, seed, **opts)
        v = int(self.opts["vnodes"])
        ids = np.arange(self.n * v, dtype=np.uint64)          # vnode j of node i: id i * v + j
        # ring points hashed twice (and salted by the seed) so that they never equal an identity's hash
        points = splitmix64(splitmix64(ids) ^ np.uint64(self.seed * 0x5851F42D4C957F2D % (1 << 64)))
        order = np.argsort(points)
        self.ring = points[order].tolist()
        self.owner = (order // v).tolist()
        self.shared: set = set()
        self.conversation: list | None = None      # per request: its conversation's root chat id
        self.stats = {"shared_prefix_blocks": 0, "identity": "first unshared block"}

    def prepare(self, trace) -> None:
        """The shared blocks: keys present in more than ``shared_fraction`` of the requests."""
        if trace.n_requests == 0:
            return
        ex = trace.extras or {}
        if "chat_id" in ex and "parent_chat_id" in ex:
            self.conversation = conversation_roots(ex["chat_id"], ex["parent_chat_id"])
            self.stats["identity"] = "conversation (chat_id / parent_chat_id)"
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
        if self.conversation is not None:
            return self.node_of(self.conversation[req.index])
        return self.node_of(self.identity(req.keys))


def conversation_roots(chat_id, parent) -> list:
    """The first turn's chat id of each request's conversation (parents followed; a parent not in the trace,
    or negative, starts a conversation)."""
    parent_of = dict(zip(np.asarray(chat_id).tolist(), np.asarray(parent).tolist()))
    out = []
    for c in np.asarray(chat_id).tolist():
        seen = 0
        while parent_of.get(c, -1) >= 0 and parent_of[c] in parent_of and seen < len(parent_of):
            c = parent_of[c]
            seen += 1
        out.append(int(c) & 0xFFFFFFFFFFFFFFFF)
    return out


ROUTER = SessionRouter
