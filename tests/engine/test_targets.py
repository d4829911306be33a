"""Target safety: foreign files, pseudo filesystems, tmpfs, free space, locks, raw (loop) block devices."""

import os
import shutil
import subprocess

import numpy as np
import pytest

from kvbench.engine import make_plan, open_target, run_plan
from kvbench.engine import safety
from kvbench.errors import SafetyError, TargetError
import stat

MiB = 1 << 20
ROOT = os.geteuid() == 0


def test_creates_and_marks_own_file_and_reopens(tmp_path):
    p = tmp_path / "own.dat"
    with open_target(p, size=MiB, write=True) as t:
        assert t.created and t.size == MiB and t.lbs in (512, 4096) and safety.is_owned(str(p))
    with open_target(p, size=2 * MiB, write=True) as t:      # kvbench's own file may grow and be rewritten
        assert t.size == 2 * MiB and os.path.getsize(p) == 2 * MiB


def test_never_overwrites_a_foreign_file(tmp_path):
    p = tmp_path / "precious.dat"
    p.write_bytes(b"important" * 1000)
    with pytest.raises(SafetyError, match="not created by kvbench"):
        open_target(p, size=MiB, write=True)
    with open_target(p) as t:                                # reading is fine, and opens read-only
        assert not t.writable and t.size == 9000 - 9000 % t.lbs
    with pytest.raises(TargetError, match="fewer than --size"):
        open_target(p, size=MiB)
    assert p.read_bytes() == b"important" * 1000


@pytest.mark.parametrize("path", ["/proc/kvbench_test", "/sys/kvbench_test", "/dev/kvbench_test"])
def test_pseudo_paths_refused(path):
    with pytest.raises(SafetyError, match="under /"):
        open_target(path, size=MiB, write=True)
    assert not os.path.exists(path)


