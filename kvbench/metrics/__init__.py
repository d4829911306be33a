"""Measurements: latency histograms, time series, host counters and run folders."""
