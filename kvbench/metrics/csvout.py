"""Columns of numpy arrays to CSV text, compiled: the per-request and per-I/O files of a run at trace scale.

A replay writes one ``requests.csv`` row per request and an iolog line per I/O; through pandas' ``to_csv`` that
was ~7 us a row, four times the tier simulation's time per request on a chat trace, so at trace scale (a week:
millions of requests) the file, not the simulation, set a dry run's pace. Here the text is laid out by a numba
kernel in one pass per chunk of rows.

The text is what pandas' ``to_csv(index=False, float_format="%.<d>f")`` writes for the same columns, byte for
byte (the tests compare them): integers in decimal; floats rounded as C's ``%.<d>f`` rounds (the exact binary
value, half to even), ``-`` kept on negative values that round to zero, NaN as an empty field, infinities as
``inf`` / ``-inf``; booleans as ``True`` / ``False``; strings (object or unicode columns) as they are, None as an
empty field (``""`` when it is the row's only field, as Python's csv module writes it). The
rounding is exact: each value is scaled by 10^d in floating point, and the few whose product lies within two
ulps of a half (or beyond 2^52) are rounded again from their exact decimal expansion.

Strings are written without quoting, so a string holding the separator, a quote or a line break is refused
(ValueError): none of kvbench's files has one. The text buffer holds every row at its widest and no more, and
the kernel checks its bounds: a width reckoned short is an IndexError, never a write past the buffer.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal

import numpy as np
from numba import njit

# column kinds
K_INT, K_UINT, K_FLOAT, K_STR = range(4)
# per float value: how it prints
F_NUM, F_NAN, F_PINF, F_NINF = range(4)
CHUNK_ROWS = 1 << 16            # rows laid out per kernel call (bounds the text buffer)
# the widest integer field: a sign and 19 digits (int64), or 20 digits (uint64); a float's rounded value is below
# 2^63 (larger columns are printed by Python), so it takes a sign, 19 digits and the point at most
INT_WIDTH = 20
_INF = (b"inf", b"-inf")


@njit(cache=True, nogil=True, boundscheck=True)
def _put_uint(buf, p, v):
    """Decimal digits of v >= 0 (uint64) at buf[p:]; returns the end."""
    if v == 0:
        buf[p] = 48
        return p + 1
    n = 0
    x = v
    while x > 0:
        x //= np.uint64(10)
        n += 1
    q = p + n
    x = v
    while x > 0:
        q -= 1
        buf[q] = 48 + np.uint8(x % np.uint64(10))
        x //= np.uint64(10)
    return p + n


@njit(cache=True, nogil=True)
def _empty(kind, fstate, code, stroff):
    """The field prints nothing (a NaN, an empty string)."""
    if kind == K_FLOAT:
        return fstate == F_NAN
    if kind == K_STR:
        return stroff[1, code + 1] == stroff[1, code]
    return False


@njit(cache=True, nogil=True, boundscheck=True)
def _layout(kinds, ints, fstate, neg, decimals, codes, strbytes, stroff, sep, buf):
    """Write rows of the columns (kind per column; ints and codes are (ncol, n) by column, unused rows of a
    kind left zero) into buf; returns the bytes written. Floats arrive as their rounded integer (x * 10^d),
    with ``fstate`` (F_*) and ``neg`` (the sign to print)."""
    ncol, n = kinds.shape[0], ints.shape[1]
    p = 0
    for r in range(n):
        if ncol == 1 and _empty(kinds[0], fstate[0, r], codes[0, r], stroff):
            buf[p] = 34                # a lone empty field is quoted (""): an empty line would read as no row
            buf[p + 1] = 34
            buf[p + 2] = 10
            p += 3
            continue
        for c in range(ncol):
            if c:
                buf[p] = sep
                p += 1
            k = kinds[c]
            if k == K_INT:
                v = ints[c, r]
                if v < 0:
                    buf[p] = 45
                    p += 1
                    p = _put_uint(buf, p, np.uint64(0) - np.uint64(v))     # two's complement: |INT64_MIN| too
                else:
                    p = _put_uint(buf, p, np.uint64(v))
            elif k == K_UINT:
                p = _put_uint(buf, p, np.uint64(ints[c, r]))
            elif k == K_FLOAT:
                s = fstate[c, r]
                if s == F_NAN:
                    continue
                if s == F_PINF or s == F_NINF:
                    j = 0 if s == F_PINF else 1
                    for b in range(stroff[0, j], stroff[0, j + 1]):
                        buf[p] = strbytes[0, b]
                        p += 1
                    continue
                if neg[c, r]:
                    buf[p] = 45
                    p += 1
                v = np.uint64(ints[c, r])
                d = decimals[c]
                if d == 0:
                    p = _put_uint(buf, p, v)
                    continue
                scale = np.uint64(1)
                for _ in range(d):
                    scale *= np.uint64(10)
                p = _put_uint(buf, p, v // scale)
                buf[p] = 46
                p += 1
                f = v % scale
                for q in range(p + d - 1, p - 1, -1):
                    buf[q] = 48 + np.uint8(f % np.uint64(10))
                    f //= np.uint64(10)
                p += d
            else:
                i = codes[c, r]
                for b in range(stroff[c + 1, i], stroff[c + 1, i + 1]):
                    buf[p] = strbytes[c + 1, b]
                    p += 1
        buf[p] = 10
        p += 1
    return p


def _exact_round(x: np.ndarray, d: int) -> np.ndarray:
    """|x| x 10^d rounded half to even from the exact binary value (Python's decimal: a few values only)."""
    q = Decimal(1)
    return np.array([int((abs(Decimal(float(v))).scaleb(d)).quantize(q, rounding=ROUND_HALF_EVEN)) for v in x],
                    dtype=np.uint64)


def _round_floats(x: np.ndarray, d: int):
    """(|x| x 10^d rounded as %.<d>f rounds, as uint64; F_* state; sign to print) of a float column."""
    x = np.asarray(x, dtype=np.float64)
    state = np.full(x.shape, F_NUM, dtype=np.int8)
    nan, inf = np.isnan(x), np.isinf(x)
    state[nan] = F_NAN
    state[inf & (x > 0)] = F_PINF
    state[inf & (x < 0)] = F_NINF
    ok = state == F_NUM
    a = np.where(ok, np.abs(x), 0.0)
    v = a * float(10 ** d)
    r = np.rint(v)
    # the product is within an ulp of the exact |x| 10^d: only a product within two ulps of a half can round the
    # other way than the exact value does (from 2^52 on, where an ulp is 1 or more, that is every product)
    amb = ok & (np.abs(v - np.floor(v) - 0.5) <= 2 * np.spacing(v))
    out = np.zeros(x.shape, dtype=np.uint64)
    out[ok & ~amb] = r[ok & ~amb].astype(np.uint64)
    if amb.any():
        out[amb] = _exact_round(x[amb], d)
    return out, state, ok & np.signbit(x)


def _too_large(x: np.ndarray, d: int) -> bool:
    """Some finite value of the float column x is beyond what the kernel's uint64 holds once scaled by 10^d."""
    a = np.abs(x[np.isfinite(x)])
    return bool(a.size) and float(a.max()) * 10.0 ** d >= 2.0 ** 63


def _formatted(x: np.ndarray, d: int) -> np.ndarray:
    """A float column printed by Python (the rare column with a value too large for the kernel)."""
    return np.array(["" if np.isnan(v) else f"{v:.{d}f}" for v in x.tolist()], dtype=object)


@dataclass(frozen=True)
class Labels:
    """A column of names given as codes into ``names`` (a plan's ops, a target's file name): written without
    the search for distinct values a string column needs."""

    codes: np.ndarray
    names: tuple

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, s: slice) -> "Labels":
        return Labels(self.codes[s], self.names)


