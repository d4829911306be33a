"""The answer, computed once (kvbench.analysis.answer): figures by hand arithmetic, decisions that agree with
their cost line, suspect measurements unused, and the three views (terminal, JSON, report) printing one object."""

from __future__ import annotations

import copy
import html
import json
import math

import pytest

from kvbench.analysis.answer import (FIGURE_KEYS, RECOMPUTE_STATEMENT, Answer, Sources, build_answer, fmt, rows,
                                     text_table)
from kvbench.errors import UsageError
from kvbench.metrics.run import to_jsonable

TB = 1e12


def _plan(*, write=2e9, store=21.5 * TB, hit=1.3 * TB, bound="endurance", gpu=47.0, gpu_wins=120.0,
          fraction=0.1, recompute=135.0, probe_bw=6e9) -> dict:
    """A plan.json as kvbench plan writes it, reduced to what the answer reads; numbers chosen by hand."""
    usd = {"dram": 2.5, "ssd": 1.2, "gpu": gpu, "total": 2.5 + 1.2 + gpu}
    if gpu_wins is not None:
        usd["total_loading_wins"] = 2.5 + 1.2 + gpu_wins
    row = {"class": "tlc", "capacity_bytes": store, "store_bytes": store, "hit_capacity_bytes": hit, "bound": bound,
           "hit_ratio": 0.64, "write_bytes_per_s": write, "workload_waf": 1.0, "reference_waf": 8.1,
           "reference_note": "reference WAF 8.1", "steady_state": "measured", "basis": "turned over",
           "workload_waf_source": "given", "usd_per_day": usd,
           "loading_wins": {"hit_tokens": 4e7, "fraction": fraction} if gpu_wins is not None else None}
    return {
        "targets": [0.9], "answer": {"target": "0.9"}, "requests": 4000, "rate": 4.0, "bytes_per_token": 131072,
        "per_target": {"0.9": {"need_bytes": hit, "need": "hit-ratio target 0.9", "l2_bytes": 0.9 * TB,
                               "ssd_class": "tlc"}},
        "drives": [row], "load_tier": {"name": "l3", "bandwidth_bytes_per_s": probe_bw} if gpu_wins is not None else None,
        "capacity_curve": [{"capacity_bytes": 0.1 * TB, "hit_ratio": 0.2}, {"capacity_bytes": 100 * TB,
                                                                              "hit_ratio": 0.64}],
        "plans": {"0.9": [{"name": "recompute", "usd_per_day": {"total": recompute}}]},
        "prices": {"name": "test", "date": "2025", "status": "assumption", "path": "prices.toml",
                   "dram_usd_per_gb": 3.65, "dram_service_years": 5.0, "gpu_usd_per_hour": 3.6,
                   "ssd": {"tlc": {"usd_per_gb": 0.1, "dwpd": 1.0, "warranty_years": 5.0, "reference_waf": 8.1,
                                   "drive_capacity_bytes": 7.68 * TB, "label": "TLC 1 DWPD"}}},
        "compute": {"profile": "p"},
    }


def _check(l3="load", l2="recompute", bw=6e9, suspect=None) -> dict:
    tiers = {"l2": {"bandwidth_bytes_per_s": 2e9, "latency_s": 8e-5, "source": "fit", "reference_tokens": 16384,
                    "break_even_tokens": None, "margin_at_reference_s": -0.5},
             "l3": {"bandwidth_bytes_per_s": bw, "latency_s": 1e-4, "source": "fit", "reference_tokens": 16384,
                    "break_even_tokens": 4096 if l3 == "load" else None,
                    "margin_at_reference_s": 0.2 if l3 == "load" else -1.0}}
    if suspect:
        tiers["l3"]["suspect"] = suspect
    return {"profile": {"name": "p"}, "tiers": tiers, "verdict": {"tiers": {"l2": l2, "l3": l3}}}


def test_figures_by_hand():
    a = build_answer(_plan(), _check(), trace_requests=4000, requests_issued=1000)
    v = a.value
    # 21.5 TB on 7.68 TB drives: 2.8 -> 3 drives, 23.04 TB bought; DRAM:SSD = 23.04 / 0.9 = 1:25.6
    assert v("drives") == 3 and v("ssd_bytes") == pytest.approx(23.04 * TB)
    assert v("dram_to_ssd") == pytest.approx(23.04 / 0.9)
    # 2 GB/s over 3 drives = 666.7 MB/s each; x 86,400 / 7.68 TB = 7.5 host DWPD; x WAF 1 / 8.1 = 0.926
    assert v("drive_write_bytes_per_s") == pytest.approx(2e9 / 3)
    assert v("dwpd_host_per_drive") == pytest.approx(7.5)
    assert v("dwpd_rating_equivalent_per_drive") == pytest.approx(7.5 / 8.1)
    assert v("lifetime_years") == pytest.approx(5 * 1.0 / (7.5 / 8.1))       # 5.4 years
    assert v("residence_s") == pytest.approx(21.5e12 / 2e9)                  # 10,750 s
    # endurance sizes the SSD: 1.3 TB for hits, 20.2 TB more so the drives last; never a DRAM:SSD ratio
    assert a.binding == "endurance"
    assert "1.3 TB for hits, 20.2 TB more so the drives last" in a.binding_statement
    assert v("hit_ssd_bytes") + v("endurance_ssd_bytes") == pytest.approx(21.5 * TB)
    # coverage: 1,000 of 4,000 requests issued
    assert v("replayed_fraction") == pytest.approx(0.25)
    assert ("replayed", "1,000 of 4,000 requests (25%)", "measured") in rows(a)


def test_answer_json_recomputes_from_its_own_inputs():
    """DWPD, residence, lifetime and drives follow from the answer's own inputs (formulas written out here)."""
    j = json.loads(json.dumps(build_answer(_plan(), _check(), trace_requests=10, requests_issued=10).to_json()))
    val = {k: (v["value"] if isinstance(v, dict) and "value" in v else v) for k, v in j.items()}
    need = val["hit_ssd_bytes"] + val["endurance_ssd_bytes"]
    assert val["drives"] == math.ceil(need / val["drive_capacity_bytes"])
    assert val["ssd_bytes"] == val["drives"] * val["drive_capacity_bytes"]
    per_drive = val["write_bytes_per_s"] / val["drives"]
    assert val["drive_write_bytes_per_s"] == pytest.approx(per_drive)
    assert val["dwpd_host_per_drive"] == pytest.approx(86_400 * per_drive / val["drive_capacity_bytes"])
    eq = val["dwpd_host_per_drive"] * val["workload_waf"] / val["reference_waf"]
    assert val["dwpd_rating_equivalent_per_drive"] == pytest.approx(eq)
    assert val["lifetime_years"] == pytest.approx(val["warranty_years"] * val["rated_dwpd"] / eq)
    assert val["residence_s"] == pytest.approx(val["store_bytes"] / val["write_bytes_per_s"])
    assert val["usd_per_day_saved"] == pytest.approx(val["usd_per_day_recompute"] - val["usd_per_day"])
    for k in ("dram_bytes", "ssd_bytes", "drive_class", "drives", "drive_capacity_bytes", "drive_write_bytes_per_s",
              "dwpd_host_per_drive", "dwpd_rating_equivalent_per_drive", "lifetime_years", "residence_s",
              "usd_per_day", "usd_per_day_saved", "requests", "requests_issued", "replayed_fraction"):
        assert j[k]["provenance"] in ("measured", "modelled", "assumed", "suspect") and j[k]["source"], k
    assert set(j["load_or_recompute"]) == {"l2", "l3"}


