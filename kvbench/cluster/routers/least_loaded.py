"""``least-loaded``: the node with the least outstanding prefill work (queued + running, seconds)."""

from __future__ import annotations

from kvbench.cluster.routers import Router, least_loaded


class LeastLoadedRouter(Router):
    name = "least-loaded"

    def route(self, req, view) -> int:
        return least_loaded(view.load())


ROUTER = LeastLoadedRouter
