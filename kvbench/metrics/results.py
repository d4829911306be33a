"""The result contract: what a run folder holds, as typed and versioned records, and the one reader of it.

A run folder (``results/<run>/``) holds ``run.json`` (:class:`RunInfo`: command, config, environment),
``summary.json`` (:class:`Summary`; a ``replay kv`` summary is also read as :class:`ReplaySummary`, and
``kvbench run``'s ``answer`` as :class:`kvbench.analysis.answer.Answer`, versioned on its own) and,
where a job or command attached them, ``plan.json`` (:class:`PlanResult`) and ``check.json``
(:class:`CheckResult`). Each of those JSON objects carries ``"schema": <int>``, the version of its file's
layout in :data:`SCHEMAS`; the keys the README documents keep their names, a version only adds or moves.

:func:`read_run` is the one reader: every command that reads a folder (``plan --run``, ``check --run``,
``report``, ``cluster``, ``qualify``, ``run``) goes through it. A file written before the contract has no
``schema`` (version 0) and is brought to the current layout by :func:`upgrade`, the one place that knows
older layouts; a newer or unknown version is refused with one line naming the file, its version and the fix.
Readers then read each field from one place, never through ``.get()`` fallbacks over older layouts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from kvbench.errors import UsageError

#: current layout version of each contract file (bump one when its layout changes, and teach upgrade())
SCHEMAS = {"run": 1, "summary": 1, "plan": 1, "check": 1}

#: analyses a job may attach besides plan and check, read as plain JSON (file name without .json)
OTHER_ANALYSES = ("mrc", "retention", "qualify", "steady_state", "probes", "curve", "load_paths")


def stamp(name: str, doc: dict) -> dict:
    """``doc`` with ``schema`` set to the current version of contract file ``name`` (first key)."""
    return {"schema": SCHEMAS[name], **{k: v for k, v in doc.items() if k != "schema"}}


# --- reading and upgrading one file ------------------------------------------------------------------------

def read_json(path: Path):
    """Parse one JSON file; a bad or unreadable file is a one-line error naming it."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except json.JSONDecodeError as e:
        raise UsageError(f"{path}:{e.lineno}: invalid JSON: {e.msg}",
                         "the run was probably killed while writing; rerun it or delete the file") from None
    except OSError as e:
        raise UsageError(f"{path}: cannot read: {e.strerror}", "check the path and permissions") from None


def checked(name: str, doc, source, run: dict | None = None) -> dict:
    """``doc`` (contract file ``name``, read from ``source``) validated and brought to the current layout.

    No ``schema``: written before the contract (version 0), upgraded. A version above the current one (a
    newer kvbench wrote it) or not an integer is refused."""
    if not isinstance(doc, dict):
        raise UsageError(f"{source}: holds {type(doc).__name__}, not a JSON object",
                         "rerun the command that wrote it")
    version = doc.get("schema", 0)
    current = SCHEMAS[name]
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise UsageError(f"{source}: schema {version!r} is not a {name} layout version kvbench knows "
                         f"(this kvbench reads versions 0-{current})", "rerun the command that wrote it")
    if version > current:
        raise UsageError(f"{source}: schema {version} is newer than this kvbench reads ({name} layout "
                         f"{current})", "read it with the kvbench version that wrote it, or upgrade kvbench")
    return upgrade(name, doc, version, run or {}) if version < current else doc


def upgrade(name: str, doc: dict, version: int, run: dict) -> dict:
    """A version-0 (pre-contract) file in the current layout; ``run`` is the folder's run.json (or {}).

    Version 0 -> 1: a replay summary names its model, slot size and its L3 tier's capacity, layout and
    full-size byte volumes itself (older ones left them in run.json's config, in a capacity in blocks, or,
    unsampled, in the measured volumes only); a summary without ``kind`` takes run.json's."""
    out = dict(doc)
    if version == 0 and name == "summary":
        out.setdefault("kind", run.get("kind", "unknown"))
        if out["kind"] == "replay-kv":
            out = _upgrade_replay_summary_0(out, run.get("config") or {})
    out["schema"] = SCHEMAS[name]
    return out


def _upgrade_replay_summary_0(s: dict, config: dict) -> dict:
    for key in ("model", "slot_bytes"):
        if s.get(key) is None and config.get(key) is not None:
            s[key] = config[key]
    tiers = {k: dict(v) for k, v in (s.get("tiers") or {}).items() if isinstance(v, dict)}
    for t in tiers.values():
        for k in ("read_bytes", "write_bytes", "trim_bytes"):
            if f"full_{k}" not in t and k in t:
                t[f"full_{k}"] = t[k]
    l3 = tiers.get("l3")
    if l3 is not None:
        cap = l3.get("capacity_bytes") or config.get("l3_capacity") or config.get("l3_capacity_bytes")
        if not cap and l3.get("capacity_blocks") and s.get("slot_bytes"):
            cap = l3["capacity_blocks"] * s["slot_bytes"]
        l3["capacity_bytes"] = cap or None
        l3.setdefault("layout", config.get("layout"))
    s["tiers"] = tiers
    return s


