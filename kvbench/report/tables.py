"""Tables for the report (pure: runs in, escaped HTML out): the verdict summary, qualification criteria and
the environment. Several runs become columns side by side; rows that differ between runs are highlighted.
"""

from __future__ import annotations

import html
import math
import re

from kvbench.report.figures import chosen_capacities, is_key_sampled
from kvbench.report.labels import human, plain_number
from kvbench.report.rundata import RunData, dig, flatten
from kvbench.units import MISSING, format_bytes, format_duration, format_optional, format_rate, format_years


def _fmt_number(v: float) -> str:
    return plain_number(v)            # never exponent notation in a table


def fmt(key: str, v) -> str:
    """Format a value by what its key says it holds (bytes, rate, microseconds, ratio)."""
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (int, float)):
        f = float(v)
        k = key.lower()
        if k.endswith("years") or "years." in k:        # a lifetime: inf (nothing written) said in words
            return format_years(f) if not math.isnan(f) else "—"
        if not math.isfinite(f):
            return "—"
        if re.search(r"(blocks|requests|slots|copies|count|_n)$", k):      # counts are counts, not bytes
            return _fmt_number(f)
        if k.endswith(("bytes_per_s", "bw")) or "_bytes_per_s" in k:
            return format_rate(f)
        if k in ("bs", "config.bs") or k.endswith(".bs") or k.endswith("bytes") or "capacity" in k or re.fullmatch(r"(config\.)?l[1-4](_capacity)?", k) \
                or re.search(r"(^|[._])(size|dram|page|scale_to|segment|chunk)$", k) or "_bytes." in k or k.startswith("capacity_bytes"):
            return format_bytes(f)
        if re.search(r"(_us|lat_us\.[a-z0-9.]+|fetch_us\.[a-z0-9.]+)$", k) or "_us." in k:
            return format_duration(f * 1e-6)
        if "_ms." in k or k.endswith("_ms"):
            return format_duration(f * 1e-3)
        if k.endswith("per_s"):
            return _fmt_number(f)
        if k.endswith(("_s", "seconds")) or "_s." in k:
            return format_duration(f)
        if "ratio" in k or k.endswith(("fraction", "wins")):
            return f"{f:.4f}"
        return _fmt_number(f)
    return str(v)                     # whole: explanations (key sampling, notes) are read, not skimmed


def _esc(s) -> str:
    return html.escape(str(s), quote=True)


# --- the answer -------------------------------------------------------------------------------------------
def answer_sentences(rd: RunData) -> list[str]:
    """The plan's answer in a few sentences (kvbench run's or kvbench plan's), or none."""
    for src in (rd.summary.get("answer"), (rd.analysis("plan") or {}).get("answer")):
        if isinstance(src, dict) and src.get("sentences"):
            return [str(x) for x in src["sentences"]]
    return []


def run_answer(rd: RunData):
    """The job's :class:`kvbench.analysis.answer.Answer` (``kvbench run``'s summary), or None: read by the
    result contract (:attr:`kvbench.metrics.results.Summary.answer`)."""
    from kvbench.metrics.results import Summary

    return Summary.from_json(rd.summary, rd.path / "summary.json").answer


def answer_box(a) -> str:
    """The answer box: the rows every view prints (:func:`kvbench.analysis.answer.rows`), provenance beside
    each, the decision first."""
    from kvbench.analysis.answer import rows

    body = []
    for i, (label, text, kind) in enumerate(rows(a)):
        cls = f" class='decision {a.decision}'" if i == 0 else ""
        body.append(f"<tr{cls}><th>{_esc(label)}</th><td>{_esc(text)}</td><td class='prov {_esc(kind)}'>"
                    f"{_esc(kind)}</td></tr>")
    body += [f"<tr><th>note</th><td colspan='2'>{_esc(n)}</td></tr>" for n in a.notes]
    return f"<table class='answer-box'><tbody>{''.join(body)}</tbody></table>"


def answer_html(runs: list[RunData]) -> str | None:
    """Per run: the job's answer box, or (a plan run) the plan's sentences."""
    parts = []
    for rd in runs:
        a = run_answer(rd)
        if a is not None:
            head = f"<p><b>{_esc(rd.label)}</b></p>" if len(runs) > 1 else ""
            parts.append(head + answer_box(a))
            continue
        lines = answer_sentences(rd)
        if lines:
            head = f"<p><b>{_esc(rd.label)}</b></p>" if len(runs) > 1 else ""
            parts.append(f"{head}<ul class='answer'>{''.join(f'<li>{_esc(x)}</li>' for x in lines)}</ul>")
    return "".join(parts) or None


