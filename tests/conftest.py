"""Shared fixtures. ``shared_dir`` points at ../shared when present (optional tests skip without it)."""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

# Bytecode: where the environment says PYTHONDONTWRITEBYTECODE (this VM's does), every session compiled kvbench's
# modules again and pytest rewrote every test module's asserts again: 6-7 s of each run, most of the fast lane's
# collection (tests/README.md, "The fast lane, measured"). The tests keep that bytecode outside the tree instead,
# per machine like the numba kernels: $KVBENCH_PYCACHE_DIR, default ~/.cache/kvbench/pycache (a module's cache is
# checked against its source's mtime and size, as in __pycache__). A PYTHONPYCACHEPREFIX of the user's own is kept.
if sys.dont_write_bytecode and not sys.pycache_prefix:
    sys.pycache_prefix = os.environ.get("KVBENCH_PYCACHE_DIR") or str(Path.home() / ".cache" / "kvbench" / "pycache")
    sys.dont_write_bytecode = False

import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

# Property tests: no deadline (CI is a loaded 2-core VM: time is not a property), derandomized so a CI failure
# reproduces, no example database written into the repository. "mutation" runs fewer examples per mutant.
settings.register_profile("ci", deadline=None, derandomize=True, database=None, max_examples=60)
settings.register_profile("mutation", deadline=None, derandomize=True, database=None, max_examples=30)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture
def shared_dir() -> Path:
    if not (SHARED / "traces").is_dir():
        pytest.skip("../shared is absent (optional tests on the real traces and corpus)")
    return SHARED


@pytest.fixture
def cli():
    """Invoke the kvbench CLI in-process; returns click's Result."""
    from click.testing import CliRunner

    from kvbench.cli import main

    runner = CliRunner()

    def run(*args, input=None):
        return runner.invoke(main, [str(a) for a in args], input=input, catch_exceptions=False)

    return run


@pytest.fixture(autouse=True, scope="session")
def _trace_cache_dir(tmp_path_factory):
    """Trace ingest caches go to a scratch folder for the session, never the user's ~/.cache."""
    import os

    old = os.environ.get("KVBENCH_CACHE_DIR")
    os.environ["KVBENCH_CACHE_DIR"] = str(tmp_path_factory.mktemp("kvbench-cache"))
    yield
    if old is None:
        os.environ.pop("KVBENCH_CACHE_DIR", None)
    else:
        os.environ["KVBENCH_CACHE_DIR"] = old


