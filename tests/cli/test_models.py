"""``kvbench models``: bad options are one-line errors that say how to fix them."""

from __future__ import annotations


def test_models_rejects_bad_block_tokens_and_tp_says_how(cli):
    r = cli("models", "--block-tokens", "-1")
    assert r.exit_code == 2 and "-1 is not in the range x>=1" in r.output
    r = cli("models", "--tp", "0")
    assert r.exit_code == 2 and "--tp must be >= 1, not 0 (fix: give --tp 1" in r.output
    assert "fix the preset" not in r.output
