"""Find and load TOML presets shipped in ``workloads/<kind>/`` (or given as a path).

One mechanism for every preset family: models, engram tables, compute profiles, prices, qualification
profiles. ``KVBENCH_WORKLOADS`` overrides the folder (for installs outside a checkout).
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from kvbench.errors import SpecError


def workloads_dir() -> Path:
    """The folder holding the shipped presets."""
    env = os.environ.get("KVBENCH_WORKLOADS")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "workloads"


def preset_names(kind: str) -> list[str]:
    """Names of the presets of one kind (``models``, ``engram``, ``compute``, ``prices``, ``qualify``)."""
    folder = workloads_dir() / kind
    return sorted(p.stem for p in folder.glob("*.toml")) if folder.is_dir() else []


def preset_path(kind: str, name_or_path: str) -> Path:
    """Resolve a preset name (``llama-3.1-8b``) or a path to a TOML file; SpecError names the choices."""
    p = Path(name_or_path)
    if p.suffix in (".toml", ".json") or os.sep in str(name_or_path):
        if not p.is_file():
            raise SpecError(f"{kind} preset file not found: {name_or_path}", "give an existing .toml path or a preset name")
        return p
    candidate = workloads_dir() / kind / f"{name_or_path}.toml"
    if candidate.is_file():
        return candidate
    names = preset_names(kind)
    raise SpecError(f"unknown {kind} preset {name_or_path!r}",
                    f"choose one of: {', '.join(names) if names else '(none shipped)'} or give a .toml path")


def load_toml(path: Path) -> dict:
    """Read a TOML file; a syntax error names the file and the line."""
    try:
        with open(path, "rb") as fh:          # utf-8-sig: a UTF-8 byte-order mark is read past
            return tomllib.loads(fh.read().decode("utf-8-sig"))
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"{path}: invalid TOML: {e}", "fix the file's syntax") from None
    except UnicodeDecodeError as e:         # binary data (or another encoding): one short line, not the bytes
        raise SpecError(f"{path}: not a UTF-8 text file (byte {e.start}: binary data?)",
                        "give a TOML file (kvbench trace fit writes one)") from None
    except OSError as e:
        raise SpecError(f"{path}: cannot read: {e.strerror}", "check the path and permissions") from None


def load_preset(kind: str, name_or_path: str) -> tuple[dict, Path]:
    """Load a preset as a dict, with the path it came from."""
    path = preset_path(kind, name_or_path)
    return load_toml(path), path


# --- writing -------------------------------------------------------------------------------------------
def toml_value(v) -> str:
    """One TOML value: bool, int, finite float, string, or a list of them (a non-finite number is an error)."""
    import json
    import math

    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise SpecError(f"cannot store non-finite number {v} in TOML", "drop failed measurements")
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a JSON string is a valid TOML basic string
    if isinstance(v, (list, tuple)):
        if all(isinstance(x, (int, float)) for x in v):
            return "[" + ", ".join(toml_value(x) for x in v) + "]"
        return "[\n" + "".join(f"  {toml_value(x)},\n" for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def dump_toml(d: dict, comments: dict[str, str] | None = None, header: str = "") -> str:
    """A dict of scalars, lists and one level of tables as TOML (presets need nothing more); ``comments`` by
    ``key`` or ``table.key`` go after their value, ``header`` lines on top as comments. None values are left out."""
    comments = comments or {}
    lines = [f"# {x}" for x in header.splitlines()]
    tables = []

    def line(key, v, where):
        c = comments.get(where)
        return f"{key} = {toml_value(v)}" + (f"   # {c}" if c else "")

    for k, v in d.items():
        if isinstance(v, dict):
            tables.append((k, v))
        elif v is not None:
            lines.append(line(k, v, k))
    for name, table in tables:
        if lines:
            lines.append("")
        lines.append(f"[{name}]")
        lines.extend(line(k, v, f"{name}.{k}") for k, v in table.items() if v is not None)
    return "\n".join(lines) + "\n"
