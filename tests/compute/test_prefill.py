"""``kvbench prefill`` on the CPU: real torch stacks of tiny presets end to end, layer planning and scaling,
and bad inputs. torch (CPU build) is an optional extra: the torch tests skip without it, the error test not."""

from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import replace

import numpy as np
import pytest

from kvbench.compute.copy import copy_profile_from_points
from kvbench.compute.stack import layer_param_counts, plan_layers
from kvbench.compute.timing import scaled_totals
from kvbench.errors import DependencyError, SpecError
from kvbench.spec.models import load_model
from tests.conftest import REPO

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="torch not installed (optional extra kvbench[gpu])")


def _run(cli, *args):
    r = cli("prefill", *args, "--threads", "1")  # one thread: steady on a shared CI machine
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


@needs_torch
def test_cpu_prefill_tiny_gqa_end_to_end(cli, tmp_path):
    out = _run(cli, "--model", "tiny-gqa", "--device", "cpu", "--lengths", "64,256,1024", "--reps", "3",
               "--results", tmp_path, "--out", tmp_path / "p.json", "--json")
    assert out["kind"] == "measured" and out["model"] == "tiny-gqa" and out["device"].startswith("cpu")
    assert out["points"]["tokens"] == [64, 256, 1024] and all(s > 0 for s in out["points"]["seconds"])
    assert out["scaling"] == {"layers_total": 2, "layers_measured": 2, "scaled": False}
    assert min(out["fit"]["a"], out["fit"]["b"], out["fit"]["c"]) >= 0
    assert "torch" in out["versions"] and out["dtype"] == "fp32"
    assert all(len(r["seconds"]) == 3 for r in out["lengths"])
    pts = out["points"]
    assert pts["repetitions"] == 3 and all(lo <= med <= hi for lo, med, hi in
                                            zip(pts["seconds_min"], pts["seconds"], pts["seconds_max"]))
    from kvbench.compute.profile import load_profile
    p = load_profile(out["run_dir"])  # the run folder holds profile.toml
    q = load_profile(tmp_path / "p.json")
    assert p.kind == q.kind == "measured" and p.points_seconds == pytest.approx(q.points_seconds)
    # the measured profile feeds the inequality
    r = cli("check", "--profile", out["profile"], "--tier", "x=1GB/s,10us", "--json")
    assert r.exit_code == 0 and "x" in json.loads(r.output)["tiers"]


@needs_torch
def test_cpu_prefill_tiny_mla_moe(cli, tmp_path):
    out = _run(cli, "--model", "tiny-mla", "--device", "cpu", "--lengths", "16,4096", "--reps", "2", "--results", tmp_path, "--json")
    assert out["scaling"]["layers_total"] == 2 and out["fit"]["b"] + out["fit"]["c"] > 0


@needs_torch
def test_partial_stack_is_scaled_and_says_so(cli, tmp_path):
    # an 8-layer tiny MoE model (2 dense first), 3 layers built: 1 dense + 2 MoE, scaled to 2 + 6
    model = tmp_path / "tiny8.toml"
    model.write_text("""attention = "mla"\nlayers = 8\nhidden_size = 64\nnum_heads = 2\nhead_dim = 24
kv_lora_rank = 16\nqk_rope_dim = 8\nqk_nope_dim = 16\nv_head_dim = 16\nq_lora_rank = 32\nintermediate_size = 128
moe_intermediate_size = 32\nnum_experts = 4\nexperts_per_token = 2\nshared_experts = 1\nfirst_dense_layers = 2
vocab_size = 100\n""")
    out = _run(cli, "--model", model, "--device", "cpu", "--lengths", "16,4096", "--layers", "3", "--reps", "3", "--results", tmp_path, "--json")
    assert out["scaling"] == {"layers_total": 8, "layers_measured": 3, "scaled": True}
    assert "3 of 8 layers built (1 dense, 2 MoE)" in out["notes"]
    for row in out["lengths"]:  # the scaled model time exceeds the built stack's time
        assert np.median(row["seconds"]) > np.median(row["stack_seconds"])


