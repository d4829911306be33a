"""Mutation testing of kvbench's core: plant one small bug at a time and check that the tests catch it.

    .venv/bin/python benchmarks/mutation.py                       # every module in MODULES, one worker
    .venv/bin/python benchmarks/mutation.py units histogram       # some modules (by short name)
    .venv/bin/python benchmarks/mutation.py curves.kernels --every 3 # a bounded sample: every 3rd mutant
    .venv/bin/python benchmarks/mutation.py curves.kernels --every 3 --offset 1   # another sample of a third
    .venv/bin/python benchmarks/mutation.py tiers_kernel --changes '^(<|<=|>|>=|==|!=|and|or|not x) ' --every 10
    .venv/bin/python benchmarks/mutation.py ftl --list            # the mutants, without running anything

Prints, per module, the mutants, killed (a test failed), timed out (a hang: counted as killed, the per-test
timeout turns a hang into a failure), survived, equivalent (listed in EQUIVALENT with the reason), and the kill
rate over non-equivalent mutants; writes ``results/mutation/<module>.json`` with every survivor (line, change,
source line). Exit 1 when a module is below --min-rate.

Why not mutmut or cosmic-ray. mutmut 3 rewrites every function into a trampoline and leaves decorated
functions alone, so the numba kernels (curves.kernels, ftl) would never be mutated - they are where the worst bugs
hid (two made the FTL hang). cosmic-ray mutates files on disk, which works with numba, but plants every
operator replacement at every site (704 mutants for the 121 lines of units.py, most of them redundant:
``a + b`` -> ``a ** b``, ``a >> b``, ...), too many to run per module in minutes on a 2-core machine. This
script plants one natural mutant per site (mutmut's classic table: ``+``/``-``, ``*``/``/``, ``<``/``<=``,
``==``/``!=``, ``and``/``or``, ``min``/``max``, ``n``/``n+1``, ``True``/``False``, dropped ``not``), runs
only the module's own tests in a private copy of the repository (the worktree is never touched), and gives
numba's cache a fresh source stamp per mutant so a compiled kernel is rebuilt from the mutated source.
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# module short name -> (source file, the tests that exercise it), fastest first (-x stops at the first failure).
# Keep the selection to the module's own tests so a module runs in minutes; a mutant that only a far-away test
# could catch is a missing unit test.
MODULES: dict[str, tuple[str, list[str]]] = {
    "units": ("kvbench/units.py", ["tests/test_units.py"]),
    "fields": ("kvbench/spec/fields.py", ["tests/spec/test_fields.py"]),
    "histogram": ("kvbench/metrics/histogram.py", ["tests/metrics/test_histogram.py"]),
    "curves.profile": ("kvbench/analysis/curves/profile.py",
               ["tests/analysis/curves/test_profile.py", "tests/analysis/curves/test_protocol.py",
                "tests/sim/test_tiers.py::test_single_lru_tier_equals_the_exact_curve",
                "tests/sim/test_policies.py::test_every_policy_keeps_a_block_idle_exactly_the_ttl", "tests/cli/test_mrc.py",
                "tests/analysis/curves/test_stack.py"]),
    "curves.kernels": ("kvbench/analysis/curves/kernels.py",
                    ["tests/analysis/curves/test_profile.py", "tests/analysis/curves/test_stack.py",
                     "tests/sim/test_tiers.py::test_tier_simulation_accounting",
                     "tests/sim/test_tiers.py::test_single_lru_tier_equals_the_exact_curve",
                     "tests/sim/test_tiers.py::test_tier_simulation_keeps_a_block_idle_exactly_the_ttl",
                     "tests/sim/test_policies.py::test_every_policy_keeps_a_block_idle_exactly_the_ttl",
                     "tests/cli/test_mrc.py", "tests/analysis/curves/test_residence.py",
                     "tests/sim/test_rowcache.py::test_stack_distances_hand_computed"]),
    # the streaming exact LRU stack (owns lru_feed's arrays, grows them when the kernel asks)
    "curves.stack": ("kvbench/analysis/curves/stack.py",
                     ["tests/analysis/curves/test_stack.py", "tests/analysis/curves/test_profile.py",
                      "tests/sim/test_policies.py::test_every_policy_keeps_a_block_idle_exactly_the_ttl"]),
    # the miniature replay's key sample rate (the store at the exact curve's knee)
    "curves.miniature": ("kvbench/analysis/curves/miniature.py",
                         ["tests/analysis/curves/test_miniature.py",
                          "tests/stream/test_sampling.py::test_rate_lands_the_store_at_the_knee_of_the_exact_curve"]),
    "ftl": ("kvbench/analysis/ftl.py", ["tests/analysis/test_ftl.py"]),
    # the FTL's compiled kernel: numba recompiles it per mutant, run a sample (--changes / --every)
    "ftl_kernel": ("kvbench/analysis/ftl_kernel.py", ["tests/analysis/test_ftl.py"]),
    "trace_waf": ("kvbench/analysis/trace_waf.py", ["tests/analysis/test_trace_waf.py"]),
    "policies": ("kvbench/sim/policies.py",
                 ["tests/sim/test_policies.py", "tests/sim/test_tiers.py::test_tier_simulation_keeps_a_block_idle_exactly_the_ttl",
                  "tests/cli/test_mrc.py"]),
    "safety": ("kvbench/engine/safety.py", ["tests/engine/test_safety.py", "tests/engine/test_targets.py"]),
    # the inequality: its own unit tests (what only tests/cli/test_check.py caught has a unit test here now)
    "recompute": ("kvbench/analysis/recompute.py", ["tests/analysis/test_recompute.py"]),
    # the steady-state answers (issue 12): their fast unit tests, not the plan CLI's
    "curves.residence": ("kvbench/analysis/curves/residence.py",
                  ["tests/analysis/curves/test_residence.py", "tests/analysis/curves/test_protocol.py",
                   "tests/analysis/test_plan.py::test_one_new_block_per_second_is_written_at_one_block_per_second",
                   "tests/analysis/test_plan.py::test_lru_thrash_and_a_tier_that_never_fills",
                   "tests/analysis/test_plan.py::test_steady_curve_equals_a_brute_force_lru_at_every_capacity",
                   "tests/analysis/test_plan.py::test_retention_is_the_smallest_tier_whose_residence_reaches_it",
                   "tests/analysis/test_plan.py::test_the_bill_counts_only_hits_whose_load_beats_recompute",
                   "tests/analysis/test_plan.py::test_endurance_capacity_from_residence_and_the_waf_reaching_lifetime_and_cost",
                   "tests/analysis/test_plan.py::test_deployment_writes_are_the_steady_write_rate_of_its_store"]),
    # the plan's steady answer at one capacity (run with --lines: the module is the whole plan)
    "plan": ("kvbench/analysis/plan.py",
             ["tests/analysis/test_plan.py", "tests/analysis/curves/test_residence.py", "tests/cli/test_plan.py",
              "tests/stream/test_stationarity.py"]),
    # deployment scale: --deployment's fields, the rate / hit-ratio fixed point, the rating (its own unit tests)
    "deployment": ("kvbench/analysis/deployment.py", ["tests/analysis/test_deployment.py"]),
    "endurance": ("kvbench/analysis/endurance.py",
                  ["tests/analysis/test_endurance.py",
                   "tests/analysis/test_plan.py::test_endurance_capacity_from_residence_and_the_waf_reaching_lifetime_and_cost",
                   "tests/analysis/test_plan.py::test_hit_bound_tier_waf_changes_lifetime_and_cost_not_host_dwpd"]),
    # the load paths (L2 -> GPU link or measured copy, guarded probes): the unit tests (the probe-stall and run
    # tests are integration, left out by LANES)
    "loadpath": ("kvbench/analysis/loadpath.py", ["tests/analysis/test_loadpath.py"]),
    # the buyer's one answer: figures, verdicts and the statements that name them, computed by hand (the report
    # test, which renders in Chromium, is integration: LANES)
    "answer": ("kvbench/analysis/answer.py", ["tests/analysis/test_answer.py"]),
    "curves.capacity": ("kvbench/analysis/curves/capacity.py",
                        ["tests/analysis/curves/test_capacity.py", "tests/analysis/curves/test_protocol.py"]),
    # the hit-ratio curve protocol and its step function
    "curves.protocol": ("kvbench/analysis/curves/protocol.py",
                        ["tests/analysis/curves/test_protocol.py", "tests/analysis/curves/test_capacity.py"]),
    # the admission trade-off's sweep (compiled) and its Python oracle
    "admission": ("kvbench/analysis/admission.py", ["tests/analysis/test_admission.py"]),
    # one signal model: a stop that a compiled kernel wrapped (stop_from)
    "procs": ("kvbench/procs.py", ["tests/test_procs.py"]),
    # a cluster's per-node wear and its summary (hit ratios, TTFT, the warm-up's window)
    "cluster.wear": ("kvbench/cluster/wear.py", ["tests/cluster/test_wear.py", "tests/cluster/test_cluster.py"]),
    "cluster.sim": ("kvbench/cluster/sim.py", ["tests/cluster/test_wear.py", "tests/cluster/test_cluster.py",
                                               "tests/cluster/test_nodes.py"]),
    "cost": ("kvbench/analysis/cost.py", ["tests/analysis/test_cost.py"]),
    # drive classes (issue 28): OP from raw NAND, the JESD219A reference WAF, the P/E check; FDP; nvme-cli readers
    "drive_class": ("kvbench/analysis/drive_class.py", ["tests/analysis/test_drive_class.py"]),
    "fdp": ("kvbench/analysis/fdp.py", ["tests/analysis/test_fdp.py"]),
    # write amplification's three layers, the fixed-capacity answer, stream placement (issue 34 part 4)
    "waf": ("kvbench/analysis/waf.py", ["tests/analysis/test_waf.py"]),
    "fixed_capacity": ("kvbench/analysis/fixed_capacity.py", ["tests/analysis/test_fixed_capacity.py"]),
    "placement": ("kvbench/analysis/placement.py", ["tests/analysis/test_placement.py"]),
    "smart": ("kvbench/metrics/smart.py", ["tests/metrics/test_smart.py"]),
    # the tier simulation: the hand-built traces first, then the compiled kernel held to the Python reference
    # on randomized traces (which also catches a mutant of the reference), then the property tests
    "tiers": ("kvbench/sim/tiers.py",
              ["tests/sim/test_tiers.py", "tests/sim/test_tiers_kernel.py",
               "tests/cluster/test_nodes.py::test_cached_prefix_is_contains_without_recency"]),
    # the tier simulation's Python admission policies, slot/log stores and the row-cache (Engram) kernels
    "sim.admission": ("kvbench/sim/admission.py", ["tests/sim/test_admission.py"]),
    "blockstore": ("kvbench/sim/blockstore.py", ["tests/sim/test_blockstore.py"]),
    "rowcache": ("kvbench/sim/rowcache.py", ["tests/sim/test_rowcache.py"]),
    # the cluster's shared L4 pool compiled: its members held to reference nodes sharing one L4 object
    "shared_pool": ("kvbench/sim/shared_pool.py", ["tests/cluster/test_nodes.py"]),
    # numba recompiles the whole kernel per mutant (about a minute on a loaded 2-core machine): run with --every
    "tiers_kernel": ("kvbench/sim/tiers_kernel.py",
                     ["tests/sim/test_tiers_kernel.py", "tests/sim/test_tiers.py",
                      "tests/cluster/test_nodes.py::test_cached_prefix_is_contains_without_recency"]),
    "models": ("kvbench/spec/models.py", ["tests/spec/test_models.py"]),
    # finding, reading and writing TOML presets
    "presets": ("kvbench/spec/presets.py", ["tests/spec/test_presets.py"]),
    # the SNIA PTS rule: the hand-made boundary series first
    "steady_state": ("kvbench/analysis/steady_state.py",
                     ["tests/analysis/test_steady_state.py"]),
    # qualification's judge: outcomes, samples, verdict (its unit tests, not the qualification runs)
    "criteria": ("kvbench/qualify/criteria.py", ["tests/qualify/test_criteria.py"]),
    # the workload model's block keys (compiled) against their array form; the engine choice by declared kinds
    # the cluster's routers (issue 34 part 4): each router's unit tests on a stub view (tests/cluster/routers/)
    **{name: (f"kvbench/cluster/routers/{mod}.py", ["tests/cluster/routers"])
       for name, mod in (("routers", "__init__"), ("router_cost", "cost"), ("router_prefix", "prefix"),
                         ("router_session", "session"), ("router_random", "random_router"),
                         ("router_round_robin", "round_robin"), ("router_least_loaded", "least_loaded"))},
    # the workload model's fit and generator (issue 34 part 4): their test files' fast lane (see LANES)
    "fit": ("kvbench/stream/fit.py",
            ["tests/stream/test_fit.py", "tests/stream/test_returns.py", "tests/stream/test_workload.py",
             "tests/stream/test_stationarity.py::test_trace_fit_names_a_trace_that_is_not_stationary_and_not_a_stationary_one"]),
    "stationarity": ("kvbench/stream/stationarity.py", ["tests/stream/test_stationarity.py"]),
    "synth": ("kvbench/stream/synth.py",
              ["tests/stream/test_synth.py", "tests/stream/test_generators.py", "tests/stream/test_workload.py"]),
    "synth_kernel": ("kvbench/stream/synth_kernel.py",
                     ["tests/stream/test_generators.py::test_compiled_block_keys_equal_the_array_form"]),
    "engines": ("kvbench/engine/engines/__init__.py",
                ["tests/engine/test_engine.py::test_engines_are_chosen_by_what_they_declare",
                 "tests/engine/test_engine.py::test_engine_class_names_the_missing_engine_and_falls_back_from_libaio",
                 "tests/engine/test_engine.py::test_a_memory_target_never_goes_to_a_diskless_engine_that_does_not_run_on_it"]),
    # the shared terminal table formatter (every CLI column table): its own tests, the package walk among them
    "report.text": ("kvbench/report/text.py", ["tests/report/test_text.py"]),
    # run files at trace scale: the compiled CSV writer (pandas is its oracle) and the fio iolog on top of it
    "csvout": ("kvbench/metrics/csvout.py", ["tests/metrics/test_csvout.py"]),
    "iolog": ("kvbench/engine/iolog.py",
              ["tests/metrics/test_csvout.py", "tests/cli/test_io.py::test_offsets_depend_only_on_seed_and_iolog_replays_in_fio",
               "tests/cli/test_io.py::test_refusals_leave_nothing_behind"]),
    # key samples: compaction of long sampled streams and their whole-stream totals
    "sampling": ("kvbench/stream/sampling.py",
                 [
                  "tests/stream/test_sampling.py::test_the_sample_threshold_is_rate_times_the_hash_space",
                  "tests/stream/test_sampling.py::test_key_sample_rate_is_known_only_for_a_stream_that_states_it",
                  "tests/stream/test_sampling.py::test_salted_shards_of_a_plain_trace_streams_as_it_reads_whole",
                  "tests/stream/test_sampling.py::test_compact_by_hand",
                  "tests/stream/test_sampling.py::test_compaction_keeps_the_sampled_requests_batch_ends_and_the_whole_streams_totals",
                  "tests/stream/test_sampling.py::test_compaction_leaves_an_unsampled_trace_whole",
                  "tests/stream/test_sampling.py::test_compaction_refuses_a_trace_that_is_not_key_sampled",
                  "tests/stream/test_sampling.py::test_sample_is_the_shards_hash_sample_and_keeps_every_request",
                  "tests/stream/test_sampling.py::test_bad_rates_are_usage_errors",
                  "tests/stream/test_sampling.py::test_lru_residency_along_a_sampled_chain_is_a_prefix",
                  "tests/stream/test_sampling.py::test_a_key_sampled_streams_curve_is_the_shards_estimate_of_the_whole_stream",
                  "tests/stream/test_sampling.py::test_a_plan_of_the_compacted_stream_equals_the_plan_of_the_whole_one",
                  "tests/stream/test_sampling.py::test_replay_of_a_key_sampled_stream_is_a_miniature_with_full_size_estimates"]),
}

# modules whose test files hold slow or integration tests beside their unit tests: the mutants run against the
# fast lane only (pytest -m), so that a module takes minutes
LANES: dict[str, str] = {"fit": "not integration and not slow", "synth": "not integration and not slow",
                         "loadpath": "not integration and not slow", "answer": "not integration and not slow",
                         "placement": "not integration and not slow",
                         # plan CLI runs with an admission sweep take minutes a mutant (issue 34 part 4)
                         "plan": "not integration and not slow", "admission": "not integration and not slow",
                         # the node-vs-reference sweeps of test_nodes.py are slow; its fast lane has the pool's own
                         "shared_pool": "not integration and not slow"}

# Mutants that cannot change behaviour, keyed by module, then (stripped source line, change, occurrence) -> reason:
# the occurrence is which site of that change on that line, counted from 0 in the order --list numbers them
# (#N), so an entry names one site and a second site of the same operator on the line is judged on its own;
# _each gives one reason to several named sites. (line, "*") covers every mutant of a line (a prefetch hint, a
# buffer's size). An entry whose line or site no longer exists is stale: dropped, and listed by every mode.
# A survivor is listed here only with the argument why no input can tell it apart from the original.


def _each(key: tuple[str, str], occurrences, reason: str) -> dict:
    """One reason for several sites of one change on one line: {(line, change, k): reason for k in occurrences}."""
    return {(*key, int(k)): reason for k in occurrences}


EQUIVALENT: dict[str, dict[tuple, str]] = {
    "shared_pool": {
        ("pec = max(256, max(0, int(max_request_blocks or 0)) + 16)", "0 -> 1", 0):
            "max(0, m) and max(1, m) differ only for m <= 0, where both + 16 stay below the 256 floor",
        ('size["TTL"] = 4', "4 -> 5", 0):
            "the per-tier TTL region is read at tier indices < T <= 4 (more tiers are refused): a fifth word is "
            "never read",
        ("evcap = max(1024, 2 * m0._ev_need(most))", "2 -> 3", 0):
            "more event rows than the longest request can write (the `max -> min` variant, fewer, is killed)",
        ("xlen = int(rows[:, K.NN].max()) + pec + 16", "16 -> 17", 0):
            "a longer scratch buffer than the kernel's bound (the largest pool plus a request): the tail is unused",
        **_each(("cuts = [j + 1 for j in range(len(keep) - 1) if keep[j + 1] != keep[j] + 1]", "1 -> 2"), (1, 3),
            "the two variants that survive: `len(keep) - 2` skips the last pair of kept fields, EN..EFREED's "
            "(92, 93), which is consecutive, so no cut is missed; `keep[j] + 2` cuts between every two fields, so "
            "the runs are one field each: the same fields copied (the `j + 2` and `keep[j + 2]` variants are killed)"),
        ("self._pool_runs = [(self.shared * K.NFIELDS + r[0], self.shared * K.NFIELDS + r[-1] + 1)", "0 -> 1", 0):
            "r[0] -> r[1]: each run's first field is not copied: POL and DRB are layout constants, the same in every "
            "member's copy of the pool's row, and FK opens _cascade's insert frame, written before it is read in "
            "each request (a pool never suspends mid-request: _build and _grow_events raise)",
        ("if self.shared in tiers:", "in -> not in", 0):
            "both paths give every member's answer: a lookup (_find, _contains) reads only the pool row's layout "
            "fields (HB, HM, NB, HASTTL), the same in every member's copy, and the shared regions; only the "
            "per-member path also activates the row, which no lookup needs",
        ("if self.spec.tiers[self.pool.shared].name in names:", "in -> not in", 0):
            "activating the pool's row before a lookup changes no answer (a lookup reads only the row's layout "
            "fields, the same in every member's copy; see `self.shared in tiers`), and activating it when the "
            "pool is not asked changes nothing either",
    },
    "rowcache": {
        ("return engine(ids, int(n_ids if n_ids is not None else ids.max() + 1))", "1 -> 2", 0):
            "n_ids only sizes the engine's last-reference table (ids < n_ids): one id more is never referenced",
        ("count[x] += 1", "1 -> 2", 0):
            "counts are only compared with each other (heap order, ties by time): 1 + 2h orders rows as 1 + h does",
        **_each(("if d < size and (heap_c[d] < heap_c[c] or (heap_c[d] == heap_c[c] and heap_t[d] < heap_t[c])):",
         "< -> <="), (0, 2), "d = size reads the entry just popped's stale copy, which equals the element sifting down (at "
                     "j): chosen, it is not below j's and the sift stops as it would; the time's < -> <=: an "
                     "entry's time is its access's, unique, so d and c never tie"),
        ("if heap_c[j] < heap_c[p] or (heap_c[j] == heap_c[p] and heap_t[j] < heap_t[p]):", "< -> <=", 1):
            "the time's comparison (the count's < -> <= is killed): every entry's time is its own access's, so two "
            "entries never tie on it",
    },
    "blockstore": {
        ("if qd <= 0:", "<= -> <", 0):
            "qd = 0 then reaches int(min(qd, ...)) = min(0, a count >= 1) = 0, what the early return gives",
    },
    "criteria": {
        ('if res is not None and isinstance(res, dict):', 'and -> or', 0):
            'a result that is not a table is refused by the next branch (not a result table) whatever dig read',
    },
    "router_session": {
        ("while parent_of.get(c, -1) >= 0 and parent_of[c] in parent_of and seen < len(parent_of):", "1 -> 2", 0):
            "get's default is never read: c starts as a chat id of the trace and moves only to a parent that is one "
            "(`parent_of[c] in parent_of`), so c is always a key of parent_of",
    },
    "fit": {
        ("ret_p = float(back.size / visits) if visits else 0.0", "0.0 -> 1.0", 0):
            "visits = sessions + returns, and a trace fit_model accepts (>= 2 requests) has at least one session",
        ("arrivals = replace(arrivals, rate=n / max(1e-9, float(window[1] - window[0])))", "- -> +", 0):
            "window[0] is the operational time of 0, which is cum[0] = 0 at grid[0] = 0",
        ("cum = np.concatenate([[0.0], np.cumsum((m[1:] + m[:-1]) * 30.0)])", "0.0 -> 1.0", 0):
            "operational times are used only through differences (gaps between starts, the window's length): a "
            "constant offset cancels",
        ("day = ((trace.t0 + starts) // 86_400 + 3) % 7", "// -> /", 0):
            "a fractional day number x keeps its integer part through + 3 and % 7 (floor((x + 3) % 7) = "
            "(floor(x) + 3) % 7 for x >= 0), and day < 5, day >= 5 compare only that integer part",
        # steady_curve's block size scales only its byte figures (dwpd, bytes per second): W in blocks per second,
        # turned_over, distinct and the stack distances, all that these callers read, do not depend on it
        ("ao, ag = (steady_curve(t, block_bytes=1).at(caps) for t in (original, generated))", "1 -> 2", 0):
            "dwpd_error reads turned_over and write_blocks_per_s (blocks), which the block size does not change",
        ("a = steady_curve(g, block_bytes=1).at(common_caps)", "1 -> 2", 0):
            "goodness reads turned_over and write_blocks_per_s (blocks), which the block size does not change",
        ("so = steady_curve(trace, block_bytes=1)", "1 -> 2", 0):
            "goodness_over_seeds and _Scorer read distinct, the stack distances, turned_over and "
            "write_blocks_per_s (blocks), which the block size does not change",
        ("sg = steady_curve(g, block_bytes=1)", "1 -> 2", 0):
            "_Scorer reads the stack distances, distinct, turned_over and write_blocks_per_s (blocks), which the "
            "block size does not change",
        # turned_over is filled & ..., and filled is W finite and > 0: the W > 0 term is implied
        ('ok = ao["turned_over"] & (ao["write_blocks_per_s"] > 0)', "> -> >=", 0):
            "turned_over implies W > 0 (SteadyCurve.at: turned_over = filled & ..., filled = W > 0)",
        ('ok = ao["turned_over"] & ag["turned_over"] & (ao["write_blocks_per_s"] > 0)', "> -> >=", 0):
            "turned_over implies W > 0 (SteadyCurve.at: turned_over = filled & ..., filled = W > 0)",
        ('ok = self.orig["turned_over"] & (self.orig["write_blocks_per_s"] > 0)', "> -> >=", 0):
            "turned_over implies W > 0 (SteadyCurve.at: turned_over = filled & ..., filled = W > 0)",
        ("start_weekday = int(((trace.t0 // 86_400) + 3) % 7) if absolute else a.start_weekday   # 1970-01-01: Thursday",
         "// -> /", 0):
            "int() truncates the non-negative (t0 / 86400 + 3) % 7 to (floor(t0 / 86400) + 3) % 7: the same weekday",
        ("arrivals = Arrivals(rate=1.0, burstiness=burst, diurnal_amplitude=amp, peak_hour=peak,", "1.0 -> 2.0", 0):
            "a placeholder: the window's operational time reads only the cycles (intensity has no rate), and the "
            "next line replaces the rate",
        ("return bool(cont.mean() > 0 and cont[:k].mean() < 0.5 * cont.mean())", "> -> >=", 0):
            "a trace without continuations has cont[:k].mean() = 0, which is not < 0.5 x 0: False either way",
        # |r - 1| == 0.01 exactly never happens: for r in [0.5, 2], r - 1 is exact and a multiple of 2^-53, while
        # the double 0.01 is 5764607523034235 x 2^-59 (odd mantissa); outside [0.5, 2], |r - 1| >= 0.5
        ("if bad <= CALIBRATION_TOL:", "<= -> <", 0):
            "bad = max |r - 1| is never exactly the double 0.01 (see the comment above)",
        ("if abs(r_n - 1.0) > CALIBRATION_TOL:", "> -> >=", 0):
            "|r_n - 1| is never exactly the double 0.01 (see the comment above)",
        ("if lengths and abs(r_b - 1.0) > CALIBRATION_TOL:", "> -> >=", 0):
            "|r_b - 1| is never exactly the double 0.01 (see the comment above)",
        ("rate_br[0 if r_n < 1.0 else 1] = rf", "< -> <=", 0):
            "runs only when |r_n - 1| > 0.01, so r_n is never 1 there",
        ("len_br[0 if r_b < 1.0 else 1] = lf", "< -> <=", 0):
            "runs only when |r_b - 1| > 0.01, so r_b is never 1 there",
        **_each(("t1, t2 = (bounds[:, 0] - x) / d, (bounds[:, 1] - x) / d", "/ -> *"), (0, 1),
            "the directions' components are 0 or 1: / 1 = * 1, and a 0 component's t (inf, nan or 0) is dropped "
            "by `live`"),
        ('return np.searchsorted(d, caps, side="right") / max(1, curve.distances.size)', "1 -> 2", 0):
            "a trace's first reference is cold: with one reference the numerator is 0 whatever the divisor, and "
            "from two on max(1, n) = max(2, n)",
        ("bpr_o = trace.n_blocks / max(1, n_o)", "*"):
            "bpr_o enters only as the secant's target and its history bpr = bpr_o x r_b: a positive factor on it "
            "cancels in (bpr_o - b2) (l2 - l1) / (b2 - b1) and leaves hist[-1] != hist[-2] as it was (0 stays 0)",
        **_each(("REUSE_DIRECTIONS = ((1, 1), (1, 0), (0, 1))   # in log factors: turns and think together "
         "(a longer session), each", "1 -> 2"), (2, 3),
            "a killed (1, 1) aside, these scale the single-axis directions (2, 0), (0, 2): the line search runs on "
            "u in [a, b] / 2 and moves x by u d, so every golden point x + u d is the same double (halving and "
            "doubling are exact)"),
        ('ok_o = ao["turned_over"] & (ao["write_blocks_per_s"] > 0)', "> -> >=", 0):
            "turned_over implies W > 0 (SteadyCurve.at: turned_over = filled & ..., filled = W > 0)",
        ("document_probability = float(min(1.0, (doc_counts.sum() + docs.size) / max(1, n_first)))", "1 -> 2", 0):
            "a document is a prefix two first requests share: n_first >= 2 wherever this runs, max(1, n) = max(2, n)",
        # _fit_prompts sets prompt_of (a rank >= 0) on exactly the rows it gives system_len = (depth + 1/2) x block
        # tokens > 0 (the sharers fs and the founders lead): prompt_of < 0 is system_len == 0 row by row
        ("bare = first & (prompt_of < 0) & (system_len == 0)", "0 -> 1", 0):
            "prompt_of < 1 adds only prompt 0's rows, whose system_len > 0 fails the third term (see above)",
        ("bare = first & (prompt_of < 0) & (system_len == 0)", "< -> <=", 0):
            "prompt_of <= 0 adds only prompt 0's rows, whose system_len > 0 fails the third term (see above)",
        ("system_probability = float(min(1.0, counts.sum() / max(1, n_first)))", "1 -> 2", 0):
            "a system prompt is a first block two first requests share: n_first >= 2, max(1, n) = max(2, n)",
        ("return float(x.mean()), float(np.log(x).std()) if x.size > 1 else 0.0", "> -> >=", 0):
            "one sample: the std of one log is 0.0, the else value (no samples returned earlier)",
        ("return float(np.exp(lx.mean())), float(lx.std()) if x.size > 1 else 0.0", "> -> >=", 0):
            "one sample: the std of one log is 0.0, the else value; none: the else value either way",
        ("hours = (start_hour + starts / 3600.0) % 24.0", "24.0 -> 48.0", 0):
            "the hours are binned as int(hours) % 24, and floor(x % 48) % 24 = floor(x) % 24 for x >= 0 (24 divides 48)",
        ("grid = (start_hour + np.arange(0.0, span, 60.0) / 3600.0) % 24.0", "24.0 -> 48.0", 0):
            "the hours are binned as int(grid) % 24, and floor(x % 48) % 24 = floor(x) % 24 for x >= 0 (24 divides 48)",
        ("if fu < f(0.0):", "< -> <=", 0):
            "x is always the best point so far (f(x) = best): fu = f(0) = best makes gain = 1 > 0.9, which ends the "
            "search before x is used again, and the answer is the cache's first minimum either way",
        ("k = int(np.clip(math.ceil(GEN_REQUESTS / max(1.0, per_span)), lo, hi))", "1.0 -> 2.0", 0):
            "below 2 requests a span both quotients are >= 32,000 spans, clipped to the 256 at most",
        ('"within_goal_of_their_mean": int(np.sum(spread <= DWPD_GOAL)) if spread is not None else None,', "<= -> <",
         0):
            "spread is |W / mean - 1| with W / mean in [0.95, 1.05] where it matters: x - 1 is exact there (a "
            "multiple of 2^-53), and the double nearest 0.05 is not one, so no spread equals the goal",
        ("within = (mx <= goal) & live", "<= -> <", 0):
            "mx is |W / W_source - 1|, exact near the goal (Sterbenz): a multiple of 2^-53 never equals the double "
            "0.05 the goal always is (source_noise passes no other)",
        ('own.append(a["turned_over"] & (a["write_blocks_per_s"] > 0))', "> -> >=", 0):
            "turned_over implies W > 0 (SteadyCurve.at: turned_over = filled & ..., filled = W > 0)",
        ("if not b > a:", "> -> >=", 0):
            "the segment is never a point: pass 0 runs along (1, 1) from x = 0 (a = ln 0.5, b = ln 8), passes 1 "
            "and 2 along one axis, where b - a = ln 8 - ln 0.5 wherever x is (x stays inside the bounds)",
    },
    "procs": {
        ("for _ in range(8):", "8 -> 9", 0):
            "a bound against a cyclic chain: a native call wraps a stop in one SystemError, never eight",
    },
    "cluster.sim": {
        ('end = float((cols["arrival_s"] + cols["ttft_ms"] / 1e3).max()) if cols["ttft_ms"].size else 0.0',
         "0.0 -> 1.0", 0): "a cluster of no requests is refused before it is simulated (kvbench cluster: the trace has "
                           "no requests)",
        ('duration = max(end - float(cols["arrival_s"].min()), 1e-9) if cols["ttft_ms"].size else None', "- -> +",
         0): "a trace's clock starts at its first request: the earliest arrival is 0, so end - 0 = end + 0",
        ('duration = max(end - float(cols["arrival_s"].min()), 1e-9) if cols["ttft_ms"].size else None',
         "1e-09 -> 2e-09", 0): "a floor for a run of no time: the last request's TTFT is at least its prefill "
                               "overhead and every request takes some, so the duration is never near 1e-9 s",
    },
    "stationarity": {
        ("if var <= 0:", "<= -> <", 0):
            "the variance is 0 only when every value ties, and then S = 0: Z = 0 by the next line's own S = 0 case, "
            "p = erfc(0) = 1, the same (S, 0, 1)",
        ("if var <= 0:", "0 -> 1", 0):
            "no variance lies in (0, 1]: three values with one tie already give (66 - 18) / 18 = 2.67, and more "
            "values only more",
        ('threshold = tol * (abs(float(np.median(finite))) if finite.size else 0.0) if kind == "relative" else tol',
         "0.0 -> 1.0", 0):
            "a series with no finite value has Mann-Kendall p = 1 (fewer than 3 points), so it never trends "
            "whatever its threshold",
        ("bool(p < ALPHA and abs(change) >= threshold and threshold > 0), first_window)", "< -> <=", 0):
            "p equal to 0.05 to the last bit: the normal approximation's erfc of a ratio of square roots, measure zero",
        ("bwin = np.repeat(np.where(inside, win, -1), counts)", "1 -> 2", 0):
            "references before the start marked -2 instead of -1: only bwin >= 0 is kept, either way",
        ("share = np.where(refs > 0, new / refs, np.nan)", "> -> >=", 0):
            "a window with no reference: new / refs is 0 / 0 = NaN (warnings silenced), the NaN the test puts there",
        ("whr = np.where(refs > 0, 1.0 - distinct / refs, np.nan)", "> -> >=", 0):
            "a window with no reference: 1 - 0 / 0 = NaN (warnings silenced), the NaN the test puts there",
    },
    "synth": {
        ("system = np.where(_strata(rng, n) < p.system_probability, system, -1)", "1 -> 2", 0):
            "'no system prompt' as -2 instead of -1: the generator tests its sign only (system >= 0, k >= 0), and "
            "the key kernel uses it only in a document's owner sysid x 2^32 + doc, still negative and one per "
            "document: keys are equal exactly where they were (their hash values differ)",
        ("while b * k < target:", "< -> <=", 0):
            "a window whose start equals the target to the last bit (an interpolated cumulative intensity against "
            "a multiple of the window's sessions) would be drawn one call early: its starts are all past the "
            "target and wait in the carry either way; only the order of the stream's draws could differ, never "
            "met off that measure-zero case",
        ("due = ops < target", "< -> <=", 0):
            "a start equal to the target to the last bit (a window's scaled random sums against an interpolated "
            "cumulative intensity: measure zero) would be returned at t1 instead of carried: the requests of a "
            "session starting at t1 are not due before t1 and wait in the pending table to the next window either "
            "way",
        ("target = float(np.interp(min(t1, self._grid[-1]), self._grid, self._cum))", "1 -> 2", 0):
            "the grid runs to the largest multiple of GRID_S below duration + 2 GRID_S: its last point is >= "
            "duration + GRID_S and the one before >= duration >= t1, so min(t1, either) = t1",
        ("self.blocks_per_request = float(np.mean(np.ceil(rows.prompt / model.block_tokens))) if len(rows) else 0.0",
         "0.0 -> 1.0", 0):
            "the probe's 20,000 sessions always make requests: a first request's prompt is clipped to the context "
            "limit, so `keep` holds it, and there is no horizon",
        ("has = _strata(rng, n) < p.document_probability", "< -> <=", 0):
            "a uniform double in [0, 1) equal to the probability: a document probability is a fitted or given "
            "fraction, and a draw landing exactly on it has probability 2^-53 per draw",
        ('system = np.searchsorted(self.system_cdf, _strata(rng, n), side="right").clip(0, p.system_prompts - 1)',
         "- -> +", 0):
            "the clip never binds: the CDF's last value is exactly 1.0 (c / c[-1]) and the strata are below 1, so "
            "searchsorted returns at most n - 1",
        ("system = np.where(_strata(rng, n) < p.system_probability, system, -1)", "< -> <=", 0):
            "a stratified uniform equal to the probability to the last bit: probability 2^-53 a draw, as for "
            "documents",
        ("doc = np.full(n, -1, dtype=np.int64)", "1 -> 2", 0):
            "'no document' as -2: tested by sign only (doc >= 0); without a document the shared length is the "
            "system prompt's, so the key kernel never reaches the document owner (end <= shared implies end <= "
            "system) and keys are unchanged",
        ("0, len(self.doc_len) - 1)", "- -> +", 0):
            "the clip never binds, as the system prompt's: the document CDF ends at exactly 1.0",
        ("shared = system_len + np.where(doc >= 0, self.doc_len[np.maximum(doc, 0)] if len(self.doc_len) else 0, 0)",
         "0 -> 1", 2):
            "the value for a model with no documents, where every doc is -1 and np.where takes its last argument: "
            "the 0 (or 1) in the middle is never selected",
        ("gaps[first_of_session] = 0.0", "0.0 -> 1.0", 0):
            "a session's times are its start + cs - cs[its first row], which already subtracts the first row's gap: "
            "the 0 written there is never read",
        ("w = 1.0 / np.arange(1, n + 1, dtype=np.float64) ** s", "1.0 -> 2.0", 0):
            "the weights are normalised (c / c[-1]): a common factor cancels",
        ("if n <= 0:", "<= -> <", 0):
            "n = 0 then falls through to (permutation(0) + random(0)) / 0: an empty array, as returned (numpy "
            "divides no element, so no warning)",
        ("lo, hi = u < _NLOW, u > 1.0 - _NLOW", "< -> <=", 0):
            "u exactly 0.02425 (2^-53 a draw) takes the tail formula instead of the central one: both are "
            "Acklam's approximation at their common break-point, within 1.2e-9 of the quantile there",
        ("lo, hi = u < _NLOW, u > 1.0 - _NLOW", "> -> >=", 0):
            "u exactly 1 - 0.02425, as above for the upper break-point",
        ("q = np.asarray(p.system_user_quantiles, dtype=np.float64).reshape(p.system_prompts, -1)", "1 -> 2", 0):
            "reshape(n, -2): numpy takes any negative size as the one inferred (np.zeros(6).reshape(2, -2) is 2 x 3)",
        ("i = np.minimum(x.astype(np.int64), q.shape[1] - 2)", "- -> +", 0):
            "x = u (n - 1) with u in [0, 1) is below n - 1, so int(x) <= n - 2 already: the clip to n - 2 never "
            "binds, nor one to n + 2",
    },
    "synth_kernel": {
        ('offsets[j + 1] = offsets[j] + (np.int64(prompt[j]) + bt - 1) // bt', '// -> /', 0):
            'the quotient of non-negative numbers is stored into an int64 array, which truncates it: the floor',
    },
    "engines": {
        ('RuntimeWarning, stacklevel=2)', '2 -> 3', 0):
            'where the fallback warning points in the caller\'s stack: the message and category are the same',
        ('return engine_class("psync", fallback=False)', 'False -> True', 0):
            'fallback applies to libaio only: psync asked with fallback=True fails the same way',
    },
    "steady_state": {
        ('slope = (w - mean[:, None]) @ xc / (xc @ xc)', '- -> +', 0):
            'xc sums to 0, so any per-window constant added to w leaves w @ xc unchanged',
        ('ok_mean = mean > 0', '> -> >=', 0):
            'a mean of exactly 0 divides by 0: inf or nan instead of inf, never within a limit, reported as None',
        ('range_frac = np.where(ok_mean, rng / np.where(ok_mean, mean, 1.0), np.inf)', '1.0 -> 2.0', 0):
            'the divisor stands in where the mean is not positive, and that quotient is replaced by inf',
        ('excursion_frac = np.where(ok_mean, np.abs(slope) * (window - 1) / np.where(ok_mean, mean, 1.0), np.inf)',
         '1.0 -> 2.0', 0):
            'the divisor stands in where the mean is not positive, and that quotient is replaced by inf',
    },
    "csvout": {
        ('CHUNK_ROWS = 1 << 16            # rows laid out per kernel call (bounds the text buffer)', '1 -> 2', 0):
            'the chunk size: the text does not depend on where chunks join (test_chunks_join_seamlessly)',
        ('CHUNK_ROWS = 1 << 16            # rows laid out per kernel call (bounds the text buffer)', '16 -> 17', 0):
            'the chunk size: the text does not depend on where chunks join (test_chunks_join_seamlessly)',
        ('q = Decimal(1)', '1 -> 2', 0):
            'quantize takes only the exponent of its argument (0 for both)',
        ('state[inf & (x > 0)] = F_PINF', '0 -> 1', 0):
            'the mask holds infinities only: +inf > 1 as it is > 0',
        ('state[inf & (x > 0)] = F_PINF', '> -> >=', 0):
            'the mask holds infinities only, never 0',
        ('state[inf & (x < 0)] = F_NINF', '0 -> 1', 0):
            'the mask holds infinities only: -inf < 1 as it is < 0, +inf is not',
        ('state[inf & (x < 0)] = F_NINF', '< -> <=', 0):
            'the mask holds infinities only, never 0',
        ('a = np.where(ok, np.abs(x), 0.0)', '0.0 -> 1.0', 0):
            'the filler of NaN and infinite values, whose rounded value is never read (their state prints them)',
        ('amb = ok & (np.abs(v - np.floor(v) - 0.5) <= 2 * np.spacing(v))', '2 -> 3', 0):
            'a wider half-way band: more values take the exact path, which gives the same rounding',
        ('amb = ok & (np.abs(v - np.floor(v) - 0.5) <= 2 * np.spacing(v))', '* -> /', 0):
            'a far wider half-way band (2 / ulp): more values take the exact path, same rounding',
        ('amb = ok & (np.abs(v - np.floor(v) - 0.5) <= 2 * np.spacing(v))', '<= -> <', 0):
            'products that land on a half land exactly on it (distance 0 < 2 ulp either way)',
        ('amb = ok & (np.abs(v - np.floor(v) - 0.5) <= 2 * np.spacing(v))', '& -> |', 0):
            "a NaN or infinite value's product is 0 (its filler), which is never within a half band",
        ('return bool(a.size) and float(a.max()) * 10.0 ** d >= 2.0 ** 63', '10.0 -> 20.0', 0):
            'the Python fallback prints what the kernel would (both are %.Nf): only the speed differs',
        **_each(('return bool(a.size) and float(a.max()) * 10.0 ** d >= 2.0 ** 63', '** -> *'), (0, 1),
            'the Python fallback prints what the kernel would (both are %.Nf): only the speed differs'),
        ('return bool(a.size) and float(a.max()) * 10.0 ** d >= 2.0 ** 63', '* -> /', 0):
            'the Python fallback prints what the kernel would (both are %.Nf): only the speed differs',
        ('return bool(a.size) and float(a.max()) * 10.0 ** d >= 2.0 ** 63', '63 -> 64', 0):
            "the kernel's uint64 holds up to 2^64: a column between 2^63 and 2^64 prints the same",
        ('return bool(a.size) and float(a.max()) * 10.0 ** d >= 2.0 ** 63', '>= -> >', 0):
            'a column whose largest scaled value is exactly 2^63 prints the same either way',
        ('return bool(a.size) and float(a.max()) * 10.0 ** d >= 2.0 ** 63', 'and -> or', 0):
            'the Python fallback prints what the kernel would (both are %.Nf): only the speed differs (every float column would take it)',
        ('n = len(arrays[0]) if arrays else 0', '0 -> 1', 1):
            'no columns: `not names` returns the header alone either way',
        ('if n == 0 or not names:', 'or -> and', 0):
            'zero rows with names: the chunk loop runs no chunk and the header alone is returned either way',
        ('codes[c], vals = _strings(_formatted(a, _decimals(decimals, name)), sep, check=False)', 'False -> True', 0):
            "a number printed by Python holds no separator kvbench uses (',', ' ', ';'), so the check passes",
        ('strbytes = np.zeros((len(strs), max(1, longest)), dtype=np.uint8)', '1 -> 2', 0):
            'a longer string table: unread bytes',
        ('stroff = np.zeros((len(strs), most + 1), dtype=np.int64)', '1 -> 2', 0):
            'a longer offset table: unread entries',
        ('INT_WIDTH = 20', '20 -> 21', 0):
            'a wider buffer than the widest row: the text is the same',
        ('width = ncol + 2 * (ncol == 1)                          # the separators and the line break; a lone "" field', '2 -> 3', 0):
            'a wider buffer than the widest row: the text is the same',
        ('width += max((len(s) for s in vals), default=0)', '0 -> 1', 0):
            'the default of an empty list of names: a column with rows has at least one name',
        ('width += INT_WIDTH + (d > 0)', '> -> >=', 0):
            'one byte more per row for 0 decimals: a wider buffer, the same text',
    },
    "plan": {
        ("batch: int = 1 << 16, from_request: int = 0) -> dict:", "1 -> 2", 0):
            "the batch only cuts the simulation into pieces; any size gives the same writes (tested at 2 and 1 << 16)",
        ("batch: int = 1 << 16, from_request: int = 0) -> dict:", "16 -> 17", 0):
            "the batch only cuts the simulation into pieces; any size gives the same writes (tested at 2 and 1 << 16)",
        ("batch: int = 1 << 16, from_request: int = 0) -> dict:", "0 -> 1", 0):
            "a warm-up of request 0 alone opens the window where none does: the demand from the first arrival, the "
            "window after the first reuse, which is after request 0",
        ("t0 = float(trace.timestamp_s[from_request - 1]) if from_request > 0 else float(np.min(trace.timestamp_s))",
         "0 -> 1", 0): "from request 1 the span opens at request 0's arrival, the earliest (requests by arrival)",
        ("erase_block_bytes=opt.erase_block_bytes, gc=opt.gc, model_ftl=False, from_request=warm)", "False -> True",
         0): "the plan reads no policy's WAF: with the FTL model on, the rows only gain waf keys nothing reads (the "
             "device WAF is WafModel's)",
        ("busy = np.flatnonzero(np.diff(trace.offsets) > 0)", "> -> >=", 0):
            "requests without blocks then run too: they change no tier, and the demand counts no reference of "
            "theirs nor ends its span on them",
        ('tiers = ((TierSpec("l2", max(1, l2_blocks) * slot),) if l2_blocks > 0 else ()) + \\', "0 -> 1", 0):
            "with or without an L2 of one block: it holds only the most recent block, which the L3 behind it (one "
            "block at least, write-through) holds too, so no L3 write changes",
        ('tiers = ((TierSpec("l2", max(1, l2_blocks) * slot),) if l2_blocks > 0 else ()) + \\', "> -> >=", 0):
            "l2_blocks = 0 then gets an L2 of one block: the same L3 writes (see `0 -> 1`)",
        ('probe = HierarchySpec(tiers=(TierSpec("l3", 1),), block_bytes=block_bytes)', "1 -> 2", 0):
            "the probe spec only reads the slot size, which a tier's capacity does not change",
        ("_, ev = h.run(t[a:b], offsets[a:b + 1] - offsets[a], trace.keys[offsets[a]:offsets[b]], first_request=a)",
         "1 -> 2", 0): "one offset more than the batch's requests: the kernel reads offsets[r + 1] for r < requests only",
        ("if not (math.isfinite(w) and w > 0):", "> -> >=", 0):
            "the answer's W is NaN or positive (never 0): see the `and -> or` entry",
        ("if not (math.isfinite(w) and w > 0):", "and -> or", 0):
            "the answer's W is NaN or positive: a turned-over tier wrote at least C >= 1 blocks after its fill, and "
            "the held rate is one of those",
        ("if trace.n_blocks > max_refs:        # the per-block simulation runs on a key sample (miniature) of large "
         "traces", "> -> >=", 0):
            "at exactly max_refs the sample rate is 1.0, where sampled_indices keeps every reference (its early "
            "return): the same trace, the same tiers (round(x * 1.0) = x, max(1, .) as below) and / 1.0",
        ("if p.sample_rate < 1.0:", "1.0 -> 2.0", 0):
            "a profile's rate is at most 1; at 1.0 (the exact profile) its steps are integer distances, so "
            "rint(steps * 1.0) is steps and capacity_scale 1 / 1.0 is the default 1.0: the same profile",
        ("floor if math.isfinite(floor) else 0.0))", "0.0 -> 1.0", 0):
            "the floor is non-finite only when the demand is NaN (a zero span; the stationarity ceiling is finite "
            "for a trace with references), and then every W = miss ratio x demand is NaN, which np.maximum keeps",
        ('deployment["hit_ratio_capped"] = deployment["hit_ratio"] >= stat.steady_ceiling - 1e-6', ">= -> >", 0):
            "differs only for a bisected hit ratio exactly equal to the ceiling - 1e-6",
    },
    "iolog": {
        ('t = (plan["issue_ns"] if times_ns is None else np.maximum(times_ns, 0)) // 1_000_000', '0 -> 1', 0):
            "an unissued I/O's -1 clamped to 1 ns instead of 0 is still millisecond 0",
        ('t = (plan["issue_ns"] if times_ns is None else np.maximum(times_ns, 0)) // 1_000_000', '// -> /', 0):
            'the milliseconds are cast to int64 (truncation toward zero = floor for these non-negative times)',
    },
    "models": {
        ("heads = getattr(g, kind.split) or getattr(self, kind.split, 0)", "0 -> 1", 0):
            "getattr's default is never taken: every split field (kv_heads, key_heads) is a ModelSpec attribute",
    },
    "curves.capacity": {
        ("references: int = 0", "0 -> 1", 0): "the dataclass default is never used: from_arrays always passes references",
        ("if np.any((h < 0) | (h > 1)) or np.any(np.diff(h) < -1e-12):", "1e-12 -> 2e-12", 0):
            "a tolerance for rounding in cumulative ratios: no curve a profile yields falls between the two",
        ("if np.any((h < 0) | (h > 1)) or np.any(np.diff(h) < -1e-12):", "< -> <=", 1):
            "differs only for a fall of exactly 1e-12 between steps",
        ("if steps.size == 0 or steps[0] > 1:", "> -> >=", 0):
            "a first step at exactly 1 block gets (1, 0) prepended and is then deduplicated to its own (1, h): the "
            "same curve",
        ("return float(self.capacities_blocks[np.argmax(self.hit_ratio >= self.hit_ratio[-1] - 1e-15)])", "*"):
            "a tolerance for rounding: the comparison differs only for a ratio exactly 1e-15 (or 2e-15) below the top",
        ("want = target_hit(curve, target, relative=relative) - 1e-12", "1e-12 -> 2e-12", 0):
            "a tolerance for rounding in the target's product: no listed ratio falls between the two",
        ("ok = curve.hit_ratio >= want", ">= -> >", 0): "differs only for a ratio exactly 1e-12 below the target",
        ("if curve.hit_ratio[-1] <= 0 or top <= 1:", "*"):
            "knee's shortcuts: a zero curve's full capacity is its first (1 block) and a one-block or zero curve "
            "gives that block either way (0/0 picks the first grid point)",
        ("def knee(curve: HitRatioCurve, points: int = 2048) -> float:", "2048 -> 2049", 0):
            "h(c) - c/top peaks at the left end of a step, a listed capacity, which the grid always holds",
        ("grid = np.unique(np.concatenate((np.linspace(1.0, top, points), curve.capacities_blocks[", "1.0 -> 2.0", 0):
            "as the grid's points: the listed capacities are in it, and the maximum is at one of them",
        ("curve.capacities_blocks <= top])))", "<= -> <", 0): "top itself is the linspace's last point",
        ("cost_per_block_per_day: float, points: int = 256) -> float:", "256 -> 257", 0):
            "one more log-spaced point: every block of the staircase's steps is already in the rounded grid",
        ("if top <= 1 or cost_per_block_per_day <= 0:", "<= -> <", 1):
            "the cost test's mutant: a free block still pays (gain >= 0) up to the last interval, which ends at top",
    },
    "sampling": {
        ("if rate >= 1.0:", ">= -> >", 0): "at rate 1.0 the hash path keeps every key whose hash is below 2**64 - 1 "
                                         "(all but one of 2**64 values): the early return is a shortcut",
        ("if rate >= 1.0:", "1.0 -> 2.0", 0): "check_rate caps rates at 1.0, so only rate 1.0 moves to the hash path, "
                                            "which keeps every key but one hash value of 2**64",
        ("return splitmix64(salted) < threshold(rate)", "< -> <=", 0): "differs only for a key whose hash equals the "
                                                                   "threshold exactly: one value of 2**64",
        ('return float((trace.meta or {}).get("sample_rate", 1.0) or 1.0)', "1.0 -> 2.0", 1):
            "the trailing `or 1.0` (its mutant survives; the default's is killed) guards a falsy rate, which no "
            "stream states: gen_meta writes `sample or 1.0` and check_rate refuses 0",
    },
    "units": {
        ('_BINARY = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50, "e": 1 << 60}',
         "1 -> 2", 0): 'the "" entry is only tested for membership (bits check) and filtered out of every suffix '
                    "table (`if p`): its value is never read",
    },
    "safety": {
        ("if need_bytes <= 0:", "<= -> <", 0): "need 0 then reaches `0 > free`, which is false: nothing is raised either way",
        ('st = os.statvfs(os.path.dirname(os.path.abspath(path)) or ".")', "or -> and", 0):
            "the directory of an absolute path is never empty ('/' at least)",
        ('r = subprocess.run(["blkid", "-p", "-o", "export", dev], capture_output=True, text=True, timeout=20)',
         "20 -> 21", 0): "a subprocess timeout: only a hung blkid sees it, and both values end it",
        ('r = subprocess.run(["wipefs", "-n", "-p", dev], capture_output=True, text=True, timeout=20)',
         "20 -> 21", 0): "a subprocess timeout: only a hung wipefs sees it, and both values end it",
    },
    "curves.residence": {
        ("r0 = int(trace.offsets[from_request]) if from_request > 0 else 0      # the warm-up's references",
         "> -> >=", 0): "offsets[0] is 0: from request 0 no reference is warm-up either way",
        ("if from_request > 0:       # the span opens at the last warm-up request, as the whole trace's at its first",
         "0 -> 1", 0): "from request 1 the window's span opens at request 0's arrival, as the whole trace's does: "
                       "the same references after it over the same span",
        ("n_req = max(self.n_requests, int(self.request_of_ref[-1]) + 1 if self.request_of_ref.size else 0)",
         "1 -> 2", 0): "steady_curve always passes n_requests, at least the last reference's request + 1 (the [-2]nd's "
                    "+ 1 is smaller still)",
        ("steady = np.where(ok, self.steady_writes[np.minimum(j, n - 1)], 0.0) if n > 1 else np.zeros(i.shape)",
         "0.0 -> 1.0", 0): "outside 1..distinct W is NaN, so the tier is not filled and turned_over is False whatever "
                        "its steady writes",
        ("n_requests: int = 0                       # requests of the trace (trailing ones may hold no reference)",
         "0 -> 1", 0): "the dataclass default is never used: steady_curve always passes n_requests",
        ("n_req = max(self.n_requests, int(self.request_of_ref[-1]) + 1 if self.request_of_ref.size else 0)",
         "0 -> 1", 0): "a curve has at least one reference (steady_curve refuses an empty trace), so the else never runs",
        ("return np.where(ok, a[j], np.nan) if n > 1 else np.full(i.shape, np.nan)", "> -> >=", 0):
            "n = distinct + 1 >= 2 for every curve (steady_curve refuses an empty trace): the else never runs",
        ("steady = np.where(ok, self.steady_writes[np.minimum(j, n - 1)], 0.0) if n > 1 else np.zeros(i.shape)",
         "> -> >=", 0): "n = distinct + 1 >= 2 for every curve (steady_curve refuses an empty trace): the else never runs",
        ('"dwpd": np.where(filled, dwpd_at_residence(np.where(filled, t, 1.0)), np.nan),', "1.0 -> 2.0", 0):
            "the placeholder residence of an unfilled tier, only there to keep the division finite: the outer "
            "where replaces its DWPD with NaN",
        ("w = np.where(seen > 0, steady / seen * demand, np.nan)", "> -> >=", 0):
            "a window without references has no misses either: 0 / 0 is NaN, as the guard gives",
        ("tree = np.zeros(size + 1, dtype=np.int64)", "1 -> 2", 0):
            "a larger Fenwick array: updates stop at index `size` either way and no query reads past it (numba "
            "does not bounds-check, so only a smaller array could differ)",
        ("n_req = max(self.n_requests, int(self.request_of_ref[-1]) + 1 if self.request_of_ref.size else 0)",
         "0 -> 1", 0): "a curve always has references (steady_curve refuses a trace without any)",
        ("j = np.where(ok, i, 1) if n > 1 else np.zeros_like(i)", "> -> >=", 0):
            "n = distinct + 1 >= 2 for every curve (a trace has a reference): both branches test true",
        ("steady = np.where(ok, self.steady_writes[np.minimum(j, n - 1)], 0.0) if n > 1 else np.zeros(i.shape)",
         "1 -> 2", 1): "j = n - 1 is the capacity of every distinct block, which never fills: `filled` is False there "
                    "and the steady count read is never used",
        ('"dwpd": np.where(filled, dwpd_at_residence(np.where(filled, t, 1.0)), np.nan),', "1.0 -> 2.0", 0):
            "the inner fill is for unfilled capacities, which the outer where replaces by NaN",
        ("after = _misses_after_fill(dist, start[:d], d) if d > 1 else np.zeros(max(d, 1), dtype=np.int64)", "1 -> 2", 1):
            "the max(d, 1) variant: zeros(2)[:1] and zeros(1)[:1] agree for d = 1 (the `d > 1` variant is killed "
            "by test_two_distinct_blocks; this one survives it)",
        ("start = np.full(d + 1, n, dtype=np.int64)", "1 -> 2", 0):
            "one more trailing entry: only start[1:d] is set and only start[:d] is read",
        ("after = _misses_after_fill(dist, start[:d], d) if d > 1 else np.zeros(max(d, 1), dtype=np.int64)", "> -> >=", 0):
            "d = 1 then runs the kernel, whose capacity loop (d - 1 down to 1) is empty: it returns zeros(1), as the "
            "other branch does",
        ("after = _misses_after_fill(dist, start[:d], d) if d > 1 else np.zeros(max(d, 1), dtype=np.int64)",
         "max -> min", 0): "the branch runs only for d = 1 (d >= 1 always), where min and max agree",
        ("hist = np.bincount(np.minimum(dist, d + 1), minlength=d + 2)", "1 -> 2", 0):
            "distances never exceed d + 1 (cold references are d + 1): the clamp is a no-op at d + 1 and at d + 2",
        ("hist = np.bincount(np.minimum(dist, d + 1), minlength=d + 2)", "2 -> 3", 0):
            "a longer histogram: only its first d + 1 cumulative sums are read",
        ("hist = np.bincount(np.minimum(dist, d + 1), minlength=d + 2)", "+ -> -", 1):
            "the minlength: bincount is d + 2 long anyway, since every trace has a reference and the cold ones are "
            "at d + 1 (the first reference is always cold)",
        ("while j <= size:", "<= -> <", 0):
            "the skipped node is the tree's top (index n_keys + 2); prefix queries stop at C <= n_keys - 1 and "
            "never read it",
        # SteadyHits
        ("h = 1.0 - w / self.demand_blocks_per_s if self.demand_blocks_per_s > 0 else np.zeros_like(w)", "> -> >=", 0):
            "at demand 0 both give 0: 1 - w / 0 is -inf or NaN, clipped or mapped to 0",
        ("return np.clip(np.nan_to_num(h, nan=0.0), 0.0, 1.0)", "1.0 -> 2.0", 0):
            "h = 1 - w / demand with w >= 0 never exceeds 1: the upper clip is never active",
        ("return float(self.at(np.arange(1, self.curve.distinct + 2, dtype=np.float64)).max())", "2 -> 3", 0):
            "one more capacity beyond every block: the same held rate as distinct + 1",
    },
    "cost": {
        ("return (round(abs(math.log(c.dwpd / rated_dwpd)), 12), c.reference_waf or math.inf, name)", "12 -> 13", 0):
            "the float-noise guard that lets two classes equally near a rating tie: |log| of a ratio and of its "
            "inverse differ by ~1e-16, which rounding to 12 or 13 digits both erase",
    },
    "endurance": {
        ("return capacity_bytes / write_bytes_per_s if write_bytes_per_s and write_bytes_per_s > 0 else None",
         "> -> >=", 0): "a rate of 0 is falsy and stops at `write_bytes_per_s and`; NaN fails both",
        ("if not drive_capacity_bytes > 0:", "> -> >=", 0):
            "a drive capacity of 0 returned None the line before (`if not drive_capacity_bytes`); NaN fails both",
        ("if not (waf >= 1.0 or math.isclose(waf, 1.0, rel_tol=1e-9)) or not math.isfinite(waf):", ">= -> >", 0):
            "a WAF of exactly 1.0 passes isclose(1.0, 1.0) as well: the same WAFs pass",
    },
    "loadpath": {
        ("if replay_bw > 0 and bw < PROBE_BW_FLOOR * replay_bw:", "> -> >=", 0):
            "at a replay rate of 0 the mutant asks bw < 0: a probe's bandwidth is bytes read / seconds (or a missing "
            "one read as 0.0), never negative",
        ('if getattr(probe, "timed_out", False):', "False -> True", 0):
            "getattr's default is never read: every probe is a TierProbe, which has the timed_out field",
        ('io_s = max(float(probe.first_byte_s), float((probe.bandwidth_lat_us or {}).get("p50") or 0.0) * 1e-6)',
         "0.0 -> 1.0", 0): "a missing p50 read as 1 us instead of 0: io_s then differs only below 1 us, and it is only "
                        "compared with (and printed above) 1 s",
    },
    "answer": {
        ("return -math.inf if d.ttft_saved_at_reference_s is None else d.ttft_saved_at_reference_s", "-x -> x", 0):
            "the rank of a tier whose saving is unstated is never read: the answer's TTFT saved is then None (n/a) "
            "whichever tier ranks first, and the TTFT row names a tier only when the figure is a non-zero number",
        ("share = min(1.0, max(0.0, 1.0 - h_dram / h_ssd)) if h_ssd > 0 else 1.0", "1.0 -> 2.0", 0):
            "the min's cap (the other two 1.0s are killed): 1 - h(DRAM) / h(store) with hit ratios >= 0 and h(store) "
            "> 0 never exceeds 1, so a cap of 1 or 2 never binds",
        ('what = {"load": (f"LOAD from {d.break_even_tokens:,} tokens" if (d.break_even_tokens or 0) > 1 else',
         "0 -> 1", 0): "a missing break-even read as 1 instead of 0: both are not > 1, the first token either way",
    },
    "admission": {
        ("below = [x for x in runs if x.turned_over and x.capacity_blocks < cap]", "< -> <=", 0):
            "runs are the grid's capacities without the planned one",
        ("above = [x for x in runs + out + [head] if not x.turned_over and x.capacity_blocks > lo.capacity_blocks]",
         "> -> >=", 0): "lo itself turned over, so `not x.turned_over` already leaves it out",
        **_each(("if not lo.capacity_blocks < mid < hi.capacity_blocks:", "< -> <="), (0, 1),
            "the loop runs only while hi - lo >= 2, where round(sqrt(lo hi)) lies in lo + 1 .. hi - 1: the guard "
            "is a safety net that never fires, either bound"),
        ("and hi.capacity_blocks - lo.capacity_blocks > 1 and len(out) < most):", "- -> +", 0):
            "with hi - lo = 1 the midpoint rounds to lo or hi and the guard below stops the loop: the same probes",
        ("and hi.capacity_blocks - lo.capacity_blocks > 1 and len(out) < most):", "> -> >=", 0): "the second `>`: at hi - lo = 1 the midpoint rounds to lo or hi and the guard stops the loop",
        ("def _probe_turned_over(trace, head: TierRun, runs: list, spec: str, warmup: float, most: int = 12,",
         "12 -> 13", 0): "the default bound on simulations, a cost limit: every test that counts probes gives its own",
        ("c //= 2", "//= -> /=", 0):
            "halving a float gives the same floors (4.0, 2.0, 1.0, then 0.5 ends the loop as 0 does): simulate_tier "
            "takes int() of each",
        ("c = cap // 2", "// -> /", 0):
            "halving a float gives the same floors: simulate_tier takes int() of each, floor(x / 2^k) either way",
        **_each(("if not (self.filled and self.steady_references > 0 and span > 0):", "> -> >="), (0, 1),
            "filled means writes after the fill (so references there) and a window > 0 (so a span > 0): both "
            "guards hold whenever filled does"),
        ("t_open = float(t[n_warm - 1]) if n_warm > 0 else t0", "0 -> 1", 0):
            "from request 1 the window's span opens at request 0's arrival, the earliest (requests by arrival): t0",
        ("h = Hierarchy(spec, max_request_blocks=int(np.diff(offs).max()) if nreq else 0)", "0 -> 1", 0):
            "max_request_blocks is a layout hint (Hierarchy's state is laid out for it; results are the same "
            "either way), and an empty trace runs no request",
        ("reqs, ev = h.run(times[r0:r1], offs[r0:r1 + 1] - offs[r0], keys[offs[r0]:offs[r1]], first_request=r0)",
         "1 -> 2", 0): "one offset more than the batch's requests: run() takes the request count from the times, "
                    "and the last batch's slice stops at the end anyway",
        ("first = int(np.searchsorted(cum, cap + 1)) if nreq and cum[-1] > cap else -1", "1 -> 2", 2):
            "the else -1 -> -2 (cap + 1 is killed by the one-block requests by hand): any negative first means "
            "never evicted",
        ("else 0), first, int(with_blocks[-1]) if with_blocks.size else -1, n_warm)", "1 -> 2", 1):
            "the else -1 -> -2: any negative last request means no request holds a block",
        ("t0 = float(t.min()) if nreq else 0.0", "0.0 -> 1.0", 0):
            "an empty trace's t0 is never read: no fill and no request with blocks, so fill and span take their "
            "own defaults",
        ("refs = int(np.asarray(trace.offsets)[-1] - np.asarray(trace.offsets)[0])", "- -> +", 0):
            "a trace's offsets start at 0 (every reader, slice, take, concat and sample builds them from 0), so "
            "the references are offsets[-1] either way",
        ("first = -1", "1 -> 2", 0):
            "the Python oracle's 'no eviction yet' marker: it is only tested `< 0` (set at the first eviction) and "
            "`>= 0` (in _tier_run), so -2 means the same as -1",
        ("demand_references: int = 0   # block references in requests after the first arrival: the mean demand's",
         "0 -> 1", 0): "the dataclass default is never used: _tier_run, the only constructor, always passes it",
    },
    "placement": {
        ("if classes <= 1 or w.size == 0:", "<= -> <", 0):
            "classes = 1 then takes the quantile path with no cut points (np.arange(1, 1) is empty), and "
            "searchsorted into no cuts puts every write in class 0, as the early return does",
        ("if classes <= 1 or w.size == 0:", "or -> and", 0):
            "the early return gives zeros, and so does the path it skips: with one class there are no cuts (class "
            "0 for all), without writes `out[w] = ...` assigns nothing",
        ('probe = HierarchySpec(tiers=(TierSpec("l3", 1),), block_bytes=block_bytes)', "1 -> 2", 0):
            "the probe spec only reads the slot size, which a tier's capacity does not change",
    },
    "deployment": {
        # the rate's bisection: it ends at adjacent doubles (the `mid in (lo, hi)` break), where hi is the least
        # double whose work reaches the GPUs' (the work needed rises with the rate), whatever bracket held it
        ("lo, hi = hi, 2.0 * hi", "2.0 -> 4.0", 0):
            "a bracket grown 4x instead of 2x holds the same root: the bisection ends at the same least double",
        ("for _ in range(200):", "200 -> 201", 0):
            "never reached: halving a bracket of ratio 2 reaches adjacent doubles in about 53 steps",
    },
    "curves.profile": {
        # FixedSizeShards' room: the sizes it allocates and grows to, and when; the kernel asks for room when it
        # runs out, so none of these changes a distance or a weight
        ("bits = max(10, int(np.ceil(np.log2(2 * n))))", "2 -> 3", 0): "a larger key table: where keys sit, not which",
        ("grown = np.empty(min(2 * self.heap.shape[0], self.size + 2), np.int64)", "2 -> 3", 0):
            "the heap grows by 3x instead of 2x, capped at the sample size + 2 either way",
        ("if slot == width and 2 * live + 2 > width:", "> -> >=", 0):
            "at exactly half full the slots grow instead of being compacted in place: the same order and distances",
        ("live = int(self.st[2])", "2 -> 3", 0):
            "the heap's size instead of the live keys: both are at most the entries in use, which the max takes",
        ("chunk = max(1 << 16, 4 * self.size)", "1 -> 2", 0):
            "the pre-filter's chunk of references: results are chunk-invariant (test_fixed_size_shards_streamed_in_"
            "batches_equals_whole feeds 97-request batches)",
        ("tms = np.ascontiguousarray(times if self.want else times[:0], dtype=np.float64)", "0 -> 1", 0):
            "without a TTL the kernel never reads the times (want_gaps False)",
        ("if self._npend > max(1 << 16, self.est.size):      # merged when the pending part outgrows the merged",
         "16 -> 17", 0): "when the pending distances are merged: the merge is exact whenever it runs",
        ("self._alloc(max(1024, 2 * max(live, int(self.st[0])) + 2))", "2 -> 3", 0):
            "the compacted arrays' room: three times the live keys instead of twice, grown again when full",
        ("stack.feed(sampled_trace(b, r0, salt)[0] if rate is not None and (r0 < keyed or salt) else b)",
         "and -> or", 0): "without a rate r0 is 1.0, and a sample at rate 1.0 keeps every reference (sampled_indices' "
                       "early return), salted or not: the same trace either way",
        ("width = max(2 * min(self.size, 1 << 15) + 2, 1024)", "*"):
            "the Fenwick tree's first width: _make_room doubles tree and owner whenever the slots run out",
        ("self.heap = np.empty(min(self.size, 1 << 15) + 2, np.int64)", "*"):
            "the heap's first length: _make_room doubles it (up to size + 2) before it fills",
        ("self._alloc(max(1024, min(2 * self.size + 2, 1 << 16)))", "*"):
            "the key table's first length: _make_room compacts into room for twice the live keys when it fills",
        ("grown = np.empty(min(2 * self.heap.shape[0], self.size + 2), np.int64)", "min -> max", 0):
            "a longer heap than the sample can fill (it never holds more than size + 1 keys)",
        ("self.owner, self.tree = owner, np.zeros(2 * width + 1, np.int64)", "2 -> 3", 0):
            "a longer tree than _rebuild(..., 2 * width) and the kernel's width reach: the tail stays zero",
        ("self._alloc(max(1024, 2 * max(live, int(self.st[0])) + 2))", "1024 -> 1025", 0):
            "the compacted key table's least length, one entry more",
        ("if slot == width and 2 * live + 2 > width:", "and -> or", 0):
            "the tree also grows while free slots remain: earlier growth, the same rebuilt order and distances",
        ("self.st[1] = _rebuild(self.tree, self.owner, self.eslot, 2 * width)", "1 -> 2", 0):
            "_rebuild returns the live count, which st[2] already holds; st[1] then stays at the old width, so new "
            "keys take slots from there on in the doubled tree: sparser slots, the same order of recency",
        ("self.tab = np.zeros(2 << bits, np.uint64)", "2 -> 3", 0):
            "a longer hash table than the probe's 2**bits home slots reach: the tail is never used",
        ("if n_ent >= self.ekey.shape[0] or 2 * (n_ent + 1) > self.tab.shape[0] // 2:", "*"):
            "when the key table is compacted (two entries earlier or later, at most half full), not what it holds",
        ("codes, uniques = pd.factorize(keys, sort=False)", "False -> True", 0):
            "dense ids only name keys: any numbering gives the same distances",
        ("out = np.where(idx >= 0, self.cum_hits[np.maximum(idx, 0)] if self.cum_hits.size else 0.0, 0.0)",
         "0.0 -> 1.0", 0): "with no steps every index is -1, so the first 0.0 is never selected (the where's own 0.0 "
                        "is the one used)",
        ("expected_keys=min(1 << 22, max(1024, trace.n_blocks // 8)))", "*"):
            "the LRU stack's initial key-table size (it grows as needed): any size gives the same distances",
        ("expected_keys=min(1 << 22, max(1024, sub.n_blocks // 8)))", "*"):
            "the LRU stack's initial key-table size (it grows as needed): any size gives the same distances",
        ("chunk = max(1 << 16, 4 * self.size)", "*"): "batch size of the candidate pre-filter: any batching keeps "
                                                      "the same smallest hashes",
        ("return codes.astype(np.int64, copy=False), int(len(uniques))", "False -> True", 0):
            "a copy holds the same ids",
        ("sampled_references: int = 0", "0 -> 1", 0): "ReuseProfile's and Curve's default: every constructor passes it",
        ("flat = np.flatnonzero(h < bound)", "< -> <=", 0):
            "the pre-filter's bound is the (size+1)-th smallest hash of earlier chunks, which the kernel (fed the "
            "same chunks first) has already priced out, or the kernel's threshold plus a margin: a reference at "
            "the bound is dropped there instead",
        ("self.best = np.unique(np.concatenate([self.best, h[flat]]))[: self.size + 1]", "1 -> 2", 0):
            "one more kept hash does not move best[size], the bound",
        ("self.best = np.unique(np.concatenate([self.best, h[flat]]))[: self.size + 1]", "+ -> -", 0):
            "too few hashes kept (best never exceeds size) never lowers the bound: no pre-filtering by best, the "
            "kernel drops what it must",
        ("bound = min(bound, self.best[self.size])", "min -> max", 0):
            "a bound at least the threshold's: less pre-filtering (a superset of the references below the "
            "threshold), the kernel drops what it must",
        ("hist[np.flatnonzero(hist)[0] if hist.any() else 1] += adj * rate", "1 -> 2", 0):
            "LRUStack.counts() is as long as the largest distance it counted, so hist.size > 1 implies a nonzero "
            "bin: the else branch is never taken",
        ("r_end = min(max(r_end, r + 1), trace.n_requests)", "*"):
            "searchsorted(offsets, offsets[r] + chunk, 'right') is always > r (offsets[r] <= offsets[r] + chunk): "
            "the max never binds and the batch always advances",
        ("tms = np.ascontiguousarray(times if self.want else times[:0], dtype=np.float64)", "0 -> 1", 0):
            "without retention the kernel never reads times",
        ("base = make_policy(policy, 1, ttl_s=ttl_s)", "1 -> 2", 0): "a template: clone() sets every capacity",
        ("r0 = 1.0 if rate is None else float(rate)", "1.0 -> 2.0", 0):
            "stream_profile: without a rate the exact branch returns before r0 is read",
        ("sample_rate: float = 1.0", "1.0 -> 2.0", 0): "Curve's default: every constructor passes the rate",
    },
    "policies": {
        **{(f"def {m}(self, key: Hashable, now: float = 0.0) -> {r}:", "0.0 -> 1.0", 0):
           "the abstract Cache signature: every policy overrides it with its own default"
           for m, r in (("lookup", "bool"), ("contains", "bool"), ("insert", "list"))},
        **{(f"def {m}(self, key, now=0.0):", "0.0 -> 1.0", 0):
           "without retention the access time is stored but never compared; with retention every caller "
           "(simulate_prefix, the tiers, curves) passes now" for m in ("lookup", "contains", "insert")},
        ("return self._od.pop(key, 0) is None      # values are None: 0 means absent", "0 -> 1", 0):
            "any non-None marker for absence gives the same answer",
        ("was_ghost = self._g.pop(key, 0) is None", "0 -> 1", 0): "any non-None marker for absence gives the same answer",
        ("if len(self.heap) > 2 * len(self.last) + 64:", "2 -> 3", 0): "when the lazy heap is compacted, not what it holds",
        ("if len(self.heap) > 2 * len(self.last) + 64:", "* -> /", 0): "when the lazy heap is compacted, not what it holds",
        ("if len(self.heap) > 2 * len(self.last) + 64:", "64 -> 65", 0): "when the lazy heap is compacted, not what it holds",
        ("if len(self.heap) > 2 * len(self.last) + 64:", "+ -> -", 0): "when the lazy heap is compacted, not what it holds",
        ("if len(self.heap) > 2 * len(self.last) + 64:", "> -> >=", 0): "when the lazy heap is compacted, not what it holds",
    },
    "curves.miniature": {
        ("store = int(l3_bytes // slot)", "// -> /", 0): "int() of a positive quotient floors it as // does",
    },
    "curves.stack": {
        # the first sizes of the stack's arrays: the kernel returns a code when one is full and feed() grows it,
        # so any first size (or growth step that still fits the need) gives the same distances
        ("bits = max(10, int(math.ceil(math.log2(max(2, 2 * expected_keys)))))", "*"):
            "the key table's first size: the kernel asks for a larger one when it fills (code 1)",
        ("self._alloc_slots(max(1 << 12, 2 * expected_keys))", "*"):
            "the first slot width: the kernel asks for more slots when they run out (code 2)",
        ("self.hist = np.zeros(max(1024, expected_keys + 2), dtype=np.int64)", "*"):
            "the histogram's first length: the kernel asks for a longer one before a distance past it (code 3)",
        ("def __init__(self, ttl_s: float | None = None, count_from: int = 0, expected_keys: int = 1 << 16):",
         "16 -> 17", 0): "the default expected keys only sizes the first arrays, which grow as needed",
        ("self.owner = np.full(width, -1, dtype=np.int64)", "1 -> 2", 0):
            "any negative owner means an empty slot (the kernels test o >= 0)",
        ("self.c3 = np.zeros(-(-width // 262144), dtype=np.int64)", "262144 -> 262145", 0):
            "one group count fewer only when the width passes 262,144 x 262,145 slots (2^36: 550 GB of owners)",
        ("self._alloc_slots(max(2 * width, 2 * need))", "* -> /", 0):
            "a grown width of 2 x need instead of twice the old: still room for the request, grown again later",
        ("grown = np.zeros(max(2 * self.hist.shape[0], need + 2), dtype=np.int64)", "*"):
            "the grown histogram's length: too short, the kernel asks again (code 3) before a distance past it",
        ("size = 1 << bits", "1 -> 2", 0):
            "a key table twice as large (still a power of two; hashes land in its lower half, probing wraps)",
        ("need = int(self.state[0]) + nb", "0 -> 1", 0):
            "the next slot instead of the entries: at least as large, so only more room is asked for",
        ("while 2 * need > self.tab.shape[0] // 2:", "*"):
            "how far the key table grows before the kernel is called again: it asks again when full (code 1)",
    },
    "curves.kernels": {
        ("eslot[victim] = -1", "1 -> 2", 0):
            "an evicted entry's slot is never read again (hits and compaction read only entries still in the "
            "sample; a key dropped from it never re-enters, its hash being above the falling threshold)",
        **_each(("if bend - (blk + 1) <= blk - (grp << 6) + 1:", "- -> +"), (0, 1),
            "chooses which side of the group to count (the shorter); both branches count the same marks"),
        ("if c + 1 < size and hashes[heap[c + 1]] > hashes[heap[c]]:", "> -> >=", 0):
            "only decides between two children of equal hash: distinct keys have distinct 64-bit hashes",
        ("new_owner[s] = -1", "1 -> 2", 0): "any negative owner means an empty slot (o >= 0 tests)",
        ("_GOLD = np.uint64(0x9E3779B97F4A7C15)       # Fibonacci hashing multiplier of the key tables",
         "11400714819323198485 -> 11400714819323198486", 0):
            "the hash table's multiplier: another one changes where keys sit, not which slot each maps to",
        ("if wend - (w + 1) <= w - (blk << 6):", "6 -> 7", 0):
            "chooses which side of the word to count (the shorter); both branches count the same marks",
        ("if wend - (w + 1) <= w - (blk << 6):", "<= -> <", 0):
            "chooses which side of the word to count (the shorter); both branches count the same marks",
        ("j = i - 8 if i - 8 >= 0 else i", "*"): "which table line is prefetched: a cache hint, never read back",
        ("warm ^= tab[u(2 * np.int64((keys[u(j)] * _GOLD) >> np.uint64(shift)) + 1)]", "*"):
            "the prefetch load itself: its value only feeds the dead 'warm' word",
        ("pa = -1", "1 -> 2", 0): "any negative anchor means none (every use tests pa < 0)",
        **_each(("if pa < 0 or p - pa > ANCHOR_SPAN or pa - p > ANCHOR_SPAN:", "> -> >="), (0, 1),
            "at exactly ANCHOR_SPAN the count starts from scratch instead of from the anchor: both count the same "
            "marks"),
        ("warm = np.uint64(0)", "0 -> 1", 0): "the prefetch loads' accumulator starts elsewhere: it only feeds the "
                                           "dead state[5]",
        ("state[5] ^= np.int64(warm & np.uint64(1))      # keep the warming loads alive", "*"):
            "keeps the prefetch loads from being optimised away; state[5] is never read",
        ("if 2 * (entries + nb) > width:", "2 -> 3", 0): "grow the slot space rather than compact it: both keep the marks",
        ("if hist.shape[0] < entries + nb + 2:", "2 -> 3", 0): "grows the histogram one entry sooner: room, not counts",
        **_each(("if bend - (blk + 1) <= blk - (grp << 6) + 1:", "+ -> -"), (0, 1),
            "chooses which side of the block to count (the shorter); both branches count the same marks"),
        ("if bend - (blk + 1) <= blk - (grp << 6) + 1:", "<= -> <", 0):
            "chooses which side of the block to count (the shorter); both branches count the same marks",
    },
    "ftl": {
        # erase_unit_pages: the halving's stop and the quotients of whole numbers
        **_each(("while (erase % page or erase // page < 2) and page // 2 >= MIN_PAGE_BYTES:", "// -> /"), (0, 1),
                "erase / page < 2 is tested only where erase % page is 0 (else the first test holds), where the "
                "quotient is whole; page / 2 >= 4096 and page // 2 >= 4096 agree for a whole page"),
        ("if erase % page or erase // page < 2:       # no halving of page_bytes fits: the 4 KiB page divides the unit",
         "// -> /", 0): "erase / page < 2 is tested only where erase % page is 0, where the quotient is whole",
        ("and erase % (2 * page) == 0 and erase // (2 * page) >= 2):", "// -> /", 0):
            "erase / (2 page) >= 2 and erase // (2 page) >= 2 agree: 2 is whole",
        ("while (erase % page or erase // page < 2) and page // 2 >= MIN_PAGE_BYTES:", "2 -> 3", 1):
            "page // 3 >= 4096: the halving stops sooner, only ever at a page that does not fit (it halves only "
            "those), and the fallback below sets the 4 KiB page the full halving reaches (every 512-byte page to "
            "128 KiB against every 4 KiB unit to 1 MiB: the same page)",
        ("while (erase % page or erase // page < 2) and page // 2 >= MIN_PAGE_BYTES:", ">= -> >", 0):
            "page // 2 > 4096 stops the halving at 8 KiB, only where 8 KiB does not fit, and the fallback below sets "
            "4 KiB, where the halving goes (checked over the same pages and units as the `// 3` variant)",
        ("if self.page_size <= 0 or self.page_size % 512:", "0 -> 1", 0):
            "a page size of 1 fails the multiple-of-512 test on the same line",
        ("w = math.log1p(x) if x > -0.3 else -1.0 + math.sqrt(max(0.0, 2.0 * (1.0 + math.e * x)))", "> -> >=", 0):
            "the starting guess at exactly x = -0.3: Halley's iteration converges to the same root",
        ("for _ in range(100):", "100 -> 101", 0): "an iteration cap never reached (convergence takes < 10 steps)",
        **_each(("step = f / (ew * (w + 1.0) - (w + 2.0) * f / (2.0 * w + 2.0)) if w != -1.0 else 0.0", "2.0 -> 4.0"), (0, 1, 2),
            "a different Halley correction still converges to the same root within the 1e-15 stop"),
        ("step = f / (ew * (w + 1.0) - (w + 2.0) * f / (2.0 * w + 2.0)) if w != -1.0 else 0.0", "- -> +", 0):
            "a different Halley correction still converges to the same root within the 1e-15 stop",
        ("if abs(step) < 1e-15 * (1.0 + abs(w)):", "< -> <=", 0): "a step exactly at the stop tolerance changes w by "
                                                                "less than the result's precision",
        ("def _extent_chunks(ops, starts, counts, total: int, chunk: int = 1 << 20, streams=None):", "20 -> 21", 0):
            "kernel batch size: the stream is the same",
        ('"head": np.full(bp + 1, -1, dtype=np.int32),', "1 -> 2", 0): "one spare bucket head, never indexed",
        ("np.int64(2), np.int64(0), np.int64(2), np.int64(0))", "*"):
            "the compile warm-up's arguments: it applies no extents, its result is discarded",
        ("if abs(step) < 1e-15 * (1.0 + abs(w)):", "* -> /", 0):
            "a tighter stop: Halley's iteration reaches the same double within the 100-step cap",
        ("if len(ops) < chunk // 2:   # a short stream: tile it so each kernel call gets a large batch", "// -> /", 0):
            "len(ops) < chunk / 2 and < chunk // 2 agree for an even chunk",
        **_each(("reps = max(1, min(chunk // max(1, len(ops)), -(-total // per_pass)))", "-x -> x"), (0, 1),
            "tiling only batches a short stream for speed: one copy per pass gives the same extents in order"),
        ("if warm_snap is None and warm_at <= cum[-1]:", "and -> or", 0):
            "an extra cut point only splits a batch of extents into two kernel calls: the same model state",
        ("if len(files) > 1 and target is None and largest:", "> -> >=", 0):
            "with one file, picking the largest picks that file",
        **_each(("step = f / (ew * (w + 1.0) - (w + 2.0) * f / (2.0 * w + 2.0)) if w != -1.0 else 0.0", "+ -> -"), (0, 1, 2),
            "a different Halley denominator keeps f = 0 the fixed point and still converges (tests check w e^w = x "
            "to 1e-9 and W(e) = 1 to 1e-14)"),
        ("def _uniform_chunks(user_pages: int, total: int, seed: int, io_pages: int = 1, chunk: int = 1 << 20):",
         "1 -> 2", 0): "the only caller (simulate) passes io_pages",
        ("points = list(range(next_mark, int(cum[-1]) + 1, win))", "1 -> 2", 1):
            "a window mark past the chunk's last write cuts at len + 1, which slices the same extents as len (the "
            "appended len cut is then skipped); snapshots are taken by the host-page count, not by the cuts",
        ("a, e = self._arrays, np.zeros(0, np.int64)", "0 -> 1", 0):
            "the compile warm-up's start/count/stream arrays: its ops array is empty, so the kernel reads none of "
            "them, and one int64 element instead of none is the same array type (the same specialisation)",
        ('"ring": np.full(B, -1, dtype=np.int32),', "1 -> 2", 0):
            "the FIFO ring's filler: the kernel reads ring[r_head] only while r_count > 0 and check() only the "
            "r_count slots from r_head, every one of them written by a block's close first",
        ("if abs(step) < 1e-15 * (1.0 + abs(w)):", "1e-15 -> 2e-15", 0):
            "numerically equivalent, not bit-identical: the looser stop ends one Halley step earlier where the step "
            "is already below 2e-15 relative; on 90,000 sampled x the results differ in 290, all within 0.002 of "
            "-1/e, by <= 4e-15 relative, where W's condition number 1/(1 + W) makes the double result uncertain "
            "by as much (against 40-digit mpmath the original is the closer one in 173 of the 290, the mutant in "
            "117: no accuracy bound tells them apart)",
        ("w = math.log1p(x) if x > -0.3 else -1.0 + math.sqrt(max(0.0, 2.0 * (1.0 + math.e * x)))", "0.0 -> 1.0", 0):
            "numerically equivalent, not bit-identical: near the branch point the iteration starts from w = 0 "
            "instead of the series guess and converges to the same root; on 40,000 sampled x the results differ "
            "in the last digits only where W's conditioning allows (largest error against 40-digit mpmath 5.9e-8 "
            "vs the original's 5.3e-8, both for x within 1e-16 of -1/e; the original closer in 9,503 cases, the "
            "mutant in 9,187)",
        ("if abs(step) < 1e-15 * (1.0 + abs(w)):", "+ -> -", 0):
            "numerically equivalent, not bit-identical: the stop never fires for |w| > 1 and the loop runs its 100 "
            "steps, which only add rounding-level moves (155 of 40,000 sampled x differ, by <= 1.8e-15 relative "
            "against mpmath, the mutant the closer one in 96 of them)",
        ("if cut <= prev:", "<= -> <", 0):
            "a cut equal to the last one applies no extent (apply_pages returns on an empty batch) and leaves the "
            "host count, the warm-up snapshot and the window snapshots as the previous cut left them",
    },
    # the kernel of ftl.py, now a module of its own (ftl_kernel.py): its entries moved with it
    "ftl_kernel": {
        ("p2l[u(old)] = -1", "1 -> 2", 0): "any negative p2l is an unmapped physical page (every test is p2l < 0)",
        ("vs = 0", "0 -> 1", 0): "read only once a victim is picked, which sets it from the victim's stream first",
        ("valid[u(victim)] -= 1", "-= -> +=", 0): "a victim being cleaned (state 3) is out of the buckets and its "
                                            "count is not read again before its erase resets it to 0",
        ("for v in range(bp + 1):", "1 -> 2", 0): "scans one bucket past the fullest only when every bucket is empty, "
                                               "which validate() rules out (spare blocks >= min_free + 2)",
        ("elif r_count > 0:", "> -> >=", 0): "an empty FIFO ring with free blocks below min_free is ruled out by "
                                          "validate() (spare blocks >= min_free + 2)",
        ("vi = 0", "0 -> 1", 0): "the scan position is reset when a victim is picked, before it is read",
        ("r_count += 1", "1 -> 2", 0):
            "the FIFO ring's count only gates `r_count > 0`; GC never needs a victim while the ring is truly empty "
            "(validate() keeps spare blocks >= min_free + 2), so an overcount is never acted on",
        ("page = -1", "1 -> 2", 0): "any negative value means 'no page to copy yet' (`while page < 0`)",
        ("p2l[u(q)] = -1", "1 -> 2", 0): "any negative value marks an invalid physical page (every reader tests < 0 / >= 0)",
        ("prv[u(nxt[u(victim)])] = -1", "1 -> 2", 0): "any negative value marks a bucket's head (readers test prv >= 0)",
        ("l2p[u(lpn)] = -1", "1 -> 2", 0):
            "any negative l2p is an unmapped user page: the kernel tests `old >= 0`, FtlModel.check `l2p >= 0`, and "
            "nothing else reads l2p",
        ("state[u(victim)] = 3  # being cleaned: invalidations no longer move it between buckets", "3 -> 4", 0):
            "the mark is only ever compared as `== 2` in the kernel (any other value keeps the victim out of the "
            "buckets) and the victim is erased (state 0) before the host page's write ends, so FtlModel.check's "
            "`state == 3` never sees either value between calls (an out-of-blocks error raises first)",
        ("while page < 0:", "< -> <=", 0):
            "the condition is re-tested only after a pass that found no page (page is still -1: a victim picked, or "
            "an emptied victim erased); every pass that finds a page, page 0 included, leaves by `break`",
        ("while vi < bp and p2l[u(victim * bp + vi)] < 0:", "< -> <=", 0):
            "the first `<`: the scan may step to vi = bp + 1 past an invalid slot after the block's last, but "
            "`if vi < bp` then erases the victim as at vi = bp; the slot read at vi = bp decides nothing (for the "
            "last block it lies one past p2l, which numba does not bounds-check: a read whose value is unused)",
    },
    "trace_waf": {
        # _hierarchy's sizing loop: fit_store caches capacity // slot blocks on both layouts (the store's overhead
        # goes on top), so the first guess n * slot bytes gives n blocks and the loop returns on its first pass
        ('base = HierarchySpec(tiers=(TierSpec("l3", 1),), block_bytes=block_bytes, write_policy=write_policy,',
         "1 -> 2", 0): "the probe spec is read for its slot size and store_fit only (block size, segment size, spare "
                    "slots), never for its tiers",
        ("cap = n * slot", "* -> /", 0):
            "the first pass then finds 0 blocks and the correction adds n slots: n * slot + n / slot bytes hold n "
            "blocks (n / slot < one slot for any miniature, n <= 65,536 < 4096^2), and a tier's bytes are read "
            "only through int() // slot",
        ("for _ in range(4):", "4 -> 5", 0): "an iteration cap never reached: the loop returns on its first pass",
        ("cap += (n - got) * slot", "*"): "the correction never runs: the first guess n * slot gives n blocks",
        # _Collector
        ("_, ev = self.h.run(times[a:b], offsets[a:b + 1] - offsets[a], keys[offsets[a]:offsets[b]],", "1 -> 2", 0):
            "one offset more than the piece's requests: Hierarchy.run counts requests by their times and reads "
            "offsets[r + 1] for r < requests only (the extra one can only raise a buffer's size bound)",
        ("return np.concatenate(self.parts) if self.parts else np.zeros(0, EVENT_DTYPE)", "0 -> 1", 0):
            "a zeroed event is a read (op 0 = EV_READ), which _warm_writes and stream_from_events drop",
        ("if slots.size == 0:", "0 -> 1", 0): "a single write reuses no slot: the general path returns None for it too",
        # store_writes
        ('l2_bytes: float = 0.0, admission: str = "all", spare_slots: int = 64,', "0.0 -> 1.0", 0):
            "one byte of L2 rounds to 0 blocks (round(1 / slot * q)): no L2 either way",
        ("blocks = int(capacity_bytes // slot)", "// -> /", 0):
            "below 2^53 bytes the rounded quotient of a capacity under n slots never reaches n (the gap below n * "
            "slot, over slot, exceeds half the gap below n), so int() truncates to the floor; a negative "
            "capacity is refused either way",
        ("src = sample_keys(trace, q) if q < 1.0 else trace", "1.0 -> 2.0", 0):
            "q <= 1 always, and sample_keys at rate 1.0 returns the trace's own arrays",
        ("src = sample_keys(trace, q) if q < 1.0 else trace", "< -> <=", 0):
            "at q = 1 sample_keys returns the trace's own arrays",
        # Extension
        ('def __init__(self, model, *, rate: float | None = None, seed: int = 0, origin: str = "fitted",', "0 -> 1", 0):
            "the constructor's default: both of extension_for's constructions pass the seed",
        ("self.batches.append(sample_keys(b, self.q) if self.q < 1.0 else b)", "1.0 -> 2.0", 0):
            "self.q <= 1 (a store's rate times the trace's own), and sample_keys at rate 1.0 returns the batch's "
            "own arrays",
        ("self.batches.append(sample_keys(b, self.q) if self.q < 1.0 else b)", "< -> <=", 0):
            "at rate 1 sample_keys returns the batch's own arrays",
        ("span = 0.0", "0.0 -> 1.0", 0):
            "read only when no batch had requests: no writes, and the refusal prints 0 or 1 s as 0 days",
        # stream_from_events, store_waf, trace_waf, WafModel
        ('trim: bool = False, origin: str = "trace", note: str = "", sample_rate: float = 1.0,', "False -> True", 0):
            "stream_from_events' default: both callers (_finish, cluster.wear) pass trim",
        ('def store_waf(sw: StoreWrites, *, op: float = 0.07, erase_block_bytes: int = 256 << 20, gc: str = "greedy",',
         "0.07 -> 0.14", 0): "store_waf's default: every caller (trace_waf, WafModel, fdp, cluster.wear) passes op",
        ("warm_pages = int(w_pages[:wi[sw.warm_writes]].sum()) if sw.warm_writes < wi.size else total", "< -> <=", 0):
            "wi.size is the store's writes (one page extent per write) and warm_writes < writes was checked above",
        ("warmup=(warm_pages + 0.5) / (total + 0.5))", "0.5 -> 1.0", 0):
            "the numerator's (the denominator's is killed by test_a_late_warm_up_cut_equals_the_slow_python_ftl): "
            "int((wp + 1) * total / (total + 0.5)) lies in (wp + 0.5, wp + 1) for wp < total, so the cut is at the "
            "same page",
        ("def trace_waf(trace, *, block_bytes: int, capacity_bytes: float, op: float = 0.07,", "0.07 -> 0.14", 0):
            "trace_waf's default: its only caller (kvbench ftl --trace) passes op",
        ('erase_block_bytes: int = 256 << 20, gc: str = "greedy", **kw) -> StoreWaf:', "*"):
            "trace_waf's default erase unit: its only caller (kvbench ftl --trace) passes erase_block_bytes",
        ("erase_block_bytes: int = 256 << 20, trim: bool = False, max_slots: int = 1 << 13,", "256 -> 257", 0):
            "WafModel's default erase unit: its only caller (plan) passes erase_block_bytes",
        ("erase_block_bytes: int = 256 << 20, trim: bool = False, max_slots: int = 1 << 13,", "20 -> 21", 0):
            "WafModel's default erase unit: its only caller (plan) passes erase_block_bytes",
        ("erase_block_bytes: int = 256 << 20, trim: bool = False, max_slots: int = 1 << 13,", "<< -> >>", 0):
            "the erase unit's (max_slots' `1 << 13` is killed): WafModel's only caller (plan) passes "
            "erase_block_bytes",
        ("if not blocks >= 1:", ">= -> >", 0): "at exactly 1 block the grid gives round(10 ** 0) = 1 as well",
    },
    "recompute": {
        ("grid = np.unique(np.round(np.geomspace(1, max_tokens, 4096)).astype(np.int64))", "4096 -> 4097", 0):
            "the grid only brackets sign changes; bisection then finds the exact integers",
        ("lo = grid[lo_i] if lo_i == 0 else self._first_win(tier, grid[lo_i - 1], grid[lo_i], suffix)", "0 -> 1", 0):
            "grid[0] = 1 and grid[1] = 2 for every max_tokens: at lo_i = 0 the bisection over (grid[-1], 1] returns "
            "1 = grid[0] at once, and at lo_i = 1 bisecting (1, 2] gives 2 = grid[1]",
        ("if not self.pipelined or hi <= 0:", "or -> and", 0):
            "not pipelined, every bisection point lies below hi, where loading loses (exposed = latency + bytes / "
            "bw), so hi is returned unchanged",
        ("return float(self.margin(replace(tier, bandwidth_bytes_per_s=bw), n, suffix)) > 0", "> -> >=", 0):
            "a margin of exactly 0 at an (irrational) bisection point moves the bracket to that point either way: "
            "the answer stays within the bisection's 1e-9 relative tolerance",
        ("lo, floor = hi / 2, hi * 1e-12", "2 -> 3", 0): "the bracket's start: the same root within 1e-9",
        ("lo, floor = hi / 2, hi * 1e-12", "/ -> *", 0):
            "a bracket from 2 hi halves down to the root's bracket: the same root within 1e-9",
        ("lo, floor = hi / 2, hi * 1e-12", "1e-12 -> 2e-12", 0):
            "the floor guards a loop that ends long before it: layer 0's load is always exposed, so loading loses "
            "as the bandwidth falls to 0 (no input reaches 1e-12 of the plain break-even)",
        ("while wins(lo) and lo > floor:           # exposed time falls as bandwidth rises: bracket, then bisect",
         "> -> >=", 0): "the floor is never reached (see the floor's constant)",
        ("hi, lo = lo, lo / 2", "2 -> 3", 0): "the bracket's step: the same root within 1e-9",
        ("for _ in range(200):", "200 -> 201", 0):
            "an iteration cap: from a bracket ratio of 2 the geometric bisection reaches 1 + 1e-9 in about 30 steps",
        ("if hi / lo < 1 + 1e-9:", "1e-09 -> 2e-09", 0):
            "the stopping tolerance: 1e-9 or 2e-9 of a bandwidth (tests check the zero margin to 1e-6)",
        ("if hi / lo < 1 + 1e-9:", "+ -> -", 0):
            "never stopping early runs the 200 steps to float precision: the same root, more digits",
        ("if hi / lo < 1 + 1e-9:", "< -> <=", 0): "the stopping tolerance's boundary: the same root within 1e-9",
        ("cap = np.where(total > self.full_blocks, self.full_blocks / np.maximum(total, 1e-12), 1.0)",
         "1e-12 -> 2e-12", 0):
            "total is a sum of hit counts (>= 0): below 1e-12 it is 0, where total > full_blocks is false and the "
            "guarded quotient is never selected",
        ("if t.read_bw_bytes_per_s and t.read_lat_p50_s is not None and t.read_bw_bytes_per_s > 0:", "> -> >=", 0):
            "a bandwidth of 0 is already rejected by `t.read_bw_bytes_per_s and`",
        ("was_seen = np.isin(keys, seen, assume_unique=False) | earlier_in_batch", "False -> True", 0):
            "numpy 2's isin answers the same with repeated keys whatever assume_unique says (np.isin([6, 6, 1], "
            "[1, 9], assume_unique=True) is [False, False, True]): a speed hint; test_trace_prefixes_pipelined_by_hand "
            "repeats a new block inside a request, so a numpy where it matters fails it",
        ("curve_n = curve_tokens(max(int(lengths.max()) if lengths.size else 1, ref))", "1 -> 2", 0):
            "with no lengths the curve runs to max(1 or 2, ref); curve_tokens already runs to at least 2",
        ("def trace_prefixes(path, *, batch_requests: int = 65536, limit: int | None = None) -> TracePrefixes:",
         "65536 -> 65537", 0): "the batch size: results are batch-invariant (test_trace_prefixes_match_a_set_reference "
                            "at batches of 7 and 65,536)",
        ("hits, inputs, block_tokens = [], [], 0", "0 -> 1", 0):
            "only read when no batch was read, and an empty trace (or limit 0) is a TraceError before that",
        ("return TracePrefixes(str(path), np.concatenate(hits) if hits else np.zeros(0, np.int64),", "0 -> 1", 0):
            "an empty trace is a TraceError: there is always a batch",
        ("np.concatenate(inputs) if inputs else np.zeros(0, np.int64), block_tokens)", "0 -> 1", 0):
            "an empty trace is a TraceError: there is always a batch",
        ("cap = np.where(total > self.full_blocks, self.full_blocks / np.maximum(total, 1e-12), 1.0)", "> -> >=", 0):
            "at total == full_blocks the cap is full/total = 1, the same as the else branch",
        ("tier, grid[hi_i - 1], grid[hi_i], suffix, want=False) - 1", "1 -> 2", 0):
            "a wider bracket (grid[hi_i - 2] also wins) bisects to the same first losing length",
    },
    # the admissions' kernel parameters (once read by tiers.py from their private fields)
    "sim.admission": {
        ("seen = self._seen.size if self._seen is not None else 0", "0 -> 1", 0):
            "prefix-depth without beyond_shared has no seen list; the kernel reads ADMG0 only in _adm_begin, which "
            "runs only with beyond_shared (ABEYOND >= 0): a laid-out, never-used ghost",
        ("return dict(code=self.kernel_code, ghosts=(self._seen.size if self._seen is not None else 0,),", "0 -> 1",
         0): "threshold without a window has no seen list; the kernel reads ADMG0 only when AWIN is set (_admit, "
             "_adm_observe): a laid-out, never-used ghost",
    },
    "tiers": {
        ("self._evcap = max(2 * int(G[K.G_EVCAP]), int(G[K.G_NEV] + 2 * G[K.G_EVNEED]))", "max -> min", 0):
            "how far the event buffer grows: a size still short of the kernel's bound returns NEED_GROW again and "
            "the loop grows it again (_build keeps the state), so only the number of rounds changes",
        ("if n + 16 > self._pec or self._one is None or self._one[3].shape[0] < self._pec:", "> -> >=", 0):
            "rebuilds the per-request buffers one request size earlier: _build keeps what the old state holds",
        ("self._build(max(2 * self._pec, n + 16))", "* -> /", 0):
            "the new size is still at least n + 16, what the request needs; _build keeps the state",
        ("self._now = 0.0", "0.0 -> 1.0", 0): "request() sets _now before anything reads it",
        ("def _insert(self, ti: int, key, version: int, kind: int, depth: int = -1) -> None:", "1 -> 2", 0):
            "a demotion's depth: every admission policy tests only depth < 0 / >= 0",
        ("found = [-1] * n", "1 -> 2", 0): "a miss is any negative value: found is read as `>= 0` or for i < h only",
        ("versions = [0] * h", "0 -> 1", 0): "every entry is written (the hit's version) before it is read",
        ("nseg = -(-cap // segs) + max(1, int(kw.get(\"spare_segments\", 1)))", "max -> min", 0):
            "fit_store always asks for exactly 1 spare segment: min(1, 1) = max(1, 1)",
        ('scap=getattr(pol, "small_capacity", 0), mcap=getattr(pol, "main_capacity", 0),', "*"):
            "the defaults are for LRU/FIFO, whose SCAP/MCAP fields the kernel reads only for S3-FIFO (POL_S3)",
        # the compiled state's first layout: run() sets its own bounds per batch (G_NEED, G_EVNEED) and grows
        # node pools, event room and per-request arrays before any request that could overrun them
        ("self._pec = 0", "0 -> 1", 0): "_build sets _pec before it is read",
        ("most = max(0, int(max_request_blocks or 0))", "*"):
            "the first layout's request size (a hint): run() grows the layout for longer requests, same results",
        ("pec = max(256, most + 16)", "*"): "the first layout's request room: run() grows it (most + 16 > _pec)",
        ("need = 8 * most + 256 + 4 * max(self._segs)           # free nodes the kernel asks of a pool per request",
         "*"): "the first node pools' size: the kernel sets G_NEED itself per request and run() grows a pool below it",
        ("self._evcap = max(1024, 2 * self._ev_need(most))", "*"):
            "the first event room: run() sets G_EVNEED and grows the room before a request that could overrun it",
        ("self._pools = [min(self._pool_max(z, pec), max(POOL_START, need)) for z in self._sizes]", "*"):
            "the first node pools' size: the kernel asks to grow (NEED_GROW) a pool below G_NEED",
        ("self._req = 0", "0 -> 1", 0):
            "run() sets _req from first_request; before any run() only request() reads it, as the number of "
            "events it discards (its return has no request number) - in both hierarchies",
        # the compile warm-up in __init__: an empty batch whose results are discarded
        ("z, z1 = np.zeros(0, np.int64), np.zeros(1, np.int64)", "*"): "the compile warm-up's arguments",
        ("K.run_requests(self._A, np.zeros(0), z1, z, 0, np.zeros((0, 8), np.int64), self._xbuf, z1, z1.copy(),",
         "*"): "the compile warm-up's arguments: an empty batch (times of length 0), nothing simulated",
        ("np.zeros(4, np.int64))", "*"): "the compile warm-up's hit row",
        ("K.fill_requests(np.zeros((0, 8), np.int64), np.zeros(0), np.zeros(0, REQUEST_DTYPE))", "*"):
            "the compile warm-up of fill_requests: its output is discarded",
        ("K.fill_events(self._A, np.zeros(0, EVENT_DTYPE))", "*"):
            "the compile warm-up of fill_events: its output is discarded",
        **_each(('row = {K.ADM: a.get("code", 0), K.ADMG0: -1, K.ADMG1: -1, K.ADEPTH: -1, K.ABEYOND: -1}', "1 -> 2"), (0, 1, 2, 3),
            "an unused ghost index or depth: the kernel reads ADMG0/ADMG1 only for the policies that set them, "
            "and ADEPTH/ABEYOND only as `>= 0`"),
        ('size["SK"] += 4 * (width // 16)', "4 -> 5", 0): "a longer sketch array than the 4 rows read: the tail is unused",
        ('row[K.AMINB] = a.get("min_blocks", 0)', "0 -> 1", 0):
            "the kernel reads AMINB only for threshold admission, whose parameters always carry min_blocks",
        ('rows.append((row, a.get("window") or 0.0))', "0.0 -> 1.0", 0):
            "a tier's window is read only when AWIN is set, i.e. when the threshold policy has a window",
        **_each(("[nb, g, hb, hsize - 1, -1, -1, 0, g + 1]", "1 -> 2"), (0, 1, 2, 3),
            "a ghost list's header: head/tail -2 are as empty as -1 (read as >= 0); a free count of g + 2 is never "
            "reached (a full list drops its oldest first); mask hsize - 2 probes the even slots only, which are "
            "hsize / 2 >= g + 1: room for every key"),
        **_each(("return (len(self._segs) + 1) * (8 * (most + 1) + 8 * sum(self._segs)) + 64", "1 -> 2"), (0, 1),
            "a larger per-request event bound: the room grows sooner"),
        ("return (len(self._segs) + 1) * (8 * (most + 1) + 8 * sum(self._segs)) + 64", "+ -> -", 1):
            "the surviving variant is 8 * (most - 1): 16 rows less per tier, within the bound's margin (a block "
            "writes at most about 5 events over all tiers against 8 reserved per tier, plus 64 rows); the "
            "`- 8 * sum(segs)` and `len - 1` variants are killed by the long log batch and the long request",
        **_each(("return (len(self._segs) + 1) * (8 * (most + 1) + 8 * sum(self._segs)) + 64", "8 -> 9"), (0, 1),
            "a larger per-request event bound: the room grows sooner"),
        ("return (len(self._segs) + 1) * (8 * (most + 1) + 8 * sum(self._segs)) + 64", "64 -> 65", 0):
            "a larger per-request event bound: the room grows sooner",
        ('return z["cap"] + (z["mcap"] if z["pol"] == 2 else 0) + 2 * pec + 256', "0 -> 1", 0):
            "one node more in a pool's bound",
        ('return z["cap"] + (z["mcap"] if z["pol"] == 2 else 0) + 2 * pec + 256', "2 -> 3", 1):
            "the 3 * pec variant: a larger pool bound (the `pol == 3` variant, which drops S3-FIFO's ghosts, is "
            "killed by test_s3fifo_tier_under_a_stream_of_new_blocks_keeps_its_ghosts)",
        ("size = {n: 0 for n in K.INT_ARRAYS + K.FLOAT_ARRAYS}", "0 -> 1", 0):
            "every per-tier array one element longer: the tail is never addressed",
        ('size["TTL"] = 4', "4 -> 5", 0): "a longer TTL array than the 4 tiers read",
        ("hsize = 1 << max(4, int(2 * nn - 1).bit_length())", "*"):
            "a node pool's hash table size: the surviving variants give a table as large or larger (2 * nn - 2 "
            "has the bit length of the odd 2 * nn - 1), which holds the same keys; tier_keys' order is read "
            "into dicts and sets only",
        ("A = _aligned_zeros(ev_base + 8 * self._evcap)", "8 -> 9", 0):
            "a longer state array than the event rows addressed: the tail is unused",
        ("self._xbuf = np.zeros(int(I[:T, K.NN].max()) + pec + 16, np.int64)", "16 -> 17", 0):
            "a longer scratch buffer for expired keys",
        **_each(('arrs["PEXP"][r[K.PEB]:r[K.PEB] + pen] = o["PEXP"][orow[K.PEB]:orow[K.PEB] + pen]', "+ -> -"), (0, 1),
            "pen > 0 between requests needs a lookup-time expiry, which only the retention float-edge bug "
            "produces (test_a_decimal_gap_equal_to_the_ttl_is_kept_and_never_breaks_the_tier, xfail); otherwise the "
            "pending list is empty at every relayout and both slices are empty"),
        ("if most + 16 > self._pec:", "+ -> -", 0):
            "relays out only for requests longer than pec + 16 instead of pec - 16: pec sizes the pending list "
            "(empty outside the float-edge bug) and the pools' bound, whose margin (2 * pec + 256) covers it",
        ("self._build(max(2 * self._pec, most + 16))", "16 -> 17", 0): "one more block of room",
        ("rows = np.zeros((n, 8), np.int64)", "8 -> 9", 0): "a ninth, unused column of the per-request rows",
        ("self._xbuf, found, versions, np.zeros(4, np.int64))", "4 -> 5", 0): "a fifth, unused hit-row entry",
        **_each(("self._evcap = max(2 * int(G[K.G_EVCAP]), int(G[K.G_NEV] + 2 * G[K.G_EVNEED]))", "2 -> 3"), (0, 1),
            "the event room grows faster"),
        ("if self._I[t, K.FTOP] < G[K.G_NEED]:", "< -> <=", 0): "a pool at exactly the reserve grows one call sooner",
        ("self._pools[t] = max(2 * int(self._I[t, K.NN]), int(self._I[t, K.NN]) + int(G[K.G_NEED]))",
         "max -> min", 0): "the pool still grows (by min(NN, NEED) > 0 nodes) and the kernel asks again until it "
                        "has the reserve: more rebuilds, the same results",
        ("hsize = 1 << max(4, int(2 * (g + 1) - 1).bit_length())", "*"):
            "a ghost list's hash table size: a larger table (every surviving variant) holds the same keys",
    },
    "tiers_kernel": {
        **_each(("A[u(GB + G_NEED)] = 8 * n + 256 + 4 * A[u(GB + G_MAXSEGS)]", "8 -> 9"), (0,),
            "a larger free-node reserve: pools grow sooner (moved from tiers.py, where run() once set G_NEED)"),
        **_each(("A[u(GB + G_NEED)] = 8 * n + 256 + 4 * A[u(GB + G_MAXSEGS)]", "4 -> 5"), (0,),
            "a larger free-node reserve: pools grow sooner (moved from tiers.py, where run() once set G_NEED)"),
        ("if i >= A[u(GB + G_EVCAP)]:             # the room reserved per request was not enough: nothing is written",
         ">= -> >", 0): "a safety net: run() reserves the request's event bound (_ev_need) before each request and grows "
                     "the room first, so the row index never reaches G_EVCAP",
        ("if (j > i and (k <= i or k > j)) or (j < i and (k <= i and k > j)):", "> -> >=", 0):
            "j == i would mean the backward-shift probe wrapped the whole ghost table, which always has an empty "
            "slot (2 (g + 1) slots or more for g keys): the loop stops at it first",
        ("if A[u((t) * NF + ADEPTH)] >= 0 and A[u((t) * NF + ADEPTH)] < limit:", ">= -> >", 0):
            "ADEPTH is -1 (no depth) or a depth >= 1 (prefix-depth refuses 0): never 0",
        ("late = loop_end > start and A[u(A[u(GB + B_SWR)] + A[u((t) * NF + SLOTB)] + slot)] == req_mark", "> -> >=", 0):
            "loop_end == start means the request wrote no event yet, so no slot carries this request's mark (marks "
            "never repeat, and a slot is marked only by a write, which emits one): the second test is false either way",
        ("if A[u((t) * NF + POL)] == POL_S3:", "* -> /", 0):
            "reads tier 0's policy code instead of tier t's (t / NF truncates to 0), so _live counts the wrong "
            "queues; _live only sets when the idle heap is rebuilt from the live keys (see `== -> !=`), which "
            "never changes which key expires when",
        ("if A[u((t) * NF + POL)] == POL_S3:", "== -> !=", 0):
            "_live only sets when the idle heap is rebuilt from the live keys (a memory bound): rebuilding earlier "
            "or later drops stale entries, never changes which key expires when",
        ("A[u(e + O_KEY)] = key", "+ -> -", 0): "O_KEY is 0: e + 0 and e - 0 are the same index",
        ("i = _home(A[u(e + O_KEY)], mask)", "+ -> -", 0): "O_KEY is 0: e + 0 and e - 0 are the same index",
        ("nb = A[u(h + GH_NB)]", "+ -> -", 0): "GH_NB is 0: h + 0 and h - 0 are the same index",
        ("A[u(GB + G_PHASE)] = 0", "+ -> -", 0):
            "leaves PHASE at 1 after the lookup loop and zeroes A[GB - 3], tier 3's ESLOT: an evict frame field "
            "dead outside _cascade. Writes marked after the loop carry this request's mark, read only by this "
            "request's hit-read classification, which is already done; the next request takes mark + 1 and sets "
            "PHASE itself",
        ("v = A[u((t) * NF + QH1)] if ql1 > 0 and (ql1 >= A[u((t) * NF + SCAP)] or A[u((t) * NF + QL0)] == 0) \\", "0 -> 1", 1):
            "the `QL0 == 1` variant (the `ql1 > 1` one is killed by the targeted TinyLFU-on-S3-FIFO trace): the "
            "victim is asked only of a full tier (QL0 + QL1 >= CAP), where one key in M leaves CAP - 1 >= SCAP "
            "in S (the first disjunct already holds) or, at CAP 1, none (ql1 > 0 fails): the `QL0 == 0` test "
            "never decides",
        **_each(("return -1, -1", "1 -> 2"), (0, 1),
            "_ins_begin's 'insert over' (refreshed, refused, out of nodes): every caller tests n < 0 and then "
            "ignores the victim"),
        ("_emit(A, t, EV_TRIM, TRIM, A[u((t) * NF + TR0F + 2 * j)], n, 0, -1)", "2 -> 3", 0):
            "the second trim pair is never filled (TRN <= 1): an alloc whose dead head segment is freed takes its "
            "new head from the free list, so it never also reclaims (as LogStore.alloc)",
        ("return -1", "1 -> 2", 0):
            "_find's 'absent': every caller tests n < 0 / >= 0 or looks up a key it knows is resident",
    },
    "histogram": {
        ("v = np.clip(np.asarray(values_ns, dtype=np.int64), 0, (1 << MAX_BITS) - 1)", "1 -> 2", 1):
            "clipping at 2^44 - 2 instead of 2^44 - 1: both lie in the top bucket (width 2^36)",
        ("sub = (v >> shift) - np.where(k >= SUB_BITS, SUB, 0)", "0 -> 1", 0):
            "sub is only used where k >= SUB_BITS; below, the index is v itself",
        ("return np.where(k >= SUB_BITS, SUB + (k - SUB_BITS) * SUB + sub, v).astype(np.int64)", ">= -> >", 0):
            "for k = 7 (128..255 ns) the octave formula gives SUB + 0 + (v - SUB) = v: the same index",
        ("linear = i >= SUB", ">= -> >", 0):
            "bucket 128 is 128 with width 1 by either formula (octave 0)",
        ("low = np.where(linear, (SUB + (i - SUB) % SUB) << octave, i)", "- -> +", 0):
            "(i + 128) % 128 == (i - 128) % 128",
        ("rank = max(1, int(np.ceil(q / 100.0 * self.count - 1e-9)))", "1e-09 -> 2e-09", 0):
            "the epsilon only absorbs float noise (< 1e-9 for counts below 1e6): q/100*count is otherwise an "
            "integer or at least 1e-4 above one (q has at most 4 decimals), so any epsilon in between ranks alike",
    },
}

_BINOP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Div,
          ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult, ast.LShift: ast.RShift, ast.RShift: ast.LShift,
          ast.BitAnd: ast.BitOr, ast.BitOr: ast.BitAnd, ast.BitXor: ast.BitOr}
_CMPOP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
          ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}
_SWAP_CALLS = {"min": "max", "max": "min"}
_SYM = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**",
        ast.LShift: "<<", ast.RShift: ">>", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.Lt: "<",
        ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=", ast.Is: "is",
        ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in", ast.And: "and", ast.Or: "or"}


class _Mutator(ast.NodeTransformer):
    """Walks a module; counts mutation sites in a fixed order and applies the one numbered ``target``."""

    def __init__(self, target: int = -1):
        self.target, self.n, self.sites = target, 0, []

    def _site(self, node, change: str) -> bool:
        hit = self.n == self.target
        self.sites.append((node.lineno, change))
        self.n += 1
        return hit

    # --- what is never mutated: docstrings, decorators (njit flags), type annotations, messages
    def visit_FunctionDef(self, node):
        body = node.body[1:] if _is_docstring(node.body) else node.body
        for stmt in body:
            self.visit(stmt)
        a = node.args
        a.defaults = [self.visit(d) for d in a.defaults]
        a.kw_defaults = [None if d is None else self.visit(d) for d in a.kw_defaults]
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        for stmt in node.body[1:] if _is_docstring(node.body) else node.body:
            self.visit(stmt)
        return node

    def visit_AnnAssign(self, node):
        if node.value is not None:
            node.value = self.visit(node.value)
        return node

    def visit_JoinedStr(self, node):
        return node

    def visit_Raise(self, node):          # the error's text is not behaviour the tests pin digit by digit
        return node

    def visit_Assert(self, node):
        return node

    # --- sites
    def visit_BinOp(self, node):
        self.generic_visit(node)
        new = _BINOP.get(type(node.op))
        if new and self._site(node, f"{_SYM[type(node.op)]} -> {_SYM[new]}"):
            node.op = new()
        return node

    def visit_AugAssign(self, node):
        self.generic_visit(node)
        new = _BINOP.get(type(node.op))
        if new and self._site(node, f"{_SYM[type(node.op)]}= -> {_SYM[new]}="):
            node.op = new()
        return node

    def visit_Compare(self, node):
        self.generic_visit(node)
        for i, op in enumerate(node.ops):
            new = _CMPOP.get(type(op))
            if new and self._site(node, f"{_SYM[type(op)]} -> {_SYM[new]}"):
                node.ops[i] = new()
        return node

    def visit_BoolOp(self, node):
        self.generic_visit(node)
        new = ast.Or if isinstance(node.op, ast.And) else ast.And
        if self._site(node, f"{_SYM[type(node.op)]} -> {_SYM[new]}"):
            node.op = new()
        return node

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Not) and self._site(node, "not x -> x"):
            return node.operand
        if isinstance(node.op, ast.USub) and not isinstance(node.operand, ast.Constant) \
                and self._site(node, "-x -> x"):
            return node.operand
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in _SWAP_CALLS:
            new = _SWAP_CALLS[node.func.id]
            if self._site(node, f"{node.func.id} -> {new}"):
                node.func = ast.Name(id=new, ctx=ast.Load())
        return node

    def visit_Constant(self, node):
        v = node.value
        if isinstance(v, bool):
            if self._site(node, f"{v} -> {not v}"):
                return ast.copy_location(ast.Constant(value=not v), node)
        elif isinstance(v, int):
            if self._site(node, f"{v} -> {v + 1}"):
                return ast.copy_location(ast.Constant(value=v + 1), node)
        elif isinstance(v, float):
            new = v * 2 if v else 1.0
            if self._site(node, f"{v!r} -> {new!r}"):
                return ast.copy_location(ast.Constant(value=new), node)
        return node


def _is_docstring(body) -> bool:
    return bool(body) and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
        and isinstance(body[0].value.value, str)


def mutants(source: str) -> list[tuple[int, str]]:
    """(line, change) of every mutation site of a module, in a fixed order."""
    m = _Mutator()
    tree = ast.parse(source)
    body = tree.body[1:] if _is_docstring(tree.body) else tree.body
    for stmt in body:
        m.visit(stmt)
    return m.sites


def site_keys(source: str, sites=None) -> list[tuple[str, str, int]]:
    """(stripped line, change, occurrence) of every site, in :func:`mutants`' order: the occurrence counts the
    earlier sites of the same change on the same line, so the key names one site (EQUIVALENT's keys)."""
    lines = source.splitlines()
    seen: dict[tuple[int, str], int] = {}
    out = []
    for ln, ch in mutants(source) if sites is None else sites:
        k = seen.get((ln, ch), 0)
        seen[(ln, ch)] = k + 1
        out.append((lines[ln - 1].strip() if 0 < ln <= len(lines) else "", ch, k))
    return out


def equivalents(name: str, source: str, keys=None) -> tuple[dict, list[tuple[tuple, str]]]:
    """(the module's EQUIVALENT entries that name a site of ``source``, the stale ones with why): an entry whose
    line is gone, or whose line no longer has that site, judges nothing and is listed instead."""
    keys = site_keys(source) if keys is None else keys
    have, sited = set(keys), {k[0] for k in keys}
    texts = {ln.strip() for ln in source.splitlines()}
    live, stale = {}, []
    for key, why in EQUIVALENT.get(name, {}).items():
        if len(key) == 2 and key[1] == "*":
            ok = key[0] in sited
        elif len(key) == 3 and key[1] != "*" and isinstance(key[2], int):
            ok = key in have
        else:
            raise SystemExit(f"mutation: EQUIVALENT[{name!r}] key {key!r}: name one site as (line, change, "
                             "occurrence) or a whole line as (line, '*')")
        if ok:
            live[key] = why
        else:
            stale.append((key, "its line is gone" if key[0] not in texts else "its line has no such site"))
    return live, stale


def judge(equiv: dict, text: str, change: str, occurrence: int | None) -> str | None:
    """The reason the site (text, change, occurrence) is equivalent, or None; an unknown occurrence matches only
    a whole-line entry."""
    if occurrence is not None and (text, change, occurrence) in equiv:
        return equiv[(text, change, occurrence)]
    return equiv.get((text, "*"))


def _occurrence(row: dict, keys: list) -> int | None:
    """A saved survivor's occurrence: recorded, or (results written before occurrences were) the current module's
    at its site index when that site is still the same line text and change; otherwise unknown."""
    if row.get("occurrence") is not None:
        return int(row["occurrence"])
    k = row.get("site")
    if isinstance(k, int) and 0 <= k < len(keys) and keys[k][:2] == (row["source"], row["change"]):
        return keys[k][2]
    return None


def _stale_lines(rel: str, stale: list) -> list[str]:
    return [f"    stale EQUIVALENT entry ({why}; not used): {rel}: {key[1]}"
            + (f" #{key[2]}" if len(key) == 3 else "") + f" | {key[0][:80]}" for key, why in stale]


def mutate(source: str, k: int) -> str:
    tree = ast.parse(source)
    m = _Mutator(k)
    body = tree.body[1:] if _is_docstring(tree.body) else tree.body
    for stmt in body:
        m.visit(stmt)
    return ast.unparse(ast.fix_missing_locations(tree))


class _Sandbox:
    """A private copy of the repository (package, tests, presets) where one module is swapped per mutant."""

    _stamp = int(time.time()) + 10_000

    def __init__(self, root: Path):
        self.root = root
        for part in ("kvbench", "tests", "workloads", "pyproject.toml"):
            src = REPO / part
            if src.is_dir():
                shutil.copytree(src, root / part, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                shutil.copy2(src, root / part)
        self.env = {"PYTHONPATH": str(root)}

    def write(self, rel: str, text: str) -> None:
        p = self.root / rel
        p.write_text(text)
        # numba and the bytecode cache key a module by its file's (mtime, size): a fresh mtime per write means a
        # mutated kernel is compiled from the mutated source, never loaded from the original's cache
        _Sandbox._stamp += 7
        os.utime(p, (_Sandbox._stamp, _Sandbox._stamp))

    def run(self, tests: list[str], timeout_s: float) -> str:
        """Run the tests on the current mutant in a forked child of this process: numpy, numba, pandas and
        pytest are imported once (see _preload) and kvbench is imported fresh from the sandbox in each child,
        so a mutant costs its tests, not an interpreter start (3-4 s on a loaded 2-core machine)."""
        args = ["-x", "-q", "-p", "no:cacheprovider", "--timeout", str(int(timeout_s)), *tests]
        pid = os.fork()
        if pid == 0:                                   # child: never returns
            code = 4
            try:
                os.chdir(self.root)
                sys.path.insert(0, str(self.root))
                os.environ.update(self.env)
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, 1)
                os.dup2(null, 2)
                import pytest

                code = int(pytest.main(args))
            finally:
                os._exit(code)
        deadline = time.monotonic() + timeout_s * 2
        try:
            while True:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                if time.monotonic() > deadline:
                    os.kill(pid, 9)
                    os.waitpid(pid, 0)
                    return "timeout"
                time.sleep(0.02)
        except BaseException:                          # stopped mid-mutant: end its run before the sandbox goes
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            raise
        if os.WIFSIGNALED(status):
            return "killed"                            # a mutant that crashes the interpreter is caught
        code = os.WEXITSTATUS(status)
        if code == 0:
            return "survived"
        # 1: a test failed; 2: collection failed (the mutant broke the import); 3: internal error in a test run;
        # 4: a selected node id (tests/x.py::test_y) was not found, which a mutant causes by breaking that test
        # module's import (the unmutated baseline run has shown every node id exists);
        # pytest-timeout's thread method exits the process with 1 after dumping the stacks
        return "killed" if code in (1, 2, 3, 4) else f"error{code}"


def _preload(cache_dir: Path) -> None:
    """Import the heavy third-party modules once, before forking (not kvbench: each child imports its own)."""
    os.environ["NUMBA_CACHE_DIR"] = str(cache_dir)
    os.environ["HYPOTHESIS_PROFILE"] = "mutation"
    import click  # noqa: F401
    import hypothesis  # noqa: F401
    import numba  # noqa: F401
    import numpy  # noqa: F401
    import pandas  # noqa: F401
    import pytest  # noqa: F401


def run_module(name: str, jobs: int, timeout_s: float, only_lines: set[int] | None, out_dir: Path,
               every: int = 1, survivors_only: bool = False, offset: int = 0, changes: str | None = None) -> dict:
    rel, tests = MODULES[name]
    tests = [t for t in tests if (REPO / t.split("::")[0]).exists()]       # paths or pytest node ids
    if name in LANES:
        tests = ["-m", LANES[name], *tests]
    source = (REPO / rel).read_text()
    sites = mutants(source)
    keys = site_keys(source, sites)
    equiv, stale = equivalents(name, source, keys)
    todo = [k for k, (ln, ch) in enumerate(sites) if (only_lines is None or ln in only_lines)
            and (changes is None or re.search(changes, ch))][offset::max(1, every)]
    prev, origin, again = None, {}, []
    if survivors_only:     # rerun only what survived last time (matched by source line and change)
        prev = json.loads((out_dir / f"{name}.json").read_text())
        # listed since: not rerun; judged equivalent before by an entry now stale or gone: a survivor again
        again = [r for r in prev["survivors"] if judge(equiv, r["source"], r["change"], _occurrence(r, keys)) is None]
        # each survivor is rerun once, at the site of the same source text, change (and occurrence on its line,
        # when recorded) nearest its old line (the text may have moved; an identical line elsewhere that was not
        # in the sample is not added to it)
        todo, pending, origin = [], {}, {}
        for k, (text, ch, _) in enumerate(keys):
            pending.setdefault((text, ch), []).append(k)
        for r in again:
            ks = [k for k in pending.get((r["source"], r["change"]), []) if k not in origin]
            if r.get("occurrence") is not None:
                ks = [k for k in ks if keys[k][2] == r["occurrence"]]
            if r.get("site") in ks:          # the same site, when the module is unchanged up to it
                origin[r["site"]] = r
            elif ks:
                origin[min(ks, key=lambda k: abs(sites[k][0] - r["line"]))] = r
        todo = sorted(origin)
    with tempfile.TemporaryDirectory(prefix="kvbench-mut-") as tmp:
        boxes = [_Sandbox(Path(tmp) / f"w{i}") for i in range(max(1, jobs))]
        _preload(Path(tempfile.gettempdir()) / "kvbench-mut-numba-cache")
        # the unmutated (re-printed) module must pass: otherwise every mutant would look killed
        boxes[0].write(rel, mutate(source, -1))
        base = boxes[0].run(tests, timeout_s * 3)
        if base != "survived":
            raise SystemExit(f"mutation: the tests of {name} fail on the unmutated module ({base}); fix that first")

        def one(i_k):
            i, k = i_k
            box = boxes[i % len(boxes)]
            box.write(rel, mutate(source, k))
            return k, box.run(tests, timeout_s)

        results: dict[int, str] = {}
        stopped = False
        try:
            for i, k in enumerate(todo):
                results.update([one((0, k))])
                if results[k] == "survived":             # progress on stderr: survivors as they are found
                    print(f"  [{i + 1}/{len(todo)}] survived {rel}:{sites[k][0]}: {sites[k][1]}", file=sys.stderr,
                          flush=True)
        except (KeyboardInterrupt, SystemExit):          # stopped (Ctrl-C, SIGTERM): keep what was measured
            stopped = True
        if stopped:
            print(f"  stopped after {len(results)} of {len(todo)} mutants: the figures cover those",
                  file=sys.stderr, flush=True)
            todo = [k for k in todo if k in results]
    rows, counts = [], {"killed": 0, "timeout": 0, "survived": 0, "equivalent": 0, "error": 0}
    for k in todo:
        ln, _ = sites[k]
        text, change, occ = keys[k]
        status = results[k]
        reason = judge(equiv, text, change, occ)
        if status == "survived" and reason is not None:
            status = "equivalent"
        counts[status if status in counts else "error"] += 1
        if status not in ("killed", "timeout"):
            rows.append({"line": ln, "site": k, "occurrence": occ, "change": change, "source": text, "status": status,
                         "reason": reason if status == "equivalent" else None})
    if prev is not None:   # merge: what was killed before stays killed (tests only grew)
        kept = [{**r, "status": "equivalent", "reason": judge(equiv, r["source"], r["change"], _occurrence(r, keys))}
                for r in prev["survivors"] if r not in again]
        # survivors not rerun (stopped first, or their line is gone) stay survivors: nothing listed judges them
        for k, r in list(origin.items()) + [(None, r) for r in again if r not in origin.values()]:
            if k in results:
                continue
            st = "survived" if r["status"] in ("survived", "equivalent") else r["status"]
            rows.append({**r, "status": st, "reason": None})
            counts["survived" if st == "survived" else "error"] += 1
        rows += kept
        counts["equivalent"] += len(kept)
        counts["timeout"] = prev["timeout"]
        counts["killed"] = prev["mutants"] - counts["survived"] - counts["equivalent"] - counts["error"] - \
            counts["timeout"]
        todo = range(prev["mutants"])
    live = counts["killed"] + counts["timeout"] + counts["survived"] + counts["error"]
    rate = (counts["killed"] + counts["timeout"]) / live if live else 1.0
    report = {"module": rel, "tests": tests, "sites": len(sites), "mutants": len(todo), **counts, "kill_rate": rate,
              "stopped": stopped, "survivors": rows,
              "stale_equivalent": [{"key": list(key), "why": why} for key, why in stale]}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{name}.json").write_text(json.dumps(report, indent=1))
    return report


def report(names, out_dir: Path) -> int:
    """The kill rate per module from saved results, survivors re-judged against EQUIVALENT (no rerun)."""
    print(f"{'module':<34} {'mutants':>7} {'killed':>6} {'surv':>5} {'equiv':>5} {'rate':>7}")
    for n in names:
        f = out_dir / f"{n}.json"
        if not f.is_file():
            continue
        r = json.loads(f.read_text())
        source = (REPO / MODULES[n][0]).read_text()
        keys = site_keys(source)
        equiv, stale = equivalents(n, source, keys)
        # every survivor re-judged: one listed before by an entry now stale or gone is live again
        live = [s for s in r["survivors"] if s["status"] in ("survived", "equivalent")
                and judge(equiv, s["source"], s["change"], _occurrence(s, keys)) is None]
        eq = sum(1 for s in r["survivors"] if s["status"] in ("survived", "equivalent")) - len(live)
        killed = r["killed"] + r["timeout"]
        rate = killed / (killed + len(live)) if killed + len(live) else 1.0
        print(f"{r['module']:<34} {r['mutants']:>7} {killed:>6} {len(live):>5} {eq:>5} {rate:>7.1%}")
        for s in live:
            print(f"    survived  {r['module']}:{s['line']}: {s['change']:<16} | {s['source'][:80]}")
        for line in _stale_lines(r["module"], stale):
            print(line)
    return 0


def main(argv=None) -> int:
    import signal

    # a stopped run (timeout, kill) still removes its sandboxes: SIGTERM unwinds like Ctrl-C
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("modules", nargs="*", help=f"short names: {', '.join(MODULES)} (default: all)")
    ap.add_argument("--timeout", type=float, default=60, help="seconds per test in a mutant's run (a hang = killed)")
    ap.add_argument("--lines", default=None, help="only mutants on these lines, e.g. 40-60,88")
    ap.add_argument("--every", type=int, default=1, help="run every Nth mutant only (a bounded, even sample)")
    ap.add_argument("--changes", default=None,
                    help="only mutants whose change matches this regex, e.g. '^(<|<=|>|>=|==|!=|and|or|not x) ' "
                         "(boundaries and logic: in a numba kernel most '+ -> -' sites are array addressing)")
    ap.add_argument("--offset", type=int, default=0,
                    help="with --every: start at this mutant (a second sample that does not repeat the first)")
    ap.add_argument("--survivors", action="store_true",
                    help="rerun only the last run's survivors (after new tests) and merge into its results")
    ap.add_argument("--list", action="store_true", help="print the mutants and stop")
    ap.add_argument("--report", action="store_true",
                    help="reprint the last results (results/mutation/*.json) with the current EQUIVALENT list")
    ap.add_argument("--min-rate", type=float, default=0.0, help="exit 1 when a module's kill rate is below this")
    ap.add_argument("--out", type=Path, default=REPO / "results" / "mutation")
    a = ap.parse_args(argv)
    names = a.modules or list(MODULES)
    bad = [n for n in names if n not in MODULES]
    if bad:
        ap.error(f"unknown module {bad[0]!r}: pick from {', '.join(MODULES)}")
    only = None
    if a.lines:
        only = set()
        for part in a.lines.split(","):
            lo, _, hi = part.partition("-")
            only.update(range(int(lo), int(hi or lo) + 1))
    if a.report:
        return report(names, a.out)
    if a.list:      # #N: the site's occurrence, EQUIVALENT's third key (the Nth site of that change on its line)
        for n in names:
            source = (REPO / MODULES[n][0]).read_text()
            sites = mutants(source)
            for (ln, change), (text, _, occ) in zip(sites, site_keys(source, sites)):
                if (a.changes is None or re.search(a.changes, change)) and (only is None or ln in only):
                    print(f"{MODULES[n][0]}:{ln}: {change} #{occ} | {text[:80]}")
            for line in _stale_lines(MODULES[n][0], equivalents(n, source)[1]):
                print(line)
        return 0
    worst = 1.0
    print(f"{'module':<34} {'mutants':>7} {'killed':>6} {'hang':>5} {'surv':>5} {'equiv':>5} {'rate':>7} {'s':>6}")
    for n in names:
        t0 = time.perf_counter()
        r = run_module(n, 1, a.timeout, only, a.out, a.every, a.survivors, a.offset, a.changes)
        worst = min(worst, r["kill_rate"])
        print(f"{r['module']:<34} {r['mutants']:>7} {r['killed']:>6} {r['timeout']:>5} {r['survived']:>5} "
              f"{r['equivalent']:>5} {r['kill_rate']:>7.1%} {time.perf_counter() - t0:>6.0f}", flush=True)
        for s in r["survivors"]:
            if s["status"] != "equivalent":
                print(f"    {s['status']:<9} {r['module']}:{s['line']}: {s['change']:<16} | {s['source'][:80]}")
        for line in _stale_lines(r["module"], [(tuple(x["key"]), x["why"]) for x in r["stale_equivalent"]]):
            print(line)
        if r["stopped"]:
            return 143
    return 1 if worst < a.min_rate else 0


if __name__ == "__main__":
    sys.exit(main())
