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

from tests.conftest import REPO  # noqa: E402

HERE = REPO / "tests" / "bad_inputs"
CASES = sorted(p for p in HERE.glob("*.toml") if p.name != "table.toml")


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


# --- the table: one row per bad input, run in-process ----------------------------------------------------------
TABLE = HERE / "table.toml"
_TRACE = "".join(f'{{"timestamp": {i * 1000}, "input_length": {600 + 300 * (i % 3)}, "output_length": 5, '
                 f'"hash_ids": [{", ".join(str(j) for j in range(1, 2 + i % 3))}]}}\n' for i in range(6))
_SEED = b"\x8f\x03\x00\xff\xfe\x00\x12" * 3000         # 21 KB of binary with NULs and invalid UTF-8

#: files every row's scratch folder starts with ({tmp}/NAME); rows name what they need
FIXTURE_FILES = {
    "t.jsonl": _TRACE.encode(),
    "bin.dat": _SEED,
    "nul.jsonl": b"\x00\x00\x00" + _TRACE.encode(),
    "binline.jsonl": b'{"timestamp": 0, "input_length": 5, "hash_ids": [' + _SEED + b"]}\n",
    "bin.toml": _SEED,
    "big_ts.jsonl": b'{"timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": [1]}\n'
                    b'{"timestamp": 1e30, "input_length": 10, "output_length": 5, "hash_ids": [1]}\n',
    "big_len.jsonl": b'{"timestamp": 0, "input_length": 1000000000000000000, "output_length": 5, "hash_ids": [1]}\n'
                     b'{"timestamp": 1000, "input_length": 10, "output_length": 5, "hash_ids": [1]}\n',
    "empty.jsonl": b"",
    "mine.txt": b"the user's own file: kvbench must not overwrite it\n",
    "bad.toml": b"this is = = not toml\n",
}


def _rows() -> list[dict]:
    with open(TABLE, "rb") as fh:
        return tomllib.load(fh)["row"]


def _tree(root: Path) -> dict:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() and not p.is_symlink() else os.readlink(p)
                                       if p.is_symlink() else None) for p in root.rglob("*")}


ROWS = _rows()


@pytest.mark.parametrize("row", ROWS, ids=[r.get("id") or " ".join(r["argv"])[:60] for r in ROWS])
def test_table_row_fails_cleanly(row, tmp_path, monkeypatch):
    """argv (in {tmp}, which holds FIXTURE_FILES and a symlink link.txt -> mine.txt) exits ``exit`` with one
    short error line holding ``match``; nothing in {tmp} is created or changed (``absent`` names outputs)."""
    from click.testing import CliRunner

    from kvbench.cli import main

    for name, data in FIXTURE_FILES.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "link.txt").symlink_to(tmp_path / "mine.txt")
    (tmp_path / "adir").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KVBENCH_DEBUG", "")
    for k, v in row.get("env", {}).items():
        monkeypatch.setenv(k, v.replace("{tmp}", str(tmp_path)))
    before = _tree(tmp_path)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in row["argv"]]
    r = CliRunner().invoke(main, argv, catch_exceptions=False)
    out = r.output
    assert r.exit_code == row["exit"], f"exit {r.exit_code}: {out}"
    assert "Traceback" not in out and "internal error" not in out, out
    errors = [line for line in out.splitlines() if line.startswith(("kvbench: error:", "Error:"))]
    assert len(errors) == 1, f"expected one error line, got: {out!r}"
    assert len(errors[0]) <= 700, f"an error line of {len(errors[0])} characters"
    assert row["match"].lower() in errors[0].lower(), errors[0]
    for name in row.get("absent", []):
        assert not (tmp_path / name).exists(), f"{name} was written"
    if row.get("clean", True):
        assert _tree(tmp_path) == before, "the failed command created or changed files"


def test_the_table_covers_every_command():
    import click

    from kvbench.cli import main

    def leaves(group, prefix=()):
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            cmd = group.get_command(ctx, name)
            if isinstance(cmd, click.Group):
                yield from leaves(cmd, prefix + (name,))
            else:
                yield prefix + (name,)

    covered = {tuple(r["argv"][:2]) for r in ROWS} | {tuple(r["argv"][:1]) for r in ROWS}
    missing = [" ".join(p) for p in leaves(main) if p not in covered]
    assert not missing, f"no bad-input row for: {missing}"
    assert len(ROWS) + len(CASES) >= 150, f"{len(ROWS)} rows + {len(CASES)} cases"
