"""Kernel suite: memory-bound pointwise, reduction and fused-chain cases, eager vs Inductor vs tritonize.

    PYTHONPATH=src python3 bench/kernels.py                       # all cases, all back ends, CUDA
    PYTHONPATH=src python3 bench/kernels.py --cases softmax,layer_norm --backends eager,tritonize
    PYTHONPATH=src python3 bench/kernels.py --backends eager,inductor,tritonize,tritonize-max
    python3 bench/kernels.py --device cpu --small --backends eager  # smoke test, tiny sizes

For every case and back end it reports the median time (warm-up excluded; the back ends are timed
in --rounds interleaved rounds and the fastest round's median counts), the bytes a perfect
implementation must move (each input read once, each output written once), the achieved GB/s and
its share of the device-to-device copy bandwidth measured in the same run, the device kernels one
call launches (torch.profiler), and a check against eager. These cases are bandwidth-bound, so
"% copy" is the figure of merit: 100% means the kernel runs at the speed of a plain copy.

A back end that raises gives a row "fails: <Type>: <message>" instead of stopping the suite.
"""
import argparse
import os
import sys
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

HEADERS = ["case", "backend", "time us", "GB/s", "% copy", "kernels", "check"]


@dataclass
class Case:
    name: str
    fn: Callable
    make_inputs: Callable  # (device, dtype, small) -> tuple of tensors
    about: str


# ----------------------------------------------------------------------------- inputs


def matrix_shape(small):
    return (64, 256) if small else (16384, 4096)


def randn(shape, device, dtype):
    return torch.randn(shape, device=device, dtype=dtype)


def matrices(count, with_row_vector=False):
    """Inputs: `count` [M, N] matrices, plus a [N] vector when asked."""
    def make(device, dtype, small):
        m, n = matrix_shape(small)
        tensors = [randn((m, n), device, dtype) for _ in range(count)]
        if with_row_vector:
            tensors.insert(1, randn((n,), device, dtype))
        return tuple(tensors)
    return make


def square_pair(device, dtype, small):
    n = 64 if small else 4096
    return randn((n, n), device, dtype), randn((n, n), device, dtype)


def norm_inputs(device, dtype, small):
    m, n = matrix_shape(small)
    return randn((m, n), device, dtype), randn((n,), device, dtype), randn((n,), device, dtype)


def rms_inputs(device, dtype, small):
    m, n = matrix_shape(small)
    return randn((m, n), device, dtype), randn((n,), device, dtype)


def cross_entropy_inputs(device, dtype, small):
    rows, classes = (32, 100) if small else (8192, 32000)
    logits = randn((rows, classes), device, dtype)
    target = torch.randint(0, classes, (rows,), device=device, dtype=torch.int64)
    return logits, target


def attention_shape(small):
    # [batch, heads, q, k]: 16*16*512*512 elements, the same bytes as one 16384x4096 matrix.
    return (2, 2, 16, 16) if small else (16, 16, 512, 512)


def attention_additive_inputs(device, dtype, small):
    b, h, q, k = attention_shape(small)
    scores = randn((b, h, q, k), device, dtype)
    causal = torch.ones((q, k), device=device, dtype=torch.bool).tril()
    mask = torch.zeros((q, k), device=device, dtype=dtype).masked_fill(~causal, float("-inf"))
    return scores, mask


def attention_bool_inputs(device, dtype, small):
    b, h, q, k = attention_shape(small)
    scores = randn((b, h, q, k), device, dtype)
    keep = torch.ones((q, k), device=device, dtype=torch.bool).tril()
    return scores, keep


def conv_block_inputs(depthwise):
    """A feature map [N, C, H, W] (NCHW, as eager makes it), a 3x3 weight (one per channel when
    depthwise), batch norm's running mean, variance (positive), weight and bias; plus a residual
    of the map's shape for the full convolution."""
    def make(device, dtype, small):
        n, c, h, w = (2, 8, 8, 8) if small else ((32, 96, 56, 56) if depthwise else (64, 64, 56, 56))
        x = randn((n, c, h, w), device, dtype)
        weight = randn((c, 1 if depthwise else c, 3, 3), device, dtype) * (0.3 if depthwise else 0.05)
        norm = (randn((c,), device, dtype), randn((c,), device, dtype).abs() + 0.5,
                randn((c,), device, dtype), randn((c,), device, dtype))
        return (x, weight) + norm + (() if depthwise else (randn((n, c, h, w), device, dtype),))
    return make


# ----------------------------------------------------------------------------- case bodies


def gelu_bias(x, bias):
    return F.gelu(x + bias)


