"""kvbench.engine.safety on real loop devices: a loop device whose backing file is mounted through another loop
device, a swap device, and the file-side checks (pseudo paths, ownership marks, free space)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from kvbench.engine import safety
from kvbench.errors import SafetyError, TargetError

MiB = 1 << 20
ROOT = os.geteuid() == 0


def _image(tmp_path, name: str, mib: int):
    img = tmp_path / name
    with open(img, "wb") as f:
        f.truncate(mib * MiB)
    return img


@pytest.fixture
def loops(loop_devices):
    """Attach loop devices through ``attach(*losetup args, img)``: conftest's loop_devices (autoclear, held open,
    unmounted and swapped off afterwards)."""
    return lambda *args: loop_devices.attach(args[-1], *args[:-1])


def test_loop_whose_backing_file_is_mounted_through_another_loop_is_refused(loops, tmp_path):
    """The filesystem sits 1 MiB into the image and is mounted through a loop device with that offset. A
    second loop device over the whole image sees no signature at its start, is not mounted and holds no
    partitions: only the shared backing file tells that writing to it would corrupt a mounted filesystem."""
    if shutil.which("mkfs.ext4") is None:
        pytest.skip("mkfs.ext4 missing")
    img = _image(tmp_path, "shared.img", 40)
    inner = loops("-o", str(MiB), "--sizelimit", str(32 * MiB), img)
    subprocess.run(["mkfs.ext4", "-q", "-F", inner], check=True)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if subprocess.run(["mount", inner, str(mnt)], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a loop device here")
    try:
        assert safety.block_write_refusal(inner) == f"it is mounted on {mnt}"
        outer = loops(img)
        why = safety.block_write_refusal(outer)
        assert why == (f"its backing file {img} is also attached as {os.path.basename(inner)}, "
                       "which is mounted")
        with pytest.raises(SafetyError, match="also attached as"):
            safety.check_block_write(outer, outer)
    finally:
        subprocess.run(["umount", str(mnt)], check=True)
    assert safety.block_write_refusal(outer) is None         # unmounted: the same device is writable again


def test_swap_device_is_refused(loops, tmp_path):
    if shutil.which("mkswap") is None or shutil.which("swapon") is None:
        pytest.skip("mkswap/swapon missing")
    img = _image(tmp_path, "swap.img", 16)
    dev = loops(img)
    subprocess.run(["mkswap", dev], check=True, capture_output=True)
    if subprocess.run(["swapon", dev], capture_output=True).returncode != 0:
        pytest.skip("swapon is not permitted here")
    try:
        assert safety.block_write_refusal(dev) == f"it backs swap ({dev})"
        with pytest.raises(SafetyError, match="backs swap"):
            safety.check_block_write(dev, dev)
    finally:
        subprocess.run(["swapoff", dev], check=True)
    # off swap, the signature still refuses it
    assert "swap" in safety.block_write_refusal(dev) and "signature" in safety.block_write_refusal(dev)


def test_empty_loop_device_is_writable_with_the_flag(loops, tmp_path):
    img = _image(tmp_path, "empty.img", 8)
    dev = loops(img)
    assert safety.block_write_refusal(dev) is None
    safety.check_block_write(dev, dev)
    with pytest.raises(SafetyError, match="--destroy-data"):
        safety.check_block_write(dev, None)
    with pytest.raises(SafetyError, match="does not name the target"):
        safety.check_block_write(dev, str(img))                 # a regular file is not the device
    with pytest.raises(SafetyError, match="does not name the target"):
        safety.check_block_write(dev, str(tmp_path / "missing"))
    other = _image(tmp_path, "other.img", 8)
    with pytest.raises(SafetyError, match="does not name the target"):
        safety.check_block_write(dev, loops(other))            # another block device is not this one


def test_signature_found_without_blkid_through_wipefs(loops, tmp_path, monkeypatch):
    """Where blkid is missing, wipefs names the signature (and an empty device has none)."""
    if shutil.which("mkfs.ext4") is None or shutil.which("wipefs") is None:
        pytest.skip("mkfs.ext4/wipefs missing")
    img = _image(tmp_path, "fs.img", 16)
    dev = loops(img)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "wipefs").symlink_to(shutil.which("wipefs"))
    monkeypatch.setenv("PATH", str(bin_dir))
    assert safety._signature(dev) is None
    subprocess.run([str(bin_dir / "wipefs"), "-q", "-a", dev], check=True)
    monkeypatch.undo()
    subprocess.run(["mkfs.ext4", "-q", "-F", "-L", "k=v", dev], check=True)     # a label holding '='
    assert safety._signature(dev) == "ext4"                      # blkid
    monkeypatch.setenv("PATH", str(bin_dir))
    assert safety._signature(dev) == "ext4"                      # wipefs
    only_blkid = tmp_path / "bin2"
    only_blkid.mkdir()
    (only_blkid / "blkid").symlink_to(shutil.which("blkid", path="/usr/sbin:/sbin:/usr/bin:/bin"))
    monkeypatch.setenv("PATH", str(only_blkid))
    assert safety._signature(dev) == "ext4"                      # blkid alone (no wipefs to fall back on)
    monkeypatch.setenv("PATH", str(bin_dir))
    assert safety.block_write_refusal(dev) == "it holds a 'ext4' signature (filesystem, RAID, LVM or partition table)"


@pytest.mark.parametrize("path", ["/proc", "/proc/x", "/sys/block", "/dev", "/dev/null"])
def test_pseudo_paths_refused(path):
    with pytest.raises(SafetyError, match="is under /"):
        safety.check_file_path(path)


@pytest.mark.parametrize("path", ["/procfs-data/x", "/devices.img", "/system/x"])
def test_names_that_only_start_like_pseudo_roots_are_allowed(path):
    safety.check_file_path(path)


def test_ownership_marks(tmp_path):
    f = tmp_path / "t.dat"
    f.write_bytes(b"x")
    assert not safety.is_owned(str(f))
    safety.mark_owned(str(f))
    assert safety.is_owned(str(f))
    assert safety.sidecar(str(f)) == tmp_path / "t.dat.kvbench-owned"
    g = tmp_path / "s.dat"
    g.write_bytes(b"y")
    safety.sidecar(str(g)).write_text("owned")            # where xattrs are unsupported: the sidecar counts
    assert safety.is_owned(str(g))
    safety.unmark(str(g))
    assert not safety.is_owned(str(g)) and not safety.sidecar(str(g)).exists()
    safety.unmark(str(g))                                  # idempotent


def test_free_space_is_exact_on_a_quiet_filesystem(tmp_path):
    """A private 1 MiB tmpfs (nothing else writes there): exactly the free bytes fit, one more does not; full,
    even one byte is refused."""
    if not ROOT:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        st = os.statvfs(mnt)
        free = st.f_bavail * st.f_frsize
        safety.check_free_space(str(mnt / "f"), free)
        with pytest.raises(TargetError, match="needs 1 MiB but its filesystem has only"):
            safety.check_free_space(str(mnt / "f"), free + 1)
        with open(mnt / "fill", "wb") as f:
            try:
                f.write(b"\0" * (2 * free))
            except OSError:
                pass
        assert os.statvfs(mnt).f_bavail == 0
        safety.check_free_space(str(mnt / "f"), 0)
        with pytest.raises(TargetError, match="has only 0 B free"):
            safety.check_free_space(str(mnt / "f"), 1)
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_free_space_check(tmp_path):
    st = os.statvfs(tmp_path)
    free = st.f_bavail * st.f_frsize
    safety.check_free_space(str(tmp_path / "f"), 0)
    safety.check_free_space(str(tmp_path / "f"), -5)
    safety.check_free_space(str(tmp_path / "f"), 4096)
    with pytest.raises(TargetError, match="free"):
        safety.check_free_space(str(tmp_path / "f"), free + (1 << 40))
