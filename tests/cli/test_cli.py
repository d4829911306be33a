"""The CLI surface: every command has help; errors are one line with an exit code."""

import importlib
import json
import pkgutil
import subprocess
import sys

import click

import kvbench.cli
from kvbench.cli import COMMANDS, main
import pytest
from kvbench.cli._common import IO_SIZE
from kvbench.cli._common import SIZE


def _all_commands(group, prefix=()):
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        yield prefix + (name,), cmd
        if isinstance(cmd, click.Group):
            yield from _all_commands(cmd, prefix + (name,))


def test_the_command_table_names_every_command_of_every_module():
    """COMMANDS (what the lazy groups import) equals what the modules define, so none is lost or misplaced."""
    defined = {}
    for info in pkgutil.iter_modules(kvbench.cli.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"kvbench.cli.{info.name}")
        for command in module.COMMANDS:
            defined[(getattr(module, "GROUP", ""), command.name)] = info.name
    table = {(group, name): module for group, names in COMMANDS.items() for name, module in names.items()}
    assert table == defined
    paths = {" ".join(path) for path, cmd in _all_commands(main) if not isinstance(cmd, click.Group)}
    assert paths == {f"{g} {n}".strip() for g, n in defined}


def test_a_command_imports_only_its_own_module():
    code = ("import sys\nfrom kvbench.cli import main\n"
            "try:\n    main(['models', '--json'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('kvbench.cli.')), file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stderr.strip().splitlines()[-1] == "['kvbench.cli._common', 'kvbench.cli.models']"


def test_every_command_has_help(cli):
    for path, cmd in _all_commands(main):
        r = cli(*path, "--help")
        assert r.exit_code == 0, path
        assert cmd.help, f"{' '.join(path)} has no help text"


def test_models_json(cli):
    r = cli("models", "--json")
    assert r.exit_code == 0
    data = json.loads(r.output)
    assert {m["name"]: m["bytes_per_token"] for m in data["models"]}["deepseek-v3"] == 70272


def test_models_bad_tp_is_one_line(cli):
    r = cli("models", "--tp", "3")
    assert r.exit_code == 2
    assert r.output.count("\n") == 1 and "error" in r.output and "Traceback" not in r.output


@pytest.mark.parametrize("cmd", [["mrc", "mooncake-sample"], ["replay", "kv", "mooncake-sample", "--model",
                                                               "tiny-gqa", "--l2", "1GiB", "--dry-run"]])
def test_ttl_without_a_unit_is_refused_with_one_line(cli, cmd, tmp_path):
    r = cli(*cmd, "--ttl", "10", "--results", tmp_path) if cmd[0] == "replay" else cli(*cmd, "--ttl", "10")
    assert r.exit_code == 2
    assert "--ttl 10: give a unit, e.g. 10s, 10m or 10h" in r.output and "Traceback" not in r.output
    ok = cli(*cmd, "--ttl", "10m", "--results", tmp_path) if cmd[0] == "replay" else cli(*cmd, "--ttl", "10m")
    assert ok.exit_code == 0, ok.output


def test_io_options_classified_by_the_rule():
    """Every size option that is an I/O unit takes IO_SIZE; tiers, drives and regions keep SI."""
    from kvbench.cli import main

    ctx = __import__("click").Context(main)
    io_units = {("io", "bs"), ("replay kv", "chunk_bytes"), ("replay kv", "segment_bytes"), ("replay engram", "page"),
                ("ftl", "page_size"), ("ftl", "io_size"), ("ftl", "erase_block"), ("plan", "erase_block")}
    for path in io_units:
        cmd = main
        for word in path[0].split():
            cmd = cmd.get_command(ctx, word)
        p = next(p for p in cmd.params if p.name == path[1])
        assert p.type is IO_SIZE, path
    io_cmd = main.get_command(ctx, "io")
    assert next(p for p in io_cmd.params if p.name == "size").type is SIZE


# every command that reads a trace either measures from a warm-up the one way (--warmup FRACTION|TIME: plan's
# WarmupParam) or says here why a warm-up is not its business; a new trace command must be put on one side
TAKES_WARMUP = {"plan", "run", "cluster", "mrc"}
NO_WARMUP = {
    "check": "reads the trace's reusable prefix lengths (an unbounded-cache bound), no steady figure",
    "ftl": "its --warmup is the FTL model's (a fraction of the writes); one store's WAF opens at its own turnover "
           "(plan --warmup measures the trace-driven WAF from the window)",
    "replay kv": "issues the trace's I/O as it is; the answer's figures come from plan",
    "trace convert": "rewrites a trace, measures nothing",
    "trace fit": "fits the whole trace and warns when it is not stationary",
    "trace stats": "is the stationarity test itself, and names the stationary tail a warm-up should start at",
}


def test_every_command_that_reads_a_trace_takes_the_warm_up_or_says_why_not():
    from kvbench.cli._common import WarmupParam

    readers = {}
    for path, cmd in _all_commands(main):
        if isinstance(cmd, click.Group):
            continue
        params = {p.name: p for p in cmd.params}
        if any(n in ("trace", "trace_path") for n in params):
            readers[" ".join(path)] = params.get("warmup")
    assert set(readers) == TAKES_WARMUP | set(NO_WARMUP) and not TAKES_WARMUP & set(NO_WARMUP)
    for name in TAKES_WARMUP:
        w = readers[name]
        assert w is not None and isinstance(w.type, WarmupParam) and w.opts == ["--warmup"], name
    for name in NO_WARMUP:
        assert readers[name] is None or not isinstance(readers[name].type, WarmupParam), name


# a key-sampled gen: stream (sample=F) keeps a share of each request's blocks: a command that reads a trace
# either scales by F (what it is tested for elsewhere) or refuses it in one line before any work
SAMPLED = "gen:chat,duration=10m,rate=2,sample=0.5"
HONOURS_KEY_SAMPLE = {
    "mrc": "SHARDS: hit ratios against the whole stream's references (tests/stream/test_sampling.py)",
    "plan": "capacities and write rates scaled by 1/F (tests/stream/test_sampling.py)",
    "run": "takes F as its replay's rate (tests/cli/test_run.py::test_a_key_sampled_gen_trace_runs_at_its_own_rate)",
    "replay kv": "tiers at capacity x F, volumes at full size (keyed_stream)",
    "trace stats": "its per-window series are ratios a key sample estimates (tests/stream/test_stationarity.py)",
}
REFUSES_KEY_SAMPLE = {
    "cluster": (["cluster", SAMPLED, "--model", "tiny-gqa", "--router", "session", "--l2", "16MiB", "--dry-run"],
                "cluster needs the whole stream"),
    "trace fit": (["trace", "fit", SAMPLED, "-o", "m.toml"], "trace fit needs the whole stream"),
    "check": (["check", "--trace", SAMPLED, "--recompute-tokens-per-s", "10000", "--tier", "l3=2GB/s,100us"],
              "check --trace needs the whole stream"),
    "ftl": (["ftl", "--trace", SAMPLED, "--model", "tiny-gqa", "--capacity", "64MiB"],
            "ftl --trace needs the whole stream"),
    "trace convert": (["trace", "convert", SAMPLED, "-o", "x.kvbt"], "is a generated stream, not a file"),
}


def test_every_command_that_reads_a_trace_honours_a_key_sample_or_refuses_it(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    readers = {" ".join(path) for path, cmd in _all_commands(main) if not isinstance(cmd, click.Group)
               and any(p.name in ("trace", "trace_path") for p in cmd.params)}
    assert readers == set(HONOURS_KEY_SAMPLE) | set(REFUSES_KEY_SAMPLE)
    assert not set(HONOURS_KEY_SAMPLE) & set(REFUSES_KEY_SAMPLE)
    for name, (argv, said) in REFUSES_KEY_SAMPLE.items():
        r = cli(*argv)
        errors = [x for x in r.output.splitlines() if x.startswith("kvbench: error:")]
        assert r.exit_code == 2 and len(errors) == 1 and said in errors[0] and "Traceback" not in r.output, name
        assert not list(tmp_path.iterdir()), name            # nothing written before the refusal
