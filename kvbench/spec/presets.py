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
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"{path}: invalid TOML: {e}", "fix the file's syntax") from None
    except OSError as e:
        raise SpecError(f"{path}: cannot read: {e.strerror}", "check the path and permissions") from None


def load_preset(kind: str, name_or_path: str) -> tuple[dict, Path]:
    """Load a preset as a dict, with the path it came from."""
    path = preset_path(kind, name_or_path)
    return load_toml(path), path
