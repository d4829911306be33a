"""I/O plans: one structured numpy row per I/O, the contract between the simulation and the engine.

A plan says what to do (op, target, offset, length), when (``issue_ns`` from run start, open loop only),
what the data is (``tag``: every 8-byte word of the logical block at device offset ``o`` holds
``tag ^ (o // lbs)``), which request/step it belongs to (``group``) and ordering (``flags`` bit 0 FENCE:
wait until every earlier I/O of this worker completed before submitting this one).
"""

from __future__ import annotations

import numpy as np

from kvbench.errors import TargetError, UsageError

PLAN_DTYPE = np.dtype([
    ("op", "u1"),         # 0 read, 1 write, 2 trim
    ("target", "u2"),     # index into the targets list
    ("offset", "u8"),     # bytes
    ("length", "u4"),     # bytes
    ("issue_ns", "i8"),   # intended issue time from run start (open loop)
    ("tag", "u8"),        # content tag
    ("group", "i8"),      # request/step id for per-group aggregation
    ("flags", "u1"),      # bit 0: FENCE
])

OP_READ, OP_WRITE, OP_TRIM = 0, 1, 2
OP_NAMES = {OP_READ: "read", OP_WRITE: "write", OP_TRIM: "trim"}
OP_CODES = {v: k for k, v in OP_NAMES.items()}
FLAG_FENCE = 1


def make_plan(op, offset, length, *, target=0, issue_ns=0, tag=0, group=-1, flags=0) -> np.ndarray:
    """Build a plan from arrays or scalars (broadcast to the longest); returns a PLAN_DTYPE array."""
    cols = {"op": op, "target": target, "offset": offset, "length": length, "issue_ns": issue_ns,
            "tag": tag, "group": group, "flags": flags}
    n = max(np.size(v) for v in cols.values())
    plan = np.zeros(n, dtype=PLAN_DTYPE)
    for name, value in cols.items():
        plan[name] = np.broadcast_to(np.asarray(value), (n,)) if np.ndim(value) else value
    return plan


def validate_plan(plan: np.ndarray, targets) -> None:
    """Check a plan against its targets before any I/O: dtype, target index, alignment, bounds.

    Raises UsageError/TargetError naming the first bad row, the field and the target's logical block size.
    """
    if not isinstance(plan, np.ndarray) or plan.dtype != PLAN_DTYPE:
        raise UsageError("an I/O plan must be a numpy array of kvbench.engine.plan.PLAN_DTYPE",
                         "build it with kvbench.engine.plan.make_plan()")
    if len(plan) == 0:
        return
    bad = np.flatnonzero(plan["op"] > OP_TRIM)
    if bad.size:
        raise UsageError(f"plan row {bad[0]}: field 'op' = {plan['op'][bad[0]]} is not 0 (read), 1 (write) "
                         "or 2 (trim)", "fix the plan's op column")
    bad = np.flatnonzero(plan["target"] >= len(targets))
    if bad.size:
        raise UsageError(f"plan row {bad[0]}: field 'target' = {plan['target'][bad[0]]} but only "
                         f"{len(targets)} target(s) were given", "pass every target the plan names")
    bad = np.flatnonzero(plan["length"] == 0)
    if bad.size:
        raise UsageError(f"plan row {bad[0]}: field 'length' is 0", "give every I/O a length > 0")
    for t_index, target in enumerate(targets):
        rows = plan["target"] == t_index
        if not rows.any():
            continue
        lbs = np.uint64(target.lbs)
        off, ln = plan["offset"][rows], plan["length"][rows].astype(np.uint64)
        for field, values in (("offset", off), ("length", ln)):
            bad = np.flatnonzero(values % lbs)
            if bad.size:
                row = np.flatnonzero(rows)[bad[0]]
                raise TargetError(f"plan row {row}: {field} {int(values[bad[0]])} is not a multiple of the "
                                  f"logical block size {target.lbs} of {target.path}",
                                  f"use {field}s that are multiples of {target.lbs} bytes")
        end = off + ln
        bad = np.flatnonzero(end > np.uint64(target.size))
        if bad.size:
            row = np.flatnonzero(rows)[bad[0]]
            raise TargetError(f"plan row {row}: I/O ends at byte {int(end[bad[0]])}, beyond the end of "
                              f"{target.path} ({target.size} bytes)", "give a larger --size or smaller offsets")
        if not target.writable:
            bad = np.flatnonzero(plan["op"][rows] != OP_READ)
            if bad.size:
                row = np.flatnonzero(rows)[bad[0]]
                raise TargetError(f"plan row {row}: writes/trims to {target.path}, which was opened read-only",
                                  "open the target with write=True")
