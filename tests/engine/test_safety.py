"""kvbench.engine.safety on real loop devices: a loop device whose backing file is mounted through another loop
device, a swap device, and the file-side checks (pseudo paths, ownership marks, free space)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from kvbench.engine import safety
from kvbench.errors import SafetyError, TargetError
from pathlib import Path
import stat
from kvbench.engine.targets import open_target

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


# --- kvbench.engine.safety at the edges the loop-device tests do not reach: output files (replace only what kvbench
# wrote), blkid's verdict and its wipefs fallback, wipefs output with a header line, and the devices backing /.
# 
# blkid and wipefs are real where the test can use them (on an ext4 image file: both probe regular files). Their
# other behaviours (blkid failing with a usage/probe error, a util-linux whose ``wipefs -p`` prints a ``# offset,...``
# header) are produced by small scripts earlier in PATH that print what those versions print.
def _tool(bin_dir: Path, name: str, script: str) -> None:
    p = bin_dir / name
    p.write_text("#!/bin/sh\n" + script + "\n")
    p.chmod(p.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def ext4_image(tmp_path):
    if shutil.which("mkfs.ext4", path="/usr/sbin:/sbin:/usr/bin:/bin") is None:
        pytest.skip("mkfs.ext4 missing")
    img = tmp_path / "fs.img"
    with open(img, "wb") as f:
        f.truncate(16 << 20)
    subprocess.run([shutil.which("mkfs.ext4", path="/usr/sbin:/sbin:/usr/bin:/bin"), "-q", "-F", str(img)],
                   check=True)
    return str(img)


def test_an_output_replaces_only_what_kvbench_wrote(tmp_path):
    new = tmp_path / "report.html"
    safety.check_output(new)                                   # nothing there yet: fine
    new.write_text("someone's")
    with pytest.raises(SafetyError, match="was not written by kvbench"):
        safety.check_output(new)                               # force is off by default
    safety.check_output(new, force=True)
    safety.mark_output(new)
    safety.check_output(new)                                   # kvbench's own output may be replaced
    dangling = tmp_path / "link.html"
    dangling.symlink_to(tmp_path / "nowhere")
    with pytest.raises(SafetyError, match="is a symbolic link"):
        safety.check_output(dangling)                          # a link, even dangling, is someone's


def test_blkid_finding_nothing_is_final_and_its_errors_fall_back_to_wipefs(ext4_image, tmp_path, monkeypatch):
    """blkid exits 2 when it finds nothing: believed (no wipefs run). Any other failure (4: usage, 8: an
    ambivalent probe) leaves the question to wipefs, which sees the ext4 superblock."""
    wipefs = shutil.which("wipefs", path="/usr/sbin:/sbin:/usr/bin:/bin")
    if wipefs is None:
        pytest.skip("wipefs missing")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "wipefs").symlink_to(wipefs)
    monkeypatch.setenv("PATH", str(bin_dir))
    _tool(bin_dir, "blkid", "exit 2")
    assert safety._signature(ext4_image) is None
    for code in (4, 8):
        _tool(bin_dir, "blkid", f"exit {code}")
        assert safety._signature(ext4_image) == "ext4"


def test_wipefs_header_line_is_not_a_signature(tmp_path, monkeypatch):
    """Some util-linux versions print '# offset,uuid,label,type' before the rows of ``wipefs -n -p``; an empty
    listing (the header alone) is no signature."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))                   # no blkid: wipefs decides
    _tool(bin_dir, "wipefs", "printf '# offset,uuid,label,type\\n0x438,1234,,ext4\\n'")
    assert safety._signature(str(tmp_path)) == "ext4"
    _tool(bin_dir, "wipefs", "printf '# offset,uuid,label,type\\n'")
    assert safety._signature(str(tmp_path)) is None


