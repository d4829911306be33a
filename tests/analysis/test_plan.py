"""kvbench plan: steady-state write rate, residence time and DWPD on hand-built traces (against a brute-force
LRU), retention, drive classes, WAF, deployment scale, prices and the CLI's JSON contract."""

from __future__ import annotations

import json
import math
from collections import OrderedDict

import numpy as np

import pytest

from kvbench.analysis.cost import apply_overrides, gpu_usd_per_day, load_prices, prices_from_dict, ssd_usd_per_day
from kvbench.analysis.deployment import parse_deployment
from kvbench.analysis.ftl import layout_waf
from kvbench.analysis.plan import PlanOptions, build_plan
from kvbench.analysis.curves.residence import residence_for, steady_curve
from kvbench.errors import SpecError
from kvbench.stream.traces import Trace
from tests.conftest import make_trace

pytestmark = pytest.mark.timeout(120)


def brute_steady(trace: Trace, capacity: int):
    """LRU of ``capacity`` blocks, blocks touched deepest-first: (time of the first eviction, misses and references
    in requests arriving after it). None when nothing is ever evicted."""
    lru, fill, after, seen = OrderedDict(), None, 0, 0
    for r in range(trace.n_requests):
        t = float(trace.timestamp_s[r])
        for k in reversed(trace.keys[trace.offsets[r]:trace.offsets[r + 1]].tolist()):
            if fill is not None and t > fill:
                seen += 1
            if k in lru:
                lru.move_to_end(k)
                continue
            if fill is not None and t > fill:
                after += 1
            if len(lru) == capacity:
                lru.popitem(last=False)
                if fill is None:
                    fill = t
            lru[k] = True
    return None if fill is None else (fill, after, seen)


def random_prefix_trace(seed: int, n: int = 300) -> Trace:
    """Requests sharing prefixes: a few system prompts, sessions that grow, Poisson-ish arrivals."""
    rng = np.random.default_rng(seed)
    times = np.cumsum(rng.exponential(2.0, n))
    sessions, blocks, next_id = {}, [], 1000
    for _ in range(n):
        s = int(rng.integers(0, 25))
        if s not in sessions or rng.random() < 0.2:
            sessions[s] = [int(rng.integers(1, 4))]          # one of three shared system-prompt blocks
        grow = int(rng.integers(1, 4))
        sessions[s] = sessions[s] + list(range(next_id, next_id + grow))
        next_id += grow
        blocks.append(list(sessions[s]))
    return make_trace(times, blocks)


# --- the steady-state curve -------------------------------------------------------------------------------
def test_one_new_block_per_second_is_written_at_one_block_per_second():
    n = 20
    c = steady_curve(make_trace(range(n), [[i + 1] for i in range(n)]), block_bytes=1000)
    caps = np.arange(1, n - 1)
    a = c.at(caps)
    # W = 1 block/s, T(C) = C s, DWPD = 86400 / C at every capacity whose first eviction leaves a window
    assert a["write_blocks_per_s"] == pytest.approx(np.ones(n - 2))
    assert a["residence_s"] == pytest.approx(caps.astype(float))
    assert a["dwpd"] == pytest.approx(86400.0 / caps)
    assert list(a["fill_time_s"]) == list(caps.astype(float))     # the (C+1)-th block arrives at t = C
    # a tier holding every block never evicts: no steady state, said as such
    # (19 blocks fill at the last arrival: no window after it)
    big = c.at([n - 1, n, 10 * n])
    assert not big["filled"].any() and np.isnan(big["write_blocks_per_s"]).all()


def test_lru_thrash_and_a_tier_that_never_fills():
    # 5 blocks in a cycle: LRU below 5 misses every reference (W = 1/s); 5 or more holds them all
    c = steady_curve(make_trace(range(30), [[i % 5 + 1] for i in range(30)]), block_bytes=1)
    assert c.at([1, 2, 3, 4])["write_blocks_per_s"] == pytest.approx([1.0] * 4)
    assert not c.at([5])["filled"][0]
    assert c.at([4])["turned_over"][0] and c.distinct == 5


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_steady_curve_equals_a_brute_force_lru_at_every_capacity(seed):
    tr = random_prefix_trace(seed)
    c = steady_curve(tr, block_bytes=1)
    t0, t_end = float(tr.timestamp_s[0]), float(tr.timestamp_s[-1])
    # the mean demand: block references in requests after the first arrival, per second of the span
    demand = sum(len(b) for t, b in zip(tr.timestamp_s, np.split(tr.keys, tr.offsets[1:-1])) if t > t0) / (t_end - t0)
    checked = 0
    for cap in range(1, c.distinct + 2):
        got = c.at([cap])
        ref = brute_steady(tr, cap)
        if ref is None or ref[0] >= t_end:
            assert not got["filled"][0], cap
            continue
        fill, after, seen = ref
        assert got["fill_time_s"][0] == pytest.approx(fill - tr.timestamp_s[0]), cap
        assert got["write_blocks_per_s"][0] == pytest.approx(after / seen * demand), cap
        assert got["turned_over"][0] == (after >= cap), cap
        checked += 1
    assert checked > 50


