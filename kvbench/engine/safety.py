"""Refuse to destroy what was not handed over.

Raw block devices: reads are allowed; writes need ``destroy_data`` naming the same device, and are refused
for mounted devices and their parents, devices holding partitions or a filesystem/RAID/LVM signature, devices
with holders (device-mapper, md), the device backing ``/`` or swap, and loop devices whose filesystem is
mounted. Files: kvbench writes only to files it created (marked with an xattr, or a sidecar where xattrs are
unsupported), never under /proc, /sys or /dev, and only after checking free space.
"""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
from pathlib import Path

from kvbench.errors import SafetyError, TargetError
from kvbench.metrics.environment import devno_name, whole_disk

OWNER_XATTR = "user.kvbench"
OWNER_VALUE = b"created-by-kvbench"
SIDECAR_SUFFIX = ".kvbench-owned"
FORBIDDEN_ROOTS = ("/proc", "/sys", "/dev")


# --- files ---------------------------------------------------------------------------------------------
def check_file_path(path: str) -> None:
    """Refuse /proc, /sys and /dev paths for file targets."""
    real = os.path.realpath(path)
    for root in FORBIDDEN_ROOTS:
        if real == root or real.startswith(root + "/"):
            raise SafetyError(f"{path} is under {root}: kvbench does not write pseudo files or device nodes "
                              "there", "use a file on a real filesystem, or a block device with --destroy-data")


def sidecar(path: str) -> Path:
    p = Path(path)
    return p.with_name(p.name + SIDECAR_SUFFIX)


def mark_owned(path: str) -> None:
    """Mark a file as created by kvbench: an xattr, or a sidecar file where xattrs are unsupported."""
    try:
        os.setxattr(path, OWNER_XATTR, OWNER_VALUE)
    except OSError:
        sidecar(path).write_text("this file's companion was created by kvbench and may be overwritten by it\n")


_FORCED: set[str] = set()     # outputs the user allowed to replace (--force), by absolute path


def allow_replace(path) -> None:
    """``--force`` for this output: :class:`PendingOutput` may replace whatever is there."""
    _FORCED.add(os.path.abspath(path))


def check_output(path, force: bool = False) -> None:
    """An output file (report, trace, iolog) may replace only a file kvbench wrote, unless ``force``: a symlink
    is never kvbench's (its target is someone's), a folder or a path under /proc, /sys or /dev never an output."""
    path = str(path)
    force = force or os.path.abspath(path) in _FORCED
    check_file_path(path)
    if os.path.isdir(path):
        raise SafetyError(f"{path} is a folder", "give a file name for the output")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise SafetyError(f"output folder does not exist: {parent}", "create it or choose another path")
    if os.path.lexists(path) and not force and (os.path.islink(path) or not is_owned(path)):
        what = "is a symbolic link" if os.path.islink(path) else "exists and was not written by kvbench"
        raise SafetyError(f"{path} {what}: refusing to overwrite it",
                          "give another output path, or --force to replace it")


class PendingOutput:
    """The one way kvbench writes a user-named file: into a hidden temporary file in the same folder, renamed
    over ``path`` by :meth:`commit` (which replaces a symlink itself, never the file it points to, and marks the
    result as kvbench's), or deleted by :meth:`discard` (on failure or interrupt nothing half-written is left).
    ``force``: also replace a file kvbench did not write (the CLI's ``--force`` reaches here by :func:`allow_replace`)."""

    def __init__(self, path, force: bool = False):
        self.path = Path(path)
        check_output(self.path, force)
        self.tmp = self.path.with_name(f".kvbench-tmp-{os.getpid()}-{self.path.name}")
        self.tmp.unlink(missing_ok=True)
        self.done = False

    def commit(self) -> Path:
        if not self.done:
            os.chmod(self.tmp, 0o644)
            os.replace(self.tmp, self.path)
            self.done = True
            mark_output(self.path)
        return self.path

    def discard(self) -> None:
        if not self.done:
            self.tmp.unlink(missing_ok=True)
            self.done = True


@contextlib.contextmanager
def atomic_output(path, force: bool = False):
    """``with atomic_output(p) as tmp:`` write ``tmp``; it becomes ``p`` when the block ends without an exception
    and is deleted otherwise (KeyboardInterrupt and the CLI's SIGTERM/SIGHUP included)."""
    out = PendingOutput(path, force)
    try:
        yield out.tmp
    except BaseException:
        out.discard()
        raise
    out.commit()


def mark_output(path) -> None:
    """Mark an output kvbench just wrote, so that a rerun may replace it (best effort)."""
    try:
        os.setxattr(str(path), OWNER_XATTR, OWNER_VALUE)
    except OSError:
        try:
            mark_owned(str(path))
        except OSError:
            pass


def is_owned(path: str) -> bool:
    try:
        if os.getxattr(path, OWNER_XATTR) == OWNER_VALUE:
            return True
    except OSError:
        pass
    return sidecar(path).exists()


def unmark(path: str) -> None:
    try:
        sidecar(path).unlink()
    except FileNotFoundError:
        pass


def check_free_space(path: str, need_bytes: int, fix: str = "give a smaller --size or a target on a larger "
                     "filesystem") -> None:
    """Refuse before writing when the filesystem holding ``path`` has less than ``need_bytes`` free."""
    if need_bytes <= 0:
        return
    st = os.statvfs(os.path.dirname(os.path.abspath(path)) or ".")
    free = st.f_bavail * st.f_frsize
    if need_bytes > free:
        from kvbench.units import format_bytes
        raise TargetError(f"{path}: needs {format_bytes(need_bytes)} but its filesystem has only "
                          f"{format_bytes(free)} free", fix)


