"""The output guard: every option naming a file kvbench writes is an ``OUTPUT`` parameter (refused before any
work when it would replace a file kvbench did not write, follow a symlink, or land in a folder that is not
there) and is written only through ``kvbench.engine.safety.PendingOutput`` (a temporary file in the same
folder, renamed on success, deleted on failure or interrupt, marked as kvbench's).

The command tree is walked: a new writing option of another type, or one without a row below, fails here."""

from __future__ import annotations

import os
import re
from pathlib import Path

import click
import pytest

from kvbench.cli import main
from kvbench.cli._common import OutputParam
from kvbench.engine import safety
import json

# (io's --output-format json|json+ is fio's name for a format choice, not a file)
WRITING_NAME = re.compile(r"^(-o|--output(?!-format$).*|--out|--out-.*|--report.*|--export.*|--save.*|--dump.*|"
                          r"--write[-_](?!policy).*)$")

# options naming a prefix of several files (fio's --write_lat_log): not OUTPUT-typed, each derived name goes
# through the guard (check_output before work, atomic_output to write); a row here proves the refusal
PREFIX_ROWS = {
    ("io", "--write_lat_log"): (["io", "--target", "{tmp}/x.dat", "--size", "1MiB", "--runtime", "0.2",
                                 "--write_lat_log", "{tmp}/p"], "p_lat.1.log"),
}

TRACE = ('{"timestamp": 0, "input_length": 1000, "output_length": 5, "hash_ids": [1, 2]}\n'
         '{"timestamp": 1000, "input_length": 1500, "output_length": 5, "hash_ids": [1, 2, 3]}\n'
         '{"timestamp": 2000, "input_length": 600, "output_length": 5, "hash_ids": [4, 5]}\n')

# (command, option) -> a command line that would write {out}; "cheap" rows also run to success here
ROWS = {
    ("io", "--export-iolog"): (["io", "--target", "{tmp}/io.dat", "--size", "1MiB", "--runtime", "0.2",
                                "--export-iolog", "{out}"], False),
    ("replay kv", "--export-iolog"): (["replay", "kv", "{tmp}/t.jsonl", "--model", "tiny-gqa", "--l3",
                                       "{tmp}/store.dat", "--l3-capacity", "16MiB", "--dry-run",
                                       "--results", "{tmp}/results", "--export-iolog", "{out}"], True),
    ("qualify", "--output"): (["qualify", "nvme-kv", "--target", "{tmp}/q.dat", "--size", "64MiB", "-o", "{out}"],
                              False),
    ("report", "--output"): (["report", "{tmp}/results/run", "-o", "{out}"], False),
    ("run", "--output"): (["run", "--trace", "{tmp}/t.jsonl", "-o", "{out}"], False),
    ("plan", "--report"): (["plan", "--trace", "{tmp}/t.jsonl", "--model", "tiny-gqa", "--results",
                            "{tmp}/results", "--report", "{out}"], True),
    ("prefill", "--out"): (["prefill", "--model", "tiny-gqa", "--out", "{out}"], False),
    ("trace convert", "--output"): (["trace", "convert", "{tmp}/t.jsonl", "-o", "{out}"], True),
    ("trace fit", "--output"): (["trace", "fit", "{tmp}/t.jsonl", "--seeds", "1", "-o", "{out}"], True),
    ("trace gen", "--output"): (["trace", "gen", "chat", "-n", "20", "-o", "{out}"], True),
}


def _commands(group=main, prefix=()):
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, prefix + (name,))
        else:
            yield " ".join(prefix + (name,)), cmd


def _writing_options():
    for path, cmd in _commands():
        for p in cmd.params:
            if isinstance(p, click.Option) and (isinstance(p.type, OutputParam) or
                                                any(WRITING_NAME.match(o) for o in p.opts) or
                                                (isinstance(p.type, click.File) and "w" in p.type.mode)):
                yield path, cmd, p


