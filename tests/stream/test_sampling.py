"""Spatial key sampling (miniature simulation): the sample itself, prefix residency under it, sampled replays
against the exact curve of the shipped full Mooncake trace, full-size volumes in summary.json and plan --run."""

from __future__ import annotations

import gzip
import hashlib
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from kvbench.replay.kv import ReplayConfig, replay_kv
from kvbench.stream.sampling import FULL_BLOCKS, key_mask, sample_keys
from kvbench.stream.traces import builtin_traces, read_trace
from tests.conftest import REPO

BLOCK = 262144          # tiny-gqa: 512 B/token x 512-token Mooncake blocks (slot = block)


@pytest.fixture(scope="module")
def synthetic():
    return read_trace("mooncake-synthetic")


def _json(result):
    assert result.exit_code == 0, result.output
    return json.loads(result.output[result.output.index("{"):])


def test_shipped_synthetic_trace_is_the_whole_upstream_file(synthetic):
    path = builtin_traces()["mooncake-synthetic"]
    raw = gzip.decompress(path.read_bytes())
    sha = hashlib.sha256(raw).hexdigest()
    assert sha == "bd070915a98fc0ed264d7cfef2ce746002eb3076a695ec31ba2674c0111ec131"
    assert sha in (REPO / "workloads" / "traces" / "README.md").read_text()
    assert synthetic.n_requests == 3993 and synthetic.n_blocks == 121877
    assert np.unique(synthetic.keys).size == 43924


def test_sample_is_the_shards_hash_sample_and_keeps_every_request(synthetic):
    from kvbench.analysis.curves.profile import sampled_trace

    for rate, seed in ((0.1, 0), (0.03, 7)):
        s = sample_keys(synthetic, rate, seed=seed)
        ref, n = sampled_trace(synthetic, rate, salt=seed)         # the numba SHARDS filter of the curves
        assert np.array_equal(s.keys, ref.keys) and np.array_equal(s.offsets, ref.offsets) and n == s.n_blocks
        assert s.n_requests == synthetic.n_requests
        assert np.array_equal(s.timestamp_s, synthetic.timestamp_s)
        assert np.array_equal(s.extras[FULL_BLOCKS], synthetic.blocks_per_request)
        # a key is in the sample everywhere or nowhere, and the sample size is about rate x the keys
        kept = np.isin(synthetic.keys, s.keys)
        assert np.array_equal(kept, key_mask(synthetic.keys, rate, seed))
        distinct = np.unique(synthetic.keys)
        frac = np.unique(s.keys).size / distinct.size
        assert abs(frac - rate) < 4 * np.sqrt(rate / distinct.size)
    assert not np.array_equal(sample_keys(synthetic, 0.1, seed=1).keys, sample_keys(synthetic, 0.1).keys)
    same = sample_keys(synthetic, 1.0)
    assert np.array_equal(same.keys, synthetic.keys) and np.array_equal(same.offsets, synthetic.offsets)
    # batches sample the same keys as the whole trace
    parts = [sample_keys(synthetic.slice(a, a + 1000), 0.1) for a in range(0, synthetic.n_requests, 1000)]
    assert np.array_equal(np.concatenate([p.keys for p in parts]), sample_keys(synthetic, 0.1).keys)


@pytest.mark.parametrize("rate", [0.0, -0.1, 1.5, float("nan")])
def test_bad_rates_are_usage_errors(synthetic, rate):
    from kvbench.errors import UsageError

    with pytest.raises(UsageError, match="--sample-keys"):
        sample_keys(synthetic, rate)


def test_lru_residency_along_a_sampled_chain_is_a_prefix(synthetic):
    """The docstring's argument, checked: fed the sample deepest-first, an LRU holds a prefix of every
    request's sampled sub-chain (no request ever finds a block resident after a missing one)."""
    from kvbench.sim.policies import make_policy

    s = sample_keys(synthetic, 0.1)
    for cap in (50, 400):
        lru = make_policy("lru", cap)
        keys, offs, ts = s.keys.tolist(), s.offsets.tolist(), s.timestamp_s.tolist()
        checked = 0
        for r in range(s.n_requests):
            chain = keys[offs[r]:offs[r + 1]]
            resident = [lru.contains(k, ts[r]) for k in chain]
            first_miss = resident.index(False) if False in resident else len(resident)
            assert not any(resident[first_miss:]), r
            checked += first_miss > 0 and first_miss < len(resident)
            for k in reversed(chain):
                if not lru.lookup(k, ts[r]):
                    lru.insert(k, ts[r])
        assert checked > 10           # partial prefixes (hit then miss) were actually exercised


