"""The router registry and its shared parts (kvbench/cluster/routers/__init__.py): option ranges, the
least-loaded pick with round-robin ties, defaults; by hand."""

from __future__ import annotations

import numpy as np
import pytest

from kvbench.cluster.routers import Router, argmin_load, check_option, check_routers, make_router, router_class
from kvbench.errors import UsageError


def test_argmin_load_breaks_ties_forward_from_start():
    assert argmin_load([5.0, 1.0, 5.0]) == 1                  # the second node is looked at too
    assert argmin_load([0.0, 0.0]) == 0                       # start defaults to node 0
    assert argmin_load([1.0, 0.0, 0.0], 0) == 1               # ties: the first after start, going forward
    assert argmin_load([0.0, 0.0, 0.0], 1) == 1               # an exact tie keeps start itself
    assert argmin_load([0.0, 0.0, 0.0], 5) == 2               # start wraps modulo the node count
    assert argmin_load([0.0, 1.0, 0.0], 2) == 2 and argmin_load([0.0, 1.0, 0.5], 1) == 0


class _Knob(Router):
    name = "knob"
    options = {"k": 1.0}                                      # not in ranges: finite and >= 0 (up to 1e15)


def test_an_option_without_a_range_is_finite_and_at_least_zero():
    check_option(_Knob, "k", 0.0)
    check_option(_Knob, "k", 0.5)
    check_option(_Knob, "k", 1e15)
    for bad in (-1e-9, 1.5e15, float("inf"), float("nan"), "1"):
        with pytest.raises(UsageError, match="out of range"):
            check_option(_Knob, "k", bad)
    with pytest.raises(UsageError, match="give k between 0 and 1e\\+15"):
        check_option(_Knob, "k", -1)


def test_check_routers_without_options_and_with_a_boundary_value():
    assert check_routers(["cost", " prefix "]) == ["cost", "prefix"]
    assert check_routers(["cost"], None) == ["cost"]
    assert check_routers(["cost"], {"temperature": 0.0}) == ["cost"]
    with pytest.raises(UsageError, match="no router of cost has an option 'vnodes'"):
        check_routers(["cost"], {"vnodes": 4})


def test_the_seed_defaults_to_zero():
    """A router made without a seed is the one made with seed 0 (the random router draws numpy's
    default_rng(0) sequence)."""
    want = np.random.default_rng(0).integers(7, size=40).tolist()
    assert router_class("random")(7).seed == 0
    assert router_class("least-loaded")(2).seed == 0 and router_class("round-robin")(2).seed == 0
    r = make_router("random", 7)
    assert r.seed == 0
    assert [r.route(None, None) for _ in range(40)] == want
    assert [router_class("random")(7).route(None, None) for _ in range(1)] == want[:1]
