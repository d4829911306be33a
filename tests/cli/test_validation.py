"""Validation before work: every numeric option of every command is bounded and finite (one mechanism,
``kvbench.cli._common.bound_numbers``, applied by the lazy command groups); the memory a run may take counts the
cgroup's limit; ``run --l3 DEVICE`` sizes L3 to the device; a Ray address that is not Ray times out in one line.
The bad inputs themselves are rows of tests/bad_inputs/table.toml."""

from __future__ import annotations

import re
import socket
import subprocess
import threading
from dataclasses import replace

import click
import pytest

from kvbench.cli import main
from kvbench.cli._common import NUMERIC_BOUNDS, Number


def _commands(group=main, prefix=()):
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, prefix + (name,))
        else:
            yield " ".join(prefix + (name,)), cmd


def test_every_numeric_option_of_every_command_is_bounded_and_finite():
    names = set()
    for path, cmd in _commands():
        for p in cmd.params:
            assert p.type is not click.INT and p.type is not click.FLOAT, \
                f"{path} {p.opts[0]}: a plain int/float (nan, inf, -1 pass)"
            if isinstance(p.type, (click.IntRange, click.FloatRange)):
                continue
            names.add(p.name)
    stale = set(NUMERIC_BOUNDS) - names
    assert not stale, f"NUMERIC_BOUNDS names options no command has: {sorted(stale)}"


@pytest.mark.parametrize("kind,lo,hi,lo_open,good,bad", [
    (int, 0, 2**32 - 1, False, ["0", "4294967295"], ["-1", "4294967296", "1.5", "x"]),
    (float, 0, 1, True, ["1", "0.5", "1e-9"], ["0", "nan", "inf", "-inf", "1.0000001", "-0.1"]),
    (float, 1, 1e6, False, ["1", "1e6"], ["0.999", "nan", "1e30"]),
])
def test_a_number_is_refused_outside_its_range(kind, lo, hi, lo_open, good, bad):
    t = Number(kind, lo, hi, lo_open)
    for v in good:
        assert t.convert(v, None, None) == kind(v)
    from kvbench.errors import UsageError

    for v in bad:
        with pytest.raises(UsageError):
            t.convert(v, None, None)


def test_cgroup_room_is_the_tightest_limit_up_the_tree(tmp_path):
    from kvbench.engine.targets import cgroup_memory_left

    (tmp_path / "proc").write_text("0::/a/b\n")
    root = tmp_path / "cg"
    for d, mx, cur in (("", None, None), ("a", "1000000", "400000"), ("a/b", "max", "100")):
        (root / d).mkdir(parents=True, exist_ok=True)
        if mx is not None:
            (root / d / "memory.max").write_text(mx + "\n")
            (root / d / "memory.current").write_text(cur + "\n")
    assert cgroup_memory_left(str(tmp_path / "proc"), str(root)) == 600000   # a's 1e6 - 4e5; b has no limit
    (root / "a/b/memory.max").write_text("200000\n")
    assert cgroup_memory_left(str(tmp_path / "proc"), str(root)) == 199900
    (tmp_path / "proc").write_text("1:name=systemd:/x\n")                    # cgroup v1 only: no answer
    assert cgroup_memory_left(str(tmp_path / "proc"), str(root)) is None


def test_check_memory_takes_the_cgroup_limit(monkeypatch):
    from kvbench.engine import targets
    from kvbench.errors import TargetError

    monkeypatch.setattr(targets, "cgroup_memory_left", lambda: 64 << 20)
    targets.check_memory(32 << 20, "an arena", "smaller")
    with pytest.raises(TargetError, match="64 MiB of memory left under this cgroup's memory.max"):
        targets.check_memory(65 << 20, "an arena", "smaller")


def test_a_port_that_is_not_ray_times_out_in_one_line():
    from kvbench.cluster.workers import check_address
    from kvbench.errors import UsageError

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    held = []
    stop = threading.Event()

    def accept():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])     # accepts, never answers: what a hung ray.init meets
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        with pytest.raises(UsageError, match="did not answer as a Ray cluster within 0.5 s"):
            check_address(f"127.0.0.1:{srv.getsockname()[1]}", timeout_s=0.5)
    finally:
        stop.set()
        t.join()
        srv.close()


def test_a_port_that_answers_but_not_in_http2_is_refused():
    from kvbench.cluster.workers import check_address
    from kvbench.errors import UsageError

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def answer():
        c, _ = srv.accept()
        c.recv(100)
        c.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
        c.close()

    t = threading.Thread(target=answer, daemon=True)
    t.start()
    with pytest.raises(UsageError, match="is open but is not a Ray cluster"):
        check_address(f"127.0.0.1:{srv.getsockname()[1]}", timeout_s=5)
    t.join()
    srv.close()