# measured (dry runs, seeds 0-2): |sampled - exact| <= 0.013 at rate 0.05, <= 0.008 at 0.1
TOLERANCE = 0.02


@pytest.mark.parametrize("rate", [0.05, 0.1])
def test_sampled_replay_at_scaled_capacity_estimates_the_exact_curve(synthetic, tmp_path, rate):
    from kvbench.analysis.curves.profile import exact_profile

    exact = exact_profile(synthetic)
    for cap in (2000, 5000, 10000, 20000):                     # blocks of the full-size cache
        s = replay_kv(ReplayConfig(trace="mooncake-synthetic", model="tiny-gqa", l3=str(tmp_path / "s"),
                                   l3_capacity=cap * BLOCK, dry_run=True, sample_keys=rate,
                                   results=str(tmp_path)))
        held = int(cap * rate)                   # the sampled capacity in slots: a dry run has no spare slots
        assert s["tiers"]["l3"]["capacity_blocks"] == held
        want = float(exact.hit_ratio(held / rate))
        assert abs(s["hit_ratio"] - want) < TOLERANCE, (rate, cap, s["hit_ratio"], want)
        assert s["blocks"] < synthetic.n_blocks * rate * 1.3 and s["requests"] == synthetic.n_requests


def test_sampled_summary_volumes_and_plan_dwpd_are_full_size(cli, tmp_path):
    full_cap = 10000 * BLOCK
    args = ["replay", "kv", "mooncake-synthetic", "--model", "tiny-gqa", "--l2", str(2000 * BLOCK),
            "--l3", str(tmp_path / "store"), "--l3-capacity", str(full_cap), "--dry-run", "--json"]
    full = _json(cli(*args, "--results", tmp_path / "full"))
    samp = _json(cli(*args, "--sample-keys", "0.1", "--results", tmp_path / "samp"))
    assert full["sample_rate"] == 1.0 and samp["sample_rate"] == 0.1
    l3 = samp["tiers"]["l3"]
    assert l3["capacity_bytes"] == full_cap and l3["simulated_capacity_bytes"] == full_cap // 10
    assert samp["tiers"]["l2"]["simulated_capacity_bytes"] == 200 * BLOCK
    for t in ("l2", "l3"):
        for k in ("read_bytes", "write_bytes"):
            assert samp["tiers"][t][f"full_{k}"] == pytest.approx(samp["tiers"][t][k] / 0.1)
            assert full["tiers"][t][f"full_{k}"] == full["tiers"][t][k]
    # the full-size estimate of the L3 write volume is close to the unsampled replay's
    assert l3["full_write_bytes"] == pytest.approx(full["tiers"]["l3"]["write_bytes"], rel=0.1)
    assert abs(samp["hit_ratio"] - full["hit_ratio"]) < TOLERANCE
    run = json.loads((Path(samp["run_dir"]) / "run.json").read_text())["config"]
    assert run["sample_rate"] == 0.1 and run["modelled_capacity_bytes"]["l3"] == full_cap
    assert run["tiers"]["l3"]["capacity_bytes"] == full_cap // 10
    # plan --run: DWPD from the full-size volume over the modelled capacity, close to the unsampled run's
    pl = {}
    for name, s in (("full", full), ("samp", samp)):
        pl[name] = _json(cli("plan", "--trace", "mooncake-synthetic", "--model", "tiny-gqa", "--run",
                             s["run_dir"], "--json"))
    # the run's measured volume is reported at full size; the plan's steady state is the trace's, so a sampled
    # and an unsampled replay give the same plan
    m = pl["samp"]["measured"]
    assert m["l3_write_bytes"] == pytest.approx(l3["full_write_bytes"]) and m["l3_capacity_bytes"] == full_cap
    assert pl["samp"]["dwpd"] == pytest.approx(pl["full"]["dwpd"], rel=1e-9)
    assert pl["samp"]["capacity_curve"] == pl["full"]["capacity_curve"]


