"""``kvbench cluster``'s configuration: the tier options of ``replay kv`` per node plus the cluster's own."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from kvbench.errors import UsageError
from kvbench.replay.kv import ReplayConfig

#: modelled load bandwidths when no measurement is given (stated in every summary)
DEFAULT_L2_BW = 25e9         # pinned host DRAM -> HBM over PCIe Gen4/5 x16, a practical figure
DEFAULT_L3_BW = 6e9          # one PCIe Gen4 NVMe drive, large sequential reads
DEFAULT_PREFILL_TOKENS_PER_S = 10_000.0


@dataclass(frozen=True)
class ClusterConfig:
    """A cluster of ``nodes`` serving nodes with ``replay``'s tiers each (L4 shared), routed by ``routers``."""

    replay: ReplayConfig                  # trace, model, tier options (capacities per node; L4 = the pool)
    nodes: int = 1
    routers: tuple = ("round-robin",)
    gpus_per_node: int = 1
    router_opts: dict = field(default_factory=dict)
    seed: int = 0
    profile: str | None = None            # compute profile name/path (prefill time per GPU)
    l2_bw: float | None = None
    l3_bw: float | None = None
    l4_pool_bw: float | None = None
    ray_address: str | None = None
    placement: str = "spread"
    inject_node_loss: int | None = None   # testing: the node whose worker dies at start
    prices: str = "2025-h2"               # price preset: the drive classes a node's L3 wear is judged on
    ssd_class: str | None = None          # the class (default: the preset's first)
    l3_device: tuple = ()                 # kvbench io run folders: each node's drive as measured
    sweep: tuple = ()                     # "KEY=V1,V2" items: a sizing sweep (kvbench.cluster.sizing)
    ttft_p99_s: float | None = None       # the sweep's targets
    hit_ratio_target: float | None = None
    warmup: object = 0.0                  # a fraction of the requests or a WarmupTime: they only warm the caches

    @property
    def dry_run(self) -> bool:
        return self.replay.dry_run

    def validate(self) -> None:
        from kvbench.cluster.routers import check_routers

        if not isinstance(self.nodes, int) or self.nodes < 1:
            raise UsageError(f"--nodes must be >= 1, not {self.nodes}", "give e.g. --nodes 4")
        if self.gpus_per_node < 1:
            raise UsageError(f"--gpus-per-node must be >= 1, not {self.gpus_per_node}", "give e.g. --gpus-per-node 8")
        check_routers(self.routers, self.router_opts)
        for flag, v in (("--l2-bw", self.l2_bw), ("--l3-bw", self.l3_bw), ("--l4-pool-bw", self.l4_pool_bw)):
            if v is not None and not (v > 0 and math.isfinite(v)):
                raise UsageError(f"{flag} must be > 0", f"give e.g. {flag} 10GB/s")
        if self.l4_pool_bw is not None and not self.replay.l4_capacity:
            raise UsageError("--l4-pool-bw without an L4 pool", "give --l4 DIR --l4-capacity CAP, or drop --l4-pool-bw")
        if self.ray_address and self.dry_run:
            raise UsageError("--ray-address places the measured nodes, and a --dry-run measures none",
                             "drop --dry-run to measure on the Ray hosts, or drop --ray-address")
        if self.placement not in PLACEMENTS:
            raise UsageError(f"unknown --placement {self.placement!r}", f"use one of {', '.join(PLACEMENTS)}")
        if self.l3_device and self.l3_bw is not None:
            raise UsageError("--l3-device and --l3-bw both set the L3 read speed", "give one of them")
        if self.sweep or self.ttft_p99_s is not None or self.hit_ratio_target is not None:
            from kvbench.cluster.sizing import parse_sweep

            if not self.sweep:
                raise UsageError("a target (--ttft-p99, --hit-ratio) needs a --sweep to choose from",
                                 "add e.g. --sweep nodes=4,8,16")
            if not self.dry_run:
                raise UsageError("--sweep simulates every configuration and measures none", "add --dry-run")
            parse_sweep(self.sweep)
            if self.ttft_p99_s is not None and not (self.ttft_p99_s > 0 and math.isfinite(self.ttft_p99_s)):
                raise UsageError(f"--ttft-p99 {self.ttft_p99_s} must be > 0", "give e.g. --ttft-p99 2s")
            if self.hit_ratio_target is not None and not 0 <= self.hit_ratio_target <= 1:
                raise UsageError(f"--hit-ratio {self.hit_ratio_target} is outside [0, 1]", "give e.g. --hit-ratio 0.5")
        if self.inject_node_loss is not None and not 0 <= self.inject_node_loss < self.nodes:
            raise UsageError(f"--inject-node-loss {self.inject_node_loss} is not a node", f"give 0..{self.nodes - 1}")
        self.replay.validate()

    def with_replay(self, **kw) -> "ClusterConfig":
        return replace(self, replay=replace(self.replay, **kw))


#: Ray placement-group strategies by option value
PLACEMENTS = {"spread": "SPREAD", "strict-spread": "STRICT_SPREAD", "pack": "PACK"}
