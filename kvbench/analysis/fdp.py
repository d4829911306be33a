"""NVMe Flexible Data Placement (FDP), modelled: the store's own writes with and without placement handles.

A drive with FDP keeps one open reclaim unit (RU) per placement handle; a write names its handle, so an RU only
holds writes of one handle and GC reclaims RUs whose pages died together. The model is the FTL of
:mod:`kvbench.analysis.ftl` with one write stream per handle, fed the L3 store's own write/trim stream
(:func:`kvbench.analysis.trace_waf.store_writes`) through :func:`kvbench.analysis.trace_waf.store_waf` twice: once
on one stream (the drive without FDP) and once on ``handles`` streams, with the same RU as erase unit. Which
handle a write goes to is a placement rule (:mod:`kvbench.analysis.placement`): ``lifetime`` (the default) sorts
writes into ``handles`` classes by how long the store keeps them (the lifetimes the tier simulation measured:
an oracle, the most a host-side predictor can buy); ``age`` puts every host write on handle 0 and moves GC
survivors one handle older (what a drive does without host hints).

``plan --fdp handles=N,ru=SIZE[,rule=R]`` reports both WAFs, the NAND bytes per day and the rating-equivalent
DWPD with and without FDP at the picked class's store, and beside them the device WAF a replay measured from the
drive's FDP statistics log when the run's drive has one (:mod:`kvbench.metrics.smart`), or says it has none.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvbench.errors import SpecError

MAX_HANDLES = 64


@dataclass(frozen=True)
class FdpSpec:
    """FDP configuration to model: placement handles, reclaim-unit size, placement rule."""

    handles: int
    ru_bytes: int
    rule: str = "lifetime"

    def validate(self) -> "FdpSpec":
        from kvbench.analysis.placement import get_placement

        if not (2 <= self.handles <= MAX_HANDLES):
            raise SpecError(f"--fdp handles={self.handles} is outside 2..{MAX_HANDLES}",
                            "give e.g. --fdp handles=4,ru=1GiB (one handle is the drive without FDP)")
        if not self.ru_bytes >= 1 << 20:
            raise SpecError(f"--fdp ru={self.ru_bytes} B is below 1 MiB", "give the drive's reclaim unit, e.g. ru=1GiB")
        if self.ru_bytes % 4096:        # the FTL model holds the reclaim unit as whole 4 KiB pages, exactly
            raise SpecError(f"--fdp ru={self.ru_bytes} B is not a whole number of 4 KiB pages",
                            "give the drive's reclaim unit, e.g. ru=1GiB")
        rule = get_placement(self.rule)
        if rule.name in ("none", "tier"):
            raise SpecError(f"--fdp rule={rule.name} does not separate one store's writes",
                            "give rule=lifetime (host hints) or rule=age (drive-side)")
        return self


def parse_fdp(text: str) -> FdpSpec:
    """``handles=N,ru=SIZE[,rule=lifetime|age]`` -> :class:`FdpSpec` (validated)."""
    from kvbench.units import parse_size

    from kvbench.spec.fields import parse_fields

    fields = parse_fields(text, option="--fdp", known=("handles", "ru", "rule"), required=("handles", "ru"),
                          fix="give --fdp handles=N,ru=SIZE[,rule=lifetime|age], e.g. handles=4,ru=1GiB",
                          error=SpecError)
    try:
        handles = int(fields["handles"])
    except ValueError:
        raise SpecError(f"--fdp handles={fields['handles']!r} is not a whole number", "give e.g. handles=4") from None
    ru = int(parse_size(fields["ru"], what="--fdp ru", kb_base=1024))
    return FdpSpec(handles=handles, ru_bytes=ru, rule=fields.get("rule", "lifetime")).validate()


def handle_of(sw, spec: FdpSpec):
    """The placement handle of each event of a store stream under ``spec.rule``."""
    import numpy as np

    from kvbench.analysis import ftl
    from kvbench.analysis.placement import get_placement, lifetime_classes

    rule = get_placement(spec.rule)
    labels = {"lifetime": lifetime_classes(np.asarray(sw.slots, np.int64), np.asarray(sw.nslots, np.int64),
                                           np.asarray(sw.ops) == ftl.OP_WRITE, spec.handles)}
    return rule.streams(labels, len(sw.ops), spec.handles, source="the KV store")


def store_fdp(sw, spec: FdpSpec, *, op: float, gc: str = "greedy") -> dict:
    """Device WAF of one store stream without FDP (one stream) and with ``spec.handles`` handles, same RU."""
    from kvbench.analysis.placement import get_placement
    from kvbench.analysis.trace_waf import store_waf

    rule = get_placement(spec.rule)
    one = store_waf(sw, op=op, erase_block_bytes=spec.ru_bytes, gc=gc)
    sep = store_waf(sw, op=op, erase_block_bytes=spec.ru_bytes, gc=gc, streams=spec.handles,
                    stream_of=handle_of(sw, spec), gc_stream=rule.gc_stream)
    return {"handles": spec.handles, "ru_bytes": spec.ru_bytes, "rule": rule.name, "statement": rule.rule,
            "waf_without": one.waf, "waf_with": sep.waf,
            "waf_reduction": 1.0 - sep.waf / one.waf if one.waf else None,
            "model_erase_unit_bytes": one.params["erase_unit_bytes"],
            "source": f"FTL model, {spec.handles} handles vs one stream: {sep.detail}"
                      + ("; lifetime classes from the lifetimes the simulation measured (an oracle)"
                         if rule.label == "lifetime" else "")}


def measured_fdp(measured: dict | None) -> dict:
    """The device WAF a replay measured from the drive's FDP statistics log, or why there is none."""
    dev = ((measured or {}).get("device_counters") or {}).get("l3") if measured else None
    if not measured:
        return {"waf": None, "note": "no replay run given (--run): nothing measured on a drive"}
    if not isinstance(dev, dict):
        return {"waf": None, "note": "the replay's store was not on an NVMe drive kvbench could read (no counters)"}
    return {"waf": dev.get("fdp_waf"), "host_bytes": dev.get("fdp_host_bytes_written"),
            "media_bytes": dev.get("fdp_media_bytes_written"), "note": dev.get("fdp_note") or
            "the drive reports no FDP statistics (no FDP support, FDP disabled, or nvme-cli without fdp)"}


