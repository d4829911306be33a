"""benchmarks/gpu_prefill.sh, the prepared GPU measurement, checked on the CPU in its smoke mode."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

from kvbench.compute.profile import load_profile

from tests.conftest import REPO


@pytest.mark.slow
def test_gpu_script_smoke_on_cpu(tmp_path):
    """benchmarks/gpu_prefill.sh in its CPU smoke mode: tiny presets measured, profiles written and checked."""
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch not installed")
    repo = REPO
    env = {**os.environ, "KVBENCH_SMOKE": "1", "PYTHON": sys.executable}
    r = subprocess.run([str(repo / "benchmarks" / "gpu_prefill.sh"), str(tmp_path)], cwd=repo, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    for model in ("tiny-gqa", "tiny-mla"):
        p = load_profile(tmp_path / f"{model}-cpu-smoke.toml")
        assert p.kind == "measured" and p.model == model and len(p.points_tokens) == 4
        assert "LOAD" in (tmp_path / f"{model}-cpu-smoke-check.txt").read_text()
