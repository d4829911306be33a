"""Model presets: the architecture numbers that decide KV bytes per token and prefill cost.

A model declares its KV-holding layers by kind (``[[kv_layers]]`` in a preset; by default every layer is of
the kind named by ``attention``). Each kind reduces, per layer and per TP rank, to three numbers: the bytes one
token adds (``per_token``), how many trailing tokens the layer keeps (``window``; None = all of them) and a
constant per-sequence state (``state``). From those (DESIGN.md, "KV blocks"; README, "Model presets"):

- a prefix hit on n tokens loads ``sum(count * (per_token * min(n, window) + state))``: a full-attention layer
  its n tokens, a sliding-window layer at most its window, a linear-attention layer one state;
- ``bytes_per_token`` is the long-prefix rate of that (full-attention, MLA and indexer layers only);
- a block store that lets a hit resume at any block boundary keeps every layer's KV of every block (a window
  layer's old blocks are the window of some later boundary) and one state per block:
  ``stored_bytes_per_token(B) = sum(count * (per_token + state / B))``; a block slot holds B times that.

Tensor parallelism: attention KV heads are split across ranks, and past ``tp = kv_heads`` each rank holds one
replicated head (``max(kv_heads / tp, 1)``). An MLA latent and a sparse-attention indexer key are one shared
vector per token: every rank holds all of it. Linear-attention heads split like attention heads.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path

import numpy as np

from kvbench.errors import SpecError
from kvbench.spec.presets import load_preset, preset_names

DTYPE_BYTES = {"fp32": 4, "float32": 4, "bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2, "fp8": 1, "int8": 1,
               "fp4": 0.5}


# --- layer kinds ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class KVLayers:
    """A group of ``count`` layers of one kind, as declared in a preset (fields left 0 take the model's)."""

    kind: str
    count: int
    window: int = 0                # sliding: tokens kept
    kv_heads: int = 0              # attention / sliding (0: the model's)
    head_dim: int = 0
    kv_lora_rank: int = 0          # mla (0: the model's)
    qk_rope_dim: int = 0
    index_head_dim: int = 0        # indexer: key width per token
    scale_bytes: int = 0           # indexer: quantisation scale bytes per token
    key_heads: int = 0             # linear: key heads, value heads, head widths, short-conv kernel
    value_heads: int = 0
    key_dim: int = 0
    value_dim: int = 0
    conv_kernel: int = 0
    dtype: str = ""                # "" = the model's KV dtype
    note: str = ""


@dataclass(frozen=True)
class LayerBytes:
    """One layer group resolved at a TP degree: what each of its ``count`` layers holds on one rank."""

    kind: str
    count: int
    per_token: float               # bytes per token per layer per rank
    window: int | None             # tokens kept (None: every token)
    state: float                   # constant bytes per sequence per layer per rank
    heads_per_rank: float | None   # KV (or linear value) heads one rank holds; None where nothing is split
    dtype: str
    note: str = ""

    def load(self, n: np.ndarray) -> np.ndarray:
        """Bytes one layer of the group loads for a hit on a prefix of ``n`` tokens (vectorised)."""
        held = n if self.window is None else np.minimum(n, self.window)
        return self.per_token * held + np.where(n > 0, self.state, 0.0)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "count": self.count, "bytes_per_token_per_layer": self.per_token,
                "window": self.window, "state_bytes_per_layer": self.state, "heads_per_rank": self.heads_per_rank,
                "dtype": self.dtype, "note": self.note}


def _split_heads(heads: int, tp: int) -> float:
    """Heads one rank holds: split across ranks, one replicated head each once tp exceeds them."""
    return max(heads / tp, 1.0)


def _check_split(where: str, what: str, heads: int, tp: int) -> None:
    if heads % tp and tp % heads:
        raise SpecError(f"{where}: tp={tp} does not divide {what}={heads}",
                        f"choose a tensor-parallel degree that divides {heads} or is a multiple of it")


def _attention(m: "ModelSpec", g: KVLayers, tp: int, dt: float) -> tuple[float, int | None, float, float]:
    heads, d = g.kv_heads or m.kv_heads, g.head_dim or m.head_dim
    h = _split_heads(heads, tp)
    return 2 * h * d * dt, (g.window or None) if g.kind == "sliding" else None, 0.0, h


