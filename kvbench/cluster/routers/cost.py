"""``cost``: the node where the request would finish first, by a cost like production KV routers use.

NVIDIA Dynamo's KV router scores each worker by overlap-weighted prefill blocks plus its load and picks with a
softmax temperature; llm-d scores precise prefix hits per tier. Here, in seconds: for node i,

    cost_i = load_i + overlap_weight x prefill_i(n, cached_i)

load_i the node's outstanding prefill work (queued + running, s), prefill_i the profile's time for the request's
uncached suffix given the leading blocks node i holds in its own tiers (``ClusterView.prefill_s``: T(n) - T(p) + a).
With ``temperature`` 0 the cheapest node wins (ties to the least-loaded, then round-robin by request index);
above 0 a node is drawn with probability proportional to exp(-cost_i / temperature) (seconds; seeded), which
spreads load among near-equal nodes as Dynamo's temperature does. ``overlap_weight`` > 1 values cache hits
more than the load they queue behind.
"""

from __future__ import annotations

import numpy as np

from kvbench.cluster.routers import Router


class CostRouter(Router):
    name = "cost"
    options = {"overlap_weight": 1.0, "temperature": 0.0}
    ranges = {"overlap_weight": (0.0, 1e6), "temperature": (0.0, 1e6)}

    def __init__(self, n_nodes, seed=0, **opts):
        super().__init__(n_nodes, seed, **opts)
        self.rng = np.random.default_rng(self.seed)
        self.stats = {"cache_routed": 0, "sampled": 0}

    def route(self, req, view) -> int:
        loads = np.asarray(view.load(), dtype=np.float64)
        cached = view.cached_prefix(req.keys)
        prefill = view.prefill_s(req.input_tokens, np.asarray(cached))     # every node at once
        cost = loads + float(self.opts["overlap_weight"]) * prefill
        t = float(self.opts["temperature"])
        if t > 0:
            p = np.exp(-(cost - cost.min()) / t)
            self.stats["sampled"] += 1
            pick = int(self.rng.choice(self.n, p=p / p.sum()))
        else:
            order = (np.arange(self.n) - req.index) % self.n          # round-robin among exact ties
            pick = int(np.lexsort((order, loads, cost))[0])
        if cached[pick] > 0:
            self.stats["cache_routed"] += 1
        return pick


ROUTER = CostRouter
