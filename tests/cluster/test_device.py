"""A node's L3 drive as measured inside the cluster model (kvbench.cluster.device): the latency-vs-load curve from
kvbench io summaries, queueing at the drive by hand, and TTFT following a throttled loop device."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

import pytest

from kvbench.cluster.device import DeviceCurve, l3_load, point_from_summary
from kvbench.cluster.pool import Calendar
from kvbench.errors import UsageError
from tests.cluster.test_cluster import BLOCK, _cluster
from tests.conftest import write_mooncake
from tests.conftest import REPO



def _summary(qd, bw, p50_us, p99_us, **kw):
    return {"kind": "io", "rw": "randread", "status": "complete", "qd": qd, "bs": 262144, "bw_bytes_per_s": bw,
            "lat_us": {"p50": p50_us, "p90": p50_us, "p99": p99_us, "p99.9": p99_us, "p99.99": p99_us,
                       "max": p99_us}, **kw}


def _curve():
    pts = [point_from_summary(_summary(1, 100e6, 100, 200), "qd1"), point_from_summary(_summary(8, 400e6, 800, 4000),
                                                                                         "qd8")]
    return DeviceCurve(tuple(pts), "test")


def test_curve_points_and_latency_by_hand():
    c = _curve()
    assert c.max_bandwidth == 400e6
    assert c.point_at(0.0).qd == 1 and c.point_at(0.25).qd == 1 and c.point_at(0.26).qd == 8
    assert c.point_at(2.0).qd == 8                                      # beyond the curve: its heaviest point
    assert c.latency_s(0.0, 0.5) == pytest.approx(100e-6)              # the median at an idle drive
    assert c.latency_s(0.0, 0.25) == pytest.approx(75e-6)              # halfway from p0 (= p50 / 2) to p50
    assert c.latency_s(0.5, 0.995) == pytest.approx(4000e-6)           # the loaded point's tail
    with pytest.raises(UsageError, match="not kvbench io"):
        point_from_summary({**_summary(1, 1e6, 1, 2), "kind": "replay-kv"}, "x")
    with pytest.raises(UsageError, match="randread"):
        point_from_summary(_summary(1, 1e6, 1, 2, rw="randwrite"), "x")


def test_a_folder_that_is_not_a_run_names_the_option(tmp_path):
    from kvbench.cluster.device import read_curve

    with pytest.raises(UsageError, match=r"^--l3-device: run folder not found: .*nowhere"):
        read_curve([tmp_path / "nowhere"])
    with pytest.raises(UsageError, match=r"^--l3-device: .* is not a kvbench run folder"):
        read_curve([tmp_path])


def test_loads_queue_at_the_drive_by_hand():
    """Two 40 MB loads start together on a 400 MB/s drive: the first takes 0.1 s + its latency drawn at an idle
    drive (median 100 us); the second runs behind it (0.2 s) and its latency is drawn where the drive is full
    (the qd8 point: median 800 us)."""
    c = _curve()
    dev = Calendar(c.max_bandwidth)
    first = l3_load(c, dev, 0.0, 40e6, 0.5)
    second = l3_load(c, dev, 0.0, 40e6, 0.5)
    assert first == pytest.approx(0.1 + 100e-6)
    assert second == pytest.approx(0.2 + 800e-6)


@pytest.fixture
def throttled(tmp_path):
    from kvbench.engine.throttle import throttled_loop, unavailable

    why = unavailable()
    if why:
        pytest.skip(f"throttled loop devices: {why}")
    with ExitStack() as stack:
        yield lambda bps: stack.enter_context(throttled_loop(tmp_path / f"d{bps}.img", 64 << 20, read_bps=bps))


def _io(loop, tmp_path, qd):
    argv = [sys.executable, "-m", "kvbench", "io", "--target", loop.device, "--rw", "randread", "--bs", "256k",
            "--qd", str(qd), "--runtime", "1.5s", "--results", tmp_path / "results", "--json"]
    r = subprocess.run(loop.argv(argv), cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.integration
@pytest.mark.timeout(600)
def test_ttft_follows_a_throttled_drive(cli, tmp_path, throttled):
    """A drive throttled to 16 MiB/s, measured with kvbench io at QD 1 and 4: a request that loads 8 blocks (2
    MiB) from L3 takes at least 2 MiB / the measured bandwidth (~125 ms) where the assumed 6 GB/s said 0.35 ms;
    two such loads on one node at once (two GPUs) queue at its drive: the second at least twice as long."""
    loop = throttled(16 << 20)
    runs = [_io(loop, tmp_path, qd) for qd in (1, 4)]
    bw = max(r["bw_bytes_per_s"] for r in runs)
    assert bw == pytest.approx(16 << 20, rel=0.1)
    keys = list(range(1, 9))
    other = list(range(101, 109))
    tr = write_mooncake(tmp_path / "t.jsonl", [(0, keys), (0, other), (60000, keys), (60000, other)])
    common = ["--router", "round-robin", "--gpus-per-node", "2", "--l3", str(tmp_path / "l3.store"), "--l3-capacity",
              str(64 * BLOCK)]
    base = _cluster(cli, tmp_path, tr, *common)
    dev = ",".join(r["run_dir"] for r in runs)
    s = _cluster(cli, tmp_path, tr, *common, "--l3-device", dev)
    import pandas as pd

    df = pd.read_csv(Path(s["run_dir"]) / "requests-round-robin.csv")
    df0 = pd.read_csv(Path(base["run_dir"]) / "requests-round-robin.csv")
    assert df["hit_l3"].tolist() == [0, 0, 8, 8]
    alone = 8 * BLOCK / bw * 1e3
    assert df0["load_ms"].tolist()[2] == pytest.approx(8 * BLOCK / 6e9 * 1e3)
    assert alone <= df["load_ms"].tolist()[2] <= alone + 1e3 * max(r["lat_us"]["max"] for r in runs) / 1e3
    assert df["load_ms"].tolist()[3] >= 2 * alone                  # queued behind the first on the same drive
    assert all(df["ttft_ms"][i] >= df0["ttft_ms"][i] + alone for i in (2, 3))
    assert "measured drive" in s["model_notes"]["l3_bw_source"]
