"""Figure builders: pure functions from loaded runs to plotly figures (no file or network I/O here).

Each builder takes a list of :class:`RunData` (one run, or several side by side) and returns a figure, or
``None`` when none of the runs holds the data it draws, so a report shows exactly what was measured.
"""

from __future__ import annotations

import math
import re

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from kvbench.report.labels import count_label, human, log_ticks, ms_label, us_label
from kvbench.report.rundata import TAIL_KEYS, RunData, dig, latency_curves, latency_sets

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f")
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
_LAYOUT = dict(template="plotly_white", height=430, margin=dict(l=70, r=30, t=50, b=60),
               legend=dict(orientation="h", yanchor="top", y=-0.18, x=0), hovermode="closest")


def _fig(title: str, **kw) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(title=title, **{**_LAYOUT, **kw})
    return fig


def _name(runs: list[RunData], rd: RunData, series: str) -> str:
    return f"{rd.label} · {series}" if len(runs) > 1 else series


def _num(v) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _bytes_ticks(lo: float, hi: float) -> tuple[list[float], list[str]]:
    """Ticks at powers of two spread over [lo, hi] with binary-unit labels, for log capacity axes."""
    from kvbench.units import format_bytes

    if not (lo > 0 and hi > lo):
        return [], []
    e0, e1 = math.floor(math.log2(lo)), math.ceil(math.log2(hi))
    step = max(1, (e1 - e0) // 8)
    vals = [2.0 ** e for e in range(e0, e1 + 1, step)]
    return vals, [format_bytes(v, digits=3) for v in vals]


def _log_axis(fig, which: str, values, label, title: str, **kw) -> None:
    """A log axis whose every tick label is a full value with its unit (no bare minor "2" and "5")."""
    vals = [float(v) for v in np.asarray(values, dtype=float).ravel() if np.isfinite(v) and v > 0]
    tv, tt = log_ticks(min(vals), max(vals), label) if vals else ([], [])
    upd = fig.update_xaxes if which == "x" else fig.update_yaxes
    upd(title=title, type="log", **({"tickvals": tv, "ticktext": tt} if tv else {}), **kw)


def _trace_values(fig, axis: str = "y", yaxis: str | None = None) -> list:
    out = []
    for t in fig.data:
        if yaxis is not None and (getattr(t, "yaxis", None) or "y") != yaxis:
            continue
        v = getattr(t, axis)
        if v is not None:
            out.extend(np.asarray(v, dtype=float).ravel().tolist())
    return out


# --- latency on a log tail axis ------------------------------------------------------------------------

def tail_x(key: str) -> float | None:
    """Position of a percentile on the tail axis: -log10(1 - q), so p90 = 1, p99 = 2, p99.9 = 3."""
    m = re.fullmatch(r"p(\d+(?:\.\d+)?)", key)
    if not m:
        return None
    q = float(m.group(1)) / 100.0
    return -math.log10(1.0 - q) if q < 1.0 else None


#: histogram series that are not per-I/O latencies: per-request times, drawn in their own figure
_REQUEST_SERIES = ("load_time", "full_load_time", "issue_lag", "load", "fetch")


def _is_request_series(series: str) -> bool:
    last = series.rsplit(".", 1)[-1]
    return last in _REQUEST_SERIES or series.endswith(("load_time", "load_time_ms"))


def _tail_figure(runs: list[RunData], title: str, keep, unit_note: str) -> go.Figure | None:
    """Percentiles on a log tail axis for the series ``keep(name)`` selects: every line runs from p50 to the
    percentile its sample supports (1 - q >= 1/count, named in the legend), then to its max."""
    fig = _fig(title)
    any_series = False
    max_x = 0.0
    for ri, rd in enumerate(runs):
        sets = {k: v for k, v in latency_sets(rd).items() if keep(k)}
        curves = latency_curves(rd)
        counts = _histogram_counts(rd)
        for si, (series, vals) in enumerate(sorted(sets.items())):
            pts = sorted((tail_x(k), v, k) for k, v in vals.items() if tail_x(k) is not None and v > 0)
            if not pts:
                continue
            xs, ys, ks = [p[0] for p in pts], [p[1] for p in pts], [p[2] for p in pts]
            if vals.get("max", 0) > 0:
                xs.append(max(4.0, xs[-1]) + 1.0)
                ys.append(vals["max"])
                ks.append("max")
            max_x = max(max_x, xs[-1])
            color = PALETTE[si % len(PALETTE)]
            n = counts.get(series)
            label = human(series) + (f" ({n:,} samples)" if n else "")
            fig.add_trace(go.Scatter(
                x=xs, y=ys, mode="markers" if series in curves else "lines+markers", name=_name(runs, rd, label),
                customdata=ks, legendgroup=f"{ri}-{series}", marker=dict(color=color, size=7),
                line=dict(color=color, dash=DASHES[ri % len(DASHES)]),
                hovertemplate="%{customdata}: %{y:.4g} us<extra>%{fullData.name}</extra>"))
            if series in curves:   # the full histogram between the marked percentiles
                cx, cy = curves[series]
                fig.add_trace(go.Scatter(x=cx, y=cy, mode="lines", legendgroup=f"{ri}-{series}", showlegend=False,
                                         line=dict(color=color, dash=DASHES[ri % len(DASHES)]), hoverinfo="skip"))
            any_series = True
    if not any_series:
        return None
    tick_keys = list(TAIL_KEYS)
    tickvals = [tail_x(k) for k in tick_keys] + [max(5.0, max_x)]
    fig.update_xaxes(title="percentile (log tail: each step right is 10x rarer)", tickvals=tickvals,
                     ticktext=tick_keys + ["max"], range=[-0.2, max(5.0, max_x) + 0.2])
    _log_axis(fig, "y", _trace_values(fig), us_label, f"{unit_note} (log)")
    return fig


def _histogram_counts(rd: RunData) -> dict:
    out = {}
    for r in (rd, *rd.parts.values()):
        for name, d in (r.histograms or {}).items():
            if isinstance(d, dict) and isinstance(d.get("count"), (int, float)):
                out[str(name)] = int(d["count"])
    return out


def latency_tail(runs: list[RunData]) -> go.Figure | None:
    """Per-I/O latency percentiles per tier and op on a log tail axis (p50 .. p99.99, then max)."""
    return _tail_figure(runs, "Per-I/O latency percentiles per tier and op",
                        lambda k: not _is_request_series(k), "latency of one I/O, submit to completion")


def request_time_tail(runs: list[RunData]) -> go.Figure | None:
    """Per-request load-time percentiles (all of a request's reused KV, every tier) on a log tail axis."""
    return _tail_figure(runs, "Load time percentiles per request (a request's whole reused prefix) or Engram step",
                        _is_request_series, "time per request or step")


# --- bandwidth and IOPS over time ------------------------------------------------------------------------

_TIME_COLS = ("t_s", "time_s", "elapsed_s", "second", "seconds", "t", "time", "ts", "timestamp_s")
_PANELS = (("bandwidth (bytes/s)", re.compile(r"(bytes_per_s|bw|_bps$|bandwidth)", re.I)),
           ("IOPS (I/Os completed per second)", re.compile(r"iops", re.I)),
           ("latency per second of the run", re.compile(r"(_us$|lat)", re.I)))


def _time_axis(df) -> tuple[np.ndarray, str]:
    for c in _TIME_COLS:
        if c in df.columns:
            t = df[c].to_numpy(dtype=float)
            return t - (t[0] if c.startswith("timestamp") else 0.0), c
    return np.arange(len(df), dtype=float), "row"


def throughput_over_time(runs: list[RunData]) -> go.Figure | None:
    """Bandwidth, IOPS (and per-second latency when recorded) over the run, one panel each."""
    panels: dict[str, list] = {}
    for ri, rd in enumerate(runs):
        df = rd.find("timeseries")
        if df is None:
            continue
        t, tcol = _time_axis(df)
        for col in df.columns:
            if col == tcol or not np.issubdtype(df[col].dtype, np.number):
                continue
            for title, rx in _PANELS:
                if rx.search(str(col)):
                    panels.setdefault(title, []).append((ri, rd, col, t, df[col].to_numpy(dtype=float)))
                    break
    if not panels:
        return None
    order = [p[0] for p in _PANELS if p[0] in panels]
    fig = make_subplots(rows=len(order), cols=1, shared_xaxes=True, vertical_spacing=0.08, subplot_titles=order)
    for row, title in enumerate(order, start=1):
        for si, (ri, rd, col, t, y) in enumerate(panels[title]):
            fig.add_trace(go.Scatter(x=t, y=y, mode="lines", name=_name(runs, rd, human(col)), legendgroup=rd.label,
                                     line=dict(color=PALETTE[(si if len(runs) == 1 else ri) % len(PALETTE)],
                                               dash=DASHES[(si if len(runs) > 1 else 0) % len(DASHES)])),
                          row=row, col=1)
        if title.startswith("latency"):
            ys = [v for *_, y in panels[title] for v in y.tolist() if np.isfinite(v) and v > 0]
            tv, tt = log_ticks(min(ys), max(ys), us_label) if ys else ([], [])
            fig.update_yaxes(type="log", row=row, col=1, **({"tickvals": tv, "ticktext": tt} if tv else {}))
        elif title.startswith("bandwidth"):
            fig.update_yaxes(tickformat=".3s", ticksuffix="B/s", rangemode="tozero", row=row, col=1)
        else:
            fig.update_yaxes(tickformat=".3s", rangemode="tozero", row=row, col=1)
    fig.update_xaxes(title="time since start (s)", row=len(order), col=1)
    fig.update_layout(title="Bandwidth and IOPS over time, per second", **{**_LAYOUT, "height": 260 * len(order) + 120})
    return fig


# --- hit-ratio curve with chosen capacities and the knee ---------------------------------------------------

def knee_index(x, y) -> int | None:
    """Kneedle on a concave rising curve over log capacity: the point farthest above the chord, or None."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    ok = (x > 0) & np.isfinite(y)
    if ok.sum() < 3:
        return None
    idx = np.flatnonzero(ok)
    lx = np.log(x[ok])
    yy = y[ok]
    if lx[-1] == lx[0] or yy.max() == yy.min():
        return None
    xn = (lx - lx[0]) / (lx[-1] - lx[0])
    yn = (yy - yy.min()) / (yy.max() - yy.min())
    d = yn - xn
    k = int(np.argmax(d))
    return int(idx[k]) if d[k] > 0 else None


def _curves(rd: RunData) -> list[tuple]:
    """[(label, capacities, hit ratios, unit, infinite ratio)] from the attached curves: an ``mrc`` result
    (KV blocks), or an Engram run's ``curve.json`` (DRAM bytes against row hit ratio, one series per policy)."""
    out = []
    for src in (rd.analysis("mrc"), dig(rd.analysis("plan"), "curve"), dig(rd.summary, "curve")):
        if isinstance(src, dict) and src.get("capacities") and src.get("hit_ratio"):
            cap = np.asarray(src["capacities"], dtype=float)
            hr = np.asarray([np.nan if v is None else v for v in src["hit_ratio"]], dtype=float)
            unit = str(src.get("unit", "bytes" if cap.max() > 1e7 else "blocks"))
            out.append(("hit ratio (exact LRU)", cap, hr, unit, _num(src.get("infinite_hit_ratio"))))
            break
    eng = rd.analysis("curve")
    if isinstance(eng, dict) and eng.get("dram_bytes"):
        cap = np.asarray(eng["dram_bytes"], dtype=float)
        for policy, vals in eng.items():
            if policy in ("dram_bytes", "dram_rows") or not isinstance(vals, list) or len(vals) != cap.size:
                continue
            hr = np.asarray([np.nan if v is None else v for v in vals], dtype=float)
            out.append((f"DRAM row hit ratio ({policy})", cap, hr, "bytes", None))
    return out


def chosen_capacities(rd: RunData) -> dict[str, float]:
    """The capacities a run used per tier (bytes): from the summary's tiers, else the config's lN fields."""
    out: dict[str, float] = {}
    for prefix, s in rd.all_summaries():
        for tier, t in (s.get("tiers") or {}).items():
            if isinstance(t, dict):
                v = _num(t.get("capacity_bytes"))
                if v:
                    out[tier] = v
    for prefix, s in rd.all_summaries():
        if _num(s.get("dram_bytes")) and s.get("kind") == "replay-engram":
            out["DRAM row cache"] = _num(s["dram_bytes"])
    if not out:
        for r in (rd, *rd.parts.values()):
            cfg = r.run.get("config") or {}
            for k, v in cfg.items():
                m = re.fullmatch(r"(l[1-4])(?:_capacity(?:_bytes)?)?", str(k))
                if m and _num(v):
                    out[m.group(1)] = _num(v)
    return out


def _targets(rd: RunData) -> list[tuple[str, float]]:
    """(label, bytes) for the planned capacities per target hit ratio, if a plan is attached."""
    cap = dig(rd.analysis("plan"), "capacity_bytes")
    out = []

    def walk(obj, label):
        if isinstance(obj, dict):
            for k, v in obj.items():
                walk(v, f"{label} {k}".strip())
        elif _num(obj):
            out.append((label, _num(obj)))
    walk(cap, "")
    return out[:12]


def hit_ratio_curve(runs: list[RunData]) -> go.Figure | None:
    """Hit ratio against capacity (log axis) with the infinite-cache ceiling, chosen capacities and the knee."""
    fig = _fig("Hit ratio vs capacity")
    lo, hi, drawn, unit = math.inf, 0.0, False, "bytes"
    for ri, rd in enumerate(runs):
        curves = _curves(rd)
        if not curves:
            continue
        color = PALETTE[ri % len(PALETTE)]
        for ci, (label, cap, hr, unit, inf) in enumerate(curves[1:], start=1):   # extra series (Engram policies)
            ok = cap > 0
            lo, hi = min(lo, cap[ok].min()), max(hi, cap[ok].max())
            fig.add_trace(go.Scatter(x=cap[ok], y=hr[ok], mode="lines", name=_name(runs, rd, label),
                                     line=dict(color=PALETTE[(ri + ci) % len(PALETTE)], dash=DASHES[ci % len(DASHES)])))
        label, cap, hr, unit, inf = curves[0]
        ok = cap > 0
        lo, hi = min(lo, cap[ok].min()), max(hi, cap[ok].max())
        fig.add_trace(go.Scatter(x=cap[ok], y=hr[ok], mode="lines", name=_name(runs, rd, label),
                                 line=dict(color=color, width=2.5)))
        if inf is not None:
            fig.add_trace(go.Scatter(x=[cap[ok].min(), cap[ok].max()], y=[inf, inf], mode="lines",
                                     name=_name(runs, rd, f"infinite cache {inf:.3f}"),
                                     line=dict(color=color, dash="dot", width=1)))
        plan = rd.analysis("plan") or {}
        kb = _num(plan.get("knee_bytes"))
        if kb is None:
            k = knee_index(cap, hr)
            kb = cap[k] if k is not None else None
        if kb is not None:
            ky = float(np.interp(np.log(kb), np.log(cap[ok]), hr[ok]))
            fig.add_trace(go.Scatter(x=[kb], y=[ky], mode="markers+text", text=["knee"], textposition="top left",
                                     marker=dict(symbol="diamond", size=12, color=color),
                                     name=_name(runs, rd, "knee")))
        if unit == "bytes":
            modelled = " (modelled full size)" if is_key_sampled(rd) else ""
            for ti, (tier, b) in enumerate(sorted(chosen_capacities(rd).items())):
                y = float(np.interp(np.log(b), np.log(cap[ok]), hr[ok])) if b > 0 else 0.0
                fig.add_trace(go.Scatter(x=[b, b], y=[0, y], mode="lines+markers",
                                         name=_name(runs, rd, f"{human(tier)} capacity used{modelled}"),
                                         line=dict(color=PALETTE[(ti + 3) % len(PALETTE)], dash="dash"),
                                         marker=dict(size=[0, 10])))
            for label, b in _targets(rd):
                y = float(np.interp(np.log(b), np.log(cap[ok]), hr[ok]))
                fig.add_trace(go.Scatter(x=[b], y=[y], mode="markers", marker=dict(symbol="x", size=9, color=color),
                                         name=_name(runs, rd, _target_label(label))))
        drawn = True
    if not drawn:
        return None
    fig.update_yaxes(title="hit ratio (fraction of block references found cached)", range=[0, 1.02])
    if unit == "bytes":
        tv, tt = _bytes_ticks(lo, hi)
        fig.update_xaxes(title="cache capacity (log)", type="log", tickvals=tv, ticktext=tt)
    else:
        tv, tt = log_ticks(lo, hi, lambda v: f"{count_label(v)} {unit}")
        fig.update_xaxes(title=f"cache capacity ({unit}, log)", type="log", tickvals=tv, ticktext=tt)
    return fig


def is_key_sampled(rd: RunData) -> bool:
    """True when a replay in this run was key-sampled: its capacities are modelled, not what the device held."""
    for _, s in rd.all_summaries():
        r = _num(s.get("sample_rate"))
        if r is not None and r < 1:
            return True
    return False


def _target_label(label: str) -> str:
    """``l3 0.95`` (a plan's capacity_bytes path) -> ``plan: L3 capacity for hit-ratio target 0.95``."""
    parts = label.split()
    if len(parts) == 2 and re.fullmatch(r"l[1-4]", parts[0]) and _num(parts[1]) is not None:
        return f"plan: {parts[0].upper()} capacity for hit-ratio target {parts[1]}"
    return f"plan: capacity {human(label)}"


# --- load time against recompute time, per request --------------------------------------------------------

def _col(df, patterns) -> str | None:
    for p in patterns:
        for c in df.columns:
            if re.fullmatch(p, str(c)):
                return c
    return None


def request_times(rd: RunData):
    """(hit tokens, load ms, recompute ms) per request with hits, or None; recompute from the check's profile."""
    df = rd.find("requests")
    if df is None:
        return None
    lcol = _col(df, (r"load_time_ms", r"load_ms", r"load_time_us", r"load_us", r"load_time_s", r"load_s", r"load.*"))
    if lcol is None:
        return None
    scale = 1e-3 if str(lcol).endswith("us") else (1e3 if str(lcol).endswith("_s") else 1.0)
    load_ms = df[lcol].to_numpy(dtype=float) * scale
    tcol = _col(df, (r"hit_tokens", r"reused_tokens", r"prefix_hit_tokens"))
    if tcol is not None:
        tokens = df[tcol].to_numpy(dtype=float)
    else:
        bcols = [c for c in df.columns if re.fullmatch(r"(hit_blocks|hits)_?l[1-4]|l[1-4]_hit_blocks|hit_blocks", str(c))]
        if not bcols:
            return None
        bt = _num(dig(rd.summary, "block_tokens") or dig(rd.run, "config.block_tokens")
                  or next((dig(p.summary, "block_tokens") for p in rd.parts.values() if dig(p.summary, "block_tokens")), None))
        tokens = df[bcols].to_numpy(dtype=float).sum(axis=1) * (bt or 512.0)
    recompute_ms = None
    check = rd.analysis("check") or {}
    rc = check.get("recompute_ms")
    if isinstance(rc, list) and len(rc) == len(df):
        recompute_ms = np.asarray(rc, dtype=float)
    else:
        f = recompute_seconds(check)
        recompute_ms = None if f is None else f(tokens) * 1e3
    if recompute_ms is None:
        return None
    ok = (tokens > 0) & np.isfinite(load_ms) & np.isfinite(recompute_ms)
    if not ok.any():
        return None
    return tokens[ok], load_ms[ok], recompute_ms[ok]


def recompute_seconds(check: dict):
    """T_recompute(n) in seconds from a check result: the profile's fit, else its plain rate, else the
    profile file itself; None when the check names no recompute model."""
    prof = check.get("profile")
    fit = prof.get("fit") if isinstance(prof, dict) else None
    if isinstance(fit, dict) and all(_num(fit.get(k)) is not None for k in "abc"):
        a, b, c = (float(fit[k]) for k in "abc")
        return lambda n: a + b * np.asarray(n, float) + c * np.asarray(n, float) ** 2
    tps = _num(check.get("recompute_tokens_per_s")) or (_num(prof.get("tokens_per_s")) if isinstance(prof, dict) else None)
    if tps:
        return lambda n: np.asarray(n, float) / tps
    name = (prof.get("path") or prof.get("name")) if isinstance(prof, dict) else prof
    if name:
        try:
            from kvbench.compute.profile import load_profile
            p = load_profile(str(name))
            return lambda n: np.asarray(p.seconds(np.asarray(n).astype(np.int64)), dtype=float)
        except Exception:  # noqa: BLE001 - profile not shipped on this machine
            return None
    return None


def load_vs_recompute(runs: list[RunData]) -> go.Figure | None:
    """Per request with a prefix hit: measured load time against the time to recompute the same tokens."""
    fig = _fig("Per-request load time vs recompute time (below the diagonal, loading wins)")
    lo, hi, drawn = math.inf, 0.0, False
    for ri, rd in enumerate(runs):
        got = request_times(rd)
        if got is None:
            continue
        tokens, load_ms, rec_ms = got
        wins = float(np.mean(load_ms < rec_ms))
        n = len(tokens)
        step = max(1, n // 5000)           # keep the HTML small and SVG fast: at most ~5k points per run
        fig.add_trace(go.Scatter(x=rec_ms[::step], y=load_ms[::step], mode="markers",
                                   name=_name(runs, rd, f"requests (loading wins {100 * wins:.1f}%)"),
                                   marker=dict(size=5, opacity=0.5, color=PALETTE[ri % len(PALETTE)]),
                                   customdata=tokens[::step],
                                   hovertemplate="%{customdata:.0f} tokens: load %{y:.3g} ms, recompute %{x:.3g} ms"))
        pos = np.concatenate([load_ms[load_ms > 0], rec_ms[rec_ms > 0]])
        if pos.size:
            lo, hi = min(lo, pos.min()), max(hi, pos.max())
        drawn = True
    if not drawn:
        return None
    if hi > 0 and lo < math.inf:
        fig.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", name="load = recompute",
                                 line=dict(color="black", dash="dash", width=1)))
    both = _trace_values(fig, "x") + _trace_values(fig, "y")
    _log_axis(fig, "x", both, ms_label, "time to recompute the request's reused tokens (log)")
    _log_axis(fig, "y", both, ms_label, "measured time to load them (log)")
    return fig


