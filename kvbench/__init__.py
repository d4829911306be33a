"""kvbench: measure what LLM inference memory (KV cache, Engram tables) asks of DRAM and NVMe."""

__version__ = "0.1.0"
