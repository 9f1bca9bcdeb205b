#!/usr/bin/env bash
# Issue 18's GPU runs, in parts that each fit one device call (10 minutes). From the repo root on
# the GPU machine:  bash bench/cuda_graphs_gpu.sh PART   (logs go to $OUT when set)
#   tests     the CUDA-graph tests and the mode tests on CUDA (real captures)
#   overhead  bench/overhead.py: the launch-bound MLP stack and a one-token decode step
#   decode    bench/decode.py: transformers' static-cache recipe, 128 new tokens
#   models1   the model suite at batch 1, inference, with and without CUDA graphs: gpt2, bert, llama
#   models2   the same for resnet50, vit, mobilenetv3
#   training  peak memory and step time of training with and without CUDA graphs, six models
#   memory    bench/cuda_graph_memory.py: what the recordings hold, six models (MODE=inference: inference;
#             KEEP_CACHE=1: no empty_cache() after the warm-up steps, what a training loop holds)
#   memory-table  KEEP_CACHE=1 memory for six models, training and inference, in five process groups at
#             once (each measures its own allocator; the convnets' training the median of 3 runs; ~300 s)
#   memory-inductor  the same for llama and gpt2 with Inductor's rows (plain and reduce-overhead)
#   memory-log       llama's training with LOG_ADDRESSES=1: which inputs move, each graph's notes
#   verify    tests, memory-log for llama and gpt2, memory for llama, gpt2 and bert (about 450 s)
source "$(dirname "$0")/gpu_env.sh"
case "${1:-}" in
    tests)
        TRITONIZE_TEST_DEVICE=cuda timeout 300 python3 -m pytest -q -p no:cacheprovider -n 4 \
            tests/test_cuda_graphs.py tests/test_cuda_graph_buckets.py tests/test_backend.py 2>&1 | grep -v "^DEBUG" > "$OUT/test_cuda_graphs.log"
        grep -E "^FAILED|^ERROR|^E  |passed|failed" "$OUT/test_cuda_graphs.log" | head -40 ;;
    overhead)
        timeout 400 python3 bench/overhead.py 2>&1 | quiet ;;
    decode)
        timeout 560 python3 bench/decode.py "${@:2}" 2>&1 | quiet ;;
    models1|models2)
        models=$([ "$1" = models1 ] && echo gpt2,bert,llama || echo resnet50,vit,mobilenetv3)
        timeout 580 python3 bench/models.py --batch 1 --skip-warm --models "$models" \
            --backends eager,inductor-ro,tritonize,tritonize-ro --markdown "$OUT/$1.md" 2>&1 | quiet ;;
    training)
        timeout 580 python3 bench/models.py --mode training --skip-warm --backends tritonize,tritonize-ro \
            --markdown "$OUT/training.md" 2>&1 | quiet ;;
    memory)  # a process per model (a row survives a later model's timeout); MODELS, MODE to choose
        for model in $(echo "${MODELS:-llama,gpt2,bert,mobilenetv3,resnet50,vit}" | tr , ' '); do
            timeout 150 python3 bench/cuda_graph_memory.py --models "$model" --mode "${MODE:-training}" \
                ${KEEP_CACHE:+--keep-cache} 2>&1 \
                | grep -v "^DEBUG" > "$OUT/memory_$model.txt"
            grep -E "^\| $model" "$OUT/memory_$model.txt"
        done ;;
    memory-table)  # the convnets' plain launches vary from run to run: the median of three runs
        table() { timeout 540 python3 bench/cuda_graph_memory.py --keep-cache --models "$2" --mode "$1" \
            --backends tritonize,tritonize-ro --repeat "$4" > "$OUT/memory_$1_$3.txt" 2>&1; }
        table training gpt2,llama,bert transformers 1 & table training vit vit 1 &
        table training resnet50 resnet50 3 & table training mobilenetv3 mobilenetv3 3 &
        table inference gpt2,llama,bert,resnet50,vit,mobilenetv3 all 1 & wait
        grep -h -E "^\| [a-z]" "$OUT"/memory_training_*.txt "$OUT"/memory_inference_all.txt ;;
    memory-inductor)
        timeout 560 python3 bench/cuda_graph_memory.py --models llama,gpt2 --mode training \
            --backends tritonize,tritonize-ro,inductor,inductor-ro 2>&1 | quiet ;;
    memory-log)  # reduce-overhead only; the backward's large inputs' addresses as runs of calls
        LOG_ADDRESSES=1 timeout 150 python3 bench/cuda_graph_memory.py --models "${MODELS:-llama}" --mode training \
            --backends tritonize-ro 2>&1 | grep -v -E "^DEBUG" > "$OUT/memory_log.txt"
        grep -E "recorded sizes|moved|^\|" "$OUT/memory_log.txt" | cut -c1-140
        grep "(backward): \[" "$OUT/memory_log.txt" | awk '{print $NF}' | uniq -c | tr '\n' ' '; echo ;;
    verify)  # one call after a change to recording: the tests, llama's and GPT-2's addresses, three models' memory
        bash "$0" tests
        for model in llama gpt2; do MODELS=$model bash "$0" memory-log; cp "$OUT/memory_log.txt" "$OUT/memory_log_$model.txt"; done
        MODELS=llama,gpt2,bert bash "$0" memory ;;
    *) echo "usage: bash bench/cuda_graphs_gpu.sh tests|overhead|decode|models1|models2|training|memory|memory-table|memory-inductor|memory-log|verify" >&2; exit 2 ;;
esac