def test_retention_is_the_smallest_tier_whose_residence_reaches_it():
    n = 100
    c = steady_curve(make_trace(range(n), [[i + 1] for i in range(n)]), block_bytes=10)
    r = residence_for(c, 30.0)
    # T(C) = C s: 30 s needs 30 blocks, written at 1 block/s = 2880 DWPD
    assert (r["capacity_blocks"], r["capacity_bytes"], r["extrapolated"]) == (30, 300, False)
    assert r["dwpd"] == pytest.approx(86400 / 30)
    # twice as fast (compress): the same 30 s of wall time needs 60 blocks; replicated users: capacity x copies
    assert residence_for(c, 30.0, time_scale=2.0)["capacity_blocks"] == 60
    assert residence_for(c, 30.0, copies=3.0)["capacity_bytes"] == 900
    # beyond the trace (it shows residence up to ~50 s: a tier must turn over): extrapolated and said so
    far = residence_for(c, 1000.0)
    assert far["extrapolated"] and far["dwpd"] == pytest.approx(86.4)
    assert far["capacity_bytes"] == pytest.approx(1000 * 10) and "beyond the trace" in far["basis"]


def test_retention_sweep_moves_on_a_multi_hour_trace():
    from kvbench.stream.generators import GenSpec, generate
    from kvbench.stream.traces import read_trace

    import tempfile
    from pathlib import Path

    from kvbench.stream.generators import write_trace

    spec = GenSpec(kind="chat", requests=6000, rate=0.5, seed=3)
    with tempfile.TemporaryDirectory() as d:
        tr = read_trace(write_trace(generate(spec), Path(d) / "chat.jsonl"))
    assert tr.duration_s > 3 * 3600
    out = build_plan(tr, block_bytes=1 << 20, prices=load_prices(), tokens_per_s=1e4,
                     options=PlanOptions(targets=(0.9,), waf=1.0, sweep=(300.0, 900.0, 1800.0, 3600.0),
                                         write_policies=False))
    rows = out["retention_sweep"]
    shown = [r for r in rows if not r["extrapolated"]]
    assert len(shown) >= 3
    caps = [r["capacity_bytes"] for r in shown]
    dwpd = [r["dwpd"] for r in shown]
    assert all(a < b for a, b in zip(caps, caps[1:])), caps
    assert all(a > b for a, b in zip(dwpd, dwpd[1:])), dwpd
    # DWPD at retention R is 86400 / (the chosen tier's residence), which is >= R
    for r in shown:
        assert r["dwpd"] <= 86400.0 / r["retention_s"] * (1 + 1e-9)


# --- drive classes, WAF and the bill -----------------------------------------------------------------------
ONE_CLASS = {"name": "t", "date": "x", "dram": {"usd_per_gb": 5.0}, "gpu": {"usd_per_hour": 3.0},
             "ssd": {"d": {"usd_per_gb": 0.1, "dwpd": 1.0, "warranty_years": 5, "reference_waf": 2.0,
                           "drive_capacity": "1MB"}}}


def linear_plan(**kw):
    # one new 1 MB block per second for 1000 s, no reuse: W(C) = 1 MB/s, T(C) = C blocks seconds
    n = 1000
    tr = make_trace(range(n), [[i + 1] for i in range(n)])
    opts = {"targets": (1.0,), "absolute": False, "sweep": (), "write_policies": False, **kw}
    opts.pop("absolute")
    return build_plan(tr, block_bytes=1_000_000, prices=prices_from_dict(ONE_CLASS), tokens_per_s=1e4,
                      options=PlanOptions(**opts))


