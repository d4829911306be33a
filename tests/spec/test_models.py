"""Model presets against hand calculations from their published configs (numbers typed from config.json, not
computed by kvbench): per TP rank, the long-prefix rate, the bytes a hit on 4,096 and 131,072 tokens loads, and
what a 512-token block store keeps per token."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from kvbench.cli import main as cli_main
from kvbench.errors import SpecError
from kvbench.spec.models import model_from_dict, load_model, model_names

BF16 = 2


def gqa(layers, kv_heads, head_dim, tp, dt=BF16):
    """Full-attention bytes per token per rank: split heads, one replicated head per rank past kv_heads."""
    return 2 * layers * max(kv_heads // tp, 1) * head_dim * dt


def hybrid(full_rate, window_rate, window, state, n):
    return full_rate * n + window_rate * min(n, window) + (state if n > 0 else 0)


# name -> tp -> (bytes_per_token, bytes at 4,096, bytes at 131,072, stored bytes per token at 512-token blocks)
def _hand() -> dict:
    t = {}
    for name, (L, kv, d) in {"llama-3.1-8b": (32, 8, 128), "llama-3.1-70b": (80, 8, 128), "qwen2.5-7b": (28, 4, 128),
                             "qwen2.5-72b": (80, 8, 128), "qwen3-235b-a22b": (94, 4, 128), "tiny-gqa": (2, 2, 32)}.items():
        beyond = kv * 2
        t[name] = {tp: (gqa(L, kv, d, tp), gqa(L, kv, d, tp) * 4096, gqa(L, kv, d, tp) * 131072, gqa(L, kv, d, tp))
                   for tp in (1, beyond)}
    for name, L in {"deepseek-v3": 61, "kimi-k2": 61}.items():
        r = L * (512 + 64) * BF16                    # latent + rope, whole on every rank
        t[name] = {tp: (r, r * 4096, r * 131072, r) for tp in (1, 16)}
    r = 61 * (512 + 64) * BF16 + 61 * (128 * 1 + 4)    # + indexer key: 128 fp8 values + one fp32 scale
    t["deepseek-v3.2"] = {tp: (r, r * 4096, r * 131072, r) for tp in (1, 16)}
    r = 2 * (32 + 16) * BF16                          # tiny-mla: 2 layers, latent 32 + rope 16
    t["tiny-mla"] = {tp: (r, r * 4096, r * 131072, r) for tp in (1, 4)}
    # sliding-window models: (full layers, window layers, window, kv heads, head_dim)
    for name, (full, swa, w, kv, d) in {"gpt-oss-120b": (18, 18, 128, 8, 64), "gpt-oss-20b": (12, 12, 128, 8, 64),
                                        "gemma-3-27b": (10, 52, 1024, 16, 128)}.items():
        t[name] = {}
        for tp in (1, kv * 2):
            per_layer = 2 * max(kv // tp, 1) * d * BF16
            fr, wr = full * per_layer, swa * per_layer
            t[name][tp] = (fr, hybrid(fr, wr, w, 0, 4096), hybrid(fr, wr, w, 0, 131072), fr + wr)
    # qwen3-next: 12 full-attention layers (2 KV heads x 256), 36 Gated DeltaNet layers (16 key / 32 value heads
    # of 128, conv kernel 4), bf16 state
    t["qwen3-next-80b-a3b"] = {}
    for tp in (1, 4):
        fr = 12 * 2 * max(2 // tp, 1) * 256 * BF16
        kh, vh = 16 // tp, 32 // tp
        state = 36 * (vh * 128 * 128 + (4 - 1) * (2 * kh * 128 + vh * 128)) * BF16
        t["qwen3-next-80b-a3b"][tp] = (fr, hybrid(fr, 0, 0, state, 4096), hybrid(fr, 0, 0, state, 131072),
                                       fr + state / 512)
    return t


HAND = _hand()
CASES = [(name, tp, *vals) for name, by_tp in sorted(HAND.items()) for tp, vals in sorted(by_tp.items())]


def test_every_preset_has_a_hand_calculation():
    assert sorted(HAND) == sorted(model_names())


@pytest.mark.parametrize("name,tp,bpt,at4k,at128k,stored", CASES)
def test_bytes_against_hand_calculation(name, tp, bpt, at4k, at128k, stored):
    m = load_model(name, tp=tp)
    assert m.bytes_per_token == bpt
    assert m.bytes_for_tokens(4096) == at4k
    assert m.bytes_for_tokens(131072) == at128k
    assert m.stored_bytes_per_token(512) == pytest.approx(stored, rel=1e-12)
    assert m.block_bytes(512) == round(stored * 512)


def test_worked_numbers_quoted_in_the_issue_and_readme():
    assert load_model("qwen3-235b-a22b", tp=8).bytes_per_token == 48_128
    assert load_model("qwen2.5-7b", tp=8).bytes_per_token == 14_336
    g = load_model("gpt-oss-120b")
    assert g.bytes_per_token == 36_864 and g.stored_bytes_per_token(512) == 73_728
    assert load_model("gemma-3-27b").bytes_per_token == 81_920
    assert load_model("deepseek-v3.2").bytes_per_token == 78_324
    assert load_model("qwen3-next-80b-a3b").bytes_for_tokens(1) == 12 * 2048 + 36 * 1_097_728


def test_sliding_window_layer_holds_at_most_its_window():
    m = load_model("gpt-oss-120b")
    per_layer = 2 * 8 * 64 * 2
    assert m.bytes_for_tokens(100) == 36 * per_layer * 100            # below the window every layer holds n
    assert m.bytes_for_tokens(128) == 36 * per_layer * 128
    assert m.bytes_for_tokens(129) - m.bytes_for_tokens(128) == 18 * per_layer
    assert m.bytes_for_tokens(0) == 0


def test_linear_state_constant_in_prefix_length():
    m = load_model("qwen3-next-80b-a3b")
    assert m.bytes_for_tokens(2) - m.bytes_for_tokens(1) == m.bytes_per_token
    assert m.bytes_for_tokens(0) == 0


def test_kv_dtype_override_applies_to_attention_not_indexer():
    m = load_model("deepseek-v3.2", dtype="fp8")
    assert m.bytes_per_token == 61 * 576 * 1 + 61 * 132


def test_tp_splits_gqa_not_mla():
    assert load_model("llama-3.1-70b", tp=4).bytes_per_token == 327680 // 4
    assert load_model("deepseek-v3", tp=8).bytes_per_token == 70272


def test_block_bytes_full_slot():
    assert load_model("llama-3.1-8b").block_bytes(512) == 512 * 131072


def test_unknown_model_lists_choices():
    with pytest.raises(SpecError, match="llama-3.1-8b"):
        load_model("llama-9")


def test_bad_tp():
    with pytest.raises(SpecError, match="tp"):
        load_model("qwen2.5-7b", tp=3)


BASE = {"attention": "gqa", "layers": 4, "hidden_size": 64, "num_heads": 4, "kv_heads": 2, "head_dim": 16,
        "vocab_size": 100, "intermediate_size": 128}


@pytest.mark.parametrize("layers,match", [
    ([{"kind": "flash", "count": 4}], "unknown layer kind"),
    ([{"kind": "sliding", "count": 4}], "window"),
    ([{"kind": "attention", "count": 3}], "hold 3 layers"),
    ([{"kind": "attention", "count": 4, "heads": 2}], "unknown field"),
    ([{"kind": "linear", "count": 4, "key_heads": 2, "value_heads": 2, "key_dim": 8}], "value_dim"),
])
def test_bad_kv_layers_name_the_problem(layers, match):
    with pytest.raises(SpecError, match=match):
        model_from_dict({**BASE, "kv_layers": layers}, name="x")


def test_models_json_contract_tp8():
    res = CliRunner().invoke(cli_main, ["models", "--tp", "8", "--json"])
    assert res.exit_code == 0, res.output
    rows = {m["name"]: m for m in json.loads(res.output)["models"]}
    q = rows["qwen3-235b-a22b"]
    assert q["bytes_per_token"] == 48_128
    assert q["bytes_for_tokens"]["4096"] == 48_128 * 4096 and q["bytes_for_tokens"]["131072"] == 48_128 * 131072
    assert q["stored_bytes_per_token"] == 48_128
    for name, by_tp in HAND.items():
        if 8 in by_tp:
            bpt, at4k, at128k, stored = by_tp[8]
            assert (rows[name]["bytes_per_token"], rows[name]["bytes_for_tokens"]["4096"],
                    rows[name]["bytes_for_tokens"]["131072"]) == (bpt, at4k, at128k)
    assert rows["gpt-oss-120b"]["stored_bytes_per_token"] == 2 * rows["gpt-oss-120b"]["bytes_per_token"]


def test_mrc_bytes_use_the_stored_block_size(cli):
    # a block store keeps every layer of every block: gpt-oss-120b's 512-token block is 512 x 73,728 B, not x 36,864
    res = cli("mrc", "mooncake-sample", "--unit", "bytes", "--model", "gpt-oss-120b", "--capacities", "1GiB,64GiB",
              "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["bytes_per_token"] == 36_864 and out["stored_bytes_per_token"] == 73_728
    blocks = (np.array([1 << 30, 64 << 30]) // (512 * 73_728)).tolist()
    assert out["capacities_bytes"] == [b * 512 * 73_728 for b in blocks]


def test_models_prefix_tokens_option(cli):
    out = json.loads(cli("models", "--prefix-tokens", "100", "--json").output)
    g = {m["name"]: m for m in out["models"]}["gpt-oss-120b"]
    assert set(g["bytes_for_tokens"]) == {"100", "1024", "4096", "32768", "131072"}
    assert g["bytes_for_tokens"]["100"] == 36 * 2048 * 100            # below the 128-token window: every layer
    bad = cli("models", "--prefix-tokens", "4k")
    assert bad.exit_code == 2 and "comma list of integers" in bad.output


# --- validation boundaries and the indexer's per-layer share (mutation run survivors) ---------------------------
def _tiny(**kw):
    from kvbench.spec.models import model_from_dict

    d = {"attention": "gqa", "layers": 2, "hidden_size": 64, "num_heads": 4, "kv_heads": 2, "head_dim": 16,
         "intermediate_size": 128, "vocab_size": 100, "dtype": "bf16"}
    d.update(kw)
    return model_from_dict(d, name="t")


@pytest.mark.parametrize("field", ["layers", "hidden_size", "num_heads", "head_dim", "vocab_size", "kv_heads"])
def test_a_zero_size_is_refused_and_one_is_not(field):
    from kvbench.errors import SpecError

    with pytest.raises(SpecError, match=f"{field} must be > 0"):
        _tiny(**{field: 0})
    if field not in ("layers", "num_heads", "kv_heads", "head_dim"):          # shapes that must also divide
        _tiny(**{field: 1})


def test_mla_needs_a_latent_and_moe_a_routed_expert_count_in_range():
    from kvbench.errors import SpecError

    mla = {"attention": "mla", "kv_lora_rank": 0, "qk_rope_dim": 8, "qk_nope_dim": 8, "v_head_dim": 8}
    with pytest.raises(SpecError, match="kv_lora_rank must be > 0"):
        _tiny(**mla)
    assert _tiny(**{**mla, "kv_lora_rank": 1}).kv_lora_rank == 1
    with pytest.raises(SpecError, match="experts_per_token"):
        _tiny(num_experts=4, experts_per_token=0, moe_intermediate_size=32)
    assert _tiny(num_experts=4, experts_per_token=4, moe_intermediate_size=32).is_moe
    assert _tiny(num_experts=4, experts_per_token=1, moe_intermediate_size=32).is_moe
    assert not _tiny().is_moe
    with pytest.raises(SpecError, match="count must be > 0"):
        _tiny(kv_layers=[{"kind": "attention", "count": 0}, {"kind": "attention", "count": 2}])
    with pytest.raises(SpecError, match="window must be > 0"):
        _tiny(kv_layers=[{"kind": "sliding", "count": 1, "window": 0}, {"kind": "attention", "count": 1}])
    assert _tiny(kv_layers=[{"kind": "sliding", "count": 1, "window": 1},
                            {"kind": "attention", "count": 1}]).layer_bytes()[0].window == 1


def test_the_indexer_rides_with_its_host_layers_in_the_pipelined_loads():
    """deepseek-v3.2: MLA layers plus an indexer key cache per token, spread over the model's layers: each host
    layer's load at n tokens is its own bytes + the indexer's share (recomputed from layer_bytes), and the
    loads of all layers add up to kv_bytes(n)."""
    m = load_model("deepseek-v3.2")
    groups = m.layer_bytes()
    host = [g for g in groups if g.kind == "mla"][0]
    idx = [g for g in groups if g.kind == "indexer"][0]
    counts, loads = m.layer_loads([1000, 4000])
    share = idx.count * idx.per_token / m.layers
    assert counts.tolist() == [host.count]
    assert loads[0].tolist() == pytest.approx([(host.per_token + share) * 1000, (host.per_token + share) * 4000])
    assert float((counts[:, None] * loads).sum(axis=0)[1]) == pytest.approx(float(m.kv_bytes(4000)))


def test_fields_a_preset_leaves_out_mean_absent():
    """An omitted MLA, MoE or layer-kind field is 0 (absent), never a size; MQA (one KV head) and one routed
    expert are valid models; fp4 is half a byte."""
    from kvbench.spec.models import DTYPE_BYTES, KVLayers

    m = _tiny()
    assert (m.kv_lora_rank, m.qk_nope_dim, m.q_lora_rank, m.experts_per_token, m.moe_intermediate_size,
            m.active_params_b) == (0, 0, 0, 0, 0, 0.0)
    g = KVLayers("attention", 1)
    assert (g.index_head_dim, g.key_heads, g.key_dim, g.conv_kernel) == (0, 0, 0, 0)
    assert DTYPE_BYTES["fp4"] == 0.5
    assert _tiny(kv_heads=1).layer_bytes()[0].per_token == 2 * 1 * 16 * 2         # K and V, one head, bf16
    assert _tiny(num_experts=1, experts_per_token=1, moe_intermediate_size=32).is_moe
    # the rest of the optional fields, left out, are absent too (0), whatever kind of model
    from kvbench.spec.models import ModelSpec

    bare = ModelSpec(**{f: getattr(m, f) for f in ("name", "attention", "layers", "hidden_size", "num_heads",
                                                   "head_dim", "vocab_size", "intermediate_size")})
    assert (bare.kv_heads, bare.qk_rope_dim, bare.v_head_dim, bare.shared_experts, bare.first_dense_layers,
            bare.params_b) == (0, 0, 0, 0, 0, 0.0)
    assert (g.scale_bytes, g.value_heads, g.window, g.kv_heads, g.head_dim) == (0, 0, 0, 0, 0)


def test_layer_kinds_by_hand_off_the_presets_paths():
    """An indexer kept in bf16 is 2 bytes a value (the presets keep theirs in fp8, 1 byte); a linear layer with a
    one-tap convolution keeps no convolution history (kernel - 1 = 0 steps), only its recurrent state."""
    idx = _tiny(kv_layers=[{"kind": "attention", "count": 2},
                           {"kind": "indexer", "count": 2, "index_head_dim": 8, "scale_bytes": 4, "dtype": "bf16"}])
    assert idx.bytes_per_token == 2 * (2 * 2 * 16 * 2) + 2 * (8 * 2 + 4)
    lin = _tiny(kv_layers=[{"kind": "attention", "count": 1},
                           {"kind": "linear", "count": 1, "key_heads": 2, "value_heads": 4, "key_dim": 8,
                            "value_dim": 8, "conv_kernel": 1}])
    # state: 4 value heads x 8 x 8 x bf16 = 512 B, whatever the prefix length; no history with a 1-tap kernel
    assert float(lin.kv_bytes(100)) == 100 * (2 * 2 * 16 * 2) + 4 * 8 * 8 * 2


def test_every_dtype_name_and_its_bytes():
    """The dtype table by hand: names and aliases, and a model's KV bytes following its dtype."""
    from kvbench.spec.models import DTYPE_BYTES

    assert DTYPE_BYTES == {"fp32": 4, "float32": 4, "bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2, "fp8": 1,
                           "int8": 1, "fp4": 0.5}
    for dtype, size in (("float32", 4), ("bfloat16", 2), ("float16", 2), ("int8", 1)):
        assert _tiny(dtype=dtype).layer_bytes()[0].per_token == 2 * 2 * 16 * size


