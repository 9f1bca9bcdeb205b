"""What torch's aot_compile does not save and tritonize checks instead (precompiled_checks.py):
identity guards re-checked before every call, globals the generated code loads rebuilt in a
fresh process, and the traced sources compared at load."""
import collections
import importlib
import json
import os
import pathlib
import subprocess
import sys
import types

import pytest
import torch

import tritonize
from tritonize import precompiled_checks as checks
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


Entry = collections.namedtuple("Entry", "name has_value value guard_type derived_guard_types is_global")


def test_the_guard_recorder_replaces_local_identity_guards_only():
    entries = [
        Entry("G['flag']", True, True, "CONSTANT_MATCH", (), True),  # global: dropped (torch's default)
        Entry("x", True, torch.zeros(1), "TENSOR_MATCH", (), False),  # kept
        Entry("m.act", True, torch.relu, "BUILTIN_MATCH", ("ID_MATCH",), False),  # recorded
        Entry("m.__class__", True, Block, "CLASS_MATCH", ("ID_MATCH",), False),  # recorded
        Entry("m.table", True, {}, "DICT_VERSION", (), False),  # dropped by torch's default, not recorded
    ]
    recorder = checks.GuardRecorder()
    assert recorder(entries) == [False, True, False, False, False]
    assert recorder.checks == {"m.act": checks.fingerprint(torch.relu), "m.__class__": ["class", "precompile_models",
                                                                                       "Block"]}
    keep_all = checks.GuardRecorder(lambda entries: [True] * len(entries))
    assert keep_all(entries) == [True, True, False, False, True]  # torch raises on the dict: not re-checkable
    drop_act = checks.GuardRecorder(lambda entries: [e.name != "m.act" for e in entries])
    drop_act(entries)
    assert list(drop_act.checks) == ["m.__class__"]  # the user dropped it on purpose


def test_identity_checks_remember_the_last_object_that_matched():
    identity = checks.IdentityChecks({"m.act": checks.fingerprint(torch.relu)})
    module = types.SimpleNamespace(act=torch.relu)
    identity.verify({"m": module})
    assert identity.last_matched == [torch.relu]
    assert identity.mismatches({"m": types.SimpleNamespace(act=torch.tanh)}) == ["m.act"]
    with pytest.raises(RuntimeError, match="evaluating the identity checks raised AttributeError"):
        identity.verify({"m": object()})


def test_class_attribute_lookups_are_evaluated_without_copying_the_class_namespace():
    expression = "dict(type(m).__dict__)['forward']"  # as Dynamo writes it
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


def test_a_changed_source_refuses_the_artifact(tmp_path, cache, monkeypatch):
    source = tmp_path / "scaled_module.py"
    source.write_text("import torch\n\n\ndef scaled(x):\n    return x.sin() * 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("scaled_module")
    path = tmp_path / "scaled.tritonize"
    x = torch.randn(8)
    tritonize.precompile(module.scaled, (x,), path)
    source.write_text("import torch\n\n\ndef scaled(x):\n    return x.sin() * 3.0\n")
    with pytest.raises(tritonize.PrecompiledArtifactError, match="the source of scaled_module \\(lines 4-6\\) changed "
                                                                 "since it was precompiled"):
        tritonize.load_precompiled(path)
    source.write_text("import torch\n\n\ndef scaled(x):\n    return x.sin() * 2\n")
    assert_same(tritonize.load_precompiled(path)(x), x.sin() * 2)


def test_a_module_is_precompiled_with_its_hooks(tmp_path, cache, device):
    """A module's precompile traces a call of the module: its forward hooks are in the graph."""
    model, x = build("mlp", device)
    model.register_forward_hook(lambda module, inputs, out: out * 2 + 1)
    path = tmp_path / "hooked.tritonize"
    with torch.no_grad():
        expected = model(x)
        assert_same(tritonize.precompile(model, (x,), path)(x), expected)
        assert_same(tritonize.load_precompiled(path, model)(x), expected)
