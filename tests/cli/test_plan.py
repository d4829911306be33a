"""README behaviours of ``kvbench plan`` pinned by hand on a six-request trace: ``--absolute``, ``--warmup``,
``--prices FILE`` and ``--price`` overrides.

The trace (Mooncake JSONL, 512-token blocks; tiny-gqa stores 512 B/token, so a block is 262,144 B), one block
per request, one request per second:

    t (s)   0  1  2  3  4  5
    block   1  2  1  1  3  2

LRU stack distances (distinct blocks since the last use, itself included): r2 -> 2, r3 -> 1, r5 -> 3; the rest
are cold. Hit ratio over all 6 references: C = 1 block -> 1/6, 2 -> 2/6, >= 3 -> 3/6 (the infinite ratio).
With ``--warmup 0.5`` the first floor(0.5 x 6) = 3 requests only warm the cache: r3 hits at 1, r4 misses, r5
hits at 3, so C = 1 -> 1/3, 2 -> 1/3, >= 3 -> 2/3.

Steady writes (write-through: every miss is written) of an LRU of C blocks, from its first eviction on:
C = 1 first evicts at t = 1 (r1), then misses r2, r4, r5: 3 blocks in 4 s = 0.75 blocks/s; C = 2 first evicts
at t = 4 (r4 evicts block 2), then misses r5: 1 block in 1 s; C = 3 never evicts. The warm-up of hit ratios
does not touch these.

Money (the test's own price file): per day the trace's 1.2 requests/s x 512 tokens = 53,084,160 prompt tokens,
at 1,000 tokens/s 14.7456 GPU-hours.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

BLOCK = 262_144
GB = 1e9
REQUESTS = [(0, 1), (1000, 2), (2000, 1), (3000, 1), (4000, 3), (5000, 2)]   # (ms, block)
GPU_HOURS_PER_DAY = 512 * 1.2 * 86_400 / 1000 / 3600                           # 14.7456

PRICES = """name = "hand"
date = "2026-01"
status = "test"
[dram]
usd_per_gb = 5.0
service_years = 4
[gpu]
usd_per_hour = 3.0
[ssd.d]
usd_per_gb = 0.1
dwpd = 1.0
warranty_years = 5
reference_waf = 2.0
"""


@pytest.fixture
def plan(cli, tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(json.dumps({"timestamp": t, "input_length": 512, "output_length": 1, "hash_ids": [b]})
                             + "\n" for t, b in REQUESTS))
    prices = tmp_path / "prices.toml"
    prices.write_text(PRICES)

    def run(*args, ok=True):
        r = cli("plan", "--trace", trace, "--model", "tiny-gqa", "--sweep", "", "--recompute-tokens-per-s", "1000",
                "--prices", prices, "--waf", "2", "--json", *args)
        if not ok:
            return r
        assert r.exit_code == 0, r.output
        return json.loads(r.output)

    return run


def test_absolute_targets_are_hit_ratios_relative_ones_fractions_of_the_infinite_ratio(plan):
    """0.3 absolute needs hit 0.3: C = 2 (1/3); 0.3 relative needs 0.3 x 0.5 = 0.15: C = 1 (1/6). 0.6 absolute
    is beyond the infinite 0.5 (unreachable); 0.6 relative is 0.3: C = 2."""
    a = plan("--target-hit", "0.3", "--absolute")
    assert a["block_bytes"] == BLOCK and a["infinite_hit_ratio"] == pytest.approx(0.5)
    assert a["target_mode"] == "absolute"
    t = a["per_target"]["0.3"]
    assert t["target_hit_ratio"] == pytest.approx(0.3)
    assert t["hit_capacity_bytes"] == 2 * BLOCK and t["hit_ratio"] == pytest.approx(1 / 3)
    # C = 2 fills at t = 4 and writes 1 block in its 1-s window, fewer than it holds: that window is shorter than
    # its residence, so the answer holds C = 1's 0.75 blocks/s (an upper bound): residence 8/3 s, 32,400 DWPD
    assert t["steady_state"] == "extrapolated"
    assert t["write_bytes_per_s"] == pytest.approx(0.75 * BLOCK) and t["residence_s"] == pytest.approx(8 / 3)
    assert t["dwpd"] == pytest.approx(32_400)

    r = plan("--target-hit", "0.3")
    assert r["target_mode"] == "relative to infinite-cache hit ratio"
    t = r["per_target"]["0.3"]
    assert t["target_hit_ratio"] == pytest.approx(0.15)
    assert t["hit_capacity_bytes"] == BLOCK and t["hit_ratio"] == pytest.approx(1 / 6)
    # C = 1: 0.75 blocks/s from t = 1, residence 4/3 s
    assert t["write_bytes_per_s"] == pytest.approx(0.75 * BLOCK) and t["residence_s"] == pytest.approx(4 / 3)

    u = plan("--target-hit", "0.6", "--absolute")
    assert u["per_target"]["0.6"]["reachable"] is False and u["drives"] == []
    assert u["per_target"]["0.6"]["target_hit_ratio"] == pytest.approx(0.6)
    assert any("unreachable" in s for s in u["answer"]["sentences"])
    v = plan("--target-hit", "0.6")
    assert v["per_target"]["0.6"]["hit_capacity_bytes"] == 2 * BLOCK


def test_warmup_excludes_the_first_requests_from_hit_ratios_and_from_writes(plan):
    caps = ("--capacities", f"{BLOCK},{2 * BLOCK},{3 * BLOCK}")
    cold = plan(*caps, "--target-hit", "0.3", "--absolute")
    warm = plan(*caps, "--target-hit", "0.3", "--absolute", "--warmup", "0.5")
    assert cold["infinite_hit_ratio"] == pytest.approx(1 / 2)
    assert warm["infinite_hit_ratio"] == pytest.approx(2 / 3)
    assert [c["hit_ratio"] for c in cold["capacity_curve"]] == pytest.approx([1 / 6, 2 / 6, 3 / 6])
    assert [c["hit_ratio"] for c in warm["capacity_curve"]] == pytest.approx([1 / 3, 1 / 3, 2 / 3])
    # steady writes are measured from the first eviction or the warm-up's end, whichever is later: C = 1 fills
    # at r1, so with the warm-up its window is r3..r5 (r3 hits, r4 and r5 miss: 2 of 3 references) at the
    # window's demand (3 references arriving after r2's t = 2, over 5 - 2 s: 1 per s) -> 2/3 block/s; C = 2
    # fills at r4, after the warm-up: the same 1 block/s as cold
    assert [c["write_bytes_per_s"] for c in cold["capacity_curve"]] == pytest.approx([0.75 * BLOCK, BLOCK, None])
    assert [c["write_bytes_per_s"] for c in warm["capacity_curve"]] == pytest.approx([2 / 3 * BLOCK, BLOCK, None])
    for curve in (cold["capacity_curve"], warm["capacity_curve"]):
        assert [c["filled"] for c in curve] == [True, True, False]
    # a warm-up by time selects the requests before it: 2.5 s -> r0..r2, the same as the fraction 0.5
    by_time = plan(*caps, "--target-hit", "0.3", "--absolute", "--warmup", "2.5s")
    assert by_time["capacity_curve"] == warm["capacity_curve"]
    assert by_time["stationarity"]["measured_from"]["start_s"] == 3.0
    assert by_time["stationarity"]["measured_from"]["request"] == 3
    # the target 0.3 (absolute) needs 2 blocks cold, 1 block once the first half only warms the cache
    assert cold["per_target"]["0.3"]["hit_capacity_bytes"] == 2 * BLOCK
    assert warm["per_target"]["0.3"]["hit_capacity_bytes"] == BLOCK
    assert warm["per_target"]["0.3"]["hit_ratio"] == pytest.approx(1 / 3)
    # relative targets follow the warm infinite ratio: 0.75 x 2/3 = 0.5 -> C = 3
    assert plan("--warmup", "0.5", "--target-hit", "0.75")["per_target"]["0.75"]["hit_capacity_bytes"] == 3 * BLOCK
    # a warm-up of every request leaves nothing to measure: a one-line error naming the option
    r = plan("--warmup", "1.0", ok=False)
    assert r.exit_code != 0 and "warm-up" in r.output and r.output.strip().count("\n") == 0, r.output


def test_price_file_and_overrides_reach_every_line_of_the_bill(plan):
    """Target 0.3 absolute: the hit capacity is 2 blocks (524,288 B), the L2 fixed at one block (--dram).

    The SSD class (1 DWPD, reference WAF 2, at the given WAF 2) must keep KV 86,400 x 2 / (2 x 1) = 86,400 s,
    far beyond the trace: the write rate is held at that of the longest residence the trace shows, among tiers
    that turned over (wrote >= C blocks after filling): C = 1 (3 writes), not C = 2 (1 write), so 0.75 blocks/s
    and 64,800 blocks. With --price ssd.d.dwpd=2 it is 43,200 s, 32,400 blocks. Either way endurance binds, the
    drive is written at its rating (host DWPD = rating, as WAF = reference WAF) and lasts its 5-year warranty;
    the tier holds every block: hit 1/2, half the tokens recomputed."""
    base = plan("--target-hit", "0.3", "--absolute", "--dram", str(BLOCK))
    over = plan("--target-hit", "0.3", "--absolute", "--dram", str(BLOCK), "--price", "dram=8", "--price", "gpu=2.5",
                "--price", "ssd.d=0.05", "--price", "ssd.d.dwpd=2")
    assert base["prices"]["name"] == "hand" and base["prices"]["overrides"] == []
    assert over["prices"]["overrides"] == ["dram=8", "gpu=2.5", "ssd.d=0.05", "ssd.d.dwpd=2"]
    assert over["prices"]["dram_usd_per_gb"] == 8 and over["prices"]["gpu_usd_per_hour"] == 2.5
    for out, dram, gpu, ssd_gb, dwpd in ((base, 5.0, 3.0, 0.1, 1.0), (over, 8.0, 2.5, 0.05, 2.0)):
        rec, dram_only, ssd_plan = out["plans"]["0.3"]
        assert rec["name"] == "recompute" and rec["usd_per_day"]["total"] == pytest.approx(GPU_HOURS_PER_DAY * gpu)
        assert rec["gpu_hours_per_day"] == pytest.approx(GPU_HOURS_PER_DAY)
        # DRAM-only: 2 blocks of DRAM over its 4-year service life, and the GPU time of the 2/3 that miss
        assert dram_only["usd_per_day"]["dram"] == pytest.approx(2 * BLOCK / GB * dram / (4 * 365))
        assert dram_only["usd_per_day"]["gpu"] == pytest.approx(GPU_HOURS_PER_DAY * 2 / 3 * gpu)
        d = out["drives"][0]
        blocks = 0.75 * 86_400 / dwpd
        assert d["bound"] == "endurance" and d["endurance_residence_s"] == pytest.approx(86_400 / dwpd)
        assert d["capacity_bytes"] == pytest.approx(blocks * BLOCK)
        assert d["dwpd_host"] == pytest.approx(dwpd) and d["dwpd_rating_equivalent"] == pytest.approx(dwpd)
        assert d["lifetime_years"] == pytest.approx(5.0) and d["hit_ratio"] == pytest.approx(0.5)
        assert d["ssd_per_dram"] == pytest.approx(blocks / 2)
        usd = d["usd_per_day"]
        assert usd["dram"] == pytest.approx(BLOCK / GB * dram / (4 * 365))
        assert usd["ssd"] == pytest.approx(blocks * BLOCK / GB * ssd_gb / (5 * 365))
        assert usd["gpu"] == pytest.approx(GPU_HOURS_PER_DAY / 2 * gpu)
        assert usd["total"] == pytest.approx(usd["dram"] + usd["ssd"] + usd["gpu"])
        assert ssd_plan["usd_per_day"] == usd and out["usd_per_day"] == pytest.approx(usd["total"])


@pytest.mark.parametrize("override, what", [("dram=-1", "dram=-1"), ("ssd.nope=1", "ssd.nope"),
                                            ("hbm=3", "hbm"), ("gpu", "gpu")])
def test_bad_price_override_is_one_line_naming_it(cli, override, what):
    r = cli("plan", "--trace", "mooncake-sample", "--model", "tiny-gqa", "--price", override)
    assert r.exit_code != 0 and what in r.output and r.output.strip().count("\n") <= 1, r.output


def test_terminal_marks_the_projection_no_answer_uses(cli, tmp_path, plan):
    """The capacity table shows C = 2's projection (1 block/s over its 1-s window: 43,200 DWPD) and says that
    answers hold the rate there; the answer at that capacity (target 0.3 absolute) is the held 32,400 DWPD."""
    trace = tmp_path / "t.jsonl"
    plan("--target-hit", "0.3", "--absolute")           # writes the trace and the price file
    r = cli("plan", "--trace", trace, "--model", "tiny-gqa", "--sweep", "", "--recompute-tokens-per-s", "1000",
            "--prices", tmp_path / "prices.toml", "--waf", "2", "--capacities", f"{BLOCK},{2 * BLOCK}")
    assert r.exit_code == 0, r.output
    rows = {ln.split()[0] + " " + ln.split()[1]: ln for ln in r.output.splitlines() if "KiB" in ln.split()[1:2]}
    assert rows["256 KiB"].split()[-1] == "6.48e+04" and "projected" not in rows["256 KiB"]
    assert "4.32e+04  (projected: not turned over; answers hold the rate)" in rows["512 KiB"]


def test_the_runs_iolog_waf_labels_its_erase_unit_by_size(tmp_path):
    """The device WAF from a run's own fio iolog names the erase unit it modelled by its size: 512 KiB, never the
    "0 MiB erase units" a ">> 20" label gave a unit under 1 MiB; 2 MiB as before."""
    from kvbench.cli.plan import _run_iolog_waf

    offs = np.random.default_rng(1).integers(0, (8 << 20) // 4096, 2 * (8 << 20) // 4096) * 4096
    (tmp_path / "w.iolog").write_text("fio version 3 iolog\n0 t add\n"
                                      + "".join(f"{i} t write {o} 4096\n" for i, o in enumerate(offs)))
    waf, src = _run_iolog_waf(str(tmp_path), 8 << 20, 0.28, 512 << 10)
    assert waf >= 1.0 and src == "FTL model fed the run's I/O (w.iolog), op 0.28, 512 KiB erase units"
    assert _run_iolog_waf(str(tmp_path), 8 << 20, 0.28, 2 << 20)[1].endswith("op 0.28, 2 MiB erase units")


def test_write_policy_line_names_the_tiers_it_simulated_and_compares_the_policies():
    """The policies run at the hit target's tiers, not the drives endurance buys: the line names that L3 (whose
    DWPD it gives) and each policy's writes against write-through's."""
    from kvbench.cli.plan import write_policy_line

    wp = {"through": {"steady_state": True, "write_bytes_per_s": 2e9, "dwpd": 157.2, "l2_bytes": 2 ** 39,
                      "l3_bytes": 2 ** 40},
          "back": {"steady_state": True, "write_bytes_per_s": 1.5e9, "dwpd": 117.9, "l2_bytes": 2 ** 39,
                   "l3_bytes": 2 ** 40}}
    line = write_policy_line(wp)
    assert line.startswith("write policy at the hit target's tiers (L2 512 GiB + L3 1 TiB simulated")
    assert "write-through 2 GB/s (157 DWPD of that L3)" in line
    assert "write-back 1.5 GB/s (118 DWPD of that L3, 0.75x write-through's)" in line
    wp["back"] = {"steady_state": False, "write_bytes_per_s": None, "dwpd": None, "l2_bytes": 0, "l3_bytes": 2 ** 40}
    wp["through"]["l2_bytes"] = 0
    line = write_policy_line(wp)
    assert "(L3 1 TiB simulated" in line and "write-back: L3 never evicts within the trace" in line