@pytest.fixture(scope="session")
def ray_cluster():
    """A local Ray cluster of two nodes (one CPU each) on this machine."""
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    c.add_node(num_cpus=1)
    ray.init(address=c.address, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    c.wait_for_nodes()
    yield c.address
    ray.shutdown()
    c.shutdown()


# --- lanes: `pytest -m "not integration and not slow"` is the fast lane (tests/README.md) -------------------------
# A test is marked ``integration`` when it drives the system: it uses a fixture that makes a system resource, or
# its code - the test function, the tests' own fixtures it uses and the module-level helpers they call,
# transitively - names subprocess / sys.executable or a system tool (losetup, mount, fio, Chromium). The scan
# reads code objects (names and string constants), never runs anything; what it cannot see (a kvbench function
# that spawns a process) is marked by hand with @pytest.mark.integration.
INTEGRATION_FIXTURES = {"ray_cluster", "loop_devices", "loopdev", "loops", "throttled", "small_ext4", "ext4_image"}
_SYSTEM_NAMES = {"subprocess", "Popen", "executable", "check_output", "posix_spawn"}
_SYSTEM_STRINGS = ("losetup", "mount", "fio", "chromium", "mkfs", "mkswap", "dmsetup")


def _code_objects(code):
    yield code
    for c in code.co_consts:
        if hasattr(c, "co_code"):
            yield from _code_objects(c)


def _test_module(name: str):
    """The tests' own module ``name`` (``tests.report.helpers``), imported if need be; None if it is not one."""
    import importlib
    import sys

    if name not in sys.modules:
        try:
            importlib.import_module(name)
        except ImportError:
            return None
    return sys.modules[name]


def _drives_the_system(fn, module_globals: dict, seen: set) -> bool:
    code = getattr(getattr(fn, "__wrapped__", fn), "__code__", None)
    if code is None or code in seen:
        return False
    seen.add(code)
    for c in _code_objects(code):
        if _SYSTEM_NAMES & set(c.co_names):
            return True
        if any(isinstance(k, str) and k.split("/")[-1] in _SYSTEM_STRINGS for k in c.co_consts):
            return True
        # module-level helpers of the tests (not kvbench's code): the module's own names, and those a function
        # imports from another test module (``from tests.report.helpers import assert_report_renders``);
        # a helper is read in its own module's names
        # (imported here when no test module collected so far has: a file run alone sees it too)
        mods = [_test_module(n) for n in c.co_names if n.startswith("tests.")]
        spaces = [module_globals] + [vars(m) for m in mods if m is not None]
        for name in c.co_names:
            for space in spaces:
                f = space.get(name)
                if callable(f) and getattr(f, "__module__", "").startswith("tests") and \
                        _drives_the_system(f, getattr(f, "__globals__", space), seen):
                    return True
    return False


# Unit tests too slow for the fast lane (measured > ~1 s each on the loaded 2-core VM, warm kernel cache), by
# function name so that a test keeps its mark when its file moves (one case of a parametrized test by its name with
# the id, ``name[id]``); a new slow test says so itself with @pytest.mark.slow. The figures are the measured calls
# (tests/README.md has the lane's totals).
SLOW_TESTS = {
    "test_plan_admission_follows_the_planned_rate",             # 224 s  (plan CLI with an admission sweep)
    "test_plan_terminal_admission_table_names_each_rows_state",  # 214 s
    "test_report_frontier_has_one_curve_per_policy",            # 115 s
    "test_plan_admission_contract",                             # 29 s
    "test_replay_capacities_mean_what_they_say",                # 12.7 s
    "test_one_node_equals_replay_kv_dry_run",                   # 7.7-80.6 s per case (cluster = replay, 4 cases)
    "test_reference_model_is_converged_and_memoised",           # 61.8 s (an FTL model at 4x the erase blocks)
    "test_sweep_prices_each_configuration_and_picks_the_cheapest_that_meets",   # 32.8 s
    "test_io_verify_failure_fails_the_run_and_stands_out_in_the_report",        # 31.8 s
    "test_cost_router_runs_beside_prefix_on_the_shipped_sample",                # 17.9 s
    "test_compiled_nodes_equal_reference_nodes",                # 1.7-18.3 s per case, 18 cases (randomized sweep)
    "test_plan_fdp_reports_waf_and_dwpd_with_and_without",      # 96.2 s (plan with the FTL model, FDP on and off)
    "test_deepseek_tokenizer_offline_and_compression",          # 14.7 s (loads DeepSeek's tokenizer)
    "test_plan_per_gpu_capacity_cli",                           # 78.8 s (plan CLI: drive classes' FTL reference)
    # 2026-12-05 (issue 34), the fast lane's calls at load average 2-3, warm caches:
    "test_sampled_summary_volumes_and_plan_dwpd_are_full_size",                 # 15.9 s (2 dry runs + 2 plans)
    "test_plan_placement_reports_waf_with_and_without_streams",                 # 8.0 s (plan with --placement)
    "test_a_stalled_probe_is_suspect_rerun_once_and_excluded",                  # 5.2 s (real 1.2 s stalls, x2)
    "test_a_suspect_probe_that_agrees_on_its_rerun_is_used",                    # 3.6 s (a real 1.2 s stall)
    "test_plan_cli_json_contract",                                              # 5.0 s (2 plans, llama on the sample)
    "test_plan_load_tier_adds_the_conservative_bill",                           # 4.7 s (2 plans, llama on the sample)
    "test_a_real_replay_stores_its_spare_slots_on_top_and_a_region_bounds_the_store",  # 4.5 s (2.2 GiB of stores)
    "test_the_plan_is_judged_against_the_drive_under_tests_rating",             # 2.9 s (plan, llama on the sample)
    "test_plan_marks_what_comes_from_the_fitted_trace_and_what_from_the_extension",    # 2.7 s (plan, extended trace)
    "test_plan_sizes_each_class_with_the_waf_of_its_own_store",                 # 2.0 s (plan, each class's store)
    "test_cpu_prefill_tiny_gqa_end_to_end",                     # 1.2-4.3 s (a measured CPU prefill, 3 lengths x 3)
    "test_cpu_prefill_tiny_mla_moe",                            # 3.3-5.2 s (a measured CPU prefill of the MLA/MoE preset)
    "test_compiled_sweep_equals_the_python_loop",               # 3.3 s over 4 cases (randomized sweep)
    "test_large_slot_space_cross_checked",                      # 1.4-1.6 s (600k references, 3 profiles)
    "test_io_poisson_arrivals_are_exponential_not_uniform",     # 1.2 s (two open-loop runs of 0.5 s)
    "test_plan_memory_on_a_key_sampled_stream_follows_the_sample_not_the_horizon",  # 1.2 s (plans of 1 d and 4 d)
    # `trace fit` since its DWPD calibration (f20a7f2): 3-20 s a fit in these tests, at load average 3-5
    "test_fit_on_the_shipped_synthetic_trace",                  # 10.2-19.3 s
    "test_fit_on_the_gmi_trace",                                # 11.5-21.8 s
    "test_short_trace_warns_and_names_the_default",             # 7.4-13.1 s
    "test_trace_fit_prints_the_dwpd_error",                     # 3.2-6.3 s
    "test_cli_prints_the_calibration",                          # 2.1-6.3 s
    "test_calibrated_model_reproduces_dwpd_and_hit_ratio",      # 18.4 s (2 x 64k-request LRU oracle) + 12 s fixture
    "test_calibration_recorded_in_the_model_file",              # the fixture's other user (it would pay the 5.8 s)
    "test_an_output_is_written_through_the_guard[trace fit --output]",         # 7.8 s (a fit of the sample)
    # one case of a parametrized test, by its id (the other cases stay in the fast lane)
    "test_an_output_is_written_through_the_guard[plan --report]",              # 1.5-2.5 s (a plan and its report)
    "test_compiled_id_parse_equals_the_json_parse[1]",          # 1.9-3.7 s (the 3,993-request trace in batches of 1)
    # 2026-12-05 evening, CPU seconds per call (time.process_time, the fast lane at 50.4 CPU s of tests):
    "test_run_replays_the_whole_synthetic_trace_key_sampled_at_the_knee",      # 2.05 CPU s (a whole-trace replay)
    "test_partial_stack_is_scaled_and_says_so",                 # 1.67 CPU s (a measured torch prefill of a stack)
}


@functools.lru_cache(maxsize=1)
def package_asts() -> tuple:
    """(path, ast.Module) of every kvbench source file, parsed once per session for the tests that walk the
    package's code (a parse of the package is ~1 CPU s; two walkers parsed it each)."""
    import ast

    root = REPO / "kvbench"
    return tuple((p, ast.parse(p.read_text())) for p in sorted(root.rglob("*.py")))


def pairwise_lanes(*factors) -> list:
    """The cases of ``itertools.product(*factors)`` as ``pytest.param``s: an all-pairs cover of them (every value
    of every factor beside every value of every other factor, in some case) stays in the fast lane, the rest are
    marked slow. A randomized compiled-vs-reference sweep over policies x options x layouts keeps every
    two-factor interaction in the fast lane (9 of 72 cases for 3 x 2 x 3 x 2 x 2) and the full product in the
    whole suite. Greedy (each next case covers the most pairs not yet covered; the first such in product order):
    deterministic, so the lanes do not change between runs."""
    import itertools

    cases = list(itertools.product(*factors))
    k = len(factors)

    def pairs(case):            # one factor: each value is its own "pair", so that all its cases stay fast
        return {(i, case[i], j, case[j]) for i in range(k) for j in range(i + 1, k)} or {(0, case[0])}

    todo = set().union(*map(pairs, cases)) if cases else set()
    cover = set()
    while todo:
        best = max(range(len(cases)), key=lambda c: (len(pairs(cases[c]) & todo), -c))
        cover.add(best)
        todo -= pairs(cases[best])
    return [pytest.param(*c, marks=() if i in cover else pytest.mark.slow) for i, c in enumerate(cases)]


# What the scan cannot see, by function name as SLOW_TESTS (a file edited by others need not change): tests that run
# the `kvbench run` or `kvbench qualify` job for real, whose steps kvbench.qualify.steps.run_step starts as
# kvbench processes (the tests that replace run_step with a fake stay unit tests).
INTEGRATION_TESTS = {
    "test_hit_ratios_do_not_depend_on_the_replay_duration",                 # 45.6 s (two `kvbench run` jobs)
    "test_a_run_whose_probes_stall_excludes_them_and_says_so",              # 60.2 s (`kvbench run`, stalled probes)
    "test_qualify_folder_and_its_parts",                                    # 4.1 s (`kvbench qualify`)
    "test_qualify_drive_override_and_skip_precondition",                    # 2.6 s (`kvbench qualify`, twice)
    "test_skipped_precondition_still_writes_a_file_before_reading_it",      # 1.6 s (`kvbench qualify`)
}

def pytest_collection_modifyitems(config, items):
    for item in items:
        fn = getattr(item, "function", None)
        if fn is not None and (fn.__name__ in SLOW_TESTS or item.name in SLOW_TESTS):
            item.add_marker(pytest.mark.slow)
        if fn is not None and fn.__name__ in INTEGRATION_TESTS:
            item.add_marker(pytest.mark.integration)
        if fn is None or item.get_closest_marker("integration"):
            continue
        names = set(getattr(item, "fixturenames", ()))
        if names & INTEGRATION_FIXTURES:
            item.add_marker(pytest.mark.integration)
            continue
        seen: set = set()
        funcs = [(fn, fn.__globals__)]
        for name in names:                           # the tests' own fixtures (conftest or the module)
            for fd in item._fixtureinfo.name2fixturedefs.get(name, ()):
                f = fd.func
                if getattr(f, "__module__", "").startswith("tests"):
                    funcs.append((f, getattr(f, "__globals__", {})))
        if any(_drives_the_system(f, g, seen) for f, g in funcs):
            item.add_marker(pytest.mark.integration)


# --- system resources that do not depend on teardown ---------------------------------------------------------------
# Loop devices are attached with LO_FLAGS_AUTOCLEAR and held open by the fixture: the kernel detaches one at its
# last close, so a run killed by SIGTERM, SIGKILL or pytest-timeout's os._exit leaves none behind (the process's
# descriptors close with it). Images and other scratch live under SCRATCH/<pid>; a session removes the folders of
# sessions no longer alive (detaching any loop device still backed there) when it starts, and SIGTERM ends a
# session through KeyboardInterrupt, so fixture teardowns (unmount, swapoff) run.
SCRATCH = Path(os.environ.get("TMPDIR", "/tmp")) / "kvbench-tests"
LOOP_GET_STATUS64, LOOP_SET_STATUS64, LO_FLAGS_AUTOCLEAR = 0x4C05, 0x4C04, 4
_LO_FLAGS_OFFSET = 52          # struct loop_info64: 5 x u64, then lo_number, encrypt type, key size, lo_flags


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _loops_backed_under(folder: Path) -> list[str]:
    out = []
    for lo in Path("/sys/block").glob("loop*"):
        try:
            backing = (lo / "loop" / "backing_file").read_text().strip()
        except OSError:
            continue
        if backing.removesuffix(" (deleted)").startswith(str(folder) + "/"):
            out.append(f"/dev/{lo.name}")
    return out


def _sweep_dead_sessions(root: Path = SCRATCH) -> None:
    import shutil
    import subprocess

    for d in root.glob("*"):
        if not d.name.isdigit() or _pid_alive(int(d.name)):
            continue
        for dev in _loops_backed_under(d):
            subprocess.run(["umount", dev], capture_output=True)
            subprocess.run(["losetup", "-d", dev], capture_output=True)
        shutil.rmtree(d, ignore_errors=True)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_sessionstart(session):
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        _sweep_dead_sessions()
    except OSError:
        pass


@pytest.fixture
def scratch(tmp_path_factory) -> Path:
    """A fresh folder under SCRATCH/<pid> (removed by the next session if this one dies)."""
    import tempfile

    base = SCRATCH / str(os.getpid())
    base.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(dir=base))


