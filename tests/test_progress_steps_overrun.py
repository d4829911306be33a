"""kvbench.progress.Steps when a caller starts more steps than it listed: the live line's arithmetic must never
break the work it describes (before the fix, remaining_s indexed past ``expected`` and the extra step raised
IndexError from Steps.start, inside the command)."""

from __future__ import annotations

import os

from kvbench import progress
from tests.test_progress import _Clock


def test_a_step_past_the_list_is_costed_as_unknown_and_counted(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(progress.time, "monotonic", clock)
    s = progress.Steps("plan", [None, 30.0], stream=open(os.devnull, "w"))
    s.start("curves")
    clock.t += 10.0
    s.start("target 0.9")                     # listed at 30 s: 12 s in, 18 s left
    clock.t += 12.0
    assert s.remaining_s() == 18.0
    s.start("target 0.95")                    # not listed: unknown cost, the mean of the finished (10, 12) = 11 s
    clock.t += 4.0
    assert s.remaining_s() == 11.0 - 4.0
    clock.t += 20.0                           # overran the mean: nothing known is left after it
    assert s.remaining_s() == 0.0
    assert "step 3 of 3: target 0.95" in s.line._note
    s.close()
