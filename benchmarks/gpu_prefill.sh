#!/usr/bin/env bash
# Measure real CUDA prefill profiles on one GPU, in one short run (a few minutes on an H100/H200):
#   - Llama-3.1-8B (GQA): the whole 32-layer stack in bf16, prompts of 1k..16k tokens;
#   - DeepSeek-V3 (MLA + MoE): 8 of its 61 layers (1 dense + 7 MoE with the 8+1 active experts), scaled per
#     layer kind to the full stack, prompts of 1k..16k tokens;
#   - the pinned host->device copy per block size (the L2 DRAM -> L1 HBM tier), stored with the first profile;
# then `kvbench check` of each profile against typical tiers. Profiles are kind = "measured" and carry the GPU's
# name; copy them into workloads/compute/ to ship them.
#
# Usage:  benchmarks/gpu_prefill.sh [OUT_DIR]          (default: $OUT, else results/gpu-prefill)
#         KVBENCH_SMOKE=1 benchmarks/gpu_prefill.sh DIR  (CPU, tiny presets: checks this script without a GPU)
# Python: $PYTHON, else the first of .venv/bin/python, python3 that imports torch. Needs kvbench's
# dependencies (numpy, pandas, click, psutil) importable; PYTHONPATH is set to this checkout.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-results/gpu-prefill}}
mkdir -p "$out"
out=$(cd "$out" && pwd)
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

PY=${PYTHON:-}
if [ -z "$PY" ]; then
  for c in .venv/bin/python python3 python; do
    if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import torch' >/dev/null 2>&1; then PY=$c; break; fi
  done
fi
if [ -z "$PY" ]; then echo "gpu_prefill: no python with torch (set PYTHON=...)" >&2; exit 3; fi
if ! "$PY" -c 'import numpy, pandas, click, psutil' 2>"$out/imports.err"; then
  echo "gpu_prefill: kvbench dependencies missing for $PY: $(tail -1 "$out/imports.err")" >&2; exit 3
fi

{ date -u; uname -a; command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
  "$PY" -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())'
} >"$out/env.txt" 2>&1

if [ -n "${KVBENCH_SMOKE:-}" ]; then
  device=cpu; tag=cpu-smoke; common=(--reps 2 --warmup 1 --threads 1)
  runs=("tiny-gqa||64,128,256,1024" "tiny-mla||64,128,256,1024")
  per_run_timeout=120
else
  if ! "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    echo "gpu_prefill: torch sees no CUDA device (see $out/env.txt); for a CPU check use KVBENCH_SMOKE=1" >&2; exit 3
  fi
  device=cuda
  tag=$("$PY" -c 'import re, torch; print(re.sub(r"[^a-z0-9]+", "-", torch.cuda.get_device_name(0).lower()).strip("-"))')
  common=(--reps 10 --warmup 3 --dtype bf16)
  runs=("llama-3.1-8b||1024,2048,4096,8192,16384" "deepseek-v3|8|1024,2048,4096,8192,16384")
  per_run_timeout=240
fi

status=0
first=1
for spec in "${runs[@]}"; do
  IFS='|' read -r model layers lengths <<<"$spec"
  name="$model-$tag"
  args=(--model "$model" --device "$device" --lengths "$lengths" --name "$name" --results "$out/runs"
        --out "$out/$name.toml" "${common[@]}")
  [ -n "$layers" ] && args+=(--layers "$layers")
  [ "$first" = 1 ] || args+=(--no-copy)   # the copy tier does not depend on the model: measure it once
  first=0
  echo "== prefill $name: ${args[*]}"
  if timeout "$per_run_timeout" "$PY" -m kvbench prefill "${args[@]}" >"$out/$name.txt" 2>&1; then
    cat "$out/$name.txt"
    "$PY" -m kvbench check --profile "$out/$name.toml" --tier dram=50GB/s,5us --tier nvme-gen5=13GB/s,80us \
      --tier nvme-gen4=6.5GB/s,90us --tier nfs=1.2GB/s,500us --tier hdd=200MB/s,8ms >"$out/$name-check.txt" 2>&1 \
      && cat "$out/$name-check.txt" || { echo "check failed for $name"; cat "$out/$name-check.txt"; status=1; }
  else
    rc=$?
    echo "prefill FAILED for $name (rc $rc):"; tail -5 "$out/$name.txt"; status=1
  fi
done
echo "== profiles in $out:"; ls -1 "$out"/*.toml 2>/dev/null
exit $status