def test_the_cost_line_counts_only_hits_whose_load_wins():
    # load wins for some hits and the tier is cheaper: DRAM 2.5 + SSD (23.04 TB x $0.1 over 5 years) + GPU 120
    a = build_answer(_plan(), _check())
    ssd = 23_040 * 0.1 / (5 * 365)
    assert a.decision == "load"
    assert a.value("usd_per_day") == pytest.approx(2.5 + ssd + 120.0)
    assert a.value("usd_per_day_saved") == pytest.approx(135.0 - (2.5 + ssd + 120.0))


def test_no_tier_wins_means_recompute_at_recomputes_cost():
    a = build_answer(_plan(), _check(l3="recompute"))
    assert a.decision == "recompute" and a.statement.startswith(RECOMPUTE_STATEMENT)
    assert a.value("usd_per_day") == 135.0 and a.value("usd_per_day_saved") == 0.0
    assert a.value("ttft_saved_s") == 0.0
    # a tier that wins somewhere but whose bill (only winning hits) exceeds recomputing: recompute too
    b = build_answer(_plan(gpu_wins=134.0), _check())
    assert b.decision == "recompute" and "would cost" in b.statement
    assert b.value("usd_per_day") == 135.0 and b.value("usd_per_day_saved") == 0.0


def test_a_suspect_measurement_is_shown_and_not_used():
    a = build_answer(_plan(), _check(suspect="probe bandwidth 16.9 MB/s below 1/5 of the replay's"))
    l3 = next(d for d in a.load_or_recompute if d.tier == "l3")
    assert l3.decision == "suspect" and l3.provenance == "suspect"
    assert a.decision == "recompute"              # l2 recomputes, l3 is not used
    assert any("suspect" in n for n in a.notes)


def test_bandwidth_binds_when_the_reads_need_more_drives():
    # hit reads: 4e7 tokens / 4,000 requests x 4 req/s x 131,072 B = 5.243 GB/s of hits, of which DRAM (0.9 TB:
    # hit ratio 0.2 + 0.44 x ln 9 / ln 1000 = 0.340 on the log-interpolated curve) serves 0.340 / 0.64: the SSD
    # reads 2.458 GB/s; at 0.5 GB/s a drive (the L3 probe) that takes 5 drives, more than the 3 capacity needs
    h_dram = 0.2 + 0.44 * math.log(9) / math.log(1000)
    read = 1e4 * 4 * 131072 * (1 - h_dram / 0.64)
    assert read == pytest.approx(2.458e9, rel=1e-3)
    a = build_answer(_plan(probe_bw=0.5e9), _check())
    assert a.binding == "bandwidth" and a.value("drives") == math.ceil(read / 0.5e9) == 5
    assert "5 drives, where capacity alone needs 3" in a.binding_statement
    assert a.value("ssd_bytes") == pytest.approx(a.value("drives") * 7.68 * TB)


def test_three_views_print_the_same_numbers():
    a = build_answer(_plan(), _check(), trace_requests=4000, requests_issued=1000)
    from kvbench.report.tables import answer_box

    text, box = text_table(a), html.unescape(answer_box(a))
    j = a.to_json()
    b = Answer.from_json(json.loads(json.dumps(j)))
    assert b == a                                                      # the JSON carries the whole answer
    shown = ("dram_bytes", "ssd_bytes", "drives", "drive_capacity_bytes", "dram_to_ssd", "write_bytes_per_s",
             "drive_write_bytes_per_s", "dwpd_host_per_drive", "dwpd_rating_equivalent_per_drive", "lifetime_years",
             "residence_s", "ttft_saved_s", "usd_per_day", "usd_per_day_recompute", "usd_per_day_saved",
             "requests", "requests_issued", "replayed_fraction")
    for k in shown:
        s = fmt(k, j[k]["value"])
        assert s in text and s in box, (k, s)
    for label, line, _ in rows(a):
        assert line in text and line in box


def test_schema_and_unreachable_target():
    j = build_answer(_plan(), _check()).to_json()
    assert j["schema"] == 1 and set(FIGURE_KEYS) <= set(j)
    with pytest.raises(UsageError, match="schema 2"):
        Answer.from_json({**j, "schema": 2})
    with pytest.raises(UsageError, match="not an answer object"):
        Answer.from_json({"sentences": ["an answer from before the Answer object"]}, "old/summary.json")
    for tiers in ({"l3": {**j["load_or_recompute"]["l3"], "new_field": 1}}, {"l3": {"decision": "load"}},
                  {"l3": "load"}):        # an unknown field, missing fields, not an object: one line naming the file
        with pytest.raises(UsageError, match="job/summary.json: answer: not answer schema 1's layout"):
            Answer.from_json({**j, "load_or_recompute": tiers}, "job/summary.json: answer")
    with pytest.raises(UsageError, match="job/summary.json: answer: not answer schema 1's layout .*'guessed'"):
        Answer.from_json({**j, "drives": {**j["drives"], "provenance": "guessed"}}, "job/summary.json: answer")
    bad = copy.deepcopy(_plan())
    bad["plans"]["0.9"][0]["name"] = "dram-only"
    with pytest.raises(UsageError, match="first plan is not 'recompute'"):
        build_answer(bad, _check())
    p = copy.deepcopy(_plan())
    p["per_target"]["0.9"]["need_bytes"] = None
    p["infinite_hit_ratio"] = 0.4
    a = build_answer(p, _check(), sources=Sources(plan="x/plan.json"))
    assert a.decision == "recompute" and "unreachable" in a.statement
    assert text_table(a).startswith("answer")


