"""kvbench cluster --sweep (kvbench.cluster.sizing): the grid, the bill by hand, the Pareto front, the targets and
the cheapest configuration that meets them; bad sweeps in one line."""

from __future__ import annotations

import pytest

from kvbench.cluster.sizing import Targets, grid, pareto, parse_sweep
from kvbench.errors import UsageError
from tests.cluster.test_cluster import BLOCK, _cluster
from tests.conftest import write_mooncake


def test_parse_and_grid():
    assert parse_sweep([" nodes = 2 , 4 ", "l4-pool-bw=100GB/s"]) == {"nodes": [2, 4], "l4_pool_bw": [100e9]}
    sw = parse_sweep(["nodes=2,4", "l4_capacity=0,16TB", "l4_pool_bw=100GB/s"])
    assert sw == {"nodes": [2, 4], "l4_capacity": [0, 16_000_000_000_000], "l4_pool_bw": [100e9]}
    g = grid(sw)
    assert len(g) == 4 and g[0] == {"nodes": 2, "l4_capacity": 0, "l4_pool_bw": 100e9}
    assert {(p["nodes"], p["l4_capacity"]) for p in g} == {(2, 0), (2, 16e12), (4, 0), (4, 16e12)}


@pytest.mark.parametrize("items, needle", [
    (["racks=2"], "unknown key 'racks'"), (["nodes=0"], "not a valid count"), (["nodes=two"], "not a valid count"),
    (["nodes=2", "nodes=4"], "given twice"), (["nodes=2", " nodes = 4"], "--sweep: key 'nodes' given twice"),
    (["nodes"], "--sweep: malformed key 'nodes'"),
    (["nodes="], "--sweep: key 'nodes' has no value"), (["l4_pool_bw=-1GB/s"], "l4_pool_bw"),
    ([f"nodes={','.join(str(i) for i in range(1, 20))}", f"l2={','.join(f'{i}GiB' for i in range(1, 16))}"],
     "at most 256"),
])
def test_bad_sweeps_are_one_line(items, needle):
    with pytest.raises(UsageError, match=needle):
        parse_sweep(items)


def test_pareto_front_and_targets_by_hand():
    rows = [{"router": "a", "usd_per_day": {"total": c}, "ttft_p99_ms": t} for c, t in
            ((100, 900), (200, 500), (150, 950), (300, 500), (400, 100))]
    front = pareto(rows)
    assert [(r["usd_per_day"]["total"], r["ttft_p99_ms"]) for r in front] == [(100, 900), (200, 500), (400, 100)]
    t = Targets(ttft_p99_s=0.6, hit_ratio=0.5)
    assert t.meets({"ttft_p99_ms": 500, "hit_ratio": 0.5}) and not t.meets({"ttft_p99_ms": 601, "hit_ratio": 0.9})
    assert not t.meets({"ttft_p99_ms": 100, "hit_ratio": 0.49})


def test_sweep_prices_each_configuration_and_picks_the_cheapest_that_meets(cli, tmp_path):
    """A request of 4 fresh blocks (2,048 tokens at the default 10,000 tok/s what-if: 0.2048 s) every 0.1 s:
    one GPU queues without end, two keep up better, four never queue. The bill per day is nodes x $3/GPU-hour x
    24 + DRAM (64 MiB L2 per node at $5/GB over 5 years): the cheapest configuration under a 0.25 s TTFT p99
    target is the fewest nodes that meet it, and the sweep lists it first."""
    reqs = [(100 * i, [1000 * i + j for j in range(4)]) for i in range(60)]
    tr = write_mooncake(tmp_path / "t.jsonl", reqs)
    s = _cluster(cli, tmp_path, tr, "--router", "round-robin", "--l2", str(256 * BLOCK), "--sweep", "nodes=1,2,4",
                 "--ttft-p99", "250ms")
    sw = s["sweep"]
    assert sw["keys"] == ["nodes"] and len(sw["points"]) == 3
    by_nodes = {r["nodes"]: r for r in sw["points"]}
    for n, r in by_nodes.items():
        dram = n * 256 * BLOCK / 1e9 * 5.0 / (5 * 365.0)
        assert r["usd_per_day"]["gpu"] == pytest.approx(n * 24 * 3.0)
        assert r["usd_per_day"]["dram"] == pytest.approx(dram)
        assert r["usd_per_day"]["total"] == pytest.approx(n * 72.0 + dram)
    assert not by_nodes[1]["meets"] and by_nodes[4]["meets"]
    assert by_nodes[4]["ttft_p99_ms"] == pytest.approx(204.8)
    meeting = [r["nodes"] for r in sw["meeting"]]
    assert meeting == sorted(meeting) and sw["cheapest"]["nodes"] == meeting[0]
    assert all(by_nodes[n]["ttft_p99_ms"] > 250 for n in (1, 2, 4) if n < meeting[0])


def test_sweep_needs_a_dry_run_and_targets_need_a_sweep(cli, tmp_path):
    tr = write_mooncake(tmp_path / "t.jsonl", [(0, [1, 2])])
    r = cli("cluster", tr, "--model", "tiny-gqa", "--router", "random", "--l2", "1GiB", "--ttft-p99", "2s",
            "--dry-run", "--results", tmp_path / "res")
    assert r.exit_code == 2 and "needs a --sweep" in r.output
    r = cli("cluster", tr, "--model", "tiny-gqa", "--router", "random", "--l2", "1GiB", "--sweep", "nodes=1,2",
            "--results", tmp_path / "res")
    assert r.exit_code == 2 and "--dry-run" in r.output
    r = cli("cluster", tr, "--model", "tiny-gqa", "--router", "random", "--l2", "1GiB", "--sweep", "l2=1KiB",
            "--dry-run", "--results", tmp_path / "res")
    assert r.exit_code == 2 and "cannot hold one KV block" in r.output and not (tmp_path / "res").exists()
