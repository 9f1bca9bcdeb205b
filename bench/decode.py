"""transformers' recipe for compiled decoding (issue 18), every back end in one run (GPU).

    PYTHONPATH=src python3 bench/decode.py                # about 3 minutes on an H100
    PYTHONPATH=src python3 bench/decode.py --backends eager,tritonize-ro --new-tokens 64

The recipe: a static KV cache (`cache_implementation="static"`) and `model.forward` compiled with
`mode="reduce-overhead", fullgraph=True`, greedy decoding, never calling
`torch.compiler.cudagraph_mark_step_begin()`. The model: bench/model_zoo's Llama-style decoder
(8 layers, hidden 1024, GQA 16/8 heads), bf16, batch 1, a 16-token prompt, `--new-tokens` (128)
new tokens. Back ends: eager, tritonize and Inductor, each in the default mode and with
reduce-overhead ("-ro"), each in its own process (a crash is a row, not the end of the run). tokens/s counts new tokens over the whole generate() (prefill included),
best of `--repeats` after one warm-up generate; "same tokens" compares each row's tokens with
tritonize's default mode (and eager's). A back end that raises gets a row saying what it raised.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import model_zoo  # noqa: E402

BACKENDS = ["eager", "tritonize", "tritonize-ro", "inductor", "inductor-ro"]


def build_model():
    torch.manual_seed(0)
    model = model_zoo.build_llama(small=False).to("cuda", torch.bfloat16).eval()
    model.config.use_cache = True
    model.generation_config.use_cache = True
    if hasattr(model.generation_config, "disable_compile"):
        model.generation_config.disable_compile = True  # our torch.compile, not generate()'s own
    return model


def generate(model, prompt, new_tokens):
    return model.generate(prompt, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                          cache_implementation="static", pad_token_id=0)


def run_backend(name, prompt, new_tokens, repeats):
    model = build_model()
    if name != "eager":
        base, _, variant = name.partition("-")
        if base == "tritonize":
            common.import_tritonize()
        mode = "reduce-overhead" if variant == "ro" else None
        model.forward = torch.compile(model.forward, backend=base, mode=mode, fullgraph=True)
    with torch.no_grad():
        tokens = generate(model, prompt, new_tokens)  # warm-up: compiles, records
        best = float("inf")
        for _ in range(repeats):
            torch.cuda.synchronize()
            start = time.perf_counter()
            tokens = generate(model, prompt, new_tokens)
            torch.cuda.synchronize()
            best = min(best, time.perf_counter() - start)
    return tokens, new_tokens / best


def run_one(name, new_tokens, repeats):
    """One back end in this process: prints one JSON line (tokens and rate, or the error)."""
    torch.manual_seed(1)
    prompt = torch.randint(3, 32000, (1, 16), device="cuda")
    try:
        tokens, rate = run_backend(name, prompt, new_tokens, repeats)
        print(json.dumps({"tokens": tokens.tolist(), "rate": rate}))
    except Exception as exc:
        print(json.dumps({"error": common.describe_error(exc)}))


def run_isolated(name, new_tokens, repeats):
    command = [sys.executable, os.path.abspath(__file__), "--one", name, "--new-tokens", str(new_tokens),
               "--repeats", str(repeats)]
    done = subprocess.run(command, capture_output=True, text=True)
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            result = json.loads(line)
            if "error" in result:
                return None, result["error"]
            return torch.tensor(result["tokens"]), result["rate"]
    return None, f"exit status {done.returncode}: {done.stderr.strip().splitlines()[-1:] or ''}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        return run_one(args.one, args.new_tokens, args.repeats)
    print(common.environment_line("cuda"))
    results = {}
    for name in [n for n in args.backends.split(",") if n]:
        results[name] = run_isolated(name, args.new_tokens, args.repeats)
        tokens, rate = results[name]
        print(f"{name}: {rate if tokens is None else f'{rate:.1f} tokens/s'}", flush=True)
    eager_rate = results.get("eager", (None, None))[1]
    references = {r: results[r][0] for r in ("tritonize", "eager") if results.get(r, (None,))[0] is not None}
    rows = []
    for name, (tokens, rate) in results.items():
        if tokens is None:
            rows.append((name, "-", "-", f"failed: {rate}"))
            continue
        same = ", ".join(f"{r}: {torch.equal(tokens, ref)}" for r, ref in references.items() if r != name)
        speed = f"{rate / eager_rate:.2f}" if isinstance(eager_rate, float) else "-"
        rows.append((name, f"{rate:.1f}", speed, same))
    print(common.format_markdown(["backend", "tokens/s", "x eager", "same tokens"], rows))


if __name__ == "__main__":
    main()
