"""What torch's aot_compile does not save and tritonize checks instead (caching/precompiled_checks.py):
identity guards re-checked before every call, globals the generated code loads rebuilt in a
fresh process, and the traced sources compared at load."""
import collections
import enum
import functools
import importlib
import json
import os
import pathlib
import subprocess
import sys
import types

import pytest
import torch

import precompile_models
import tritonize
from tritonize.caching import precompiled, precompiled_checks as checks
from helpers import assert_same
from precompile_models import Block, build, keeps_dtype

TESTS = str(pathlib.Path(__file__).resolve().parent)
SRC = str(pathlib.Path(__file__).resolve().parents[1] / "src")

pytestmark = pytest.mark.skipif(not hasattr(torch._dynamo, "aot_compile"), reason="torch has no aot_compile")


def precompiled_decorated(tmp_path, device):
    model, x = build("decorated", device)
    path = tmp_path / "decorated.tritonize"
    with torch.no_grad():
        tritonize.precompile(model, (x,), path)
    return tritonize.load_precompiled(path, model), model, x


# ----------------------------------------------------------------------------- identity guards


def test_a_replaced_activation_fails_the_call_naming_it(tmp_path, cache, device):
    fn, model, x = precompiled_decorated(tmp_path, device)
    with torch.no_grad():
        assert_same(fn(x), model(x))
        model.act = torch.relu
        with pytest.raises(RuntimeError, match="guard check failed: module.act is the builtin .*relu, it was the "
                                               "builtin torch._C._nn.gelu when precompiled"):
            fn(x)
        model.act = torch.nn.functional.gelu
        assert_same(fn(x), model(x))


def test_a_replaced_decorated_method_fails_the_call(tmp_path, cache, device, monkeypatch):
    fn, model, x = precompiled_decorated(tmp_path, device)

    def doubled(self, x):
        return 2 * self.act(self.inner(x))

    monkeypatch.setattr(type(model), "forward", keeps_dtype(doubled))
    with torch.no_grad(), pytest.raises(RuntimeError, match="guard check failed: .*\\['forward'\\].__closure__.* is "
                                                            "the function .*doubled"):
        fn(x)


class Mode(enum.Enum):
    RELU = 1
    TANH = 2


def test_fingerprints_name_code_functions_builtins_and_classes():
    def first(x):
        return x + 1

    def second(x):
        return x + 1

    assert checks.fingerprint(first)[:3] == ["function", __name__, first.__qualname__]
    assert checks.fingerprint(first) != checks.fingerprint(second)  # same body, other name and line
    assert checks.fingerprint(first.__code__)[0] == "code"
    assert checks.fingerprint(torch.nn.functional.gelu) == ["builtin", "torch._C._nn", "gelu"]
    assert checks.fingerprint(Block) == ["class", "precompile_models", "Block"]
    assert checks.fingerprint(torch.zeros(1)) is None and checks.fingerprint(3) is None
    assert checks.fingerprint([1.0].__getitem__) is None  # bound to an instance: no name
    assert checks.fingerprint(Mode.TANH) == ["enum", __name__, "Mode", "TANH"]
    assert checks.fingerprint(torch.Tensor.relu)[0] == "descriptor"
    assert checks.fingerprint(None) == ["none"] and checks.fingerprint(torch.nn)[0] == "module"


def test_two_lambdas_on_one_line_differ():
    """Same name, file and line: the constants and the rest of the code tell them apart."""
    doubles, triples = [lambda x: x * 2, lambda x: x * 3]
    assert checks.fingerprint(doubles) != checks.fingerprint(triples)
    nested = [lambda: (lambda y: y + 1), lambda: (lambda y: y + 2)]
    assert checks.fingerprint(nested[0]) != checks.fingerprint(nested[1])


Entry = collections.namedtuple("Entry", "name has_value value guard_type derived_guard_types is_global")