def test_endurance_capacity_from_residence_and_the_waf_reaching_lifetime_and_cost():
    out = linear_plan(waf=2.0, targets=(0.5,), relative=False)
    # no reuse: the hit target is unreachable, and without a retention nothing is planned
    assert out["per_target"]["0.5"]["reachable"] is False and out["drives"] == []
    out = linear_plan(waf=2.0, retention_s=100.0)
    d = out["drives"][0]
    # retention 100 s: 100 blocks; endurance at WAF 2 / reference 2 and 1 DWPD: residence >= 1 day, beyond the
    # 1000-s trace: extrapolated at 1 MB/s -> 86,400 MB, the endurance capacity binds
    assert d["bound"] == "endurance" and d["capacity_bytes"] == pytest.approx(86400e6)
    assert d["dwpd_host"] == pytest.approx(1.0) and d["dwpd_rating_equivalent"] == pytest.approx(1.0)
    assert d["drives"] == 86400 and d["lifetime_years"] == pytest.approx(5.0)
    assert d["ssd_per_dram"] == pytest.approx(864.0)
    # WAF 4 against the rating's 2: twice the NAND per host byte -> twice the capacity for the same lifetime
    w4 = linear_plan(waf=4.0, retention_s=100.0)["drives"][0]
    assert w4["capacity_bytes"] == pytest.approx(2 * 86400e6)
    assert w4["dwpd_rating_equivalent"] == pytest.approx(1.0) and w4["dwpd_host"] == pytest.approx(0.5)
    assert w4["usd_per_day"]["ssd"] == pytest.approx(2 * d["usd_per_day"]["ssd"])
    # at a fixed tier (hit binds) the WAF moves the rating-equivalent DWPD and the lifetime, not the host DWPD
    lo = linear_plan(waf=1.0, retention_s=500.0, store_fill=1.0)
    assert lo["drives"][0]["bound"] == "endurance"


def test_hit_bound_tier_waf_changes_lifetime_and_cost_not_host_dwpd():
    big = dict(ONE_CLASS, ssd={"d": dict(ONE_CLASS["ssd"]["d"], dwpd=1000.0)})
    n = 1000
    tr = make_trace(range(n), [[i + 1] for i in range(n)])

    def run(waf):
        return build_plan(tr, block_bytes=1_000_000, prices=prices_from_dict(big), tokens_per_s=1e4,
                          options=PlanOptions(targets=(1.0,), retention_s=200.0, waf=waf, sweep=(),
                                              write_policies=False))["drives"][0]

    a, b = run(1.0), run(4.0)
    # 200 s: 200 blocks of 1 MB written at 1 MB/s -> 432 host DWPD whatever the WAF
    assert a["bound"] == b["bound"] == "hit"
    assert a["capacity_bytes"] == b["capacity_bytes"] == pytest.approx(200e6)
    assert a["dwpd_host"] == pytest.approx(432.0) and b["dwpd_host"] == pytest.approx(432.0)
    assert a["dwpd_rating_equivalent"] == pytest.approx(216.0) and b["dwpd_rating_equivalent"] == pytest.approx(864.0)
    assert a["lifetime_years"] == pytest.approx(5 * 1000 / 216) and b["lifetime_years"] == pytest.approx(5 * 1000 / 864)
    # both outlive the warranty (the endurance capacity guarantees it), so the bill is the same drive's: the WAF
    # reaches the cost through the capacity once endurance binds (the test above)
    assert b["usd_per_day"]["ssd"] == pytest.approx(a["usd_per_day"]["ssd"])


def test_reference_waf_of_the_price_preset_is_the_ftl_model_on_jesd219():
    from kvbench.analysis import ftl

    p = load_prices()
    for name in ("tlc-1dwpd", "tlc-3dwpd"):
        cls = p.ssd[name]
        cfg = ftl.FtlConfig(user_bytes=1 << 30, page_size=4096, op=cls.over_provisioning, block_pages=256).validate()
        waf = ftl.simulate(cfg, pattern="jesd219", writes=3, warmup=0.5).waf
        assert cls.reference_waf == pytest.approx(waf, rel=0.08), name


