"""Qualification: profiles parse (and bad ones are refused with file and field), criteria pass and fail on
their thresholds, and a real qualification preconditions a file with the engine, judges, reports and sets
the exit code.
"""

from __future__ import annotations

import json
import re

import pytest

from kvbench.errors import SpecError
from kvbench.qualify.criteria import evaluate
from kvbench.qualify.profile import load_qualify_profile, parse_profile
from kvbench.qualify.steps import option_args
from kvbench.spec.presets import preset_names
from tests.qualify.test_criteria import PROFILE
from tests.report.helpers import assert_report_renders

MiB = 1 << 20


def test_drive_facts_are_validated_before_anything_runs(tmp_path, cli):
    from kvbench.errors import UsageError
    from kvbench.qualify.profile import validate_drive

    assert validate_drive({"rated_dwpd": "3", "capacity": "7.68TB"}) == {"rated_dwpd": 3.0, "capacity": 7_680_000_000_000}
    for bad, msg in [({"rated_dwpd": "lots"}, "rated_dwpd must be a positive number, not 'lots'"),
                     ({"rated_dwpd": "-1"}, "must be a positive number"), ({"rated_dwpd": "nan"}, "positive number"),
                     ({"capacity": "big"}, "capacity"), ({"colour": "red"}, "unknown drive fact 'colour'")]:
        with pytest.raises(UsageError, match=msg):
            validate_drive(bad)
    target = tmp_path / "d.img"
    r = cli("qualify", "kv-cache-offload", "--target", target, "--size", "16MiB", "--drive", "rated_dwpd=lots",
            "--results", tmp_path / "res")
    assert r.exit_code == 2 and "rated_dwpd must be a positive number, not 'lots'" in r.output
    assert not target.exists() and not (tmp_path / "res").exists()      # no file made, no run folder


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["workload"][0].update(kind="fio"), r"\[\[workload\]\] #1: unknown kind 'fio'"),
    (lambda d: d["criterion"][0].update(workload="nope"), r"\[\[criterion\]\] #1: workload 'nope' is not defined"),
    (lambda d: d["criterion"][1].update(max="5 ms"), r"\[\[criterion\]\] #2.max: cannot read threshold"),
    (lambda d: d["criterion"][1].update(min=1), r"exactly one of max, min, equals"),
    (lambda d: d["criterion"][4].update(max="drive.tbw"), r"drive.tbw is not in the profile's \[drive\] table"),
    (lambda d: d.update(precondition={"round_s": 0}), r"\[precondition\]: need round_s > 0"),
    (lambda d: d.update(colour="red"), r"unknown field\(s\) colour"),
])
def test_bad_profiles_name_file_and_field(mutate, message):
    d = json.loads(json.dumps(PROFILE))
    mutate(d)
    with pytest.raises(SpecError, match=message) as e:
        parse_profile(d, "bad.toml")
    assert str(e.value).startswith("bad.toml: ")


def test_shipped_profiles_load():
    names = preset_names("qualify")
    assert {"kv-cache-offload", "engram-table"} <= set(names)
    for n in names:
        p = load_qualify_profile(n)
        assert p.criteria and (p.workloads or p.precondition)
    kv = load_qualify_profile("kv-cache-offload")
    assert kv.precondition.window == 5 and kv.precondition.max_range == 0.2 and kv.precondition.max_excursion == 0.1


def test_option_args():
    assert option_args({"bs": "4k", "closed_loop": True, "trim": False, "tier": ["a=1", "b=2"], "l3_capacity": 7}) == \
        ["--bs", "4k", "--closed-loop", "--tier", "a=1", "--tier", "b=2", "--l3-capacity", "7"]


TINY = """
name = "tiny"
[drive]
rated_dwpd = 1
[precondition]
fill_passes = 1
fill_bs = "128k"
bs = "4k"
qd = 16
round_s = 0.25
max_rounds = {max_rounds}
min_rounds = 5
[[criterion]]
name = "fill bandwidth"
workload = "precondition"
metric = "fill.bw_bytes_per_s"
min = "{fill_min}"
[[criterion]]
name = "random-write IOPS, round 1"
workload = "precondition"
metric = "rounds.0.iops"
min = 10
[[workload]]
name = "reads"
kind = "io"
rw = "randread"
bs = "4k"
qd = 8
runtime = 1
[[criterion]]
name = "4 KiB read IOPS"
workload = "reads"
metric = "iops"
min = {iops_min}
[[criterion]]
name = "4 KiB read p99"
workload = "reads"
metric = "lat_us.p99"
max = "1s"
"""