def _mla(m: "ModelSpec", g: KVLayers, tp: int, dt: float):
    return ((g.kv_lora_rank or m.kv_lora_rank) + (g.qk_rope_dim or m.qk_rope_dim)) * dt, None, 0.0, None


def _indexer(m: "ModelSpec", g: KVLayers, tp: int, dt: float):
    return g.index_head_dim * dt + g.scale_bytes, None, 0.0, None


def _linear(m: "ModelSpec", g: KVLayers, tp: int, dt: float):
    kh, vh = _split_heads(g.key_heads, tp), _split_heads(g.value_heads, tp)
    recurrent = vh * g.key_dim * g.value_dim                                  # one k_dim x v_dim state per value head
    conv = (2 * kh * g.key_dim + vh * g.value_dim) * max(g.conv_kernel - 1, 0)  # short-conv history of q, k, v
    return 0.0, None, (recurrent + conv) * dt, vh


@dataclass(frozen=True)
class LayerKind:
    """How one kind of layer holds KV: its resolver, the fields it needs, whether it is an extra cache inside
    layers counted elsewhere (an indexer lives in the MLA layers), and whether its heads split across TP."""

    resolve: object
    needs: tuple[str, ...] = ()
    extra: bool = False
    split: str = ""                # field whose head count must divide tp (or be divided by it)
    describe: str = ""


LAYER_KINDS: dict[str, LayerKind] = {
    "attention": LayerKind(_attention, (), split="kv_heads",
                           describe="full attention (GQA/MHA/MQA): 2 x kv_heads x head_dim per token"),
    "sliding": LayerKind(_attention, ("window",), split="kv_heads",
                         describe="sliding-window attention: as attention, at most `window` tokens"),
    "mla": LayerKind(_mla, (), describe="MLA latent: (kv_lora_rank + rope_dim) per token, whole on every rank"),
    "indexer": LayerKind(_indexer, ("index_head_dim",), extra=True,
                         describe="sparse-attention indexer key cache: index_head_dim (+ scales) per token, "
                                  "whole on every rank"),
    "linear": LayerKind(_linear, ("key_heads", "value_heads", "key_dim", "value_dim"), split="key_heads",
                        describe="linear attention / state space: a constant state per sequence"),
}


