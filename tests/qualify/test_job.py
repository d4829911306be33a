"""Qualification on real drives: every workload of the shipped profiles on a raw loop device (with the one
--destroy-data, the replay store and the Engram table fitted to the test region, children under the run
folder), the written-before-read rule, not-measured steps, and children that die with the job.

Needs root and losetup for the loop-device tests (skipped otherwise); runtimes are shortened with the
library's ``quick_s`` (the CLI's --quick uses 10 s).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kvbench.qualify.job import qualify, workload_argv
from kvbench.qualify.profile import load_qualify_profile
from kvbench.spec.presets import preset_names
from tests.conftest import REPO

MiB = 1 << 20
CONTRACT = {"name", "workload", "metric", "value", "threshold", "outcome"}


#: MiB of the loop device per shipped profile (default 1 GiB). kv-cache-offload's L3 p99.9 needs 1,000 L3 reads,
#: and the Mooncake sample first re-reads a block evicted from its 1 GiB L2 at request 61, from an L3 of 38 blocks
#: (2.375 GiB) or more: its smallest region is 38 + 2 spare slots of 64 MiB (qualify refuses 1 GiB, naming it).
LOOP_MIB = {"kv-cache-offload": 2560}


@pytest.mark.parametrize("name", sorted(preset_names("qualify")))
def test_every_workload_of_a_shipped_profile_runs_on_a_raw_loop_device(name, loop_devices, tmp_path, monkeypatch):
    """conftest's loop_devices: autoclear, held open, so a killed run leaves none."""
    monkeypatch.chdir(tmp_path)
    loopdev = loop_devices.attach(loop_devices.image("drive.img", LOOP_MIB.get(name, 1024)))
    prof = load_qualify_profile(name)
    summary, run_dir = qualify(prof, loopdev, destroy_data=loopdev, results_root=str(tmp_path / "res"),
                               report_path=tmp_path / "q.html", quick=True, quick_s=1.0, progress=lambda m: None)
    # every workload ran on the raw device with the one --destroy-data, and wrote under this run's folder
    bad = [(s["name"], s["error"]) for s in summary["steps"] if not s["ok"]]
    assert not bad, bad
    assert set(summary["parts"]) == {w.name for w in prof.workloads if w.kind in ("io", "replay-kv", "replay-engram")}
    for part in summary["parts"].values():
        assert Path(part).resolve().parent == (run_dir / "steps").resolve()
    assert not (tmp_path / "results").exists()
    # every criterion evaluated, with the JSON contract; steady state is skipped under --quick, never failed
    assert [r["name"] for r in summary["results"]] == [c.name for c in prof.criteria]
    for r in summary["results"]:
        assert CONTRACT <= set(r) and r["outcome"] in ("pass", "fail", "skipped", "not-measured")
        assert (r["outcome"] in ("skipped", "not-measured")) == bool(r.get("reason")), r
    assert summary["verdict"] in ("pass", "fail", "partial") and summary["shortened"].startswith("--quick")
    q = json.loads((run_dir / "qualify.json").read_text())
    assert q["quick"] is True and q["verdict"] == summary["verdict"]
    size = LOOP_MIB.get(name, 1024) * MiB
    assert summary["drive_capacity"] == {"bytes": size, "source": f"the whole device {loopdev} holding {loopdev}"}
    steps = {s["name"]: s for s in summary["steps"]}
    assert steps["precondition"]["ok"]                    # the region was written before anything read it
    for w in prof.workloads:
        st = steps[w.name]
        if w.kind == "replay-kv":
            # --quick: the requests that read L3 enough for its p99.9, not a time cap that would cut them short
            assert "--destroy-data" in st["argv"] and "--max-requests" in st["argv"] and "--duration" not in st["argv"]
            rs = json.loads((Path(st["run_dir"]) / "summary.json").read_text())
            hist = json.loads((Path(st["run_dir"]) / "histograms.json").read_text())
            assert hist["l3.read"]["count"] >= 1000
            # the cache is the region less the store's 2 spare 64 MiB slots (QD32 x 1 MiB reads in flight)
            assert rs["tiers"]["l3"]["footprint_bytes"] == size and rs["tiers"]["l3"]["capacity_bytes"] == size - 2 * 64 * MiB
            assert "2 spare slots (128 MiB) on top" in rs["tiers"]["l3"]["store"]
        if w.kind == "replay-engram":
            rs = json.loads((Path(st["run_dir"]) / "summary.json").read_text())
            assert "--scale-to" in st["argv"] and rs["table"]["bytes"] <= size
        if w.kind == "io":
            rs = json.loads((Path(st["run_dir"]) / "summary.json").read_text())
            assert rs["status"] == "complete" and rs["runtime_s"] < 5      # shortened to 1 s of I/O
    if name == "kv-cache-offload":
        out = {r["name"]: r for r in summary["results"]}
        assert out["steady state reached (SNIA PTS)"]["outcome"] == "skipped"
        l3 = out["replay: L3 read p99.9"]
        assert l3["outcome"] in ("pass", "fail") and l3["value"] > 0, l3        # measured (it was not, on --quick)
        assert out["replay: data verified"]["outcome"] == "pass"
        dwpd = out["deployment DWPD per drive within the drive's rating"]
        assert dwpd["outcome"] in ("pass", "fail") and dwpd["value"] > 0, dwpd
        plan_argv = " ".join(steps["kv-endurance"]["argv"])
        assert f"drive_capacity={size}" in plan_argv        # the whole device, not the test region's share
    assert (tmp_path / "q.html").is_file()


