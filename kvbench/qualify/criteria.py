"""Evaluate a profile's criteria against measured results: one outcome per criterion, and the verdict.

Pure: ``results`` maps workload name -> that workload's JSON result (``precondition`` included). Outcomes:

- ``pass`` / ``fail``: the metric was measured, by a step kvbench can vouch for, and met / missed its threshold;
- ``skipped``: the user skipped the step that measures it (``--skip-precondition``, ``--quick``);
- ``not-measured``: the step failed, did not run, did not report the metric, saw fewer samples than the
  criterion's ``samples``/``min_samples`` ask (0 errors in 0 checked reads is no evidence), or reported a number
  kvbench cannot vouch for (its status is ``not-measured``: an O_DIRECT bypass check that failed, device counters
  that disagree with the engine). A qualification never passes on a number it did not see.

Verdict: ``pass`` only when every criterion that ran passed and none is not-measured; ``fail`` when any
failed; otherwise ``partial``. Skipped criteria are listed, never counted as passed.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from kvbench.qualify.profile import Criterion
from kvbench.report.rundata import dig

_COMPARE = {"<=": lambda v, t: v <= t, ">=": lambda v, t: v >= t, "==": lambda v, t: v == t}
OUTCOMES = ("pass", "fail", "skipped", "not-measured")


@dataclass(frozen=True)
class CriterionResult:
    name: str
    workload: str
    metric: str
    op: str
    threshold: object
    value: object
    outcome: str                 # one of OUTCOMES
    reason: str = ""             # why not measured / skipped

    @property
    def passed(self) -> bool:
        return self.outcome == "pass"

    def to_dict(self) -> dict:
        return {**asdict(self), "passed": self.passed}

    def line(self) -> str:
        from kvbench.report.tables import fmt

        head = self.outcome.upper()
        got = "-" if self.value is None else fmt(self.metric, self.value)
        return (f"{head}  {self.name}: {self.metric} = {got} (need {self.op} {fmt(self.metric, self.threshold)})"
                + (f"; {self.reason}" if self.reason else ""))


def _unvouched(res: dict) -> str | None:
    """Why a step's numbers cannot be vouched for (None when they can)."""
    if res.get("status") == "not-measured":
        return str(res.get("not_measured") or "the step reported status not-measured")
    if dig(res, "host.direct_io_verified") is False:
        return "the step's O_DIRECT bypass check failed (device counters below the engine's reads)"
    return None


def _enough(count, need: int) -> bool:
    try:
        return float(count) >= need
    except (TypeError, ValueError):
        return False


def _compare(op: str, value, threshold) -> tuple[object, bool]:
    if isinstance(threshold, bool) or isinstance(value, bool):
        return value, op == "==" and bool(value) == bool(threshold)
    try:
        v = float(value)
        return v, math.isfinite(v) and _COMPARE[op](v, float(threshold))
    except (TypeError, ValueError):
        return value, op == "==" and str(value) == str(threshold)


def evaluate(criteria, results: dict, drive: dict | None = None, skipped: dict | None = None) -> list[CriterionResult]:
    """One result per criterion, in profile order. ``skipped`` maps a step the user skipped to why."""
    out = []
    drive = drive or {}
    skipped = skipped or {}
    for c in criteria:
        c: Criterion
        threshold = c.threshold
        if isinstance(threshold, str) and threshold.startswith("drive."):
            threshold = drive.get(threshold[6:])
        res = results.get(c.workload)
        value, outcome, reason = None, "not-measured", ""
        if res is not None and isinstance(res, dict):
            value = dig(res, c.metric)
            if isinstance(value, (dict, list)):
                value, reason = None, f"{c.metric} is not a single number"
        if value is None and c.workload in skipped:
            outcome, reason = "skipped", skipped[c.workload]
        elif res is None:
            reason = f"workload {c.workload!r} did not run"
        elif not isinstance(res, dict):
            reason = f"workload {c.workload!r} gave a {type(res).__name__}, not a result table"
        elif res.get("error"):
            reason = f"workload failed: {res['error']}"
        elif _unvouched(res):
            reason = _unvouched(res)
        elif value is None:
            reason = reason or f"{c.metric} absent from the workload's result"
        elif c.samples and not _enough(dig(res, c.samples), c.min_samples):
            # an error count of 0 over 0 checks, a percentile of no I/O: nothing was seen, nothing passes
            reason = f"{c.samples} = {dig(res, c.samples)}: fewer than the {c.min_samples:,} the value needs"
        elif threshold is None:
            reason = f"threshold {c.threshold} is not set (give --drive {str(c.threshold)[6:]}=VALUE)"
        else:
            value, ok = _compare(c.op, value, threshold)
            outcome = "pass" if ok else "fail"
        out.append(CriterionResult(c.name, c.workload, c.metric, c.op, threshold, value, outcome, reason))
    return out


def verdict(results: list[CriterionResult]) -> str:
    """pass | fail | partial (see the module docstring)."""
    outcomes = [r.outcome for r in results]
    if "fail" in outcomes:
        return "fail"
    if "not-measured" in outcomes or "pass" not in outcomes:
        return "partial"
    return "pass"


def overall(results: list[CriterionResult]) -> bool:
    return verdict(results) == "pass"
