#!/usr/bin/env bash
# Issue 5's GPU measurements in one device call (about 9 minutes on an H100), from the repo root:
#   bash bench/runtime_gpu.sh            # logs and markdown tables go to $OUT (default /tmp/tritonize-runtime)
# Each step has its own time limit; a step that fails or times out does not stop the others.
set -uo pipefail
OUT=${OUT:-/tmp/tritonize-runtime}
mkdir -p "$OUT"
export PYTHONPATH=src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
echo "== compile pools (threads vs processes)"
timeout 90 python3 bench/compile_pool.py --kernels 32 2>&1 | tee "$OUT/compile_pool.log" | tail -6
echo "== launch overhead"
timeout 120 python3 bench/launch_overhead.py 2>&1 | tee "$OUT/launch_overhead.log" | tail -12
echo "== cold vs warm compile (tritonize, Inductor)"
timeout 270 python3 bench/compile_cache.py --markdown "$OUT/compile_cache.md" 2>&1 | tee "$OUT/compile_cache.log" | tail -12
echo "== default vs max-autotune configs"
timeout 240 python3 bench/autotune_check.py --markdown "$OUT/autotune_check.md" 2>&1 | tee "$OUT/autotune_check.log" | tail -22
