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
def _eight_gpu_plan():
    """A plan of 8 GPUs at utilization 0.5 on 4 drives of 3.84 TB over a 400-request prefix trace of whole blocks
    (100,000 bytes per token, 20,000 tokens/s per GPU): (the trace, bytes per token, the plan)."""
    tr, bpt = random_prefix_trace(5, n=400), 100_000
    return tr, bpt, build_plan(tr, block_bytes=512 * bpt, prices=load_prices(), tokens_per_s=20_000.0,
                               bytes_per_token=bpt,
                               options=PlanOptions(targets=(0.9,), waf=1.5, sweep=(), write_policies=False,
                                                   deployment=parse_deployment("gpus=8,drives=4,"
                                                                               "drive_capacity=3.84TB,utilization=0.5")))


def test_a_lifetime_no_write_spends_is_said_in_words_in_the_plans_sentences_and_text(capsys):
    """Where the store bounds the rate at hit ratio 1 nothing is written: each drive's lifetime is infinite (JSON
    null). The plan's sentences and kvbench plan's text say "no writes: unbounded" and "never rewritten", never
    "inf years", "inf" or "n/a"; a drive row and a target row with an infinite lifetime say it the same way."""
    from kvbench.analysis.plan import answer
    from kvbench.cli.plan import _print

    tr, bpt, out = _eight_gpu_plan()
    dep = out["deployment"]
    # the state deployment.scale gives where every token hits (test_deployment.py: the drives bound the rate)
    dep.update(hit_ratio=1.0, write_bytes_per_s=0.0, write_bytes_per_s_per_drive=0.0, dwpd_host_per_drive=0.0,
               dwpd_rating_equivalent_per_drive=0.0, residence_s=None, lifetime_years=math.inf, within_rating=True,
               drives_within_rating=1)
    for d in out["drives"]:
        d["lifetime_years"] = math.inf
    for t in out["per_target"].values():
        t["lifetime_years"] = math.inf
    line = [x for x in answer(out)["sentences"] if x.startswith("Deployment:")][0]
    assert "KV kept never rewritten (no writes)" in line
    assert "drive lifetime: no writes: unbounded (warranty" in line and "inf" not in line and "n/a" not in line
    _print(out)
    text = capsys.readouterr().out
    assert "drive lifetime: no writes: unbounded (warranty" in text and "life no writes: unbounded," in text
    assert " inf " not in text and "inf years" not in text and "life inf" not in text
    # a finite one as before
    dep["lifetime_years"] = 2.5
    assert "drive lasts 2.5 years (warranty" in [x for x in answer(out)["sentences"] if x.startswith("Deployment:")][0]


def test_deployment_dwpd_is_first_principles_whatever_the_hit_ratio():
    tr, bpt, out = _eight_gpu_plan()                 # whole blocks only: input tokens = 512 x blocks
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
    # where one more GB stops paying: the miniature's marginal hits are the whole stream's (its references per
    # day per copy of the sample, its cost per sampled block), so the full stream's plan finds about the same
    whole = build_plan(full, block_bytes=1 << 20, prices=load_prices(), tokens_per_s=1e4,
                       options=PlanOptions(targets=(0.5,), waf=1.0, sweep=(), write_policies=False))
    for tier in ("dram", "ssd"):
        assert out["per_target"]["0.5"]["pays_until_bytes"][tier] == \
            pytest.approx(whole["per_target"]["0.5"]["pays_until_bytes"][tier], rel=0.25), tier


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
    # the first two requests a warm-up: the window still opens after request 1's reuse, but at the demand of the
    # 4 references arriving after t = 101 over 9 s: 1/4 x 4/9 = 1/9 slot/s; four of them: the window (r4, r5)
    # writes nothing, a steady rate of 0 (0 DWPD), not none
    warm = simulate_write_policies(tr, l2_blocks=0, l3_blocks=1, from_request=2, **kw)["through"]
    assert warm["write_bytes_per_s"] == pytest.approx(bb / 9)
    late = simulate_write_policies(tr, l2_blocks=0, l3_blocks=1, from_request=4, **kw)["through"]
    assert late["write_bytes_per_s"] == 0.0 and late["dwpd"] == 0.0 and late["steady_state"]


# --- mutation survivors (issue 34 part 4) ------------------------------------------------------------------
def test_plan_options_defaults_are_the_cli_defaults():
    """A plan built from the library (PlanOptions()) assumes what `kvbench plan` assumes when no option is given:
    the retention sweep 10 min .. 7 d, 7% over-provisioning, 256 MiB erase units, the slot layout, a full store,
    no warm-up, two streams, compressed time."""
    from kvbench.cli.plan import plan_cmd

    cli = {p.name: p.default for p in plan_cmd.params}
    o = PlanOptions()
    assert cli["sweep"] == "10m,1h,6h,1d,7d"
    assert o.sweep == (600.0, 3600.0, 21_600.0, 86_400.0, 604_800.0)
    assert (o.ssd_op, cli["ssd_op"]) == (0.07, 0.07)
    assert cli["erase_block"] == "256MiB" and o.erase_block_bytes == 256 * 2**20
    assert (o.layout, o.store_fill, o.warmup, o.streams, o.rate_model) == \
        (cli["layout"], cli["store_fill"], cli["warmup"], cli["streams"], cli["rate_model"])
    assert (o.targets, o.relative, o.gc) == ((0.9, 0.95, 0.99), True, "greedy")


