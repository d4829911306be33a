"""Load paths (DESIGN.md, "Load paths"): the one L2 and one L3 load bandwidth and first byte of a run, each named
with where it came from, chosen here and used by plan, check and the report alike.

- **L2 (host DRAM) -> GPU** goes over PCIe: the measured pinned host-to-device copy of the compute profile when it
  has one (a GPU was there), else a stated link model (``workloads/links/<name>.toml``: generation, lanes,
  theoretical and practical bytes/s per direction, latency, sources). Host memcpy speed (the replay's DRAM arena,
  the DRAM probe) is never a load path.
- **L3**: the replay's own loads (latency + bytes / bandwidth fitted to its per-request load times, the fit
  ``check --run`` makes), else the tier's probe, if the probe agrees with the replay: a probe whose bandwidth is
  below 1/5 of the replay's read bandwidth on the same tier, whose per-I/O latency is above 1 s, or whose NVMe
  first byte is below DRAM's is *suspect*; it is rerun once, and excluded with a note if it is suspect again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kvbench.analysis.recompute import Tier, fit_tier_from_requests
from kvbench.errors import SpecError
from kvbench.units import format_bytes, format_duration, format_rate

DEFAULT_LINK = "pcie-gen5-x16"
PROBE_BW_FLOOR = 1 / 5          # a probe below this fraction of the replay's read bandwidth is suspect
PROBE_MAX_IO_S = 1.0            # ... as is one whose median I/O takes longer than this


# --- the L2 -> GPU path ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Link:
    """A stated host-to-GPU link model (PCIe generation and width), one direction."""

    name: str
    generation: int
    lanes: int
    theoretical_bytes_per_s: float
    practical_bytes_per_s: float
    latency_s: float
    sources: tuple
    path: str = ""

    def describe(self) -> str:
        return (f"PCIe Gen{self.generation} x{self.lanes} link model ({self.name}: "
                f"{format_rate(self.practical_bytes_per_s)} practical of {format_rate(self.theoretical_bytes_per_s)} "
                f"per direction, {format_duration(self.latency_s)}; stated, not measured)")


def load_link(name_or_path: str) -> Link:
    """A link model by preset name (``workloads/links/<name>.toml``) or path; SpecError names the field."""
    from kvbench.spec.presets import load_preset

    d, path = load_preset("links", name_or_path)
    where = str(path)
    vals = {}
    for key, kind in (("generation", int), ("lanes", int), ("theoretical_bytes_per_s", float),
                      ("practical_bytes_per_s", float), ("latency_s", float)):
        v = d.get(key)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0 or (key != "latency_s" and not v > 0):
            raise SpecError(f"{where}: field {key!r} must be a number > 0{' (or 0 for latency)' if key == 'latency_s' else ''}",
                            f"write e.g. {key} = {dict(generation=5, lanes=16).get(key, 50.0e9)}")
        vals[key] = kind(v)
    if vals["practical_bytes_per_s"] > vals["theoretical_bytes_per_s"]:
        raise SpecError(f"{where}: practical_bytes_per_s exceeds theoretical_bytes_per_s",
                        "the practical rate is what copies reach, at most the signalling rate")
    sources = d.get("sources")
    if not sources or not isinstance(sources, list) or not all(isinstance(s, str) and s for s in sources):
        raise SpecError(f"{where}: field 'sources' must list where the figures come from", 'write sources = ["..."]')
    return Link(str(d.get("name") or path.stem), sources=tuple(sources), path=where, **vals)


def link_names() -> list[str]:
    from kvbench.spec.presets import preset_names

    return preset_names("links")


def l2_load_tier(profile, link: str | None = None) -> Tier:
    """The L2 -> GPU load path: the profile's measured pinned host-to-device copy when it has one, else the link
    model (``link``, default :data:`DEFAULT_LINK`)."""
    copy = getattr(profile, "copy", None)
    if copy is not None and link is None:
        return Tier("l2", copy.bandwidth_bytes_per_s, copy.latency_s, fitted=True,
                    source=f"measured pinned host->device copy on {copy.device or 'a GPU'} (profile "
                           f"{profile.name}: latency + bytes / bandwidth fitted over {len(copy.block_bytes)} sizes)")
    model = load_link(link or DEFAULT_LINK)
    return Tier("l2", model.practical_bytes_per_s, model.latency_s,
                source=f"{model.describe()}{'' if link else ' (the default: give --link)'}; {Path(model.path).name}")


# --- probes checked against the replay ---------------------------------------------------------------------
def probe_suspicions(probe, replay_tier: dict | None, dram_probe=None) -> list[str]:
    """Why a tier probe cannot be trusted (empty: it can), judged against the replay on the same tier."""
    why = []
    bw = float(probe.bandwidth_bytes_per_s or 0.0)
    replay_bw = float((replay_tier or {}).get("read_bw_bytes_per_s") or 0.0)
    if replay_bw > 0 and bw < PROBE_BW_FLOOR * replay_bw:
        why.append(f"bandwidth {format_rate(bw)} is below 1/5 of the {format_rate(replay_bw)} the replay read the "
                   "same tier at")
    if getattr(probe, "timed_out", False):
        why.append("a phase of the probe completed no read in its time (a stall, not a device)")
    io_s = max(float(probe.first_byte_s), float((probe.bandwidth_lat_us or {}).get("p50") or 0.0) * 1e-6)
    if io_s > PROBE_MAX_IO_S:
        why.append(f"a median I/O took {format_duration(io_s)} (> {PROBE_MAX_IO_S:g} s: a stall, not a device)")
    if probe.name == "l3" and dram_probe is not None and probe.first_byte_s < dram_probe.first_byte_s:
        why.append(f"its first byte {format_duration(probe.first_byte_s)} is below DRAM's "
                   f"({format_duration(dram_probe.first_byte_s)})")
    return why


def guard_probes(probes: list, replay_tiers: dict, rerun) -> tuple[list, list, list]:
    """Check each probe against the replay; rerun a suspect one once (``rerun(probe) -> probe``) and exclude it
    if it is suspect again. Returns (probes kept, notes, excluded probes as dicts with ``suspect`` reasons)."""
    kept, notes, excluded = [], [], []
    dram = next((p for p in probes if p.name == "l2"), None)
    for p in probes:
        why = probe_suspicions(p, replay_tiers.get(p.name), dram if p is not dram else None)
        if not why:
            kept.append(p)
            continue
        again = rerun(p)
        why2 = probe_suspicions(again, replay_tiers.get(p.name), dram if p is not dram else None)
        if not why2:
            kept.append(again)
            notes.append(f"{p.name} probe was suspect ({'; '.join(why)}); rerun once, it agreed with the replay: "
                         "the rerun is used")
            continue
        excluded.append({**p.to_dict(), "suspect": why, "rerun": {**again.to_dict(), "suspect": why2}})
        notes.append(f"{p.name} probe suspect, excluded: {'; '.join(why2)} (and on the first try: "
                     f"{'; '.join(why)}); no load path uses it")
    return kept, notes, excluded


# --- the one choice --------------------------------------------------------------------------------------------
def run_tiers(run, model) -> tuple[list[Tier], list[str]]:
    """A replay run's tiers as its requests saw them (``check --run``): per tier, latency + bytes / bandwidth
    fitted to its per-request load times, else its run-average bandwidth and p50 read latency."""
    tiers, notes = [], []
    block = model.block_bytes(run.block_tokens) if run.block_tokens else None
    for t in run.tiers:
        fitted = (fit_tier_from_requests(t.name, run.hits, block, latency_s=t.latency_s)
                  if run.hits is not None and block else None)
        tiers.append(fitted or t)
        if fitted is None:
            notes.append(f"tier {t.name}: bandwidth is the run average (bytes / wall time), a lower bound "
                         "on what the tier delivers per request")
    return tiers, notes


def load_path_tiers(run_tiers_: list[Tier], profile, link: str | None) -> tuple[list[Tier], list[str]]:
    """A run's tiers with its L2 (measured as a host memcpy into the DRAM arena) replaced by the L2 -> GPU path."""
    out, notes = [], []
    for t in run_tiers_:
        if t.name == "l2":
            path = l2_load_tier(profile, link)
            notes.append(f"l2: the replay's DRAM arena copy ({format_rate(t.bandwidth_bytes_per_s)}, a host memcpy) "
                         f"is not a load path; L2 -> GPU is the {path.source}")
            t = path
        out.append(t)
    return out, notes


