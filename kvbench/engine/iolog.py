"""Export an I/O plan (or the I/O actually issued) as a fio iolog v3, so fio replays identical offsets.

Format (fio HOWTO, "Trace file format v3"): a header line ``fio version 3 iolog``, then
``<ms> <file> add|open|close`` and ``<ms> <file> read|write|trim <offset> <length>`` lines; the leading
timestamp is the issue time in milliseconds from the start (fio honours it unless ``replay_no_stall=1``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kvbench.engine.plan import OP_NAMES


def check_iolog_names(paths) -> None:
    """Refuse target paths an iolog line cannot hold (fio splits its lines on white space)."""
    from kvbench.errors import UsageError

    for f in paths:
        if any(ch.isspace() for ch in str(f)):
            raise UsageError(f"cannot export an iolog for target {str(f)!r}: fio's iolog splits lines on white space",
                             "give a target path without spaces, or drop --export-iolog")


class IologWriter:
    """A fio iolog v3 written as the plan comes (one or more ``write`` calls), its lines laid out by the compiled
    CSV formatter (:mod:`kvbench.metrics.csvout`): a replay exports millions of I/Os.

    ``files``: target index -> file name (plan rows of other targets, e.g. the DRAM arena, are skipped). A name
    with white space is refused up front: fio splits iolog lines on it."""

    def __init__(self, path: str | Path, files: dict):
        check_iolog_names(files.values())
        self.path, self.files = path, {int(k): str(v) for k, v in files.items()}
        self._index = np.array(sorted(self.files), dtype=np.int64)
        self._names = tuple(self.files[k] for k in self._index.tolist())
        self._ops = tuple(OP_NAMES[k] for k in range(max(OP_NAMES) + 1))
        from kvbench.engine.safety import PendingOutput

        self._out = PendingOutput(path)      # the output guard: appears at close, only if close is reached
        self.fh = open(self._out.tmp, "wb")
        self.fh.write(b"fio version 3 iolog\n")
        for act in ("add", "open"):
            self.fh.write("".join(f"0 {f} {act}\n" for f in self.files.values()).encode())
        self.last_ms = 0
        self.lines = 0

    def write(self, plan: np.ndarray, times_ns: np.ndarray | None = None) -> int:
        """Append ``plan``'s rows on the writer's targets (issue times ``times_ns``, default the plan's
        ``issue_ns``); returns the lines written."""
        from kvbench.metrics.csvout import Labels, write_csv

        t = (plan["issue_ns"] if times_ns is None else np.maximum(times_ns, 0)) // 1_000_000
        keep = np.isin(plan["target"], self._index)
        if not keep.all():
            plan, t = plan[keep], t[keep]
        if not len(plan):
            return 0
        write_csv(self.fh, {"t": t.astype(np.int64),
                            "f": Labels(np.searchsorted(self._index, plan["target"]), self._names),
                            "a": Labels(plan["op"], self._ops), "o": plan["offset"].astype(np.int64),
                            "l": plan["length"].astype(np.int64)}, header=False, sep=" ")
        self.last_ms = max(self.last_ms, int(t.max()))
        self.lines += len(plan)
        return len(plan)

    def close(self) -> None:
        self.fh.write("".join(f"{self.last_ms} {f} close\n" for f in self.files.values()).encode())
        self.fh.close()
        self._out.commit()

    def discard(self) -> None:
        """Give up: the temporary file goes, nothing appears at the path."""
        self.fh.close()
        self._out.discard()


def write_iolog(path: str | Path, plan: np.ndarray, target_paths: list[str], times_ns: np.ndarray | None = None,
                repeat: int = 1) -> int:
    """Write ``plan`` (``repeat`` times) with issue times ``times_ns`` (default: plan issue_ns); returns lines."""
    w = IologWriter(path, dict(enumerate(target_paths)))
    try:
        for _ in range(repeat):
            w.write(plan, times_ns)
    except BaseException:
        w.discard()
        raise
    w.close()
    return w.lines