@pytest.mark.parametrize("kw,match", [
    (dict(targets=()), "no target hit ratio"),
    (dict(targets=(0.0,)), r"target hit ratio 0.0 is outside \(0, 1\]"),
    (dict(targets=(0.9, 1.01)), "1.01 is outside"),
    (dict(rate_model="warp"), "unknown rate model 'warp'"),
    (dict(rate=0.0), "--rate 0.0 must be > 0"),
    (dict(rate=1.0, deployment=parse_deployment("gpus=1,drives=1,drive_capacity=1TB,utilization=0.5")),
     "--rate and --deployment"),
    (dict(retention_s=0.0), "retention 0.0 s must be > 0"),
    (dict(retention_s=-5.0), "retention -5.0 s must be > 0"),
    (dict(store_fill=0.0), r"store fill 0.0 is outside \(0, 1\]"),
    (dict(store_fill=1.5), "store fill 1.5 is outside"),
    (dict(waf=0.99), "--waf 0.99 is below 1"),
    (dict(waf=float("inf")), "--waf inf"),
    (dict(capacities=(1e9, 0.0)), "capacity 0.0 B in --capacities must be > 0"),
    (dict(admission=("nope",)), "nope"),
    (dict(placement="nope"), "unknown placement rule 'nope'"),
    (dict(placement="tier", streams=0), "--streams 0 is outside 1..64"),
    (dict(placement="tier", streams=65), "--streams 65 is outside 1..64"),
])
def test_plan_options_refuse_each_field_by_name(kw, match):
    with pytest.raises(SpecError, match=match):
        PlanOptions(**kw).validate()


def test_plan_options_accept_their_bounds():
    """The closed ends of each range pass: a target of 1, a full store, a WAF of exactly 1, 1 and 64 streams; the
    stream count is only checked with a placement rule."""
    for kw in (dict(targets=(1.0,)), dict(store_fill=1.0), dict(waf=1.0), dict(retention_s=1e-3), dict(rate=1e-3),
               dict(placement="tier", streams=1), dict(placement="lifetime", streams=64), dict(streams=0),
               dict(capacities=(1.0,)), dict(admission=("all", "tinylfu"))):
        o = PlanOptions(**kw)
        assert o.validate() is o


def test_capacity_curve_rows_by_hand():
    """One new block a second for 20 s (W = 1 block/s, the (C+1)-th block arrives at t = C): capacity_curve in
    planned units at twice the trace's rate (compress) and 3 copies of 1,000-B blocks. C = 4 blocks per copy
    (12,000 B): fills at 4 s of trace, 2 s of wall time, written at 2 blocks/s x 3 copies x 1,000 B, residence
    12,000 / 6,000 = 2 s; 5 blocks (4 + 1) were written before the window. 30 blocks per copy never fill."""
    from kvbench.analysis.curves.capacity import HitCurve
    from kvbench.analysis.curves.profile import exact_profile
    from kvbench.analysis.plan import _Scale, capacity_curve

    tr = make_trace(range(20), [[i + 1] for i in range(20)])
    steady = steady_curve(tr, block_bytes=1000)
    hit = HitCurve.from_profile(exact_profile(tr), block_bytes=1000)
    rows = capacity_curve(steady, hit, [12_000.0, 90_000.0], _Scale(time_scale=2.0, copies=3.0, block_bytes=1000))
    a, b = rows
    assert (a["capacity_bytes"], a["hit_ratio"], a["filled"], a["turned_over"]) == (12_000.0, 0.0, True, True)
    assert a["write_bytes_per_s"] == pytest.approx(6000.0) and a["residence_s"] == pytest.approx(2.0)
    assert a["dwpd"] == pytest.approx(86_400 / 2.0) and a["fill_time_s"] == pytest.approx(2.0)
    assert a["warmup_write_bytes"] == pytest.approx(5 * 3 * 1000) and "reason" not in a
    assert (b["filled"], b["turned_over"], b["write_bytes_per_s"], b["dwpd"], b["residence_s"], b["fill_time_s"]) == \
        (False, False, None, None, None, None)
    assert "touches 60,000 B of distinct blocks" in b["reason"] and "warmup_write_bytes" not in b


def test_none_keeps_finite_numbers_only():
    from kvbench.analysis.plan import _none

    assert _none(None) is None and _none(float("nan")) is None and _none(float("inf")) is None
    assert _none(2) == 2.0 and isinstance(_none(np.int64(2)), float) and _none(-0.5) == -0.5


def test_default_capacities_run_from_one_block_to_a_quarter_past_the_footprint():
    """24 log-spaced capacities (rounded to bytes) from one block to 1.25 x the distinct blocks, in planned bytes
    (copies x block bytes); a one-block footprint still spans 1 .. 2.5 blocks."""
    from types import SimpleNamespace

    from kvbench.analysis.plan import _Scale, default_capacities

    sc = _Scale(time_scale=5.0, copies=2.0, block_bytes=1000)
    caps = default_capacities(SimpleNamespace(distinct=1000), sc)
    assert len(caps) == 24 and caps[0] == 2000.0 and caps[-1] == 1000 * 1.25 * 2000.0
    ratios = np.diff(np.log(caps))
    assert ratios == pytest.approx(np.full(23, np.log(1250.0) / 23), rel=1e-3)
    tiny = default_capacities(SimpleNamespace(distinct=1), sc, points=4)
    assert tiny[0] == 2000.0 and tiny[-1] == 2.5 * 2000.0 and len(tiny) == 4


def test_flat_retention_note_by_hand():
    """The first row from which the last row's hit ratio is within 0.001 and its capacity at least twice: rows
    without a hit ratio or a capacity are skipped; a row as high as the last but not half its capacity is not it."""
    from kvbench.analysis.plan import flat_retention_note

    def row(ret, h, c):
        return {"retention_s": ret, "hit_ratio": h, "capacity_bytes": c}

    rows = [row(60, 0.40, 1e9), row(600, 0.5, 2e9), row(3600, 0.5004, 3e9), row(7200, None, 5e9),
            row(86400, 0.5009, 4e9)]
    note = flat_retention_note(rows)
    assert note.startswith("Keeping KV longer than 10 min buys no hits here: the hit ratio stays 0.500 up to 24 h")
    assert "1.86 GiB -> 3.73 GiB" in note
    # 0.0011 apart: not flat; the capacity not doubled from 600 s: the 3600-s row is only 1.33x
    assert flat_retention_note([row(600, 0.5, 2e9), row(86400, 0.5011, 4e9)]) is None
    assert flat_retention_note([row(600, 0.5, 2.1e9), row(86400, 0.5, 4e9)]) is None
    assert flat_retention_note([row(600, 0.5, 2e9), row(86400, 0.5, 4e9)]) is not None
    assert flat_retention_note([row(600, 0.5, 2e9)]) is None and flat_retention_note([]) is None


def _linear(n: int = 1000):
    """One new block a second, no reuse (linear_plan's trace)."""
    return make_trace(range(n), [[i + 1] for i in range(n)])


