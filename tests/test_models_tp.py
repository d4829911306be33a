"""Tensor parallelism by hand for every model preset, at every power-of-two degree from 1 to 64: attention KV heads
split across ranks until each rank holds one replicated head (tp >= kv heads), an MLA latent and an indexer key
whole on every rank, a linear-attention layer's key and value heads split and replicated the same way. The model
facts are typed from each model's config.json (as in tests/spec/test_models.py), the arithmetic done here."""

from __future__ import annotations

import pytest

from kvbench.errors import SpecError
from kvbench.spec.models import load_model, model_names

BF16 = 2
TPS = (1, 2, 4, 8, 16, 32, 64)


def heads_per_rank(heads: int, tp: int) -> float:
    """Heads one rank keeps: heads / tp while there are heads to split, then one replicated head."""
    return heads / tp if tp <= heads else 1.0


def full(layers, kv_heads, head_dim, tp, dt=BF16):
    return 2 * layers * heads_per_rank(kv_heads, tp) * head_dim * dt


# preset -> tp -> (full-attention bytes per token, window bytes per token, window tokens, state bytes)
def per_rank(name: str, tp: int) -> tuple[float, float, int, float]:
    gqa = {"llama-3.1-8b": (32, 8, 128), "llama-3.1-70b": (80, 8, 128), "qwen2.5-7b": (28, 4, 128),
           "qwen2.5-72b": (80, 8, 128), "qwen3-235b-a22b": (94, 4, 128), "tiny-gqa": (2, 2, 32)}
    if name in gqa:
        return full(*gqa[name], tp), 0.0, 0, 0.0
    if name in ("deepseek-v3", "kimi-k2"):                       # 61 layers of latent 512 + rope 64, never split
        return 61 * (512 + 64) * BF16, 0.0, 0, 0.0
    if name == "deepseek-v3.2":                                   # + the indexer key: 128 fp8 + an fp32 scale
        return 61 * (512 + 64) * BF16 + 61 * (128 + 4), 0.0, 0, 0.0
    if name == "tiny-mla":
        return 2 * (32 + 16) * BF16, 0.0, 0, 0.0
    swa = {"gpt-oss-120b": (18, 18, 128, 8, 64), "gpt-oss-20b": (12, 12, 128, 8, 64),
           "gemma-3-27b": (10, 52, 1024, 16, 128)}
    if name in swa:
        nf, nw, w, kv, d = swa[name]
        return full(nf, kv, d, tp), full(nw, kv, d, tp), w, 0.0
    if name == "qwen3-next-80b-a3b":
        # 12 full layers (2 KV heads of 256); 36 Gated DeltaNet layers: 16 key and 32 value heads of 128, a
        # 128 x 128 state per value head and a causal convolution of kernel 4 over q, k (key heads) and v
        kh, vh = heads_per_rank(16, tp), heads_per_rank(32, tp)
        state = 36 * (vh * 128 * 128 + (4 - 1) * (2 * kh * 128 + vh * 128)) * BF16
        return full(12, 2, 256, tp), 0.0, 0, state
    raise AssertionError(f"no hand calculation for the preset {name!r}: add it here")


CASES = [(name, tp) for name in sorted(model_names()) for tp in TPS]


@pytest.mark.parametrize("name,tp", CASES)
def test_tp_splits_then_replicates_by_hand(name, tp):
    fr, wr, w, state = per_rank(name, tp)
    m = load_model(name, tp=tp)
    assert m.bytes_per_token == fr
    for n in (1, 4096, 131072):
        assert float(m.kv_bytes(n)) == pytest.approx(fr * n + wr * min(n, w) + state, rel=1e-12), n


@pytest.mark.parametrize("name", sorted(model_names()))
def test_replication_stops_the_shrinking_at_one_head_per_rank(name):
    """Past the degree where every rank holds one head, more ranks change nothing per rank."""
    at = [load_model(name, tp=tp).bytes_per_token for tp in TPS]
    assert all(a >= b for a, b in zip(at, at[1:]))                  # never grows with tp
    assert at[-1] == at[-2]                                          # 32 -> 64: replicated everywhere
    assert at[-1] > 0


@pytest.mark.parametrize("name", ["llama-3.1-8b", "qwen2.5-7b", "tiny-gqa", "qwen3-next-80b-a3b", "gemma-3-27b"])
def test_a_degree_that_neither_divides_nor_is_a_multiple_of_the_heads_is_refused(name):
    with pytest.raises(SpecError, match=r"tp=3 does not divide"):
        load_model(name, tp=3)


def test_a_latent_is_whole_on_every_rank_whatever_the_degree():
    for name in ("deepseek-v3", "kimi-k2", "deepseek-v3.2", "tiny-mla"):
        assert load_model(name, tp=3).bytes_per_token == load_model(name, tp=1).bytes_per_token == \
            per_rank(name, 1)[0]