# --- DWPD against retention ------------------------------------------------------------------------------

def _retention_rows(rd: RunData) -> list[dict]:
    for src in (rd.analysis("retention"), dig(rd.analysis("plan"), "retention_sweep"),
                dig(rd.analysis("plan"), "by_retention")):
        rows = src.get("rows") if isinstance(src, dict) else src
        if isinstance(rows, list) and rows and isinstance(rows[0], dict):
            return rows
    return []


def dwpd_vs_retention(runs: list[RunData]) -> go.Figure | None:
    """Steady-state DWPD and the KV tier it takes as the retention (residence time) grows; points beyond what
    the trace shows are extrapolated and drawn hollow."""
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    drawn = False
    for ri, rd in enumerate(runs):
        rows = [r for r in _retention_rows(rd) if _num(r.get("retention_s")) and _num(r.get("dwpd")) is not None]
        if not rows:
            continue
        rows.sort(key=lambda r: float(r["retention_s"]))
        x = [float(r["retention_s"]) for r in rows]
        color = PALETTE[ri % len(PALETTE)]
        symbols = ["circle-open" if r.get("extrapolated") else "circle" for r in rows]
        text = ["beyond the trace: extrapolated" if r.get("extrapolated") else "shown by the trace" for r in rows]
        fig.add_trace(go.Scatter(x=x, y=[float(r["dwpd"]) for r in rows], mode="lines+markers", text=text,
                                 name=_name(runs, rd, "DWPD (86400 / residence)"),
                                 marker=dict(symbol=symbols, size=10), line=dict(color=color, width=2.5)),
                      secondary_y=False)
        caps = [_num(r.get("capacity_bytes")) for r in rows]
        if any(c for c in caps):
            fig.add_trace(go.Scatter(x=x, y=[c or 0 for c in caps], mode="lines+markers", text=text,
                                     name=_name(runs, rd, "KV tier that keeps it"),
                                     marker=dict(symbol=symbols, size=9),
                                     line=dict(color=color, dash="dot")), secondary_y=True)
        drawn = True
    if not drawn:
        return None
    fig.update_layout(title="Retention: capacity grows and DWPD falls as KV is kept longer (hollow: beyond the trace)",
                      **_LAYOUT)
    xs = _trace_values(fig, "x")
    tv, tt = duration_ticks(min(xs), max(xs))
    fig.update_xaxes(title="retention (log)", type="log", **({"tickvals": tv, "ticktext": tt} if tv else {}))

    def spans_decades(secondary: bool) -> bool:   # series two decades apart are unreadable on a linear axis
        ys = [v for t in fig.data if bool(getattr(t, "yaxis", "y") == "y2") == secondary
              for v in (t.y or ()) if v is not None and v > 0]
        return bool(ys) and max(ys) / min(ys) > 100

    def values(secondary: bool) -> list:
        return [v for t in fig.data if bool(getattr(t, "yaxis", "y") == "y2") == secondary
                for v in (t.y or ()) if v is not None and v > 0]

    log1, log2 = spans_decades(False), spans_decades(True)
    d1, c1 = values(False), values(True)
    # every tick a full value with its unit (no bare minor 2 / 5 / 8 of plotly's log axes)
    dv, dt = log_ticks(min(d1), max(d1), count_label) if (log1 and d1) else ([], [])
    cv, ct = _bytes_ticks(min(c1), max(c1)) if c1 else ([], [])
    fig.update_yaxes(title="drive writes per day" + (" (log)" if log1 else ""), secondary_y=False,
                     **({"type": "log", "tickvals": dv, "ticktext": dt} if log1 else {"rangemode": "tozero"}))
    fig.update_yaxes(title="KV tier" + (" (log)" if log2 else ""), secondary_y=True, showgrid=False,
                     **({"type": "log", "tickvals": cv, "ticktext": ct} if log2 else
                        {"rangemode": "tozero", "tickvals": cv, "ticktext": ct}))
    return fig