def test_the_conservative_bill_replaces_the_gpu_line_by_hand():
    """size_drive_class with a load tier: the conservative total is DRAM + SSD + the GPU time of the tokens not
    served by a winning hit. 10^6 prompt tokens a day, hits worth 4 x 10^5, a quarter of them loading faster:
    9 x 10^5 tokens recomputed at 10^4 tok/s on a $3/h GPU = $0.075/day (every hit counted: 6 x 10^5, $0.05)."""
    from kvbench.analysis.curves.capacity import HitCurve
    from kvbench.analysis.curves.profile import exact_profile
    from kvbench.analysis.plan import _Scale, size_drive_class

    tr = _linear()
    big = dict(ONE_CLASS, ssd={"d": dict(ONE_CLASS["ssd"]["d"], dwpd=1000.0)})
    prices = prices_from_dict(big)
    asked = []

    def wins_at(c):
        asked.append(c)
        return {"fraction": 0.25}

    row = size_drive_class(prices.ssd["d"], steady=steady_curve(tr, block_bytes=1_000_000),
                           hit_curve=HitCurve.from_profile(exact_profile(tr), block_bytes=1_000_000),
                           sc=_Scale(1.0, 1.0, 1_000_000), need_bytes=200e6, need_reason="r", waf=1.0, store_fill=1.0,
                           dram_bytes=0.0, prices=prices, tokens_per_day=1e6, hit_tokens_per_day_at=lambda h: 4e5,
                           tokens_per_s=1e4, wins_at=wins_at)
    usd = row["usd_per_day"]
    assert row["bound"] == "hit" and asked == [200.0] and row["loading_wins"] == {"fraction": 0.25}
    assert usd["gpu"] == pytest.approx(6e5 / 1e4 / 3600 * 3.0)
    assert usd["total_loading_wins"] == pytest.approx(usd["dram"] + usd["ssd"] + 9e5 / 1e4 / 3600 * 3.0)
    assert usd["total"] == pytest.approx(usd["dram"] + usd["ssd"] + usd["gpu"])
    assert row["ssd_per_dram_reason"] == "r binds; the rating holds there"
    half = size_drive_class(prices.ssd["d"], steady=steady_curve(tr, block_bytes=1_000_000),
                            hit_curve=HitCurve.from_profile(exact_profile(tr), block_bytes=1_000_000),
                            sc=_Scale(1.0, 1.0, 1_000_000), need_bytes=200e6, need_reason="r", waf=1.0,
                            store_fill=0.5, dram_bytes=0.0, prices=prices, tokens_per_day=1e6,
                            hit_tokens_per_day_at=lambda h: 4e5, tokens_per_s=1e4)
    assert half["ssd_per_dram_reason"] == "r binds; the rating holds there; fill factor 0.5 adds 1/0.5"
    assert half["loading_wins"] is None and "total_loading_wins" not in half["usd_per_day"]
    assert half["capacity_bytes"] == pytest.approx(400e6) and half["ssd_per_dram"] == pytest.approx(2.0)


def test_write_policies_on_a_key_sample_scale_back_by_its_rate():
    """A trace larger than max_refs runs on its key sample at q = max_refs / references, the tiers shrunk by q:
    the write rate and capacity are the sample's / q, so the DWPD is the sample's; at exactly max_refs the trace
    runs whole."""
    from kvbench.analysis.curves.profile import sampled_trace
    from kvbench.analysis.plan import _Scale, simulate_write_policies

    tr = random_prefix_trace(4, n=400)
    kw = dict(block_bytes=1 << 20, layout="slot", sc=_Scale(time_scale=1.0, copies=1.0, block_bytes=1 << 20),
              ftl_op=0.07, erase_block_bytes=1 << 24, gc="greedy", model_ftl=False, policies=("through",))
    max_refs = tr.n_blocks // 2
    q = max_refs / tr.n_blocks
    got = simulate_write_policies(tr, l2_blocks=8, l3_blocks=40, max_refs=max_refs, **kw)["through"]
    sub, _ = sampled_trace(tr, q)
    want = simulate_write_policies(sub, l2_blocks=round(8 * q), l3_blocks=round(40 * q), **kw)["through"]
    assert got["key_sample_rate"] == q and want["write_bytes_per_s"] is not None
    assert got["write_bytes_per_s"] == pytest.approx(want["write_bytes_per_s"] / q, rel=1e-12)
    assert got["dwpd"] == pytest.approx(want["dwpd"], rel=1e-12)
    assert got["l3_write_blocks"] == want["l3_write_blocks"]
    whole = simulate_write_policies(tr, l2_blocks=8, l3_blocks=40, max_refs=tr.n_blocks, **kw)["through"]
    assert whole["key_sample_rate"] == 1.0
    assert whole == simulate_write_policies(tr, l2_blocks=8, l3_blocks=40, **kw)["through"]
    # the tiers simulated, in the whole trace's bytes (1-MiB slots): the sample's blocks brought back by q
    assert (whole["l2_bytes"], whole["l3_bytes"]) == (8 << 20, 40 << 20)
    assert got["l2_bytes"] == pytest.approx(round(8 * q) * (1 << 20) / q)
    assert got["l3_bytes"] == pytest.approx(round(40 * q) * (1 << 20) / q)
    two = simulate_write_policies(tr, l2_blocks=8, l3_blocks=40, **{**kw, "sc": _Scale(
        time_scale=1.0, copies=2.0, block_bytes=1 << 20)})["through"]          # two copies of the users: twice
    assert (two["l2_bytes"], two["l3_bytes"]) == (16 << 20, 80 << 20)


def test_provenance_by_hand():
    from kvbench.analysis.plan import provenance

    fitted = {"source": "generated", "fitted_span_s": 3600.0}
    assert provenance({"source": "trace"}, 10.0) == "trace" and provenance(None, None) == "trace"
    assert provenance({"source": "generated"}, 10.0) == "model"
    assert provenance({"source": "generated", "fitted_span_s": 0}, None) == "model"
    assert provenance(fitted, 3600.0) == "fitted-span" and provenance(fitted, 3600.5) == "extension"
    assert provenance(fitted, None) is None and provenance(fitted, float("inf")) is None


