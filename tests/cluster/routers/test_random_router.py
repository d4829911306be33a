"""The ``random`` router: uniform and seeded (numpy's default_rng(seed) draws)."""

import numpy as np

from kvbench.cluster.routers import router_class


def test_the_default_seed_is_zero_and_a_seed_changes_the_draws():
    cls = router_class("random")
    want = np.random.default_rng(0).integers(5, size=50).tolist()
    assert [cls(5).route(None, None) for _ in range(1)] == want[:1]
    r = cls(5)
    assert [r.route(None, None) for _ in range(50)] == want
    s = cls(5, seed=9)
    assert [s.route(None, None) for _ in range(50)] == np.random.default_rng(9).integers(5, size=50).tolist()
