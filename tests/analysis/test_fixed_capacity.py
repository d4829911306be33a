"""The fixed-capacity question (kvbench.analysis.fixed_capacity, plan --per-gpu-capacity / --sweep-profiles):
host DWPD = a U P b 86400 / C against hand arithmetic (DESIGN.md's "Deployment scale" examples), the sweep over
shipped profiles, and the CLI's errors."""

from __future__ import annotations

import json

import pytest

from kvbench.analysis.fixed_capacity import at_capacity, sweep_profiles
from kvbench.errors import SpecError

pytestmark = pytest.mark.timeout(600)


@pytest.mark.parametrize("b, p, want", [
    (70_272, 4_025.9, 1.59),          # DeepSeek-V3 (MLA), ~4.0k computed tok/s on H800: "~1.6 DWPD"
    (327_680, 5_700.0, 10.5),         # Llama-3.3-70B at 5.7k tok/s on H200: "10.5"
    (131_072, 39_000.0, 28.75),       # Llama-3.1-8B at 39k tok/s: "29"
])
def test_design_examples_at_one_7_68tb_drive_per_gpu(b, p, want):
    # 0.5 x 4,025.9 x 70,272 x 86,400 / 7.68e12 = 1.5914; 0.5 x 5,700 x 327,680 x 86,400 / 7.68e12 = 10.506;
    # 0.5 x 39,000 x 131,072 x 86,400 / 7.68e12 = 28.754
    r = at_capacity(bytes_per_token=b, tokens_per_s_per_gpu=p, utilization=0.5, capacity_per_gpu_bytes=7.68e12)
    assert r.dwpd == pytest.approx(want, abs=0.01)
    assert r.residence_s == pytest.approx(86_400 / r.dwpd)
    assert r.write_bytes_per_s_per_gpu == pytest.approx(0.5 * p * b)


def test_admission_and_fill_by_hand():
    # 16 TB per GPU, Llama-3.3-70B at 5.7k: 0.5 x 5,700 x 327,680 x 86,400 / 16e12 = 5.0429 DWPD; a quarter of the
    # blocks admitted writes a quarter as much; a store 80% full keeps KV 0.8 x 16e12 / (write rate)
    r = at_capacity(bytes_per_token=327_680, tokens_per_s_per_gpu=5_700, utilization=0.5,
                    capacity_per_gpu_bytes=16e12, admission=0.25, store_fill=0.8)
    assert r.dwpd == pytest.approx(5.0429 / 4, rel=1e-4)
    assert r.residence_s == pytest.approx(0.8 * 16e12 / (0.25 * 0.5 * 5_700 * 327_680))


@pytest.mark.parametrize("kw, msg", [
    ({"utilization": 0.0}, "utilization"), ({"utilization": 1.5}, "utilization"), ({"admission": 0.0}, "admitted"),
    ({"capacity_per_gpu_bytes": 0.0}, "capacity per GPU"), ({"bytes_per_token": float("nan")}, "bytes per token"),
])
def test_bad_inputs_name_the_field(kw, msg):
    args = dict(bytes_per_token=131_072, tokens_per_s_per_gpu=39_000, utilization=0.5, capacity_per_gpu_bytes=16e12)
    with pytest.raises(SpecError, match=msg):
        at_capacity(**{**args, **kw})


def test_sweep_over_shipped_profiles_is_the_formula_per_profile():
    from kvbench.compute.profile import load_profile, profile_names
    from kvbench.spec.models import load_model

    rows = sweep_profiles(profile_names(), capacity_per_gpu_bytes=16e12, utilization=0.5)
    assert [r.dwpd for r in rows] == sorted(r.dwpd for r in rows) and len(rows) == len(profile_names())
    for r in rows:
        prof = load_profile(r.profile)
        b = load_model(prof.model).stored_bytes_per_token(512)
        assert r.dwpd == pytest.approx(0.5 * prof.computed_tokens_per_s("test") * b * 86_400 / 16e12)
    # the seeds' spread at ~16 TB per GPU: DeepSeek-V3's MLA under 1 DWPD, a 70B GQA model several times that
    by = {r.profile: r for r in rows}
    assert by["deepseek-v3-h800-production"].dwpd == pytest.approx(0.5 * 4_025.9 * 70_272 * 86_400 / 16e12, rel=1e-3)
    assert by["llama-3.3-70b-h200-trtllm-fp8"].dwpd == pytest.approx(5.0429, rel=1e-4)


