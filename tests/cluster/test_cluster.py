"""kvbench cluster: one node equals replay kv --dry-run; hand-built traces with known placements, hit ratios and
TTFTs per router; the prefix router's load bound; shared-pool contention computed by hand; bad inputs."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from tests.conftest import write_mooncake

BLOCK = 262144          # tiny-gqa: 512 B/token x 512-token blocks; slot = block
TOK_S = 10_000.0        # the default what-if prefill rate (no --profile): T(n) = n / 10,000 s




def _json(result):
    assert result.exit_code == 0, result.output
    return json.loads(result.output[result.output.index("{"):])


def _cluster(cli, tmp_path, trace, *args):
    return _json(cli("cluster", trace, "--model", "tiny-gqa", "--dry-run", "--json", "--results", tmp_path / "res",
                     *args))


def _placement(s, tmp_path):
    import pandas as pd
    df = pd.read_csv(Path(s["run_dir"]) / f"requests-{s['router']}.csv")
    return df["node"].tolist(), df


# --- one node is replay kv --dry-run ---------------------------------------------------------------------
@pytest.mark.parametrize("extra", [
    ("--l1", str(40 * BLOCK), "--l2", str(300 * BLOCK)),
    ("--l2", str(200 * BLOCK), "--l3-capacity", str(600 * BLOCK), "--write-policy", "back"),
    ("--l1", str(50 * BLOCK), "--l3-capacity", str(300 * BLOCK), "--l4-capacity", str(900 * BLOCK), "--policy", "s3fifo"),
    ("--l2", str(150 * BLOCK), "--l3-capacity", str(400 * BLOCK), "--write-policy", "back", "--exclusive", "--ttl", "20s",
     "--layout", "log", "--segment", "8MiB"),
])
def test_one_node_equals_replay_kv_dry_run(cli, tmp_path, extra):
    extra = list(extra)
    if "--l3-capacity" in extra:
        extra += ["--l3", str(tmp_path / "l3.store")]
    if "--l4-capacity" in extra:
        extra += ["--l4", str(tmp_path)]
    ref = _json(cli("replay", "kv", "mooncake-sample", "--model", "tiny-gqa", "--dry-run", "--json",
                    "--results", tmp_path / "r", *extra))
    for router in ("round-robin", "prefix", "session"):
        s = _cluster(cli, tmp_path, "mooncake-sample", "--nodes", "1", "--router", router, *extra)
        assert s["global"]["hit_ratio"] == ref["hit_ratio"]
        node = s["nodes"][0]
        assert node["requests"] == ref["requests"] == 1000
        assert node["produced_blocks"] == ref["produced_blocks"]
        for t, rt in ref["tiers"].items():
            assert s["global"]["tier_hit_ratio"][t] == rt["hit_ratio"], t
            assert node["tiers"][t]["hit_blocks"] == rt["hit_blocks"], t
            assert node["tiers"][t]["read_bytes"] == rt["read_bytes"], t
            assert node["tiers"][t]["write_bytes"] == rt["write_bytes"], t
    assert not (tmp_path / "l3.store").exists()            # a dry run touches no target


# --- routers on hand-built traces ------------------------------------------------------------------------
def test_round_robin_and_session_placements_and_hit_ratios(cli, tmp_path):
    # two conversations A (1,2..) and B (10,11..), turns interleaved A B A B; 10 blocks in all
    tr = write_mooncake(tmp_path / "t.jsonl", [(0, [1, 2]), (1000, [10, 11]), (2000, [1, 2, 3]), (3000, [10, 11, 12])])
    s = _cluster(cli, tmp_path, tr, "--nodes", "2", "--router", "round-robin", "--l2", "1GiB")
    nodes, _ = _placement(s, tmp_path)
    assert nodes == [0, 1, 0, 1]
    assert s["global"]["hit_ratio"] == pytest.approx(4 / 10)
    assert [n["requests"] for n in s["nodes"]] == [2, 2] and s["imbalance"] == 1.0
    # A A B B: round-robin splits each conversation, nothing hits; session keeps them together
    tr2 = write_mooncake(tmp_path / "t2.jsonl", [(0, [1, 2]), (1000, [1, 2, 3]), (2000, [10, 11]), (3000, [10, 11, 12])])
    s = _cluster(cli, tmp_path, tr2, "--nodes", "2", "--routers", "round-robin,session", "--l2", "1GiB")
    rr, se = s["routers"]["round-robin"], s["routers"]["session"]
    assert rr["global"]["hit_ratio"] == 0.0 and se["global"]["hit_ratio"] == pytest.approx(4 / 10)
    # round-robin: node 0 holds {1,2,10,11}, node 1 {1,2,3,10,11,12}: 10 copies of 6 blocks; session: one each
    assert rr["duplication"] == pytest.approx(10 / 6) and se["duplication"] == pytest.approx(1.0)
    assert rr["prefill_tokens_saved"] == 0 and se["prefill_tokens_saved"] == 4 * 512
    # the contract fields
    for key in ("router", "nodes", "global", "imbalance", "duplication", "l4", "ttft_ms", "run_dir"):
        assert key in s
    assert set(s["routers"]) == {"round-robin", "session"}
    for r in s["routers"].values():
        assert {"requests", "hit_ratio", "tier_hit_ratio"} <= set(r["nodes"][0])
        assert set(r["global"]["tier_hit_ratio"]) == {"l1", "l2", "l3", "l4"}
        assert {"p50", "p99"} <= set(r["ttft_ms"]) and "read_bytes_per_s" in r["l4"]


def test_duplication_counts_copies_across_nodes(cli, tmp_path):
    # round-robin: A1 -> 0 holds {1,2}; A2 -> 1 holds {1,2,3}; B1 -> 0 adds {10}: held 3 + 3 = 6, distinct 4
    tr = write_mooncake(tmp_path / "t.jsonl", [(0, [1, 2]), (1000, [1, 2, 3]), (2000, [10])])
    s = _cluster(cli, tmp_path, tr, "--nodes", "2", "--router", "round-robin", "--l2", "1GiB")
    assert s["duplication"] == pytest.approx(6 / 4)
    assert s["duplication_detail"]["blocks_held"] == 6 and s["duplication_detail"]["distinct_blocks"] == 4


def test_session_skips_the_shared_system_prompt(cli, tmp_path):
    from kvbench.cluster.routers.session import SessionRouter

    # every request starts with system block 0; conversations start at 1, 5, 9, 13 (two turns each)
    convs = [1, 5, 9, 13]
    reqs, t = [], 0
    for turn in range(2):
        for c in convs:
            reqs.append((t, [0, c] + [c + 1] * turn))
            t += 1000
    tr = write_mooncake(tmp_path / "t.jsonl", reqs)
    s = _cluster(cli, tmp_path, tr, "--nodes", "4", "--router", "session", "--l2", "1GiB")
    nodes, _ = _placement(s, tmp_path)
    ring = SessionRouter(4)
    assert nodes == [ring.node_of(c) for c in convs] * 2      # identity: the block after the shared one
    assert len(set(nodes)) > 1
    assert s["router_stats"]["shared_prefix_blocks"] == 1
    # without skipping it, every request hashes the same system block: all on one node
    s = _cluster(cli, tmp_path, tr, "--nodes", "4", "--router", "session", "--router-opt", "shared_fraction=1",
                 "--l2", "1GiB")
    assert sorted(n["requests"] for n in s["nodes"]) == [0, 0, 0, 8] and s["imbalance"] == 4.0


def test_prefix_and_least_loaded_placements_and_ttft(cli, tmp_path):
    # R0 (3 blocks, 1536 tokens: 153.6 ms of prefill) at 0; R1 cold at 10 ms while node 0 is busy; R2 extends
    # R1's prefix, R3 extends R0's, both when every node is idle
    tr = write_mooncake(tmp_path / "t.jsonl", [(0, [1, 2, 3]), (10, [10, 11]), (10000, [10, 11, 12]),
                                       (20000, [1, 2, 3, 4])])
    s = _cluster(cli, tmp_path, tr, "--nodes", "2", "--routers", "prefix,least-loaded,round-robin", "--l2", "1GiB")
    px, ll = s["routers"]["prefix"], s["routers"]["least-loaded"]
    _, df = _placement({**px, "run_dir": s["run_dir"]}, tmp_path)
    assert df["node"].tolist() == [0, 1, 1, 0]
    assert px["global"]["hit_ratio"] == pytest.approx(5 / 12)
    assert px["router_stats"] == {"fallbacks": 0, "prefix_routed": 2, "cold_routed": 2}
    # TTFT = prefill of the uncached suffix at 10,000 tok/s (L2 loads at 25 GB/s: 3 blocks = 31.5 us)
    assert df["ttft_ms"].tolist() == pytest.approx([153.6, 102.4, 51.2 + 1e3 * 2 * BLOCK / 25e9,
                                                     51.2 + 1e3 * 3 * BLOCK / 25e9])
    # least-loaded ignores the cache: idle ties go round-robin by request index, so R2 and R3 both miss
    _, dl = _placement({**ll, "run_dir": s["run_dir"]}, tmp_path)
    assert dl["node"].tolist() == [0, 1, 0, 1] and ll["global"]["hit_ratio"] == 0.0


def test_prefix_load_bound_engages(cli, tmp_path):
    # R1 shares R0's prefix but arrives 1 ms later: node 0 has 152.6 ms of work, 2x the mean (76.3 ms)
    tr = write_mooncake(tmp_path / "t.jsonl", [(0, [1, 2, 3]), (1, [1, 2, 3, 4])])
    s = _cluster(cli, tmp_path, tr, "--nodes", "2", "--router", "prefix", "--l2", "1GiB")
    nodes, df = _placement(s, tmp_path)
    assert nodes == [0, 1] and s["router_stats"]["fallbacks"] == 1 and s["global"]["hit_ratio"] == 0.0
    assert df["ttft_ms"].tolist() == pytest.approx([153.6, 204.8])
    # a looser bound (2.5x the mean) keeps it on the node with the prefix: it queues behind R0
    s = _cluster(cli, tmp_path, tr, "--nodes", "2", "--router", "prefix", "--load-bound", "2.5", "--l2", "1GiB")
    nodes, df = _placement(s, tmp_path)
    assert nodes == [0, 0] and s["router_stats"]["fallbacks"] == 0
    assert s["global"]["hit_ratio"] == pytest.approx(3 / 7)
    assert df["queue_ms"].tolist() == pytest.approx([0.0, 152.6])
    # the slack keeps it there too: the 152.6 ms gap is under 0.2 s
    s = _cluster(cli, tmp_path, tr, "--nodes", "2", "--router", "prefix", "--load-slack", "0.2", "--l2", "1GiB")
    assert _placement(s, tmp_path)[0] == [0, 0]


def test_gpus_per_node_are_parallel_lanes(cli, tmp_path):
    tr = write_mooncake(tmp_path / "t.jsonl", [(0, [1, 2]), (0, [5, 6]), (0, [7, 8])])
    s = _cluster(cli, tmp_path, tr, "--nodes", "1", "--router", "round-robin", "--gpus-per-node", "2", "--l2", "1GiB")
    _, df = _placement(s, tmp_path)
    assert df["queue_ms"].tolist() == pytest.approx([0.0, 0.0, 102.4])


# --- the shared pool ----------------------------------------------------------------------------------------
def test_pool_contention_stretches_loads_as_computed_by_hand(cli, tmp_path):
    # nodes with only the L4 pool; W0/W1 write 32 blocks each at t=0, L0/L1 load them together at t=100 s
    a, b = list(range(1, 33)), list(range(101, 133))
    tr = write_mooncake(tmp_path / "t.jsonl", [(0, a), (0, b), (100000, a), (100000, b)])
    common = ["--nodes", "2", "--router", "round-robin", "--l4", str(tmp_path), "--l4-capacity", "1GiB",
              "--l4-link-bw", "8MB/s"]
    nbytes = 32 * BLOCK                                    # 8,388,608 B
    s = _cluster(cli, tmp_path, tr, *common)               # no pool limit: each load alone on its link
    _, df = _placement(s, tmp_path)
    assert df["ttft_ms"].tolist()[2:] == pytest.approx([1e3 * nbytes / 8e6] * 2)
    s = _cluster(cli, tmp_path, tr, *common, "--l4-pool-bw", "10MB/s", "--l4-link-latency", "1ms")
    _, df = _placement(s, tmp_path)
    first = nbytes / 8e6                                   # 1.048576 s at the full link
    second = first + (nbytes - 2e6 * first) / 8e6          # 2 MB/s left while the first runs, then 8 MB/s
    assert df["ttft_ms"].tolist()[2:] == pytest.approx([1e3 * (first + 1e-3), 1e3 * (second + 1e-3)])
    assert df["hit_l4"].tolist() == [0, 0, 32, 32]
    assert s["l4"]["peak_pool_utilisation"] == pytest.approx(1.0)
    assert s["l4"]["peak_link_utilisation"] == pytest.approx(1.0)
    assert s["l4"]["read_bytes"] == 2 * nbytes and s["l4"]["write_bytes"] == 2 * nbytes
    assert s["global"]["tier_hit_ratio"]["l4"] == pytest.approx(0.5)
    # per second: both writes (after the 1.6384 s prefills) in second 1, both loads start in second 100
    import pandas as pd
    ts = pd.read_csv(Path(s["run_dir"]) / "timeseries.csv")
    assert ts["l4_write_bw_bytes_per_s"].sum() == 2 * nbytes and ts.loc[1, "l4_write_bw_bytes_per_s"] == 2 * nbytes
    assert ts.loc[100, "l4_read_bw_bytes_per_s"] == 2 * nbytes and s["l4"]["peak_read_bytes_per_s"] == 2 * nbytes


def test_pool_is_shared_one_node_writes_another_hits(cli, tmp_path):
    tr = write_mooncake(tmp_path / "t.jsonl", [(0, [1, 2, 3]), (1000, [1, 2, 3, 4])])
    common = ["--nodes", "2", "--router", "round-robin", "--l2", "1GiB", "--l4", str(tmp_path),
              "--l4-capacity", "1GiB"]
    s = _cluster(cli, tmp_path, tr, *common)
    # node 1 misses in its own L2 and finds R0's three blocks in the pool node 0 wrote
    assert s["nodes"][1]["tier_hit_ratio"]["l4"] == pytest.approx(3 / 4)
    assert s["nodes"][0]["tiers"]["l4"]["write_bytes"] == 3 * BLOCK
    assert s["nodes"][1]["tiers"]["l4"]["write_bytes"] == 1 * BLOCK     # only the new block: the pool dedups


# --- bad input: one line, before any work ----------------------------------------------------------------------
@pytest.mark.parametrize("args, needle", [
    (("--nodes", "2", "--router", "shortest-queue", "--l2", "1GiB"), "unknown router 'shortest-queue'"),
    (("--nodes", "0", "--router", "random", "--l2", "1GiB"), "--nodes must be >= 1"),
    (("--nodes", "2", "--l2", "1GiB"), "no router given"),
    (("--nodes", "2", "--router", "random", "--l2", "1GiB", "--ray-address", "127.0.0.1:1"), "a --dry-run measures none"),
    (("--nodes", "2", "--router", "random", "--l2", "100KiB"), "per node: --l2 100 KiB cannot hold one KV block"),
    (("--nodes", "2", "--routers", "random,random", "--l2", "1GiB"), "router listed twice"),
    (("--nodes", "2", "--router", "random", "--l2", "1GiB", "--l4-pool-bw", "1GB/s"), "--l4-pool-bw without an L4"),
    (("--nodes", "2", "--router", "session", "--router-opt", "bogus=1", "--l2", "1GiB"),
     "--router-opt: unknown key 'bogus'"),
    (("--nodes", "2", "--router", "random", "--load-bound", "2", "--l2", "1GiB"), "has an option 'load_bound'"),
])
def test_bad_inputs_one_line(cli, tmp_path, args, needle):
    tr = write_mooncake(tmp_path / "t.jsonl", [(0, [1, 2])])
    r = cli("cluster", tr, "--model", "tiny-gqa", "--dry-run", "--results", tmp_path / "res", *args)
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0] and "fix:" in lines[0], r.output
    assert not (tmp_path / "res").exists()


def test_report_puts_routers_side_by_side(cli, tmp_path):
    s = _cluster(cli, tmp_path, "mooncake-sample", "--nodes", "2", "--routers", "round-robin,session,prefix",
                 "--l2", str(100 * BLOCK))
    r = cli("report", s["run_dir"], "-o", tmp_path / "c.html", "--json")
    assert r.exit_code == 0, r.output
    index = json.loads(r.output)
    assert "router_comparison" in index["figures"]
    html = (tmp_path / "c.html").read_text()
    assert "Routers side by side" in html and "duplication (copies per block)" in html


def test_prefix_router_sees_retention(cli, tmp_path):
    # R1 puts [1,2,3] on node 1; R2 (100 s later) extends it: to node 1, unless a 10 s TTL dropped the blocks
    tr = write_mooncake(tmp_path / "t.jsonl", [(0, [10]), (1, [1, 2, 3]), (100000, [1, 2, 3, 4])])
    s = _cluster(cli, tmp_path, tr, "--nodes", "2", "--router", "prefix", "--l2", "1GiB")
    assert _placement(s, tmp_path)[0] == [0, 1, 1] and s["router_stats"]["prefix_routed"] == 1
    s = _cluster(cli, tmp_path, tr, "--nodes", "2", "--router", "prefix", "--l2", "1GiB", "--ttl", "10s")
    assert _placement(s, tmp_path)[0] == [0, 1, 0] and s["router_stats"]["cold_routed"] == 3


def test_session_follows_named_conversations(cli, tmp_path):
    from tests.conftest import FIXTURES

    trace = FIXTURES / "traces" / "bailian_sample.jsonl"
    recs = [json.loads(x) for x in open(trace) if x.strip()]
    parent = {r["chat_id"]: r["parent_chat_id"] for r in recs}

    def root(c):
        while parent.get(c, -1) in parent:
            c = parent[c]
        return c

    s = _cluster(cli, tmp_path, trace, "--nodes", "4", "--router", "session", "--l2", "1GiB")
    nodes, _ = _placement(s, tmp_path)
    where = {}
    for r, n in zip(recs, nodes):
        assert where.setdefault(root(r["chat_id"]), n) == n        # a conversation never leaves its node
    assert s["router_stats"]["identity"].startswith("conversation")
    assert len(set(nodes)) == 4                                   # 29 conversations over 4 nodes


def test_session_ring_moves_only_what_a_new_node_takes():
    from kvbench.cluster.routers.session import SessionRouter

    four, five = SessionRouter(4), SessionRouter(5)
    moved = [(four.node_of(i), five.node_of(i)) for i in range(5000) if four.node_of(i) != five.node_of(i)]
    assert all(new == 4 for _, new in moved)                  # nothing moves between the old nodes
    assert 0.1 < len(moved) / 5000 < 0.35                     # about 1/5 moves to the new one


# --- the cluster table, through the command and with values wider than any fixed width ------------------------
HEAD = ["router", "hit", "l1", "l2", "l3", "l4", "imbal", "dup", "TTFT p50", "p99 ms", "saved tok", "L4 read/s"]


def _cluster_table(out: str, n: int) -> list[str]:
    lines = out.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.split()[:3] == ["router", "hit", "l1"])
    return lines[i:i + 1 + n]


def _assert_laid_out(lines: list[str], want: list[list[str]]):
    """Split on runs of two or more spaces the lines give back exactly the cells (so none touches a neighbour),
    and a right-aligned column's cells end where its header ends."""
    head, rows = lines[0], lines[1:]
    assert re.split(r" {2,}", head.strip()) == HEAD
    for line, cells in zip(rows, want, strict=True):
        assert re.split(r" {2,}", line.strip()) == cells, line
    ends = {}
    pos = 0
    for h in HEAD:
        pos = head.index(h, pos) + len(h)
        ends[h] = pos
    for line, cells in zip(rows, want):
        pos = 0
        for h, c in zip(HEAD, cells):
            pos = line.index(c, pos) + len(c)
            if h != "router":
                assert pos == ends[h], (h, c, line)


