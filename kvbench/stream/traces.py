"""Serving-trace readers: one registry of formats, one ``Trace`` of numpy arrays, streamed in batches.

A trace line is a request: arrival time, input/output token counts and the ids of its prompt's KV blocks.
``read_trace`` / ``iter_trace`` turn any registered format into the same ``Trace`` (one row per request, CSR
block keys), so every later stage (curves, replay, plans, reports) has one path. Memory is bounded by the
batch size; gzip is read transparently. Keys are prefix-chained (key i identifies the whole prefix up to block
i): formats whose ids already are (Mooncake) keep them as they are, the others are chained (DESIGN.md).
"""

from __future__ import annotations

import csv
import gzip
import io
import itertools
import json
import re
import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterator, Mapping

import numpy as np
import orjson

from kvbench.errors import TraceError, UsageError
from kvbench.stream import tracebin
from kvbench.stream.chain import chain_ids
from kvbench.stream.trace import Trace  # noqa: F401 - the one Trace type; readers build it, callers import it here

CANONICAL = ("timestamp", "input_length", "output_length", "hash_ids")
TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
ORDERS = ("check", "sort", "keep")


# --- formats -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TraceFormat:
    """How one trace format maps onto ``Trace``: file kind, field names, time unit, block size, chaining."""

    name: str
    description: str
    kind: str                                   # "jsonl" or "csv"
    fields: Mapping[str, str | None]            # canonical name -> field in the file (None: absent, zeros)
    time_unit: str | None                       # None: must be given (generic formats)
    block_tokens: int | None                    # None: must be given (generic formats)
    chain: bool                                 # chain ids by prefix (ids not known to be prefix-chained)
    extras: tuple[str, ...] = ()                # optional per-request int fields kept in Trace.extras
    detect: Callable[[dict], bool] | None = None
    block_tokens_note: str = ""


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _has(rec: dict, *names: str) -> bool:
    return all(n in rec for n in names)


FORMATS: dict[str, TraceFormat] = {
    "bailian": TraceFormat(
        "bailian", "Alibaba Bailian/Qwen usage traces (ATC'25): chat_id, parent_chat_id, turn, float seconds, "
        "16-token blocks", "jsonl", dict(zip(CANONICAL, CANONICAL)), "s", 16, True,
        extras=("chat_id", "parent_chat_id", "turn"),
        detect=lambda r: _has(r, "chat_id", "parent_chat_id", "timestamp", "hash_ids")),
    "lmbench": TraceFormat(
        "lmbench", "LMBench/GMI trace: string Unix-nanosecond timestamps, ids not prefix-chained (chained here)",
        "jsonl", dict(zip(CANONICAL, CANONICAL)), "ns", 32, True,
        detect=lambda r: _has(r, *CANONICAL) and isinstance(r["timestamp"], str),
        block_tokens_note="the GMI trace states no block size; len(hash_ids) == ceil(input/32) on 39% of lines "
                          "and the median is 34 tokens per id, so 32 is the default (override with block_tokens)"),
    "mooncake": TraceFormat(
        "mooncake", "Mooncake FAST'25 traces: integer millisecond timestamps, 512-token prefix-chained blocks",
        "jsonl", dict(zip(CANONICAL, CANONICAL)), "ms", 512, False,
        detect=lambda r: _has(r, *CANONICAL) and isinstance(r["timestamp"], (int, float))
        and not isinstance(r["timestamp"], bool)),
    "jsonl": TraceFormat(
        "jsonl", "generic JSON Lines with a field mapping (fields=, time_unit=, block_tokens=)", "jsonl",
        dict(zip(CANONICAL, CANONICAL)), None, None, True),
    "csv": TraceFormat(
        "csv", "generic CSV with a header and a field mapping; hash ids separated by spaces, ';' or '|'", "csv",
        dict(zip(CANONICAL, CANONICAL)), None, None, True),
}
FORMAT_ALIASES = {"gmi": "lmbench", "qwen": "bailian", "generic": "jsonl", "json": "jsonl"}


def format_names() -> list[str]:
    return ["auto", *FORMATS]


def get_format(name: str) -> TraceFormat:
    key = FORMAT_ALIASES.get(name.lower(), name.lower())
    if key not in FORMATS:
        raise UsageError(f"unknown trace format {name!r}", f"use one of: {', '.join(format_names())}")
    return FORMATS[key]


