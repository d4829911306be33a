"""kvbench: measure what LLM inference memory (KV cache, Engram tables) asks of DRAM and NVMe."""

import os as _os
import sys as _sys

__version__ = "0.1.0"

# Compiled kernels are cached once per machine, keyed by their source (kvbench/numba_cache.py), not per checkout.
# Set before any kernel module is decorated; numba reads the variable then (and on a re-read of its config).
if not (_os.environ.get("NUMBA_CACHE_DIR") or _os.environ.get("NUMBA_CACHE_LOCATOR_CLASSES")):
    _os.environ["NUMBA_CACHE_LOCATOR_CLASSES"] = (
        "kvbench.numba_cache.PackageCacheLocator,UserProvidedCacheLocator,InTreeCacheLocator,"
        "UserWideCacheLocator,IPythonCacheLocator,ZipCacheLocator")
    if "numba.core.config" in _sys.modules:        # numba imported first: it read its environment already
        _sys.modules["numba.core.config"].reload_config()