def test_root_device_is_named_from_mountinfo():
    """The device / is mounted from (its major:minor in /proc/self/mountinfo) is refused, named as the kernel
    names it in /sys/dev/block, with its whole disk; on a root that is no block device (overlayfs, tmpfs) there
    is nothing to name."""
    root = next(line.split() for line in Path("/proc/self/mountinfo").read_text().splitlines()
                if line.split()[4] == "/")
    link = Path("/sys/dev/block") / root[2]
    got = safety._root_and_swap_disks()
    if link.exists():
        name = os.path.basename(os.path.realpath(link))
        assert got.get(name) == "it holds the root filesystem /"
        part = Path("/sys/class/block") / name / "partition"
        disk = os.path.basename(os.path.dirname(os.path.realpath(Path("/sys/class/block") / name))) \
            if part.exists() else name
        assert got.get(disk) == "it holds the root filesystem /"
    else:
        assert "it holds the root filesystem /" not in got.values()


# --- Canonical paths in the safety checks (kvbench/engine/safety.py): another name for a pseudo file or for a
# device - a symlink, a path through '..', a bind-mounted node, a second device node - is refused for the reason
# the file or device itself is, never waved through and never refused for another reason.
PSEUDO = "/proc/self/status"          # a regular file under /proc: what a file target must never be


def _up_to_root(p: Path) -> str:
    """``p/../../..`` back to ``/`` (the path names /, spelled through every folder of ``p``)."""
    return str(p) + "/.." * len(p.parts[1:])


def _root_device() -> str | None:
    """The device node of the block device / is mounted from (a disk or partition), or None."""
    dev = os.stat("/").st_dev
    name = safety.devno_name(dev)
    node = f"/dev/{name}" if name else None
    if node and os.path.exists(node) and stat.S_ISBLK(os.stat(node).st_mode) and os.stat(node).st_rdev == dev:
        return node
    return None


def _aliases(node: str, tmp_path: Path):
    """(what, path) for each other name of ``node``; the bind mount is undone by the caller's cleanup."""
    link = tmp_path / "link"
    link.symlink_to(node)
    second = tmp_path / "second-node"
    os.mknod(second, stat.S_IFBLK | 0o600, os.stat(node).st_rdev)
    bind = tmp_path / "bind-node"
    bind.touch()
    r = subprocess.run(["mount", "--bind", node, str(bind)], capture_output=True, text=True)
    out = [("symlink", str(link)), ("dotdot", _up_to_root(tmp_path) + node), ("second node", str(second))]
    if r.returncode == 0:
        out.append(("bind-mounted node", str(bind)))
    return out, (bind if r.returncode == 0 else None)


def _refused_as(node: str, reason: str, tmp_path: Path) -> None:
    assert safety.block_write_refusal(node) == reason               # the device itself, by its own name
    aliases, bind = _aliases(node, tmp_path)
    try:
        assert len(aliases) >= 3
        for what, alias in aliases:
            assert safety.block_write_refusal(alias) == reason, what
            for path, confirm in ((alias, alias), (alias, node), (node, alias)):
                # --destroy-data naming the same device by another name confirms it: the refusal is the
                # device's own reason, not "does not name the target device"
                with pytest.raises(SafetyError) as e:
                    safety.check_block_write(path, confirm)
                assert str(e.value).startswith(f"refusing to write to {path}: {reason}"), (what, str(e.value))
    finally:
        if bind is not None:
            subprocess.run(["umount", str(bind)], capture_output=True)


def test_a_pseudo_file_behind_a_symlink_or_dotdot_is_refused_as_a_pseudo_file(tmp_path):
    link = tmp_path / "status"
    link.symlink_to(PSEUDO)
    dotdot = _up_to_root(tmp_path) + PSEUDO
    for alias in (str(link), dotdot, "/tmp/../proc/self/status", "//proc/self/status"):
        with pytest.raises(SafetyError, match=r"is under /proc: kvbench does not write pseudo files"):
            safety.check_file_path(alias)
        with pytest.raises(SafetyError, match=r"is under /proc"):
            open_target(alias, size=4096, write=True)
    # the same names, canonically elsewhere, are allowed: the check reads where a path leads, not how it reads
    (tmp_path / "proc").mkdir()
    safety.check_file_path(str(tmp_path / "proc" / ".." / "proc" / "data"))


