"""Canonical paths in the safety checks (kvbench/engine/safety.py): another name for a pseudo file or for a
device - a symlink, a path through '..', a bind-mounted node, a second device node - is refused for the reason
the file or device itself is, never waved through and never refused for another reason."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from kvbench.engine import safety
from kvbench.engine.targets import open_target
from kvbench.errors import SafetyError

PSEUDO = "/proc/self/status"          # a regular file under /proc: what a file target must never be


def _up_to_root(p: Path) -> str:
    """``p/../../..`` back to ``/`` (the path names /, spelled through every folder of ``p``)."""
    return str(p) + "/.." * len(p.parts[1:])


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
