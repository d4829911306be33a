"""Read a results folder (``results/<run>/``) into one typed record the figure builders share.

A run folder holds ``run.json`` (command, config, environment), ``summary.json`` (always ``kind``, ``status``,
``run_dir``), and, depending on the kind, ``timeseries.csv``, ``histograms.json``, ``requests.csv`` and the
analyses a job attached (``mrc.json``, ``plan.json``, ``check.json``, ``retention.json``, ``qualify.json``).
A job folder (``kvbench run``, ``kvbench qualify``) lists the folders of its steps under ``summary["parts"]``;
their data is read too, so one report shows the whole job. Everything here is tolerant of missing pieces: a
killed run still reports what it wrote, and the report marks it partial. The JSON files are read through
:func:`kvbench.metrics.results.read_run`, the one reader of a run folder (schema versions checked, older
layouts upgraded there); the CSVs and histograms are added here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from kvbench.errors import UsageError
from kvbench.metrics.results import RunFolder, read_json, read_run

#: percentile keys in the order of a tail axis
TAIL_KEYS = ("p50", "p90", "p99", "p99.9", "p99.99")
_UNIT_SCALE_US = {"_ns": 1e-3, "_us": 1.0, "_ms": 1e3, "_s": 1e6}


@dataclass(frozen=True)
class RunData:
    """Everything a report shows about one run (and the step folders it lists)."""

    path: Path
    run: dict
    summary: dict
    timeseries: pd.DataFrame | None = None
    histograms: dict = field(default_factory=dict)      # name -> raw histogram dict (histograms.json)
    requests: pd.DataFrame | None = None
    analyses: dict = field(default_factory=dict)        # "plan" -> plan.json, ...
    parts: dict = field(default_factory=dict)           # step name -> RunData

    @property
    def kind(self) -> str:
        return str(self.summary.get("kind", "unknown"))      # the reader gives a summary without one run.json's

    @property
    def status(self) -> str:
        return str(self.summary.get("status") or "unknown")

    @property
    def partial(self) -> bool:
        """True unless the run says it completed (partial, interrupted, failed, or no summary at all)."""
        return self.status != "complete"

    @property
    def label(self) -> str:
        """A short name for legends: the folder name, plus the target's device model when known."""
        return self.path.name

    def find(self, attr: str):
        """The first non-empty ``attr`` among this run and its parts (own data wins)."""
        for rd in (self, *self.parts.values()):
            v = getattr(rd, attr)
            if v is not None and not (hasattr(v, "__len__") and len(v) == 0):
                return v
        return None

    def analysis(self, name: str):
        """An attached analysis (``plan``, ``check``, ...) from this run or its parts."""
        for rd in (self, *self.parts.values()):
            if name in rd.analyses:
                return rd.analyses[name]
        return None

    def all_summaries(self) -> list[tuple[str, dict]]:
        """(prefix, summary) for this run and each part, for metric extraction: measured parts before dry runs,
        so that a headline read from the first part holding it (requests issued, the replayed fraction) is the
        timed replay's, never the whole-trace simulation's beside it."""
        parts = sorted(self.parts.items(), key=lambda kv: bool(kv[1].summary.get("dry_run")))
        return [("", self.summary)] + [(f"{k}.", p.summary) for k, p in parts]


def _read_csv(path: Path) -> pd.DataFrame | None:
    if not path.is_file() or path.stat().st_size == 0:
        return None
    try:
        df = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: malformed CSV: {str(e).splitlines()[0]}",
                         "rerun the command that wrote it or delete the file") from None
    return df if len(df) else None


def load_run(path) -> RunData:
    """Load one results folder (and the step folders a job lists); UsageError names the folder or file when it
    is not a kvbench run or a file's schema version is unknown."""
    return _run_data(read_run(path))


def _run_data(f: RunFolder) -> RunData:
    p = f.path
    hist = read_json(p / "histograms.json") if (p / "histograms.json").is_file() else {}
    analyses = {**({"plan": f.plan.data} if f.plan else {}), **({"check": f.check.data} if f.check else {}),
                **f.analyses}
    return RunData(path=p, run=f.run.data if f.run else {}, summary=f.summary.data,
                   timeseries=_read_csv(p / "timeseries.csv"), histograms=hist if isinstance(hist, dict) else {},
                   requests=_read_csv(p / "requests.csv"), analyses=analyses,
                   parts={name: _run_data(sub) for name, sub in f.parts.items()})


# --- field extraction shared by figures and tables -------------------------------------------------------