# --- break-even: T_load(n) against T_recompute(n) ---------------------------------------------------------

_LAT_KEYS = (("first_byte_s", 1.0), ("t_first_byte_s", 1.0), ("latency_s", 1.0), ("first_byte_us", 1e-6),
             ("latency_us", 1e-6), ("t_first_byte_us", 1e-6))
_BW_KEYS = ("bw_bytes_per_s", "bandwidth_bytes_per_s", "read_bw_bytes_per_s", "bandwidth")


def _interp_inside(n: np.ndarray, xs, ys) -> np.ndarray:
    """Interpolate on a log-token axis inside the given points only (NaN outside: no flat extrapolation)."""
    xs = np.asarray(xs, float)
    ys = np.asarray(ys, float)
    out = np.exp(np.interp(np.log(n), np.log(xs), np.log(np.maximum(ys, 1e-12))))
    return np.where((n >= xs.min()) & (n <= xs.max()), out, np.nan)


def break_even_curves(check: dict, n: np.ndarray):
    """{tier: (load_s, break_even_tokens)} and recompute_s over token counts ``n`` from a check result."""
    curves = {}
    tiers = check.get("tiers") or {}
    bpt = _num(check.get("bytes_per_token"))
    for tier, t in tiers.items():
        if not isinstance(t, dict):
            continue
        tok, load = dig(t, "curve.tokens"), dig(t, "curve.load_s")
        if tok and load:
            curves[tier] = (_interp_inside(n, tok, load), _num(t.get("break_even_tokens")))
            continue
        lat = next((_num(t[k]) * s for k, s in _LAT_KEYS if _num(t.get(k)) is not None), None)
        bw = next((_num(t[k]) for k in _BW_KEYS if _num(t.get(k))), None)
        b = _num(t.get("bytes_per_token")) or bpt
        if lat is not None and bw and b:
            curves[tier] = (lat + n * b / bw, _num(t.get("break_even_tokens")))
    rec = None
    ctok, cs = dig(check, "recompute_curve.tokens"), dig(check, "recompute_curve.seconds")
    if ctok and cs:
        rec = _interp_inside(n, ctok, cs)
    else:
        f = recompute_seconds(check)
        rec = None if f is None else f(n)
    return curves, rec