def set_autoclear(fd: int) -> None:
    """Mark the loop device open on ``fd`` to detach itself at its last close."""
    import fcntl

    info = bytearray(232)
    fcntl.ioctl(fd, LOOP_GET_STATUS64, info)
    flags = int.from_bytes(info[_LO_FLAGS_OFFSET:_LO_FLAGS_OFFSET + 4], "little") | LO_FLAGS_AUTOCLEAR
    info[_LO_FLAGS_OFFSET:_LO_FLAGS_OFFSET + 4] = flags.to_bytes(4, "little")
    fcntl.ioctl(fd, LOOP_SET_STATUS64, info)


class LoopDevices:
    """``attach(image, *losetup args) -> /dev/loopN`` (autoclear, held open until the test ends) and
    ``image(name, mib) -> Path`` (a sparse file in the test's scratch folder)."""

    def __init__(self, folder: Path):
        self.folder, self.held = folder, []

    def image(self, name: str, mib: int) -> Path:
        p = self.folder / name
        with open(p, "wb") as f:
            f.truncate(mib << 20)
        return p

    def attach(self, image, *args) -> str:
        import subprocess

        try:
            dev = subprocess.run(["losetup", "-f", "--show", *map(str, args), str(image)], check=True,
                                 capture_output=True, text=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError) as e:
            pytest.skip(f"losetup failed here: {getattr(e, 'stderr', e)}")
        fd = os.open(dev, os.O_RDONLY | os.O_CLOEXEC)
        self.held.append((dev, fd))
        set_autoclear(fd)
        return dev

    __call__ = attach

    def close(self) -> None:
        import subprocess

        for dev, fd in reversed(self.held):
            subprocess.run(["umount", dev], capture_output=True)
            subprocess.run(["swapoff", dev], capture_output=True)
            os.close(fd)                                   # the last close: autoclear detaches it
            subprocess.run(["losetup", "-d", dev], capture_output=True)     # (older kernels: by hand)
        self.held.clear()


