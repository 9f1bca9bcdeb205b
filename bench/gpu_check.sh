#!/usr/bin/env bash
# One device call: the test suite on CUDA, the kernel benchmark, the demo. Run from the repo root
# on the GPU machine: bash bench/gpu_check.sh [pytest selection...]. Logs go to $OUT when set.
set -uo pipefail
OUT=${OUT:-/tmp/tritonize-gpu}
mkdir -p "$OUT"
export PYTHONPATH=src:${PYTHONPATH:-} PYTHONUNBUFFERED=1 TRITONIZE_CACHE_DIR=/tmp/tritonize-cache
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
SEL=${*:-tests}
TRITONIZE_TEST_DEVICE=cuda timeout 420 python3 -m pytest -q -p no:cacheprovider -n 8 $SEL \
    2>&1 | tee "$OUT/test_gpu.log" | grep -v "^DEBUG" | tail -25
timeout 300 python3 bench/kernels.py --cases "${BENCH_CASES:-gelu_bias,relu_abc,silu_mul,transpose_add}" \
    --markdown "$OUT/kernels.md" 2>&1 | tee "$OUT/bench.log" | tail -30
timeout 120 python3 -m tritonize.demo 2>&1 | tail -12
