"""The ``kvbench`` command: a thin click layer over the library.

Commands live one module each in this package and are discovered: a module ``kvbench/cli/<name>.py`` exposes
``COMMANDS`` (a list of click commands) and optionally ``GROUP`` (``"replay"`` or ``"trace"``) to hang them
under a sub-group. Modules keep heavy imports (torch, plotly, numba kernels) inside the command bodies so that
``kvbench --help`` stays fast. Library errors (:mod:`kvbench.errors`) become one line and an exit code here.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys

import click

from kvbench import __version__
from kvbench.errors import KvbenchError


class _Group(click.Group):
    """A click group that turns kvbench errors into one line and an exit code, never a traceback."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except KvbenchError as e:
            click.echo(f"kvbench: error: {e}", err=True)
            ctx.exit(e.exit_code)
        except KeyboardInterrupt:
            click.echo("kvbench: interrupted", err=True)
            ctx.exit(130)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except OSError as e:  # an OS error that escaped the library's translation: still one line
            if os.environ.get("KVBENCH_DEBUG"):
                raise
            click.echo(f"kvbench: error: {e.strerror or e} ({e.filename or 'no file'})", err=True)
            ctx.exit(1)
        except Exception as e:  # noqa: BLE001 - last line of defence: one line, not a traceback
            if os.environ.get("KVBENCH_DEBUG"):
                raise
            click.echo(f"kvbench: internal error: {type(e).__name__}: {e} "
                       "(fix: rerun with KVBENCH_DEBUG=1 for the traceback and report it)", err=True)
            ctx.exit(1)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="kvbench")
def main():
    """Measure what LLM inference memory (KV cache, Engram tables) asks of DRAM and NVMe."""


@main.group(cls=_Group)
def replay():
    """Replay KV-cache or Engram workloads through tiers onto real DRAM and NVMe."""


@main.group(cls=_Group)
def trace():
    """Inspect and generate serving traces."""


_GROUPS = {"replay": replay, "trace": trace}


def _discover() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        group = _GROUPS[getattr(module, "GROUP", None)] if getattr(module, "GROUP", None) else main
        for command in getattr(module, "COMMANDS", ()):
            group.add_command(command)


_discover()

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
