"""The ``kvbench`` command: a thin click layer over the library.

Commands live one module each in this package; :data:`COMMANDS` names, per group, each command and the module
that defines it (``COMMANDS``: a list of click commands). A module is imported only when its command runs (or
``--help`` lists them), so ``kvbench mrc`` does not pay for torch, plotly or pandas, nor for the other commands'
imports. ``tests/cli/test_cli.py`` checks this table against the modules. Library errors (:mod:`kvbench.errors`)
become one line and an exit code here.
"""

from __future__ import annotations

import importlib
import os
import sys

import click

from kvbench import __version__
from kvbench import procs
from kvbench.errors import Interrupted, KvbenchError, one_line


class _Group(click.Group):
    """A click group that turns kvbench errors into one line and an exit code, never a traceback."""

    def invoke(self, ctx):
        try:
            if "kvbench.progress" in sys.modules:     # each command starts from the terminal test (auto)
                sys.modules["kvbench.progress"].set_mode(None)
            try:
                with procs.stop_signals():   # SIGINT, SIGTERM, SIGHUP: the same stop, in every command
                    return super().invoke(ctx)
            finally:                 # a live progress line (kvbench.progress) never runs into the message
                if "kvbench.progress" in sys.modules:
                    sys.modules["kvbench.progress"].clear()
        except KvbenchError as e:
            click.echo(f"kvbench: error: {one_line(e)}", err=True)
            ctx.exit(procs.exit_code(e.exit_code) if isinstance(e, Interrupted) else e.exit_code)
        except KeyboardInterrupt:
            click.echo("kvbench: interrupted", err=True)
            ctx.exit(procs.exit_code())
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except OSError as e:  # an OS error that escaped the library's translation: still one line
            if os.environ.get("KVBENCH_DEBUG"):
                raise
            click.echo(one_line(f"kvbench: error: {e.strerror or e} ({e.filename or 'no file'})"), err=True)
            ctx.exit(1)
        except Exception as e:  # noqa: BLE001 - last line of defence: one line, not a traceback
            if procs.stop_from(e) is not None:      # a stop that landed inside a compiled kernel
                click.echo("kvbench: interrupted", err=True)
                ctx.exit(procs.exit_code())
            if os.environ.get("KVBENCH_DEBUG"):
                raise
            click.echo(one_line(f"kvbench: internal error: {type(e).__name__}: {e} "
                                "(fix: rerun with KVBENCH_DEBUG=1 for the traceback and report it)"), err=True)
            ctx.exit(1)


# group ("" = top level) -> command name -> module in this package that defines it
COMMANDS: dict[str, dict[str, str]] = {
    "": {"check": "check", "cluster": "cluster", "ftl": "ftl", "io": "io", "models": "models", "mrc": "mrc",
         "plan": "plan", "prefill": "prefill", "qualify": "qualify", "report": "report", "run": "run"},
    "replay": {"engram": "replay_engram", "kv": "replay_kv"},
    "trace": {"convert": "trace_convert", "fit": "trace_cmds", "gen": "trace_cmds", "stats": "trace_cmds"},
}


class _LazyGroup(_Group):
    """A group whose commands (``COMMANDS[key]``) are imported from their modules on first use."""

    def __init__(self, *args, key: str = "", **kwargs):
        super().__init__(*args, **kwargs)
        self._lazy = COMMANDS[key]

    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | set(self._lazy))

    def get_command(self, ctx, name):
        if name not in self.commands and name in self._lazy:
            module = importlib.import_module(f"{__name__}.{self._lazy[name]}")
            from kvbench.cli._common import bound_numbers

            for command in module.COMMANDS:
                if command.name == name:          # every numeric option bounded, finite (one mechanism)
                    self.add_command(bound_numbers(command))
        return super().get_command(ctx, name)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="kvbench")
def main():
    """Measure what LLM inference memory (KV cache, Engram tables) asks of DRAM and NVMe."""


@main.group(cls=_LazyGroup, key="replay")
def replay():
    """Replay KV-cache or Engram workloads through tiers onto real DRAM and NVMe."""


@main.group(cls=_LazyGroup, key="trace")
def trace():
    """Inspect and generate serving traces."""


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
