"""The load-vs-recompute inequality at its edges, by hand: ties (a margin of exactly 0 is not a win), range ends
the coarse grid does not hold, the defaults, break-even bandwidths below 1 B/s, the overall verdict over several
tiers, and a replay run's and a trace's hits under pipelining (where the suffix decides what overlaps).

Exact ties use numbers whose floating-point arithmetic is exact: recompute at 1,000 tokens/s costs 1e-3 s/token,
1,000 B/token at 2 MB/s loads at 5e-4 s/token, sums of equal halves are exact."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from kvbench.analysis.recompute import (Inequality, Tier, analyse_run_hits, analyse_tiers, analyse_trace_prefixes,
                                        curve_tokens, fit_tier_from_requests, overall_verdict, read_run,
                                        trace_prefixes, verdict)
from kvbench.compute.profile import rate_profile
from kvbench.errors import SpecError

from tests.analysis.test_recompute import write_run

GRID = np.unique(np.round(np.geomspace(1, 1 << 20, 4096)).astype(np.int64))   # win_ranges' coarse grid


# --- tiers --------------------------------------------------------------------------------------------------
def test_any_positive_bandwidth_and_finite_latency_make_a_tier():
    slow = Tier("slow", 0.5, 0.0)                  # half a byte per second is slow, not invalid
    assert float(Inequality(rate_profile(1), 1, 1).load_exposed(slow, 2)) == pytest.approx(4.0)
    for bw, lat in ((0.0, 0.0), (-1.0, 0.0), (math.inf, 0.0), (math.nan, 0.0), (1.0, -1e-9), (1.0, math.inf),
                    (1.0, math.nan)):
        with pytest.raises(SpecError):
            Tier("t", bw, lat)


# --- ranges and n* ------------------------------------------------------------------------------------------
def test_a_margin_of_exactly_zero_is_not_a_win_inside_the_bisection():
    """1e-3 n = 20 + 5e-4 n at n = 40,000 exactly: loading wins from 40,001. 40,000 lies between two grid
    points, so the bisection decides it."""
    assert 40_000 not in GRID and GRID[(GRID > 39_000) & (GRID < 41_000)].size
    ineq = Inequality(rate_profile(1000), bytes_per_token=1000, layers=1)
    tier = Tier("t", 2e6, 20.0)
    assert float(ineq.margin(tier, 40_000)) == 0.0
    assert ineq.break_even(tier) == 40_001 and ineq.win_ranges(tier) == [(40_001, 1 << 20)]


def test_a_range_end_between_grid_points_is_bisected_to_the_token():
    """test_recompute's middle range, suffix 200,000: hidden while 5e-5 n <= 0.2 s per layer (n <= 40,000) and
    wins there from n = 43; beyond, exposed 2.1e-3 + 5e-4 n - 18 < 1e-4 n <=> n < 44,994.75: the last win is
    44,994, between the grid points 44,855 and 45,007."""
    ineq = Inequality(rate_profile(10_000), bytes_per_token=1000, layers=10, pipelined=True)
    tier = Tier("t", 2e6, 2.1e-3)
    assert 44_994 not in GRID and 44_995 not in GRID
    assert ineq.win_ranges(tier, suffix=200_000) == [(43, 44_994)]
    assert ineq.break_even(tier, suffix=200_000) is None


def test_a_one_token_losing_gap_on_a_grid_point_splits_the_ranges():
    """Pipelined with an attention term (T(n) = b n + c n^2), suffix s, L layers: beyond the hidden region the
    margin is c n^2 + (b - k + 2 c s (L-1)/L) n + (L-1)/L (b s + c s^2) - t. Choosing k = b + 2 c s (L-1)/L
    + 2 c n0 and t = (L-1)/L (b s + c s^2) - c n0^2 + c/4 makes it c ((n - n0)^2 - 1/4): loading loses only at
    n0 = 18,792 (a grid point whose neighbours 18,728 and 18,855 average to 18,791). In the hidden region (n <=
    (b s + c s^2) / (k - 2 c s) = 13,766.5) the margin c n^2 + (b - k/L) n - t turns positive at n = 12,873.5.
    Ranges: [12,874, 18,791] and [18,793, max]; n* = 18,793."""
    from kvbench.compute.fit import QuadraticFit
    from kvbench.compute.profile import ComputeProfile

    b, c, s, L, n0 = 1e-4, 1e-8, 20_000, 10, 18_792
    assert n0 in GRID and (18_728 + 18_855) // 2 != n0 and {18_728, 18_855} <= set(GRID.tolist())
    k = b + 2 * c * s * (L - 1) / L + 2 * c * n0
    t = (L - 1) / L * (b * s + c * s * s) - c * n0 * n0 + c / 4
    prof = ComputeProfile(name="p", kind="published", model="m", device="d", dtype="", fit=QuadraticFit(0.0, b, c),
                          reference_tokens=1000, source="test")
    ineq = Inequality(prof, bytes_per_token=1000, layers=L, pipelined=True)
    tier = Tier("t", 1000 / k, t)
    first = (-(b - k / L) + math.sqrt((b - k / L) ** 2 + 4 * c * t)) / (2 * c)
    assert math.ceil(first) == 12_874
    assert ineq.win_ranges(tier, suffix=s) == [(12_874, n0 - 1), (n0 + 1, 1 << 20)]
    assert ineq.break_even(tier, suffix=s) == n0 + 1


def test_pipelined_defaults_have_no_suffix_to_overlap():
    """Without a suffix a pipelined inequality is the plain one: n* = 12 (test_recompute's linear case), and
    the bandwidth to break even at 100 tokens is 100 x 1000 B / (1e-2 - 1e-3) s."""
    tier = Tier("t", 100e6, 1e-3)
    piped = Inequality(rate_profile(10_000), bytes_per_token=1000, layers=10, pipelined=True)
    assert piped.break_even(tier) == 12
    assert piped.bandwidth_needed(tier, 100) == pytest.approx(1e5 / 9e-3, rel=1e-6)
    out = analyse_tiers(piped, [tier], lengths=[100])["t"]
    assert out["margin_s"]["100"] == pytest.approx(1e-2 - (1e-3 + 1e-3))
    assert out["break_even_tokens"] == 12


def test_bandwidth_needed_edges():
    """Latency exactly the recompute time: nothing left to buy with bandwidth (None). A prefix that loads no
    bytes needs none. Pipelined at 1 s/token with 0.01 B/token over 2 layers, n = 100, suffix 10: one layer
    computes 5 s; the break-even bandwidth bw has 0.5/bw + (0.5/bw - 5) = 100 s exposed, bw = 1/105 B/s (the
    plain one would be 1 B / 100 s = 0.01 B/s)."""
    plain = Inequality(rate_profile(1000), bytes_per_token=1000, layers=1)
    assert plain.bandwidth_needed(Tier("t", 1e9, 0.1), 100) is None          # 0.1 s latency = 100 tokens' compute
    assert plain.bandwidth_needed(Tier("t", 1e9, 0.05), 100) == pytest.approx(1e5 / 0.05)
    nothing = Inequality(rate_profile(1000), bytes_per_token=0, layers=4, pipelined=True)
    assert nothing.bandwidth_needed(Tier("t", 1e9, 0.01), 100, suffix=10) == 0.0
    tiny = Inequality(rate_profile(1), bytes_per_token=0.01, layers=2, pipelined=True)
    need = tiny.bandwidth_needed(Tier("t", 1.0, 0.0), 100, suffix=10)
    assert need == pytest.approx(1 / 105, rel=1e-6)
    assert Inequality(rate_profile(1), 0.01, 2).bandwidth_needed(Tier("t", 1.0, 0.0), 100) == pytest.approx(0.01)


def test_verdict_at_a_tie_says_recompute_is_not_beaten():
    line = verdict(Tier("t", 1e9, 1e-3), None, [], 1000, 0.0, 2e9)
    assert "recomputing is faster by 0 ns" in line and "loading saves" not in line
    assert "loading saves 1 ms" in verdict(Tier("t", 1e9, 1e-3), 10, [(10, 100)], 1000, 1e-3, None, max_tokens=100)


def test_analyse_tiers_curve_reaches_the_longest_length_or_the_reference():
    ineq = Inequality(rate_profile(10_000), bytes_per_token=1000, layers=10)
    tier = Tier("t", 100e6, 1e-3)
    long = analyse_tiers(ineq, [tier], lengths=[100, 50_000], ref_tokens=1000)["t"]
    assert long["curve"]["tokens"][0] == 1 and long["curve"]["tokens"][-1] == 50_000
    short = analyse_tiers(ineq, [tier], lengths=[10], ref_tokens=3000)["t"]
    assert short["curve"]["tokens"][-1] == 3000 and short["reference_tokens"] == 3000


def test_curve_tokens_has_64_geometric_points_by_default():
    # 10^(6k/63), k = 0..63, rounded; the short end repeats 1, 2, 3 ... and unique drops the repeats
    expected = sorted({round(10 ** (6 * k / 63)) for k in range(64)})
    assert curve_tokens(10 ** 6).tolist() == expected


def test_overall_verdict_picks_the_tier_with_the_shortest_break_even():
    tiers = {"far": {"break_even_tokens": 5000, "win_ranges": [[5000, 10]], "verdict": "far"},
             "near": {"break_even_tokens": 300, "win_ranges": [[300, 10]], "verdict": "near"},
             "mid": {"break_even_tokens": None, "win_ranges": [[40, 90]], "verdict": "mid"},
             "none": {"break_even_tokens": None, "win_ranges": [], "verdict": "none"}}
    v = overall_verdict(tiers)
    assert (v["decision"], v["best_tier"], v["break_even_tokens"]) == ("load", "near", 300)
    assert v["tiers"] == {"far": "load", "near": "load", "mid": "mixed", "none": "recompute"}
    assert v["lines"] == ["far", "near", "mid", "none"]
    mixed = overall_verdict({k: tiers[k] for k in ("mid", "none")})
    assert (mixed["decision"], mixed["best_tier"], mixed["break_even_tokens"]) == ("mixed", None, None)
    assert overall_verdict({"none": tiers["none"]})["decision"] == "recompute"


# --- a replay run's measurements ------------------------------------------------------------------------------
def test_load_columns_in_seconds_and_nanoseconds_and_blank_hits(tmp_path):
    run = read_run(write_run(tmp_path / "r", requests="input_tokens,hit_blocks_l3,load_s,l3_load_ns\n"
                                                      "100,2,0.25,250000000\n100,,0.5,\n"))
    assert run.hits.load_s.tolist() == [0.25, 0.5]
    assert run.hits.tier_load_s["l3"][0] == pytest.approx(0.25) and np.isnan(run.hits.tier_load_s["l3"][1])
    assert run.hits.hit_blocks["l3"].tolist() == [2, 0]                # a blank hit cell is no hit


def test_any_positive_run_bandwidth_makes_a_tier_and_a_negative_one_is_skipped(tmp_path):
    run = read_run(write_run(tmp_path / "r", tiers={
        "l2": {"read_bw_bytes_per_s": 1.0, "read_lat_us": {"p50": 2.0}},
        "l3": {"read_bw_bytes_per_s": -5.0, "read_lat_us": {"p50": 2.0}}}))
    assert [(t.name, t.bandwidth_bytes_per_s) for t in run.tiers] == [("l2", 1.0)]
    assert any("l3" in n and "skipped" in n for n in run.notes)


def _fit_run(tmp_path, rows, header="input_tokens,hit_blocks_l3,hit_blocks_l2,load_time_us"):
    return read_run(write_run(tmp_path / "f", requests=header + "\n" + "\n".join(rows) + "\n")).hits


def test_tier_fit_needs_eight_requests_of_two_sizes(tmp_path):
    """Blocks of 16,000 B; load = 80 us + bytes / 2 GB/s = 88 us (1 block), 96 us (2 blocks). Exactly 8
    single-tier requests of exactly 2 sizes are fitted; a request with no hit in the tier (a lookup of 500 us),
    one with a zero or infinite load, and one that also hit l2 do not count."""
    rows = [f"100,{b},0,{80 + 8 * b}" for b in (1, 2) * 4]
    rows += ["100,0,0,500", "100,3,0,0", "100,3,0,inf", "100,3,1,900"]
    t = fit_tier_from_requests("l3", _fit_run(tmp_path, rows), block_bytes=16_000)
    assert t.bandwidth_bytes_per_s == pytest.approx(2e9, rel=1e-9) and t.latency_s == pytest.approx(80e-6, rel=1e-9)
    assert "8 requests" in t.source


def test_tier_fit_falls_back_to_bytes_over_time(tmp_path):
    """Three requests of two sizes (too few to fit): bytes over load time at the given latency, 64,000 B (4 blocks)
    over (88 + 96 + 88) us; without a latency, no tier. Eight requests of one size, or whose load does not grow with
    the bytes (a flat fit has no bandwidth), fall back the same way."""
    few = _fit_run(tmp_path / "a", ["100,1,0,88", "100,2,0,96", "100,1,0,88"])
    t = fit_tier_from_requests("l3", few, block_bytes=16_000, latency_s=5e-5)
    assert t.bandwidth_bytes_per_s == pytest.approx(64_000 / 272e-6) and t.latency_s == 5e-5
    assert fit_tier_from_requests("l3", few, block_bytes=16_000) is None
    one_size = _fit_run(tmp_path / "b", ["100,2,0,100"] * 8)
    t = fit_tier_from_requests("l3", one_size, block_bytes=16_000, latency_s=1e-5)
    assert t.bandwidth_bytes_per_s == pytest.approx(32_000 / 100e-6)
    flat = _fit_run(tmp_path / "c", [f"100,{b},0,100" for b in (1, 2) * 4])
    t = fit_tier_from_requests("l3", flat, block_bytes=16_000, latency_s=1e-5)
    assert t.bandwidth_bytes_per_s == pytest.approx(12 * 16_000 / 800e-6) and "too few or too alike" in t.source


def test_tier_fit_from_its_own_column_counts_only_requests_that_hit_it(tmp_path):
    """The tier's own load column: a request with 1 block counts; one with no l3 hit does not, even with a
    time recorded (a lookup)."""
    rows = [f"{b + 2},{b},1,{(100e-6 + b * 16_000 / 4e9) * 1e3:.9f}" for b in (1, 2) * 4] + ["5,0,2,0.5"]
    hits = _fit_run(tmp_path, rows, header="blocks,hit_l3,hit_l2,l3_load_ms")
    t = fit_tier_from_requests("l3", hits, block_bytes=16_000)
    assert t.bandwidth_bytes_per_s == pytest.approx(4e9, rel=1e-6) and t.latency_s == pytest.approx(100e-6, rel=1e-6)


PIPED = Inequality(rate_profile(1000), bytes_per_token=1000, layers=2, pipelined=True)
# 1e-3 s/token recompute; a layer of n tokens loads n x 500 B. With a suffix of s tokens a layer computes
# s x 5e-4 s; exposed = latency + l + max(0, l - c).


def test_run_hits_pipelined_by_hand(tmp_path):
    """16-token blocks, l1 a free (unmeasured) tier, l3 at 10 MB/s (5e-5 s per token per layer), 2 ms first
    byte. Per request (prompt = blocks x 16; loaded capped at prompt - 1 - free; suffix = the rest):
      r0: 10 blocks, 2 in l3: n 32, s 128: hidden (1.6 ms <= 64 ms), exposed 2 + 1.6 ms, saved 32 ms: +28.4 ms
      r1: 10 blocks, 3 in l1 (48 free), 1 in l3: n 16, s 96: exposed 2.8 ms, saved 16 ms: +13.2 ms
      r2: 4 blocks, 3 in l3: n 48, s 16: l 2.4 ms, c 8 ms: exposed 4.4 ms, saved 48 ms: +43.6 ms
      r3: 4 blocks, 2 in l1, 3 in l3: loaded min(48, 63 - 32) = 31, s 1: per tier n = 48 with s 1: l 2.4 ms,
          c 0.5 ms, exposed 2 + 2.4 + 1.9 = 6.3 ms, saved 48 ms: +41.7 ms
      r4: no hits; r5: only free hits; r6: 2 blocks, 1 in l3 (n 16, s 16: hidden, +13.2 ms), no load time
          measured (not issued): loaded, but not in the measured figures.
    Measured: saved = T(free + loaded) - T(free) - load = 32 - 30, 16 - 1, 48 - 50, 31 - 4 ms."""
    csv = ("blocks,hit_l1,hit_l2,hit_l3,load_ms\n10,0,0,2,30\n10,3,0,1,1\n4,0,0,3,50\n4,2,0,3,4\n5,0,0,0,\n"
           "3,1,0,0,\n2,0,0,1,\n")
    run = read_run(write_run(tmp_path / "r", requests=csv))
    tiers = [Tier("l3", 1e7, 2e-3), Tier("l2", 1e9, 1e-4)]
    h = analyse_run_hits(PIPED, tiers, run.hits, block_tokens=16)
    l3 = h["tiers"]["l3"]
    margins = np.array([28.4e-3, 13.2e-3, 43.6e-3, 41.7e-3, 13.2e-3])
    assert l3["hit_requests"] == 5 and l3["wins_fraction"] == 1.0
    assert l3["margin_s"]["p50"] == pytest.approx(np.percentile(margins, 50))
    assert l3["margin_s"]["p99"] == pytest.approx(np.percentile(margins, 99))
    assert l3["hit_tokens"]["p50"] == 32.0
    assert h["tiers"]["l2"] == {"hit_requests": 0, "hit_tokens": {"p50": None, "p99": None},
                                "margin_s": {"p50": None, "p99": None}, "wins_fraction": None}
    assert h["requests"] == 7 and h["requests_with_loaded_hits"] == 5
    assert h["loaded_tokens"]["p50"] == pytest.approx(np.percentile([32, 16, 48, 31, 16], 50))
    saved = np.array([2e-3, 15e-3, -2e-3, 27e-3])
    assert h["wins_fraction"] == 0.75
    assert h["measured_load_s"]["p50"] == pytest.approx(np.percentile([30e-3, 1e-3, 50e-3, 4e-3], 50))
    assert h["ttft_saved_s"]["p50"] == pytest.approx(np.percentile(saved, 50))
    assert h["ttft_saved_s"]["p99"] == pytest.approx(np.percentile(saved, 99))
    assert h["ttft_saved_s_if_best_choice"]["p50"] == pytest.approx(np.percentile(np.maximum(saved, 0), 50))


def test_run_hits_ties_are_not_wins_and_one_loaded_token_counts(tmp_path):
    """1-token blocks, l3 at 1 MB/s (5e-4 s per token per layer) after 0.5 ms. r0: a 2-token prompt, 1 loaded,
    suffix 1: exposed 0.5 + 0.5 + 0 ms = 1 ms = its recompute: a tie, and its measured 1 ms load ties too.
    r1: 3 tokens, 2 loaded, suffix 1: l 1 ms, c 0.5 ms, exposed 0.5 + 1 + 0.5 = 2 ms = recompute (a tie); its
    measured load of 0.5 ms saves 1.5 ms. Without a load column nothing is measured."""
    run = read_run(write_run(tmp_path / "r", requests="input_tokens,hit_l3,load_ms\n2,1,1.0\n3,2,0.5\n"))
    tier = Tier("l3", 1e6, 5e-4)
    h = analyse_run_hits(PIPED, [tier], run.hits, block_tokens=1)
    assert h["requests_with_loaded_hits"] == 2 and h["loaded_tokens"]["p50"] == 1.5
    assert h["tiers"]["l3"]["margin_s"] == {"p50": 0.0, "p99": 0.0} and h["tiers"]["l3"]["wins_fraction"] == 0.0
    assert h["wins_fraction"] == 0.5 and h["ttft_saved_s"]["p50"] == pytest.approx(0.75e-3)
    bare = read_run(write_run(tmp_path / "b", requests="input_tokens,hit_l3\n2,1\n0,1\n")).hits
    h = analyse_run_hits(PIPED, [tier], bare, block_tokens=1)
    assert h["requests_with_loaded_hits"] == 1 and "measured_load_s" not in h and "wins_fraction" not in h


# --- a trace's reusable prefixes -------------------------------------------------------------------------------
def _trace(path, rows):
    path.write_text("".join(json.dumps({"timestamp": i, "input_length": n, "output_length": 1, "hash_ids": ids})
                            + "\n" for i, (n, ids) in enumerate(rows)))
    return path


def test_trace_prefixes_pipelined_by_hand(tmp_path):
    """512-token blocks, batches of 4 requests. r1 reuses blocks 1, 2 of r0 (1,024 tokens) with a 76-token
    suffix; r2's one-token prompt reuses block 1 but computes its only token (0); r3's two tokens reuse 1 token;
    r4 reuses block 1 twice (1,024 tokens, suffix 1); r5's first block is new; r6 reuses block 2, then meets
    block 6 twice (new, so 512 tokens, suffix 588); r7 is empty (the last request of its batch).
    Tier t (10 MB/s, 1 ms): r1 l = 51.2 ms, c = 38 ms: exposed 1 + 51.2 + 13.2 = 65.4 ms, saved 1,024 ms;
      r3 l = 0.05 ms, c = 0.5 ms: exposed 1.05 ms, saved 1 ms: loses; r4: l 51.2 ms, c 0.5 ms,
      exposed 1 + 51.2 + 50.7 = 102.9 ms, saved 1,024 ms; r6: l 25.6 ms, c 294 ms: exposed 26.6 ms, saved 512.
    Tier tie (1 MB/s, 0.5 ms): r3 exposed 0.5 + 0.5 + 0 = 1 ms = saved: a tie, not a win; r1: l = 512 ms,
      exposed 0.5 + 512 + 474 = 986.5 ms: +37.5 ms; r4: l 512 ms, exposed 0.5 + 512 + 511.5 = 1,024 ms: a tie;
      r6: l 256 ms, hidden: exposed 256.5 ms, +255.5 ms."""
    f = _trace(tmp_path / "t.jsonl", [(1024, [1, 2]), (1100, [1, 2, 3]), (1, [1]), (2, [1]), (1025, [1, 1, 5]),
                                      (600, [4, 2]), (1100, [2, 6, 6]), (0, [])])
    pre = trace_prefixes(f, batch_requests=4)
    assert pre.hit_tokens.tolist() == [0, 1024, 0, 1, 1024, 0, 512, 0]
    out = analyse_trace_prefixes(PIPED, [Tier("t", 1e7, 1e-3), Tier("tie", 1e6, 5e-4)], pre)
    assert out["requests"] == 8 and out["requests_with_prefix"] == 4
    t, tie = out["tiers"]["t"], out["tiers"]["tie"]
    m = np.array([1024e-3 - 65.4e-3, -0.05e-3, 1024e-3 - 102.9e-3, 512e-3 - 26.6e-3])
    assert t["wins_fraction"] == pytest.approx(3 / 4)
    assert t["margin_s"]["p50"] == pytest.approx(np.percentile(m, 50))
    assert t["margin_s"]["p99"] == pytest.approx(np.percentile(m, 99))
    assert t["ttft_saved_s_if_best_choice"]["p50"] == pytest.approx(np.percentile(np.maximum(m, 0), 50))
    assert tie["wins_fraction"] == pytest.approx(1 / 2)
    assert tie["margin_s"]["p50"] == pytest.approx(np.percentile([37.5e-3, 0.0, 0.0, 255.5e-3], 50))
    none = trace_prefixes(_trace(tmp_path / "n.jsonl", [(512, [1]), (512, [2])]))
    out = analyse_trace_prefixes(PIPED, [Tier("t", 1e7, 1e-3)], none)
    assert out["requests_with_prefix"] == 0 and out["tiers"]["t"]["wins_fraction"] is None
    assert out["tiers"]["t"]["margin_s"] == {"p50": None, "p99": None}
