"""``kvbench check`` through the CLI: JSON shape, verdicts, run folders, one-line errors."""

from __future__ import annotations

import json

import pytest

from tests.analysis.test_recompute import REQUESTS, write_run


def _json(r):
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def test_tiers_json_with_a_rate(cli):
    # tiny-gqa: 2 layers x 2 KV heads x 32 dims x 2 (K,V) x 2 B = 512 B/token
    out = _json(cli("check", "--recompute-tokens-per-s", "10000", "--model", "tiny-gqa",
                    "--tier", "fast=512MB/s,1ms", "--tier", "slow=2MB/s,0us", "--json"))
    assert out["bytes_per_token"] == 512
    fast, slow = out["tiers"]["fast"], out["tiers"]["slow"]
    # fast: 1e-6 s/token load vs 1e-4 recompute: 1e-4 n > 1e-3 + 1e-6 n  <=>  n > 10.1  ->  11
    assert fast["break_even_tokens"] == 11 and "LOAD for prefixes >= 11 tokens" in fast["verdict"]
    # slow: 2.56e-4 s/token load: never
    assert slow["break_even_tokens"] is None and "RECOMPUTE" in slow["verdict"]
    assert out["profile"]["kind"] == "rate"


def test_published_profile_text_output(cli):
    r = cli("check", "--profile", "llama-3.1-8b-h200-trtllm-fp8", "--tier", "nvme=6.5GB/s,90us",
            "--tier", "hdd=150MB/s,8ms")
    assert r.exit_code == 0, r.output
    assert "[published]" in r.output and "TensorRT-LLM" in r.output
    lines = [ln for ln in r.output.splitlines() if ln.startswith(("nvme (", "hdd ("))]
    assert len(lines) == 2 and "LOAD" in lines[0] and "RECOMPUTE" in lines[1]


def test_pipelined_flag_changes_exposed_load(cli):
    args = ["check", "--recompute-tokens-per-s", "10000", "--model", "tiny-gqa", "--tier", "t=1MB/s,1ms",
            "--lengths", "100", "--json"]
    plain = _json(cli(*args))["tiers"]["t"]["load_s"]["100"]
    piped = _json(cli(*args, "--pipelined", "--suffix-tokens", "4000"))["tiers"]["t"]["load_s"]["100"]
    assert plain == pytest.approx(1e-3 + 100 * 512 / 1e6)
    assert piped == pytest.approx(1e-3 + 100 * 512 / 1e6 / 2)  # only one of the two layers' loads exposed


def test_check_a_replay_run(cli, tmp_path):
    root = write_run(tmp_path / "run", requests=REQUESTS)
    out = _json(cli("check", "--recompute-tokens-per-s", "10000", "--run", root, "--json"))
    assert set(out["tiers"]) == {"l2", "l3"} and out["model"] == "tiny-gqa"
    assert out["run"]["hits"]["wins_fraction"] == pytest.approx(2 / 3)
    r = cli("check", "--recompute-tokens-per-s", "10000", "--run", root)
    assert r.exit_code == 0 and "loading won in 66.7%" in r.output and "run average" in r.output


@pytest.mark.parametrize("args,msg", [
    (["--tier", "a=1GB/s,1ms"], "exactly one of --profile"),
    (["--recompute-tokens-per-s", "1000", "--model", "tiny-gqa"], "nothing to check"),
    (["--recompute-tokens-per-s", "1000", "--model", "tiny-gqa", "--tier", "a=1GB,1ms"], "cannot parse rate"),
    (["--recompute-tokens-per-s", "1000", "--tier", "a=1GB/s,1ms"], "--model"),
    (["--recompute-tokens-per-s", "0", "--model", "tiny-gqa", "--tier", "a=1GB/s,1ms"], "--recompute-tokens-per-s must be > 0, not 0"),
    (["--profile", "no-such", "--tier", "a=1GB/s,1ms"], "unknown compute preset"),
    (["--recompute-tokens-per-s", "1000", "--model", "no-such", "--tier", "a=1GB/s,1ms"], "unknown models preset"),
    (["--recompute-tokens-per-s", "1000", "--model", "tiny-gqa", "--tier", "a=1GB/s,1ms", "--tier", "a=2GB/s,1ms"],
     "repeat"),
])
def test_bad_inputs_are_one_line(cli, args, msg):
    r = cli("check", *args)
    assert r.exit_code == 2
    assert msg in r.output and r.output.count("\n") == 1 and "Traceback" not in r.output


