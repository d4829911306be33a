"""Fidelity on devices of known speed: loop devices throttled by the blkio cgroup (DESIGN.md).

A loop device whose reads are capped at B bytes/s by ``blkio.throttle.read_bps_device`` is a drive whose
true bandwidth we set; kvbench must measure B, and the 4.7x ratio between two such drives.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BLKIO = Path("/sys/fs/cgroup/blkio")
MiB = 1 << 20


@pytest.fixture
def throttled(tmp_path):
    if os.geteuid() != 0 or not (BLKIO / "blkio.throttle.read_bps_device").exists():
        pytest.skip("needs root and the cgroup-v1 blkio controller at /sys/fs/cgroup/blkio")
    made, devs = [], []

    def make(bps):
        img = tmp_path / f"d{len(devs)}.img"
        with open(img, "wb") as f:
            f.truncate(64 * MiB)
        dev = subprocess.run(["losetup", "-f", "--show", str(img)], check=True, capture_output=True,
                             text=True).stdout.strip()
        devs.append(dev)
        cg = BLKIO / f"kvbench-test-{os.getpid()}-{len(made)}"
        cg.mkdir()
        made.append(cg)
        majmin = Path(f"/sys/block/{os.path.basename(dev)}/dev").read_text().strip()
        (cg / "blkio.throttle.read_bps_device").write_text(f"{majmin} {bps}")
        return dev, cg
    yield make
    for d in devs:
        subprocess.run(["losetup", "-d", d])
    for cg in made:
        cg.rmdir()


def measure(dev, cg, tmp_path):
    """kvbench io in a child process placed in the throttled cgroup; returns its JSON summary."""
    script = (f"echo $$ > {cg}/cgroup.procs && exec {sys.executable} -m kvbench io --target {dev} --rw randread "
              f"--bs 128k --qd 8 --runtime 1.5s --results {tmp_path}/results --json")
    r = subprocess.run(["sh", "-c", script], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_measures_the_bandwidth_it_was_given_and_the_ratio(throttled, tmp_path):
    slow_bps, fast_bps = 16 * MiB, int(16 * MiB * 4.7)
    slow = measure(*throttled(slow_bps), tmp_path)
    fast = measure(*throttled(fast_bps), tmp_path)
    assert slow["bw_bytes_per_s"] == pytest.approx(slow_bps, rel=0.08)
    assert fast["bw_bytes_per_s"] == pytest.approx(fast_bps, rel=0.08)
    assert fast["bw_bytes_per_s"] / slow["bw_bytes_per_s"] == pytest.approx(4.7, rel=0.08)