# --- the records -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RunInfo:
    """run.json: what ran (command, config, environment, targets' facts)."""

    run_id: str
    kind: str
    command: str
    config: dict
    environment: dict
    data: dict                           # the whole file, current layout

    @classmethod
    def from_json(cls, doc, source="run.json") -> "RunInfo":
        d = checked("run", doc, source)
        return cls(str(d.get("run_id", "")), str(d.get("kind", "unknown")), str(d.get("command", "")),
                   dict(d.get("config") or {}), dict(d.get("environment") or {}), d)

    def to_json(self) -> dict:
        return stamp("run", self.data)


@dataclass(frozen=True)
class TierResult:
    """One tier of a replay summary (``tiers.<name>``): what the readers of a replay take from it."""

    name: str
    capacity_bytes: float | None         # the cache modelled (full size when key-sampled)
    layout: str | None                   # block store layout (L3): slot | log
    read_bytes: float | None
    write_bytes: float | None
    full_write_bytes: float | None       # write bytes of the full-size cache (= write_bytes unless sampled)
    read_bw_bytes_per_s: float | None    # run average; None for a simulated tier
    read_lat_p50_s: float | None

    @classmethod
    def from_json(cls, name: str, t: dict) -> "TierResult":
        lat = t.get("read_lat_us")
        p50 = lat.get("p50") if isinstance(lat, dict) else None
        return cls(name, _num(t.get("capacity_bytes")), t.get("layout"), _num(t.get("read_bytes")),
                   _num(t.get("write_bytes")), _num(t.get("full_write_bytes")),
                   _num(t.get("read_bw_bytes_per_s")), None if p50 is None else float(p50) * 1e-6)


@dataclass(frozen=True)
class Summary:
    """summary.json of any command: ``kind``, ``status``, ``run_dir`` always; the rest as the command wrote it."""

    kind: str
    status: str
    run_dir: str
    data: dict                           # the whole file, current layout
    source: str = "summary.json"         # where it was read (for messages)

    @classmethod
    def from_json(cls, doc, source="summary.json", run: dict | None = None) -> "Summary":
        d = checked("summary", doc, source, run)
        return cls(str(d.get("kind", "unknown")), str(d.get("status", "unknown")), str(d.get("run_dir", "")), d,
                   str(source))

    def to_json(self) -> dict:
        return stamp("summary", self.data)

    @property
    def parts(self) -> dict:
        """A job's step folders by step name (``kvbench run``, ``qualify``, ``cluster``), as recorded."""
        return dict(self.data.get("parts") or {})

    @property
    def answer(self):
        """``kvbench run``'s :class:`~kvbench.analysis.answer.Answer` (``answer``), read by its own ``from_json``
        (which checks the answer's ``schema``); None for a run without one, or one written before the Answer
        record (whose ``answer`` held the plan's sentences, the report's fallback)."""
        a = self.data.get("answer")
        if not isinstance(a, dict) or "decision" not in a:
            return None
        from kvbench.analysis.answer import Answer

        return Answer.from_json(a, f"{self.source}: answer")


@dataclass(frozen=True)
class ReplaySummary:
    """A ``kvbench replay kv`` summary: what ``plan --run`` and ``check --run`` read from it."""

    summary: Summary
    model: str | None
    block_tokens: int | None             # run.json config (the replay's trace's)
    slot_bytes: int | None
    dry_run: bool
    sample_rate: float
    requests: int | None                 # requests simulated
    requests_not_issued: int             # of those, whose I/O the run did not issue (it stopped)
    tiers: dict = field(default_factory=dict)     # name -> TierResult
    export_iolog: str | None = None      # the fio iolog the replay exported (run.json config), if any

    @classmethod
    def from_summary(cls, s: Summary, config: dict, source="summary.json") -> "ReplaySummary":
        if s.kind != "replay-kv":
            raise UsageError(f"{source}: a '{s.kind}' run, not a replay kv run",
                             "give a results/<run> folder written by kvbench replay kv")
        d = s.data
        bt, slot = config.get("block_tokens"), d.get("slot_bytes")
        return cls(s, d.get("model"), None if bt is None else int(bt), None if slot is None else int(slot),
                   bool(d.get("dry_run")), float(d.get("sample_rate") or 1.0),
                   None if d.get("requests") is None else int(d["requests"]), int(d.get("requests_not_issued") or 0),
                   {k: TierResult.from_json(k, v) for k, v in (d.get("tiers") or {}).items() if isinstance(v, dict)},
                   config.get("export_iolog"))

    @property
    def requests_issued(self) -> int | None:
        return None if self.requests is None else self.requests - self.requests_not_issued