def _decimals(decimals, name) -> int:
    d = int(decimals.get(name, 4) if isinstance(decimals, dict) else decimals)
    if not 0 <= d <= 18:
        raise ValueError(f"decimals {d} for column {name!r} must be in 0..18")
    return d


def _strings(col, sep: int, check: bool = True) -> tuple[np.ndarray, list[bytes]]:
    """Codes and the distinct values' bytes of a string (or boolean) column; refuses what needs quoting."""
    a = np.asarray(col)
    if a.dtype == np.bool_:
        return a.astype(np.int64), [b"False", b"True"]
    if a.dtype == object:          # None and NaN print as empty fields, as pandas' na_rep
        a = np.array(["" if v is None or (isinstance(v, float) and v != v) else str(v) for v in a.tolist()],
                     dtype=object)
    uniq, codes = np.unique(a.astype(str), return_inverse=True)
    out = [u.encode() for u in uniq.tolist()]
    if check:
        _check_quoting(out, sep)
    return codes.astype(np.int64), out


def _check_quoting(values: list[bytes], sep: int) -> None:
    """Refuse a value pandas would quote: one holding the separator, a quote or a line break."""
    for s in values:
        if any(ch in s for ch in (bytes([sep]), b'"', b"\n", b"\r")):
            raise ValueError(f"CSV value {s!r} would need quoting")


