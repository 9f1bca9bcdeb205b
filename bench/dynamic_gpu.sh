#!/usr/bin/env bash
# Issue 17's and issue 21's GPU runs, in parts that each fit one device call (10 minutes). Run from the
# repo root on the GPU machine:  bash bench/dynamic_gpu.sh PART   (logs go to $OUT when set)
#   suite    the whole test suite on CUDA (past 590 s on one H100 at -n 16 since the thirty-first session:
#            run suite1 and suite2, alternate test files, in two calls; JOBS=N)
#   kernels  the kernel suite: eager, tritonize static, Inductor and tritonize with dynamic=True
#   a        (a) and (b): GPT-2, BERT and llama at five lengths, timed in turns; automatic dynamic
#   c        (c): generate() with the default cache, 64 new tokens
#   d        (d): GPT-2 and llama training steps at three lengths (compiles take most of it)
#   profile  the host profile at length 131 (wall against kernel time, cProfile's callers)
#   fuzz     issue 21: random programs on the GPU, static then dynamic (about 8 minutes)
#   sweep    issue 21: the OpInfo sweep on the GPU, every dtype (native shares per dtype)
#   float64  issue 21: the fp16/bf16 sweep against float64 on the GPU (first sample of each entry)
#   fuzz-static SEED N / fuzz-dynamic SEED N   N random programs from SEED (dynamic: N <= 250)
# expecttest is installed from .whl/ when the machine lacks it (carry .whl with the tree).
source "$(dirname "$0")/gpu_env.sh"
case "${1:-}" in
    suite|suite1|suite2)  # suite1 and suite2: alternate test files, each half in its own call
        part=${1#suite}
        files=$(ls tests/test_*.py | awk -v part="$part" 'part == "" || NR % 2 == part % 2')
        TRITONIZE_TEST_DEVICE=cuda timeout 590 python3 -m pytest -q -p no:cacheprovider -n "${JOBS:-16}" $files 2>&1 \
            | grep -v "^DEBUG" > "$OUT/test_gpu$part.log"
        grep -E "^FAILED|^ERROR|passed|failed" "$OUT/test_gpu$part.log" | tail -30 ;;
    kernels)
        timeout 540 python3 bench/kernels.py --backends eager,tritonize,inductor-dynamic,tritonize-dynamic --rounds 2 \
            --markdown "$OUT/kernels_dynamic.md" 2>&1 | quiet | tail -25 ;;
    a)
        timeout 560 python3 bench/dynamic.py --models gpt2,bert,llama --markdown "$OUT/dynamic_a.md" 2>&1 | quiet ;;
    c)
        timeout 560 python3 bench/dynamic.py --models gpt2,llama --lengths "" --auto-batches "" --generate 64 \
            2>&1 | quiet ;;
    d)
        timeout 560 python3 bench/dynamic.py --models gpt2,llama --lengths "" --auto-batches "" \
            --train-lengths 96,131,200 2>&1 | quiet ;;
    profile)
        timeout 300 python3 bench/dynamic.py --models gpt2 --lengths 96 --auto-batches "" --profile 131 \
            --profile-top 15 --host-profile 20 2>&1 | quiet ;;
    fuzz)
        timeout 280 python3 bench/fuzz.py --device cuda --n 1000 --seed 20000 --max-ops 14 --quiet 2>&1 | quiet | tail -40
        timeout 260 python3 bench/fuzz.py --device cuda --n 600 --seed 30000 --max-ops 14 --dynamic --quiet 2>&1 \
            | quiet | tail -40 ;;
    fuzz-static|fuzz-dynamic)
        mode=$([ "$1" = fuzz-dynamic ] && echo --dynamic || true)
        timeout 290 python3 bench/fuzz.py --device cuda --n "${3:-250}" --seed "${2:-20000}" --max-ops 14 $mode \
            --quiet 2>&1 | quiet | tail -40 ;;
    float64)
        timeout 540 python3 tests/opinfo_sweep.py --device cuda --jobs 8 --against-float64 \
            --dtypes float16,bfloat16 --json "$OUT/float64_gpu.json" 2>&1 | grep -v "^W1" | head -80 ;;
    sweep)
        timeout 540 python3 tests/opinfo_sweep.py --device cuda --jobs 8 --json "$OUT/sweep_gpu.json" 2>&1 \
            | grep -v "^W1" | head -60 ;;
    *)
        echo "usage: bash bench/dynamic_gpu.sh suite|kernels|a|c|d|profile|fuzz|fuzz-static|fuzz-dynamic|float64|sweep" >&2; exit 2 ;;
esac
