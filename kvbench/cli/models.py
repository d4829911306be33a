"""``kvbench models``: list model presets and their KV bytes per token."""

from __future__ import annotations

import click

from kvbench.cli._common import emit_json, json_option
from kvbench.spec.models import load_model, model_names
from kvbench.units import format_bytes


@click.command("models")
@click.option("--block-tokens", type=click.IntRange(min=1), default=512, show_default=True, help="Tokens per KV block (for block size).")
@click.option("--tp", type=int, default=None, help="Tensor-parallel degree (splits GQA KV heads).")
@json_option
def models_cmd(block_tokens, tp, as_json):
    """List model presets: attention kind, layers, KV bytes per token and per block."""
    rows = []
    for name in model_names():
        m = load_model(name, tp=tp)
        rows.append({"name": name, "attention": m.attention, "layers": m.layers, "dtype": m.dtype, "tp": m.tp,
                     "bytes_per_token": m.bytes_per_token, "block_bytes": m.block_bytes(block_tokens),
                     "moe": m.is_moe, "source": m.source})
    if as_json:
        emit_json({"block_tokens": block_tokens, "models": rows})
        return
    click.echo(f"{'model':<18} {'attn':<4} {'layers':>6} {'dtype':<5} {'tp':>3} {'KV B/token':>11} "
               f"{'block (' + str(block_tokens) + ' tok)':>17}")
    for r in rows:
        click.echo(f"{r['name']:<18} {r['attention']:<4} {r['layers']:>6} {r['dtype']:<5} {r['tp']:>3} "
                   f"{r['bytes_per_token']:>11,} {format_bytes(r['block_bytes']):>17}")


COMMANDS = [models_cmd]
