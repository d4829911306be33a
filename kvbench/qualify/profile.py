"""Qualification profiles (``workloads/qualify/*.toml``): preconditioning, steady state, workloads, criteria.

A profile is what an SSD vendor and a buyer agree on: how the drive is brought to steady state, which
workloads run on it, and which measured numbers must stay under (or over) which thresholds. Workloads are
kvbench commands (``io``, ``replay-kv``, ``replay-engram``, ``plan``, ``check``) whose ``--json`` output the
criteria read by dotted path (``lat_us.p99.9``, ``tiers.l3.read_lat_us.p99``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from kvbench.errors import SpecError, UsageError
from kvbench.spec.presets import load_preset
from kvbench.units import parse_duration, parse_rate, parse_size

#: workload kind -> kvbench sub-command words
KIND_COMMANDS = {
    "io": ("io",),
    "replay-kv": ("replay", "kv"),
    "replay-engram": ("replay", "engram"),
    "plan": ("plan",),
    "check": ("check",),
}
OPS = {"max": "<=", "min": ">=", "equals": "=="}
PRECONDITION = "precondition"


@dataclass(frozen=True)
class Precondition:
    """Sequential fill passes, then random-write rounds until the PTS steady-state rule holds."""

    fill_passes: float = 1.0
    fill_bs: int = 128 * 1024
    bs: int = 4096
    qd: int = 32
    round_s: float = 10.0
    max_rounds: int = 25
    min_rounds: int = 5
    metric: str = "iops"              # steady-state variable per round: iops | bw_bytes_per_s | lat_us.p99 ...
    window: int = 5
    max_range: float = 0.20
    max_excursion: float = 0.10


@dataclass(frozen=True)
class Workload:
    name: str
    kind: str
    options: dict                     # --option value pairs for the command (profile spelling, units allowed)
    args: tuple = ()                  # positional arguments (e.g. a trace)


@dataclass(frozen=True)
class Criterion:
    name: str
    workload: str
    metric: str
    op: str                           # "<=" | ">=" | "=="
    threshold: object                 # number (in the metric's unit) or bool; or "drive.<key>"
    description: str = ""
    samples: str = ""                 # a metric counting what ``metric`` is made of (e.g. verify_checked for
                                      # verify_errors): fewer than ``min_samples`` of them and it is not-measured
    min_samples: int = 1


@dataclass(frozen=True)
class QualifyProfile:
    name: str
    description: str
    path: str
    precondition: Precondition | None
    workloads: tuple[Workload, ...]
    criteria: tuple[Criterion, ...]
    drive: dict = field(default_factory=dict)
    source: str = ""


def convert_threshold(metric: str, value, *, where: str):
    """A threshold in the metric's own unit: ``5ms`` for ``*_us`` metrics -> 5000, ``1GB/s`` -> 1e9 bytes/s."""
    if isinstance(value, bool) or isinstance(value, (int, float)):
        return value
    s = str(value).strip()
    if s.startswith("drive."):
        return s
    leaf = metric.split(".")
    unit_key = next((p for p in reversed(leaf) if re.search(r"_(us|ms|s|ns|bytes|bytes_per_s)$", p)), metric)
    try:
        if unit_key.endswith("bytes_per_s"):
            return parse_rate(s, what=where)
        if unit_key.endswith("bytes"):
            return parse_size(s, what=where)
        for suffix, scale in (("_ns", 1e9), ("_us", 1e6), ("_ms", 1e3), ("_s", 1.0)):
            if unit_key.endswith(suffix):
                return parse_duration(s, what=where) * scale
        return float(s)
    except (ValueError, UsageError) as e:
        raise SpecError(f"{where}: cannot read threshold {value!r} for metric {metric!r}: {getattr(e, 'problem', e)}",
                        "give a number in the metric's unit or a value with units (5ms, 1GB/s, 64GiB)") from None