# --- deployment scale --------------------------------------------------------------------------------------
def test_deployment_dwpd_is_first_principles_whatever_the_hit_ratio():
    tr = random_prefix_trace(5, n=400)           # whole blocks only: input tokens = 512 x blocks
    bpt = 100_000
    out = build_plan(tr, block_bytes=512 * bpt, prices=load_prices(), tokens_per_s=20_000.0, bytes_per_token=bpt,
                     options=PlanOptions(targets=(0.9,), waf=1.5, sweep=(), write_policies=False,
                                         deployment=parse_deployment("gpus=8,drives=4,drive_capacity=3.84TB,"
                                                                     "utilization=0.5")))
    dep = out["deployment"]
    want = 0.5 * 20_000 * 8 * bpt * 86400 / (4 * 3.84e12)
    assert dep["dwpd_host_per_drive"] == pytest.approx(want, rel=1e-6)
    assert dep["dwpd_first_principles"] == pytest.approx(want)
    assert dep["dwpd_rating_equivalent_per_drive"] == pytest.approx(want * 1.5 / dep["reference_waf"])
    assert dep["residence_s"] == pytest.approx(4 * 3.84e12 / dep["write_bytes_per_s"])
    # the request rate is what makes the GPUs' missed tokens: rate x missed tokens per request = U P G
    missed = tr.input_tokens.mean() * (1 - dep["hit_ratio"])
    assert dep["requests_per_s"] * missed == pytest.approx(0.5 * 20_000 * 8, rel=1e-6)
    assert out["rate"] == pytest.approx(dep["requests_per_s"]) and out["rate_model"] == "replicate"
    # against the reference class's rating: life = warranty x rated / rating-equivalent DWPD, and the fewest
    # drives of that capacity within the rating, which a plan with that many (and one fewer) confirms
    cls = load_prices().ssd[dep["reference_class"]]
    eq = want * 1.5 / cls.reference_waf
    assert (dep["rated_dwpd"], dep["warranty_years"]) == (cls.dwpd, cls.warranty_years)
    assert dep["lifetime_years"] == pytest.approx(cls.warranty_years * cls.dwpd / eq, rel=1e-6)
    need = math.ceil(4 * eq / cls.dwpd)
    assert dep["drives_within_rating"] == need and need > 4 and not dep["within_rating"]
    for drives, within in ((need, True), (need - 1, False)):
        again = build_plan(tr, block_bytes=512 * bpt, prices=load_prices(), tokens_per_s=20_000.0,
                           bytes_per_token=bpt,
                           options=PlanOptions(targets=(0.9,), waf=1.5, sweep=(), write_policies=False,
                                               deployment=parse_deployment(f"gpus=8,drives={drives},"
                                                                           "drive_capacity=3.84TB,utilization=0.5")))
        assert again["deployment"]["within_rating"] is within
        assert again["deployment"]["drives_within_rating"] == need
    line = [x for x in out["answer"]["sentences"] if x.startswith("Deployment:")][0]
    assert f"lasts {dep['lifetime_years']:.3g} years" in line and f"{need:,} such drives keep within" in line
    assert "at the same GPU work" in line
    assert "8 GPUs at utilization 0.5 compute 80,000 prefill tokens/s" in line and "each of the 4 drives" in line


# a store the trace never fills; one it turns over; one it fills without turning it over
@pytest.mark.parametrize("drive", ["3.84TB", "100GB", "1TB"])
def test_deployment_writes_are_the_steady_write_rate_of_its_store(drive):
    """The deployment's request rate is solved with steady-state hits (1 - W(C) / demand), so at that rate the
    plan's steady write rate of the deployment's store is the deployment's write rate, and the drive-class
    answers and the deployment line count the same writes (not the whole trace's, cold start included)."""
    tr = random_prefix_trace(5, n=400)
    bpt = 100_000
    dep_spec = parse_deployment(f"gpus=8,drives=4,drive_capacity={drive},utilization=0.5")
    store = 4 * dep_spec.drive_capacity_bytes
    out = build_plan(tr, block_bytes=512 * bpt, prices=load_prices(), tokens_per_s=20_000.0, bytes_per_token=bpt,
                     options=PlanOptions(targets=(0.9,), waf=1.5, sweep=(), write_policies=False,
                                         capacities=(store,), deployment=dep_spec))
    dep = out["deployment"]
    row = [r for r in out["capacity_curve"] if r["capacity_bytes"] == pytest.approx(store)]
    w = row[0]["write_bytes_per_s"] if row and row[0]["turned_over"] else None
    if w is None:       # not turned over (or never filled): held at the longest residence shown, as the drive
        assert drive != "100GB" and out["drives"][0]["steady_state"] == "extrapolated"   # classes hold it
        w = out["drives"][0]["write_bytes_per_s"]
        if drive == "1TB":                      # filled, but its window is shorter than its residence
            # (unless both sit at the compulsory floor of a trace that is not stationary: test_stationarity)
            assert row[0]["filled"] and (row[0]["write_bytes_per_s"] != pytest.approx(w, rel=1e-3)
                                         or dep["hit_ratio_capped"])
    else:
        assert drive == "100GB"
    assert dep["write_bytes_per_s"] == pytest.approx(w, rel=1e-9)
    assert 0 < dep["hit_ratio"] < 1
    # an answer resting on a write rate held beyond the trace says so, with the longest residence it shows
    from kvbench.units import format_duration

    held = [x for x in out["answer"]["sentences"] if x.startswith("That residence is beyond the ")]
    pick = [r for r in out["drives"] if r["class"] == out["ssd_class"]][0]
    assert len(held) == (pick["steady_state"] == "extrapolated")
    if held:
        assert format_duration(out["steady_state"]["max_residence_s"]) in held[0]