def test_the_guard_recorder_replaces_local_identity_guards_and_keeps_the_rest_for_torch_to_refuse():
    entries = [
        Entry("G['flag']", True, True, "CONSTANT_MATCH", (), True),  # global: dropped (torch's default)
        Entry("x", True, torch.zeros(1), "TENSOR_MATCH", (), False),  # kept
        Entry("m.act", True, torch.relu, "BUILTIN_MATCH", ("ID_MATCH",), False),  # recorded
        Entry("m.__class__", True, Block, "CLASS_MATCH", ("ID_MATCH",), False),  # recorded
        Entry("m.mode", True, Mode.RELU, "ID_MATCH", ("ID_MATCH",), False),  # recorded
        Entry("m.table", True, {}, "DICT_VERSION", (), False),  # no name: kept, so torch refuses to save it
    ]
    recorder = checks.GuardRecorder()
    assert recorder(entries) == [False, True, False, False, False, True]
    assert recorder.checks == {"m.act": checks.fingerprint(torch.relu), "m.__class__": ["class", "precompile_models",
                                                                                       "Block"],
                               "m.mode": ["enum", __name__, "Mode", "RELU"]}
    drop_act = checks.GuardRecorder(lambda entries: [e.name != "m.act" for e in entries])
    assert drop_act(entries) == [True, True, False, False, False, True]
    assert list(drop_act.checks) == ["m.__class__", "m.mode"]  # the user dropped m.act on purpose


def test_identity_checks_remember_the_last_object_that_matched():
    identity = checks.IdentityChecks({"L['m'].act": checks.fingerprint(torch.relu)})
    module = types.SimpleNamespace(act=torch.relu)
    identity.verify({"m": module})
    assert identity.last_matched == [(torch.relu, torch.relu)]
    assert identity.mismatches({"m": types.SimpleNamespace(act=torch.tanh)}) == ["m.act"]
    with pytest.raises(RuntimeError, match="guard check failed: m.act is the builtin torch._VariableFunctionsClass"
                                           ".tanh, it was the builtin torch._VariableFunctionsClass.relu"):
        identity.verify({"m": types.SimpleNamespace(act=torch.tanh)})
    with pytest.raises(RuntimeError, match="evaluating the identity checks raised AttributeError"):
        identity.verify({"m": object()})


def test_arguments_named_like_builtins_do_not_shadow_them():
    identity = checks.IdentityChecks({"type(L['dict']).forward": checks.fingerprint(Block.forward)})
    identity.verify({"dict": Block(4), "type": None})


def test_class_attribute_lookups_are_evaluated_without_copying_the_class_namespace():
    expression = "dict(type(L['m']).__dict__)['forward']"  # as Dynamo writes it
    identity = checks.IdentityChecks({expression: checks.fingerprint(Block.forward)})
    assert "dict" not in identity.code.co_names
    model = Block(4)
    assert identity.values({"m": model}) == (Block.forward,)
    identity.verify({"m": model})


# ----------------------------------------------------------------------------- globals, sources


LOAD_SCRIPT = """
import json, sys
path, tests = sys.argv[1:3]
sys.path.insert(0, tests)
import torch, tritonize
fn = tritonize.load_precompiled(path)
out = fn(torch.arange(6.0))
print("RESULT " + json.dumps({"type": type(out).__name__, "values": {k: v.tolist() for k, v in out.items()}}))
"""


