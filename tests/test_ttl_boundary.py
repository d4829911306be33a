"""A reuse gap exactly at the retention time is a hit, a gap just over it a miss (alive while
``now - last <= ttl``, DESIGN.md), through every path that applies a TTL: the exact curve, SHARDS, the
policy simulator (every policy), the tier simulation, `kvbench mrc --ttl` and `kvbench replay kv --dry-run`.

The trace (TTL 8 s; times exactly representable in binary floating point):
    t=0     blocks [1, 2]   cold                                   0 hits
    t=8     blocks [1, 2]   both idle exactly 8 s -> alive         2 hits
    t=16.5  block  [1]      idle 8.5 s -> expired                  0 hits
    t=24.5  blocks [1, 2]   block 1 idle exactly 8 s (hit), block 2 idle 16.5 s (miss)  1 hit
7 block references, 3 hits: hit ratio 3/7 at any capacity >= 2 blocks (5/7 without retention).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from kvbench.analysis.curves.profile import exact_profile, hit_ratio_curve, policy_hit_ratios, shards_profile
from kvbench.sim.policies import POLICIES, make_policy, simulate_prefix
from kvbench.sim.tiers import Hierarchy, HierarchySpec, TierSpec
from kvbench.stream.traces import read_trace

TTL = 8.0
REQUESTS = [(0, [1, 2]), (8000, [1, 2]), (16500, [1]), (24500, [1, 2])]
HITS, REFS, HITS_NO_TTL = 3, 7, 5
BLOCK = 262144                       # tiny-gqa: 512 B/token x 512-token blocks


@pytest.fixture
def trace_file(tmp_path):
    p = tmp_path / "ttl.jsonl"
    with open(p, "w") as f:
        for ts, ids in REQUESTS:
            f.write(json.dumps({"timestamp": ts, "input_length": 512 * len(ids), "output_length": 1,
                                "hash_ids": ids}) + "\n")
    return p


def test_exact_curve_keeps_a_block_idle_exactly_the_ttl(trace_file):
    tr = read_trace(trace_file)
    assert tr.timestamp_s.tolist() == [0.0, 8.0, 16.5, 24.5]
    p = exact_profile(tr, ttl_s=TTL)
    assert p.hit_ratio([2, 100]).tolist() == [HITS / REFS, HITS / REFS]
    assert exact_profile(tr).hit_ratio([100])[0] == HITS_NO_TTL / REFS
    # just under the gap of 8 s: every reuse expires
    assert exact_profile(tr, ttl_s=7.999).hit_ratio([100])[0] == 0.0


def test_shards_at_full_rate_and_fixed_size_agree_at_the_boundary(trace_file):
    tr = read_trace(trace_file)
    assert shards_profile(tr, rate=1.0, ttl_s=TTL).hit_ratio([100])[0] == pytest.approx(HITS / REFS, abs=1e-12)
    assert shards_profile(tr, size=1000, ttl_s=TTL).hit_ratio([100])[0] == pytest.approx(HITS / REFS, abs=1e-12)


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_every_policy_keeps_a_block_idle_exactly_the_ttl(trace_file, policy):
    tr = read_trace(trace_file)
    s = simulate_prefix([tr], make_policy(policy, 100, ttl_s=TTL))
    assert (s.hit_blocks, s.block_refs) == (HITS, REFS)
    ratios, refs = policy_hit_ratios(tr, policy, [100], ttl_s=TTL)
    assert ratios.tolist() == [HITS / REFS] and refs == REFS
    c = make_policy(policy, 100, ttl_s=TTL)
    c.insert(7, 1.0)
    assert c.contains(7, 9.0) and not c.contains(7, 9.0 + 1e-9)


def test_tier_simulation_keeps_a_block_idle_exactly_the_ttl(trace_file):
    tr = read_trace(trace_file)
    for tiers in ([TierSpec("l2", 100 * BLOCK, ttl_s=TTL)],
                  [TierSpec("l1", 100 * BLOCK, ttl_s=TTL), TierSpec("l2", 100 * BLOCK, ttl_s=TTL)]):
        h = Hierarchy(HierarchySpec(tuple(tiers), block_bytes=BLOCK))
        reqs, _ = h.run(tr.timestamp_s, tr.offsets, tr.keys)
        assert reqs["hit_blocks"].tolist() == [0, 2, 0, 1]


def test_mrc_and_replay_dry_run_keep_a_block_idle_exactly_the_ttl(cli, trace_file, tmp_path):
    r = cli("mrc", trace_file, "--ttl", "8s", "--capacities", "2,100", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["hit_ratio"] == [HITS / REFS, HITS / REFS] and d["ttl_s"] == TTL
    r = cli("replay", "kv", trace_file, "--model", "tiny-gqa", "--l2", str(100 * BLOCK), "--ttl", "8s",
            "--dry-run", "--json", "--results", tmp_path)
    assert r.exit_code == 0, r.output
    s = json.loads(r.output[r.output.index("{"):])
    assert s["hit_blocks"] == HITS and s["blocks"] == REFS
    rows = np.loadtxt(s["run_dir"] + "/requests.csv", delimiter=",", skiprows=1, usecols=3, ndmin=1)
    assert rows.tolist() == [0, 2, 0, 1]


def test_curve_api_with_ttl(trace_file):
    c = hit_ratio_curve(read_trace(trace_file), capacities=[1, 2, 100], ttl_s=TTL)
    assert c.hit_ratio.tolist()[1:] == [HITS / REFS, HITS / REFS]


def test_stack_counts_the_expired_references(trace_file):
    """Of the 7 references, 2 are cold (first touches of blocks 1 and 2) and 2 find their block expired
    (block 1 idle 8.5 s at t=16.5, block 2 idle 16.5 s at t=24.5)."""
    from kvbench.analysis.curves.stack import LRUStack

    s = LRUStack(ttl_s=TTL)
    s.feed(read_trace(trace_file))
    assert (s.references, s.cold, s.expired) == (REFS, 2, 2)
