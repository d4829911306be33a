"""The same job on every host of a Ray cluster: ``kvbench io --ray-address`` and ``kvbench qualify --ray-address``.

One actor per host of the Ray cluster (pinned to one of its Ray nodes; raylets sharing an address are one host),
all started together; each runs the job on
every drive listed (``--target A,B``: the same paths on each host), one drive after another so that drives of
one host do not disturb each other. Each run's folder comes back into one fan-out folder
(``results/<kind>-fanout-.../<host>-<drive>/``), whose summary lists the runs side by side with the spread
between drives (min, max, max/min and coefficient of variation of each headline number), and one HTML report
compares them. A host lost mid-run is reported as such; the other hosts' runs are kept.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import numpy as np

from kvbench.errors import UsageError
from kvbench.metrics.results import read_run

#: per job kind: the function run on each host, the headline numbers compared across drives (dotted paths)
KINDS = {
    "io": ("kvbench.cluster.fanout:io_job",
           ("iops", "bw_bytes_per_s", "lat_us.p50", "lat_us.p99", "lat_us.p99.9")),
    "qualify": ("kvbench.cluster.fanout:qualify_job", ("criteria_passed",)),
}


def _tree(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _runs(payload: dict, one) -> dict:
    """Run ``one(target, results_root)`` for each target here; each run's folder tree comes back."""
    from kvbench.errors import KvbenchError

    runs = []
    for target in payload["targets"]:
        with tempfile.TemporaryDirectory(prefix="kvbench-fanout-") as tmp:
            error = None
            try:
                one(target, tmp)
            except KvbenchError as e:
                error = str(e)
            runs.append({"target": target, "error": error, "tree": _tree(Path(tmp))})
    return {"runs": runs}


def io_job(payload: dict) -> dict:
    """On a host: ``kvbench io`` on each target (payload: IoSpec fields less the target, targets)."""
    from kvbench.engine.microbench import IoSpec, run_io

    def one(target, root):
        summary, rd, result = run_io(IoSpec(**{**payload["spec"], "target": target}), results_root=root)
        result.raise_for_status()

    return _runs(payload, one)


def qualify_job(payload: dict) -> dict:
    """On a host: ``kvbench qualify`` of each target against the profile."""
    from kvbench.qualify.job import qualify
    from kvbench.qualify.profile import load_qualify_profile

    prof = load_qualify_profile(payload["profile"])

    def one(target, root):
        qualify(prof, target, results_root=root, report_path=str(Path(root) / "report.html"), **payload["kwargs"])

    return _runs(payload, one)


def spread(values: list) -> dict | None:
    """min, max, max/min and coefficient of variation (std/mean) of the drives' values."""
    v = np.array([x for x in values if isinstance(x, (int, float))], dtype=np.float64)
    if v.size == 0:
        return None
    mean = float(v.mean())
    return {"n": int(v.size), "min": float(v.min()), "max": float(v.max()), "mean": mean,
            "max_over_min": float(v.max() / v.min()) if v.min() > 0 else None,
            "cv": float(v.std() / mean) if mean else None}