def test_a_module_dynamo_installs_as_a_global_is_imported_in_a_fresh_process(tmp_path, cache):
    """An OrderedDict output is rebuilt by bytecode that loads the collections module: a global
    torch does not restore without f_globals."""
    import precompile_models

    path = tmp_path / "ordered.tritonize"
    compiled = tritonize.precompile(precompile_models.ordered_outputs, (torch.arange(6.0),), path)
    assert {"module", "collections"} <= {part for recipe in compiled.header["globals"].values() for part in recipe}
    env = dict(os.environ, PYTHONPATH=SRC, TRITONIZE_CACHE_DIR=str(tmp_path / "fresh"))
    result = subprocess.run([sys.executable, "-c", LOAD_SCRIPT, str(path), TESTS], capture_output=True, text=True,
                            timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    loaded = json.loads(next(line for line in result.stdout.splitlines() if line.startswith("RESULT "))[7:])
    expected = precompile_models.ordered_outputs(torch.arange(6.0))
    assert loaded["type"] == "OrderedDict" and list(loaded["values"]) == list(expected)
    for name, value in expected.items():
        assert_same(torch.tensor(loaded["values"][name]), value)


def test_a_changed_module_constant_refuses_the_artifact(tmp_path, cache, monkeypatch):
    """The graph bakes in SCALE: a change anywhere in a traced module's file refuses the file."""
    source = tmp_path / "scaled_module.py"
    original = "import torch\n\nSCALE = 2.0\n\n\ndef scaled(x):\n    return x.sin() * SCALE\n"
    source.write_text(original)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("scaled_module")
    path = tmp_path / "scaled.tritonize"
    x = torch.randn(8)
    tritonize.precompile(module.scaled, (x,), path)
    source.write_text(original.replace("SCALE = 2.0", "SCALE = 3.0"))
    with pytest.raises(tritonize.PrecompiledArtifactError, match="the source of scaled_module \\(.*scaled_module.py\\) "
                                                                 "changed since it was precompiled"):
        tritonize.load_precompiled(path)
    source.write_text(original)
    assert_same(tritonize.load_precompiled(path)(x), x.sin() * 2)


SCRIPT = """
import sys, torch, tritonize

def scaled(x):
    return x.cos() * 3

if sys.argv[1] == "save":
    tritonize.precompile(scaled, (torch.arange(4.0),), sys.argv[2])
"""

LOAD_FROM_ANOTHER_SCRIPT = """
import sys, torch, tritonize
print("RESULT", tritonize.load_precompiled(sys.argv[1])(torch.arange(4.0)).tolist())
"""


def test_a_function_of_a_script_loads_from_another_script_until_the_script_changes(tmp_path, cache):
    """A script's functions are `__main__` in the saving process and something else in the
    loading one: their source is checked in the script file recorded at save."""
    script, path = tmp_path / "save_script.py", tmp_path / "script.tritonize"
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=SRC, TRITONIZE_CACHE_DIR=str(tmp_path / "cache"))
    run = functools.partial(subprocess.run, capture_output=True, text=True, timeout=300, env=env)
    saved = run([sys.executable, str(script), "save", str(path)])
    assert saved.returncode == 0, saved.stderr[-3000:]
    loaded = run([sys.executable, "-c", LOAD_FROM_ANOTHER_SCRIPT, str(path)])
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    result = next(line for line in loaded.stdout.splitlines() if line.startswith("RESULT"))
    assert_same(torch.tensor(json.loads(result[len("RESULT "):])), torch.arange(4.0).cos() * 3)
    script.write_text(SCRIPT.replace("* 3", "* 4"))
    refused = run([sys.executable, "-c", LOAD_FROM_ANOTHER_SCRIPT, str(path)])
    assert refused.returncode != 0 and "the source of __main__" in refused.stderr, refused.stderr[-3000:]


input = torch.full((8,), 3.0)  # noqa: A001 (a global named like a builtin, read by the graph)


def times_input(x):
    return x * input


def test_a_global_named_like_a_builtin_keeps_its_value(tmp_path, cache):
    path = tmp_path / "input.tritonize"
    x = torch.randn(8)
    tritonize.precompile(times_input, (x,), path)
    assert_same(tritonize.load_precompiled(path)(x), x * 3)


# ----------------------------------------------------------------------------- what gets swapped


