"""Workload models: files, presets, generation (deterministic, Mooncake-valid, streamed), fit and gen: traces."""

from __future__ import annotations

import gzip
import json
import math
import tracemalloc
from dataclasses import replace

import numpy as np
import pytest

from kvbench.errors import SpecError, UsageError
from kvbench.stream.fit import fit_model, goodness, ks_distance
from kvbench.stream.stats import prefix_chaining
from kvbench.stream.synth import Generator, parse_gen, write_stream
from kvbench.stream.traces import Trace, iter_trace, read_trace
from kvbench.stream.workload import (Arrivals, Prompts, Sessions, WorkloadModel, load_model_file, model_from_dict,
                                     preset_names, to_toml)
from tests.conftest import REPO, FIXTURES
from datetime import datetime
from datetime import timedelta
from datetime import timezone
from kvbench.stream.synth import intensity

SHARED = REPO.parent / "shared" / "traces"


def _whole(gen: Generator) -> Trace:
    return Trace.concat(list(gen.batches()))


def _small(**kw) -> WorkloadModel:
    """A small multi-turn model with 64-token blocks (fast to generate and fit)."""
    base = WorkloadModel(
        name="small", block_tokens=64,
        arrivals=Arrivals(rate=2.0),
        sessions=Sessions(turns_mean=4.0, think_time_s=20.0, think_sigma=0.8),
        prompts=Prompts(system_prompts=3, system_tokens=300.0, system_sigma=0.2, first_user_tokens=200.0,
                        user_tokens=80.0, output_tokens=120.0))
    return replace(base, **kw)


# --- model files ---------------------------------------------------------------------------------------
def test_model_file_round_trip(tmp_path):
    m = _small(sources=("a", "b"), prompts=replace(_small().prompts, system_prompt_tokens=(100.0, 700.0, 64.0),
                                                   system_prompt_weights=(5.0, 2.0, 1.0)))
    p = tmp_path / "m.toml"
    p.write_text(to_toml(m, {"arrivals.rate": "req/s"}, header="a test"))
    assert load_model_file(p) == replace(m, name="small")
    assert "bare_user" not in p.read_text()           # optional fields at their defaults are left out
    pop = replace(m, prompts=replace(m.prompts, bare_user_tokens=900.0, bare_user_sigma=0.5,
                                     bare_user_quantiles=(10.0, 20.0, 40.0),
                                     system_user_quantiles=(1.0, 2.0, 0.0, 0.0, 5.0, 5.0)))
    p.write_text(to_toml(pop))
    assert load_model_file(p) == replace(pop, name="small") and "bare_user_sigma = 0.5" in p.read_text()


@pytest.mark.parametrize("doc, match", [
    ({"prompts": {"system_tokenz": 5}}, r"unknown parameter prompts\.system_tokenz"),
    ({"sessions": {"turns_mean": 2, "bogus": 1, "other": 2}}, r"unknown parameter sessions\.bogus \(and other\)"),
    ({"arrival": {"rate": 1}}, r"unknown section \[arrival\]"),
    ({"workload": {"colour": "red"}}, r"unknown parameter workload\.colour"),
    ({"arrivals": {"rate": "fast"}}, r"arrivals\.rate = 'fast' is not a number"),
    ({"arrivals": {"rate": 0}}, r"arrivals\.rate = 0\.0 is invalid"),
    ({"sessions": {"return_probability": 1.0}}, r"sessions\.return_probability"),
    ({"prompts": {"document_probability": 0.5}}, r"prompts\.document_probability"),
    ({"prompts": {"system_prompts": 2, "system_prompt_tokens": [1.0]}}, r"prompts\.system_prompt_tokens"),
    ({"prompts": {"system_prompts": 2, "system_user_tokens": [1.0], "system_user_sigma": [0.5]}},
     r"prompts\.system_user_tokens = 1 is invalid"),
    ({"prompts": {"system_user_tokens": [10.0], "system_user_sigma": []}}, r"prompts\.system_user_sigma = 0 is invalid"),
    ({"prompts": {"system_user_tokens": [-1.0], "system_user_sigma": [0.0]}}, r"prompts\.system_user_tokens"),
    ({"prompts": {"system_prompts": 2, "system_user_quantiles": [1.0, 2.0, 3.0]}},
     r"prompts\.system_user_quantiles = 3 is invalid"),
    ({"prompts": {"system_prompts": 2, "system_user_quantiles": [1.0, 2.0, 3.0, 1.0]}},
     r"prompts\.system_user_quantiles = 4 is invalid"),
    ({"prompts": {"system_user_quantiles": [5.0]}}, r"prompts\.system_user_quantiles = 1 is invalid"),
    ({"prompts": {"system_user_quantiles": [-1.0, 5.0]}}, r"prompts\.system_user_quantiles = 2 is invalid"),
    ({"prompts": {"bare_user_tokens": -1}}, r"prompts\.bare_user_tokens = -1\.0 is invalid"),
    ({"prompts": {"bare_user_sigma": -0.5}}, r"prompts\.bare_user_sigma = -0\.5 is invalid"),
    ({"prompts": {"bare_user_quantiles": [2.0, 1.0]}}, r"prompts\.bare_user_quantiles"),
    ({"workload": {"fitted_span_s": -1}}, r"workload\.fitted_span_s = -1\.0 is invalid"),
    ({"workload": {"fitted_span_s": "1h"}}, r"workload\.fitted_span_s = '1h' is not a number"),
])
def test_bad_model_files_name_the_parameter(doc, match):
    with pytest.raises(SpecError, match=match):
        model_from_dict(doc, "m.toml")