def test_answer_of_a_generated_stream_says_where_its_residence_comes_from():
    """The linear trace stated as a generated stream of 0.5 days: a preset's stream says so (no key sample at
    rate 1); a fitted one says whether the planned tier's 24 h residence is within the span the model was fitted
    on. Endurance binds at store fill 0.5: 43.2 GB of store on 86.4 GB of SSD, of which 2 x 100 MB for hits."""
    from dataclasses import replace

    def plan(meta, **kw):
        return build_plan(replace(_linear(), meta=meta), block_bytes=1_000_000, prices=prices_from_dict(ONE_CLASS),
                          tokens_per_s=1e4, options=PlanOptions(targets=(1.0,), retention_s=100.0, waf=2.0, sweep=(),
                                                                write_policies=False, **kw))

    gen = {"source": "generated", "generated_from": "chat", "span_s": 43_200.0}
    out = plan({**gen, "sample_rate": 1.0}, store_fill=0.5)
    s = out["answer"]["sentences"]
    assert s[0] == "From the workload model chat (generated, 0.5 days; not a measured trace):"
    assert out["from"] == "model" and not any("fitted on" in x for x in s)
    assert "DRAM:SSD bought 1:8.64e+04; 200 MB of SSD for hits, 86.2 GB more so the drives last (endurance:" in \
        " ".join(s)
    d = out["drives"][0]
    assert (d["store_bytes"], d["capacity_bytes"], d["hit_capacity_bytes"]) == pytest.approx((43.2e9, 86.4e9, 100e6))
    for span, where, text in ((500.0, "extension", "beyond the 8.33 min of trace the model was fitted on: this "
                                                   "answer rests on the model's extension"),
                              (1e6, "fitted-span", "within the 11.6 d of trace the model was fitted on: what that "
                                                   "trace showed, reproduced by the fit.")):
        out = plan({**gen, "fitted_span_s": span})
        assert out["from"] == where and out["residence_s"] == pytest.approx(86_400.0)
        assert out["answer"]["sentences"][1] == "The planned tier keeps KV 24 h, " + text + \
            ("" if where == "fitted-span" else " (returns hours later, daily and weekly cycles), not on what the "
                                              "trace showed.")
        assert out["retention"]["from"] == "fitted-span"           # 100 s of residence


def _fake_waf(monkeypatch):
    """DeviceWaf.at as a known function of the capacity and layout asked (the FTL model stands aside): what the
    plan asks it, and where each answer goes, is then checked by hand."""
    from kvbench.analysis import plan as plan_mod

    def at(self, capacity_bytes, cls=None, layout=None):
        return 1.0 + capacity_bytes / 1e13 + (0.25 if layout == "log" else 0.0), f"fake at {capacity_bytes:.6g} {layout}"

    monkeypatch.setattr(plan_mod.DeviceWaf, "at", at)


def test_deployment_and_layouts_take_the_waf_of_their_own_store(monkeypatch):
    """Without --waf: the deployment's WAF is its store's (4 drives x 3.84 TB x fill 0.5 = 7.68 TB: WAF 1.768), and
    each layout's is the picked class's store's, whose NAND bytes a day are the host bytes x that WAF, per byte of
    SSD bought."""
    _fake_waf(monkeypatch)
    tr = random_prefix_trace(5, n=400)
    bpt = 100_000
    out = build_plan(tr, block_bytes=512 * bpt, prices=load_prices(), tokens_per_s=20_000.0, bytes_per_token=bpt,
                     options=PlanOptions(targets=(0.9,), sweep=(), write_policies=False, store_fill=0.5,
                                         deployment=parse_deployment("gpus=8,drives=4,drive_capacity=3.84TB,"
                                                                     "utilization=0.5")))
    dep = out["deployment"]
    assert dep["workload_waf"] == pytest.approx(1.768) and dep["workload_waf_source"] == "fake at 7.68e+12 None"
    pick = [r for r in out["drives"] if r["class"] == out["ssd_class"]][0]
    assert pick["write_bytes_per_s"] > 0 and set(out["layouts"]) == {"slot", "log"}
    for name, extra in (("slot", 0.0), ("log", 0.25)):
        lay = out["layouts"][name]
        w = 1.0 + pick["store_bytes"] / 1e13 + extra
        assert lay["waf"] == pytest.approx(w) and lay["model"] == f"fake at {pick['store_bytes']:.6g} {name}"
        assert lay["nand_bytes_per_day"] == pytest.approx(pick["write_bytes_per_s"] * 86_400 * w)
        assert lay["nand_writes_per_day"] == pytest.approx(pick["write_bytes_per_s"] * 86_400 * w /
                                                           pick["capacity_bytes"])
    assert (out["waf"], out["waf_source"]) == (pick["workload_waf"], pick["workload_waf_source"])


def test_fdp_is_asked_at_the_picked_store_capped_at_the_footprint_and_one(monkeypatch):
    """FDP is modelled at the picked class's store in the trace's blocks, at most the distinct blocks + 1 (a
    larger store holds them all), on that class's over-provisioning, the plan's layout and GC."""
    import kvbench.analysis.fdp as fdp_mod

    asked = []
    monkeypatch.setattr(fdp_mod, "fdp_for_plan", lambda trace, spec, **kw: asked.append((spec, kw)) or {"ok": 1})
    spec = object()
    out = linear_plan(waf=2.0, retention_s=100.0, fdp=spec, layout="log", gc="fifo")
    assert out["fdp"] == {"ok": 1} and out["drives"][0]["store_bytes"] == pytest.approx(86_400e6)
    (s, kw), = asked
    assert s is spec and kw["blocks"] == 1001 and kw["block_bytes"] == 1_000_000
    assert (kw["layout"], kw["gc"], kw["op"], kw["measured"]) == ("log", "fifo", 0.07, None)
    assert kw["pick"] is out["drives"][0]
    asked.clear()
    big = dict(ONE_CLASS, ssd={"d": dict(ONE_CLASS["ssd"]["d"], dwpd=1000.0)})
    build_plan(_linear(), block_bytes=1_000_000, prices=prices_from_dict(big), tokens_per_s=1e4,
               options=PlanOptions(targets=(1.0,), retention_s=200.0, waf=1.0, sweep=(), write_policies=False,
                                   fdp=spec, ssd_op=0.2))
    assert asked[0][1]["blocks"] == pytest.approx(200.0) and asked[0][1]["op"] == 0.2
    assert asked[0][1]["from_request"] == 0


