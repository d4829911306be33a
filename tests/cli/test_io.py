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
from kvbench.cli._common import IO_SIZE
import numpy as np
import re

LAT_KEYS = {"p50", "p90", "p99", "p99.9", "p99.99", "max", "mean"}


def io_json(cli, tmp_path, *args):
    r = cli("io", "--results", tmp_path / "results", "--json", *args)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_io_json_and_run_folder(cli, tmp_path, monkeypatch):
    target = tmp_path / "t.dat"
    # the command as the user typed it (the in-process runner leaves sys.argv to pytest, or to an xdist worker's
    # "-c"): run.json names the program by its base name
    monkeypatch.setattr(sys, "argv", ["/usr/local/bin/kvbench", "io", "--target", "t dat"])
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
    assert run["command"] == "kvbench io --target 't dat'"
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


def test_io_verify_failure_fails_the_run_and_stands_out_in_the_report(cli, tmp_path):
    target = tmp_path / "v.img"
    r = cli("io", "--target", target, "--size", "8MiB", "--rw", "randread", "--runtime", "0", "--verify", "all",
            "--inject-fault", "corrupt-every=100", "--results", tmp_path / "res", "--json")
    assert r.exit_code == 1 and "kvbench: error: verify:" in r.output
    s = json.loads(r.stdout)
    assert s["status"] == "failed" and s["verify_errors"] == 2048 // 100
    assert json.loads((Path(s["run_dir"]) / "summary.json").read_text())["status"] == "failed"
    out = tmp_path / "r.html"
    assert cli("report", s["run_dir"], "-o", out).exit_code == 0
    html = out.read_text()
    assert "FAIL: 20 of 2048 checked reads returned wrong data" in html and "FAILED" in html


def test_bad_inject_fault_spec_is_refused_before_anything_is_created(cli, tmp_path):
    target = tmp_path / "f.img"
    r = cli("io", "--target", target, "--size", "8MiB", "--inject-fault", "corrupt-evry=10",
            "--results", tmp_path / "res")
    assert r.exit_code == 2 and "--inject-fault: cannot parse 'corrupt-evry=10'" in r.output
    assert not target.exists() and not (tmp_path / "res").exists()


def test_io_size_smaller_than_bs_names_both(cli, tmp_path):
    r = cli("io", "--target", tmp_path / "s.img", "--size", "64k", "--bs", "1MiB", "--results", tmp_path / "res")
    assert r.exit_code == 2 and "--size 65536 is smaller than one --bs 1048576 block" in r.output
    assert "--size 0" not in r.output and not (tmp_path / "s.img").exists()


def test_io_help_states_the_runtime_unit(cli):
    out = " ".join(cli("io", "--help").output.split())
    assert "[default: 10s]" in out


