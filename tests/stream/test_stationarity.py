"""Stationarity of a trace (kvbench.stream.stationarity): the Mann-Kendall test and Sen's slope against hand
arithmetic, per-window series against a plain-Python reference on hand-made stationary and trending traces,
the shipped mooncake-synthetic trace's measured series, and ``kvbench trace stats``'s verdict and errors."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from kvbench.cli import main
from kvbench.errors import UsageError
from kvbench.stream.stationarity import mann_kendall, sen_slope, stationarity, stationary_suffix
from kvbench.stream.traces import Trace
from tests.conftest import make_trace

pytestmark = pytest.mark.timeout(300)


def reference_series(trace: Trace, windows: int):
    """Per window (equal spans from the first to the last arrival; the last arrival in the last window), in plain
    Python: requests, new-block share (never referenced before), 1 - distinct / references."""
    t0, t1 = float(trace.timestamp_s[0]), float(trace.timestamp_s[-1])
    width = (t1 - t0) / windows
    seen, reqs, refs, new, keys = set(), [0] * windows, [0] * windows, [0] * windows, [set() for _ in range(windows)]
    for r in range(trace.n_requests):
        w = min(int((float(trace.timestamp_s[r]) - t0) / width), windows - 1)
        reqs[w] += 1
        for k in trace.keys[trace.offsets[r]:trace.offsets[r + 1]].tolist():
            refs[w] += 1
            new[w] += k not in seen
            seen.add(k)
            keys[w].add(k)
    return reqs, [n / f for n, f in zip(new, refs)], [1 - len(k) / f for k, f in zip(keys, refs)]


def times_100():
    """Arrivals at 0, 0.5, 1.5, .., 99.5 and 100 s: ten windows of 10 s, no arrival on an inner edge."""
    return [0.0] + [i + 0.5 for i in range(100)] + [100.0]


def stationary_trace() -> Trace:
    # every request: the shared root block 0 and one block of its own; every 2nd request also returns to the
    # previous request's own block
    blocks = []
    for i, _ in enumerate(times_100()):
        b = [0, 1000 + i]
        if i % 2 and i > 0:
            b = [0, 1000 + i - 1, 5000 + i]
        blocks.append(b)
    return make_trace(times_100(), blocks)


def trending_trace() -> Trace:
    # in window w (10 s each), request i brings a new block when i % 10 < 10 - w, else it re-reads block 0:
    # the new-block share falls from about 1 to about 0.1 across the trace
    blocks = []
    for i, t in enumerate(times_100()):
        w = min(int(t // 10), 9)
        blocks.append([100 + i] if i % 10 < 10 - w else [0])
    return make_trace(times_100(), blocks)


def test_mann_kendall_by_hand():
    # 1..5: every pair rises, S = 10; var = 5*4*15/18 = 50/3; Z = (S - 1)/sqrt(var)
    s, z, p = mann_kendall(np.array([1.0, 2, 3, 4, 5]))
    assert s == 10 and z == pytest.approx(9 / math.sqrt(50 / 3))
    assert p == pytest.approx(0.02749, abs=2e-5)            # 2 (1 - Phi(2.2045)), from a normal table
    # a tie: [1, 1, 2]: S = 0 + 1 + 1 = 2; var = (3*2*11 - 2*1*9)/18 = 8/3
    s, z, p = mann_kendall(np.array([1.0, 1, 2]))
    assert s == 2 and z == pytest.approx(1 / math.sqrt(8 / 3))
    # falling; NaN windows are dropped; all equal: no trend
    s, z, _ = mann_kendall(np.array([3.0, np.nan, 2, 1]))
    assert s == -3 and z < 0
    assert mann_kendall(np.array([2.0, 2, 2, 2]))[2] == 1.0
    assert mann_kendall(np.array([1.0, 2]))[2] == 1.0


def test_sen_slope_by_hand():
    # pairwise slopes of [0, 2, 1, 3]: 2, 0.5, 1, -1, 0.5, 2 -> median of (-1, .5, .5, 1, 2, 2) = 0.75
    assert sen_slope(np.array([0.0, 2, 1, 3])) == pytest.approx(0.75)
    # a NaN window keeps the others' spacing: [0, nan, 2] has one slope, (2 - 0) / 2
    assert sen_slope(np.array([0.0, np.nan, 2])) == pytest.approx(1.0)


@pytest.mark.parametrize("make", [stationary_trace, trending_trace])
def test_series_match_a_plain_reference(make):
    t = make()
    st = stationarity(t, 10)
    reqs, share, whr = reference_series(t, 10)
    assert list(st.requests) == reqs
    np.testing.assert_allclose(st.new_block_share, share)
    np.testing.assert_allclose(st.window_hit_ratio, whr)
    np.testing.assert_allclose(st.request_rate, np.array(reqs) / 10.0)
    refs = t.n_blocks
    assert st.infinite_hit_ratio == pytest.approx(1 - np.unique(t.keys).size / refs)


def test_verdicts_on_hand_made_traces():
    st = stationarity(stationary_trace(), 10)
    assert st.stationary and st.verdict == "stationary"
    tr = stationarity(trending_trace(), 10)
    assert not tr.stationary
    by = {x.series: x for x in tr.trends}
    assert by["new_block_share"].trends and by["new_block_share"].change < -0.5
    assert not by["request_rate"].trends                      # the arrivals are even
    assert "new_block_share" in tr.verdict
    # no stationary tail either: the share keeps falling through the last half
    assert stationary_suffix(trending_trace(), 10) is None
    assert stationary_suffix(stationary_trace(), 10).start_s == 0.0


def test_a_small_drift_is_not_a_trend():
    # a significant (monotone) but small change of the new-block share: 0.5 -> 0.45 over the trace is below the
    # 0.10 threshold, so the trace is stationary; the same rise scaled x4 is not
    x = np.linspace(0.5, 0.45, 10)
    from kvbench.stream.stationarity import _trend

    small = _trend("new_block_share", x)
    assert small.p < 0.05 and not small.trends
    assert _trend("new_block_share", np.linspace(0.6, 0.4, 10)).trends


def test_errors_name_the_fix():
    with pytest.raises(UsageError, match="at least 3 windows"):
        stationarity(stationary_trace(), 2)
    with pytest.raises(UsageError, match="spans no time"):
        stationarity(make_trace([5.0, 5.0], [[1], [2]]), 10)
    with pytest.raises(UsageError, match="at or after the trace's last arrival"):
        stationarity(stationary_trace(), 10, start_s=100.0)


def test_mooncake_synthetic_is_not_stationary():
    """The shipped trace's new-block share per tenth, as measured for issue 31 (0.95 ... 0.03)."""
    from kvbench.stream.traces import read_trace

    st = stationarity(read_trace("mooncake-synthetic"), 10)
    np.testing.assert_allclose(st.new_block_share, [0.95, 0.79, 0.72, 0.55, 0.47, 0.40, 0.22, 0.13, 0.09, 0.03],
                               atol=0.006)
    assert st.infinite_hit_ratio == pytest.approx(1 - 43_924 / 121_877)     # README: 43,924 of 121,877
    assert not st.stationary and stationary_suffix(read_trace("mooncake-synthetic")) is None


