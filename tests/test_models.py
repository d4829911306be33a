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
