"""Parse and format sizes, durations and rates (pure).

Sizes: ``4096``, ``4k``/``4K`` (fio style, binary), ``4KiB``, ``64GiB`` (binary), ``4KB``, ``10GB``.
A lowercase ``b`` means bits and is refused (``4kb``), as is a space inside (``4 KiB``): a benchmark that
silently reads 4kb as 4000 or 4096 bytes measures the wrong thing.

The one rule for ``KB``/``MB``/``GB``/``TB`` (``parse_size``'s ``kb_base``): an *I/O size* (a block, chunk,
page, segment or erase unit: ``--bs``, ``--chunk``, ...) reads them 1024-based, as fio does with its default
``kb_base=1024`` (``--bs 4KB`` is 4,096 bytes, not 4,000 refused on 512 B sectors); a *capacity* (a tier, a
drive, a region: ``--l3-capacity 7.68TB``, ``--size``) reads them as SI, as drives are sold. ``k``/``K`` and
``KiB`` are 1024-based in both (fio's compatibility mode reads ``4KiB`` as 4,000; kvbench keeps IEC).
Durations: ``250us``, ``5ms``, ``10s``, ``10m``, ``1h``, ``2d``, ``1w``; a bare number is seconds.
Rates: ``10GB/s``, ``3.2GiB/s``, ``500MB/s``; network links in decimal bits, ``400Gb/s`` (= 50GB/s), ``100Mb/s``.
"""

from __future__ import annotations

import math
import re

from kvbench.errors import UnitError

_BINARY = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50, "e": 1 << 60}
_SIZE_SUFFIX = {
    "": 1,
    "B": 1,
    **{p.upper(): v for p, v in _BINARY.items() if p},          # 4K, 4M (fio style)
    **{p: v for p, v in _BINARY.items() if p},                  # 4k, 4m
    **{p.upper() + "iB": v for p, v in _BINARY.items() if p},   # 4KiB
    **{p.upper() + "IB": v for p, v in _BINARY.items() if p},   # 4KIB
    "kB": 10**3, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "PB": 10**15, "EB": 10**18,
}
_SI = frozenset({"kB", "KB", "MB", "GB", "TB", "PB", "EB"})                       # the kb_base-dependent units
_LINK_BITS = {"b": 1, "kb": 10**3, "Kb": 10**3, "Mb": 10**6, "Gb": 10**9, "Tb": 10**12}     # rates only
_NUM = r"([0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)"
_SIZE_RE = re.compile(rf"^{_NUM}([A-Za-z]*)$")

_DURATION_SUFFIX = {
    "ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "": 1.0, "sec": 1.0,
    "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0,
}
_DURATION_RE = re.compile(rf"^{_NUM}([a-zµ]*)$")


def parse_size(text: str | int, *, what: str = "size", kb_base: int = 1000) -> int:
    """Parse a byte size; returns an int. ``kb_base=1024`` reads KB/MB/GB/TB as 1024-based (I/O sizes, like
    fio's default), ``1000`` as SI (capacities); see the module docstring. Raises UnitError naming ``what``."""
    if kb_base not in (1000, 1024):
        raise ValueError(f"kb_base must be 1000 or 1024, got {kb_base}")
    if isinstance(text, bool):
        raise UnitError(f"{what}: expected a size, got {text!r}", "write e.g. 4096, 4k, 4KiB or 64GiB")
    if isinstance(text, int):
        if text < 0:
            raise UnitError(f"{what} must not be negative: {text}", "give a size >= 0")
        return text
    s = str(text).strip()
    m = _SIZE_RE.match(s)
    if not m:
        hint = "no space between number and unit" if " " in s else "write e.g. 4096, 4k, 4KiB, 64GiB or 10GB"
        raise UnitError(f"{what}: cannot parse size {text!r}", hint)
    number, suffix = m.groups()
    if suffix not in _SIZE_SUFFIX:
        if suffix.endswith("b") and suffix[:-1].lower() in _BINARY:
            raise UnitError(f"{what}: {text!r} uses 'b' (bits)",
                            f"write {number}{suffix[:-1].upper()}iB (binary) or {number}{suffix[:-1].upper()}B (decimal)")
        raise UnitError(f"{what}: unknown size unit {suffix!r} in {text!r}", "use k/KiB/MiB/GiB/TiB or KB/MB/GB/TB")
    value = float(number) * (_BINARY[suffix[0].lower()] if kb_base == 1024 and suffix in _SI else _SIZE_SUFFIX[suffix])
    if not math.isfinite(value) or value > 2**63:
        raise UnitError(f"{what}: {text!r} is too large", "give a size below 8 EiB")
    if abs(value - round(value)) > 1e-6:
        raise UnitError(f"{what}: {text!r} is not a whole number of bytes", "give a whole number of bytes")
    return int(round(value))


