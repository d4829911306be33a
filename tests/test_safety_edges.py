"""kvbench.engine.safety at the edges the loop-device tests do not reach: output files (replace only what kvbench
wrote), blkid's verdict and its wipefs fallback, wipefs output with a header line, and the devices backing /.

blkid and wipefs are real where the test can use them (on an ext4 image file: both probe regular files). Their
other behaviours (blkid failing with a usage/probe error, a util-linux whose ``wipefs -p`` prints a ``# offset,...``
header) are produced by small scripts earlier in PATH that print what those versions print."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from kvbench.engine import safety
from kvbench.errors import SafetyError


# --- output files -------------------------------------------------------------------------------------------
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


# --- signatures ---------------------------------------------------------------------------------------------
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


# --- the devices backing / ----------------------------------------------------------------------------------
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
