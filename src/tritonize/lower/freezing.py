"""Frozen inference (`options={"freeze": True}`): parameters and buffers as constants.

The contract: a frozen model's weights do not change. Under it, an inference graph's parameter and
buffer inputs are the values they held at compile time, so the compiler may compute with them
once instead of at every call:

- **Constant folding.** Every aten call whose tensor arguments are all such constants (a batch
  norm's `rsqrt(var + eps) * weight`, a linear weight's transpose, a dtype conversion of a
  weight) is computed once, at compile time, and its result becomes a constant of the graph.
- **Folding into convolutions.** A convolution of a constant weight whose result is then only
  multiplied, added or subtracted by a per-output-channel constant (a batch norm in
  inference, decomposed: `(conv - mean) * scale * weight + bias`) becomes one convolution with
  the folded weight and bias: W' = W * c and b' = b * c for a product, b' = b + c for a sum.
  A convolution followed by batch norm and ReLU is then a convolution with bias, then the ReLU.

What is frozen: the graph inputs Dynamo marks as a module's parameters or buffers (nn.Parameter,
or a source in `_buffers`) that the graph does not mutate. The compiled graph still takes them
(the calling convention does not change); each call checks that every frozen input is still the
tensor it was, at the same version (`torch.Tensor._version`, which every in-place write bumps),
and raises `FrozenInputChanged`, naming the parameter, when one is not. Training graphs are
never frozen (their weights change at every step); explain() notes what was frozen and folded.

Frozen graphs are not stored in the graph caches: their constants are the model's weights.
"""
from __future__ import annotations

import dataclasses

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily

from ..errors import FrozenInputChanged

aten = torch.ops.aten
BINARY_FOLDS = {aten.mul.Tensor, aten.add.Tensor, aten.sub.Tensor}
COMMUTATIVE = {aten.mul.Tensor, aten.add.Tensor}


@dataclasses.dataclass
class FrozenInputs:
    """The inputs a graph froze: their positions, sources, tensors and versions at compile time."""

    positions: list[int]
    names: list[str]
    tensors: list[torch.Tensor]
    versions: list[int]
    graph: str = ""

    def __post_init__(self):
        self._first_change = _change_finder(self.positions, self.tensors, self.versions)

    def check(self, args) -> None:
        """Raise FrozenInputChanged if a frozen input was written (its version moved) or its
        memory is another (a replaced tensor, or `.data` swapped)."""
        changed = self._first_change(args)
        if changed is not None:
            raise FrozenInputChanged(
                f"tritonize: {self.names[changed]} changed after {self.graph} froze it (options freeze=True: "
                f"the weights and buffers of a frozen model must not change; a buffer the model itself "
                f"writes in another graph, after a graph break, cannot be frozen). Compile the model "
                f"again (torch._dynamo.reset() first), or compile without freeze.")


def _change_finder(positions, tensors, versions):
    """A generated function: args -> the index of the first frozen input that changed, or None.
    One straight-line test per tensor (two attribute reads): the per-call cost of the contract.
    An inference-mode tensor has no version counter: only its memory is compared."""
    pointers = [t.data_ptr() for t in tensors]
    lines = ["def first_change(args):"]
    lines += [f"    if {'' if v is None else f'args[{p}]._version != {v} or '}args[{p}].data_ptr() != {ptr}:\n"
              f"        return {k}" for k, (p, v, ptr) in enumerate(zip(positions, versions, pointers))]
    lines.append("    return None")
    namespace: dict = {}
    exec(compile("\n".join(lines) + "\n", "<tritonize frozen inputs>", "exec"), namespace)
    return namespace["first_change"]


def frozen_candidates(gm: torch.fx.GraphModule, example_inputs) -> dict[int, tuple]:
    """{input position: (source name, tensor, Dynamo source or None)} of the Dynamo graph's
    parameter and buffer inputs."""
    found = {}
    placeholders = list(gm.graph.find_nodes(op="placeholder"))
    for position, (node, example) in enumerate(zip(placeholders, example_inputs)):
        grapharg = node.meta.get("grapharg")
        source = grapharg.source if grapharg is not None else None
        name = source.name if source is not None else node.name
        name = name() if callable(name) else name
        if isinstance(example, torch.nn.Parameter) or (isinstance(example, torch.Tensor) and "_buffers[" in name):
            found[position] = (name, example, source)
    return found


def _guard_identities(candidates: dict, positions: list[int]) -> None:
    """Dynamo guards each frozen tensor's identity (ID_MATCH on its source): with nn modules
    inlined, parameters are plain graph inputs, so without it one graph would serve another
    instance of the module class (a block compiled per layer) with the first one's weights
    frozen in; with it, Dynamo compiles again for the other instance."""
    context = torch._guards.TracingContext.try_get()
    if context is None:
        return
    from torch._dynamo.guards import GuardBuilder

    for position in positions:
        source = candidates[position][2]
        if source is not None:
            context.guards_context.dynamo_guards.add(source.make_guard(GuardBuilder.ID_MATCH))


