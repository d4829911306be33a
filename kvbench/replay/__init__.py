"""Replays: KV-cache traces through the tier hierarchy onto real DRAM and NVMe (``kvbench replay kv``)."""