def test_a_warm_up_reaches_the_device_waf_placement_and_fdp(monkeypatch):
    """--warmup 0.25 of the 1000-request linear trace leaves requests 0..249 to warm the cache: the trace-driven
    WAF model, the placement model and FDP are each measured from request 250, as the hit ratios and writes are."""
    import kvbench.analysis.admission as adm
    import kvbench.analysis.fdp as fdp_mod
    from kvbench.analysis import trace_waf

    seen = {}
    real = trace_waf.WafModel.__init__

    def spy(self, trace, **kw):
        seen["waf"] = kw.get("from_request")
        real(self, trace, **kw)

    monkeypatch.setattr(trace_waf.WafModel, "__init__", spy)
    monkeypatch.setattr(fdp_mod, "fdp_for_plan", lambda trace, spec, **kw: seen.update(fdp=kw["from_request"]) or {})
    monkeypatch.setattr(adm, "placement_for_plan", lambda trace, opt, **kw: seen.update(placement=kw["from_request"])
                        or {})
    build_plan(_linear(), block_bytes=1_000_000, prices=prices_from_dict(ONE_CLASS), tokens_per_s=1e4,
               options=PlanOptions(targets=(1.0,), retention_s=100.0, sweep=(), write_policies=False, fdp=object(),
                                   placement="lifetime", warmup=0.25))
    assert seen == {"waf": 250, "placement": 250, "fdp": 250}


def test_retention_row_reads_the_hit_ratio_at_its_capacity_and_marks_an_extrapolated_one():
    """On the 100-s linear trace of 10-B blocks (T(C) = C s): 30 s is 30 blocks, shown by the trace; 1,000 s is
    beyond it (held at 1 block/s: 1,000 blocks), its hit ratio read at the footprint and noted as a lower bound."""
    from kvbench.analysis.curves.capacity import HitCurve
    from kvbench.analysis.curves.profile import exact_profile
    from kvbench.analysis.plan import _Scale, retention_row

    tr = make_trace(range(100), [[i % 40 + 1] for i in range(100)])     # 40 blocks in a cycle: LRU hits at >= 40
    steady, hit = steady_curve(tr, block_bytes=10), HitCurve.from_profile(exact_profile(tr), block_bytes=10)
    sc = _Scale(1.0, 1.0, 10)
    shown = retention_row(steady, hit, 30.0, sc)
    assert (shown["capacity_bytes"], shown["extrapolated"], shown["hit_ratio"]) == (300, False, 0.0)
    assert "hit_ratio_note" not in shown
    far = retention_row(steady, hit, 1000.0, sc)
    assert far["extrapolated"] and far["capacity_bytes"] == pytest.approx(10_000)
    assert far["hit_ratio"] == pytest.approx(0.6)           # the last 60 of 100 references hit a 40-block tier
    assert far["hit_ratio_note"].startswith("at least this")


def test_loading_wins_counts_a_request_with_one_hit_token():
    """One-token blocks: [1] then [1, 2] (touched 2 then 1): the second request finds block 1, one token, which
    loads faster than it recomputes at these speeds."""
    from kvbench.analysis.plan import loading_wins
    from kvbench.analysis.recompute import Inequality, Tier
    from kvbench.compute.profile import rate_profile

    tr = make_trace([0, 1], [[1], [1, 2]], block_tokens=1)
    c = steady_curve(tr, block_bytes=1000)
    w = loading_wins(c, tr, 10, Inequality(rate_profile(1.0), bytes_per_token=1000, layers=1), Tier("l3", 1e9, 0.0))
    assert (w["hit_tokens"], w["winning_tokens"], w["fraction"]) == (1.0, 1.0, 1.0)
    assert (w["requests_with_hits"], w["requests_loading_wins"]) == (1, 1)
    none = loading_wins(c, tr, 10, Inequality(rate_profile(1.0), bytes_per_token=1000, layers=1),
                        Tier("l3", 1e9, 0.0), sample_rate=1.0)
    assert none == w


def test_size_at_own_waf_iterates_until_the_waf_holds_within_one_percent():
    """The WAF is asked at the need, then at each row's store until two answers are within 1% (the last answer's
    source is kept); a WAF that keeps moving is given up on after 4 re-sizings."""
    from types import SimpleNamespace

    from kvbench.analysis.plan import size_at_own_waf

    def run(wafs_by_call):
        calls, sized = [], []

        def at(capacity, cls):
            calls.append(capacity)
            w = wafs_by_call[min(len(calls), len(wafs_by_call)) - 1]
            return w, f"waf {w} at {capacity:g}"

        def size(waf):
            sized.append(waf)
            return {"store_bytes": 100.0 * len(sized)}

        row = size_at_own_waf("cls", SimpleNamespace(at=at), 50.0, size)
        return row, calls, sized

    row, calls, sized = run([2.0, 2.019])           # within 1%: no second sizing, the second source kept
    assert calls == [50.0, 100.0] and sized == [2.0] and row["workload_waf_source"] == "waf 2.019 at 100"
    row, calls, sized = run([2.0, 2.03, 2.03])      # 1.5% off: sized again at 2.03, which then holds
    assert calls == [50.0, 100.0, 200.0] and sized == [2.0, 2.03] and row["store_bytes"] == 200.0
    assert row["workload_waf_source"] == "waf 2.03 at 200"
    row, calls, sized = run([1.0, 2.0, 1.0, 2.0, 1.0, 2.0, 1.0, 2.0])     # never settles
    assert sized == [1.0, 2.0, 1.0, 2.0, 1.0] and len(calls) == 5 and row["workload_waf_source"] == "waf 1.0 at 400"