def test_plan_layers():
    ds = load_model("deepseek-v3")
    p = plan_layers(ds, 8)
    assert (p.dense_total, p.moe_total, p.dense_measured, p.moe_measured, p.scaled) == (3, 58, 1, 7, True)
    assert plan_layers(ds, None).layers_measured == 61
    llama = plan_layers(load_model("llama-3.1-8b"), 4)
    assert (llama.dense_total, llama.dense_measured, llama.moe_measured) == (32, 4, 0)
    with pytest.raises(SpecError, match=">= 2"):
        plan_layers(ds, 1)
    with pytest.raises(SpecError):
        plan_layers(ds, 0)


def test_param_counts_match_published_sizes():
    # Llama-3.1-8B: 32 x 218M + 525M embedding (+ tied head) ~ 7.5B of 8.0B (untied head adds 0.5B)
    c = layer_param_counts(load_model("llama-3.1-8b"))
    assert 32 * c["dense"] + 2 * c["embedding"] == pytest.approx(8.03e9, rel=0.01)
    # DeepSeek-V3 active parameters: 37B published (3 dense + 58 MoE with 8 + 1 experts active, embeddings)
    d = layer_param_counts(load_model("deepseek-v3"))
    assert 3 * d["dense"] + 58 * d["moe"] + 2 * d["embedding"] == pytest.approx(37e9, rel=0.05)


def test_scaled_totals_by_kind():
    # stages: embed, dense, moe, moe, head
    stages = np.array([[1.0, 10.0, 20.0, 22.0, 2.0]])
    total = scaled_totals(stages, ["dense", "moe", "moe"], {"dense": 3, "moe": 10})
    assert total[0] == pytest.approx(1 + 2 + 3 * 10 + 10 * 21)


def test_copy_profile_fit():
    sizes = np.array([4096 * 4**i for i in range(8)])
    c = copy_profile_from_points(sizes, 8e-6 + sizes / 50e9, device="test")
    assert c.bandwidth_bytes_per_s == pytest.approx(50e9, rel=1e-6) and c.latency_s == pytest.approx(8e-6, rel=1e-6)


@pytest.mark.parametrize("args,msg", [
    (["--model", "no-such-model"], "unknown models preset"),
    (["--model", "tiny-gqa", "--lengths", "64,0"], "integer > 0"),
    (["--model", "tiny-gqa", "--lengths", "64,-5"], "integer > 0"),
    (["--model", "tiny-gqa", "--lengths", "64,abc"], "not an integer"),
    (["--model", "tiny-gqa", "--lengths", "64"], "two distinct"),
    (["--model", "tiny-gqa", "--device", "tpu", "--lengths", "8,16"], "cpu or cuda"),
    (["--model", "tiny-mla", "--layers", "1", "--lengths", "8,16"], ">= 2"),
    (["--model", "tiny-gqa", "--reps", "0", "--lengths", "8,16"], "--reps"),
    (["--model", "tiny-gqa", "--out", "p.yaml", "--lengths", "8,16"], ".toml or .json"),
])
@needs_torch
def test_bad_inputs_are_one_line(cli, tmp_path, args, msg):
    r = cli("prefill", *args, "--results", tmp_path)
    assert r.exit_code == 2, r.output
    assert msg in r.output and r.output.count("\n") == 1 and "Traceback" not in r.output
    assert not list(tmp_path.iterdir())  # nothing written


@needs_torch
def test_cuda_without_a_gpu_is_one_line(cli, tmp_path):
    import torch
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    r = cli("prefill", "--model", "tiny-gqa", "--device", "cuda", "--lengths", "8,16", "--results", tmp_path)
    assert r.exit_code == 1 and "no CUDA device" in r.output and r.output.count("\n") == 1


