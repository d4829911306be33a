"""One live progress line on stderr, shared by every command that can run for more than a couple of seconds.

A line says what is done of what total, the rate, the time to *completion* (work left / rate so far, never a
time budget) and, where there is I/O, bandwidth per tier. It is drawn only on an interactive terminal: with
stderr a pipe or a file, or with ``--json``, nothing is written (logs and machine-read output stay clean).
``KVBENCH_PROGRESS=always|never|auto`` overrides the terminal test (``io --eta`` does the same per run).

Drawn by tqdm: ``benchmarks/progress_overhead.py`` measured tqdm at 0.23 us CPU per update against rich's
1.08 us (x4.8) for the same import cost (39 vs 41 ms), and rich needs three more packages. An inactive line
does not import tqdm at all.
"""

from __future__ import annotations

import os
import sys
import time

MODES = ("auto", "always", "never")
_mode: str | None = None            # set by the CLI (--json: never; io --eta); None: KVBENCH_PROGRESS or auto


def set_mode(mode: str | None) -> None:
    """Force (``always``/``never``) or release (``auto``/None) the live line for this process."""
    global _mode
    if mode is not None and mode not in MODES:
        raise ValueError(f"progress mode {mode!r} is not one of {MODES}")
    _mode = None if mode == "auto" else mode


def active(stream=None) -> bool:
    """Whether a live line is drawn on ``stream`` (default stderr) now."""
    mode = _mode or os.environ.get("KVBENCH_PROGRESS", "auto").strip().lower() or "auto"
    if mode == "never":
        return False
    if mode == "always":
        return True
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty()) and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError):
        return False


def eta(done: float, total: float | None, seconds: float) -> float | None:
    """Seconds to completion at the mean rate so far (None until there is a rate or without a total)."""
    if not total or done <= 0 or seconds <= 0:
        return None
    return max(0.0, (total - done) * seconds / done)


def format_eta(seconds: float | None) -> str:
    if seconds is None:
        return "ETA --"
    s = int(round(seconds))
    return f"ETA {s // 3600:d}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"ETA {s // 60:d}:{s % 60:02d}"


class Line:
    """A live line: ``update(done)`` (absolute) or ``advance(n)``, ``note(text)`` for the tail (per-tier GB/s,
    a step's name), ``echo(msg)`` prints a message above it. Inactive (not a terminal, ``--json``) it draws
    nothing and costs a comparison per call. Use as a context manager; ``close()`` erases the line."""

    def __init__(self, desc: str, total: float | None = None, unit: str = "", *, scale: bool = False,
                 stream=None, min_interval_s: float = 0.2, bar_format: str | None = None):
        self.desc, self.total, self.unit, self.done, self._note = desc, total, unit, 0.0, ""
        self.t0 = time.monotonic()
        self._bar, self._fixed = None, bar_format
        stream = sys.stderr if stream is None else stream
        if active(stream):
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=desc, unit=unit or "it", unit_scale=scale, file=stream, leave=False,
                             mininterval=min_interval_s, smoothing=0, dynamic_ncols=True,
                             bar_format=self._format(total))

    def _format(self, total) -> str:
        if self._fixed:
            return self._fixed
        rate = "{rate_fmt}"
        if total:
            return "{desc}: {n_fmt}/{total_fmt} {unit} ({percentage:.0f}%), " + rate + ", ETA {remaining}{postfix}"
        return "{desc}: {n_fmt} {unit}, " + rate + ", {elapsed}{postfix}"

    @property
    def shown(self) -> bool:
        return self._bar is not None

    def update(self, done: float, *, total: float | None = None, note: str | None = None) -> None:
        self.done = float(done)
        if total is not None and total != self.total:
            self.total = total
            if self._bar is not None:
                self._bar.total = total
                self._bar.bar_format = self._format(total)
        if note is not None:
            self._note = note
        if self._bar is not None:
            self._bar.n = done
            if note is not None:
                self._bar.set_postfix_str(note, refresh=False)
            self._bar.refresh() if self._bar.total is None else self._bar.update(0)

    def advance(self, n: float = 1, *, note: str | None = None) -> None:
        self.update(self.done + n, note=note)

    def note(self, text: str) -> None:
        self._note = text
        if self._bar is not None:
            self._bar.set_postfix_str(text, refresh=True)

    def echo(self, msg: str) -> None:
        """A message line on stderr that does not tear the live line."""
        if self._bar is not None:
            self._bar.write(msg, file=self._bar.fp)
        else:
            print(msg, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> "Line":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Steps:
    """``step k of n: NAME`` with the ETA of the whole sequence: the steps left are costed at their expected
    seconds where known (a workload's runtime) and at the mean of the steps finished otherwise."""

    def __init__(self, desc: str, expected_s: list[float | None], *, stream=None):
        self.desc, self.expected = desc, list(expected_s)
        self.took: list[float] = []
        self.k, self.name, self.t_step = 0, "", time.monotonic()
        self.line = Line(desc, None, stream=stream, bar_format="{desc} {elapsed}{postfix}")
        self._eta = None

    def start(self, name: str) -> None:
        if self.k:
            self.took.append(time.monotonic() - self.t_step)
        self.k += 1
        self.name, self.t_step = name, time.monotonic()
        self.tick()

    def remaining_s(self) -> float | None:
        """Seconds to the end of the last step (None while nothing gives a cost)."""
        mean = sum(self.took) / len(self.took) if self.took else None
        now = time.monotonic() - self.t_step
        cur = self.expected[self.k - 1] if 0 < self.k <= len(self.expected) else None
        left = max(0.0, cur - now) if cur is not None else (max(0.0, mean - now) if mean is not None else None)
        for e in self.expected[self.k:]:
            c = e if e is not None else mean
            if c is None or left is None:
                return None
            left += c
        return left

    def tick(self, detail: str = "") -> None:
        n = len(self.expected)
        text = f"step {self.k} of {n}: {self.name}" + (f" ({detail})" if detail else "")
        self.line.update(self.k, note=f"{text}, {format_eta(self.remaining_s())}")

    def echo(self, msg: str) -> None:
        self.line.echo(msg)

    def close(self) -> None:
        self.line.close()

    def __enter__(self) -> "Steps":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