def test_run_without_tier_measurements_is_one_line(cli, tmp_path):
    root = write_run(tmp_path / "dry", tiers={"l2": {"hit_ratio": 0.4, "read_bytes": 0}})
    r = cli("check", "--recompute-tokens-per-s", "1000", "--run", root)
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "no tier has read measurements" in r.output


def test_margins_at_a_traces_prefix_lengths(cli):
    out = _json(cli("check", "--profile", "llama-3.1-8b-h200-trtllm-fp8", "--tier", "nvme=6.5GB/s,90us",
                    "--tier", "hdd=150MB/s,8ms", "--trace", "mooncake-sample", "--json"))
    tr = out["trace"]
    assert tr["requests"] == 1000 and 0 < tr["requests_with_prefix"] < 1000 and tr["block_tokens"] == 512
    # loading from nvme wins exactly for the prefixes at or above its break-even (a few prompts are shorter
    # than n*: 13-token prompts whose one block was seen before leave a 12-token prefix)
    from kvbench.analysis.recompute import trace_prefixes
    pre = trace_prefixes("mooncake-sample").hit_tokens
    pre = pre[pre > 0]
    n_star = out["tiers"]["nvme"]["break_even_tokens"]
    assert tr["tiers"]["nvme"]["wins_fraction"] == pytest.approx((pre >= n_star).mean())
    assert 0.9 < tr["tiers"]["nvme"]["wins_fraction"] < 1.0 and tr["tiers"]["hdd"]["wins_fraction"] == 0.0
    r = cli("check", "--profile", "llama-3.1-8b-h200-trtllm-fp8", "--tier", "nvme=6.5GB/s,90us",
            "--trace", "mooncake-sample")
    assert r.exit_code == 0 and "reuse a prefix" in r.output and "loading wins for 96.6%" in r.output


def test_profile_copy_tier_is_checked(cli, tmp_path):
    from kvbench.compute.fit import QuadraticFit
    from kvbench.compute.profile import ComputeProfile, CopyProfile, save_profile
    p = ComputeProfile(name="g", kind="measured", model="llama-3.1-8b", device="gpu", dtype="bf16",
                       fit=QuadraticFit(0.01, 5e-5, 1e-10), points_tokens=(1024, 2048), points_seconds=(0.06, 0.11),
                       copy=CopyProfile((4096, 1 << 20), (1e-5, 4e-5), 50e9, 1e-5, True, "gpu"))
    save_profile(p, tmp_path / "g.toml")
    out = _json(cli("check", "--profile", tmp_path / "g.toml", "--json"))  # no --tier: the copy tier alone
    assert list(out["tiers"]) == ["h2d-pinned"] and out["tiers"]["h2d-pinned"]["bandwidth_bytes_per_s"] == 50e9


def test_check_a_real_replay_run(cli, tmp_path):
    """End to end: `kvbench replay kv` on real files (O_DIRECT L3 store), then `kvbench check --run`."""
    import numpy as np
    rng = np.random.default_rng(3)
    lines, next_id = [], 1000
    bases = [list(range(i * 100, i * 100 + 12)) for i in range(4)]  # 4 shared documents of 12 blocks
    for t in range(40):
        base = bases[t % 4]
        keep = int(rng.integers(1, 12))
        ids = base[:keep] + list(range(next_id, next_id + 2))
        next_id += 2
        lines.append(json.dumps({"timestamp": t * 10, "input_length": len(ids) * 512 - 7, "output_length": 1,
                                 "hash_ids": ids}))
    trace = tmp_path / "t.jsonl"
    trace.write_text("\n".join(lines) + "\n")
    r = cli("replay", "kv", trace, "--model", "tiny-gqa", "--l2", "1MiB", "--l3", tmp_path / "l3.store",
            "--l3-capacity", "64MiB", "--closed-loop", "--results", tmp_path / "results", "--json")
    assert r.exit_code == 0, r.output
    run_dir = json.loads(r.output)["run_dir"]
    out = _json(cli("check", "--recompute-tokens-per-s", "20000", "--run", run_dir, "--json"))
    assert "l3" in out["tiers"] and out["run"]["block_tokens"] == 512
    assert "requests.csv" in out["tiers"]["l3"]["source"]  # as requests experienced it, not the run average
    hits = out["run"]["hits"]
    assert hits["requests"] == 40 and hits["requests_with_loaded_hits"] > 0
    assert 0.0 <= hits["wins_fraction"] <= 1.0 and hits["ttft_saved_s"]["p50"] is not None


