#!/usr/bin/env bash
# Issue 19's GPU runs (memory), in parts that each fit one device call. From the repo root on the
# GPU machine:  bash bench/memory_gpu.sh PART   (logs and tables go to $OUT when set)
#   inference  bench/models.py, six models, eager, Inductor and tritonize: measured peak next to
#              tritonize's planned peak (the memory plan, codegen/memory_plan.py)
#   training   the same in training (autocast bf16)
#   partitioners  training, tritonize (the min-cut partitioner) against AOTAutograd's default
#              partition (options partitioner="default"): peak memory and step time
#   products   the LM head's backward products (bench/odd_columns.py --backward), then gpt2's and
#              bert's training with and without aligned products (tritonize, tritonize-noalign)
#   history    torch.cuda.memory._record_memory_history around one gpt2 inference step: the
#              snapshot (a pickle for pytorch.org/memory_viz) in $OUT
#   saved      training: what each back end's forward saves (bench/saved_activations.py: the
#              partition alone, no kernels), then where tritonize's MobileNetV3 step peaks
#              (bench/peak_breakdown.py: live blocks at the peak by the wrapper line allocating them)
source "$(dirname "$0")/gpu_env.sh"
SIX=gpt2,bert,llama,resnet50,vit,mobilenetv3  # the tables of earlier sessions
case "${1:-}" in
    inference|training)
        timeout 580 python3 bench/models.py --mode "$1" --skip-warm --models "$SIX" --backends eager,inductor,tritonize \
            --markdown "$OUT/memory_$1.md" 2>&1 | quiet | tail -30 ;;
    partitioners)
        timeout 580 python3 bench/models.py --mode training --skip-warm --models "$SIX" --backends tritonize,tritonize-savefwd \
            --markdown "$OUT/memory_partitioners.md" 2>&1 | quiet | tail -30 ;;
    products)
        timeout 200 python3 bench/odd_columns.py --backward --rows 512,1048,4096,8192 2>&1 | quiet
        timeout 380 python3 bench/models.py --mode training --skip-warm --models gpt2,bert \
            --backends eager,inductor,tritonize,tritonize-noalign --markdown "$OUT/memory_products.md" 2>&1 | quiet | tail -14 ;;
    history)
        timeout 300 python3 - <<'PY' 2>&1 | quiet
import os, sys, torch
sys.path.insert(0, "bench")
import model_zoo, tritonize  # noqa: F401
spec = model_zoo.SPECS_BY_NAME["gpt2"]
torch.manual_seed(0)
with torch.device("cuda"):
    model = spec.build(False).to(torch.bfloat16).eval()
inputs = spec.make_inputs(spec.batch["inference"], False, torch.bfloat16, "cuda")
compiled = torch.compile(model, backend="tritonize")
with torch.no_grad():
    compiled(*inputs)
    torch.cuda.memory._record_memory_history(max_entries=200000)
    compiled(*inputs)
    torch.cuda.synchronize()
    path = os.path.join(os.environ["OUT"], "gpt2_inference_memory.pickle")
    torch.cuda.memory._dump_snapshot(path)
print("peak", torch.cuda.max_memory_allocated() / 2**30, "GiB; snapshot", path)
PY
        ;;
    saved)
        timeout 240 python3 bench/saved_activations.py --models mobilenetv3,resnet50,vit 2>&1 | quiet | tail -40
        timeout 300 python3 bench/peak_breakdown.py --model mobilenetv3 --backends tritonize,inductor --top 15 2>&1 \
            | quiet | tail -40 ;;
    *) echo "usage: bash bench/memory_gpu.sh inference|training|partitioners|products|history|saved" >&2; exit 2 ;;
esac
