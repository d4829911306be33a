"""``random``: each request to a uniformly random node (seeded: the same run routes the same way)."""

from __future__ import annotations

import numpy as np

from kvbench.cluster.routers import Router


class RandomRouter(Router):
    name = "random"

    def __init__(self, n_nodes, seed=0, **opts):
        super().__init__(n_nodes, seed, **opts)
        self.rng = np.random.default_rng(self.seed)

    def route(self, req, view) -> int:
        return int(self.rng.integers(self.n))


ROUTER = RandomRouter