def test_sampled_real_replay_marks_load_times_and_estimates_full_ones(cli, tmp_path):
    import shutil
    import subprocess

    d = tmp_path                      # O_DIRECT needs a device-backed filesystem, not tmpfs
    if subprocess.run(["stat", "-f", "-c", "%T", str(d)], capture_output=True, text=True).stdout.strip() == "tmpfs":
        d = Path("/var/tmp") / f"kvbench-sampling-{tmp_path.name}"
        d.mkdir(exist_ok=True)
    try:
        s = _json(cli("replay", "kv", "mooncake-synthetic", "--model", "tiny-gqa", "--l2", str(400 * BLOCK),
                      "--l3", str(d / "store"), "--l3-capacity", str(4000 * BLOCK), "--sample-keys", "0.05",
                      "--closed-loop", "--max-requests", "800", "--verify", "all", "--json",
                      "--results", tmp_path))
        assert s["status"] == "complete" and s["verify_errors"] == 0 and s["verify_checked"] > 0
        assert (d / "store").stat().st_size <= 200 * BLOCK + (64 << 20)      # the store is the scaled size
        import pandas as pd

        df = pd.read_csv(Path(s["run_dir"]) / "requests.csv")
        hit = df[(df["hit_blocks"] > 0) & df["load_ms"].notna()]
        assert len(hit) > 10
        est = hit["full_hits_est"].to_numpy()
        assert np.all(est >= hit["hit_blocks"]) and np.all(est <= hit["full_blocks"])
        np.testing.assert_allclose(hit["full_load_ms_est"], hit["load_ms"] * est / hit["hit_blocks"], rtol=1e-3,
                                   atol=1e-3)
        fl = s["sampling"]["full_load_time_ms_est"]
        assert fl["p50"] is not None and fl["p50"] >= s["load_time_ms"]["p50"]
        assert "sampled blocks only" in s["sampling"]["load_time_ms"]
        # check (load vs recompute) still reads the run: per-tier hit columns unchanged, no phantom tiers
        from kvbench.analysis.recompute import read_run

        m = read_run(s["run_dir"])
        assert set(m.hits.hit_blocks) == {"l1", "l2", "l3", "l4"}
        # ... and judges hits at full size: hit lengths / rate, the full-request load time estimate
        assert m.hits.sample_rate == 0.05 and any("key-sampled" in n for n in m.notes)
        full = m.hits.full_size()
        sampled_hits = sum(m.hits.hit_blocks.values())
        full_hits = sum(full.hit_blocks.values())
        assert np.all(full_hits >= sampled_hits) and np.all(full_hits <= m.hits.full_blocks)
        np.testing.assert_array_equal(full.blocks, m.hits.full_blocks)
    finally:
        if d != tmp_path:
            shutil.rmtree(d, ignore_errors=True)


def test_a_tier_scaled_below_one_block_is_a_one_line_error(cli, tmp_path):
    r = cli("replay", "kv", "mooncake-sample", "--model", "tiny-gqa", "--l2", str(50 * BLOCK), "--dry-run",
            "--sample-keys", "0.01", "--results", tmp_path)
    assert r.exit_code == 2
    assert "--l2" in r.output and "--sample-keys 0.01" in r.output and "Traceback" not in r.output


def test_rate_lands_the_store_at_the_knee_of_the_exact_curve(synthetic):
    from kvbench.analysis.curves import capacity as cap
    from kvbench.analysis.curves.profile import exact_profile
    from kvbench.analysis.curves.miniature import choose_sample_rate

    block = 64 << 20
    knee = cap.knee(cap.HitCurve.from_profile(exact_profile(synthetic), block_bytes=block))
    assert knee == pytest.approx(14417, abs=1)                  # llama-3.1-8b blocks: ~0.9 TiB at the knee
    for store_blocks in (16, 180, 241, 1024):
        c = choose_sample_rate(synthetic, block_bytes=block, l3_bytes=store_blocks * block, l2_bytes=32 * block)
        assert c.knee_blocks == knee and c.store_blocks == store_blocks
        assert c.rate * knee <= store_blocks < (c.rate * 1.01) * knee        # 3 digits, rounded down
        # replay kv floors modelled x rate to whole slots: exactly the device sizes come back
        assert int(c.modelled_l3_bytes * c.rate) // block == store_blocks
        assert int(c.modelled_l2_bytes * c.rate) // block == 32
        assert f"{c.rate:g}" in c.reason and "knee" in c.reason
    c = choose_sample_rate(synthetic, block_bytes=block, l3_bytes=20000 * block, l2_bytes=32 * block)
    assert c.rate == 1.0 and c.modelled_l3_bytes == 20000 * block and "no key sampling" in c.reason