def test_dram_only_when_its_load_wins_from_the_first_block_and_is_cheapest():
    """L2 (over the host-to-device path) wins from the first token: every hit loads faster from DRAM, so all KV in
    DRAM is an option; when it is the cheapest, the answer buys it and says the SSD tier's cost beside it."""
    p = _plan()
    p["block_tokens"] = 512
    p["plans"]["0.9"].append({"name": "dram-only", "dram_bytes": 1.3 * TB, "usd_per_day": {"total": 60.0}})
    c = _check(l2="load")
    c["tiers"]["l2"].update(break_even_tokens=1, margin_at_reference_s=0.5)
    a = build_answer(p, c)
    assert (a.decision, a.choice) == ("load", "dram-only")
    assert a.value("usd_per_day") == 60.0 and a.value("usd_per_day_saved") == pytest.approx(75.0)
    assert a.value("dram_bytes") == 1.3 * TB and a.value("tier_dram_bytes") == 0.9 * TB
    assert a.value("usd_per_day_ssd_tier") > 60.0 and "an SSD tier" in a.statement
    assert any(label == "SSD (if built)" for label, _, _ in rows(a))
    assert a.value("ttft_saved_s") == pytest.approx(0.5)
    # L2 that wins only from 80k tokens (longer than a block): not every hit wins, DRAM-only is not offered
    c["tiers"]["l2"]["break_even_tokens"] = 80_000
    b = build_answer(p, c)
    assert b.choice == "dram+ssd" and b.value("usd_per_day_dram_only") is None


def test_an_ssd_tier_whose_loads_never_win_is_not_bought():
    """The check says loading from L3 never wins: the SSD tier does not pay whatever share of hits the plan's
    cost line counted at its own L3 speed; L2 wins only from long prefixes, so DRAM-only is not offered either."""
    c = _check(l3="recompute", l2="load")
    c["tiers"]["l2"].update(break_even_tokens=80_000, margin_at_reference_s=-0.5)
    a = build_answer(_plan(), c)
    assert (a.decision, a.choice) == ("recompute", "recompute")
    assert a.value("usd_per_day") == 135.0 and a.value("usd_per_day_saved") == 0.0
    assert "loading wins only from l2 for prefixes >= 80,000 tokens" in a.statement


def test_an_excluded_probe_is_a_suspect_figure_in_every_view():
    excluded = [{"name": "l3", "bandwidth_bytes_per_s": 16.9e6, "first_byte_s": 3.8e-5,
                 "suspect": ["bandwidth 16.9 MB/s below 1/5 of the replay's 270 MB/s"]}]
    a = build_answer(_plan(), _check(), excluded=excluded)
    assert [f.provenance for f in a.suspect] == ["suspect"] and a.suspect[0].value == 16.9e6
    assert Answer.from_json(json.loads(json.dumps(a.to_json()))) == a
    line = next(text for label, text, _ in rows(a) if label == "suspect, not used")
    assert "16.9 MB/s" in line and "below 1/5 of the replay" in line
    from kvbench.report.tables import answer_box

    assert line in text_table(a) and line in html.unescape(answer_box(a))
    # not used: the figures are those of the answer without the excluded probe
    b = build_answer(_plan(), _check())
    assert {k: f.value for k, f in a.figures.items()} == {k: f.value for k, f in b.figures.items()}


def test_the_report_opens_with_the_answer_box_and_its_figure(tmp_path):
    """A job folder holding an answer: the report's first section is the box (the same rows as the terminal), then
    the figure with the answer's point, and it renders in headless Chromium (screenshot not blank)."""
    from kvbench.report import build_report
    from tests.report.helpers import assert_report_renders

    p = _plan()
    p["schema"] = 1
    p["drives"][0].update(rated_dwpd=1.0)
    p["capacity_curve"] = [{"capacity_bytes": c * TB, "hit_ratio": h, "turned_over": True, "filled": True,
                            "residence_s": c * TB / 2e9, "dwpd": 86_400 * 2e9 / (c * TB)}
                           for c, h in ((0.5, 0.3), (1.0, 0.4), (2.0, 0.5), (4.0, 0.55))]
    p["retention_sweep"] = [{"retention_s": r, "capacity_bytes": 2e9 * r, "dwpd": 86_400 / r, "extrapolated": True}
                            for r in (3600.0, 21_600.0, 86_400.0)]
    a = build_answer(p, _check(), trace_requests=4000, requests_issued=1000)
    job = tmp_path / "job"
    job.mkdir()
    (job / "run.json").write_text(json.dumps({"schema": 1, "kind": "run", "command": ["kvbench", "run"], "config": {}}))
    (job / "summary.json").write_text(json.dumps({"schema": 1, "kind": "run", "status": "complete",
                                                  "run_dir": str(job), "answer": a.to_json()}))
    (job / "plan.json").write_text(json.dumps(p))
    out, index = build_report([job], tmp_path / "job.html")
    assert index["sections"][0] == "answer" and index["figures"][0] == "answer_figure"
    text = html.unescape(out.read_text())
    assert text.index("answer-box") < text.index("fig-answer_figure") < text.index("id='verdict'")
    for _, line, _ in rows(a):
        assert line in text, line
    # the figure's stars are the answer's figures: its store (top) and the host DWPD per drive the box states
    from kvbench.report.figures import answer_figure
    from kvbench.report.rundata import load_run

    fig = answer_figure([load_run(job)])
    stars = [t for t in fig.data if t.marker is not None and t.marker.symbol == "star"]
    assert sorted((t.y[0] for t in stars)) == sorted([a.value("store_bytes"), a.value("dwpd_host_per_drive")])
    assert all(t.x[0] == a.value("residence_s") for t in stars)
    assert_report_renders(out, tmp_path, min_plots=1, screenshot=True)


def test_a_first_byte_the_fit_did_not_resolve_is_said_so_never_0_ns():
    """check's fitted L3 with no fixed part (latency 0, latency_resolved false) and the plan's load tier carrying
    check's words: the terminal table says "not resolved by the fit" for both and prints no "0 ns"."""
    from kvbench.analysis.recompute import NOT_RESOLVED

    chk = _check()
    chk["tiers"]["l3"].update(latency_s=0.0, latency_resolved=False, first_byte=NOT_RESOLVED)
    plan = _plan()
    plan["load_tier"].update(latency_s=0.0, first_byte=NOT_RESOLVED)
    a = build_answer(plan, chk)
    text = text_table(a)
    assert "0 ns" not in text
    assert f"first byte {NOT_RESOLVED}" in text
    resolved = text_table(build_answer(_plan(), _check()))
    assert NOT_RESOLVED not in resolved and "first byte 100 us" in resolved