def test_plan_per_gpu_capacity_cli(cli):
    r = cli("plan", "--trace", "mooncake-sample", "--model", "llama-3.1-8b", "--profile",
            "llama-3.1-8b-h200-trtllm-fp8", "--per-gpu-capacity", "16TB", "--sweep-profiles", "--target-hit", "0.9",
            "--sweep", "", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    fc = out["fixed_capacity"]
    # 0.5 x 39,000 x 131,072 x 86,400 / 16e12 = 13.80 DWPD; KV kept 86,400 / 13.80 s
    assert fc["at"]["dwpd"] == pytest.approx(13.80, abs=0.01)
    assert fc["at"]["residence_s"] == pytest.approx(86_400 / fc["at"]["dwpd"])
    assert out["deployment"]["gpus"] == 1 and out["deployment"]["drive_capacity_bytes"] == 16e12
    assert fc["hit_ratio"] == out["deployment"]["hit_ratio"] and fc["sentence"] in out["answer"]["sentences"]
    assert "13.8 host DWPD" in fc["sentence"] and len(fc["sweep"]) >= 6


@pytest.mark.parametrize("args, msg", [
    (["--per-gpu-capacity", "16TB", "--deployment", "gpus=1,drives=1,drive_capacity=16TB,utilization=0.5",
      "--profile", "llama-3.1-8b-h200-trtllm-fp8"], "exclusive"),
    (["--per-gpu-capacity", "16TB"], "needs a prefill rate"),
    (["--sweep-profiles", "--profile", "llama-3.1-8b-h200-trtllm-fp8"], "needs a capacity per GPU"),
    (["--per-gpu-capacity", "16TB", "--utilization", "1.5", "--profile", "llama-3.1-8b-h200-trtllm-fp8"],
     "utilization"),
])
def test_plan_per_gpu_capacity_errors(args, msg):
    from click.testing import CliRunner

    from kvbench.cli import main

    r = CliRunner().invoke(main, ["plan", "--trace", "mooncake-sample", "--model", "llama-3.1-8b", *args])
    assert r.exit_code != 0 and msg in r.output and "Traceback" not in r.output


def test_report_draws_dwpd_per_profile_with_drive_classes_as_lines():
    from pathlib import Path

    from kvbench.analysis.cost import load_prices
    from kvbench.analysis.fixed_capacity import for_plan
    from kvbench.report.figures import FIGURES, dwpd_at_capacity_per_gpu
    from kvbench.report.rundata import RunData

    prices = load_prices().to_dict()
    plan = {"bytes_per_token": 131_072.0, "model": "llama-3.1-8b", "prices": prices, "deployment": None}
    plan["fixed_capacity"] = for_plan(plan, capacity_per_gpu_bytes=16e12, utilization=0.5,
                                      tokens_per_s_per_gpu=39_000.0, compute={"profile": "p"}, sweep=True)
    rd = RunData(path=Path("plan-x"), run={}, summary={}, analyses={"plan": plan})
    fig = dwpd_at_capacity_per_gpu([rd])
    (points,) = fig.data
    rows = plan["fixed_capacity"]["sweep"]
    assert list(points.y) == [r["dwpd"] for r in rows]
    assert list(points.x) == pytest.approx([0.5 * r["tokens_per_s_per_gpu"] * r["bytes_per_token"] / 1e9 for r in rows])
    rated = sorted(float(c["dwpd"]) for c in prices["ssd"].values())
    assert sorted(s.y0 for s in fig.layout.shapes) == rated
    assert ("DWPD at a fixed capacity per GPU", dwpd_at_capacity_per_gpu) in FIGURES
    assert dwpd_at_capacity_per_gpu([RunData(path=Path("y"), run={}, summary={}, analyses={"plan": {}})]) is None


# mutation survivors ------------------------------------------------------------------------------------------
def test_bounds_of_each_input():
    args = dict(bytes_per_token=131_072, tokens_per_s_per_gpu=39_000, utilization=0.5, capacity_per_gpu_bytes=16e12)
    # a fraction of a byte per token is still a positive rate; every fraction may be exactly 1
    r = at_capacity(**{**args, "bytes_per_token": 0.5})
    assert r.write_bytes_per_s_per_gpu == 0.5 * 39_000 * 0.5
    r = at_capacity(**{**args, "utilization": 1.0, "admission": 1.0, "store_fill": 1.0})
    assert r.dwpd == pytest.approx(39_000 * 131_072 * 86_400 / 16e12, rel=1e-12)
    for kw, msg in (({"tokens_per_s_per_gpu": float("inf")}, "prefill tokens/s per GPU = inf"),
                    ({"capacity_per_gpu_bytes": -1.0}, "capacity per GPU = -1"),
                    ({"store_fill": 0.0}, "store fill = 0 must be in"), ({"store_fill": 1.01}, "store fill"),
                    ({"admission": 1.5}, "admitted share = 1.5")):
        with pytest.raises(SpecError, match=msg):
            at_capacity(**{**args, **kw})


def test_defaults_are_everything_admitted_into_a_full_store():
    r = at_capacity(bytes_per_token=100.0, tokens_per_s_per_gpu=1_000.0, utilization=0.5, capacity_per_gpu_bytes=1e9)
    # 0.5 x 1,000 x 100 = 50,000 B/s: 4.32 DWPD on 1 GB, kept 1e9 / 50,000 = 20,000 s
    assert (r.admission, r.store_fill, r.kind, r.profile, r.model, r.device) == (1.0, 1.0, "given", "", "", "")
    assert r.dwpd == pytest.approx(4.32, rel=1e-12) and r.residence_s == pytest.approx(20_000.0, rel=1e-12)
    assert r.to_dict()["write_bytes_per_s_per_gpu"] == 50_000.0 and r.to_dict()["capacity_per_gpu_bytes"] == 1e9


def _qwen_profile(tmp_path):
    """The 8B profile's rate on Qwen3-Next, whose stored bytes per token depend on the block size (its linear-
    attention layers keep one state per block): 101,760 B at 512 tokens a block, 642,048 B at 64."""
    from tests.conftest import REPO

    text = (REPO / "workloads" / "compute" / "llama-3.1-8b-h200-trtllm-fp8.toml").read_text()
    path = tmp_path / "qwen-next.toml"
    path.write_text(text.replace('model = "llama-3.1-8b"', 'model = "qwen3-next-80b-a3b"')
                    .replace('name = "llama-3.1-8b-h200-trtllm-fp8"', 'name = "qwen-next"'))
    return str(path)


def test_the_sweep_takes_block_tokens_fill_and_admission(tmp_path):
    from kvbench.spec.models import load_model

    name = "llama-3.1-8b-h200-trtllm-fp8"           # 39,000 computed tokens/s; 131,072 stored B/token
    (row,) = sweep_profiles([name], capacity_per_gpu_bytes=16e12, utilization=0.5)
    assert (row.admission, row.store_fill, row.profile, row.model) == (1.0, 1.0, name, "llama-3.1-8b")
    assert row.residence_s == pytest.approx(16e12 / (0.5 * 39_000 * 131_072), rel=1e-12)
    assert row.device == "NVIDIA H200 (1 GPU)" and row.kind == "published"
    qwen = _qwen_profile(tmp_path)
    assert load_model("qwen3-next-80b-a3b").stored_bytes_per_token(512) == 101_760.0     # the default block
    (row,) = sweep_profiles([qwen], capacity_per_gpu_bytes=16e12, utilization=0.5)
    assert row.bytes_per_token == 101_760.0 and row.model == "qwen3-next-80b-a3b"
    (row,) = sweep_profiles([qwen], capacity_per_gpu_bytes=16e12, utilization=0.5, admission=0.5, store_fill=0.25,
                            block_tokens=64)
    assert row.bytes_per_token == 642_048.0
    assert row.dwpd == pytest.approx(0.25 * 39_000 * 642_048 * 86_400 / 16e12, rel=1e-12)
    assert row.residence_s == pytest.approx(0.25 * 16e12 / (0.25 * 39_000 * 642_048), rel=1e-12)


def test_for_plans_sweep_is_every_shipped_profile_at_512_token_blocks(tmp_path, monkeypatch):
    from kvbench.analysis.fixed_capacity import for_plan, table_lines
    from kvbench.compute import profile

    monkeypatch.setattr(profile, "profile_names", lambda: [_qwen_profile(tmp_path), "llama-3.1-8b-h200-trtllm-fp8"])
    fc = for_plan({"bytes_per_token": 131_072.0}, capacity_per_gpu_bytes=16e12, utilization=0.5,
                  tokens_per_s_per_gpu=39_000.0, compute={}, sweep=True)
    # lowest DWPD first: Qwen3-Next's 101,760 B/token before the 8B model's 131,072, both at 39,000 tokens/s
    assert [(r["profile"], r["bytes_per_token"]) for r in fc["sweep"]] == [("qwen-next", 101_760.0),
                                                                            ("llama-3.1-8b-h200-trtllm-fp8", 131_072.0)]
    assert len(table_lines(fc)) == 4


def test_for_plan_by_hand_and_its_sentence():
    from kvbench.analysis.fixed_capacity import FORMULA, for_plan, table_lines

    # 0.5 x 39,000 x 131,072 x 86,400 / 16e12 = 13.8018816 DWPD; KV kept 86,400 / 13.8018816 = 6,260 s = 104 min
    plan = {"bytes_per_token": 131_072.0, "model": "llama-3.1-8b", "deployment": {"hit_ratio": 0.8123}}
    fc = for_plan(plan, capacity_per_gpu_bytes=16e12, utilization=0.5, tokens_per_s_per_gpu=39_000.0,
                  compute={"profile": "p", "device": "H200", "kind": "measured"})
    at = fc["at"]
    assert (at["profile"], at["model"], at["device"], at["kind"]) == ("p", "llama-3.1-8b", "H200", "measured")
    assert (at["admission"], at["store_fill"]) == (1.0, 1.0) and at["dwpd"] == pytest.approx(13.8018816, rel=1e-12)
    assert at["residence_s"] == pytest.approx(16e12 / (0.5 * 39_000 * 131_072), rel=1e-12)
    assert fc["hit_ratio"] == 0.8123 and fc["sweep"] == [] and fc["formula"] == FORMULA
    assert fc["sentence"] == ("At 16 TB per GPU (llama-3.1-8b, 131,072 B/token; 39,000 computed prefill tokens/s per "
                              "GPU at utilization 0.5): the drives see 13.8 host DWPD (1 x 0.5 x 39,000 x 131,072 x "
                              "86400 / 1.6e+13), KV is kept 104 min, which buys a steady hit ratio of 0.812 on this "
                              "trace.")
    assert table_lines(fc) == []
    # no model, profile or deployment; a quarter admitted into a half-full store: 3.45 DWPD, kept 2 x 6,260 s
    fc = for_plan({"bytes_per_token": 131_072.0}, capacity_per_gpu_bytes=16e12, utilization=0.5,
                  tokens_per_s_per_gpu=39_000.0, compute={}, admission=0.25, store_fill=0.5)
    at = fc["at"]
    assert (at["profile"], at["model"], at["device"], at["kind"]) == ("", "", "", "given")
    assert at["dwpd"] == pytest.approx(13.8018816 / 4, rel=1e-12) and fc["hit_ratio"] is None
    assert at["residence_s"] == pytest.approx(0.5 * 16e12 / (0.25 * 0.5 * 39_000 * 131_072), rel=1e-12)
    assert fc["sentence"] == ("At 16 TB per GPU (the model, 131,072 B/token; 39,000 computed prefill tokens/s per GPU "
                              "at utilization 0.5, 0.25 of blocks admitted): the drives see 3.45 host DWPD (0.25 x 0.5 "
                              "x 39,000 x 131,072 x 86400 / 1.6e+13), KV is kept 3.48 h.")


def test_table_lines_one_per_profile_then_the_formula():
    from kvbench.analysis.fixed_capacity import FORMULA, table_lines

    row = {"profile": "p", "model": "m", "bytes_per_token": 131_072.0, "tokens_per_s_per_gpu": 39_000.0,
           "dwpd": 13.8018816, "residence_s": 6_260.0}
    lines = table_lines({"sweep": [row, {**row, "profile": "q", "dwpd": 27.6}], "formula": FORMULA})
    assert len(lines) == 4 and lines[0].split() == ["profile", "model", "B/token", "tok/s/GPU", "DWPD", "KV", "kept"]
    assert lines[1].split() == ["p", "m", "131,072", "39,000", "13.8", "104", "min"]
    assert lines[2].split()[:5] == ["q", "m", "131,072", "39,000", "27.6"] and lines[3] == FORMULA


def test_table_lines_widen_a_column_for_a_long_profile_name():
    """A profile name past the old 32 characters and a model past the old 14 widen their columns; the figures
    keep two spaces from them (they ran together with fixed widths)."""
    from kvbench.analysis.fixed_capacity import FORMULA, table_lines

    row = {"profile": "p" * 40, "model": "qwen3-next-80b-a3b", "bytes_per_token": 24_576.0,
           "tokens_per_s_per_gpu": 1_234_567.0, "dwpd": 0.5, "residence_s": 90.0}
    lines = table_lines({"sweep": [row], "formula": FORMULA})
    assert lines[:2] == [
        "profile" + " " * 33 + "  model               B/token  tok/s/GPU  DWPD  KV kept",
        "p" * 40 + "  qwen3-next-80b-a3b   24,576  1,234,567   0.5  90 s"]


def test_a_swept_profile_that_names_no_model_is_refused_by_the_loader_via_the_cli(tmp_path):
    """The user path to a profile with no model: --sweep-profiles over a workloads folder (KVBENCH_WORKLOADS) whose
    compute profiles include one without ``model``. The profile loader refuses it in one line naming the file and
    the field (sweep_profiles' own "names no model" check, after the loader, could never run and is gone)."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    shipped = REPO / "workloads"
    (tmp_path / "compute").mkdir()
    for sub in shipped.iterdir():
        if sub.is_dir() and sub.name != "compute":
            (tmp_path / sub.name).symlink_to(sub, target_is_directory=True)
    good = (shipped / "compute" / "llama-3.1-8b-h200-trtllm-fp8.toml").read_text()
    (tmp_path / "compute" / "llama-3.1-8b-h200-trtllm-fp8.toml").write_text(good)
    lines = [ln for ln in good.splitlines() if not ln.startswith("model =")]
    assert len(lines) == len(good.splitlines()) - 1
    (tmp_path / "compute" / "no-model.toml").write_text("\n".join(lines).replace(
        'name = "llama-3.1-8b-h200-trtllm-fp8"', 'name = "no-model"') + "\n")
    env = {**os.environ, "PYTHONPATH": str(REPO), "KVBENCH_WORKLOADS": str(tmp_path), "KVBENCH_DEBUG": ""}
    args = ["plan", "--trace", "mooncake-sample", "--model", "llama-3.1-8b", "--profile",
            "llama-3.1-8b-h200-trtllm-fp8", "--per-gpu-capacity", "16TB", "--target-hit", "0.9", "--sweep", ""]
    r = subprocess.run([sys.executable, "-m", "kvbench", *args, "--sweep-profiles"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    err = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode != 0 and "Traceback" not in r.stderr and len(err) == 1, r.stderr
    assert err[0].startswith("kvbench: error:") and "no-model.toml: field 'model' is missing" in err[0], err[0]
