"""The ``cost`` router (kvbench/cluster/routers/cost.py): by hand on a stub view, and on a shipped trace."""

from __future__ import annotations

import json

import pytest

from kvbench.cluster.routers import make_router
from kvbench.cluster.sim import RouteRequest, TimingModel


class View:
    """Two or more nodes with given outstanding work and cached leading blocks; prefill at 10,000 tokens/s."""

    def __init__(self, loads, cached, block_tokens=512):
        self.loads, self.cached, self.block_tokens = loads, cached, block_tokens
        self.timing = TimingModel(l2_bw=1e9, l3_bw=1e9, l4_link_bw=None, l4_link_latency_s=0.0, l4_pool_bw=None,
                                  fit_a=0.0, fit_b=1e-4, fit_c=0.0)

    def load(self):
        return list(self.loads)

    def cached_prefix(self, keys):
        return list(self.cached)

    def prefill_s(self, n, cached_blocks):
        import numpy as np

        return self.timing.prefill_s(n, np.minimum(np.asarray(cached_blocks) * self.block_tokens, n))


def _req(i=0, tokens=2048):
    return RouteRequest(i, 0.0, [1, 2, 3, 4], tokens)


def test_cost_is_load_plus_weighted_prefill_by_hand():
    """A 2,048-token request (4 blocks). Node 0 holds all 4 blocks and has 1 s queued: cost 1 + 0 = 1 s. Node 1
    holds nothing and is idle: cost 0 + 0.2048 s. Node 1 wins; with node 0's queue at 0.1 s, node 0 wins (0.1 <
    0.2048); with overlap_weight 5, node 0 wins even at 1 s (1 < 5 x 0.2048 = 1.024)."""
    r = make_router("cost", 2)
    assert r.route(_req(), View([1.0, 0.0], [4, 0])) == 1
    assert r.route(_req(), View([0.1, 0.0], [4, 0])) == 0
    heavy = make_router("cost", 2, overlap_weight=5.0)
    assert heavy.route(_req(), View([1.0, 0.0], [4, 0])) == 0
    assert heavy.stats["cache_routed"] == 1


def test_cost_ties_go_round_robin_and_temperature_samples_by_cost():
    r = make_router("cost", 3)
    assert [r.route(_req(i), View([0.0] * 3, [0] * 3)) for i in range(6)] == [0, 1, 2, 0, 1, 2]
    # temperature: a node 1 s cheaper at T = 0.5 s is chosen with probability 1 / (1 + e^-2) = 0.881
    hot = make_router("cost", 2, temperature=0.5, seed=3)
    picks = [hot.route(_req(), View([1.0, 0.0], [0, 0])) for _ in range(4000)]
    assert sum(p == 1 for p in picks) / 4000 == pytest.approx(1 / (1 + 2.718281828 ** -2), abs=0.02)
    assert hot.stats["sampled"] == 4000


def test_cost_router_bad_options_one_line(cli, tmp_path):
    r = cli("cluster", "mooncake-sample", "--model", "tiny-gqa", "--dry-run", "--nodes", "2", "--router", "cost",
            "--router-opt", "temperature=-1", "--l2", "1GiB", "--results", tmp_path / "res")
    assert r.exit_code == 2 and "temperature=-1" in r.output and "Traceback" not in r.output


def test_cost_router_runs_beside_prefix_on_the_shipped_sample(cli, tmp_path):
    r = cli("cluster", "mooncake-sample", "--model", "tiny-gqa", "--dry-run", "--nodes", "4", "--routers",
            "prefix,cost", "--l2", "256MiB", "--json", "--results", tmp_path / "res")
    assert r.exit_code == 0, r.output
    s = json.loads(r.output[r.output.index("{"):])
    cost = s["routers"]["cost"]
    assert cost["requests"] == 1000 and sum(n["requests"] for n in cost["nodes"]) == 1000
    assert cost["router_stats"]["cache_routed"] > 0
