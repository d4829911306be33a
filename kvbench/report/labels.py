"""Human labels for the report (pure): data keys and column names become words with units, and log axes get
ticks whose every label carries its magnitude. A reader who did not run kvbench never sees ``_bytes_per_s``.
"""

from __future__ import annotations

import math
import re

#: whole keys with a fixed wording (a column, a histogram or a summary field)
_WHOLE = {
    "bw_bytes_per_s": "bandwidth", "bytes_per_s": "bandwidth", "iops": "IOPS", "ios": "I/Os",
    "load_time": "per-request load time", "full_load_time": "per-request load time (full-size estimate)",
    "issue_lag": "issue lag (achieved - intended)", "cpu_percent": "CPU use (%)", "latency": "latency",
    "lat": "latency", "fetch": "Engram fetch per step",
}
#: suffix -> words, longest first
_SUFFIX = (("_bw_bytes_per_s", " bandwidth"), ("_bytes_per_s", " bandwidth"), ("_per_s", " per second"),
           ("_iops", " IOPS"), ("_bytes", ""), ("_lat_us", " latency"), ("_lat", " latency"), ("_us", ""),
           ("_ms", ""), ("_s", ""))
_WORDS = {"bw": "bandwidth", "iops": "IOPS", "lat": "latency", "dwpd": "DWPD", "waf": "WAF", "ttft": "TTFT",
          "qd": "queue depth", "bs": "block size", "rw": "pattern", "pct": "%", "app": "application"}


def human(key: str) -> str:
    """``l3_read_bw_bytes_per_s`` -> ``L3 read bandwidth``; ``target0.read`` -> ``target 0 read``;
    ``tiers.l3.read_lat`` -> ``L3 read latency``; ``load_time`` -> ``per-request load time``."""
    k = str(key).strip()
    if k.startswith("tiers."):
        k = k[len("tiers."):]
    if k in _WHOLE:
        return _WHOLE[k]
    for suf, words in _SUFFIX:
        if k.endswith(suf) and len(k) > len(suf):
            k = k[: -len(suf)] + words.replace(" ", "\0")
            break
    out = []
    for tok in re.split(r"[._\s]+", k.replace("\0", " ")):
        if not tok:
            continue
        m = re.fullmatch(r"(l[1-4])", tok)
        if m:
            out.append(tok.upper())
            continue
        m = re.fullmatch(r"([a-z]+)(\d+)", tok)
        if m and m.group(1) in ("target", "worker"):
            out.append(f"{m.group(1)} {m.group(2)}")
            continue
        out.append(_WHOLE.get(tok) if tok in ("load_time",) else _WORDS.get(tok, tok))
    return " ".join(out) or str(key)


def plain_number(v: float, digits: int = 4) -> str:
    """A number for a table: thousands separators for integers, ``digits`` significant digits otherwise, and
    never exponent notation (``51,840`` not ``5.184e+04``; ``0.0001234`` not ``1.234e-04``)."""
    f = float(v)
    if not math.isfinite(f):
        return "—"
    if f == int(f) and abs(f) < 1e18:
        return f"{int(f):,}"
    if abs(f) >= 10 ** (digits - 1):
        return f"{f:,.0f}"
    if f == 0:
        return "0"
    decimals = max(0, digits - 1 - int(math.floor(math.log10(abs(f)))))
    s = f"{f:,.{decimals}f}"
    return s.rstrip("0").rstrip(".") if "." in s else s


def log_ticks(lo: float, hi: float, label) -> tuple[list[float], list[str]]:
    """Tick values on a log axis over [lo, hi] and their labels, each label a full value with its unit
    (``label(v)``): one tick per decade, with 2x and 5x ticks (also labelled in full) when the axis spans
    fewer than three decades. Empty when the range is not positive."""
    if not (lo > 0 and hi > 0 and math.isfinite(lo) and math.isfinite(hi)):
        return [], []
    if hi < lo:
        lo, hi = hi, lo
    span = math.log10(hi / lo)
    mult = (1, 1.5, 2, 3, 5, 7) if span < 0.7 else (1, 2, 5) if span < 3 else (1,)
    lo, hi = lo / 2, hi * 2             # plotly pads its autorange: offer a tick beyond each end (it shows those in view)
    e0, e1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    step = max(1, (e1 - e0) // 8)
    vals = [m * 10.0 ** e for e in range(e0, e1 + 1, step) for m in mult]
    vals = [v for v in vals if lo <= v <= hi] or [10.0 ** e0, 10.0 ** e1]
    return vals, [label(v) for v in vals]


def us_label(v: float) -> str:
    """Microseconds as a duration with its unit (``40 us``, ``9.1 ms``, ``1.2 s``)."""
    from kvbench.units import format_duration

    return format_duration(v * 1e-6)


def ms_label(v: float) -> str:
    from kvbench.units import format_duration

    return format_duration(v * 1e-3)


def count_label(v: float) -> str:
    return plain_number(v, 3)
