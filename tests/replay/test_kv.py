"""kvbench replay kv: dry runs against the exact curve, real replays on files and a loop device with verify,
a flipped byte caught, write accounting, iolog export and one-line errors before any I/O."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from kvbench.analysis.curves.profile import exact_profile
from kvbench.errors import VerifyError
from kvbench.replay.kv import ReplayConfig, add_fences, block_tags, replay_kv
from kvbench.sim.policies import make_policy, simulate_prefix
from tests.conftest import write_mooncake
from tests.conftest import REPO
import signal
import sys
import time
from kvbench.replay.kv import LiveProgress
from kvbench.replay.kv import coverage_line
from kvbench.replay.kv import replayed_fraction

BLOCK = 262144          # tiny-gqa: 512 B/token x 512-token Mooncake blocks




def _json(result):
    assert result.exit_code == 0, result.output
    return json.loads(result.output[result.output.index("{"):])


def test_dry_run_single_tier_lru_equals_simulation_and_curve(cli, tmp_path):
    from kvbench.stream.traces import read_trace

    tr = read_trace("mooncake-sample")
    cap_blocks = 700
    s = _json(cli("replay", "kv", "mooncake-sample", "--model", "tiny-gqa", "--l2", str(cap_blocks * BLOCK),
                  "--dry-run", "--json", "--results", tmp_path))
    ref = simulate_prefix([tr], make_policy("lru", cap_blocks))
    assert s["tiers"]["l2"]["hit_blocks"] == ref.hit_blocks and s["blocks"] == ref.block_refs
    assert s["requests"] == tr.n_requests and s["dry_run"]
    exact = exact_profile(tr)
    assert s["tiers"]["l2"]["hit_ratio"] == pytest.approx(float(exact.hit_ratio([cap_blocks])[0]), abs=1e-12)
    for key in ("run_dir", "requests", "load_time_ms", "app_write_amplification", "verify_errors", "tiers"):
        assert key in s
    rows = (Path(s["run_dir"]) / "requests.csv").read_text().splitlines()
    assert len(rows) == tr.n_requests + 1 and rows[0].startswith("request,arrival_s,blocks,hit_blocks,hit_l1")


@pytest.mark.parametrize("admission", ["all", "tinylfu", "prefix-depth:beyond_shared=1"])
def test_dry_run_four_tiers_equals_the_reference_and_reports_its_rate(cli, tmp_path, admission):
    """L1-L4 with an L3/L4 admission policy, windows as the replay cuts them: per-tier hits, writes and refusals
    equal the Python reference's on the whole trace at once; ``simulation`` reports the rate."""
    from kvbench.sim.tiers import HierarchySpec, ReferenceHierarchy, TierSpec
    from kvbench.stream.traces import read_trace

    tr = read_trace("mooncake-sample")
    l4 = tmp_path / "l4"
    l4.mkdir()
    caps = {"l1": 40 * BLOCK, "l2": 120 * BLOCK, "l3": 300 * BLOCK, "l4": 600 * BLOCK}
    s = _json(cli("replay", "kv", "mooncake-sample", "--model", "tiny-gqa", "--l1", str(caps["l1"]),
                  "--l2", str(caps["l2"]), "--l3", tmp_path / "l3.store", "--l3-capacity", str(caps["l3"]),
                  "--l4", l4, "--l4-capacity", str(caps["l4"]), "--admission", admission, "--chunk", "4KiB",
                  "--dry-run", "--json", "--results", tmp_path))
    spec = HierarchySpec(tuple(TierSpec(n, c, admission=admission if n in ("l3", "l4") else "all")
                               for n, c in caps.items()), BLOCK)
    ref = ReferenceHierarchy(spec)
    req, _ = ref.run(tr.timestamp_s, tr.offsets, tr.keys)
    assert s["hit_blocks"] == int(req["hit_blocks"].sum())
    for name, c in ref.counters().items():
        blocks = s["tiers"][name]["blocks"]
        assert s["tiers"][name]["hit_blocks"] == c.hit_blocks
        assert blocks["admission_rejects"] == c.admission_rejects
        if name != "l1":
            assert blocks["create_writes"] == c.create_writes and blocks["promote_writes"] == c.promote_writes
    assert (sum(c.admission_rejects for c in ref.counters().values()) > 0) == (admission != "all")
    sim = s["simulation"]
    assert sim["blocks"] == tr.n_blocks and sim["blocks_per_s"] > 0 and sim["blocks_per_cpu_s"] > 0
    assert sim["blocks_per_s"] == pytest.approx(sim["blocks"] / sim["seconds"])