def test_cluster_table_of_a_real_dry_run_lines_up(cli, tmp_path):
    """A generated hour on 4 nodes, two routers (least-loaded is the longest name): the table's cells are the
    --json summary's figures, each in its column."""
    args = ["cluster", "gen:chat,duration=1h,rate=2,seed=1", "--model", "tiny-gqa", "--nodes", "4",
            "--routers", "prefix,least-loaded", "--l2", "1MiB", "--dry-run", "--results", tmp_path / "res"]
    r = cli(*args)
    assert r.exit_code == 0, r.output
    j = cli(*args, "--json")
    s = json.loads(j.output[j.output.index("{"):])
    want = []
    for name, x in s["routers"].items():
        th = x["global"]["tier_hit_ratio"]
        want.append([name, f"{x['global']['hit_ratio']:.3f}",
                     *("-" if th[t] is None else f"{th[t]:.3f}" for t in ("l1", "l2", "l3", "l4")),
                     f"{x['imbalance']:.2f}", f"{x['duplication']:.2f}", f"{x['ttft_ms']['p50']:.1f}",
                     f"{x['ttft_ms']['p99']:.1f}", f"{x['prefill_tokens_saved']:,}", "-"])
    assert [w[0] for w in want] == ["prefix", "least-loaded"]
    _assert_laid_out(_cluster_table(r.output, 2), want)