def relu_abc(a, b, c):
    return torch.relu(a * b + c)


def silu_mul(a, b):
    return F.silu(a) * b


def transpose_add(x, y):
    return x.t() + y


def softmax(x):
    return torch.softmax(x, dim=-1)


def log_softmax(x):
    return torch.log_softmax(x, dim=-1)


def layer_norm(x, weight, bias):
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps=1e-5)


def rms_norm(x, weight):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight


def sum_last(x):
    return x.sum(dim=-1)


def sum_first(x):
    return x.sum(dim=0)


def var_mean_last(x):
    return torch.var_mean(x, dim=-1)


def cross_entropy(logits, target):
    return F.cross_entropy(logits, target)


def bias_gelu_residual(x, bias, residual):
    return F.gelu(x + bias) + residual


def attn_softmax(scores, mask):
    return torch.softmax(scores * (scores.shape[-1] ** -0.5) + mask, dim=-1)


def attn_softmax_bool(scores, keep):
    scaled = scores * (scores.shape[-1] ** -0.5)
    return torch.softmax(scaled.masked_fill(~keep, float("-inf")), dim=-1)


def conv_bn_relu_residual(x, weight, mean, var, gamma, beta, residual):
    y = F.batch_norm(F.conv2d(x, weight, padding=1), mean, var, gamma, beta, training=False)
    return torch.relu(y + residual)


def dwconv_bn_silu(x, weight, mean, var, gamma, beta):
    y = F.conv2d(x, weight, padding=1, groups=x.shape[1])
    return F.silu(F.batch_norm(y, mean, var, gamma, beta, training=False))


CASES = [
    Case("gelu_bias", gelu_bias, matrices(1, with_row_vector=True), "gelu(x + bias[N])"),
    Case("relu_abc", relu_abc, matrices(3), "relu(a * b + c)"),
    Case("silu_mul", silu_mul, matrices(2), "silu(a) * b"),
    Case("transpose_add", transpose_add, square_pair, "x.t() + y, 4096x4096"),
    Case("softmax", softmax, matrices(1), "softmax over the last dim"),
    Case("log_softmax", log_softmax, matrices(1), "log_softmax over the last dim"),
    Case("layer_norm", layer_norm, norm_inputs, "layer_norm with weight and bias"),
    Case("rms_norm", rms_norm, rms_inputs, "x * rsqrt(mean(x^2) + eps) * w, written out"),
    Case("sum_last", sum_last, matrices(1), "sum over the last dim"),
    Case("sum_first", sum_first, matrices(1), "sum over the first dim"),
    Case("var_mean", var_mean_last, matrices(1), "var_mean over the last dim"),
    Case("cross_entropy", cross_entropy, cross_entropy_inputs, "8192x32000 logits, int64 targets"),
    Case("bias_gelu_residual", bias_gelu_residual, matrices(2, with_row_vector=True),
         "gelu(x + b) + r"),
    Case("attn_softmax", attn_softmax, attention_additive_inputs,
         "softmax(s * scale + additive causal mask), [16,16,512,512]"),
    Case("attn_softmax_bool", attn_softmax_bool, attention_bool_inputs,
         "softmax(masked_fill(s * scale, ~causal, -inf)), [16,16,512,512]"),
    Case("conv_bn_relu_residual", conv_bn_relu_residual, conv_block_inputs(False),
         "relu(bn(conv3x3(x)) + r), [64,64,56,56], inference batch norm (issue 20)"),
    Case("dwconv_bn_silu", dwconv_bn_silu, conv_block_inputs(True),
         "silu(bn(depthwise conv3x3(x))), [32,96,56,56], inference batch norm (issue 20)"),
]
CASES_BY_NAME = {case.name: case for case in CASES}


# ----------------------------------------------------------------------------- measuring


def bytes_moved(inputs, outputs):
    """Each distinct input read once plus each output written once, in bytes."""
    seen, total = set(), 0
    for tensor in list(inputs) + common.flatten_tensors(outputs):
        key = (tensor.data_ptr(), tensor.numel(), tensor.dtype)
        if key not in seen:
            seen.add(key)
            total += tensor.numel() * tensor.element_size()
    return total


def tolerances(dtype):
    """(rtol, atol as a fraction of the largest reference magnitude) for comparing to eager."""
    if dtype in (torch.bfloat16, torch.float16):
        return 2e-2, 1e-2
    return 1e-4, 1e-5