# --- verdict sentences quote the JSON's margins, pipelined or not ------------------------------------------------
def _quoted(verdict: str, t: dict) -> None:
    """The verdict's numbers are the JSON's: the margin at the reference length and the bandwidth needed."""
    from kvbench.units import format_duration, format_rate
    m, n = t["margin_at_reference_s"], t["reference_tokens"]
    if m > 0:
        assert f"at {n:,} tokens loading saves {format_duration(m)}" in verdict
    else:
        assert f"at {n:,} tokens recomputing is faster by {format_duration(-m)}" in verdict
    if t["break_even_tokens"] is None and t["bandwidth_needed_at_reference"]:
        assert f"need > {format_rate(t['bandwidth_needed_at_reference'])} to win at {n:,}" in verdict


@pytest.mark.parametrize("extra", [[], ["--pipelined", "--suffix-tokens", "1000"], ["--pipelined", "--suffix-tokens", "0"]])
def test_verdict_text_equals_json_margins(cli, extra):
    args = ["check", "--recompute-tokens-per-s", "10000", "--model", "tiny-gqa", "--tier", "fast=512MB/s,1ms",
            "--tier", "mid=4MB/s,1ms", "--tier", "slow=1MB/s,0us", "--lengths", "1000,4096", *extra]
    out = _json(cli(*args, "--json"))
    text = cli(*args)
    assert text.exit_code == 0, text.output
    for name, t in out["tiers"].items():
        assert t["reference_tokens"] == 4096          # a rate profile quotes its reference, 4096 tokens
        # the quoted margin is the margin the JSON reports at that length, in the same loading mode
        assert t["margin_at_reference_s"] == pytest.approx(t["margin_s"]["4096"], rel=1e-12)
        _quoted(t["verdict"], t)
        assert t["verdict"] in text.output.splitlines()
        assert ("pipelined over" in t["verdict"]) == bool(extra)


def test_pipelined_verdict_quotes_the_pipelined_saving(cli):
    # tiny-gqa 512 B/token at 1 MB/s: 5.12e-4 s/token load (5x recompute's 1e-4). Pipelined over 4,000 suffix
    # tokens (0.2 s of compute per layer): at 4,096 tokens each of the 2 layers loads 1.049 s, exposed
    # 1 ms + 1.049 + (1.049 - 0.2) = 1.899 s vs recompute 0.4096 s; not pipelined 1 ms + 2.097 s.
    base = ["check", "--recompute-tokens-per-s", "10000", "--model", "tiny-gqa", "--tier", "t=1MB/s,1ms",
            "--lengths", "4096", "--json"]
    plain = _json(cli(*base))["tiers"]["t"]
    piped = _json(cli(*base, "--pipelined", "--suffix-tokens", "4000"))["tiers"]["t"]
    layer = 4096 * 256 / 1e6
    assert plain["margin_at_reference_s"] == pytest.approx(0.4096 - (1e-3 + 2 * layer))
    assert piped["margin_at_reference_s"] == pytest.approx(0.4096 - (1e-3 + layer + (layer - 0.2)))
    _quoted(piped["verdict"], piped)
    # the bandwidth it would need, pipelined: l + (l - 0.2) = 0.4086 s  ->  l = 0.3043 s per layer
    need = 4096 * 256 / ((0.4096 - 1e-3 + 0.2) / 2)
    assert piped["bandwidth_needed_at_reference"] == pytest.approx(need, rel=1e-6)
    assert plain["bandwidth_needed_at_reference"] == pytest.approx(4096 * 512 / (0.4096 - 1e-3), rel=1e-9)


