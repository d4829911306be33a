"""The load-vs-recompute inequality on hand-computed cases, and reading a replay run's measurements."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from kvbench.analysis.recompute import (Inequality, Tier, analyse_run_hits, analyse_tiers, fit_tier_from_requests,
                                        parse_tier, read_run)
from kvbench.compute.fit import QuadraticFit
from kvbench.compute.profile import ComputeProfile, rate_profile
from kvbench.errors import SpecError, UsageError


def _prof(a=0.0, b=1e-4, c=0.0) -> ComputeProfile:
    return ComputeProfile(name="p", kind="published", model="m", device="d", dtype="", fit=QuadraticFit(a, b, c),
                          reference_tokens=1000, source="test")


def test_linear_break_even_by_hand():
    # recompute 10k tok/s (1e-4 s/token); KV 1000 B/token at 100 MB/s = 1e-5 s/token; 1 ms first byte.
    # margin(n) = 1e-4 n - (1e-3 + 1e-5 n) > 0  <=>  n > 1e-3 / 9e-5 = 11.1  ->  n* = 12
    ineq = Inequality(rate_profile(10_000), bytes_per_token=1000, layers=10)
    tier = Tier("t", 100e6, 1e-3)
    assert ineq.break_even(tier) == 12
    assert float(ineq.margin(tier, 12)) > 0 > float(ineq.margin(tier, 11))
    assert float(ineq.margin(tier, 1000)) == pytest.approx(0.1 - (1e-3 + 0.01))
    assert ineq.win_ranges(tier, max_tokens=5000) == [(12, 5000)]


def test_fixed_overhead_is_not_saved_by_loading():
    # a = 50 ms is paid whether or not the prefix is loaded: it must not make loading look better.
    with_a, without_a = Inequality(_prof(a=0.05), 1000, 10), Inequality(_prof(a=0.0), 1000, 10)
    tier = Tier("t", 100e6, 1e-3)
    assert with_a.break_even(tier) == without_a.break_even(tier) == 12
    assert float(with_a.recompute_saved(0)) == 0.0


def test_a_tier_that_never_wins():
    # 5 MB/s: loading costs 2e-4 s/token, recompute 1e-4 s/token: never, at any length
    ineq = Inequality(rate_profile(10_000), bytes_per_token=1000, layers=10)
    slow = Tier("slow", 5e6, 0.0)
    assert ineq.break_even(slow) is None and ineq.win_ranges(slow) == []
    out = analyse_tiers(ineq, [slow], lengths=[100, 1000])
    assert out["slow"]["break_even_tokens"] is None
    assert out["slow"]["verdict"].startswith("slow (5 MB/s, 0 ns): RECOMPUTE: loading never wins")
    # bandwidth needed to break even at the 1000-token reference: 1000*1000 B / 0.1 s = 10 MB/s
    assert out["slow"]["bandwidth_needed_at_reference"] == pytest.approx(10e6)
    assert "10 MB/s" in out["slow"]["verdict"]
    # a latency above the whole recompute time can never be bought back by bandwidth
    assert ineq.bandwidth_needed(Tier("far", 1e12, 1.0), 1000) is None


def test_quadratic_profile_closed_form():
    # c n^2 + (b - k) n - t = 0 with b = 1e-5, k = bpt/BW = 2e-5 (loading slower per token), c = 1e-9, t = 1 ms:
    # the attention term makes recompute lose eventually: n* = ceil(((k-b) + sqrt((k-b)^2 + 4 c t)) / (2c))
    b, c, k, t = 1e-5, 1e-9, 2e-5, 1e-3
    ineq = Inequality(_prof(b=b, c=c), bytes_per_token=2000, layers=32)
    tier = Tier("t", 2000 / k, t)
    root = ((k - b) + math.sqrt((k - b) ** 2 + 4 * c * t)) / (2 * c)
    assert ineq.break_even(tier) == math.ceil(root)


def test_pipelining_hides_all_but_one_layer_when_compute_dominates():
    ineq = Inequality(rate_profile(10_000), bytes_per_token=1000, layers=10, pipelined=True)
    tier = Tier("t", 1e6, 2e-3)  # 1e-3 s/token load, 10x slower than recompute
    # n = 100: load 0.1 s = 10 ms per layer; suffix 2000 tokens: 0.2 s compute = 20 ms per layer > load
    assert float(ineq.load_exposed(tier, 100, suffix=2000)) == pytest.approx(2e-3 + 0.01)
    # nothing to overlap: identical to loading before compute
    plain = Inequality(rate_profile(10_000), 1000, 10)
    assert float(ineq.load_exposed(tier, 100, 0)) == pytest.approx(float(plain.load_exposed(tier, 100)))
    # load 30 ms per layer vs 20 ms compute: exposed = t + l + 9 * (l - c)
    assert float(ineq.load_exposed(tier, 300, suffix=2000)) == pytest.approx(2e-3 + 0.03 + 9 * 0.01)


def test_pipelining_can_make_a_slow_tier_win_a_middle_range():
    # load 5e-4 s/token (5x slower than recompute) with a 2000-token suffix (20 ms compute per layer):
    # hidden while 5e-5 n <= 0.02 (n <= 400): exposed 2.1e-3 + 5e-5 n < 1e-4 n  <=>  n >= 43;
    # beyond: exposed 2.1e-3 + 5e-4 n - 0.18 < 1e-4 n  <=>  n <= 444.  Without pipelining it never wins.
    ineq = Inequality(rate_profile(10_000), bytes_per_token=1000, layers=10, pipelined=True)
    tier = Tier("t", 2e6, 2.1e-3)
    assert ineq.win_ranges(tier, suffix=2000, max_tokens=100_000) == [(43, 444)]
    assert ineq.break_even(tier, suffix=2000, max_tokens=100_000) is None
    assert Inequality(rate_profile(10_000), 1000, 10).win_ranges(tier, max_tokens=100_000) == []
    out = analyse_tiers(ineq, [tier], lengths=[100], suffix=2000, max_tokens=100_000)
    assert "MIXED" in out["t"]["verdict"]


@pytest.mark.parametrize("text", ["fast", "fast=10GB/s", "fast=10GB/s,", "=1GB/s,1ms", "f=10GB,1ms", "f=10GB/s,1 ms",
                                  "f=0GB/s,1ms"])
def test_bad_tier_specs(text):
    with pytest.raises(SpecError) as e:
        parse_tier(text)
    assert "\n" not in str(e.value)


def test_parse_tier_units():
    t = parse_tier("l3=6.5GB/s,90us")
    assert (t.name, t.bandwidth_bytes_per_s, t.latency_s) == ("l3", 6.5e9, pytest.approx(90e-6))


# --- replay runs ------------------------------------------------------------------------------------------
def write_run(root, *, tiers=None, requests=None, block_tokens=16, model="tiny-gqa"):
    root.mkdir(parents=True, exist_ok=True)
    tiers = tiers if tiers is not None else {
        "l1": {"hit_ratio": 0.1, "read_bytes": 0},
        "l2": {"hit_ratio": 0.3, "read_bw_bytes_per_s": 20e9, "read_lat_us": {"p50": 4.0, "p99": 20.0}},
        "l3": {"hit_ratio": 0.2, "read_bw_bytes_per_s": 1e9, "read_lat_us": {"p50": 100.0, "p99": 900.0}},
    }
    (root / "summary.json").write_text(json.dumps({"kind": "replay-kv", "status": "complete", "run_dir": str(root),
                                                   "tiers": tiers}))
    (root / "run.json").write_text(json.dumps({"config": {"model": model, "block_tokens": block_tokens}}))
    if requests is not None:
        (root / "requests.csv").write_text(requests)
    return root


REQUESTS = """arrival_s,input_tokens,hit_blocks_l1,hit_blocks_l2,hit_blocks_l3,load_time_us
0.0,100,0,0,0,0
0.1,100,0,2,0,50
0.2,100,0,4,0,400000
0.3,100,2,0,2,30
0.4,100,0,0,0,0
"""


def test_read_run_and_hit_analysis(tmp_path):
    run = read_run(write_run(tmp_path / "r", requests=REQUESTS))
    assert [t.name for t in run.tiers] == ["l2", "l3"]  # l1 has no read measurements
    assert run.tiers[1].bandwidth_bytes_per_s == 1e9 and run.tiers[1].latency_s == pytest.approx(1e-4)
    assert (run.model, run.block_tokens) == ("tiny-gqa", 16)
    assert any("l1" in n for n in run.notes)
    # recompute 1e-4 s/token: 32 tokens saved 3.2 ms vs 50 us loaded (win); 64 tokens 6.4 ms vs 400 ms (loss);
    # 32 loaded on top of 32 free tokens: 3.2 ms vs 30 us (win)
    ineq = Inequality(rate_profile(10_000), bytes_per_token=1000, layers=2)
    h = analyse_run_hits(ineq, run.tiers, run.hits, run.block_tokens)
    assert h["requests"] == 5 and h["requests_with_loaded_hits"] == 3
    assert h["wins_fraction"] == pytest.approx(2 / 3)
    saved = np.array([3.2e-3 - 50e-6, 6.4e-3 - 0.4, 3.2e-3 - 30e-6])
    assert h["ttft_saved_s"]["p50"] == pytest.approx(np.percentile(saved, 50))
    assert h["ttft_saved_s"]["p99"] == pytest.approx(np.percentile(saved, 99))
    assert h["tiers"]["l2"]["hit_requests"] == 2 and h["tiers"]["l3"]["hit_requests"] == 1


def test_hits_are_capped_below_the_prompt(tmp_path):
    req = "input_tokens,hit_blocks_l3,load_time_ms\n32,2,1\n"  # 2 blocks = 32 tokens = the whole prompt
    run = read_run(write_run(tmp_path / "r", requests=req))
    h = analyse_run_hits(Inequality(rate_profile(10_000), 1000, 2), run.tiers, run.hits, 16)
    assert h["loaded_tokens"]["p50"] == 31  # the last token is always computed


def test_tier_fitted_from_single_tier_requests(tmp_path):
    blocks = np.arange(1, 21)
    load_us = 80 + blocks * 16 * 1000 / 2e9 * 1e6  # 80 us + bytes / 2 GB/s, block = 16 tokens * 1000 B
    rows = "\n".join(f"100,{b},0,{t}" for b, t in zip(blocks, load_us))
    run = read_run(write_run(tmp_path / "r", requests="input_tokens,hit_blocks_l3,hit_blocks_l2,load_time_us\n" + rows))
    t = fit_tier_from_requests("l3", run.hits, block_bytes=16 * 1000)
    assert t.bandwidth_bytes_per_s == pytest.approx(2e9, rel=1e-6) and t.latency_s == pytest.approx(80e-6, rel=1e-6)
    assert fit_tier_from_requests("l2", run.hits, block_bytes=16000) is None  # no l2-only requests


def test_run_without_tier_measurements_is_an_error(tmp_path):
    root = write_run(tmp_path / "dry", tiers={"l1": {"hit_ratio": 0.5}, "l3": {"hit_ratio": 0.2, "read_bytes": 0}})
    with pytest.raises(SpecError) as e:
        read_run(root)
    assert "no tier has read measurements" in str(e.value) and str(root) in str(e.value)
    with pytest.raises(UsageError, match="not a kvbench run folder"):
        read_run(tmp_path)


# The columns `kvbench replay kv` writes (kvbench/replay/kv.py): per-tier hits and load times, NaN when none.
REPLAY_REQUESTS = """request,arrival_s,blocks,hit_blocks,hit_l1,hit_l2,hit_l3,hit_l4,produced,load_ms,l2_load_ms,l3_load_ms,l4_load_ms
0,0.0,4,0,0,0,0,0,4,,,,
1,0.1,4,3,1,2,0,0,1,0.0100,0.0100,,
2,0.2,4,3,0,0,3,0,1,0.5000,,0.5000,
3,0.3,4,4,0,0,4,0,0,0.6000,,0.6000,
"""


def test_replay_kv_requests_format(tmp_path):
    root = write_run(tmp_path / "r", requests=REPLAY_REQUESTS)
    run = read_run(root)
    assert set(run.hits.hit_blocks) == {"l1", "l2", "l3", "l4"}  # the total hit_blocks column is not a tier
    assert run.hits.tier_load_s["l3"][2] == pytest.approx(0.5e-3) and np.isnan(run.hits.load_s[0])
    ineq = Inequality(rate_profile(10_000), bytes_per_token=1000, layers=2)
    h = analyse_run_hits(ineq, run.tiers, run.hits, block_tokens=16)
    # request 1: 32 tokens loaded on top of 16 free (l1) -> 3.2 ms recompute vs 10 us load
    # request 2: 48 tokens -> 4.8 ms vs 0.5 ms; request 3: 4 blocks = whole prompt, capped at 63 -> 6.3 ms vs 0.6 ms
    assert h["requests_with_loaded_hits"] == 3 and h["wins_fraction"] == 1.0
    assert h["loaded_tokens"]["p50"] == 48
    saved = np.array([3.2e-3 - 1e-5, 4.8e-3 - 5e-4, 6.3e-3 - 6e-4])
    assert h["ttft_saved_s"]["p50"] == pytest.approx(np.median(saved))


def test_tier_fitted_from_its_own_load_column(tmp_path):
    blocks = np.arange(1, 11)
    l3_ms = (100e-6 + blocks * 16_000 / 4e9) * 1e3  # 100 us + bytes / 4 GB/s
    rows = "\n".join(f"{b + 2},{b},1,{t:.6f}" for b, t in zip(blocks, l3_ms))
    run = read_run(write_run(tmp_path / "r", requests="blocks,hit_l3,hit_l2,l3_load_ms\n" + rows))
    t = fit_tier_from_requests("l3", run.hits, block_bytes=16_000)  # mixed l2+l3 requests still count
    assert t.bandwidth_bytes_per_s == pytest.approx(4e9, rel=1e-3) and t.latency_s == pytest.approx(100e-6, rel=1e-3)
    assert "l3's load times" in t.source


def test_dry_run_has_no_tier_measurements(tmp_path):
    root = write_run(tmp_path / "dry")
    summary = json.loads((root / "summary.json").read_text())
    (root / "summary.json").write_text(json.dumps({**summary, "dry_run": True}))
    with pytest.raises(SpecError, match="dry-run"):
        read_run(root)


def _reference_prefixes(trace):
    seen, out = set(), []
    for r in range(trace.n_requests):
        ks = trace.keys[trace.offsets[r]:trace.offsets[r + 1]].tolist()
        lead = 0
        while lead < len(ks) and ks[lead] in seen:
            lead += 1
        out.append(min(lead * trace.block_tokens, max(int(trace.input_tokens[r]) - 1, 0)))
        seen.update(ks)
    return np.array(out)


@pytest.mark.parametrize("batch", [65536, 7])
def test_trace_prefixes_match_a_set_reference(batch):
    from kvbench.analysis.recompute import trace_prefixes
    from kvbench.stream.traces import read_trace, resolve_trace
    tr = read_trace(resolve_trace("mooncake-sample"))
    pre = trace_prefixes("mooncake-sample", batch_requests=batch)
    ref = _reference_prefixes(tr)
    assert (ref > 0).sum() > 10  # the sample does reuse prefixes
    np.testing.assert_array_equal(pre.hit_tokens, ref)


def test_trace_prefixes_by_hand(tmp_path):
    from kvbench.analysis.recompute import analyse_trace_prefixes, trace_prefixes
    f = tmp_path / "t.jsonl"  # mooncake format, 512-token blocks, ids already prefix-chained
    f.write_text("\n".join(json.dumps(r) for r in [
        {"timestamp": 0, "input_length": 1500, "output_length": 1, "hash_ids": [1, 2, 3]},
        {"timestamp": 1, "input_length": 2000, "output_length": 1, "hash_ids": [1, 2, 4, 5]},
        {"timestamp": 2, "input_length": 1024, "output_length": 1, "hash_ids": [1, 2]},   # whole prompt seen
        {"timestamp": 3, "input_length": 900, "output_length": 1, "hash_ids": [9, 2]},    # leading block unseen
    ]) + "\n")
    pre = trace_prefixes(f, batch_requests=2)
    assert pre.hit_tokens.tolist() == [0, 1024, 1023, 0]
    out = analyse_trace_prefixes(Inequality(rate_profile(10_000), 1000, 2), [Tier("t", 100e6, 1e-3)], pre)
    assert out["requests_with_prefix"] == 2 and out["tiers"]["t"]["wins_fraction"] == 1.0


def _two_layer(first: str):
    from kvbench.spec.models import model_from_dict
    # 2 layers of 1 KV head x 8 dims in bf16: 2 x 1 x 8 x 2 = 32 B per token each; one keeps a 4-token window
    groups = [{"kind": "sliding", "count": 1, "window": 4}, {"kind": "attention", "count": 1}]
    return model_from_dict({"attention": "gqa", "layers": 2, "hidden_size": 16, "num_heads": 2, "kv_heads": 1,
                            "head_dim": 8, "vocab_size": 10, "intermediate_size": 16,
                            "kv_layers": groups if first == "sliding" else groups[::-1]}, name="two")


@pytest.mark.parametrize("first,exposed", [("sliding", 0.004 + (0.1 - 0.05)), ("attention", 0.1 + 0.0)])
def test_pipelined_layer_groups_by_hand(first, exposed):
    # n = 100 at 32 kB/s: the window layer loads 4 x 32 B = 4 ms, the full layer 100 x 32 B = 100 ms; a 1,000-token
    # suffix at 10k tok/s computes 50 ms per layer. Layer 0's load is exposed whole, layer 1's beyond 50 ms.
    m = _two_layer(first)
    tier = Tier("t", 32e3, 0.0)
    piped = Inequality(rate_profile(10_000), m.bytes_per_token, m.layers, pipelined=True, kv=m)
    plain = Inequality(rate_profile(10_000), m.bytes_per_token, m.layers, kv=m)
    assert float(piped.load_exposed(tier, 100, suffix=1000)) == pytest.approx(exposed)
    assert float(plain.load_exposed(tier, 100)) == pytest.approx(0.104)
    # the bandwidth needed, pipelined, is where the margin crosses zero
    need = piped.bandwidth_needed(tier, 100, suffix=1000)
    up, down = Tier("u", need * (1 + 1e-6), 0.0), Tier("d", need * (1 - 1e-6), 0.0)
    assert float(piped.margin(up, 100, 1000)) > 0 >= float(piped.margin(down, 100, 1000))


def test_break_even_is_the_start_of_the_last_winning_range():
    """Pipelined, with an attention term: loading wins a middle range (hidden behind the suffix's compute),
    loses, then wins again from n* on (recompute's c n^2 outgrows the exposed load). By hand, b = 1e-4,
    c = 1e-8, k = 5e-4 s/token load, L = 10, suffix s = 2000, first byte 2.1 ms:
      hidden while k n <= b s + c s^2 + 2 c s n  <=>  n <= 0.24 / 4.6e-4 = 521.7; there loading wins when
        c n^2 + (b - k/L) n - 2.1e-3 > 0  <=>  n > 41.65;
      beyond, exposed = 2.1e-3 + k n - 0.9 (b s + c s^2 + 2 c s n), so loading wins when
        c n^2 - 3.64e-4 n + 0.2139 > 0  <=>  n < 597.44 or n > 35,802.56.
    Win ranges [42, 597] and [35,803, max]; n* = 35,803 (the first range does not reach max_tokens)."""
    b, c, k, L, s, t = 1e-4, 1e-8, 5e-4, 10, 2000, 2.1e-3
    ineq = Inequality(_prof(b=b, c=c), bytes_per_token=1000, layers=L, pipelined=True)
    tier = Tier("t", 1000 / k, t)
    assert ineq.win_ranges(tier, suffix=s, max_tokens=100_000) == [(42, 597), (35803, 100_000)]
    assert ineq.break_even(tier, suffix=s, max_tokens=100_000) == 35803
    out = analyse_tiers(ineq, [tier], lengths=[500, 1000, 50_000], suffix=s, max_tokens=100_000)["t"]
    assert out["break_even_tokens"] == 35803 and out["win_ranges"] == [[42, 597], [35803, 100_000]]
    assert out["margin_s"]["500"] > 0 > out["margin_s"]["1000"] and out["margin_s"]["50000"] > 0
    assert "LOAD for prefixes >= 35,803 tokens" in out["verdict"]
    # up to 30,000 tokens only the middle range exists: no n*, a MIXED verdict naming it
    assert ineq.break_even(tier, suffix=s, max_tokens=30_000) is None
    mixed = analyse_tiers(ineq, [tier], lengths=[500], suffix=s, max_tokens=30_000)["t"]["verdict"]
    assert "MIXED: loading wins only for 42-597 tokens" in mixed


def test_defaults_by_hand():
    """Defaults: up to 2^20 tokens, not pipelined (the suffix is then ignored), no suffix."""
    tier = Tier("t", 100e6, 1e-3)
    plain = Inequality(rate_profile(10_000), bytes_per_token=1000, layers=10)
    assert plain.win_ranges(tier) == [(12, 1 << 20)] and plain.break_even(tier) == 12
    assert float(plain.load_exposed(tier, 100, suffix=2000)) == pytest.approx(1e-3 + 100 * 1000 / 100e6)
    piped = Inequality(rate_profile(10_000), bytes_per_token=1000, layers=10, pipelined=True)
    # no suffix: nothing to overlap, the same as loading before compute
    assert float(piped.load_exposed(tier, 100)) == pytest.approx(float(plain.load_exposed(tier, 100)))
    assert float(piped.margin(tier, 100)) == pytest.approx(float(plain.margin(tier, 100)))
    assert piped.win_ranges(tier, max_tokens=5000) == [(12, 5000)]


def test_a_tier_that_wins_from_one_token():
    # no first-byte latency and a fast link: loading 1 token (1e-6 s) beats recomputing it (1e-4 s)
    ineq = Inequality(rate_profile(10_000), bytes_per_token=1000, layers=10)
    assert ineq.win_ranges(Tier("fast", 1e9, 0.0), max_tokens=5000) == [(1, 5000)]
    assert ineq.break_even(Tier("fast", 1e9, 0.0), max_tokens=5000) == 1


def test_key_sampled_run_is_scaled_to_full_size(tmp_path):
    """A replay at --sample-keys 0.25: hits per tier / 0.25, capped at the request's full block count (scaled
    down proportionally), rounded; full-size prompt length and load time come from full_blocks and
    full_load_ms_est. Row 2: 3 + 1 sampled hits -> 12 + 4 = 16 > 10 full blocks -> x 10/16 -> 7.5, 2.5 ->
    8, 3 (round half up)."""
    root = write_run(tmp_path / "s", requests=(
        "request,arrival_s,blocks,hit_l2,hit_l3,load_ms,l2_load_ms,l3_load_ms,full_blocks,full_load_ms_est\n"
        "0,0.0,2,1,0,0.5,0.5,,8,2.0\n"
        "1,0.1,4,3,1,1.5,0.4,1.1,10,6.0\n"))
    summary = json.loads((root / "summary.json").read_text())
    (root / "summary.json").write_text(json.dumps({**summary, "sample_rate": 0.25}))
    run = read_run(root)
    h = run.hits
    assert h.sample_rate == 0.25 and any("key-sampled" in n for n in run.notes)
    assert h.hit_blocks["l2"].tolist() == [1, 3] and h.tier_load_s["l3"][1] == pytest.approx(1.1e-3)
    f = h.full_size()
    assert f.hit_blocks["l2"].tolist() == [4, 8] and f.hit_blocks["l3"].tolist() == [0, 3]
    assert f.blocks.tolist() == [8, 10] and f.load_s.tolist() == pytest.approx([2e-3, 6e-3])
    assert f.sample_rate is None and f.full_size() is f and f.tier_load_s == {}
    # no sample_rate in the summary: the full_* columns are not used, nothing is scaled
    (root / "summary.json").write_text(json.dumps(summary))
    plain = read_run(root)
    assert plain.hits.sample_rate is None and not any("key-sampled" in n for n in plain.notes)
    assert plain.hits.full_size() is plain.hits
    from dataclasses import replace
    odd = replace(h, full_blocks=None)                          # a rate without full sizes: left as measured
    assert odd.full_size() is odd


def test_curve_tokens_by_hand():
    from kvbench.analysis.recompute import curve_tokens

    assert curve_tokens(100, points=5).tolist() == [1, 3, 10, 32, 100]      # 10^(0, .5, 1, 1.5, 2) rounded
    assert curve_tokens(1).tolist() == [1, 2]                                # at least 1..2