@pytest.fixture
def loop_devices(scratch):
    """Loop devices for one test (skips without root and losetup); see :class:`LoopDevices`."""
    import shutil

    if os.geteuid() != 0 or shutil.which("losetup") is None:
        pytest.skip("loop devices need root and losetup")
    loops = LoopDevices(scratch)
    try:
        yield loops
    finally:
        loops.close()


# --- traces by shape (builders shared by the tests; the `traces` fixture hands them out) ---------------------------
def block_trace(requests, times=None, gap: float = 1.0):
    """Requests given as lists of block keys (used as given) -> (timestamp_s, offsets int64, keys uint64), one
    request every ``gap`` seconds unless ``times`` says when."""
    import numpy as np
    from types import SimpleNamespace

    offsets = np.cumsum([0] + [len(r) for r in requests]).astype(np.int64)
    keys = np.array([k for r in requests for k in r], dtype=np.uint64)
    times = np.arange(len(requests), dtype=float) * gap if times is None else np.asarray(times, float)
    return SimpleNamespace(timestamp_s=times, offsets=offsets, keys=keys)


def chained_trace(prompts, times=None):
    """Requests given as lists of ids; each block's key names its whole prefix (ids 1, 2 then 1, 3: keys 1, 2
    then 1, 3 -- the second request shares the first block only), numbered from 1 in order of first use."""
    keys, table = [], {}
    reqs = []
    for ids in prompts:
        prefix, row = (), []
        for i in ids:
            prefix = prefix + (i,)
            row.append(table.setdefault(prefix, len(table) + 1))
        reqs.append(row)
    return block_trace(reqs, times)