def test_the_recompute_and_dram_only_plans_by_hand():
    """Beside each class's plan: recompute everything (no DRAM, no SSD, every prompt token on the GPU: 512,000
    tokens a request at 1000/999 requests/s, at 10^4 tok/s and $3/h) and DRAM alone of the need (100 blocks of 1 MB at $5/GB over its
    service years), hit ratio 0 on a trace without reuse."""
    out = linear_plan(waf=2.0, retention_s=100.0)
    rec, dram = out["plans"]["1"][:2]
    day = 512 * 1000 / 999 * 86_400 / 1e4 / 3600 * 3.0     # 512 tokens a request, 1,000 requests in 999 s
    assert rec == {"name": "recompute", "dram_bytes": 0, "ssd_bytes": 0, "hit_ratio": 0.0,
                   "usd_per_day": {"dram": 0.0, "ssd": 0.0, "gpu": pytest.approx(day), "total": pytest.approx(day)},
                   "gpu_hours_per_day": pytest.approx(day / 3.0)}
    prices = prices_from_dict(ONE_CLASS)
    assert (dram["name"], dram["dram_bytes"], dram["ssd_bytes"], dram["hit_ratio"]) == ("dram-only", 100e6, 0, 0.0)
    assert dram["usd_per_day"]["dram"] == pytest.approx(0.1 * 5.0 / (prices.dram_service_years * 365))
    assert dram["usd_per_day"]["total"] == pytest.approx(dram["usd_per_day"]["dram"] + day)


def test_two_requests_at_two_instants_are_a_trace_to_plan():
    one = make_trace([0.0], [[1]])
    with pytest.raises(SpecError, match="spans 0 s over 1 request"):
        build_plan(one, block_bytes=1000, prices=prices_from_dict(ONE_CLASS), tokens_per_s=1e4,
                   options=PlanOptions(waf=1.0, sweep=(), write_policies=False))
    with pytest.raises(SpecError, match="spans 0 s over 2 request"):
        build_plan(make_trace([3.0, 3.0], [[1], [2]]), block_bytes=1000, prices=prices_from_dict(ONE_CLASS),
                   tokens_per_s=1e4, options=PlanOptions(waf=1.0, sweep=(), write_policies=False))
    out = build_plan(make_trace([0.0, 1.0], [[1], [2]]), block_bytes=1000, prices=prices_from_dict(ONE_CLASS),
                     tokens_per_s=1e4, options=PlanOptions(targets=(0.9,), waf=1.0, sweep=(), write_policies=False))
    assert (out["requests"], out["span_s"], out["trace_rate"]) == (2, 1.0, 2.0)
    assert out["per_target"]["0.9"]["reachable"] is False


def test_write_policies_of_a_one_block_need_run_a_one_slot_l3():
    """Retention 1 s on the linear trace needs one block: the write-policy comparison runs a 1-slot L3, written
    every second (1 slot/s after its first reuse: 86,400 DWPD of that slot)."""
    out = linear_plan(waf=1.0, retention_s=1.0, write_policies=True)
    assert out["per_target"]["1"]["need_bytes"] == pytest.approx(1e6)
    through = out["write_policies"]["through"]
    assert (through["l3_write_blocks"], through["l3_trim_slots"]) == (1000, 999)
    assert through["dwpd"] == pytest.approx(86_400.0) and through["key_sample_rate"] == 1.0


def test_plan_warnings_for_a_held_planned_tier_and_a_partial_replay():
    """The planned tier held beyond the trace is named in the warnings (with its basis), a measured one is not; a
    replay run that did not cover every request, or did not finish, is named with what it covered."""
    held = linear_plan(waf=2.0, retention_s=100.0)
    d = held["drives"][0]
    assert d["steady_state"] == "extrapolated"
    assert f"the planned tier (80.5 GiB): {d['basis']}" in held["warnings"]
    big = dict(ONE_CLASS, ssd={"d": dict(ONE_CLASS["ssd"]["d"], dwpd=1000.0)})
    tr = _linear()

    def plan(measured, prices=big):
        return build_plan(tr, block_bytes=1_000_000, prices=prices_from_dict(prices), tokens_per_s=1e4,
                          measured=measured, options=PlanOptions(targets=(1.0,), retention_s=200.0, waf=1.0,
                                                                 sweep=(), write_policies=False))

    shown = plan(None)
    assert shown["drives"][0]["steady_state"] == "measured" and shown["warnings"] == []
    assert plan({"requests_replayed": 1000, "run_status": "done"})["warnings"] == []
    assert plan({"requests_replayed": 999})["warnings"] == [
        "the replay run (status unknown) covered 999 of 1,000 requests: its measured WAF is from that part; hit "
        "ratios and write rates here are from the whole trace"]
    for status in ("interrupted", "failed", "running"):
        w = plan({"requests_replayed": 1000, "run_status": status})["warnings"]
        assert w == [f"the replay run ({status}) covered 1,000 of 1,000 requests: its measured WAF is from that "
                     "part; hit ratios and write rates here are from the whole trace"]

    # a replay that failed before saying how far it got: none of it counted
    assert plan({"run_status": "failed"})["warnings"] == [
        "the replay run (failed) covered 0 of 1,000 requests: its measured WAF is from that part; hit ratios and "
        "write rates here are from the whole trace"]

    # under a warm-up (the first 250 requests) the replay still runs from request 0: how much of it reached the
    # window is said, against the whole trace's 1,000 requests, not the window's 750
    def warmed(measured):
        return [w for w in build_plan(tr, block_bytes=1_000_000, prices=prices_from_dict(big), tokens_per_s=1e4,
                                      measured=measured,
                                      options=PlanOptions(targets=(1.0,), retention_s=200.0, waf=1.0, sweep=(),
                                                          write_policies=False, warmup=0.25))["warnings"]
                if w.startswith("the replay run")]

    assert warmed({"requests_replayed": 1000, "run_status": "done"}) == []
    assert warmed({"requests_replayed": 800}) == [
        "the replay run (status unknown) covered 800 of 1,000 requests (550 of them in the window measured from "
        "request 250): its measured WAF is from that part; hit ratios and write rates here are from the window"]
    assert warmed({"requests_replayed": 200, "run_status": "interrupted"}) == [
        "the replay run (interrupted) covered 200 of 1,000 requests (0 of them in the window measured from request "
        "250): its measured WAF is from that part; hit ratios and write rates here are from the window"]


