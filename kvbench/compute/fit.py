"""Fit prefill time over sequence length: ``T(n) = a + b*n + c*n^2`` with a, b, c >= 0.

``a`` is fixed per-request overhead (launches, the LM head on the last token), ``b`` the per-token linear work
(projections, FFN/experts), ``c`` the quadratic attention term. Coefficients are constrained non-negative so the
fit never extrapolates to a negative or decreasing time. The fit minimises *relative* squared error (rows
weighted by 1/t) because measured times span orders of magnitude across lengths and every point matters.
The non-negative least squares is solved exactly by trying every support subset of the three coefficients.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from kvbench.errors import SpecError


@dataclass(frozen=True)
class QuadraticFit:
    """``seconds(n) = a + b*n + c*n^2``; ``rel_rms`` is the fit's root-mean-square relative error."""

    a: float
    b: float
    c: float
    rel_rms: float = 0.0

    def seconds(self, n) -> np.ndarray:
        n = np.asarray(n, dtype=np.float64)
        return self.a + self.b * n + self.c * n * n

    def to_dict(self) -> dict:
        return {"a": self.a, "b": self.b, "c": self.c, "rel_rms": self.rel_rms}

    @classmethod
    def from_dict(cls, d: dict, *, where: str = "fit") -> "QuadraticFit":
        try:
            vals = {k: float(d.get(k, 0.0)) for k in ("a", "b", "c")}
        except (TypeError, ValueError):
            raise SpecError(f"{where}: a, b, c must be numbers", "write e.g. a = 0.01, b = 2.5e-5, c = 0.0") from None
        for k, v in vals.items():
            if not np.isfinite(v) or v < 0:
                raise SpecError(f"{where}: coefficient {k} = {v} must be finite and >= 0", "fix the profile's fit")
        if vals["b"] == 0 and vals["c"] == 0:
            raise SpecError(f"{where}: b and c are both 0 (prefill time would not grow with length)",
                            "give a per-token term b or a quadratic term c")
        return cls(vals["a"], vals["b"], vals["c"], float(d.get("rel_rms", 0.0)))


def fit_quadratic(n_tokens, seconds) -> QuadraticFit:
    """Non-negative, relative-error least-squares fit of ``seconds`` over ``n_tokens``."""
    n = np.asarray(n_tokens, dtype=np.float64).ravel()
    t = np.asarray(seconds, dtype=np.float64).ravel()
    if n.shape != t.shape or n.size == 0:
        raise SpecError("fit needs as many times as lengths, at least one", "measure at least one length")
    if np.any(n <= 0) or np.any(~np.isfinite(t)) or np.any(t <= 0):
        raise SpecError("fit needs lengths > 0 and finite times > 0", "drop failed measurements before fitting")
    design = np.stack([np.ones_like(n), n, n * n], axis=1) / t[:, None]
    target = np.ones_like(t)
    best, best_res = None, np.inf
    for k in (3, 2, 1):
        for support in itertools.combinations(range(3), k):
            cols = design[:, support]
            scale = np.linalg.norm(cols, axis=0)  # unit columns: n^2 spans ~1e8x the constant column
            coef, *_ = np.linalg.lstsq(cols / scale, target, rcond=None)
            coef = coef / scale
            if np.any(coef < 0):
                continue
            res = float(np.sum((cols @ coef - target) ** 2))
            if best is None or res < best_res * (1 - 1e-9):  # ties keep the larger support found first
                full = np.zeros(3)
                full[list(support)] = coef
                best, best_res = full, res
    assert best is not None  # a single column always has a non-negative solution (all entries > 0)
    rel_rms = float(np.sqrt(best_res / n.size))
    return QuadraticFit(float(best[0]), float(best[1]), float(best[2]), rel_rms)


def fit_line(x, y) -> tuple[float, float]:
    """Non-negative relative-error fit ``y = a + b*x`` (latency + size/bandwidth); returns (a, b)."""
    x = np.asarray(x, dtype=np.float64).ravel()
    y = np.asarray(y, dtype=np.float64).ravel()
    if x.shape != y.shape or x.size == 0 or np.any(y <= 0) or np.any(x < 0):
        raise SpecError("line fit needs sizes >= 0 and times > 0, one per size", "drop failed measurements")
    w = 1.0 / y
    best, best_res = (float(np.min(y)), 0.0), np.inf
    for support in ((0, 1), (1,), (0,)):
        A = np.stack([np.ones_like(x), x], axis=1)[:, support] * w[:, None]
        scale = np.linalg.norm(A, axis=0)
        if np.any(scale == 0):
            continue
        coef, *_ = np.linalg.lstsq(A / scale, np.ones_like(y), rcond=None)
        coef = coef / scale
        if np.any(coef < 0):
            continue
        res = float(np.sum((A @ coef - 1.0) ** 2))
        if res < best_res * (1 - 1e-9):
            full = [0.0, 0.0]
            for k, c in zip(support, coef):
                full[k] = float(c)
            best, best_res = (full[0], full[1]), res
    return best
