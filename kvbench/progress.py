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
_drawn: list = []                   # the lines on screen now (their tqdm bars)


def set_mode(mode: str | None) -> None:
    """Force (``always``/``never``) or release (``auto``/None) the live line for this process."""
    global _mode
    if mode is not None and mode not in MODES:
        raise ValueError(f"progress mode {mode!r} is not one of {MODES}")
    _mode = None if mode == "auto" else mode


def mode() -> str | None:
    """The mode :func:`set_mode` set (None: the environment's or the terminal test)."""
    return _mode


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


def clear() -> None:
    """Erase every live line (before an error message, or at the end of a command)."""
    for bar in list(_drawn):
        _drawn.remove(bar)
        bar.close()


def echo(msg: str, file=None) -> None:
    """Print a message line on stderr (or ``file``, e.g. stdout) without tearing a live line (the line is
    redrawn below it)."""
    if _drawn:
        _drawn[-1].write(msg, file=file or _drawn[-1].fp)
    else:
        print(msg, file=file or sys.stderr, flush=True)


def eta(done: float, total: float | None, seconds: float) -> float | None:
    """Seconds to completion at the mean rate so far (None until there is a rate or without a total)."""
    if not total or done <= 0 or seconds <= 0:
        return None
    return max(0.0, (total - done) * seconds / done)


def _columns(stream) -> int:
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):
        return 0


def _num(x: float) -> str:
    """A count for the line: 950, 12,345, 1.23M."""
    x = float(x)
    if abs(x) < 100_000:
        return f"{x:,.0f}" if x == int(x) or abs(x) >= 100 else f"{x:.3g}"
    for div, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g}{suffix}"
    return f"{x:,.0f}"


