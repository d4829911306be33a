"""The README's deployment table: one 7.68 TB drive per GPU at U = 0.5, per shipped compute profile.

Run: .venv/bin/python benchmarks/deployment_table.py [--trace mooncake-synthetic] [--profiles a,b,...]
Each row is ``kvbench plan --trace T --model M --profile P --deployment gpus=1,drives=1,drive_capacity=7.68TB,
utilization=0.5 --json``'s ``deployment``: the first-principles host DWPD (U P b 86,400 / CAP), the simulated one
(whole block slots), the rating-equivalent DWPD against the reference class (its JESD219 reference WAF, the
store's own trace-driven WAF at the deployment's store) and how long KV is kept.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROFILES = ("deepseek-v3-h800-production", "deepseek-v3-nvidia-h200", "llama-3.3-70b-h200-trtllm-fp8",
            "llama-3.1-70b-nvidia-h200", "llama-3.1-8b-h200-trtllm-fp8", "llama-3.1-8b-nvidia-h200")


def row(trace: str, profile: str) -> str:
    sys.path.insert(0, str(REPO))
    from kvbench.compute.profile import load_profile

    prof = load_profile(profile)
    argv = [sys.executable, "-m", "kvbench", "plan", "--trace", trace, "--model", prof.model, "--profile", profile,
            "--deployment", "gpus=1,drives=1,drive_capacity=7.68TB,utilization=0.5", "--json"]
    r = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=1800)
    if r.returncode:
        return f"| {profile} | failed: {r.stderr.strip()[-200:]} |"
    d = json.loads(r.stdout)["deployment"]
    kept = d["residence_s"]
    kept_s = f"{kept / 3600:.1f} h" if kept >= 3600 else f"{kept / 60:.0f} min"
    return (f"| {profile} ({prof.kind}) | {prof.model} | {d['prefill_tokens_per_s_per_gpu']:,.0f} | "
            f"{d['dwpd_first_principles']:.2f} | {d['dwpd_host_per_drive']:.2f} | {d['workload_waf']:.2f} | "
            f"{d['reference_waf']:.2f} | {d['dwpd_rating_equivalent_per_drive']:.2f} | {kept_s} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default="mooncake-synthetic")
    ap.add_argument("--profiles", default=",".join(PROFILES))
    args = ap.parse_args()
    print("| profile (kind) | model | P (computed tok/s/GPU) | first principles | simulated host DWPD | workload WAF "
          "| reference WAF | rating-equiv. | KV kept |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for p in args.profiles.split(","):
        print(row(args.trace, p.strip()), flush=True)


if __name__ == "__main__":
    main()
