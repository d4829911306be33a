"""Access streams: trace readers (a registry by format), trace generators, prefix-chained block keys."""