def parse_duration(text: str | float | int, *, what: str = "duration") -> float:
    """Parse a duration; returns seconds as float."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        if text < 0 or not math.isfinite(text):
            raise UnitError(f"{what} must be a finite duration >= 0: {text}", "give e.g. 10s, 250us or 1h")
        return float(text)
    s = str(text).strip()
    m = _DURATION_RE.match(s)
    if not m or m.group(2) not in _DURATION_SUFFIX:
        raise UnitError(f"{what}: cannot parse duration {text!r}", "write e.g. 250us, 5ms, 10s, 10m, 1h, 2d")
    value = float(m.group(1)) * _DURATION_SUFFIX[m.group(2)]
    if not math.isfinite(value):
        raise UnitError(f"{what}: {text!r} is too large", "give a finite duration")
    return value


def is_bare_number(text) -> bool:
    """True for a duration written without a unit ("10", "1.5"): parse_duration reads it as seconds."""
    m = _DURATION_RE.match(str(text).strip())
    return bool(m) and m.group(2) == ""


def parse_rate(text: str | float | int, *, what: str = "rate", kb_base: int = 1000) -> float:
    """Parse a bandwidth like ``10GB/s`` or ``3GiB/s``; returns bytes per second (``kb_base`` as in
    :func:`parse_size`: 1024 reads ``100MB/s`` as fio's ``rate=100m``)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    s = str(text).strip()
    if not s.endswith("/s"):
        raise UnitError(f"{what}: cannot parse rate {text!r}", "write e.g. 10GB/s or 3.2GiB/s")
    size_part = s[:-2]
    m = _SIZE_RE.match(size_part)
    if m and m.group(2) in _LINK_BITS:                      # a link's rate: decimal bits per second
        return float(m.group(1)) * _LINK_BITS[m.group(2)] / 8.0
    if not m or m.group(2) not in _SIZE_SUFFIX:
        raise UnitError(f"{what}: cannot parse rate {text!r}", "write e.g. 10GB/s, 500MB/s or 3.2GiB/s")
    unit = m.group(2)
    return float(m.group(1)) * (_BINARY[unit[0].lower()] if kb_base == 1024 and unit in _SI else _SIZE_SUFFIX[unit])


# a figure the inputs do not state, in every view (terminal, report, answer): a word, never "None" nor a 0
MISSING = "n/a"
# a lifetime that no write spends (nothing written: a store that holds every block it is asked for)
UNBOUNDED_LIFETIME = "no writes: unbounded"


def format_optional(v, missing: str = MISSING) -> str:
    """``str(v)``, or ``missing`` for None: a label or figure that may be absent, never the string "None"."""
    return missing if v is None else str(v)


def format_bytes(n: float, *, binary: bool = True, digits: int = 3) -> str:
    """Human-readable byte count: ``format_bytes(65536) == '64 KiB'``; None (not stated) is ``MISSING``."""
    if n is None:
        return MISSING
    if not math.isfinite(n):
        return str(n)
    base, units = (1024.0, ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]) if binary else \
        (1000.0, ["B", "KB", "MB", "GB", "TB", "PB", "EB"])
    v, i = float(n), 0
    while abs(v) >= base and i < len(units) - 1:
        v /= base
        i += 1
    return f"{v:.{digits}g} {units[i]}"


def format_rate(bytes_per_s: float) -> str:
    """``format_rate(2e9) == '2 GB/s'`` (decimal, as drives are rated); None (not stated) is ``MISSING``."""
    return MISSING if bytes_per_s is None else format_bytes(bytes_per_s, binary=False) + "/s"


def format_duration(seconds: float, digits: int = 3) -> str:
    """``format_duration(0.00025) == '250 us'``; None (not stated) is ``MISSING``."""
    if seconds is None:
        return MISSING
    if not math.isfinite(seconds):
        return str(seconds)
    a = abs(seconds)
    for limit, scale, unit in ((1e-6, 1e9, "ns"), (1e-3, 1e6, "us"), (1.0, 1e3, "ms"), (120.0, 1.0, "s"),
                               (7200.0, 1 / 60, "min"), (172800.0, 1 / 3600, "h")):
        if a < limit:
            return f"{seconds * scale:.{digits}g} {unit}"
    return f"{seconds / 86400:.{digits}g} d"


NEVER_REWRITTEN = "never rewritten (no writes)"


def format_residence(seconds: float | None, write_bytes_per_s: float | None = None) -> str:
    """How long KV stays before it is rewritten: ``'3.07 h'``; a store nothing is written to (infinite, or not
    stated while its stated write rate is 0) ``NEVER_REWRITTEN``, never "inf" nor a missing mark; None with no
    such rate ``MISSING``."""
    if seconds == math.inf or (seconds is None and write_bytes_per_s is not None and write_bytes_per_s == 0):
        return NEVER_REWRITTEN
    return format_duration(seconds)


def format_years(years: float | None, digits: int = 3) -> str:
    """A lifetime: ``'4.2 years'``; infinite (nothing written) ``UNBOUNDED_LIFETIME``, never "inf years";
    None (not stated, e.g. no rating) ``MISSING``."""
    if years is None:
        return MISSING
    if years == math.inf:
        return UNBOUNDED_LIFETIME
    return f"{years:.{digits}g} years"


def format_lasts(years: float | None) -> str:
    """How long a drive lasts, after its name: ``'lasts 5.4 years'``; ``'lifetime: no writes: unbounded'``."""
    return f"lasts {format_years(years)}" if years is not None and math.isfinite(years) else \
        f"lifetime: {format_years(years)}"