@dataclass(frozen=True)
class LoadPaths:
    """The run's load path per tier (``l2``, ``l3``), with where each came from, and the probes left out."""

    tiers: dict
    notes: tuple = ()
    excluded: tuple = ()

    def tier_arg(self, name: str) -> str | None:
        """``NAME=BW,LATENCY`` for ``kvbench check --tier`` / ``plan --load-tier`` (None when absent)."""
        t = self.tiers.get(name)
        if t is None:
            return None
        lat = "unresolved" if t.fitted and t.latency_s == 0 else f"{t.latency_s * 1e6:.9g}us"
        return f"{name}={t.bandwidth_bytes_per_s:.9g}B/s,{lat}"

    def to_json(self) -> dict:
        from kvbench.analysis.recompute import first_byte_text

        return {"tiers": {k: {"bandwidth_bytes_per_s": t.bandwidth_bytes_per_s, "first_byte_s": t.latency_s,
                              "first_byte": first_byte_text(t), "source": t.source, "fitted": t.fitted}
                          for k, t in self.tiers.items()},
                "notes": list(self.notes), "excluded_probes": list(self.excluded)}


def choose_load_paths(run_tiers_: list[Tier], probes: list, *, has_l2: bool, profile, link: str | None,
                      notes=(), excluded=()) -> LoadPaths:
    """The one L2 and L3 load path of a run: L2 -> GPU (:func:`l2_load_tier`) when the run has an L2; L3 from the
    replay's own loads, else from its probe (already guarded: :func:`guard_probes`), else none."""
    tiers = {}
    measured = {t.name: t for t in run_tiers_}
    if has_l2:
        tiers["l2"] = l2_load_tier(profile, link)
    if "l3" in measured:
        tiers["l3"] = measured["l3"]
    else:
        p = next((p for p in probes if p.name == "l3" and p.bandwidth_bytes_per_s > 0), None)
        if p is not None:
            tiers["l3"] = Tier("l3", p.bandwidth_bytes_per_s, p.first_byte_s,
                               source=f"tier probe (the replay loaded nothing from L3): reads of "
                                      f"{format_bytes(p.io_size)} at QD{p.qd}, first byte at QD1 p50")
    return LoadPaths(tiers, tuple(notes), tuple(excluded))


def job_load_paths(replay_dir: str | None, model, probes: list, *, has_l2: bool, profile_name: str,
                   link: str | None, notes=(), excluded=()) -> LoadPaths:
    """``kvbench run``'s load paths: the replay folder's own loads read as ``check --run`` reads them, the guarded
    probes where the replay loaded nothing, the L2 -> GPU path of the profile or link."""
    from kvbench.analysis.recompute import read_run
    from kvbench.compute.profile import load_profile
    from kvbench.errors import KvbenchError

    measured, notes = [], tuple(notes)
    if replay_dir:
        try:
            measured, _ = run_tiers(read_run(replay_dir), model)
        except KvbenchError as e:     # a replay that loaded nothing, a dry run, an unreadable folder: the probes
            # stand in, and the load paths say why (never silently)
            notes += (f"the replay's own loads were not used ({e.problem}); the tier probes stand in",)
    return choose_load_paths(measured, probes, has_l2=has_l2, profile=load_profile(profile_name), link=link,
                             notes=notes, excluded=excluded)