def break_even(runs: list[RunData]) -> go.Figure | None:
    """Time to load n tokens of KV from each tier against the time to recompute them; per tier the break-even
    n* is marked (a dotted line and its value), or the figure says loading never wins."""
    fig = _fig("Break-even: load a cached prefix from a tier, or recompute it?")
    n = np.unique(np.geomspace(16, 262144, 80).astype(np.int64)).astype(float)
    drawn = False
    notes = []
    for ri, rd in enumerate(runs):
        check = rd.analysis("check")
        if not isinstance(check, dict):
            continue
        curves, rec = break_even_curves(check, n)
        if not curves and rec is None:
            continue
        if rec is not None:
            fig.add_trace(go.Scatter(x=n, y=rec * 1e3, mode="lines", name=_name(runs, rd, "recompute (prefill)"),
                                     line=dict(color="black", width=3, dash=DASHES[ri % len(DASHES)])))
        max_tok = _num(check.get("max_tokens"))
        for ti, (tier, (load_s, nstar)) in enumerate(sorted(curves.items())):
            color = PALETTE[ti % len(PALETTE)]
            who = _name(runs, rd, human(tier))
            ok = np.isfinite(load_s)
            if nstar:
                mark = f"n* = {nstar:,.0f} tokens"
            else:
                mark = "never wins" + (f" up to {max_tok:,.0f} tokens" if max_tok else "")
            fig.add_trace(go.Scatter(x=n, y=load_s * 1e3, mode="lines", name=f"load from {who} ({mark})",
                                     line=dict(color=color, dash=DASHES[ri % len(DASHES)])))
            if nstar and ok.any() and n[ok][0] <= nstar <= n[ok][-1]:
                y = float(np.interp(nstar, n[ok], load_s[ok])) * 1e3
                fig.add_trace(go.Scatter(x=[nstar], y=[y], mode="markers+text",
                                         text=[f"n*={nstar:,.0f}"], textposition="bottom right",
                                         marker=dict(size=11, color=color, symbol="circle-open", line=dict(width=2)),
                                         showlegend=False, hoverinfo="skip"))
                fig.add_vline(x=nstar, line=dict(color=color, dash="dot", width=1))
            elif nstar:
                notes.append(f"{who}: n* = {nstar:,.0f} tokens (off this axis)")
            else:
                notes.append(f"{who}: loading never wins" + (f" up to {max_tok:,.0f} tokens" if max_tok else ""))
        drawn = True
    if not drawn:
        return None
    if notes:
        fig.add_annotation(text="<br>".join(notes), xref="paper", yref="paper", x=0.01, y=0.99, showarrow=False,
                           align="left", xanchor="left", yanchor="top", bgcolor="rgba(255,255,255,0.8)",
                           font=dict(color="#b71c1c"))
    _log_axis(fig, "x", n, lambda v: f"{count_label(v)}", "prefix length n (tokens, log)")
    _log_axis(fig, "y", _trace_values(fig), ms_label, "time (log)")
    return fig


