"""Run folders: ``results/<run-id>/`` with run.json, summary.json, timeseries.csv and histograms.json.

run.json and summary.json carry ``schema``, their layout version (:mod:`kvbench.metrics.results`, the one
reader of a run folder).

Everything is written atomically (temp file + rename) and incrementally, so that a run killed mid-way still
leaves its configuration, its time series so far and a partial summary.
"""

from __future__ import annotations

import csv
import datetime as _dt
import json
import math
import os
import secrets
import shlex
import sys
from pathlib import Path

from kvbench import procs
from kvbench.errors import TargetError
from kvbench.metrics.results import SCHEMAS, stamp

# not-measured: the run completed but kvbench cannot vouch for its numbers (summary ``not_measured`` says why:
# an O_DIRECT bypass check that failed, device counters that disagree with the engine)
# stale: "running" (or the first, empty "partial") when the process that wrote it is gone (killed, SIGKILL, a
# reboot): marked by the next look at the folder (read_run, RunDir.create beside it; kvbench.procs.gone)
STATUSES = ("running", "complete", "partial", "interrupted", "failed", "not-measured", "stale")


def to_jsonable(obj):
    """JSON-safe: numpy scalars/arrays to Python, NaN/inf to null, paths to str (run files and --json alike)."""
    import numpy as np
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, Path):
        return str(obj)
    return obj


def atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


_STEP_ARGV: list | None = None     # the command a step run in-process stands for (kvbench.job)


class as_command:
    """Within it, run folders record ``argv`` (``["kvbench", "mrc", ...]``) as their command: a step that
    ``kvbench run`` runs in its own process is recorded as the command a user would type to rerun it."""

    def __init__(self, argv):
        self.argv = [str(a) for a in argv]

    def __enter__(self):
        global _STEP_ARGV
        self.prev, _STEP_ARGV = _STEP_ARGV, self.argv
        return self

    def __exit__(self, *exc):
        global _STEP_ARGV
        _STEP_ARGV = self.prev


def _argv() -> list:
    return list(_STEP_ARGV) if _STEP_ARGV is not None else list(sys.argv)


def command_line() -> str:
    """The exact command that started this process (``kvbench ...`` when run as a module), or the step's
    command within :class:`as_command`."""
    argv = _argv()
    if argv and (argv[0].endswith("__main__.py") or argv[0] == "-m"):
        argv[0] = "kvbench"
    elif argv:
        argv[0] = os.path.basename(argv[0])
    return shlex.join(argv)