def _finite(v) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def percentile_sets(obj, prefix: str = "", depth: int = 0) -> dict[str, dict[str, float]]:
    """Every latency-percentile object inside a summary, converted to microseconds.

    A percentile object is a dict under a key ending in a time unit (``lat_us``, ``read_lat_us``, ``fetch_us``,
    ``load_time_ms``) holding at least ``p50``; it is named by its path (``tiers.l3.read_lat``).
    """
    out: dict[str, dict[str, float]] = {}
    if not isinstance(obj, dict) or depth > 4:
        return out
    for k, v in obj.items():
        if not isinstance(v, dict):
            continue
        unit = next((u for u in _UNIT_SCALE_US if str(k).endswith(u)), None)
        if unit and "p50" in v:
            scale = _UNIT_SCALE_US[unit]
            name = (prefix + str(k)[: -len(unit)]).strip(".") or "latency"
            vals = {pk: _finite(pv) * scale for pk, pv in v.items() if _finite(pv) is not None}
            if vals:
                out[name] = vals
        else:
            out.update(percentile_sets(v, f"{prefix}{k}.", depth + 1))
    return out


def histogram_percentiles(raw: dict) -> dict[str, dict[str, float]]:
    """Percentiles (us) of each histogram in ``histograms.json``, through the engine's LatencyHistogram."""
    out: dict[str, dict[str, float]] = {}
    if not raw:
        return out
    try:
        from kvbench.metrics.histogram import LatencyHistogram
    except ImportError:
        LatencyHistogram = None
    for name, d in raw.items():
        if not isinstance(d, dict):
            continue
        vals = None
        if LatencyHistogram is not None:
            try:
                h = LatencyHistogram.from_dict(d)
                if getattr(h, "count", 1):
                    vals = h.percentiles()
            except Exception:  # noqa: BLE001 - a foreign or older histogram: fall back to stored percentiles
                vals = None
        if vals is None:
            stored = d.get("percentiles") or d.get("lat_us")
            vals = stored if isinstance(stored, dict) else None
        if vals:
            clean = {k: _finite(v) for k, v in vals.items() if _finite(v) is not None}
            if clean.get("max", 1) > 0 and clean:
                out[str(name)] = clean
    return out


def latency_curves(rd: RunData, points: int = 48) -> dict[str, tuple[list, list]]:
    """Dense tail curves (x = -log10(1 - q), latency us) from the engine's histograms, where written.

    The curve stops at the rank the sample supports (1 - q >= 1/count): beyond it a percentile is the max."""
    import math

    out: dict[str, tuple[list, list]] = {}
    try:
        from kvbench.metrics.histogram import LatencyHistogram
    except ImportError:
        return out
    for r in (rd, *rd.parts.values()):
        for name, d in (r.histograms or {}).items():
            try:
                h = LatencyHistogram.from_dict(d)
            except Exception:  # noqa: BLE001 - not an engine histogram (older layout, stored percentiles only)
                continue
            if not getattr(h, "count", 0):
                continue
            x_hi = max(0.31, min(5.0, math.log10(h.count)))
            xs = [0.30103 + (x_hi - 0.30103) * i / (points - 1) for i in range(points)]
            ys = [h.value_at(100.0 * (1.0 - 10.0 ** -x)) / 1e3 for x in xs]
            out[str(name)] = (xs, ys)
    return out


def latency_sets(rd: RunData) -> dict[str, dict[str, float]]:
    """Latency percentiles per tier/op for one run: histograms when written, else the summaries' sections."""
    out = {}
    for r in (rd, *rd.parts.values()):
        out.update(histogram_percentiles(r.histograms))
    if not out:
        for prefix, s in rd.all_summaries():
            out.update(percentile_sets(s, prefix))
    return out


def dig(obj, dotted: str, default=None):
    """``dig(summary, "tiers.l3.read_lat_us.p99.9")``: follow dots, preferring the longest key that exists."""
    if obj is None:
        return default
    if dotted == "":
        return obj
    if isinstance(obj, dict):
        parts = dotted.split(".")
        for i in range(len(parts), 0, -1):
            key = ".".join(parts[:i])
            if key in obj:
                got = dig(obj[key], ".".join(parts[i:]), None)
                if got is not None:
                    return got
    elif isinstance(obj, list):
        head, _, rest = dotted.partition(".")
        if head.isdigit() and int(head) < len(obj):
            return dig(obj[int(head)], rest, default)
    return default


def flatten(obj, prefix: str = "", depth: int = 0) -> dict[str, object]:
    """Nested dict -> {"a.b.c": scalar}; lists of scalars joined, deeper lists summarised."""
    out: dict[str, object] = {}
    if isinstance(obj, dict) and depth < 6:
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}{k}.", depth + 1))
    elif isinstance(obj, list):
        if all(not isinstance(v, (dict, list)) for v in obj):
            out[prefix.rstrip(".")] = ", ".join(str(v) for v in obj)
        else:
            for i, v in enumerate(obj[:16]):
                out.update(flatten(v, f"{prefix}{i}.", depth + 1))
    else:
        out[prefix.rstrip(".")] = obj
    return out