def test_qualification_on_a_real_file_passes_and_fails_with_exit_code_and_report(tmp_path, cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    prof = tmp_path / "tiny.toml"
    prof.write_text(TINY.format(max_rounds=6, fill_min="1MB/s", iops_min=10))
    target = tmp_path / "drive.img"
    r = cli("qualify", prof, "--target", target, "--size", "32MiB", "--json", "-o", tmp_path / "q.html")
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout)
    assert summary["passed"] is True and summary["criteria_passed"] == 4 and summary["status"] == "complete"
    assert summary["verdict"] == "pass" and [e["outcome"] for e in summary["results"]] == ["pass"] * 4
    assert set(summary["results"][0]) == {"name", "workload", "metric", "value", "threshold", "op", "outcome"}
    reads = json.loads((tmp_path / summary["parts"]["reads"] / "summary.json").read_text())
    assert reads["kind"] == "io" and reads["iops"] > 10      # the io workload ran on the qualified file
    ss = json.loads((tmp_path / summary["run_dir"] / "steady_state.json").read_text())
    assert 5 <= len(ss["values"]) <= 6 and ss["metric"] == "iops" and all(v > 0 for v in ss["values"])
    q = json.loads((tmp_path / summary["run_dir"] / "qualify.json").read_text())
    assert [c["passed"] for c in q["criteria"]] == [True, True, True, True]
    assert_report_renders(tmp_path / "q.html", tmp_path, min_plots=1, screenshot=True)
    html = (tmp_path / "q.html").read_text()
    assert "Qualification" in html and "PASS" in html and "steady state" in html.lower()

    # the same drive against an impossible IOPS threshold: FAIL, exit 1, one line naming the criterion
    prof.write_text(TINY.format(max_rounds=5, fill_min="1MB/s", iops_min="1e12"))
    r = cli("qualify", prof, "--target", target, "--size", "32MiB")
    assert r.exit_code == 1, r.output
    assert "FAIL: 3/4 criteria of tiny passed, 1 fail" in r.output
    assert re.search(r"kvbench: error: tiny: verdict fail: 1 criteria not passed: 4 KiB read IOPS \(fail\)", r.output)


def test_shipped_profiles_use_options_the_real_commands_accept(cli):
    """Every workload of every shipped profile parses against the real command (unknown options fail)."""
    from kvbench.qualify.job import workload_argv

    for n in preset_names("qualify"):
        p = load_qualify_profile(n)
        runs = {}
        for w in p.workloads:
            argv = workload_argv(w, target="/dev/nvme9n1", size=8 << 30, destroy_data=None, results_root="results",
                                 run_dirs=runs)[3:]
            runs[w.name] = "results/x"
            assert argv[-1] == "--json"
            r = cli(*argv[:-1], "--help")
            assert r.exit_code == 0, f"{n}/{w.name}: {' '.join(argv)}: {r.output[-500:]}"


def test_engram_table_window_is_judged_at_the_layer_a_drive_can_serve():
    """Layer 1's rows are due ~12 us into a step (no NVMe read is that fast); the profile judges layer 15's window."""
    prof = load_qualify_profile("engram-table")
    crit = [c for c in prof.criteria if "window" in c.metric]
    assert [c.metric for c in crit] == ["layer_window_miss_ratio.15"]
    res = {"engram-replay": {"status": "complete", "layer_window_miss_ratio": {"1": 0.97, "15": 0.004},
                             "window_miss_ratio": 0.49}}
    (r,) = evaluate(crit, res)
    assert (r.value, r.outcome) == (0.004, "pass")
    res["engram-replay"]["layer_window_miss_ratio"]["15"] = 0.02
    assert evaluate(crit, res)[0].outcome == "fail"


# --- sizing: every criterion measurable on the region, or a refusal naming the smallest region -------------
SIZED = """
name = "sized"
[[workload]]
name = "kv"
kind = "replay-kv"
args = ["{trace}"]
model = "llama-3.1-8b"
l2 = "64MiB"
l3 = "{{target}}"
l3_region = "{{size}}"
closed_loop = true
[[criterion]]
name = "L3 read tail"
workload = "kv"
metric = "tiers.l3.read_lat_us.{pct}"
max = "1s"
"""


def _sized_profile(tmp_path, pct="p99"):
    from tests.conftest import write_mooncake

    # three requests of the same three blocks (keys 1, 2, 3; Llama-3.1-8B: 512 tokens x 128 KiB = 64 MiB each)
    trace = write_mooncake(tmp_path / "t.jsonl", [(0, [1, 2, 3]), (1000, [1, 2, 3]), (2000, [1, 2, 3])])
    path = tmp_path / "sized.toml"
    path.write_text(SIZED.format(trace=trace, pct=pct))
    return load_qualify_profile(str(path))