class RunDir:
    """One run's results folder."""

    def __init__(self, path: Path, kind: str):
        self.path = Path(path)
        self.kind = kind
        self._ts_columns: list[str] | None = None

    @classmethod
    def create(cls, kind: str, config: dict, root: str | Path = "results", targets=(),
               run_id: str | None = None) -> "RunDir":
        """Create ``root/<kind>-<UTC time>-<random>/`` and write run.json (command, config, environment,
        targets' facts)."""
        root = Path(root)
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise TargetError(f"cannot create results folder {root}: {e.strerror}",
                              "pass a writable --results folder") from None
        mark_stale_under(root)
        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
        given = run_id
        for _ in range(64):             # runs started in the same second draw suffixes until one is free
            run_id = given or f"{kind}-{stamp}-{secrets.token_hex(2)}"
            path = root / run_id
            try:
                path.mkdir(parents=True, exist_ok=False)
                break
            except FileExistsError:
                if given:
                    raise TargetError(f"run folder {path} already exists", "give another run id") from None
        else:
            raise TargetError(f"no free run folder name under {root} for {kind} at {stamp}",
                              "clean up the results folder") from None
        from kvbench.metrics.environment import environment, target_facts    # psutil: only for run folders

        rd = cls(path, kind)
        rd._run = {
            "schema": SCHEMAS["run"],
            "run_id": run_id,
            "kind": kind,
            "command": command_line(),
            "argv": _argv(),
            "cwd": os.getcwd(),
            "started_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "config": config,
            "environment": environment(),
            "targets": [target_facts(t) for t in targets],
            "process": procs.identity(),          # so that a later look can tell a killed run from a running one
        }
        rd.write_json("run.json", rd._run)
        rd.write_summary({}, status="partial")     # until the run says otherwise: a killed run stays partial
        return rd

    @classmethod
    def open(cls, path: str | Path) -> "RunDir":
        """Open an existing run folder (for reports and appends); run.json read through the result contract."""
        from kvbench.metrics.results import RunInfo, read_json

        path = Path(path)
        run = RunInfo.from_json(read_json(path / "run.json"), path / "run.json")
        rd = cls(path, run.kind)
        rd._run = run.to_json()
        return rd

    @property
    def run(self) -> dict:
        return self._run

    def add_targets(self, targets) -> None:
        """Record (more) targets' facts in run.json: paths, or dicts already describing them."""
        from kvbench.metrics.environment import target_facts

        facts = [t if isinstance(t, dict) else target_facts(t) for t in targets]
        self._run["targets"] = self._run.get("targets", []) + facts
        self.write_json("run.json", self._run)

    def update_run(self, **fields) -> None:
        """Add fields to run.json (e.g. resolved config, engine facts)."""
        self._run.update(fields)
        self.write_json("run.json", self._run)

    def write_json(self, name: str, obj) -> Path:
        p = self.path / name
        atomic_write_text(p, json.dumps(to_jsonable(obj), indent=2) + "\n")
        return p

    def append_timeseries(self, rows, name: str = "timeseries.csv") -> None:
        """Append rows (a DataFrame, a dict of columns, a dict row or a list of dict rows) to the CSV.

        The header is fixed by the first call; later columns not in it are added by rewriting the file."""
        records = _records(rows)
        if not records:
            return
        p = self.path / name
        cols = list(self._ts_columns or [])
        if not cols and p.exists():
            with open(p, newline="") as f:
                cols = next(csv.reader(f), [])
        new = [c for r in records for c in r if c not in cols]
        new = list(dict.fromkeys(new))
        if new and p.exists() and cols:
            import pandas as pd
            old = pd.read_csv(p)
            cols = cols + new
            old.reindex(columns=cols).to_csv(p, index=False)
        else:
            cols = cols + new
        write_header = not p.exists()
        with open(p, "a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
            if write_header:
                w.writeheader()
            for r in records:
                w.writerow({k: _csv_value(v) for k, v in r.items()})
            f.flush()
        self._ts_columns = cols

    def write_histograms(self, hists: dict, name: str = "histograms.json") -> Path:
        return self.write_json(name, {str(k): h.to_dict() for k, h in hists.items()})

    def write_summary(self, summary: dict, status: str = "complete") -> Path:
        """summary.json with ``schema``, ``kind``, ``status`` and ``run_dir`` always present."""
        if status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}")
        out = {"kind": self.kind, "status": status, "run_dir": str(self.path), **summary}
        out["kind"], out["status"], out["run_dir"] = self.kind, status, str(self.path)
        return self.write_json("summary.json", stamp("summary", out))


def mark_stale(path) -> bool:
    """Mark run folder ``path`` ``stale`` when its summary says it runs (``running``, or the empty ``partial``
    :meth:`RunDir.create` starts with) and the process run.json records is gone; True when it did."""
    path = Path(path)
    try:
        summary = json.loads((path / "summary.json").read_text())
        if summary.get("status") not in ("running", "partial"):
            return False
        if summary["status"] == "partial" and set(summary) - {"schema", "kind", "status", "run_dir"}:
            return False                      # a partial result the run wrote itself
        ident = json.loads((path / "run.json").read_text()).get("process")
    except (OSError, ValueError, AttributeError):
        return False
    if not procs.gone(ident):
        return False
    summary.update(status="stale", stale=f"the process that ran it (PID {ident['pid']} on {ident['host']}) is gone: "
                                         f"killed before it could record how it ended; what it wrote is kept")
    atomic_write_text(path / "summary.json", json.dumps(summary, indent=2) + "\n")
    return True


def mark_stale_under(root) -> list[Path]:
    """:func:`mark_stale` on every run folder directly under ``root`` (a new run looks at its neighbours)."""
    out = []
    try:
        subs = [p for p in Path(root).iterdir() if (p / "summary.json").is_file()]
    except OSError:
        return out
    for p in subs:
        if mark_stale(p):
            out.append(p)
    return out


def _csv_value(v):
    v = to_jsonable(v)
    return "" if v is None else v


def _records(rows) -> list[dict]:
    if rows is None:
        return []
    if hasattr(rows, "to_dict") and hasattr(rows, "columns"):
        return rows.to_dict(orient="records")
    if isinstance(rows, dict):
        vals = list(rows.values())
        if vals and all(hasattr(v, "__len__") and not isinstance(v, (str, bytes)) for v in vals):
            n = len(vals[0])
            return [{k: rows[k][i] for k in rows} for i in range(n)]
        return [rows]
    return list(rows)