def test_trace_stats_cli(tmp_path):
    path = tmp_path / "t.jsonl"
    t = trending_trace()
    with open(path, "w") as fh:
        for r in range(t.n_requests):
            fh.write(json.dumps({"timestamp": int(t.timestamp_s[r] * 1000), "input_length": 512,
                                 "output_length": 1,
                                 "hash_ids": t.keys[t.offsets[r]:t.offsets[r + 1]].tolist()}) + "\n")
    r = CliRunner().invoke(main, ["trace", "stats", str(path)])
    assert r.exit_code == 0, r.output
    assert "stationarity not stationary: new_block_share" in r.output and "Mann-Kendall" in r.output
    r = CliRunner().invoke(main, ["trace", "stats", str(path), "--windows", "5", "--json"])
    st = json.loads(r.output)["stationarity"]
    assert st["windows"] == 5 and len(st["new_block_share"]) == 5 and st["stationary"] is False
    r = CliRunner().invoke(main, ["trace", "stats", str(path), "--windows", "2"])
    assert r.exit_code != 0 and "at least 3 windows" in r.output and "Traceback" not in r.output


# --- what plan does with it ----------------------------------------------------------------------------------
def _plan(trace, warmup=0.0, deployment="gpus=1,drives=1,drive_capacity=7.68TB,utilization=0.5"):
    from kvbench.analysis.cost import load_prices
    from kvbench.analysis.deployment import parse_deployment
    from kvbench.analysis.plan import PlanOptions, build_plan

    bpt = 100_000
    return build_plan(trace, block_bytes=512 * bpt, prices=load_prices(), tokens_per_s=20_000.0, bytes_per_token=bpt,
                      options=PlanOptions(targets=(0.9,), waf=1.0, sweep=(), write_policies=False, warmup=warmup,
                                          deployment=parse_deployment(deployment) if deployment else None))