def _label(host: str, target: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", f"{host}-{target.strip('/')}")[:120]


def fan_out(kind: str, ray_address: str, targets: list[str], payload: dict, results_root: str = "results",
            report: str | None = None, die: int | None = None) -> dict:
    """Run job ``kind`` on every Ray host for every target; one folder, summary and report for all."""
    from kvbench.cluster.workers import Lost, RaySession
    from kvbench.metrics.run import RunDir
    from kvbench.report import build_report
    from kvbench.report.rundata import dig

    targets = [t.strip() for t in targets if t.strip()]
    if not targets:
        raise UsageError("--ray-address needs --target (the path of the drive on every host)",
                         "give e.g. --target /dev/nvme0n1 or --target /dev/nvme0n1,/dev/nvme1n1")
    fn, headline = KINDS[kind]
    session = RaySession(ray_address)
    try:
        hosts = session.hosts()
        jobs = [(fn, {**payload, "targets": targets}) for _ in hosts]
        rd = RunDir.create(f"{kind}-fanout", {"kind": kind, "ray_address": ray_address, "targets": targets,
                                              "hosts": [h["host"] for h in hosts], "job": payload},
                           root=results_root)
        results = session.run(jobs, die=die, pin=[h["node_id"] for h in hosts])
    finally:
        session.close()
    drives, lost, parts = [], [], {}
    for h, res in zip(hosts, results):
        if isinstance(res, Lost):
            lost.append({"host": res.host or h["host"], "node_id": h["node_id"], "error": res.error})
            continue
        if res.get("status") == "failed":
            lost.append({"host": res.get("host") or h["host"], "node_id": h["node_id"], "error": res.get("error")})
            continue
        for run in res["runs"]:
            label = _label(f"{res['host']}-{h['node_id'][:6]}", run["target"])
            base = rd.path / label
            for rel, data in run["tree"].items():
                p = base / rel
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_bytes(data)
            main = _main_run(base)
            folder = read_run(main, parts=False) if main else None
            s = folder.summary.data if folder else {}
            entry = {"host": res["host"], "node_id": h["node_id"], "target": run["target"], "error": run["error"],
                     "status": s.get("status", "failed"), "run_dir": str(main) if main else None,
                     **{k: dig(s, k) for k in headline}}
            if kind == "qualify" and folder and "qualify" in folder.analyses:
                q = folder.analyses["qualify"]
                entry["passed"] = q.get("passed")
                entry["criteria_values"] = {c["name"]: c.get("value") for c in q.get("criteria", [])}
            drives.append(entry)
            if main:
                parts[label] = str(main)
    spreads = {k: spread([d.get(k) for d in drives if not d["error"]]) for k in headline}
    if kind == "qualify":
        names = sorted({n for d in drives for n in (d.get("criteria_values") or {})})
        spreads.update({f"criterion.{n}": spread([(d.get("criteria_values") or {}).get(n) for d in drives])
                        for n in names})
    summary = {"job": kind, "hosts": len(hosts), "targets": targets, "drives": drives, "spread": spreads,
               "lost": lost, "parts": parts}
    status = "complete" if not lost and all(not d["error"] for d in drives) else "partial"
    rd.write_summary(summary, status=status)
    if parts:
        out = report or str(Path("reports") / f"{rd.path.name}.html")
        path, _ = build_report(list(parts.values()), out,
                               title=f"kvbench {kind} on {len(hosts)} hosts x {len(targets)} drives")
        summary["report"] = str(path)
        rd.write_summary(summary, status=status)
    return {"kind": f"{kind}-fanout", "status": status, "run_dir": str(rd.path), **summary}


def _main_run(base: Path) -> Path | None:
    """The run folder a job wrote under ``base`` (qualify writes step folders beside its job folder)."""
    cands = [p.parent for p in base.rglob("summary.json")]
    if not cands:
        return None
    for c in cands:                       # a job folder lists its steps under "parts"
        try:
            if read_run(c, parts=False).summary.parts:
                return c
        except UsageError:                # a step's file the job left half-written
            continue
    return sorted(cands)[0]


def print_fanout(s: dict, echo) -> None:
    """Side by side, one line per drive, then the spread."""
    echo(f"{s['job']} on {s['hosts']} hosts x {len(s['targets'])} drives ({s['status']})")
    for d in s["drives"]:
        nums = "  ".join(f"{k}={d[k]:.4g}" for k in KINDS[s["job"]][1] if isinstance(d.get(k), (int, float)))
        echo(f"  {d['host']} {d['target']}: {d['status']}  {nums}" + (f"  ERROR {d['error']}" if d["error"] else "")
             + ("" if d.get("passed") is None else f"  {'PASS' if d['passed'] else 'FAIL'}"))
    for k, sp in s["spread"].items():
        if sp and sp["n"] > 1:
            mm = f"max/min {sp['max_over_min']:.3f}" if sp["max_over_min"] else ""
            echo(f"  spread {k}: min {sp['min']:.4g} max {sp['max']:.4g} {mm} cv {sp['cv'] or 0:.3f}")
    for h in s["lost"]:
        echo(f"  host {h['host']} lost: {h['error']}")
    if s.get("report"):
        echo(f"  report: {s['report']}")
    echo(f"  run_dir: {s['run_dir']}")