def _size(prof, region, quick=True):
    from kvbench.qualify.job import workload_argv
    from kvbench.qualify.sizing import size_steps

    return size_steps(prof, region, quick=quick, argv_of=lambda w: workload_argv(
        w, target="/dev/loop9", size=region, destroy_data="/dev/loop9", results_root="R", run_dirs={},
        quick=10.0 if quick else None))


def test_percentile_sample_counts():
    from kvbench.qualify.sizing import needs_of, samples_needed

    # ceil(100 / (100 - Q)): the percentile is above the maximum only with that many samples
    assert [samples_needed(q) for q in ("99.9", "99", "50", "90", "99.99", "100")] == [1000, 100, 2, 10, 10000, 1]
    crit = parse_profile(PROFILE, "p.toml").criteria
    assert needs_of(crit, "replay") == {("l3", "read"): (100, ("l3 tail",))}      # verify_errors, dwpd: not sized
    assert needs_of(crit, "load") == {}


def test_replay_step_is_sized_to_the_requests_that_read_l3_enough(tmp_path):
    """By hand: 64 MiB blocks in 1 MiB chunks = 64 I/Os per block; p99 needs 100 I/Os = 2 blocks. Spare
    slots at QD32 x 1 MiB over 64 MiB slots: ceil(32/64) + 1 = 2. A 320 MiB region = 5 slots: L3 holds 3 blocks,
    L2 holds 1. Request 0 writes keys 3, 2, 1 (touched deepest-first) through to L3, L2 keeps key 1; request 1
    touches 3 (L3), 2 (L3), 1 (L2): 2 L3 blocks = 128 I/Os >= 100 after 2 requests."""
    prof = _sized_profile(tmp_path)
    (s,) = _size(prof, 320 * MiB).values()
    assert (s.step, s.capacity_blocks, s.block_bytes, s.ios_per_block) == ("kv", {"l2": 1, "l3": 3}, 64 * MiB, 64)
    assert (s.requests, s.trace_requests, s.needs, s.options) == (2, 3, {"l3 read": 100}, {"max_requests": 2})
    assert _size(prof, 320 * MiB, quick=False)["kv"].options == {}        # the whole trace runs anyway
    from kvbench.qualify.job import workload_argv
    argv = " ".join(workload_argv(prof.workloads[0], target="/dev/loop9", size=320 * MiB, destroy_data=None,
                                  results_root="R", run_dirs={}, quick=10.0, sized=s.options))
    assert "--max-requests 2" in argv and "--duration" not in argv        # --quick: requests, not 10 s


def test_too_small_a_region_is_refused_naming_the_smallest_that_works(tmp_path):
    """4 slots: L3 holds 2 blocks, and three blocks cycling through a 2-block LRU never hit (each miss evicts
    the next one wanted): 0 L3 reads. The smallest region is 3 blocks + 2 spare slots = 5 x 64 MiB = 320 MiB."""
    from kvbench.qualify.sizing import CannotMeasure

    prof = _sized_profile(tmp_path)
    for region in (256 * MiB, 320 * MiB - 1, 64 * MiB, 4096):
        with pytest.raises(CannotMeasure) as e:
            _size(prof, region)
        assert "'L3 read tail' needs 100 L3 reads (kv)" in e.value.problem
        assert e.value.fix == "qualify a device (or --size) of at least 320 MiB (335,544,320 bytes)"
    assert "l3 holds 2 blocks of 64 MiB) the trace's 3 requests read L3 0 times" in str(
        pytest.raises(CannotMeasure, _size, prof, 256 * MiB).value)
    # p99.9 needs 1,000 I/Os; the trace reads at most 2 x 2 blocks = 256 from L3 whatever the region
    with pytest.raises(CannotMeasure, match="read L3 256 times; no region size gives them"):
        _size(_sized_profile(tmp_path, "p99.9"), 1 << 30)


def test_qualify_refuses_an_unmeasurable_region_before_writing_anything(tmp_path, cli):
    prof = _sized_profile(tmp_path)
    target = tmp_path / "drive.img"
    r = cli("qualify", prof.path, "--target", target, "--size", "256MiB", "--results", tmp_path / "res",
            "-o", tmp_path / "q.html")
    assert r.exit_code == 2, r.output
    (line,) = [ln for ln in r.output.splitlines() if ln.strip()]
    assert line.startswith("kvbench: error: sized: 'L3 read tail' needs 100 L3 reads")
    assert line.endswith("(fix: qualify a device (or --size) of at least 320 MiB (335,544,320 bytes))")
    assert not target.exists() and not (tmp_path / "res").exists() and not (tmp_path / "q.html").exists()