def test_dry_run_ttl_matches_retention_curve(cli, tmp_path):
    from kvbench.stream.traces import read_trace

    tr = read_trace("mooncake-sample")
    s = _json(cli("replay", "kv", "mooncake-sample", "--model", "tiny-gqa", "--l2", "64GiB", "--ttl", "20s",
                  "--dry-run", "--json", "--results", tmp_path))
    ref = simulate_prefix([tr], make_policy("lru", (64 << 30) // BLOCK, ttl_s=20.0))
    assert s["hit_blocks"] == ref.hit_blocks
    no_ttl = simulate_prefix([tr], make_policy("lru", (64 << 30) // BLOCK))
    assert ref.hit_blocks < no_ttl.hit_blocks
    exact = exact_profile(tr, ttl_s=20.0)
    assert s["hit_ratio"] == pytest.approx(float(exact.hit_ratio([(64 << 30) // BLOCK])[0]), abs=1e-12)


def test_replay_on_file_verifies_and_accounts_bytes(cli, tmp_path, store_dir):
    store = store_dir / "l3.store"
    iolog = tmp_path / "plan.iolog"
    s = _json(cli("replay", "kv", "mooncake-sample", "--model", "tiny-gqa", "--l2", "8MiB", "--l3", store,
                  "--l3-capacity", "64MiB", "--max-requests", "60", "--closed-loop", "--verify", "all",
                  "--write-policy", "back", "--trim", "--export-iolog", iolog, "--json", "--results", tmp_path))
    assert s["status"] == "complete" and s["verify_errors"] == 0 and s["verify_checked"] > 0
    l3 = s["tiers"]["l3"]
    b = l3["blocks"]
    assert l3["write_bytes"] == (b["create_writes"] + b["demote_writes"] + b["promote_writes"]) * BLOCK
    assert l3["read_bytes"] == (b["hit_reads"] + b["demote_reads"]) * BLOCK
    assert b["create_writes"] == 0 and b["demote_writes"] > 0             # write-back: L3 gets evictions only
    assert s["app_write_amplification"] == pytest.approx(b["demote_writes"] / s["produced_blocks"])
    assert s["tiers"]["l2"]["read_lat_us"]["p50"] is not None
    # SMART/OCP counters are read around the run: the store's NVMe drive gives a delta, any other disk none
    from kvbench.metrics.smart import nvme_device_for

    if nvme_device_for(store) and shutil.which("nvme"):
        assert isinstance(s["device_counters"]["l3"], dict)
    else:
        assert s["device_counters"] == {"l3": None}
    assert s["load_time_ms"]["p50"] is not None and s["load_time_ms"]["p99"] >= s["load_time_ms"]["p50"]
    lines = iolog.read_text().splitlines()
    assert lines[0] == "fio version 3 iolog"
    io = [ln.split() for ln in lines if ln.split()[2] in ("read", "write", "trim")]
    assert len(io) == s["planned_ios"] - _dram_rows(s)
    assert {x[1] for x in io} == {str(store)}
    req = (Path(s["run_dir"]) / "requests.csv").read_text().splitlines()
    assert len(req) == 61
    assert (Path(s["run_dir"]) / "timeseries.csv").exists() and (Path(s["run_dir"]) / "histograms.json").exists()


def test_four_tiers_with_remote_directory_and_link_model(cli, tmp_path, store_dir):
    l4 = store_dir / "remote"
    l4.mkdir()
    s = _json(cli("replay", "kv", "mooncake-sample", "--model", "tiny-gqa", "--l1", "4MiB", "--l2", "8MiB",
                  "--l3", store_dir / "l3.store", "--l3-capacity", "16MiB", "--l4", l4, "--l4-capacity", "256MiB",
                  "--l4-link-latency", "5ms", "--l4-link-bw", "1GB/s", "--write-policy", "back", "--max-requests",
                  "150", "--closed-loop", "--verify", "all", "--json", "--results", tmp_path))
    assert s["verify_errors"] == 0 and set(s["tiers"]) == {"l1", "l2", "l3", "l4"}
    t4 = s["tiers"]["l4"]
    assert t4["hit_blocks"] > 0 and t4["io_mode"] == "O_DIRECT" and t4["link_model"]["latency_s"] == 0.005
    assert t4["load_ms"]["p50"] >= 5.0                       # modelled link latency is part of L4 load time
    assert s["tiers"]["l1"]["read_bw_bytes_per_s"] is None   # simulated HBM: no measured rate
    assert sum(s["tiers"][n]["hit_blocks"] for n in s["tiers"]) == s["hit_blocks"]
    assert (l4 / "kvbench-l4.store").exists()


def _dram_rows(s):
    """Planned DRAM I/Os of a run whose chunk >= block (one I/O per block event)."""
    b = s["tiers"]["l2"]["blocks"]
    return b["hit_reads"] + b["demote_reads"] + b["create_writes"] + b["promote_writes"] + b["demote_writes"]


def test_verify_catches_a_byte_flipped_in_the_store_file(tmp_path, store_dir):
    ids = list(range(64))
    trace = write_mooncake(tmp_path / "t.jsonl", [(0, ids), (1000, ids)])
    store = store_dir / "flip.store"
    flipped = []

    def flip(done, total):
        if done == 1 and not flipped:                    # after the window that wrote request 0
            fd = os.open(store, os.O_RDWR)
            try:
                b = bytearray(os.pread(fd, 1, 4096 + 100))
                b[0] ^= 0x40
                os.pwrite(fd, bytes(b), 4096 + 100)
                os.fsync(fd)
            finally:
                os.close(fd)
            flipped.append(True)

    cfg = ReplayConfig(trace=str(trace), model="tiny-gqa", l3=str(store), l3_capacity=128 * BLOCK,
                       closed_loop=True, verify="all", results=str(tmp_path), window_ios=64)
    with pytest.raises(VerifyError, match=r"l3 block key \d+ version \d+ at offset 0 "):
        replay_kv(cfg, progress=flip)
    assert flipped
    run = next(tmp_path.glob("replay-kv-*"))
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["verify_errors"] == 1
    assert summary["first_mismatch"]["tier"] == "l3" and summary["first_mismatch"]["offset"] == 0
    # without the flip the same replay is clean
    cfg2 = ReplayConfig(**{**cfg.__dict__, "results": str(tmp_path / "clean")})
    s = replay_kv(cfg2)
    assert s["verify_errors"] == 0 and s["tiers"]["l3"]["hit_blocks"] == 64


@pytest.mark.root
def test_replay_on_a_loop_device(cli, tmp_path):
    if os.geteuid() != 0 or shutil.which("losetup") is None:
        pytest.skip("needs root and losetup")
    backing = Path("/var/tmp") / f"kvbench-loop-{os.getpid()}.img"
    with open(backing, "wb") as f:
        f.truncate(96 << 20)
    try:
        dev = subprocess.run(["losetup", "--find", "--show", str(backing)], capture_output=True, text=True)
        if dev.returncode != 0:
            pytest.skip(f"losetup failed: {dev.stderr.strip()}")
        dev = dev.stdout.strip()
        try:
            s = _json(cli("replay", "kv", "mooncake-sample", "--model", "tiny-gqa", "--l3", dev, "--l3-capacity",
                          "64MiB", "--destroy-data", dev, "--max-requests", "80", "--speed", "200", "--verify",
                          "all", "--layout", "log", "--segment", "4MiB", "--trim", "--json", "--results", tmp_path))
            assert s["status"] == "complete" and s["verify_errors"] == 0 and s["verify_checked"] > 0
            assert s["tiers"]["l3"]["write_bytes"] > 0 and s["tiers"]["l3"]["read_lat_us"]["p99"] is not None
            assert s["host_bytes"]["write_bytes"] >= s["tiers"]["l3"]["write_bytes"]
            assert s["issue_lag_us"]["p50"] is not None
            # a store larger than the device: refused before any I/O
            r = cli("replay", "kv", "mooncake-sample", "--model", "tiny-gqa", "--l3", dev, "--l3-capacity",
                    "1GiB", "--destroy-data", dev, "--results", tmp_path / "big")
            assert r.exit_code == 2 and "holds" in r.output and r.output.count("\n") == 1
            assert not (tmp_path / "big").exists()
        finally:
            subprocess.run(["losetup", "-d", dev], check=False)
    finally:
        backing.unlink(missing_ok=True)


@pytest.mark.parametrize("args, message", [
    (["--l2", "64KiB"], "--l2 64 KiB cannot hold one KV block of 256 KiB"),
    (["--l2", "1GiB", "--policy", "clock"], "unknown cache policy 'clock'"),
    (["--l2", "1GiB", "--model", "no-such-model"], "no-such-model"),
    (["--l3-capacity", "1GiB"], "--l3-capacity without --l3"),
    (["--l2", "1GiB", "--l3", "X", "--l3-capacity", "1GiB", "--exclusive"], "exclusive"),
])
def test_bad_input_is_one_line_before_any_io(cli, tmp_path, args, message):
    base = ["replay", "kv", "mooncake-sample", "--model", "tiny-gqa"]
    if "--model" in args:
        base = base[:3]
    r = cli(*base, *args, "--results", tmp_path / "res")
    assert r.exit_code == 2, r.output
    assert message in r.output and r.output.strip().count("\n") == 0
    assert not (tmp_path / "res").exists()


def test_trace_error_names_file_and_line(cli, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]}\n'
                   '{"timestamp": 5, "input_length": 10, "output_length": 1, "hash_ids": "x"}\n')
    r = cli("replay", "kv", bad, "--model", "tiny-gqa", "--l2", "1GiB", "--results", tmp_path / "res")
    assert r.exit_code == 2 and f"{bad}:2" in r.output and "hash_ids" in r.output
    assert not (tmp_path / "res").exists()


def test_fences_are_placed_only_on_hazards():
    from kvbench.engine.plan import FLAG_FENCE, make_plan

    sb = 8192
    # write slot 0, read slot 1, read slot 0 (RAW: fence), write slot 2, read slot 2 (RAW after the fence: fence),
    # read slot 1 (no hazard), write slot 1 (WAR with reads of slot 1 after the last fence: fence)
    ops = [1, 0, 0, 1, 0, 0, 1]
    slots = [0, 1, 0, 2, 2, 1, 1]
    plan = make_plan(np.array(ops), np.array(slots) * sb, sb)
    assert add_fences(plan, sb) == 3
    assert list(np.flatnonzero(plan["flags"] & FLAG_FENCE)) == [2, 4, 6]
    # reads only: no fence; different targets never conflict
    plan = make_plan(np.zeros(4, np.uint8), np.zeros(4, np.uint64), sb)
    assert add_fences(plan, sb) == 0
    plan = make_plan(np.array([1, 0]), np.array([0, 0]), sb, target=np.array([0, 1]))
    assert add_fences(plan, sb) == 0


def test_block_tags_depend_on_key_and_version():
    keys = np.array([1, 1, 2, 2], dtype=np.uint64)
    vers = np.array([0, 1, 0, 1], dtype=np.int64)
    tags = block_tags(keys, vers)
    assert len(set(tags.tolist())) == 4 and (tags != 0).all()
    assert (block_tags(keys, vers) == tags).all()


def test_duration_cuts_at_trace_time_times_speed(cli, tmp_path):
    """--duration D at --speed X replays the requests that arrive before D*X of trace time (exact, dry run)."""
    from kvbench.stream.traces import read_trace

    ts = np.asarray(read_trace("mooncake-sample").timestamp_s)
    due = int(np.searchsorted(ts - ts[0], 0.3 * 500, side="left"))
    assert 0 < due < len(ts)
    s = _json(cli("replay", "kv", "mooncake-sample", "--model", "tiny-gqa", "--l2", "64MiB", "--speed", "500",
                  "--duration", "0.3s", "--dry-run", "--json", "--results", tmp_path))
    assert s["requests"] == due


def test_duration_stops_the_replay_and_counts_what_the_tiers_counted(cli, tmp_path, store_dir):
    s = _json(cli("replay", "kv", "mooncake-sample", "--model", "tiny-gqa", "--l3", store_dir / "d.store",
                  "--l3-capacity", "32MiB", "--speed", "100", "--duration", "2s", "--chunk", "64KiB", "--qd", "4",
                  "--json", "--results", tmp_path))
    ran = s["requests"] - s["requests_not_issued"]
    assert 0 < ran < 1000 and s["status"] == "complete"
    # the simulated window counts whole, as the tier counters do; requests that did not run have no load time
    assert s["hit_blocks"] == s["tiers"]["l3"]["blocks"]["hit_reads"]
    rows = (Path(s["run_dir"]) / "requests.csv").read_text().splitlines()
    assert len(rows) == s["requests"] + 1


def test_export_iolog_refuses_a_store_path_with_white_space_before_creating_it(cli, tmp_path, store_dir):
    """fio splits iolog lines on white space: the replay says so before it creates the store or a run folder."""
    spaced = store_dir / "my stores"
    spaced.mkdir()
    r = cli("replay", "kv", "mooncake-sample", "--model", "tiny-gqa", "--l3", spaced / "l3.store",
            "--l3-capacity", "64MiB", "--max-requests", "5", "--closed-loop", "--export-iolog", tmp_path / "p.iolog",
            "--results", tmp_path / "results")
    assert r.exit_code == 2 and "white space" in r.output and "Traceback" not in r.output
    assert not any(spaced.iterdir()) and not (tmp_path / "p.iolog").exists()
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").iterdir())


def test_plan_counts_by_tier_and_op():
    """A window's planned I/O, counted by hand: L2 read 1 block, L3 write 2 blocks, L4 trim of a 3-slot segment;
    L1 rows carry no I/O. 4 chunk I/Os a block, one per trim; bytes are slots x slot size."""
    from kvbench.replay.kv import _plan_counts
    from kvbench.sim.tiers import EVENT_DTYPE

    ev = np.zeros(6, EVENT_DTYPE)
    # (tier, op, nslots): l1 read, l2 read, l3 write x2, l4 trim of 3 slots, l1 write
    for i, (tier, op, ns) in enumerate([(0, 0, 1), (1, 0, 1), (2, 1, 1), (2, 1, 1), (3, 2, 3), (0, 1, 1)]):
        ev[i]["tier"], ev[i]["op"], ev[i]["nslots"] = tier, op, ns
    planned = {(lvl, op): 0 for lvl in range(4) for op in (0, 1, 2)}
    ios = _plan_counts(ev, [1, 2, 3], 4, 1000, planned)
    assert ios == 3 * 4 + 1
    assert planned == {**{k: 0 for k in planned}, (1, 0): 1000, (2, 1): 2000, (3, 2): 3000}
    assert _plan_counts(ev[:0], [1, 2, 3], 4, 1000, planned) == 0 and planned[(2, 1)] == 2000
    # added to what the earlier windows counted
    assert _plan_counts(ev[2:3], [1, 2, 3], 4, 1000, planned) == 4 and planned[(2, 1)] == 3000


def test_request_rows_in_batches_write_what_windows_one_by_one_write(tmp_path):
    """requests.csv from windows batched (a dry run's) is the file written window by window, byte for byte, and
    the totals are the hand sums of the rows, whichever way they were written."""
    from kvbench.replay.kv import _RequestRows
    from kvbench.sim.tiers import REQUEST_DTYPE

    wins = []
    for w, n in enumerate((2, 1, 3)):
        r = np.zeros(n, REQUEST_DTYPE)
        r["request"] = np.arange(n) + 10 * w
        r["arrival_s"] = 0.5 * r["request"]
        r["blocks"], r["hit_blocks"], r["hit_l2"], r["hit_l4"], r["produced"] = 5, 2, 1, 1, 3
        load = np.full(n, np.nan)
        load[0] = 1.25
        wins.append((r, load, {lvl: np.full(n, np.nan) for lvl in (1, 2, 3)}))
    files = []
    for batch in (0, 3, 1 << 16):
        totals = {"requests": 0, "blocks": 0, "hit_blocks": 0, "produced": 0, "not_issued": 0}
        hits = np.zeros(4, np.int64)
        out = _RequestRows(tmp_path / f"r{batch}.csv", totals, hits, batch=batch)
        for r, load, tier in wins:
            out.add(r, load, tier)
        out.flush()
        assert totals == {"requests": 6, "blocks": 30, "hit_blocks": 12, "produced": 18, "not_issued": 0}
        assert hits.tolist() == [0, 6, 0, 6]
        files.append((tmp_path / f"r{batch}.csv").read_text())
    assert files[0] == files[1] == files[2]
    lines = files[0].splitlines()
    assert len(lines) == 7 and lines[1] == "0,0.0000,5,2,0,1,0,1,3,1.2500,,,"
    assert lines[4] == "20,10.0000,5,2,0,1,0,1,3,1.2500,,," and lines[6] == "22,11.0000,5,2,0,1,0,1,3,,,,"


def test_a_dry_runs_windows_are_large_and_their_size_changes_nothing(tmp_path, monkeypatch):
    """A dry run plans no I/O, so its windows take at least SIM_ONLY_BLOCKS blocks; run with windows of 64 blocks
    instead (many windows, rows in many batches) it reports the same summary and writes the same requests.csv."""
    from kvbench.replay import kv

    outs = []
    for window_ios, sim_only, batch in ((262144, kv._Windows.SIM_ONLY_BLOCKS, kv._RequestRows.BATCH), (64, 1, 50)):
        monkeypatch.setattr(kv._Windows, "SIM_ONLY_BLOCKS", sim_only)
        monkeypatch.setattr(kv._RequestRows, "BATCH", batch)
        l4 = tmp_path / f"l4-{window_ios}"
        l4.mkdir()
        cfg = ReplayConfig(trace="mooncake-sample", model="tiny-gqa", l1=40 * BLOCK, l2=120 * BLOCK,
                           l3=str(tmp_path / "l3.store"), l3_capacity=300 * BLOCK, l4=str(l4), l4_capacity=600 * BLOCK,
                           dry_run=True, results=str(tmp_path / f"r{window_ios}"), window_ios=window_ios)
        calls = []
        s = replay_kv(cfg, progress=lambda done, total: calls.append(done))
        outs.append(({k: v for k, v in s.items() if k not in ("run_dir", "elapsed_s", "simulation")},
                     (Path(s["run_dir"]) / "requests.csv").read_bytes(), len(calls)))
    (big, big_csv, big_windows), (small, small_csv, small_windows) = outs
    assert big_windows == 1 and small_windows > 10           # mooncake-sample: < 16k blocks, > 640
    assert big == small and big_csv == small_csv
    assert small["blocks"] > 64 * 10
    monkeypatch.undo()
    cfg = ReplayConfig(trace="t", model="m", dry_run=True)
    assert kv._Windows(cfg, None, 64, plans=False).block_limit == kv._Windows.SIM_ONLY_BLOCKS == 1 << 14
    assert kv._Windows(cfg, None, 64).block_limit == 262144 // 64


# --- --no-promote and Ctrl-C during a replay, expected values by hand in each docstring
def _json_object(r):
    assert r.exit_code == 0, r.output
    return json.loads(r.output[r.output.index("{"):])


def test_replay_no_promote_leaves_l3_hits_in_l3(cli, tmp_path):
    """L2 holds 1 block, L3 4, write-through. [1] [2] [1] [1]: the 3rd request finds block 1 only in L3.
    Promoting copies it up (1 promote write into L2, the 4th request hits L2); --no-promote leaves it (the
    4th request reads L3 again)."""
    tr = write_mooncake(tmp_path / "t.jsonl", [(0, [1]), (1000, [2]), (2000, [1]), (3000, [1])])
    base = ["replay", "kv", tr, "--model", "tiny-gqa", "--l2", str(BLOCK), "--l3", tmp_path / "s.store",
            "--l3-capacity", str(4 * BLOCK), "--dry-run", "--json", "--results", tmp_path / "res"]
    up = _json_object(cli(*base))
    stay = _json_object(cli(*base, "--no-promote"))
    assert (up["tiers"]["l2"]["blocks"]["promote_writes"], up["tiers"]["l2"]["hit_blocks"],
            up["tiers"]["l3"]["hit_blocks"]) == (1, 1, 1)
    assert (stay["tiers"]["l2"]["blocks"]["promote_writes"], stay["tiers"]["l2"]["hit_blocks"],
            stay["tiers"]["l3"]["hit_blocks"]) == (0, 0, 2)
    assert up["hit_blocks"] == stay["hit_blocks"] == 2


def test_replay_ctrl_c_writes_results_and_exits_130(tmp_path):
    """SIGINT during an open-loop replay on a file: exit 130, summary 'interrupted', requests.csv holds the
    requests that ran and no more."""
    store = Path("/var/tmp") / f"kvbench-ctrlc-{os.getpid()}"
    store.mkdir(exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    p = subprocess.Popen([sys.executable, "-m", "kvbench", "replay", "kv", "mooncake-sample", "--model", "tiny-gqa",
                          "--l3", str(store / "s.store"), "--l3-capacity", "32MiB", "--speed", "1", "--json",
                          "--results", str(tmp_path / "res")], cwd=REPO, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        summary = None
        for _ in range(600):                   # until the replay has started (its first partial summary)
            found = list((tmp_path / "res").glob("replay-kv-*/summary.json"))
            if found:
                summary = found[0]
                break
            assert p.poll() is None, p.communicate()
            time.sleep(0.1)
        assert summary is not None, "no partial summary appeared"
        time.sleep(3)                          # let it issue a few requests (at speed 1 the trace lasts 272 s)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
        for f in store.iterdir():
            f.unlink()
        store.rmdir()
    assert p.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    s = json.loads(summary.read_text())
    # the summary counts the simulated windows whole (as the tier counters do); requests_not_issued did not run
    assert s["status"] == "interrupted" and s["requests"] - s.get("requests_not_issued", 0) < 1000
    csv = summary.parent / "requests.csv"
    if s["requests"]:
        assert len(csv.read_text().splitlines()) == s["requests"] + 1
    else:                                      # stopped before any request: nothing claimed, nothing written
        assert not csv.exists() or len(csv.read_text().splitlines()) <= 1


MiB = 1 << 20


def test_replay_kv_json_prints_the_error_object_on_failure(cli, tmp_path):
    r = cli("replay", "kv", "mooncake-sample", "--model", "llama-3.1-8b", "--l3", tmp_path / "s.img",
            "--json", "--results", tmp_path / "res")
    assert r.exit_code == 2
    obj = json.loads(r.stdout)
    assert obj["status"] == "failed" and obj["kind"] == "replay-kv"
    assert "needs --l3-capacity" in obj["error"] and obj["fix"].startswith("give e.g.")


def test_replay_summary_counts_what_the_tiers_counted(cli, tmp_path):
    """A run cut by --duration: the summary's requests and hits agree with the tier counters."""
    r = cli("replay", "kv", "mooncake-sample", "--model", "llama-3.1-8b", "--l2", "640MiB",
            "--closed-loop", "--duration", "0.3s", "--verify", "off", "--json", "--results", tmp_path / "res")
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    l2 = s["tiers"]["l2"]
    assert s["hit_blocks"] == l2["hit_blocks"] == l2["blocks"]["hit_reads"]
    blocks = l2["blocks"]["hit_reads"] + l2["blocks"]["create_writes"] + l2["blocks"]["promote_writes"]
    assert s["blocks"] == blocks                     # every simulated block is a hit read or a created block
    reqs = (Path(s["run_dir"]) / "requests.csv").read_text().splitlines()
    assert len(reqs) - 1 == s["requests"] and s["requests_not_issued"] <= s["requests"]


def test_replay_capacities_mean_what_they_say(cli, tmp_path):
    """--l2 2GiB allocated a 6 GiB arena and --l3-capacity 8GiB a 12 GiB file: 64 spare 64 MiB slots. A tier of X
    bytes caches X bytes; the L3 store's spare slots (reads in flight at QD32 of 1 MiB chunks: ceil(32 x 1 MiB /
    64 MiB) + 1 = 2) are on top, stated, and in the file; the DRAM arena copies synchronously: none."""
    r = cli("replay", "kv", "mooncake-sample", "--model", "llama-3.1-8b", "--l2", "512MiB",
            "--l3", tmp_path / "s.img", "--l3-capacity", "1GiB", "--max-requests", "2", "--verify", "off",
            "--closed-loop", "--json", "--results", tmp_path / "res")
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    assert s["tiers"]["l2"]["footprint_bytes"] == 512 * MiB and s["tiers"]["l3"]["footprint_bytes"] == 18 * 64 * MiB
    assert os.path.getsize(tmp_path / "s.img") == 18 * 64 * MiB
    assert (s["tiers"]["l2"]["capacity_blocks"], s["tiers"]["l3"]["capacity_blocks"]) == (8, 16)
    assert "the store adds 2 spare slots (128 MiB) on top" in s["tiers"]["l3"]["store"]
    assert "no spare slots" in s["tiers"]["l2"]["store"]


def test_replay_l2_arena_larger_than_free_memory_is_refused_before_allocation(cli, tmp_path):
    import psutil

    too_big = (psutil.virtual_memory().available // (64 * MiB) + 64) * 64 * MiB
    r = cli("replay", "kv", "mooncake-sample", "--model", "llama-3.1-8b", "--l2", str(too_big),
            "--results", tmp_path / "res")
    assert r.exit_code == 2 and "memory available" in r.output and not (tmp_path / "res").exists()


def test_ctrl_c_during_a_replay_with_l2_is_honoured_promptly(tmp_path):
    """Ctrl-C was honoured only when --duration ran out when an L2 arena ran beside the device."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    p = subprocess.Popen([sys.executable, "-m", "kvbench", "replay", "kv", "mooncake-sample", "--model",
                          "llama-3.1-8b", "--l2", "256MiB", "--l3", str(tmp_path / "s.img"), "--l3-capacity",
                          "512MiB", "--closed-loop", "--duration", "120s", "--json",
                          "--results", str(tmp_path / "res")], env=env, cwd=tmp_path,
                         stdout=subprocess.PIPE, stderr=open(tmp_path / "err.txt", "w"), text=True)
    try:
        for _ in range(1200):              # wait until the replay runs (targets open, run folder made)
            if list((tmp_path / "res").glob("*/summary.json")):
                break
            time.sleep(0.1)
        time.sleep(1.0)
        p.send_signal(signal.SIGINT)
        out, _ = p.communicate(timeout=110)       # before the fix: only when --duration (120 s) ran out
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, (tmp_path / "err.txt").read_text()[-3000:]
    s = json.loads(out)
    assert s["status"] == "interrupted" and s["elapsed_s"] < 100


def test_replay_whose_device_read_less_than_the_engine_is_not_measured():
    from kvbench.replay.kv import _counters_disagree

    assert _counters_disagree({"device": "vda", "read_bytes": 10 * MiB}, 10 * MiB) is None
    assert _counters_disagree({"device": "vda", "read_bytes": 50 * MiB}, 10 * MiB) is None   # others read too
    assert _counters_disagree(None, 10 * MiB) is None and _counters_disagree({"read_bytes": 0}, 0) is None
    why = _counters_disagree({"device": "loop3", "read_bytes": 200 * MiB}, 85 * 1024 * MiB)
    assert why.startswith("the O_DIRECT bypass check failed: /dev/loop3 read 209,715,200 bytes")


def test_live_progress_survives_an_unwritable_folder(tmp_path):
    live = LiveProgress(tmp_path / "gone", trace_requests=10)
    live.window(0, 10, 10)                            # the folder does not exist: no exception, no file
    assert not (tmp_path / "gone").exists()


# --- coverage that is true: requests issued over the requests in the trace, said as such
def test_coverage_is_requests_issued_over_requests_in_the_trace():
    assert coverage_line(1182, 3993, 60) == "1,182 of 3,993 requests replayed (30%) in 60 s"
    assert replayed_fraction(1182, 3993) == 1182 / 3993
    assert coverage_line(3, 3993) == "3 of 3,993 requests replayed (<1%)" and replayed_fraction(0, 0) is None


def test_a_replay_of_part_of_the_trace_says_how_much(cli, tmp_path):
    from kvbench.stream.traces import read_trace

    tr = read_trace("mooncake-sample")
    base = ["replay", "kv", "mooncake-sample", "--model", "tiny-gqa", "--l2", "16MiB", "--l3", tmp_path / "s.img",
            "--l3-capacity", "64MiB", "--json", "--results", tmp_path]
    # open loop for 1 s of trace time (an open-loop replay takes it in real time): only the requests arriving in
    # it (8 of the sample's 1,000) are simulated, the trace has more
    r = cli(*base, "--duration", "1s")
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    arrived = int((tr.timestamp_s < 1.0).sum())
    assert s["trace_requests"] == tr.n_requests > s["requests"] == arrived > 0
    assert s["requests_issued"] == s["requests"] - s["requests_not_issued"]
    assert s["replayed_fraction"] == s["requests_issued"] / tr.n_requests < 1       # not simulated / simulated
    on_disk = json.loads((Path(s["run_dir"]) / "summary.json").read_text())
    assert on_disk["replayed_fraction"] == s["replayed_fraction"]
    # --max-requests N: the trace asked for is its first N requests
    s = json.loads(cli(*base, "--max-requests", "7", "--closed-loop").stdout)
    assert s["trace_requests"] == 7 and s["replayed_fraction"] == s["requests_issued"] / 7


def test_a_stop_that_lands_inside_a_compiled_kernel_keeps_what_was_replayed(tmp_path, monkeypatch):
    """A stop signal whose handler raised while a numba kernel ran arrives as a SystemError caused by the Stop: the
    replay records it as interrupted, as any Ctrl-C, with the requests of the windows before it (64 I/Os a window
    on mooncake-sample: many windows; the stop after the third's)."""
    from kvbench import procs
    from kvbench.replay import kv

    monkeypatch.setattr(kv._Windows, "SIM_ONLY_BLOCKS", 1)
    cfg = ReplayConfig(trace="mooncake-sample", model="tiny-gqa", l2=120 * BLOCK, dry_run=True,
                       results=str(tmp_path), window_ios=64)
    seen = []

    def stop_in_a_kernel(done, total):
        seen.append(done)
        if len(seen) == 3:
            try:
                raise procs.Stop(signal.SIGINT)
            except procs.Stop as stop:
                raise SystemError("CPUDispatcher(<function f>) returned a result with an exception set") from stop

    from kvbench.errors import Interrupted

    with pytest.raises(Interrupted, match="interrupted after"):
        replay_kv(cfg, progress=stop_in_a_kernel)
    run = next(tmp_path.glob("replay-kv-*"))
    s = json.loads((run / "summary.json").read_text())
    assert s["status"] == "interrupted" and s["requests"] == seen[2] and 0 < seen[2] < 1000
    assert len((run / "requests.csv").read_text().splitlines()) == s["requests"] + 1
    # a SystemError of its own is a failure, never an interrupt
    def bug(done, total):
        raise SystemError("a bug")

    with pytest.raises(SystemError, match="a bug"):
        replay_kv(ReplayConfig(**{**cfg.__dict__, "results": str(tmp_path / "b")}), progress=bug)
