#!/usr/bin/env bash
# Issue 22's GPU runs (bench/distributed.py), each within one device call. From the repo root:
#   bash bench/distributed_gpu.sh two [SETUPS]   torchrun, 2 processes on 2 GPUs (NCCL)
#   bash bench/distributed_gpu.sh one [SETUPS]   world size 1 on one GPU (the collectives path still runs)
# SETUPS: ddp,fsdp2,tp (the default) or some of them. Tables go to $OUT/distributed_{two,one}_SETUPS.md;
# each row is also printed as it is measured.
source "$(dirname "$0")/gpu_env.sh"
setups=${2:-ddp,fsdp2,tp}
case "${1:-}" in
    two)
        timeout 570 torchrun --nproc-per-node 2 bench/distributed.py --setups "$setups" --profile-top "${TOP:-0}" \
            --markdown "$OUT/distributed_two_${setups//,/_}.md" 2>&1 \
            | quiet | grep -v "^\[rank1\]" | tee "$OUT/distributed_two.log" | tail -40 ;;
    one)
        timeout 570 python3 bench/distributed.py --setups "$setups" --profile-top "${TOP:-0}" --markdown "$OUT/distributed_one_${setups//,/_}.md" \
            2>&1 | quiet | tee "$OUT/distributed_one.log" | tail -40 ;;
    *)
        echo "usage: bash bench/distributed_gpu.sh two|one" >&2; exit 2 ;;
esac
