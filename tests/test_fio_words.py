"""fio's vocabulary in ``kvbench io``: the aliases, ``--rate`` as bandwidth and ``--rate_iops``, I/O sizes read
1024-based (fio's kb_base=1024), the open-loop rate check in the text output, ``--output-format json+`` bins and
``--write_lat_log`` logs; checked against real fio's own parsing and I/O logs of the same job where fio is here."""

import json
import re
import shutil
import subprocess

import numpy as np
import pytest

from kvbench.cli._common import IO_SIZE, SIZE
from kvbench.units import parse_rate, parse_size

FIO = shutil.which("fio")
needs_fio = pytest.mark.skipif(FIO is None, reason="fio is not installed")


def _json(r):
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


# ---- the one size rule -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,capacity,io_size", [
    ("4KB", 4000, 4096), ("4kB", 4000, 4096), ("1MB", 10**6, 1 << 20), ("2TB", 2 * 10**12, 2 << 40),
    ("4k", 4096, 4096), ("4K", 4096, 4096), ("4KiB", 4096, 4096), ("64GiB", 64 << 30, 64 << 30), ("512", 512, 512),
])
def test_io_sizes_read_kb_1024_based_and_capacities_si(text, capacity, io_size):
    assert parse_size(text) == capacity and parse_size(text, kb_base=1024) == io_size
    assert SIZE.convert(text, None, None) == capacity and IO_SIZE.convert(text, None, None) == io_size


def test_rates_follow_the_same_rule():
    assert parse_rate("100MB/s") == 100e6 and parse_rate("100MB/s", kb_base=1024) == 100 * 2**20
    assert parse_rate("400Gb/s", kb_base=1024) == 50e9            # a link's bits stay decimal
    with pytest.raises(ValueError):
        parse_size("4k", kb_base=1001)


def test_io_options_classified_by_the_rule():
    """Every size option that is an I/O unit takes IO_SIZE; tiers, drives and regions keep SI."""
    from kvbench.cli import main

    ctx = __import__("click").Context(main)
    io_units = {("io", "bs"), ("replay kv", "chunk_bytes"), ("replay kv", "segment_bytes"), ("replay engram", "page"),
                ("ftl", "page_size"), ("ftl", "io_size"), ("ftl", "erase_block"), ("plan", "erase_block")}
    for path in io_units:
        cmd = main
        for word in path[0].split():
            cmd = cmd.get_command(ctx, word)
        p = next(p for p in cmd.params if p.name == path[1])
        assert p.type is IO_SIZE, path
    io_cmd = main.get_command(ctx, "io")
    assert next(p for p in io_cmd.params if p.name == "size").type is SIZE


