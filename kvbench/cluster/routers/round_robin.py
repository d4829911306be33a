"""``round-robin``: request i to node i mod N, in arrival order."""

from __future__ import annotations

from kvbench.cluster.routers import Router


class RoundRobinRouter(Router):
    name = "round-robin"

    def route(self, req, view) -> int:
        return req.index % self.n


ROUTER = RoundRobinRouter
