"""The bad-input corpus (tests/bad_inputs/*.toml): every case must fail cleanly.

Each case names the command line (``{tmp}`` is a scratch folder holding the case's ``files``), the exit code
(2 usage, 1 runtime) and a fragment the one-line error must contain. A clean failure is: the expected exit
code, exactly one line on stderr starting ``kvbench: error:`` or click's ``Error:``, no traceback, and nothing
left behind in the scratch folder (no run folder, no half-written store).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent / "bad_inputs"
REPO = HERE.parents[1]
CASES = sorted(HERE.glob("*.toml"))


def _load(path: Path) -> dict:
    with open(path, "rb") as fh:
        return tomllib.load(fh)


def _snapshot(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.parametrize("case_path", CASES, ids=[p.stem for p in CASES])
def test_bad_input_fails_cleanly(case_path, tmp_path):
    case = _load(case_path)
    for name, text in case.get("files", {}).items():
        target = tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    for name in case.get("dirs", []):
        (tmp_path / name).mkdir(parents=True, exist_ok=True)
    before = _snapshot(tmp_path)
    args = [a.replace("{tmp}", str(tmp_path)) for a in case["args"]]
    env = {**os.environ, "PYTHONPATH": str(REPO), "KVBENCH_DEBUG": ""}
    env.update(case.get("env", {}))
    proc = subprocess.run([sys.executable, "-m", "kvbench", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    err_lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == case["exit"], f"exit {proc.returncode}, stderr: {proc.stderr}"
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    errors = [line for line in err_lines if line.startswith(("kvbench: error:", "Error:"))]
    assert len(errors) == 1, f"expected one error line, got: {proc.stderr!r}"
    # click prints a usage hint before its one 'Error:' line; kvbench's own errors are alone
    if errors[0].startswith("kvbench: error:"):
        assert len(err_lines) == 1, proc.stderr
    assert case["match"].lower() in errors[0].lower(), errors[0]
    if case.get("clean", True):
        assert _snapshot(tmp_path) == before, "the failed command left files behind"


def test_corpus_is_large_enough():
    assert len(CASES) >= 30, f"only {len(CASES)} bad-input cases"