# --- block devices -------------------------------------------------------------------------------------
def _mounted_devnos() -> dict[tuple[int, int], str]:
    out = {}
    try:
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            parts = line.split()
            major, minor = parts[2].split(":")
            out[(int(major), int(minor))] = parts[4]
    except OSError:
        pass
    return out


def _devno(name: str) -> tuple[int, int] | None:
    try:
        major, minor = (Path("/sys/class/block") / name / "dev").read_text().strip().split(":")
        return int(major), int(minor)
    except (OSError, ValueError):
        return None


def _partitions(disk: str) -> list[str]:
    d = Path("/sys/block") / disk
    try:
        return sorted(p.name for p in d.iterdir() if (p / "partition").exists())
    except OSError:
        return []


def _holders(name: str) -> list[str]:
    try:
        return sorted(p.name for p in (Path("/sys/class/block") / name / "holders").iterdir())
    except OSError:
        return []


def _swap_devices() -> list[str]:
    try:
        lines = Path("/proc/swaps").read_text().splitlines()[1:]
    except OSError:
        return []
    return [l.split()[0] for l in lines if l.strip()]


def _signature(dev: str) -> str | None:
    """A filesystem/RAID/LVM/partition-table signature found by blkid low-level probing, or None."""
    try:
        r = subprocess.run(["blkid", "-p", "-o", "export", dev], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return _wipefs_signature(dev)
    if r.returncode == 0:
        kv = dict(l.split("=", 1) for l in r.stdout.splitlines() if "=" in l)
        return kv.get("TYPE") or kv.get("PTTYPE") or kv.get("USAGE") or "unknown signature"
    return _wipefs_signature(dev) if r.returncode not in (2,) else None


def _wipefs_signature(dev: str) -> str | None:
    try:
        r = subprocess.run(["wipefs", "-n", "-p", dev], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    rows = [l for l in r.stdout.splitlines() if l and not l.startswith("#")]
    return rows[0].split(",")[-1] if rows else None


def _root_and_swap_disks() -> dict[str, str]:
    """Block device names (partitions and their disks) backing / and swap, with why."""
    out = {}
    try:
        name = devno_name(os.stat("/").st_dev)
        if name and Path("/sys/class/block", name).exists():
            out[name] = "it holds the root filesystem /"
            out[whole_disk(name)] = "it holds the root filesystem /"
    except OSError:
        pass
    for s in _swap_devices():
        try:
            st = os.stat(s)
        except OSError:
            continue
        dev = st.st_rdev if stat.S_ISBLK(st.st_mode) else st.st_dev
        name = devno_name(dev)
        if name:
            out[name] = f"it backs swap ({s})"
            out[whole_disk(name)] = f"it backs swap ({s})"
    return out


def block_write_refusal(dev_path: str) -> str | None:
    """Why writing to this block device would destroy data someone did not hand over (None if safe)."""
    st = os.stat(dev_path)
    name = devno_name(st.st_rdev)
    if name is None:
        return "its device number is unknown to /sys/dev/block"
    disk = whole_disk(name)
    system = _root_and_swap_disks()
    if name in system:
        return system[name]
    mounted = _mounted_devnos()
    related = [name] + _partitions(name) + _holders(name)
    for part in _partitions(name):
        related += _holders(part)
    for r in related:
        devno = _devno(r)
        if devno in mounted:
            what = "it is" if r == name else f"its {'partition' if r in _partitions(name) else 'holder'} {r} is"
            return f"{what} mounted on {mounted[devno]}"
    parts = _partitions(name)
    if parts:
        return f"it holds partitions ({', '.join(parts)})"
    holders = _holders(name)
    if holders:
        return f"it is in use by {', '.join(holders)} (device-mapper/RAID/LVM)"
    if disk != name and _devno(disk) in mounted:
        return f"its disk {disk} is mounted"
    backing = _loop_backing(name)
    if backing:
        for other in Path("/sys/block").glob("loop*"):
            if other.name != name and _loop_backing(other.name) == backing and _devno(other.name) in mounted:
                return f"its backing file {backing} is also attached as {other.name}, which is mounted"
        try:
            bst = os.stat(backing)
            if (os.major(bst.st_dev), os.minor(bst.st_dev)) == (os.major(st.st_rdev), os.minor(st.st_rdev)):
                return "it backs itself"
        except OSError:
            pass
    sig = _signature(dev_path)
    if sig:
        return f"it holds a '{sig}' signature (filesystem, RAID, LVM or partition table)"
    return None


def _loop_backing(name: str) -> str | None:
    try:
        return (Path("/sys/block") / name / "loop" / "backing_file").read_text().strip() or None
    except OSError:
        return None


def check_block_write(path: str, destroy_data: str | None) -> None:
    """Writes to a raw block device need ``destroy_data`` naming it and no refusal reason."""
    if not destroy_data:
        raise SafetyError(f"{path} is a raw block device: writing destroys the data on it",
                          f"pass --destroy-data {path} to confirm, or use a file target")
    try:
        same = os.stat(destroy_data).st_rdev == os.stat(path).st_rdev and \
            stat.S_ISBLK(os.stat(destroy_data).st_mode)
    except OSError:
        same = False
    if not same:
        raise SafetyError(f"--destroy-data {destroy_data} does not name the target device {path}",
                          f"pass --destroy-data {path}")
    why = block_write_refusal(path)
    if why:
        raise SafetyError(f"refusing to write to {path}: {why}",
                          "use a device that holds nothing (wipefs -a it yourself if you are sure)")


__all__ = ["check_file_path", "mark_owned", "is_owned", "check_output", "allow_replace", "PendingOutput", "atomic_output", "mark_output", "unmark", "check_free_space", "check_block_write",
           "block_write_refusal", "devno_name"]
