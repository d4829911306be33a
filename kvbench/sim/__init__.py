"""Tier simulation: cache policies, the L1-L4 hierarchy and L3 block-store layouts (pure, no I/O)."""
