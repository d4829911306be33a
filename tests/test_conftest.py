"""The shared fixtures of tests/conftest.py: loop devices that never outlive their session, however it ends,
scratch folders swept by the next session, and the lanes' automatic marks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import conftest

REPO = Path(__file__).resolve().parents[1]


def _attached(dev: str) -> bool:
    return (Path("/sys/block") / Path(dev).name / "loop" / "backing_file").exists()


def _gone(dev: str, within_s: float = 20.0) -> bool:
    """The kernel's autoclear may detach from a work queue: poll (a liveness bound, not a measurement)."""
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        if not _attached(dev):
            return True
        time.sleep(0.05)
    return False


def test_a_loop_device_is_attached_with_autoclear_and_detached_after_the_test(loop_devices):
    img = loop_devices.image("a.img", 8)
    dev = loop_devices.attach(img)
    name = Path(dev).name
    assert (Path("/sys/block") / name / "loop" / "autoclear").read_text().strip() == "1"
    assert (Path("/sys/block") / name / "loop" / "backing_file").read_text().strip() == str(img)
    assert img.parent.parent == conftest.SCRATCH / str(os.getpid())
    loop_devices.close()
    assert _gone(dev)


_HOLD = """
import sys, time
from pathlib import Path
from tests.conftest import LoopDevices
loops = LoopDevices(Path(sys.argv[1]))
print(loops.attach(loops.image("k.img", 8)), flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_killed_holder_leaves_no_loop_device(scratch, sig):
    """No teardown runs after SIGKILL (or pytest-timeout's os._exit): the process's last close detaches."""
    if os.geteuid() != 0:
        pytest.skip("loop devices need root")
    p = subprocess.Popen([sys.executable, "-c", _HOLD, str(scratch)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        dev = p.stdout.readline().strip()
        assert dev.startswith("/dev/loop") and _attached(dev)
    finally:
        p.send_signal(sig)
        p.wait(timeout=60)
    assert _gone(dev)


_SESSION = """
import time
def test_holds(loop_devices):
    dev = loop_devices.attach(loop_devices.image("s.img", 8))
    print("DEV", dev, flush=True)
    time.sleep(600)
"""


def test_sigterm_ends_a_session_through_its_teardowns(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("loop devices need root")
    t = tmp_path / "test_holds.py"
    t.write_text(_SESSION)
    p = subprocess.Popen([sys.executable, "-m", "pytest", "-s", "-q", "-p", "tests.conftest", "-p", "no:cacheprovider",
                          "--rootdir", str(tmp_path), str(t)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    dev = ""
    try:
        for line in p.stdout:
            if line.startswith("DEV "):
                dev = line.split()[1]
                break
        assert dev and _attached(dev)
    finally:
        p.send_signal(signal.SIGTERM)
        out = p.communicate(timeout=120)[0]
    assert _gone(dev)
    assert "KeyboardInterrupt" in out or "signal 15" in out                     # ended as an interrupt


def test_the_next_session_sweeps_a_dead_sessions_scratch_and_loop_devices(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("loop devices need root")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    folder = tmp_path / str(dead.pid)
    folder.mkdir()
    img = folder / "left.img"
    img.write_bytes(b"\0" * (1 << 20))
    # attached the old way (no autoclear, nobody holding it), as a killed session would leave it
    dev = subprocess.run(["losetup", "-f", "--show", str(img)], check=True, capture_output=True,
                         text=True).stdout.strip()
    alive = tmp_path / str(os.getpid())
    alive.mkdir()
    try:
        conftest._sweep_dead_sessions(tmp_path)
        assert _gone(dev) and not folder.exists()
        assert alive.exists()                                   # a live session's folder is left alone
    finally:
        subprocess.run(["losetup", "-d", dev], capture_output=True)


# --- traces by shape ---------------------------------------------------------------------------------------------
def test_trace_builders_by_hand(traces, tmp_path):
    import json

    t = traces.chained([[1, 2], [1, 3], [2]], times=[0.0, 5.0, 7.5])
    assert t.keys.tolist() == [1, 2, 1, 3, 4] and t.offsets.tolist() == [0, 2, 4, 5]
    assert t.timestamp_s.tolist() == [0.0, 5.0, 7.5] and t.keys.dtype.name == "uint64"
    o = traces.one_block([7, 8, 7], gap=2.0)
    assert o.keys.tolist() == [7, 8, 7] and o.offsets.tolist() == [0, 1, 2, 3] and o.timestamp_s.tolist() == [0, 2, 4]
    b = traces.ttl_boundary(5.0)
    assert b.keys.tolist() == [1, 2, 1, 1] and b.timestamp_s.tolist() == [0.0, 5.0, 10.5]
    # two tenants behind one shared system block, each resending its own 2 blocks
    m = traces.multi_tenant(2, 2, blocks=3, shared_prefix=1)
    assert m.keys.tolist() == [1, 2, 3, 1, 4, 5, 1, 2, 3, 1, 4, 5] and m.offsets.tolist() == [0, 3, 6, 9, 12]
    p = traces.mooncake(tmp_path / "m.jsonl", [(0, [1, 2]), (1000, (3,), 700)])
    assert [json.loads(x) for x in p.read_text().splitlines()] == [
        {"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [1, 2]},
        {"timestamp": 1000, "input_length": 700, "output_length": 1, "hash_ids": [3]}]


def test_the_run_folder_is_a_dry_replay(run_dir):
    import json

    s = json.loads((run_dir / "summary.json").read_text())
    assert (run_dir / "requests.csv").exists()
    # request t holds 1 + t % 12 blocks of its document and 2 new ones: 40 * 3 + 3 * 66 + (0 + 1 + 2 + 3) = 324
    assert (s["status"], s["dry_run"], s["requests"], s["blocks"]) == ("complete", True, 40, 324)


def test_pairwise_lanes_keep_every_pair_fast_and_every_case_in_the_suite():
    from itertools import combinations, product

    from tests.conftest import pairwise_lanes
    factors = [("lru", "fifo", "s3fifo"), (None, 3.0), ("a", "b", "c"), (True, False), ("slot", "log")]
    params = pairwise_lanes(*factors)
    cases = [p.values for p in params]
    assert cases == list(product(*factors))                     # every case once, in product order
    fast = [p.values for p in params if not any(m.name == "slow" for m in p.marks)]
    slow = [p for p in params if any(m.name == "slow" for m in p.marks)]
    assert len(fast) + len(slow) == 72
    for i, j in combinations(range(len(factors)), 2):           # every value pair of every two factors is fast
        for a, b in product(factors[i], factors[j]):
            assert any(c[i] == a and c[j] == b for c in fast), (i, j, a, b)
    assert len(fast) == 9            # two 3-valued factors need 3 x 3 cases at least; the greedy cover meets it
    assert [p.values for p in pairwise_lanes(*factors)] == cases and \
        [p.marks for p in pairwise_lanes(*factors)] == [p.marks for p in params]      # the same lanes every run
    one = pairwise_lanes(("x", "y"))                             # one factor: every value is its own pair
    assert [p.values for p in one] == [("x",), ("y",)] and not any(p.marks for p in one)
