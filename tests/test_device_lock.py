"""One device lock (issue 30): a block device is opened O_EXCL, the kernel's lock on the device itself, so a
second device node naming the same device (mknod, a container's /dev) is refused while a run holds it. The flock
beside it is per node: alone it let two nodes of one loop device be written at once."""

from __future__ import annotations

import os
import stat
import subprocess

import pytest

from kvbench.engine.targets import open_target
from kvbench.errors import SafetyError


@pytest.fixture
def loop_pair(tmp_path):
    """A 16 MiB loop device (autoclear) and a second node for it made with mknod."""
    if os.geteuid() != 0:
        pytest.skip("needs root (losetup, mknod)")
    img = tmp_path / "dev.img"
    with open(img, "wb") as f:
        f.truncate(16 << 20)
    r = subprocess.run(["losetup", "--find", "--show", str(img)], capture_output=True, text=True)
    if r.returncode:
        pytest.skip(f"losetup failed: {r.stderr.strip()}")
    dev = r.stdout.strip()
    alt = tmp_path / "alt"
    try:
        rdev = os.stat(dev).st_rdev
        os.mknod(alt, stat.S_IFBLK | 0o600, rdev)
        os.close(os.open(alt, os.O_RDONLY))           # a nodev mount refuses device nodes: skip there
    except OSError as e:
        subprocess.run(["losetup", "-d", dev], check=False)
        pytest.skip(f"cannot use a second device node here: {e}")
    yield dev, str(alt)
    subprocess.run(["losetup", "-d", dev], check=False)


@pytest.mark.parametrize("first_write, second_write", [(True, True), (True, False), (False, True)])
def test_a_second_node_of_a_held_device_is_refused(loop_pair, first_write, second_write):
    dev, alt = loop_pair
    assert os.stat(dev).st_rdev == os.stat(alt).st_rdev and os.stat(dev).st_ino != os.stat(alt).st_ino
    held = open_target(dev, write=first_write, destroy_data=dev if first_write else None)
    try:
        for node in (alt, dev):                       # the other node, and the same node again
            with pytest.raises(SafetyError, match="is in use"):
                open_target(node, write=second_write, destroy_data=node if second_write else None)
    finally:
        held.close()
    open_target(alt, write=True, destroy_data=alt).close()       # free again once the first run closed it


def test_the_cli_refuses_the_alias_in_one_line_and_writes_nothing(loop_pair, cli, tmp_path):
    dev, alt = loop_pair
    with open(dev, "rb") as fh:
        before = fh.read(1 << 20)
    held = open_target(dev, write=True, destroy_data=dev)
    try:
        r = cli("io", "--target", alt, "--rw", "randwrite", "--destroy-data", alt, "--size", "4MiB",
                "--runtime", "1", "--results", tmp_path / "res")
    finally:
        held.close()
    assert r.exit_code == 2 and "is in use" in r.output, r.output
    assert [ln for ln in r.output.splitlines() if ln.startswith("kvbench: error")] and "Traceback" not in r.output
    with open(dev, "rb") as fh:
        assert fh.read(1 << 20) == before