def test_an_answer_the_trace_shows_has_no_held_rate_sentence():
    """Drives rated far above the workload: the hit target binds at a capacity the trace turns over, so the
    answer quotes a measured residence and adds no 'beyond the trace' caveat (the held case is in the test above)."""
    tr = random_prefix_trace(5, n=400)
    bpt = 100_000
    p = apply_overrides(load_prices(), [f"ssd.{c}.{f}" for c in ("tlc-1dwpd", "tlc-3dwpd", "qlc")
                                        for f in ("pe_cycles=1e8", "dwpd=3000")])   # flash that takes the rating
    out = build_plan(tr, block_bytes=512 * bpt, prices=p, tokens_per_s=20_000.0, bytes_per_token=bpt,
                     options=PlanOptions(targets=(0.9,), waf=1.5, sweep=(), write_policies=False))
    assert {r["steady_state"] for r in out["drives"]} == {"measured"}
    assert not [x for x in out["answer"]["sentences"] if "beyond the" in x]


@pytest.fixture(scope="module")
def prices():
    return load_prices("2025-h2")


def test_prices_preset_overrides_and_costs(prices):
    assert prices.status == "assumption" and prices.date and all(prices.sources.values())
    assert {"tlc-1dwpd", "tlc-3dwpd", "qlc"} <= set(prices.ssd)
    p = apply_overrides(prices, ["dram=8", "gpu=2", "ssd.qlc=0.05", "ssd.qlc.dwpd=0.3"])
    assert (p.dram_usd_per_gb, p.gpu_usd_per_hour, p.ssd["qlc"].usd_per_gb, p.ssd["qlc"].dwpd) == (8, 2, 0.05, 0.3)
    with pytest.raises(SpecError):
        apply_overrides(prices, ["dram=-1"])
    with pytest.raises(SpecError):
        apply_overrides(prices, ["ssd.nope=1"])
    # 1 TB of a $0.10/GB drive costs $100: $20/year over a 5-year warranty, $50/year if worn out in 2 years
    cls = prices.ssd["tlc-1dwpd"]
    assert ssd_usd_per_day(1e12, cls, None) * 365 == pytest.approx(20.0)
    assert ssd_usd_per_day(1e12, cls, 2.0) == pytest.approx(100.0 / (2 * 365))
    assert gpu_usd_per_day(3.6e7, 10_000, prices) == pytest.approx(3.0)


def test_bad_price_file_names_the_field(tmp_path):
    f = tmp_path / "p.toml"
    f.write_text('[dram]\nusd_per_gb = "cheap"\n[ssd.a]\nusd_per_gb = 0.1\ndwpd = 1\n[gpu]\nusd_per_hour = 2\n')
    with pytest.raises(SpecError, match=r"p.toml: \[dram\]: field 'usd_per_gb'"):
        load_prices(str(f))


def test_layout_waf_log_is_one_and_slots_amplify():
    log, _ = layout_waf("log", 1 << 20, erase_block_bytes=16 << 20, min_blocks=128, max_pages=1 << 18)
    slot, params = layout_waf("slot", 1 << 20, erase_block_bytes=16 << 20, min_blocks=128, max_pages=1 << 18)
    assert log == pytest.approx(1.0)
    assert slot > 2.0 and params["layout"] == "slot"
    # slots as large as the erase unit invalidate whole blocks: no copying
    big, _ = layout_waf("slot", 16 << 20, erase_block_bytes=16 << 20, min_blocks=128, max_pages=1 << 18)
    assert big == pytest.approx(1.0, abs=0.01)