# mutation survivors
def test_every_figure_is_formatted_by_hand():
    assert fmt("usd_per_day", 1234.5) == "$1,234.50/day" and fmt("usd_per_day_saved", 0.0) == "$0.00/day"
    assert fmt("dram_to_ssd", 25.6) == "1:25.6"
    assert fmt("write_bytes_per_s", 2e9) == "2 GB/s"
    # SSD sizes in decimal units (drives are sold so), DRAM in binary
    assert fmt("ssd_bytes", 23.04e12) == "23 TB" and fmt("drive_capacity_bytes", 7.68e12) == "7.68 TB"
    assert fmt("hit_ssd_bytes", 1.3e12) == "1.3 TB"
    assert fmt("dram_bytes", 2.0**40) == "1 TiB" and fmt("tier_dram_bytes", 2.0**30) == "1 GiB"
    assert fmt("residence_s", 10_750.0) == "2.99 h" and fmt("residence_s", 0.0) == "0 s"
    assert fmt("ttft_saved_s", 0.2) == "200 ms"
    assert (fmt("drives", 1234), fmt("requests", 4000.0), fmt("requests_issued", 7)) == ("1,234", "4,000", "7")
    assert fmt("replayed_fraction", 0.25) == "25%"
    assert fmt("lifetime_years", 5.4) == "5.4 years" and fmt("warranty_years", 5.0) == "5 years"
    assert fmt("hit_ratio", 0.6412) == "0.641" and fmt("drive_class", "tlc") == "tlc"
    assert fmt("lifetime_years", None) == "n/a"


def _table_plan():
    p = _plan()
    p["load_tier"]["latency_s"] = 1e-4
    return p


def test_the_whole_terminal_table_by_hand():
    """Every line of the default answer. SSD: 23,040 GB x $0.1 over the 5-year warranty (the 5.4-year life is
    longer) = $1.2625/day; the tier's GPU line counts only winning hits: 120 - 47 + 47 = $120; $/day = 2.5 +
    1.2625 + 120 = $123.76 against $135 recomputing, saving $11.24. DRAM 0.9 TB = 838 GiB; writes 2 GB/s / 3 =
    667 MB/s per drive; 10,750 s = 2.99 h."""
    a = build_answer(_table_plan(), _check(), trace_requests=4000, requests_issued=1000,
                     sources=Sources(extra_notes=("a note",)))
    counted = "only hits whose load beats recompute: 10% of hit tokens at l3's speed (6 GB/s, first byte 100 us)"
    assert a.statement == ("load from a KV tier: $123.76/day against $135.00/day recomputing, saving $11.24/day "
                           f"({counted})")
    lines = [
        ("answer", a.statement, "assumed"),
        ("DRAM", "838 GiB", "modelled"),
        ("SSD", "3 x 7.68 TB tlc = 23 TB (DRAM:SSD 1:25.6)", "modelled"),
        ("sized by", "endurance: 1.3 TB for hits, 20.2 TB more so the drives last (1-DWPD rating)", "modelled"),
        ("writes", "2 GB/s to the store, 667 MB/s per drive", "modelled"),
        ("DWPD per drive", "7.5 host, 0.926 rating-equivalent (WAF 1 vs the rating's 8.1; rated 1)", "modelled"),
        ("lifetime", "5.4 years (warranty 5 years)", "modelled"),
        ("KV kept", "2.99 h before it is rewritten (hit ratio 0.64)", "modelled"),
        ("load from l2", "RECOMPUTE: loading never wins (2 GB/s, first byte 80 us)", "measured"),
        ("load from l3", "LOAD from 4,096 tokens (6 GB/s, first byte 100 us); saves 200 ms at 16,384 tokens",
         "measured"),
        ("TTFT saved", "200 ms at 16,384 tokens, loading from l3", "modelled"),
        ("cost", "$123.76/day against $135.00/day recomputing: saves $11.24/day", "assumed"),
        ("replayed", "1,000 of 4,000 requests (25%)", "measured"),
    ]
    assert rows(a) == lines
    assert text_table(a) == "\n".join([f"{label:<14}  {text}  [{kind}]" for label, text, kind in lines]
                                      + ["note            a note"])
    assert a.value("usd_per_day") == pytest.approx(2.5 + 2304 / 1825 + 120.0)
    assert a.value("usd_per_day_ssd_tier") == a.value("usd_per_day") and a.value("usd_per_day_dram_only") is None
    assert a.value("tier_dram_bytes") == a.value("dram_bytes") == 0.9 * TB
    assert a.value("hit_ratio") == 0.64 and a.value("store_bytes") == 21.5 * TB and a.value("write_bytes_per_s") == 2e9
    assert (a.value("workload_waf"), a.value("reference_waf"), a.value("rated_dwpd"), a.value("warranty_years")) == \
        (1.0, 8.1, 1.0, 5.0)
    assert a.value("drive_class") == "tlc" and a.value("drive_capacity_bytes") == 7.68 * TB
    assert a["usd_per_day"].source == f"{counted}; prices test (prices.toml, assumption)"
    assert a["ttft_saved_s"].source == "l3 at 16,384 tokens: recompute (p) - load (check.json)"
    assert a["drives"].source == "ceil(SSD / drive capacity)"
    assert a["hit_ssd_bytes"].source == "capacity for hit-ratio target 0.9 / store fill 1; plan.json"
    assert a["drive_class"].source == "TLC 1 DWPD; prices test (prices.toml, assumption)"
    assert a["requests"].source == "requests in the trace (simulate summary.json)"
    assert a["requests_issued"].source == "requests whose I/O the replay issued (replay summary.json)"
    assert (a.decision, a.choice, a.notes) == ("load", "dram+ssd", ("a note",))


