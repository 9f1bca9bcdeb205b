#!/usr/bin/env bash
# Issue 5 on the GPU in one device call (under 10 minutes), from the repo root:
#   bash bench/runtime_gpu.sh          # logs and markdown tables go to $OUT (default /tmp/tritonize-runtime)
# 1. the test suite on CUDA (fast launch path, autotuning, caches on hardware);
# 2. the kernel suite: eager, Inductor, tritonize default mode and max-autotune, timed in
#    interleaved rounds (KERNEL_CASES to change the cases; default/max-autotune <= 1.10 is the goal);
# 3. launch overhead (generated launcher vs kernel[grid]; tritonize vs Inductor per launch);
# 4. cold vs warm compile of one model (graph and autotune caches).
# Each step has its own time limit, cut so that the whole script ends by DEADLINE seconds (570);
# a step that fails or times out does not stop the others. tritonize's caches start empty.
set -uo pipefail
OUT=${OUT:-/tmp/tritonize-runtime}
DEADLINE=${DEADLINE:-570}
mkdir -p "$OUT"
export PYTHONPATH=src PYTHONUNBUFFERED=1
export TRITONIZE_CACHE_DIR=${TRITONIZE_CACHE_DIR:-$(mktemp -d /tmp/tritonize-cache.XXXXXX)}
CASES=${KERNEL_CASES:-gelu_bias,transpose_add,softmax,layer_norm,sum_last,sum_first,var_mean,cross_entropy}

step() {  # step NAME LIMIT COMMAND...: run COMMAND under min(LIMIT, time left before DEADLINE)
    local name=$1 limit=$2 left=$((DEADLINE - SECONDS - 5))
    shift 2
    ((left < limit)) && limit=$left
    if ((limit < 20)); then
        echo "== $name: skipped, ${left}s left"
        return 0
    fi
    echo "== $name (limit ${limit}s, started at ${SECONDS}s)"
    timeout -k 5 "$limit" "$@"
    local rc=$?
    ((rc == 124 || rc == 137)) && echo "== $name: TIMED OUT after ${limit}s"
    return 0
}

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
step "tests on CUDA" 220 env TRITONIZE_TEST_DEVICE=cuda python3 -m pytest -q -p no:cacheprovider -n 8 tests \
    2>&1 | tee "$OUT/test_gpu.log" | grep -v "^DEBUG" | tail -25
step "kernel suite, default vs max-autotune" 180 python3 bench/kernels.py --cases "$CASES" \
    --backends eager,inductor,tritonize,tritonize-max --markdown "$OUT/kernels.md" \
    2>&1 | tee "$OUT/kernels.log" | tail -45
step "launch overhead" 50 python3 bench/launch_overhead.py 2>&1 | tee "$OUT/launch_overhead.log" | tail -12
step "cold vs warm compile (tritonize, Inductor)" 90 python3 bench/compile_cache.py --models transformer_block \
    --timeout 40 --markdown "$OUT/compile_cache.md" 2>&1 | tee "$OUT/compile_cache.log" | tail -8
echo "== done at ${SECONDS}s; logs in $OUT"
