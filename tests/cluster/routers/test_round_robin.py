"""The ``round-robin`` router: request i to node i mod N."""

from kvbench.cluster.routers import make_router
from kvbench.cluster.sim import RouteRequest


def test_request_i_goes_to_node_i_mod_n():
    r = make_router("round-robin", 3)
    assert [r.route(RouteRequest(i, 0.0, [1], 1), None) for i in range(8)] == [0, 1, 2, 0, 1, 2, 0, 1]
