"""The replay's live line (kvbench.progress) read from its run folder's ``progress.json`` (:class:`LiveProgress`
writes it each second while a window's I/O runs): requests done of the trace's, bandwidth per tier, and the
ETA of completion: the trace left at the rate so far, or the time budget (``--duration``) when it runs out first.
"""

from __future__ import annotations

import json
from pathlib import Path

DOMAINS = {"dram": "DRAM (L2)", "dev": "store (L3/L4)"}


def newest_run(root, kind: str = "replay-kv", since: float = 0.0) -> Path | None:
    """The newest ``<kind>-*`` run folder under ``root`` (``kind`` "": any) made at or after ``since``."""
    dirs = [d for d in Path(root).glob(f"{kind}-*" if kind else "*")
            if d.is_dir() and d.stat().st_mtime >= since - 1.0]
    return max(dirs, key=lambda d: d.stat().st_mtime) if dirs else None


def line_update(doc: dict, budget_s: float | None = None) -> dict:
    """``Line.update`` keywords from one progress document."""
    from kvbench.units import format_rate

    secs = float(doc.get("seconds") or 0.0)
    rates = [f"{DOMAINS.get(k, k)} {format_rate(v / secs)}" for k, v in (doc.get("bytes") or {}).items()
             if v and secs > 0]
    out = {"done": int(doc.get("requests_done") or 0), "total": int(doc.get("trace_requests") or 0) or None,
           "note": ", ".join(rates)}
    if budget_s:
        out["eta_s"] = max(0.0, budget_s - secs)
    return out


def poll_replay(line, root, since: float, budget_s: float | None = None):
    """A :class:`kvbench.progress.Poll` feeding ``line`` from the newest replay under ``root``."""
    from kvbench.progress import Poll
    from kvbench.replay.kv import LiveProgress

    def read():
        d = newest_run(root, since=since)
        if d is None:
            return None
        try:
            return line_update(json.loads((d / LiveProgress.FILE).read_text()), budget_s)
        except (OSError, ValueError):
            return None
    return Poll(line, read)


def step_detail(root, since: float) -> str:
    """What a child command's run folder under ``root`` says of its progress now, for a job's step line: a
    replay's requests and GB/s per tier (progress.json), an io run's bandwidth so far (its partial summary)."""
    from kvbench.replay.kv import LiveProgress
    from kvbench.units import format_rate

    d = newest_run(root, "", since)
    if d is None:
        return ""
    try:
        if (d / LiveProgress.FILE).exists():
            u = line_update(json.loads((d / LiveProgress.FILE).read_text()))
            return ", ".join(x for x in (f"{u['done']:,}/{u['total']:,} requests" if u["total"] else "", u["note"]) if x)
        s = json.loads((d / "summary.json").read_text())
    except (OSError, ValueError):
        return ""
    secs, nbytes = s.get("seconds_so_far"), s.get("bytes_so_far")
    return f"{format_rate(nbytes / secs)}, {secs:.0f} s" if secs and nbytes is not None else ""