def fdp_for_plan(trace, spec: FdpSpec, *, pick: dict, blocks: float, block_bytes: int, layout: str, op: float,
                 gc: str, measured: dict | None = None, from_request: int = 0) -> dict:
    """``build_plan``'s call: FDP at the picked class's store (``blocks`` of the trace per copy): WAF, NAND bytes
    per day and rating-equivalent DWPD with and without, and what a replay measured; measured from
    ``from_request`` (the warm-up's end: :func:`kvbench.analysis.trace_waf.store_writes`)."""
    from kvbench.analysis.endurance import bytes_per_day, rating_equivalent_dwpd
    from kvbench.analysis.trace_waf import store_writes
    from kvbench.sim.blockstore import slot_bytes_for

    n = max(1, int(round(blocks)))
    sw = store_writes(trace, block_bytes=block_bytes, capacity_bytes=n * slot_bytes_for(block_bytes), layout=layout,
                      from_request=from_request)
    out = store_fdp(sw, spec, op=op, gc=gc)
    host, ref = pick.get("dwpd_host"), pick["reference_waf"]
    day = bytes_per_day(pick["write_bytes_per_s"]) if pick.get("write_bytes_per_s") else None
    for key in ("without", "with"):
        w = out[f"waf_{key}"]
        out[f"nand_bytes_per_day_{key}"] = day * w if day is not None else None
        out[f"dwpd_rating_equivalent_{key}"] = rating_equivalent_dwpd(host, w, ref) if host is not None else None
    out.update({"class": pick["class"], "store_bytes": pick["store_bytes"], "dwpd_host": host, "reference_waf": ref,
                "op": op, "layout": layout, "trace_blocks": n, "measured": measured_fdp(measured)})
    return out