def test_run_replays_the_whole_synthetic_trace_key_sampled_at_the_knee(tmp_path, cli, monkeypatch):
    """The default job: the full synthetic trace, replay kv given the knee-sized capacities and the rate that
    maps them onto the sized store (steps stubbed: this checks the wiring, the replay is tested above)."""
    import kvbench.qualify.steps as steps
    from kvbench.qualify.steps import StepResult

    argvs = {}

    def fake(name, argv, **kw):
        argvs[name] = list(argv)
        return StepResult(name, tuple(argv), 1, 0.01, None, f"{name}: not run in this test")

    monkeypatch.setattr(steps, "run_step", fake)
    monkeypatch.chdir(tmp_path)
    r = cli("run", "--trace", "mooncake-synthetic", "--l2", "1GiB", "--l3-capacity", "12GiB", "--retentions", "",
            "-o", tmp_path / "r.html")
    assert r.exit_code == 1                                   # every step "failed": a partial job
    a = argvs["replay"]
    assert a[a.index("replay") + 2].endswith("mooncake-synthetic.jsonl.gz")
    rate = float(a[a.index("--sample-keys") + 1])
    assert rate == pytest.approx(192 / 14417, rel=0.01)       # 12 GiB = 192 blocks of 64 MiB, knee 14,417
    assert int(int(a[a.index("--l3-capacity") + 1]) * rate) // (64 << 20) == 192
    assert int(int(a[a.index("--l2") + 1]) * rate) // (64 << 20) == 16
    job = next((tmp_path / "results").iterdir())
    cfg = json.loads((job / "summary.json").read_text())["config"]
    assert cfg["sample_rate"] == rate and "knee" in cfg["sampling"]["reason"]
    assert "key sample rate" in r.output


def test_check_scales_a_sampled_runs_hits_to_full_size():
    """Hand case: rate 0.1, so 2 sampled L3 hit blocks stand for 20; 5 would be 50, capped at the request's 40."""
    from kvbench.analysis.recompute import RunHits

    h = RunHits({"l2": np.array([0, 0, 1]), "l3": np.array([0, 2, 4])}, np.array([np.nan, 0.01, 0.02]), None,
                np.array([1, 3, 5]), sample_rate=0.1, full_blocks=np.array([10, 30, 40]),
                full_load_s=np.array([np.nan, 0.1, 0.35]))
    f = h.full_size()
    assert f.hit_blocks["l3"].tolist() == [0, 20, 32] and f.hit_blocks["l2"].tolist() == [0, 0, 8]
    assert f.blocks.tolist() == [10, 30, 40] and f.load_s[1:].tolist() == [0.1, 0.35]
    unsampled = RunHits({"l3": np.array([1])}, None, None, np.array([2]))
    assert unsampled.full_size() is unsampled


# --- compaction: a whole-trace analysis of a long sampled stream holds only the sampled requests -------------
GEN = "gen:chat,duration=3h,rate=5,seed=2,sample=0.05"


def test_compaction_keeps_the_sampled_requests_batch_ends_and_the_whole_streams_totals():
    from kvbench.stream.sampling import REQUEST, request_index, whole

    full = read_trace(GEN, batch_requests=4000)
    comp = read_trace(GEN, compact=True, batch_requests=4000)
    per = np.diff(full.offsets)
    n = full.n_requests
    ends = {0, n - 1} | {i for i in range(0, n, 4000)} | {min(n, i + 4000) - 1 for i in range(0, n, 4000)}
    expect = np.array(sorted(set(np.flatnonzero(per > 0).tolist()) | ends))
    np.testing.assert_array_equal(comp.extras[REQUEST], expect)
    np.testing.assert_array_equal(request_index(comp), expect)
    np.testing.assert_array_equal(request_index(full), np.arange(n))
    # every kept request is the original one: time, lengths, its sampled keys in order
    np.testing.assert_array_equal(comp.timestamp_s, full.timestamp_s[expect])
    np.testing.assert_array_equal(comp.input_tokens, full.input_tokens[expect])
    np.testing.assert_array_equal(comp.extras[FULL_BLOCKS], full.extras[FULL_BLOCKS][expect])
    np.testing.assert_array_equal(comp.keys, full.keys)
    np.testing.assert_array_equal(np.diff(comp.offsets), per[expect])
    assert comp.duration_s == full.duration_s
    # the whole stream's totals, counted on the uncompacted read
    assert whole(comp) == whole(full) == {
        "requests": n, "input_tokens": int(full.input_tokens.sum()), "output_tokens": int(full.output_tokens.sum()),
        "blocks": int(full.extras[FULL_BLOCKS].sum())}
    # the memory bound: at most one request per sampled reference, plus two per batch
    assert comp.n_requests <= comp.n_blocks + 2 * int(np.ceil(n / 4000))
    assert comp.n_requests < n


def test_compaction_leaves_an_unsampled_trace_whole():
    a, b = read_trace("gen:chat,duration=20m,rate=2,seed=1"), read_trace("gen:chat,duration=20m,rate=2,seed=1",
                                                                         compact=True)
    assert "whole" not in b.meta and b.n_requests == a.n_requests
    np.testing.assert_array_equal(a.offsets, b.offsets)