def make_trace(times, blocks, tokens=None, block_tokens: int = 512):
    """A kvbench Trace (what the readers return) of requests given as lists of block keys at ``times`` (s; None:
    one a second from 0): input tokens ``block_tokens`` per block unless ``tokens`` says, no output tokens."""
    import numpy as np

    from kvbench.stream.traces import Trace

    if times is None:
        times = np.arange(len(blocks), dtype=np.float64)
    offs = np.zeros(len(blocks) + 1, dtype=np.int64)
    offs[1:] = np.cumsum([len(b) for b in blocks])
    toks = tokens if tokens is not None else [block_tokens * len(b) for b in blocks]
    return Trace(timestamp_s=np.asarray(times, dtype=np.float64), input_tokens=np.asarray(toks, dtype=np.int64),
                 output_tokens=np.zeros(len(blocks), dtype=np.int64), offsets=offs,
                 keys=np.array([k for b in blocks for k in b], dtype=np.uint64), block_tokens=block_tokens,
                 fmt="test", path="hand")


def one_block_requests(keys, gap: float = 1.0):
    """One single-block request per key, ``gap`` seconds apart."""
    return block_trace([[k] for k in keys], gap=gap)


def ttl_boundary_trace(ttl_s: float, key: int = 1):
    """A block written at 0, reread after exactly ``ttl_s`` idle (still held), then after ``ttl_s`` + 0.5 s idle
    (expired): requests [key] at 0, ttl, 2 ttl + 0.5 (and [key + 1] at 0 so the tier is not empty)."""
    return block_trace([[key, key + 1], [key], [key]], times=[0.0, ttl_s, 2 * ttl_s + 0.5])


