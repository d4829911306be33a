"""The T(n) fit and compute profiles: exact recovery, non-negativity, round trips, shipped presets, bad files."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kvbench.compute.fit import QuadraticFit, fit_quadratic
from kvbench.compute.profile import (ComputeProfile, CopyProfile, load_profile, profile_names, rate_profile,
                                     save_profile)
from kvbench.errors import SpecError


def test_fit_recovers_known_coefficients_exactly():
    n = np.array([128, 256, 512, 1024, 2048, 4096, 8192])
    a, b, c = 0.012, 2.5e-5, 3.0e-10
    f = fit_quadratic(n, a + b * n + c * n * n)
    assert f.a == pytest.approx(a, rel=1e-9)
    assert f.b == pytest.approx(b, rel=1e-9)
    assert f.c == pytest.approx(c, rel=1e-7)
    assert f.rel_rms < 1e-12


def test_fit_recovers_coefficients_under_noise():
    rng = np.random.default_rng(7)
    n = np.repeat([256, 512, 1024, 2048, 4096, 8192, 16384], 5)
    a, b, c = 0.004, 1.0e-5, 2.0e-10
    t = (a + b * n + c * n * n) * (1 + rng.normal(0, 0.01, n.size))  # 1% timing noise
    f = fit_quadratic(n, t)
    assert f.b == pytest.approx(b, rel=0.05)
    assert f.c == pytest.approx(c, rel=0.10)
    assert f.seconds(10000) == pytest.approx(a + b * 1e4 + c * 1e8, rel=0.01)


def test_fit_never_goes_negative():
    # Times that an unconstrained fit would give a negative quadratic term (concave, saturating curve).
    n = np.array([100, 200, 400, 800, 1600])
    t = np.array([1.0, 1.9, 3.5, 6.2, 10.0]) * 1e-3
    unconstrained = np.polyfit(n, t, 2)
    assert unconstrained[0] < 0  # the case is real
    f = fit_quadratic(n, t)
    assert min(f.a, f.b, f.c) >= 0
    assert f.c == 0.0


@pytest.mark.parametrize("n,t", [([], []), ([0, 10], [1.0, 2.0]), ([10, 20], [1.0, float("nan")]), ([1, 2], [1.0])])
def test_fit_rejects_bad_points(n, t):
    with pytest.raises(SpecError):
        fit_quadratic(n, t)


def test_published_profiles_are_labelled_and_sourced():
    names = profile_names()
    assert {"llama-3.1-8b-h200-trtllm-fp8", "llama-3.3-70b-h200-trtllm-fp8", "deepseek-v3-h800-production"} <= set(names)
    p = load_profile("llama-3.1-8b-h200-trtllm-fp8")
    assert p.kind == "published" and "TensorRT-LLM" in p.source and p.model == "llama-3.1-8b"
    assert p.tokens_per_s == pytest.approx(39000, rel=1e-9)
    assert float(p.seconds(5000)) == pytest.approx(5000 / 39000)
    assert load_profile("llama-3.3-70b-h200-trtllm-fp8").tokens_per_s == pytest.approx(5700)
    # computed tokens: 73.7k / 8 GPUs x (1 - 0.563 cache hits) (below)
    assert load_profile("deepseek-v3-h800-production").tokens_per_s == pytest.approx(73_700 / 8 * (1 - 0.563))
    for name in names:  # every shipped profile loads and none pretends to be measured without raw points
        q = load_profile(name)
        assert q.kind in ("measured", "published")
        assert q.kind == "published" or len(q.points_tokens) >= 2


def _measured() -> ComputeProfile:
    return ComputeProfile(name="t", kind="measured", model="tiny-gqa", device="cpu", dtype="fp32",
                          fit=QuadraticFit(0.001, 2e-6, 1e-10, 0.01), reference_tokens=512,
                          points_tokens=(128, 256, 512), points_seconds=(0.0013, 0.0015, 0.002),
                          points_seconds_min=(0.0012, 0.0014, 0.0019), points_seconds_max=(0.002, 0.003, 0.004),
                          repetitions=5,
                          layers_total=2, layers_measured=1, scaled=True, versions={"torch": "2.13.0"},
                          copy=CopyProfile((4096, 65536), (1e-5, 2e-5), 5e9, 9e-6))


@pytest.mark.parametrize("suffix", [".toml", ".json"])
def test_save_load_round_trip(tmp_path, suffix):
    p = _measured()
    path = save_profile(p, tmp_path / f"profile{suffix}")
    q = load_profile(path)
    assert q.fit == p.fit and q.points_tokens == p.points_tokens and q.points_seconds == p.points_seconds
    assert (q.points_seconds_min, q.points_seconds_max, q.repetitions) == (p.points_seconds_min, p.points_seconds_max, 5)
    assert (q.kind, q.scaled, q.layers_measured, q.versions) == ("measured", True, 1, {"torch": "2.13.0"})
    assert q.copy == p.copy
    assert load_profile(tmp_path).fit == p.fit  # a run folder holding profile.<ext>


def test_rate_profile_is_linear():
    p = rate_profile(10000)
    assert p.kind == "rate" and float(p.seconds(5000)) == pytest.approx(0.5)
    with pytest.raises(SpecError):
        rate_profile(0)


@pytest.mark.parametrize("body,msg", [
    ('kind = "guessed"\nmodel = "m"\ndevice = "d"\n[fit]\nb = 1e-5\n', "kind"),
    ('kind = "published"\nmodel = "m"\ndevice = "d"\n[fit]\nb = 1e-5\n', "source"),
    ('kind = "measured"\nmodel = "m"\ndevice = "d"\n[fit]\nb = 1e-5\n', "points"),
    ('kind = "published"\nsource = "x"\nmodel = "m"\ndevice = "d"\n[fit]\nb = -1e-5\n', "coefficient b"),
    ('kind = "published"\nsource = "x"\nmodel = "m"\ndevice = "d"\n', "[fit]"),
])
def test_bad_profiles_name_file_and_field(tmp_path, body, msg):
    f = tmp_path / "bad.toml"
    f.write_text(body)
    with pytest.raises(SpecError) as e:
        load_profile(f)
    assert str(f) in str(e.value) and msg in str(e.value) and "\n" not in str(e.value)


def test_unknown_profile_and_bad_json(tmp_path):
    with pytest.raises(SpecError, match="unknown compute preset"):
        load_profile("no-such-profile")
    f = tmp_path / "p.json"
    f.write_text("{not json")
    with pytest.raises(SpecError, match="invalid JSON"):
        load_profile(f)
    f.write_text(json.dumps({"kind": "published", "source": "s", "model": "m", "device": "d", "fit": {"b": 1e-4},
                             "counts_cache_hits": False}))
    assert load_profile(f).tokens_per_s == pytest.approx(1e4)


@pytest.mark.parametrize("name,model,layers", [("llama-3.1-8b-nvidia-h200", "llama-3.1-8b", 32),
                                               ("llama-3.1-70b-nvidia-h200", "llama-3.1-70b", 80),
                                               ("deepseek-v3-nvidia-h200", "deepseek-v3", 61)])
def test_shipped_measured_h200_profiles_reproduce_their_own_points(name, model, layers):
    """The measured H200 profiles (benchmarks/gpu_prefill.sh, 2026-12-04) are labelled measured, name their
    GPU, and their T(n) fit reproduces each measured point (recomputed here from the TOML's own numbers)."""
    import tomllib

    from kvbench.compute.profile import _resolve

    raw = tomllib.loads(_resolve(name).read_text())
    p = load_profile(name)
    assert p.kind == "measured" and p.model == model and "H200" in p.device
    assert raw["scaling"]["layers_total"] == layers
    n = np.array(raw["points"]["tokens"], dtype=float)
    t = np.array(raw["points"]["seconds"])
    fit = raw["fit"]["a"] + raw["fit"]["b"] * n + raw["fit"]["c"] * n * n
    assert np.max(np.abs(fit / t - 1)) < 0.02          # each point within 2% of the fit
    assert np.allclose(p.seconds(n), fit, rtol=1e-12)   # the loader uses the file's fit unchanged


def test_shipped_h200_copy_profile_is_the_pinned_pcie_gen5_path():
    """The 8B profile carries the pinned host->device copy measured on the same H200 (PCIe Gen5 x16): copies of
    16 MiB and more run between Gen4's and Gen5's x16 per-direction peaks (32 and 64 GB/s), computed here from
    the measured points; the fitted line is a compromise over 4 KiB..256 MiB and is not checked against them."""
    p = load_profile("llama-3.1-8b-nvidia-h200")
    c = p.copy
    assert c is not None and c.pinned
    sizes, secs = np.array(c.block_bytes, dtype=float), np.array(c.seconds)
    big = sizes >= 16 << 20
    assert big.sum() == 3
    assert np.all((sizes[big] / secs[big] > 32e9) & (sizes[big] / secs[big] < 64e9))


# --- Compute profiles state whether their rate counts cache hits (issue 29, part 4): every computed token writes
# its KV, so the deployment's write rate needs computed tokens; a served rate that includes hits is converted with
# its hit fraction, or refused for that use.
HEAD = 'kind = "published"\nsource = "s"\nmodel = "m"\ndevice = "d"\n'


def _write(tmp_path, body: str, fit: str = "[fit]\nb = 1e-4\n"):
    p = tmp_path / "p.toml"
    p.write_text(HEAD + body + fit)
    return p


def test_deepseek_h800_profile_is_in_computed_tokens():
    p = load_profile("deepseek-v3-h800-production")
    # DeepSeek: 73.7k input tok/s per 8-GPU H800 node, hits included; 342B of 608B input tokens (56.3%) were hits
    reported = 73_700 / 8
    assert reported == 9_212.5
    computed = reported * (1 - 0.563)
    assert round(p.tokens_per_s, -2) == 4_000 and p.tokens_per_s == pytest.approx(computed, rel=1e-12)
    assert p.computed_tokens_per_s() == p.tokens_per_s
    assert p.counts_cache_hits and p.hit_fraction == 0.563
    assert p.reference_tokens / p.served_fit.seconds(p.reference_tokens) == pytest.approx(reported, rel=1e-12)
    # recomputing a 4096-token prefix takes the computed rate's time (2.3x the reported rate's)
    assert float(p.seconds(4096)) == pytest.approx(4096 / computed, rel=1e-12)
    assert "computed tokens" in p.describe() and "0.563" in p.describe()


def test_every_shipped_profile_states_whether_it_counts_hits():
    for name in profile_names():
        p = load_profile(name)
        assert isinstance(p.counts_cache_hits, bool)
        assert p.computed_tokens_per_s() > 0           # none is refused: each is computed or converted


def test_a_profile_that_counts_hits_without_a_fraction_is_refused_for_write_rates(tmp_path, cli):
    p = load_profile(_write(tmp_path, "counts_cache_hits = true\n"))
    assert p.tokens_per_s == pytest.approx(1e4)           # still readable (e.g. to show it)
    with pytest.raises(SpecError, match="counts cache hits .* states no hit_fraction"):
        p.computed_tokens_per_s()
    r = cli("plan", "--trace", "mooncake-sample", "--model", "llama-3.1-8b", "--profile", tmp_path / "p.toml",
            "--deployment", "gpus=1,drives=1,drive_capacity=7.68TB,utilization=0.5")
    assert r.exit_code != 0 and "counts cache hits" in r.output and "hit_fraction" in r.output
    assert "Traceback" not in r.output and len(r.output.strip().splitlines()) <= 2


@pytest.mark.parametrize("body, match", [
    ("", "must state it"),                                        # a published rate must say
    ('counts_cache_hits = "yes"\n', "must be true or false"),
    ("counts_cache_hits = false\nhit_fraction = 0.5\n", "hit_fraction without counts_cache_hits"),
    ("counts_cache_hits = true\nhit_fraction = 1.0\n", r"hit_fraction must be a number in \[0, 1\)"),
    ("counts_cache_hits = true\nhit_fraction = -0.1\n", r"hit_fraction must be a number in \[0, 1\)"),
    ("counts_cache_hits = true\nhit_fraction = true\n", r"hit_fraction must be a number in \[0, 1\)"),
])
def test_hit_accounting_is_validated(tmp_path, body, match):
    with pytest.raises(SpecError, match=match):
        load_profile(_write(tmp_path, body))


def test_conversion_scales_the_whole_fit_and_survives_a_save(tmp_path):
    p = load_profile(_write(tmp_path, "counts_cache_hits = true\nhit_fraction = 0.75\n",
                            "[fit]\na = 0.01\nb = 1e-4\nc = 2e-9\n"))
    # a quarter of the served tokens were computed: each computed token took 4x the served time per token
    assert (p.fit.a, p.fit.b, p.fit.c) == pytest.approx((0.04, 4e-4, 8e-9))
    q = load_profile(save_profile(p, tmp_path / "again.toml"))        # the file keeps the reported fit
    assert (q.fit.a, q.fit.b, q.fit.c) == pytest.approx((0.04, 4e-4, 8e-9)) and q.hit_fraction == 0.75
    m = load_profile("llama-3.1-8b-nvidia-h200")                      # kvbench's own measurements: computed
    assert m.counts_cache_hits is False and m.hit_fraction is None
