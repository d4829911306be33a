"""HTML reports: runs loaded from results folders (``rundata``), pure figure and table builders (``figures``,
``tables``) and the one writer (``html``) that turns them into a self-contained file.
"""

from __future__ import annotations

from pathlib import Path


def default_report_path(run_dirs, root="reports") -> Path:
    """``reports/<run>.html`` for one run, ``reports/compare-<a>-vs-<b>....html`` for several."""
    names = [Path(p).resolve().name for p in run_dirs]
    stem = names[0] if len(names) == 1 else "compare-" + "-vs-".join(names[:4]) + ("-etc" if len(names) > 4 else "")
    return Path(root) / f"{stem[:200]}.html"


def build_report(run_dirs, out=None, title=None):
    """Load the run folders and write their report; returns (path, index). One call for CLI commands."""
    from kvbench.report.html import write_report
    from kvbench.report.rundata import load_run

    runs = [load_run(p) for p in run_dirs]
    return write_report(runs, out or default_report_path(run_dirs), title)