QUAL = """
name = "tiny-drive"
[drive]
rated_iops = 1e12
[precondition]
fill_passes = 1
fill_bs = "128k"
bs = "4k"
qd = 8
round_s = 0.2
max_rounds = 5
min_rounds = 5
[[workload]]
name = "reads"
kind = "io"
rw = "randread"
bs = "4k"
qd = 4
runtime = 0.3
[[criterion]]
name = "steady state reached"
workload = "precondition"
metric = "steady_state.reached"
equals = true
[[criterion]]
name = "read IOPS at the drive's rating"
workload = "reads"
metric = "iops"
min = "drive.rated_iops"
"""


def test_qualify_drive_override_and_skip_precondition(cli, tmp_path, monkeypatch):
    """--skip-precondition runs no precondition steps (its criterion is skipped, listed apart); --drive
    replaces the profile's drive facts that thresholds name (rated_iops 1e12 fails, 1 passes)."""
    monkeypatch.chdir(tmp_path)
    prof = tmp_path / "q.toml"
    prof.write_text(QUAL)
    args = ["qualify", prof, "--target", tmp_path / "d.img", "--size", "16MiB", "--skip-precondition", "--json",
            "-o", tmp_path / "q.html"]
    r = cli(*args, "--drive", "rated_iops=1")
    assert r.exit_code == 0, r.output                      # a skipped criterion is listed, not failed
    s = json.loads(r.stdout)
    assert "precondition" not in s["parts"] and "reads" in s["parts"]
    q = json.loads((tmp_path / s["run_dir"] / "qualify.json").read_text())
    verdict = {c["name"]: c for c in q["criteria"]}
    assert verdict["read IOPS at the drive's rating"]["passed"] is True
    assert verdict["read IOPS at the drive's rating"]["threshold"] == 1.0
    assert verdict["steady state reached"]["outcome"] == "skipped" and s["verdict"] == "pass"
    assert q["drive"]["rated_iops"] == 1.0
    r = cli(*args)                                          # the profile's own rating (1e12 IOPS): fails too
    q = json.loads((tmp_path / json.loads(r.stdout)["run_dir"] / "qualify.json").read_text())
    assert {c["name"]: c["passed"] for c in q["criteria"]}["read IOPS at the drive's rating"] is False
    r = cli(*args, "--drive", "rated_iops")
    assert r.exit_code == 2 and "KEY=VALUE" in r.output


def test_shipped_profile_dwpd_criterion_follows_drive_override():
    """kv-cache-offload judges the plan's required DWPD against drive.rated_dwpd (1.0 in the profile): a
    workload needing 2 DWPD fails as shipped and passes with --drive rated_dwpd=3."""
    from kvbench.qualify.criteria import evaluate
    from kvbench.qualify.profile import load_qualify_profile

    p = load_qualify_profile("kv-cache-offload")
    crit = [c for c in p.criteria if c.threshold == "drive.rated_dwpd"]
    assert len(crit) == 1 and p.drive["rated_dwpd"] == 1.0
    results = {crit[0].workload: {"deployment": {"dwpd_rating_equivalent_per_drive": 2.0}}}
    assert evaluate(crit, results, p.drive)[0].passed is False
    assert evaluate(crit, results, {**p.drive, "rated_dwpd": 3.0})[0].passed is True
    assert p.precondition is not None and p.precondition.max_range == 0.2     # what --skip-precondition skips


def test_qualify_precondition_block_sizes_are_io_sizes():
    """A profile's precondition bs/fill_bs follow the I/O-size rule (4KB = 4,096 B); its drive capacity stays SI."""
    from kvbench.qualify.profile import parse_profile, validate_drive

    prof = parse_profile({"name": "t", "precondition": {"bs": "4KB", "fill_bs": "1MB"},
                          "workload": [{"name": "w", "kind": "io", "rw": "randread"}],
                          "criterion": [{"name": "c", "workload": "w", "metric": "iops", "min": 1}]}, "t.toml")
    assert prof.precondition.bs == 4096 and prof.precondition.fill_bs == 1 << 20
    assert validate_drive({"capacity": "7.68TB"})["capacity"] == 7_680_000_000_000