def test_compaction_refuses_a_trace_that_is_not_key_sampled(synthetic):
    from kvbench.errors import UsageError
    from kvbench.stream.sampling import compact

    with pytest.raises(UsageError, match="key-sampled"):
        compact(synthetic)


def test_a_plan_of_the_compacted_stream_equals_the_plan_of_the_whole_one():
    """Retention, the write-policy simulation, a deployment and the loading-wins bill read the same numbers
    from either form; a warm-up (a fraction of the whole stream's requests) ends at the first kept request, so
    it may leave out the full blocks of a few dropped requests more: hit ratios agree to 1e-3."""
    from kvbench.analysis.cost import load_prices
    from kvbench.analysis.deployment import parse_deployment
    from kvbench.analysis.plan import PlanOptions, build_plan
    from kvbench.analysis.recompute import parse_tier
    from kvbench.spec.models import load_model

    spec = load_model("llama-3.1-8b")
    outs, warm = [], []
    for compact in (False, True):
        tr = read_trace(GEN, compact=compact, batch_requests=4000)
        opts = PlanOptions(waf=1.5, retention_s=600, load_tier=parse_tier("l3=2GB/s,100us"),
                           deployment=parse_deployment("gpus=8,drives=4,drive_capacity=3.84TB,utilization=0.5"))
        for warmup, into in ((0.0, outs), (0.3, warm)):
            o = build_plan(tr, block_bytes=spec.block_bytes(tr.block_tokens), prices=load_prices(), tokens_per_s=2e4,
                           options=replace(opts, warmup=warmup), model=spec.name, kv=spec,
                           bytes_per_token=spec.stored_bytes_per_token(tr.block_tokens))
            o.pop("source")
            into.append(o)
    assert outs[0]["write_policies"]["back"]["l3_write_blocks"] > 0
    assert outs[0]["deployment"]["requests_per_s"] > 0
    assert outs[0]["usd_per_day_loading_wins"] is not None          # per-request hit lengths (trailing empties)
    assert json.dumps(outs[0], sort_keys=True, default=str) == json.dumps(outs[1], sort_keys=True, default=str)
    a, b = ([r["hit_ratio"] for r in w["capacity_curve"]] for w in warm)
    assert a != [r["hit_ratio"] for r in outs[0]["capacity_curve"]]        # the warm-up is applied
    np.testing.assert_allclose(a, b, atol=1e-3)


def test_a_key_sampled_streams_curve_is_the_shards_estimate_of_the_whole_stream():
    """gen:...,sample=r is a fixed-rate SHARDS sample (same hash, same keys): its curve, read whole or streamed,
    equals shards_profile of the whole stream at r, SHARDS_adj included; uncorrected, the sampled shared system
    prompts would count their hits 1/r times over."""
    from kvbench.analysis.curves.profile import exact_profile, shards_profile, stream_profile
    from kvbench.stream.traces import iter_trace

    whole_stream = read_trace(GEN.rsplit(",sample=", 1)[0])
    ref = shards_profile(whole_stream, rate=0.05)
    caps = np.unique(np.geomspace(1, 4 * ref.max_distance, 60).astype(int))
    exact = exact_profile(whole_stream).hit_ratio(caps)
    for prof in (exact_profile(read_trace(GEN)), exact_profile(read_trace(GEN, compact=True)),
                 stream_profile(iter_trace(GEN))[0]):
        assert prof.method == "key-sampled" and prof.sample_rate == 0.05
        assert prof.references == whole_stream.n_blocks
        np.testing.assert_allclose(prof.hit_ratio(caps), ref.hit_ratio(caps), atol=1e-12)
    # the estimate is near the exact curve of the whole stream; without the adjustment it is far above it
    sampled = read_trace(GEN)
    raw = exact_profile(replace(sampled, extras={}))          # the same sample read as a plain trace
    assert abs(ref.infinite_hit_ratio - exact[-1]) < 0.03
    assert raw.infinite_hit_ratio - exact[-1] > max(0.05, 3 * abs(ref.infinite_hit_ratio - exact[-1]))
    # sampling the sample (unsalted, the same hash) keeps the keys under the smaller rate
    both = stream_profile(iter_trace(GEN), rate=0.5)[0]
    np.testing.assert_allclose(both.hit_ratio(caps), ref.hit_ratio(caps), atol=1e-12)
    finer = stream_profile(iter_trace(GEN), rate=0.02)[0]
    np.testing.assert_allclose(finer.hit_ratio(caps), shards_profile(whole_stream, rate=0.02).hit_ratio(caps),
                               atol=1e-12)
    np.testing.assert_allclose(shards_profile(sampled, rate=0.02).hit_ratio(caps), finer.hit_ratio(caps), atol=1e-12)


