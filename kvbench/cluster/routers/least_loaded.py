"""``least-loaded``: the node with the least outstanding prefill work (queued + running, seconds)."""

from __future__ import annotations

from kvbench.cluster.routers import Router, argmin_load


class LeastLoadedRouter(Router):
    name = "least-loaded"

    def route(self, req, view) -> int:
        return argmin_load(view.load())


ROUTER = LeastLoadedRouter
