"""Tier simulation: cache policies, tier hierarchy, block-store layouts, Engram row caches."""
