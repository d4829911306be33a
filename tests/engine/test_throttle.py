"""Fidelity on devices of known speed: loop devices throttled by the blkio cgroup (DESIGN.md).

A loop device whose reads are capped at B bytes/s by ``blkio.throttle.read_bps_device`` is a drive whose
true bandwidth we set; kvbench must measure B, and the 4.7x ratio between two such drives.
"""

import json
import os
import subprocess
import sys
from contextlib import ExitStack

import pytest

from kvbench.engine.throttle import throttled_loop, unavailable
from tests.conftest import REPO

MiB = 1 << 20


@pytest.fixture
def throttled(tmp_path):
    why = unavailable()
    if why:
        pytest.skip(f"throttled loop devices: {why}")
    with ExitStack() as stack:
        yield lambda bps: stack.enter_context(
            throttled_loop(tmp_path / f"d{bps}.img", 64 * MiB, read_bps=bps))


def measure(loop, tmp_path):
    """kvbench io in a child process placed in the throttled cgroup; returns its JSON summary."""
    argv = [sys.executable, "-m", "kvbench", "io", "--target", loop.device, "--rw", "randread", "--bs", "128k",
            "--qd", "8", "--runtime", "1.5s", "--results", tmp_path / "results", "--json"]
    r = subprocess.run(loop.argv(argv), cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_measures_the_bandwidth_it_was_given_and_the_ratio(throttled, tmp_path):
    slow_bps, fast_bps = 16 * MiB, int(16 * MiB * 4.7)
    slow = measure(throttled(slow_bps), tmp_path)
    fast = measure(throttled(fast_bps), tmp_path)
    assert slow["bw_bytes_per_s"] == pytest.approx(slow_bps, rel=0.08)
    assert fast["bw_bytes_per_s"] == pytest.approx(fast_bps, rel=0.08)
    assert fast["bw_bytes_per_s"] / slow["bw_bytes_per_s"] == pytest.approx(4.7, rel=0.08)
