"""RunDir: run.json with environment and target facts, incremental timeseries, summary status."""

import json

import numpy as np
import pandas as pd

from kvbench.metrics.histogram import LatencyHistogram
from kvbench.metrics.run import RunDir


def test_rundir_files(tmp_path):
    target = tmp_path / "t.dat"
    target.write_bytes(b"x" * 4096)
    rd = RunDir.create("io", {"bs": 4096, "rate": np.float64(1.5)}, root=tmp_path / "results", targets=[target])
    run = json.loads((rd.path / "run.json").read_text())
    assert run["schema"] == 1 and run["kind"] == "io" and run["config"]["rate"] == 1.5
    env = run["environment"]
    assert env["kernel"] and env["memory_bytes"] > 0 and env["kvbench_version"]
    t = run["targets"][0]
    assert t["path"] == str(target) and t["kind"] == "file" and t["filesystem"]
    # a partial summary exists from the start (a killed run still leaves one)
    assert json.loads((rd.path / "summary.json").read_text())["status"] == "partial"
    rd.append_timeseries({"t_s": [0, 1], "iops": [10.0, 20.0]})
    rd.append_timeseries({"t_s": 2, "iops": 30.0, "errors": 1})
    df = pd.read_csv(rd.path / "timeseries.csv")
    assert list(df["iops"]) == [10.0, 20.0, 30.0] and list(df.columns) == ["t_s", "iops", "errors"]
    h = LatencyHistogram()
    h.record([1000, 2000, 3000])
    rd.write_histograms({"read": h})
    back = LatencyHistogram.from_dict(json.loads((rd.path / "histograms.json").read_text())["read"])
    assert back.count == 3
    rd.write_summary({"iops": float("nan")}, status="partial")
    s = json.loads((rd.path / "summary.json").read_text())
    assert s == {"schema": 1, "kind": "io", "status": "partial", "run_dir": str(rd.path), "iops": None}


def test_rundir_accepts_opened_targets(tmp_path):
    from kvbench.engine import open_target
    with open_target(tmp_path / "t.dat", size=1 << 20, write=True) as t, open_target("dram:1MiB") as d:
        rd = RunDir.create("x", {}, root=tmp_path / "r", targets=[t, d])
    facts = json.loads((rd.path / "run.json").read_text())["targets"]
    assert facts[0]["path"] == str(tmp_path / "t.dat") and facts[0]["logical_block_size"] == t.lbs
    assert facts[0]["size"] == 1 << 20 and facts[0]["filesystem"]
    assert facts[1]["kind"] == "dram" and facts[1]["size"] == 1 << 20


def test_runs_started_in_the_same_second_get_distinct_folders(tmp_path, monkeypatch):
    """The random suffix is drawn again when a folder of that name exists (two runs of one second used to
    collide one time in 65,536 pairs, a traceback)."""
    import datetime as dt
    import secrets

    from kvbench.metrics import run as run_mod
    from kvbench.metrics.run import RunDir

    class Frozen(dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=tz)

    monkeypatch.setattr(run_mod._dt, "datetime", Frozen)
    draws = iter(["abcd", "abcd", "abcd", "ef01"])
    monkeypatch.setattr(secrets, "token_hex", lambda n: next(draws))
    a = RunDir.create("x", {}, root=tmp_path)
    b = RunDir.create("x", {}, root=tmp_path)
    assert a.path.name == "x-20260102-030405-abcd" and b.path.name == "x-20260102-030405-ef01"