def test_plan_cli_json_contract(cli):
    r = cli("plan", "--trace", "mooncake-sample", "--model", "llama-3.1-8b", "--capacities", "100GiB,1TiB,100TiB",
            "--retention", "1m", "--profile", "llama-3.1-8b-h200-trtllm-fp8",
            "--deployment", "gpus=8,drives=8,drive_capacity=7.68TB,utilization=0.5", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    curve = out["capacity_curve"]
    assert [c["capacity_bytes"] for c in curve] == [100 * 2**30, 2**40, 100 * 2**40]
    for c in curve:
        assert {"capacity_bytes", "hit_ratio", "write_bytes_per_s", "dwpd", "residence_s", "filled"} <= set(c)
        if c["filled"]:
            assert c["dwpd"] == pytest.approx(86400 / c["residence_s"])
            assert c["residence_s"] == pytest.approx(c["capacity_bytes"] / c["write_bytes_per_s"])
    assert curve[0]["filled"] and not curve[2]["filled"] and curve[2]["write_bytes_per_s"] is None
    ret = out["retention"]
    assert {"retention_s", "capacity_bytes", "hit_ratio", "dwpd"} <= set(ret) and ret["retention_s"] == 60
    for d in out["drives"]:
        assert {"class", "capacity_bytes", "bound", "dwpd_host", "dwpd_rating_equivalent", "workload_waf",
                "reference_waf", "lifetime_years", "ssd_per_dram", "usd_per_day"} <= set(d)
        assert d["bound"] in ("hit", "endurance")
        assert d["dwpd_rating_equivalent"] == pytest.approx(d["dwpd_host"] * d["workload_waf"] / d["reference_waf"])
    dep = out["deployment"]
    assert {"prefill_tokens_per_s", "requests_per_s", "write_bytes_per_s_per_drive", "dwpd_host_per_drive",
            "dwpd_rating_equivalent_per_drive"} <= set(dep)
    assert dep["prefill_tokens_per_s"] == pytest.approx(0.5 * 39_000 * 8)
    assert out["answer"]["sentences"]
    # the terminal says what the JSON says
    t = cli("plan", "--trace", "mooncake-sample", "--model", "llama-3.1-8b", "--retention", "1m",
            "--profile", "llama-3.1-8b-h200-trtllm-fp8",
            "--deployment", "gpus=8,drives=8,drive_capacity=7.68TB,utilization=0.5")
    assert t.exit_code == 0
    for s in out["answer"]["sentences"]:
        assert s in t.output


def test_plan_cli_bad_input(cli):
    r = cli("plan", "--trace", "mooncake-sample", "--model", "llama-3.1-8b", "--deployment", "gpus=8")
    assert r.exit_code != 0 and "--deployment" in r.output
    r = cli("plan", "--trace", "mooncake-sample", "--model", "llama-3.1-8b", "--capacities", "0")
    assert r.exit_code != 0
    r = cli("plan", "--trace", "mooncake-sample", "--model", "llama-3.1-8b", "--rate", "10",
            "--deployment", "gpus=1,drives=1,drive_capacity=1TB,utilization=0.5", "--profile",
            "llama-3.1-8b-h200-trtllm-fp8")
    assert r.exit_code != 0 and "--rate and --deployment" in r.output


def test_the_bill_counts_only_hits_whose_load_beats_recompute():
    from kvbench.analysis.plan import loading_wins
    from kvbench.analysis.recompute import Inequality, Tier
    from kvbench.compute.profile import rate_profile

    # 100-token blocks; recompute at 1,000 tok/s; load 1,000 B/token at 2 MB/s after 0.1 s: loading saves
    # n (1/1000 - 1/2000) - 0.1 s, positive only past n* = 200 tokens
    tr = make_trace([0, 1, 2, 3], [[1, 2, 3], [1], [1, 2, 3], [1, 2]], block_tokens=100)
    c = steady_curve(tr, block_bytes=100_000)
    ineq = Inequality(rate_profile(1000.0), bytes_per_token=1000, layers=1)
    w = loading_wins(c, tr, 10, ineq, Tier("l3", 2e6, 0.1))
    # hits: r1 100 tokens (loses), r2 300 (wins), r3 200 (a tie: not a win)
    assert (w["hit_tokens"], w["winning_tokens"], w["fraction"]) == (600.0, 300.0, 0.5)
    assert (w["requests_with_hits"], w["requests_loading_wins"]) == (3, 1)
    # an LRU of 1 block keeps only the shallowest block touched last: r1 finds block 1, the others nothing
    assert list(c.hit_blocks_per_request(1)) == [0, 1, 0, 0]


def test_plan_load_tier_adds_the_conservative_bill(cli):
    args = ("plan", "--trace", "mooncake-sample", "--model", "llama-3.1-8b", "--profile",
            "llama-3.1-8b-h200-trtllm-fp8", "--sweep", "", "--json")
    slow = json.loads(cli(*args, "--load-tier", "l3=1GB/s,100us").output)
    fast = json.loads(cli(*args, "--load-tier", "l3=100GB/s,10us").output)
    # 131,072 B/token at 1 GB/s loads slower than 39k tok/s recomputes: no hit pays; at 100 GB/s every one does
    assert slow["drives"][0]["loading_wins"]["fraction"] == 0.0
    assert fast["drives"][0]["loading_wins"]["fraction"] == 1.0
    assert fast["usd_per_day_loading_wins"] == pytest.approx(fast["usd_per_day"])
    recompute = slow["plans"][str(slow["answer"]["target"])][0]["usd_per_day"]["total"]
    assert slow["usd_per_day_loading_wins"] > recompute > slow["usd_per_day"]


def test_a_key_sampled_stream_plans_at_full_scale():
    """A gen: stream sampled at rate r is a miniature: residence and DWPD as the full stream's, capacities and
    write rates scaled back by 1/r (the steady-state curve itself is compared, not the noisy hit ratio)."""
    from kvbench.analysis.plan import _Scale, steady_at
    from kvbench.stream.traces import read_trace

    full = read_trace("gen:chat,duration=3h,rate=5,seed=2")
    samp = read_trace("gen:chat,duration=3h,rate=5,seed=2,sample=0.2")
    assert samp.meta["sample_rate"] == 0.2 and samp.meta["source"] == "generated"
    cf, cs = steady_curve(full, block_bytes=1 << 20), steady_curve(samp, block_bytes=1 << 20)
    for cap_bytes in (2e9, 8e9):
        a = steady_at(cf, cap_bytes, _Scale(1.0, 1.0, 1 << 20))
        b = steady_at(cs, cap_bytes, _Scale(1.0, 1.0 / 0.2, 1 << 20, sample_rate=0.2))
        assert b["write_bytes_per_s"] == pytest.approx(a["write_bytes_per_s"], rel=0.1)
        assert b["dwpd"] == pytest.approx(a["dwpd"], rel=0.1)
    out = build_plan(samp, block_bytes=1 << 20, prices=load_prices(), tokens_per_s=1e4,
                     options=PlanOptions(targets=(0.5,), waf=1.0, sweep=(), write_policies=False))
    assert out["source"]["generated_from"] == "chat"
    assert out["answer"]["sentences"][0].startswith("From the workload model chat (generated")
    assert any("key sample at rate 0.2" in w for w in out["warnings"])


def test_plan_run_warns_on_a_replay_that_did_not_run_every_request(cli, tmp_path):
    run = tmp_path / "replay-kv-x"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps({
        "kind": "replay-kv", "status": "interrupted", "requests": 1000, "requests_not_issued": 998,
        "tiers": {"l3": {"write_bytes": 1 << 30, "capacity_bytes": 8 << 30, "layout": "slot"}}}))
    out = json.loads(cli("plan", "--trace", "mooncake-sample", "--model", "llama-3.1-8b", "--run", run,
                         "--waf", "1.2", "--sweep", "", "--json").output)
    assert out["measured"]["requests_replayed"] == 2
    assert any("interrupted" in w and "covered 2 of 1,000" in w for w in out["warnings"])


