"""The ``prefix`` router (kvbench/cluster/routers/prefix.py) by hand on a stub view: the longest cached prefix,
ties to the least-loaded, the load bound and slack, the counts."""

from __future__ import annotations

import pytest

from kvbench.cluster.routers import check_routers, make_router, router_class
from kvbench.cluster.sim import RouteRequest
from kvbench.errors import UsageError


class View:
    def __init__(self, loads, cached):
        self.loads, self.cached = loads, cached

    def load(self):
        return list(self.loads)

    def cached_prefix(self, keys):
        return list(self.cached)


def _req(i=0):
    return RouteRequest(i, 0.0, [1, 2, 3], 1536)


def test_longest_prefix_wins_ties_to_the_least_loaded_then_the_lowest_index():
    r = make_router("prefix", 3)
    assert r.opts == {"load_bound": 1.5, "load_slack_s": 0.0} and r.seed == 0
    assert router_class("prefix")(3).seed == 0
    assert r.stats == {"fallbacks": 0, "prefix_routed": 0, "cold_routed": 0}
    assert r.route(_req(), View([0.0, 0.0, 0.0], [1, 3, 2])) == 1               # the longest, not the shortest
    assert r.route(_req(), View([0.2, 0.1, 0.3], [2, 2, 1])) == 1               # tie on 2 blocks: less loaded
    assert r.route(_req(), View([0.1, 0.1, 0.1], [0, 2, 2])) == 1               # and then the lower index
    assert r.stats == {"fallbacks": 0, "prefix_routed": 3, "cold_routed": 0}


def test_no_cached_block_goes_to_the_least_loaded_round_robin():
    r = make_router("prefix", 3)
    assert [r.route(_req(i), View([0.0, 0.0, 0.0], [0, 0, 0])) for i in range(4)] == [0, 1, 2, 0]
    assert r.route(_req(0), View([0.5, 0.0, 0.2], [0, 0, 0])) == 1
    assert r.stats == {"fallbacks": 0, "prefix_routed": 0, "cold_routed": 5}


def test_the_load_bound_is_strict_and_relative_to_the_mean():
    """Node 0 holds the prefix. Loads (2, 0, 1): mean 1, 2 > 1.5 x 1 and 2 - 0 > 0: to node 1, the least loaded.
    Loads (1.5, 0, 1.5): 1.5 is not above 1.5: node 0. Loads (0.3, 0, 0): 0.3 > 0.15 and above the least loaded
    by 0.3 s > 0: node 1; with load_slack_s 1 it stays on node 0; with load_bound 3, (2, 0, 1) stays too."""
    r = make_router("prefix", 3)
    assert r.route(_req(), View([2.0, 0.0, 1.0], [3, 0, 0])) == 1
    assert r.route(_req(), View([1.5, 0.0, 1.5], [3, 0, 0])) == 0
    assert r.route(_req(), View([0.3, 0.0, 0.0], [3, 0, 0])) == 1
    assert r.stats == {"fallbacks": 2, "prefix_routed": 1, "cold_routed": 0}
    assert make_router("prefix", 3, load_slack_s=1.0).route(_req(), View([0.3, 0.0, 0.0], [3, 0, 0])) == 0
    assert make_router("prefix", 3, load_bound=3.0).route(_req(), View([2.0, 0.0, 1.0], [3, 0, 0])) == 0
    # loads (1.5, 0.25, 0.25): mean 2/3, 1.5 > 1; the slack is against the least loaded: 1.5 - 0.25 = 1.25
    assert make_router("prefix", 3).route(_req(), View([1.5, 0.25, 0.25], [3, 0, 0])) == 1
    assert make_router("prefix", 3, load_slack_s=1.25).route(_req(), View([1.5, 0.25, 0.25], [3, 0, 0])) == 0
    assert make_router("prefix", 3, load_slack_s=1.2).route(_req(), View([1.5, 0.25, 0.25], [3, 0, 0])) == 1
    # both conditions are needed: far above the mean, but no more than the slack above the least loaded
    assert make_router("prefix", 2, load_slack_s=5.0).route(_req(), View([4.0, 0.0], [3, 0])) == 0


def test_prefix_option_bounds_are_inclusive():
    for k, lo, hi in (("load_bound", 1.0, 1e6), ("load_slack_s", 0.0, 1e9)):
        for ok in (lo, hi):
            assert check_routers(["prefix"], {k: ok}) == ["prefix"]
        for bad in (lo - 0.5, hi * 1.5):
            with pytest.raises(UsageError, match=f"{k}="):
                check_routers(["prefix"], {k: bad})
