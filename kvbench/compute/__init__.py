"""Prefill compute: decoder stacks with random weights, timing, the T(n) fit, profiles, GPU copy path."""