@pytest.fixture
def loop_device(tmp_path):
    import os
    if os.geteuid() != 0:
        pytest.skip("needs root for losetup")
    img = tmp_path / "dev.img"
    with open(img, "wb") as f:
        f.truncate(48 << 20)
    r = subprocess.run(["losetup", "--find", "--show", str(img)], capture_output=True, text=True)
    if r.returncode:
        pytest.skip(f"losetup failed: {r.stderr.strip()}")
    dev = r.stdout.strip()
    yield dev
    subprocess.run(["losetup", "-d", dev], check=False)


def test_run_sizes_l3_to_the_device_it_is_given(loop_device, tmp_path, cli):
    from kvbench.cli.run import _l3_room

    room, share = _l3_room(loop_device, str(tmp_path), None)
    assert (room, share) == (48 << 20, 0.90)                   # the device's size, not the results folder's disk
    r = cli("run", "--trace", "mooncake-sample", "--l3", loop_device, "--destroy-data", loop_device,
            "--l3-capacity", "64MiB", "--results", tmp_path / "res")
    assert r.exit_code == 2 and "is larger than" in r.output and r.output.count("kvbench: error") == 1, r.output
    assert not (tmp_path / "res").exists()


# --- a gen: source's duration: one default for every command (kvbench.stream.synth.gen_duration) -----------------
# How each command that takes a trace is called with TRACE; a command not listed is called as `<command> TRACE`
# (an argument) or `<command> --<option> TRACE`, so a new command taking a trace is walked without an entry.
GEN_ARGV = {
    "run": ["--results", "{tmp}/results"],
    "replay kv": ["--model", "llama-3.1-8b", "--dry-run"],
    "plan": ["--model", "llama-3.1-8b"],
    "check": ["--profile", "llama-3.1-8b-h200-trtllm-fp8", "--tier", "l3=6.5GB/s,90us"],
    "ftl": ["--capacity", "4GiB", "--model", "llama-3.1-8b"],
    "cluster": ["--model", "llama-3.1-8b", "--router", "random", "--l2", "1GiB"],
    "trace convert": ["-o", "{tmp}/t.kvbt"],
    "trace fit": ["-o", "{tmp}/fit.toml"],
}


def _trace_params(cmd):
    return [p for p in cmd.params if "trace" in p.name and not isinstance(p.type, click.types.BoolParamType)]


def test_every_command_generates_a_model_file_for_its_checked_duration(tmp_path, monkeypatch):
    """A fitted model file states the duration its DWPD was checked on ([calibration] gen_duration_s); every
    command taking a trace generates `gen:MODEL` (no duration=) for exactly that long, `trace gen --model-file`
    too, and a stated duration= wins. The Generator is stopped at its construction: nothing is generated."""
    from click.testing import CliRunner

    from kvbench.stream import synth
    from kvbench.stream.workload import Calibration, WorkloadModel, to_toml

    model = tmp_path / "m.toml"
    model.write_text(to_toml(replace(WorkloadModel(), calibration=Calibration(gen_duration_s=1234.0))))
    seen = []

    class Stop(Exception):
        pass

    class Recorder(synth.Generator):
        def __init__(self, m, duration_s, *a, **kw):
            seen.append(float(duration_s))
            raise Stop

    monkeypatch.setattr(synth, "Generator", Recorder)

    def durations(argv):
        seen.clear()
        r = CliRunner().invoke(main, argv, catch_exceptions=True)
        return list(seen), r

    walked, refused = [], []
    for path, cmd in _commands():
        for p in _trace_params(cmd):
            argv = path.split() + [a.format(tmp=tmp_path) for a in GEN_ARGV.get(path, [])]
            for spec, want in ((f"gen:{model}", 1234.0), (f"gen:{model},duration=2h", 7200.0)):
                given = [spec] if p.param_type_name == "argument" else [p.opts[0], spec]
                got, r = durations(argv + given)
                if not got and r.exit_code == 2 and "is a generated stream, not a file" in r.output:
                    refused.append(path)        # a command that cannot take a gen: stream says so, generating nothing
                    break
                assert got[:1] == [want], f"{path} {given}: generated {got}: {r.output[-300:]}"
            else:
                walked.append(path)
    assert refused == ["trace convert"]
    assert {"mrc", "plan", "run", "replay kv", "trace stats", "trace fit", "ftl", "cluster", "check"} <= set(walked)
    out = str(tmp_path / "g.jsonl")
    assert durations(["trace", "gen", "--model-file", str(model), "-o", out])[0] == [1234.0]
    assert durations(["trace", "gen", "--model-file", str(model), "--duration", "60s", "-o", out])[0] == [60.0]