def test_mark_provenance_marks_every_row():
    from kvbench.analysis.plan import mark_provenance

    out = {"source": {"source": "generated", "fitted_span_s": 100.0}, "residence_s": 50.0,
           "capacity_curve": [{"residence_s": 10.0}, {"residence_s": None}], "retention_sweep": [{"residence_s": 200.0}],
           "drives": [{"residence_s": 100.0}], "retention": {"residence_s": 1e9}}
    mark_provenance(out)
    assert [r["from"] for r in out["capacity_curve"]] == ["fitted-span", None]
    assert out["retention_sweep"][0]["from"] == "extension" and out["drives"][0]["from"] == "fitted-span"
    assert out["retention"]["from"] == "extension" and out["from"] == "fitted-span"
    bare = {"residence_s": None}
    mark_provenance(bare)
    assert bare == {"residence_s": None, "from": "trace"}


def test_the_cost_sentence_with_a_load_tier_names_the_share_that_loads_faster():
    """With --load-tier the cost line counts only hits whose load beats recompute. Random prefix requests of
    512-token blocks of 100 kB/token (51.2 MB a block): at 1 kB/s every hit loads slower (0%: the tier costs more
    than recomputing); at 1 PB/s with no first byte every hit loads faster (100%), whatever the size."""
    from kvbench.analysis.recompute import Tier

    tr = random_prefix_trace(5, n=200)
    bpt = 100_000

    def plan(tier):
        return build_plan(tr, block_bytes=512 * bpt, prices=prices_from_dict(ONE_CLASS), tokens_per_s=20_000.0,
                          bytes_per_token=bpt, options=PlanOptions(targets=(0.9,), waf=2.0, sweep=(),
                                                                   write_policies=False, load_tier=tier))

    slow, fast = plan(Tier("disk", 1e3, 1e-3)), plan(Tier("hbm", 1e15, 0.0))
    assert slow["load_tier"] == {"name": "disk", "bandwidth_bytes_per_s": 1e3, "latency_s": 1e-3, "first_byte": "1 ms"}
    assert slow["drives"][0]["loading_wins"]["fraction"] == 0.0 and fast["drives"][0]["loading_wins"]["fraction"] == 1.0
    cost = {k: [s for s in p["answer"]["sentences"] if s.startswith("Cost: ")][0] for k, p in (("slow", slow),
                                                                                          ("fast", fast))}
    assert "0% of hit tokens load faster at disk's measured speed" in cost["slow"]
    assert cost["slow"].endswith(": recompute; a KV tier on this device does not pay at this model/GPU.")
    assert "100% of hit tokens load faster at hbm's measured speed" in cost["fast"]
    assert f"${fast['usd_per_day_loading_wins']:,.2f}/day" in cost["fast"]


def test_write_policies_feed_the_ftl_model_each_l3_slot_at_its_own_address():
    """model_ftl: the FTL model sees the L3 store's writes and trims at their slots' byte addresses. Slots of a
    whole erase unit (1 MiB blocks, 1 MiB units) are written and trimmed in whole units: WAF 1 exactly. Half-unit
    slots (512 KiB) under slot reuse leave units half live, which GC copies: the model fed that stream, rebuilt
    here from the tier simulation's events, gives the same WAF, above 1."""
    from kvbench.analysis import ftl
    from kvbench.analysis.placement import store_ftl_config
    from kvbench.analysis.plan import _Scale, simulate_write_policies
    from kvbench.sim.tiers import EV_TRIM, EV_WRITE, Hierarchy, HierarchySpec, TierSpec

    tr = random_prefix_trace(4, n=200)

    def run(bb, l3):
        return simulate_write_policies(tr, block_bytes=bb, l2_blocks=0, l3_blocks=l3, layout="slot",
                                       sc=_Scale(1.0, 1.0, bb), ftl_op=0.07, erase_block_bytes=1 << 20, gc="greedy",
                                       policies=("through",))["through"]

    whole = run(1 << 20, 64)
    assert whole["waf"] == 1.0
    assert whole["waf_source"] == ("FTL model fed this policy's L3 writes and trims (slot store), op 0.07, "
                                   "1 MiB erase units")
    # an erase unit under 1 MiB is labelled by its size (">> 20" once called 512 KiB "0 MiB")
    small = simulate_write_policies(tr, block_bytes=1 << 19, l2_blocks=0, l3_blocks=128, layout="slot",
                                    sc=_Scale(1.0, 1.0, 1 << 19), ftl_op=0.07, erase_block_bytes=1 << 19,
                                    gc="greedy", policies=("through",))["through"]
    assert small["waf_source"].endswith("op 0.07, 512 KiB erase units")
    half = run(1 << 19, 128)
    h = Hierarchy(HierarchySpec(tiers=(TierSpec("l3", 128 * (1 << 19), layout="slot", trim=True),),
                                block_bytes=1 << 19, write_policy="through"))
    _, ev = h.run(tr.timestamp_s, tr.offsets, tr.keys)
    ev = ev[(ev["op"] == EV_WRITE) | (ev["op"] == EV_TRIM)]
    slot = h.spec.slot_bytes
    cfg = store_ftl_config(int((ev["slot"] + ev["nslots"]).max()) * slot, slot, op=0.07, erase_block_bytes=1 << 20,
                           gc="greedy")
    ops = np.where(ev["op"] == EV_WRITE, ftl.OP_WRITE, ftl.OP_TRIM).astype(np.uint8)
    want = ftl.simulate(cfg, extents=ftl.bytes_to_pages(ops, ev["slot"].astype(np.int64) * slot,
                                                        ev["nslots"].astype(np.int64) * slot, cfg.page_size),
                        writes=3.0, warmup=0.5).waf
    assert half["waf"] == want and want > 1.2