def test_code_replaced_in_place_fails_even_after_a_call(tmp_path, cache, device, monkeypatch):
    """The checks remember the function that matched, and its code object."""
    fn, model, x = precompiled_decorated(tmp_path, device)
    inner = type(model).forward.__closure__[0].cell_contents

    def doubled(self, x):
        return 2 * self.act(self.inner(x))

    with torch.no_grad():
        fn(x)
        monkeypatch.setattr(inner, "__code__", doubled.__code__)
        with pytest.raises(RuntimeError, match="guard check failed: .*__closure__.* is the function "
                                               ".*Decorated.forward \\(test_precompile_checks.py"):
            fn(x)


def test_a_replaced_forward_fails_the_call(tmp_path, cache, device, monkeypatch):
    """Dynamo does not guard the forward that the module call ran: tritonize checks it, on the
    class and on the instance."""
    model, x = build("transformer_block", device)
    with torch.no_grad():
        fn = tritonize.precompile(model, (x,))

        def patched(self, x):
            return x

        monkeypatch.setattr(Block, "forward", patched)
        with pytest.raises(RuntimeError, match="guard check failed: type\\(module\\).forward is the function "
                                               ".*patched"):
            fn(x)
        monkeypatch.undo()
        model.forward = types.MethodType(patched, model)
        with pytest.raises(RuntimeError, match="guard check failed: module.__dict__.get\\('forward'\\) is a method"):
            fn(x)
        del model.forward
        assert_same(fn(x), model(x))


class Switch(torch.nn.Module):
    """An enum member chooses the branch; the lambda is the activation."""

    def __init__(self):
        super().__init__()
        self.mode, self.act = Mode.RELU, ACTIVATIONS[0]

    def forward(self, x):
        y = self.act(x)
        return y.relu() if self.mode is Mode.RELU else y.tanh()


ACTIVATIONS = [lambda x: x * 2, lambda x: x * 3]


def test_a_swapped_enum_or_lambda_fails_the_call(cache, device):
    model, x = Switch(), torch.randn(8, device=device)
    fn = tritonize.precompile(model, (x,))
    assert_same(fn(x), model(x))
    model.mode = Mode.TANH
    with pytest.raises(RuntimeError, match="guard check failed: module.mode is the enum .*Mode \\(TANH\\)"):
        fn(x)
    model.mode, model.act = Mode.RELU, ACTIVATIONS[1]
    with pytest.raises(RuntimeError, match="guard check failed: module.act is the function .*<lambda>"):
        fn(x)
    model.act = ACTIVATIONS[0]
    assert_same(fn(x), model(x))


def test_global_module_hooks_are_refused_and_fail_the_call(tmp_path, cache, device):
    model, x = build("mlp", device)
    handle = torch.nn.modules.module.register_module_forward_hook(lambda module, inputs, out: out * 2)
    try:
        with pytest.raises(tritonize.CompileError, match="global module hooks are registered \\(forward_hooks\\)"):
            tritonize.precompile(model, (x,))
    finally:
        handle.remove()
    with torch.no_grad():
        fn = tritonize.precompile(model, (x,))
        handle = torch.nn.modules.module.register_module_forward_hook(lambda module, inputs, out: out * 2)
        try:
            with pytest.raises(RuntimeError, match="global module hooks are registered \\(forward_hooks\\)"):
                fn(x)
        finally:
            handle.remove()
        assert_same(fn(x), model(x))


def test_a_module_is_precompiled_with_its_hooks(tmp_path, cache, device):
    """A module's precompile traces a call of the module: its forward hooks are in the graph."""
    model, x = build("mlp", device)
    model.register_forward_hook(lambda module, inputs, out: out * 2 + 1)
    path = tmp_path / "hooked.tritonize"
    with torch.no_grad():
        expected = model(x)
        assert_same(tritonize.precompile(model, (x,), path)(x), expected)
        assert_same(tritonize.load_precompiled(path, model)(x), expected)


# ----------------------------------------------------------------------------- module globals, submodules