def test_dram_only_and_recompute_answers_say_if_built_by_hand():
    """DRAM-only at $60 (L2 wins from the first token): all KV in 1.3 TB = 1.18 TiB of DRAM, saving 135 - 60 = $75;
    the SSD lines say "(if built)" and name the DRAM in front of the tier. A tier whose winning hits cost
    2.5 + 1.2625 + 134 = $137.76 > $135: recompute, no TTFT saved."""
    p = _table_plan()
    p["block_tokens"] = 512
    p["plans"]["0.9"].append({"name": "dram-only", "dram_bytes": 1.3 * TB, "usd_per_day": {"total": 60.0}})
    c = _check(l2="load")
    c["tiers"]["l2"].update(break_even_tokens=1, margin_at_reference_s=0.5)
    a = build_answer(p, c)
    counted = "only hits whose load beats recompute: 10% of hit tokens at l3's speed (6 GB/s, first byte 100 us)"
    assert a.statement == ("load from DRAM: all KV in 1.18 TiB of DRAM, $60.00/day against $135.00/day recomputing, "
                           f"saving $75.00/day; an SSD tier (counting {counted}) would cost $123.76/day")
    r = {label: text for label, text, _ in rows(a)}
    assert r["DRAM"] == "1.18 TiB"
    assert r["SSD (if built)"] == "3 x 7.68 TB tlc = 23 TB (DRAM:SSD 1:25.6 with 838 GiB of DRAM in front)"
    assert [label for label in r if label.endswith("(if built)")] == [
        "SSD (if built)", "sized by (if built)", "writes (if built)", "DWPD per drive (if built)",
        "lifetime (if built)", "KV kept (if built)"]
    assert r["load from l2"] == "LOAD from the first token (2 GB/s, first byte 80 us); saves 500 ms at 16,384 tokens"
    assert r["TTFT saved"] == "500 ms at 16,384 tokens, loading from l2"
    assert r["cost"] == "$60.00/day against $135.00/day recomputing: saves $75.00/day"
    assert a["usd_per_day"].source.startswith("every hit, loaded from DRAM (its load wins from the first block); ")
    assert a["dram_bytes"].source == "all KV in DRAM: the hit target's need; plan.json"
    assert a.value("usd_per_day_dram_only") == 60.0 and a.value("tier_dram_bytes") == 0.9 * TB
    # L2 winning from exactly one block (512 tokens) still wins for every hit: DRAM-only is offered
    c["tiers"]["l2"]["break_even_tokens"] = 512
    assert build_answer(p, c).choice == "dram-only"
    c["tiers"]["l2"]["break_even_tokens"] = 513
    assert build_answer(p, c).choice == "dram+ssd"
    b = build_answer(_plan(gpu_wins=134.0), _check())
    assert b.statement == (f"{RECOMPUTE_STATEMENT}: counting only hits whose load beats recompute: 10% of hit tokens "
                           "at l3's speed (6 GB/s, first byte unmeasured), the tier would cost $137.76/day against "
                           "$135.00/day recomputing")
    rb = {label: text for label, text, _ in rows(b)}
    assert rb["TTFT saved"] == "0 s" and rb["cost"] == "$135.00/day against $135.00/day recomputing: saves $0.00/day"
    assert b["usd_per_day"].source.startswith("recompute; ") and b.value("usd_per_day_ssd_tier") == \
        pytest.approx(2.5 + 2304 / 1825 + 134.0)
    n = build_answer(_table_plan(), _check(l3="recompute"))
    assert n.statement == (f"{RECOMPUTE_STATEMENT} (no tier's load beats recompute at p); cost $135.00/day")


def test_each_tiers_decision_line_by_hand():
    c = _check()
    c["tiers"]["l4"] = {"bandwidth_bytes_per_s": 1e9, "latency_s": 2e-4, "reference_tokens": 16384,
                        "break_even_tokens": None, "margin_at_reference_s": 0.1}
    c["tiers"]["l5"] = {"latency_s": 2e-4, "break_even_tokens": 2, "margin_at_reference_s": None}
    c["tiers"]["l6"] = "not a tier"                                   # skipped
    c["verdict"]["tiers"].update(l4="mixed", l5="load")
    a = build_answer(_table_plan(), c)
    r = {label: (text, kind) for label, text, kind in rows(a)}
    assert "load from l6" not in r
    assert r["load from l4"] == ("MIXED: loading wins only in some ranges (1 GB/s, first byte 200 us); saves 100 ms "
                                 "at 16,384 tokens", "measured")
    assert r["load from l5"] == ("LOAD from 2 tokens (speed n/a)", "measured")
    l5 = next(d for d in a.load_or_recompute if d.tier == "l5")
    assert (l5.ttft_saved_at_reference_s, l5.reference_tokens, l5.bandwidth_bytes_per_s) == (None, None, None)
    assert l5.source == "check.json tiers.l5: given" and l5.first_byte_resolved
    # a tier with no verdict recomputes; a suspect tier says so with its speed and is not used
    c = _check(suspect="a stall")
    c["verdict"]["tiers"].pop("l2")
    a = build_answer(_table_plan(), c)
    r = {label: (text, kind) for label, text, kind in rows(a)}
    assert r["load from l2"] == ("RECOMPUTE: loading never wins (2 GB/s, first byte 80 us)", "measured")
    assert r["load from l3"] == ("suspect, not used (6 GB/s, first byte 100 us)", "suspect")
    l3 = next(d for d in a.load_or_recompute if d.tier == "l3")
    assert l3.source == "check.json tiers.l3: fit; suspect: a stall"
    assert a.notes == ("l3: suspect, not used (check.json tiers.l3: fit; suspect: a stall)",)
    assert a.value("ttft_saved_s") == 0.0 and r["TTFT saved"] == ("0 s", "modelled")


def test_figures_and_their_json_by_hand():
    from kvbench.analysis.answer import Figure

    with pytest.raises(ValueError, match="guessed"):
        Figure(1, "guessed", "x")
    assert Figure.from_json(3.5) == Figure(3.5, "modelled", "")                 # a bare value: modelled, unsourced
    assert Figure.from_json({"value": 2}) == Figure(2, "modelled", "")
    assert Figure.from_json({"value": 2, "provenance": "measured", "source": "s"}).to_json() == \
        {"value": 2, "provenance": "measured", "source": "s"}
    a = build_answer(_plan(), _check())
    assert a.value("no such figure") is None and a["drives"].value == 3
    j = a.to_json()
    assert (j["decision"], j["choice"], j["binding"]) == ("load", "dram+ssd", "endurance")
    assert j["load_or_recompute"]["l3"]["break_even_tokens"] == 4096 and "tier" not in j["load_or_recompute"]["l3"]
    assert Answer.from_json({"decision": "load", "schema": 1}) == Answer("load", "", "", "", {}, (), (), 1, "", ())
    with pytest.raises(UsageError, match="schema 0"):
        Answer.from_json({"decision": "load"})                                   # no schema: written before it


def test_a_plan_without_winning_loads_counts_every_hit_and_hit_target_binds():
    """No loading-wins count (no load tier measured): the bill counts every hit at the plan's GPU line ($47:
    2.5 + 1.2625 + 47 = $50.76/day); the hit target sizes the SSD when the row is not endurance-bound, and without
    a load tier bandwidth never binds."""
    p = _plan(gpu_wins=None, bound="hit target")
    a = build_answer(p, _check())
    assert a.value("usd_per_day") == pytest.approx(2.5 + 2304 / 1825 + 47.0)
    counted = "every hit counted as saved prefill (no load tier measured)"
    assert a.statement == ("load from a KV tier: $50.76/day against $135.00/day recomputing, saving $84.24/day "
                           f"({counted})")
    assert a.binding == "hit target"
    assert a.binding_statement == "the hit target sizes the SSD (1.3 TB); the 1-DWPD rating holds there"
    assert a["store_bytes"].source == "the KV store the plan sizes (hit target binds); plan.json"