def test_plan_caps_and_names_a_trace_that_is_not_stationary():
    t = trending_trace()
    out = _plan(t)
    ceiling = 1 - np.unique(t.keys).size / t.n_blocks          # the whole trace's infinite-cache hit ratio
    dep = out["deployment"]
    assert out["stationarity"]["stationary"] is False
    assert dep["steady_ceiling"] == pytest.approx(ceiling)
    # the floor is set at the steady curve's demand (references after the first arrival / span), the deployment's
    # hit ratio against all references / span: h = 1 - (1 - first request's references / all) x (1 - ceiling)
    first = t.offsets[1] - t.offsets[0]
    assert dep["hit_ratio"] == pytest.approx(1 - (1 - first / t.n_blocks) * (1 - ceiling)) and dep["hit_ratio_capped"]
    # every steady write rate is at least the trace's compulsory one: references/s x (1 - the ceiling)
    demand = (t.n_blocks - first) / (t.timestamp_s[-1] - t.timestamp_s[0]) * 512 * 100_000      # bytes/s
    rows = [r for r in out["capacity_curve"] if r["write_bytes_per_s"] is not None]
    assert rows and all(r["write_bytes_per_s"] >= demand * (1 - ceiling) * (1 - 1e-9) for r in rows)
    # the rate follows the capped hit ratio: rate x missed tokens per request = U P G
    assert dep["requests_per_s"] * 512 * (t.n_blocks / t.n_requests) * (1 - dep["hit_ratio"]) == pytest.approx(10_000.0)
    note = out["stationarity"]["note"]
    assert note.startswith("The trace is not stationary") and "uncapped" in note and "trace fit" in note
    assert note in out["answer"]["sentences"] and note in out["warnings"]
    assert out["stationarity"]["suffix"] == {"tried": [0.25, 0.5], "found": None}    # trends to its end


def test_plan_names_the_stationary_tail_of_a_trace_that_settles():
    t = _falling_then_flat(0.5)
    out = _plan(t)
    assert out["stationarity"]["suffix"]["found"]["start_s"] == 50.0
    assert out["stationarity"]["note"].endswith(
        "or its stationary last 50% (kvbench run|plan ... --warmup 50s: the requests before it warm the cache).")


def test_a_plan_warmed_up_to_the_stationary_tail_sizes_on_it_and_says_so():
    """--warmup 50s on the trace that falls over its first half: the window measured is the flat last half (new
    share 0.3, so a steady ceiling of 0.7, where the whole trace's infinite-cache ratio is lower), stationary, and
    the note says the plan was sized on it; a warm-up short of the tail leaves a window that still trends."""
    from kvbench.analysis.curves.profile import WarmupTime, warmup_fraction

    t = _falling_then_flat(0.5)
    whole = stationarity(t, 10)
    out = _plan(t, warmup=warmup_fraction(t, WarmupTime(50.0)))
    st = out["stationarity"]
    ts = np.asarray(t.timestamp_s)
    x = float(ts[ts >= 50.0][0])                  # the first request measured
    share = (ts[-1] - x) / (ts[-1] - ts[0])
    assert st["stationary"] is True and st["start_s"] == x
    assert st["measured_from"]["start_s"] == x and st["measured_from"]["whole_trace_stationary"] is False
    assert out["deployment"]["steady_ceiling"] == pytest.approx(0.7) and whole.steady_ceiling < 0.6
    assert out["deployment"]["hit_ratio"] <= 0.7 + 1e-9
    # the deployment's hit ratio reaches the window's ceiling: capped, said and warned of
    assert out["deployment"]["hit_ratio_capped"] and st["note"] in out["warnings"]
    assert "Steady hit ratios are capped at the stationary window's infinite-cache hit ratio 0.700" in st["note"]
    # no deployment: nothing capped; sized on a stationary window is said, not warned of
    free = _plan(t, warmup=warmup_fraction(t, WarmupTime(50.0)), deployment=None)
    assert free["stationarity"]["note"].startswith("Sized on the requests from")
    assert free["stationarity"]["note"].endswith("where the whole trace is not stationary.")     # nothing capped
    assert free["stationarity"]["note"] not in free["warnings"]
    assert st["note"].startswith(f"Sized on the requests from {x:g} s (the last {share:.0%} of the span; the earlier ones only "
                                 "warm the cache), a stationary window (no trend over 10 windows; kvbench trace "
                                 "stats), where the whole trace is not stationary.")
    short = _plan(t, warmup=warmup_fraction(t, WarmupTime(20.0)))["stationarity"]
    assert short["stationary"] is False
    x = float(ts[ts >= 20.0][0])
    assert short["note"].startswith(f"Sized on the requests from {x:g} s (the last {(ts[-1] - x) / ts[-1]:.0%} of the "
                                    "span; the earlier ones only warm the cache). The window measured is not "
                                    "stationary (")
    assert short["note"].endswith("(kvbench run|plan ... --warmup 50s: the requests before it warm the cache).")