# --- steady state of a qualification's preconditioning rounds ---------------------------------------------

def steady_state_rounds(runs: list[RunData]) -> go.Figure | None:
    """Per-round metric of preconditioning with the PTS window, its mean +-10% band and the best-fit line."""
    fig = _fig("Preconditioning rounds and steady state (SNIA PTS: 5 rounds, range <= 20%, slope <= 10%)")
    drawn = False
    for ri, rd in enumerate(runs):
        ss = rd.analysis("steady_state") or dig(rd.analysis("qualify"), "steady_state")
        if not isinstance(ss, dict) or not ss.get("values"):
            continue
        y = np.asarray(ss["values"], dtype=float)
        x = np.arange(1, y.size + 1)
        color = PALETTE[ri % len(PALETTE)]
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines+markers", name=_name(runs, rd, ss.get("metric", "metric")),
                                 line=dict(color=color)))
        f, l = ss.get("first_round"), ss.get("last_round")
        if f is not None and l is not None and ss.get("mean"):
            wx = x[f:l + 1]
            m = float(ss["mean"])
            fig.add_trace(go.Scatter(x=[wx[0], wx[-1], wx[-1], wx[0], wx[0]], y=[0.9 * m, 0.9 * m, 1.1 * m, 1.1 * m, 0.9 * m],
                                     fill="toself", mode="lines", line=dict(width=0), opacity=0.25,
                                     fillcolor="green" if ss.get("reached") else "red",
                                     name=_name(runs, rd, "window mean ±10% (" + ("steady" if ss.get("reached") else "not steady") + ")")))
            wy = y[f:l + 1]
            k, b0 = np.polyfit(np.arange(wy.size), wy, 1) if wy.size >= 2 else (0.0, m)
            fig.add_trace(go.Scatter(x=wx, y=b0 + k * np.arange(wy.size), mode="lines",
                                     line=dict(color="black", dash="dash"), name=_name(runs, rd, "best-fit line")))
        drawn = True
    if not drawn:
        return None
    fig.update_xaxes(title="round")
    fig.update_yaxes(title="value", rangemode="tozero")
    return fig


# --- a measured prefill profile ---------------------------------------------------------------------------

def prefill_profile(runs: list[RunData]) -> go.Figure | None:
    """Measured prefill time against prompt length with the fitted T(n) = a + b n + c n^2."""
    fig = _fig("Prefill time vs prompt length (measured points and fit)")
    drawn = False
    for ri, rd in enumerate(runs):
        for _, s in rd.all_summaries():
            pts, fit = s.get("points"), s.get("fit")
            if s.get("kind") != "prefill" or not isinstance(pts, dict) or not pts.get("tokens"):
                continue
            n = np.asarray(pts["tokens"], dtype=float)
            t = np.asarray(pts["seconds"], dtype=float)
            color = PALETTE[ri % len(PALETTE)]
            fig.add_trace(go.Scatter(x=n, y=t * 1e3, mode="markers", marker=dict(color=color, size=9),
                                     name=_name(runs, rd, f"measured ({s.get('device', '')})")))
            if isinstance(fit, dict) and all(_num(fit.get(k)) is not None for k in "abc"):
                xs = np.geomspace(max(1.0, n.min()), n.max(), 60)
                ys = fit["a"] + fit["b"] * xs + fit["c"] * xs * xs
                fig.add_trace(go.Scatter(x=xs, y=ys * 1e3, mode="lines", line=dict(color=color),
                                         name=_name(runs, rd, f"fit a+bn+cn² (rel rms {100 * (_num(fit.get('rel_rms')) or 0):.1f}%)")))
            drawn = True
    if not drawn:
        return None
    _log_axis(fig, "x", _trace_values(fig, "x"), lambda v: f"{count_label(v)} tokens", "prompt length (log)")
    _log_axis(fig, "y", _trace_values(fig), ms_label, "prefill time (log)")
    return fig


def router_comparison(runs: list[RunData]) -> go.Figure | None:
    """``kvbench cluster``: hit ratio per tier (stacked) and TTFT p50/p99 for each router, side by side."""
    rows = []
    for rd in runs:
        s = rd.summary
        if s.get("kind") != "cluster":
            continue
        for name, r in (s.get("routers") or {s.get("router"): s}).items():
            if isinstance(r, dict) and isinstance(r.get("global"), dict):
                rows.append((rd, name, r))
    if not rows:
        return None
    fig = make_subplots(rows=1, cols=2, subplot_titles=("hit ratio by tier", "TTFT (ms)"))
    fig.update_layout(title="Routers side by side (same trace)", barmode="stack", **_LAYOUT)
    xs = [_name(runs, rd, name) for rd, name, _ in rows]
    for ti, tier in enumerate(("l1", "l2", "l3", "l4")):
        ys = [_num(dig(r, f"global.tier_hit_ratio.{tier}")) for _, _, r in rows]
        if any(y for y in ys):
            fig.add_trace(go.Bar(x=xs, y=ys, name=f"{tier} hits", marker_color=PALETTE[ti],
                                 legendgroup="hits"), row=1, col=1)
    for qi, q in enumerate(("p50", "p99")):
        fig.add_trace(go.Scatter(x=xs, y=[_num(dig(r, f"ttft_ms.{q}")) for _, _, r in rows], mode="markers+lines",
                                 name=f"TTFT {q}", marker=dict(size=10, color=PALETTE[4 + qi])), row=1, col=2)
    fig.update_yaxes(title="hit ratio", range=[0, 1], row=1, col=1)
    fig.update_yaxes(title="ms (log)", type="log", row=1, col=2)
    return fig