def test_skipped_precondition_still_writes_a_file_before_reading_it(tmp_path, cli):
    """The audit's 690k-IOPS pass: with --skip-precondition the read step read a never-written file."""
    from kvbench.engine.targets import first_hole

    prof = tmp_path / "reads.toml"
    prof.write_text('name = "reads"\n[precondition]\nround_s = 1\nmax_rounds = 5\n'
                    '[[workload]]\nname = "rd"\nkind = "io"\nrw = "randread"\nbs = "4k"\nqd = 8\nruntime = 0.5\n'
                    '[[criterion]]\nname = "steady"\nworkload = "precondition"\nmetric = "steady_state.reached"\n'
                    'equals = true\n'
                    '[[criterion]]\nname = "iops"\nworkload = "rd"\nmetric = "iops"\nmin = 1\n')
    target = tmp_path / "d.img"
    r = cli("qualify", prof, "--target", target, "--size", "16MiB", "--skip-precondition", "--json",
            "--results", tmp_path / "res", "-o", tmp_path / "q.html")
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    assert first_hole(str(target)) is None                 # every byte written before the read step
    assert s["written_by"] == "one sequential pass before the workloads"
    assert s["verdict"] == "pass" and s["skipped"] == ["steady"]
    assert [x["outcome"] for x in s["results"]] == ["skipped", "pass"]
    rd = json.loads((Path(s["parts"]["rd"]) / "summary.json").read_text())
    assert rd["status"] == "complete" and rd["host"]["direct_io_verified"] is True


def test_io_reading_unwritten_extents_is_not_measured_or_refused(tmp_path, cli):
    from kvbench.engine import safety

    # --no-prefill on a new (fallocated, never written) file: the disk reads nothing; the run says so
    r = cli("io", "--target", tmp_path / "new.img", "--size", "8MiB", "--runtime", "0.3s", "--no-prefill",
            "--results", tmp_path / "res", "--json")
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    assert s["host"]["direct_io_verified"] is False and s["status"] == "not-measured"
    assert "O_DIRECT bypass check failed" in s["not_measured"] and "not measured" in r.output
    # a holey file kvbench wrote is filled first; a holey file it did not write is refused before any I/O
    own = tmp_path / "own.img"
    with open(own, "wb") as f:
        f.truncate(8 * MiB)
    safety.mark_owned(str(own))
    s = json.loads(cli("io", "--target", own, "--runtime", "0.3s", "--results", tmp_path / "res", "--json").stdout)
    assert s["prefill"]["bytes"] == 8 * MiB and s["status"] == "complete"
    foreign = tmp_path / "foreign.img"
    with open(foreign, "wb") as f:
        f.truncate(8 * MiB)
    r = cli("io", "--target", foreign, "--runtime", "0.3s", "--results", tmp_path / "res2")
    assert r.exit_code == 2 and "has unwritten ranges (from byte 0)" in r.output
    assert not (tmp_path / "res2").exists()


