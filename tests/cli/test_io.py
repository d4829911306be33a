"""``kvbench io``: JSON fields, run folder, seeds, fio iolog export, bad input, signals and disk-full."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from tests.conftest import REPO

LAT_KEYS = {"p50", "p90", "p99", "p99.9", "p99.99", "max", "mean"}


def io_json(cli, tmp_path, *args):
    r = cli("io", "--results", tmp_path / "results", "--json", *args)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_io_json_and_run_folder(cli, tmp_path):
    target = tmp_path / "t.dat"
    s = io_json(cli, tmp_path, "--target", target, "--size", "8MiB", "--runtime", "0", "--bs", "4k",
                "--qd", "8", "--verify", "all")
    for key in ("iops", "bw_bytes_per_s", "ios", "runtime_s", "lat_us", "run_dir"):
        assert key in s
    assert set(s["lat_us"]) == LAT_KEYS and s["ios"] == 2048 and s["status"] == "complete"
    assert set(s["slat_us"]) == set(s["clat_us"]) == LAT_KEYS and 0 < s["inflight_mean"] <= 8
    assert s["slat_us"]["mean"] + s["clat_us"]["mean"] == pytest.approx(s["lat_us"]["mean"], rel=1e-9)
    assert s["verify"]["checked"] == 2048 and s["verify"]["mismatches"] == 0
    assert s["prefill"]["bytes"] == 8 << 20          # a new file is written before it is read
    rd = Path(s["run_dir"])
    run = json.loads((rd / "run.json").read_text())
    assert run["command"].startswith("kvbench") or "io" in run["command"]
    assert run["targets"][0]["path"] == str(target) and run["targets"][0]["filesystem"]
    assert json.loads((rd / "summary.json").read_text())["status"] == "complete"
    assert "all" in json.loads((rd / "histograms.json").read_text())
    ts = pd.read_csv(rd / "timeseries.csv")
    assert {"t_s", "iops", "bw_bytes_per_s", "lat_p99_us", "cpu_pct"} <= set(ts.columns)
    assert (ts["iops"] * ts["interval_s"]).sum() == pytest.approx(2048, abs=1)


def test_io_mixed_has_per_op_sections_and_time_based_run(cli, tmp_path):
    s = io_json(cli, tmp_path, "--target", tmp_path / "m.dat", "--size", "8MiB", "--runtime", "0.6s",
                "--rw", "randrw", "--rwmixread", "70", "--qd", "4")
    assert {"read", "write"} <= set(s) and set(s["read"]["lat_us"]) == LAT_KEYS
    # each I/O is a read with probability 0.7: within 5 binomial standard deviations (a 0.6 s run on a loaded
    # machine may complete only a few hundred I/Os), and never the swapped 0.3 mix
    share, sd = s["read"]["ios"] / s["ios"], (0.21 / s["ios"]) ** 0.5
    assert abs(share - 0.7) <= max(0.1, 5 * sd) and share > 0.5
    # time-based: no bound on runtime_s (it starts at the first submit; a runaway is the per-test timeout's)
    assert s["issued"] >= s["ios"] and s["runtime_s"] > 0
    assert s["host"]["engine_write_bytes"] == s["write"]["bytes"]


def test_offsets_depend_only_on_seed_and_iolog_replays_in_fio(cli, tmp_path):
    target = tmp_path / "s.dat"
    logs = []
    for seed in (7, 7, 8):
        log = tmp_path / f"log{len(logs)}.iolog"
        io_json(cli, tmp_path, "--target", target, "--size", "4MiB", "--runtime", "0", "--seed", seed,
                "--export-iolog", log, "--qd", "4")
        logs.append(log)
    body = [sorted(l.split()[3] for l in p.read_text().splitlines()[3:] if " read " in l) for p in logs]
    assert body[0] == body[1] and body[0] != body[2] and len(body[0]) == 1024
    assert logs[0].read_text().startswith("fio version 3 iolog\n")
    if shutil.which("fio") is None:
        pytest.skip("fio is not installed")
    r = subprocess.run(["fio", "--name=replay", "--ioengine=libaio", "--direct=1", "--iodepth=4",
                        f"--read_iolog={logs[0]}", "--replay_no_stall=1", "--output-format=json"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["jobs"][0]["read"]["total_ios"] == 1024


@pytest.mark.parametrize("args, code, text", [
    (["--bs", "1000"], 2, "logical block size"),
    (["--bs", "4kb"], 2, "bits"),
    (["--bs", "4 KiB"], 2, "space"),
    (["--qd", "0"], 2, "--qd"),
    (["--workers", "0"], 2, "--workers"),
    (["--reap-batch", "0"], 2, "--reap-batch"),
    (["--reap-batch", "9", "--qd", "8"], 2, "--reap-batch"),
    (["--rwmixread", "120", "--rw", "randrw"], 2, "rwmixread"),
    (["--rw", "randwrit"], 2, "randwrit"),
    (["--engine", "spdk"], 2, "spdk"),
    (["--speed", "0", "--rate_iops", "100", "--runtime", "1"], 2, "--speed"),
    (["--rate_iops", "100"], 2, "--runtime > 0"),
    (["--rate", "100m"], 2, "--runtime > 0"),
    (["--rate", "5000", "--runtime", "1"], 2, "--rate_iops 5000"),
    (["--rate", "1m", "--rate_iops", "100", "--runtime", "1"], 2, "give one of them"),
])
def test_bad_options_one_line_no_traceback(cli, tmp_path, args, code, text):
    r = cli("io", "--target", tmp_path / "b.dat", "--size", "1MiB", "--runtime", "0",
            "--results", tmp_path / "results", *args)
    assert r.exit_code == code, r.output
    assert text in r.output and "Traceback" not in r.output


def test_refusals_leave_nothing_behind(cli, tmp_path):
    foreign = tmp_path / "foreign.dat"
    foreign.write_bytes(b"\1" * 65536)
    results = tmp_path / "results"
    r = cli("io", "--target", foreign, "--rw", "randwrite", "--runtime", "0", "--results", results)
    assert r.exit_code == 2 and "not created by kvbench" in r.output
    assert foreign.read_bytes() == b"\1" * 65536
    r = cli("io", "--target", tmp_path / "nodir" / "x.dat", "--size", "1MiB", "--results", results)
    assert r.exit_code == 2 and "does not exist" in r.output
    free = shutil.disk_usage(tmp_path).free
    r = cli("io", "--target", tmp_path / "big.dat", "--size", str(free + (1 << 30)), "--results", results)
    assert r.exit_code == 2 and "free" in r.output and not (tmp_path / "big.dat").exists()
    spaced = tmp_path / "my dir"
    spaced.mkdir()
    r = cli("io", "--target", spaced / "t.dat", "--size", "1MiB", "--runtime", "0", "--results", results,
            "--export-iolog", tmp_path / "x.iolog")
    assert r.exit_code == 2 and "white space" in r.output and "Traceback" not in r.output
    assert not any(spaced.iterdir()) and not (tmp_path / "x.iolog").exists()    # refused before the run
    assert not results.exists() or not any(results.iterdir())     # no run folders for refused runs


def test_injected_error_exits_1_with_results_written(cli, tmp_path):
    results = tmp_path / "results"
    r = cli("io", "--target", tmp_path / "e.dat", "--size", "4MiB", "--runtime", "0", "--qd", "4",
            "--inject-fault", "eio@300", "--results", results, "--json")
    assert r.exit_code == 1 and "EIO" in r.stderr
    s = json.loads(r.stdout)
    assert s["status"] == "failed" and s["first_error"]["index"] == 300 and s["ios"] >= 299
    assert json.loads((Path(s["run_dir"]) / "summary.json").read_text())["status"] == "failed"


def _spawn(tmp_path, *args):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "kvbench", "io", "--target", str(tmp_path / "sig.dat"),
                             "--size", "16MiB", "--qd", "4", "--results", str(tmp_path / "results"), "--json",
                             *args], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_rows(tmp_path, proc, timeout=20):
    t = time.time()
    while time.time() - t < timeout:
        rows = list((tmp_path / "results").glob("io-*/timeseries.csv"))
        if rows and len(rows[0].read_text().splitlines()) >= 2:
            return rows[0].parent
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    raise AssertionError("no time series row appeared")


@pytest.mark.parametrize("sig, workers", [(signal.SIGINT, "2"), (signal.SIGTERM, "1")])
def test_signal_stops_drains_writes_and_exits_128_plus_the_signal(tmp_path, sig, workers):
    p = _spawn(tmp_path, "--runtime", "60", "--workers", workers)
    rd = _wait_for_rows(tmp_path, p)
    p.send_signal(sig)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 128 + sig, err                       # 130 SIGINT, 143 SIGTERM (kvbench/procs.py)
    s = json.loads(out)
    assert s["status"] == "interrupted" and s["ios"] > 0
    assert json.loads((rd / "summary.json").read_text())["status"] == "interrupted"
    assert "interrupted" in err and "Traceback" not in err


def test_sigkill_leaves_partial_summary_and_time_series(tmp_path):
    p = _spawn(tmp_path, "--runtime", "60")
    rd = _wait_for_rows(tmp_path, p)
    time.sleep(0.3)
    p.kill()
    p.communicate(timeout=10)
    s = json.loads((rd / "summary.json").read_text())
    assert s["status"] == "partial" and s["ios_so_far"] > 0
    assert len(pd.read_csv(rd / "timeseries.csv")) >= 1


def test_default_target_is_a_scratch_file_under_results(cli, tmp_path):
    s = io_json(cli, tmp_path, "--size", "4MiB", "--runtime", "0")
    assert s["target"] == str(tmp_path / "results" / "io-scratch.dat")


def test_dram_and_null_engines_from_cli(cli, tmp_path):
    s = io_json(cli, tmp_path, "--target", "dram:8MiB", "--runtime", "0", "--rw", "randwrite", "--bs", "64k")
    assert s["engine"] == "dram" and s["ios"] == 128
    s = io_json(cli, tmp_path, "--target", tmp_path / "n.dat", "--size", "4MiB", "--engine", "null",
                "--runtime", "0.3s", "--no-prefill")
    assert s["engine"] == "null" and s["ios"] > 0 and s["bytes"]["read"] == s["ios"] * 4096
    assert s["iops"] == pytest.approx(s["ios"] / s["runtime_s"], rel=1e-3)


def test_open_loop_rate_reports_issue_lag(cli, tmp_path):
    s = io_json(cli, tmp_path, "--target", tmp_path / "o.dat", "--size", "4MiB", "--rate_iops", "2000",
                "--runtime", "0.5s", "--qd", "8")
    assert s["pacing"] == "open" and s["ios"] == 1000
    lag = s["issue_lag_us"]
    assert lag["n"] == 1000 and 0 <= lag["p50"] <= lag["p99"] <= lag["max"]
    # paced at 2000/s, not as fast as possible: no I/O issued before it is due (unpaced, the mean lag would be
    # about -250 ms); the lag histogram clips at 0, its mean is of the signed lags
    assert s["issue_lag_us"]["mean_us"] >= 0


def test_sigkill_of_parent_stops_workers(tmp_path):
    import psutil
    p = _spawn(tmp_path, "--runtime", "60", "--workers", "2")
    _wait_for_rows(tmp_path, p)
    kids = psutil.Process(p.pid).children()
    assert len(kids) == 2
    p.kill()
    p.communicate(timeout=10)
    gone, alive = psutil.wait_procs(kids, timeout=10)
    assert not alive