def sizing_pareto(runs: list[RunData]) -> go.Figure | None:
    """``kvbench cluster --sweep``: every (configuration, router) as cost per day against TTFT p99, the Pareto
    front per router joined, the TTFT target as a line, configurations that meet every target filled."""
    pts = [(rd, r) for rd in runs if rd.summary.get("kind") == "cluster"
           for r in ((rd.summary.get("sweep") or {}).get("points") or [])]
    if not pts:
        return None
    fig = _fig("Cluster sizing: cost per day against TTFT p99 (each point a configuration under a router)")
    routers = list(dict.fromkeys(r["router"] for _, r in pts))
    for i, name in enumerate(routers):
        mine = [r for _, r in pts if r["router"] == name and r["ttft_p99_ms"] is not None]
        keys = (pts[0][0].summary.get("sweep") or {}).get("keys") or []
        text = [", ".join(f"{k}={r[k]:,.4g}" for k in keys) for r in mine]
        fig.add_trace(go.Scatter(
            x=[r["usd_per_day"]["total"] for r in mine], y=[r["ttft_p99_ms"] for r in mine], mode="markers",
            name=name, text=text, marker=dict(color=PALETTE[i % len(PALETTE)], size=9,
                                              symbol=["circle" if r["meets"] else "circle-open" for r in mine])))
        front = sorted((r for r in mine if r.get("pareto")), key=lambda r: r["usd_per_day"]["total"])
        if len(front) > 1:
            fig.add_trace(go.Scatter(x=[r["usd_per_day"]["total"] for r in front], y=[r["ttft_p99_ms"] for r in front],
                                     mode="lines", line=dict(color=PALETTE[i % len(PALETTE)], dash="dot"),
                                     name=f"{name}: Pareto front", showlegend=False))
    target = ((pts[0][0].summary.get("sweep") or {}).get("targets") or {}).get("ttft_p99_s")
    if target:
        fig.add_hline(y=target * 1e3, line_dash="dash", annotation_text=f"TTFT p99 target {target:g} s")
    fig.update_xaxes(title="$ per day (GPUs, DRAM, SSD, pool; network not priced)")
    fig.update_yaxes(title="TTFT p99 (ms, log)", type="log")
    return fig


# --- steady state against capacity ----------------------------------------------------------------------
def steady_state_vs_capacity(runs: list[RunData]) -> go.Figure | None:
    """Hit ratio, steady-state DWPD and residence time against capacity on one axis, each drive class's
    endurance line (the host DWPD its rating allows at this workload's WAF) and the planned tiers marked."""
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.06,
                        subplot_titles=("hit ratio", "host DWPD (log)", "residence time (hours, log)"))
    drawn = False
    for ri, rd in enumerate(runs):
        plan = rd.analysis("plan") or {}
        rows = [r for r in (plan.get("capacity_curve") or []) if _num(r.get("capacity_bytes"))]
        if len(rows) < 2:
            continue
        color = PALETTE[ri % len(PALETTE)]
        x = [float(r["capacity_bytes"]) / 2**40 for r in rows]
        fig.add_trace(go.Scatter(x=x, y=[_num(r.get("hit_ratio")) for r in rows], mode="lines+markers",
                                 name=_name(runs, rd, "hit ratio"), line=dict(color=color)), row=1, col=1)
        filled = [r for r in rows if r.get("filled")]
        fx = [float(r["capacity_bytes"]) / 2**40 for r in filled]
        # hollow: filled but not turned over (a projection from a short window; no answer rests on it)
        marks = dict(symbol=["circle" if r.get("turned_over") else "circle-open" for r in filled], size=7)
        fig.add_trace(go.Scatter(x=fx, y=[_num(r.get("dwpd")) for r in filled], mode="lines+markers",
                                 name=_name(runs, rd, "steady-state DWPD"), line=dict(color=color), marker=marks),
                      row=2, col=1)
        fig.add_trace(go.Scatter(x=fx, y=[(_num(r.get("residence_s")) or 0) / 3600 for r in filled],
                                 mode="lines+markers", name=_name(runs, rd, "residence time"),
                                 line=dict(color=color, dash="dot"), marker=marks), row=3, col=1)
        # beyond the trace (write rate held: the line every extrapolated answer, planned stars included, sits on)
        ext = sorted((float(r["capacity_bytes"]), float(r["dwpd"]), float(r["retention_s"]))
                     for r in plan.get("retention_sweep") or []
                     if r.get("extrapolated") and _num(r.get("capacity_bytes")) and _num(r.get("dwpd")))
        xmax = x[-1]
        if ext and fx:
            last = filled[-1]
            ext = [(fx[-1] * 2**40, _num(last.get("dwpd")), _num(last.get("residence_s")))] + ext
            ex = [c / 2**40 for c, _, _ in ext]
            xmax = max(xmax, ex[-1])
            style = dict(mode="lines+markers", line=dict(color=color, dash="dash", width=1),
                         marker=dict(symbol="circle-open", size=7))
            fig.add_trace(go.Scatter(x=ex, y=[d for _, d, _ in ext], name=_name(runs, rd, "beyond the trace (write "
                                     "rate held)"), **style), row=2, col=1)
            fig.add_trace(go.Scatter(x=ex, y=[(r or 0) / 3600 for _, _, r in ext], showlegend=False, **style),
                          row=3, col=1)
        fitted = _num((plan.get("source") or {}).get("fitted_span_s"))
        if fitted:          # a fitted model's stream: residence above the fitted trace's span is its extension
            fig.add_hline(y=fitted / 3600, line=dict(color=color, dash="dash", width=1), row=3, col=1,
                          annotation_text=f"span of the trace the model was fitted on ({fitted / 3600:.3g} h): "
                                          "above, the model's extension", annotation_position="top left")
        for di, d in enumerate(plan.get("drives") or []):
            allowed = _num(d.get("rated_dwpd"))
            waf, ref = _num(d.get("workload_waf")), _num(d.get("reference_waf"))
            if allowed and waf and ref:
                c2 = PALETTE[(ri + di + 1) % len(PALETTE)]
                fig.add_trace(go.Scatter(x=[x[0], xmax], y=[allowed * ref / waf] * 2, mode="lines",
                                         line=dict(color=c2, dash="dash", width=1),
                                         name=_name(runs, rd, f"{d['class']}: rating allows "
                                                               f"{allowed * ref / waf:.3g} host DWPD")), row=2, col=1)
                cap = _num(d.get("capacity_bytes"))
                if cap and _num(d.get("dwpd_host")):
                    fig.add_trace(go.Scatter(x=[cap / 2**40], y=[d["dwpd_host"]], mode="markers",
                                             marker=dict(color=c2, size=13, symbol="star"),
                                             name=_name(runs, rd, f"planned on {d['class']} ({d['bound']} binds)")),
                                  row=2, col=1)
        drawn = True
    if not drawn:
        return None
    fig.update_layout(title="Steady state vs capacity: more capacity keeps KV longer and rewrites it less often",
                      **{**_LAYOUT, "height": 760})
    fig.update_xaxes(type="log", title="KV tier capacity (TiB, log)", row=3, col=1)
    fig.update_xaxes(type="log", row=1, col=1)
    fig.update_xaxes(type="log", row=2, col=1)
    fig.update_yaxes(range=[0, 1], row=1, col=1)
    fig.update_yaxes(type="log", row=2, col=1)
    fig.update_yaxes(type="log", row=3, col=1)
    return fig