# --- files ---------------------------------------------------------------------------------------------
def builtin_traces() -> dict[str, Path]:
    """Traces shipped in ``workloads/traces/`` by name (``mooncake-sample``, ``mooncake-synthetic``; a
    ``.jsonl.gz`` file is named without its suffixes)."""
    from kvbench.spec.presets import workloads_dir

    folder = workloads_dir() / "traces"
    out = {}
    for p in sorted(folder.glob("*.jsonl*")) if folder.is_dir() else []:
        out[p.name.split(".jsonl")[0]] = p
    return out


DEFAULT_TRACE = "mooncake-sample"


def resolve_trace(path_or_name: str | Path) -> Path | str:
    """A trace path, or the name of a built-in trace; a missing file is a one-line error.

    A ``gen:MODEL,...`` argument (a workload model's generated stream, :mod:`kvbench.stream.synth`) is returned
    as it is, checked."""
    from kvbench.stream.synth import is_gen, parse_gen

    if is_gen(path_or_name):
        parse_gen(path_or_name)
        return path_or_name
    p = Path(path_or_name)
    if p.is_file():
        return p
    builtin = builtin_traces()
    if str(path_or_name) in builtin:
        return builtin[str(path_or_name)]
    if p.is_dir():
        raise TraceError(f"{p} is a directory, not a trace file", "give a .jsonl, .jsonl.gz or .csv file")
    if p.exists():          # /dev/null, a FIFO, a device: there, but not a trace file
        raise TraceError(f"{p} is not a regular file", "give a .jsonl, .jsonl.gz or .csv file")
    raise TraceError(f"trace not found: {p}", f"give an existing file or a built-in trace "
                     f"({', '.join(builtin) or 'none shipped'})")


def open_text(path: Path):
    """Open a trace as text, gunzipping when the file starts with the gzip magic (whatever its name)."""
    try:
        with open(path, "rb") as fh:
            magic = fh.read(2)
        if magic == b"\x1f\x8b":           # utf-8-sig: a UTF-8 byte-order mark is read past, not a field
            return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8-sig", errors="strict")
        return open(path, "r", encoding="utf-8-sig", errors="strict")
    except OSError as e:
        raise TraceError(f"cannot read trace: {e.strerror}", "check the path and permissions", path=path) from None


def _first_record(path: Path) -> tuple[int, str]:
    with open_text(path) as fh:
        try:
            for lineno, line in enumerate(fh, 1):
                if "\x00" in line:
                    raise TraceError(f"not a text trace (NUL bytes on line {lineno}: binary data)",
                                     "give a JSONL/CSV file, optionally gzipped", path=path)
                if line.strip():
                    return lineno, line.strip()
        except (UnicodeDecodeError, EOFError, gzip.BadGzipFile, zlib.error) as e:
            what = f"corrupt gzip data: {e}" if isinstance(e, zlib.error) else type(e).__name__
            raise TraceError(f"not a text trace ({what})", "give a JSONL/CSV file, optionally gzipped",
                             path=path) from None
    raise TraceError("the trace is empty (no requests)", "give a trace with at least one request", path=path)


def detect_format(path: str | Path) -> str:
    """Name of the registered format of a trace file, from its first non-empty line."""
    path = resolve_trace(path)
    if tracebin.is_binary(path):
        return open_binary_trace(path).meta["format"]
    lineno, line = _first_record(path)
    if line.startswith("{"):
        try:
            rec = json.loads(line)
        except ValueError as e:
            raise TraceError(f"not valid JSON ({e})", "fix or remove the line", path=path, line=lineno) from None
        for fmt in FORMATS.values():
            if fmt.detect is not None and fmt.detect(rec):
                return fmt.name
        raise TraceError(f"cannot detect the trace format from fields {sorted(rec)}",
                         "pass --format jsonl with a field mapping, e.g. --field timestamp=ts "
                         "--field hash_ids=blocks --time-unit ms --block-tokens 16", path=path, line=lineno)
    header = next(csv.reader([line]))
    if set(CANONICAL) <= {h.strip() for h in header}:
        return "csv"
    raise TraceError(f"cannot detect the trace format (not JSON Lines; CSV header {header[:6]} lacks "
                     f"{', '.join(CANONICAL)})", "pass --format csv with a field mapping (--field ...)",
                     path=path, line=lineno)


# --- parsing -------------------------------------------------------------------------------------------
@dataclass
class _Raw:
    """Python-level columns of one batch, before conversion."""

    lines: list = field(default_factory=list)
    ts: list = field(default_factory=list)
    inp: list = field(default_factory=list)
    out: list = field(default_factory=list)
    ids: list = field(default_factory=list)
    extras: dict = field(default_factory=dict)
    flat: np.ndarray | None = None       # the ids already as one array (compiled parse), with per-line offsets
    offsets: np.ndarray | None = None


