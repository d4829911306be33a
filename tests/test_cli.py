"""The CLI surface: every command has help; errors are one line with an exit code."""

import json

import click

from kvbench.cli import main


def _all_commands(group, prefix=()):
    for name, cmd in group.commands.items():
        yield prefix + (name,), cmd
        if isinstance(cmd, click.Group):
            yield from _all_commands(cmd, prefix + (name,))


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
