"""The README's numbers (issue 20): the fast subset of benchmarks/readme_numbers.py runs and every stated
accuracy/ratio holds; the README's table states each claim's range exactly as the script checks it; the
checker fails on a value outside its range; the benchmarks name a missing requirement in one line."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO
BENCH = REPO / "benchmarks"
sys.path.insert(0, str(BENCH))

import readme_numbers as rn  # noqa: E402


def _run(*args, env=None, user=None):
    cmd = [sys.executable, *map(str, args)]
    if user is not None:
        cmd = ["setpriv", f"--reuid={user[0]}", f"--regid={user[1]}", "--clear-groups", *cmd]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


def test_fast_subset_holds_every_stated_range(tmp_path):
    out = tmp_path / "numbers.json"
    p = _run(BENCH / "readme_numbers.py", "--fast", "--json", out)
    assert p.returncode == 0, p.stdout + p.stderr
    res = json.loads(out.read_text())
    fast = {k for k, c in rn.CLAIMS.items() if c.fast}
    assert {r["key"] for r in res["results"]} == fast and len(fast) >= 8
    for r in res["results"]:
        c = rn.CLAIMS[r["key"]]
        assert r["ok"] and all(c.lo <= v <= c.hi for v in r["values"]), r
    assert res["machine"] and res["date"] and res["commit"]


def test_readme_table_states_every_claim_as_the_script_checks_it():
    rows = rn.readme_rows((REPO / "README.md").read_text())
    assert set(rows) == set(rn.CLAIMS), set(rows) ^ set(rn.CLAIMS)
    for key, claim in rn.CLAIMS.items():
        assert rows[key] == claim.stated(), key
    text = (REPO / "README.md").read_text()
    table = text.split(rn.BEGIN, 1)[1].split(rn.END, 1)[0]
    assert "Measured " in table and " on " in table and "commit " in table    # date, machine, commit
    for key in rn.CLAIMS:                    # each number is named beside the command that measures it
        assert f"--only {key}" in table, key


def test_a_value_outside_its_stated_range_fails_the_check(monkeypatch, capsys):
    c = rn.CLAIMS["histogram-error"]
    monkeypatch.setitem(rn.CLAIMS, "histogram-error", dataclasses.replace(c, hi=0.01))   # below 0.2-0.39%
    assert rn.main(["--only", "histogram-error", "--runs", "1"]) == 1
    assert "OUTSIDE the stated range" in capsys.readouterr().out
    monkeypatch.setitem(rn.CLAIMS, "histogram-error", c)
    assert rn.main(["--only", "histogram-error", "--runs", "1"]) == 0


def test_unknown_claims_and_missing_requirements_are_reported(capsys):
    assert rn.main(["--only", "nope"]) == 2
    assert "unknown claim(s) nope" in capsys.readouterr().err
    skipped = rn.measure(dataclasses.replace(rn.CLAIMS["vs-fio-4k-randread"], needs=lambda: "needs fio"), False)
    assert skipped == {"key": "vs-fio-4k-randread", "skipped": "needs fio"}


def test_write_readme_replaces_only_the_table(tmp_path):
    md = tmp_path / "README.md"
    md.write_text(f"# x\nbefore\n{rn.BEGIN}\nold\n{rn.END}\nafter\n")
    res = [{"key": "shards-mae", "values": [0.1, 0.12], "median": 0.11, "min": 0.1, "max": 0.12, "runs": 2,
            "ok": True, "fast": False}]
    rn.write_readme(rn.markdown(res, "2026-01-01 00:00 UTC", "test box", "abc"), md)
    text = md.read_text()
    assert text.startswith("# x\nbefore\n") and text.endswith("after\n") and "old" not in text
    assert "| 0.00% to 0.20% | 0.11% (0.10% to 0.12%, 2) |" in text
    assert "not measured here" in text                 # claims without results say so


def _nobody() -> tuple[int, int] | None:
    """(uid, gid) of an unprivileged user to run a benchmark as, when we are root and can switch."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        return None
    try:
        import pwd
        pw = pwd.getpwnam("nobody")
    except KeyError:
        return None
    return pw.pw_uid, pw.pw_gid


@pytest.mark.parametrize("script, args, needle", [
    ("vs_fio.py", ["--fidelity"], "vs_fio --fidelity: needs root"),
    ("replay_vs_io.py", ["--throttle", "300MB/s"], "replay_vs_io --throttle: needs root"),
])
def test_throttled_benchmarks_need_root_and_say_so_in_one_line(script, args, needle):
    user = _nobody()
    if os.geteuid() == 0 and user is None:
        pytest.skip("root without setpriv/nobody: cannot run the benchmark unprivileged")
    p = _run(BENCH / script, *args, user=user)
    assert p.returncode != 0
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0] and "cgroup-v1 blkio" in lines[0], p.stderr


def test_vs_fio_without_fio_says_so_in_one_line(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    p = _run(BENCH / "vs_fio.py", env={"PATH": str(bin_dir)})
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode != 0 and len(lines) == 1 and "fio is not installed" in lines[0], p.stderr