def test_cluster_table_widens_a_column_for_a_wide_value(cli, tmp_path, capsys):
    """The week on 16 nodes that glued p99 and saved tokens: 5081.3 ms and 20,691,484,175 tokens (a week's
    figures put into a real run's summary), with a router name past the old 13 characters and an imbalance of
    1,234.57 past the old 7."""
    from kvbench.cli.cluster import _print

    r = cli("cluster", "gen:chat,duration=1h,rate=2,seed=1", "--model", "tiny-gqa", "--nodes", "2", "--router",
            "prefix", "--l2", "1MiB", "--dry-run", "--json", "--results", tmp_path / "res")
    s = json.loads(r.output[r.output.index("{"):])
    x = s["routers"]["prefix"] if s.get("routers") else s
    x["global"]["hit_ratio"], x["imbalance"], x["duplication"] = 0.651, 1234.567, 1.17
    x["global"]["tier_hit_ratio"] = {"l1": None, "l2": 0.184, "l3": 0.443, "l4": 0.025}
    x["ttft_ms"]["p50"], x["ttft_ms"]["p99"], x["prefill_tokens_saved"] = 82.2, 5081.3, 20_691_484_175
    x["l4"]["read_bytes_per_s"] = 171e6
    wide = {"prefix": x, "a-router-named-at-length": json.loads(json.dumps(x))}
    capsys.readouterr()
    _print({**s, "routers": wide})
    out = capsys.readouterr().out
    row = ["0.651", "-", "0.184", "0.443", "0.025", "1234.57", "1.17", "82.2", "5081.3", "20,691,484,175",
           "171 MB/s"]
    lines = _cluster_table(out, 2)
    _assert_laid_out(lines, [["prefix", *row], ["a-router-named-at-length", *row]])
    assert "5081.3  20,691,484,175" in lines[1]          # the p99 column's gutter, then the saved tokens
    assert "5081.320,691,484,175" not in out


