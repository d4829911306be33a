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
