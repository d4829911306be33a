"""The admission trade-off (kvbench.analysis.admission): the sweep simulator equal to the tier simulation and to
its Python loop, libCacheSim's Bloom-filter admissioner, the turn-over probes, and the plan's ``admission``
contract. The policies themselves: tests/sim/test_admission.py."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest

from kvbench.analysis.admission import simulate_tier, simulate_tier_reference
from kvbench.sim.tiers import Hierarchy, HierarchySpec, TierSpec
from tests.conftest import block_trace
from tests.sim.test_admission import BB, _cached_blocks, _check_sweep_agrees, _counts, _fields, _l3  # noqa: F401



def _random_prefix_requests(rng, n):
    """Sessions that grow on a few shared system prompts (prefix-chained keys, as traces are)."""
    sessions, out, nxt = {}, [], 100
    for _ in range(n):
        s = int(rng.integers(0, 12))
        if s not in sessions or rng.random() < 0.15:
            sessions[s] = [int(rng.integers(1, 4))]
        grow = int(rng.integers(0, 4))
        sessions[s] = sessions[s] + list(range(nxt, nxt + grow))
        nxt += grow
        out.append(list(sessions[s]))
    return out


@pytest.mark.parametrize("seed", range(4))
def test_compiled_sweep_equals_the_python_loop(seed, monkeypatch):
    """Every admission policy in front of every replacement policy, capacities from 1 block to past the
    footprint, with and without warm-up, in batches of 7 requests (so state carries across calls): the
    compiled sweep's TierRun equals the Python loop's, field for field (fill time, steady writes and window)."""
    import kvbench.analysis.admission as A

    monkeypatch.setattr(A, "BATCH_REQUESTS", 7)
    rng = np.random.default_rng(seed)
    reqs = _random_prefix_requests(rng, 160)
    tr = block_trace(reqs, np.cumsum(rng.exponential(1.0, len(reqs))))
    distinct = len({k for r in reqs for k in r})
    specs = ["all", "second-access", "tinylfu", "prefix-depth:depth=3", "prefix-depth:beyond_shared=1",
             "threshold:min_blocks=4", "threshold:window=20s"]
    for spec in specs:
        for policy in ("lru", "fifo", "s3fifo"):
            for cap in (1, 7, distinct // 3, distinct + 5):
                for warm in (0.0, 0.25):
                    want = simulate_tier_reference(tr, cap, spec, policy, warmup=warm)
                    assert _fields(simulate_tier(tr, cap, spec, policy, warmup=warm)) == _fields(want), \
                        (spec, policy, cap, warm)


def test_sweep_admit_all_equals_the_one_pass_steady_state():
    from kvbench.analysis.curves.residence import steady_curve
    from kvbench.sim.policies import make_policy, simulate_prefix
    from kvbench.stream.traces import read_trace

    tr = read_trace("mooncake-sample")
    curve = steady_curve(tr, block_bytes=BB)
    for cap in (40, 700, 5000):
        run = simulate_tier(tr, cap, "all")
        assert run.hit_blocks == simulate_prefix([tr], make_policy("lru", cap)).hit_blocks
        assert run.steady_writes == int(curve.steady_writes[cap])
        assert run.fill_time_s == pytest.approx(float(curve.fill_time_s[cap]), abs=1e-9)
        assert run.write_blocks_per_s == pytest.approx(float(curve.write_blocks_per_s[cap]), rel=1e-12)


@pytest.mark.parametrize("spec", ["second-access", "tinylfu", "prefix-depth:depth=6", "prefix-depth:beyond_shared=2",
                                  "threshold:min_blocks=20",
                                  "threshold:window=30s"])
def test_sweep_simulator_equals_the_tier_simulation(spec):
    from kvbench.stream.traces import read_trace

    tr = read_trace("mooncake-sample")
    h = Hierarchy(HierarchySpec((TierSpec("l3", 1500 * BB, admission=spec),), BB))
    reqs, _ = h.run(tr.timestamp_s, tr.offsets, tr.keys)
    _check_sweep_agrees(tr, 1500, spec, h, reqs)
    assert h.tier("l3").c.admission_rejects > 0


def test_second_access_equals_libcachesim_bloom_filter_admission():
    """Block semantics (one block per request, size 1). libCacheSim admits an object its Bloom filter has seen;
    with a ghost larger than the trace's keys ours remembers exactly, so miss counts are equal."""
    lcs = pytest.importorskip("libcachesim", reason="libcachesim (test dependency) is not installed")
    rng = np.random.default_rng(3)
    keys = (rng.zipf(1.2, 20000) % 5000 + 1).astype(np.uint64)
    tr = block_trace([[int(k)] for k in keys])
    for cap in (50, 500, 2000):
        cache = lcs.LRU(cap, admissioner=lcs.BloomFilterAdmissioner())
        misses = 0
        for k in keys.tolist():
            req = lcs.Request()
            req.obj_id, req.obj_size = int(k), 1
            misses += not cache.get(req)
        run = simulate_tier(tr, cap, "second-access:ghost=1000")
        assert run.references - run.hit_blocks == misses
        # the bounded ghost (capacity keys) forgets: a different count, by design
        assert simulate_tier(tr, cap, "second-access").hit_blocks != run.hit_blocks


def test_lru_equals_libcachesim_and_wtinylfu_differs_by_design():
    """kvbench's TinyLFU is an admission filter in front of LRU; libCacheSim's WTinyLFU is a whole policy (a 1%
    LRU window, a segmented main, the sketch between them), so only their direction is compared."""
    lcs = pytest.importorskip("libcachesim", reason="libcachesim (test dependency) is not installed")
    rng = np.random.default_rng(4)
    keys = (rng.zipf(1.1, 20000) % 4000 + 1).astype(np.uint64)
    tr = block_trace([[int(k)] for k in keys])

    def lcs_misses(cache):
        m = 0
        for k in keys.tolist():
            req = lcs.Request()
            req.obj_id, req.obj_size = int(k), 1
            m += not cache.get(req)
        return m

    lru = simulate_tier(tr, 300, "all")
    assert lru.references - lru.hit_blocks == lcs_misses(lcs.LRU(300))
    ours = simulate_tier(tr, 300, "tinylfu")
    assert ours.written < lru.written                                     # fewer writes
    assert ours.references - ours.hit_blocks <= lru.references - lru.hit_blocks   # not fewer hits on Zipf