def test_mrc_of_a_key_sampled_stream_reports_the_whole_stream(cli):
    a = _json(cli("mrc", GEN, "--points", "8", "--json"))
    b = _json(cli("mrc", GEN.rsplit(",sample=", 1)[0], "--sample", "0.05", "--points", "8", "--json"))
    assert a["references"] == b["references"]
    assert a["infinite_hit_ratio"] == pytest.approx(b["infinite_hit_ratio"], abs=1e-12)
    r = cli("mrc", GEN, "--sample-size", "100")
    assert r.exit_code != 0 and "fixed size" in r.output and "Traceback" not in r.output


def test_replay_of_a_key_sampled_stream_is_a_miniature_with_full_size_estimates(cli, tmp_path):
    """gen:...,sample=F replays as --sample-keys F (tiers at capacity x F); its hit ratio is the SHARDS_adj
    estimate: 1 - (sampled misses / F) / the full stream's references, near the full replay's, where the
    sample's own per-block ratio is far above it (a sampled shared system prompt)."""
    whole_spec, rate = "gen:chat,duration=1h,rate=5,seed=1", 0.05
    args = ("--model", "tiny-gqa", "--l2", "64MiB", "--dry-run", "--json", "--results", str(tmp_path))
    keyed = _json(cli("replay", "kv", f"{whole_spec},sample={rate}", *args))
    flag = _json(cli("replay", "kv", whole_spec, "--sample-keys", str(rate), *args))
    full = _json(cli("replay", "kv", whole_spec, *args))
    assert keyed["sample_rate"] == flag["sample_rate"] == rate
    for k in ("blocks", "hit_blocks", "hit_ratio", "sampled_hit_ratio"):
        assert keyed[k] == flag[k], k
    assert keyed["tiers"]["l2"]["simulated_capacity_bytes"] == int((64 << 20) * rate)
    # the estimate, recomputed from the counts: misses / rate against the full references
    s = keyed["sampling"]
    assert s["full_blocks"] == full["blocks"]
    assert s["reference_excess"] == pytest.approx(keyed["blocks"] / (rate * full["blocks"]))
    assert s["reference_excess"] > 1.5 and s["hit_ratio_estimator"] == "adjusted"
    assert s["hit_ratio_adjusted"] == keyed["hit_ratio"]
    misses = keyed["blocks"] - keyed["hit_blocks"]
    assert keyed["hit_ratio"] == pytest.approx(1 - misses / rate / full["blocks"])
    assert keyed["tiers"]["l2"]["hit_ratio"] == pytest.approx(keyed["hit_ratio"])          # one tier: the same
    assert s["adjustment_blocks"] == pytest.approx(full["blocks"] - keyed["blocks"] / rate)
    assert abs(keyed["hit_ratio"] - full["hit_ratio"]) < 0.03
    assert keyed["sampled_hit_ratio"] - full["hit_ratio"] > 0.1
    # the terminal says which estimate it prints
    text = cli("replay", "kv", f"{whole_spec},sample={rate}", *args[:-3], "--results", str(tmp_path)).output
    assert f"hit ratio {keyed['hit_ratio']:.3f}" in text and "by SHARDS_adj" in text
    assert f"the sample's own {keyed['sampled_hit_ratio']:.3f}" in text
    # the rate is given once
    r = cli("replay", "kv", f"{whole_spec},sample={rate}", "--sample-keys", "0.1", *args)
    assert r.exit_code != 0 and "already a key sample" in r.output and "Traceback" not in r.output
    r = cli("replay", "kv", f"{whole_spec},sample={rate}", "--sample-seed", "3", *args)
    assert r.exit_code != 0 and "--sample-seed" in r.output and "Traceback" not in r.output


def test_a_sampled_multi_tier_replay_counts_the_adjustment_in_the_first_tier(cli, tmp_path):
    rate = 0.05
    out = _json(cli("replay", "kv", f"gen:chat,duration=1h,rate=5,seed=1,sample={rate}", "--model", "tiny-gqa",
                    "--l1", "8MiB", "--l2", "64MiB", "--dry-run", "--json", "--results", str(tmp_path)))
    full, adj = out["sampling"]["full_blocks"], out["sampling"]["adjustment_blocks"]
    assert out["sampling"]["hit_ratio_estimator"] == "adjusted"
    l1, l2 = out["tiers"]["l1"], out["tiers"]["l2"]
    assert l1["hit_ratio"] == pytest.approx(max(0.0, (l1["hit_blocks"] / rate + adj) / full))
    assert l2["hit_ratio"] == pytest.approx(l2["hit_blocks"] / rate / full)
    assert l1["sampled_hit_ratio"] == pytest.approx(l1["hit_blocks"] / out["blocks"])
    if l1["hit_blocks"] / rate + adj >= 0:
        assert l1["hit_ratio"] + l2["hit_ratio"] == pytest.approx(out["hit_ratio"])