# --- the verdict summary ----------------------------------------------------------------------------------

#: headline fields per run kind: (label, dotted path into the summaries); absent fields are skipped
HEADLINES = {
    "io": (("pattern", "rw"), ("block size", "bs"), ("queue depth per worker", "qd"), ("workers", "workers"),
           ("engine", "engine"), ("IOPS", "iops"), ("bandwidth", "bw_bytes_per_s"), ("I/Os", "ios"), ("runtime", "runtime_s"),
           ("p50 latency", "lat_us.p50"), ("p99 latency", "lat_us.p99"), ("p99.9 latency", "lat_us.p99.9"),
           ("max latency", "lat_us.max"), ("open-loop issue lag p99", "issue_lag_us.p99"),
           ("open-loop issue lag max", "issue_lag_us.max")),
    "replay-kv": (("requests through the tier simulation", "requests"), ("requests issued (timed I/O)", "requests_issued"),
                  ("requests in the trace", "trace_requests"), ("replayed fraction (issued / in the trace)", "replayed_fraction"),
                  ("load time p50", "load_time_ms.p50"), ("load time p99", "load_time_ms.p99"),
                  ("application write amplification", "app_write_amplification"), ("verify errors", "verify_errors")),
    "replay-engram": (("rows per token", "rows_per_token"), ("DRAM hit ratio", "dram_hit_ratio"),
                      ("read amplification", "read_amplification"), ("fetch p50", "fetch_us.p50"),
                      ("fetch p99", "fetch_us.p99"), ("window miss ratio", "window_miss_ratio"), ("IOPS", "iops")),
    "cluster": (("router", "router"), ("nodes", "nodes_count"), ("requests", "requests"),
                ("measured from request (warm-up before it)", "measured_from.request"),
                ("stationarity of the span measured", "stationarity.verdict"),
                ("hit ratio", "global.hit_ratio"), ("TTFT p50", "ttft_ms.p50"), ("TTFT p99", "ttft_ms.p99"),
                ("request imbalance (max/mean)", "imbalance"), ("duplication (copies per block)", "duplication"),
                ("prefill tokens saved", "prefill_tokens_saved"), ("L4 read bandwidth", "l4.read_bytes_per_s"),
                ("L4 peak pool utilisation", "l4.peak_pool_utilisation"),
                ("L3 host DWPD per node, mean", "wear.l3.dwpd_host_mean"),
                ("L3 host DWPD, busiest node", "wear.l3.dwpd_host_busiest"),
                ("L3 rating-equivalent DWPD, busiest node", "wear.l3.dwpd_rating_equivalent_busiest"),
                ("KV kept on the busiest node's L3", "wear.l3.residence_s_busiest"),
                ("L3 lifetime, busiest node (years)", "wear.l3.lifetime_years_busiest"),
                ("L4 links: mean utilisation", "links.mean"), ("L4 links: p99 utilisation", "links.p99"),
                ("L4 links: time saturated", "links.saturated_fraction")),
    "prefill": (("model", "model"), ("device", "device"), ("dtype", "dtype"),
                ("prefill tokens/s at the reference length", "tokens_per_s"), ("reference length", "reference_tokens")),
}
_TIER_FIELDS = (("hit ratio", "hit_ratio"), ("capacity", "capacity_bytes"), ("read bytes", "read_bytes"),
                ("write bytes", "write_bytes"), ("read bandwidth", "read_bw_bytes_per_s"),
                ("write bandwidth", "write_bw_bytes_per_s"), ("read p50", "read_lat_us.p50"),
                ("read p99", "read_lat_us.p99"), ("read p99.9", "read_lat_us.p99.9"))


def _first(rd: RunData, path: str):
    """A headline value: from the summaries, else from the run's config (rw, bs, qd of older io runs)."""
    for src in [s for _, s in rd.all_summaries()] + [r.run.get("config") or {} for r in (rd, *rd.parts.values())]:
        v = dig(src, path)
        if v is not None and not isinstance(v, (dict, list)):
            return v
    return None


