"""A decoder stack with random weights, shaped like a model preset, for timing prefill.

Weights are random (timing does not depend on their values); shapes are the model's:
- GQA/MHA attention: q/k/v/o projections, RoPE, causal ``scaled_dot_product_attention`` with grouped KV heads
  (``enable_gqa``; on CUDA the KV heads are expanded so that a fused kernel, not the math fallback, runs).
- MLA (DeepSeek): q_a (hidden -> q_lora_rank) + norm + q_b (-> heads x (nope + rope)), kv_a (hidden ->
  kv_lora_rank + rope) + norm + kv_b (-> heads x (nope + v)), decoupled RoPE key shared by all heads, o_proj.
  Prefill runs the decompressed form (as serving engines do for prefill); V is zero-padded to the q/k head
  dim so the fused attention kernels accept it (a small overcount: 128 -> 192 for DeepSeek-V3).
- FFN: SwiGLU (gate, up, down). MoE layers: the router GEMM and top-k, then the *active* expert shapes: every
  token goes through ``experts_per_token`` routed experts and the shared experts of width
  ``moe_intermediate_size``. The FLOPs equal the real model's; the GEMMs are larger and better shaped than a
  real grouped GEMM over 256 experts, so MoE times are a lower bound (which favours recompute: conservative
  for a claim that loading wins). Leading ``first_dense_layers`` use the dense FFN width.
- Embedding lookup, final norm and the LM head on the last token only (prefill produces one logit row).

- Sliding-window layers (``[[kv_layers]] kind = "sliding"``: Gemma 3's local layers, gpt-oss's banded ones)
  attend to at most ``window`` preceding tokens: queries in blocks of ``window``, each against the keys of its
  block and the one before under a banded mask, so their time grows linearly past the window as the real
  kernels' does. Linear-attention layers are timed as full attention (an upper bound on their time: it favours
  recompute, conservative for a claim that loading wins).

``build_stack`` instantiates a subset of the layers (some dense, some MoE; full and sliding attention) so that
a large model can be measured on a small device; per-layer times are scaled to the full stack by layer type.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvbench.errors import DependencyError, SpecError
from kvbench.spec.models import ModelSpec

TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
_SDPA_GQA: bool | None = None  # whether scaled_dot_product_attention takes enable_gqa (torch >= 2.5)


def require_torch():
    """Import torch or raise a one-line DependencyError with the fix."""
    try:
        import torch
    except ImportError:
        raise DependencyError("torch is not installed (needed to measure prefill)",
                              "pip install 'kvbench[gpu]' or pip install torch==2.13.0 (CPU build)") from None
    return torch


@dataclass(frozen=True)
class LayerPlan:
    """Which layers are instantiated and how many of each kind the full model has."""

    dense_total: int
    moe_total: int
    dense_measured: int
    moe_measured: int

    @property
    def layers_total(self) -> int:
        return self.dense_total + self.moe_total

    @property
    def layers_measured(self) -> int:
        return self.dense_measured + self.moe_measured

    @property
    def scaled(self) -> bool:
        return self.layers_measured < self.layers_total


def plan_layers(spec: ModelSpec, layers: int | None) -> LayerPlan:
    """Pick ``layers`` layers to build (None = all), keeping both kinds when the model has both."""
    dense_total = spec.first_dense_layers if spec.is_moe else spec.layers
    dense_total = min(dense_total, spec.layers)
    moe_total = spec.layers - dense_total
    if layers is None or layers >= spec.layers:
        return LayerPlan(dense_total, moe_total, dense_total, moe_total)
    if layers <= 0:
        raise SpecError(f"--layers must be > 0, got {layers}", "give the number of layers to build, e.g. 2")
    kinds = (dense_total > 0) + (moe_total > 0)
    if layers < kinds:
        raise SpecError(f"model {spec.name!r} has dense and MoE layers: --layers must be >= 2 to measure both",
                        "give --layers 2 or more")
    if not moe_total:
        return LayerPlan(dense_total, 0, layers, 0)
    if not dense_total:
        return LayerPlan(0, moe_total, 0, layers)
    dense = min(dense_total, max(1, round(layers * dense_total / spec.layers)))
    return LayerPlan(dense_total, moe_total, dense, layers - dense)


def sliding_window(spec: ModelSpec) -> tuple[int | None, int]:
    """The model's sliding-window layers: (window, count); (None, 0) when it has none. Several sliding groups
    take the widest window (the slowest; none of the presets has two)."""
    groups = [g for g in spec.declared_layers if g.kind == "sliding"]
    if not groups:
        return None, 0
    return max(int(g.window) for g in groups), sum(int(g.count) for g in groups)


def layer_kinds(spec: ModelSpec, plan: LayerPlan) -> tuple[list[str], dict[str, int]]:
    """The kind of each built layer ("dense", "moe", "+sliding" for a sliding-window one) and each kind's count
    in the full model: sliding layers are shared between the FFN kinds in proportion (exact for every preset,
    whose sliding layers all have one FFN kind). A kind present in the model gets at least one built layer."""
    window, n_sliding = sliding_window(spec)
    kinds, totals = [], {}
    for ffn, total, built in (("dense", plan.dense_total, plan.dense_measured),
                              ("moe", plan.moe_total, plan.moe_measured)):
        slide_total = int(round(total * n_sliding / spec.layers)) if window else 0
        full_total = total - slide_total
        if built and slide_total and full_total:
            if built < 2:
                raise SpecError(f"model {spec.name!r} has full and sliding-window {ffn} layers: build at least 2 "
                                f"{ffn} layers to time both", f"give --layers {2 * (1 + bool(plan.dense_total and plan.moe_total))} or more")
            slide_built = min(built - 1, max(1, int(round(built * slide_total / total))))
        else:
            slide_built = built if slide_total and not full_total else 0
        kinds += [ffn] * (built - slide_built) + [f"{ffn}+sliding"] * slide_built
        totals[ffn], totals[f"{ffn}+sliding"] = full_total, slide_total
    return kinds, {k: v for k, v in totals.items() if v}


def layer_param_counts(spec: ModelSpec) -> dict[str, int]:
    """Parameters of one dense layer, one MoE layer (active experts only) and the embedding."""
    h, H = spec.hidden_size, spec.num_heads
    if spec.attention == "mla":
        qk = spec.qk_nope_dim + spec.qk_rope_dim
        q = h * spec.q_lora_rank + spec.q_lora_rank * H * qk if spec.q_lora_rank else h * H * qk
        attn = q + h * (spec.kv_lora_rank + spec.qk_rope_dim) + spec.kv_lora_rank * H * (
            spec.qk_nope_dim + spec.v_head_dim) + H * spec.v_head_dim * h
    else:
        d = spec.head_dim
        attn = h * H * d + 2 * h * spec.kv_heads * d + H * d * h
    dense = attn + 3 * h * spec.intermediate_size
    m = spec.moe_intermediate_size or spec.intermediate_size
    moe = attn + h * spec.num_experts + 3 * h * m * (spec.experts_per_token + spec.shared_experts)
    return {"dense": dense, "moe": moe, "embedding": spec.vocab_size * h}


def _rope(torch, n: int, dim: int, device, dtype):
    inv = 1.0 / (10000.0 ** (torch.arange(0, dim, 2, device=device, dtype=torch.float32) / dim))
    ang = torch.outer(torch.arange(n, device=device, dtype=torch.float32), inv)
    return ang.cos().to(dtype), ang.sin().to(dtype)


def _apply_rope(torch, x, cos, sin):
    """Rotate-half RoPE on the last dim of ``x`` [..., n, dim]."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def _sdpa_has_gqa(torch) -> bool:
    """Probe (the builtin has no inspectable signature) whether SDPA takes ``enable_gqa`` (torch >= 2.5)."""
    q, kv = torch.zeros(1, 2, 1, 4), torch.zeros(1, 1, 1, 4)
    try:
        torch.nn.functional.scaled_dot_product_attention(q, kv, kv, enable_gqa=True)
        return True
    except TypeError:
        return False