def admission_frontier(runs: list[RunData]) -> go.Figure | None:
    """Hit ratio against steady-state host DWPD, one curve per admission policy over capacities (plan
    ``--admission``): the frontier a buyer chooses on; the planned capacity of each policy marked."""
    fig = _fig("Admission: hit ratio against DWPD (each curve: one policy over capacities; up and left is better; "
               "hollow: not turned over within the trace)")
    drawn = False
    for ri, rd in enumerate(runs):
        adm = (rd.analysis("plan") or {}).get("admission") or {}
        for pi, (name, row) in enumerate(adm.items()):
            pts = [r for r in (row.get("curve") or []) if _num(r.get("dwpd")) and r.get("filled")]
            color = PALETTE[(ri * len(adm) + pi) % len(PALETTE)]
            if pts:
                fig.add_trace(go.Scatter(
                    x=[r["dwpd"] for r in pts], y=[_num(r.get("hit_ratio")) for r in pts], mode="lines+markers",
                    name=_name(runs, rd, name), line=dict(color=color),
                    # hollow: filled but not turned over (a projection from a short window; no answer rests on it)
                    marker=dict(symbol=["circle" if r.get("turned_over") else "circle-open" for r in pts], size=7),
                    customdata=[float(r["capacity_bytes"]) / 2**40 for r in pts],
                    hovertemplate="%{customdata:.3g} TiB: hit %{y:.3f}, %{x:.3g} DWPD<extra></extra>"))
                drawn = True
            if _num(row.get("dwpd")):
                fig.add_trace(go.Scatter(x=[row["dwpd"]], y=[_num(row.get("hit_ratio"))], mode="markers",
                                         marker=dict(color=color, size=13, symbol="star" if row.get(
                                             "steady_state") == "measured" else "star-open"),
                                         name=_name(runs, rd, f"{name} at the planned capacity")))
                drawn = True
    if not drawn:
        return None
    fig.update_xaxes(type="log", title="steady-state host DWPD of the tier (log)")
    fig.update_yaxes(title="hit ratio", range=[0, 1])
    return fig


# --- the answer's figure: what keeping KV longer costs in capacity and in drive writes ------------------------
#: ticks for a log axis of durations: values a reader names (1 min, 1 h, 1 d), never 2.78 h
DURATION_TICKS = ((1.0, "1 s"), (10.0, "10 s"), (60.0, "1 min"), (600.0, "10 min"), (3600.0, "1 h"),
                  (6 * 3600.0, "6 h"), (86400.0, "1 d"), (7 * 86400.0, "1 week"), (30 * 86400.0, "30 d"),
                  (365 * 86400.0, "1 year"))


def duration_ticks(lo: float, hi: float) -> tuple[list[float], list[str]]:
    """The named durations within [lo / 2, hi x 2] (plotly pads the range), as tick values and labels."""
    got = [(v, t) for v, t in DURATION_TICKS if lo / 2 <= v <= hi * 2]
    return [v for v, _ in got], [t for _, t in got]


def _keep_curve(plan: dict) -> list[tuple[float, float, bool]]:
    """(residence s, store bytes, extrapolated) from the plan's capacity curve (tiers that turned over: the
    trace shows their residence) and its retention sweep (beyond the trace: write rate held, capacity = W x R),
    sorted by residence; the plan's own store lies on this line (it is sized by the same rule)."""
    pts = [(float(r["residence_s"]), float(r["capacity_bytes"]), False) for r in plan.get("capacity_curve") or []
           if r.get("turned_over") and _num(r.get("residence_s")) and _num(r.get("capacity_bytes"))]
    pts += [(float(r["retention_s"]), float(r["capacity_bytes"]), bool(r.get("extrapolated")))
            for r in plan.get("retention_sweep") or [] if _num(r.get("capacity_bytes")) and _num(r.get("retention_s"))]
    return sorted(set(pts))


def answer_figure(runs: list[RunData]) -> go.Figure | None:
    """Capacity (top) and DWPD (bottom) against how long KV is kept, the drive classes' endurance as horizontal
    lines, the answer's point on the curve (one run: the answer's figure)."""
    from kvbench.analysis.endurance import dwpd_at_residence
    from kvbench.report.tables import run_answer
    from kvbench.units import format_bytes, format_duration

    rd = next((r for r in runs if run_answer(r) is not None and (r.analysis("plan") or {}).get("drives")), None)
    if rd is None:
        return None
    a, plan = run_answer(rd), rd.analysis("plan")
    pts = _keep_curve(plan)
    if len([p for p in pts if p[0] >= 60.0]) >= 2:     # a store rewritten within a minute is no KV tier
        pts = [p for p in pts if p[0] >= 60.0]
    res = a.value("residence_s")
    if len(pts) < 2 or not res:
        return None
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        subplot_titles=("KV store it takes", "drive writes per day of that store"))
    x = [p[0] for p in pts]
    marks = dict(symbol=["circle-open" if p[2] else "circle" for p in pts], size=8)
    fig.add_trace(go.Scatter(x=x, y=[p[1] for p in pts], mode="lines+markers", marker=marks, name="capacity",
                             line=dict(color=PALETTE[0]),
                             hovertemplate="kept %{customdata}: %{text}<extra></extra>",
                             customdata=[format_duration(v) for v in x], text=[format_bytes(p[1]) for p in pts]),
                  row=1, col=1)
    fig.add_trace(go.Scatter(x=x, y=[float(dwpd_at_residence(v)) for v in x], mode="lines+markers", marker=marks,
                             name="DWPD = 1 day / time kept", line=dict(color=PALETTE[1])), row=2, col=1)
    lo, hi = min(x + [res]), max(x + [res])
    for i, d in enumerate(plan.get("drives") or []):      # legend entries, not annotations: nothing overprints
        allowed, waf, ref = _num(d.get("rated_dwpd")), _num(d.get("workload_waf")), _num(d.get("reference_waf"))
        if allowed and waf and ref:
            y = allowed * ref / waf
            fig.add_trace(go.Scatter(x=[lo / 2, hi * 2], y=[y, y], mode="lines",
                                     line=dict(color=PALETTE[(i + 2) % len(PALETTE)], dash="dash", width=1.5),
                                     name=f"{d['class']}: its rating allows {y:.3g} host DWPD"), row=2, col=1)
    store = a.value("store_bytes")
    fig.add_trace(go.Scatter(x=[res], y=[store], mode="markers", marker=dict(symbol="star", size=16, color="black"),
                             name=f"{'the answer' if a.choice == 'dram+ssd' else 'the SSD tier, if built'}: KV kept "
                                  f"{format_duration(res)} in a {format_bytes(store, binary=False)} store"),
                  row=1, col=1)
    per_drive = a.value("dwpd_host_per_drive")       # what the answer box states (the store's own DWPD, 1 day / T,
    if per_drive:                                   # spread over the whole drives that hold it)
        fig.add_trace(go.Scatter(x=[res], y=[float(per_drive)], mode="markers",
                                 marker=dict(symbol="star", size=16, color="black"),
                                 name=f"per drive: {per_drive:.3g} host DWPD ({a.value('drives'):,} drives hold the "
                                      f"store; 1 day / time kept is the store's {float(dwpd_at_residence(res)):.3g})"),
                      row=2, col=1)
    tv, tt = duration_ticks(lo, hi)
    fig.update_layout(title=f"Keeping KV longer: a larger store, fewer drive writes (hollow: beyond the trace)",
                      **{**_LAYOUT, "height": 620})
    for row in (1, 2):
        fig.update_xaxes(type="log", tickvals=tv, ticktext=tt, row=row, col=1)
    fig.update_xaxes(title="how long KV is kept before it is rewritten (log)", row=2, col=1)
    caps = [p[1] for p in pts] + [store]
    cv, ct = log_ticks(min(caps), max(caps), lambda v: format_bytes(v, binary=False))   # as drives are sold
    fig.update_yaxes(type="log", title="store (log)", tickvals=cv, ticktext=ct, row=1, col=1)
    dw = [float(dwpd_at_residence(v)) for v in x] + [t.y[0] for t in fig.data if t.mode == "lines" and len(t.y) == 2]
    dw += [float(per_drive)] if per_drive else []
    dv, dt = log_ticks(min(dw), max(dw), count_label)
    fig.update_yaxes(type="log", title="DWPD (log)", tickvals=dv, ticktext=dt, row=2, col=1)
    return fig


