"""``kvbench run``: tier sizing, and the whole job end to end on the shipped trace sample (real replay onto a
scratch file, real analyses, an HTML report that renders in Chromium); a failing step leaves a partial job."""

from __future__ import annotations

import json

import pytest

from kvbench.cli import main as cli_main
from kvbench.cli.run import size_tiers
from kvbench.errors import TargetError
from tests.report.helpers import assert_report_renders
import os
from kvbench.cli.run import _replay_progress
from kvbench.cli.run import first_byte_notes
from kvbench.qualify.probe import TierProbe
from kvbench.replay.kv import LiveProgress

GiB = 1 << 30
MiB = 1 << 20


def test_size_tiers_follows_free_memory_disk_and_the_trace():
    block = 64 * MiB
    s = size_tiers(1000 * block, block, free_disk=200 * GiB, avail_mem=16 * GiB)
    assert s.l3_bytes == 32 * GiB                          # capped at max_store (footprint 62.5 GiB)
    assert s.l2_bytes == (int(16 * GiB * 0.1) // block) * block   # 10% of free memory, whole blocks
    s = size_tiers(40 * block, block, free_disk=200 * GiB, avail_mem=16 * GiB)
    assert s.l3_bytes == 40 * block and s.l2_bytes == 10 * block  # whole footprint; L2 a quarter of it
    s = size_tiers(1000 * block, block, free_disk=10 * GiB, avail_mem=16 * GiB)
    assert s.l3_bytes == (2 * GiB // block) * block        # 20% of free disk
    with pytest.raises(TargetError, match="not enough free disk"):
        size_tiers(1000 * block, block, free_disk=1 * GiB, avail_mem=16 * GiB)
    # sizes under a MiB keep their figure (":.0f MiB" once said "0 MiB"): 20% of 1 MiB free is 205 KiB
    with pytest.raises(TargetError, match=r"store of 4 blocks of 64 KiB \(20% of free space is 205 KiB\)"):
        size_tiers(1000 * 64 * 1024, 64 * 1024, free_disk=MiB, avail_mem=16 * GiB)
    # caps under 1 GiB are labelled by their size (">> 30" once said "0 GiB")
    s = size_tiers(40 * MiB, MiB, free_disk=200 * GiB, avail_mem=16 * GiB, max_store=768 * MiB, max_dram=512 * MiB)
    assert s.reason.endswith("L2 = min(footprint/4, 10% of free memory, 512 MiB); L3 = min(footprint, 20% of free "
                             "disk, 768 MiB)")


@pytest.mark.slow
def test_main_job_end_to_end_on_the_shipped_sample(tmp_path, cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = cli("run", "--model", "tiny-gqa", "--max-requests", "150", "--duration", "20s", "--l2", "16MiB",
            "--l3-capacity", "256MiB", "--retentions", "1h", "--probe-seconds", "0.4", "-o", tmp_path / "run.html",
            "--json")
    summary = json.loads(r.stdout[r.stdout.index("{"):]) if "{" in r.stdout else {}
    assert r.exit_code == 0, r.output[-3000:]
    assert summary["kind"] == "run" and summary["status"] == "complete"
    job = tmp_path / summary["run_dir"]
    for name in ("mrc.json", "plan.json", "check.json", "retention.json", "probes.json"):
        assert (job / name).is_file(), name
    assert not (job / "l3-store.bin").exists()             # the scratch store is removed
    replay = json.loads((tmp_path / summary["parts"]["replay"] / "summary.json").read_text())
    assert replay["requests"] == 150 and replay["verify_errors"] == 0
    check = json.loads((job / "check.json").read_text())
    assert {"l2", "l3"} <= set(check["tiers"])
    # one load path per tier (load_paths.json, with its source): the check and the plan's cost line use the same
    paths = json.loads((job / "load_paths.json").read_text())["tiers"]
    for name in ("l2", "l3"):
        assert check["tiers"][name]["bandwidth_bytes_per_s"] == pytest.approx(paths[name]["bandwidth_bytes_per_s"],
                                                                              rel=1e-6), name
    assert "link model" in paths["l2"]["source"] and check["tiers"]["l2"]["bandwidth_bytes_per_s"] == 50e9
    plan_lt = json.loads((job / "plan.json").read_text())["load_tier"]
    assert plan_lt["bandwidth_bytes_per_s"] == pytest.approx(paths["l3"]["bandwidth_bytes_per_s"], rel=1e-6)
    assert replay["replayed_fraction"] == (replay["requests"] - replay["requests_not_issued"]) / replay["trace_requests"]
    # the result contract: every file stamped, the job and its steps read through the one reader
    from kvbench.metrics.results import read_run

    folder = read_run(job)
    assert summary["schema"] == check["schema"] == folder.plan.data["schema"] == 1
    assert folder.check.data == check and set(folder.parts) == set(summary["parts"])
    assert folder.parts["replay"].replay.requests == 150 and folder.parts["simulate"].replay.dry_run
    dom = assert_report_renders(tmp_path / "run.html", tmp_path, min_plots=5, screenshot=True)
    assert "break-even n*" in dom and "DWPD (86400 / residence)" in dom and "The answer" in dom
    ans = summary["answer"]
    assert ans["schema"] == 1 and ans["requests"]["value"] == 150
    assert ans["requests_issued"]["value"] == replay["requests"] - replay.get("requests_not_issued", 0)
    assert {"dram_bytes", "ssd_bytes", "drive_class", "drives", "drive_capacity_bytes", "drive_write_bytes_per_s",
            "dwpd_host_per_drive", "dwpd_rating_equivalent_per_drive", "lifetime_years", "residence_s",
            "load_or_recompute", "usd_per_day", "usd_per_day_saved", "requests", "requests_issued",
            "replayed_fraction"} <= set(ans)
    assert {"l2", "l3"} <= set(ans["load_or_recompute"])
    import html

    from kvbench.analysis.answer import Answer, rows, text_table

    a = Answer.from_json(ans)
    text = html.unescape(dom)
    for _, line, _ in rows(a):                              # the report and the terminal say what the JSON says
        assert line in text and line in text_table(a), line
    assert "answer_figure" in summary["figures"]


def test_hit_ratios_do_not_depend_on_the_replay_duration(tmp_path, cli, monkeypatch):
    """The answer comes from the whole-trace simulation: a replay cut short covers fewer requests, nothing else."""
    monkeypatch.chdir(tmp_path)
    answers = []
    for d in ("1s", "6s"):
        r = cli("run", "--model", "tiny-gqa", "--max-requests", "120", "--duration", d, "--l2", "16MiB",
                "--l3-capacity", "256MiB", "--retentions", "10m", "--probe-seconds", "0.2", "--results",
                tmp_path / d, "-o", tmp_path / f"{d}.html", "--json")
        summary = json.loads(r.stdout[r.stdout.index("{"):])
        answers.append(summary["answer"])
    a, b = answers
    assert a["requests"]["value"] == b["requests"]["value"] == 120
    assert a["simulated"] == b["simulated"]
    for k in ("hit_ratio", "store_bytes", "write_bytes_per_s", "residence_s", "hit_ssd_bytes"):
        assert a[k]["value"] == b[k]["value"], k


def test_failing_steps_leave_a_partial_job_with_a_report_and_exit_1(tmp_path, cli, monkeypatch):
    """Every step fails (as a crashed or missing command would): the job still writes its folder, a summary
    marked partial with the reasons, and a report that says so; the exit status is 1."""
    import kvbench.job as job
    import kvbench.qualify.steps as steps
    from kvbench.qualify.steps import StepResult

    calls = []

    def failing(name, argv, **kw):
        calls.append(name)
        return StepResult(name, tuple(argv), 1, 0.01, None, f"{name}: simulated failure")

    monkeypatch.setattr(steps, "run_step", failing)
    monkeypatch.setattr(job, "run_inprocess", failing)            # the steps the job runs in its own process
    monkeypatch.chdir(tmp_path)
    r = cli("run", "--model", "tiny-gqa", "--max-requests", "40", "--retentions", "", "-o", tmp_path / "partial.html")
    assert r.exit_code == 1, r.output[-2000:]
    assert calls == ["mrc", "simulate", "replay", "plan"]     # no replay run: nothing to probe or check
    assert "the run is partial: step(s) mrc, simulate, replay, plan, check failed" in r.output
    job = next((tmp_path / "results").iterdir())
    summary = json.loads((job / "summary.json").read_text())
    assert summary["status"] == "partial" and "replay: simulated failure" in json.dumps(summary["steps"])
    assert not (job / "l3-store.bin").exists()
    html = (tmp_path / "partial.html").read_text()
    assert "is <b>partial</b>" in html and "failed steps: mrc, simulate, replay, plan, check" in html


def test_ctrl_c_during_the_replay_removes_the_store_and_keeps_a_report(tmp_path, cli, monkeypatch):
    import kvbench.qualify.steps as steps
    from kvbench.errors import Interrupted
    from kvbench.qualify.steps import StepResult

    def step(name, argv, **kw):
        if name == "replay":
            store = argv[argv.index("--l3") + 1]
            with open(store, "wb") as f:          # the replay had begun writing its store
                f.write(b"\0" * 4096)
            raise Interrupted(f"step {name!r} was interrupted", "rerun the job")
        return StepResult(name, tuple(argv), 1, 0.01, None, "simulated failure")

    monkeypatch.setattr(steps, "run_step", step)
    monkeypatch.chdir(tmp_path)
    r = cli("run", "--model", "tiny-gqa", "--max-requests", "40", "-o", tmp_path / "int.html")
    assert r.exit_code == 130, r.output[-2000:]
    job = next((tmp_path / "results").iterdir())
    assert not (job / "l3-store.bin").exists()
    summary = json.loads((job / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["report"] == str(tmp_path / "int.html")
    assert "is <b>interrupted</b>" in (tmp_path / "int.html").read_text()


def test_the_compute_profile_follows_the_model():
    from kvbench.cli.run import DEFAULT_PROFILE, _pick_profile

    # a measured profile of the model comes before a published one (both ship for these two models)
    assert _pick_profile(None, "deepseek-v3") == ("deepseek-v3-nvidia-h200", None)
    assert _pick_profile(None, "llama-3.1-8b") == ("llama-3.1-8b-nvidia-h200", None)
    assert _pick_profile(None, "llama-3.1-70b") == ("llama-3.1-70b-nvidia-h200", None)
    name, note = _pick_profile(None, "tiny-gqa")
    assert name == DEFAULT_PROFILE and "stand-in" in note and "kvbench prefill --model tiny-gqa" in note
    assert _pick_profile("my.toml", "tiny-gqa") == ("my.toml", None)


def test_the_store_removed_behind_the_job_hands_its_error_to_join(tmp_path, monkeypatch):
    """The scratch store is removed in a thread while plan, check and the report go on; a removal that fails
    raises in the job's thread at join() (one line there), never as a thread's traceback; a store removed this way
    is gone, its kvbench mark too."""
    from kvbench import job as R
    from kvbench.engine import safety

    store = tmp_path / "l3-store.bin"
    store.write_bytes(b"\0" * 4096)
    safety.mark_owned(str(store))
    th = R._remove_store_behind(str(store))
    th.join()
    assert not store.exists() and not safety.sidecar(str(store)).exists()

    def refuse(path):
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(R, "_remove_store", refuse)
    th = R._remove_store_behind(str(store))
    with pytest.raises(PermissionError, match="Permission denied"):
        th.join()
    th.join()                                     # raised once, then the thread is simply finished


def test_run_refuses_a_tmpfs_store_and_zero_duration_before_starting(cli, tmp_path):
    if not os.path.isdir("/dev/shm") or os.statvfs("/dev/shm").f_bsize == 0:
        pytest.skip("no /dev/shm")
    from kvbench.metrics.environment import mount_of
    if (mount_of("/dev/shm") or {}).get("fstype") != "tmpfs":
        pytest.skip("/dev/shm is not tmpfs here")
    r = cli("run", "--l3", "/dev/shm/kvbench-test-l3.bin", "--results", tmp_path / "res")
    assert r.exit_code == 2 and "--l3 /dev/shm/kvbench-test-l3.bin would be on tmpfs" in r.output
    assert len(r.output.strip().splitlines()) == 1 and not (tmp_path / "res").exists()
    r = cli("run", "--duration", "0", "--results", tmp_path / "res")
    assert r.exit_code == 2 and "--duration 0 s must be > 0" in r.output and not (tmp_path / "res").exists()


# --- what the terminal says: kvbench run's replay progress line and first-byte notes
def test_run_progress_line_reads_the_live_progress_file(tmp_path):
    job = tmp_path / "run-1"
    job.mkdir()
    assert "starting" in _replay_progress(job, 3.0, 60.0)
    rep = job / "replay-kv-1"
    rep.mkdir()
    assert "simulating the first window" in _replay_progress(job, 9.0, 60.0)
    live = LiveProgress(rep, trace_requests=4000)
    live.window(1000, 1000, 2000)                    # 1,000 done, a window of 1,000 requests / 2,000 I/Os
    live.on_second("dev")({"interval_s": 1.0, "iops": 1000.0, "bw_bytes_per_s": 2e9})   # half the window
    live.write(force=True)
    d = json.loads((rep / "progress.json").read_text())
    assert d["requests_done"] == 1500 and d["trace_requests"] == 4000 and d["bytes"]["dev"] == 2e9
    d["seconds"] = 10.0                               # fix the clock: 1,500 requests in 10 s, 2.5k left
    (rep / "progress.json").write_text(json.dumps(d))
    line = _replay_progress(job, 20.0, 60.0)
    assert "1,500 / 4,000 requests (38%)" in line and "store (L3) 0.20 GB/s" in line
    assert "ETA 17 s (trace at this rate)" in line                        # 2,500 / 150 per s < 50 s budget
    assert "ETA 15 s (time budget)" in _replay_progress(job, 20.0, 25.0)
    assert "time budget used" in _replay_progress(job, 20.0, 10.0)
    assert "first window" not in line


def test_first_byte_difference_between_probe_and_check_is_named():
    probe = TierProbe("l3", path="/var/tmp/s", first_byte_s=40e-6, bandwidth_bytes_per_s=2e9, io_size=1 << 20, qd=32,
                      first_byte_lat_us={}, bandwidth_lat_us={})
    same = {"l3": {"latency_s": 41e-6, "source": "given"}}
    assert first_byte_notes([probe], same) == []
    notes = first_byte_notes([probe], {"l3": {"latency_s": 9.11e-3, "source": "fit to l3's load times"}})
    assert len(notes) == 1
    assert "probe 40 us" in notes[0] and "QD1" in notes[0] and "9.11 ms" in notes[0] and "queueing" in notes[0]


def test_a_warm_up_reaches_the_mrc_and_plan_steps_and_the_answer_says_it(tmp_path, cli, monkeypatch):
    """run --warmup 136.3s on mooncake-sample: its steps are recorded with the warm-up as they read it back; the
    job's curve is ``kvbench mrc --warmup 136.3s``'s (computed apart here), its plan is measured from request 486
    (the first at or after 136.3 s, as the trace's timestamps say), and the answer's first note names the
    window."""
    import numpy as np

    from kvbench.stream.traces import read_trace

    monkeypatch.chdir(tmp_path)
    r = cli("run", "--trace", "mooncake-sample", "--model", "tiny-gqa", "--warmup", "136.3s", "--duration", "1s",
            "--l2", "16MiB", "--l3-capacity", "256MiB", "--retentions", "", "--probe-seconds", "0.2",
            "-o", tmp_path / "run.html", "--json")
    assert r.exit_code == 0, r.output[-3000:]
    summary = json.loads(r.stdout[r.stdout.index("{"):])
    argv = {s["name"]: s["argv"] for s in summary["steps"]}
    for name in ("mrc", "plan"):
        i = argv[name].index("--warmup")
        assert argv[name][i + 1] == "136.3s", argv[name]
    job = tmp_path / summary["run_dir"]
    alone = json.loads(cli("mrc", "mooncake-sample", "--model", "tiny-gqa", "--unit", "bytes", "--warmup", "136.3s",
                           "--json").stdout)
    ran = json.loads((job / "mrc.json").read_text())
    assert ran["infinite_hit_ratio"] == alone["infinite_hit_ratio"]
    assert ran["curves"][0]["hit_ratio"] == alone["curves"][0]["hit_ratio"]
    ts = np.asarray(read_trace("mooncake-sample").timestamp_s)
    first = int(np.count_nonzero(ts - ts.min() < 136.3))      # the requests before 136.3 s on the trace's clock
    assert first == 486
    st = json.loads((job / "plan.json").read_text())["stationarity"]
    assert st["measured_from"]["request"] == first
    assert summary["answer"]["notes"][0].startswith("Sized on the requests from 136.3 s (the last 50% of the span")


def test_a_warm_up_that_leaves_nothing_to_measure_is_refused_before_any_step(cli, tmp_path):
    """mooncake-sample's last request arrives at 272.653 s: a warm-up past it, or one that leaves a single request
    (a fraction of 0.9999 of 1,000: r999), is refused in one line with exit 2 before the job creates anything."""
    for w, said in (("300s", "warm-up 300 s covers every request (the last arrives at 272.653 s)"),
                    ("0.9999", "the warm-up leaves 1 request(s) arriving over 0 s to measure")):
        r = cli("run", "--trace", "mooncake-sample", "--model", "tiny-gqa", "--warmup", w, "--results",
                tmp_path / "res", "-o", tmp_path / "r.html")
        err = [x for x in r.output.splitlines() if x.startswith("kvbench: error:")]
        assert r.exit_code == 2 and len(err) == 1 and said in err[0] and "Traceback" not in r.output, r.output
        assert not (tmp_path / "res").exists() and not (tmp_path / "r.html").exists()


def test_a_key_sampled_gen_trace_runs_at_its_own_rate(tmp_path, cli, monkeypatch):
    """gen:...,sample=0.5 is a miniature already: the job takes its rate (no other chosen, none passed again, which
    the replay refused mid-job before), models L2/L3 at twice the device sizes, and both the whole-trace simulation
    and the timed replay run at 0.5."""
    from kvbench.analysis.curves.miniature import modelled_bytes
    from kvbench.sim.blockstore import slot_bytes_for

    monkeypatch.chdir(tmp_path)
    r = cli("run", "--trace", "gen:chat,duration=10m,rate=2,sample=0.5", "--model", "tiny-gqa", "--duration", "1s",
            "--l2", "16MiB", "--l3-capacity", "256MiB", "--retentions", "", "--probe-seconds", "0.2",
            "-o", tmp_path / "run.html", "--json")
    assert r.exit_code == 0, r.output[-3000:]
    s = json.loads(r.stdout[r.stdout.index("{"):])
    cfg = s["config"]
    assert cfg["sample_rate"] == 0.5 and "the trace's own" in cfg["sampling"]["reason"]
    slot = slot_bytes_for(cfg["block_bytes"])
    assert cfg["sampling"]["modelled_l3_bytes"] == modelled_bytes(256 << 20, 0.5, slot)
    argv = {x["name"]: x["argv"] for x in s["steps"]}
    assert "--sample-keys" not in argv["replay"] and "--sample-keys" not in argv["simulate"]
    for part in ("replay", "simulate"):
        rs = json.loads((tmp_path / s["parts"][part] / "summary.json").read_text())
        assert rs["sample_rate"] == 0.5, part
