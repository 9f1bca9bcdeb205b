"""What a compiled training forward keeps for the backward: the distinct storages of the tensors
it saved (parameters left out), per back end, for one model of bench/model_zoo.py under autocast
bf16 as bench/models.py trains it. Runs on the CPU (no GPU needed): the partition and the saved
set do not depend on the device. Issue 19's tool for training peaks.

    PYTHONPATH=src python3 bench/saved_tensors.py --model gpt2 --tokens 128 --backends tritonize,inductor
"""
import argparse
import collections
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import import_tritonize  # noqa: E402
from model_zoo import SPECS_BY_NAME, disable_dropout  # noqa: E402


def saved_storages(output, model) -> dict:
    """{storage pointer: (bytes, a (shape, dtype) seen there)} of what the compiled forward saved."""
    node = output.grad_fn
    while node is not None and "CompiledFunction" not in type(node).__name__:
        node = node.next_functions[0][0] if node.next_functions else None
    if node is None:
        raise SystemExit("no compiled function in the output's graph (did the back end compile it?)")
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    found = {}
    for t in node.saved_tensors:
        ptr = t.untyped_storage().data_ptr()
        if ptr not in params:
            found.setdefault(ptr, (t.untyped_storage().nbytes(), (tuple(t.shape), str(t.dtype).replace("torch.", ""))))
    return found


def report(backend, args) -> list:
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = disable_dropout(SPECS_BY_NAME[args.model].build(args.small)).train()
    x = torch.randint(0, model.config.vocab_size, (1, args.tokens))
    fn = torch.compile(lambda t: model(t).logits, backend=backend)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = fn(x)
    found = saved_storages(out, model)
    lines = [f"{backend}: {len(found)} storages, {sum(n for n, _ in found.values()) / 2**20:.2f} MiB"]
    groups = collections.Counter((round(n / 2**10), example) for n, example in found.values())
    for (kib, example), count in sorted(groups.items(), key=lambda kv: -kv[0][0] * kv[1]):
        lines.append(f"   {count:3d} x {kib:8d} KiB  e.g. {example}")
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="gpt2", help="a language model of bench/model_zoo.py")
    parser.add_argument("--tokens", type=int, default=128, help="sequence length (batch 1)")
    parser.add_argument("--backends", default="tritonize,inductor")
    parser.add_argument("--small", action="store_true", help="the model's tiny configuration")
    args = parser.parse_args(argv)
    import_tritonize()
    for backend in args.backends.split(","):
        print("\n".join(report(backend, args)), flush=True)


if __name__ == "__main__":
    main()