# ---- aliases and --rate ----------------------------------------------------------------------------------------
def test_fio_aliases_give_the_same_run_as_kvbench_names(cli, tmp_path):
    common = ["--size", "1MiB", "--runtime", "0", "--bs", "4KB", "--rw", "randread", "--no-prefill", "--json",
              "--results", tmp_path / "res"]
    (tmp_path / "a.dat").write_bytes(b"\1" * (1 << 20))
    a = _json(cli("io", "--target", tmp_path / "a.dat", "--qd", 4, "--workers", 2, "--seed", 9, "--engine", "null",
                  *common, "--export-iolog", tmp_path / "a.log"))
    b = _json(cli("io", "--filename", tmp_path / "a.dat", "--iodepth", 4, "--numjobs", 2, "--randseed", 9,
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
    s = _json(cli("io", *base, "--bs", "4k", "--rate", "20m"))   # 20 MiB/s / 4 KiB = 5,120 IOPS (fio's rate=20m)
    assert s["pacing"] == "open" and s["open_loop"]["intended_iops"] == 5120.0 and s["ios"] == 1280
    s = _json(cli("io", *base, "--bs", "4k", "--rate_iops", 2000))
    assert s["open_loop"]["intended_iops"] == 2000.0 and s["ios"] == 500
    s = _json(cli("io", *base, "--bs", "4k", "--rate-iops", 2000, "--speed", 2))
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


# ---- json+ and latency logs ------------------------------------------------------------------------------------
def test_json_plus_bins_add_up_to_the_counts(cli, tmp_path):
    from kvbench.metrics.histogram import bucket_bounds, bucket_index

    s = _json(cli("io", "--target", "dram:4MiB", "--runtime", "0", "--bs", "64k", "--rw", "randrw",
                  "--output-format", "json+", "--results", tmp_path / "res"))
    b = s["bins"]
    assert set(b["lat_ns"]) == {"all", "read", "write"}
    for kind in ("lat_ns", "clat_ns", "slat_ns"):
        assert sum(b[kind]["all"]["bins"].values()) == b[kind]["all"]["count"] == s["ios"]
        assert b[kind]["read"]["count"] + b[kind]["write"]["count"] == s["ios"]
    keys = np.array([int(k) for k in b["lat_ns"]["all"]["bins"]])
    low, width = bucket_bounds(bucket_index(keys))      # each key lies in its own bucket, at its midpoint
    assert (keys == low + (width - 1) // 2).all()
    assert "bins" not in _json(cli("io", "--target", "dram:4MiB", "--runtime", "0", "--bs", "64k",
                                   "--output-format", "json", "--results", tmp_path / "res"))


def test_lat_log_has_one_line_per_io_in_fio_columns(cli, tmp_path):
    (tmp_path / "l.dat").write_bytes(b"\1" * (1 << 20))
    s = _json(cli("io", "--target", tmp_path / "l.dat", "--size", "1MiB", "--runtime", "0", "--bs", "16k",
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


# ---- the same job through fio and through kvbench's aliases ----------------------------------------------------
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


@needs_fio
def test_fio_job_options_plan_the_same_run_in_kvbench(cli, tmp_path):
    f = tmp_path / "job.dat"
    f.write_bytes(b"\1" * (1 << 20))
    fio = _fio_parsed(JOB, f)
    assert {"bs", "size", "iodepth", "numjobs", "randseed", "rate"} <= set(fio)
    s = _json(cli(*_kvbench_argv(JOB, f), "--runtime", "0.5s", "--no-prefill", "--json",
                  "--results", tmp_path / "res"))
    assert s["bs"] == fio["bs"] == 4096
    assert s["size"] == fio["size"] == 1 << 20
    assert s["qd"] == fio["iodepth"] and s["workers"] == fio["numjobs"] and s["seed"] == fio["randseed"]
    assert s["open_loop"]["intended_iops"] * s["bs"] == fio["rate"] == 8 << 20
    # the documented difference: fio's kb_base=1024 compatibility mode reads IEC units as 1000-based
    assert _fio_parsed({**JOB, "bs": "4KiB"}, f)["bs"] == 4000 and IO_SIZE.convert("4KiB", None, None) == 4096


def _iolog_ios(path) -> list[tuple]:
    """(file, action, offset, length) of each I/O line of a fio iolog v3 (times dropped)."""
    out = []
    for ln in path.read_text().splitlines()[1:]:
        p = ln.split()
        if len(p) == 5:
            out.append((p[1], p[2], int(p[3]), int(p[4])))
    return out


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
    _json(cli(*_kvbench_argv(job, mine), "--runtime", "0", "--json", "--export-iolog", tmp_path / "kv.iolog",
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


def test_qualify_precondition_block_sizes_are_io_sizes():
    """A profile's precondition bs/fill_bs follow the I/O-size rule (4KB = 4,096 B); its drive capacity stays SI."""
    from kvbench.qualify.profile import parse_profile, validate_drive

    prof = parse_profile({"name": "t", "precondition": {"bs": "4KB", "fill_bs": "1MB"},
                          "workload": [{"name": "w", "kind": "io", "rw": "randread"}],
                          "criterion": [{"name": "c", "workload": "w", "metric": "iops", "min": 1}]}, "t.toml")
    assert prof.precondition.bs == 4096 and prof.precondition.fill_bs == 1 << 20
    assert validate_drive({"capacity": "7.68TB"})["capacity"] == 7_680_000_000_000


@needs_fio
def test_a_fio_command_line_runs_in_kvbench_as_written(cli, tmp_path):
    """The same argv (fio's spelling, = signs and all) through fio and through kvbench io: the same I/O."""
    f = tmp_path / "cmd.dat"
    f.write_bytes(b"\1" * (256 << 10))
    line = ["--name=seq", f"--filename={f}", "--rw=read", "--bs=16k", "--size=256k", "--iodepth=4", "--direct=1",
            "--ioengine=psync", "--numjobs=1", "--randseed=3", "--runtime=0", "--group_reporting"]
    subprocess.run([FIO, *line, f"--write_iolog={tmp_path / 'fio.iolog'}", "--output=/dev/null"], check=True,
                   timeout=60)
    s = _json(cli("io", *line, "--no-prefill", "--json", "--export-iolog", tmp_path / "kv.iolog",
                  "--results", tmp_path / "res"))
    assert s["job_name"] == "seq" and s["bs"] == 16384 and s["qd"] == 4 and s["seed"] == 3
    assert [x[1:] for x in _iolog_ios(tmp_path / "fio.iolog")] == [x[1:] for x in _iolog_ios(tmp_path / "kv.iolog")]
    r = cli("io", *line, "--direct=0", "--results", tmp_path / "res")
    assert r.exit_code == 2 and "page cache" in r.output
