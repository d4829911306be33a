"""``least-loaded``: the node with the least outstanding prefill work (queued + running, seconds); ties
round-robin by request index."""

from __future__ import annotations

from kvbench.cluster.routers import Router, argmin_load


class LeastLoadedRouter(Router):
    name = "least-loaded"

    def route(self, req, view) -> int:
        return argmin_load(view.load(), req.index)


ROUTER = LeastLoadedRouter