def test_every_writing_option_is_an_output_parameter_with_force_and_a_row_here():
    found, prefixes = set(), set()
    for path, cmd, p in _writing_options():
        long = max(p.opts, key=len)
        prefix = [(path, o) for o in p.opts if (path, o) in PREFIX_ROWS]
        if prefix:
            prefixes.update(prefix)
            continue
        assert isinstance(p.type, OutputParam), f"{path} {long} writes a file without the output guard (OUTPUT)"
        force = [q for q in cmd.params if "--force" in getattr(q, "opts", ())]
        assert force and force[0].is_eager and not force[0].expose_value, \
            f"{path} has {long} but no --force from kvbench.cli._common.force_option"
        found.add((path, long))
    assert found == set(ROWS), "a writing option without a row in ROWS (or a row without its option)"
    assert prefixes == set(PREFIX_ROWS), "a PREFIX_ROWS entry names no option"


def _setup(tmp_path) -> dict:
    (tmp_path / "t.jsonl").write_text(TRACE)
    return {"tmp": str(tmp_path)}


def _argv(row, out, subs):
    return [a.replace("{out}", str(out)).format(**subs) for a in row]


def _files(root: Path) -> dict:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() and not p.is_symlink() else None)
            for p in root.rglob("*")}


@pytest.mark.parametrize("key", sorted(ROWS), ids=[" ".join(k) for k in sorted(ROWS)])
def test_a_foreign_file_or_symlink_is_refused_before_any_work(key, tmp_path, cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    subs = _setup(tmp_path)
    (tmp_path / "mine.txt").write_text("the user's own file\n")
    (tmp_path / "link.html").symlink_to(tmp_path / "mine.txt")
    for out, phrase in ((tmp_path / "mine.txt", "was not written by kvbench"),
                        (tmp_path / "link.html", "is a symbolic link"),
                        (tmp_path / "no-such-folder" / "x.out", "output folder does not exist"),
                        (tmp_path, "is a folder")):
        before = _files(tmp_path)
        r = cli(*_argv(ROWS[key][0], out, subs))
        assert r.exit_code == 2, (out, r.output)
        assert phrase in r.output and r.output.count("\n") == 1, r.output
        assert _files(tmp_path) == before, "a refused command changed or left files"


CHEAP = sorted(k for k, (_, cheap) in ROWS.items() if cheap)


@pytest.mark.parametrize("key", CHEAP, ids=[" ".join(k) for k in CHEAP])
def test_an_output_is_written_through_the_guard(key, tmp_path, cli, monkeypatch):
    """Written: marked as kvbench's (so a rerun may replace it), no temporary file left; --force replaces a
    symlink itself, never the file it points to."""
    monkeypatch.chdir(tmp_path)
    subs = _setup(tmp_path)
    out = tmp_path / "out.file"
    for _ in range(2):                              # the second run replaces kvbench's own output
        r = cli(*_argv(ROWS[key][0], out, subs))
        assert r.exit_code == 0, r.output
        assert out.is_file() and out.stat().st_size > 0 and safety.is_owned(str(out))
        assert not list(tmp_path.glob(".kvbench-tmp-*"))
    (tmp_path / "mine.txt").write_text("the user's own file\n")
    link = tmp_path / "link.out"
    link.symlink_to(tmp_path / "mine.txt")
    r = cli(*_argv(ROWS[key][0], link, subs), "--force")
    assert r.exit_code == 0, r.output
    assert not link.is_symlink() and link.is_file()
    assert (tmp_path / "mine.txt").read_text() == "the user's own file\n"


def test_a_failure_while_writing_leaves_nothing(tmp_path):
    out = tmp_path / "trace.jsonl.gz"
    from kvbench.stream.generators import open_output

    for exc in (KeyboardInterrupt, OSError(28, "No space left on device"), RuntimeError("boom")):
        with pytest.raises(type(exc) if isinstance(exc, Exception) else exc):
            with open_output(out) as fh:
                fh.write('{"timestamp": 0}\n' * 1000)
                raise exc
        assert os.listdir(tmp_path) == [], "a half-written output (or its temporary file) was left"


def test_the_guard_replaces_kvbench_files_only_and_force_is_per_path(tmp_path):
    mine = tmp_path / "a.html"
    mine.write_text("someone's")
    with pytest.raises(safety.SafetyError):
        safety.PendingOutput(mine)
    safety.allow_replace(mine)                      # what --force does for this output, and only this one
    with safety.atomic_output(mine) as tmp:
        tmp.write_text("kvbench's")
    assert mine.read_text() == "kvbench's" and safety.is_owned(str(mine))
    other = tmp_path / "b.html"
    other.write_text("someone else's")
    with pytest.raises(safety.SafetyError):
        safety.PendingOutput(other)


def test_an_iolog_given_up_leaves_nothing_and_one_closed_appears_whole(tmp_path):
    import numpy as np

    from kvbench.engine.iolog import IologWriter
    from kvbench.engine.plan import make_plan

    plan = make_plan(np.zeros(3, dtype=np.int64), np.arange(3) * 4096, 4096)
    w = IologWriter(tmp_path / "a.iolog", {0: "/dev/x"})
    w.write(plan)
    assert not (tmp_path / "a.iolog").exists()           # only the temporary file while it is written
    w.discard()
    assert os.listdir(tmp_path) == []
    w = IologWriter(tmp_path / "a.iolog", {0: "/dev/x"})
    w.write(plan)
    w.close()
    lines = (tmp_path / "a.iolog").read_text().splitlines()
    assert lines[0] == "fio version 3 iolog" and len(lines) == 1 + 2 + 3 + 1 and safety.is_owned(str(tmp_path / "a.iolog"))


@pytest.mark.parametrize("key", sorted(PREFIX_ROWS), ids=[" ".join(k) for k in sorted(PREFIX_ROWS)])
def test_a_prefix_output_refuses_a_foreign_file_at_a_name_it_would_write(key, tmp_path, cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv, derived = PREFIX_ROWS[key]
    (tmp_path / derived).write_text("the user's own file\n")
    before = _files(tmp_path)
    r = cli(*[a.format(tmp=tmp_path) for a in argv])
    assert r.exit_code == 2 and "was not written by kvbench" in r.output, r.output
    assert _files(tmp_path) == before


def test_outputs_refuse_files_kvbench_did_not_write_unless_forced(cli, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    r = cli("trace", "gen", "qa", "-n", "5", "-o", notes)
    assert r.exit_code == 2 and f"{notes} exists and was not written by kvbench" in r.output
    assert notes.read_text() == "my notes\n"
    run = json.loads(cli("io", "--target", tmp_path / "t.img", "--size", "4MiB", "--runtime", "0",
                         "--results", tmp_path / "res", "--json").stdout)["run_dir"]
    r = cli("report", run, "-o", notes)
    assert r.exit_code == 2 and "refusing to overwrite" in r.output and notes.read_text() == "my notes\n"
    r = cli("io", "--target", tmp_path / "t.img", "--runtime", "0", "--export-iolog", notes,
            "--results", tmp_path / "res2")
    assert r.exit_code == 2 and notes.read_text() == "my notes\n" and not (tmp_path / "res2").exists()
    # a file kvbench wrote may be rewritten; --force replaces the user's file
    mine = tmp_path / "mine.jsonl"
    assert cli("trace", "gen", "qa", "-n", "5", "-o", mine).exit_code == 0
    assert cli("trace", "gen", "qa", "-n", "7", "-o", mine).exit_code == 0
    assert cli("report", run, "-o", notes, "--force").exit_code == 0 and "<html" in notes.read_text()
    assert cli("report", run, "-o", notes).exit_code == 0           # now kvbench's own file