def format_csv(columns: dict, *, decimals: int | dict = 4, header: bool = True, sep: str = ",") -> bytes:
    """The CSV text of ``columns`` (name -> 1-d array, all one length), as pandas ``to_csv(index=False,
    float_format=f"%.{decimals}f")`` writes it. ``decimals``: one for every float column, or per column."""
    names = list(columns)
    arrays = [v if isinstance(v, Labels) else np.asarray(v) for v in columns.values()]
    n = len(arrays[0]) if arrays else 0
    if any((not isinstance(a, Labels) and a.ndim != 1) or len(a) != n for a in arrays):
        raise ValueError("CSV columns must be 1-d and of one length")
    if len(sep) != 1:
        raise ValueError(f"separator {sep!r} must be one character")
    head = (sep.join(names) + "\n").encode() if header else b""
    if n == 0 or not names:
        return head
    parts = [head]
    for lo in range(0, n, CHUNK_ROWS):
        parts.append(_chunk([a[lo:lo + CHUNK_ROWS] for a in arrays], names, decimals, ord(sep)))
    return b"".join(parts)


def _chunk(arrays, names, decimals, sep) -> bytes:
    ncol, n = len(arrays), len(arrays[0])
    kinds = np.zeros(ncol, dtype=np.int64)
    ints = np.zeros((ncol, n), dtype=np.int64)
    fstate = np.zeros((ncol, n), dtype=np.int8)
    neg = np.zeros((ncol, n), dtype=np.bool_)
    dec = np.zeros(ncol, dtype=np.int64)
    codes = np.zeros((ncol, n), dtype=np.int64)
    strs: list[list[bytes]] = [list(_INF)]
    width = ncol + 2 * (ncol == 1)                          # the separators and the line break; a lone "" field
    for c, (a, name) in enumerate(zip(arrays, names)):
        if isinstance(a, Labels):
            vals = [str(v).encode() for v in a.names]
            _check_quoting(vals, sep)
            codes[c] = np.asarray(a.codes, dtype=np.int64)
            if n and not (0 <= codes[c].min() and codes[c].max() < len(vals)):
                raise ValueError(f"column {name!r}: a code outside its {len(vals)} names")
            kinds[c] = K_STR
            strs.append(vals)
            width += max((len(s) for s in vals), default=0)
            continue
        kind = a.dtype.kind
        if kind in "iu" and a.dtype != np.bool_:
            if kind == "u" and a.dtype.itemsize == 8:
                kinds[c] = K_UINT
                ints[c] = a.view(np.int64)
            else:
                kinds[c] = K_INT
                ints[c] = a.astype(np.int64)
            width += INT_WIDTH
            strs.append([])
        elif kind == "f" and _too_large(a, _decimals(decimals, name)):
            kinds[c] = K_STR
            codes[c], vals = _strings(_formatted(a, _decimals(decimals, name)), sep, check=False)
            strs.append(vals)
            width += max((len(s) for s in vals), default=0)
        elif kind == "f":
            d = _decimals(decimals, name)
            kinds[c], dec[c] = K_FLOAT, d
            r, fstate[c], neg[c] = _round_floats(a, int(d))
            ints[c] = r.view(np.int64)
            width += INT_WIDTH + (d > 0)
            strs.append([])
        elif kind in "bOUS":
            kinds[c] = K_STR
            codes[c], vals = _strings(a, sep)
            strs.append(vals)
            width += max((len(s) for s in vals), default=0)
        else:
            raise ValueError(f"column {name!r} of dtype {a.dtype} has no CSV form here")
    longest = max(sum(len(s) for s in v) for v in strs)
    most = max(len(v) for v in strs)
    strbytes = np.zeros((len(strs), max(1, longest)), dtype=np.uint8)
    stroff = np.zeros((len(strs), most + 1), dtype=np.int64)
    for i, vals in enumerate(strs):
        pos = 0
        for j, s in enumerate(vals):
            strbytes[i, pos:pos + len(s)] = np.frombuffer(s, dtype=np.uint8)
            pos += len(s)
            stroff[i, j + 1] = pos
    buf = np.empty(n * width, dtype=np.uint8)              # rows at their widest fill it exactly
    end = _layout(kinds, ints, fstate, neg, dec, codes, strbytes, stroff, np.uint8(sep), buf)
    return buf[:end].tobytes()


def write_csv(path_or_file, columns: dict, *, decimals: int | dict = 4, header: bool = True, sep: str = ",",
              mode: str = "w") -> None:
    """Write (``mode`` "w") or append ("a") ``columns`` as :func:`format_csv` lays them out, to a path or an
    open binary or text file."""
    text = format_csv(columns, decimals=decimals, header=header, sep=sep)
    if hasattr(path_or_file, "write"):
        path_or_file.write(text.decode() if isinstance(path_or_file, io.TextIOBase) else text)
        return
    with open(path_or_file, mode + "b") as fh:
        fh.write(text)
