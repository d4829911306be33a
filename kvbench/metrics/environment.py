"""Facts about the machine and the targets, recorded in every run.json (pure reads of /proc and /sys)."""

from __future__ import annotations

import os
import platform
import stat
import sys
from pathlib import Path

import psutil


def _read(path: str | Path, default=None):
    try:
        return Path(path).read_text().strip()
    except OSError:
        return default


def cpu_model() -> str | None:
    for line in (_read("/proc/cpuinfo", "") or "").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or None


def environment() -> dict:
    """Kernel, CPU, memory, Python and library versions."""
    import numpy

    from kvbench import __version__
    vm = psutil.virtual_memory()
    return {
        "kvbench_version": __version__,
        "hostname": platform.node(),
        "kernel": platform.release(),
        "os": _os_release(),
        "cpu_model": cpu_model(),
        "cpu_count_logical": psutil.cpu_count(logical=True),
        "cpu_count_physical": psutil.cpu_count(logical=False),
        "memory_bytes": vm.total,
        "python": sys.version.split()[0],
        "numpy": numpy.__version__,
        "virtualized": _virtualized(),
    }


def _os_release() -> str | None:
    for line in (_read("/etc/os-release", "") or "").splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip('"')
    return None


def _virtualized() -> bool | None:
    flags = next((l for l in (_read("/proc/cpuinfo", "") or "").splitlines() if l.startswith("flags")), "")
    return " hypervisor" in flags if flags else None


# --- block devices ------------------------------------------------------------------------------------
def devno_name(dev: int) -> str | None:
    """Kernel name (e.g. 'nvme0n1p1', 'loop3') of a device number, from /sys/dev/block."""
    link = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    try:
        return link.resolve().name
    except OSError:
        return None


def whole_disk(name: str) -> str:
    """The whole-disk name of a partition (nvme0n1p1 -> nvme0n1); a disk maps to itself."""
    sysdir = Path("/sys/class/block") / name
    if (sysdir / "partition").exists():
        return sysdir.resolve().parent.name
    return name


def block_facts(name: str) -> dict:
    """Model, firmware, size, block sizes and rotational flag of a block device from /sys/block."""
    disk = whole_disk(name)
    sysdir = Path("/sys/class/block") / name
    q = Path("/sys/block") / disk / "queue"
    dev = Path("/sys/block") / disk / "device"
    sectors = _read(sysdir / "size")
    facts = {
        "device": f"/dev/{name}",
        "disk": disk,
        "model": _read(dev / "model") or _read(dev / "device" / "model"),
        "firmware": _read(dev / "firmware_rev") or _read(dev / "rev"),
        "serial": _read(dev / "serial"),
        "vendor": _read(dev / "vendor"),
        "size_bytes": int(sectors) * 512 if sectors and sectors.isdigit() else None,
        "logical_block_size": _int(_read(q / "logical_block_size")),
        "physical_block_size": _int(_read(q / "physical_block_size")),
        "rotational": _int(_read(q / "rotational")),
        "scheduler": _read(q / "scheduler"),
        "max_hw_sectors_kb": _int(_read(q / "max_hw_sectors_kb")),
        "discard_max_bytes": _int(_read(q / "discard_max_bytes")),
    }
    backing = _read(Path("/sys/block") / disk / "loop" / "backing_file")
    if backing:
        facts["loop_backing_file"] = backing
    return facts


def _int(s):
    try:
        return int(s)
    except (TypeError, ValueError):
        return None


def mount_of(path: str | Path) -> dict | None:
    """The mount holding ``path``: mount point, filesystem type, source (longest matching mount point)."""
    p = os.path.realpath(path)
    best = None
    for part in psutil.disk_partitions(all=True):
        mp = part.mountpoint
        if p == mp or p.startswith(mp.rstrip("/") + "/"):
            if best is None or len(mp) > len(best.mountpoint):
                best = part
    if best is None:
        return None
    return {"mountpoint": best.mountpoint, "fstype": best.fstype, "source": best.device, "options": best.opts}


def target_facts(path: str | Path) -> dict:
    """Path, kind, filesystem and backing device facts of a target (a path, or an opened Target)."""
    if hasattr(path, "facts") and hasattr(path, "path"):       # an opened kvbench.engine.targets.Target
        opened = path.facts()
        base = target_facts(path.path)
        return {**base, **{k: v for k, v in opened.items() if v is not None}}
    from kvbench.engine.targets import is_dram_spec

    path = str(path)
    if is_dram_spec(path):
        return {"path": path, "kind": "dram"}
    facts: dict = {"path": os.path.realpath(path)}
    try:
        st = os.stat(path)
    except OSError:
        st = None
    if st is not None and stat.S_ISBLK(st.st_mode):
        facts["kind"] = "block"
        name = devno_name(st.st_rdev)
        if name:
            facts.update(block_facts(name))
        return facts
    facts["kind"] = "file"
    probe = path if st is not None else os.path.dirname(os.path.abspath(path)) or "."
    mnt = mount_of(probe)
    if mnt:
        facts["filesystem"] = mnt["fstype"]
        facts["mountpoint"] = mnt["mountpoint"]
    try:
        name = devno_name(os.stat(probe).st_dev)
    except OSError:
        name = None
    if name and Path("/sys/class/block", name).exists():
        facts["backing"] = block_facts(name)
    return facts
