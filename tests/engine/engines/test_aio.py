"""The libaio engine's compiled closed loop (driver fast path): same data, same stats, same fallbacks."""

import os

import numpy as np
import pytest

from kvbench.engine import FLAG_FENCE, make_plan, open_target, run_plan
from kvbench.engine.engines import aio

MiB = 1 << 20


@pytest.fixture
def target(tmp_path):
    t = open_target(tmp_path / "t.dat", size=8 * MiB, write=True)
    yield t
    t.close()


@pytest.fixture
def fast_calls(monkeypatch):
    """Count the fast-path calls; ``calls.off()`` makes the engine refuse it (the Python path runs)."""
    class Calls:
        n = 0
        enabled = True

        def off(self):
            self.enabled = False
    calls = Calls()
    orig = aio.LibaioEngine.closed_loop

    def wrapped(self, *a):
        if not calls.enabled:
            return None
        calls.n += 1
        return orig(self, *a)
    monkeypatch.setattr(aio.LibaioEngine, "closed_loop", wrapped)
    return calls


def mixed_plan(t, n=3000, seed=4):
    """Random non-overlapping 4-16 KiB writes with random tags (one I/O per 16 KiB cell)."""
    rng = np.random.default_rng(seed)
    cells = rng.permutation(t.size // (16 << 10))[:n]
    ln = rng.choice([4096, 8192, 16384], n)
    plan = make_plan(1, cells * (16 << 10), 4096)
    plan["length"] = ln
    plan["tag"] = rng.integers(1, 2**63, n, dtype=np.uint64)
    return plan


def read_back(t, plan):
    rp = plan.copy()
    rp["op"] = 0
    r = run_plan(rp, [t], qd=16, verify="all")
    assert r.status == "complete"
    return r.verify


def test_fast_path_writes_the_content_contract(target, fast_calls):
    plan = mixed_plan(target, n=min(512, target.size // (16 << 10)))
    r = run_plan(plan, [target], qd=32)
    assert r.status == "complete" and fast_calls.n >= 1
    assert (r.result == plan["length"]).all() and (r.submit_ns >= 0).all() and (r.complete_ns > r.submit_ns).all()
    assert r.latency().count == len(plan)
    assert round(sum(row["write_iops"] * row["interval_s"] for row in r.timeseries)) == len(plan)
    v = read_back(target, plan)
    assert v["checked"] == len(plan) and v["mismatches"] == 0


def test_fast_and_python_paths_report_the_same_stats(target, fast_calls):
    plan = mixed_plan(target, n=512, seed=9)
    a = run_plan(plan, [target], qd=8)
    fast_calls.off()
    b = run_plan(plan, [target], qd=8)
    assert a.status == b.status == "complete"
    assert a.counts == b.counts and a.ios_by_op() == b.ios_by_op()
    assert a.latency().count == b.latency().count == len(plan)
    for r in (a, b):   # latency = reaped - submitted, per I/O, in the histogram
        lat = r.complete_ns - r.submit_ns
        assert abs(r.latency().total_ns - int(lat.sum())) <= 1e-9 * int(lat.sum()) + 1


def test_fences_and_trims_split_the_fast_path(target, fast_calls):
    rng = np.random.default_rng(2)
    n = 1200
    plan = make_plan(1, rng.integers(0, target.size // 4096, n) * 4096, 4096, tag=11)
    plan["flags"][::100] |= FLAG_FENCE
    plan["op"][50::300] = 2
    r = run_plan(plan, [target], qd=16)
    assert r.status == "complete" and fast_calls.n >= 12
    assert (r.result == 4096).all()
    for f in np.flatnonzero(plan["flags"] & FLAG_FENCE)[1:]:
        assert r.submit_ns[f] >= r.complete_ns[:f].max()


def test_verify_and_faults_keep_the_python_path(target, fast_calls):
    plan = make_plan(1, np.arange(256) * 4096, 4096, tag=5)
    run_plan(plan, [target], qd=8, faults="eio-every=1000", on_error="continue")
    rp = plan.copy()
    rp["op"] = 0
    r = run_plan(rp, [target], qd=8, verify="sampled")
    assert r.status == "complete" and fast_calls.n == 0


def test_fast_path_read_error_stops_the_run(target, fast_calls):
    run_plan(make_plan(1, np.arange(8) * MiB, MiB, tag=7), [target], qd=4)
    os.truncate(target.path, 4 * MiB)          # the file shrank: reads past 4 MiB come back short
    r = run_plan(make_plan(0, np.arange(128) * 65536, 65536, tag=7), [target], qd=8)
    assert fast_calls.n >= 1 and r.status == "failed" and r.first_error["index"] == 64


@pytest.mark.parametrize("user_reap", [True, False])
@pytest.mark.parametrize("reap", [1, 3])
def test_reap_batch_bounds_completions_per_reap(target, fast_calls, monkeypatch, reap, user_reap):
    """fio's iodepth_batch_complete_max: each io_getevents of the compiled loop takes at most ``reap`` completions,
    and each reaped batch gets one completion stamp, so no stamp is shared by more than ``reap`` I/Os (until the
    last submission; the drain after it is the driver's)."""
    monkeypatch.setattr(aio.LibaioEngine, "user_reap", user_reap)
    plan = mixed_plan(target, n=512, seed=3)
    r = run_plan(plan, [target], qd=16, reap_batch=reap)
    assert r.status == "complete" and fast_calls.n >= 1 and r.summary()["reap_batch"] == reap
    assert (r.result == plan["length"]).all() and r.latency().count == len(plan)
    if not user_reap:
        assert r.ring_reaped == 0
    before_last = r.complete_ns[r.complete_ns < r.submit_ns.max()]
    assert len(before_last) > 0
    _, per_stamp = np.unique(before_last, return_counts=True)
    assert per_stamp.max() <= reap


def test_reap_batch_zero_takes_all_ready_and_negative_is_refused(target, fast_calls):
    plan = mixed_plan(target, n=256, seed=5)
    r = run_plan(plan, [target], qd=8, reap_batch=0)
    assert r.status == "complete" and r.summary()["reap_batch"] == 8 and (r.result == plan["length"]).all()
    from kvbench.errors import UsageError
    with pytest.raises(UsageError, match="reap batch"):
        run_plan(plan, [target], qd=8, reap_batch=-1)


def test_completions_are_taken_from_the_kernel_ring(target, fast_calls):
    """On x86-64 the compiled loop reads completions already in the AIO ring without io_getevents (fio's
    userspace_reap); the data written that way reads back intact."""
    import platform
    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("the ring is read in user space on x86-64 only")
    lib = aio._load()
    import ctypes
    ctx = ctypes.c_ulong(0)
    assert lib.io_setup(8, ctypes.byref(ctx)) == 0
    try:
        hdr, ev = aio._ring_views(ctx.value)
        assert hdr[4] == aio.AIO_RING_MAGIC and ev.shape[0] == hdr[1] >= 8 and hdr[2] == hdr[3] == 0
        assert aio._ring_views(ctx.value, enabled=False)[1].shape[0] == 0
    finally:
        lib.io_destroy(ctx.value)
    plan = mixed_plan(target, n=min(1024, target.size // (16 << 10)), seed=8)
    r = run_plan(plan, [target], qd=32, reap_batch=1)
    assert r.status == "complete" and fast_calls.n >= 1 and 0 < r.ring_reaped <= len(plan)
    v = read_back(target, plan)
    assert v["checked"] == len(plan) and v["mismatches"] == 0


WARM_THEN_RUN = """
import sys
import numpy as np
from kvbench.engine import make_plan, open_target, run_plan
from kvbench.engine.engines import aio, aio_kernel
aio.LibaioEngine.prepare()
kernels = (aio_kernel.submit_each, aio_kernel.fill_submit, aio_kernel.closed_loop)
warm = [len(k.signatures) for k in kernels]
t = open_target(sys.argv[1], size=8 << 20, write=True)
plan = make_plan(1, np.arange(512, dtype=np.int64) * 16384, 4096)
plan["op"][::3] = 1
r = run_plan(plan, [t], qd=int(sys.argv[2]))
assert r.status == "complete", r.status
print(warm, [len(k.signatures) for k in kernels])
"""


@pytest.mark.parametrize("qd", [1, 8])
def test_prepare_compiles_what_the_timed_run_calls(tmp_path, qd):
    """A fresh interpreter: after ``prepare`` a run compiles no new specialisation of the engine's kernels, so
    none compiles inside the timed window (warming on one-record iocb arrays compiled the contiguous layout and
    the engine's strided field views compiled again on the first submit: a cold 0.6 s run completed 4 I/Os)."""
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", WARM_THEN_RUN, str(tmp_path / "w.dat"), str(qd)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    warm, after = out.stdout.strip().splitlines()[-1].split("] [")
    assert warm + "]" == "[" + after and warm.count("1") == 3