def attention(torch, q, k, v, window: int | None = None, **kw):
    """Causal attention of ``q`` [b, heads, n, d] over ``k``/``v``; with ``window``, each query sees at most the
    ``window`` most recent tokens (itself included). Windowed, the queries go in blocks of ``window`` against
    the keys of their block and the previous one under a banded mask: O(n x window), never an n x n mask."""
    F = torch.nn.functional
    n = q.shape[-2]
    if window is None or n <= window:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, **kw)
    out = []
    pos = torch.arange(n, device=q.device)
    for s in range(0, n, window):
        e = min(n, s + window)
        lo = max(0, s - window + 1)
        qi, kj = pos[s:e, None], pos[None, lo:e]
        band = (kj <= qi) & (kj > qi - window)
        out.append(F.scaled_dot_product_attention(q[..., s:e, :], k[..., lo:e, :], v[..., lo:e, :],
                                                  attn_mask=band, **kw))
    return torch.cat(out, dim=-2)


class Stack:
    """The instantiated layers and the forward pass, with a hook between layers for timing."""

    def __init__(self, spec: ModelSpec, plan: LayerPlan, *, device: str, dtype: str, seed: int = 0):
        global _SDPA_GQA
        torch = require_torch()
        if _SDPA_GQA is None:
            _SDPA_GQA = _sdpa_has_gqa(torch)
        if dtype not in TORCH_DTYPES:
            raise SpecError(f"unknown compute dtype {dtype!r}", f"use one of {', '.join(TORCH_DTYPES)}")
        self.torch, self.spec, self.plan, self.device = torch, spec, plan, torch.device(device)
        self.dtype = getattr(torch, TORCH_DTYPES[dtype])
        self.gen = torch.Generator(device=self.device).manual_seed(seed)
        h = spec.hidden_size
        self.embed = self._w(spec.vocab_size, h)  # tied with the LM head: same shape, same FLOPs
        self.final_norm = torch.ones(h, device=self.device, dtype=self.dtype)
        self.kinds, self.totals = layer_kinds(spec, plan)
        self.window = sliding_window(spec)[0]
        self.layers = [self._layer(moe=k.startswith("moe"), window=self.window if k.endswith("+sliding") else None)
                       for k in self.kinds]

    # --- weights ---------------------------------------------------------------------------------------
    def _w(self, out_f: int, in_f: int):
        w = self.torch.empty(out_f, in_f, device=self.device, dtype=self.dtype)
        return w.normal_(0.0, 1.0 / math.sqrt(in_f), generator=self.gen)

    def _mlp(self, width: int) -> dict:
        h = self.spec.hidden_size
        return {"gate": self._w(width, h), "up": self._w(width, h), "down": self._w(h, width)}

    def _layer(self, *, moe: bool, window: int | None = None) -> dict:
        s, h, H = self.spec, self.spec.hidden_size, self.spec.num_heads
        ones = lambda n: self.torch.ones(n, device=self.device, dtype=self.dtype)  # noqa: E731
        layer = {"ln1": ones(h), "ln2": ones(h), "window": window}
        if s.attention == "mla":
            qk = s.qk_nope_dim + s.qk_rope_dim
            if s.q_lora_rank:
                layer.update(q_a=self._w(s.q_lora_rank, h), q_ln=ones(s.q_lora_rank),
                             q_b=self._w(H * qk, s.q_lora_rank))
            else:
                layer["q"] = self._w(H * qk, h)
            layer.update(kv_a=self._w(s.kv_lora_rank + s.qk_rope_dim, h), kv_ln=ones(s.kv_lora_rank),
                         kv_b=self._w(H * (s.qk_nope_dim + s.v_head_dim), s.kv_lora_rank),
                         o=self._w(h, H * s.v_head_dim))
        else:
            d = s.head_dim
            layer.update(q=self._w(H * d, h), k=self._w(s.kv_heads * d, h), v=self._w(s.kv_heads * d, h),
                         o=self._w(h, H * d))
        if moe:
            m = s.moe_intermediate_size or s.intermediate_size
            layer["router"] = self._w(s.num_experts, h)
            layer["experts"] = [self._mlp(m) for _ in range(s.experts_per_token)]
            layer["shared"] = self._mlp(m * s.shared_experts) if s.shared_experts else None
        else:
            layer["mlp"] = self._mlp(s.intermediate_size)
        return layer

    # --- forward ---------------------------------------------------------------------------------------
    def _rms(self, x, w):
        F = self.torch.nn.functional
        if hasattr(F, "rms_norm"):  # torch >= 2.4
            return F.rms_norm(x, (x.shape[-1],), w, 1e-6)
        xf = x.float()
        return (xf * self.torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * w

    def _swiglu(self, x, p):
        F = self.torch.nn.functional
        return F.linear(F.silu(F.linear(x, p["gate"])) * F.linear(x, p["up"]), p["down"])

    def _attn_gqa(self, x, L, rope):
        torch, s, F = self.torch, self.spec, self.torch.nn.functional
        n, H, KV, d = x.shape[0], s.num_heads, s.kv_heads, s.head_dim
        q = F.linear(x, L["q"]).view(n, H, d).transpose(0, 1)
        k = F.linear(x, L["k"]).view(n, KV, d).transpose(0, 1)
        v = F.linear(x, L["v"]).view(n, KV, d).transpose(0, 1)
        cos, sin = rope
        q, k = _apply_rope(torch, q, cos, sin), _apply_rope(torch, k, cos, sin)
        # Expanded KV heads on CUDA (the fused flash/memory-efficient kernels take them for certain; a copy of
        # K and V is ~0.1 ms at 16k tokens on an H200) and on torch < 2.5; native GQA elsewhere. Same FLOPs.
        expand = KV != H and (not _SDPA_GQA or self.device.type == "cuda")
        if expand:
            k, v = k.repeat_interleave(H // KV, dim=0), v.repeat_interleave(H // KV, dim=0)
        gqa = {"enable_gqa": True} if KV != H and not expand else {}
        o = attention(torch, q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), L.get("window"), **gqa)
        return F.linear(o.squeeze(0).transpose(0, 1).reshape(n, H * d), L["o"])

    def _attn_mla(self, x, L, rope):
        torch, s, F = self.torch, self.spec, self.torch.nn.functional
        n, H, nope, r, vd = x.shape[0], s.num_heads, s.qk_nope_dim, s.qk_rope_dim, s.v_head_dim
        if s.q_lora_rank:
            q = F.linear(self._rms(F.linear(x, L["q_a"]), L["q_ln"]), L["q_b"])
        else:
            q = F.linear(x, L["q"])
        q = q.view(n, H, nope + r).transpose(0, 1)
        kv_a = F.linear(x, L["kv_a"])
        c_kv, k_pe = kv_a[:, : s.kv_lora_rank], kv_a[:, s.kv_lora_rank:]
        kv = F.linear(self._rms(c_kv, L["kv_ln"]), L["kv_b"]).view(n, H, nope + vd).transpose(0, 1)
        k_nope, v = kv[..., :nope], kv[..., nope:]
        cos, sin = rope
        q_pe = _apply_rope(torch, q[..., nope:], cos, sin)
        k_pe = _apply_rope(torch, k_pe.unsqueeze(0), cos, sin).expand(H, n, r)
        q = torch.cat((q[..., :nope], q_pe), dim=-1)
        k = torch.cat((k_nope, k_pe), dim=-1)
        if vd != nope + r:
            v = F.pad(v, (0, nope + r - vd))
        o = F.scaled_dot_product_attention(q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), is_causal=True)
        o = o.squeeze(0)[..., :vd].transpose(0, 1).reshape(n, H * vd)
        return F.linear(o, L["o"])

    def _moe(self, x, L):
        torch, s, F = self.torch, self.spec, self.torch.nn.functional
        logits = F.linear(x, L["router"]).float()
        weights, _ = torch.topk(logits.softmax(dim=-1), s.experts_per_token, dim=-1)
        weights = (weights / weights.sum(dim=-1, keepdim=True)).to(x.dtype)
        out = self._swiglu(x, L["shared"]) if L["shared"] is not None else torch.zeros_like(x)
        for j, expert in enumerate(L["experts"]):
            out = out + weights[:, j:j + 1] * self._swiglu(x, expert)
        return out

    def layer_forward(self, x, L, rope):
        attn = self._attn_mla if self.spec.attention == "mla" else self._attn_gqa
        x = x + attn(self._rms(x, L["ln1"]), L, rope)
        y = self._rms(x, L["ln2"])
        return x + (self._moe(y, L) if "router" in L else self._swiglu(y, L["mlp"]))

    def prepare(self, n: int):
        """Inputs for a prompt of ``n`` tokens: token ids and the RoPE tables (not timed)."""
        torch, s = self.torch, self.spec
        ids = torch.randint(0, s.vocab_size, (n,), device=self.device, generator=self.gen)
        rope_dim = s.qk_rope_dim if s.attention == "mla" else s.head_dim
        return ids, _rope(torch, n, rope_dim, self.device, self.dtype)

    def forward(self, ids, rope, mark=None):
        """Prefill: embedding, every built layer, final norm and the LM head on the last token.

        ``mark(i)`` is called before stage i (0 = embedding, 1..L = layers, L+1 = head) and once at the end.
        """
        F = self.torch.nn.functional
        mark = mark or (lambda i: None)
        mark(0)
        x = F.embedding(ids, self.embed)
        for i, L in enumerate(self.layers):
            mark(i + 1)
            x = self.layer_forward(x, L, rope)
        mark(len(self.layers) + 1)
        logits = F.linear(self._rms(x[-1:], self.final_norm), self.embed)
        mark(len(self.layers) + 2)
        return logits
