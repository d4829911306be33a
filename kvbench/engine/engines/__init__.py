"""Engine registry: each engine is a small set of operations (submit a batch, reap completions, close).

The driver loop (:mod:`kvbench.engine.driver`) owns batching, time stamps, queue depth and pacing; engines
only move bytes, so their latencies are comparable. Capabilities are flags, not checks on names.
"""

from __future__ import annotations

import importlib
import warnings

from kvbench.errors import DependencyError, UsageError

# name -> (module, class); imported lazily so a missing libaio only matters when libaio is chosen
ENGINES = {
    "libaio": ("kvbench.engine.engines.aio", "LibaioEngine"),
    "psync": ("kvbench.engine.engines.psync", "PsyncEngine"),
    "dram": ("kvbench.engine.engines.dram", "DramEngine"),
    "null": ("kvbench.engine.engines.null", "NullEngine"),
}
REQUIRED_OPS = ("submit", "reap", "close")


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