def test_io_names_its_default_scratch_file(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = cli("io", "--runtime", "0", "--size", "4MiB", "--bs", "64k", "--results", tmp_path / "res")
    assert r.exit_code == 0, r.output
    scratch = Path(tmp_path / "res" / "io-scratch.dat").resolve()
    assert f"scratch file {scratch}" in r.output and f"rm {scratch}" in r.output


# --- fio's vocabulary in ``kvbench io``: the aliases, ``--rate`` as bandwidth and ``--rate_iops``, I/O sizes read
# 1024-based (fio's kb_base=1024), the open-loop rate check in the text output, ``--output-format json+`` bins and
# ``--write_lat_log`` logs; checked against real fio's own parsing and I/O logs of the same job where fio is here.
FIO = shutil.which("fio")


needs_fio = pytest.mark.skipif(FIO is None, reason="fio is not installed")


def _io_json(r):
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


JOB = {"rw": "randread", "bs": "4KB", "size": "1m", "iodepth": "16", "numjobs": "2", "randseed": "7",
       "rate": "8m", "ioengine": "psync"}


def _fio_parsed(job: dict, filename) -> dict:
    """fio's own parse of a job file (``--debug=parse --parse-only``): option -> the value fio stores."""
    text = "[job]\n" + "".join(f"{k}={v}\n" for k, v in {"filename": filename, **job}.items())
    p = subprocess.run([FIO, "--debug=parse", "--parse-only", "-"], input=text, capture_output=True, text=True,
                       timeout=60)
    out, name = {}, None
    for ln in (p.stdout + p.stderr).splitlines():
        m = re.search(r"__handle_option=(\w+),", ln)
        if m:
            name = m.group(1)
        m = re.search(r"ret=0, out=(\d+)", ln)
        if m and name:
            out[name] = int(m.group(1))
    return out


def _kvbench_argv(job: dict, filename) -> list[str]:
    """A fio job's options as kvbench io flags, fio's names unchanged (the aliases)."""
    return ["io", "--filename", str(filename), *[a for k, v in job.items() for a in (f"--{k}", v)]]


def _iolog_ios(path) -> list[tuple]:
    """(file, action, offset, length) of each I/O line of a fio iolog v3 (times dropped)."""
    out = []
    for ln in path.read_text().splitlines()[1:]:
        p = ln.split()
        if len(p) == 5:
            out.append((p[1], p[2], int(p[3]), int(p[4])))
    return out


def test_fio_aliases_give_the_same_run_as_kvbench_names(cli, tmp_path):
    common = ["--size", "1MiB", "--runtime", "0", "--bs", "4KB", "--rw", "randread", "--no-prefill", "--json",
              "--results", tmp_path / "res"]
    (tmp_path / "a.dat").write_bytes(b"\1" * (1 << 20))
    a = _io_json(cli("io", "--target", tmp_path / "a.dat", "--qd", 4, "--workers", 2, "--seed", 9, "--engine", "null",
                  *common, "--export-iolog", tmp_path / "a.log"))
    b = _io_json(cli("io", "--filename", tmp_path / "a.dat", "--iodepth", 4, "--numjobs", 2, "--randseed", 9,
                  "--ioengine", "null", *common, "--export-iolog", tmp_path / "b.log", "--force"))
    for k in ("target", "qd", "workers", "seed", "engine", "bs", "ios"):
        assert a[k] == b[k], k
    assert a["bs"] == 4096 and a["qd"] == 4 and a["workers"] == 2 and a["seed"] == 9 and a["engine"] == "null"
    body = lambda p: [ln.split(None, 1)[1] for ln in p.read_text().splitlines()[1:]]   # noqa: E731 - times differ
    assert body(tmp_path / "a.log") == body(tmp_path / "b.log")


def test_rate_is_bandwidth_and_rate_iops_the_old_meaning(cli, tmp_path):
    base = ["--target", tmp_path / "r.dat", "--size", "1MiB", "--runtime", "0.25s", "--qd", 4, "--engine", "null",
            "--no-prefill", "--json", "--results", tmp_path / "res"]
    (tmp_path / "r.dat").write_bytes(b"\1" * (1 << 20))
    s = _io_json(cli("io", *base, "--bs", "4k", "--rate", "20m"))   # 20 MiB/s / 4 KiB = 5,120 IOPS (fio's rate=20m)
    assert s["pacing"] == "open" and s["open_loop"]["intended_iops"] == 5120.0 and s["ios"] == 1280
    s = _io_json(cli("io", *base, "--bs", "4k", "--rate_iops", 2000))
    assert s["open_loop"]["intended_iops"] == 2000.0 and s["ios"] == 500
    s = _io_json(cli("io", *base, "--bs", "4k", "--rate-iops", 2000, "--speed", 2))
    assert s["open_loop"]["intended_iops"] == 4000.0 and s["ios"] == 250
    r = cli("io", *base, "--rate", "5000")
    assert r.exit_code == 2 and "--rate_iops 5000" in r.output and "bandwidth" in r.output
    r = cli("io", *base, "--rate", "10m,5m")
    assert r.exit_code == 2 and "read,write" in r.output


def test_missed_rate_is_said_in_the_text_output_with_lag_percentiles():
    from kvbench.engine.io_report import rate_check, rate_line

    s = {"iops": 14_000.0, "issue_lag_us": {"p50": 900.0, "p90": 2000.0, "p99": 4000.0, "p99.9": 5000.0,
                                            "max": 6000.0, "mean": 1100.0, "n": 1000, "late_1ms": 400}}
    c = rate_check(20_000.0, s)
    assert not c["met"] and c["achieved_share"] == 0.7 and c["late_1ms_share"] == 0.4
    line = rate_line(c)
    assert "MISSED: 14,000 of 20,000 IOPS (70%)" in line and "p50=900" in line and "p99=4000" in line
    assert "40.0% of I/Os issued > 1 ms late" in line
    held = rate_check(20_000.0, {**s, "iops": 19_500.0})          # 97.5% >= RATE_MET
    assert held["met"] and "held 19,500 of 20,000 IOPS" in rate_line(held)


def test_open_loop_text_output_has_the_rate_line(cli, tmp_path):
    (tmp_path / "t.dat").write_bytes(b"\1" * (1 << 20))
    r = cli("io", "--target", tmp_path / "t.dat", "--size", "1MiB", "--runtime", "0.2s", "--rate_iops", 1000,
            "--engine", "null", "--no-prefill", "--results", tmp_path / "res")
    assert r.exit_code == 0, r.output
    line = next(ln for ln in r.stdout.splitlines() if ln.strip().startswith("rate:"))
    assert "of 1,000 IOPS" in line and "issue lag (us): p50=" in line


def test_json_plus_bins_add_up_to_the_counts(cli, tmp_path):
    from kvbench.metrics.histogram import bucket_bounds, bucket_index

    s = _io_json(cli("io", "--target", "dram:4MiB", "--runtime", "0", "--bs", "64k", "--rw", "randrw",
                  "--output-format", "json+", "--results", tmp_path / "res"))
    b = s["bins"]
    assert set(b["lat_ns"]) == {"all", "read", "write"}
    for kind in ("lat_ns", "clat_ns", "slat_ns"):
        assert sum(b[kind]["all"]["bins"].values()) == b[kind]["all"]["count"] == s["ios"]
        assert b[kind]["read"]["count"] + b[kind]["write"]["count"] == s["ios"]
    keys = np.array([int(k) for k in b["lat_ns"]["all"]["bins"]])
    low, width = bucket_bounds(bucket_index(keys))      # each key lies in its own bucket, at its midpoint
    assert (keys == low + (width - 1) // 2).all()
    assert "bins" not in _io_json(cli("io", "--target", "dram:4MiB", "--runtime", "0", "--bs", "64k",
                                   "--output-format", "json", "--results", tmp_path / "res"))


def test_lat_log_has_one_line_per_io_in_fio_columns(cli, tmp_path):
    (tmp_path / "l.dat").write_bytes(b"\1" * (1 << 20))
    s = _io_json(cli("io", "--target", tmp_path / "l.dat", "--size", "1MiB", "--runtime", "0", "--bs", "16k",
                  "--rw", "read", "--workers", 2, "--engine", "null", "--no-prefill", "--json",
                  "--write_lat_log", tmp_path / "kv", "--results", tmp_path / "res"))
    assert s["lat_log"]["ios"] == 64 and len(s["lat_log"]["paths"]) == 2
    rows = []
    for w in (1, 2):
        text = (tmp_path / f"kv_lat.{w}.log").read_text()
        assert re.fullmatch(r"(\d+, \d+, 0, 16384, \d+, 0\n)+", text)
        a = np.array([[int(x) for x in ln.split(", ")] for ln in text.splitlines()])
        assert (np.diff(a[:, 0]) >= 0).all()                     # completion order
        rows.append(a)
    offs = np.sort(np.concatenate([r[:, 4] for r in rows]))
    assert offs.tolist() == list(range(0, 1 << 20, 16384))        # every I/O once (round-robin split)
    assert rows[0][:, 4].tolist() == sorted(rows[0][:, 4].tolist()) and rows[0][0, 4] == 0   # worker 1: even rows


@needs_fio
def test_lat_log_columns_match_fio_own_log(tmp_path):
    """fio (write_lat_log, log_offset=1) writes the same six columns with the same separator."""
    f = tmp_path / "f.dat"
    f.write_bytes(b"\1" * (64 << 10))
    subprocess.run([FIO, "--name=t", f"--filename={f}", "--size=64k", "--bs=4k", "--rw=read", "--ioengine=psync",
                    f"--write_lat_log={tmp_path / 'fio'}", "--log_offset=1", "--output=/dev/null"], check=True,
                   cwd=tmp_path, timeout=60)
    line = (tmp_path / "fio_lat.1.log").read_text().splitlines()[1]
    assert re.fullmatch(r"\d+, \d+, 0, 4096, 4096, 0", line)


@needs_fio
def test_fio_job_options_plan_the_same_run_in_kvbench(cli, tmp_path):
    f = tmp_path / "job.dat"
    f.write_bytes(b"\1" * (1 << 20))
    fio = _fio_parsed(JOB, f)
    assert {"bs", "size", "iodepth", "numjobs", "randseed", "rate"} <= set(fio)
    s = _io_json(cli(*_kvbench_argv(JOB, f), "--runtime", "0.5s", "--no-prefill", "--json",
                  "--results", tmp_path / "res"))
    assert s["bs"] == fio["bs"] == 4096
    assert s["size"] == fio["size"] == 1 << 20
    assert s["qd"] == fio["iodepth"] and s["workers"] == fio["numjobs"] and s["seed"] == fio["randseed"]
    assert s["open_loop"]["intended_iops"] * s["bs"] == fio["rate"] == 8 << 20
    # the documented difference: fio's kb_base=1024 compatibility mode reads IEC units as 1000-based
    assert _fio_parsed({**JOB, "bs": "4KiB"}, f)["bs"] == 4000 and IO_SIZE.convert("4KiB", None, None) == 4096


@needs_fio
@pytest.mark.parametrize("rw", ["read", "randread", "write"])
def test_fio_iolog_of_the_job_matches_kvbench_plan(cli, tmp_path, rw):
    """fio runs the job (--write_iolog) and kvbench plans it (--export-iolog): the same number of I/Os, the same
    size and direction; sequential jobs the same offsets in order; random ones aligned offsets inside the size
    (fio's random map visits each block once, kvbench draws with replacement: the offsets are not compared)."""
    f = tmp_path / "x.dat"
    f.write_bytes(b"\1" * (256 << 10))
    job = {"rw": rw, "bs": "16KB", "size": "256k", "iodepth": "4", "ioengine": "psync"}
    subprocess.run([FIO, "--name=x", f"--filename={f}", *[f"--{k}={v}" for k, v in job.items()],
                    f"--write_iolog={tmp_path / 'fio.iolog'}", "--output=/dev/null"], check=True, timeout=60)
    mine = f if "read" in rw else tmp_path / "new.dat"         # kvbench writes only a file it created
    _io_json(cli(*_kvbench_argv(job, mine), "--runtime", "0", "--json", "--export-iolog", tmp_path / "kv.iolog",
              "--results", tmp_path / "res", *(["--no-prefill"] if "read" in rw else [])))
    a, b = _iolog_ios(tmp_path / "fio.iolog"), _iolog_ios(tmp_path / "kv.iolog")
    assert len(a) == len(b) == 16
    assert {x[1] for x in a} == {x[1] for x in b} == {"read" if "read" in rw else "write"}
    assert {x[3] for x in a} == {x[3] for x in b} == {16384}
    if not rw.startswith("rand"):
        assert [x[2] for x in a] == [x[2] for x in b] == list(range(0, 256 << 10, 16384))
    else:
        offs = np.array([x[2] for x in b])
        assert (offs % 16384 == 0).all() and offs.min() >= 0 and offs.max() < 256 << 10
        assert sorted(x[2] for x in a) == list(range(0, 256 << 10, 16384))


@needs_fio
def test_a_fio_command_line_runs_in_kvbench_as_written(cli, tmp_path):
    """The same argv (fio's spelling, = signs and all) through fio and through kvbench io: the same I/O."""
    f = tmp_path / "cmd.dat"
    f.write_bytes(b"\1" * (256 << 10))
    line = ["--name=seq", f"--filename={f}", "--rw=read", "--bs=16k", "--size=256k", "--iodepth=4", "--direct=1",
            "--ioengine=psync", "--numjobs=1", "--randseed=3", "--runtime=0", "--group_reporting"]
    subprocess.run([FIO, *line, f"--write_iolog={tmp_path / 'fio.iolog'}", "--output=/dev/null"], check=True,
                   timeout=60)
    s = _io_json(cli("io", *line, "--no-prefill", "--json", "--export-iolog", tmp_path / "kv.iolog",
                  "--results", tmp_path / "res"))
    assert s["job_name"] == "seq" and s["bs"] == 16384 and s["qd"] == 4 and s["seed"] == 3
    assert [x[1:] for x in _iolog_ios(tmp_path / "fio.iolog")] == [x[1:] for x in _iolog_ios(tmp_path / "kv.iolog")]
    r = cli("io", *line, "--direct=0", "--results", tmp_path / "res")
    assert r.exit_code == 2 and "page cache" in r.output