def multi_tenant_trace(tenants: int, requests_each: int, blocks: int = 4, shared_prefix: int = 1, gap: float = 1.0):
    """``tenants`` tenants taking turns, each re-sending its own ``blocks``-block prompt; the first
    ``shared_prefix`` blocks are common to all (a shared system prompt). Keys are prefix-chained."""
    prompts = [list(range(1, shared_prefix + 1)) + [1000 * (t + 1) + b for b in range(blocks - shared_prefix)]
               for _ in range(requests_each) for t in range(tenants)]
    return chained_trace(prompts, [i * gap for i in range(len(prompts))])


def write_mooncake(path, requests, block_tokens: int = 512) -> Path:
    """Mooncake JSON lines from (timestamp_ms, hash_ids[, input tokens]); input tokens default to whole blocks."""
    import json

    path = Path(path)
    with open(path, "w") as f:
        for r in requests:
            ts, ids = r[0], list(r[1])
            tokens = r[2] if len(r) > 2 else block_tokens * len(ids)
            f.write(json.dumps({"timestamp": ts, "input_length": tokens, "output_length": 1, "hash_ids": ids}) + "\n")
    return path


# The TTL boundary as a Mooncake file, for every path that applies a retention time (the exact curve, SHARDS, the
# policies, the tier simulation, `kvbench mrc --ttl`, `replay kv --dry-run`): a reuse gap exactly at the TTL is a
# hit, one just over it a miss (alive while ``now - last <= ttl``, DESIGN.md). TTL 8 s; times exactly representable
# in binary floating point:
#     t=0     blocks [1, 2]   cold                                   0 hits
#     t=8     blocks [1, 2]   both idle exactly 8 s -> alive         2 hits
#     t=16.5  block  [1]      idle 8.5 s -> expired                  0 hits
#     t=24.5  blocks [1, 2]   block 1 idle exactly 8 s (hit), block 2 idle 16.5 s (miss)  1 hit
# 7 block references, 3 hits: hit ratio 3/7 at any capacity >= 2 blocks (5/7 without retention).
TTL_S = 8.0
TTL_REQUESTS = [(0, [1, 2]), (8000, [1, 2]), (16500, [1]), (24500, [1, 2])]
TTL_HITS, TTL_REFS, TTL_HITS_NO_TTL = 3, 7, 5


@pytest.fixture
def ttl_trace_file(tmp_path) -> Path:
    """The TTL boundary trace above as a Mooncake file (512-token blocks)."""
    return write_mooncake(tmp_path / "ttl.jsonl", TTL_REQUESTS)


@pytest.fixture
def traces():
    """The trace builders above: traces.block(...), .chained(...), .one_block(...), .ttl_boundary(...),
    .multi_tenant(...), .mooncake(path, requests), .make(times, blocks) (a kvbench Trace)."""
    from types import SimpleNamespace

    return SimpleNamespace(block=block_trace, chained=chained_trace, one_block=one_block_requests,
                           ttl_boundary=ttl_boundary_trace, multi_tenant=multi_tenant_trace, mooncake=write_mooncake,
                           make=make_trace)


@pytest.fixture
def store_dir(tmp_path):
    """A folder on a device-backed filesystem for O_DIRECT stores (tmp_path unless it is tmpfs)."""
    import shutil
    import subprocess

    d = tmp_path
    if subprocess.run(["stat", "-f", "-c", "%T", str(d)], capture_output=True, text=True).stdout.strip() == "tmpfs":
        d = Path("/var/tmp") / f"kvbench-test-{os.getpid()}"
        d.mkdir(exist_ok=True)
        yield d
        shutil.rmtree(d, ignore_errors=True)
    else:
        yield d


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory) -> Path:
    """A dry-run replay's run folder (tiny-gqa, L2 + an L3 file store, 40 requests over 4 shared documents), made
    once per session: for tests that read a run (check --run, report, results)."""
    import json

    from click.testing import CliRunner

    from kvbench.cli import main

    d = tmp_path_factory.mktemp("run")
    rows, nxt = [], 1000
    for t in range(40):
        ids = list(range((t % 4) * 100, (t % 4) * 100 + 1 + t % 12)) + [nxt, nxt + 1]
        nxt += 2
        rows.append((t * 10, ids))
    tr = write_mooncake(d / "t.jsonl", rows)
    r = CliRunner().invoke(main, ["replay", "kv", str(tr), "--model", "tiny-gqa", "--l2", "1MiB", "--l3",
                                  str(d / "l3.store"), "--l3-capacity", "64MiB", "--dry-run", "--results",
                                  str(d / "results"), "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return Path(json.loads(r.output[r.output.index("{"):])["run_dir"])