def test_plan_on_a_stationary_trace_caps_at_its_median_window():
    # every pair of requests references 5 blocks, 2 of them new: a steady infinite cache hits 3 of 5
    t = stationary_trace()
    out = _plan(t)
    assert out["stationarity"]["stationary"] is True
    dep = out["deployment"]
    first = t.offsets[1] - t.offsets[0]            # the floor's demand leaves out the first request's references
    assert dep["steady_ceiling"] == pytest.approx(0.6)
    assert dep["hit_ratio"] <= 1 - (1 - first / t.n_blocks) * (1 - 0.6) + 1e-12
    assert not any("not stationary" in s for s in out["answer"]["sentences"])
    note = out["stationarity"]["note"]
    assert note is None or note.startswith("Steady hit ratios are capped at the stationary trace's")


def test_the_default_run_workload_is_stationary_and_shipped():
    """kvbench run's default: an hour of the model fitted to mooncake-synthetic (shipped with its provenance)."""
    from kvbench.cli.run import DEFAULT_TRACE, _trace_path
    from kvbench.spec.presets import workloads_dir
    from kvbench.stream.traces import read_trace

    assert DEFAULT_TRACE.startswith("gen:mooncake-synthetic-fit,")
    text = (workloads_dir() / "classes" / "mooncake-synthetic-fit.toml").read_text()
    assert "bd070915a98fc0ed264d7cfef2ce746002eb3076a695ec31ba2674c0111ec131" in text and "not stationary" in text
    assert _trace_path(DEFAULT_TRACE) == DEFAULT_TRACE
    st = stationarity(read_trace(DEFAULT_TRACE), 10)
    assert st.stationary, st.verdict
    with pytest.raises(UsageError, match="unknown option"):
        _trace_path("gen:mooncake-synthetic-fit,bogus=1")


def test_a_key_sampled_trace_reads_the_same_series_whole_or_compacted():
    """A compacted key sample has dropped the requests left without a sampled block (their times are gone): the
    request series counts the requests holding one, scaled to the whole stream's count, in both forms."""
    from kvbench.stream.sampling import whole
    from kvbench.stream.traces import read_trace

    gen = "gen:chat,duration=1h,rate=5,seed=3,sample=0.05"
    full, comp = read_trace(gen), read_trace(gen, compact=True, batch_requests=3000)
    assert comp.n_requests < full.n_requests                      # the compacted form really dropped requests
    a, b = stationarity(full, 5), stationarity(comp, 5)
    assert a.requests == b.requests and a.request_rate == b.request_rate
    assert a.new_block_share == b.new_block_share
    held = np.asarray(full.blocks_per_request) > 0
    assert sum(a.requests) == pytest.approx(whole(full)["requests"], abs=5)   # rounding, one per window
    ts = np.asarray(full.timestamp_s)[held]
    edges = np.linspace(full.timestamp_s[0], full.timestamp_s[-1], 6)
    by_hand = np.histogram(ts, bins=edges)[0] * whole(full)["requests"] / held.sum()
    np.testing.assert_allclose(a.request_rate, by_hand / np.diff(edges), rtol=1e-12)