def test_missing_torch_is_a_dependency_error(cli, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    from kvbench.compute.stack import require_torch
    with pytest.raises(DependencyError, match="torch is not installed"):
        require_torch()
    r = cli("prefill", "--model", "tiny-gqa", "--lengths", "8,16", "--results", tmp_path)
    assert r.exit_code == 1 and r.output.count("\n") == 1 and "pip install" in r.output


@needs_torch
def test_fallbacks_for_older_torch_compute_the_same():
    """GQA without enable_gqa (torch < 2.5) and RMSNorm without F.rms_norm (< 2.4) give identical outputs."""
    import torch

    from kvbench.compute import stack as S
    spec = load_model("tiny-gqa")
    st = S.Stack(spec, S.plan_layers(spec, None), device="cpu", dtype="fp32")
    assert S._SDPA_GQA is True  # torch 2.13 has it
    F = torch.nn.functional
    with torch.inference_mode():
        ids, rope = st.prepare(48)
        ref = st.forward(ids, rope)
        try:
            S._SDPA_GQA = False
            no_gqa = st.forward(ids, rope)
        finally:
            S._SDPA_GQA = True
        rms = F.rms_norm
        try:
            del F.rms_norm
            no_rms = st.forward(ids, rope)
        finally:
            F.rms_norm = rms
    assert torch.allclose(ref, no_gqa, atol=1e-5) and torch.allclose(ref, no_rms, atol=1e-4)


@needs_torch
@pytest.mark.parametrize("n, window", [(40, 8), (37, 8), (8, 8), (9, 8), (5, 16), (64, 1)])
def test_sliding_window_attention_equals_a_banded_mask(n, window):
    """The blocked windowed attention equals one SDPA call under the whole n x n band mask (each query sees
    itself and the window - 1 tokens before it), with and without grouped KV heads."""
    import torch

    from kvbench.compute.stack import attention

    g = torch.Generator().manual_seed(n * 100 + window)
    q = torch.randn(1, 4, n, 8, generator=g)
    k, v = torch.randn(1, 2, n, 8, generator=g), torch.randn(1, 2, n, 8, generator=g)
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    band = (j <= i) & (j > i - window)
    F = torch.nn.functional
    ref = F.scaled_dot_product_attention(q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1), attn_mask=band)
    got = attention(torch, q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1), window)
    assert torch.allclose(got, ref, atol=1e-5)
    assert torch.allclose(attention(torch, q, k, v, window, enable_gqa=True), ref, atol=1e-5)
    # the first `window` queries see exactly what causal attention shows them
    full = attention(torch, q, k, v, None, enable_gqa=True)
    assert torch.allclose(got[..., :window, :], full[..., :window, :], atol=1e-5)
    if n > window:
        assert not torch.allclose(got[..., window:, :], full[..., window:, :], atol=1e-3)


@needs_torch
def test_stacks_of_sliding_window_models_time_both_kinds_and_scale_them_apart():
    """gemma-3-27b: 52 of its 62 dense layers are local (window 1024), gpt-oss-120b: 18 of 36 MoE layers
    (window 128). Built partially, each kind gets a layer of its own and counts its own layers."""
    from kvbench.compute.stack import layer_kinds, plan_layers

    gemma = load_model("gemma-3-27b")
    kinds, totals = layer_kinds(gemma, plan_layers(gemma, 2))
    assert sorted(kinds) == ["dense", "dense+sliding"] and totals == {"dense": 10, "dense+sliding": 52}
    kinds, totals = layer_kinds(gemma, plan_layers(gemma, 6))
    # one of each, then 4 in proportion 52:10 = 3.35:0.65, the last one to the larger remainder (full)
    assert kinds.count("dense+sliding") == 4 and kinds.count("dense") == 2
    oss = load_model("gpt-oss-120b")
    kinds, totals = layer_kinds(oss, plan_layers(oss, 2))
    assert sorted(kinds) == ["moe", "moe+sliding"] and totals == {"moe": 18, "moe+sliding": 18}
    with pytest.raises(SpecError, match="at least 2"):
        layer_kinds(oss, plan_layers(oss, 1))
    # a model without sliding layers keeps its kinds
    llama = load_model("llama-3.1-8b")
    assert layer_kinds(llama, plan_layers(llama, 2)) == (["dense", "dense"], {"dense": 32})
    ds = load_model("deepseek-v3")
    kinds, totals = layer_kinds(ds, plan_layers(ds, 2))
    assert kinds == ["dense", "moe"] and totals == {"dense": 3, "moe": 58}
    # qwen3-next: 36 linear-attention and 12 full layers, all MoE
    qn = load_model("qwen3-next-80b-a3b")
    kinds, totals = layer_kinds(qn, plan_layers(qn, 4))
    assert totals == {"moe": 12, "moe+linear": 36} and sorted(kinds) == ["moe", "moe+linear", "moe+linear", "moe+linear"]