@dataclasses.dataclass
class FreezeResult:
    frozen: FrozenInputs | None
    note: str


def freeze_graph(gm: torch.fx.GraphModule, candidates: dict, inputs: int, graph: str,
                 channels_last: bool = False) -> FreezeResult:
    """Rewrite an inference aten graph in place: the candidates' uses ({position: (source,
    tensor)}, from frozen_candidates) read constants, folded as far as they go. `inputs`: how
    many inputs the Dynamo graph had. Inputs the graph mutates are left as inputs.
    channels_last (the graph's convolutions run NHWC, lower/conv_layout.py): constant 4-D
    convolution weights are stored NHWC once, so that no call converts them."""
    placeholders = list(gm.graph.find_nodes(op="placeholder"))
    if len(placeholders) != inputs:  # AOTAutograd changed the inputs (synthetic bases)
        return FreezeResult(None, "freeze: not applied (the traced graph's inputs differ from Dynamo's)")
    mutated = _mutated_inputs()
    positions = [p for p in sorted(candidates) if p not in mutated and _matches(placeholders[p], candidates[p][1])]
    if not positions:
        return FreezeResult(None, "freeze: no parameter or buffer inputs to freeze")
    _guard_identities(candidates, positions)
    constants = {}
    for position in positions:
        tensor = candidates[position][1]
        constants[_make_constant(gm, placeholders[position], tensor)] = tensor
    with unset_fake_temporarily(), torch.no_grad():
        folded = _fold_constants(gm, constants)
        convolutions = _fold_into_convolutions(gm, constants)
        converted = _weights_channels_last(gm, constants) if channels_last else 0
    _fresh_outputs(gm)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    tensors = [candidates[p][1] for p in positions]
    versions = [None if t.is_inference() else t._version for t in tensors]
    frozen = FrozenInputs(positions, [candidates[p][0] for p in positions], tensors, versions, graph)
    unversioned = versions.count(None)
    note = (f"freeze: {len(positions)} parameter and buffer inputs frozen, {folded} operations computed "
            f"once at compile time, {convolutions} folded into convolutions"
            + (f", {converted} convolution weights stored channels-last" if converted else "")
            + (f"; {unversioned} are inference-mode tensors, whose in-place writes cannot be detected"
               if unversioned else ""))
    return FreezeResult(frozen, note)


def _fresh_outputs(gm: torch.fx.GraphModule) -> None:
    """A graph output that became a folded constant is returned as a copy: eager returns a new
    tensor at every call, and a caller writing into it must not change the constant the next
    call returns. (A frozen input returned as it is stays an alias of the input: AOTAutograd
    returns the input itself.)"""
    output = gm.graph.output_node()
    folded = {n for n in output.all_input_nodes if n.op == "get_attr" and n.target.startswith("_folded_")}
    for node in folded:
        with gm.graph.inserting_before(output):
            copy = gm.graph.call_function(aten.clone.default, (node,))
        copy.meta.update(node.meta)
        output.replace_input_with(node, copy)


def _mutated_inputs() -> set[int]:
    """Positions of inputs the graph writes (AOTAutograd's metadata of the graph it traces)."""
    context = torch._guards.TracingContext.try_get()
    metadata = getattr(context, "fw_metadata", None) if context is not None else None
    if metadata is None:
        return set()
    return {i for i, info in enumerate(metadata.input_info) if info.mutates_data or info.mutates_metadata}


def _matches(node: torch.fx.Node, real) -> bool:
    fake = node.meta.get("val")
    return (isinstance(real, torch.Tensor) and isinstance(fake, torch.Tensor) and fake.dtype == real.dtype
            and tuple(fake.shape) == tuple(real.shape) and tuple(fake.stride()) == tuple(real.stride())
            and fake.device == real.device)


def _make_constant(gm: torch.fx.GraphModule, node: torch.fx.Node, tensor: torch.Tensor) -> torch.fx.Node:
    """A get_attr node holding `tensor` that takes over `node`'s uses (the placeholder stays)."""
    constant = _new_constant(gm, f"_frozen_{node.name}", tensor, _last_placeholder(gm).next)
    constant.meta.update(node.meta)
    node.replace_all_uses_with(constant)
    return constant


def _new_constant(gm: torch.fx.GraphModule, base: str, value: torch.Tensor, before: torch.fx.Node) -> torch.fx.Node:
    """A buffer of gm holding `value` (a fresh name from `base`) and its get_attr node, before `before`."""
    name = _attribute_name(gm, base)
    gm.register_buffer(name, value, persistent=False)
    with gm.graph.inserting_before(before):
        return gm.graph.get_attr(name)