def test_a_representative_sample_keeps_its_own_hit_ratio(cli, tmp_path):
    """On the shipped synthetic trace the sample holds about its share of the references: the reported hit
    ratio is the sample's per-block one; the SHARDS_adj estimate is beside it."""
    out = _json(cli("replay", "kv", "mooncake-synthetic", "--model", "tiny-gqa", "--l2", "1GiB", "--sample-keys",
                    "0.05", "--dry-run", "--json", "--results", str(tmp_path)))
    s = out["sampling"]
    assert 1 / 1.5 < s["reference_excess"] < 1.5 and s["hit_ratio_estimator"] == "ratio"
    assert out["hit_ratio"] == pytest.approx(out["hit_blocks"] / out["blocks"])
    assert out["tiers"]["l2"]["hit_ratio"] == pytest.approx(out["tiers"]["l2"]["hit_blocks"] / out["blocks"])
    misses = out["blocks"] - out["hit_blocks"]
    assert s["hit_ratio_adjusted"] == pytest.approx(1 - misses / 0.05 / s["full_blocks"])
    assert s["full_blocks"] == read_trace("mooncake-synthetic").n_blocks


def test_the_sample_threshold_is_rate_times_the_hash_space():
    """Pinned thresholds, and the share of distinct keys a rate keeps within 5 sigma of the rate (a binomial
    over 200,000 random keys): computed apart from the hash's users, which share the threshold."""
    from kvbench.stream.sampling import threshold

    assert int(threshold(0.5)) == 2**63 and int(threshold(0.25)) == 2**62
    assert int(threshold(1.0)) == 2**64 - 1 and int(threshold(1e-9)) == int(1e-9 * 2.0**64)
    keys = np.random.default_rng(5).integers(0, 2**63, 200_000, dtype=np.int64).astype(np.uint64)
    for rate in (0.01, 0.1, 0.5):
        share = key_mask(keys, rate).mean()
        assert abs(share - rate) < 5 * np.sqrt(rate * (1 - rate) / keys.size), (rate, share)
    assert key_mask(keys, 1.0).all()
    from kvbench.stream.chain import splitmix64

    # unsalted by default: the hash of the key itself, as SHARDS's default salt
    np.testing.assert_array_equal(key_mask(keys, 0.1), splitmix64(keys) < threshold(0.1))
    assert not np.array_equal(key_mask(keys, 0.1), key_mask(keys, 0.1, seed=1))


def test_one_sampling_hash_in_every_form():
    """The key-sampling rule lives in stream/sampling.py: its compiled filter (sampled_indices, SHARDS' spatial
    sample in curves.sampled_trace) keeps exactly the references key_mask keeps, salted or not, at every rate; the
    compiled splitmix64 (kvbench.kernels) is the array one (kvbench.stream.chain), on keys with the top bit set
    too; and there is one threshold function."""
    from kvbench import kernels
    from kvbench.analysis.curves import profile as curves
    from kvbench.stream.chain import splitmix64
    from kvbench.stream.sampling import sampled_indices
    from kvbench.stream.traces import Trace

    keys = np.random.default_rng(11).integers(0, 2**64 - 1, 50_000, dtype=np.uint64)
    keys[:3] = [0, 2**63, 2**64 - 1]
    for i in (0, 1, 2, 17, 49_999):
        assert int(kernels.splitmix64(keys[i])) == int(splitmix64(keys[i:i + 1])[0])
    for rate in (1e-3, 0.1, 0.5, 0.999999, 1.0):
        for seed in (0, 7, 2**63 + 5):
            got = sampled_indices(keys, rate, seed)
            assert got.dtype == np.int64
            np.testing.assert_array_equal(got, np.flatnonzero(key_mask(keys, rate, seed)))
    offsets = np.array([0, 10_000, 30_000, 50_000], dtype=np.int64)
    t = Trace(np.array([0.0, 1.0, 2.0]), np.array([10, 20, 20]), np.zeros(3, np.int64), offsets, keys, 1,
              "mooncake", "t", {})
    sampled, n = curves.sampled_trace(t, 0.1, salt=3)
    kept = key_mask(keys, 0.1, 3)
    assert n == kept.sum() and np.array_equal(sampled.keys, keys[kept])
    assert sampled.offsets.tolist() == [0, kept[:10_000].sum(), kept[:30_000].sum(), kept.sum()]
    assert not hasattr(curves, "_threshold")


