#!/usr/bin/env bash
# Issue 24's GPU runs (tritonize.profile), in parts that each fit one device call. From the repo root
# on the GPU machine:  bash bench/profile_gpu.sh PART   (pages and logs go to $OUT)
#   tests   the profile's tests on CUDA (times, roofs, the joins of a real profiler run)
#   check   bench/profile_check.py: the profile's bandwidth against the kernel suite's, every case
#   pages   the kernel suite's page and gpt2's and llama's (inference and training) in $OUT/pages
# Render the pages as PNG on a machine with chromium: bash bench/profile_gpu.sh png DIR
source "$(dirname "$0")/gpu_env.sh"
case "${1:-}" in
    tests)
        TRITONIZE_TEST_DEVICE=cuda timeout 400 python3 -m pytest -q -p no:cacheprovider tests/test_profile.py \
            tests/test_profile_report.py 2>&1 | grep -v "^DEBUG" | tail -15 ;;
    check)
        timeout 560 python3 bench/profile_check.py 2>&1 | quiet | tee "$OUT/profile_check.txt" | tail -25 ;;
    pages)
        mkdir -p "$OUT/pages"
        timeout 250 python3 bench/kernels.py --backends tritonize --rounds 1 --html "$OUT/pages/kernels.html" 2>&1 \
            | quiet | tail -5
        timeout 300 python3 bench/models.py --models gpt2,llama --mode both --backends tritonize --skip-warm \
            --html-dir "$OUT/pages" 2>&1 | quiet | tail -8 ;;
    png)
        for page in "${2:?a folder of pages}"/*.html; do
            chromium --headless --no-sandbox --disable-gpu --screenshot="${page%.html}.png" \
                --window-size=1200,1400 "file://$(realpath "$page")" 2>/dev/null
        done ;;
    *)
        echo "usage: bash bench/profile_gpu.sh tests|check|pages|png DIR" >&2; exit 2 ;;
esac