def test_cluster_wear_line_says_a_store_never_written_in_words(capsys):
    """A node's L3 that nothing is written to (a store holding every block it is asked for): KV kept is 'never
    rewritten (no writes)' and the lifetime 'no writes: unbounded', never 'inf' (in memory) nor 'n/a' (read back
    from JSON, where infinity is null, beside the stated 0 B/s)."""
    from kvbench.cli.cluster import _print_wear

    wear = {"dwpd_host_mean": 0.0, "dwpd_host_busiest": 0.0, "write_bytes_per_s_busiest": 0.0,
            "residence_s_busiest": math.inf, "dwpd_rating_equivalent_busiest": 0.0, "lifetime_years_busiest": math.inf,
            "drive_class": "tlc-1dwpd", "waf_busiest": 1.0, "nodes_turned_over": 2, "nodes": 2}
    for w in (wear, {**wear, "residence_s_busiest": None}):
        _print_wear({"prefix": {"wear": {"l3": w}}})
        out = capsys.readouterr().out
        assert "KV kept never rewritten (no writes)" in out and "no writes: unbounded" in out, out
        assert "inf" not in out.replace("tlc", "") and "n/a" not in out, out


def test_cluster_names_a_trace_that_is_not_stationary_in_its_json_and_first_lines(cli, tmp_path):
    """Its hit ratios and per-node steady DWPD come from the whole trace: on mooncake-sample (not stationary, its
    last half is) the summary carries trace stats' verdict and the sentence, printed under the header; a
    stationary workload (an hour of the default fitted model, seed 0) carries the verdict and no sentence."""
    from kvbench.stream.stationarity import stationarity
    from kvbench.stream.traces import read_trace

    s = _cluster(cli, tmp_path, "mooncake-sample", "--nodes", "2", "--router", "session", "--l2", "4MiB")
    st = s["stationarity"]
    assert st["stationary"] is False and st["verdict"] == stationarity(read_trace("mooncake-sample")).verdict
    assert st["note"].startswith("The trace is not stationary (") and st["suffix"]["start_s"] == pytest.approx(272.653 / 2)
    assert "the hit ratios, each node's steady write rate, DWPD and lifetime are that window's" in st["note"]
    r = cli("cluster", "mooncake-sample", "--model", "tiny-gqa", "--nodes", "2", "--router", "session", "--l2", "4MiB",
            "--dry-run", "--results", tmp_path / "res")
    assert r.exit_code == 0 and r.output.splitlines()[1] == f"  note: {st['note']}", r.output
    calm = _cluster(cli, tmp_path, "gen:mooncake-synthetic-fit,duration=1h", "--router", "session", "--l2",
                    "4MiB")["stationarity"]
    assert calm["stationary"] is True and calm["note"] is None