def test_sigkill_of_qualify_takes_its_running_step_with_it(tmp_path):
    import psutil

    prof = tmp_path / "long.toml"
    prof.write_text('name = "long"\n[[workload]]\nname = "rd"\nkind = "io"\nrw = "randread"\nbs = "4k"\n'
                    'qd = 4\nruntime = 120\n[[criterion]]\nname = "iops"\nworkload = "rd"\nmetric = "iops"\nmin = 1\n')
    target = tmp_path / "d.img"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    p = subprocess.Popen([sys.executable, "-m", "kvbench", "qualify", str(prof), "--target", str(target),
                          "--size", "8MiB", "--results", str(tmp_path / "res")], env=env, cwd=tmp_path,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        child = None
        for _ in range(600):                       # the step starts once the region is written
            kids = [c for c in psutil.Process(p.pid).children() if "io" in c.cmdline()]
            if kids:
                child = kids[0]
                break
            time.sleep(0.1)
        assert child is not None, "the io step never started"
        assert os.getpgid(child.pid) == os.getpgid(p.pid)          # in the qualification's process group
        p.kill()
        p.wait()
        gone, alive = psutil.wait_procs([child], timeout=60)
        assert child in gone and not alive                          # it died with the job
    finally:
        if p.poll() is None:
            p.kill()
    from kvbench.engine.targets import open_target
    open_target(str(target)).close()                                # the target's lock went with it


def test_steps_get_the_region_results_and_destroy_data(tmp_path):
    prof = load_qualify_profile("kv-cache-offload")
    runs = {}
    for w in prof.workloads:
        argv = workload_argv(w, target="/dev/loop9", size=2 << 30, destroy_data="/dev/loop9",
                             results_root=str(tmp_path), run_dirs=runs, drive_capacity=7_680_000_000_000,
                             quick=10.0)[3:]
        runs[w.name] = "R"
        line = " ".join(argv)
        if w.kind in ("io", "replay-kv"):
            assert f"--results {tmp_path}" in line
        if w.kind == "replay-kv":
            assert "--l3 /dev/loop9 --l3-region 2147483648" in line and "--destroy-data /dev/loop9" in line
            assert "--duration 10s" in line
        if w.kind == "io":
            assert "--runtime 10s" in line
        if w.kind == "plan":
            assert "drive_capacity=7680000000000" in line and "--run R" in line


def test_the_plan_is_judged_against_the_drive_under_tests_rating(tmp_path, cli):
    """A 3-DWPD drive (--drive rated_dwpd=3) is a mixed-use class: its rating's reference WAF is that class's
    (2.60 in the preset, FTL model at its OP), not the 1-DWPD class's (4.83), and the deployment's rating, lifetime and drive count are
    its own. The criterion then compares rating-equivalent DWPD computed against the same rating it is judged by."""
    prof = load_qualify_profile("kv-cache-offload")
    (plan,) = [w for w in prof.workloads if w.kind == "plan"]
    line = " ".join(workload_argv(plan, target="/dev/loop9", size=2 << 30, destroy_data=None, results_root="R",
                                  run_dirs={"kv-replay": "RUN"}, drive_capacity=7_680_000_000_000,
                                  drive={"rated_dwpd": 3.0}))
    assert "--ssd-class tlc-3dwpd --price ssd.tlc-3dwpd.dwpd=3" in line
    line = " ".join(workload_argv(plan, target="/dev/loop9", size=2 << 30, destroy_data=None, results_root="R",
                                  run_dirs={"kv-replay": "RUN"}, drive_capacity=7_680_000_000_000,
                                  drive={"rated_dwpd": 1.5}))        # nearer 1 than 3 by ratio (1.5 vs 2)
    assert "--ssd-class tlc-1dwpd --price ssd.tlc-1dwpd.dwpd=1.5" in line
    # what the plan makes of those options: the deployment's reference class and rating are the drive's
    args = ["plan", "--trace", "mooncake-sample", "--model", "llama-3.1-8b", "--profile", "llama-3.1-8b-h200-trtllm-fp8",
            "--deployment", "gpus=8,drives=8,drive_capacity=7.68TB,utilization=0.5", "--sweep", "1h",
            "--ssd-class", "tlc-3dwpd", "--price", "ssd.tlc-3dwpd.dwpd=3", "--json"]
    r = cli(*args)
    assert r.exit_code == 0, r.output
    dep = json.loads(r.output)["deployment"]
    from kvbench.analysis.cost import load_prices

    ref = load_prices().ssd["tlc-3dwpd"].reference_waf      # the class's own (FTL model, JESD219A, op 0.374)
    assert (dep["reference_class"], dep["rated_dwpd"], dep["reference_waf"]) == ("tlc-3dwpd", 3.0, ref)
    assert dep["dwpd_rating_equivalent_per_drive"] == pytest.approx(dep["dwpd_host_per_drive"] * dep["workload_waf"] / ref)
    assert dep["lifetime_years"] == pytest.approx(5 * 3.0 / dep["dwpd_rating_equivalent_per_drive"])