def test_aliases_of_the_root_disk_are_refused_as_the_root_disk(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("a second device node and a bind mount need root")
    node = _root_device()
    if node is None:
        pytest.skip("/ is not mounted from a block device here (overlay, tmpfs)")
    _refused_as(node, "it holds the root filesystem /", tmp_path)


def test_aliases_of_a_mounted_loop_device_are_refused_as_mounted(loop_devices, tmp_path):
    if shutil.which("mkfs.ext4") is None:
        pytest.skip("mkfs.ext4 missing")
    dev = loop_devices.attach(loop_devices.image("fs.img", 16))
    subprocess.run(["mkfs.ext4", "-q", "-F", dev], check=True)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    subprocess.run(["mount", dev, str(mnt)], check=True)
    try:
        (tmp_path / "aliases").mkdir()
        _refused_as(dev, f"it is mounted on {mnt}", tmp_path / "aliases")
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_another_device_does_not_confirm_this_one(loop_devices, tmp_path):
    a = loop_devices.attach(loop_devices.image("a.img", 8))
    b = loop_devices.attach(loop_devices.image("b.img", 8))
    link = tmp_path / "b-link"
    link.symlink_to(b)
    for confirm in (b, str(link)):
        with pytest.raises(SafetyError, match=f"--destroy-data {confirm} does not name the target device {a}"):
            safety.check_block_write(a, confirm)
    safety.check_block_write(a, _up_to_root(tmp_path) + a)          # the same device through '..': confirmed
# --- mutation survivors (issue 34 part 4): the output guard's temporary file, the disk/holder refusals on a ----
# --- modelled /sys (a partitioned disk and a device-mapper holder need hardware or privileges the VM lacks) ----


def test_pending_output_commits_with_mode_644_once_and_discards_what_was_not_committed(tmp_path):
    out = tmp_path / "trace.jsonl"
    p = safety.PendingOutput(out)                  # no stale temporary file: nothing to remove, no error
    assert p.tmp.parent == tmp_path and p.tmp.name == f".kvbench-tmp-{os.getpid()}-trace.jsonl"
    p.tmp.write_text("rows\n")
    os.chmod(p.tmp, 0o600)
    assert p.commit() == out and out.read_text() == "rows\n"
    assert oct(out.stat().st_mode & 0o777) == oct(0o644)
    assert not p.tmp.exists() and safety.is_owned(str(out))
    assert p.commit() == out                       # a second commit is a no-op (the temporary file is gone)
    p.discard()                                    # after a commit, discard keeps the output
    assert out.read_text() == "rows\n"

    gone = tmp_path / "gone.txt"
    q = safety.PendingOutput(gone)
    q.tmp.write_text("half")
    q.discard()
    assert not q.tmp.exists() and not gone.exists()
    q.discard()                                    # twice: nothing left to remove, no error
    assert q.commit() == gone and not gone.exists()     # a discarded output is never committed

    r = safety.PendingOutput(tmp_path / "never.txt")
    r.discard()                                    # nothing was written: nothing to remove, no error
    assert not (tmp_path / "never.txt").exists()


def test_pending_output_removes_a_stale_temporary_file_of_the_same_name(tmp_path):
    out = tmp_path / "o.txt"
    stale = tmp_path / f".kvbench-tmp-{os.getpid()}-o.txt"
    stale.write_text("left by a killed run")
    p = safety.PendingOutput(out)
    assert p.tmp == stale and not stale.exists()


def test_pending_and_atomic_output_refuse_a_foreign_file_unless_forced(tmp_path):
    foreign = tmp_path / "notes.txt"
    foreign.write_text("someone's")
    with pytest.raises(SafetyError, match="was not written by kvbench"):
        safety.PendingOutput(foreign)
    with pytest.raises(SafetyError, match="was not written by kvbench"):
        with safety.atomic_output(foreign) as tmp:
            tmp.write_text("mine")
    assert foreign.read_text() == "someone's"
    with safety.atomic_output(foreign, force=True) as tmp:
        tmp.write_text("mine")
    assert foreign.read_text() == "mine"
    with pytest.raises(RuntimeError):
        with safety.atomic_output(tmp_path / "failed.txt") as tmp:
            tmp.write_text("half")
            raise RuntimeError("the writer failed")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


@pytest.fixture
def fake_sys(monkeypatch):
    """A modelled /sys for block_write_refusal: ``devs`` name -> dict(devno, disk, parts, holders, mounted_on); no
    loop backing, no signature, neither / nor swap on them; /dev/null's device number stands for "target"."""
    devs: dict = {}
    monkeypatch.setattr(safety, "devno_name", lambda rdev: "target")     # the device node stands for "target"
    monkeypatch.setattr(safety, "whole_disk", lambda n: devs[n].get("disk", n))
    monkeypatch.setattr(safety, "_root_and_swap_disks", lambda: {})
    monkeypatch.setattr(safety, "_mounted_devnos",
                        lambda: {d["devno"]: d["mounted_on"] for d in devs.values() if d.get("mounted_on")})
    monkeypatch.setattr(safety, "_devno", lambda n: devs[n]["devno"] if n in devs else None)
    monkeypatch.setattr(safety, "_partitions", lambda n: sorted(devs.get(n, {}).get("parts", [])))
    monkeypatch.setattr(safety, "_holders", lambda n: sorted(devs.get(n, {}).get("holders", [])))
    monkeypatch.setattr(safety, "_loop_backing", lambda n: None)
    monkeypatch.setattr(safety, "_signature", lambda p: None)
    return devs


def test_a_disk_whose_partitions_holder_is_mounted_is_refused_naming_the_holder(fake_sys):
    fake_sys.update(target=dict(devno=(8, 0), parts=["target1", "target2"]),
                    target1=dict(devno=(8, 1), disk="target"),
                    target2=dict(devno=(8, 2), disk="target", holders=["dm-7"]),
                    **{"dm-7": dict(devno=(253, 7), mounted_on="/data")})
    assert safety.block_write_refusal("/dev/null") == "its holder dm-7 is mounted on /data"
    fake_sys["dm-7"]["mounted_on"] = None
    assert safety.block_write_refusal("/dev/null") == "it holds partitions (target1, target2)"


def test_a_partition_is_refused_when_its_disk_is_mounted_and_writable_when_not(fake_sys):
    fake_sys.update(target=dict(devno=(8, 3), disk="sdq"), sdq=dict(devno=(8, 0), mounted_on="/"))
    assert safety.block_write_refusal("/dev/null") == "its disk sdq is mounted"
    fake_sys["sdq"]["mounted_on"] = None
    assert safety.block_write_refusal("/dev/null") is None
    fake_sys.clear()
    fake_sys.update(target=dict(devno=(8, 16)))    # a whole disk, nothing mounted, nothing on it
    assert safety.block_write_refusal("/dev/null") is None


def test_the_root_device_counts_only_when_sys_knows_it(monkeypatch):
    """devno_name of an overlay or tmpfs root (device 0:N) is a name /sys/class/block does not hold: not a disk
    to protect, and a name of None is skipped, not an error."""
    monkeypatch.setattr(safety, "_swap_devices", lambda: [])
    monkeypatch.setattr(safety, "devno_name", lambda dev: "0:4242")
    assert safety._root_and_swap_disks() == {}
    monkeypatch.setattr(safety, "devno_name", lambda dev: None)
    assert safety._root_and_swap_disks() == {}