@needs_torch
def test_a_sliding_model_prefills_with_windowed_layers(cli, tmp_path):
    """tiny-gqa with half its layers local (window 16): those layers are built windowed and the prefill's
    output differs from the same weights all global (48 tokens > the window); the profile says so."""
    import torch

    from kvbench.compute import stack as S
    from kvbench.spec.models import KVLayers

    base = load_model("tiny-gqa")
    spec = replace(base, kv_layers=(KVLayers("sliding", base.layers // 2, window=16),
                                    KVLayers("attention", base.layers - base.layers // 2)))
    st = S.Stack(spec, S.plan_layers(spec, None), device="cpu", dtype="fp32")
    assert [L["window"] for L in st.layers].count(16) == base.layers // 2
    assert st.totals == {"dense": base.layers - base.layers // 2, "dense+sliding": base.layers // 2}
    with torch.inference_mode():
        ids, rope = st.prepare(48)
        out = st.forward(ids, rope)
        windows = [L["window"] for L in st.layers]
        for L in st.layers:
            L["window"] = None
        assert not torch.allclose(st.forward(ids, rope), out, atol=1e-4)
        for L, w in zip(st.layers, windows):
            L["window"] = w
        ids, rope = st.prepare(16)                      # within the window: the same as all global
        short = st.forward(ids, rope)
        for L in st.layers:
            L["window"] = None
        assert torch.allclose(st.forward(ids, rope), short, atol=1e-5)
    preset = tmp_path / "tiny-local.toml"
    preset.write_text((REPO / "workloads/models/tiny-gqa.toml").read_text() + f"""
[[kv_layers]]
kind = "sliding"
count = {base.layers // 2}
window = 16

[[kv_layers]]
kind = "attention"
count = {base.layers - base.layers // 2}
""")
    # lengths far apart: at 32 vs 256 tokens a loaded CPU timed the longer one faster once (no growth: refused)
    out = _run(cli, "--model", str(preset), "--device", "cpu", "--lengths", "32,4096", "--reps", "2",
               "--results", tmp_path, "--json")
    assert f"{base.layers // 2} sliding-window layers attend to 16 tokens" in json.dumps(out)


@needs_torch
def test_linear_attention_layers_are_causal_and_linear_in_shape():
    """The chunked linear attention of a Qwen3-Next-shaped layer (tiny widths): a token's output depends on
    itself and earlier tokens only (a later token changes nothing before it), and the state carries an earlier
    chunk into a later one."""
    import torch

    from kvbench.compute import stack as S
    from kvbench.spec.models import KVLayers

    base = load_model("tiny-gqa")
    lin = KVLayers("linear", 1, key_heads=2, value_heads=4, key_dim=8, value_dim=8, conv_kernel=4)
    spec = replace(base, kv_layers=(lin, KVLayers("attention", base.layers - 1)))
    st = S.Stack(spec, S.plan_layers(spec, None), device="cpu", dtype="fp32")
    assert sorted(st.kinds) == ["dense", "dense+linear"]
    L = st.layers[st.kinds.index("dense+linear")]
    n = 2 * S.LINEAR_CHUNK + 5
    g = torch.Generator().manual_seed(3)
    x = torch.randn(n, base.hidden_size, generator=g)
    with torch.inference_mode():
        y = st._attn_linear(x, L, None)
        x2 = x.clone()
        x2[100:] += 1.0
        y2 = st._attn_linear(x2, L, None)
        x3 = x.clone()
        x3[10] += 1.0                                   # chunk 0 only (past the short convolution's reach)
        y3 = st._attn_linear(x3, L, None)
    assert y.shape == (n, base.hidden_size)
    assert torch.allclose(y[:100], y2[:100], atol=1e-5) and not torch.allclose(y[100:], y2[100:], atol=1e-3)
    assert torch.allclose(y[:10], y3[:10], atol=1e-5)
    assert not torch.allclose(y[S.LINEAR_CHUNK + 10:], y3[S.LINEAR_CHUNK + 10:], atol=1e-4)      # via the state
