"""Compute profiles state whether their rate counts cache hits (issue 29, part 4): every computed token writes
its KV, so the deployment's write rate needs computed tokens; a served rate that includes hits is converted with
its hit fraction, or refused for that use."""

from __future__ import annotations

import pytest

from kvbench.compute.profile import load_profile, profile_names, save_profile
from kvbench.errors import SpecError

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