@dataclass(frozen=True)
class PlanResult:
    """plan.json (``kvbench plan --json``): capacity, DWPD, residence and the bill per target."""

    data: dict

    @classmethod
    def from_json(cls, doc, source="plan.json") -> "PlanResult":
        return cls(checked("plan", doc, source))

    def to_json(self) -> dict:
        return stamp("plan", self.data)


@dataclass(frozen=True)
class CheckResult:
    """check.json (``kvbench check --json``): load vs recompute per tier."""

    data: dict

    @classmethod
    def from_json(cls, doc, source="check.json") -> "CheckResult":
        return cls(checked("check", doc, source))

    def to_json(self) -> dict:
        return stamp("check", self.data)

    @property
    def tiers(self) -> dict:
        return dict(self.data.get("tiers") or {})


@dataclass(frozen=True)
class RunFolder:
    """One run folder as :func:`read_run` read it (and, for a job, its steps' folders)."""

    path: Path
    run: RunInfo | None                  # None: run.json missing (a folder copied without it)
    summary: Summary
    plan: PlanResult | None = None
    check: CheckResult | None = None
    analyses: dict = field(default_factory=dict)      # other attached JSON by name: mrc, retention, qualify, ...
    parts: dict = field(default_factory=dict)         # step name -> RunFolder

    @property
    def config(self) -> dict:
        return self.run.config if self.run is not None else {}

    @property
    def answer(self):
        """The job's Answer (``kvbench run``), or None: :attr:`Summary.answer`."""
        return self.summary.answer

    @property
    def replay(self) -> ReplaySummary:
        """This folder's replay kv summary (a UsageError for any other kind of run)."""
        return ReplaySummary.from_summary(self.summary, self.config, self.path / "summary.json")


def _num(v) -> float | None:
    return None if v is None else float(v)


def read_run(path, *, parts: bool = True) -> RunFolder:
    """Read a run folder (or its summary.json/run.json); ``parts``: the step folders a job lists, too.

    UsageError (one line) names the folder or file when it is not a kvbench run or a file's schema is
    unknown. A folder without summary.json (killed before writing it) reads as status ``partial``."""
    given = Path(path)
    p = given.parent if given.is_file() and given.name in ("summary.json", "run.json") else given
    if not p.is_dir():
        raise UsageError(f"run folder not found: {path}", "give a folder under results/ written by a kvbench command")
    have_run, have_summary = (p / "run.json").is_file(), (p / "summary.json").is_file()
    if have_run and have_summary:
        from kvbench.metrics.run import mark_stale

        mark_stale(p)                # "running" but its process is gone (killed): says so, for every reader
    if not have_run and not have_summary:
        raise UsageError(f"{p} is not a kvbench run folder (no run.json or summary.json)",
                         "give a folder under results/ written by a kvbench command")
    run = RunInfo.from_json(read_json(p / "run.json"), p / "run.json") if have_run else None
    raw = (read_json(p / "summary.json") if have_summary else    # killed before its first summary: partial
           {"schema": SCHEMAS["summary"], "kind": run.kind, "status": "partial", "run_dir": str(p)})
    summary = Summary.from_json(raw, p / "summary.json", run.data if run else None)
    plan = PlanResult.from_json(read_json(p / "plan.json"), p / "plan.json") if (p / "plan.json").is_file() else None
    check = (CheckResult.from_json(read_json(p / "check.json"), p / "check.json") if (p / "check.json").is_file()
             else None)
    analyses = {n: read_json(p / f"{n}.json") for n in OTHER_ANALYSES if (p / f"{n}.json").is_file()}
    found = {}
    if parts:
        for name, sub in summary.parts.items():
            sp = _part_dir(p, sub)
            if sp is not None:
                found[name] = read_run(sp, parts=False)
    return RunFolder(p, run, summary, plan, check, analyses, found)


def _part_dir(job: Path, recorded) -> Path | None:
    """A step folder as the job recorded it (relative to the job's working directory); the folders may have
    moved since: look inside the job folder and beside it by name too."""
    sub = Path(str(recorded))
    for sp in (sub, job / sub, job / sub.name, job.parent / sub.name):
        if sp.is_dir() and sp.resolve() != job.resolve():
            return sp
    return None