def verdict_rows(rd: RunData) -> list[tuple[str, str, str]]:
    """(section, label, formatted value) rows summarising one run's verdicts and headline numbers."""
    rows: list[tuple[str, str, str]] = []
    # data a run could not vouch for stands out first: wrong data read back, numbers not measured
    for name, s in rd.all_summaries():
        bad = s.get("verify_errors") or dig(s, "verify.mismatches")
        where = f" ({name.rstrip('.')})" if name else ""
        if bad:
            checked = s.get("verify_checked") or dig(s, "verify.checked")
            rows.append(("data", f"verify{where}", f"FAIL: {bad} of {checked} checked reads returned wrong data"))
        if s.get("status") == "not-measured":
            rows.append(("data", f"measurement{where}", f"FAIL: not measured: {s.get('not_measured', '')}"))
    kinds = {rd.kind, *(p.kind for p in rd.parts.values())}
    for kind, fields in HEADLINES.items():
        if kind in kinds or any(k.replace("-", "_") == kind.replace("-", "_") for k in kinds):
            for label, path in fields:
                v = _first(rd, path)
                if v is not None:
                    rows.append(("measured", label, fmt(path, v)))
    # per tier: measured replay numbers
    sampled = is_key_sampled(rd)
    modelled = " (modelled full size)" if sampled else ""
    for _, s in rd.all_summaries():
        for tier, t in sorted((s.get("tiers") or {}).items()):
            if not isinstance(t, dict):
                continue
            for label, path in _TIER_FIELDS:
                v = dig(t, path)
                if v is not None and not isinstance(v, (dict, list)):
                    if path == "capacity_bytes":
                        label += modelled
                    rows.append((f"tier {tier}", label, fmt(path, v)))
            dev = t.get("simulated_capacity_bytes")
            if sampled and isinstance(dev, (int, float)):
                rows.append((f"tier {tier}", "capacity on the device (key sample)", fmt("capacity_bytes", dev)))
    # capacity per tier: what the run used and what the plan says each target needs
    for tier, b in sorted(chosen_capacities(rd).items()):
        rows.append(("capacity", f"{tier} used{modelled}", format_bytes(b)))
    if sampled:
        # the sampled replay's rate (the whole-trace simulation beside it is not sampled: rate 1)
        rate = min(float(s["sample_rate"]) for _, s in rd.all_summaries()
                   if isinstance(s.get("sample_rate"), (int, float)) and 0 < s["sample_rate"] < 1)
        rows.append(("capacity", "key sampling", f"the replay kept a {plain_number(rate)} share of the blocks (by key "
                     "hash) and held that share of each capacity on the device; hit ratios and byte volumes are "
                     "estimates for the modelled full-size cache"))
    plan = rd.analysis("plan")
    if isinstance(plan, dict):
        for k, v in flatten(plan.get("capacity_bytes") or {}).items():
            tier, _, target = k.partition(".")
            what = "SSD store needed (before whole drives)" if tier == "l3" else f"{tier} needed"
            rows.append(("capacity", f"{what} @ {target}" if target else f"needed for {k}", fmt("capacity_bytes", v)))
        headline = (("dwpd", "required DWPD"), ("waf", "write amplification (device)"),
                    ("lifetime_years", "lifetime (years)"), ("knee_bytes", "knee capacity"),
                    ("ssd_per_dram_gb", "SSD over-sizing for endurance (SSD / hit capacity)"))
        if run_answer(rd) is not None:      # the answer box states DWPD, lifetime and the SSD per drive
            headline = tuple(h for h in headline if h[0] in ("waf", "knee_bytes"))
        for key, label in headline:
            v = plan.get(key)
            if isinstance(v, dict):
                for k2, v2 in flatten(v).items():
                    rows.append(("endurance" if key != "knee_bytes" else "capacity", f"{label} {k2}", fmt(key, v2)))
            elif v is not None:
                rows.append(("endurance" if key in ("dwpd", "waf", "lifetime_years") else "capacity", label, fmt(key, v)))
    # tier probes: what each tier can do at the replay's I/O size
    for pr in rd.analysis("probes") or []:
        if isinstance(pr, dict) and pr.get("name"):
            tag = "probe (suspect, excluded)" if pr.get("excluded") else "probe"
            rows.append((f"tier {pr['name']}", f"{tag}: bandwidth at {fmt('io_bytes', pr.get('io_size'))}, QD{format_optional(pr.get('qd'), '?')}",
                         fmt("bw_bytes_per_s", pr.get("bandwidth_bytes_per_s"))))
            rows.append((f"tier {pr['name']}", f"{tag}: first byte (QD1 p50)", fmt("first_byte_s", pr.get("first_byte_s"))))
            if pr.get("excluded"):
                rows.append((f"tier {pr['name']}", f"{tag}: why", "; ".join(pr.get("suspect") or [])))
    # the one load path per tier the plan, the check and this report use, and where it came from
    for tier, lp in sorted((dig(rd.analysis("load_paths") or {}, "tiers") or {}).items()):
        if isinstance(lp, dict):
            rows.append(("load path", f"{tier}: bandwidth, first byte", f"{fmt('bw_bytes_per_s', lp.get('bandwidth_bytes_per_s'))}, "
                         f"{format_optional(lp.get('first_byte'), 'first byte unmeasured')}"))
            rows.append(("load path", f"{tier}: source", format_optional(lp.get("source"), "not stated")))
    # load vs recompute per tier (the inequality T_load(n) < T_recompute(n))
    lvr = "load vs recompute"
    check = rd.analysis("check")
    if isinstance(check, dict):
        for tier, t in sorted((check.get("tiers") or {}).items()):
            if not isinstance(t, dict):
                continue
            n = t.get("break_even_tokens")
            rows.append((lvr, f"{tier} break-even n*", "never (recompute wins)" if n is None else f"{float(n):,.0f} tokens"))
            if t.get("verdict"):
                rows.append((lvr, f"{tier} verdict", str(t["verdict"])))
            for key in ("load_wins_fraction", "ttft_saved_ms", "wins_fraction"):
                v = t.get(key)
                if isinstance(v, dict):
                    for k2, v2 in v.items():
                        rows.append((lvr, f"{tier} {human(key)} {k2}", fmt(f"{key}.{k2}", v2)))
                elif v is not None:
                    rows.append((lvr, f"{tier} {human(key)}", fmt(key, v)))
        hits = dig(check, "run.hits")
        if isinstance(hits, dict):
            if hits.get("wins_fraction") is not None:
                rows.append((lvr, "requests where loading won", f"{100 * float(hits['wins_fraction']):.1f}%"))
            negative = False
            for k in ("p50", "p99"):
                v = dig(hits, f"ttft_saved_s.{k}")
                if v is not None:
                    rows.append((lvr, f"TTFT saved {k}", fmt("ttft_saved_s", v)))
                    negative |= isinstance(v, (int, float)) and v < 0
            if negative:
                rows.append((lvr, "TTFT saved below zero", "for these requests loading the cached prefix took longer "
                             "than recomputing it would have: time to first token grew by that much"))
    note = dig(rd.run, "config.profile_note")
    if note:
        rows.append((lvr, "note", str(note)))
    for i, note in enumerate(n for n in (rd.summary.get("notes") or []) if isinstance(n, str)):
        rows.append((lvr, f"note {i + 1}", note))         # e.g. why the probe's first byte and check's differ
    q = rd.analysis("qualify") or (rd.summary.get("qualify") if isinstance(rd.summary.get("qualify"), dict) else None)
    if isinstance(q, dict) and "passed" in q:
        crit = q.get("criteria") or []
        npass = sum(1 for c in crit if c.get("passed"))
        v = str(q.get("verdict") or ("pass" if q["passed"] else "fail"))
        rows.append(("qualification", f"profile {q.get('profile', '')}".strip(),
                     v.upper() + f" ({npass}/{len(crit)} criteria passed)" + (" (--quick)" if q.get("quick") else "")))
    return rows


