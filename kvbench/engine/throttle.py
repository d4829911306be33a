"""Drives of known speed: loop devices throttled by the cgroup-v1 blkio controller (DESIGN.md, "Measurement
rules"). A loop device whose reads are capped at B bytes/s (or N IOPS) is a drive whose true speed we set, so
kvbench (and fio beside it) must measure B. Used by the fidelity tests and benchmarks; needs root.
"""

from __future__ import annotations

import os
import subprocess
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

BLKIO = Path("/sys/fs/cgroup/blkio")
_KNOBS = {"read_bps": "blkio.throttle.read_bps_device", "write_bps": "blkio.throttle.write_bps_device",
          "read_iops": "blkio.throttle.read_iops_device", "write_iops": "blkio.throttle.write_iops_device"}


def unavailable() -> str | None:
    """Why throttled loop devices cannot be made here, or None when they can."""
    if os.geteuid() != 0:
        return "needs root (losetup and cgroup writes)"
    if not (BLKIO / _KNOBS["read_bps"]).exists():
        return f"needs the cgroup-v1 blkio controller at {BLKIO}"
    if subprocess.run(["sh", "-c", "command -v losetup"], capture_output=True).returncode:
        return "needs losetup (util-linux)"
    return None


@dataclass(frozen=True)
class ThrottledLoop:
    device: str          # /dev/loopN
    cgroup: Path         # the blkio cgroup whose members are throttled on it

    def argv(self, argv: list[str]) -> list[str]:
        """``argv`` wrapped so that the process joins the throttled cgroup before it starts."""
        return ["sh", "-c", f'echo $$ > {self.cgroup}/cgroup.procs && exec "$@"', "sh", *map(str, argv)]


@contextmanager
def throttled_loop(backing: str | os.PathLike, size: int, *, allocate: bool = False, direct_io: bool = False,
                   **limits: int):
    """A loop device over ``backing`` (created, removed afterwards) in its own blkio cgroup with ``limits``
    (``read_bps``, ``write_bps``, ``read_iops``, ``write_iops``). ``allocate`` fallocates the backing file so
    first writes cost nothing extra; ``direct_io`` makes the loop driver bypass the host page cache."""
    unknown = set(limits) - set(_KNOBS)
    if unknown:
        raise ValueError(f"unknown throttle limit(s): {', '.join(sorted(unknown))}")
    backing = Path(backing)
    if allocate:
        subprocess.run(["fallocate", "-l", str(size), str(backing)], check=True)
    else:
        with open(backing, "wb") as f:
            f.truncate(size)
    dev = cg = None
    try:
        cmd = ["losetup", "--find", "--show"] + (["--direct-io=on"] if direct_io else []) + [str(backing)]
        dev = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()
        cg = BLKIO / f"kvbench-{os.getpid()}-{os.path.basename(dev)}"
        cg.mkdir()
        st = os.stat(dev)
        for name, value in limits.items():
            (cg / _KNOBS[name]).write_text(f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)} {int(value)}\n")
        yield ThrottledLoop(dev, cg)
    finally:
        if dev:
            subprocess.run(["losetup", "-d", dev], check=False)
        if cg is not None:
            try:
                cg.rmdir()
            except OSError:
                pass
        backing.unlink(missing_ok=True)