def test_write_policy_rates_do_not_depend_on_when_the_load_falls():
    """The write-policy comparison's steady rate is writes per reference after L3's first slot reuse times the
    mean demand: the same requests re-timed (same first and last arrival, the load moved to the start) give the
    same rate for both policies (the window's own rate, writes over the time after the reuse, would not)."""
    from kvbench.analysis.plan import _Scale, simulate_write_policies

    tr = random_prefix_trace(4, n=400)
    span = float(tr.timestamp_s[-1] - tr.timestamp_s[0])
    warped = make_trace(tr.timestamp_s[0] + span * ((tr.timestamp_s - tr.timestamp_s[0]) / span) ** 3,
                        [tr.keys[tr.offsets[r]:tr.offsets[r + 1]].tolist() for r in range(tr.n_requests)])
    kw = dict(block_bytes=1 << 20, l2_blocks=8, l3_blocks=40, layout="slot",
              sc=_Scale(time_scale=1.0, copies=1.0, block_bytes=1 << 20), ftl_op=0.07,
              erase_block_bytes=1 << 24, gc="greedy", model_ftl=False)
    a, b = simulate_write_policies(tr, **kw), simulate_write_policies(warped, **kw)
    for wp in ("through", "back"):
        assert a[wp]["write_bytes_per_s"] is not None
        assert b[wp]["write_bytes_per_s"] == pytest.approx(a[wp]["write_bytes_per_s"], rel=1e-12)


