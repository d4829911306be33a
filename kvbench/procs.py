"""One process and signal model for every command.

SIGINT, SIGTERM and SIGHUP do the same thing: the first raises :class:`Stop` (a ``KeyboardInterrupt``) in the main
thread, so every command's Ctrl-C path runs for all three (stop issuing, drain, record ``interrupted`` with what
was measured, write the partial report, delete half-written outputs and scratch stores); later signals while it
stops are noted, not raised (cleanup is not cut short). The command then exits 128 + the signal (130, 143, 129).
SIGINT is taken even where the shell started kvbench with it ignored (``cmd &`` from a script); a SIGHUP
ignored at start (``nohup``) stays ignored. Loops that drain on a flag (the I/O engine) call :func:`note`.

Children die with their parent: every child kvbench starts (engine workers, step subprocesses, cluster node
processes) calls :func:`die_with_parent` (``PR_SET_PDEATHSIG``: SIGTERM when the parent dies, even by SIGKILL)
and stays in the parent's process group, so a terminal's Ctrl-C reaches it too.
"""

from __future__ import annotations

import contextlib
import signal
import threading

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
PR_SET_PDEATHSIG = 1

received: int | None = None       # the first stop signal of this command, if any


class Stop(KeyboardInterrupt):
    """A stop signal (SIGINT, SIGTERM or SIGHUP) arrived: handled wherever Ctrl-C is."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


# the exceptions a stop may arrive wrapped in: a numba kernel running when the handler raised returns "a result
# with an exception set", which CPython turns into a SystemError caused by the Stop
WRAPPED_STOP = (KeyboardInterrupt, SystemError)


def stop_from(exc: BaseException | None) -> KeyboardInterrupt | None:
    """The stop (a ``KeyboardInterrupt``) that ``exc`` is, or that a native call wrapped in a ``SystemError``
    (its cause); None for any other exception. Every Ctrl-C path catches :data:`WRAPPED_STOP` and re-raises what
    this finds no stop in, so a signal that lands inside a compiled kernel stops the command as any other does."""
    for _ in range(8):
        if isinstance(exc, KeyboardInterrupt):
            return exc
        if not isinstance(exc, SystemError):
            return None
        exc = exc.__cause__ or exc.__context__
    return None


def note(signum: int) -> None:
    """Record a stop signal that a flag-draining loop handled itself (for the exit code)."""
    global received
    if received is None:
        received = int(signum)


def _raise(signum, frame):
    first = received is None
    note(signum)
    if first:
        raise Stop(signum)


def exit_code(default: int = 130) -> int:
    """128 + the stop signal received (130 SIGINT, 143 SIGTERM, 129 SIGHUP), else ``default``."""
    return 128 + received if received is not None else default


_depth = 0


@contextlib.contextmanager
def stop_signals():
    """For the length of a command (reentrant: nested command groups): the three stop signals raise
    :class:`Stop`; the previous handlers come back after."""
    global _depth, received
    if threading.current_thread() is not threading.main_thread() or _depth:
        _depth += 1
        try:
            yield
        finally:
            _depth -= 1
        return
    received = None
    old = {}
    for s in STOP_SIGNALS:
        prev = signal.getsignal(s)
        if s == signal.SIGHUP and prev == signal.SIG_IGN:
            continue                  # nohup: the user asked to survive the terminal's hangup
        old[s] = signal.signal(s, _raise)
    _depth = 1
    try:
        yield
    finally:
        _depth = 0
        for s, h in old.items():
            signal.signal(s, h)


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """In a child: get ``sig`` when the parent dies, even by SIGKILL (Linux ``PR_SET_PDEATHSIG``; a no-op
    elsewhere). Call it first thing in the child (or as ``preexec_fn``)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(sig))
    except (OSError, AttributeError):
        pass


def child_init(parent_pid: int | None = None) -> None:
    """A Python child kvbench started (multiprocessing): dies with its parent, and stops like a command on
    SIGINT/SIGTERM/SIGHUP. If the parent is already gone (died before the prctl), stop at once."""
    import os

    die_with_parent()
    global received
    received = None
    for s in STOP_SIGNALS:
        signal.signal(s, _raise)
    if parent_pid is not None and os.getppid() != parent_pid:
        raise Stop(signal.SIGTERM)


__all__ = ["Stop", "STOP_SIGNALS", "stop_signals", "note", "exit_code", "die_with_parent", "child_init"]


# --- whose run is this: a run folder records its process, and a later look can tell it is gone ----------------
def _boot_id() -> str | None:
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            return fh.read().strip()
    except OSError:
        return None


def identity() -> dict:
    """This process as a run folder records it: PID, host, boot and the process's start time (a PID reused
    after a reboot or by another process is not mistaken for it)."""
    import os
    import socket

    import psutil

    return {"pid": os.getpid(), "host": socket.gethostname(), "boot_id": _boot_id(),
            "started": psutil.Process().create_time()}


def gone(ident: dict | None) -> bool | None:
    """True when the process ``ident`` names has ended; None when it cannot be told from here (another host,
    nothing recorded)."""
    import socket

    import psutil

    if not ident or ident.get("host") != socket.gethostname():
        return None
    if ident.get("boot_id") and ident["boot_id"] != _boot_id():
        return True
    try:
        p = psutil.Process(int(ident["pid"]))
        return abs(p.create_time() - float(ident.get("started", p.create_time()))) > 0.5
    except (psutil.NoSuchProcess, ValueError, KeyError, TypeError):
        return True
    except psutil.Error:
        return None
