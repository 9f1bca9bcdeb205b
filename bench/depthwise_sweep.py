"""Depthwise convolution + batch norm + activation: cuDNN against the generated kernel, per shape.

    PYTHONPATH=src python3 bench/depthwise_sweep.py [--markdown FILE]            # on the GPU
    PYTHONPATH=src python3 bench/depthwise_sweep.py --device cpu --small        # a smoke test

Issue 20 asks for a decision rule: per shape, whichever of cuDNN's depthwise kernel (option
depthwise_conv="library", back end tritonize-dwlib) and the generated convolution ("generated",
tritonize-dwgen; lower/depthwise.py) is faster. The tritonize column is the default, "auto": the
rule lower/depthwise.py draws from this sweep. The shapes are the depthwise layers of MobileNetV3, EfficientNet
and ConvNeXt at inference batch sizes: channels, spatial size, kernel and stride. Each block is a
module (convolution, batch norm in inference, SiLU) in channels-last memory order, as our
inference graphs run convolutions on CUDA; bf16; us a call, the back ends timed in turns, the
fastest of --rounds medians.
"""
import argparse
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

BACKENDS = ("eager", "inductor", "tritonize-dwlib", "tritonize-dwgen", "tritonize")  # the last: "auto"
# (batch, channels, size, kernel, stride): MobileNetV3-large, EfficientNet-B0, ConvNeXt-T layers
SHAPES = [
    (64, 16, 112, 3, 1), (64, 64, 112, 3, 2), (64, 72, 56, 3, 1), (64, 72, 56, 5, 2), (64, 120, 28, 5, 1),
    (64, 240, 28, 3, 2), (64, 480, 14, 3, 1), (64, 672, 14, 5, 1), (64, 960, 7, 5, 1), (64, 1152, 7, 3, 1),
    (32, 96, 56, 7, 1), (32, 192, 28, 7, 1), (32, 384, 14, 7, 1), (32, 768, 7, 7, 1),
    (1, 96, 56, 7, 1), (1, 672, 14, 5, 1),
]
SMALL_SHAPES = [(2, 8, 9, 3, 1), (2, 8, 9, 7, 2)]
HEADERS = ["batch", "channels", "size", "kernel", "stride"] + [f"{b} us" for b in BACKENDS] + ["winner", "generated / cuDNN"]


def block(channels: int, kernel: int, stride: int) -> nn.Module:
    conv = nn.Conv2d(channels, channels, kernel, stride, kernel // 2, groups=channels, bias=False)
    norm = nn.BatchNorm2d(channels)
    with torch.no_grad():
        norm.running_var.uniform_(0.5, 2)
        norm.running_mean.uniform_(-1, 1)
    return nn.Sequential(conv, norm, nn.SiLU()).eval()


def measure(shape, args) -> list:
    batch, channels, size, kernel, stride = shape
    device = torch.device(args.device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    torch.manual_seed(0)
    model = block(channels, kernel, stride).to(device=device, dtype=dtype, memory_format=torch.channels_last)
    x = torch.randn(batch, channels, size, size, device=device, dtype=dtype).to(memory_format=torch.channels_last)
    common.reset_compiler_state()
    fns, times = {}, {}
    with torch.no_grad():
        expected = model(x)
        for backend in BACKENDS:
            try:
                fn = common.build_backend(backend, model)
                actual = fn(x)
                if common.cosine_similarity(actual, expected) < 0.999:
                    times[backend] = "differs"
                    continue
                fns[backend] = fn
            except Exception as exc:  # noqa: BLE001  (a back end's failure is a cell)
                times[backend] = common.describe_error(exc)[:40]
        best = {backend: float("inf") for backend in fns}
        for _ in range(args.rounds):
            for backend, fn in fns.items():
                best[backend] = min(best[backend], common.median_time_s(lambda: fn(x), device) * 1e6)
    times.update(best)
    library, generated = times.get("tritonize-dwlib"), times.get("tritonize-dwgen")
    ratio = generated / library if isinstance(library, float) and isinstance(generated, float) else "-"
    winner = "-" if ratio == "-" else ("generated" if ratio < 1 else "cuDNN")
    return list(shape) + [times.get(b, "-") for b in BACKENDS] + [winner, ratio]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--small", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--markdown", metavar="FILE")
    args = parser.parse_args(argv)
    rows = []
    for shape in SMALL_SHAPES if args.small else SHAPES:
        rows.append(measure(shape, args))
        print("row:", " | ".join(common.format_cell(c) for c in rows[-1]), flush=True)
    print(common.environment_line(args.device))
    print(common.format_table(HEADERS, rows))
    if args.markdown:
        with open(args.markdown, "w") as out:
            out.write(common.format_markdown(HEADERS, rows) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
