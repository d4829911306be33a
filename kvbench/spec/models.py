"""Model presets: the architecture numbers that decide KV bytes per token and prefill cost.

Bytes per token (DESIGN.md): GQA/MHA ``2 * layers * kv_heads * head_dim * dtype_bytes / tp``;
MLA ``layers * (kv_lora_rank + rope_dim) * dtype_bytes`` (the latent is replicated, not split, across TP).
A KV block occupies a full slot of ``block_tokens * bytes_per_token`` even when partially filled.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path

from kvbench.errors import SpecError
from kvbench.spec.presets import load_preset, preset_names

DTYPE_BYTES = {"fp32": 4, "float32": 4, "bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2, "fp8": 1, "int8": 1,
               "fp4": 0.5}


@dataclass(frozen=True)
class ModelSpec:
    name: str
    attention: str                 # "gqa" (covers MHA/MQA) or "mla"
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
    source: str = ""
    notes: str = ""

    @property
    def dtype_bytes(self) -> float:
        return DTYPE_BYTES[self.dtype]

    @property
    def bytes_per_token(self) -> int:
        """KV-cache bytes per token per GPU (per TP rank for GQA)."""
        if self.attention == "mla":
            return int(self.layers * (self.kv_lora_rank + self.qk_rope_dim) * self.dtype_bytes)
        heads = max(self.kv_heads // self.tp, 1)       # past tp = kv_heads, heads are replicated, not split
        return int(2 * self.layers * heads * self.head_dim * self.dtype_bytes)

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    def block_bytes(self, block_tokens: int) -> int:
        """Bytes of one KV block slot of ``block_tokens`` tokens."""
        return int(block_tokens) * self.bytes_per_token

    def with_overrides(self, **kw) -> "ModelSpec":
        from dataclasses import replace
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
        if self.attention == "gqa":
            if self.kv_heads <= 0:
                raise SpecError(f"{where}: kv_heads must be > 0 for GQA", "fix the preset")
            if self.kv_heads % self.tp and self.tp % self.kv_heads:
                raise SpecError(f"{where}: tp={self.tp} does not divide kv_heads={self.kv_heads}",
                                "choose a tensor-parallel degree that divides the KV heads")
        else:
            if self.kv_lora_rank <= 0:
                raise SpecError(f"{where}: kv_lora_rank must be > 0 for MLA", "fix the preset")
        if self.num_experts and not (0 < self.experts_per_token <= self.num_experts):
            raise SpecError(f"{where}: experts_per_token must be in 1..num_experts", "fix the preset")


_FIELDS = {f.name for f in fields(ModelSpec)}


def model_from_dict(data: dict, *, name: str, path: Path | str = "<dict>") -> ModelSpec:
    unknown = set(data) - _FIELDS
    if unknown:
        raise SpecError(f"{path}: unknown model field(s) {', '.join(sorted(unknown))}",
                        f"valid fields: {', '.join(sorted(_FIELDS))}")
    try:
        spec = ModelSpec(**{"name": name, **data})
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
