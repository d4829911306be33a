"""The load-vs-recompute inequality on hand-computed cases, and reading a replay run's measurements."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from kvbench.analysis.recompute import (Inequality, Tier, analyse_run_hits, analyse_tiers, analyse_trace_prefixes,
                                        curve_tokens, fit_tier_from_requests, overall_verdict, parse_tier, read_run,
                                        trace_prefixes, verdict)
from kvbench.compute.fit import QuadraticFit
from kvbench.compute.profile import ComputeProfile, rate_profile
from kvbench.errors import SpecError, UsageError
from tests.conftest import write_mooncake


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
    assert parse_tier(" l3 = 6.5GB/s , 90us ") == t                # spaces around '=' and ',' read alike


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


# --- The load-vs-recompute inequality at its edges, by hand: ties (a margin of exactly 0 is not a win), range ends
# the coarse grid does not hold, the defaults, break-even bandwidths below 1 B/s, the overall verdict over several
# tiers, and a replay run's and a trace's hits under pipelining (where the suffix decides what overlaps).
# 
# Exact ties use numbers whose floating-point arithmetic is exact: recompute at 1,000 tokens/s costs 1e-3 s/token,
# 1,000 B/token at 2 MB/s loads at 5e-4 s/token, sums of equal halves are exact.
GRID = np.unique(np.round(np.geomspace(1, 1 << 20, 4096)).astype(np.int64))   # win_ranges' coarse grid


def _fit_run(tmp_path, rows, header="input_tokens,hit_blocks_l3,hit_blocks_l2,load_time_us"):
    return read_run(write_run(tmp_path / "f", requests=header + "\n" + "\n".join(rows) + "\n")).hits


PIPED = Inequality(rate_profile(1000), bytes_per_token=1000, layers=2, pipelined=True)


def test_any_positive_bandwidth_and_finite_latency_make_a_tier():
    slow = Tier("slow", 0.5, 0.0)                  # half a byte per second is slow, not invalid
    assert float(Inequality(rate_profile(1), 1, 1).load_exposed(slow, 2)) == pytest.approx(4.0)
    for bw, lat in ((0.0, 0.0), (-1.0, 0.0), (math.inf, 0.0), (math.nan, 0.0), (1.0, -1e-9), (1.0, math.inf),
                    (1.0, math.nan)):
        with pytest.raises(SpecError):
            Tier("t", bw, lat)


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
    rows = [(1024, [1, 2]), (1100, [1, 2, 3]), (1, [1]), (2, [1]), (1025, [1, 1, 5]), (600, [4, 2]), (1100, [2, 6, 6]),
            (0, [])]                                # (input tokens, hash ids), one request a millisecond
    f = write_mooncake(tmp_path / "t.jsonl", [(i, ids, n) for i, (n, ids) in enumerate(rows)])
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
    none = trace_prefixes(write_mooncake(tmp_path / "n.jsonl", [(0, [1], 512), (1, [2], 512)]))
    out = analyse_trace_prefixes(PIPED, [Tier("t", 1e7, 1e-3)], none)
    assert out["requests_with_prefix"] == 0 and out["tiers"]["t"]["wins_fraction"] is None
    assert out["tiers"]["t"]["margin_s"] == {"p50": None, "p99": None}


# mutation survivors
def test_analyse_tiers_says_whether_the_first_byte_was_resolved():
    """A fitted tier with no fixed part has an unresolved first byte; a stated 0 and a fitted 80 us are resolved."""
    ineq = Inequality(rate_profile(10_000), bytes_per_token=1000, layers=10)
    out = analyse_tiers(ineq, [Tier("fit0", 1e9, 0.0, fitted=True), Tier("zero", 1e9, 0.0),
                               Tier("fit80", 1e9, 80e-6, fitted=True)], lengths=[100])
    assert [out[k]["latency_resolved"] for k in ("fit0", "zero", "fit80")] == [False, True, True]
    assert [out[k]["first_byte"] for k in ("fit0", "zero", "fit80")] == ["not resolved by the fit", "0 ns", "80 us"]


def test_check_run_on_a_job_folder_says_it_is_not_a_replay_whatever_its_steps_hold(tmp_path):
    """read_run reads the folder alone: a job (kvbench run) is refused as not a replay kv run, without reading the
    step folders it lists (here one that is not a run folder at all)."""
    job = tmp_path / "job"
    (job / "replay").mkdir(parents=True)
    (job / "summary.json").write_text(json.dumps({"kind": "run", "status": "complete", "run_dir": str(job),
                                                  "parts": {"replay": "replay"}}))
    (job / "run.json").write_text(json.dumps({"config": {}}))
    with pytest.raises(UsageError, match="a 'run' run, not a replay kv run"):
        read_run(job)


def test_an_unresolved_latency_is_a_fit_with_no_fixed_part():
    t = parse_tier("l3=2.36GB/s, Unresolved")
    assert (t.bandwidth_bytes_per_s, t.latency_s, t.fitted) == (2.36e9, 0.0, True)
    g = parse_tier("l3=2.36GB/s,0us")                             # a stated 0 is a stated 0
    assert (g.latency_s, g.fitted) == (0.0, False)


def test_a_fitted_tier_says_it_was_fitted_and_a_fallback_does_not(tmp_path):
    fit = _fit_run(tmp_path / "a", [f"100,{b},0,{80 + 8 * b}" for b in (1, 2) * 4])
    assert fit_tier_from_requests("l3", fit, block_bytes=16_000).fitted is True
    few = _fit_run(tmp_path / "b", ["100,1,0,88", "100,2,0,96"])
    assert fit_tier_from_requests("l3", few, block_bytes=16_000, latency_s=5e-5).fitted is False


def test_each_verdict_in_words_by_hand():
    """The verdict line of each kind, written out: the tier's speed, where loading wins, the margin at the
    reference length and, where it does not win, what it would take."""
    t = Tier("l3", 6.5e9, 90e-6)
    assert verdict(t, 4096, [(4096, 1 << 20)], 16384, 0.2, None) == (
        "l3 (6.5 GB/s, 90 us): LOAD for prefixes >= 4,096 tokens, recompute below; at 16,384 tokens loading saves "
        "200 ms")
    assert verdict(t, None, [(12, 300), (5000, 9000)], 16384, -0.05, 8e9) == (
        "l3 (6.5 GB/s, 90 us): MIXED: loading wins only for 12-300, 5,000-9,000 tokens; at 16,384 tokens recomputing "
        "is faster by 50 ms; it would need > 8 GB/s to win at 16,384 tokens")
    assert verdict(t, None, [], 16384, -0.05, None) == (
        "l3 (6.5 GB/s, 90 us): RECOMPUTE: loading never wins up to 1,048,576 tokens; at 16,384 tokens recomputing is "
        "faster by 50 ms; its latency alone exceeds recomputing 16,384 tokens")
    fit0 = Tier("l3", 6.5e9, 0.0, fitted=True)
    assert verdict(fit0, None, [], 1000, -0.05, 8e9, max_tokens=5000, how=", pipelined over 512 suffix tokens") == (
        "l3 (6.5 GB/s, first byte not resolved by the fit, pipelined over 512 suffix tokens): RECOMPUTE: loading never "
        "wins up to 5,000 tokens; at 1,000 tokens recomputing is faster by 50 ms; it would need > 8 GB/s to win at "
        "1,000 tokens")
