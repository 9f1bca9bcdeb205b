"""The torch.compile entry: Dynamo hands us a torch-level FX graph; AOTAutograd with our
decompositions turns it into aten graphs (forward, and backward when training), and each aten
graph goes through pipeline.compile_graph."""
from __future__ import annotations

import itertools

import torch
from torch._functorch.aot_autograd import aot_module_simplified

from .config import Options, make_options
from .lower.decompositions import decomposition_table
from .graph_cache import compile_graph_cached

_GRAPH_IDS = itertools.count()


def make_backend(options: Options | None = None, recorder: list | None = None):
    """A Dynamo backend with fixed options. `recorder` (a list) collects each graph's artifacts."""
    options = options or make_options()

    def compile_aten(gm, example_inputs):
        compiled = compile_graph_cached(gm, example_inputs, options, next(_GRAPH_IDS))
        if recorder is not None:
            recorder.append(compiled.artifacts)
        return compiled

    def backend(gm: torch.fx.GraphModule, example_inputs):
        if recorder is not None:
            recorder.append("graph")
        return aot_module_simplified(
            gm, example_inputs,
            fw_compiler=compile_aten,
            bw_compiler=compile_aten,
            decompositions=decomposition_table(),
            keep_inference_input_mutations=False,
        )

    return backend


def tritonize_backend(gm: torch.fx.GraphModule, example_inputs, **kwargs):
    """The backend registered as "tritonize" (options from the environment and config.patch)."""
    options = make_options(kwargs.get("options"))
    return make_backend(options)(gm, example_inputs)