BOM = b"\xef\xbb\xbf"
MAX_TOKENS = 10**9                # per request: a billion-token prompt is a corrupt field, not a workload
MAX_SPAN_S = 100 * 365.25 * 86400  # a trace spanning more than a century is a wrong time unit or a corrupt field


def _check_ranges(rel: np.ndarray, c, p, fmap, unit: str) -> None:
    """Values no analysis can hold (arrays sized by the span, sums of tokens): refused naming the line."""
    for name, arr, limit, what in (("timestamp", np.abs(rel), MAX_SPAN_S, "s after the first request"),
                                   ("input_length", c.inp, MAX_TOKENS, "tokens"),
                                   ("output_length", c.out, MAX_TOKENS, "tokens")):
        if arr.size and not arr.max() <= limit:
            i = int(np.argmax(~(arr <= limit)))
            raise TraceError(f"{float(arr[i]):.4g} {what} is out of range (at most {limit:.4g})",
                             "fix the value" + (f", or give the right --time-unit (read as {unit})"
                                                if name == "timestamp" else ""),
                             path=p, line=int(c.lines[i]), field=fmap.get(name) or name)


def open_binary(path: Path):
    """Open a trace as bytes, gunzipping when the file starts with the gzip magic (whatever its name)."""
    try:
        with open(path, "rb") as fh:
            magic = fh.read(2)
        fh = gzip.open(path, "rb") if magic == b"\x1f\x8b" else open(path, "rb")
        if fh.read(3) != BOM:               # a UTF-8 byte-order mark is read past, not part of the first line
            fh.seek(0)
        return fh
    except OSError as e:
        raise TraceError(f"cannot read trace: {e.strerror}", "check the path and permissions", path=path) from None


def _jsonl_record_error(recs: list, lines: list, path: Path, fields: Mapping[str, str | None], extra_names):
    """Slow path of a chunk that failed the fast column extraction: raise the error of its first bad line."""
    ft, fi, fo, fh_ = (fields[c] for c in CANONICAL)
    for rec, lineno in zip(recs, lines):
        if type(rec) is not dict:
            raise TraceError("the line is not a JSON object", "one request object per line", path=path, line=lineno)
        for f in (ft, fi, fo, fh_):
            if f is not None and f not in rec:
                raise TraceError("missing field", f"every request needs {', '.join(x for x in fields.values() if x)}",
                                 path=path, line=lineno, field=f)
        if type(rec[fh_]) is not list:
            raise TraceError(f"expected a list of block ids, got {type(rec[fh_]).__name__}",
                             "write hash_ids as a JSON list of integers", path=path, line=lineno, field=fh_)
    raise TraceError("malformed request", "fix the line", path=path)  # pragma: no cover


FAST_IDS_BYTES = 1 << 21      # chunks at least this large parse their id lists with the compiled kernel


def _split_id_lists(chunk: list, key: bytes, loads):
    """The records of a chunk of lines with each line's id list cut out (parsed as ``[]`` by orjson) and the
    lists' texts; None when a line does not have exactly one plain ``"key": [...]`` (the ordinary parse then
    runs, and names the line)."""
    recs, texts = [], []
    for x in chunk:
        k = x.find(key)
        if k < 0 or x.find(key, k + 1) >= 0:
            return None
        a = x.find(b"[", k)
        b = x.find(b"]", a)
        if a < 0 or b < 0 or x[k + len(key):a].strip() != b":":
            return None
        recs.append(loads(x[:a + 1] + x[b:]))
        texts.append(x[a + 1:b])
    return recs, texts


