"""The engine on real files: data integrity, every engine, workers, pacing, fences, errors, faults."""

import errno
import os

import numpy as np
import pytest

from kvbench.engine import FLAG_FENCE, make_plan, open_target, run_plan
from kvbench.engine.content import expected_buffer
from kvbench.engine.engines.base import CAP_DISKLESS
from kvbench.errors import DiskFullError, EngineError, Interrupted, TargetError, UsageError, VerifyError

MiB = 1 << 20


@pytest.fixture
def target(tmp_path):
    path = tmp_path / "t.dat"
    t = open_target(path, size=8 * MiB, write=True)
    yield t
    t.close()


def fill(t, tag=7, bs=MiB, **kw):
    n = t.size // bs
    r = run_plan(make_plan(1, np.arange(n) * bs, bs, tag=tag), [t], qd=4, **kw)
    assert r.status == "complete", r.error
    return r


@pytest.mark.parametrize("engine", ["libaio", "psync"])
def test_written_data_reads_back_identical(target, engine):
    fill(target, tag=0xABCDEF, engine=engine)
    # the bytes on disk are exactly the content contract (read with plain buffered I/O, not the engine)
    with open(target.path, "rb") as f:
        f.seek(3 * MiB + 4096)
        got = f.read(8192)
    assert got == expected_buffer(0xABCDEF, 3 * MiB + 4096, 8192, target.lbs)
    rng = np.random.default_rng(3)
    plan = make_plan(0, rng.integers(0, target.size // 4096, 3000) * 4096, 4096, tag=0xABCDEF)
    r = run_plan(plan, [target], engine=engine, qd=16, verify="all")
    assert r.status == "complete" and r.verify["checked"] == 3000 and r.verify["mismatches"] == 0
    assert (r.result == 4096).all() and (r.complete_ns > r.submit_ns).all()
    lat = r.latency("read")
    assert lat.count == 3000
    # the histogram is fed exactly the per-I/O latencies
    exact = np.sort(r.complete_ns - r.submit_ns)
    assert lat.max_ns == exact[-1] and lat.total_ns == exact.sum()


def test_verify_catches_wrong_tag_and_names_it(target):
    fill(target, tag=1)
    plan = make_plan(0, np.arange(100) * 4096, 4096, tag=1)
    plan["tag"][37] = 2
    r = run_plan(plan, [target], qd=8, verify="all")
    assert r.verify["mismatches"] == 1 and r.verify["first"]["index"] == 37 and r.verify["first"]["tag"] == 2
    with pytest.raises(VerifyError, match="plan index 37"):
        r.raise_for_status()


def test_injected_corruption_is_always_caught(target):
    fill(target, tag=5)
    plan = make_plan(0, np.arange(1000) * 4096, 4096, tag=5)
    r = run_plan(plan, [target], qd=16, verify="all", faults="corrupt-every=10")
    assert r.verify["mismatches"] == 100 and r.verify["first"]["index"] == 9


def test_injected_eio_stops_with_results_so_far(target):
    fill(target)
    plan = make_plan(0, np.arange(2000) * 4096, 4096, tag=7)
    r = run_plan(plan, [target], qd=8, faults="eio@500")
    assert r.status == "failed" and r.errno == errno.EIO and r.first_error["index"] == 500
    assert 500 <= r.issued < 2000 and r.ios_by_op()["read"] >= 499
    with pytest.raises(EngineError, match="EIO"):
        r.raise_for_status()
    r = run_plan(plan, [target], qd=8, faults="eio-every=100", on_error="continue")
    assert r.status == "complete" and r.errors == {errno.EIO: 20} and r.ios_by_op()["read"] == 1980


def test_short_read_is_detected(target):
    fill(target)
    os.truncate(target.path, 4 * MiB)          # the file shrank under the engine
    plan = make_plan(0, np.arange(8) * MiB, MiB, tag=7)
    r = run_plan(plan, [target], qd=1)
    assert r.status == "failed" and r.first_error["index"] == 4 and "short read" in r.error


def test_workers_merge_exactly(target):
    fill(target)
    rng = np.random.default_rng(5)
    plan = make_plan(0, rng.integers(0, target.size // 4096, 4000) * 4096, 4096, tag=7)
    rows = []
    r = run_plan(plan, [target], qd=8, workers=2, verify="sampled", on_second=rows.append)
    assert r.status == "complete" and r.workers == 2
    assert (r.submit_ns >= 0).all() and (r.result == 4096).all()
    h = r.latency()
    assert h.count == 4000 and h.max_ns == int((r.complete_ns - r.submit_ns).max())
    assert sum(row["iops"] * row["interval_s"] for row in rows) == pytest.approx(4000)
    assert r.verify["checked"] == 250 and r.verify["mismatches"] == 0


def test_open_loop_follows_plan_times(target):
    fill(target)
    n = 200
    plan = make_plan(0, np.arange(n) * 4096, 4096, tag=7, issue_ns=np.arange(n) * 2_000_000)
    r = run_plan(plan, [target], qd=4, pacing="open", speed=2.0)
    intended = plan["issue_ns"] // 2
    lag = r.submit_ns - intended
    assert (lag >= 0).all()                    # never early
    assert (np.diff(r.submit_ns) >= 0).all()   # issued in intended order
    # (no bound on wall time: a loaded 2-core VM stretches it, and "never early" already rules out an unpaced
    # run, which would issue the 200th I/O ~199 ms before it is due)
    # the engine's own lag is measured against the speed-scaled times (speed ignored: its lag would differ)
    assert r.lag.count == n and r.lag.max_ns == lag.max()
    s = r.summary()
    assert s["issue_lag_us"]["n"] == n and s["issue_lag_us"]["p50"] is not None


def test_fence_waits_for_earlier_ios(target):
    fill(target)
    n = 64
    plan = make_plan(0, np.arange(n) * 4096, 4096, tag=7)
    plan["flags"][[16, 40]] = FLAG_FENCE
    r = run_plan(plan, [target], qd=32)
    assert r.submit_ns[16] >= r.complete_ns[:16].max()
    assert r.submit_ns[40] >= r.complete_ns[:40].max()


@pytest.mark.parametrize("engine", ["null", "dram"])
def test_diskless_engines(engine):
    t = open_target("dram:4MiB")
    plan = np.concatenate([make_plan(1, np.arange(64) * 65536, 65536, tag=9),
                           make_plan(0, np.arange(64) * 65536, 65536, tag=9)])
    r = run_plan(plan, [t], engine=engine, qd=8, verify="all")
    assert r.status == "complete" and r.ios_by_op() == {"read": 64, "write": 64, "trim": 0}
    if engine == "dram":
        assert r.verify["mismatches"] == 0
        assert t.arena[:8].view(np.uint64)[0] == 9 ^ 0     # the arena holds the stamped content
    t.close()


def test_trim_punches_hole(target):
    fill(target, tag=3)
    plan = np.concatenate([make_plan(2, 0, MiB), make_plan(0, [0, MiB], 4096, tag=3)])
    plan["flags"][1] = FLAG_FENCE
    r = run_plan(plan, [target], qd=2, verify="all")
    assert r.ios_by_op()["trim"] == 1
    assert r.verify["mismatches"] == 1 and r.verify["first"]["offset"] == 0    # zeros after the punch


def test_bad_plans_are_refused(target):
    with pytest.raises(TargetError, match=f"logical block size {target.lbs}"):
        run_plan(make_plan(0, 100, 4096), [target])
    with pytest.raises(TargetError, match="multiple of"):
        run_plan(make_plan(0, 0, 1000), [target])
    with pytest.raises(TargetError, match="beyond the end"):
        run_plan(make_plan(0, target.size, 4096), [target])
    with pytest.raises(UsageError, match="queue depth"):
        run_plan(make_plan(0, 0, 4096), [target], qd=0)
    with pytest.raises(UsageError, match="unknown engine"):
        run_plan(make_plan(0, 0, 4096), [target], engine="spdk")
    with pytest.raises(UsageError, match="sorted"):
        run_plan(make_plan(0, 0, 4096, issue_ns=[5, 1]), [target], pacing="open")


def test_stop_flag_drains_and_marks_interrupted(target):
    fill(target)
    from kvbench.engine.driver import StopFlag
    stop = StopFlag()
    stop.value = 1
    r = run_plan(make_plan(0, np.zeros(1000, dtype=np.int64), 4096), [target], stop=stop)
    assert r.status == "interrupted" and r.issued == 0
    with pytest.raises(Interrupted):
        r.raise_for_status()


def test_disk_full_error_class(target):
    fill(target)
    r = run_plan(make_plan(1, [0, 4096], 4096), [target], qd=1, faults="enospc@1")
    assert r.status == "failed" and r.errno == errno.ENOSPC
    with pytest.raises(DiskFullError):
        r.raise_for_status()


def test_libaio_missing_falls_back_to_psync_with_warning(target, monkeypatch):
    from kvbench.engine.engines import aio, engine_class

    def broken():
        raise OSError("libaio.so.1: cannot open shared object file")
    monkeypatch.setattr(aio, "_load", broken)
    with pytest.warns(RuntimeWarning, match="falling back to the psync engine"):
        cls = engine_class("libaio")
    assert cls.name == "psync"
    fill(target)
    with pytest.warns(RuntimeWarning):
        r = run_plan(make_plan(0, np.arange(64) * 4096, 4096, tag=7), [target], qd=8, verify="all")
    assert r.engine == "psync" and r.verify["mismatches"] == 0


def test_time_based_loop_counts_every_pass(target):
    fill(target)
    plan = make_plan(0, np.arange(256) * 4096, 4096, tag=7)
    r = run_plan(plan, [target], qd=8, runtime_s=0.4, loop=True, verify="all")
    assert r.passes >= 2 and r.issued_total >= 2 * 256
    assert r.latency().count == r.ios_by_op()["read"] == r.verify["checked"]
    assert r.verify["mismatches"] == 0      # (no wall-time bound: wall_s starts at the first submit)


def test_two_targets_have_their_own_histograms(tmp_path):
    a = open_target(tmp_path / "a.dat", size=MiB, write=True)
    b = open_target(tmp_path / "b.dat", size=MiB, write=True)
    plan = make_plan(1, np.arange(32) * 4096, 4096, tag=4, target=np.arange(32) % 2)
    r = run_plan(plan, [a, b], qd=4)
    s = r.summary()
    assert s["per_target"]["0"]["write"]["ios"] == 16 and s["per_target"]["1"]["write"]["ios"] == 16
    assert r.latency("write", 0).count == r.latency("write", 1).count == 16
    with open(b.path, "rb") as f:
        f.seek(4096)
        assert f.read(4096) == expected_buffer(4, 4096, 4096, b.lbs)
    a.close()
    b.close()


def test_dram_arena_is_shared_by_worker_processes():
    t = open_target("dram:4MiB")
    w = run_plan(make_plan(1, np.arange(64) * 65536, 65536, tag=21), [t], qd=4, workers=2)
    assert w.workers == 2 and w.ios_by_op()["write"] == 64
    assert (t.arena.view(np.uint64)[::512] == 21 ^ np.arange(0, 8192, 8, dtype=np.uint64)).all()
    r = run_plan(make_plan(0, np.arange(64) * 65536, 65536, tag=21), [t], qd=4, workers=2, verify="all")
    assert r.verify["checked"] == 64 and r.verify["mismatches"] == 0
    t.close()


@pytest.mark.parametrize("engine,qd", [("libaio", 16), ("psync", 4), ("libaio", 1)])
def test_latency_splits_into_slat_and_clat_and_depth_follows_littles_law(target, engine, qd):
    fill(target)
    rng = np.random.default_rng(3)
    r = run_plan(make_plan(0, rng.integers(0, target.size // 4096, 3000) * 4096, 4096, tag=7), [target],
                 engine=engine, qd=qd)
    assert r.status == "complete", r.error
    lat, slat, clat = (r.latency(kind=k) for k in ("lat", "slat", "clat"))
    assert lat.count == slat.count == clat.count == 3000
    assert lat.total_ns == slat.total_ns + clat.total_ns            # per I/O: lat = slat + clat, to the ns
    assert slat.min_ns >= 0 and clat.min_ns >= 0 and slat.max_ns <= lat.max_ns and clat.max_ns <= lat.max_ns
    ok = r.complete_ns >= 0
    depth = (r.complete_ns[ok] - r.submit_ns[ok]).sum() / (r.complete_ns[ok].max() - r.submit_ns[ok].min())
    assert r.inflight_mean() == pytest.approx(depth, rel=1e-9)
    assert 0 < r.inflight_mean() <= qd + 1e-9
    s = r.summary()
    assert set(s["slat_us"]) == set(s["clat_us"]) == set(s["lat_us"]) and s["inflight_mean"] == r.inflight_mean()
    assert s["ops"]["read"]["clat_us"]["p50"] <= s["ops"]["read"]["lat_us"]["p50"]


def test_engines_are_chosen_by_what_they_declare(tmp_path):
    """engine_for reads the engines' declared target kinds and capabilities, not their names: a device engine asked
    for a DRAM arena gives way to the memory engine; the memory engine refuses a file, naming the engines that run
    files; a mix of DRAM and a file is refused for every engine but the one that touches nothing."""
    from kvbench.engine.engines import ENGINES, engine_for
    from kvbench.errors import UsageError

    dram = open_target("dram:1MiB")
    f = open_target(tmp_path / "t.bin", size=1 << 20, write=True)
    try:
        assert engine_for("libaio", [dram]) == "dram" and engine_for("psync", [dram]) == "dram"
        assert engine_for("dram", [dram]) == "dram" and engine_for("null", [dram]) == "null"
        assert engine_for("libaio", [f]) == "libaio" and engine_for("psync", [f]) == "psync"
        with pytest.raises(UsageError, match=r"the dram engine does not run on file targets.*file targets run on "
                                             r"the libaio or psync"):
            engine_for("dram", [f])
        with pytest.raises(UsageError, match="the libaio engine does not run on dram targets"):
            engine_for("libaio", [dram, f])
        assert engine_for("null", [dram, f]) == "null"
        with pytest.raises(UsageError, match="unknown engine 'spdk'"):
            engine_for("spdk", [f])
        assert set(ENGINES) == {"libaio", "psync", "dram", "null"}
    finally:
        f.close()
        dram.close()


class _DisklessFiles:
    """A diskless engine that runs on files only (for the registry-order test below)."""

    caps = frozenset({CAP_DISKLESS})
    kinds = frozenset({"file"})


def test_a_memory_target_never_goes_to_a_diskless_engine_that_does_not_run_on_it(monkeypatch):
    """The first diskless engine in the registry that does not run on DRAM arenas is passed over."""
    from kvbench.engine import engines

    monkeypatch.setattr(engines, "ENGINES", {"fake": ("tests.engine.test_engine", "_DisklessFiles"), **engines.ENGINES})
    dram = open_target("dram:1MiB")
    try:
        assert engines.engine_for("libaio", [dram]) == "dram"
    finally:
        dram.close()


def test_engine_class_names_the_missing_engine_and_falls_back_from_libaio(monkeypatch):
    """An unknown engine is a UsageError naming the choices; libaio that cannot load falls back to psync with a
    warning (once: psync itself is asked without a fallback); another engine that cannot load is a
    DependencyError; an engine class lacking an operation is refused."""
    from kvbench.engine.engines import aio, engine_class, psync
    from kvbench.errors import DependencyError

    with pytest.raises(UsageError, match="unknown engine 'spdk'.*libaio, psync, dram, null"):
        engine_class("spdk")

    def broken():
        raise OSError("libaio.so.1: cannot open shared object file")

    monkeypatch.setattr(aio.LibaioEngine, "check_available", staticmethod(broken))
    with pytest.warns(RuntimeWarning, match="falling back to the psync engine"):
        assert engine_class("libaio") is psync.PsyncEngine
    with pytest.raises(DependencyError, match="engine 'libaio' is unavailable: libaio.so.1"):
        engine_class("libaio", fallback=False)
    monkeypatch.setattr(psync.PsyncEngine, "check_available", staticmethod(broken))
    with pytest.raises(DependencyError, match="engine 'psync' is unavailable"):
        engine_class("libaio")                       # the fallback does not fall back again
    monkeypatch.undo()
    monkeypatch.setattr(psync.PsyncEngine, "reap", None)
    with pytest.raises(DependencyError, match=r"engine 'psync' lacks operations \['reap'\]"):
        engine_class("psync")