def test_check_loads_the_prefix_bytes_of_a_sliding_window_model(cli):
    # gpt-oss-120b: 18 full layers x 2,048 B per token + 18 window layers x 2,048 B x min(n, 128)
    out = _json(cli("check", "--recompute-tokens-per-s", "10000", "--model", "gpt-oss-120b",
                    "--tier", "t=1GB/s,0us", "--lengths", "100,131072", "--json"))
    for n in (100, 131072):
        expect = 18 * 2048 * n + 18 * 2048 * min(n, 128)
        assert out["bytes_for_tokens"][str(n)] == expect
        assert out["tiers"]["t"]["load_s"][str(n)] == pytest.approx(expect / 1e9)
    assert out["bytes_per_token"] == 36_864


def _json_object(r):
    assert r.exit_code == 0, r.output
    return json.loads(r.output[r.output.index("{"):])


def test_check_kv_dtype_halves_the_bytes_and_moves_n_star(cli):
    """llama-3.1-8b KV at fp8 is 65,536 B/token (bf16: 131,072). Recompute 10k tok/s saves 1e-4 s/token; a
    1 GB/s, 1 ms tier loads fp8 KV at 6.5536e-5 s/token: wins when 1e-4 n > 1e-3 + 6.5536e-5 n, i.e.
    n > 29.02 -> n* = 30. At bf16 it loads at 1.31e-4 s/token > 1e-4: never."""
    args = ["check", "--recompute-tokens-per-s", "10000", "--model", "llama-3.1-8b", "--tier", "t=1GB/s,1ms",
            "--json"]
    fp8 = _json_object(cli(*args, "--kv-dtype", "fp8"))
    assert fp8["bytes_per_token"] == 65536 and fp8["kv_dtype"] == "fp8"
    assert fp8["tiers"]["t"]["break_even_tokens"] == 30
    bf16 = _json_object(cli(*args))
    assert bf16["bytes_per_token"] == 131072 and bf16["tiers"]["t"]["break_even_tokens"] is None
    r = cli(*args, "--kv-dtype", "fp7")
    assert r.exit_code == 2 and "fp7" in r.output and r.output.count("\n") == 1


def test_check_refuses_a_profile_and_a_run_of_different_models(cli, tmp_path):
    from tests.analysis.test_recompute import REQUESTS, write_run

    root = write_run(tmp_path / "run", requests=REQUESTS)            # a replay of tiny-gqa
    r = cli("check", "--profile", "llama-3.1-8b-h200-trtllm-fp8", "--run", root)
    assert r.exit_code == 2 and "replayed tiny-gqa but the check would use llama-3.1-8b" in r.output
    assert "give a profile of tiny-gqa" in r.output
    r = cli("check", "--profile", "llama-3.1-8b-h200-trtllm-fp8", "--run", root, "--model", "tiny-gqa", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["model"] == "tiny-gqa"      # chosen on purpose


def _stdout_json(r):
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout[r.stdout.index("{"):])


def test_check_json_has_a_top_level_verdict(cli):
    d = _stdout_json(cli("check", "--recompute-tokens-per-s", "9200", "--model", "deepseek-v3",
                  "--tier", "fast=13GB/s,80us", "--tier", "slow=0.05GB/s,50ms", "--json"))
    v = d["verdict"]
    # fast: 70,272 B/token at 13 GB/s = 5.4 us/token against 109 us/token recompute -> loads from n* on
    assert v["tiers"] == {"fast": "load", "slow": "recompute"} and v["decision"] == "load"
    assert v["best_tier"] == "fast" and v["break_even_tokens"] == d["tiers"]["fast"]["break_even_tokens"]
    assert v["lines"] == [d["tiers"]["fast"]["verdict"], d["tiers"]["slow"]["verdict"]]
    d = _stdout_json(cli("check", "--recompute-tokens-per-s", "9200", "--model", "deepseek-v3",
                  "--tier", "slow=0.05GB/s,50ms", "--json"))
    assert d["verdict"]["decision"] == "recompute" and d["verdict"]["best_tier"] is None