def test_write_policy_rate_by_hand():
    """Blocks 1, 2, 2, 3, 3, 3 at t = 100, 101, 101.5, 102, 102.5, 110 through a write-through L3 of one slot:
    request 1's write (block 2) is the first to reuse a slot; after it, 1 write (block 3) in 4 references, at the
    mean demand of 5 references after the first arrival over 10 s: W = 1/4 x 0.5 = 0.125 slot/s, 10,800 DWPD of the 1-slot
    tier (the window's own rate would be 1 write in 9 s). In batches of 2 requests or of 1 << 16, with an L2 in
    front or not, the same. At one instant there is no rate; an L3 that never evicts has none either."""
    from kvbench.analysis.plan import _Scale, simulate_write_policies

    bb = 1 << 20
    tr = make_trace([100.0, 101.0, 101.5, 102.0, 102.5, 110.0], [[1], [2], [2], [3], [3], [3]])
    kw = dict(block_bytes=bb, layout="slot", sc=_Scale(time_scale=1.0, copies=1.0, block_bytes=bb),
              ftl_op=0.07, erase_block_bytes=1 << 24, gc="greedy", model_ftl=False, policies=("through",))
    for l2, batch in ((0, 1 << 16), (0, 2), (1, 2)):
        r = simulate_write_policies(tr, l2_blocks=l2, l3_blocks=1, batch=batch, **kw)["through"]
        assert (r["l3_write_blocks"], r["produced_blocks"]) == (3, 3), (l2, batch)
        assert r["l3_trim_slots"] == 2, (l2, batch)           # blocks 1 and 2 evicted, each slot trimmed
        assert r["write_bytes_per_s"] == pytest.approx(0.125 * bb), (l2, batch)
        assert r["dwpd"] == pytest.approx(10_800) and r["steady_state"] and r["note"] is None
    flat = simulate_write_policies(make_trace([5.0] * 6, [[1], [2], [2], [3], [3], [3]]), l2_blocks=0, l3_blocks=1,
                                   **kw)["through"]
    assert flat["write_bytes_per_s"] is None and not flat["steady_state"]
    # blocks 1, 2, 1: an L2 of 2 blocks keeps block 1 after the 1-slot L3 lets it go, so its return is an L2 hit
    # and L3 is written twice; an L2 of 1 block (or none) loses it too: three L3 writes
    back = make_trace([0.0, 1.0, 2.0], [[1], [2], [1]])
    assert [simulate_write_policies(back, l2_blocks=l2, l3_blocks=1, **kw)["through"]["l3_write_blocks"]
            for l2 in (0, 1, 2)] == [3, 3, 2]
    # a trailing request without blocks (t = 300) ends no window: the demand runs to the last request holding a
    # block, as the LRU curve's and the admission sweep's do, so the rate is the same 0.125 slot/s
    tail = make_trace([100.0, 101.0, 101.5, 102.0, 102.5, 110.0, 300.0], [[1], [2], [2], [3], [3], [3], []])
    assert simulate_write_policies(tail, l2_blocks=0, l3_blocks=1, **kw)["through"]["write_bytes_per_s"] == \
        pytest.approx(0.125 * bb)
    assert steady_curve(tail, block_bytes=bb).demand_blocks_per_s == pytest.approx(0.5)
    roomy = simulate_write_policies(tr, l2_blocks=0, l3_blocks=50, **kw)["through"]
    assert roomy["write_bytes_per_s"] is None and "never evicts" in roomy["note"]
