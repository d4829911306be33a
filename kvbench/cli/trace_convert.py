"""``kvbench trace convert``: write a trace in kvbench's binary columnar form (.kvbt) to share or keep.

Every command that reads a text trace already caches this form on its own (see ``kvbench.stream.tracebin``);
this command writes it where you say, with the reading options baked in.
"""

from __future__ import annotations

import click

from kvbench.cli._common import OUTPUT, emit_json, force_option, json_option
from kvbench.cli.trace_cmds import trace_options


@click.command("convert")
@click.argument("trace")
@click.option("-o", "--output", required=True, type=OUTPUT,
              help="Output file (binary columnar trace; .kvbt by convention).")
@trace_options
@force_option
@json_option
def convert_cmd(trace, output, fmt, block_tokens, time_unit, field_map, sort_time, limit, as_json):
    """Convert TRACE (JSONL/CSV, optionally gzipped, or a built-in name) to the binary columnar form.

    Any command reads the result like the source (kvbench mrc OUT.kvbt), with the format, field mapping,
    block size and time unit given here stored in it. Requests keep the file order (--sort applies on read).
    """
    import time

    from kvbench.errors import UsageError
    from kvbench.stream.traces import convert_trace, parse_field_mapping

    if sort_time or limit is not None:
        raise UsageError("--sort and --limit apply when reading, not converting",
                         "convert the whole trace, then read it with --sort/--limit")
    t0 = time.perf_counter()
    meta = convert_trace(trace, output, fmt, block_tokens=block_tokens, time_unit=time_unit,
                         fields=parse_field_mapping(field_map) or None)
    from pathlib import Path

    out = {"output": str(output), "bytes": Path(output).stat().st_size, "format": meta["format"],
           "requests": meta["requests"], "block_references": meta["blocks"], "defaults": meta["defaults"],
           "source": meta["source"], "elapsed_s": time.perf_counter() - t0}
    if as_json:
        emit_json(out)
        return
    click.echo(f"wrote {output}: {meta['requests']:,} requests, {meta['blocks']:,} block references "
               f"({meta['format']}, {meta['defaults']['block_tokens']} tokens/block, "
               f"{out['bytes'] / 1e6:,.1f} MB) in {out['elapsed_s']:.2f} s")


GROUP = "trace"
COMMANDS = [convert_cmd]