def verdict_table(runs: list[RunData]) -> str:
    """The verdict summary: one column per run; partial runs are marked in their header."""
    per_run = [verdict_rows(rd) for rd in runs]
    keys: list[tuple[str, str]] = []
    for rows in per_run:
        for sec, label, _ in rows:
            if (sec, label) not in keys:
                keys.append((sec, label))
    order = ("data", "qualification", "load vs recompute", "capacity", "endurance", "measured")
    keys.sort(key=lambda k: (order.index(k[0]) if k[0] in order else len(order), k[0]))
    values = [{(s, l): v for s, l, v in rows} for rows in per_run]
    head = "".join(f"<th>{_esc(rd.label)}<br><span class='kind'>{_esc(rd.kind)}</span> {status_badge(rd)}</th>" for rd in runs)
    body = []
    for sec, label in keys:
        cells = [values[i].get((sec, label), "—") for i in range(len(runs))]
        cls = " class='differs'" if len(runs) > 1 and len(set(cells)) > 1 else ""
        tds = "".join(f"<td class='{_verdict_class(c)}'>{_esc(c)}</td>" for c in cells)
        body.append(f"<tr{cls}><th class='sec'>{_esc(sec)}</th><th>{_esc(label)}</th>{tds}</tr>")
    if not body:
        body.append(f"<tr><td colspan='{len(runs) + 2}'>no summary numbers were written by these runs</td></tr>")
    return (f"<table class='verdict'><thead><tr><th></th><th></th>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>")