def _positive_number(value, what: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = float("nan")
    if isinstance(value, bool) or not (v > 0 and v < float("inf")):
        raise UsageError(f"{what} must be a positive number, not {value!r}", f"give e.g. {what.split()[0]}=3")
    return v


def _size_fact(value, what: str) -> int:
    v = parse_size(value if isinstance(value, str) else str(int(value)), what=what)
    if v <= 0:
        raise UsageError(f"{what} must be > 0, not {value!r}", "give e.g. capacity=7.68TB")
    return v


#: drive facts a profile or ``--drive KEY=VALUE`` may state, each with its parser
DRIVE_FIELDS = {
    "rated_dwpd": _positive_number,     # warranty rating, drive writes per day
    "capacity": _size_fact,             # the whole drive's capacity (DWPD is per drive capacity)
}


def validate_drive(facts: dict, *, source: str = "--drive", named=()) -> dict:
    """Parsed drive facts; an unknown key or a bad value is a usage error naming it (before any I/O). Besides
    DRIVE_FIELDS, a fact the profile names (its [drive] table or a ``drive.<key>`` threshold) is a positive
    number."""
    out = {}
    for k, v in facts.items():
        parse = DRIVE_FIELDS.get(k) or (_positive_number if k in named else None)
        if parse is None:
            raise UsageError(f"{source} {k}={v}: unknown drive fact {k!r}",
                             f"use one of {', '.join(sorted(set(DRIVE_FIELDS) | set(named)))}")
        out[k] = parse(v, f"{source} {k}")
    return out


def _int(d: dict, key: str, default: int, where: str, kb_base: int = 1000) -> int:
    v = d.get(key, default)
    if isinstance(v, str):               # kb_base 1024: an I/O size (units.parse_size's rule)
        v = parse_size(v, what=f"{where}.{key}", kb_base=kb_base)
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise SpecError(f"{where}: field '{key}' must be a positive integer or size, got {v!r}", "fix the profile")
    return v


def parse_profile(d: dict, path: str) -> QualifyProfile:
    """Validate a profile dict; SpecError names the file and the field."""
    known = {"name", "description", "source", "drive", "precondition", "workload", "criterion"}
    extra = set(d) - known
    if extra:
        raise SpecError(f"{path}: unknown field(s) {', '.join(sorted(extra))}", f"use only {', '.join(sorted(known))}")
    pre = None
    if "precondition" in d:
        p = d["precondition"]
        w = f"{path}: [precondition]"
        if not isinstance(p, dict):
            raise SpecError(f"{w} must be a table", "write [precondition] with fields")
        allowed = set(Precondition.__dataclass_fields__)
        bad = set(p) - allowed
        if bad:
            raise SpecError(f"{w}: unknown field(s) {', '.join(sorted(bad))}", f"use {', '.join(sorted(allowed))}")
        pre = Precondition(
            fill_passes=float(p.get("fill_passes", 1.0)), fill_bs=_int(p, "fill_bs", 128 * 1024, w, 1024),
            bs=_int(p, "bs", 4096, w, 1024), qd=_int(p, "qd", 32, w),
            round_s=parse_duration(p.get("round_s", 10.0), what=f"{w}.round_s"),
            max_rounds=_int(p, "max_rounds", 25, w), min_rounds=_int(p, "min_rounds", 5, w),
            metric=str(p.get("metric", "iops")), window=_int(p, "window", 5, w),
            max_range=float(p.get("max_range", 0.20)), max_excursion=float(p.get("max_excursion", 0.10)))
        if pre.round_s <= 0 or pre.fill_passes < 0 or pre.window < 2 or pre.max_rounds < pre.window:
            raise SpecError(f"{w}: need round_s > 0, fill_passes >= 0, window >= 2 and max_rounds >= window",
                            "fix the [precondition] table")
    workloads = []
    for i, w in enumerate(d.get("workload") or []):
        where = f"{path}: [[workload]] #{i + 1}"
        if not isinstance(w, dict) or "name" not in w or "kind" not in w:
            raise SpecError(f"{where}: needs 'name' and 'kind'", f"kind is one of {', '.join(KIND_COMMANDS)}")
        if w["kind"] not in KIND_COMMANDS:
            raise SpecError(f"{where}: unknown kind {w['kind']!r}", f"use one of {', '.join(KIND_COMMANDS)}")
        if w["name"] == PRECONDITION or any(x.name == w["name"] for x in workloads):
            raise SpecError(f"{where}: name {w['name']!r} is reserved or repeated", "give each workload its own name")
        args = w.get("args", [])
        if not isinstance(args, list):
            raise SpecError(f"{where}: 'args' must be a list", "write args = [\"trace.jsonl\"]")
        opts = {k: v for k, v in w.items() if k not in ("name", "kind", "args")}
        workloads.append(Workload(str(w["name"]), str(w["kind"]), opts, tuple(str(a) for a in args)))
    names = {w.name for w in workloads} | ({PRECONDITION} if pre else set())
    criteria = []
    for i, c in enumerate(d.get("criterion") or []):
        where = f"{path}: [[criterion]] #{i + 1}"
        if not isinstance(c, dict) or "workload" not in c or "metric" not in c:
            raise SpecError(f"{where}: needs 'workload' and 'metric'", "e.g. workload = \"load\", metric = \"lat_us.p99\"")
        if c["workload"] not in names:
            raise SpecError(f"{where}: workload {c['workload']!r} is not defined",
                            f"use one of {', '.join(sorted(names)) or '(none)'}")
        ops = [k for k in OPS if k in c]
        if len(ops) != 1:
            raise SpecError(f"{where}: give exactly one of max, min, equals", "e.g. max = \"5ms\"")
        threshold = convert_threshold(str(c["metric"]), c[ops[0]], where=f"{where}.{ops[0]}")
        if isinstance(threshold, str) and threshold.startswith("drive."):
            if threshold[6:] not in (d.get("drive") or {}):
                raise SpecError(f"{where}: {threshold} is not in the profile's [drive] table",
                                "add it to [drive] or give a number")
        min_samples = c.get("min_samples", 1)
        if isinstance(min_samples, bool) or not isinstance(min_samples, int) or min_samples < 1:
            raise SpecError(f"{where}: min_samples must be a whole number >= 1, not {min_samples!r}",
                            "e.g. samples = \"verify_checked\", min_samples = 1")
        criteria.append(Criterion(str(c.get("name") or f"{c['workload']}: {c['metric']} {OPS[ops[0]]} {c[ops[0]]}"),
                                  str(c["workload"]), str(c["metric"]), OPS[ops[0]], threshold,
                                  str(c.get("description", "")), str(c.get("samples", "")), int(min_samples)))
    if not workloads and pre is None:
        raise SpecError(f"{path}: no workloads and no preconditioning", "add [[workload]] tables")
    if not criteria:
        raise SpecError(f"{path}: no criteria", "add [[criterion]] tables with max/min/equals thresholds")
    try:
        drive = validate_drive(dict(d.get("drive") or {}), source=f"{path}: [drive]",
                               named=set(d.get("drive") or {}))
    except UsageError as e:
        raise SpecError(e.problem, e.fix) from None
    return QualifyProfile(str(d.get("name") or Path(path).stem), str(d.get("description", "")), str(path), pre,
                          tuple(workloads), tuple(criteria), drive, str(d.get("source", "")))


def load_qualify_profile(name_or_path: str) -> QualifyProfile:
    """Load a shipped profile by name (``workloads/qualify/<name>.toml``) or a path."""
    d, path = load_preset("qualify", name_or_path)
    return parse_profile(d, str(path))
