"""Compute profiles: how long prefill of n tokens takes on one device, measured or published.

A profile is a fit ``T(n) = a + b*n + c*n^2`` (see :mod:`kvbench.compute.fit`) plus where it came from:
``kind = "measured"`` (timed by ``kvbench prefill``, raw points kept), ``"published"`` (a vendor/paper figure,
with its source; never presented as measured) or ``"rate"`` (a what-if rate given on the command line).
Profiles are TOML (shipped in ``workloads/compute/``) or JSON files; ``load_profile`` reads either, by preset
name, file path or a run folder holding ``profile.toml``/``profile.json``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from kvbench.compute.fit import QuadraticFit
from kvbench.errors import SpecError
from kvbench.spec.presets import load_toml, preset_names, preset_path

KINDS = ("measured", "published", "rate")


@dataclass(frozen=True)
class CopyProfile:
    """Pinned host -> device copy (the L2 DRAM -> L1 HBM path): time per copy at each block size."""

    block_bytes: tuple[int, ...]
    seconds: tuple[float, ...]          # median time of one copy of that size
    bandwidth_bytes_per_s: float        # fitted: seconds = latency_s + bytes / bandwidth
    latency_s: float
    pinned: bool = True
    device: str = ""

    def to_dict(self) -> dict:
        return {"block_bytes": list(self.block_bytes), "seconds": list(self.seconds),
                "bandwidth_bytes_per_s": self.bandwidth_bytes_per_s, "latency_s": self.latency_s,
                "pinned": self.pinned, "device": self.device}

    @classmethod
    def from_dict(cls, d: dict) -> "CopyProfile":
        return cls(tuple(int(x) for x in d.get("block_bytes", ())), tuple(float(x) for x in d.get("seconds", ())),
                   float(d["bandwidth_bytes_per_s"]), float(d["latency_s"]), bool(d.get("pinned", True)),
                   str(d.get("device", "")))


@dataclass(frozen=True)
class ComputeProfile:
    """Prefill time over prompt length for one model on one device."""

    name: str
    kind: str                          # "measured" | "published" | "rate"
    model: str                         # model preset name (kvbench.spec.models)
    device: str                        # e.g. "NVIDIA H200", "cpu: AMD EPYC ... (2 threads)"
    dtype: str
    fit: QuadraticFit
    reference_tokens: int = 4096       # prompt length at which tokens_per_s is quoted
    source: str = ""
    notes: str = ""
    points_tokens: tuple[int, ...] = ()
    points_seconds: tuple[float, ...] = ()     # median per length
    points_seconds_min: tuple[float, ...] = ()  # fastest and slowest repetition per length (spread = noise)
    points_seconds_max: tuple[float, ...] = ()
    repetitions: int = 0
    layers_total: int = 0
    layers_measured: int = 0           # < layers_total: per-layer times scaled to the full stack
    scaled: bool = False
    versions: dict = field(default_factory=dict)
    created: str = ""
    copy: CopyProfile | None = None
    path: str = ""
    counts_cache_hits: bool = False    # the source's rate counted cache hits as prefill tokens (a served rate)
    hit_fraction: float | None = None  # the share of those tokens that were hits: ``fit`` is then converted
    served_fit: QuadraticFit | None = None  # the file's own fit of served tokens, before the conversion

    def seconds(self, n_tokens) -> np.ndarray:
        """Prefill time (s) of prompts of ``n_tokens`` (scalar or array), from the fit."""
        return self.fit.seconds(n_tokens)

    @property
    def tokens_per_s(self) -> float:
        """Prefill rate at ``reference_tokens``: n / T(n)."""
        n = self.reference_tokens
        return float(n / self.fit.seconds(n))

    def computed_tokens_per_s(self, use: str = "a write rate") -> float:
        """Prefill rate in *computed* tokens (every computed token writes its KV): ``tokens_per_s``, refused for
        a profile whose rate counts cache hits without saying what share they were."""
        if self.counts_cache_hits and self.hit_fraction is None:
            raise SpecError(f"compute profile {self.name}: its rate counts cache hits (counts_cache_hits = true) and "
                            f"states no hit_fraction, so it cannot give {use} in computed tokens",
                            "add hit_fraction = <share of its tokens that were cache hits> to the profile, or give "
                            "a profile of computed tokens")
        return self.tokens_per_s

    def tokens_per_s_at(self, n_tokens) -> np.ndarray:
        n = np.asarray(n_tokens, dtype=np.float64)
        return n / self.fit.seconds(n)

    def describe(self) -> str:
        if self.kind == "rate":
            return f"{self.name} [rate]: {self.tokens_per_s:,.0f} tok/s at any length (linear what-if, not measured)"
        scaled = f", {self.layers_measured}/{self.layers_total} layers measured, scaled" if self.scaled else ""
        hits = ""
        if self.counts_cache_hits:
            hits = (f", computed tokens: {self.reference_tokens / self.served_fit.seconds(self.reference_tokens):,.0f}"
                    f" reported x (1 - {self.hit_fraction:g} hits)" if self.served_fit is not None else
                    ", counts cache hits: not a computed rate")
        return (f"{self.name} [{self.kind}] {self.model} on {self.device} ({self.dtype}{scaled}): "
                f"{self.tokens_per_s:,.0f} tok/s at {self.reference_tokens} tokens{hits}")

    def to_dict(self) -> dict:
        d = {"name": self.name, "kind": self.kind, "model": self.model, "device": self.device, "dtype": self.dtype,
             "reference_tokens": self.reference_tokens, "tokens_per_s": self.tokens_per_s, "source": self.source,
             "notes": self.notes, "created": self.created, "counts_cache_hits": self.counts_cache_hits,
             "fit": (self.served_fit or self.fit).to_dict()}
        if self.hit_fraction is not None:
            d["hit_fraction"] = self.hit_fraction
            d["computed_fit"] = self.fit.to_dict()
        if self.points_tokens:
            d["points"] = {"tokens": list(self.points_tokens), "seconds": list(self.points_seconds)}
            if self.points_seconds_min:
                d["points"].update(seconds_min=list(self.points_seconds_min),
                                   seconds_max=list(self.points_seconds_max), repetitions=self.repetitions)
        if self.layers_total:
            d["scaling"] = {"layers_total": self.layers_total, "layers_measured": self.layers_measured,
                            "scaled": self.scaled}
        if self.versions:
            d["versions"] = dict(self.versions)
        if self.copy is not None:
            d["copy"] = self.copy.to_dict()
        return d


def rate_profile(tokens_per_s: float, *, model: str = "", reference_tokens: int = 4096) -> ComputeProfile:
    """A linear what-if profile ``T(n) = n / R`` (``--recompute-tokens-per-s``)."""
    if not (isinstance(tokens_per_s, (int, float)) and math.isfinite(tokens_per_s) and tokens_per_s > 0):
        raise SpecError(f"recompute rate must be > 0 tokens/s, got {tokens_per_s!r}", "give e.g. 39000")
    return ComputeProfile(name=f"rate-{tokens_per_s:g}", kind="rate", model=model, device="(assumed)",
                          dtype="", fit=QuadraticFit(0.0, 1.0 / float(tokens_per_s), 0.0),
                          reference_tokens=reference_tokens, source="--recompute-tokens-per-s",
                          notes="linear what-if rate, not measured")


# --- reading -------------------------------------------------------------------------------------------
def profile_from_dict(d: dict, *, where: str) -> ComputeProfile:
    """Validate a profile dict (from TOML or JSON); SpecError names the file and field."""
    if not isinstance(d, dict):
        raise SpecError(f"{where}: a profile must be a table/object", "see workloads/compute/*.toml")
    kind = d.get("kind")
    if kind not in KINDS:
        raise SpecError(f"{where}: field 'kind' must be one of {', '.join(KINDS)}, not {kind!r}",
                        'write kind = "measured" or kind = "published"')
    for key in ("model", "device"):
        if not isinstance(d.get(key), str) or not d.get(key):
            raise SpecError(f"{where}: field {key!r} is missing", f"add {key} = \"...\"")
    if kind == "published" and not d.get("source"):
        raise SpecError(f"{where}: a published profile needs field 'source'", "cite where the figure comes from")
    if not isinstance(d.get("fit"), dict):
        raise SpecError(f"{where}: table [fit] with a, b, c is missing", "add [fit] a = ..., b = ..., c = ...")
    fit = QuadraticFit.from_dict(d["fit"], where=f"{where}: [fit]")
    counts, hits = _hit_accounting(d, kind, where)
    served = None
    if hits is not None:          # T(n) of computed tokens = T(n) of served tokens / (1 - hits)
        served, k = fit, 1.0 / (1.0 - hits)
        fit = QuadraticFit(fit.a * k, fit.b * k, fit.c * k, fit.rel_rms)
    points = d.get("points") or {}
    tokens = tuple(int(x) for x in points.get("tokens", ()))
    secs = tuple(float(x) for x in points.get("seconds", ()))
    smin = tuple(float(x) for x in points.get("seconds_min", ()))
    smax = tuple(float(x) for x in points.get("seconds_max", ()))
    if len(tokens) != len(secs) or (smin and len(smin) != len(tokens)) or (smax and len(smax) != len(tokens)):
        raise SpecError(f"{where}: [points] tokens and seconds differ in length", "give one time per length")
    if kind == "measured" and not tokens:
        raise SpecError(f"{where}: a measured profile must keep its raw [points]", "re-run kvbench prefill")
    ref = d.get("reference_tokens", max(tokens) if tokens else 4096)
    if not isinstance(ref, int) or ref <= 0:
        raise SpecError(f"{where}: reference_tokens must be an integer > 0", "e.g. reference_tokens = 4096")
    scaling = d.get("scaling") or {}
    copy = CopyProfile.from_dict(d["copy"]) if d.get("copy") else None
    return ComputeProfile(
        name=str(d.get("name", "")), kind=kind, model=d["model"], device=d["device"], dtype=str(d.get("dtype", "")),
        fit=fit, reference_tokens=ref, source=str(d.get("source", "")), notes=str(d.get("notes", "")),
        points_tokens=tokens, points_seconds=secs, points_seconds_min=smin, points_seconds_max=smax,
        repetitions=int(points.get("repetitions", 0)), layers_total=int(scaling.get("layers_total", 0)),
        layers_measured=int(scaling.get("layers_measured", 0)), scaled=bool(scaling.get("scaled", False)),
        versions=dict(d.get("versions") or {}), created=str(d.get("created", "")), copy=copy,
        counts_cache_hits=counts, hit_fraction=hits, served_fit=served)


def _hit_accounting(d: dict, kind: str, where: str) -> tuple[bool, float | None]:
    """(counts_cache_hits, hit_fraction) of a profile dict, validated. A published rate must say whether it counts
    cache hits (a serving system's input tokens/s often does); kvbench's own measurements never do."""
    counts = d.get("counts_cache_hits", None if kind == "published" else False)
    if not isinstance(counts, bool):
        raise SpecError(f"{where}: field 'counts_cache_hits' must be true or false"
                        f"{', and a published profile must state it' if counts is None else f', not {counts!r}'}",
                        "write counts_cache_hits = false if the rate counts computed tokens only, true (with "
                        "hit_fraction) if its tokens include cache hits")
    hits = d.get("hit_fraction")
    if hits is None:
        return counts, None
    if not counts:
        raise SpecError(f"{where}: hit_fraction without counts_cache_hits = true",
                        "drop hit_fraction, or set counts_cache_hits = true if the rate includes cache hits")
    if isinstance(hits, bool) or not isinstance(hits, (int, float)) or not 0.0 <= float(hits) < 1.0:
        raise SpecError(f"{where}: hit_fraction must be a number in [0, 1), not {hits!r}",
                        "give the share of the rate's tokens served from cache, e.g. hit_fraction = 0.563")
    return counts, float(hits)


def _resolve(name_or_path: str | Path) -> Path:
    p = Path(name_or_path)
    if p.is_dir():
        for candidate in ("profile.toml", "profile.json"):
            if (p / candidate).is_file():
                return p / candidate
        raise SpecError(f"{p}: no profile.toml or profile.json in this folder", "give a profile file or preset name")
    return preset_path("compute", str(name_or_path))


def load_profile(name_or_path: str | Path) -> ComputeProfile:
    """Load a compute profile by preset name (``workloads/compute/<name>.toml``), TOML/JSON path or run folder."""
    path = _resolve(name_or_path)
    if path.suffix == ".json":
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as e:
            raise SpecError(f"{path}:{e.lineno}: invalid JSON: {e.msg}", "fix the file's syntax") from None
        except OSError as e:
            raise SpecError(f"{path}: cannot read: {e.strerror}", "check the path and permissions") from None
    else:
        data = load_toml(path)
    data.setdefault("name", path.stem if path.stem != "profile" else path.parent.name)
    prof = profile_from_dict(data, where=str(path))
    return _with_path(prof, str(path))


def _with_path(prof: ComputeProfile, path: str) -> ComputeProfile:
    return replace(prof, path=path)


def profile_names() -> list[str]:
    return preset_names("compute")


# --- writing -------------------------------------------------------------------------------------------
def to_toml(d: dict) -> str:
    """Write a dict of scalars, lists and one level of tables as TOML (profiles need nothing more)."""
    from kvbench.spec.presets import dump_toml

    return dump_toml(d)


def save_profile(profile: ComputeProfile, path: str | Path) -> Path:
    """Write a profile as TOML (``.toml``) or JSON (``.json``), atomically."""
    path = Path(path)
    d = profile.to_dict()
    d.pop("tokens_per_s")  # derived; recomputed on load
    text = json.dumps(d, indent=2) + "\n" if path.suffix == ".json" else to_toml(d)
    from kvbench.engine.safety import atomic_output

    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_output(path) as tmp:          # the output guard: refuses a foreign file, renames on success
        tmp.write_text(text)
    return path


__all__ = ["ComputeProfile", "CopyProfile", "load_profile", "save_profile", "rate_profile", "profile_names",
           "profile_from_dict", "KINDS"]