def test_the_load_tier_named_in_the_bill_by_hand():
    """The bill names the plan's load tier and its speed, or says "the load tier" and no speed when the plan does
    not say; its first byte in the plan's own words, else the latency; a 0% share of winning hits buys no tier."""
    p = _plan()
    p["load_tier"] = {"bandwidth_bytes_per_s": 6e9, "latency_s": 1e-4}
    a = build_answer(p, _check())
    assert a.statement.endswith("(only hits whose load beats recompute: 10% of hit tokens at the load tier's speed "
                                "(6 GB/s, first byte 100 us))")
    assert a.value("drives") == 3 and a.binding == "endurance"    # no l3 probe named: no bandwidth binding
    p["load_tier"] = {"name": "l3", "first_byte": "not resolved by the fit"}
    assert build_answer(p, _check()).statement.endswith("at l3's speed)")
    z = _plan(fraction=0.0)
    b = build_answer(z, _check())
    assert b.decision == "recompute" and "loading wins only from l3 for prefixes >= 4,096 tokens at p, too little " \
                                           "for a tier to pay" in b.statement
    z["drives"][0]["loading_wins"]["fraction"] = None           # no share stated: the tier is an option
    assert build_answer(z, _check()).choice == "dram+ssd"
    m = _check(l3="mixed")
    m["tiers"]["l3"]["margin_at_reference_s"] = -1.0
    assert "loading wins only from l3 in some ranges at p" in build_answer(_plan(fraction=0.0), m).statement


def test_a_figure_the_inputs_do_not_state_is_said_so_never_a_zero():
    """A load tier with a bandwidth and no first byte, a share of winning hits not stated, a check tier with no
    latency or no margin, a plan with no infinite-cache hit ratio: each is said missing ("unmeasured", "n/a", or
    left out), never printed as a 0 that reads like a measurement (0 ns, 0%, 0 s, 0.000)."""
    from kvbench.analysis.answer import text_table

    p = _plan()                                     # load tier l3 at 6 GB/s, no latency_s or first_byte
    a = build_answer(p, _check())
    assert "(only hits whose load beats recompute: 10% of hit tokens at l3's speed (6 GB/s, first byte " \
           "unmeasured))" in a.statement and "0 ns" not in text_table(a)
    p["load_tier"]["latency_s"] = 0.0               # a stated 0 is a figure, said as one
    assert "(6 GB/s, first byte 0 ns))" in build_answer(p, _check()).statement
    p = _plan()
    p["drives"][0]["loading_wins"]["fraction"] = None
    st = build_answer(p, _check()).statement
    assert "only hits whose load beats recompute: a share of hit tokens the plan does not state at l3's speed" in st
    assert "0%" not in st
    # a check tier with a bandwidth and no latency, and one with no margin at its reference length
    c = _check()
    del c["tiers"]["l3"]["latency_s"]
    c["tiers"]["l3"]["margin_at_reference_s"] = None
    a = build_answer(_table_plan(), c)
    r = {label: text for label, text, _ in rows(a)}
    assert r["load from l3"] == "LOAD from 4,096 tokens (6 GB/s, first byte unmeasured)"
    l3 = next(d for d in a.load_or_recompute if d.tier == "l3")
    assert (l3.first_byte_s, l3.ttft_saved_at_reference_s) == (None, None)
    assert a.choice == "dram+ssd" and a.value("ttft_saved_s") is None and r["TTFT saved"] == "n/a"
    assert a["ttft_saved_s"].source == "l3: no margin in check.json (unmeasured)"
    assert a.to_json()["load_or_recompute"]["l3"]["ttft_saved_at_reference_s"] is None
    assert Answer.from_json(a.to_json()).value("ttft_saved_s") is None
    # an unreachable target on a plan that does not state the infinite-cache hit ratio
    p = _plan()
    p["per_target"]["0.9"]["need_bytes"] = None
    assert build_answer(p, _check()).statement == (f"{RECOMPUTE_STATEMENT}: the hit-ratio target 0.9 is "
                                                   "unreachable on this trace")


def test_coverage_unreachable_target_and_excluded_probes_by_hand():
    a = build_answer(_plan(), _check(), trace_requests=4000, requests_issued=None)
    assert a.value("replayed_fraction") is None and ("replayed", "n/a of 4,000 requests (n/a)", "measured") in rows(a)
    assert build_answer(_plan(), _check(), trace_requests=0, requests_issued=0).value("replayed_fraction") is None
    assert not any(label == "replayed" for label, _, _ in rows(build_answer(_plan(), _check())))
    p = copy.deepcopy(_plan())
    p["per_target"]["0.9"]["need_bytes"] = 0
    p["infinite_hit_ratio"] = 0.4
    u = build_answer(p, _check(), trace_requests=10, requests_issued=5)
    assert u.statement == f"{RECOMPUTE_STATEMENT}: the hit-ratio target 0.9 is unreachable on this trace " \
                          "(infinite-cache hit ratio 0.400)"
    assert (u.decision, u.binding, u.binding_statement, u.choice) == ("recompute", "hit target", "unreachable",
                                                                      "recompute")
    assert rows(u) == [("answer", u.statement, ""), ("replayed", "5 of 10 requests (50%)", "measured")]
    x = build_answer(_plan(), _check(), excluded=[{"name": "l2", "bandwidth_bytes_per_s": "fast"}])
    assert x.suspect[0].value is None
    assert x.suspect[0].source == "l2 probe bandwidth: failed a check (probes.json; excluded)"
    assert build_answer(_plan(), _check(), excluded=[]).suspect == ()