# --- the model ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelSpec:
    name: str
    attention: str                 # "gqa" (covers MHA/MQA) or "mla": the default kind of every layer
    layers: int
    hidden_size: int
    num_heads: int
    head_dim: int
    vocab_size: int
    intermediate_size: int         # dense FFN width (dense layers)
    kv_heads: int = 0              # GQA
    kv_lora_rank: int = 0          # MLA
    qk_rope_dim: int = 0           # MLA
    qk_nope_dim: int = 0           # MLA
    v_head_dim: int = 0            # MLA
    q_lora_rank: int = 0           # MLA (0 = no q compression)
    num_experts: int = 0           # MoE routed experts (0 = dense)
    experts_per_token: int = 0
    shared_experts: int = 0
    moe_intermediate_size: int = 0
    first_dense_layers: int = 0    # leading dense layers in an MoE model
    dtype: str = "bf16"            # KV cache dtype
    tp: int = 1                    # tensor-parallel degree (splits GQA KV heads)
    params_b: float = 0.0          # published total parameters, billions (for display)
    active_params_b: float = 0.0   # published parameters active per token, billions (compute scaling rules)
    kv_layers: tuple[KVLayers, ...] = ()   # layer kinds; empty: every layer is ``attention``'s kind
    source: str = ""
    notes: str = ""

    @property
    def dtype_bytes(self) -> float:
        return DTYPE_BYTES[self.dtype]

    # --- layers by kind ---
    @property
    def declared_layers(self) -> tuple[KVLayers, ...]:
        if self.kv_layers:
            return self.kv_layers
        return (KVLayers("mla" if self.attention == "mla" else "attention", self.layers),)

    def layer_bytes(self, tp: int | None = None) -> tuple[LayerBytes, ...]:
        """Each layer group resolved at ``tp`` (default: the spec's): per-token bytes, window, state."""
        tp = int(tp or self.tp)
        out = []
        for g in self.declared_layers:
            dtype = g.dtype or self.dtype
            per_token, window, state, heads = LAYER_KINDS[g.kind].resolve(self, g, tp, DTYPE_BYTES[dtype])
            out.append(LayerBytes(g.kind, g.count, float(per_token), window, float(state), heads, dtype, g.note))
        return tuple(out)

    @property
    def bytes_per_token(self) -> int:
        """KV bytes per token per TP rank at long prefixes: what each further token of a hit loads (layers that
        keep every token; window and state layers add a constant instead)."""
        return int(round(sum(g.count * g.per_token for g in self.layer_bytes() if g.window is None)))

    def kv_bytes(self, n, tp: int | None = None) -> np.ndarray:
        """Bytes per rank a hit on a prefix of ``n`` tokens loads (vectorised over ``n``)."""
        n = np.asarray(n, dtype=np.float64)
        return sum((g.count * g.load(n) for g in self.layer_bytes(tp)), np.zeros_like(n))

    def bytes_for_tokens(self, n: int, tp: int | None = None) -> int:
        """``kv_bytes`` of one prefix length, as an integer."""
        return int(round(float(self.kv_bytes(int(n), tp))))

    def block_bytes(self, block_tokens: int) -> int:
        """Bytes of one stored KV block slot of ``block_tokens`` tokens (full even when the block is partial): every
        layer's KV of those tokens plus each state layer's state at the block's end (a hit may resume there)."""
        b = int(block_tokens)
        return int(round(sum(g.count * (g.per_token * b + g.state) for g in self.layer_bytes())))

    def stored_bytes_per_token(self, block_tokens: int) -> float:
        """What a block store keeps per token so that a hit can resume at any block boundary."""
        return self.block_bytes(block_tokens) / int(block_tokens)

    def layer_loads(self, n, tp: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """For layer-by-layer pipelining: per group of layers (counts [G], bytes one layer of the group loads for a
        prefix of ``n`` tokens [G, len(n)]). The first declared group holds layer 0; extra caches (an indexer) ride
        with the layers that host them, spread evenly over the model's layers."""
        n = np.atleast_1d(np.asarray(n, dtype=np.float64))
        groups = self.layer_bytes(tp)
        hosts = [g for g in groups if not LAYER_KINDS[g.kind].extra]
        extra = sum(g.count * g.per_token for g in groups if LAYER_KINDS[g.kind].extra) / self.layers
        loads = np.stack([g.load(n) + extra * n for g in hosts])
        return np.array([g.count for g in hosts], dtype=np.float64), loads

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    def with_overrides(self, **kw) -> "ModelSpec":
        from kvbench.errors import UsageError
        if kw.get("tp") is not None and int(kw["tp"]) < 1:
            raise UsageError(f"--tp must be >= 1, not {kw['tp']}", "give --tp 1 (no tensor parallelism) or more")
        spec = replace(self, **{k: v for k, v in kw.items() if v is not None})
        spec.validate()
        return spec

    def validate(self) -> None:
        where = f"model {self.name!r}"
        if self.attention not in ("gqa", "mla"):
            raise SpecError(f"{where}: attention must be 'gqa' or 'mla', not {self.attention!r}", "fix the preset")
        if self.dtype not in DTYPE_BYTES:
            raise SpecError(f"{where}: unknown dtype {self.dtype!r}", f"use one of {', '.join(DTYPE_BYTES)}")
        for name in ("layers", "hidden_size", "num_heads", "head_dim", "vocab_size", "tp"):
            if getattr(self, name) <= 0:
                raise SpecError(f"{where}: {name} must be > 0", "fix the preset")
        if self.attention == "gqa" and self.kv_heads <= 0:
            raise SpecError(f"{where}: kv_heads must be > 0 for GQA", "fix the preset")
        if self.attention == "mla" and self.kv_lora_rank <= 0:
            raise SpecError(f"{where}: kv_lora_rank must be > 0 for MLA", "fix the preset")
        self._validate_layers(where)
        if self.num_experts and not (0 < self.experts_per_token <= self.num_experts):
            raise SpecError(f"{where}: experts_per_token must be in 1..num_experts", "fix the preset")

    def _validate_layers(self, where: str) -> None:
        hosted = 0
        for i, g in enumerate(self.declared_layers):
            w = f"{where}: kv_layers[{i}] ({g.kind})"
            kind = LAYER_KINDS.get(g.kind)
            if kind is None:
                raise SpecError(f"{w}: unknown layer kind", f"use one of {', '.join(LAYER_KINDS)}")
            if g.count <= 0:
                raise SpecError(f"{w}: count must be > 0", "give the number of layers of this kind")
            missing = [f for f in kind.needs if getattr(g, f) <= 0]
            if missing:
                raise SpecError(f"{w}: {', '.join(missing)} must be > 0", "give them in the [[kv_layers]] table")
            if g.dtype and g.dtype not in DTYPE_BYTES:
                raise SpecError(f"{w}: unknown dtype {g.dtype!r}", f"use one of {', '.join(DTYPE_BYTES)}")
            if g.kind in ("attention", "sliding") and not (g.kv_heads or self.kv_heads):
                raise SpecError(f"{w}: kv_heads must be > 0", "give kv_heads in the model or the layer table")
            if g.kind == "mla" and not (g.kv_lora_rank or self.kv_lora_rank):
                raise SpecError(f"{w}: kv_lora_rank must be > 0", "give kv_lora_rank in the model or the layer table")
            if kind.split:
                heads = getattr(g, kind.split) or getattr(self, kind.split, 0)
                _check_split(where, kind.split, heads, self.tp)
            hosted += 0 if kind.extra else g.count
            if kind.extra and g.count > self.layers:
                raise SpecError(f"{w}: count {g.count} exceeds the model's {self.layers} layers", "fix the preset")
        if hosted != self.layers:
            raise SpecError(f"{where}: kv_layers hold {hosted} layers, the model has {self.layers}",
                            "make the counts of the non-indexer kinds add up to layers")


_FIELDS = {f.name for f in fields(ModelSpec)}
_LAYER_FIELDS = {f.name for f in fields(KVLayers)}


def _kv_layers(raw, path) -> tuple[KVLayers, ...]:
    if not isinstance(raw, list) or not all(isinstance(x, dict) for x in raw):
        raise SpecError(f"{path}: kv_layers must be an array of tables", "write [[kv_layers]] kind = ... count = ...")
    out = []
    for i, d in enumerate(raw):
        unknown = set(d) - _LAYER_FIELDS
        if unknown:
            raise SpecError(f"{path}: kv_layers[{i}]: unknown field(s) {', '.join(sorted(unknown))}",
                            f"valid fields: {', '.join(sorted(_LAYER_FIELDS))}")
        if "kind" not in d or "count" not in d:
            raise SpecError(f"{path}: kv_layers[{i}]: kind and count are required", "add them")
        try:
            out.append(KVLayers(**d))
        except TypeError as e:
            raise SpecError(f"{path}: kv_layers[{i}]: {e}", "check the field types") from None
    return tuple(out)


def model_from_dict(data: dict, *, name: str, path: Path | str = "<dict>") -> ModelSpec:
    unknown = set(data) - _FIELDS
    if unknown:
        raise SpecError(f"{path}: unknown model field(s) {', '.join(sorted(unknown))}",
                        f"valid fields: {', '.join(sorted(_FIELDS))}")
    d = dict(data)
    if "kv_layers" in d:
        d["kv_layers"] = _kv_layers(d["kv_layers"], path)
    try:
        spec = ModelSpec(**{"name": name, **d})
    except TypeError as e:
        raise SpecError(f"{path}: {e}", "give every required field: attention, layers, hidden_size, ...") from None
    spec.validate()
    return spec


def load_model(name_or_path: str, *, tp: int | None = None, dtype: str | None = None) -> ModelSpec:
    """Load a model preset by name (``llama-3.1-8b``) or TOML path; optional TP/dtype overrides."""
    data, path = load_preset("models", name_or_path)
    spec = model_from_dict(data, name=data.pop("name", path.stem), path=path)
    return spec.with_overrides(tp=tp, dtype=dtype)


def model_names() -> list[str]:
    return preset_names("models")
