"""The measuring engine: I/O plans, targets, engines (libaio, psync, dram, null) and the driver loop.

``run_plan(plan, targets, ...)`` is the entry point; see :mod:`kvbench.engine.runner`.
"""

from kvbench.engine.plan import FLAG_FENCE, OP_READ, OP_TRIM, OP_WRITE, PLAN_DTYPE, make_plan, validate_plan
from kvbench.engine.result import PlanResult
from kvbench.engine.runner import run_plan
from kvbench.engine.targets import Target, open_target

__all__ = ["PLAN_DTYPE", "OP_READ", "OP_WRITE", "OP_TRIM", "FLAG_FENCE", "make_plan", "validate_plan",
           "PlanResult", "run_plan", "Target", "open_target"]
