"""Engram replay: page packing and read amplification, deadline accounting, the table on a real file with
verify on read, and the ``kvbench replay engram`` command (bad input fails in one line before any I/O)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from kvbench.errors import TargetError, UsageError
from kvbench.replay import engram as R
from kvbench.stream.engram import EngramHasher, EngramSpec
from tests.conftest import REPO, FIXTURES

TEXT = FIXTURES / "text" / "mobydick_slice.txt"
TINY_TOML = """layer_ids = [1, 3]
max_ngram = 3
heads_per_order = 2
rows_per_head = 5000
dims_per_head = 80
dtype = "bf16"
pad_id = 2
backbone_layers = 4
"""


@pytest.fixture
def tiny_preset(tmp_path) -> str:
    p = tmp_path / "tiny-engram.toml"
    p.write_text(TINY_TOML)
    return str(p)


def _spec(rows=(10, 12), dims=80) -> EngramSpec:
    return EngramSpec(name="t", layer_ids=(0, 5), max_ngram=3, heads_per_order=2, rows_per_head=rows,
                      dims_per_head=dims, dtype="bf16")


def test_read_amplification_arithmetic():
    # 10 pages of 4 KiB serving 25 rows of 160 B: 40960 / 4000
    assert R.read_amplification(10, 4096, 25, 160) == pytest.approx(10.24)
    # one 160 B row per 4 KiB page is the worst case for hash order
    assert R.read_amplification(7, 4096, 7, 160) == pytest.approx(25.6)
    assert np.isnan(R.read_amplification(0, 4096, 0, 160))


def test_hash_layout_pages_and_layer_alignment():
    h = EngramHasher.build(_spec(rows=(100, 100)), vocab_size=50, pad_id=0)
    lay = R.make_layout("hash", h, 4096)
    assert lay.rows_per_page == 25 and lay.extent == 4096
    lo0, hi0 = h.layer_row_range(0)
    lo1, hi1 = h.layer_row_range(1)
    n0 = -(-(hi0 - lo0) // 25)
    assert lay.layer_page0.tolist() == [0, n0, n0 + -(-(hi1 - lo1) // 25)]
    assert lay.pages(np.array([0, 24, 25, hi0 - 1, lo1, lo1 + 25])).tolist() == [0, 0, 1, (hi0 - 1) // 25, n0, n0 + 1]
    assert lay.total_bytes == lay.layer_page0[-1] * 4096


def test_hot_first_layout_is_a_bijection_with_hot_rows_first():
    h = EngramHasher.build(_spec(rows=(40, 40)), vocab_size=50, pad_id=0)
    lo1, hi1 = h.layer_row_range(1)
    hot = np.array([lo1 + 7, 3, lo1 + 2, 100, 5])          # popularity order, both layers mixed
    lay = R.make_layout("hot-first", h, 4096, hot)
    all_rows = np.arange(h.total_rows)
    layer, slot = lay.slots(all_rows)
    for li in (0, 1):
        lo, hi = h.layer_row_range(li)
        s = slot[layer == li]
        assert sorted(s.tolist()) == list(range(hi - lo))   # every row of the layer gets its own slot
    assert lay.slots(np.array([3, 100, 5]))[1].tolist() == [0, 1, 2]
    assert lay.slots(np.array([lo1 + 7, lo1 + 2]))[1].tolist() == [0, 1]
    # cold rows keep hash order after the 3 hot rows of layer 0: rows 0, 1, 2 -> 3, 4, 5; row 4 (3 is hot) -> 6
    assert lay.slots(np.array([0, 1, 2, 4]))[1].tolist() == [3, 4, 5, 6]


def test_rows_larger_than_a_page_span_pages():
    h = EngramHasher.build(_spec(rows=(10, 10), dims=4096), vocab_size=50, pad_id=0)   # 8 KiB rows
    lay = R.make_layout("hash", h, 4096)
    assert lay.pages_per_row == 2 and lay.extent == 8192
    assert lay.pages(np.array([0, 1, 2])).tolist() == [0, 2, 4]
    assert R.read_amplification(3, lay.extent, 3, h.spec.row_bytes) == pytest.approx(1.0)


def test_deadline_accounting_hand_computed():
    t = R.step_timing(steps=np.array([10, 11, 12]), io_step=np.array([10, 10, 10, 11, 11]),
                      io_layer=np.array([0, 0, 1, 0, 1]), submit_ns=np.array([100, 105, 110, 1000, 1000]),
                      complete_ns=np.array([300, 500, 900, 1200, 1600]), n_layers=2,
                      windows_ns=np.array([450.0, 700.0]))
    assert t.fetch_ns.tolist() == [[400, 800], [200, 600], [0, 0]]
    assert t.step_fetch_ns.tolist() == [800, 600, 0]
    assert t.layer_missed.tolist() == [[False, True], [False, False], [False, False]]
    assert t.window_miss_ratio == pytest.approx(1 / 3)
    # layer 0 starts at 450 (rows at 400: no wait), layer 1 at 700 but rows at 800: 100 ns stall in step 10
    assert t.stall_ns.tolist() == [100, 0, 0]
    # stalls add up: layer 0 waits 50 (rows at 500, start 450), so layer 1 starts at 750 and waits 50 more
    assert R.stall_ns(np.array([[500, 800]]), np.array([450.0, 700.0])).tolist() == [100]
    assert R.stall_ns(np.array([[500, 720]]), np.array([450.0, 700.0])).tolist() == [50]
    assert R.step_timing(np.array([1]), np.array([1]), np.array([0]), np.array([0]), np.array([5]), 1,
                         None).window_miss_ratio is None


def test_workload_reads_are_the_unique_pages_of_missed_rows(tiny_preset):
    cfg = R.EngramReplayConfig(preset=tiny_preset, text=str(TEXT), batch=4, seq_len=128, dram=64 * 160,
                               policy="lru", layer_us=50.0, tokens=3000)
    w = R.build_workload(cfg)
    s = w.summary()
    assert s["rows_per_token"] == 8 and w.n_steps == 128 * (w.stream_stats["tokens_used"] // (4 * 128))
    assert w.layer_windows_ns().tolist() == [50e3, 150e3]
    miss = w.measure & ~w.hit
    for kind, lay in w.layouts.items():
        pages = lay.pages(w.access_row[miss])
        expect = {(int(st) * 2 + int(li), int(p)) for st, li, p in zip(w.access_step[miss], w.access_layer[miss], pages)}
        group, pg = w.reads[kind]
        assert set(zip(group.tolist(), pg.tolist())) == expect
        amp = len(expect) * lay.extent / (miss.sum() * 160)
        assert s["layouts"][kind]["read_amplification"] == pytest.approx(amp)
    # unique rows of a step: never more than tokens x rows per token
    per_step = np.bincount(w.access_step)
    assert per_step.max() <= 4 * 8
    assert 0 < s["dram_hit_ratio"] < 1


def test_table_written_once_and_verified_on_read(tiny_preset, tmp_path):
    from kvbench.engine import open_target, run_plan
    cfg = R.EngramReplayConfig(preset=tiny_preset, text=str(TEXT), batch=4, seq_len=128, window_us=1e8,
                               steps=150)   # a 100 s window: no step may miss it, even on a loaded VM
    w = R.build_workload(cfg)
    path = tmp_path / "table.bin"
    lay = w.layouts["hash"]
    try:
        tgt = open_target(str(path), size=lay.total_bytes, write=True)
    except TargetError as e:
        pytest.skip(f"no O_DIRECT file target here: {e}")
    try:
        out, hists, ts, res, facts = R.run_fetch(w, tgt, qd=8, verify="all")
    finally:
        tgt.close()
    assert facts["written"] and res.verify["mismatches"] == 0 and res.verify["checked"] == res.ios_by_op()["read"]
    step, _, _ = w.plan_arrays(max_steps=150)
    assert out["reads"] == step.size and out["timed_steps"] == 150 and out["window_miss_ratio"] == 0.0
    assert out["fetch_us"]["p99"] >= out["fetch_us"]["p50"] > 0

    tgt = open_target(str(path), size=lay.total_bytes, write=True)     # second run: the table is reused
    try:
        out2, _, _, _, facts2 = R.run_fetch(w, tgt, qd=8, verify="all")
    finally:
        tgt.close()
    assert not facts2["written"] and out2["reads"] == out["reads"]

    # corrupt the first page the plan reads (and page 0, which the freshness probe samples)
    plan, _, _ = R.read_plan(w, R.table_tag(w.spec, lay.total_bytes, lay.page))
    with open(path, "r+b") as f:
        for off in {0, int(plan["offset"][0])}:
            f.seek(off)
            f.write(b"\x5a" * 4096)
        f.flush()
        os.fsync(f.fileno())
    tgt = open_target(str(path), size=lay.total_bytes, write=True)
    try:
        tag = R.table_tag(w.spec, lay.total_bytes, lay.page)
        res = run_plan(plan[:1], [tgt], qd=1, verify="all", handle_signals=False)
        assert res.verify["mismatches"] == 1
        assert not R.table_is_current(tgt, lay.total_bytes, tag, "libaio", lay.extent)
    finally:
        tgt.close()


def test_cli_dry_run_and_dram_target(cli, tiny_preset, tmp_path):
    res = tmp_path / "results"
    r = cli("replay", "engram", "--preset", tiny_preset, "--text", TEXT, "--batch", 4, "--seq-len", 128,
            "--dram", "8KiB", "--dry-run", "--json", "--results", res)
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    for key in ("run_dir", "rows_per_token", "dram_hit_ratio", "read_amplification", "fetch_us",
                "window_miss_ratio", "iops"):
        assert key in d
    assert d["rows_per_token"] == 8 and d["fetch_us"] is None
    run = Path(d["run_dir"])
    assert json.loads((run / "summary.json").read_text())["status"] == "complete"
    curve = json.loads((run / "curve.json").read_text())
    assert set(curve) >= {"dram_bytes", "static", "lru", "lfu"}

    r = cli("replay", "engram", "--preset", tiny_preset, "--zipf", 1.1, "--tokens", 4096, "--batch", 4,
            "--seq-len", 256, "--target", "dram:16MiB", "--window-us", 5000, "--layout", "hot-first",
            "--json", "--results", res)
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["fetch_us"]["p99"] > 0 and d["iops"] > 0 and d["verify"]["mismatches"] == 0
    assert d["table"]["written"] and d["layout"] == "hot-first" and 0 <= d["window_miss_ratio"] <= 1
    assert (Path(d["run_dir"]) / "timeseries.csv").is_file()


@pytest.mark.parametrize("args, message", [
    (["--preset", "nope", "--zipf", "1.1", "--dry-run"], "unknown engram preset 'nope'"),
    (["--preset", "engram-27b", "--zipf", "1.1", "--target", "dram:64MiB"], "larger than the DRAM arena"),
    (["--preset", "engram-27b", "--zipf", "1.1", "--dram", "0", "--dry-run"], "--dram capacity must be > 0"),
    (["--preset", "engram-27b", "--zipf", "1.1", "--target", "dram:0"], "zero capacity"),
    (["--preset", "engram-27b", "--zipf", "1.1", "--scale-to", "0", "--dry-run"], "--scale-to capacity must be > 0"),
    (["--preset", "engram-27b", "--zipf", "1", "--text", "x.txt", "--dry-run"], "both given"),
    (["--preset", "engram-27b", "--zipf", "1.1"], "no --target"),
    (["--preset", "engram-27b", "--zipf", "1.1", "--window-us", "5", "--layer-us", "5", "--dry-run"], "more than one of"),
    (["--preset", "engram-27b", "--text", "/nonexistent.txt", "--dry-run"], "text file not found"),
])
def test_cli_bad_input_one_line_before_io(cli, tmp_path, args, message):
    res = tmp_path / "results"
    r = cli("replay", "engram", *args, "--results", res)
    assert r.exit_code == 2, r.output
    assert r.output.count("\n") == 1 and message in r.output and "Traceback" not in r.output
    assert not res.exists()                 # nothing written: the error came before any I/O


def test_table_larger_than_file_space_is_refused(tmp_path):
    with pytest.raises(TargetError, match="larger than the free space"):
        R.check_fits(1 << 62, str(tmp_path / "t.bin"))
    with pytest.raises(UsageError, match="does not exist"):
        R.check_fits(1, str(tmp_path / "nodir" / "t.bin"))


def test_layer_needs_by_hand():
    # 3 steps; Engram layers 1 and 15 due at 10 us and 150 us; 4 KiB reads
    reads = np.array([[20, 40], [10, 10], [30, 0]])
    out = R.layer_needs(reads, np.array([10e3, 150e3]), 4096, (1, 15))
    l1, l15 = out["layer_needs"]["1"], out["layer_needs"]["15"]
    # layer 1: its own reads by 10 us: 2M, 1M, 3M IOPS
    assert l1["iops_own"]["mean"] == pytest.approx(2e6) and l1["iops_cumulative"] == l1["iops_own"]
    assert l1["iops_own"]["p99"] == pytest.approx(np.percentile([2e6, 1e6, 3e6], 99))
    # layer 15: its own 40, 10, 0 reads by 150 us; with layer 1's first (earlier deadline): 60, 20, 30
    assert l15["iops_own"]["mean"] == pytest.approx(50 / 3 / 150e-6)
    assert l15["iops_cumulative"]["mean"] == pytest.approx(110 / 3 / 150e-6)
    assert l15["window_us"] == pytest.approx(150.0)
    # the device must meet the larger cumulative rate: layer 1's (3M p99-ish vs 0.4M)
    assert out["binding_layer"] == 1
    assert out["iops_needed"] == l1["iops_cumulative"]
    assert out["bytes_per_s_needed"]["mean"] == pytest.approx(2e6 * 4096)
    # a later layer binds when the early one has slack: windows 100 us and 110 us
    late = R.layer_needs(np.array([[1, 50]]), np.array([100e3, 110e3]), 4096, (1, 15))
    assert late["binding_layer"] == 15 and late["iops_needed"]["mean"] == pytest.approx(51 / 110e-6)


def test_engram_27b_deadlines_per_layer_not_the_smallest_window(tiny_preset):
    # layer ids 1 and 3, 50 us per block: windows 50 and 150 us; the step's reads are NOT all due at 50 us
    cfg = R.EngramReplayConfig(preset=tiny_preset, text=str(TEXT), batch=4, seq_len=128, tokens=3000, layer_us=50.0)
    w = R.build_workload(cfg)
    need = w.needed_rates()
    per = w.reads_per_step_layer()
    assert per.sum() == w.reads["hash"][0].size and (per.sum(axis=1) == w.reads_per_step()).all()
    own1 = per[:, 0] / 50e-6
    both3 = per.sum(axis=1) / 150e-6
    assert need["layer_needs"]["1"]["iops_own"]["mean"] == pytest.approx(own1.mean())
    assert need["layer_needs"]["3"]["iops_cumulative"]["mean"] == pytest.approx(both3.mean())
    p99 = {"1": np.percentile(own1, 99), "3": np.percentile(both3, 99)}
    binding = max(p99, key=p99.get)
    assert need["binding_layer"] == int(binding)
    assert need["iops_needed"]["p99"] == pytest.approx(p99[binding])
    # below what dividing every read by the smallest window claimed
    assert need["iops_needed"]["p99"] <= np.percentile(per.sum(axis=1), 99) / 50e-6


def test_window_from_the_backbones_own_profile(tiny_preset, tmp_path):
    # a backbone model preset of 4 layers and a published profile of it: per layer = T(4 tokens) / 4
    model = tmp_path / "tiny-backbone.toml"
    model.write_text('attention = "gqa"\nlayers = 4\nhidden_size = 64\nnum_heads = 4\nkv_heads = 2\nhead_dim = 16\n'
                     'vocab_size = 100\nintermediate_size = 128\nactive_params_b = 1.0\n')
    prof = tmp_path / "tiny-prof.toml"
    prof.write_text(f'name = "tiny-prof"\nkind = "published"\nmodel = "{model}"\ndevice = "d"\ndtype = "bf16"\n'
                    'source = "test"\ncounts_cache_hits = false\n[fit]\na = 0.0\nb = 0.001\nc = 0.0\n')
    preset = tmp_path / "tiny-own.toml"
    preset.write_text(Path(tiny_preset).read_text() + f'backbone_model = "{model}"\n')
    w = R.build_workload(R.EngramReplayConfig(preset=str(preset), text=str(TEXT), batch=4, seq_len=128, tokens=3000,
                                              compute=str(prof)))
    assert w.layer_us == pytest.approx(4 * 0.001 / 4 * 1e6)          # 1 ms per layer
    assert w.layer_windows_ns().tolist() == pytest.approx([1e6, 3e6])
    assert "of " + str(model) in w.window_source and "scaled" not in w.window_source


def test_another_models_profile_needs_a_stated_scaling_rule(tiny_preset, tmp_path):
    from kvbench.compute.profile import load_profile
    cfg = dict(preset=tiny_preset, text=str(TEXT), batch=4, seq_len=128, tokens=3000,
               compute="deepseek-v3-h800-production")
    with pytest.raises(UsageError, match="--compute-scaling active-params"):
        R.build_workload(R.EngramReplayConfig(**cfg))
    with pytest.raises(UsageError, match="active parameters"):       # the tiny preset states none
        R.build_workload(R.EngramReplayConfig(**cfg, compute_scaling="active-params"))
    preset = tmp_path / "tiny-active.toml"
    preset.write_text(Path(tiny_preset).read_text() + "backbone_active_params_b = 3.7\n")
    w = R.build_workload(R.EngramReplayConfig(**{**cfg, "preset": str(preset)}, compute_scaling="active-params"))
    step = float(load_profile("deepseek-v3-h800-production").seconds(4))   # 4 decode tokens on DeepSeek-V3 (37B)
    assert w.layer_us == pytest.approx(step * 3.7 / 37 / 4 * 1e6)            # x 3.7/37 active, / 4 backbone layers
    assert "scaled by active parameters" in w.window_source
    with pytest.raises(UsageError, match="without --compute"):
        R.EngramReplayConfig(preset=tiny_preset, compute_scaling="active-params").validate()


def test_shipped_engram_presets_scale_from_deepseek_v3():
    # Engram-27B: 30 blocks, 3.8B active; a 32-sequence decode step on the DeepSeek-V3 profile (37B), in computed
    # tokens: 73.7k / 8 GPUs x (1 - 0.563 cache hits) = 4,025.9 tok/s; 32 / 4025.9 x 3.8 / 37 / 30 = 27.2 us per layer
    rate = 73_700 / 8 * (1 - 0.563)
    from kvbench.stream.engram import load_engram
    cfg = R.EngramReplayConfig(preset="engram-27b", compute="deepseek-v3-h800-production",
                               compute_scaling="active-params", batch=32)
    us, source = R.compute_layer_us(cfg, load_engram("engram-27b"), 2048)
    assert us == pytest.approx(32 / rate * 3.8 / 37 / 30 * 1e6)
    # DeepSeek-V4.1: 8B active per prompt token, 16B per output token, 43 layers
    v41 = load_engram("deepseek-v4.1-engram")
    pre = R.EngramReplayConfig(preset="deepseek-v4.1-engram", compute="deepseek-v3-h800-production",
                               compute_scaling="active-params", batch=2, mode="prefill", chunk=512)
    us, _ = R.compute_layer_us(pre, v41, 2048)
    assert us == pytest.approx(1024 / rate * 8 / 37 / 43 * 1e6)


def test_shipped_engram_qualification_states_its_scaling():
    from kvbench.spec.presets import load_preset
    prof, _ = load_preset("qualify", "engram-table")
    w = next(x for x in prof["workload"] if x["kind"] == "replay-engram")
    assert w["preset"] == "engram-27b" and w["compute_scaling"] == "active-params"


@pytest.mark.root
def test_fetch_iops_follow_a_throttled_loop_device(tmp_path, tiny_preset):
    """A loop device throttled by the blkio cgroup is a drive whose true IOPS we set: kvbench must report it."""
    import subprocess
    import sys

    from kvbench.engine.throttle import throttled_loop, unavailable

    why = unavailable()
    if why:
        pytest.skip(f"throttled loop devices: {why}")
    # back the loop device with RAM (/dev/shm) so that the throttle, not a busy host disk, sets its speed
    shm = Path("/dev/shm")
    img = (shm if shm.is_dir() else tmp_path) / f"kvbench-engram-test-{os.getpid()}.img"
    with throttled_loop(img, 64 << 20, read_iops=2500) as loop:
        repo = REPO
        cmd = [sys.executable, "-m", "kvbench", "replay", "engram", "--preset", tiny_preset, "--zipf", "1.0",
               "--tokenizer", "utf8-bytes",
               "--tokens", "8192", "--batch", "8", "--seq-len", "512", "--steps", "100", "--target", loop.device,
               "--destroy-data", loop.device, "--json", "--results", str(tmp_path / "res")]
        r = subprocess.run(loop.argv(cmd), capture_output=True, text=True, cwd=repo,
                           env={**os.environ, "PYTHONPATH": str(repo)}, timeout=120)
        assert r.returncode == 0, r.stderr
        d = json.loads(r.stdout)
        assert d["reads"] > 2000 and d["verify"]["mismatches"] == 0
        assert d["iops"] == pytest.approx(2500, rel=0.12), (d["reads"], d["runtime_s"])


def test_cli_foreign_profile_without_scaling_is_one_line(cli, tmp_path):
    r = cli("replay", "engram", "--preset", "engram-27b", "--zipf", "1.0", "--tokens", "4096", "--batch", "4",
            "--compute", "deepseek-v3-h800-production", "--dry-run", "--results", tmp_path / "res")
    assert r.exit_code == 2 and r.output.count("\n") == 1
    assert "not engram preset engram-27b's backbone" in r.output and "--compute-scaling active-params" in r.output


def _json(r):
    assert r.exit_code == 0, r.output
    return json.loads(r.output[r.output.index("{"):])


def test_replay_engram_prefill_mode_steps_chunks(cli, tmp_path):
    """8,192 tokens over a batch of 4: decode steps one token per sequence (2,048 steps of 4 x 32 = 128 row
    lookups); prefill --chunk 16 steps 16 tokens per sequence (128 steps of up to 4 x 16 x 32 = 2,048 rows)."""
    base = ["replay", "engram", "--preset", "engram-27b", "--zipf", "1.0", "--tokenizer", "utf8-bytes",
            "--tokens", "8192", "--batch", "4", "--seq-len", "64", "--dram", "1MiB", "--dry-run", "--json",
            "--results", tmp_path]
    dec = _json(cli(*base))
    pre = _json(cli(*base, "--mode", "prefill", "--chunk", "16"))
    assert dec["steps"] == 2048 and pre["steps"] == 128
    assert dec["rows_per_step"] <= 128 and pre["rows_per_step"] <= 2048
    assert pre["rows_per_step"] > 15 * dec["rows_per_step"]        # 16x the tokens per step, few repeats


def test_engram_windows_and_zipf_source_read_unambiguously(cli, tiny_preset, tmp_path):
    r = cli("replay", "engram", "--preset", tiny_preset, "--zipf", 1.1, "--tokens", 4096, "--batch", 4,
            "--seq-len", 256, "--layer-us", 57, "--dram", "8KiB", "--dry-run", "--results", tmp_path)
    assert r.exit_code == 0, r.output
    tokens = next(ln for ln in r.output.splitlines() if ln.startswith("tokens"))
    assert "synthetic Zipf(1.1)" in tokens and " via " not in tokens
    window = next(ln for ln in r.output.splitlines() if ln.startswith("window"))
    assert "Engram layer 1:" in window and "Engram layer 2:" in window and ", " not in window.split(":", 1)[1]
    assert window.count(" us") == 2


def test_the_scale_to_hint_is_a_size_the_option_takes_below_a_mib_too():
    """The hint names 90% of the target, rounded down: whole MiB from 1 MiB (64 MiB: 57MiB), whole KiB below
    (512 KiB: 460KiB, where '>> 20' once wrote 0MiB), at least 1 KiB; each parses back to at most that 90%."""
    from kvbench.replay.engram import _size_arg
    from kvbench.units import parse_size

    for cap, want in ((64 << 20, "57MiB"), (512 << 10, "460KiB"), (1 << 20, "921KiB"), (100, "1KiB")):
        n = int(cap * 0.9)
        assert _size_arg(n) == want
        assert parse_size(want) <= max(n, 1024)
