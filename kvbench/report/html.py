"""The one HTML writer: a self-contained report (plotly's JavaScript inlined, nothing fetched from a network).

Test servers are often offline, so the file carries everything: plotly.js once in the head (exactly what
``include_plotlyjs=True`` embeds), each figure as a div plus its ``Plotly.newPlot`` call, CSS inline. A tiny
error hook installed before any other script writes JavaScript errors into ``#kvbench-js-errors`` so headless
browsers (and the tests) can see them in the DOM; after load, ``body[data-kvbench-plots]`` counts the plots
that rendered.
"""

from __future__ import annotations

import datetime as _dt
import html
from pathlib import Path

from kvbench import __version__
from kvbench.errors import UsageError
from kvbench.report import figures as F
from kvbench.report import tables as T
from kvbench.report.rundata import RunData

_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0 auto;max-width:1280px;padding:16px 28px;color:#222}
h1{font-size:1.6em;margin-bottom:.2em} h2{border-bottom:2px solid #ddd;padding-bottom:4px;margin-top:1.8em}
.sub{color:#666;margin-top:0} table{border-collapse:collapse;margin:8px 0;font-size:.9em}
th,td{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top} thead th{background:#f3f3f3}
th.sec{color:#777;font-weight:normal} tr.differs td{background:#fff8e1} .kind{color:#666;font-weight:normal}
td.pass,h3.pass{color:#1b5e20;font-weight:bold} td.fail,h3.fail{color:#b71c1c;font-weight:bold}
.badge{border-radius:3px;padding:1px 6px;font-size:.8em;font-weight:bold}
.badge.ok{background:#e8f5e9;color:#1b5e20} .badge.partial{background:#ffebee;color:#b71c1c}
.banner{background:#ffebee;border:1px solid #e57373;padding:8px 12px;margin:10px 0;color:#b71c1c}
.env td,.env th{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.85em;word-break:break-all}
.env th{word-break:normal;white-space:nowrap}
#kvbench-js-errors:empty{display:none} #kvbench-js-errors{background:#fee;color:#900;padding:8px}
.answer-box{font-size:1em;border:2px solid #555} .answer-box th{white-space:nowrap;background:#f7f7f7}
.answer-box tr.decision td{font-weight:bold} .answer-box tr.decision.load td{color:#1b5e20}
.answer-box tr.decision.recompute td{color:#b71c1c} .answer-box td.prov{color:#777;font-size:.85em}
.answer-box td.prov.suspect{color:#b71c1c;font-weight:bold}
.fig{margin:8px 0 24px 0} .note{color:#666;font-size:.9em} .caption{margin:4px 0;color:#333;font-style:italic}
"""

_ERROR_HOOK = """<script>
(function(){
  function report(msg){
    var el=document.getElementById('kvbench-js-errors');
    if(!el){window.__kvbenchErrors=(window.__kvbenchErrors||[]).concat([msg]);return;}
    el.textContent+=msg+'\\n';
  }
  window.addEventListener('error',function(e){report('error: '+(e.message||e.type)+' at '+(e.filename||'')+':'+(e.lineno||''));});
  window.addEventListener('unhandledrejection',function(e){report('unhandled rejection: '+(e.reason&&e.reason.message||e.reason));});
  window.__kvbenchReport=report;
})();
</script>"""

_ON_LOAD = """<script>
(function(){
  var pending=window.__kvbenchErrors||[];
  pending.forEach(function(m){window.__kvbenchReport(m);});
  function mark(){
    var plots=document.querySelectorAll('.js-plotly-plot .main-svg').length>0?
      Array.prototype.filter.call(document.querySelectorAll('.js-plotly-plot'),function(d){return d.querySelector('.main-svg');}).length:0;
    document.body.setAttribute('data-kvbench-plots',String(plots));
    document.body.setAttribute('data-kvbench-ready','1');
  }
  if(document.readyState==='complete'){mark();}else{window.addEventListener('load',mark);}
})();
</script>"""


def _plotly_js() -> str:
    """plotly.js, exactly as ``include_plotlyjs=True`` inlines it (no CDN, works offline)."""
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def _figure_div(fig, div_id: str) -> str:
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id,
                       config={"displaylogo": False, "responsive": True})


def render(runs: list[RunData], title: str | None = None) -> tuple[str, dict]:
    """The report's HTML text and a small index of what it holds (figure count, sections, partial runs)."""
    if not runs:
        raise UsageError("no run folders to report on", "give one or more results/<run> folders")
    esc = html.escape
    labels = ", ".join(rd.label for rd in runs)
    title = title or (f"kvbench report: {labels}" if len(runs) == 1 else f"kvbench comparison of {len(runs)} runs")
    sections: list[str] = []
    index = {"figures": [], "sections": [], "partial": [rd.label for rd in runs if rd.partial]}

    banners = "".join(
        f"<div class='banner'>Run <b>{esc(rd.label)}</b> is <b>{esc(rd.status)}</b>: its numbers cover only the part "
        f"that ran{(' (' + esc(str(rd.summary.get('reason'))) + ')') if rd.summary.get('reason') else ''}.</div>"
        for rd in runs if rd.partial)

    ans = T.answer_html(runs)
    if ans:
        sections.append("<h2 id='answer'>The answer</h2>" + ans)
        index["sections"].append("answer")
        fig = F.answer_figure(runs)
        if fig is not None:
            sections.append(f"<p class='caption'>{esc(F.caption(F.answer_figure))}</p>"
                            f"<div class='fig'>{_figure_div(fig, 'fig-answer_figure')}</div>")
            index["figures"].append("answer_figure")
    sections.append("<h2 id='verdict'>Verdict summary</h2>" + T.verdict_table(runs))
    index["sections"].append("verdict")
    crit = T.criteria_table(runs)
    if crit:
        sections.append("<h2 id='qualification'>Qualification</h2>" + crit)
        index["sections"].append("qualification")
    for n, (sec_title, builder) in enumerate(F.FIGURES):
        fig = builder(runs)
        if fig is None:
            continue
        anchor = builder.__name__
        sections.append(f"<h2 id='{anchor}'>{esc(sec_title)}</h2><p class='caption'>{esc(F.caption(builder))}</p>"
                        f"<div class='fig'>{_figure_div(fig, f'fig-{anchor}')}</div>")
        index["figures"].append(anchor)
        index["sections"].append(anchor)
    sections.append("<h2 id='environment'>Environment</h2>" + T.environment_table(runs))
    index["sections"].append("environment")

    generated = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    folders = "<br>".join(f"{esc(rd.label)}: <code>{esc(str(rd.path))}</code> {T.status_badge(rd)}" for rd in runs)
    nav = " · ".join(f"<a href='#{s}'>{s.replace('_', ' ')}</a>" for s in index["sections"])
    doc = (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta name='viewport' content='width=device-width, initial-scale=1'><title>{esc(title)}</title>"
        f"<style>{_CSS}</style>{_ERROR_HOOK}<script type='text/javascript'>{_plotly_js()}</script></head>"
        f"<body><pre id='kvbench-js-errors'></pre><h1>{esc(title)}</h1>"
        f"<p class='sub'>kvbench {esc(__version__)} · generated {generated}</p>"
        f"<p class='note'>{folders}</p>{banners}<p class='note'>{nav}</p>"
        + "".join(sections) + _ON_LOAD + "</body></html>")
    return doc, index


def write_report(runs: list[RunData], out, title: str | None = None) -> tuple[Path, dict]:
    """Render and write the report atomically (temp file + rename); returns the path and the index."""
    doc, index = render(runs, title)
    from kvbench.engine.safety import atomic_output

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_output(out) as tmp:          # the output guard: refuses a foreign file, renames on success
        tmp.write_text(doc, encoding="utf-8")
    return out, index