def test_tmpfs_refused_with_fix():
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm tmpfs here")
    # /dev/shm is refused twice over (under /dev, and tmpfs): use a tmpfs mount elsewhere when root
    if not ROOT:
        pytest.skip("needs root to mount a tmpfs")
    d = "/tmp/kvbench-tmpfs-test"
    os.makedirs(d, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", d], check=True)
    try:
        with pytest.raises(TargetError, match="O_DIRECT.*ext4"):
            open_target(f"{d}/x.dat", size=MiB, write=True)
        assert not os.path.exists(f"{d}/x.dat")
    finally:
        subprocess.run(["umount", d], check=True)


def test_free_space_checked_before_writing(tmp_path):
    # far beyond the free space: other processes freeing space meanwhile must not make it fit (on a shared
    # machine, free+4 MiB once passed the check and allocated 68 GB)
    usage = shutil.disk_usage(tmp_path)
    with pytest.raises(TargetError, match="free"):
        open_target(tmp_path / "huge.dat", size=((usage.free + usage.total) // 4096 + 1024) * 4096, write=True)
    assert not (tmp_path / "huge.dat").exists()


def test_lock_refuses_second_run(tmp_path):
    p = tmp_path / "locked.dat"
    with open_target(p, size=MiB, write=True):
        with pytest.raises(SafetyError, match="in use by another kvbench run"):
            open_target(p, size=MiB, write=True)
    open_target(p).close()                                   # released on close


def test_unaligned_size_names_block_size(tmp_path):
    with pytest.raises(TargetError, match="logical block size"):
        open_target(tmp_path / "odd.dat", size=1000, write=True)


def test_system_disk_is_refused_for_writes():
    root_dev = safety.devno_name(os.stat("/").st_dev)
    if not root_dev or not os.path.exists(f"/dev/{root_dev}"):
        pytest.skip("the root filesystem has no block device node here")
    why = safety.block_write_refusal(f"/dev/{root_dev}")
    assert why and ("root filesystem" in why or "mounted" in why)


# --- loop devices ------------------------------------------------------------------------------------
@pytest.fixture
def loopdev(loop_devices):
    """A 32 MiB loop device with partition scanning (conftest's loop_devices: autoclear, held open)."""
    img = loop_devices.image("loop.img", 32)
    return loop_devices.attach(img, "-P"), img


def test_loop_read_needs_no_flag_write_needs_matching_flag(loopdev):
    dev, _ = loopdev
    with open_target(dev) as t:
        assert t.kind == "block" and t.size == 32 * MiB and t.lbs == 512
        r = run_plan(make_plan(0, np.arange(16) * 4096, 4096), [t], qd=4)
        assert r.status == "complete"
    with pytest.raises(SafetyError, match="--destroy-data"):
        open_target(dev, write=True)
    with pytest.raises(SafetyError, match="does not name the target"):
        open_target(dev, write=True, destroy_data="/dev/null")
    with open_target(dev, write=True, destroy_data=dev) as t:
        w = run_plan(make_plan(1, np.arange(32) * MiB, MiB, tag=11), [t], qd=4)
        r = run_plan(make_plan(0, np.arange(512) * 65536, 65536, tag=11), [t], qd=8, verify="all")
        assert w.status == r.status == "complete" and r.verify["mismatches"] == 0


def test_loop_with_filesystem_or_partitions_refused(loopdev, tmp_path):
    dev, img = loopdev
    if shutil.which("mkfs.ext4") is None:
        pytest.skip("mkfs.ext4 missing")
    subprocess.run(["mkfs.ext4", "-q", "-F", dev], check=True)
    with pytest.raises(SafetyError, match="ext4"):
        open_target(dev, write=True, destroy_data=dev)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    subprocess.run(["mount", dev, str(mnt)], check=True)
    try:
        with pytest.raises(SafetyError, match="mounted"):
            open_target(dev, write=True, destroy_data=dev)
    finally:
        subprocess.run(["umount", str(mnt)], check=True)
    subprocess.run(["wipefs", "-q", "-a", dev], check=True)
    # a DOS partition table with one partition (written by hand: no partitioning tool needed)
    mbr = bytearray(512)
    mbr[446:462] = bytes([0, 0, 0, 0, 0x83, 0, 0, 0]) + (2048).to_bytes(4, "little") + (8192).to_bytes(4, "little")
    mbr[510:512] = b"\x55\xaa"
    with open(dev, "r+b") as f:
        f.write(mbr)
    subprocess.run(["blockdev", "--rereadpt", dev], capture_output=True)
    with pytest.raises(SafetyError, match="partition|dos"):
        open_target(dev, write=True, destroy_data=dev)
    part = f"{dev}p1"
    if os.path.exists(part):
        assert "partitions" in safety.block_write_refusal(dev)


def test_only_targets_reads_the_dram_prefix():
    """One place says whether a target spec is a DRAM arena (kvbench.engine.targets.is_dram_spec); the prefix was
    once tested in seven modules."""
    import re
    from pathlib import Path

    import kvbench
    from kvbench.engine.targets import is_dram_spec

    assert is_dram_spec("dram:1GiB") and not is_dram_spec("/dev/dram:1") and not is_dram_spec("store.bin")
    root = Path(kvbench.__file__).parent
    readers = [str(p.relative_to(root)) for p in root.rglob("*.py")
               if re.search(r"""startswith\(\s*["']dram:|\[\s*:\s*5\s*\]\s*==\s*["']dram:""", p.read_text())]
    assert readers == ["engine/targets.py"] or readers == [], readers


def test_a_private_dram_arena_holds_what_one_worker_wrote_and_refuses_forked_workers():
    """A process-private arena (a replay's L2, a probe: ``shared=False``) reads back what was written by the one
    process that uses it; run_plan refuses to fork workers over it (a forked worker's writes would land in its
    own copy-on-write pages: the parent would read zeros) instead of verifying garbage."""
    from kvbench.engine.plan import OP_READ, OP_WRITE
    from kvbench.errors import UsageError

    t = open_target("dram:8MiB", shared=False)
    try:
        assert t.kind == "dram" and not t.shared
        offs = np.arange(64, dtype=np.uint64) * np.uint64(65536)
        w = run_plan(make_plan(OP_WRITE, offs, 65536, tag=0x5EED), [t], engine="dram", qd=1)
        assert w.status == "complete"
        r = run_plan(make_plan(OP_READ, offs, 65536, tag=0x5EED), [t], engine="dram", qd=1, verify="all")
        assert r.status == "complete" and r.verify["checked"] == 64 and r.verify["mismatches"] == 0
        with pytest.raises(UsageError, match="process-private DRAM arena"):
            run_plan(make_plan(OP_WRITE, offs, 65536, tag=1), [t], engine="dram", qd=1, workers=2)
    finally:
        t.close()
    s = open_target("dram:1MiB")            # the default stays shared: io --numjobs forks over it
    try:
        assert s.shared
    finally:
        s.close()


# --- One device lock (issue 30): a block device is opened O_EXCL, the kernel's lock on the device itself, so a
# second device node naming the same device (mknod, a container's /dev) is refused while a run holds it. The flock
# beside it is per node: alone it let two nodes of one loop device be written at once.
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