def _last_placeholder(gm) -> torch.fx.Node:
    return list(gm.graph.find_nodes(op="placeholder"))[-1]


def _attribute_name(gm, base: str) -> str:
    name, k = base, 0
    while hasattr(gm, name):
        k += 1
        name = f"{base}_{k}"
    return name


# --- constant folding ----------------------------------------------------------------------------
def _fold_constants(gm: torch.fx.GraphModule, constants: dict) -> int:
    """Compute each call of constant tensor arguments alone once; its result becomes a constant."""
    folded = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or not _foldable(node, constants):
            continue
        args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: constants[n])
        value = node.target(*args, **kwargs)
        if not isinstance(value, torch.Tensor) or value.numel() > max(_numels(node, constants), default=0):
            continue  # a tuple, or a result larger than its inputs (an expand kept as a view)
        constant = _make_folded(gm, node, value)  # a view stays a view of the weight (no copy)
        constants[constant] = getattr(gm, constant.target)
        folded += 1
    return folded


def _foldable(node: torch.fx.Node, constants: dict) -> bool:
    target = node.target
    if not isinstance(target, torch._ops.OpOverload) or target._schema.is_mutable:
        return False
    if torch.Tag.nondeterministic_seeded in target.tags or target.namespace != "aten":
        return False
    inputs = node.all_input_nodes
    return bool(inputs) and all(n in constants for n in inputs)


def _numels(node, constants) -> list[int]:
    return [constants[n].numel() for n in node.all_input_nodes]


def _make_folded(gm, node: torch.fx.Node, value: torch.Tensor) -> torch.fx.Node:
    constant = _new_constant(gm, f"_folded_{node.name}", value, node)
    constant.meta.update(node.meta)
    node.replace_all_uses_with(constant)
    gm.graph.erase_node(node)
    return constant


# --- folding into convolutions ---------------------------------------------------------------------
def _fold_into_convolutions(gm: torch.fx.GraphModule, constants: dict) -> int:
    """conv(x, W, b) then per-channel products and sums -> conv(x, W', b') (module doc)."""
    folded = 0
    for conv in list(gm.graph.find_nodes(op="call_function", target=aten.convolution.default)):
        folded += _fold_chain(gm, conv, constants)
    return folded


def _fold_chain(gm, conv: torch.fx.Node, constants: dict) -> int:
    """Fold the longest chain after `conv` of single-user steps: an optional conversion to a
    wider float type (explicit, or by a step's promotion to a wider constant's type), products
    and sums by per-channel constants, and (once widened) the conversion back to the
    convolution's dtype. The chain y = conv * a + c is accumulated in
    float32 or wider and rounded into the weight and bias once. Returns the steps folded."""
    x, weight, bias, stride, padding, dilation, transposed, output_padding, groups = conv.args
    if transposed or weight not in constants or (bias is not None and bias not in constants):
        return 0
    dtype = conv.meta["val"].dtype
    scale = shift = None  # per output channel, in the chain's wide type
    steps, last, node, widened, folded = [], None, conv, False, (None, None)
    while len(node.users) == 1:
        user = next(iter(node.users))
        wide = _conversion_to(user)
        if wide is not None and not widened and not steps and wide.is_floating_point and wide.itemsize > dtype.itemsize:
            widened, node = True, user
            steps.append(user)
            continue
        if wide is not None and widened and wide == dtype:  # back to the convolution's dtype: the end
            steps.append(user)
            last, folded = user, (scale, shift)
            break
        channel = _binary_step(user, node, constants, conv)
        if channel is None:
            break
        out = user.meta["val"].dtype
        if out != node.meta["val"].dtype:  # a wider constant promotes the chain (bf16 conv - f32 mean)
            if widened or not (out.is_floating_point and out.itemsize > dtype.itemsize):
                break
            widened = True
        scale, shift = _compose(user.target, scale, shift, channel.double())
        steps.append(user)
        node = user
        if not widened:  # the chain may end here (a widened one only where it narrows again)
            last, folded = user, (scale, shift)
    if last is None:
        return 0
    steps = steps[:steps.index(last) + 1]
    new_weight, new_bias = _folded_parameters(constants[weight], constants[bias] if bias is not None else None,
                                              *folded)
    if not _finite_like(new_weight, constants[weight]) or (new_bias is not None and not bool(new_bias.isfinite().all())):
        return 0  # the folded weight or bias overflows its dtype (fp16): the chain stays as it is
    conv.args = (x, _constant_node(gm, conv, new_weight, constants, "weight"),
                 _constant_node(gm, conv, new_bias, constants, "bias"), stride, padding, dilation, transposed,
                 output_padding, groups)
    last.replace_all_uses_with(conv)
    for step in reversed(steps):
        gm.graph.erase_node(step)
    return len([s for s in steps if _conversion_to(s) is None])