def test_write_policies_sample_a_trace_of_more_than_a_million_references(monkeypatch):
    """The per-block simulation is bounded by default at 2^20 references: a trace of 2^20 + 1 runs on its key
    sample at q = 2^20 / (2^20 + 1) (the sampler stands in: a 2-request trace, so nothing large is simulated);
    one of 2^20 runs whole."""
    import kvbench.analysis.curves.profile as profile
    from kvbench.analysis.plan import _Scale, simulate_write_policies
    from kvbench.stream.traces import Trace

    def big(n):
        return Trace(timestamp_s=np.array([0.0, 1.0]), input_tokens=np.array([512 * (n - 1), 512]),
                     output_tokens=np.zeros(2, np.int64), offsets=np.array([0, n - 1, n], dtype=np.int64),
                     keys=np.arange(1, n + 1, dtype=np.uint64), block_tokens=512, fmt="test", path="hand")

    asked = []
    monkeypatch.setattr(profile, "sampled_trace",
                        lambda trace, rate: asked.append(rate) or (make_trace([0.0, 1.0], [[1], [2]]), 2))
    kw = dict(block_bytes=4096, l2_blocks=0, l3_blocks=1, layout="slot", sc=_Scale(1.0, 1.0, 4096), ftl_op=0.07,
              erase_block_bytes=1 << 20, gc="greedy", model_ftl=False, policies=("through",))
    r = simulate_write_policies(big((1 << 20) + 1), **kw)["through"]
    assert asked == [2**20 / (2**20 + 1)] and r["key_sample_rate"] == asked[0] and r["l3_write_blocks"] == 2
    small = make_trace([0.0, 1.0], [[1], [2]])
    assert simulate_write_policies(small, max_refs=2, **kw)["through"]["key_sample_rate"] == 1.0 and len(asked) == 1


def test_a_trace_with_full_block_counts_but_no_stated_rate_plans_on_the_references_it_holds():
    """Blocks per request (the bill's references a day) are the references the curves count unless the trace
    states a key-sample rate: a sampled trace whose meta says nothing plans as the same references would."""
    from dataclasses import replace

    from kvbench.stream.sampling import FULL_BLOCKS, sample_keys

    tr = sample_keys(random_prefix_trace(5, n=300), 0.5)
    plain = replace(tr, extras={k: v for k, v in tr.extras.items() if k != FULL_BLOCKS})
    kw = dict(block_bytes=1000, prices=prices_from_dict(ONE_CLASS), tokens_per_s=1e4,
              options=PlanOptions(targets=(0.5,), waf=1.0, sweep=(), write_policies=False))
    a, b = build_plan(tr, **kw), build_plan(plain, **kw)
    assert a["plans"] == b["plans"] and a["plans"]["0.5"][1]["hit_ratio"] > 0


def test_a_warm_up_sizes_on_the_windows_own_requests_rate_and_tokens():
    """Eight requests one a second (input 10, 20, .., 80 tokens), --warmup 0.5: requests 4..7 are measured, their
    span from request 3's arrival (3 s, as the whole trace's from its first) to 7 s: 4 requests over 4 s, 1/s, and
    (50 + 60 + 70 + 80) / 4 = 65 tokens each, so recomputing costs 65 x 86,400 tokens a day at the GPU's rate. A
    key sample of the same stream (requests 2 and 5 left without a sampled block, compacted) keeps no tokens per
    dropped request: the window's requests are counted in the whole stream (4) and its tokens at the whole
    stream's mean (360 / 8 = 45 each)."""
    from kvbench.analysis.cost import load_prices
    from kvbench.stream.sampling import FULL_BLOCKS, compact
    from kvbench.stream.traces import Trace

    t = Trace(timestamp_s=np.arange(8.0), input_tokens=np.arange(10, 90, 10), output_tokens=np.ones(8, np.int64),
              offsets=np.array([0, 1, 2, 2, 3, 4, 4, 5, 6]), keys=np.array([7, 8, 7, 9, 8, 7], dtype=np.uint64),
              block_tokens=16, fmt="x", path="x", extras={FULL_BLOCKS: np.array([2, 2, 1, 2, 2, 1, 2, 2])},
              meta={"sample_rate": 0.5})
    prices = load_prices()

    def plan(tr):
        return build_plan(tr, block_bytes=16_000, prices=prices, tokens_per_s=1000.0, bytes_per_token=1000,
                          options=PlanOptions(targets=(0.5,), waf=1.0, sweep=(), write_policies=False, warmup=0.5))

    for tr, tokens in ((t, 65.0), (compact(t), 45.0)):
        out = plan(tr)
        assert (out["requests"], out["span_s"], out["trace_rate"]) == (4, 4.0, 1.0)
        assert out["stationarity"]["measured_from"]["requests"] == 4
        recompute = out["plans"]["0.5"][0]["usd_per_day"]["total"]
        assert recompute == pytest.approx(tokens * 86_400 / 1000.0 / 3600.0 * prices.gpu_usd_per_hour)
    # a hit ratio h saves blocks per request x h x 16 prompt tokens per request of the GPU's bill: the key sample's
    # window holds 2 + 1 + 2 + 2 = 7 blocks before sampling over its 4 requests (1.75 each); the same requests
    # read as a plain trace hold their 3 references (0.75 each)
    plain = Trace(**{**t.__dict__, "extras": {}, "meta": {}})
    for tr, blocks in ((t, 1.75), (plain, 0.75)):
        out = plan(tr)
        assert out["references"] == 3
        dram = out["plans"]["0.5"][1]
        assert dram["hit_ratio"] > 0 and dram["usd_per_day"]["gpu"] == pytest.approx(
            (65.0 - blocks * dram["hit_ratio"] * 16) * 86_400 / 1000.0 / 3600.0 * prices.gpu_usd_per_hour)
    # the same at a tenth of the times: a window of 0.4 s is still a span (10 requests/s)
    fast = build_plan(Trace(**{**t.__dict__, "timestamp_s": np.arange(8.0) / 10}), block_bytes=16_000,
                      prices=prices, tokens_per_s=1000.0, bytes_per_token=1000,
                      options=PlanOptions(targets=(0.5,), waf=1.0, sweep=(), write_policies=False, warmup=0.5))
    assert fast["span_s"] == pytest.approx(0.4) and fast["trace_rate"] == pytest.approx(10.0)
    # a window whose every arrival ties with the last warm-up one spans no time: one line naming the option
    tied = Trace(**{**t.__dict__, "timestamp_s": np.array([0.0, 1, 2, 3, 3, 3, 3, 3])})
    with pytest.raises(SpecError, match="the warm-up leaves 4 request"):
        plan(tied)
