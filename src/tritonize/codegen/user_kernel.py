"""Wrapper lines for a UserKernelCall: bind each written argument's output, then launch.

    # user kernel add_kernel (node triton_kernel_wrapper_functional): writes out_ptr
    buf3 = buf1  # out_ptr: written in place
    buf4 = empty_strided(...); buf4.copy_(arg0_1)  # x_ptr: copy (arg0_1 is read later)
    CONSTANTS["user_kernel2"](x_ptr=buf4, y_ptr=arg1_1, out_ptr=buf3)

The launcher (user_kernels/launch.py, UserKernelLauncher) holds the kernel, its constant
arguments and grids; it goes into the wrapper's CONSTANTS because a kernel object has no source
form.
"""
from __future__ import annotations

from ..ir.nodes import TensorArg
from ..ir.sizes import is_symbolic
from ..ir.user_kernel import UserKernelCall
from ..user_kernels.launch import UserKernelLauncher
from .index_printer import print_index


def user_kernel_lines(writer, call: UserKernelCall) -> list[str]:
    written = ", ".join(o.arg_name for o in call.outputs) or "nothing"
    lines = [f"    # user kernel {call.kernel_name} (node {call.origin}): writes {written}"]
    launch_args = {}
    for name, value in call.args.items():
        if isinstance(value, TensorArg):
            launch_args[name] = writer.value_text(value)
    for out in call.outputs:
        source = launch_args[out.arg_name]
        target = out.buffer.name
        layout = out.buffer.layout
        if out.arg_name in call.in_place:
            lines.append(f"    {target} = {source}  # {out.arg_name}: written in place")
        else:
            lines.append(f"    {target} = {writer.allocation(layout)}; {target}.copy_({source})  "
                         f"# {out.arg_name}: copy ({call.clones.get(out.arg_name, 'not decided')})")
        launch_args[out.arg_name] = target
    constants = {k: v for k, v in call.args.items() if not isinstance(v, TensorArg) and not is_symbolic(v)}
    launch_args.update({k: print_index(v) for k, v in call.args.items() if is_symbolic(v)})  # sizes, per call
    launcher = UserKernelLauncher(call.kernel, constants, call.grids, call.tma_metadata)
    writer.constants[call.name] = launcher
    arg_text = ", ".join(f"{k}={v}" for k, v in launch_args.items())
    if any(is_symbolic(d) for grid in call.grids for d in grid):  # computed from the bound symbols
        grids = ", ".join("(" + "".join(f"{print_index(d)}, " for d in grid) + ")" for grid in call.grids)
        arg_text = f"_grids=[{grids}], " + arg_text
    lines.append(f'    CONSTANTS["{call.name}"]({arg_text})')
    return lines
