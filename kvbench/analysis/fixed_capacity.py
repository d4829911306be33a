"""The fixed-capacity question: at C bytes of KV storage per GPU, what DWPD do the drives see (pure).

DESIGN.md, "Deployment scale": under write-through every computed block is written, so a GPU computing P
prompt tokens/s at prefill utilization U writes a U P b bytes/s (b = KV bytes per token, a = the fraction of
computed blocks the admission policy writes, 1 under write-through), whatever the hit ratio. Spread over C bytes
per GPU (however many drives hold them), the drives are written at

    host DWPD = a x U x P x b x 86400 / C

and a block stays C fill / (a U P b) seconds before it is overwritten. At a fixed C per GPU (e.g. ~16 TB of
context storage per GPU) the DWPD therefore rises in proportion to the prefill rate and the model's KV bytes per
token: the industry's "3 -> 9 DWPD" as models, GPUs and utilization change (:func:`sweep_profiles`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from kvbench.analysis.endurance import dwpd, residence_s
from kvbench.errors import SpecError

FORMULA = "host DWPD per drive = a x U x P x b x 86400 / C  (a admitted share, U utilization, P computed tok/s " \
          "per GPU, b KV bytes/token, C bytes per GPU)"


@dataclass(frozen=True)
class AtCapacity:
    """What C bytes per GPU see for one model and prefill profile."""

    profile: str
    model: str
    device: str
    kind: str                       # measured, published, given
    bytes_per_token: float
    tokens_per_s_per_gpu: float     # computed (cache hits excluded)
    utilization: float
    admission: float
    capacity_per_gpu_bytes: float
    store_fill: float
    write_bytes_per_s_per_gpu: float
    dwpd: float
    residence_s: float

    def to_dict(self) -> dict:
        return asdict(self)


def at_capacity(*, bytes_per_token: float, tokens_per_s_per_gpu: float, utilization: float,
                capacity_per_gpu_bytes: float, admission: float = 1.0, store_fill: float = 1.0, profile: str = "",
                model: str = "", device: str = "", kind: str = "given") -> AtCapacity:
    """Host DWPD and residence at a fixed capacity per GPU (the module's formula); errors name the field."""
    for name, v in (("bytes per token", bytes_per_token), ("prefill tokens/s per GPU", tokens_per_s_per_gpu),
                    ("capacity per GPU", capacity_per_gpu_bytes)):
        if not (v > 0 and math.isfinite(v)):
            raise SpecError(f"{name} = {v:g} must be a finite number > 0", "fix the model, profile or capacity")
    for name, v in (("utilization", utilization), ("admitted share", admission), ("store fill", store_fill)):
        if not 0 < v <= 1:
            raise SpecError(f"{name} = {v:g} must be in (0, 1]", f"give the {name} as a fraction, e.g. 0.5")
    write = admission * utilization * tokens_per_s_per_gpu * bytes_per_token
    return AtCapacity(profile=profile, model=model, device=device, kind=kind, bytes_per_token=float(bytes_per_token),
                      tokens_per_s_per_gpu=float(tokens_per_s_per_gpu), utilization=float(utilization),
                      admission=float(admission), capacity_per_gpu_bytes=float(capacity_per_gpu_bytes),
                      store_fill=float(store_fill), write_bytes_per_s_per_gpu=write,
                      dwpd=dwpd(write, capacity_per_gpu_bytes),
                      residence_s=residence_s(capacity_per_gpu_bytes * store_fill, write))


def sweep_profiles(names, *, capacity_per_gpu_bytes: float, utilization: float, admission: float = 1.0,
                   store_fill: float = 1.0, block_tokens: int = 512) -> list[AtCapacity]:
    """:func:`at_capacity` for each compute profile (its model's KV bytes per token, its computed prefill rate),
    lowest DWPD first. A profile names its model: :func:`kvbench.compute.profile.load_profile` refuses one that
    does not, naming the file."""
    from kvbench.compute.profile import load_profile
    from kvbench.spec.models import load_model

    rows = []
    for name in names:
        prof = load_profile(name)
        spec = load_model(prof.model)
        rows.append(at_capacity(bytes_per_token=spec.stored_bytes_per_token(block_tokens),
                                tokens_per_s_per_gpu=prof.computed_tokens_per_s("the fixed-capacity sweep"),
                                utilization=utilization, capacity_per_gpu_bytes=capacity_per_gpu_bytes,
                                admission=admission, store_fill=store_fill, profile=prof.name, model=spec.name,
                                device=prof.device, kind=prof.kind))
    return sorted(rows, key=lambda r: r.dwpd)


def for_plan(plan: dict, *, capacity_per_gpu_bytes: float, utilization: float, tokens_per_s_per_gpu: float,
             compute: dict, admission: float = 1.0, store_fill: float = 1.0, sweep: bool = False,
             block_tokens: int = 512) -> dict:
    """The plan's fixed-capacity answer: the formula at its model and profile, the steady hit ratio the trace's
    deployment at that capacity buys (``plan['deployment']``), and with ``sweep`` every shipped compute profile."""
    from kvbench.units import format_bytes, format_residence

    here = at_capacity(bytes_per_token=plan["bytes_per_token"], tokens_per_s_per_gpu=tokens_per_s_per_gpu,
                       utilization=utilization, capacity_per_gpu_bytes=capacity_per_gpu_bytes, admission=admission,
                       store_fill=store_fill, profile=compute.get("profile") or "", model=plan.get("model") or "",
                       device=compute.get("device") or "", kind=compute.get("kind") or "given")
    dep = plan.get("deployment") or {}
    rows = []
    if sweep:
        from kvbench.compute.profile import profile_names

        rows = [r.to_dict() for r in sweep_profiles(profile_names(), capacity_per_gpu_bytes=capacity_per_gpu_bytes,
                                                     utilization=utilization, admission=admission,
                                                     store_fill=store_fill, block_tokens=block_tokens)]
    sentence = (f"At {format_bytes(capacity_per_gpu_bytes, binary=False)} per GPU ({here.model or 'the model'}, "
                f"{here.bytes_per_token:,.0f} B/token; {here.tokens_per_s_per_gpu:,.0f} computed prefill tokens/s per "
                f"GPU at utilization {utilization:g}" + (f", {admission:g} of blocks admitted" if admission < 1 else "")
                + f"): the drives see {here.dwpd:.3g} host DWPD ({admission:g} x {utilization:g} x "
                f"{here.tokens_per_s_per_gpu:,.0f} x {here.bytes_per_token:,.0f} x 86400 / "
                f"{capacity_per_gpu_bytes:,.4g}), KV is kept {format_residence(here.residence_s)}"
                + (f", which buys a steady hit ratio of {dep['hit_ratio']:.3f} on this trace" if dep.get("hit_ratio")
                   is not None else "") + ".")
    return {"formula": FORMULA, "at": here.to_dict(), "hit_ratio": dep.get("hit_ratio"), "sentence": sentence,
            "sweep": rows}


def table_lines(fc: dict) -> list[str]:
    """The sweep as text: one line per profile (lowest DWPD first) and the formula."""
    from kvbench.report.text import table
    from kvbench.units import format_residence

    if not fc.get("sweep"):
        return []
    return table(["profile", "model", "B/token", "tok/s/GPU", "DWPD", "KV kept"],
                 [[r["profile"], r["model"], f"{r['bytes_per_token']:,.0f}", f"{r['tokens_per_s_per_gpu']:,.0f}",
                   f"{r['dwpd']:.3g}", format_residence(r["residence_s"])] for r in fc["sweep"]],
                 "<<>>><") + [fc["formula"]]