def test_the_headline_target_and_the_ssd_reads_by_hand():
    from kvbench.analysis.answer import _ssd_read_bytes_per_s, head_target, plan_l2

    p = _plan()
    assert head_target(p) == "0.9" and plan_l2(p) == 0.9 * TB
    del p["answer"]
    p["targets"] = [0.9, 0.5]
    assert head_target(p) == "0.9"                                      # the first asked, as %g
    assert plan_l2({"targets": [0.5]}) == 0.0
    # one curve point: no DRAM share to take off, the SSD reads every hit: 1e4 x 4 x 131,072 = 5.243 GB/s
    row = p["drives"][0]
    one = {**p, "capacity_curve": p["capacity_curve"][:1]}
    assert _ssd_read_bytes_per_s(one, row) == pytest.approx(1e4 * 4 * 131072)
    # a store hit ratio of 0: the share is 1 as well; DRAM serving more than the store: 0 (never negative)
    assert _ssd_read_bytes_per_s(p, {**row, "hit_ratio": 0.0}) == pytest.approx(1e4 * 4 * 131072)
    assert _ssd_read_bytes_per_s(p, {**row, "hit_ratio": 0.3}) == 0.0
    # DRAM below the curve's first point reads its first hit ratio (0.2): 1 - 0.2 / 0.64 of the hits
    low = copy.deepcopy(p)
    low["per_target"]["0.9"]["l2_bytes"] = 0.0
    assert _ssd_read_bytes_per_s(low, row) == pytest.approx(1e4 * 4 * 131072 * (1 - 0.2 / 0.64))
    for bad in ({"requests": 0}, {"rate": None}, {"bytes_per_token": "x"}):
        assert _ssd_read_bytes_per_s({**p, **bad}, row) is None
    assert _ssd_read_bytes_per_s(p, {**row, "loading_wins": None}) is None


def test_a_store_filled_to_80_percent_by_hand():
    """Capacity 25 TB at a store fill of 0.8 (20 TB of KV): ceil(25 / 7.68) = 4 drives = 30.72 TB (1:34.1 of
    0.9 TB DRAM); the hit target's 1.3 TB of KV needs 1.3 / 0.8 = 1.625 TB of drives, the rest (23.375 TB) is for
    endurance; 2 GB/s / 4 = 500 MB/s per drive = 86,400 x 5e8 / 7.68e12 = 5.625 host DWPD, / 8.1 = 0.694
    rating-equivalent, 5 / 0.694 = 7.2 years; KV kept 20e12 / 2e9 = 10,000 s = 2.78 h; SSD 30,720 GB x $0.1 /
    1,825 days = $1.6833/day, total 2.5 + 1.6833 + 120 = $124.18/day."""
    p = _table_plan()
    p["drives"][0].update(capacity_bytes=25 * TB, store_bytes=20 * TB)
    a = build_answer(p, _check())
    r = {label: text for label, text, _ in rows(a)}
    assert r["SSD"] == "4 x 7.68 TB tlc = 30.7 TB (DRAM:SSD 1:34.1)"
    assert r["sized by"] == "endurance: 1.62 TB for hits, 23.4 TB more so the drives last (1-DWPD rating)"
    assert r["writes"] == "2 GB/s to the store, 500 MB/s per drive"
    assert r["DWPD per drive"] == "5.62 host, 0.694 rating-equivalent (WAF 1 vs the rating's 8.1; rated 1)"
    assert r["lifetime"] == "7.2 years (warranty 5 years)" and r["KV kept"].startswith("2.78 h before")
    assert a.value("hit_ssd_bytes") == pytest.approx(1.625 * TB)
    assert a.value("endurance_ssd_bytes") == pytest.approx(23.375 * TB)
    assert a.value("residence_s") == pytest.approx(10_000.0) and a.value("lifetime_years") == pytest.approx(7.2)
    assert a["hit_ssd_bytes"].source == "capacity for hit-ratio target 0.9 / store fill 0.8; plan.json"
    assert a.value("usd_per_day") == pytest.approx(2.5 + 3072 / 1825 + 120.0)


def test_no_steady_state_and_a_class_without_a_drive_size_by_hand():
    """No steady write rate: per-drive writes, DWPD, lifetime and residence are unknown (n/a) and the SSD is paid
    over its warranty; a class with no drive size buys the store as one drive of its capacity."""
    p = _table_plan()
    p["drives"][0]["write_bytes_per_s"] = None
    a = build_answer(p, _check())
    for k in ("write_bytes_per_s", "drive_write_bytes_per_s", "dwpd_host_per_drive",
              "dwpd_rating_equivalent_per_drive", "lifetime_years", "residence_s"):
        assert a.value(k) is None, k
    r = {label: text for label, text, _ in rows(a)}
    assert r["writes"] == "n/a to the store, n/a per drive" and r["lifetime"] == "n/a (warranty 5 years)"
    assert r["DWPD per drive"] == "n/a host, n/a rating-equivalent (WAF 1 vs the rating's 8.1; rated 1)"
    assert a.value("usd_per_day") == pytest.approx(2.5 + 2304 / 1825 + 120.0)
    q = _table_plan()
    del q["prices"]["ssd"]["tlc"]["drive_capacity_bytes"]
    b = build_answer(q, _check())
    assert (b.value("drives"), b.value("ssd_bytes"), b.value("drive_capacity_bytes")) == (1, 21.5 * TB, 21.5 * TB)
    assert b["ssd_bytes"].source == "1 whole drives of 21.5 TB"


def test_ties_and_boundaries_of_the_choice_by_hand():
    from kvbench.analysis.answer import head_target

    # the answer's own target wins over the first one asked
    assert head_target({"answer": {"target": "0.5"}, "targets": [0.9, 0.5]}) == "0.5"
    # bandwidth binds only when it needs MORE drives than capacity: 2.458 GB/s of SSD reads at 1 GB/s a drive is
    # ceil(2.458) = 3 drives, as many as capacity needs (endurance still binds)
    assert build_answer(_plan(probe_bw=1e9), _check()).binding == "endurance"
    # no request rate: no read demand, so no bandwidth sizing (with a probe of 6 GB/s)
    assert build_answer({**_plan(), "rate": None}, _check()).value("drives") == 3
    # a tier costing exactly recompute's $/day does not pay: recompute
    tier = build_answer(_plan(), _check()).value("usd_per_day_ssd_tier")
    p = _plan()
    p["plans"]["0.9"][0]["usd_per_day"]["total"] = tier
    assert build_answer(p, _check()).decision == "recompute"
    p["plans"]["0.9"][0]["usd_per_day"]["total"] = tier + 0.01
    assert build_answer(p, _check()).decision == "load"
    # the check's profile names the GPU the verdict is at, before the plan's
    c = _check(l3="recompute")
    c["profile"] = {"name": "h200-fp8"}
    assert build_answer(_plan(), c).statement == \
        f"{RECOMPUTE_STATEMENT} (no tier's load beats recompute at h200-fp8); cost $135.00/day"
    # the hit target alone sizes the store: no capacity for endurance
    h = build_answer(_plan(bound="hit target", hit=21.5 * TB), _check())
    assert h.value("endurance_ssd_bytes") == 0.0 and h.value("hit_ssd_bytes") == 21.5 * TB