CONFIG = "SCALE = 2.0\n"
USER = """import torch
import scale_config
from scale_config import SCALE as IMPORTED


def through_module(x):
    return x.sin() * scale_config.SCALE


def imported(x):
    return x.cos() * IMPORTED
"""


def test_constants_read_from_other_modules_are_checked_before_every_call(tmp_path, cache, monkeypatch):
    (tmp_path / "scale_config.py").write_text(CONFIG)
    (tmp_path / "scale_user.py").write_text(USER)
    monkeypatch.syspath_prepend(str(tmp_path))
    config, user = importlib.import_module("scale_config"), importlib.import_module("scale_user")
    x = torch.randn(8)
    through_module = tritonize.precompile(user.through_module, (x,), tmp_path / "through.tritonize")
    imported = tritonize.precompile(user.imported, (x,))
    assert_same(through_module(x), x.sin() * 2) and assert_same(imported(x), x.cos() * 2)
    monkeypatch.setattr(config, "SCALE", 3.0)
    with pytest.raises(RuntimeError, match="guard check failed: .*SCALE is 3.0, it was 2.0 when precompiled"):
        through_module(x)
    assert_same(imported(x), user.imported(x))  # its own global IMPORTED is still 2.0
    monkeypatch.setattr(user, "IMPORTED", 3)
    with pytest.raises(RuntimeError, match="guard check failed: G\\['IMPORTED'\\] is 3, it was 2.0"):
        imported(x)
    monkeypatch.undo()
    (tmp_path / "scale_config.py").write_text("SCALE = 4.0\n")  # the module it read is checked at load
    with pytest.raises(tritonize.PrecompiledArtifactError, match="the source of scale_config .* changed"):
        tritonize.load_precompiled(tmp_path / "through.tritonize")


def test_a_patched_submodule_forward_fails_the_call(tmp_path, cache, device, monkeypatch):
    """Dynamo guards a submodule by its type only: tritonize checks each submodule class's forward."""
    fn, model, x = precompiled_decorated(tmp_path, device)
    monkeypatch.setattr(precompile_models.Attention, "forward", lambda self, x: x * 0)
    with torch.no_grad(), pytest.raises(RuntimeError, match="guard check failed: type\\(module._modules\\['inner'\\]"
                                                            "._modules\\['attn'\\]\\).forward is the function"):
        fn(x)


class CallableForward:
    """Not a descriptor: module.forward(x) calls it with x alone."""

    def __call__(self, x):
        return x * 2


class WithCallableForward(torch.nn.Module):
    forward = CallableForward()


def test_a_forward_that_cannot_be_checked_or_is_set_on_the_instance_is_refused(cache):
    x = torch.randn(4)
    with pytest.raises(tritonize.CompileError, match="WithCallableForward.forward is a CallableForward, not a "
                                                     "function"):
        tritonize.precompile(WithCallableForward(), (x,))
    model = Block(4)
    model.forward = types.MethodType(lambda self, x: x * 2, model)
    with pytest.raises(tritonize.CompileError, match="Block's forward is replaced on the instance"):
        tritonize.precompile(model, (torch.randn(2, 3, 4),))


def test_a_header_without_its_checks_or_a_module_gone_is_a_clear_error(tmp_path, cache):
    from tritonize.runtime import disk_cache

    path = tmp_path / "bare.tritonize"
    header = {"format": precompiled.FUNCTION_FORMAT, "identity": {}}
    path.write_bytes(disk_cache.frame(json.dumps(header).encode() + b"\n"))
    with pytest.raises(tritonize.PrecompiledArtifactError, match="header without globals, global_constants, sources"):
        tritonize.load_precompiled(path)
    with pytest.raises(tritonize.PrecompiledArtifactError, match="the module no_such_module_here it was traced from "
                                                                 "cannot be imported"):
        checks.check_sources([["no_such_module_here", None, "0" * 64]])
