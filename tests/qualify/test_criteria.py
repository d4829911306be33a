"""Qualification's judge (kvbench.qualify.criteria): thresholds with units, pass and fail at the threshold, results
that are not measured (never a pass), the verdict rule over steps."""

from __future__ import annotations

import pytest

from kvbench.errors import SpecError
from kvbench.qualify.criteria import evaluate, overall, verdict
from kvbench.qualify.profile import load_qualify_profile, parse_profile

PROFILE = {
    "name": "unit",
    "drive": {"rated_dwpd": 1.0},
    "workload": [{"name": "load", "kind": "io", "rw": "randread", "bs": "128k", "qd": 32, "runtime": 5},
                 {"name": "replay", "kind": "replay-kv", "args": ["t.jsonl"], "model": "llama-3.1-8b"}],
    "criterion": [{"name": "bw", "workload": "load", "metric": "bw_bytes_per_s", "min": "2GB/s"},
                  {"name": "tail", "workload": "load", "metric": "lat_us.p99.9", "max": "5ms"},
                  {"name": "l3 tail", "workload": "replay", "metric": "tiers.l3.read_lat_us.p99", "max": "2ms"},
                  {"name": "verified", "workload": "replay", "metric": "verify_errors", "equals": 0},
                  {"name": "dwpd", "workload": "replay", "metric": "dwpd", "max": "drive.rated_dwpd"}],
}


def _results(bw=3.1e9, p999_us=4200.0, l3_p99_us=1500.0, verify=0, dwpd=0.6):
    return {"load": {"bw_bytes_per_s": bw, "lat_us": {"p50": 300.0, "p99.9": p999_us}},
            "replay": {"tiers": {"l3": {"read_lat_us": {"p99": l3_p99_us}}}, "verify_errors": verify, "dwpd": dwpd}}


def test_thresholds_with_units_are_converted_to_the_metric_unit():
    p = parse_profile(PROFILE, "unit.toml")
    assert [(c.metric, c.op, c.threshold) for c in p.criteria] == [
        ("bw_bytes_per_s", ">=", 2e9), ("lat_us.p99.9", "<=", 5000.0), ("tiers.l3.read_lat_us.p99", "<=", 2000.0),
        ("verify_errors", "==", 0), ("dwpd", "<=", "drive.rated_dwpd")]


def test_profile_passes_when_every_threshold_holds():
    p = parse_profile(PROFILE, "unit.toml")
    got = evaluate(p.criteria, _results(), p.drive)
    assert [r.passed for r in got] == [True] * 5 and overall(got)
    assert got[4].threshold == 1.0                       # drive.rated_dwpd resolved


@pytest.mark.parametrize("change, failing", [
    ({"bw": 1.9e9}, "bw"),                   # below a min
    ({"p999_us": 5000.1}, "tail"),           # just over a max
    ({"verify": 1}, "verified"),             # an equality
    ({"dwpd": 1.2}, "dwpd"),                 # over the drive's rating
])
def test_profile_fails_on_the_threshold_that_is_crossed(change, failing):
    p = parse_profile(PROFILE, "unit.toml")
    got = evaluate(p.criteria, _results(**change), p.drive)
    assert [r.name for r in got if not r.passed] == [failing]
    assert not overall(got)
    # the rating can be overridden from the command line: a 3-DWPD drive passes the endurance criterion
    if failing == "dwpd":
        assert overall(evaluate(p.criteria, _results(**change), {"rated_dwpd": 3.0}))


def test_unmeasured_metrics_and_failed_workloads_are_not_measured_with_the_reason():
    p = parse_profile(PROFILE, "unit.toml")
    res = _results()
    res["replay"] = {"error": "trace not found"}
    del res["load"]["lat_us"]
    got = {r.name: r for r in evaluate(p.criteria, res, p.drive)}
    assert got["bw"].outcome == "pass"
    assert got["tail"].outcome == "not-measured" and "absent" in got["tail"].reason
    assert got["l3 tail"].outcome == "not-measured" and "workload failed: trace not found" in got["l3 tail"].reason
    assert got["l3 tail"].line().startswith("NOT-MEASURED")
    assert verdict(list(got.values())) == "partial"          # nothing failed, but not everything was measured


