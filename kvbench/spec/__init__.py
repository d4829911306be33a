"""Typed, frozen specs and the TOML presets they are loaded from."""