def test_plan_admission_contract(cli):
    cap = 800 * 512 * 131072          # 800 blocks of llama-3.1-8b KV (512 tokens x 128 KiB)
    r = cli("plan", "--trace", "mooncake-sample", "--model", "llama-3.1-8b", "--admission", "all,second-access",
            "--capacities", f"{cap},{4 * cap}", "--sweep", "", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    adm = out["admission"]
    assert list(adm) == ["all", "second-access"]
    for row in adm.values():
        assert {"hit_ratio", "write_bytes_per_s", "dwpd", "dwpd_host", "dwpd_rating_equivalent",
                "usd_per_day", "curve"} <= set(row)
        assert row["capacity_bytes"] == pytest.approx(cap, rel=1e-9)
    head = out["capacity_curve"][0]                   # admit-all equals the one-pass steady state
    assert adm["all"]["hit_ratio"] == pytest.approx(head["hit_ratio"], rel=1e-12)
    assert adm["all"]["write_bytes_per_s"] == pytest.approx(head["write_bytes_per_s"], rel=1e-12)
    assert adm["all"]["dwpd"] == pytest.approx(head["dwpd"], rel=1e-12)
    sa = adm["second-access"]
    assert sa["write_bytes_per_s"] is None or sa["write_bytes_per_s"] < adm["all"]["write_bytes_per_s"]
    assert sa["hit_ratio"] <= adm["all"]["hit_ratio"]
    warm = json.loads(cli("plan", "--trace", "mooncake-sample", "--model", "llama-3.1-8b", "--admission", "all",
                          "--capacities", f"{cap}", "--sweep", "", "--warmup", "0.3", "--json").output)
    assert warm["admission"]["all"]["hit_ratio"] == pytest.approx(warm["capacity_curve"][0]["hit_ratio"], rel=1e-12)
    assert warm["admission"]["all"]["hit_ratio"] != adm["all"]["hit_ratio"]       # the warm-up is honoured
    bad = cli("plan", "--trace", "mooncake-sample", "--model", "llama-3.1-8b", "--admission", "all,lfu")
    assert bad.exit_code != 0 and "unknown admission policy 'lfu'" in bad.output
    assert "Traceback" not in bad.output


def test_replay_honours_admission_with_real_io(cli, tmp_path, store_dir):
    """Real O_DIRECT writes follow the policy: measured L3 bytes = admitted blocks, fewer than admit-all."""
    from tests.replay.test_kv import BLOCK, _json

    out = {}
    for adm in ("all", "second-access"):
        d = tmp_path / adm
        d.mkdir()
        s = _json(cli("replay", "kv", "mooncake-sample", "--model", "tiny-gqa", "--l3", store_dir / f"{adm}.store",
                      "--l3-capacity", "64MiB", "--max-requests", "120", "--closed-loop", "--verify", "all",
                      "--admission", adm, "--json", "--results", d))
        assert s["status"] == "complete" and s["verify_errors"] == 0
        out[adm] = s
    assert out["all"]["verify_checked"] > 0
    a, b = out["all"]["tiers"]["l3"], out["second-access"]["tiers"]["l3"]
    assert a["admission"] == "all" and b["admission"] == "second-access:ghost=1"
    assert a["blocks"]["admission_rejects"] == 0 and b["blocks"]["admission_rejects"] > 0
    for t in (a, b):
        blk = t["blocks"]
        assert t["write_bytes"] == (blk["create_writes"] + blk["promote_writes"] + blk["demote_writes"]) * BLOCK
    assert b["write_bytes"] < a["write_bytes"]
    assert out["second-access"]["hit_ratio"] <= out["all"]["hit_ratio"]
    # the simulation of the same window counts the same admissions
    from kvbench.stream.traces import read_trace

    tr = read_trace("mooncake-sample")
    n = int(tr.offsets[120])
    sub = SimpleNamespace(offsets=tr.offsets[:121], keys=tr.keys[:n], timestamp_s=tr.timestamp_s[:120])
    run = simulate_tier(sub, (64 << 20) // BLOCK, "second-access")
    assert (run.written, run.rejected) == (b["blocks"]["create_writes"], b["blocks"]["admission_rejects"])
    bad = cli("replay", "kv", "mooncake-sample", "--model", "tiny-gqa", "--l3", tmp_path / "x.store",
              "--l3-capacity", "64MiB", "--admission", "lfu", "--dry-run")
    assert bad.exit_code != 0 and "unknown admission policy 'lfu'" in bad.output and "Traceback" not in bad.output


def test_report_frontier_has_one_curve_per_policy(cli, tmp_path):
    from kvbench.report.figures import FIGURES, admission_frontier
    from kvbench.report.rundata import load_run

    r = cli("plan", "--trace", "mooncake-synthetic", "--model", "tiny-gqa", "--admission",
            "all,second-access,tinylfu", "--capacities", "4GiB,256MiB,1GiB", "--sweep", "", "--json")
    plan = json.loads(r.output)
    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps({"kind": "plan", "status": "complete"}))
    (run / "plan.json").write_text(json.dumps(plan))
    fig = admission_frontier([load_run(run)])
    curves = [t for t in fig.data if t.mode == "lines+markers"]
    assert [t.name for t in curves] == ["all", "second-access", "tinylfu"]
    for t in curves:
        pts = [p for p in plan["admission"][t.name]["curve"] if p["filled"] and p["dwpd"]]
        assert list(t.x) == [p["dwpd"] for p in pts] and list(t.y) == [p["hit_ratio"] for p in pts]
        # points that fill but do not turn over are projections: hollow
        assert list(t.marker.symbol) == ["circle" if p["turned_over"] else "circle-open" for p in pts]
    stars = {t.name.replace(" at the planned capacity", ""): t for t in fig.data if t.mode == "markers"}
    for name, t in stars.items():       # the planned capacity's answer: hollow when its rate is held
        row = plan["admission"][name]
        assert t.marker.symbol == ("star" if row["steady_state"] == "measured" else "star-open")
        assert list(t.x) == [row["dwpd"]]
    # at 4 GiB admit-all turns over; second-access and tinylfu do not (their probes below 4 GiB are on the curve)
    assert [r["steady_state"] for r in plan["admission"].values()] == ["measured", "extrapolated", "extrapolated"]
    assert "Admission: hit ratio vs DWPD" in [name for name, _ in FIGURES]
    # the frontier's trade: at 4 GiB second-access writes 7x less than admit-all for 0.07 of hit ratio
    top = {k: v["curve"][-1] for k, v in plan["admission"].items()}
    assert top["second-access"]["dwpd"] < top["all"]["dwpd"] and top["second-access"]["hit_ratio"] < \
        top["all"]["hit_ratio"]
    (run / "plan.json").write_text(json.dumps({k: v for k, v in plan.items() if k != "admission"}))
    assert admission_frontier([load_run(run)]) is None            # no --admission: no figure


def test_plan_admission_follows_the_planned_rate(cli):
    """--rate 2x the trace's (compress): the same hits, twice the steady write rate and DWPD."""
    from kvbench.stream.traces import read_trace

    tr = read_trace("mooncake-synthetic")
    rate = 2 * tr.n_requests / tr.duration_s
    out = {}
    for extra in ((), ("--rate", f"{rate!r}")):
        r = cli("plan", "--trace", "mooncake-synthetic", "--model", "tiny-gqa", "--admission", "all,second-access",
                "--capacities", "4GiB", "--sweep", "", *extra, "--json")
        assert r.exit_code == 0, r.output
        out[bool(extra)] = json.loads(r.output)["admission"]
    for p in ("all", "second-access"):
        a, b = out[False][p], out[True][p]
        assert b["hit_ratio"] == a["hit_ratio"]
        assert b["write_bytes_per_s"] == pytest.approx(2 * a["write_bytes_per_s"], rel=1e-9)
        assert b["dwpd"] == pytest.approx(2 * a["dwpd"], rel=1e-9)


@pytest.mark.parametrize("policy", ["fifo", "s3fifo"])
def test_tinylfu_in_front_of_other_replacement_policies(policy):
    """The victim TinyLFU weighs is the replacement policy's next eviction (S3-FIFO: the first key its scan
    examines); the hook works the same in front of each."""
    from kvbench.stream.traces import read_trace

    tr = read_trace("mooncake-sample")
    h = Hierarchy(HierarchySpec((TierSpec("l3", 800 * BB, policy=policy, admission="tinylfu"),), BB))
    reqs, _ = h.run(tr.timestamp_s, tr.offsets, tr.keys)
    run = simulate_tier(tr, _cached_blocks(h), "tinylfu", policy=policy)
    c = h.tier("l3").c
    assert (run.hit_blocks, run.written, run.rejected) == (int(reqs["hit_blocks"].sum()), c.writes,
                                                          c.admission_rejects)
    assert c.admission_rejects > 0 and c.writes > 0


def test_the_sweep_by_hand_at_its_edges():
    """One-block requests [1] [2] [3] [1] at t = 0..3, LRU of 2: writes in every request; the first eviction is
    the third write (t = 2), then one write in the 1 s after it. Three writes into 3 blocks never evict. One
    request of 3 blocks at t = 5 fills 2 blocks at once: fill time 0 from its own arrival. An empty trace, and
    requests without blocks, run to zeros. Each equals the Python oracle."""
    cases = [
        (block_trace([[1], [2], [3], [1]]), 2, dict(references=4, hit_blocks=0, written=4, rejected=0, fill_time_s=2.0,
                                                steady_writes=1, steady_window_s=1.0, span_s=3.0)),
        (block_trace([[1], [2], [3]]), 3, dict(written=3, fill_time_s="nan", steady_writes=0, steady_window_s="nan",
                                          steady_references=0, demand_references=2)),
        (block_trace([[1, 2, 3]], [5.0]), 2, dict(written=3, fill_time_s=0.0, steady_writes=0, steady_window_s=0.0,
                                               span_s=0.0)),
        (block_trace([]), 4, dict(references=0, hit_blocks=0, written=0, rejected=0, fill_time_s="nan", span_s=0.0,
                             demand_references=0)),
        (block_trace([[], []], [1.0, 2.0]), 4, dict(references=0, written=0, rejected=0, fill_time_s="nan", span_s=0.0)),
        # arrivals out of file order: the span runs from the earliest arrival to the last request with blocks
        (block_trace([[1], []], [5.0, 1.0]), 4, dict(references=1, written=1, span_s=4.0)),
    ]
    for tr, cap, want in cases:
        got = simulate_tier(tr, cap, "all")
        assert _fields(got) == _fields(simulate_tier_reference(tr, cap, "all"))
        for k, v in want.items():
            assert (getattr(got, k) != getattr(got, k)) if v == "nan" else getattr(got, k) == v, (k, got)
    # W = the window's writes per reference (1 of 1) x the mean demand (3 references after the first arrival, in
    # 3 s), as residence.py's; the same requests re-timed (three in the first 0.2 s) keep it, where the window's
    # own rate would be 1 block in 2.8 s; and half as many blocks in the window's request, one of two written
    for times in (None, [0.0, 0.1, 0.2, 3.0]):
        got = simulate_tier(block_trace([[1], [2], [3], [1]], times), 2, "all")
        assert (got.steady_references, got.demand_references, got.steady_writes) == (1, 3, 1)
        assert got.write_blocks_per_s == pytest.approx(1.0)
        assert got.write_blocks_per_s == simulate_tier_reference(block_trace([[1], [2], [3], [1]], times), 2,
                                                                 "all").write_blocks_per_s
    # over 0.3 s: the same window at ten times the demand; a tier rewritten exactly its capacity after filling
    # (1 block, [1] [2] [1]) has turned over; one that fills and then only hits ([1] [2] [2] [2]) has no steady
    # state (no rate, not 0)
    assert simulate_tier(block_trace([[1], [2], [3], [1]], [0.0, 0.1, 0.2, 0.3]), 2, "all").write_blocks_per_s == \
        pytest.approx(10.0)
    exact = simulate_tier(block_trace([[1], [2], [1]]), 1, "all")
    assert (exact.steady_writes, exact.turned_over) == (1, True)
    idle = simulate_tier(block_trace([[1], [2], [2], [2]]), 1, "all")
    assert (idle.steady_writes, idle.steady_references, idle.filled) == (0, 2, False)
    assert math.isnan(idle.write_blocks_per_s)
    # second-access on [1] [1] [1]: the first 1 is only remembered (rejected), the second written, the third hits
    got = simulate_tier(block_trace([[1], [1], [1]]), 2, "second-access")
    assert (got.written, got.rejected, got.hit_blocks) == (1, 1, 1)


def _tradeoff_at(trace, planned_blocks: int, policies=("all",), bb: int = 1000, **kw):
    """The plan's admission trade-off on ``trace`` at ``planned_blocks`` (one copy, trace time), only the planned
    capacity asked (so the probes below it are all the curve holds beside it)."""
    from kvbench.analysis.admission import tradeoff
    from kvbench.analysis.cost import load_prices
    from kvbench.analysis.plan import _Scale

    prices = load_prices()
    return tradeoff(trace, policies=policies, block_bytes=bb, scale=_Scale(time_scale=1.0, copies=1.0, block_bytes=bb),
                    planned_bytes=planned_blocks * bb, curve_bytes=[planned_blocks * bb], waf=1.0,
                    ssd_class=prices.ssd["tlc-1dwpd"], store_fill=1.0, dram_bytes=0.0, prices=prices,
                    tokens_per_day=0.0, refs_per_day=0.0, block_tokens=1, tokens_per_s=1.0, distinct=10, **kw)


def test_admission_answer_holds_the_rate_where_the_planned_tier_does_not_turn_over():
    """The six requests of tests/analysis/curves/test_residence.py (blocks 1 2 1 1 3 2 at t = 0..5) at a planned 2 blocks:
    the tier fills at t = 4 and writes 1 block after it (projection 1 block/s), fewer than 2: not turned over. No
    smaller capacity was asked, so 1 block is simulated (2 / 2): it turns over at 0.75 blocks/s (3 misses of the 4
    references after its fill, at 1 reference/s), T 4/3 s, the longest shown; the answer holds it: 750 B/s, DWPD
    86,400 x 0.75 / 2, residence 2 / 0.75 s, the projection kept apart."""
    from tests.conftest import make_trace

    tr = make_trace([0, 1, 2, 3, 4, 5], [[1], [2], [1], [1], [3], [2]])
    r = _tradeoff_at(tr, 2)["all"]
    assert r["steady_state"] == "extrapolated" and not r["turned_over"]
    assert r["write_bytes_per_s"] == pytest.approx(750.0) and r["projected_write_bytes_per_s"] == pytest.approx(1000.0)
    assert r["dwpd"] == pytest.approx(86_400 * 0.75 / 2) and r["residence_s"] == pytest.approx(2 / 0.75)
    assert r["dwpd_host"] == pytest.approx(86_400 * 0.75 / 2)                       # fill 1: the tier is the drive
    assert "fills at 4 s but does not turn over" in r["basis"] and "(1 s, at 0.5 x the planned capacity)" in r["basis"]
    assert [(c["capacity_bytes"], c["turned_over"]) for c in r["curve"]] == [(1000.0, True), (2000.0, False)]
    assert "plus 1 below the planned capacity" in r["curve_capacities"]
    # measured where it turns over: the planned 1 block is C = 1 itself, nothing simulated beside it
    one = _tradeoff_at(tr, 1)["all"]
    assert one["steady_state"] == "measured" and one["write_bytes_per_s"] == pytest.approx(750.0)
    assert "projected_write_bytes_per_s" not in one and "plus" not in one["curve_capacities"]


def test_admission_answer_without_a_turned_over_tier_has_no_steady_state():
    """[1] [2] at 0, 1 s planned at 1 block: it fills at the last arrival (no window) and nothing smaller exists:
    no rate to hold, no DWPD, the fill-phase mean rate reported apart."""
    from tests.conftest import make_trace

    r = _tradeoff_at(make_trace([0, 1], [[1], [2]]), 1)["all"]
    assert r["steady_state"] == "unknown" and r["write_bytes_per_s"] is None and r["dwpd"] is None
    assert r["dwpd_host"] is None and r["lifetime_years"] is None and r["mean_write_bytes_per_s"] == 2000.0


@pytest.mark.parametrize("seed", [1, 2])
def test_admission_probes_find_the_turn_over_boundary_within_ten_percent(seed):
    """Admit-all on a random prefix trace, planned at 1.2 x its footprint's half, which does not turn over: the
    probes bisect to a turned-over capacity within 1.1 x of the largest one below the planned (the exact LRU curve,
    tests/analysis/test_plan.py's brute force checks it, says which that is), and the answer holds the rate of the longest
    residence among them, equal to the exact curve's there."""
    from kvbench.analysis.curves.residence import steady_curve
    from tests.analysis.test_plan import random_prefix_trace

    tr = random_prefix_trace(seed, n=300)
    c = steady_curve(tr, block_bytes=1000)
    fill_only = np.flatnonzero(c.filled & ~c.turned_over)
    planned = int(fill_only[len(fill_only) // 2])
    boundary = int(np.flatnonzero(c.turned_over[:planned]).max())
    r = _tradeoff_at(tr, planned)["all"]
    shown = [x for x in r["curve"] if x["turned_over"]]
    assert shown and max(x["capacity_bytes"] for x in shown) >= boundary * 1000 / 1.1
    base = max(shown, key=lambda x: x["residence_s"])
    assert r["write_bytes_per_s"] == pytest.approx(base["write_bytes_per_s"])
    cb = int(base["capacity_bytes"] // 1000)
    assert base["write_bytes_per_s"] == pytest.approx(c.write_blocks_per_s[cb] * 1000, rel=1e-12)
    assert r["write_bytes_per_s"] == pytest.approx(c.held_write_blocks_per_s() * 1000, rel=0.25)


def test_plan_terminal_admission_table_names_each_rows_state(cli, capsys):
    """The terminal's admission table: a measured row has no mark, a held one says so and shows the held rate (the
    JSON's), a policy without a steady state shows its fill-phase mean rate in parentheses and no DWPD."""
    from kvbench.units import format_rate

    args = ("plan", "--trace", "mooncake-synthetic", "--model", "tiny-gqa", "--admission",
            "all,second-access,prefix-depth:depth=1", "--capacities", "4GiB,256MiB,1GiB", "--sweep", "")
    plan = json.loads(cli(*args, "--json").output)["admission"]
    text = cli(*args).output
    rows = {name: [ln for ln in text.splitlines() if ln.strip().startswith(plan[name]["policy"] + " ")][0]
            for name in plan}
    assert plan["all"]["steady_state"] == "measured" and "(" not in rows["all"]
    held = plan["second-access"]
    assert held["steady_state"] == "extrapolated"
    assert rows["second-access"].endswith("(extrapolated: rate held, see basis)")
    assert format_rate(held["write_bytes_per_s"]) in rows["second-access"]       # decimal, as the answer's
    # a policy with no turned-over tier (as _tradeoff_at's [1] [2] trace gives): the row the printer writes
    from kvbench.cli.plan import _print

    out = json.loads(cli(*args, "--json").output)
    deep = out["admission"]["prefix-depth:depth=1"]
    deep.update(steady_state="unknown", write_bytes_per_s=None, dwpd=None, dwpd_host=None,
                dwpd_rating_equivalent=None)
    _print(out)
    row = [ln for ln in capsys.readouterr().out.splitlines() if ln.strip().startswith(deep["policy"] + " ")][0]
    assert f"({format_rate(deep['mean_write_bytes_per_s'])})" in row and " n/a " in row
    assert row.endswith("(no steady state: fill-phase mean write rate)")


def test_admission_probes_start_from_the_nearest_turned_over_capacity_asked():
    """Asked for the exact boundary (the largest capacity below the planned one that turns over, by the exact LRU
    curve) and for 1 block beside the planned capacity, the answer holds the boundary's own rate (the nearest
    turned-over capacity asked is where the bisection starts); a capacity asked that fills but does not turn over
    is never taken for one that does."""
    from kvbench.analysis.admission import tradeoff
    from kvbench.analysis.cost import load_prices
    from kvbench.analysis.plan import _Scale
    from kvbench.analysis.curves.residence import steady_curve
    from tests.analysis.test_plan import random_prefix_trace

    tr = random_prefix_trace(3, n=300)
    c = steady_curve(tr, block_bytes=1000)
    fill_only = np.flatnonzero(c.filled & ~c.turned_over)
    planned = int(fill_only[len(fill_only) // 2])
    boundary = int(np.flatnonzero(c.turned_over[:planned]).max())
    short = int(fill_only[0])                       # fills, does not turn over, below the planned capacity
    assert 1 < boundary < short < planned and c.turned_over[1]
    prices = load_prices()
    r = tradeoff(tr, policies=("all",), block_bytes=1000, scale=_Scale(time_scale=1.0, copies=1.0, block_bytes=1000),
                 planned_bytes=planned * 1000, curve_bytes=[planned * 1000, 1000, boundary * 1000, short * 1000],
                 waf=1.0, ssd_class=prices.ssd["tlc-1dwpd"], store_fill=1.0, dram_bytes=0.0, prices=prices,
                 tokens_per_day=0.0, refs_per_day=0.0, block_tokens=1, tokens_per_s=1.0, distinct=10)["all"]
    assert r["steady_state"] == "extrapolated"
    assert r["write_bytes_per_s"] == pytest.approx(c.write_blocks_per_s[boundary] * 1000, rel=1e-12)
    assert f"at {boundary / planned:.3g} x the planned capacity" in r["basis"]
    # the probes bisect only between the nearest capacities asked that do and do not turn over
    probed = {int(x["capacity_bytes"] // 1000) for x in r["curve"]} - {planned, 1, boundary, short}
    assert all(boundary < p < short for p in probed), (boundary, short, sorted(probed))


def test_admission_probes_halve_down_and_stop_at_their_bound():
    """The six requests planned at 4 blocks (never fills): halving tries 2 (fills, does not turn over), then 1
    (turns over, 0.75 blocks/s): the answer holds C = 1's rate. On [1] [2] at 0, 1 s nothing ever turns over: the
    halving stops at 1 block (4, 2, 1), or at ``most`` simulations."""
    from kvbench.analysis.admission import _probe_turned_over, simulate_tier
    from tests.conftest import make_trace

    tr = make_trace([0, 1, 2, 3, 4, 5], [[1], [2], [1], [1], [3], [2]])
    r = _tradeoff_at(tr, 4)["all"]
    assert r["steady_state"] == "extrapolated" and r["write_bytes_per_s"] == pytest.approx(750.0)
    assert sorted(int(x["capacity_bytes"] // 1000) for x in r["curve"]) == [1, 2, 4]
    never = make_trace([0, 1], [[1], [2]])
    head = simulate_tier(never, 8, "all")
    assert [x.capacity_blocks for x in _probe_turned_over(never, head, [], "all", 0.0)] == [4, 2, 1]
    assert [x.capacity_blocks for x in _probe_turned_over(never, head, [], "all", 0.0, most=2)] == [4, 2]


def _run(cap: int, turned: bool):
    """A TierRun of ``cap`` blocks that did (or did not) turn over within a 10-s trace (what _probe reads)."""
    from kvbench.analysis.admission import TierRun

    return TierRun(admission="all", capacity_blocks=cap, references=100, hit_blocks=0, written=100, rejected=0,
                   fill_time_s=1.0, steady_writes=cap if turned else cap - 1, steady_window_s=9.0, span_s=10.0,
                   steady_references=90, demand_references=99)


def test_admission_probes_bisect_only_what_is_unknown():
    """From a turned-over 120 blocks to the planned 132 (1.1x exactly): nothing to probe. A capacity asked that
    does not turn over below the one that does (a policy need not be monotone) is not where the bisection ends:
    from 2 (turned over) to the planned 8, the probes lie between them, on the six requests' own runs."""
    from kvbench.analysis.admission import _probe_turned_over
    from tests.conftest import make_trace

    tr = make_trace([0, 1, 2, 3, 4, 5], [[1], [2], [1], [1], [3], [2]])
    assert _run(120, True).turned_over and not _run(132, False).turned_over
    assert _probe_turned_over(tr, _run(132, False), [_run(120, True)], "all", 0.0) == []
    probed = _probe_turned_over(tr, _run(8, False), [_run(1, False), _run(2, True)], "all", 0.0)
    # sqrt(2 x 8) = 4 (never fills: not turned over), then sqrt(2 x 4) -> 3 (likewise), then 2..3 is one block apart
    assert [x.capacity_blocks for x in probed] == [4, 3]
    assert [x.capacity_blocks for x in _probe_turned_over(tr, _run(8, False), [_run(2, True)], "all", 0.0,
                                                          most=1)] == [4]


def test_admission_probes_share_the_simulation_budget():
    """The six requests (6 references) planned at 2 blocks: a budget of 12 references is two simulations, the
    planned one and one probe (1 block, which turns over: held at 0.75 blocks/s); a budget of 6 is the planned
    one alone, so nothing turned over is known and the answer has no steady state."""
    from tests.conftest import make_trace

    tr = make_trace([0, 1, 2, 3, 4, 5], [[1], [2], [1], [1], [3], [2]])
    two = _tradeoff_at(tr, 2, budget_refs=12)["all"]
    assert two["steady_state"] == "extrapolated" and two["write_bytes_per_s"] == pytest.approx(750.0)
    assert len(two["curve"]) == 2
    one = _tradeoff_at(tr, 2, budget_refs=6)["all"]
    assert one["steady_state"] == "unknown" and one["write_bytes_per_s"] is None and len(one["curve"]) == 1


# --- mutation survivors (issue 34 part 4) ------------------------------------------------------------------
SIX = ([0, 1, 2, 3, 4, 5], [[1], [2], [1], [1], [3], [2]])     # the six requests above (blocks 1 2 1 1 3 2)


def test_a_run_without_a_steady_window_is_not_filled():
    """filled: a finite, positive window after the first eviction with writes in it. A window of 0 s (the last
    request with blocks arrives at the fill, as out-of-order arrivals allow) or without writes has no steady
    state; turned over needs at least the capacity written after the fill."""
    from kvbench.analysis.admission import TierRun

    def run(window, writes, cap=2):
        return TierRun(admission="all", capacity_blocks=cap, references=10, hit_blocks=0, written=10, rejected=0,
                       fill_time_s=1.0, steady_writes=writes, steady_window_s=window, span_s=5.0,
                       steady_references=4, demand_references=8)

    assert run(3.0, 2).filled and run(3.0, 2).turned_over and not run(3.0, 1).turned_over
    assert run(3.0, 1).write_blocks_per_s == pytest.approx(1 / 4 * 8 / 5.0)
    for window, writes in ((0.0, 2), (3.0, 0), (float("nan"), 2), (float("inf"), 2)):
        r = run(window, writes)
        assert not r.filled and not r.turned_over and math.isnan(r.write_blocks_per_s), (window, writes)


def test_the_frontier_grid_by_hand():
    """8 log-spaced capacities from 1/64 of the footprint (at least 1 block) to one block below it, rounded and
    de-duplicated: 1,000 distinct blocks -> 15 .. 999 (ratio (999/15)^(1/7) = 1.822); tiny footprints -> 1, 2."""
    from kvbench.analysis.admission import _grid

    assert _grid(1000, 8) == [15, 27, 50, 91, 165, 301, 548, 999]
    assert _grid(100, 8) == [1, 2, 4, 7, 14, 27, 51, 99]
    assert _grid(3, 8) == _grid(2, 8) == _grid(1, 8) == [1, 2]
    assert _grid(1000, 2) == [15, 999]


def test_the_tradeoff_curve_runs_on_the_grid_unless_capacities_are_given():
    """Without capacities the curve is the footprint's 8-point grid plus the planned capacity (planned 4 of the
    six requests' 3 distinct blocks: the grid of 3 is 1, 2); with a budget of k simulations per policy the grid
    given is thinned evenly to k - 1 (the planned one is the k-th) and says so."""
    from kvbench.analysis.admission import tradeoff
    from kvbench.analysis.cost import load_prices
    from kvbench.analysis.plan import _Scale
    from tests.conftest import make_trace

    prices = load_prices()
    tr = make_trace(*SIX)
    kw = dict(policies=("all",), block_bytes=1000, scale=_Scale(1.0, 1.0, 1000), waf=1.0,
              ssd_class=prices.ssd["tlc-1dwpd"], store_fill=1.0, dram_bytes=0.0, prices=prices, tokens_per_day=0.0,
              refs_per_day=0.0, block_tokens=1, tokens_per_s=1.0, distinct=3)
    r = tradeoff(tr, planned_bytes=4000, **kw)["all"]
    assert [c["capacity_bytes"] for c in r["curve"]] == [1000.0, 2000.0, 4000.0]
    assert r["curve_capacities"] == "a log grid over the trace's footprint"
    # a footprint of 100 blocks (as the plan states it): the grid 1 2 4 7 14 27 51 99, the planned 4 among them
    wide = tradeoff(tr, planned_bytes=4000, **{**kw, "distinct": 100})["all"]
    assert [c["capacity_bytes"] // 1000 for c in wide["curve"]] == [1, 2, 4, 7, 14, 27, 51, 99]
    # 8 capacities asked beside the planned 9 blocks; 6 references: a budget of 24 is 4 simulations, so 3 of the 8
    # (indices 0, 3.5 -> 4, 7 of linspace(0, 7, 3)) and the planned one
    asked = [c * 1000 for c in (1, 2, 3, 4, 5, 6, 7, 8)]
    t = tradeoff(tr, planned_bytes=9000, curve_bytes=asked + [9000], budget_refs=24, **kw)["all"]
    assert [c["capacity_bytes"] for c in t["curve"]] == [1000.0, 5000.0, 8000.0, 9000.0]
    assert t["curve_capacities"] == ("the --capacities given; thinned to 3 of 8 capacities (budget 24 references)")
    # a budget of exactly 8 simulations (48 references) is one short of the 8 asked and the planned: 7 of them
    # (linspace(0, 7, 7) rounds to 0 1 2 4 5 6 7); 9 simulations run them all
    seven = tradeoff(tr, planned_bytes=9000, curve_bytes=asked, budget_refs=48, **kw)["all"]
    assert [c["capacity_bytes"] // 1000 for c in seven["curve"]] == [1, 2, 3, 5, 6, 7, 8, 9]
    assert "thinned to 7 of 8 capacities (budget 48 references)" in seven["curve_capacities"]
    nine = tradeoff(tr, planned_bytes=9000, curve_bytes=asked, budget_refs=54, **kw)["all"]
    assert len(nine["curve"]) == 9 and nine["curve_capacities"] == "the --capacities given"
    one = tradeoff(tr, planned_bytes=9000, curve_bytes=asked, budget_refs=6, **kw)["all"]
    assert [c["capacity_bytes"] for c in one["curve"]] == [9000.0] and "thinned to 0 of 8" in one["curve_capacities"]


def test_the_tradeoff_in_planned_units_per_policy_against_admit_all():
    """Two copies of the users at twice the trace's speed: the six requests' 1-block tier (0.75 blocks/s in trace
    time) is 2,000 B written at 0.75 x 2 x 2 x 1,000 = 3,000 B/s. [1] [1] [1] at 2 blocks: admit-all hits 2 of 3,
    second-access 1 of 3 (the first touch only remembered): 1/3 below admit-all; neither tier fills, so each
    says so and reports its fill-phase mean write rate (written blocks over the 2-s span, in planned units)."""
    from kvbench.analysis.admission import tradeoff
    from kvbench.analysis.cost import load_prices
    from kvbench.analysis.plan import _Scale
    from tests.conftest import make_trace

    prices = load_prices()

    def at(tr, planned, policies, sc):
        return tradeoff(tr, policies=policies, block_bytes=1000, scale=sc, planned_bytes=planned * 2000,
                        curve_bytes=[planned * 2000], waf=1.0, ssd_class=prices.ssd["tlc-1dwpd"], store_fill=1.0,
                        dram_bytes=0.0, prices=prices, tokens_per_day=0.0, refs_per_day=0.0, block_tokens=1,
                        tokens_per_s=1.0, distinct=10)

    sc = _Scale(time_scale=2.0, copies=2.0, block_bytes=1000)
    r = at(make_trace(*SIX), 1, ("all",), sc)["all"]
    assert r["capacity_bytes"] == 2000.0 and r["write_bytes_per_s"] == pytest.approx(3000.0)
    assert r["dwpd"] == pytest.approx(86_400 * 3000 / 2000) and r["writes_vs_all"] == 1.0
    assert r["hit_ratio_vs_all"] == 0.0 and "note" not in r
    both = at(block_trace([[1], [1], [1]]), 2, ("all", "second-access"), sc)
    assert both["all"]["hit_ratio"] == pytest.approx(2 / 3) and both["all"]["hit_ratio_vs_all"] == 0.0
    assert both["second-access"]["hit_ratio_vs_all"] == pytest.approx(-1 / 3)
    for p, written in (("all", 1), ("second-access", 1)):
        assert both[p]["note"].startswith("the tier never evicts under this policy within the trace")
        assert both[p]["mean_write_bytes_per_s"] == pytest.approx(written * 2 * 2 * 1000 / 2.0)
        assert "writes_vs_all" not in both[p]
    # one request: a span of 0 s has no mean rate
    flat = at(block_trace([[1, 2, 3]], [5.0]), 2, ("all",), sc)["all"]
    assert flat["mean_write_bytes_per_s"] is None and not flat["filled"] and flat["dwpd"] is None


def test_admission_for_plan_without_dram_bills_none():
    """The plan's call: no L2 in the primary answer bills no DRAM (not a byte of it); the SSD class is the
    answer's, else the cheapest per GB."""
    from kvbench.analysis.admission import admission_for_plan
    from kvbench.analysis.cost import load_prices
    from kvbench.analysis.plan import PlanOptions, _Scale
    from tests.conftest import make_trace

    prices = load_prices()
    out = admission_for_plan(make_trace(*SIX), PlanOptions(admission=("all",), capacities=(1000.0,)),
                             primary={"l2_bytes": None}, prices=prices, sc=_Scale(1.0, 1.0, 1000), block_bytes=1000,
                             waf=1.0, tokens_per_day=0.0, refs_per_day=0.0, tokens_per_s=1.0, distinct=3)["all"]
    cheapest = min(prices.ssd, key=lambda k: prices.ssd[k].usd_per_gb)
    assert out["usd_per_day"]["dram"] == 0.0 and out["ssd_class"] == cheapest
    assert out["capacity_bytes"] == 1000.0


def test_placement_for_plan_caps_the_store_at_the_footprint_and_one(monkeypatch):
    """The placement model's L3 is the planned capacity in the trace's blocks, at most the distinct blocks + 1,
    at least 1, for each store layout and each admission policy asked (admit-all when none)."""
    import kvbench.analysis.placement as placement
    from kvbench.analysis.admission import placement_for_plan
    from kvbench.analysis.plan import PlanOptions, _Scale
    from kvbench.sim.blockstore import STORES
    from tests.conftest import make_trace

    asked = []
    monkeypatch.setattr(placement, "kv_store_waf", lambda trace, **kw: asked.append(kw) or {"l3": kw["l3_blocks"]})
    tr = make_trace(*SIX)
    for planned, blocks, copies in ((2000.0, 2, 1.0), (40_000.0, 4, 1.0), (10.0, 1, 1.0), (6000.0, 3, 2.0)):
        asked.clear()
        out = placement_for_plan(tr, PlanOptions(placement="tier", capacities=(planned,)), primary={},
                                 sc=_Scale(1.0, copies, 1000), block_bytes=1000, distinct=3)
        assert {kw["l3_blocks"] for kw in asked} == {blocks} and out["capacity_bytes"] == blocks * 1000 * copies
        assert len(asked) == len(STORES) and {kw["admission"] for kw in asked} == {"all"}
    assert out["rule"] == "tier" and out["streams"] == 2 and out["policies"] == {"all": {"l3": 3}}
    assert {kw["from_request"] for kw in asked} == {0}
    asked.clear()
    placement_for_plan(tr, PlanOptions(placement="tier", capacities=(2000.0,)), primary={},
                       sc=_Scale(1.0, 1.0, 1000), block_bytes=1000, distinct=3, from_request=4)
    assert {kw["from_request"] for kw in asked} == {4}          # a plan's warm-up reaches every store measured


def test_compiled_sweep_equals_the_python_loop_in_the_fast_lane(monkeypatch):
    """A small case of the randomized comparison above (which is slow): 60 prefix requests, every admission
    policy in front of LRU (TinyLFU also in front of S3-FIFO, whose victim it weighs), a tier that turns over
    without warm-up and one that holds most of the footprint with a quarter warm-up, in batches of 7 requests."""
    import kvbench.analysis.admission as A

    monkeypatch.setattr(A, "BATCH_REQUESTS", 7)
    rng = np.random.default_rng(11)
    reqs = _random_prefix_requests(rng, 60)
    tr = block_trace(reqs, np.cumsum(rng.exponential(1.0, len(reqs))))
    distinct = len({k for r in reqs for k in r})
    cases = [(spec, "lru") for spec in ("all", "second-access", "tinylfu", "prefix-depth:depth=3",
                                        "prefix-depth:beyond_shared=1", "threshold:min_blocks=4",
                                        "threshold:window=20s")] + [("tinylfu", "s3fifo")]
    turned = 0
    for spec, policy in cases:
        for cap, warm in ((5, 0.0), (distinct - 3, 0.25)):
            got = simulate_tier(tr, cap, spec, policy, warmup=warm)
            assert _fields(got) == _fields(simulate_tier_reference(tr, cap, spec, policy, warmup=warm)), \
                (spec, policy, cap, warm)
            turned += got.turned_over
            assert got.references == tr.offsets[-1] - (tr.offsets[15] if warm else 0)     # 15 of 60
    assert turned >= 4


def test_the_probes_stop_at_twelve_simulations():
    """[1] [2] at 0, 1 s never turns over at any capacity: planned at 8,192 blocks, the halving probes 4,096 ..
    2 and stops there, at 12 simulations, under any budget that leaves them room."""
    from tests.conftest import make_trace

    r = _tradeoff_at(make_trace([0, 1], [[1], [2]]), 8192)["all"]
    assert sorted(int(c["capacity_bytes"] // 1000) for c in r["curve"]) == [2 ** k for k in range(1, 14)]
    assert "plus 12 below the planned capacity" in r["curve_capacities"] and r["steady_state"] == "unknown"


def test_admission_and_placement_need_a_planned_capacity():
    """The planned capacity is the first of --capacities, else the headline target's need; without either (an
    unreachable target) the trade-off is refused with what to give."""
    from kvbench.analysis.admission import _planned_bytes
    from kvbench.analysis.plan import PlanOptions
    from kvbench.errors import SpecError

    assert _planned_bytes(PlanOptions(capacities=(5e9, 1e9)), {"need_bytes": 7e9}) == 5e9
    assert _planned_bytes(PlanOptions(), {"need_bytes": 7e9}) == 7e9
    for primary in ({}, {"need_bytes": None}, {"need_bytes": 0.0}):
        with pytest.raises(SpecError, match="need a planned capacity"):
            _planned_bytes(PlanOptions(), primary)


def test_a_warm_up_opens_the_tiers_steady_window_at_its_end_as_the_steady_curve_does():
    """Blocks 1 2 1 1 3 2 at t = 0, 10, 12, 13, 15, 16 through a 1-block write-through tier: writes at r0, r1 (the
    first eviction, the 2nd write), r2, r4, r5. With the first three requests a warm-up the window is r3..r5
    (2 writes in 3 references) at the demand of the 3 references after t = 12 over 4 s: W = 2/3 x 3/4 = 0.5 block/s,
    steady_curve's W(1) for the same warm-up; cold, r2..r5 (3 in 4) at 5 references over 16 s. The whole run's
    mean write rate keeps the whole span."""
    from kvbench.analysis.curves.residence import steady_curve
    from tests.conftest import make_trace

    tr = make_trace([0.0, 10.0, 12.0, 13.0, 15.0, 16.0], [[1], [2], [1], [1], [3], [2]])
    for sim in (simulate_tier, simulate_tier_reference):
        warm, cold = sim(tr, 1, warmup=0.5), sim(tr, 1)
        assert (warm.steady_writes, warm.steady_references, warm.steady_window_s) == (2, 3, 4.0)
        assert warm.write_blocks_per_s == pytest.approx(0.5)
        assert warm.write_blocks_per_s == pytest.approx(steady_curve(tr, block_bytes=1, from_request=3)
                                                        .write_blocks_per_s[1])
        assert cold.write_blocks_per_s == pytest.approx(3 / 4 * 5 / 16) and cold.steady_window_s == 6.0
        assert warm.span_s == cold.span_s == 16.0 and warm.written == cold.written == 5
