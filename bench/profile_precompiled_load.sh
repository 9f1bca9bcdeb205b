#!/usr/bin/env bash
# Profile where a precompiled start spends its time (GPU host): fills a cache root with a cold
# torch.compile run, precompiles, loads once, then records a second load with py-spy (raw
# collapsed stacks, all threads, idle included) into $OUT/load-MODEL.txt.
#   PYTHONPATH=src:/tmp/site bash bench/profile_precompiled_load.sh mobilenetv3
# needs py-spy on PATH or in /tmp/site/bin (docs/benchmarks.md, "Running on the GPU machine").
set -u
model=${1:-mobilenetv3}
out=${OUT:-/tmp}
root=$(mktemp -d -t tritonize-profile-load-XXXXXX)
export TRITONIZE_CACHE_DIR=$root/tritonize TRITON_CACHE_DIR=$root/triton HF_HUB_OFFLINE=1
worker="python3 bench/precompile_start.py --worker --models $model --device cuda --artifact $root/$model.tritonize"
$worker --role cold 2>/dev/null | tail -1
$worker --role save 2>/dev/null | tail -1
$worker --role load 2>/dev/null | tail -1
spy=$(command -v py-spy || echo /tmp/site/bin/py-spy)
$spy record -r 250 --idle --threads -f raw -o "$out/load-$model.txt" -- $worker --role load 2>&1 | tail -2
rm -rf "$root"
