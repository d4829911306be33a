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
    """A click parameter for durations (``250us``, ``10m``); returns seconds. With ``require_unit`` a bare
    number is refused (``--ttl 10``: seconds or minutes?); otherwise a bare number is seconds."""

    name = "duration"

    def __init__(self, require_unit: bool = False):
        self.require_unit = require_unit

    def convert(self, value, param, ctx):
        if isinstance(value, (int, float)):
            return float(value)
        opt = f"--{param.name.replace('_', '-')}" if param else "duration"
        if self.require_unit and units.is_bare_number(value):
            self.fail(f"{opt} {value}: give a unit, e.g. {value}s, {value}m or {value}h (a bare number is ambiguous)",
                      param, ctx)
        try:
            return units.parse_duration(value, what=opt)
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
RETENTION = DurationParam(require_unit=True)     # retention/TTL: minutes vs seconds matters, so say which
RATE = RateParam()
