"""Evaluate a profile's criteria against measured results: pass/fail per criterion, and overall.

Pure: ``results`` maps workload name -> that workload's JSON result (``precondition`` included). A metric
that was not measured (a workload failed, a field is absent) fails its criterion and says so: a
qualification never passes on a number it did not see.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from kvbench.qualify.profile import Criterion
from kvbench.report.rundata import dig

_COMPARE = {"<=": lambda v, t: v <= t, ">=": lambda v, t: v >= t, "==": lambda v, t: v == t}


@dataclass(frozen=True)
class CriterionResult:
    name: str
    workload: str
    metric: str
    op: str
    threshold: object
    value: object
    passed: bool
    note: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        from kvbench.report.tables import fmt

        verdict = "PASS" if self.passed else "FAIL"
        got = "not measured" if self.value is None else fmt(self.metric, self.value)
        return (f"{verdict}  {self.name}: {self.metric} = {got} (need {self.op} {fmt(self.metric, self.threshold)})"
                + (f"; {self.note}" if self.note else ""))


def evaluate(criteria, results: dict, drive: dict | None = None) -> list[CriterionResult]:
    """One result per criterion, in profile order."""
    out = []
    drive = drive or {}
    for c in criteria:
        c: Criterion
        threshold = c.threshold
        if isinstance(threshold, str) and threshold.startswith("drive."):
            threshold = drive.get(threshold[6:])
        res = results.get(c.workload)
        note = ""
        if res is None:
            value, note = None, f"workload {c.workload!r} did not run"
        elif isinstance(res, dict) and res.get("error") and dig(res, c.metric) is None:
            value, note = None, f"workload failed: {res['error']}"
        else:
            value = dig(res, c.metric)
            if isinstance(value, (dict, list)):
                value, note = None, f"{c.metric} is not a single number"
            elif value is None:
                note = f"{c.metric} absent from the workload's result"
        passed = False
        if value is not None and threshold is not None:
            if isinstance(threshold, bool) or isinstance(value, bool):
                passed = c.op == "==" and bool(value) == bool(threshold)
            else:
                try:
                    v = float(value)
                    passed = math.isfinite(v) and _COMPARE[c.op](v, float(threshold))
                    value = v
                except (TypeError, ValueError):
                    passed = c.op == "==" and str(value) == str(threshold)
        elif threshold is None:
            note = note or f"threshold {c.threshold} is not set"
        out.append(CriterionResult(c.name, c.workload, c.metric, c.op, threshold, value, passed, note))
    return out


def overall(results: list[CriterionResult]) -> bool:
    return bool(results) and all(r.passed for r in results)