def test_the_summarys_percentiles_by_hand_on_a_burst_of_growing_prefixes(cli, tmp_path):
    """200 requests at once on one node with one lane: request i holds blocks 1..i+1, so it hits the i blocks the
    ones before it left in L3 (room for all) and prefills one new block. Its service is i x 262,144 B / 6 GB/s of
    load plus 512 tokens at 10,000/s; it queues behind every earlier one. Percentiles are inverted-CDF (the
    ceil(q n / 100)-th smallest), computed here apart from the code; no L4: no L4 peak."""
    import numpy as np

    n = 200
    tr = write_mooncake(tmp_path / "t.jsonl", [(0, list(range(1, i + 2))) for i in range(n)])
    s = _cluster(cli, tmp_path, tr, "--l3", str(tmp_path / "l3.store"), "--l3-capacity", str(256 * BLOCK),
                 "--router", "round-robin")
    load = np.arange(n) * BLOCK / 6e9 * 1e3
    service = load + 512 / TOK_S * 1e3
    queue = np.concatenate([[0.0], np.cumsum(service)[:-1]])
    ttft = queue + service

    def p(x, q):
        return np.sort(x)[math.ceil(q * x.size / 100) - 1]

    for k, q in (("p50", 50), ("p90", 90), ("p99", 99)):
        assert s["ttft_ms"][k] == pytest.approx(p(ttft, q), rel=1e-9), k
    for name, x in (("queue_ms", queue), ("load_ms", load)):
        assert s[name]["p50"] == pytest.approx(p(x, 50), rel=1e-9) and s[name]["p99"] == pytest.approx(p(x, 99),
                                                                                                        rel=1e-9)
    assert s["nodes"][0]["ttft_ms"]["p50"] == pytest.approx(p(ttft, 50), rel=1e-9)
    assert s["nodes"][0]["ttft_ms"]["p99"] == pytest.approx(p(ttft, 99), rel=1e-9)
    assert s["ttft_ms"]["mean"] == pytest.approx(ttft.mean(), rel=1e-9)
    assert s["l4"]["peak_read_bytes_per_s"] is None and s["l4"]["read_bytes_per_s"] is None
    assert s["prefill_tokens"] == n * 512 and s["prefill_tokens_saved"] == 512 * n * (n - 1) // 2