def test_the_default_run_workload_is_what_its_stated_command_fits_today(tmp_path, monkeypatch):
    """The shipped default model's header says the fit is deterministic and names its command: refitting with
    that command gives the rest of the file byte for byte. When the fit changes, this fails until the model is
    refitted (and the README's default-run figures rerun), so the default never silently lags the fit."""
    from tests.conftest import REPO

    shipped = (REPO / "workloads" / "classes" / "mooncake-synthetic-fit.toml").read_text()
    header, body = shipped.split("# Workload model fitted by kvbench trace fit", 1)
    assert "trace fit workloads/traces/mooncake-synthetic.jsonl.gz --no-calibrate" in " ".join(
        line.lstrip("# ") for line in header.splitlines())
    monkeypatch.chdir(REPO)
    out = tmp_path / "m.toml"
    r = CliRunner().invoke(main, ["trace", "fit", "workloads/traces/mooncake-synthetic.jsonl.gz", "--no-calibrate",
                                  "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "# Workload model fitted by kvbench trace fit" + body == out.read_text()


def test_trace_fit_names_a_trace_that_is_not_stationary_and_not_a_stationary_one():
    """fit_model tests the source (the same test as trace stats) and, when it fails, warns that its W(C) is its
    window's, not a steady state's, naming the series that trend; a stationary trace gets no such warning."""
    from kvbench.stream.fit import fit_model

    trending = fit_model(trending_trace())
    st = stationarity(trending_trace())
    assert not st.stationary and trending.observed["stationarity"]["stationary"] is False
    assert trending.observed["stationarity"]["verdict"] == st.verdict
    warned = [w for w in trending.warnings if w.startswith("the trace is not stationary (")]
    assert len(warned) == 1 and "new_block_share" in warned[0] and "not a steady state's" in warned[0]
    assert "(not stationary:" not in warned[0]                  # the verdict's own prefix is not repeated
    steady = fit_model(stationary_trace())
    assert steady.observed["stationarity"]["stationary"] is True
    assert not any("not stationary" in w for w in steady.warnings)


def test_the_gen_check_line_says_a_missed_goal_is_on_a_trace_that_is_not_stationary():
    from kvbench.cli.trace_cmds import _gen_lines

    g = {"seeds": 3, "first_seed": 0, "duration_s": 1022.0, "dwpd_error_mean": 0.04, "dwpd_error_max": 0.17,
         "dwpd_error_worst": 0.30, "curve_mae": 0.015, "dwpd_error_of_seed_mean": {"max": 0.16},
         "per_trace": [{"dwpd_error_max": 0.30}, {"dwpd_error_max": 0.17}, {"dwpd_error_max": 0.04}]}
    missed = dict(_gen_lines(g, None, "m.toml", stationary=False))
    assert missed["gen goal"] == ("NOT met (every trace within 5% at every capacity, curve MAE within 0.02); the "
                                  "trace is not stationary (warning below)")
    assert dict(_gen_lines(g, None, "m.toml"))["gen goal"].endswith("NOT met (every trace within 5% at every "
                                                                     "capacity, curve MAE within 0.02)")
    met = dict(g, dwpd_error_worst=0.04, per_trace=[{"dwpd_error_max": 0.04}] * 3)
    assert dict(_gen_lines(met, None, "m.toml", stationary=False))["gen goal"] == (
        "met (every trace within 5% at every capacity, curve MAE within 0.02)")
    assert [label for label, _ in _gen_lines(met, None, "m.toml")] == ["gen check", "gen goal"]


def test_the_new_block_share_is_tested_from_the_second_window_when_the_first_has_no_history():
    """Tested from the trace's first arrival, the first window has no history (every block it touches is new to
    the trace): the share's trend test starts at the second window, the other series at the first; a suffix's
    first window has the history before it and is tested."""
    t = trending_trace()
    st = stationarity(t, 10)
    share, rate, whr = st.trends
    assert share.first_window == 1 and share.values == st.new_block_share[1:]
    assert rate.first_window == whr.first_window == 0 and rate.values == st.request_rate
    assert "new_block_share" in st.verdict and "from the second window" in st.verdict
    later = stationarity(t, 5, start_s=30.0)
    assert later.trends[0].first_window == 0 and later.trends[0].values == later.new_block_share
    assert "new_block_share from the second window when the first has no history" in st.test


def test_the_default_models_hour_whose_only_trend_was_its_cold_first_tenth_is_stationary():
    """Seed 8's hour of the default run's model starts cold: new-block share 0.59 in the first tenth, 0.28-0.40
    after. Tested with its first tenth the share trends (Sen change -0.105, past -0.10), an artefact of the empty
    history; from the second tenth it does not, and no other series trends."""
    from kvbench.stream.stationarity import _trend
    from kvbench.stream.traces import read_trace

    st = stationarity(read_trace("gen:mooncake-synthetic-fit,duration=1h,seed=8"), 10)
    share = np.asarray(st.new_block_share)
    assert share[0] > 0.5 and share[1:].max() < 0.4
    assert _trend("new_block_share", share).trends                  # with the cold first tenth: a "trend"
    assert st.stationary, st.verdict


def test_trend_test_edges_by_hand():
    """The guards and thresholds, each on a series built for it: fewer than 3 points, or all tied, is no
    evidence (S = Z = 0, p = 1); S = 0 is p = 1; a rate rising exactly its threshold (0.2 x the median 5.0 =
    1.0, slope 0.125 over 8 steps) trends, as does a window hit ratio rising 0.15; a significant rise of a rate
    whose median is 0 has no threshold and never trends; p between 0.05 and 0.1 with a large change does not."""
    from kvbench.stream.stationarity import _trend

    assert mann_kendall(np.array([1.0, 2.0])) == (0.0, 0.0, 1.0)
    assert mann_kendall(np.array([2.0, 2.0, 2.0])) == (0.0, 0.0, 1.0)
    s, z, p = mann_kendall(np.array([2.0, 1.0, 1.0, 2.0]))              # pairs: -, -, 0, 0, +, +
    assert (s, z, p) == (0.0, 0.0, 1.0)
    assert sen_slope(np.array([np.nan, 1.0])) == 0.0
    rate = _trend("request_rate", 4.5 + 0.125 * np.arange(9.0))
    assert rate.threshold == 1.0 and rate.change == 1.0 and rate.trends
    assert _trend("window_hit_ratio", np.linspace(0.30, 0.45, 10)).trends
    assert not _trend("request_rate", np.array([0, 0, 0, 0, 0, 0, 1, 2, 3, 4.0])).trends
    x = np.array([0.5, 0.1, 0.45, 0.05, 0.4, 0.5, 0.0, 0.35, 0.02, -0.05])
    t = _trend("new_block_share", x)
    assert 0.05 < t.p < 0.1 and abs(t.change) >= 0.1 and not t.trends


def test_stationarity_accepts_its_smallest_inputs_and_counts_a_single_reference():
    """Three windows (the fewest), two requests at different times; one reference in a window is a share (new:
    1.0), not a missing one; a span starting between the first two arrivals has the first one as history."""
    two = make_trace([0.0, 1.0], [[1], [1]])
    st = stationarity(two, 3)
    assert st.requests == (1, 0, 1) and st.new_block_share[0] == 1.0 and st.new_block_share[2] == 0.0
    three = make_trace([0.0, 5.0, 10.0], [[1], [2], [1]])
    assert stationarity(three, 3).new_block_share == (1.0, 1.0, 0.0)
    assert stationarity(three, 3).window_hit_ratio == (0.0, 0.0, 0.0)
    t = trending_trace()
    assert stationarity(t, 5, start_s=0.25).trends[0].first_window == 0     # 0.0 s arrived before: history


def test_plan_note_by_case():
    from kvbench.stream.stationarity import plan_note

    steady = stationarity(stationary_trace(), 10)
    assert steady.stationary and plan_note(steady, capped=False) is None
    capped = plan_note(steady, capped=True)
    assert capped == f"Steady hit ratios are capped at the stationary trace's infinite-cache hit ratio {steady.steady_ceiling:.3f}."
    assert "(uncapped, the deployment would claim 0.900 at 4.5 requests/s)" in plan_note(
        steady, capped=True, uncapped_hit=0.9, uncapped_rate=4.5)
    drifting = stationarity(trending_trace(), 10)
    note = plan_note(drifting, capped=False)
    assert note.startswith("The trace is not stationary (new_block_share") and note.endswith("(kvbench trace stats).")
    assert "uncapped" not in note and "uncapped" not in plan_note(drifting, capped=True)


def _falling_then_flat(q: float, offset: float = 0.0) -> Trace:
    """times_100's requests (+ ``offset`` s) of 10 blocks each: the share of blocks new to the trace falls
    linearly from 1.0 to 0.3 over the first ``q`` of the span, then stays at 0.3 (the other blocks re-read the
    latest blocks seen)."""
    blocks, nxt, seen = [], 1000, []
    for t in times_100():
        share = 1.0 + (0.3 - 1.0) * min(t / 100.0 / q, 1.0)
        n_new = 10 if not seen else int(round(share * 10))
        own = list(range(nxt, nxt + n_new))
        nxt += n_new
        blocks.append(own + (seen[-(10 - n_new):] if n_new < 10 else []))
        seen += own
    return make_trace([t + offset for t in times_100()], blocks)


def test_the_stationary_suffix_is_the_longest_tail_that_passes():
    """Falling over the first 35% of 100 s: the whole trace trends, its last three quarters (from 25 s) do not
    (from 1,025 s when the trace starts at 1,000 s); falling over the first half: only the last half (from 50 s)
    holds still. A trace with no reference at all
    has an infinite-cache hit ratio of 0, not 1."""
    for q, offset, start in ((0.35, 0.0, 25.0), (0.5, 0.0, 50.0), (0.35, 1000.0, 1025.0)):
        t = _falling_then_flat(q, offset)
        assert not stationarity(t, 10).stationary
        got = stationary_suffix(t, 10)
        assert got is not None and got.start_s == start and got.stationary
    assert stationarity(make_trace([0.0, 1.0], [[], []]), 3).infinite_hit_ratio == 0.0


def test_the_suffix_report_names_the_longest_stationary_tail_or_says_none_holds():
    """Falling over the first half of 100 s (from 0 s and from 1,000 s): the whole trends, the last 75% still
    does, the last half (from 50 s / 1,050 s: 50% of the span) holds still, and its ceiling is its own stationary
    median window's. A trace trending to its end: both tails tried, none found. A stationary trace: nothing cut,
    nothing tried."""
    from kvbench.stream.stationarity import suffix_line, suffix_report

    for offset in (0.0, 1000.0):
        t = _falling_then_flat(0.5, offset)
        st = stationarity(t, 10)
        rep = suffix_report(t, st)
        f = rep["found"]
        assert rep["tried"] == [0.25, 0.5] and f["start_s"] == 50.0 + offset and f["share_of_span"] == 0.5
        tail = stationarity(t, 10, start_s=50.0 + offset)
        assert f["verdict"] == "stationary" and f["steady_ceiling"] == tail.steady_ceiling
        assert suffix_line(rep).startswith(f"its last 50% (from {50.0 + offset:,.4g} s) is stationary (steady ceiling "
                                           f"{tail.steady_ceiling:.3f})")
        assert f"(kvbench run|plan|cluster ... --warmup {50.0 + offset:g}s: the requests before it warm the cache)" \
            in suffix_line(rep)
    trending = trending_trace()
    rep = suffix_report(trending, stationarity(trending, 10))
    assert rep == {"tried": [0.25, 0.5], "found": None}
    assert suffix_line(rep).startswith("neither its last 75% nor its last 50% is stationary: size on a model")
    steady = stationary_trace()
    rep = suffix_report(steady, stationarity(steady, 10))
    assert rep == {"tried": [], "found": None} and suffix_line(rep) is None


def test_the_plan_note_names_a_stationary_tail_and_no_longer_says_no_part_is_steady():
    from kvbench.stream.stationarity import plan_note, suffix_report

    t = _falling_then_flat(0.5)
    st = stationarity(t, 10)
    note = plan_note(st, capped=False, suffix=suffix_report(t, st))
    assert "as a whole it is no steady state" in note and "no part of it" not in note
    assert note.endswith("or its stationary last 50% (kvbench run|plan ... --warmup 50s: the requests before it warm "
                         "the cache).")
    none = plan_note(st, capped=False, suffix={"tried": [0.25, 0.5], "found": None})
    assert "no part of it is a steady state" in none and none.endswith("or a stationary window (kvbench trace stats).")


def test_trace_stats_prints_and_returns_the_suffix():
    """The CLI on the shipped traces: mooncake-sample trends as a whole and over its last 75%, its last half
    (from first arrival + half its span) holds still; mooncake-synthetic has no stationary tail. The line under the
    verdict and ``stationarity.suffix`` in --json."""
    from kvbench.stream.traces import read_trace

    t = read_trace("mooncake-sample")
    ts = t.timestamp_s
    half = float(ts[0] + 0.5 * (ts[-1] - ts[0]))
    assert not stationarity(t, 10, start_s=float(ts[0] + 0.25 * (ts[-1] - ts[0]))).stationary
    assert stationarity(t, 10, start_s=half).stationary
    r = CliRunner().invoke(main, ["trace", "stats", "mooncake-sample"])
    assert r.exit_code == 0, r.output
    assert f"  suffix     its last 50% (from {half:,.4g} s) is stationary" in r.output
    r = CliRunner().invoke(main, ["trace", "stats", "mooncake-sample", "--json"])
    rep = json.loads(r.output)["stationarity"]["suffix"]
    assert rep["tried"] == [0.25, 0.5] and rep["found"]["start_s"] == half
    r = CliRunner().invoke(main, ["trace", "stats", "mooncake-synthetic"])
    assert "  suffix     neither its last 75% nor its last 50% is stationary" in r.output


def test_a_plan_measured_from_a_warm_up_names_only_the_tails_after_it():
    """The tails tried start at a quarter and at half the span (here 25 s and 50 s): after a warm-up to 49.9 s
    only the half is left, after 50 s none (a tail must start after the warm-up's end); on the trace shifted to
    start at 1,000 s the same holds from 1,030 s (the half starts at 1,050 s). The share of the span a window
    covers is taken over the span whatever its length (a 0.5-s trace's last half is 50%)."""
    from kvbench.stream.stationarity import stat_share, suffix_report

    t = _falling_then_flat(0.5)
    st = stationarity(t, 10)
    assert suffix_report(t, st, after_s=49.9)["tried"] == [0.5]
    assert suffix_report(t, st, after_s=49.9)["found"]["start_s"] == 50.0
    assert suffix_report(t, st, after_s=50.0) == {"tried": [], "found": None}
    shifted = _falling_then_flat(0.5, 1000.0)
    rep = suffix_report(shifted, stationarity(shifted, 10), after_s=1030.0)
    assert rep["tried"] == [0.5] and rep["found"]["start_s"] == 1050.0
    assert stat_share(make_trace([0.0, 0.5], [[1], [2]]), 0.25) == 0.5


def test_a_whole_trace_report_says_which_figures_a_trace_that_is_not_stationary_bends():
    """whole_trace_report (cluster's): a stationary trace says nothing; one that falls then settles names its verdict,
    the figures given, the fitted-model remedy and its stationary last half (from 50 s); one that keeps trending
    names no tail; one that spans no time is untested."""
    from kvbench.stream.stationarity import whole_trace_report

    quiet = whole_trace_report(stationary_trace(), "the X")
    assert quiet["stationary"] is True and quiet["note"] is None and quiet["suffix"] is None
    t = _falling_then_flat(0.5)
    r = whole_trace_report(t, "the hit ratios and DWPD")
    st = stationarity(t, 10)
    assert r["stationary"] is False and r["verdict"] == st.verdict and r["windows"] == 10 and r["test"] == st.test
    assert r["suffix"]["start_s"] == 50.0 and r["suffix"]["share_of_span"] == pytest.approx(0.5)
    assert r["note"] == (f"The trace is not stationary ({st.verdict.split(': ', 1)[1]}; 10 windows): the hit ratios "
                         "and DWPD are that window's, not a steady state's; simulate a stationary workload instead: "
                         "a model fitted to it (kvbench trace fit TRACE -o m.toml, then gen:m.toml,duration=1h), or "
                         "its stationary last 50% (from 50 s; --warmup 50s measures it).")
    falling = whole_trace_report(trending_trace(), "the Y")
    assert falling["suffix"] is None and falling["note"].endswith("then gen:m.toml,duration=1h).")
    # measured from a warm-up: the lead names the window; a stationary one says so, one that trends names no tail
    # it already covers
    warm = whole_trace_report(t, "the W", start_s=50.0)
    assert warm["stationary"] is True and warm["note"] == ("Measured from 50 s (the last 50% of the span; the "
                                                           "earlier requests only warm the caches), a stationary "
                                                           "window (no trend over 10 windows; kvbench trace stats).")
    early = whole_trace_report(t, "the W", start_s=20.0)
    assert early["stationary"] is False and early["note"].startswith(
        "Measured from 20 s (the last 80% of the span; the earlier requests only warm the caches). The window "
        "measured is not stationary (")
    assert early["suffix"]["start_s"] == 50.0 and early["note"].endswith("(from 50 s; --warmup 50s measures it).")
    flat = whole_trace_report(make_trace([3.0, 3.0], [[1], [2]]), "the Z")
    assert flat == {"stationary": None, "verdict": "untested: the trace spans no time", "test": st.test, "note": None}
    assert whole_trace_report(make_trace([3.0], [[1]]), "the Z")["stationary"] is None
    # the fewest requests that span time are tested: two, or three whose first two or last two arrive together
    for times in ([0.0, 1.0], [0.0, 0.0, 5.0], [0.0, 5.0, 5.0]):
        r = whole_trace_report(make_trace(times, [[k] for k in range(1, len(times) + 1)]), "the Z")
        assert r["stationary"] is not None and r["windows"] == 10, times