def format_eta(seconds: float | None) -> str:
    if seconds is None:
        return "ETA --"
    s = int(round(seconds))
    return f"ETA {s // 3600:d}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"ETA {s // 60:d}:{s % 60:02d}"


class Line:
    """A live line: ``update(done)`` (absolute) or ``advance(n)``, ``note(text)`` for the tail (per-tier GB/s,
    a step's name), ``echo(msg)`` prints a message above it. Inactive (not a terminal, ``--json``) it draws
    nothing and costs a comparison per call. Use as a context manager; ``close()`` erases the line.
    ``unit=None``: the line is the description and the note only (``Steps`` writes its own text)."""

    def __init__(self, desc: str, total: float | None = None, unit: str | None = "", *, stream=None,
                 min_interval_s: float = 0.2):
        self.desc, self.total, self.unit, self.done, self._note = desc, total, unit, 0.0, ""
        self.t0 = time.monotonic()
        self._bar = None
        stream = sys.stderr if stream is None else stream
        if active(stream):
            from tqdm import tqdm            # draws, throttles and erases the line; the text is ours (text())

            sized = _columns(stream) > 0             # a terminal of no size (a bare pty) gets the whole line
            self._bar = tqdm(total=None, desc=desc, file=stream, leave=False, mininterval=min_interval_s,
                             miniters=0, dynamic_ncols=sized, ncols=None if sized else 160,
                             nrows=None if sized else 24, bar_format="{desc}")
            _drawn.append(self._bar)

    @property
    def shown(self) -> bool:
        return self._bar is not None

    def update(self, done: float, *, total: float | None = None, note: str | None = None,
               eta_s: float | None = None) -> None:
        """``done`` of ``total`` now; the ETA is the work left at the mean rate so far unless ``eta_s`` gives a
        sooner end (a time budget running out first). ``done`` 0 (again) restarts the rate's clock: the work
        begins now (set-up before it, e.g. a compile, does not count against the rate)."""
        if done == 0 and self.done == 0:
            self.t0 = time.monotonic()
        self.done = float(done)
        if total is not None:
            self.total = total
        if note is not None:
            self._note = note
        self._draw(eta_s)

    def text(self, eta_s: float | None = None) -> str:
        """desc: done/total unit (share), rate, ETA (elapsed without a total), note."""
        if self.unit is None:
            return f"{self.desc}: {self._note}" if self._note else self.desc
        secs = time.monotonic() - self.t0
        unit = f" {self.unit}" if self.unit else ""
        rate = f"{_num(self.done / secs)}{unit}/s" if secs > 0 and self.unit != "s" else ""
        if self.total:
            left = eta(self.done, self.total, secs)
            if eta_s is not None:
                left = eta_s if left is None else min(left, eta_s)
            parts = [f"{_num(self.done)}/{_num(self.total)}{unit} ({min(1.0, self.done / self.total):.0%})", rate,
                     format_eta(left)]
        else:
            parts = [f"{_num(self.done)}{unit}", rate, f"{secs:.0f} s"]
        return f"{self.desc}: " + ", ".join(p for p in (*parts, self._note) if p)

    def _draw(self, eta_s: float | None = None, now: bool = False) -> None:
        if self._bar is not None:
            self._bar.set_description_str(self.text(eta_s), refresh=now)
            self._bar.update(0)              # drawn at most every min_interval_s (now: at once)

    def advance(self, n: float = 1, *, note: str | None = None) -> None:
        self.update(self.done + n, note=note)

    def note(self, text: str, *, now: bool = False) -> None:
        self._note = text
        self._draw(now=now)

    def echo(self, msg: str) -> None:
        echo(msg)

    def close(self) -> None:
        if self._bar is not None:
            if self._bar in _drawn:
                _drawn.remove(self._bar)
            self._bar.close()
            self._bar = None

    def __enter__(self) -> "Line":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_position(path) -> int | None:
    """Bytes this process has read of the file ``path`` so far (its open descriptor's offset, from
    /proc/self/fdinfo), None when it is not open here (or read through a memory map)."""
    try:
        real = os.path.realpath(path)
        fds = os.listdir("/proc/self/fd")
    except (OSError, TypeError):
        return None
    for fd in fds:
        try:
            if os.readlink(f"/proc/self/fd/{fd}") != real:
                continue
            with open(f"/proc/self/fdinfo/{fd}") as f:
                for ln in f:
                    if ln.startswith("pos:"):
                        return int(ln.split()[1])
        except (OSError, ValueError):
            continue
    return None


def trace_batches(batches, desc: str, span_s: float | None = None, path=None):
    """Pass a trace's ``Trace`` batches through, drawing a live line: trace seconds done of the span (a
    ``gen:`` stream states it in its batches' meta; or ``span_s``); for a trace file ``path`` being parsed, the
    bytes read of its size (compressed bytes for .gz); else requests read (no total, no ETA)."""
    line = Line(desc, unit="requests")
    size = os.path.getsize(path) if path is not None and os.path.isfile(path) else None
    n = 0
    try:
        for b in batches:
            span = span_s or (b.meta or {}).get("span_s")
            n += len(b.timestamp_s)
            pos = read_position(path) if size and line.shown else None
            if pos is None and line.unit == "MB":      # the reader closed the file: all of it was read
                pos = size
            if span and len(b.timestamp_s):
                line.unit = "s of trace"
                line.update(float(b.timestamp_s[-1]), total=float(span))
            elif pos is not None:
                line.unit = "MB"
                line.update(pos / 1e6, total=size / 1e6, note=f"{_num(n)} requests read")
            else:
                line.update(n)
            yield b
    finally:
        line.close()


class Poll:
    """Redraw ``line`` every ``every_s`` from ``fn()`` (a dict of Line.update's keywords, ``done`` included, or
    None) on a daemon thread: for work whose progress is read from elsewhere (a run folder's progress file).
    Nothing runs when the line is not drawn."""

    def __init__(self, line: Line, fn, every_s: float = 1.0):
        import threading

        self.line, self.fn, self.every = line, fn, every_s
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True) if line.shown else None
        if self.thread is not None:
            self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(self.every):
            try:
                kw = self.fn()
            except Exception:  # noqa: BLE001 - a progress line must never break the work
                kw = None
            if kw:
                self.line.update(**kw)

    def close(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(timeout=2 * self.every)

    def __enter__(self) -> "Poll":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Steps:
    """``step k of n: NAME`` with the ETA of the whole sequence: the steps left are costed at their expected
    seconds where known (a workload's runtime) and at the mean of the steps finished otherwise. Redrawn every
    second while shown (elapsed and ETA move between steps)."""

    def __init__(self, desc: str, expected_s: list[float | None], *, stream=None):
        self.desc, self.expected = desc, list(expected_s)
        self.took: list[float] = []
        self.k, self.name, self.t_step, self.t0 = 0, "", time.monotonic(), time.monotonic()
        self.line = Line(desc, None, None, stream=stream)
        self._poll = Poll(self.line, self._redraw)

    def _redraw(self) -> None:
        if self.k:
            self.tick()

    def start(self, name: str) -> None:
        if self.k:
            self.took.append(time.monotonic() - self.t_step)
        self.k += 1
        self.name, self.t_step = name, time.monotonic()
        self.tick(now=True)

    def remaining_s(self) -> float | None:
        """Seconds to the end of the last step (None while nothing gives a cost). A step of unknown cost is
        costed at the mean of the finished steps, or at the running step's time so far when that is longer
        (a step that overran the mean says more about the rest than the mean does)."""
        mean = sum(self.took) / len(self.took) if self.took else None
        now = time.monotonic() - self.t_step
        # a step past the expected list (a caller that started more than it said) is a step of unknown cost
        cur = self.expected[self.k - 1] if 0 < self.k <= len(self.expected) else None
        if mean is not None and self.k and cur is None:
            mean = max(mean, now)
        left = max(0.0, cur - now) if cur is not None else (max(0.0, mean - now) if mean is not None else None)
        for e in self.expected[self.k:]:
            c = e if e is not None else mean
            if c is None or left is None:
                return None
            left += c
        return left

    def tick(self, detail: str = "", *, now: bool = False) -> None:
        """Redraw (a step's own progress in ``detail``); call it now and then while a step runs."""
        n = max(len(self.expected), self.k)
        self.line.note(f"step {self.k} of {n}: {self.name}" + (f" ({detail})" if detail else "") +
                       f", {time.monotonic() - self.t0:.0f} s, {format_eta(self.remaining_s())}", now=now)

    def echo(self, msg: str) -> None:
        self.line.echo(msg)

    def close(self) -> None:
        self._poll.close()
        self.line.close()

    def __enter__(self) -> "Steps":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