@pytest.mark.parametrize("fields,match", [
    ({"kv_heads": 0}, r"kv_heads must be > 0 for GQA"),
    ({"attention": "mla", "kv_lora_rank": 0, "qk_rope_dim": 8}, r"kv_lora_rank must be > 0 for MLA"),
    ({"kv_layers": "attention"}, r"kv_layers must be an array of tables"),
    ({"kv_layers": [{"kind": "attention", "count": 2}, 3]}, r"kv_layers must be an array of tables"),
    ({"kv_layers": [{"kind": "attention"}]}, r"kv_layers\[0\]: kind and count are required"),
    ({"kv_layers": [{"count": 2}]}, r"kv_layers\[0\]: kind and count are required"),
])
def test_a_zero_head_count_or_a_malformed_layer_list_is_refused(fields, match):
    with pytest.raises(SpecError, match=match):
        _tiny(**fields)


# --- Tensor parallelism by hand for every model preset, at every power-of-two degree from 1 to 64: attention KV heads
# split across ranks until each rank holds one replicated head (tp >= kv heads), an MLA latent and an indexer key
# whole on every rank, a linear-attention layer's key and value heads split and replicated the same way. The model
# facts are typed from each model's config.json (as in tests/spec/test_models.py), the arithmetic done here.
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


TP_CASES = [(name, tp) for name in sorted(model_names()) for tp in TPS]


@pytest.mark.parametrize("name,tp", TP_CASES)
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
