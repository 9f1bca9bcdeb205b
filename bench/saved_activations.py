"""What a training graph's forward saves for its backward, per back end (issue 19, training peaks).

    PYTHONPATH=src python3 bench/saved_activations.py --models mobilenetv3,resnet50,vit   # GPU
    PYTHONPATH=src python3 bench/saved_activations.py --models toy_mbv3 --device cpu      # no timm

Builds each model as bench/models.py does in training (fp32 weights, forward under autocast bf16),
compiles it with each back end and stops each compile right after AOTAutograd's partitioner: the
forward graph's outputs past the user's are what the backward keeps alive, the bulk of a training
step's peak. Prints per back end the saved activations' bytes (values computed in the forward;
the parameters and inputs it saves cost nothing extra, nor a saved view of a saved value's
storage), then the kinds of saved values (producing
op, dtype) where the back ends differ, with their bytes. Tritonize's partition is patched in
tritonize.backend, Inductor's in torch._inductor.compile_fx; each compile is stopped by an
exception after the partition, so nothing is generated or launched. (bench/saved_tensors.py
answers the same question by running a compiled step of a transformers model on the CPU and
reading what it saved; this one takes any model of the zoo at full size, in seconds.)
"""
import argparse
import collections
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


class _Partitioned(Exception):
    """Raised after the partition, to stop the compile there."""


def _saved_values(forward_module, num_fwd_outputs):
    """(producer, dtype, bytes, shape) for each saved value the forward computes."""
    from torch.multiprocessing.reductions import StorageWeakRef

    output = next(n for n in forward_module.graph.nodes if n.op == "output")
    saved, storages = [], set()
    for node in output.args[0][num_fwd_outputs:]:
        value = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
        if not isinstance(value, torch.Tensor) or node.op == "placeholder":
            continue
        storage = StorageWeakRef(value.untyped_storage()).cdata
        size = 0 if storage in storages else value.untyped_storage().nbytes()  # a view of a saved value: free
        storages.add(storage)
        producer = node.target if node.op == "call_function" else node.op
        saved.append((str(producer), str(value.dtype).replace("torch.", ""), int(size), tuple(value.shape)))
    return saved


def _recording(partition, record):
    def partition_and_stop(joint_module, joint_inputs, **kwargs):
        forward, backward = partition(joint_module, joint_inputs, **kwargs)
        record.append(_saved_values(forward, kwargs["num_fwd_outputs"]))
        raise _Partitioned()
    return partition_and_stop


def saved_by_backend(backend, forward, step_inputs):
    """The saved values of each graph the back end partitions for one training step."""
    import unittest.mock
    common.reset_compiler_state()
    record = []
    if backend == "tritonize":
        import tritonize.backend as module
        target = "_min_cut_random_safe"
    else:
        import torch._inductor.compile_fx as module
        target = "min_cut_rematerialization_partition"
    original = getattr(module, target)
    with unittest.mock.patch.object(module, target, _recording(original, record)):
        try:
            step_inputs(common.build_backend(backend, forward))
        except Exception as error:  # the compile stopped by _Partitioned, wrapped by Dynamo
            if not record:
                raise error
    return [value for graph in record for value in graph]


def toy_mbv3(device):
    """A MobileNetV3-like stack built from torch.nn alone: inverted residuals with depthwise
    convolutions, batch norm, hardswish and squeeze-excitation."""
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, channels, hidden):
            super().__init__()
            self.expand = nn.Sequential(nn.Conv2d(channels, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.Hardswish())
            self.depthwise = nn.Sequential(nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden, bias=False),
                                           nn.BatchNorm2d(hidden), nn.Hardswish())
            self.squeeze = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(hidden, hidden // 4, 1), nn.ReLU(),
                                         nn.Conv2d(hidden // 4, hidden, 1), nn.Hardsigmoid())
            self.project = nn.Sequential(nn.Conv2d(hidden, channels, 1, bias=False), nn.BatchNorm2d(channels))

        def forward(self, x):
            y = self.depthwise(self.expand(x))
            return x + self.project(y * self.squeeze(y))

    model = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(16), nn.Hardswish(),
                          Block(16, 64), Block(16, 64), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
    return model.to(device), (torch.randn(8, 3, 32, 32, device=device),)


def workload(name, device):
    """(forward, run one training step of a compiled forward) for a model."""
    if name == "toy_mbv3":
        model, inputs = toy_mbv3(device)
        params = list(model.parameters())
    else:
        import model_zoo
        from models import Workload
        load = Workload(model_zoo.SPECS_BY_NAME[name], "training", small=False, device=device)
        model, inputs, params = load.model, load.inputs, load.params
    model.train()

    def forward(*args):
        output = model(*args)
        return output if isinstance(output, torch.Tensor) else common.flatten_tensors(output)[0]

    def step(compiled):
        for p in params:
            p.grad = None
        with torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16):
            output = compiled(*inputs)
        output.float().square().mean().backward()
    return forward, step


def kinds(saved):
    totals = collections.Counter()
    for producer, dtype, size, _ in saved:
        totals[(producer, dtype)] += size
    return totals


def report(name, by_backend):
    mib = 2 ** 20
    print(f"\n=== {name}: saved activations (MiB, values the forward computes; count)")
    for backend, saved in by_backend.items():
        print(f"  {backend:10s} {sum(s for _, _, s, _ in saved) / mib:9.2f} MiB  {len(saved)} values")
    tables = {backend: kinds(saved) for backend, saved in by_backend.items()}
    keys = sorted(set().union(*tables.values()), key=lambda k: -max(t[k] for t in tables.values()))
    print("  " + " | ".join(["producer, dtype"] + list(tables)))
    for key in keys:
        cells = [f"{t[key] / mib:.2f}" for t in tables.values()]
        if len(set(cells)) > 1:
            print(f"  {key[0]}, {key[1]} | " + " | ".join(cells))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="mobilenetv3,resnet50,vit")
    parser.add_argument("--backends", default="tritonize,inductor")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    for name in args.models.split(","):
        by_backend = {}
        for backend in args.backends.split(","):
            torch.manual_seed(0)
            forward, step = workload(name, args.device)
            by_backend[backend] = saved_by_backend(backend, forward, step)
        report(name, by_backend)


if __name__ == "__main__":
    main()
