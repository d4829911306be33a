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


# --- mutation survivors (issue 34 part 4): defaults, option bounds, sampling far from zero, the count ---------


def test_cost_defaults_weigh_prefill_once():
    """Defaults: overlap_weight 1, temperature 0. Node 0 holds all 4 blocks with 0.3 s queued (cost 0.3 s), node 1
    is idle and holds nothing (0 + 1 x 0.2048 s): node 1 wins; at weight 2 (0.4096 s) node 0 would."""
    r = make_router("cost", 2)
    assert r.opts == {"overlap_weight": 1.0, "temperature": 0.0}
    assert r.route(_req(), View([0.3, 0.0], [4, 0])) == 1
    assert make_router("cost", 2, overlap_weight=2.0).route(_req(), View([0.3, 0.0], [4, 0])) == 0


def test_cost_option_bounds_are_inclusive():
    from kvbench.cluster.routers import check_routers
    from kvbench.errors import UsageError

    for k in ("overlap_weight", "temperature"):
        for ok in (0.0, 1e6):
            assert check_routers(["cost"], {k: ok}) == ["cost"]
        for bad in (-0.5, 1.5e6):
            with pytest.raises(UsageError, match=f"{k}="):
                check_routers(["cost"], {k: bad})


def test_cost_sampling_is_relative_to_the_cheapest_node():
    """exp(-cost / T) underflows for costs of 1,000 s at T = 0.5 s: the router weighs exp(-(cost - min) / T),
    so node 1 (1 s cheaper) is still drawn with probability 1 / (1 + e^-2) = 0.881, and the default seed is 0."""
    a = make_router("cost", 2, temperature=0.5)
    b = make_router("cost", 2, temperature=0.5, seed=0)
    from kvbench.cluster.routers import router_class
    c = router_class("cost")(2, temperature=0.5)
    view = View([1001.0, 1000.0], [0, 0])
    picks = [a.route(_req(), view) for _ in range(2000)]
    assert picks == [b.route(_req(), view) for _ in range(2000)] == [c.route(_req(), view) for _ in range(2000)]
    assert sum(p == 1 for p in picks) / 2000 == pytest.approx(1 / (1 + 2.718281828 ** -2), abs=0.03)
    assert picks != [make_router("cost", 2, temperature=0.5, seed=1).route(_req(), view) for _ in range(2000)]


def test_cache_routed_counts_picks_that_hold_at_least_one_block():
    """Node 0 holds 1 of the 4 blocks: its cost 0.2048 - 0.0512 = 0.1536 s beats node 1's 0.2048 s (counted);
    then node 1, holding nothing, wins against node 0's 1 s queue (not counted)."""
    r = make_router("cost", 2)
    assert r.stats == {"cache_routed": 0, "sampled": 0}
    assert r.route(_req(), View([0.0, 0.0], [1, 0])) == 0
    assert r.stats["cache_routed"] == 1
    assert r.route(_req(), View([1.0, 0.0], [4, 0])) == 1
    assert r.stats == {"cache_routed": 1, "sampled": 0}
