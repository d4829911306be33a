"""The workload model: a serving workload described by explicit parameters, from minutes to weeks.

A model is what ``kvbench trace fit`` estimates from a real trace and what ``kvbench trace gen --model-file``
(and a ``gen:`` trace argument) generates from, at any horizon. It has four sections (TOML tables):

``[arrivals]`` Sessions start by a renewal process whose inter-arrival times have coefficient of variation
``burstiness`` (1: exponential, a Poisson process; otherwise lognormal: > 1 clustered, < 1 regular), modulated by a daily cosine (``diurnal_amplitude``,
peak at ``peak_hour``) and a weekly cycle (weekends at ``weekend_factor`` of the weekday rate), normalised so
the long-run request rate is ``rate``. The rate is held: each rate window (the span a fitted model was fitted
on, else a day; 1,024 to 2^20 sessions) holds exactly the sessions it states, and the gaps vary within it.

``[sessions]`` A session is one or more *visits* of ``turns_mean`` turns each (geometric). Turns of a visit
follow after a lognormal think time (median ``think_time_s``, shape ``think_sigma``). After a visit the user
comes back with probability ``return_probability``, after a lognormal delay (median ``return_time_s``, shape
``return_sigma``: heavy-tailed, hours to days), and continues the same conversation (its whole context is
reused). A session ends when its context would exceed ``max_context_tokens``.

``[prompts]`` A prompt is: a shared system prompt (tool definitions included; with probability
``system_probability``, else the prompt starts with the session's own text) of ``system_prompts`` distinct
ones, Zipf-popular (``system_zipf``), lognormal lengths around ``system_tokens`` (or, listed per prompt,
``system_prompt_tokens`` and ``system_prompt_weights``: what a fit measured on a trace); optionally a document
attachment (probability ``document_probability``) of ``documents`` shared documents (Zipf ``document_zipf``,
lengths around ``document_tokens``); then the conversation: first message ``first_user_tokens``, each later
turn adds the previous answer (``output_tokens``, when ``append_output``) and a new message
(``user_tokens``), so the context grows every turn. Lengths are lognormal with the stated mean and shape, or
follow ``*_quantiles`` (an empirical distribution, as a fit measures it) when given. A fit may state first
messages by population: ``bare_user_*`` for the sessions with no shared system prompt, ``system_user_quantiles``
(one row per prompt) for each prompt's sessions; the pooled ``first_user_*`` is then the rest's.

``[workload]`` ``block_tokens`` (tokens per KV block), a name, a description and the sources of the values;
a fitted model also states ``fitted_span_s``, the span of the trace it was fitted on: what a plan of its
stream shows within that span the trace itself showed (the fit reproduces its curve); beyond it, the answer
rests on the model's extension (returns hours later, daily and weekly cycles) and is labelled so.

``[calibration]`` (written by ``trace fit``, read back, not used by the generator): a fitted model whose
demand was calibrated against generated traces (:func:`kvbench.stream.fit.calibrate_demand`) says so, with the
factors already applied to ``arrivals.rate`` and to the session's own text lengths, and the steady write rate
(DWPD) and hit-ratio errors of the regenerated traces before and after; ``gen_duration_s`` is the duration
``trace gen`` of the model defaults to, and ``gen_*`` the errors of that duration's traces against the trace.

Unknown parameters are an error naming them; every value is validated with its fix.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from kvbench.errors import SpecError

PRESET_KIND = "classes"        # workloads/classes/*.toml


@dataclass(frozen=True)
class Arrivals:
    rate: float = 1.0                  # long-run mean requests per second
    burstiness: float = 1.0            # CV of session inter-arrival times (1 = Poisson)
    diurnal_amplitude: float = 0.0     # daily cycle: rate x (1 + A cos(2 pi (hour - peak_hour) / 24))
    peak_hour: float = 14.0            # hour of day of the daily peak
    weekend_factor: float = 1.0        # Saturday/Sunday rate relative to weekdays
    start_hour: float = 0.0            # hour of day at t = 0
    start_weekday: int = 0             # day of week at t = 0 (0 = Monday)


@dataclass(frozen=True)
class Sessions:
    turns_mean: float = 1.0            # mean turns per visit (geometric, >= 1)
    think_time_s: float = 30.0         # median time between turns of a visit (lognormal)
    think_sigma: float = 1.0
    return_probability: float = 0.0    # after a visit, the chance the user continues the session later
    return_time_s: float = 21600.0     # median delay of a return (lognormal: heavy-tailed)
    return_sigma: float = 1.5
    max_context_tokens: int = 131072   # a session ends when its context would exceed this


@dataclass(frozen=True)
class Prompts:
    system_probability: float = 1.0    # chance a session starts with one of the shared system prompts
    system_prompts: int = 1            # distinct shared system prompts (tool definitions included)
    system_tokens: float = 800.0       # mean tokens of a system prompt
    system_sigma: float = 0.5
    system_zipf: float = 1.0           # popularity exponent of system prompts
    system_prompt_tokens: tuple[float, ...] = ()   # optional: each prompt's length (instead of lognormal draws)
    system_prompt_weights: tuple[float, ...] = ()  # optional: each prompt's relative popularity (instead of Zipf)
    # optional: the first message of a session using each prompt (lognormal mean and shape; a mean of 0: the
    # pooled first_user_* below), where a prompt's sessions write their own lengths (an application's template)
    system_user_tokens: tuple[float, ...] = ()
    system_user_sigma: tuple[float, ...] = ()
    # optional: the first message of a session with no shared system prompt (lognormal mean and shape, or
    # bare_user_quantiles; a mean of 0 and no quantiles: the pooled first_user_* below), where those sessions'
    # whole prompts are their own text and differ from the own text of the sessions that do share a prompt
    bare_user_tokens: float = 0.0
    bare_user_sigma: float = 0.0
    document_probability: float = 0.0  # chance a session attaches a shared document
    documents: int = 0                 # distinct shared documents
    document_tokens: float = 0.0
    document_sigma: float = 0.6
    document_zipf: float = 1.0
    first_user_tokens: float = 400.0   # first message of a session (lognormal mean)
    first_user_sigma: float = 0.8
    user_tokens: float = 150.0         # each later message
    user_sigma: float = 0.8
    output_tokens: float = 250.0       # answers
    output_sigma: float = 0.8
    append_output: bool = True         # answers join the context of the next turn
    # optional empirical distributions (quantiles at evenly spaced probabilities, 0 to 1) that replace the
    # lognormal of the same name: what a fit measured, for lengths no lognormal follows (mixtures of workloads)
    first_user_quantiles: tuple[float, ...] = ()
    user_quantiles: tuple[float, ...] = ()
    output_quantiles: tuple[float, ...] = ()
    document_quantiles: tuple[float, ...] = ()
    bare_user_quantiles: tuple[float, ...] = ()
    # optional: each system prompt's sessions' first-message quantiles, one row of the same number of values per
    # prompt (in system_prompt_tokens' order), the rows concatenated; a row of zeros: that prompt's
    # system_user_tokens lognormal (or the pooled first_user_*)
    system_user_quantiles: tuple[float, ...] = ()


@dataclass(frozen=True)
class Calibration:
    """What ``trace fit`` calibrated (the factors are already in the model's values) and the goodness of fit
    before and after (None: not measured, e.g. no capacity turned over in both traces)."""

    calibrated: bool = True
    rate_factor: float = 1.0           # arrivals.rate = the trace's rate x this
    length_factor: float = 1.0         # prompts.first_user_* and prompts.user_* = measured x this
    turns_factor: float = 1.0          # sessions.turns_mean = measured x this (at least 1)
    think_factor: float = 1.0          # sessions.think_time_s = measured x this
    seeds: int = 0                     # generated traces the calibration averaged
    first_seed: int = 0                # their first seed (apart from the seeds the goodness is scored on)
    dwpd_error_mean_before: float | None = None
    dwpd_error_max_before: float | None = None
    dwpd_error_mean_after: float | None = None
    dwpd_error_max_after: float | None = None
    curve_mae_before: float | None = None
    curve_mae_after: float | None = None
    # the generation check: what ``trace gen --model-file M --seed S`` writes over gen_duration_s (its default
    # duration for this model), against the trace (:func:`kvbench.stream.fit.gen_check`)
    gen_duration_s: float | None = None
    gen_rate_factor: float | None = None     # the rate scaled again so the generated duration's demand is the trace's
    gen_seeds: int | None = None             # traces the check generated (seeds from first_gen_seed)
    first_gen_seed: int | None = None
    gen_dwpd_error_mean: float | None = None     # per generated trace: its mean error over the capacities ...
    gen_dwpd_error_max: float | None = None      # ... and its max, averaged over the traces
    gen_dwpd_error_worst: float | None = None    # the worst trace's max
    gen_curve_mae: float | None = None
    source_noise_max: float | None = None        # the max error a trace of the source's length drawn from the
    #                                              model shows against the model's own W(C) (median over draws)
    gen_goal: str | None = None                  # the check against its goal (GEN_GOALS; kvbench.stream.fit.gen_verdict)

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}


GEN_GOALS = ("met", "unattainable", "missed")    # met; out of reach of one trace of the model on a source this short,
#                                                  the fit scoring as an exact model would; missed


@dataclass(frozen=True)
class WorkloadModel:
    """One workload, every parameter explicit (see the module docstring for the meaning of each)."""

    name: str = "custom"
    description: str = ""
    block_tokens: int = 512
    sources: tuple[str, ...] = ()
    fitted_span_s: float = 0.0         # span of the trace a fit estimated this from (0: not fitted)
    arrivals: Arrivals = Arrivals()
    sessions: Sessions = Sessions()
    prompts: Prompts = Prompts()
    calibration: Calibration | None = None     # set by trace fit's calibration (metadata, not generation)

    # --- derived quantities -------------------------------------------------------------------------
    @property
    def visits_mean(self) -> float:
        p = self.sessions.return_probability
        return 1.0 / (1.0 - p) if p < 1 else math.inf

    def with_rate(self, rate: float) -> "WorkloadModel":
        return replace(self, arrivals=replace(self.arrivals, rate=float(rate)))

    def validate(self, where: str = "model") -> "WorkloadModel":
        a, s, p = self.arrivals, self.sessions, self.prompts
        checks = [
            (self.block_tokens >= 1, "workload.block_tokens", self.block_tokens, "tokens per KV block, e.g. 512"),
            (self.fitted_span_s >= 0, "workload.fitted_span_s", self.fitted_span_s, "seconds >= 0 (0: not fitted)"),
            (a.rate > 0, "arrivals.rate", a.rate, "requests per second > 0, e.g. 2"),
            (a.burstiness > 0, "arrivals.burstiness", a.burstiness, "a CV > 0 (1 = Poisson)"),
            (0 <= a.diurnal_amplitude < 1, "arrivals.diurnal_amplitude", a.diurnal_amplitude, "a value in [0, 1)"),
            (0 <= a.peak_hour < 24, "arrivals.peak_hour", a.peak_hour, "an hour in [0, 24)"),
            (a.weekend_factor > 0, "arrivals.weekend_factor", a.weekend_factor, "a factor > 0 (1 = no weekly cycle)"),
            (0 <= a.start_hour < 24, "arrivals.start_hour", a.start_hour, "an hour in [0, 24)"),
            (0 <= a.start_weekday <= 6, "arrivals.start_weekday", a.start_weekday, "0 (Monday) to 6"),
            (s.turns_mean >= 1, "sessions.turns_mean", s.turns_mean, "a mean >= 1"),
            (s.think_time_s >= 0, "sessions.think_time_s", s.think_time_s, "seconds >= 0"),
            (s.think_sigma >= 0, "sessions.think_sigma", s.think_sigma, "a shape >= 0"),
            (0 <= s.return_probability < 1, "sessions.return_probability", s.return_probability, "a value in [0, 1)"),
            (s.return_time_s > 0, "sessions.return_time_s", s.return_time_s, "seconds > 0"),
            (s.return_sigma >= 0, "sessions.return_sigma", s.return_sigma, "a shape >= 0"),
            (s.max_context_tokens >= self.block_tokens, "sessions.max_context_tokens", s.max_context_tokens,
             "at least one block of tokens"),
            (0 <= p.system_probability <= 1, "prompts.system_probability", p.system_probability,
             "a value in [0, 1]"),
            (p.system_prompts >= 1, "prompts.system_prompts", p.system_prompts, "at least 1"),
            (p.system_tokens >= 0, "prompts.system_tokens", p.system_tokens, "tokens >= 0"),
            (0 <= p.document_probability <= 1, "prompts.document_probability", p.document_probability,
             "a value in [0, 1]"),
            (p.documents >= 0, "prompts.documents", p.documents, "a count >= 0"),
            (p.document_probability == 0 or (p.documents >= 1 and p.document_tokens > 0),
             "prompts.document_probability", p.document_probability,
             "give documents >= 1 and document_tokens > 0, or document_probability = 0"),
            (p.first_user_tokens >= 1, "prompts.first_user_tokens", p.first_user_tokens, "tokens >= 1"),
            (p.user_tokens >= 0, "prompts.user_tokens", p.user_tokens, "tokens >= 0"),
            (p.output_tokens >= 0, "prompts.output_tokens", p.output_tokens, "tokens >= 0"),
        ]
        for name in ("system_prompt_tokens", "system_prompt_weights", "system_user_tokens", "system_user_sigma"):
            v = getattr(p, name)
            checks.append((not v or len(v) == p.system_prompts, f"prompts.{name}", len(v),
                           f"one value per system prompt ({p.system_prompts}), or none"))
            checks.append((all(x >= 0 and math.isfinite(x) for x in v) and (name != "system_prompt_weights"
                                                                               or not v or sum(v) > 0),
                           f"prompts.{name}", v, "values >= 0 (weights not all 0)"))
        checks.append((len(p.system_user_sigma) == len(p.system_user_tokens), "prompts.system_user_sigma",
                       len(p.system_user_sigma), f"one shape per system_user_tokens value ({len(p.system_user_tokens)})"))
        sq, n_sys = p.system_user_quantiles, max(1, p.system_prompts)
        rows = [sq[i:i + len(sq) // n_sys] for i in range(0, len(sq), max(1, len(sq) // n_sys))]
        checks.append((not sq or (len(sq) % n_sys == 0 and len(sq) // n_sys >= 2
                                  and all(math.isfinite(x) and x >= 0 for x in sq)
                                  and all(all(b >= a for a, b in zip(r, r[1:])) for r in rows)),
                       "prompts.system_user_quantiles", len(sq),
                       f"one row of two or more non-decreasing values >= 0 per system prompt ({p.system_prompts}), "
                       "the rows concatenated, or none"))
        checks.append((p.bare_user_tokens >= 0, "prompts.bare_user_tokens", p.bare_user_tokens,
                       "tokens >= 0 (0: the pooled first_user_*)"))
        for name in ("first_user_quantiles", "user_quantiles", "output_quantiles", "document_quantiles",
                     "bare_user_quantiles"):
            q = getattr(p, name)
            checks.append((not q or (len(q) >= 2 and all(math.isfinite(x) and x >= 0 for x in q)
                                     and all(b >= a for a, b in zip(q, q[1:]))), f"prompts.{name}", q,
                           "at least two non-decreasing values >= 0 (quantiles from 0 to 1), or none"))
        for sig in ("system_sigma", "document_sigma", "first_user_sigma", "user_sigma", "output_sigma",
                    "bare_user_sigma"):
            checks.append((getattr(p, sig) >= 0, f"prompts.{sig}", getattr(p, sig), "a shape >= 0"))
        for z in ("system_zipf", "document_zipf"):
            checks.append((getattr(p, z) >= 0, f"prompts.{z}", getattr(p, z), "an exponent >= 0"))
        for ok, name, value, fix in checks:
            if not (ok and _finite(value)):
                raise SpecError(f"{where}: {name} = {value!r} is invalid", f"give {fix}")
        return self

    def to_dict(self) -> dict:
        d = asdict(self)
        prompts = {k: (list(v) if isinstance(v, tuple) else v) for k, v in d["prompts"].items()
                   if not (isinstance(v, tuple) and not v)          # empty optional lists are left out,
                   and not (k in OPTIONAL_ZERO and v == 0)}          # and optional means of 0 (unused)
        return {"workload": {"name": d["name"], "description": d["description"], "block_tokens": d["block_tokens"],
                             "sources": list(d["sources"]),
                             **({"fitted_span_s": d["fitted_span_s"]} if d["fitted_span_s"] else {})},
                "arrivals": d["arrivals"], "sessions": d["sessions"], "prompts": prompts,
                **({"calibration": self.calibration.to_dict()} if self.calibration is not None else {})}


OPTIONAL_ZERO = ("bare_user_tokens", "bare_user_sigma")   # prompts fields left out of a model file when 0


def _finite(v) -> bool:
    return not isinstance(v, float) or math.isfinite(v)


SECTIONS = {"arrivals": Arrivals, "sessions": Sessions, "prompts": Prompts}
WORKLOAD_KEYS = ("name", "description", "block_tokens", "sources", "fitted_span_s")


def _coerce(cls, section: str, values: dict, where: str) -> object:
    types = {f.name: f.type for f in fields(cls)}
    unknown = sorted(set(values) - set(types))
    if unknown:
        raise SpecError(f"{where}: unknown parameter {section}.{unknown[0]}"
                        + (f" (and {', '.join(unknown[1:])})" if unknown[1:] else ""),
                        f"valid in [{section}]: {', '.join(types)}")
    out = {}
    for k, v in values.items():
        t = types[k]
        if t.startswith("tuple"):
            if not isinstance(v, list) or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
                raise SpecError(f"{where}: {section}.{k} = {v!r} is not a list of numbers",
                                f"write {section}.{k} = [1.0, 2.0]")
            out[k] = tuple(float(x) for x in v)
            continue
        ok = (isinstance(v, bool) if t == "bool" else
              isinstance(v, (int, float)) and not isinstance(v, bool) if t == "float" else
              isinstance(v, int) and not isinstance(v, bool))
        if not ok:
            raise SpecError(f"{where}: {section}.{k} = {v!r} is not a {'number' if t == 'float' else t}",
                            f"write {section}.{k} as a {'number' if t == 'float' else t}")
        out[k] = float(v) if t == "float" else v
    return cls(**out)


def model_from_dict(d: dict, where: str = "<model>") -> WorkloadModel:
    """A validated model from a TOML-shaped dict; unknown tables or parameters are errors naming them."""
    unknown = sorted(set(d) - {"workload", "calibration", *SECTIONS})
    if unknown:
        raise SpecError(f"{where}: unknown section [{unknown[0]}]",
                        f"valid sections: [workload], {', '.join(f'[{s}]' for s in SECTIONS)}, [calibration]")
    w = dict(d.get("workload") or {})
    bad = sorted(set(w) - set(WORKLOAD_KEYS))
    if bad:
        raise SpecError(f"{where}: unknown parameter workload.{bad[0]}", f"valid in [workload]: {', '.join(WORKLOAD_KEYS)}")
    bt = w.get("block_tokens", 512)
    if not isinstance(bt, int) or isinstance(bt, bool):
        raise SpecError(f"{where}: workload.block_tokens = {bt!r} is not an integer", "give e.g. 512")
    fitted = w.get("fitted_span_s", 0.0)
    if not isinstance(fitted, (int, float)) or isinstance(fitted, bool):
        raise SpecError(f"{where}: workload.fitted_span_s = {fitted!r} is not a number", "give seconds, e.g. 3600")
    sources = w.get("sources", [])
    if isinstance(sources, str):
        sources = [sources]
    parts = {s: _coerce(cls, s, dict(d.get(s) or {}), where) for s, cls in SECTIONS.items()}
    m = WorkloadModel(name=str(w.get("name", Path(where).stem if where != "<model>" else "custom")),
                      description=str(w.get("description", "")), block_tokens=bt, fitted_span_s=float(fitted),
                      sources=tuple(str(x) for x in sources), **parts,
                      calibration=_calibration(d["calibration"], where) if "calibration" in d else None)
    return m.validate(where)


def _calibration(values, where: str) -> Calibration:
    """The [calibration] table (every key optional; unknown keys and non-numbers are errors naming them)."""
    if not isinstance(values, dict):
        raise SpecError(f"{where}: calibration is not a table", "write it as [calibration]")
    types = {f.name: f.type for f in fields(Calibration)}
    out = {}
    for k, v in values.items():
        if k not in types:
            raise SpecError(f"{where}: unknown parameter calibration.{k}",
                            f"valid in [calibration]: {', '.join(types)}")
        t = types[k]
        ok = (isinstance(v, bool) if t == "bool" else isinstance(v, int) and not isinstance(v, bool) if t == "int"
              else isinstance(v, str) if t.startswith("str")
              else isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v))
        if not ok:
            raise SpecError(f"{where}: calibration.{k} = {v!r} is not a {t.split(' ')[0]}",
                            f"write calibration.{k} as a {t.split(' ')[0]}")
        if k == "gen_goal" and v not in GEN_GOALS:
            raise SpecError(f"{where}: calibration.gen_goal = {v!r} is not one of {', '.join(GEN_GOALS)}",
                            f"write calibration.gen_goal as one of {', '.join(GEN_GOALS)} (trace fit writes it)")
        out[k] = float(v) if t.startswith("float") else v
    return Calibration(**out)


def load_model_file(name_or_path: str | Path) -> WorkloadModel:
    """A model from a TOML file or a shipped preset name (``workloads/classes/``)."""
    from kvbench.spec.presets import load_preset

    d, path = load_preset(PRESET_KIND, str(name_or_path))
    return model_from_dict(d, str(path))


def preset_names() -> list[str]:
    from kvbench.spec.presets import preset_names as names

    return names(PRESET_KIND)


# --- TOML out ----------------------------------------------------------------------------------------
def to_toml(model: WorkloadModel, comments: dict[str, str] | None = None, header: str = "") -> str:
    """The model as a TOML document (what ``load_model_file`` reads back); ``comments`` per ``section.key``."""
    from kvbench.spec.presets import dump_toml

    def rounded(v):
        if isinstance(v, float):
            return round(v, 6) if math.isfinite(v) else 0.0
        return [rounded(x) for x in v] if isinstance(v, list) else v

    d = {s: {k: rounded(v) for k, v in t.items()} for s, t in model.to_dict().items()}
    return dump_toml(d, comments, header)
