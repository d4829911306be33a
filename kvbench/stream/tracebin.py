"""The binary columnar form of a trace (``.kvbt``) and the ingest cache built on it.

A text trace is parsed once; its raw columns (file line, timestamp as written, input/output tokens, block ids as
written, CSR offsets, format extras) are stored as flat little-endian arrays in one file and read back with
``np.memmap``, so a later read costs a memory copy instead of a JSON parse. Chaining, time scaling and order
checks are applied on read exactly as for the text, so both paths give the same ``Trace``.

Layout: ``MAGIC`` (8 bytes), u32 version, u32 header length, the header as JSON, then each column at a 64-byte
aligned offset. The header names the source (:func:`source_key`: path, size, mtime_ns, inode, ctime_ns and a
hash of its first and last MiB), the source format, field mapping and
defaults (block tokens, time unit, chaining), and per column its dtype, offset, length and CRC-32. A file whose
size differs from the header's, whose header does not parse, or whose CRC does not match is corrupt:
:class:`CorruptBinary` is raised and nothing of it is used.

The cache (``$KVBENCH_CACHE_DIR``, default ``$XDG_CACHE_HOME/kvbench/traces`` or ``~/.cache/kvbench/traces``)
holds one file per (source path, format, field mapping); it is valid while the source's identity is the one in
its header (any edit, even one of the same length with the modification time put back, rebuilds it). ``KVBENCH_TRACE_CACHE=0`` turns it off. A cache that cannot be written (read-only
home) is skipped; a corrupt one is rebuilt with a one-line warning on stderr.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping

import numpy as np

MAGIC = b"KVBTRACE"
VERSION = 1
ALIGN = 64
SUFFIX = ".kvbt"
# raw columns: per request (lines, ts, input, output, offsets[1:]) and per block (ids); extras per request
REQUEST_COLUMNS = ("lines", "ts", "input", "output")


class CorruptBinary(Exception):
    """A .kvbt file that is truncated, altered or not one: the message says what was found."""


@dataclass
class Columns:
    """Raw columns of one batch of requests (before chaining, time scaling and order checks)."""

    lines: np.ndarray          # int64 file line of each request
    ts: np.ndarray             # int64 or float64 timestamps as written (the file's unit)
    inp: np.ndarray            # int64
    out: np.ndarray            # int64
    ids: np.ndarray            # uint64 block ids as written
    offsets: np.ndarray        # int64 CSR offsets into ids (len = requests + 1, starts at 0)
    extras: dict               # name -> int64 per request

    def __len__(self) -> int:
        return int(self.lines.shape[0])

    def head(self, n: int) -> "Columns":
        """The first ``n`` requests."""
        e = int(self.offsets[n])
        return Columns(self.lines[:n], self.ts[:n], self.inp[:n], self.out[:n], self.ids[:e],
                       self.offsets[:n + 1], {k: v[:n] for k, v in self.extras.items()})


# --- file -----------------------------------------------------------------------------------------------
def _align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def is_binary(path: str | Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


class Writer:
    """Append batches of ``Columns`` to per-column spill files, then assemble one .kvbt file atomically."""

    def __init__(self, dest: Path, meta: dict):
        self.dest = Path(dest)
        self.meta = meta
        self.tmp = self.dest.with_name(f".{self.dest.name}.{os.getpid()}.tmp")
        self._files: dict[str, object] = {}
        self._dtypes: dict[str, np.dtype] = {}
        self._base = 0
        self.n_requests = 0
        self.ok = True            # false once a batch cannot be stored exactly (mixed timestamp types)

    def _put(self, name: str, arr: np.ndarray) -> None:
        dt = self._dtypes.setdefault(name, arr.dtype)
        if arr.dtype != dt:
            self.ok = False
            return
        fh = self._files.get(name)
        if fh is None:
            fh = self._files[name] = open(self.tmp.with_suffix(f".{name}"), "wb")
        fh.write(np.ascontiguousarray(arr).tobytes())

    def add(self, c: Columns) -> None:
        if not self.ok:
            return
        if self.n_requests == 0:
            self._put("offsets", np.zeros(1, dtype=np.int64))
        self._put("lines", c.lines.astype(np.int64, copy=False))
        self._put("ts", c.ts)
        self._put("input", c.inp.astype(np.int64, copy=False))
        self._put("output", c.out.astype(np.int64, copy=False))
        self._put("ids", c.ids.astype(np.uint64, copy=False))
        self._put("offsets", (c.offsets[1:] + self._base).astype(np.int64, copy=False))
        for k, v in c.extras.items():
            self._put("x_" + k, v.astype(np.int64, copy=False))
        self._base += int(c.offsets[-1])
        self.n_requests += len(c)

    def finish(self) -> Path | None:
        """Write the .kvbt file (atomically: temp name, then rename); None when nothing could be stored."""
        try:
            if not self.ok or self.n_requests == 0:
                return None
            for fh in self._files.values():
                fh.close()
            names = list(self._files)
            cols, pos = [], 0
            for name in names:
                size = self.tmp.with_suffix(f".{name}").stat().st_size
                cols.append({"name": name, "dtype": self._dtypes[name].str, "offset": pos, "bytes": size})
                pos = _align(pos + size)
            # CRCs of the spill files, then the header (its length fixes where the data starts)
            for c in cols:
                crc = 0
                with open(self.tmp.with_suffix(f".{c['name']}"), "rb") as fh:
                    while chunk := fh.read(1 << 24):
                        crc = zlib.crc32(chunk, crc)
                c["crc32"] = crc
            meta = self.meta | {"requests": self.n_requests, "blocks": self._base, "columns": cols}
            head = json.dumps(meta, sort_keys=True).encode()
            data_start = _align(len(MAGIC) + 8 + len(head))
            meta["data_start"] = data_start
            meta["total_bytes"] = data_start + (_align(pos) if cols else 0)
            head = json.dumps(meta, sort_keys=True).encode()
            data_start2 = _align(len(MAGIC) + 8 + len(head))
            if data_start2 != data_start:            # the two numbers lengthened the header past a boundary
                meta["data_start"] = data_start2
                meta["total_bytes"] = data_start2 + _align(pos)
                head = json.dumps(meta, sort_keys=True).encode()
                data_start = data_start2
            with open(self.tmp, "wb") as out:
                out.write(MAGIC + struct.pack("<II", VERSION, len(head)) + head)
                out.write(b"\0" * (data_start - out.tell()))
                for c in cols:
                    with open(self.tmp.with_suffix(f".{c['name']}"), "rb") as fh:
                        while chunk := fh.read(1 << 24):
                            out.write(chunk)
                    out.write(b"\0" * (data_start + _align(c["offset"] + c["bytes"]) - out.tell()))
            os.replace(self.tmp, self.dest)
            return self.dest
        finally:
            self.abort()

    def abort(self) -> None:
        for name, fh in self._files.items():
            fh.close()
            self.tmp.with_suffix(f".{name}").unlink(missing_ok=True)
        self._files = {}
        self.tmp.unlink(missing_ok=True)


class Reader:
    """A validated .kvbt file: ``meta`` (its header) and its columns as read-only memory maps."""

    def __init__(self, path: str | Path, check: bool = True):
        self.path = Path(path)
        try:
            size = self.path.stat().st_size
            with open(self.path, "rb") as fh:
                pre = fh.read(len(MAGIC) + 8)
                if len(pre) < len(MAGIC) + 8 or pre[:len(MAGIC)] != MAGIC:
                    raise CorruptBinary("not a kvbench binary trace (bad magic)")
                version, hlen = struct.unpack("<II", pre[len(MAGIC):])
                if version != VERSION:
                    raise CorruptBinary(f"binary trace version {version}, this kvbench reads {VERSION}")
                raw = fh.read(hlen)
            if len(raw) != hlen:
                raise CorruptBinary("truncated header")
            try:
                meta = json.loads(raw)
            except ValueError:
                raise CorruptBinary("header is not valid JSON") from None
        except OSError as e:
            raise CorruptBinary(f"cannot read: {e.strerror}") from None
        if not isinstance(meta, dict) or "total_bytes" not in meta or "columns" not in meta:
            raise CorruptBinary("header lacks its column table")
        if size != meta["total_bytes"]:
            raise CorruptBinary(f"{size} bytes where the header says {meta['total_bytes']} (truncated?)")
        self.meta = meta
        self.cols: dict[str, np.ndarray] = {}
        mm = np.memmap(self.path, dtype=np.uint8, mode="r") if size else np.zeros(0, np.uint8)
        start = int(meta["data_start"])
        for c in meta["columns"]:
            a, n = start + int(c["offset"]), int(c["bytes"])
            if a + n > size:
                raise CorruptBinary(f"column {c['name']} runs past the end of the file")
            buf = mm[a:a + n]
            if check and zlib.crc32(buf) != c["crc32"]:
                raise CorruptBinary(f"checksum mismatch in column {c['name']}")
            self.cols[c["name"]] = buf.view(np.dtype(c["dtype"]))
        n_req = int(meta["requests"])
        need = {"lines": n_req, "ts": n_req, "input": n_req, "output": n_req, "offsets": n_req + 1,
                "ids": int(meta["blocks"])}
        for name, n in need.items():
            if name not in self.cols or self.cols[name].shape[0] != n:
                raise CorruptBinary(f"column {name} missing or of the wrong length")
        if self.cols["offsets"][-1] != int(meta["blocks"]):
            raise CorruptBinary("offsets do not end at the block count")

    @property
    def extras(self) -> tuple[str, ...]:
        return tuple(k[2:] for k in self.cols if k.startswith("x_"))

    def batches(self, batch: int) -> Iterator[Columns]:
        c = self.cols
        n = int(self.meta["requests"])
        for a in range(0, n, batch):
            b = min(n, a + batch)
            o0, o1 = int(c["offsets"][a]), int(c["offsets"][b])
            yield Columns(np.array(c["lines"][a:b]), np.array(c["ts"][a:b]), np.array(c["input"][a:b]),
                          np.array(c["output"][a:b]), np.array(c["ids"][o0:o1]),
                          np.array(c["offsets"][a:b + 1]) - o0,
                          {k: np.array(c["x_" + k][a:b]) for k in self.extras})


# --- the cache ------------------------------------------------------------------------------------------
def cache_dir() -> Path | None:
    """Where cached binaries live; None when the cache is off (``KVBENCH_TRACE_CACHE=0``)."""
    if os.environ.get("KVBENCH_TRACE_CACHE", "1").strip().lower() in ("0", "off", "no", "false"):
        return None
    d = os.environ.get("KVBENCH_CACHE_DIR")
    if d:
        return Path(d) / "traces"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kvbench" / "traces"


EDGE_BYTES = 1 << 20       # the source's first and last MiB are hashed into its identity


def source_key(path: Path) -> dict:
    """The source's identity: size, mtime_ns, inode and ctime_ns (a copy with ``cp -p``/``rsync -a``/``tar``
    keeps size and mtime but is a new inode; an edit in place moves ctime, which no user call can set back) and
    a SHA-256 of its first and last MiB (an edit the clock cannot see: a coarse-timestamp filesystem)."""
    st = path.stat()
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        h.update(fh.read(EDGE_BYTES))
        if st.st_size > EDGE_BYTES:
            fh.seek(max(EDGE_BYTES, st.st_size - EDGE_BYTES))
            h.update(fh.read(EDGE_BYTES))
    return {"path": str(path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "inode": st.st_ino,
            "ctime_ns": st.st_ctime_ns, "edges_sha256": h.hexdigest()[:32]}


def cache_path(path: Path, fmt: str, fields: Mapping) -> Path | None:
    d = cache_dir()
    if d is None:
        return None
    ident = json.dumps([str(path.resolve()), fmt, sorted((k, v or "") for k, v in fields.items()), VERSION])
    return d / (hashlib.sha256(ident.encode()).hexdigest()[:32] + SUFFIX)


def warn(msg: str) -> None:
    """One line on stderr (the cache is a convenience: its trouble never stops a run), above a live line."""
    from kvbench.progress import echo

    echo(f"kvbench: warning: {msg}")


def open_cached(path: Path, fmt: str, fields: Mapping) -> Reader | None:
    """The cached binary of ``path`` when it is present, intact and matches the source's identity."""
    cp = cache_path(path, fmt, fields)
    if cp is None or not cp.is_file():
        return None
    try:
        r = Reader(cp)
    except CorruptBinary as e:
        warn(f"trace cache {cp} is corrupt ({e}); rebuilding it from {path}")
        cp.unlink(missing_ok=True)
        return None
    src = r.meta.get("source", {})
    try:
        now = source_key(path)
    except OSError:
        return None
    if src != now or r.meta.get("format") != fmt or r.meta.get("fields") != dict(fields):
        return None          # the source changed: parse again (and overwrite)
    return r


def cache_writer(path: Path, fmt: str, fields: Mapping, defaults: dict) -> Writer | None:
    """A Writer for the cache entry of ``path``, or None when the cache is off or its folder is not writable."""
    cp = cache_path(path, fmt, fields)
    if cp is None:
        return None
    try:
        cp.parent.mkdir(parents=True, exist_ok=True)
        if not os.access(cp.parent, os.W_OK):
            return None
        meta = {"source": source_key(path), "format": fmt, "fields": dict(fields), "defaults": defaults}
    except OSError:
        return None
    return Writer(cp, meta)