def check_against(actual, expected):
    """'ok' or 'MISMATCH ...': |a - e| <= atol + rtol |e| elementwise, atol scaled to max |e|."""
    got, want = common.flatten_tensors(actual), common.flatten_tensors(expected)
    if len(got) != len(want):
        return f"MISMATCH {len(got)} outputs, expected {len(want)}"
    for a, e in zip(got, want):
        if a.shape != e.shape or a.dtype != e.dtype:
            return f"MISMATCH {a.dtype}{list(a.shape)} vs {e.dtype}{list(e.shape)}"
        rtol, atol_fraction = tolerances(e.dtype)
        a64, e64 = a.detach().double(), e.detach().double()
        if not same_non_finite(a64, e64):
            return "MISMATCH non-finite values differ"
        finite = torch.isfinite(e64)
        if not finite.any():
            continue
        error = (a64[finite] - e64[finite]).abs()
        scale = e64[finite].abs()
        atol = atol_fraction * float(scale.max())
        if bool((error > atol + rtol * scale).any()):
            return f"MISMATCH max_err={float(error.max()):.3g}"
    return "ok"


def same_non_finite(a, e):
    """NaNs in the same places, infinities in the same places with the same sign."""
    inf = torch.isinf(e)
    return (torch.equal(torch.isnan(a), torch.isnan(e)) and torch.equal(torch.isinf(a), inf)
            and torch.equal(a[inf], e[inf]))


def failure_row(case, backend, message):
    return [case.name, backend, "-", "-", "-", "-", message]


def prepare_backend(case, backend, inputs, expected, device):
    """(fn, check, kernels) for `backend` after one checked call; raises what the back end raises."""
    fn = common.build_backend(backend, case.fn)
    actual = fn(*inputs)
    common.synchronize(device)
    check = check_against(actual, expected)
    del actual
    return fn, check, common.count_device_kernels(lambda: fn(*inputs), device)


def time_rounds(prepared, inputs, device, rounds):
    """{back end: seconds, or the failure's description}: the fastest of `rounds` medians, the
    back ends interleaved round by round. A slow spell of the shared machine (seen on the H100:
    a whole 100 ms window at twice the usual time, for any back end) then costs one round of one
    back end, not its figure."""
    times, failed = {backend: [] for backend in prepared}, {}
    for _ in range(max(1, rounds)):
        for backend, (fn, _, _) in prepared.items():
            if backend in failed:
                continue
            try:
                times[backend].append(common.median_time_s(lambda: fn(*inputs), device))
            except Exception as exc:  # a back end's failure is a result, not a crash
                failed[backend] = common.describe_error(exc)
    return {backend: failed.get(backend) or min(values) for backend, values in times.items()}


def run_case(case, backends, device, dtype, small, copy_gbs, rounds=3):
    """One row per back end: time, bandwidth, kernels and check of `case`."""
    common.reset_compiler_state()
    torch.manual_seed(0)
    try:
        inputs = case.make_inputs(device, dtype, small)
        expected = case.fn(*inputs)
    except Exception as exc:
        return [failure_row(case, "eager", "inputs/reference " + common.describe_error(exc))]
    nbytes = bytes_moved(inputs, expected)
    prepared, failures = {}, {}
    for backend in backends:
        try:
            prepared[backend] = prepare_backend(case, backend, inputs, expected, device)
        except Exception as exc:  # a back end's failure is a result, not a crash
            if torch.device(device).type == "cuda":
                torch.cuda.empty_cache()
            failures[backend] = failure_row(case, backend, common.describe_error(exc))
    seconds = time_rounds(prepared, inputs, device, rounds)
    rows = []
    for backend in backends:
        if backend in failures:
            rows.append(failures[backend])
            continue
        if isinstance(seconds[backend], str):
            rows.append(failure_row(case, backend, seconds[backend]))
            continue
        _, check, kernels = prepared[backend]
        gbs = nbytes / seconds[backend] / 1e9
        rows.append([case.name, backend, seconds[backend] * 1e6, gbs, 100 * gbs / copy_gbs, kernels, check])
    del inputs, expected, prepared
    if torch.device(device).type == "cuda":
        torch.cuda.empty_cache()
    return rows


