"""Spatial key sampling (miniature simulation): the sample itself, prefix residency under it, sampled replays
against the exact curve of the shipped full Mooncake trace, full-size volumes in summary.json and plan --run."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from kvbench.replay.kv import ReplayConfig, replay_kv
from kvbench.stream.sampling import FULL_BLOCKS, key_mask, sample_keys
from kvbench.stream.traces import builtin_traces, read_trace

BLOCK = 262144          # tiny-gqa: 512 B/token x 512-token Mooncake blocks (slot = block)
REPO = Path(__file__).resolve().parents[1]


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
    from kvbench.analysis.curves import sampled_trace

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
    from kvbench.analysis.curves import exact_profile

    exact = exact_profile(synthetic)
    for cap in (2000, 5000, 10000, 20000):                     # blocks of the full-size cache
        s = replay_kv(ReplayConfig(trace="mooncake-synthetic", model="tiny-gqa", l3=str(tmp_path / "s"),
                                   l3_capacity=cap * BLOCK, dry_run=True, sample_keys=rate,
                                   results=str(tmp_path)))
        slots = int(cap * rate)                  # the store's slots; its spare ones come out of the capacity
        held = slots - min(64, slots // 16)
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
    from kvbench.analysis import capacity as cap
    from kvbench.analysis.curves import exact_profile
    from kvbench.analysis.miniature import choose_sample_rate

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
    r = cli("run", "--l2", "1GiB", "--l3-capacity", "12GiB", "--retentions", "", "-o", tmp_path / "r.html")
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
