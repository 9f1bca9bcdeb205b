#!/usr/bin/env bash
# Issue 20's GPU runs (convolution layouts), in parts that each fit one device call. From the repo
# root on the GPU machine:  bash bench/layout_gpu.sh PART   (tables go to $OUT when set)
#   inference  the convnets and ViT, inference: eager, Inductor, tritonize (conv_layout "auto"), and
#              tritonize with the layout forced: as traced (NCHW, tritonize-traced) and channels-last
#              (tritonize-nhwc)
#   training   the same in training (autocast bf16)
#   profile    resnet50 inference, top kernels of tritonize and tritonize-nhwc (layout conversions)
source "$(dirname "$0")/gpu_env.sh"
MODELS=resnet50,mobilenetv3,vit,convnext,efficientnet
case "${1:-}" in
    inference|training)
        timeout 580 python3 bench/models.py --mode "$1" --models "$MODELS" --skip-warm \
            --backends eager,inductor,tritonize,tritonize-traced,tritonize-nhwc --markdown "$OUT/layout_$1.md" 2>&1 | quiet | tail -30 ;;
    profile)
        timeout 400 python3 bench/profile_model.py --model resnet50 --backends tritonize-traced,tritonize-nhwc --top 15 \
            2>&1 | quiet ;;
    *) echo "usage: bash bench/layout_gpu.sh inference|training|profile" >&2; exit 2 ;;
esac