def dwpd_at_capacity_per_gpu(runs: list[RunData]) -> go.Figure | None:
    """Host DWPD per drive at a fixed capacity per GPU for each shipped compute profile (plan --per-gpu-capacity
    --sweep-profiles), against the prefill bytes each GPU writes (U P b); the drive classes' ratings as lines."""
    fig = _fig("DWPD at a fixed capacity per GPU: every computed token's KV is written, so DWPD = a U P b 86400 / C "
               "rises with the prefill rate and the model's KV bytes per token")
    drawn, classes = False, {}
    for ri, rd in enumerate(runs):
        plan = rd.analysis("plan") or {}
        fc = plan.get("fixed_capacity") or {}
        rows = fc.get("sweep") or ([fc["at"]] if fc.get("at") else [])
        if not rows:
            continue
        cap = float(rows[0]["capacity_per_gpu_bytes"])
        fig.add_trace(go.Scatter(
            x=[r["write_bytes_per_s_per_gpu"] / 1e9 for r in rows], y=[r["dwpd"] for r in rows],
            mode="markers+text", text=[r["profile"] or r["model"] for r in rows], textposition="top center",
            marker=dict(color=PALETTE[ri % len(PALETTE)], size=10),
            name=_name(runs, rd, f"{cap / 1e12:g} TB per GPU"),
            customdata=[[r["model"], r["tokens_per_s_per_gpu"], r["bytes_per_token"], r["residence_s"] / 3600]
                        for r in rows],
            hovertemplate="%{customdata[0]}: %{customdata[1]:,.0f} tok/s x %{customdata[2]:,.0f} B/token: "
                          "%{y:.3g} DWPD, KV kept %{customdata[3]:.3g} h<extra></extra>"))
        drawn = True
        for name, cls in ((plan.get("prices") or {}).get("ssd") or {}).items():
            if _num(cls.get("dwpd")):
                classes[name] = float(cls["dwpd"])
    if not drawn:
        return None
    for i, (name, dwpd) in enumerate(sorted(classes.items(), key=lambda kv: kv[1])):
        fig.add_hline(y=dwpd, line=dict(dash="dash", color=PALETTE[(i + 3) % len(PALETTE)]),
                      annotation_text=f"{name}: {dwpd:g} DWPD rated", annotation_position="bottom right")
    fig.update_xaxes(title="KV written per GPU (GB/s) = utilization x computed prefill tok/s x KV bytes per token")
    fig.update_yaxes(title="host DWPD per drive", type="log")
    return fig


#: the report's figures, in order (section title, builder)
FIGURES = (
    ("Latency", latency_tail),
    ("Load time per request (or Engram step)", request_time_tail),
    ("Bandwidth and IOPS over time", throughput_over_time),
    ("Hit ratio and capacity", hit_ratio_curve),
    ("Load vs recompute per request", load_vs_recompute),
    ("Break-even prefix length", break_even),
    ("Steady state vs capacity", steady_state_vs_capacity),
    ("Endurance vs retention", dwpd_vs_retention),
    ("Admission: hit ratio vs DWPD", admission_frontier),
    ("DWPD at a fixed capacity per GPU", dwpd_at_capacity_per_gpu),
    ("Steady state", steady_state_rounds),
    ("Prefill profile", prefill_profile),
    ("Cluster routers", router_comparison),
    ("Cluster sizing: cost against TTFT", sizing_pareto),
)

#: one line under each figure saying what to look at (a figure without one shows its builder's docstring)
CAPTIONS = {
    "answer_figure": "A store that keeps KV for T is rewritten once every T: DWPD = 1 day / T, and it must hold T of "
                     "writes (capacity = write rate x T). Where the DWPD line falls below a drive class's dashed "
                     "line, that class lasts its warranty. The stars are the answer: its store (top) and the host "
                     "DWPD each drive sees (bottom, as the answer box states it: at or below the line, since whole "
                     "drives hold at least the store). Hollow points lie beyond what the trace shows (write rate "
                     "held: capacity an upper bound).",
    "latency_tail": "Each I/O's latency, submit to completion, per tier and op. Read right to left: where a line "
                    "turns up is where the tail begins; lines stop at the rarest percentile their sample supports.",
    "request_time_tail": "Time to load one request's whole reused prefix (all its blocks, every tier), or one "
                         "Engram step's rows. Compare with the time to recompute (break-even chart) or with the "
                         "prefetch window.",
    "throughput_over_time": "Bandwidth and IOPS each second of the run, per tier and op: a steady line is a "
                            "steady device; dips are stalls, steps are the workload changing.",
    "hit_ratio_curve": "Share of block references found cached against cache size. The knee marks where more "
                       "capacity stops paying; dashed lines are the capacities this run used.",
    "load_vs_recompute": "One dot per request with a prefix hit: below the dashed diagonal, loading the cached "
                         "prefix was faster than recomputing it.",
    "break_even": "Loading wins where a tier's line is below the black recompute line: from the break-even "
                  "prefix n* up. A tier with no n* never wins in the range checked.",
    "dwpd_vs_retention": "Keeping KV longer takes a larger tier that is rewritten less often: DWPD = 1 day / the "
                         "retention, capacity = write rate x retention. Hollow points lie beyond what the trace "
                         "shows and are extrapolated (capacity an upper bound).",
    "steady_state_vs_capacity": "Read left to right: a larger tier hits more, keeps KV longer and is rewritten "
                                "less often. A tier's write rate is its miss ratio after its first eviction times "
                                "the trace's mean load, so the hour of the day it fills at does not change it. "
                                "Where the DWPD line crosses a drive class's dashed rating line, that "
                                "class's endurance is met; stars mark the planned tier per class. Hollow points fill "
                                "but do not turn over within the trace: a projection from a window shorter than their "
                                "residence, which no answer uses (it holds the rate at the longest residence shown). "
                                "For a fitted workload "
                                "model's stream, residence above the dashed span line rests on the model's "
                                "extension, not on what the fitted trace showed.",
    "steady_state_rounds": "Preconditioning rounds: steady state is reached when the last 5 rounds stay within "
                           "the band.",
    "admission_frontier": "What each admission policy buys: hit ratio against the DWPD it costs, one curve per "
                          "policy over capacity; up and to the left is better, the star is the planned capacity. "
                          "Hollow points fill but do not turn over within the trace (a projection from a short "
                          "window); a hollow star is the planned capacity's answer with the write rate held at the "
                          "longest residence the policy shows, an upper bound.",
    "dwpd_at_capacity_per_gpu": "At a fixed capacity C per GPU (e.g. ~16 TB), write-through writes every "
                                "computed token's KV: host DWPD = admitted share x utilization x computed prefill "
                                "tok/s x KV bytes/token x 86400 / C, whatever the hit ratio. Each point is a shipped "
                                "compute profile (model x GPU); dashed lines are the drive classes' ratings.",
    "router_comparison": "Each router side by side on the same trace: keeping a conversation on one node raises "
                         "the hit ratio and lowers TTFT, as long as the load stays balanced.",
    "sizing_pareto": "Each configuration of the sweep under each router: what it costs per day and its TTFT p99; "
                     "filled points meet every target, the dotted line joins each router's cheapest-for-its-TTFT "
                     "configurations.",
    "prefill_profile": "Measured prefill time per prompt length and the fitted T(n) = a + bn + cn² that the "
                       "load-vs-recompute check uses.",
}


def caption(builder) -> str:
    """The caption of a figure builder: CAPTIONS, else the first line of its docstring."""
    got = CAPTIONS.get(builder.__name__)
    if got:
        return got
    return ((builder.__doc__ or "").strip().splitlines() or [""])[0]