def test_dram_only_needs_the_plans_block_size():
    """L2 wins from the first token, but the plan states no block size: whether every hit's load wins is unknown,
    so DRAM-only is not offered."""
    p = _table_plan()
    p["plans"]["0.9"].append({"name": "dram-only", "dram_bytes": 1.3 * TB, "usd_per_day": {"total": 60.0}})
    c = _check(l2="load")
    c["tiers"]["l2"].update(break_even_tokens=1, margin_at_reference_s=0.5)
    a = build_answer(p, c)
    assert a.choice == "dram+ssd" and a.value("usd_per_day_dram_only") is None


def test_an_answer_file_without_the_first_byte_flag_reads_as_resolved():
    j = build_answer(_plan(), _check()).to_json()
    for t in j["load_or_recompute"].values():
        del t["first_byte_resolved"]
    b = Answer.from_json(json.loads(json.dumps(j)))
    assert all(d.first_byte_resolved for d in b.load_or_recompute)
    assert dict((label, text) for label, text, _ in rows(b))["load from l3"].startswith(
        "LOAD from 4,096 tokens (6 GB/s, first byte 100 us)")


def test_the_waf_source_and_the_curve_points_the_reads_use_by_hand():
    from kvbench.analysis.answer import _ssd_read_bytes_per_s

    a = build_answer(_plan(), _check())
    assert a["workload_waf"].source == "given"
    p = _plan()
    del p["drives"][0]["workload_waf_source"]
    p["waf_source"] = "FTL model"
    assert build_answer(p, _check())["workload_waf"].source == "FTL model"
    # curve points without a capacity or a hit ratio are not read: the two good points give the hand value of
    # test_bandwidth_binds_when_the_reads_need_more_drives (2.458 GB/s)
    h_dram = 0.2 + 0.44 * math.log(9) / math.log(1000)
    p = _plan()
    p["capacity_curve"] += [{"capacity_bytes": None, "hit_ratio": 0.5}, {"capacity_bytes": 1e12, "hit_ratio": None},
                            {"capacity_bytes": 0, "hit_ratio": 0.1}]
    assert _ssd_read_bytes_per_s(p, p["drives"][0]) == pytest.approx(1e4 * 4 * 131072 * (1 - h_dram / 0.64))
    # no DRAM reads the curve at 1 byte: on a curve from (1 B, 0.1) to (100 TB, 0.64), h(DRAM) = 0.1
    q = _plan()
    q["per_target"]["0.9"]["l2_bytes"] = 0.0
    q["capacity_curve"] = [{"capacity_bytes": 1.0, "hit_ratio": 0.1}, {"capacity_bytes": 100 * TB, "hit_ratio": 0.64}]
    assert _ssd_read_bytes_per_s(q, q["drives"][0]) == pytest.approx(1e4 * 4 * 131072 * (1 - 0.1 / 0.64))


def test_the_recompute_answer_in_the_buyers_words():
    """The sentence a buyer reads when no tier pays, written out (the other tests compare with the constant)."""
    a = build_answer(_plan(), _check(l3="recompute"))
    assert a.statement == ("recompute; a KV tier on this device does not pay at this model/GPU (no tier's load beats "
                           "recompute at p); cost $135.00/day")


def test_a_stated_zero_write_rate_is_zero_and_its_lifetime_unbounded_never_missing():
    """A plan whose store takes no writes (a stated 0 B/s) has 0 writes and 0 DWPD, a lifetime and residence no
    write bounds: said in words, never "n/a" (that is a write rate the plan does not state) nor "inf years"."""
    a = build_answer(_plan(write=0.0), _check())
    v = a.value
    assert (v("write_bytes_per_s"), v("drive_write_bytes_per_s"), v("dwpd_host_per_drive"),
            v("dwpd_rating_equivalent_per_drive")) == (0.0, 0.0, 0.0, 0.0)
    assert v("lifetime_years") == math.inf and v("residence_s") == math.inf
    r = {label: text for label, text, _ in rows(a)}
    assert r["writes"] == "0 B/s to the store, 0 B/s per drive"
    assert r["DWPD per drive"].startswith("0 host, 0 rating-equivalent")
    assert r["lifetime"] == "no writes: unbounded (warranty 5 years)"
    assert r["KV kept"] == "never rewritten (no writes) (hit ratio 0.64)"
    text = text_table(a)
    assert "n/a" not in text and "inf" not in text and "None" not in text
    # the JSON (no infinity: null) keeps it unbounded, so the report's answer box says the same words
    j = json.loads(json.dumps(to_jsonable(a.to_json()), allow_nan=False))
    assert j["lifetime_years"]["value"] is None and j["lifetime_years"]["unbounded"] is True
    back = Answer.from_json(j)
    assert back.value("lifetime_years") == math.inf and back.value("residence_s") == math.inf
    assert text_table(back) == text
    # a write rate the plan does not state is missing: each figure it gives is n/a
    m = build_answer(_plan(write=None), _check())
    assert all(m.value(k) is None for k in ("drive_write_bytes_per_s", "dwpd_host_per_drive", "lifetime_years",
                                            "residence_s"))
    assert {label: text for label, text, _ in rows(m)}["lifetime"] == "n/a (warranty 5 years)"
    assert fmt("lifetime_years", math.inf) == "no writes: unbounded" and fmt("lifetime_years", 5.4) == "5.4 years"


def test_the_window_the_plan_was_sized_on_is_the_answers_first_note():
    """The plan's stationarity sentence (a warm-up left out, or a trace that is not stationary and what was done)
    is the answer's first note, before the job's own, in every view and on the unreachable path too; a stationary
    trace measured whole (no sentence) adds none."""
    said = ("Sized on the requests from 136.3 s (the last 50% of the span; the earlier ones only warm the cache), "
            "a stationary window (no trend over 10 windows; kvbench trace stats).")
    p = {**_plan(), "stationarity": {"stationary": True, "note": said}}
    a = build_answer(p, _check(), sources=Sources(extra_notes=("a note",)))
    assert a.notes == (said, "a note")
    assert a.to_json()["notes"] == [said, "a note"] and Answer.from_json(a.to_json()).notes == (said, "a note")
    assert text_table(a).splitlines()[-2].split(None, 1) == ["note", said]
    u = copy.deepcopy(p)
    u["per_target"]["0.9"]["need_bytes"] = None
    assert build_answer(u, _check()).notes == (said,)
    for quiet in ({"stationary": True, "note": None}, {"stationary": True}, None):
        assert build_answer({**_plan(), "stationarity": quiet}, _check()).notes == ()
