"""Engram table presets and the n-gram hash that turns token ids into table rows (pure, vectorised).

Engram (arXiv 2601.07372) looks up, per token, per Engram layer, per n-gram order n in 2..N and per hash head k,
one row of a prime-sized table: ``row = offset(n, k) + (mix_n(t, t-1, ..) mod p(n, k))`` where ``mix_n`` is the
multiply-XOR of the last n *compressed* token ids with odd per-layer multipliers, positions before the sequence
start are the (compressed) pad id, and the primes p(n, k) are distinct across every (layer, order, head). The
constants follow the reference demo (deepseek-ai/Engram ``engram_demo_v1.py``): multipliers drawn from
``default_rng(seed + 10007 * layer_id)`` below ``(int64 max // vocab) // 2``, primes found upward from the
target table size. Rows are numbered globally: layer tables one after another, head tables inside a layer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

import numpy as np

from kvbench.errors import SpecError
from kvbench.spec.models import DTYPE_BYTES
from kvbench.spec.presets import load_preset, preset_names

PRIME_1 = 10007  # per-layer seed stride of the reference implementation


@dataclass(frozen=True)
class EngramSpec:
    """One Engram table configuration (a preset in ``workloads/engram/``)."""

    name: str
    layer_ids: tuple[int, ...]
    max_ngram: int
    heads_per_order: int
    rows_per_head: tuple[int, ...]       # target rows per head table, one per order n = 2..max_ngram
    dims_per_head: int
    dtype: str = "bf16"
    scale_bytes: int = 0                 # per-row quantisation scales stored beside the values
    pad_id: int = 2
    seed: int = 0
    backbone_layers: int = 30
    backbone_model: str = ""             # the backbone's model preset, when kvbench has one (its compute profiles fit)
    backbone_active_params_b: float = 0.0          # parameters active per decoded token (compute scaling rule)
    backbone_prefill_active_params_b: float = 0.0  # per prompt token, where it differs (0: same as decode)
    tokenizer: str = "deepseek-v3"
    params_b: float = 0.0
    source: str = ""
    notes: str = ""
    scale: float = 1.0                   # rows_per_head / published rows_per_head (1.0 = full size)

    @property
    def orders(self) -> tuple[int, ...]:
        return tuple(range(2, self.max_ngram + 1))

    @property
    def heads_per_layer(self) -> int:
        return len(self.orders) * self.heads_per_order

    @property
    def rows_per_token(self) -> int:
        """Rows looked up per token: layers x orders x heads."""
        return len(self.layer_ids) * self.heads_per_layer

    @property
    def row_bytes(self) -> int:
        return int(math.ceil(self.dims_per_head * DTYPE_BYTES[self.dtype])) + self.scale_bytes

    @property
    def bytes_per_token(self) -> int:
        return self.rows_per_token * self.row_bytes

    def validate(self, where: str = "") -> None:
        where = where or f"engram preset {self.name!r}"
        if self.dtype not in DTYPE_BYTES:
            raise SpecError(f"{where}: unknown dtype {self.dtype!r}", f"use one of {', '.join(DTYPE_BYTES)}")
        if not self.layer_ids or len(set(self.layer_ids)) != len(self.layer_ids) or min(self.layer_ids) < 0:
            raise SpecError(f"{where}: layer_ids must be distinct block indices >= 0", "e.g. layer_ids = [1, 15]")
        if self.max_ngram < 2:
            raise SpecError(f"{where}: max_ngram must be >= 2 (orders 2..max_ngram)", "e.g. max_ngram = 3")
        if len(self.rows_per_head) != len(self.orders):
            raise SpecError(f"{where}: rows_per_head has {len(self.rows_per_head)} entries for "
                            f"{len(self.orders)} orders", "give one number, or one per order 2..max_ngram")
        for name in ("heads_per_order", "dims_per_head", "backbone_layers"):
            if getattr(self, name) <= 0:
                raise SpecError(f"{where}: {name} must be > 0", "fix the preset")
        if min(self.rows_per_head) < 2:
            raise SpecError(f"{where}: rows_per_head must be >= 2", "fix the preset")
        if self.backbone_active_params_b < 0 or self.backbone_prefill_active_params_b < 0:
            raise SpecError(f"{where}: backbone active parameters must be >= 0", "fix the preset")
        if self.scale_bytes < 0 or self.pad_id < 0:
            raise SpecError(f"{where}: scale_bytes and pad_id must be >= 0", "fix the preset")

    def active_params_b(self, mode: str) -> float:
        """Backbone parameters active per token in ``decode`` or ``prefill`` (0 when the preset does not say)."""
        if mode == "prefill" and self.backbone_prefill_active_params_b:
            return self.backbone_prefill_active_params_b
        return self.backbone_active_params_b

    def scaled(self, factor: float) -> "EngramSpec":
        """The same layout with every head table ``factor`` times as many rows (a table that fits a test box)."""
        if not 0 < factor <= 1:
            raise SpecError(f"table scale must be in (0, 1], got {factor}", "give a smaller table or a larger target")
        rows = tuple(max(2, int(r * factor)) for r in self.rows_per_head)
        return replace(self, rows_per_head=rows, scale=self.scale * factor)


_FIELDS = {f.name for f in fields(EngramSpec)} - {"name", "scale"}


def engram_from_dict(data: dict, *, name: str, path: Path | str = "<dict>") -> EngramSpec:
    """Build and validate a spec from a preset dict; unknown or missing fields name the file."""
    unknown = set(data) - _FIELDS
    if unknown:
        raise SpecError(f"{path}: unknown engram field(s) {', '.join(sorted(unknown))}",
                        f"valid fields: {', '.join(sorted(_FIELDS))}")
    missing = {"layer_ids", "max_ngram", "heads_per_order", "rows_per_head", "dims_per_head"} - set(data)
    if missing:
        raise SpecError(f"{path}: missing engram field(s) {', '.join(sorted(missing))}", "add them to the preset")
    d = dict(data)
    d["layer_ids"] = tuple(int(x) for x in d["layer_ids"])
    rph = d["rows_per_head"]
    n_orders = max(int(d["max_ngram"]) - 1, 0)
    d["rows_per_head"] = tuple(int(x) for x in rph) if isinstance(rph, (list, tuple)) else (int(rph),) * n_orders
    try:
        spec = EngramSpec(name=name, **d)
    except (TypeError, ValueError) as e:
        raise SpecError(f"{path}: {e}", "check the field types in the preset") from None
    spec.validate(f"{path}")
    return spec


def load_engram(name_or_path: str) -> EngramSpec:
    """Load an Engram preset by name (``engram-27b``) or TOML path."""
    data, path = load_preset("engram", name_or_path)
    return engram_from_dict(data, name=data.pop("name", path.stem), path=path)


def engram_names() -> list[str]:
    return preset_names("engram")


# --- primes -----------------------------------------------------------------------------------------------
def is_prime(n: int) -> bool:
    """Deterministic Miller-Rabin for n < 3.3e24 (fixed witness set)."""
    if n < 2:
        return False
    small = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41)
    for p in small:
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d //= 2
        s += 1
    for a in small:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def table_primes(spec: EngramSpec) -> np.ndarray:
    """Prime table sizes, shape [layers, orders, heads]: searched upward from each order's target size,
    never reusing a prime anywhere in the model (as the reference ``calculate_vocab_size_across_layers``)."""
    seen: set[int] = set()
    out = np.zeros((len(spec.layer_ids), len(spec.orders), spec.heads_per_order), dtype=np.int64)
    for li in range(len(spec.layer_ids)):
        for oi, target in enumerate(spec.rows_per_head):
            start = target - 1
            for h in range(spec.heads_per_order):
                c = start + 1
                while not (is_prime(c) and c not in seen):
                    c += 1
                seen.add(c)
                out[li, oi, h] = c
                start = c
    return out


def layer_multipliers(layer_ids, max_ngram: int, vocab_size: int, seed: int) -> np.ndarray:
    """Odd multipliers, shape [layers, max_ngram]: ``2 * U[0, half_bound) + 1`` from ``default_rng(seed +
    10007 * layer_id)``, bounded so that ``token * multiplier`` stays inside int64."""
    m_max = int(np.iinfo(np.int64).max // max(int(vocab_size), 1))
    half_bound = max(1, m_max // 2)
    rows = []
    for lid in layer_ids:
        g = np.random.default_rng(int(seed + PRIME_1 * int(lid)))
        rows.append(g.integers(low=0, high=half_bound, size=(max_ngram,), dtype=np.int64) * 2 + 1)
    return np.stack(rows)


@dataclass(frozen=True)
class EngramHasher:
    """The hash of one Engram model over a compressed vocabulary of ``vocab_size`` ids."""

    spec: EngramSpec
    vocab_size: int                      # compressed (canonical) vocabulary size
    pad_id: int                          # compressed pad id
    multipliers: np.ndarray = field(repr=False)   # [layers, max_ngram] int64, odd
    primes: np.ndarray = field(repr=False)        # [layers, orders, heads] int64
    base: np.ndarray = field(repr=False)          # [layers, orders*heads] int64: first global row of each table

    @classmethod
    def build(cls, spec: EngramSpec, vocab_size: int, pad_id: int | None = None,
              multipliers: np.ndarray | None = None) -> "EngramHasher":
        primes = table_primes(spec)
        sizes = primes.reshape(len(spec.layer_ids), -1)
        base = (np.cumsum(sizes.ravel()) - sizes.ravel()).reshape(sizes.shape)
        if multipliers is None:
            multipliers = layer_multipliers(spec.layer_ids, spec.max_ngram, vocab_size, spec.seed)
        mult = np.asarray(multipliers, dtype=np.int64)
        if mult.shape != (len(spec.layer_ids), spec.max_ngram) or np.any(mult % 2 == 0):
            raise SpecError(f"multipliers must be odd, shape {(len(spec.layer_ids), spec.max_ngram)}",
                            "leave them to the seed")
        return cls(spec, int(vocab_size), int(spec.pad_id if pad_id is None else pad_id), mult, primes,
                   base.astype(np.int64))

    @property
    def table_sizes(self) -> np.ndarray:
        """Rows of each head table, [layers, orders*heads]."""
        return self.primes.reshape(len(self.spec.layer_ids), -1)

    @property
    def total_rows(self) -> int:
        return int(self.primes.sum())

    @property
    def table_bytes(self) -> int:
        return self.total_rows * self.spec.row_bytes

    def layer_row_range(self, layer_index: int) -> tuple[int, int]:
        s = self.table_sizes
        lo = int(self.base[layer_index, 0])
        return lo, lo + int(s[layer_index].sum())

    def rows(self, seqs: np.ndarray) -> np.ndarray:
        """Global rows for compressed token ids ``seqs`` ([T] or [S, T], one sequence per row, padded before
        its start): int64 [..., layers, orders*heads]."""
        x = np.asarray(seqs, dtype=np.int64)
        squeeze = x.ndim == 1
        if squeeze:
            x = x[None, :]
        if x.size and (x.min() < 0 or x.max() >= self.vocab_size):
            raise SpecError(f"token ids must be compressed ids in 0..{self.vocab_size - 1}",
                            "map raw ids through the canonical-id map first")
        S, T = x.shape
        N = self.spec.max_ngram
        # shifts[k][s, t] = x[s, t - k], or pad before the sequence start
        padded = np.concatenate([np.full((S, N - 1), self.pad_id, dtype=np.int64), x], axis=1)
        shifts = [padded[:, N - 1 - k: N - 1 - k + T] for k in range(N)]
        L, O, H = self.primes.shape
        out = np.empty((S, T, L, O * H), dtype=np.int64)
        for li in range(L):
            m = self.multipliers[li]
            mix = shifts[0] * m[0]
            for oi, n in enumerate(self.spec.orders):
                mix = np.bitwise_xor(mix, shifts[n - 1] * m[n - 1])   # order n mixes tokens t..t-n+1
                h = mix[:, :, None] % self.primes[li, oi][None, None, :]
                out[:, :, li, oi * H:(oi + 1) * H] = h + self.base[li, oi * H:(oi + 1) * H]
        return out[0] if squeeze else out
