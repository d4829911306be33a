import pytest

from kvbench.errors import SpecError
from kvbench.spec.models import load_model, model_names

# DESIGN.md, "KV blocks": bf16 bytes per token
EXPECTED = {"llama-3.1-8b": 131072, "llama-3.1-70b": 327680, "qwen2.5-7b": 57344, "qwen3-235b-a22b": 192512,
            "deepseek-v3": 70272}


@pytest.mark.parametrize("name,bpt", sorted(EXPECTED.items()))
def test_bytes_per_token(name, bpt):
    assert load_model(name).bytes_per_token == bpt


def test_presets_named_and_valid():
    names = model_names()
    for required in ["llama-3.1-8b", "llama-3.1-70b", "qwen2.5-7b", "qwen2.5-72b", "qwen3-235b-a22b",
                     "deepseek-v3", "gpt-oss-120b"]:
        assert required in names
    for n in names:
        assert load_model(n).bytes_per_token > 0


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


# Every preset by hand from its published config.json (2 x layers x kv_heads x head_dim x 2 B for GQA bf16;
# layers x (kv_lora_rank + rope_dim) x 2 B for MLA): (layers, kv_heads, head_dim) or MLA, and the bytes at
# tp 1, at tp 8 and at tp 16 (past the KV heads: heads are replicated, a rank holds one whole head).
HAND = {
    "llama-3.1-8b": (131072, 16384, 16384),      # 32 x 8 x 128: 2*32*8*128*2; tp 8: 1 head; tp 16: still 1
    "llama-3.1-70b": (327680, 40960, 40960),     # 80 x 8 x 128
    "qwen2.5-7b": (57344, 14336, 14336),         # 28 x 4 x 128: tp 8 > 4 heads -> 1 head per rank
    "qwen2.5-72b": (327680, 40960, 40960),       # 80 x 8 x 128
    "qwen3-235b-a22b": (192512, 48128, 48128),   # 94 x 4 x 128
    "gpt-oss-120b": (73728, 9216, 9216),         # 36 x 8 x 64
    "gpt-oss-20b": (49152, 6144, 6144),          # 24 x 8 x 64
    "deepseek-v3": (70272, 70272, 70272),        # MLA 61 x (512 + 64): the latent is not split by tp
}


def _models_json(cli, *args):
    import json

    r = cli("models", "--json", *args)
    assert r.exit_code == 0, r.output
    return {m["name"]: m for m in json.loads(r.output)["models"]}


def test_every_readme_preset_by_hand_at_tp_1_8_16(cli):
    for i, tp in enumerate((1, 8, 16)):
        got = _models_json(cli, "--tp", str(tp))
        for name, want in HAND.items():
            assert got[name]["bytes_per_token"] == want[i], (name, tp)
            assert got[name]["block_bytes"] == 512 * want[i]
        assert load_model("llama-3.1-8b", tp=tp).bytes_per_token == HAND["llama-3.1-8b"][i]
    assert set(HAND) <= set(model_names())
    assert _models_json(cli, "--block-tokens", "16")["llama-3.1-8b"]["block_bytes"] == 16 * 131072


@pytest.mark.parametrize("dtype,num", [("fp32", 4), ("float32", 4), ("bf16", 2), ("bfloat16", 2), ("fp16", 2),
                                       ("float16", 2), ("fp8", 1), ("int8", 1)])
def test_kv_dtype_table(dtype, num):
    """The KV dtype's bytes per element, by hand: bf16 is 2, fp8 1, fp32 4 (bytes scale linearly)."""
    assert load_model("llama-3.1-8b", dtype=dtype).bytes_per_token == 131072 // 2 * num
    assert load_model("deepseek-v3", dtype=dtype).bytes_per_token == 61 * 576 * num
    assert load_model("qwen2.5-7b", tp=2, dtype=dtype).bytes_per_token == 2 * 28 * 2 * 128 * num


def test_unknown_kv_dtype_names_the_choices():
    with pytest.raises(SpecError, match="fp8"):
        load_model("llama-3.1-8b", dtype="fp4x")
