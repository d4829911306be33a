"""Routers: which serving node a request goes to. A registry (``ROUTERS``), one file per router.

A router sees each request (its index, arrival time, prefix-chained block keys, prompt tokens) and a
:class:`~kvbench.cluster.sim.ClusterView` of the nodes at that moment: ``load()`` (outstanding prefill work per
node, seconds) and ``cached_prefix(keys)`` (blocks of the request's leading prefix each node holds in its own
tiers L1-L3). It returns a node index. Routers may count what they did in ``stats`` (reported per router).

To add a router: one file here with a :class:`Router` subclass, and one entry in ``_ROUTER_MODULES``.
"""

from __future__ import annotations

import importlib
import math

from kvbench.errors import UsageError

#: router name -> module (in this package) holding the class ``ROUTER``; imported when asked for
_ROUTER_MODULES = {
    "random": "random_router",
    "round-robin": "round_robin",
    "least-loaded": "least_loaded",
    "session": "session",
    "prefix": "prefix",
    "cost": "cost",
}
ROUTERS = tuple(_ROUTER_MODULES)


class Router:
    """Base class: ``route(request, view) -> node``. ``options`` lists the knobs (name -> default), ``ranges``
    their bounds (name -> (lo, hi); a knob not listed: finite and >= 0), checked here for every router."""

    name = ""
    options: dict = {}
    ranges: dict = {}

    def __init__(self, n_nodes: int, seed: int = 0, **opts):
        self.n = int(n_nodes)
        self.seed = int(seed)
        unknown = sorted(set(opts) - set(self.options))
        if unknown:
            raise UsageError(f"router {self.name!r} has no option {unknown[0]!r}",
                             f"its options are: {', '.join(self.options) or 'none'}")
        for k, v in opts.items():
            check_option(type(self), k, v)
        self.opts = {**self.options, **opts}
        self.stats: dict = {}

    def prepare(self, trace) -> None:
        """Look at the whole trace once before routing (e.g. to find the shared system prompt)."""

    def route(self, req, view) -> int:  # pragma: no cover - abstract
        raise NotImplementedError


def argmin_load(loads, start: int = 0) -> int:
    """Index of the node with the least outstanding work; ties go to the first from ``start`` on (routers pass
    the request index, so that idle nodes share requests round-robin instead of node 0 taking them all)."""
    n = len(loads)
    best = start % n
    low = loads[best]
    for k in range(1, n):
        i = (start + k) % n
        if loads[i] < low:
            best, low = i, loads[i]
    return best


def router_names() -> list[str]:
    return list(ROUTERS)


def router_class(name: str) -> type:
    mod = _ROUTER_MODULES.get(name)
    if mod is None:
        raise UsageError(f"unknown router {name!r}", f"use one of {', '.join(ROUTERS)}")
    return importlib.import_module(f"{__name__}.{mod}").ROUTER


def make_router(name: str, n_nodes: int, seed: int = 0, **opts) -> Router:
    """A router by registry name, given the options it takes among ``opts`` (shared by compared routers)."""
    cls = router_class(name)
    return cls(n_nodes, seed, **{k: v for k, v in opts.items() if k in cls.options})


def check_option(cls, key: str, value) -> None:
    """A router option's value within its router's ``ranges`` (a knob not listed there: finite and >= 0)."""
    lo, hi = cls.ranges.get(key, (0.0, 1e15))
    if not (isinstance(value, (int, float)) and math.isfinite(value) and lo <= value <= hi):
        raise UsageError(f"router {cls.name!r}: {key}={value} is out of range", f"give {key} between {lo:g} and {hi:g}")


def check_routers(names, opts=None) -> list[str]:
    """Validate router names and options (before any work): each option must be one some router takes."""
    names = [n.strip() for n in names if n.strip()]
    if not names:
        raise UsageError("no router given", f"use --router one of {', '.join(ROUTERS)}")
    for n in names:
        if n not in _ROUTER_MODULES:
            raise UsageError(f"unknown router {n!r}", f"use one of {', '.join(ROUTERS)}")
    if len(set(names)) != len(names):
        raise UsageError(f"router listed twice in {','.join(names)}", "list each router once")
    known = {k: n for n in names for k in router_class(n).options}
    for k, v in (opts or {}).items():
        if k not in known:
            raise UsageError(f"no router of {','.join(names)} has an option {k!r}",
                             "options: " + (", ".join(f"{o} ({n})" for o, n in known.items()) or "none"))
        check_option(router_class(known[k]), k, v)
    return names