def _weights_channels_last(gm, constants: dict) -> int:
    """Store each constant 4-D convolution weight in channels-last order (cuDNN's NHWC kernels
    would otherwise convert it at every call)."""
    converted = 0
    for conv in gm.graph.find_nodes(op="call_function", target=aten.convolution.default):
        weight = conv.args[1]
        value = constants.get(weight)
        if value is None or value.dim() != 4 or value.is_contiguous(memory_format=torch.channels_last):
            continue
        args = list(conv.args)
        args[1] = _constant_node(gm, conv, value.contiguous(memory_format=torch.channels_last), constants, "weight")
        conv.args = tuple(args)
        converted += 1
    return converted


def _finite_like(folded: torch.Tensor, original: torch.Tensor) -> bool:
    """No value became infinite or NaN by folding (where the original was finite)."""
    return bool((folded.isfinite() | ~original.isfinite()).all())


def _conversion_to(node: torch.fx.Node):
    """The dtype a pure dtype conversion converts to (`_to_copy(x, dtype=...)`,
    `convert_element_type(x, dtype)`), else None."""
    if node.op != "call_function":
        return None
    if node.target is aten._to_copy.default and set(node.kwargs) == {"dtype"} and len(node.args) == 1:
        return node.kwargs["dtype"]
    if node.target is torch.ops.prims.convert_element_type.default and len(node.args) == 2:
        return node.args[1]
    return None


def _binary_step(user: torch.fx.Node, node: torch.fx.Node, constants: dict, conv: torch.fx.Node):
    """The per-channel constant of `node op constant` (mul, add, sub; mul and add either way
    round), or None."""
    if user.op != "call_function" or user.target not in BINARY_FOLDS or user.kwargs or len(user.args) != 2:
        return None
    if user.args[0] is node:
        other = user.args[1]
    elif user.args[1] is node and user.target in COMMUTATIVE:
        other = user.args[0]
    else:
        return None
    if not _constant_operand(other, constants):
        return None
    return _per_channel(other, constants, conv)


def _compose(target, scale, shift, channel):
    """(a, c) of y * a + c after one more step `op channel`."""
    if target is aten.mul.Tensor:
        return (channel if scale is None else scale * channel), (None if shift is None else shift * channel)
    sign = 1 if target is aten.add.Tensor else -1
    return scale, (sign * channel if shift is None else shift + sign * channel)


def _folded_parameters(weight, bias, scale, shift):
    """W' = W * a (per output channel), b' = b * a + c, computed wide and rounded once."""
    wide = torch.float64 if weight.device.type == "cpu" else torch.float32
    new_weight = weight.to(wide)
    new_bias = bias.to(wide) if bias is not None else None
    if scale is not None:
        new_weight = new_weight * scale.to(wide).reshape([-1] + [1] * (weight.dim() - 1))
        new_bias = new_bias * scale.to(wide) if new_bias is not None else None
    if shift is not None:
        new_bias = shift.to(wide) if new_bias is None else new_bias + shift.to(wide)
    return new_weight.to(weight.dtype), (new_bias.to(weight.dtype) if new_bias is not None else None)


def _constant_operand(operand, constants) -> bool:
    return (isinstance(operand, torch.fx.Node) and operand in constants) or isinstance(operand, (int, float))


def _per_channel(operand, constants, conv: torch.fx.Node) -> torch.Tensor | None:
    """The operand as C values along the convolution's output channels, or None if it varies
    along another dim (or broadcasts the result to a larger shape)."""
    out = conv.meta["val"]
    channels = out.shape[1]
    if isinstance(operand, (int, float)):  # a Python number: exact (float64), never the conv's dtype
        return torch.full((channels,), operand, dtype=torch.float64, device=out.device)
    value = constants[operand]
    if value.dim() > out.dim():
        return None
    shape = [1] * (out.dim() - value.dim()) + list(value.shape)
    if any(s != 1 for k, s in enumerate(shape) if k != 1) or shape[1] not in (1, channels):
        return None  # varies along another dim, or broadcasts the result to more channels
    return value.reshape(shape).expand(*([1, channels] + [1] * (out.dim() - 2))).reshape(channels)


def _constant_node(gm, conv, value, constants, role: str):
    if value is None:
        return None
    node = _new_constant(gm, f"_folded_{conv.name}_{role}", value, conv)
    node.meta["val"] = conv.meta["val"].fake_mode.from_tensor(value, static_shapes=True)  # a constant: no symbols
    constants[node] = value
    return node