def summary_lines(rows, backends):
    """Geomean speedup over eager per back end, tritonize against Inductor, and default mode
    against max-autotune, over the cases where both ran."""
    times = {(row[0], row[1]): row[2] for row in rows if isinstance(row[2], float)}

    def ratio(slow, fast):
        values = [times[(case, slow)] / t for (case, b), t in times.items()
                  if b == fast and (case, slow) in times]
        mean = common.geomean(values)
        return f"{mean:.2f}x (n={len(values)})" if mean else "n/a"

    def worst(slow, fast):
        values = [(times[(case, slow)] / t, case) for (case, b), t in times.items()
                  if b == fast and (case, slow) in times]
        return "{:.2f}x ({})".format(*min(values)) if values else "n/a"

    lines = [f"geomean speedup vs eager, {b}: {ratio('eager', b)}" for b in backends if b != "eager"]
    if "inductor" in backends and "tritonize" in backends:
        lines.append("tritonize vs inductor (inductor time / tritonize time, >1 = tritonize faster): "
                     + ratio("inductor", "tritonize"))
    for mode in ("dynamic",):
        if "tritonize" in backends and f"tritonize-{mode}" in backends:
            lines.append(f"{mode} vs static (static time / {mode} time, >= 0.91 is the goal): "
                         + ratio("tritonize", f"tritonize-{mode}") + ", worst "
                         + worst("tritonize", f"tritonize-{mode}"))
        if f"inductor-{mode}" in backends and f"tritonize-{mode}" in backends:
            lines.append(f"tritonize-{mode} vs inductor-{mode}: "
                         + ratio(f"inductor-{mode}", f"tritonize-{mode}"))
    if "tritonize" in backends and "tritonize-max" in backends:
        lines.append("max-autotune vs default (default time / max-autotune time, <= 1.10 is the goal): "
                     + ratio("tritonize", "tritonize-max"))
    return lines


# ----------------------------------------------------------------------------- command line


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", default=",".join(CASES_BY_NAME),
                        help="comma-separated case names (default: all)")
    parser.add_argument("--backends", default=",".join(common.BACKENDS),
                        help="comma-separated back ends (default: eager,inductor,tritonize; also "
                             "tritonize-max: mode=\"max-autotune\")")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--small", action="store_true", help="tiny sizes, for a smoke test")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    parser.add_argument("--rounds", type=int, default=3,
                        help="timing rounds, back ends interleaved; the fastest median counts")
    parser.add_argument("--markdown", metavar="FILE", help="also write the table as markdown")
    parser.add_argument("--html", metavar="FILE",
                        help="also write tritonize.profile's page of the cases (one profile each, merged)")
    parser.add_argument("--html-dynamic", metavar="FILE",
                        help="the same page with every case compiled with dynamic=True")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.list:
        for case in CASES:
            print(f"{case.name:20} {case.about}")
        return 0
    names = common.parse_list(args.cases, list(CASES_BY_NAME), "cases", strict=False)
    cases = [CASES_BY_NAME[n] for n in names]
    backends = common.parse_list(args.backends, common.KNOWN_BACKENDS, "back ends")
    if torch.device(args.device).type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("CUDA is not available; use --device cpu --small for a smoke test")
    dtype = getattr(torch, args.dtype)

    environment = common.environment_line(args.device)
    copy_gbs = common.copy_bandwidth_gbs(args.device)
    print(environment)
    print(f"copy bandwidth: {copy_gbs:.1f} GB/s", flush=True)
    rows = []
    for case in cases:
        case_rows = run_case(case, backends, args.device, dtype, args.small, copy_gbs, args.rounds)
        for row in case_rows:
            print("  " + "  ".join(common.format_cell(c) for c in row), flush=True)
        rows += case_rows

    summary = summary_lines(rows, backends)
    print()
    print(common.format_table(HEADERS, rows))
    print("\n".join(summary))
    print(f"copy bandwidth: {copy_gbs:.1f} GB/s ({environment}, {args.dtype})")
    if args.markdown:
        with open(args.markdown, "w") as out:
            out.write(f"{environment}, {args.dtype}; copy bandwidth: {copy_gbs:.1f} GB/s\n\n")
            out.write(common.format_markdown(HEADERS, rows) + "\n\n")
            out.write("\n".join(f"- {line}" for line in summary) + "\n")
    if args.html:
        write_profile_page(cases, args.device, dtype, args.small, args.html)
    if args.html_dynamic:
        write_profile_page(cases, args.device, dtype, args.small, args.html_dynamic, dynamic=True)
    return 0


def write_profile_page(cases, device, dtype, small, path, dynamic: bool = False) -> None:
    """tritonize.profile of each case (static sizes, or all symbolic with dynamic), merged into
    one page (issue 24)."""
    import tritonize
    from tritonize.profile import merge_profiles

    profiles = {case.name: tritonize.profile(case.fn, *case.make_inputs(device, dtype, small), dynamic=dynamic)
                for case in cases}
    merged = merge_profiles(profiles)
    kind = ", dynamic=True" if dynamic else ""
    merged.save_html(path, title=f"tritonize kernel suite ({device}, {str(dtype).split('.')[-1]}{kind})")
    print(merged)
    print(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
