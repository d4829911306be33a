"""``kvbench models``: list model presets, their layers by kind and the KV bytes a prefix hit loads and stores."""

from __future__ import annotations

import click

from kvbench.cli._common import emit_json, json_option
from kvbench.spec.models import load_model, model_names
from kvbench.units import format_bytes

PREFIX_TOKENS = (1024, 4096, 32768, 131072)


def _prefix_tokens(ctx, param, value):
    if not value:
        return PREFIX_TOKENS
    try:
        out = tuple(sorted({int(x) for x in value.split(",")}))
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a comma list of integers (give e.g. 4096,131072)") from None
    if out[0] <= 0:
        raise click.BadParameter("prefix lengths must be > 0")
    return tuple(sorted(set(out) | set(PREFIX_TOKENS)))


def model_row(m, block_tokens: int, prefix_tokens) -> dict:
    """The ``models --json`` record of one model at its TP degree (the contract the README states)."""
    return {"name": m.name, "attention": m.attention, "layers": m.layers, "dtype": m.dtype, "tp": m.tp,
            "bytes_per_token": m.bytes_per_token,
            "bytes_for_tokens": {str(n): m.bytes_for_tokens(n) for n in prefix_tokens},
            "stored_bytes_per_token": m.stored_bytes_per_token(block_tokens),
            "block_bytes": m.block_bytes(block_tokens),
            "kv_layers": [g.to_dict() for g in m.layer_bytes()],
            "moe": m.is_moe, "params_b": m.params_b, "active_params_b": m.active_params_b,
            "source": m.source, "notes": m.notes}


def _kinds(r: dict) -> str:
    parts = []
    for g in r["kv_layers"]:
        tag = {"sliding": f"swa{g['window']}", "attention": "full"}.get(g["kind"], g["kind"])
        parts.append(f"{g['count']}x{tag}")
    return "+".join(parts)


@click.command("models")
@click.option("--block-tokens", type=click.IntRange(min=1), default=512, show_default=True,
              help="Tokens per KV block (block size and per-block states).")
@click.option("--tp", type=int, default=None, help="Tensor-parallel degree (splits KV heads; one replicated head "
                                                   "per rank past the KV heads; MLA latents are not split).")
@click.option("--kv-dtype", default=None, help="KV cache dtype override (bf16, fp8, ...).")
@click.option("--prefix-tokens", callback=_prefix_tokens, default=None,
              help=f"Extra prefix lengths for bytes_for_tokens (always {', '.join(map(str, PREFIX_TOKENS))}).")
@json_option
def models_cmd(block_tokens, tp, kv_dtype, prefix_tokens, as_json):
    """List model presets: layers by kind, KV bytes per token per TP rank (long-prefix rate of what a hit loads),
    bytes a hit on a 4k and a 128k prefix loads, and what a block store keeps per token."""
    rows = [model_row(load_model(name, tp=tp, dtype=kv_dtype), block_tokens, prefix_tokens) for name in model_names()]
    if as_json:
        emit_json({"block_tokens": block_tokens, "prefix_tokens": list(prefix_tokens), "models": rows})
        return
    from kvbench.report.text import table

    for line in table(["model", "layers (kind)", "dtype", "tp", "B/token", "hit @4k", "hit @128k", "stored B/tok",
                       f"block ({block_tokens})"],
                      [[r["name"], _kinds(r), r["dtype"], str(r["tp"]), f"{r['bytes_per_token']:,}",
                        format_bytes(r["bytes_for_tokens"]["4096"]), format_bytes(r["bytes_for_tokens"]["131072"]),
                        f"{r['stored_bytes_per_token']:,.0f}", format_bytes(r["block_bytes"])] for r in rows],
                      "<<<>>>>>>"):
        click.echo(line)
    click.echo("B/token: per TP rank, what each further token of a prefix hit loads; hit @n: bytes a hit on n tokens "
               "loads (a sliding layer at most its window, a linear layer one state); stored: what a block store keeps "
               "per token so a hit can resume at any block boundary.")


COMMANDS = [models_cmd]
