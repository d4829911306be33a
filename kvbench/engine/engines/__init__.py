"""Engine registry: each engine is a small set of operations (submit a batch, reap completions, close).

The driver loop (:mod:`kvbench.engine.driver`) owns batching, time stamps, queue depth and pacing; engines
only move bytes, so their latencies are comparable. Capabilities are flags, not checks on names.
"""

from __future__ import annotations

import importlib
import warnings

from kvbench.errors import DependencyError, UsageError

# name -> (module, class), in order of preference; imported lazily so a missing libaio only matters when libaio is
# chosen
ENGINES = {
    "libaio": ("kvbench.engine.engines.aio", "LibaioEngine"),
    "psync": ("kvbench.engine.engines.psync", "PsyncEngine"),
    "dram": ("kvbench.engine.engines.dram", "DramEngine"),
    "null": ("kvbench.engine.engines.null", "NullEngine"),
}
REQUIRED_OPS = ("submit", "reap", "close")


def _klass(name: str):
    module, cls = ENGINES[name]
    return getattr(importlib.import_module(module), cls)


def engine_for(engine: str, targets) -> str:
    """The engine that runs ``targets``, chosen by what engines declare (``kinds``: the Target kinds each runs on;
    ``caps``), never by names: ``engine`` when it runs on every target's kind; a device engine asked to run
    memory-only targets gives way to the first registered diskless engine that runs on them (a DRAM arena needs
    no O_DIRECT: ``io --target dram:1GiB`` works with the default ``--engine libaio``); any other mismatch is a
    UsageError naming the engines that run each kind."""
    from kvbench.engine.engines.base import CAP_DISKLESS

    if engine not in ENGINES:
        raise UsageError(f"unknown engine {engine!r}", f"choose one of: {', '.join(ENGINES)}")
    kinds = frozenset(t.kind for t in targets)
    asked = _klass(engine)
    if kinds <= asked.kinds:
        return engine
    if CAP_DISKLESS not in asked.caps and all(t.arena is not None for t in targets):   # memory only
        for name in ENGINES:                  # in the registry's order of preference
            k = _klass(name)
            if CAP_DISKLESS in k.caps and kinds <= k.kinds:
                return name
    odd = sorted({t.kind for t in targets if t.kind not in asked.kinds})
    runs = {kind: [n for n in ENGINES if kind in _klass(n).kinds] for kind in odd}
    raise UsageError(f"the {engine} engine does not run on {' or '.join(odd)} targets "
                     f"({', '.join(t.path for t in targets if t.kind in odd)})",
                     "; ".join(f"{kind} targets run on the {' or '.join(n)} engine" for kind, n in runs.items())
                     + "; run DRAM and device targets separately")


def engine_class(name: str, *, fallback: bool = True):
    """The engine class for ``name``; libaio falls back to psync with a warning when it cannot load."""
    if name not in ENGINES:
        raise UsageError(f"unknown engine {name!r}", f"choose one of: {', '.join(ENGINES)}")
    module, cls = ENGINES[name]
    try:
        klass = getattr(importlib.import_module(module), cls)
        klass.check_available()
    except (OSError, ImportError, DependencyError) as e:
        if name == "libaio" and fallback:
            warnings.warn(f"libaio cannot load ({e}); falling back to the psync engine (thread pool)",
                          RuntimeWarning, stacklevel=2)
            return engine_class("psync", fallback=False)
        raise DependencyError(f"engine {name!r} is unavailable: {e}",
                              "install the system libaio (apt-get install libaio1) or pass --engine psync") from None
    missing = [op for op in REQUIRED_OPS if not callable(getattr(klass, op, None))]
    if missing:
        raise DependencyError(f"engine {name!r} lacks operations {missing}", "implement them")
    return klass