def test_unknown_parameter_in_a_file_is_a_cli_error(cli, tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text("[sessions]\nturns = 3\n")
    r = cli(*["trace", "gen", "--model-file", str(p), "--duration", "1h", "-o", str(tmp_path / "o.jsonl")])
    assert r.exit_code == 2 and "unknown parameter sessions.turns" in r.output and "Traceback" not in r.output


def test_presets_load_and_state_their_sources():
    names = preset_names()
    assert {"qa", "chat", "coding-agent", "document-analysis", "tool-agent"} <= set(names)
    for n in names:
        m = load_model_file(n)
        assert m.sources and all(len(s) > 20 for s in m.sources), n


def test_preset_classes_order_by_reuse():
    from kvbench.stream.stats import trace_stats

    reuse = {n: trace_stats(_whole(Generator(load_model_file(n), duration_s=1800, rate=3, seed=1)))
             ["infinite_cache_reuse"] for n in ("qa", "chat", "coding-agent")}
    # qa: only the shared system-prompt block is reused (about one block in two)
    assert reuse["qa"] < 0.5 < reuse["chat"] < reuse["coding-agent"]
    assert reuse["coding-agent"] > 0.9


# --- generation ------------------------------------------------------------------------------------------
def test_generation_is_deterministic_per_seed():
    m = _small()
    a, b, c = (_whole(Generator(m, duration_s=3600, seed=s)) for s in (7, 7, 8))
    assert np.array_equal(a.keys, b.keys) and np.array_equal(a.timestamp_s, b.timestamp_s)
    assert np.array_equal(a.input_tokens, b.input_tokens) and np.array_equal(a.offsets, b.offsets)
    assert a.n_requests != c.n_requests or not np.array_equal(a.keys, c.keys)


def test_generated_trace_is_valid_mooncake(tmp_path):
    m = _small()
    g = _whole(Generator(m, duration_s=3600, seed=3))
    assert np.all(np.diff(g.timestamp_s) >= 0)
    assert np.array_equal(g.blocks_per_request, -(-g.input_tokens // 64))
    # times on the millisecond grid, so the file reads back exactly
    assert np.array_equal(np.rint(g.timestamp_s * 1000) / 1000, g.timestamp_s)
    out = write_stream(Generator(m, duration_s=3600, seed=3).batches(), tmp_path / "t.jsonl.gz")
    assert out["requests"] == g.n_requests and out["block_references"] == g.n_blocks
    first = json.loads(gzip.open(tmp_path / "t.jsonl.gz", "rt").readline())
    assert set(first) == {"timestamp", "input_length", "output_length", "hash_ids"}
    assert isinstance(first["timestamp"], int)
    t = read_trace(tmp_path / "t.jsonl.gz", block_tokens=64)
    assert t.fmt == "mooncake"
    assert np.array_equal(t.keys, g.keys) and np.allclose(t.timestamp_s, g.timestamp_s)
    chk = prefix_chaining(t)
    assert chk["prefix_chained"] and chk["repeated_ids_within_requests"] == 0


def test_followups_extend_the_previous_context():
    # one session, several turns: each prompt = previous prompt + answer + a new message, full blocks reused
    m = _small(arrivals=Arrivals(rate=0.01), sessions=Sessions(turns_mean=30.0, think_time_s=5.0, think_sigma=0.1))
    g = _whole(Generator(m, duration_s=200, seed=1))
    assert g.n_requests >= 5
    for r in range(1, g.n_requests):
        prev = g.keys[g.offsets[r - 1]:g.offsets[r]]
        cur = g.keys[g.offsets[r]:g.offsets[r + 1]]
        full = int(g.input_tokens[r - 1] // 64)
        assert g.input_tokens[r] > g.input_tokens[r - 1]
        assert np.array_equal(cur[:full], prev[:full])
        if g.input_tokens[r - 1] % 64:                 # the partial last block changed content: a new key
            assert cur[full] != prev[full]


def test_rate_and_diurnal_cycle():
    m = _small(arrivals=Arrivals(rate=1.0, diurnal_amplitude=0.6, peak_hour=6.0),
               sessions=Sessions(turns_mean=1.0), prompts=Prompts(system_tokens=0.0, first_user_tokens=10.0,
                                                                  output_tokens=1.0))
    g = _whole(Generator(m, duration_s=4 * 86_400, seed=2))
    assert g.n_requests / (4 * 86_400) == pytest.approx(1.0, rel=0.03)
    hour = (g.timestamp_s / 3600.0 % 24).astype(int)
    per_hour = np.bincount(hour, minlength=24)
    expected = 1 + 0.6 * np.cos(2 * np.pi * (np.arange(24) + 0.5 - 6.0) / 24)
    assert per_hour.argmax() in (4, 5, 6, 7) and per_hour.argmin() in (16, 17, 18, 19)
    assert per_hour[5] / per_hour[17] == pytest.approx(expected[5] / expected[17], rel=0.15)


def test_returns_come_back_hours_later():
    m = _small(arrivals=Arrivals(rate=0.5), sessions=Sessions(turns_mean=2.0, think_time_s=10.0,
                                                              return_probability=0.5, return_time_s=4 * 3600.0,
                                                              return_sigma=1.0))
    g = _whole(Generator(m, duration_s=3 * 86_400, seed=4))
    from kvbench.stream.stats import reuse_times

    rt = reuse_times(g)
    # a session's private blocks come back after a return delay: a heavy share of reuses hours later
    assert np.mean(rt > 3600) > 0.1 and np.percentile(rt, 99) > 86_400 / 2


# --- gen: traces ---------------------------------------------------------------------------------------------
def test_gen_argument_streams_the_same_requests_as_the_file(tmp_path):
    m = _small()
    p = tmp_path / "m.toml"
    p.write_text(to_toml(m))
    spec = f"gen:{p},duration=2h,seed=5"
    streamed = read_trace(spec)
    assert streamed.meta["source"] == "generated" and streamed.meta["span_s"] == 7200.0
    assert streamed.meta["generated_from"] == str(p) and streamed.meta["sample_rate"] == 1.0
    assert streamed.path == spec
    written = write_stream(Generator(load_model_file(p), duration_s=7200, seed=5).batches(), tmp_path / "o.jsonl")
    t = read_trace(written["path"], block_tokens=64)
    assert np.array_equal(streamed.keys, t.keys) and np.array_equal(streamed.input_tokens, t.input_tokens)
    # batches of any size give the same stream
    small = Trace.concat(list(iter_trace(spec, batch_requests=100)))
    assert np.array_equal(small.keys, streamed.keys)
    assert read_trace(spec, limit=10).n_requests == 10


def test_gen_sample_keeps_only_sampled_keys(tmp_path):
    from kvbench.stream.sampling import key_mask

    full = read_trace("gen:chat,duration=20m,seed=1")
    s = read_trace("gen:chat,duration=20m,seed=1,sample=0.1")
    assert s.n_requests == full.n_requests and s.meta["sample_rate"] == 0.1
    assert np.array_equal(s.keys, full.keys[key_mask(full.keys, 0.1)])
    assert np.array_equal(s.extras["full_blocks"], full.blocks_per_request)


@pytest.mark.parametrize("text, match", [
    ("gen:", "names no model"),
    ("gen:chat,duraton=1h", "unknown option 'duraton' \\(fix: known options: duration, rate, seed, sample"),
    ("gen:chat,seed=1,seed=2", "option 'seed' given twice"),
    ("gen:chat,seed", "malformed option 'seed'"),
    ("gen:chat,rate=x", "rate='x' is not a number"),
    ("gen:chat,rate=0", "rate must be > 0"),
    ("gen:chat,sample=2", "outside"),
    ("gen:chat,duration=soon", "cannot parse duration"),
])
def test_bad_gen_arguments(text, match):
    with pytest.raises(UsageError, match=match):
        parse_gen(text)


def test_unknown_model_in_gen_is_one_line(cli):
    r = cli(*["mrc", "gen:nosuchmodel,duration=1h"])
    assert r.exit_code == 2 and "unknown classes preset 'nosuchmodel'" in r.output


def test_mrc_plan_and_replay_read_gen(cli, tmp_path):
    m = _small()
    p = tmp_path / "m.toml"
    p.write_text(to_toml(m))
    spec = f"gen:{p},duration=15m,seed=2"
    written = write_stream(Generator(m, duration_s=900, seed=2).batches(), tmp_path / "o.jsonl")
    a = json.loads(cli(*["mrc", spec, "--json", "--points", "16"]).output)
    b = json.loads(cli(*["mrc", written["path"], "--block-tokens", "64", "--json", "--points", "16"]).output)
    assert a["hit_ratio"] == b["hit_ratio"] and a["streamed"] and a["trace"] == spec
    sampled = json.loads(cli(*["mrc", spec, "--json", "--points", "16", "--sample", "0.5"]).output)
    assert sampled["method"].startswith("shards")
    r = cli(*["plan", "--trace", spec, "--model", "tiny-gqa", "--waf", "1.5", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["trace"] == spec
    # a key-sampled stream is planned as a miniature, said so (tests/analysis/test_plan.py checks its scale)
    r = cli(*["plan", "--trace", spec + ",sample=0.5", "--model", "tiny-gqa", "--waf", "1.5"])
    assert r.exit_code == 0 and "key sample at rate 0.5" in r.output
    r = cli(*["replay", "kv", spec, "--model", "tiny-gqa", "--l2", "8MiB", "--dry-run", "--json",
             "--results", str(tmp_path / "res")])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["requests"] == a["requests"]


def test_week_scale_memory_does_not_grow_with_the_horizon():
    """mrc --sample over a gen: stream: peak traced memory stays flat while the trace grows 5x (once the
    generator's window is full: a day at this rate)."""
    from kvbench.analysis.curves.profile import stream_profile

    stream_profile(iter_trace("gen:qa,duration=10m,rate=4,seed=1"), rate=0.01)     # compile, import, cache first
    peaks, refs = [], []
    for d in ("1d", "5d"):
        tracemalloc.start()
        _, meta = stream_profile(iter_trace(f"gen:qa,duration={d},rate=4,seed=1"), rate=0.01)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        refs.append(meta["references"])
    assert refs[1] > 4.5 * refs[0]
    assert peaks[1] < 1.2 * peaks[0] and peaks[1] < 128 << 20, (peaks, refs)


def test_plan_memory_on_a_key_sampled_stream_follows_the_sample_not_the_horizon():
    """plan over a key-sampled gen: stream holds only the requests with a sampled block: 4.3x the requests (once
    the generator's window is full, a day at this rate) leave peak traced memory nearly flat (read whole, the
    requests' columns alone would add 1.6x here)."""
    from kvbench.analysis.cost import load_prices
    from kvbench.analysis.plan import PlanOptions, build_plan

    read_trace("gen:chat,duration=10m,rate=4,seed=1,sample=0.002", compact=True)      # compile, import first
    peaks, requests = [], []
    for d in ("1d", "4d"):
        tracemalloc.start()
        tr = read_trace(f"gen:chat,duration={d},rate=4,seed=1,sample=0.002", compact=True)
        out = build_plan(tr, block_bytes=1 << 20, prices=load_prices(), tokens_per_s=1e4,
                         options=PlanOptions(waf=1.5, sweep=()))
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        requests.append(out["requests"])
        assert tr.n_requests < 0.05 * out["requests"]
    assert requests[1] > 4 * requests[0]
    assert peaks[1] < 1.25 * peaks[0], (peaks, requests)


# --- fit -----------------------------------------------------------------------------------------------------
KNOWN = WorkloadModel(
    name="known", block_tokens=64,
    arrivals=Arrivals(rate=0.4, burstiness=2.0, diurnal_amplitude=0.5, peak_hour=15.0),
    sessions=Sessions(turns_mean=3.0, think_time_s=30.0, think_sigma=0.7, return_probability=0.3,
                      return_time_s=3 * 3600.0, return_sigma=0.6, max_context_tokens=1 << 20),
    prompts=Prompts(system_prompts=2, system_tokens=500.0, system_prompt_tokens=(1000.0, 420.0),
                    system_prompt_weights=(3.0, 1.0), first_user_tokens=300.0, first_user_sigma=0.5,
                    user_tokens=100.0, user_sigma=0.5, output_tokens=150.0, output_sigma=0.5))


@pytest.fixture(scope="module")
def known_fit():
    t = _whole(Generator(KNOWN, duration_s=3 * 86_400, seed=11))
    return t, fit_model(t)


def test_fit_recovers_known_parameters(known_fit):
    t, res = known_fit
    m = res.model
    a, s, p = m.arrivals, m.sessions, m.prompts
    assert a.rate == pytest.approx(KNOWN.arrivals.rate, rel=0.05)
    assert a.diurnal_amplitude == pytest.approx(0.5, abs=0.1)
    assert abs((a.peak_hour - 15.0 + 12) % 24 - 12) < 1.5
    assert a.burstiness == pytest.approx(2.0, rel=0.25)
    assert s.turns_mean == pytest.approx(3.0, rel=0.1)
    assert s.think_time_s == pytest.approx(30.0, rel=0.1)
    assert s.think_sigma == pytest.approx(0.7, abs=0.1)
    assert s.return_probability == pytest.approx(0.3, abs=0.07)    # returns past the end are censored
    assert s.return_time_s == pytest.approx(3 * 3600.0, rel=0.25)
    # system prompts: lengths to the block (+ half a block), popularity as generated
    assert p.system_prompts == 2 and p.system_probability == pytest.approx(1.0, abs=0.02)
    assert p.system_prompt_tokens[0] == pytest.approx(1000, abs=64) and p.system_prompt_tokens[1] == \
        pytest.approx(420, abs=64)
    assert p.system_prompt_weights[0] / p.system_prompt_weights[1] == pytest.approx(3.0, rel=0.15)
    assert p.output_tokens == pytest.approx(150.0, rel=0.05) and p.output_sigma == pytest.approx(0.5, abs=0.05)
    assert p.append_output and p.user_tokens == pytest.approx(100.0, rel=0.15)
    assert p.first_user_tokens == pytest.approx(300.0 + 32, rel=0.15)   # + the partial system block
    assert not [w for w in res.warnings if not w.startswith("arrivals.weekend_factor")]


def test_fit_regenerates_the_known_curve(known_fit):
    t, res = known_fit
    g = goodness(t.slice(0, 20_000), res.model, seed=1)
    assert g["curve_mae"] < 0.03 and g["curve_max_error"] < 0.08
    assert g["reuse_time_ks"] < 0.1


def test_short_trace_warns_and_names_the_default(cli, tmp_path):
    r = cli(*["trace", "fit", "mooncake-sample", "-o", str(tmp_path / "m.toml"), "--seeds", "1", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert {"curve_mae", "curve_max_error", "reuse_time_ks"} <= set(out["fit"]) and "arrivals" in out["model"]
    w = "\n".join(out["warnings"])
    assert "sessions.return_probability: cannot be fitted (the trace spans 4.54 min" in w
    assert "default 0 used" in w and "arrivals.diurnal_amplitude" in w
    # a --defaults model supplies what the trace cannot show
    r = cli(*["trace", "fit", "mooncake-sample", "-o", str(tmp_path / "m2.toml"), "--seeds", "1", "--defaults",
             "chat", "--json"])
    out2 = json.loads(r.output)
    assert out2["model"]["sessions"]["return_probability"] == 0.25
    assert "sessions.return_probability: cannot be fitted" in "\n".join(out2["warnings"])
    assert "default 0.25 used" in "\n".join(out2["warnings"])
    m = load_model_file(tmp_path / "m2.toml")
    assert m.sessions.return_probability == 0.25


def test_fit_needs_two_requests(cli, tmp_path):
    p = tmp_path / "one.jsonl"
    p.write_text('{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]}\n')
    r = cli(*["trace", "fit", str(p), "-o", str(tmp_path / "m.toml")])
    assert r.exit_code == 2 and "at least two requests" in r.output


def test_fit_on_the_shipped_synthetic_trace(cli, tmp_path):
    """The whole Mooncake synthetic trace (built in): the regenerated curve stays within a few points."""
    r = cli(*["trace", "fit", "mooncake-synthetic", "-o", str(tmp_path / "m.toml"), "--json"])
    out = json.loads(r.output)
    fit = out["fit"]
    assert fit["curve_mae"] < 0.03 and fit["curve_max_error"] < 0.1 and fit["reuse_time_ks"] < 0.1
    # steady write rate (DWPD): before calibration the generated traces held ~26% fewer references per second, and
    # its late, reuse-heavy capacities (follow-ups climb from 2% to 85% of requests) were off by up to 50%; the
    # calibration lengthens sessions (turns and think time x3.6) and scales the rate: measured after, per
    # generated trace 2.3% mean (3 seeds; 3.7% mean / 10.2% max over 12), the seeds' mean W within 11.9% at every
    # capacity (3 seeds; 4.1% over 12: the largest capacities' short steady windows are the noisy ones). Its
    # shared prefixes are system prompts with their measured lengths and shares (documents with a lognormal length
    # before): uncalibrated, 21.9% max (it was 50%)
    c = out["model"]["calibration"]
    assert c["calibrated"] and c["turns_factor"] > 1.5 and c["think_factor"] > 1.5
    assert fit["before_calibration"]["dwpd_error_max"] > 0.2
    assert fit["dwpd_error_mean"] <= 0.05 and fit["dwpd_error_of_seed_mean"]["max"] <= 0.15


@pytest.mark.skipif(not (SHARED / "lmbench-gmi" / "gmi_trace.jsonl").is_file(), reason="needs ../shared traces")
def test_fit_on_the_gmi_trace(cli, tmp_path):
    r = cli(*["trace", "fit", str(SHARED / "lmbench-gmi" / "gmi_trace.jsonl"), "-o", str(tmp_path / "m.toml"),
             "--json"])
    out = json.loads(r.output)
    assert out["fit"]["curve_mae"] < 0.06 and out["fit"]["curve_max_error"] < 0.15
    assert out["model"]["arrivals"]["diurnal_amplitude"] > 0.3        # a day of production traffic
    # DWPD: the ids hold ~34 tokens where 32 are stated (36 in one main prompt's sessions, 31 without a prompt),
    # so prompts in stated tokens made ~25% too many blocks (mean error 33.8% over 3 seeds), and a length factor
    # (x0.77) on every population's own text could not fix them all; the own lengths are now measured in the
    # ids' units, by population, and only the rate is calibrated (length factor 1): the structural fit's error
    # is 7.0% mean per generated day (3 seeds; it was 33.8%): one day is a noisy measure of the rate, so what is
    # checked is the gen check: 3 traces of the 34 days trace gen writes. The generator holds each rate window's
    # (the fitted day's) count, so a trace's requests no longer stray with its CV-6.9 arrivals (+-5% over 34 days
    # when free): every one of the 3 traces is within 5% at every capacity (worst 2.6%; 12 seeds from 100: 3.7%,
    # from 200: 3.6%; free, 8.7% and 9.1%), their mean within 2.5%. A window of a running service's long run is
    # centred by the rate on 8 of those traces (x0.976)
    fit = out["fit"]
    assert out["observed"]["lengths_in"] == "ids" and out["observed"]["first_messages"] == "by population"
    assert out["observed"]["stationarity"]["stationary"] is True
    assert out["model"]["calibration"]["length_factor"] == 1.0 and fit["curve_mae"] <= 0.02
    assert fit["before_calibration"]["dwpd_error_mean"] < 0.2
    assert fit["gen_check"]["dwpd_error_worst"] <= 0.05 and fit["gen_check"]["curve_mae"] <= 0.02
    assert fit["gen_check"]["dwpd_error_of_seed_mean"]["max"] <= 0.035
    assert 0.95 < out["model"]["calibration"]["gen_rate_factor"] < 0.99


def test_plan_marks_what_comes_from_the_fitted_trace_and_what_from_the_extension(cli, tmp_path):
    """A model fitted to the built-in trace states the trace's span; a plan of its week-long stream labels each
    capacity, retention and drive row by its residence against that span, and says it in the answer."""
    span = read_trace("mooncake-synthetic").duration_s          # the span, read apart from the fit
    out = json.loads(cli(*["trace", "fit", "mooncake-synthetic", "-o", str(tmp_path / "m.toml"), "--json"]).output)
    assert out["model"]["workload"]["fitted_span_s"] == pytest.approx(span)
    assert load_model_file(tmp_path / "m.toml").fitted_span_s == pytest.approx(span, abs=1e-3)
    plan = json.loads(cli(*["plan", "--trace", f"gen:{tmp_path / 'm.toml'},duration=6h,rate=2,seed=1", "--model",
                            "tiny-gqa", "--waf", "1.5", "--retention", "1h", "--sweep", "5m,1h", "--json",
                            "--report", str(tmp_path / "r.html"), "--results", str(tmp_path / "res")]).output)
    assert plan["source"]["fitted_span_s"] == pytest.approx(span, abs=1e-3)
    html = (tmp_path / "r.html").read_text()
    assert "above, the model's extension" in html and "rests on the model&#x27;s extension" in html
    rows = [r for r in plan["capacity_curve"] if r["residence_s"]]
    assert {r["from"] for r in rows} == {"fitted-span", "extension"}
    for r in rows + plan["retention_sweep"] + plan["drives"]:
        assert r["from"] == ("fitted-span" if r["residence_s"] <= span + 1e-3 else "extension"), r
    assert [r["from"] for r in plan["retention_sweep"]] == ["fitted-span", "extension"]    # 5 min, 1 h vs 17 min
    head = plan["answer"]["sentences"][1]
    assert ("beyond" if plan["residence_s"] > span else "within") in head and "fitted on" in head
    assert plan["from"] == ("extension" if plan["residence_s"] > span else "fitted-span")
    # a preset's stream and a measured trace are labelled as such
    preset = json.loads(cli(*["plan", "--trace", "gen:qa,duration=1h,rate=2", "--model", "tiny-gqa", "--waf", "1.5",
                              "--sweep", "", "--json"]).output)
    assert {r["from"] for r in preset["drives"]} == {"model"}
    measured = json.loads(cli(*["plan", "--trace", "mooncake-sample", "--model", "tiny-gqa", "--waf", "1.5",
                                "--sweep", "", "--json"]).output)
    assert {r["from"] for r in measured["capacity_curve"] + measured["drives"]} == {"trace"}


def test_ks_distance():
    assert ks_distance(np.arange(10.0), np.arange(10.0)) == 0.0
    assert ks_distance(np.zeros(5), np.ones(5)) == 1.0
    assert ks_distance(np.array([1.0, 2, 3, 4]), np.array([3.0, 4, 5, 6])) == pytest.approx(0.5)
    assert ks_distance(np.zeros(0), np.ones(3)) is None


def test_gen_cli_model_file(cli, tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, b = tmp_path / "a" / "w.jsonl.gz", tmp_path / "b" / "w.jsonl.gz"
    for p in (a, b):
        r = cli(*["trace", "gen", "--model-file", "chat", "--duration", "30m", "--rate", "2", "--seed", "4", "-o", str(p),
                 "--json"])
        assert r.exit_code == 0, r.output
    assert a.read_bytes() == b.read_bytes()                    # deterministic per seed, byte for byte
    out = json.loads(r.output)
    assert out["requests"] == read_trace(a).n_requests and out["model"]["workload"]["name"] == "chat"
    r = cli(*["trace", "gen", "chat", "--model-file", "chat", "-o", str(a)])
    assert r.exit_code == 2 and "either KIND or --model-file" in r.output
    r = cli(*["trace", "gen", "--model-file", "chat", "--requests", "5", "-o", str(a)])
    assert r.exit_code == 2 and "--requests applies to KIND" in r.output
    assert math.isfinite(out["elapsed_s"])


def test_fit_recovers_shared_documents():
    m = WorkloadModel(name="docs", block_tokens=64, arrivals=Arrivals(rate=0.5),
                      sessions=Sessions(turns_mean=2.0, think_time_s=20.0),
                      prompts=Prompts(system_prompts=1, system_tokens=300.0, system_sigma=0.0,
                                      document_probability=0.5, documents=20, document_tokens=2000.0,
                                      document_sigma=0.3, document_zipf=0.5, first_user_tokens=200.0,
                                      user_tokens=80.0, output_tokens=100.0))
    p = fit_model(_whole(Generator(m, duration_s=43_200, seed=3))).model.prompts
    assert p.system_prompts == 1 and p.system_prompt_tokens[0] == pytest.approx(300, abs=32)
    assert p.documents == 20 and p.document_probability == pytest.approx(0.5, abs=0.03)
    assert p.document_tokens == pytest.approx(2000, rel=0.05) and p.document_sigma == pytest.approx(0.3, abs=0.08)
    assert p.document_zipf == pytest.approx(0.5, abs=0.15)
    assert p.first_user_tokens == pytest.approx(200, rel=0.1)


def test_explicit_conversations_are_used():
    """Bailian traces name each request's parent: sessions come from those ids, not from the keys."""
    from kvbench.stream.sessions import recover_sessions

    fixture = FIXTURES / "traces" / "bailian_sample.jsonl"
    t = read_trace(fixture)
    rows = [json.loads(x) for x in fixture.read_text().splitlines() if x.strip()]
    row_of = {r["chat_id"]: i for i, r in enumerate(rows)}
    expected = [row_of.get(r["parent_chat_id"], -1) for r in rows]
    s = recover_sessions(t)
    assert s.parent.tolist() == expected
    for r, p in enumerate(expected):
        if p >= 0:
            assert s.session[r] == s.session[p]


# --- The workload model's calendar against Python's own (datetime, UTC): the daily cycle's hour, the weekday of
# every second (Unix time 0 was a Thursday), the weekend factor, and Unix time's DST-free seconds (the EU clock
# change on 2024-03-31 moves no hour of a UTC clock).
UTC = timezone.utc


T0 = datetime(2024, 3, 8, 22, 30, tzinfo=UTC)        # a Friday, 22:30


def _hour(d: datetime) -> float:
    return d.hour + d.minute / 60 + d.second / 3600 + d.microsecond / 3.6e9


def _model(start: datetime, amplitude=0.5, peak=14.0, weekend=0.4, **kw) -> WorkloadModel:
    return WorkloadModel(name="cal", block_tokens=64, arrivals=Arrivals(
        rate=1.0, diurnal_amplitude=amplitude, peak_hour=peak, weekend_factor=weekend,
        start_hour=_hour(start), start_weekday=start.weekday(), **kw))


def _by_calendar(start: datetime, t_s: float, amplitude=0.5, peak=14.0, weekend=0.4) -> float:
    """The intensity at ``t_s`` seconds after ``start``, read off the calendar: cosine of the hour of day,
    the weekend's factor on Saturday and Sunday, scaled so that a week's mean is 1 (5 weekdays + 2 weekend days)."""
    d = start + timedelta(seconds=t_s)
    daily = 1 + amplitude * math.cos(2 * math.pi * (_hour(d) - peak) / 24)
    return daily * (weekend if d.weekday() >= 5 else 1.0) / ((5 + 2 * weekend) / 7)


MIDNIGHT = 5400.0                                   # 22:30 + 1.5 h: Friday -> Saturday


TIMES = [0.0, MIDNIGHT - 1, MIDNIGHT, 2 * 86_400 + MIDNIGHT - 1, 2 * 86_400 + MIDNIGHT,   # Sunday 23:59:59, Monday
         (datetime(2024, 3, 31, 1, 30, tzinfo=UTC) - T0).total_seconds(),                   # EU clocks change: UTC not
         7 * 86_400.0, 7 * 86_400.0 + 12_345.6, 366 * 86_400.0]                             # a week, a leap year on


def _clocked(t0: datetime, n: int = 40) -> Trace:
    """A short trace whose first request is at Unix time ``t0``."""
    m = WorkloadModel(name="s", block_tokens=64, arrivals=Arrivals(rate=0.5),
                      sessions=Sessions(turns_mean=1.0), prompts=Prompts(system_tokens=0.0, first_user_tokens=64.0,
                                                                          output_tokens=1.0))
    tr = Trace.concat(list(Generator(m, duration_s=4 * n, seed=1).batches()))
    return replace(tr, t0=t0.timestamp())


@pytest.mark.parametrize("start", [T0, datetime(2024, 3, 4, 0, 0, tzinfo=UTC),          # Monday midnight
                                   datetime(2024, 3, 10, 23, 59, 59, tzinfo=UTC)])      # Sunday, a second to go
def test_intensity_follows_the_calendar(start):
    m = _model(start)
    got = intensity(m, np.array(TIMES))
    want = [_by_calendar(start, t) for t in TIMES]
    assert got == pytest.approx(want, rel=1e-12, abs=1e-12)


def test_a_weeks_mean_intensity_is_one():
    m = _model(T0)
    t = np.arange(0.0, 7 * 86_400.0, 60.0)            # every minute of one week from Friday 22:30
    assert float(intensity(m, t).mean()) == pytest.approx(1.0, abs=1e-12)


def test_the_weekend_is_saturday_and_sunday_whatever_the_start_hour():
    # from Friday 22:30 the weekend factor starts 1.5 h in and ends 49.5 h later, at Monday 00:00
    m = _model(T0, amplitude=0.0)
    t = np.arange(0.0, 7 * 86_400.0, 900.0)
    weekend = intensity(m, t) < 1.0
    want = np.array([(T0 + timedelta(seconds=float(s))).weekday() >= 5 for s in t])
    assert np.array_equal(weekend, want)
    assert weekend.sum() * 900 == 2 * 86_400


@pytest.mark.parametrize("t0", [T0,
                                datetime.fromtimestamp(1_000_000_000, UTC),             # Sunday 2001-09-09 01:46:40
                                datetime(2024, 3, 31, 1, 30, tzinfo=UTC),               # EU DST change, Sunday
                                datetime(2024, 12, 31, 23, 59, 59, tzinfo=UTC),          # Tuesday, the year's end
                                datetime(2024, 2, 29, 12, 0, tzinfo=UTC)])              # a leap day, Thursday
def test_a_fitted_unix_clock_starts_at_its_utc_hour_and_weekday(t0):
    a = fit_model(_clocked(t0)).model.arrivals
    assert a.start_weekday == t0.weekday()
    assert a.start_hour == pytest.approx(_hour(t0), abs=1e-9)


def test_the_fitted_weekend_factor_counts_saturdays_and_sundays():
    """16 days of arrivals from Friday 22:30 to Sunday 22:30 with weekends at 0.3 of the weekday rate (generated
    from the calendar's start); the fit must find the weekend on the same days from the Unix timestamps alone.
    Not whole weeks: a weekend misplaced by a day would cover a different number of days."""
    base = _model(T0, amplitude=0.0, weekend=0.3)
    m = replace(base, arrivals=replace(base.arrivals, rate=0.05), sessions=Sessions(turns_mean=1.0),
                prompts=Prompts(system_tokens=0.0, first_user_tokens=64.0, output_tokens=1.0))
    span = 16 * 86_400
    tr = replace(Trace.concat(list(Generator(m, duration_s=span, seed=4).batches())), t0=T0.timestamp())
    hours_weekend = sum((T0 + timedelta(minutes=k)).weekday() >= 5 for k in range(span // 60)) / 60   # 142.5 h
    share = hours_weekend * 0.3 / (span / 3600 - hours_weekend + hours_weekend * 0.3)
    weekend = [(T0 + timedelta(seconds=float(s))).weekday() >= 5 for s in tr.timestamp_s]
    assert sum(weekend) / len(weekend) == pytest.approx(share, abs=0.015)
    a = fit_model(tr).model.arrivals
    assert a.weekend_factor == pytest.approx(0.3, rel=0.12)