def _parse_ids_fast(chunk: list, key: bytes, loads):
    """(records, flat ids, ids per line) of a chunk, or None to parse it the ordinary way."""
    from kvbench.stream.idparse import parse_id_lists

    split = _split_id_lists(chunk, key, loads)
    if split is None:
        return None
    recs, texts = split
    lens = np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts))
    bounds = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(lens, out=bounds[1:])
    buf = np.frombuffer(b"".join(texts), dtype=np.uint8)
    out = np.empty(int(bounds[-1]) // 2 + len(texts), dtype=np.uint64)    # ids are at least 1 digit + 1 comma
    counts = np.zeros(len(texts), dtype=np.int64)
    m = parse_id_lists(buf, bounds, out, counts)
    return None if m < 0 else (recs, out[:m], counts)


def _jsonl_batches(path: Path, fmt: TraceFormat, fields: Mapping[str, str | None], batch: int) -> Iterator[_Raw]:
    """JSON Lines in chunks: orjson per line (about 1.6x the standard library's json on trace lines, and it
    keeps every line a separate document, so errors still name their line), columns by list comprehension; a
    chunk that fails falls back to a per-line pass that names the first bad line. In large chunks each line's id
    list is cut out and parsed by a compiled kernel straight into one array (``_parse_ids_fast``: no Python int
    per id); a chunk it does not accept is parsed the ordinary way."""
    ft, fi, fo, fh_ = (fields[c] for c in CANONICAL)
    extra_names = fmt.extras
    loads = orjson.loads
    key = orjson.dumps(fh_)
    lineno = 0
    pend_lines: list = []
    pend_recs: list = []
    pend_flat: list = []         # per chunk: its ids (fast) ...
    pend_counts: list = []       # ... and ids per line

    def take(n):
        recs, lines = pend_recs[:n], pend_lines[:n]
        del pend_recs[:n], pend_lines[:n]
        if not pend_flat:
            return _jsonl_raw(recs, lines, path, fields, extra_names)
        counts, flat = np.concatenate(pend_counts), np.concatenate(pend_flat)
        k = int(counts[:n].sum())
        pend_counts[:] = [counts[n:]]
        pend_flat[:] = [flat[k:]]
        raw = _jsonl_raw(recs, lines, path, fields, extra_names)
        raw.flat = flat[:k]
        raw.offsets = np.zeros(len(recs) + 1, dtype=np.int64)
        np.cumsum(counts[:n], out=raw.offsets[1:])
        return raw

    with open_binary(path) as fh:
        while True:
            try:
                chunk = fh.readlines(1 << 22)
            except (EOFError, gzip.BadGzipFile, zlib.error, OSError) as e:
                raise TraceError(f"cannot read past line {lineno}: {type(e).__name__}: {e}",
                                 "check the file is complete (a truncated gzip?)", path=path) from None
            if not chunk:
                break
            nums = range(lineno + 1, lineno + 1 + len(chunk))
            lineno += len(chunk)
            blank = [i for i, x in enumerate(chunk) if x.isspace() or not x]
            if blank:
                drop = set(blank)
                nums = [n for i, n in enumerate(nums) if i not in drop]
                chunk = [x for i, x in enumerate(chunk) if i not in drop]
            fast = None
            if sum(map(len, chunk)) >= FAST_IDS_BYTES:
                try:
                    fast = _parse_ids_fast(chunk, key, loads)
                except ValueError:
                    fast = None
            if fast is not None:
                recs, flat, counts = fast
                if not pend_flat and pend_recs:        # ordinary records before: their ids into arrays too
                    r = _jsonl_raw(pend_recs, pend_lines, path, fields, extra_names)
                    ids, offs = _block_ids(r.ids, r.lines, path, fh_)
                    pend_flat.append(ids)
                    pend_counts.append(np.diff(offs))
                pend_flat.append(flat)
                pend_counts.append(counts)
            else:
                try:
                    recs = [loads(x) for x in chunk]
                except ValueError:
                    for x, n in zip(chunk, nums):
                        try:
                            loads(x)
                        except ValueError as e:
                            raise TraceError(f"not valid JSON ({e})", "fix or remove the line", path=path,
                                             line=n) from None
                    raise  # pragma: no cover
                if pend_flat:                          # arrays in use: this chunk's ids join them
                    r = _jsonl_raw(recs, list(nums), path, fields, extra_names)
                    ids, offs = _block_ids(r.ids, r.lines, path, fh_)
                    pend_flat.append(ids)
                    pend_counts.append(np.diff(offs))
            pend_recs.extend(recs)
            pend_lines.extend(nums)
            while len(pend_recs) >= batch:
                yield take(batch)
    while pend_recs:
        yield take(batch)


def _jsonl_raw(recs: list, lines: list, path: Path, fields, extra_names) -> _Raw:
    ft, fi, fo, fh_ = (fields[c] for c in CANONICAL)
    try:
        raw = _Raw(lines, [r[ft] for r in recs], [r[fi] for r in recs],
                   [r[fo] for r in recs] if fo is not None else [0] * len(recs), [r[fh_] for r in recs],
                   {k: [r.get(k, -1) for r in recs] for k in extra_names})
    except (KeyError, TypeError, AttributeError):
        _jsonl_record_error(recs, lines, path, fields, extra_names)
    if not all(type(h) is list for h in raw.ids):
        _jsonl_record_error(recs, lines, path, fields, extra_names)
    return raw


_SPLIT_IDS = re.compile(r"[\s;|,\[\]]+")


def _csv_batches(path: Path, fmt: TraceFormat, fields: Mapping[str, str | None], batch: int) -> Iterator[_Raw]:
    ft, fi, fo, fh_ = (fields[c] for c in CANONICAL)
    raw = _Raw()
    with open_text(path) as fh:
        reader = csv.reader(fh)
        try:
            header = [h.strip() for h in next(reader)]
        except StopIteration:
            raise TraceError("the trace is empty (no header)", "give a CSV with a header line", path=path) from None
        col = {}
        for f in (ft, fi, fo, fh_):
            if f is None:
                continue
            if f not in header:
                raise TraceError(f"CSV header has no column {f!r} (columns: {', '.join(header)})",
                                 "map the fields with --field NAME=COLUMN", path=path, line=1, field=f)
            col[f] = header.index(f)
        lineno = 1
        for row in reader:
            lineno = reader.line_num
            if not row or not any(c.strip() for c in row):
                continue
            if len(row) != len(header):
                raise TraceError(f"{len(row)} columns where the header has {len(header)}",
                                 "fix the line (quote fields holding commas)", path=path, line=lineno)
            raw.ts.append(row[col[ft]].strip())
            raw.inp.append(row[col[fi]].strip())
            raw.out.append(row[col[fo]].strip() if fo is not None else 0)
            text = row[col[fh_]].strip()
            try:
                raw.ids.append([int(x) for x in _SPLIT_IDS.split(text) if x])
            except ValueError:
                raise TraceError(f"block ids {text[:40]!r} are not integers",
                                 "separate integer ids with spaces, ';' or '|'", path=path, line=lineno,
                                 field=fh_) from None
            raw.lines.append(lineno)
            if len(raw.lines) >= batch:
                yield raw
                raw = _Raw()
    if raw.lines:
        yield raw


_BATCH_READERS = {"jsonl": _jsonl_batches, "csv": _csv_batches}


def _bad_element(values: list, lines: list, ok: Callable, path, field_name, expected: str, fix: str):
    """Slow path: find the first element failing ``ok`` and raise a TraceError naming its line."""
    for v, ln in zip(values, lines):
        if not ok(v):
            raise TraceError(f"expected {expected}, got {v!r}", fix, path=path, line=ln, field=field_name)
    raise TraceError(f"expected {expected}", fix, path=path, field=field_name)  # pragma: no cover


def _ok_count(v) -> bool:
    if isinstance(v, str):
        return v.strip().isdigit()
    return (_is_int(v) and v >= 0) or (isinstance(v, float) and v.is_integer() and v >= 0)


def _counts(values: list, lines: list, path, field_name) -> np.ndarray:
    try:
        arr = np.array(values)
        if arr.dtype.kind in "iu" and (arr.size == 0 or arr.min() >= 0):
            return arr.astype(np.int64)
        if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.floor(arr)) and arr.min() >= 0:
            return arr.astype(np.int64)
        if arr.dtype.kind == "U":
            out = arr.astype(np.int64)
            if out.size == 0 or out.min() >= 0:
                return out
    except (ValueError, TypeError, OverflowError):
        pass
    _bad_element(values, lines, _ok_count, path, field_name, "a token count (integer >= 0)", "fix the value")