def test_key_sample_rate_is_known_only_for_a_stream_that_states_it(synthetic):
    from kvbench.stream.sampling import key_sample_rate

    assert key_sample_rate(read_trace(GEN)) == 0.05
    assert key_sample_rate(read_trace(GEN.rsplit(",sample=", 1)[0])) == 1.0
    assert key_sample_rate(synthetic) == 1.0
    assert key_sample_rate(sample_keys(synthetic, 0.1)) == 1.0        # a file's sample: its meta states no rate


def test_salted_shards_of_a_plain_trace_streams_as_it_reads_whole(synthetic):
    from kvbench.analysis.curves.profile import shards_profile, stream_profile
    from kvbench.stream.traces import iter_trace

    caps = np.geomspace(10, 40000, 25)
    for salt in (0, 3):
        a = shards_profile(synthetic, rate=0.05, salt=salt)
        b = stream_profile(iter_trace("mooncake-synthetic", batch_requests=1000), rate=0.05, salt=salt)[0]
        assert a.sample_rate == b.sample_rate == 0.05
        np.testing.assert_allclose(a.hit_ratio(caps), b.hit_ratio(caps), atol=1e-12)


def test_compact_by_hand():
    """Six requests (offsets starting at 2: the keys before are not the trace's), full block counts given:
    kept are the first and last request and those holding a key; totals and indices counted by hand."""
    from kvbench.stream.sampling import FULL_BEFORE, REQUEST, compact, compact_batches, full_references_from, whole
    from kvbench.stream.traces import Trace

    t = Trace(timestamp_s=np.arange(6.0), input_tokens=np.array([10, 20, 30, 40, 50, 60]),
              output_tokens=np.array([1, 2, 3, 4, 5, 6]), offsets=np.array([2, 2, 4, 4, 4, 5, 5]),
              keys=np.array([99, 98, 7, 8, 9], dtype=np.uint64), block_tokens=16, fmt="x", path="x",
              extras={FULL_BLOCKS: np.array([3, 5, 2, 4, 6, 1])}, meta={"sample_rate": 0.5})
    c = compact(t, first_request=100, full_before=1000)
    assert c.extras[REQUEST].tolist() == [100, 101, 104, 105]
    assert c.offsets.tolist() == [2, 2, 4, 5, 5]
    assert c.keys[c.offsets[1]:c.offsets[2]].tolist() == [7, 8] and c.keys[c.offsets[2]:c.offsets[3]].tolist() == [9]
    assert c.timestamp_s.tolist() == [0.0, 1.0, 4.0, 5.0] and c.input_tokens.tolist() == [10, 20, 50, 60]
    assert c.extras[FULL_BLOCKS].tolist() == [3, 5, 6, 1]
    assert c.extras[FULL_BEFORE].tolist() == [1000, 1003, 1014, 1020]
    assert whole(c) == {"requests": 6, "input_tokens": 210, "output_tokens": 21, "blocks": 21}
    assert whole(t) == whole(c)
    # references of the whole stream from a request on: uncompacted, the full counts from it; compacted, the
    # stream's total less what came before it (this batch alone: before = 0)
    assert full_references_from(t, 2) == 2 + 4 + 6 + 1 and full_references_from(t, 6) == 0
    c0 = compact(t)
    assert c0.extras[REQUEST].tolist() == [0, 1, 4, 5] and c0.extras[FULL_BEFORE].tolist() == [0, 3, 14, 20]
    assert full_references_from(c0, 2) == 21 - 14 and full_references_from(c0, 4) == 0
    # compacting again keeps the indices, the totals and the references before
    cc = compact(c)
    assert cc.extras[REQUEST].tolist() == [100, 101, 104, 105] and whole(cc) == whole(c)
    assert cc.extras[FULL_BEFORE].tolist() == [1000, 1003, 1014, 1020]
    # two batches: totals summed, indices and references-before running on
    j = compact_batches([t, t])
    assert j.extras[REQUEST].tolist() == [0, 1, 4, 5, 6, 7, 10, 11]
    assert j.extras[FULL_BEFORE].tolist() == [0, 3, 14, 20, 21, 24, 35, 41]
    assert whole(j) == {"requests": 12, "input_tokens": 420, "output_tokens": 42, "blocks": 42}
    assert full_references_from(j, 5) == 42 - 24
