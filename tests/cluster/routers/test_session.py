"""The ``session`` router (kvbench/cluster/routers/session.py): SplitMix64 against its published test vector,
the consistent-hash ring against a plain-Python rebuild, the identity (first unshared block), named
conversations followed up their parent chain; by hand."""

from __future__ import annotations

import bisect
from types import SimpleNamespace

import numpy as np
import pytest

from kvbench.cluster.routers import check_routers, make_router, router_class
from kvbench.cluster.routers.session import conversation_roots, splitmix64
from kvbench.cluster.sim import RouteRequest
from kvbench.errors import UsageError

M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def _mix(x: int) -> int:
    """SplitMix64's output function on state x + golden ratio (Steele, Lea, Flood 2014), on Python ints."""
    z = (x + GOLDEN) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def test_splitmix64_is_the_published_sequence():
    # SplitMix64 seeded with 0: its outputs mix the states golden, 2 x golden, 3 x golden
    want = [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]
    got = splitmix64(np.array([0, GOLDEN, 2 * GOLDEN & M64], dtype=np.uint64)).tolist()
    assert got == want == [_mix(0), _mix(GOLDEN), _mix(2 * GOLDEN & M64)]
    xs = [1, 2, 12345, M64, 1 << 63]
    assert splitmix64(np.array(xs, dtype=np.uint64)).tolist() == [_mix(x) for x in xs]


def _ring(n, v, seed):
    """(sorted points, their nodes): vnode j of node i has id i * v + j, its point mix(mix(id) ^ salt)."""
    salt = seed * 0x5851F42D4C957F2D % (1 << 64)
    pts = sorted((_mix(_mix(i * v + j) ^ salt), i) for i in range(n) for j in range(v))
    return [p for p, _ in pts], [i for _, i in pts]


def _node(ring, identity):
    points, owners = ring
    k = bisect.bisect_left(points, _mix(identity))
    return owners[k % len(points)]


@pytest.mark.parametrize("n, v, seed", [(2, 3, 5), (3, 1, 0), (4, 64, 7)])
def test_the_ring_is_the_hashed_vnodes_in_order(n, v, seed):
    r = make_router("session", n, seed=seed, vnodes=v)
    ring = _ring(n, v, seed)
    assert r.ring == ring[0] and r.owner == ring[1]
    nodes = [r.node_of(i) for i in range(300)]
    assert nodes == [_node(ring, i) for i in range(300)]
    assert all(type(x) is int for x in nodes)
    # an identity hashed past the last point wraps to the first point's node
    past = next(i for i in range(10_000) if _mix(i) > ring[0][-1])
    assert r.node_of(past) == ring[1][0]


def test_defaults_seed_0_64_vnodes_half_the_requests():
    r = make_router("session", 3)
    assert r.opts == {"shared_fraction": 0.5, "vnodes": 64} and len(r.ring) == 3 * 64
    assert r.ring == _ring(3, 64, 0)[0] and router_class("session")(3).ring == r.ring
    assert r.stats == {"shared_prefix_blocks": 0, "identity": "first unshared block"}


def test_session_option_bounds_are_inclusive():
    for k, lo, hi in (("shared_fraction", 0.0, 1.0), ("vnodes", 1, 65536)):
        for ok in (lo, hi):
            assert check_routers(["session"], {k: ok}) == ["session"]
        for bad in (lo - 0.5, hi + 1):
            with pytest.raises(UsageError, match=f"{k}="):
                check_routers(["session"], {k: bad})


def _trace(requests, extras=None):
    return SimpleNamespace(n_requests=len(requests), keys=np.array([k for r in requests for k in r], dtype=np.uint64),
                           extras=extras)


def _route(r, i, keys):
    return r.route(RouteRequest(i, 0.0, keys, 512 * len(keys)), None)


def test_identity_is_the_first_block_held_by_at_most_the_shared_fraction():
    """4 requests: block 7 is in all 4 (> 0.5 x 4: shared), block 8 in exactly 2 (not above 2: not shared)."""
    reqs = [[7, 8, 1], [7, 8, 2], [7, 3], [7, 4]]
    r = make_router("session", 4)
    r.prepare(_trace(reqs, extras=None))
    assert r.shared == {7} and r.stats["shared_prefix_blocks"] == 1
    assert [r.identity(k) for k in reqs] == [8, 8, 3, 4]
    assert [_route(r, i, k) for i, k in enumerate(reqs)] == [r.node_of(8), r.node_of(8), r.node_of(3), r.node_of(4)]
    assert r.identity([7]) == 7 and r.identity([]) == 0       # nothing unshared: the last block; no block: 0
    low = make_router("session", 4, shared_fraction=0.25)     # > 1 request: 7 and 8 shared
    low.prepare(_trace(reqs, extras={}))
    assert low.shared == {7, 8}


def test_a_one_request_trace_shares_all_its_blocks_and_an_empty_trace_shares_none():
    r = make_router("session", 2)
    r.prepare(_trace([[5, 6]]))
    assert r.shared == {5, 6} and r.identity([5, 6]) == 6
    e = make_router("session", 2)
    e.prepare(SimpleNamespace(n_requests=0, keys=np.zeros(0, dtype=np.uint64), extras=None))
    assert e.shared == set() and e.conversation is None


def test_named_conversations_route_by_their_first_turn():
    chat = np.array([10, 11, 12, 20, 30])
    parent = np.array([-1, 10, 11, -1, 99])                  # 99 is not in the trace: 30 starts a conversation
    reqs = [[1], [2], [3], [4], [5]]
    r = make_router("session", 4)
    r.prepare(_trace(reqs, extras={"chat_id": chat, "parent_chat_id": parent}))
    assert r.conversation == [10, 10, 10, 20, 30]
    assert r.stats["identity"] == "conversation (chat_id / parent_chat_id)" and r.shared == set()
    assert [_route(r, i, k) for i, k in enumerate(reqs)] == [r.node_of(c) for c in (10, 10, 10, 20, 30)]
    half = make_router("session", 4)                          # parent ids without chat ids: blocks decide
    half.prepare(_trace(reqs, extras={"parent_chat_id": parent}))
    assert half.conversation is None
    other = make_router("session", 4)
    other.prepare(_trace(reqs, extras={"chat_id": chat}))
    assert other.conversation is None


def test_conversation_roots_by_hand():
    assert conversation_roots([0, 7, 8], [-1, 0, 7]) == [0, 0, 0]          # chat id 0 is a parent like any other
    assert conversation_roots([3, 4], [-1, 5]) == [3, 4]                    # a parent not in the trace
    assert conversation_roots([-2], [-1]) == [(1 << 64) - 2]                # ids as unsigned 64-bit
    # a cycle of parent links (a malformed trace) ends after as many steps as there are chats: 3 steps round a
    # 3-cycle come back to where they started
    assert conversation_roots([1, 2, 3], [3, 1, 2]) == [1, 2, 3]
