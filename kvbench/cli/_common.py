"""Shared option decorators and output helpers for the CLI commands."""

from __future__ import annotations

import json
import sys

import click

from kvbench import units
from kvbench.errors import UnitError
from kvbench.metrics.run import to_jsonable


def json_option(f):
    """``--json``: print the machine-readable summary (one JSON object) on stdout."""
    return click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object on stdout.")(f)


def force_option(f):
    """``--force``: replace an existing output file that kvbench did not write."""
    return click.option("--force", is_flag=True,
                        help="Overwrite an existing output file kvbench did not write (refused otherwise).")(f)


def check_outputs(force: bool, *paths) -> None:
    """Refuse (before any work) to overwrite a user's file with an output; None paths are skipped."""
    from kvbench.engine.safety import check_output

    for p in paths:
        if p is not None:
            check_output(p, force)


def emit_json(obj) -> None:
    """Print one JSON object on stdout (NaN/inf as null, numpy types converted)."""
    sys.stdout.write(json.dumps(to_jsonable(obj), indent=2, sort_keys=False) + "\n")
    sys.stdout.flush()


class SizeParam(click.ParamType):
    """A click parameter for byte sizes with units (``4k``, ``64GiB``); errors become usage errors."""

    name = "size"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        try:
            return units.parse_size(value, what=f"--{param.name.replace('_', '-')}" if param else "size")
        except UnitError as e:
            self.fail(str(e), param, ctx)


class DurationParam(click.ParamType):
    """A click parameter for durations (``250us``, ``10m``); returns seconds."""

    name = "duration"

    def convert(self, value, param, ctx):
        if isinstance(value, (int, float)):
            return float(value)
        try:
            return units.parse_duration(value, what=f"--{param.name.replace('_', '-')}" if param else "duration")
        except UnitError as e:
            self.fail(str(e), param, ctx)


class RateParam(click.ParamType):
    """A click parameter for bandwidths (``10GB/s``); returns bytes per second."""

    name = "rate"

    def convert(self, value, param, ctx):
        if isinstance(value, (int, float)):
            return float(value)
        try:
            return units.parse_rate(value, what=f"--{param.name.replace('_', '-')}" if param else "rate")
        except UnitError as e:
            self.fail(str(e), param, ctx)


SIZE = SizeParam()
DURATION = DurationParam()
RATE = RateParam()