def _ok_time(v) -> bool:
    if isinstance(v, str):
        try:
            return np.isfinite(float(v))
        except ValueError:
            return False
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) and np.isfinite(v)


def _times(values: list, lines: list, path, field_name) -> np.ndarray:
    """Timestamps as int64 when integral (exact ns arithmetic) else float64."""
    try:
        arr = np.array(values)
        if arr.dtype.kind == "U":
            try:
                arr = arr.astype(np.int64)
            except (ValueError, OverflowError):
                arr = arr.astype(np.float64)
        if arr.dtype.kind in "iu":
            return arr.astype(np.int64)
        if arr.dtype.kind == "f" and np.all(np.isfinite(arr)):
            return arr
    except (ValueError, TypeError, OverflowError):
        pass
    _bad_element(values, lines, _ok_time, path, field_name, "a number (or a numeric string)",
                 "fix the timestamp")


def _ok_id(v) -> bool:
    return _is_int(v) and 0 <= v < 2**64


def _block_ids(ids: list, lines: list, path, field_name) -> tuple[np.ndarray, np.ndarray]:
    counts = np.fromiter((len(h) for h in ids), dtype=np.int64, count=len(ids))
    offsets = np.zeros(len(ids) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    flat = list(itertools.chain.from_iterable(ids))
    try:
        arr = np.array(flat) if flat else np.zeros(0, dtype=np.uint64)
        if arr.dtype.kind == "u" or (arr.dtype.kind == "i" and (arr.size == 0 or arr.min() >= 0)):
            return arr.astype(np.uint64), offsets
    except (ValueError, TypeError, OverflowError):
        pass
    for h, ln in zip(ids, lines):
        for v in h:
            if not _ok_id(v):
                raise TraceError(f"block id {v!r} is not an integer in 0..2^64-1", "fix the block id",
                                 path=path, line=ln, field=field_name)
    return np.array(flat, dtype=np.uint64), offsets    # all ints in range, some past 2^63 (numpy chose float)


def _resolve_fields(fmt: TraceFormat, fields: Mapping[str, str | None] | None) -> dict[str, str | None]:
    out = dict(fmt.fields)
    for k, v in (fields or {}).items():
        if k not in CANONICAL:
            raise UsageError(f"unknown trace field {k!r} in the field mapping",
                             f"map one of {', '.join(CANONICAL)} (e.g. timestamp=ts)")
        out[k] = v or None
    for k in ("timestamp", "input_length", "hash_ids"):
        if not out[k]:
            raise UsageError(f"the field mapping leaves {k!r} unmapped", f"give --field {k}=COLUMN")
    return out


def iter_trace(path: str | Path, fmt: str = "auto", batch_requests: int = 65536, *,
               block_tokens: int | None = None, time_unit: str | None = None,
               fields: Mapping[str, str | None] | None = None, chain: bool | None = None,
               order: str = "check", limit: int | None = None) -> Iterator[Trace]:
    """Yield the trace as ``Trace`` batches of at most ``batch_requests`` requests.

    ``fmt``: a registered format or ``auto``. ``block_tokens``/``time_unit``/``fields`` override the format's
    defaults (the generic ``jsonl``/``csv`` formats need them). ``chain``: prefix-chain the ids (default: the
    format's). ``order``: ``check`` raises on a request earlier than its predecessor (naming the line),
    ``sort`` sorts by arrival (reads the whole trace first), ``keep`` leaves the file order.
    ``limit``: stop after this many requests.
    """
    if order not in ORDERS:
        raise UsageError(f"unknown order {order!r}", f"use one of {', '.join(ORDERS)}")
    if batch_requests <= 0:
        raise UsageError(f"batch_requests must be > 0, got {batch_requests}", "give a positive batch size")
    from kvbench.stream.synth import is_gen, iter_generated

    if is_gen(path):                    # a workload model's stream: already in arrival order, keys prefix-chained
        yield from iter_generated(path, batch_requests, limit=limit, block_tokens=block_tokens)
        return
    if order == "sort":
        yield from _sorted_batches(path, fmt, batch_requests, block_tokens=block_tokens, time_unit=time_unit,
                                   fields=fields, chain=chain, limit=limit)
        return
    p = resolve_trace(path)
    spec, fmap, binary = _spec_of(p, fmt, fields)
    bt = block_tokens if block_tokens is not None else spec.block_tokens
    if bt is None:
        raise UsageError(f"the {spec.name} format does not state tokens per block", "pass --block-tokens N")
    if int(bt) <= 0:
        raise UsageError(f"block_tokens must be > 0, got {bt}", "give the tokens per KV block, e.g. 16 or 512")
    unit = time_unit or spec.time_unit
    if unit is None:
        raise UsageError(f"the {spec.name} format does not state its time unit",
                         f"pass --time-unit ({', '.join(TIME_UNITS)})")
    if unit not in TIME_UNITS:
        raise UsageError(f"unknown time unit {unit!r}", f"use one of {', '.join(TIME_UNITS)}")
    scale = TIME_UNITS[unit]
    do_chain = spec.chain if chain is None else bool(chain)
    t0 = None
    prev_t, prev_line = None, None
    seen = 0
    source = binary.batches(batch_requests) if binary is not None else _column_batches(p, spec, fmap,
                                                                                         batch_requests)
    for c in source:
        if limit is not None and seen + len(c) > limit:
            c = c.head(max(0, limit - seen))
            if not len(c):
                break
        ts = c.ts
        if t0 is None:
            t0 = ts[0]
        if order == "check":
            _check_order(ts, c.lines, prev_t, prev_line, p, fmap["timestamp"], scale)
            prev_t, prev_line = ts[-1], c.lines[-1]
        rel = (ts - t0).astype(np.float64) * scale
        _check_ranges(rel, c, p, fmap, unit)
        keys = chain_ids(c.ids, c.offsets) if do_chain else c.ids
        seen += len(c)
        yield Trace(rel, c.inp, c.out, c.offsets, keys, int(bt), spec.name, str(p), c.extras, float(t0) * scale)
        if limit is not None and seen >= limit:
            break
    if t0 is None:
        raise TraceError("the trace is empty (no requests)", "give a trace with at least one request", path=p)


def _spec_of(p: Path, fmt: str, fields) -> tuple[TraceFormat, dict, "tracebin.Reader | None"]:
    """The format, field mapping and (for a .kvbt file) the open binary of trace ``p``."""
    if not tracebin.is_binary(p):
        spec = get_format(detect_format(p) if fmt == "auto" else fmt)
        return spec, _resolve_fields(spec, fields), None
    r = open_binary_trace(p)
    meta = r.meta
    spec = get_format(meta["format"])
    if fmt != "auto" and get_format(fmt).name != spec.name:
        raise UsageError(f"{p} is a binary {spec.name} trace, not {fmt}", "drop --format (it is stored in the file)")
    d = meta.get("defaults", {})
    spec = replace(spec, block_tokens=d.get("block_tokens") or spec.block_tokens,
                   time_unit=d.get("time_unit") or spec.time_unit,
                   chain=spec.chain if d.get("chain") is None else bool(d["chain"]))
    return spec, dict(meta["fields"]), r


def open_binary_trace(p: Path) -> "tracebin.Reader":
    """A .kvbt file given by the user: a damaged one is a one-line error (there is no source to rebuild it from)."""
    try:
        return tracebin.Reader(p)
    except tracebin.CorruptBinary as e:
        raise TraceError(f"damaged binary trace: {e}", "convert the source trace again (kvbench trace convert)",
                         path=p) from None


def _columns(raw: _Raw, p: Path, fmap: Mapping[str, str | None]) -> tracebin.Columns:
    """Validate and convert one parsed batch to numpy columns (errors name the line and field)."""
    ts = _times(raw.ts, raw.lines, p, fmap["timestamp"])
    inp = _counts(raw.inp, raw.lines, p, fmap["input_length"])
    out = _counts(raw.out, raw.lines, p, fmap["output_length"]) if fmap["output_length"] else \
        np.zeros(len(raw.lines), dtype=np.int64)
    ids, offsets = (raw.flat, raw.offsets) if raw.flat is not None else _block_ids(raw.ids, raw.lines, p,
                                                                                      fmap["hash_ids"])
    extras = {k: np.array([int(x) if _is_int(x) else -1 for x in v], dtype=np.int64) for k, v in raw.extras.items()}
    return tracebin.Columns(np.asarray(raw.lines, dtype=np.int64), ts, inp, out, ids, offsets, extras)


def _column_batches(p: Path, spec: TraceFormat, fmap: dict, batch: int) -> Iterator[tracebin.Columns]:
    """Column batches of a text trace: from its cached binary when that is current, else parsed (and cached
    once the whole file has parsed cleanly)."""
    cached = tracebin.open_cached(p, spec.name, fmap)
    if cached is not None:
        yield from cached.batches(batch)
        return
    writer = tracebin.cache_writer(p, spec.name, fmap, {"block_tokens": spec.block_tokens,
                                                         "time_unit": spec.time_unit, "chain": spec.chain})
    complete = False
    try:
        for raw in _BATCH_READERS[spec.kind](p, spec, fmap, batch):
            c = _columns(raw, p, fmap)
            if writer is not None:
                try:
                    writer.add(c)
                except OSError:          # cache folder full or gone: the read goes on without it
                    writer.abort()
                    writer = None
            yield c
        complete = True
    finally:
        if writer is not None:
            if complete:
                try:
                    writer.finish()
                except OSError:
                    writer.abort()
            else:
                writer.abort()


def convert_trace(path: str | Path, dest: str | Path, fmt: str = "auto", *, block_tokens: int | None = None,
                  time_unit: str | None = None, fields: Mapping[str, str | None] | None = None,
                  chain: bool | None = None) -> dict:
    """Write trace ``path`` in the binary columnar form (``.kvbt``) at ``dest``; returns its header.

    The file keeps the trace's own values (times in the file's unit, ids as written, file order) and the
    format, field mapping, block size, time unit and chaining it was read with, so reading it back gives the same
    ``Trace`` as reading the source with these options. An existing ``dest`` is replaced only if kvbench wrote it.
    """
    p = resolve_trace(path)
    if not isinstance(p, Path):
        raise UsageError(f"{path} is a generated stream, not a file", "convert a trace file (kvbench trace gen "
                         "writes one), or read the gen: stream directly")
    out = Path(dest)                # what may be replaced: the output guard's rule (PendingOutput below)
    if out.exists() and out.resolve() == p.resolve():
        raise UsageError("the output is the input", "give another output path")
    if not out.parent.is_dir():
        raise UsageError(f"no such folder: {out.parent}", "create it first or give another output path")
    spec, fmap, binary = _spec_of(p, fmt, fields)
    bt = block_tokens if block_tokens is not None else spec.block_tokens
    unit = time_unit or spec.time_unit
    # validates the options exactly as a read does (one request is enough)
    next(iter_trace(p, fmt, 1, block_tokens=block_tokens, time_unit=time_unit, fields=fields, chain=chain,
                    order="keep"))
    meta = {"source": tracebin.source_key(p), "format": spec.name, "fields": fmap,
            "defaults": {"block_tokens": int(bt), "time_unit": unit,
                         "chain": spec.chain if chain is None else bool(chain)}}
    from kvbench.engine.safety import PendingOutput

    pending = PendingOutput(out)             # the output guard: appears only complete
    w = tracebin.Writer(pending.tmp, meta)
    try:
        for c in (binary.batches(1 << 18) if binary is not None else _column_batches(p, spec, fmap, 1 << 18)):
            w.add(c)
        if not w.ok:
            raise TraceError("timestamps mix integers and fractions across the file, which the binary form "
                             "cannot hold exactly", "write every timestamp in one type", path=p,
                             field=fmap["timestamp"])
        if w.finish() is not None:
            pending.commit()
    except OSError as e:
        raise TraceError(f"cannot write {out}: {e.strerror}", "check the folder and free space") from None
    finally:
        w.abort()
        pending.discard()
    return tracebin.Reader(out, check=False).meta


def _check_order(ts, lines, prev_t, prev_line, path, field_name, scale):
    full = ts if prev_t is None else np.concatenate([[prev_t], ts])
    bad = np.flatnonzero(np.diff(full) < 0)
    if bad.size:
        i = int(bad[0]) + (0 if prev_t is None else -1)
        line = lines[i + 1]
        before = full[bad[0]]
        raise TraceError(f"out-of-order timestamp: {float(ts[i + 1] * scale):.6g} s is earlier than the previous "
                         f"request's {float(before * scale):.6g} s ({bad.size} such requests in this batch)",
                         "pass --sort to sort the requests by arrival time, or fix the file's order",
                         path=path, line=line, field=field_name)


def _sorted_batches(path, fmt, batch_requests, **kw) -> Iterator[Trace]:
    whole = Trace.concat(list(iter_trace(path, fmt, 1 << 20, order="keep", **kw)))
    rows = np.argsort(whole.timestamp_s, kind="stable")
    t = whole.take(rows)
    shift = float(t.timestamp_s[0]) if t.n_requests else 0.0
    t = replace(t, timestamp_s=t.timestamp_s - shift, t0=t.t0 + shift)
    for a in range(0, t.n_requests, batch_requests):
        yield t.slice(a, a + batch_requests)


def read_trace(path: str | Path, fmt: str = "auto", *, compact: bool = False, **opts) -> Trace:
    """Read a whole trace into one ``Trace`` (options as ``iter_trace``).

    ``compact``: a key-sampled stream (``gen:...,sample=F``) drops the requests the sample left empty as it is
    read, keeping the whole stream's totals (:func:`kvbench.stream.sampling.compact`), so a whole-trace analysis
    holds memory in proportion to the sample; other traces are read whole. A live line (kvbench.progress) shows
    the reading on a terminal."""
    from kvbench.progress import trace_batches

    src = resolve_trace(path)
    batches = trace_batches(iter_trace(path, fmt, opts.pop("batch_requests", 1 << 18), **opts),
                            f"reading {Path(str(src)).name}", path=None if isinstance(src, str) else src)
    if not compact:
        return Trace.concat(list(batches))
    from kvbench.stream.sampling import FULL_BLOCKS, compact_batches

    first = next(batches, None)
    if first is None:
        return Trace.concat([])
    if FULL_BLOCKS not in first.extras:
        return Trace.concat([first, *batches])
    import itertools

    return compact_batches(itertools.chain([first], batches))


def parse_field_mapping(pairs: list[str] | tuple[str, ...]) -> dict[str, str | None]:
    """``["timestamp=ts", "hash_ids=blocks"]`` -> mapping (an empty FIELD unmaps a field); a bad pair is a one-line
    usage error naming --field and the name."""
    from kvbench.spec.fields import parse_fields

    fields = parse_fields(pairs, option="--field", known=CANONICAL, allow_empty=True, error=UsageError,
                          fix="write NAME=FIELD, e.g. --field timestamp=ts")
    return {k: v or None for k, v in fields.items()}
