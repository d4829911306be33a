"""Real faults: a full filesystem (ENOSPC mid-run) and a failing block device (loop over a full tmpfs)."""

import errno
import os
import shutil
import subprocess

import numpy as np
import pytest

from kvbench.engine import make_plan, open_target, run_plan
from kvbench.errors import DiskFullError, TargetError

MiB = 1 << 20
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounting and losetup need root")


@pytest.fixture
def small_ext4(tmp_path):
    if shutil.which("mkfs.ext4") is None:
        pytest.skip("mkfs.ext4 missing")
    img, mnt = tmp_path / "fs.img", tmp_path / "mnt"
    with open(img, "wb") as f:
        f.truncate(24 * MiB)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", str(img)], check=True)
    mnt.mkdir()
    r = subprocess.run(["mount", "-o", "loop", str(img), str(mnt)], capture_output=True, text=True)
    if r.returncode:
        pytest.skip(f"cannot loop-mount here: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


@needs_root
def test_enospc_mid_run_on_a_full_filesystem(small_ext4):
    with open_target(small_ext4 / "kv.dat", size=8 * MiB, write=True) as t:
        # give the blocks back (trim = punch hole), then let another file take all free space
        r = run_plan(make_plan(2, 0, 8 * MiB), [t], qd=1)
        assert r.status == "complete"
        st = os.statvfs(small_ext4)
        with open(small_ext4 / "filler", "wb") as f:
            os.posix_fallocate(f.fileno(), 0, st.f_bavail * st.f_frsize - 64 * 1024)
        r = run_plan(make_plan(1, np.arange(128) * 65536, 65536, tag=1), [t], qd=4)
    assert r.status == "failed" and r.errno == errno.ENOSPC
    assert 0 < r.ios_by_op()["write"] < 128 and r.first_error["op"] == "write"
    with pytest.raises(DiskFullError, match="ENOSPC"):
        r.raise_for_status()


@needs_root
def test_failing_device_reports_errors(tmp_path):
    """A loop device backed by a sparse file on a 4 MiB tmpfs fails writes past 4 MiB: a real device error."""
    mnt = tmp_path / "tm"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)]).returncode:
        pytest.skip("cannot mount tmpfs")
    dev = None
    try:
        with open(mnt / "back", "wb") as f:
            f.truncate(32 * MiB)
        dev = subprocess.run(["losetup", "-f", "--show", str(mnt / "back")], capture_output=True, text=True,
                             check=True).stdout.strip()
        with open_target(dev, write=True, destroy_data=dev) as t:
            r = run_plan(make_plan(1, np.arange(32) * MiB, MiB, tag=1), [t], qd=4)
        assert r.status == "failed" and r.errno in (errno.ENOSPC, errno.EIO)
        assert r.ios_by_op()["write"] < 32 and r.first_error["offset"] < 8 * MiB
    finally:
        if dev:
            subprocess.run(["losetup", "-d", dev])
        subprocess.run(["umount", str(mnt)])


@needs_root
def test_read_only_filesystem_is_a_clear_error(small_ext4, cli):
    """A target on a read-only mount: one line naming the path and the fix, exit 2, nothing written."""
    subprocess.run(["mount", "-o", "remount,ro", str(small_ext4)], check=True)
    try:
        with pytest.raises(TargetError, match="read-only|Read-only"):
            open_target(small_ext4 / "kv.dat", size=4 * MiB, write=True)
        r = cli("io", "--target", small_ext4 / "kv.dat", "--size", "4MiB", "--rw", "write", "--runtime", "0",
                "--results", small_ext4.parent / "results")
        assert r.exit_code == 2 and "kv.dat" in r.output and "fix:" in r.output
        assert not (small_ext4 / "kv.dat").exists() and not (small_ext4.parent / "results").exists()
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(small_ext4)], check=True)