def test_a_step_kvbench_cannot_vouch_for_is_not_measured_never_pass():
    p = parse_profile(PROFILE, "unit.toml")
    res = _results(bw=9e9)
    res["load"]["status"] = "not-measured"
    res["load"]["not_measured"] = "the O_DIRECT bypass check failed: /dev/vda read 200 bytes"
    got = evaluate(p.criteria, res, p.drive)
    assert [r.outcome for r in got[:2]] == ["not-measured"] * 2 and "bypass check failed" in got[0].reason
    assert got[0].value == 9e9                               # the number is shown, not judged
    res = _results(bw=9e9)
    res["load"]["host"] = {"direct_io_verified": False}      # an older step without the status still counts
    assert evaluate(p.criteria, res, p.drive)[0].outcome == "not-measured"
    assert verdict(evaluate(p.criteria, res, p.drive)) == "partial"


def test_zero_errors_in_zero_checks_is_not_measured_never_pass():
    """A criterion that names its samples (``samples = "verify_checked"``) is not-measured below ``min_samples``:
    0 wrong reads of 0 checked is no evidence; at the minimum it is judged as before."""
    d = {**PROFILE, "criterion": [{"name": "verified", "workload": "replay", "metric": "verify_errors",
                                   "equals": 0, "samples": "verify_checked", "min_samples": 3}]}
    p = parse_profile(d, "unit.toml")
    res = _results()
    for checked, outcome in ((None, "not-measured"), (0, "not-measured"), (2, "not-measured"), (3, "pass")):
        res["replay"]["verify_errors"] = 0
        res["replay"].pop("verify_checked", None)
        if checked is not None:
            res["replay"]["verify_checked"] = checked
        got = evaluate(p.criteria, res, p.drive)[0]
        assert got.outcome == outcome, (checked, got)
        if outcome == "not-measured":
            assert f"verify_checked = {checked}" in got.reason and "3" in got.reason
    res["replay"]["verify_errors"] = 1
    assert evaluate(p.criteria, res, p.drive)[0].outcome == "fail"
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(SpecError, match="min_samples must be a whole number >= 1"):
            parse_profile({**d, "criterion": [{**d["criterion"][0], "min_samples": bad}]}, "unit.toml")
    shipped = {c.name: c for c in load_qualify_profile("kv-cache-offload").criteria}
    assert shipped["replay: data verified"].samples == "verify_checked"


def test_verdict_rule_pass_fail_partial_and_skipped_steps():
    p = parse_profile(PROFILE, "unit.toml")
    assert verdict(evaluate(p.criteria, _results(), p.drive)) == "pass"
    res = _results(bw=1e9)
    res["replay"] = {"error": "boom"}
    assert verdict(evaluate(p.criteria, res, p.drive)) == "fail"       # a failure outranks not-measured
    # the user skipped the replay: its criteria are skipped (listed), the rest passed: pass
    res = _results()
    del res["replay"]
    got = evaluate(p.criteria, res, p.drive, {"replay": "skipped by the user"})
    assert [r.outcome for r in got] == ["pass", "pass", "skipped", "skipped", "skipped"]
    assert got[2].reason == "skipped by the user" and verdict(got) == "pass"
    # everything skipped proves nothing
    assert verdict(evaluate(p.criteria, {}, p.drive, {"load": "x", "replay": "y"})) == "partial"


def test_criteria_compare_at_the_threshold_and_by_kind():
    """A value equal to its threshold meets max and min; booleans compare as booleans (equals only), strings as
    strings; a result that is not a table is not-measured; a criterion without a value shows '-'."""
    from kvbench.qualify.criteria import CriterionResult, _compare
    from kvbench.qualify.profile import Criterion

    assert _compare("<=", 5.0, 5.0) == (5.0, True) and _compare(">=", 5.0, 5.0) == (5.0, True)
    assert _compare("<=", 5.0001, 5.0)[1] is False and _compare(">=", 4.9999, 5.0)[1] is False
    assert _compare("==", True, True)[1] is True and _compare("==", False, True)[1] is False
    assert _compare("==", True, 1)[1] is True and _compare("<=", True, True)[1] is False     # a flag has no order
    assert _compare("<=", True, 1)[1] is False and _compare(">=", 1, True)[1] is False        # either side a flag
    assert _compare("==", 0, False)[1] is True                                                # a bool threshold
    assert _compare("==", "fdp", "fdp")[1] is True and _compare("==", "none", "fdp")[1] is False
    assert _compare("<=", "fast", "slow")[1] is False                                         # no order on words
    assert _compare("<=", float("nan"), 5.0)[1] is False
    c = Criterion("flag", "w", "ok", "==", True)
    got = evaluate([c], {"w": ["not", "a", "table"]})[0]
    assert got.outcome == "not-measured" and got.value is None and "not a result table" in got.reason
    line = CriterionResult("t", "w", "lat_us.p99", "<=", 5000.0, None, "not-measured", "absent").line()
    assert line.startswith("NOT-MEASURED  t: lat_us.p99 = - (need <= ") and line.endswith("; absent")
