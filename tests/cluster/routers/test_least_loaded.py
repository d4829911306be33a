"""The ``least-loaded`` router: the node with the least outstanding prefill work; ties round-robin by index."""

from kvbench.cluster.routers import make_router
from kvbench.cluster.sim import RouteRequest


class View:
    def __init__(self, loads):
        self.loads = loads

    def load(self):
        return self.loads


def test_least_outstanding_work_wins_and_ties_rotate_with_the_request_index():
    r = make_router("least-loaded", 4)
    req = lambda i: RouteRequest(i, 0.0, [1], 1)       # noqa: E731
    assert r.route(req(0), View([3.0, 1.0, 2.0, 5.0])) == 1
    assert r.route(req(7), View([3.0, 1.0, 2.0, 0.5])) == 3
    # all idle: request i goes to node i mod 4 (not node 0 every time)
    assert [r.route(req(i), View([0.0] * 4)) for i in range(6)] == [0, 1, 2, 3, 0, 1]
    # a tie between nodes 1 and 3 below the others: the first from i mod 4 on
    assert [r.route(req(i), View([2.0, 1.0, 2.0, 1.0])) for i in range(4)] == [1, 1, 3, 3]
