"""Targets: files and raw block devices opened with O_DIRECT, and DRAM arenas (``dram:<size>``).

``open_target`` applies every safety rule of :mod:`kvbench.engine.safety`, takes an exclusive lock (a second
run on the same target is refused), learns the logical block size (the alignment every I/O must keep) and
refuses filesystems where O_DIRECT does not reach a device (tmpfs, ramfs, ...).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import fcntl
import mmap
import os
import stat
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kvbench.errors import SafetyError, TargetError
from kvbench.engine import safety
from kvbench.metrics.environment import devno_name, mount_of, whole_disk
from kvbench.units import format_bytes, parse_size

# filesystems where O_DIRECT either fails or is served from memory: no device is measured there
MEMORY_FILESYSTEMS = {"tmpfs", "ramfs", "devtmpfs", "proc", "sysfs", "hugetlbfs", "squashfs", "overlay"}
BLKGETSIZE64 = 0x80081272
BLKSSZGET = 0x1268
BLKDISCARD = 0x1277
FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE = 0x01, 0x02

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]


@dataclass
class Target:
    """An opened target. ``fd`` is -1 for DRAM; ``arena`` is the DRAM buffer (uint8) for ``dram:``."""

    path: str
    kind: str                 # "file" | "block" | "dram"
    fd: int
    size: int
    lbs: int
    writable: bool
    created: bool = False     # kvbench created (or extended) it in this call: contents are not yet written
    new_file: bool = False    # kvbench created the file itself in this call (discard() may remove it)
    fstype: str | None = None
    device: str | None = None  # kernel name of the backing block device (for /proc/diskstats)
    arena: np.ndarray | None = field(default=None, repr=False)
    supports_trim: bool = True
    shared: bool = True       # DRAM: the arena is MAP_SHARED (forked workers write into it); False: this process's
    _mm: mmap.mmap | None = field(default=None, repr=False)

    def trim(self, offset: int, length: int) -> int:
        """Discard a range (punch a hole in a file, BLKDISCARD on a device); returns 0 or -errno."""
        if self.kind == "dram":
            return 0
        if self.kind == "block":
            try:
                fcntl.ioctl(self.fd, BLKDISCARD, struct.pack("QQ", offset, length))
                return 0
            except OSError as e:
                return -(e.errno or errno.EIO)
        r = _libc.fallocate(self.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, length)
        return 0 if r == 0 else -ctypes.get_errno()

    def close(self) -> None:
        if self.fd >= 0:
            try:
                os.close(self.fd)          # also releases the flock
            except OSError:
                pass
            self.fd = -1
        self.arena = None
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:
                pass
            self._mm = None

    def discard(self) -> None:
        """Close, and remove the file if this call created it: a run refused before any I/O leaves nothing."""
        self.close()
        if self.new_file and self.kind == "file":
            for p in (self.path, str(safety.sidecar(self.path))):
                try:
                    os.unlink(p)
                except FileNotFoundError:
                    pass
            self.new_file = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def facts(self) -> dict:
        return {"path": self.path, "kind": self.kind, "size": self.size, "logical_block_size": self.lbs,
                "writable": self.writable, "filesystem": self.fstype, "device": self.device}


def _sysfs_lbs(name: str | None) -> int | None:
    if not name:
        return None
    try:
        return int((Path("/sys/block") / whole_disk(name) / "queue" / "logical_block_size").read_text())
    except (OSError, ValueError):
        return None


def cgroup_memory_left(proc_cgroup: str = "/proc/self/cgroup", root: str = "/sys/fs/cgroup") -> int | None:
    """Bytes this process's cgroup (v2) and its ancestors may still charge (memory.max - memory.current, the
    tightest), or None where no limit is set or cgroup v2 is absent: a container's limit, not the host's."""
    try:
        rel = next(l.split("::", 1)[1] for l in Path(proc_cgroup).read_text().splitlines() if l.startswith("0::"))
    except (OSError, StopIteration):
        return None
    left = None
    d = Path(root) / rel.strip().lstrip("/")
    while True:
        try:
            limit = (d / "memory.max").read_text().strip()
            if limit != "max":
                used = int((d / "memory.current").read_text().strip())
                room = max(0, int(limit) - used)
                left = room if left is None else min(left, room)
        except (OSError, ValueError):
            pass
        if d == Path(root) or d == d.parent:
            return left
        d = d.parent


def available_memory() -> tuple[int, str]:
    """Memory a new arena may take now: the host's available memory, or the cgroup's room when tighter."""
    import psutil

    avail, where = psutil.virtual_memory().available, "available"
    left = cgroup_memory_left()
    if left is not None and left < avail:
        avail, where = left, "left under this cgroup's memory.max"
    return avail, where


def check_memory(size: int, what: str, fix: str) -> None:
    """Refuse (before allocating) an arena larger than the memory available now (the host's, or this cgroup's
    limit when tighter): it would swap or be killed by the OOM killer."""
    avail, where = available_memory()
    if size > avail:
        raise TargetError(f"{what} needs {format_bytes(size)} of DRAM but {format_bytes(avail)} of memory "
                          f"{where}", fix)


DRAM_PREFIX = "dram:"


def is_dram_spec(path) -> bool:
    """Is ``path`` a DRAM arena spec (``dram:<size>``) rather than a file or device path? The one place that reads
    the prefix; an opened target says what it is in ``Target.kind``."""
    return str(path).startswith(DRAM_PREFIX)


def open_dram(spec: str, *, lbs: int = 512, shared: bool = True) -> Target:
    """A DRAM arena: an anonymous, pre-faulted, page-aligned buffer of the given size.

    ``shared``: MAP_SHARED, so that forked worker processes (``run_plan(workers=N)``) write into the same arena;
    ``False`` for an arena only this process uses (a replay's L2, a probe): private anonymous memory is faulted in
    2.3x faster than shared (shmem) memory (2.45 GB: 1.21 s vs 2.80 s populated, 0.17 s vs 0.47 s unmapped,
    measured on the 2-core VM), and ``run_plan`` refuses to fork workers over it."""
    size = parse_size(spec.split(":", 1)[1] or "0", what="dram target size")
    if size <= 0 or size % lbs:
        raise TargetError(f"{spec}: a DRAM arena needs a size > 0 that is a multiple of {lbs}",
                          "write e.g. dram:1GiB")
    check_memory(size, spec, "give a smaller dram:<size>")
    try:
        mm = mmap.mmap(-1, size, flags=(mmap.MAP_SHARED if shared else mmap.MAP_PRIVATE) | mmap.MAP_ANONYMOUS
                       | getattr(mmap, "MAP_POPULATE", 0))
    except (OSError, OverflowError) as e:
        raise TargetError(f"{spec}: cannot allocate {format_bytes(size)} of DRAM: {e}",
                          "give a smaller dram:<size>") from None
    arena = np.frombuffer(mm, dtype=np.uint8)
    arena[::4096] = 0  # touch every page so that first-touch faults are not measured
    return Target(path=spec, kind="dram", fd=-1, size=size, lbs=lbs, writable=True, arena=arena, shared=shared,
                  _mm=mm)


def open_target(path: str | os.PathLike, size: int | str | None = None, write: bool = False,
                destroy_data: str | None = None, *, create: bool = True, lock: bool = True,
                direct: bool = True, shared: bool = True) -> Target:
    """Open a file, raw block device or ``dram:<size>`` for the engine, after every safety check.

    Files: created (and marked as kvbench's) when absent, extended when kvbench's own and smaller than
    ``size``; an existing file kvbench did not create is opened read-only and writes to it are refused.
    Block devices: reads need nothing; writes need ``destroy_data`` naming the same device.
    """
    path = str(path)
    if is_dram_spec(path):
        return open_dram(path, shared=shared)
    size = parse_size(size, what="--size") if size is not None else None
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise TargetError(f"cannot stat {path}: {e.strerror}", "check the target path") from None
    if st is not None and stat.S_ISBLK(st.st_mode):
        return _open_block(path, st, size, write, destroy_data, lock, direct)
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise TargetError(f"{path} is not a regular file or block device", "give a file path or /dev/<disk>")
    safety.check_file_path(path)
    return _open_file(path, st, size, write, create, lock, direct)


def _lock(fd: int, path: str) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        os.close(fd)
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise SafetyError(f"{path} is in use by another kvbench run (locked)",
                              "wait for that run to finish or use another target") from None
        raise


def _open_direct(path: str, flags: int, direct: bool, fstype: str | None, mountpoint: str | None) -> int:
    try:
        return os.open(path, flags | (os.O_DIRECT if direct else 0) | os.O_CLOEXEC, 0o644)
    except OSError as e:
        if e.errno == errno.EINVAL and direct:
            raise TargetError(f"{path}: the filesystem ({fstype or 'unknown'} on {mountpoint or '?'}) does not "
                              "support O_DIRECT", "put the target on a device-backed filesystem (ext4, xfs) or "
                              "use a raw block device") from None
        if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise TargetError(f"cannot open {path} for {'writing' if flags & os.O_RDWR else 'reading'}: "
                              f"{e.strerror}", "use a writable target (not read-only, with permission)") from None
        if e.errno == errno.ENOENT:
            raise TargetError(f"{path}: {e.strerror}", "create the parent directory first") from None
        if e.errno == errno.EBUSY and flags & os.O_EXCL:
            raise SafetyError(f"{path} is in use: the kernel holds the device exclusively for another opener (a "
                              "kvbench run through this or another device node, a mount, device-mapper or RAID)",
                              "wait for that run to finish, or use another device") from None
        raise TargetError(f"cannot open {path}: {e.strerror}", "check the target path") from None


def _open_file(path, st, size, write, create, lock, direct) -> Target:
    parent = os.path.dirname(os.path.abspath(path)) or "."
    if not os.path.isdir(parent):
        raise TargetError(f"{path}: directory {parent} does not exist", "create it or give another path")
    mnt = mount_of(path if st is not None else parent) or {}
    fstype, mountpoint = mnt.get("fstype"), mnt.get("mountpoint")
    if direct and fstype in MEMORY_FILESYSTEMS:
        raise TargetError(f"{path} is on {fstype} ({mountpoint}), where O_DIRECT is served from memory or "
                          "unsupported: no device would be measured",
                          "put the target on a device-backed filesystem (ext4, xfs) or a raw block device")
    dev_name = devno_name((st.st_dev if st else os.stat(parent).st_dev))
    lbs = _sysfs_lbs(dev_name) or 4096
    created = False
    if st is None:
        if not create:
            raise TargetError(f"{path} does not exist", "give an existing file or allow creating it")
        if size is None or size <= 0:
            raise TargetError(f"{path} does not exist and no size was given", "pass --size (e.g. --size 1GiB)")
        _check_size_aligned(path, size, lbs)
        safety.check_free_space(path, size)
        fd = _open_direct(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, direct, fstype, mountpoint)
        safety.mark_owned(path)
        created = True
        writable = True
    else:
        owned = safety.is_owned(path)
        if write and not owned:
            raise SafetyError(f"{path} exists and was not created by kvbench: refusing to overwrite it",
                              "give a new file path (kvbench creates and marks it) or remove the file yourself")
        writable = write or (owned and size is not None and size > st.st_size)
        fd = _open_direct(path, os.O_RDWR if writable else os.O_RDONLY, direct, fstype, mountpoint)
    if lock:
        _lock(fd, path)
    cur = os.fstat(fd).st_size
    if size is None:
        size = cur - cur % lbs
    _check_size_aligned(path, size, lbs)
    if size > cur:
        if not writable:
            os.close(fd)
            raise TargetError(f"{path} holds {cur} bytes, fewer than --size {size}",
                              "give --size <= the file size, or a new file path")
        safety.check_free_space(path, size - cur)
        try:
            os.posix_fallocate(fd, cur, size - cur)
        except OSError as e:
            os.close(fd)
            if e.errno == errno.ENOSPC:
                raise TargetError(f"{path}: no space to grow to {format_bytes(size)}",
                                  "give a smaller --size") from None
            if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                raise
            os.ftruncate(fd, size)
        created = True
    if size <= 0:
        os.close(fd)
        raise TargetError(f"{path} is empty", "pass --size to create or grow it")
    return Target(path=path, kind="file", fd=fd, size=size, lbs=lbs, writable=write or created,
                  created=created, new_file=st is None, fstype=fstype, device=dev_name)


def _check_size_aligned(path, size, lbs):
    if size % lbs:
        raise TargetError(f"{path}: size {size} is not a multiple of the logical block size {lbs}",
                          f"give a size that is a multiple of {lbs} bytes")


def _open_block(path, st, size, write, destroy_data, lock, direct) -> Target:
    if write:
        safety.check_block_write(path, destroy_data)
    # O_EXCL on a block device is the kernel's lock on the device itself, whatever node names it (a second node
    # made with mknod, a container's /dev): it fails while another O_EXCL opener, a mount or a holder has it.
    # The flock beside it is per inode (per node), so it alone let two nodes of one device run at once.
    fd = _open_direct(path, (os.O_RDWR if write else os.O_RDONLY) | (os.O_EXCL if lock else 0), direct, None, None)
    if lock:
        _lock(fd, path)
    buf = bytearray(8)
    fcntl.ioctl(fd, BLKGETSIZE64, buf)
    dev_size = struct.unpack("Q", buf)[0]
    lbuf = bytearray(4)
    fcntl.ioctl(fd, BLKSSZGET, lbuf)
    lbs = struct.unpack("i", lbuf)[0]
    if size is None or size == 0:
        size = dev_size
    if size > dev_size:
        os.close(fd)
        raise TargetError(f"--size {size} is larger than {path} ({dev_size} bytes)",
                          f"give --size <= {format_bytes(dev_size)}")
    _check_size_aligned(path, size, lbs)
    name = devno_name(st.st_rdev)
    return Target(path=path, kind="block", fd=fd, size=size, lbs=lbs, writable=write, fstype=None, device=name)


def first_hole(path: str, size: int | None = None) -> int | None:
    """Offset of the first unwritten byte of a regular file within ``size`` (its length by default), or None
    when every byte was written. Holes and fallocated-but-unwritten extents both count: the filesystem
    answers reads of them with zeros and no device I/O, so a benchmark reading them measures nothing."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        end = os.fstat(fd).st_size if size is None else min(int(size), os.fstat(fd).st_size)
        if end <= 0:
            return None
        try:
            hole = os.lseek(fd, 0, os.SEEK_HOLE)
        except OSError:               # no SEEK_HOLE here: cannot tell, assume written
            return None
        return hole if hole < end else None
    finally:
        os.close(fd)


def close_all(targets) -> None:
    for t in targets:
        t.close()


__all__ = ["Target", "open_target", "open_dram", "close_all", "first_hole", "MEMORY_FILESYSTEMS"]
