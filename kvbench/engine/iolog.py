"""Export an I/O plan (or the I/O actually issued) as a fio iolog v3, so fio replays identical offsets.

Format (fio HOWTO, "Trace file format v3"): a header line ``fio version 3 iolog``, then
``<ms> <file> add|open|close`` and ``<ms> <file> read|write|trim <offset> <length>`` lines; the leading
timestamp is the issue time in milliseconds from the start (fio honours it unless ``replay_no_stall=1``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kvbench.engine.plan import OP_NAMES


def write_iolog(path: str | Path, plan: np.ndarray, target_paths: list[str], times_ns: np.ndarray | None = None,
                repeat: int = 1) -> int:
    """Write ``plan`` (``repeat`` times) with issue times ``times_ns`` (default: plan issue_ns); returns lines."""
    t = (plan["issue_ns"] if times_ns is None else np.maximum(times_ns, 0)) // 1_000_000
    names = np.array([str(p) for p in target_paths], dtype=object)
    ops = np.array([OP_NAMES[k] for k in sorted(OP_NAMES)], dtype=object)
    end = int(t.max()) if len(t) else 0
    n = 0
    with open(path, "w") as f:
        f.write("fio version 3 iolog\n")
        for name in names:
            f.write(f"0 {name} add\n")
        for name in names:
            f.write(f"0 {name} open\n")
        cols = (t.tolist(), names[plan["target"]].tolist(), ops[plan["op"]].tolist(), plan["offset"].tolist(),
                plan["length"].tolist())
        body = "".join(f"{a} {b} {c} {d} {e}\n" for a, b, c, d, e in zip(*cols))
        for _ in range(repeat):
            f.write(body)
            n += len(plan)
        for name in names:
            f.write(f"{end} {name} close\n")
    from kvbench.engine.safety import mark_output
    mark_output(path)
    return n
