# Sourced by the GPU scripts (dynamic_gpu.sh, cuda_graphs_gpu.sh): $OUT for logs, expecttest from
# .whl/ when the machine lacks it (carry .whl with the tree), PYTHONPATH, and `quiet` for output.
set -uo pipefail
OUT=${OUT:-/tmp/tritonize-gpu}
mkdir -p "$OUT"
if ! python3 -c 'import expecttest' 2>/dev/null && ls .whl/expecttest-*.whl >/dev/null 2>&1; then
    pip install -q --target /tmp/tritonize-site .whl/expecttest-*.whl >/dev/null 2>&1
fi
export PYTHONPATH=$PWD/src:/tmp/tritonize-site:${PYTHONPATH:-} PYTHONUNBUFFERED=1 TRITONIZE_COMPILE_WORKERS=4
quiet() { grep -v -i -E "warn|^DEBUG"; }