# --- key=value fields: every option taking them goes through kvbench.spec.fields ------------------------------
# An option whose metavar or help shows KEY=VALUE is either a FieldsOption (kvbench.cli._common: parsed by the
# shared parser when the option is read) or listed here with why it is not key=value fields.
NOT_FIELDS = {
    ("check", "--tier"): "one NAME=BW,LATENCY pair: a free tier name and a value list (recompute.parse_tier, "
                         "spaces around '=' and ',' read alike: tests/analysis/test_recompute.py)",
    ("plan", "--load-tier"): "one NAME=BW,LAT pair, as check --tier",
    ("io", "--inject-fault"): "a fault list of KIND@N and KIND-every=N items, not key=value fields (engine.faults)",
    ("run", "--probe-fault"): "the hidden fault hook of the probe: io --inject-fault's grammar",
    ("run", "--trace"): "a trace: a gen: source's options go through parse_gen (tests/stream/test_synth.py)",
}
_PAIR = re.compile(r"[A-Za-z_][\w.-]*=[^\s=]")


def _field_options():
    from kvbench.cli._common import FieldsOption

    return [(path, p) for path, cmd in _commands() for p in cmd.params if isinstance(p, FieldsOption)]


def test_every_option_showing_key_value_goes_through_the_shared_parser():
    from kvbench.cli._common import FieldsOption

    found = {(path, p.opts[0]) for path, cmd in _commands() for p in cmd.params
             if isinstance(p, click.Option) and not isinstance(p, FieldsOption)
             and _PAIR.search(f"{p.metavar or ''} {p.help or ''}")}
    assert found <= set(NOT_FIELDS), f"route these through kvbench.cli._common.fields_option: {found - set(NOT_FIELDS)}"
    assert set(NOT_FIELDS) <= found, f"stale NOT_FIELDS entries: {set(NOT_FIELDS) - found}"
    walked = {(path, p.opts[0]) for path, p in _field_options()}
    assert {("plan", "--deployment"), ("run", "--deployment"), ("plan", "--fdp"), ("plan", "--price"),
            ("plan", "--admission"), ("replay kv", "--admission"), ("replay kv", "--l4-admission"),
            ("cluster", "--sweep"), ("cluster", "--router-opt"), ("qualify", "--drive"), ("trace gen", "--set"),
            ("trace stats", "--field"), ("mrc", "--field")} <= walked


def _spaced(text: str) -> str:
    return re.sub(r"\s*([=,:])\s*", r" \1 ", f" {text} ")


def _bad(p, extra: str):
    """The option's example with one more part ``extra`` (as argv values)."""
    if p.multiple:
        return [p.fields_example, extra]
    return [p.fields_example + p.fields_sep + extra]


def _pair(p) -> str:
    return next(x for x in p.fields_example.split(p.fields_sep) if "=" in x)


@pytest.mark.parametrize("path, p", _field_options(), ids=lambda x: x if isinstance(x, str) else x.opts[0])
def test_field_option_reads_spaces_alike_and_refuses_bad_fields_in_one_line(path, p, cli):
    value = (p.fields_example,) if p.multiple else p.fields_example
    spaced = (_spaced(p.fields_example),) if p.multiple else _spaced(p.fields_example)
    assert p.fields_parse(spaced) == p.fields_parse(value)
    key = _pair(p).partition("=")[0]
    cases = [("zz_bogus", _bad(p, "zz_bogus")), (key, _bad(p, _pair(p)))]
    if p.fields_open is None:
        cases.append(("zz_bogus", _bad(p, "zz_bogus=1")))
    opt = p.opts[0]
    for name, values in cases:
        argv = [*path.split(), *(x for v in values for x in (opt, v))]
        r = cli(*argv)
        lines = [line for line in r.output.splitlines() if line.strip()]
        assert r.exit_code == 2, (argv, r.output)
        assert "Traceback" not in r.output and len(lines) == 1 and lines[0].startswith("kvbench: error:"), r.output
        assert opt in lines[0] and repr(name) in lines[0], (argv, lines[0])


def test_a_gen_source_reads_spaces_alike_and_refuses_bad_options_in_one_line(cli):
    from kvbench.stream.synth import parse_gen

    spaced, plain = parse_gen("gen:chat , duration = 1h , seed = 3"), parse_gen("gen:chat,duration=1h,seed=3")
    assert replace(spaced, text="") == replace(plain, text="") and plain.seed == 3 and plain.duration_s == 3600
    for extra, name in (("zz_bogus=1", "zz_bogus"), ("seed=4", "seed"), ("zz_bogus", "zz_bogus")):
        r = cli("trace", "stats", f"gen:chat,duration=1h,seed=3,{extra}")
        lines = [line for line in r.output.splitlines() if line.strip()]
        assert r.exit_code == 2 and len(lines) == 1 and repr(name) in lines[0], r.output
