"""``prefix``: the node holding the longest cached prefix of the request, within a load bound.

As cache-aware routers in production do (SGLang's router, llm-d, Dynamo): prefer the node whose own tiers
(L1-L3; the shared L4 pool is the same for all) hold the most leading blocks of the request, ties to the
least-loaded of them; but when that node's outstanding prefill work exceeds ``load_bound`` x the mean over
nodes and the least-loaded node's by more than ``load_slack_s``, send the request to the least-loaded node
instead (counted in ``stats["fallbacks"]``). A request no node holds any of goes to the least-loaded node (ties round-robin by request index).
"""

from __future__ import annotations

from kvbench.cluster.routers import Router, argmin_load


class PrefixRouter(Router):
    name = "prefix"
    options = {"load_bound": 1.5, "load_slack_s": 0.0}
    ranges = {"load_bound": (1.0, 1e6), "load_slack_s": (0.0, 1e9)}

    def __init__(self, n_nodes, seed=0, **opts):
        super().__init__(n_nodes, seed, **opts)
        self.stats = {"fallbacks": 0, "prefix_routed": 0, "cold_routed": 0}

    def route(self, req, view) -> int:
        loads = view.load()
        cached = view.cached_prefix(req.keys)
        best_len = max(cached)
        if best_len == 0:
            self.stats["cold_routed"] += 1
            return argmin_load(loads, req.index)
        cands = [i for i in range(self.n) if cached[i] == best_len]
        best = min(cands, key=lambda i: (loads[i], i))
        mean = sum(loads) / self.n
        low = argmin_load(loads, req.index)
        if loads[best] > float(self.opts["load_bound"]) * mean and \
                loads[best] - loads[low] > float(self.opts["load_slack_s"]):
            self.stats["fallbacks"] += 1
            return low
        self.stats["prefix_routed"] += 1
        return best


ROUTER = PrefixRouter