def _verdict_class(cell: str) -> str:
    c = cell.lower()
    if c.startswith("pass") or "load wins" in c or c.startswith("load"):
        return "pass"
    if c.startswith("fail") or c.startswith("never") or "recompute wins" in c:
        return "fail"
    return ""


def status_badge(rd: RunData) -> str:
    if not rd.partial:
        return "<span class='badge ok'>complete</span>"
    return f"<span class='badge partial'>{_esc(rd.status.upper())}</span>"


# --- qualification criteria -------------------------------------------------------------------------------

def criteria_table(runs: list[RunData]) -> str | None:
    """Pass/fail per criterion for every qualified run, or None when no run was a qualification."""
    parts = []
    for rd in runs:
        q = rd.analysis("qualify")
        if not isinstance(q, dict) or not q.get("criteria"):
            continue
        rows = []
        for c in q["criteria"]:
            ok = c.get("passed")
            outcome = c.get("outcome") or ("pass" if ok else "fail")
            verdict = outcome.upper().replace("-", " ") + (f": {c['reason']}" if c.get("reason") else "")
            rows.append("<tr>" + "".join(f"<td>{_esc(x)}</td>" for x in (
                c.get("name", ""), c.get("workload", ""), c.get("metric", ""),
                f"{c.get('op', '')} {fmt(str(c.get('metric', '')), c.get('threshold'))}",
                fmt(str(c.get("metric", "")), c.get("value")))) +
                f"<td class='{'pass' if ok else 'fail'}'>{verdict}</td></tr>")
        v = str(q.get("verdict") or ("pass" if q.get("passed") else "fail"))
        title = (f"{_esc(rd.label)}: profile {_esc(q.get('profile', ''))} — {v.upper()}"
                 + (" (shortened: --quick)" if q.get("quick") else ""))
        parts.append(f"<h3 class='{'pass' if q.get('passed') else 'fail'}'>{title}</h3>"
                     "<table class='criteria'><thead><tr><th>criterion</th><th>workload</th><th>metric</th>"
                     f"<th>threshold</th><th>measured</th><th>verdict</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")
    return "".join(parts) or None


# --- environment ------------------------------------------------------------------------------------------

def environment_rows(rd: RunData) -> dict[str, str]:
    """Flattened environment of a run and of its step folders: command, version, host, targets, config."""
    out: dict[str, str] = {}
    for prefix, r in [("", rd)] + [(f"{k}: ", p) for k, p in rd.parts.items()]:
        run = r.run
        cmd = run.get("command")
        if cmd is not None:
            out[f"{prefix}command"] = " ".join(cmd) if isinstance(cmd, list) else str(cmd)
        for key in ("kvbench_version", "version", "started", "start_time", "created"):
            if run.get(key) is not None:
                out[f"{prefix}{key}"] = str(run[key])
        for k, v in flatten(run.get("environment") or {}).items():
            out[f"{prefix}{k}"] = fmt(k, v)
        for k, v in flatten({"targets": run.get("targets")} if run.get("targets") else {}).items():
            out[f"{prefix}{k}"] = fmt(k, v)
        for k, v in flatten(run.get("config") or {}).items():
            out[f"{prefix}config.{k}"] = fmt(k, v)
    return out


def environment_table(runs: list[RunData]) -> str:
    per = [environment_rows(rd) for rd in runs]
    keys: list[str] = []
    for d in per:
        for k in d:
            if k not in keys:
                keys.append(k)
    head = "".join(f"<th>{_esc(rd.label)}</th>" for rd in runs)
    body = []
    for k in keys:
        cells = [d.get(k, "—") for d in per]
        cls = " class='differs'" if len(runs) > 1 and len(set(cells)) > 1 else ""
        body.append(f"<tr{cls}><th>{_esc(_env_label(k))}</th>" + "".join(f"<td>{_esc(c)}</td>" for c in cells) + "</tr>")
    if not body:
        body.append(f"<tr><td colspan='{len(runs) + 1}'>run.json holds no environment</td></tr>")
    return f"<table class='env'><thead><tr><th></th>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _env_label(key: str) -> str:
    """An environment row's key in words, path kept: ``config.sizing.footprint_bytes`` -> ``config ›
    sizing › footprint`` (no raw ``_bytes``/``_per_s`` names as visible labels)."""
    head, sep, rest = key.rpartition(": ")
    parts = [human(p) for p in rest.split(".")]
    return head + sep + " › ".join(parts)

