"""``kvbench report RUN_DIR... [-o reports/NAME.html]``: a self-contained HTML report of one or several runs."""

from __future__ import annotations

import click

from kvbench.cli._common import OUTPUT, emit_json, force_option, json_option


@click.command("report")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(file_okay=True, dir_okay=True))
@click.option("-o", "--output", type=OUTPUT, default=None,
              help="HTML file to write (default reports/<run>.html, or reports/compare-....html for several runs).")
@click.option("--title", default=None, help="Title at the top of the report.")
@force_option
@json_option
def report_cmd(run_dirs, output, title, as_json):
    """Write an HTML report of RUN_DIRS (results/<run> folders); several runs are shown side by side.

    The file opens offline: plotly's JavaScript is inlined, nothing is fetched. Partial runs are marked.
    """
    from kvbench.progress import Steps
    from kvbench.report import build_report

    with Steps("report", [None]) as meter:         # one step: the figures and the HTML (elapsed shown)
        meter.start(f"{len(run_dirs)} run{'s' if len(run_dirs) > 1 else ''}: figures and HTML")
        path, index = build_report(run_dirs, output, title)
    if as_json:
        emit_json({"report": str(path), "runs": list(run_dirs), **index})
    else:
        extra = f" (partial: {', '.join(index['partial'])})" if index["partial"] else ""
        click.echo(f"report: {path}  [{len(index['figures'])} figures]{extra}")


COMMANDS = [report_cmd]
