"""Replays: KV-cache and Engram workloads driven through tiers onto real targets."""
