#!/usr/bin/env bash
# One device call (about 6 minutes on an H100; JOBS=N pytest workers, default 8): the test suite on CUDA, the whole kernel benchmark
# (eager, Inductor, tritonize) and the demo. Run from the repo root on the GPU machine:
#   bash bench/gpu_check.sh [pytest selection...]
# expecttest is installed from .whl/ when the machine lacks it (carry .whl with the tree).
# Logs and the markdown table go to $OUT when set. BENCH_CASES=a,b limits the benchmark,
# BENCH_BACKENDS=eager,tritonize,tritonize-dynamic picks its back ends;
# WITH_RUNTIME=1 adds launch overhead and cold/warm compile (about 4 more minutes).
set -uo pipefail
OUT=${OUT:-/tmp/tritonize-gpu}
mkdir -p "$OUT"
if ! python3 -c 'import expecttest' 2>/dev/null && ls .whl/expecttest-*.whl >/dev/null 2>&1; then
    pip install -q --target /tmp/tritonize-site .whl/expecttest-*.whl >/dev/null 2>&1
fi
export PYTHONPATH=$PWD/src:/tmp/tritonize-site:${PYTHONPATH:-} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
SEL=${*:-tests}
TRITONIZE_TEST_DEVICE=cuda timeout ${TEST_TIMEOUT:-300} python3 -m pytest -q -p no:cacheprovider -n ${JOBS:-8} $SEL \
    2>&1 | grep -v "^DEBUG" > "$OUT/test_gpu.log"
grep -E "^FAILED|passed|failed" "$OUT/test_gpu.log" | tail -25
CASES=${BENCH_CASES:-}
BACKENDS=${BENCH_BACKENDS:-}
timeout ${BENCH_TIMEOUT:-300} python3 bench/kernels.py ${CASES:+--cases "$CASES"} ${BACKENDS:+--backends "$BACKENDS"} --markdown "$OUT/kernels.md" 2>&1 \
    | tee "$OUT/bench.log" | grep -v -i warn | tail -52
timeout 120 python3 -m tritonize.demo 2>&1 | tail -12
if [[ -n "${WITH_RUNTIME:-}" ]]; then  # issue 5's (a) and (c): launch overhead, warm vs cold compile
    timeout 100 python3 bench/launch_overhead.py 2>&1 | tee "$OUT/launch_overhead.log" | tail -9
    TRITONIZE_CACHE_DIR=$(mktemp -d) timeout 150 python3 bench/compile_cache.py --models resnet50,gpt2 \
        --backends tritonize --no-floor --timeout 60 --markdown "$OUT/compile_cache.md" 2>&1 | tail -5
fi
