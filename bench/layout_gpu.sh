#!/usr/bin/env bash
# Issue 20's GPU runs (convolution layouts), in parts that each fit one device call. From the repo
# root on the GPU machine:  bash bench/layout_gpu.sh PART   (tables go to $OUT when set)
#   inference  the convnets and ViT, inference: eager, Inductor, tritonize (conv_layout "auto":
#              channels-last here) and tritonize as traced (NCHW, back end tritonize-traced)
#   training   the same in training (autocast bf16), with tritonize-nhwc (channels-last forced;
#              "auto" keeps training graphs as traced)
#   kernels    the kernel suite's convolution cases (conv+bn+relu+residual, depthwise+bn+silu), with
#              depthwise convolutions generated (tritonize-dwgen)
#   freeze     the convnets, inference: frozen (tritonize-freeze, Inductor's freezing) and depthwise
#              convolutions generated (tritonize-dwgen), against eager, Inductor and tritonize
#   sweep      depthwise convolution + batch norm + SiLU per shape: cuDNN against the generated kernel
#   profile    resnet50 inference, top kernels as traced and channels-last (layout conversions)
source "$(dirname "$0")/gpu_env.sh"
MODELS=${MODELS:-resnet50,mobilenetv3,vit,convnext,efficientnet}
case "${1:-}" in
    inference)
        timeout 590 python3 bench/models.py --mode inference --models "$MODELS" --skip-warm \
            --backends eager,inductor,tritonize,tritonize-traced --markdown "$OUT/layout_inference.md" 2>&1 | quiet | tail -30 ;;
    training)
        timeout 590 python3 bench/models.py --mode training --models "$MODELS" --skip-warm \
            --backends eager,inductor,tritonize,tritonize-nhwc --markdown "$OUT/layout_training.md" 2>&1 | quiet | tail -30 ;;
    kernels)
        timeout 300 python3 bench/kernels.py --cases conv_bn_relu_residual,dwconv_bn_silu \
            --backends eager,inductor,tritonize,tritonize-traced,tritonize-dwgen --markdown "$OUT/layout_kernels.md" 2>&1 \
            | quiet | tail -14 ;;
    freeze)
        timeout 590 python3 bench/models.py --mode inference --models "$MODELS" --skip-warm \
            --backends eager,inductor,inductor-freeze,tritonize,tritonize-freeze,tritonize-dwgen \
            --markdown "$OUT/layout_freeze.md" 2>&1 | quiet | tail -40 ;;
    sweep)
        timeout 590 python3 bench/depthwise_sweep.py --markdown "$OUT/depthwise_sweep.md" 2>&1 | quiet | tail -24 ;;
    profile)
        timeout 400 python3 bench/profile_model.py --model "${2:-resnet50}" --backends tritonize-traced,tritonize-nhwc --top 15 \
            2>&1 | quiet ;;
    *) echo "usage: bash bench/layout_gpu.sh inference|training|kernels|freeze|sweep|profile [model]" >&2; exit 2 ;;
esac
