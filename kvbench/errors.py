"""One exception tree for kvbench.

Every error a user can cause or meet carries a problem and a fix; the CLI prints ``kvbench: error: <problem>
(fix: <fix>)`` on one line and exits with ``exit_code`` (2 for usage errors, 1 for runtime failures, 130 when
interrupted). Library code raises these, never bare ``Exception``.
"""

from __future__ import annotations


MAX_LINE = 500      # characters of one rendered error: a binary line quoted in a message must not run to 20 KB


def one_line(text: str, limit: int = MAX_LINE) -> str:
    """``text`` as one short printable line: control characters escaped, the middle of an over-long text cut."""
    text = "".join(c if c.isprintable() else (" " if c in "\n\r\t" else repr(c)[1:-1]) for c in str(text))
    if len(text) > limit:
        keep = limit - 40
        text = f"{text[:keep * 3 // 4]} [... {len(text) - keep:,} characters cut ...] {text[-(keep // 4):]}"
    return text


class KvbenchError(Exception):
    """Base of all kvbench errors: a one-line problem and, where known, the fix."""

    exit_code = 1

    def __init__(self, problem: str, fix: str | None = None):
        super().__init__(problem)
        self.problem = problem
        self.fix = fix

    def __str__(self) -> str:
        return self.problem if not self.fix else f"{self.problem} (fix: {self.fix})"


# --- usage errors: the input is wrong; nothing has been done yet (exit 2) -----------------------------
class UsageError(KvbenchError):
    """Bad input from the user: options, specs, presets, units."""

    exit_code = 2


class UnitError(UsageError):
    """A size, duration or rate that does not parse."""


class SpecError(UsageError):
    """A workload/model/profile spec (TOML or options) that is invalid or unknown."""


class TraceError(UsageError):
    """A malformed trace: the message names file, line and field."""

    def __init__(self, problem: str, fix: str | None = None, *, path=None, line: int | None = None,
                 field: str | None = None):
        where = ""
        if path is not None:
            where = f"{path}"
            if line is not None:
                where += f":{line}"
            if field is not None:
                where += f": field '{field}'"
            where += ": "
        super().__init__(where + problem, fix)
        self.path, self.line, self.field = path, line, field


class TargetError(UsageError):
    """A target (file, block device, directory) that cannot be used as asked: alignment, O_DIRECT, space."""


class SafetyError(UsageError):
    """Refused to protect data the user did not hand over (mounted device, system disk, foreign file)."""


class DependencyError(KvbenchError):
    """A missing optional or system dependency (libaio, torch, nvme-cli)."""


# --- runtime errors: something failed while running (exit 1) -----------------------------------------
class EngineError(KvbenchError):
    """An I/O error reported by the device or the kernel during a run."""


class DiskFullError(EngineError):
    """ENOSPC while writing."""


class VerifyError(KvbenchError):
    """Data read back does not match what was written."""


class Interrupted(KvbenchError):
    """SIGINT/SIGTERM: the run stopped early; results so far were written."""

    exit_code = 130
