"""What torch's aot_compile cannot save about a traced function, and how tritonize keeps a
precompiled function (precompiled.py) safe without it.

**Identity guards.** Dynamo guards on the identity of the functions, classes and code objects it
traced through: the code of a decorated `forward`, the functions in a decorator's closure, a
submodule's class, a builtin activation function held by a module. An id() means nothing in
another process, so torch refuses to save these guards (PackageError), and transformers' models
have a dozen of them. `GuardRecorder` is the guard filter precompile gives torch: it takes such a
guard out of Dynamo's saved guards and records the guard's expression (Dynamo's, in terms of the
arguments: `L['model'].act`) with the fingerprint of the object it gave (`fingerprint`: kind,
module, qualified name; for code also file, line and a digest of everything it runs). A local
guard torch cannot save on an object without such a name is kept, so that torch refuses to save
it rather than drop it silently as its default filter does.
`IdentityChecks.verify` runs before every call of the loaded function: each expression must give
an object with the saved fingerprint (computed once per object: the last object that matched,
and for a function its code object, are remembered, so a steady caller pays one tuple evaluation
and two `is` per check). Replacing a submodule's class, an activation function or a method fails
the call with a RuntimeError naming the expression, as Dynamo's own guard failure does.

**Global module hooks.** Dynamo's guards on them are global, which aot_compile drops:
`registered_global_hooks` lets precompile refuse while any are registered and a call fail.

**Globals.** The bytecode Dynamo generates loads some globals torch does not restore: modules it
installs under generated names (`___module_collections_...`, to rebuild a transformers output)
and, on torch 2.11, builtins. `external_globals` records how to rebuild each (a builtin or a
module by name, an object by module and qualified name, checked to be the same object now);
`import_globals` rebuilds them at load.

**Sources.** torch records the functions Dynamo traced (module and lines) but does not check them
on load. `source_digests` hashes the whole source file of each of those modules at save
(module-level constants are baked into the graph as well) and `check_sources` compares them at
load: a library changed since the precompile refuses the artifact (PrecompiledArtifactError)
rather than running a graph traced from the old code.
"""
from __future__ import annotations

import ast
import builtins
import enum
import hashlib
import importlib
import inspect
import math
import os
import re
import types
from dataclasses import dataclass

import torch

from ..errors import PrecompiledArtifactError

# The guard kinds torch cannot save (CheckFunctionManager.UNSUPPORTED_SERIALIZATION_GUARD_TYPES in
# torch 2.11 and 2.13).
UNSAVEABLE = ("DICT_VERSION", "NN_MODULE", "ID_MATCH", "FUNCTION_MATCH", "CLASS_MATCH", "MODULE_MATCH",
              "CLOSURE_MATCH", "WEAKREF_ALIVE")


# ----------------------------------------------------------------------------- fingerprints


def fingerprint(value) -> list | None:
    """What identifies `value` across processes, or None for objects that have no such name."""
    if isinstance(value, types.CodeType):
        return ["code", getattr(value, "co_qualname", value.co_name), os.path.basename(value.co_filename),
                value.co_firstlineno, code_digest(value)]
    if isinstance(value, types.FunctionType):
        return ["function", value.__module__, value.__qualname__] + fingerprint(value.__code__)[2:]
    if isinstance(value, types.BuiltinFunctionType):
        return _builtin_fingerprint(value)
    if isinstance(value, (types.MethodDescriptorType, types.WrapperDescriptorType)):
        owner = value.__objclass__
        return ["descriptor", owner.__module__, owner.__qualname__, value.__name__]
    if isinstance(value, type):
        return ["class", value.__module__, value.__qualname__]
    if isinstance(value, enum.Enum):
        return ["enum", type(value).__module__, type(value).__qualname__, value.name]
    if isinstance(value, types.ModuleType):
        return ["module", value.__name__]
    if value is None:
        return ["none"]
    return None


def _builtin_fingerprint(value) -> list | None:
    """A builtin function is named by module and qualified name when it is not bound to an
    object (torch.relu; gelu from torch._C._nn; dict.fromkeys); bound to an instance, it is not
    identifiable ([1.0].__getitem__ and [2.0].__getitem__ share both)."""
    owner = value.__self__
    if owner is None or isinstance(owner, types.ModuleType):
        module = value.__module__ or getattr(owner, "__name__", None)
        return ["builtin", module, value.__qualname__]
    if isinstance(owner, type):
        return ["builtin", owner.__module__, value.__qualname__]
    return None


def code_digest(code: types.CodeType) -> str:
    """SHA-256 (16 hex digits) of everything a code object runs: bytecode, names, constants
    (nested code included), argument layout and flags. Two lambdas on one line differ."""
    digest = hashlib.sha256()
    _feed_code(digest, code)
    return digest.hexdigest()[:16]


def _feed_code(digest, code: types.CodeType) -> None:
    layout = (code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount, code.co_flags)
    for part in (code.co_code, code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars, layout):
        digest.update(repr(part).encode() + b";")
    for constant in code.co_consts:
        _feed_constant(digest, constant)


def _feed_constant(digest, constant) -> None:
    if isinstance(constant, types.CodeType):
        digest.update(b"code(")
        _feed_code(digest, constant)
        digest.update(b")")
    elif isinstance(constant, (tuple, frozenset)):
        items = sorted(constant, key=repr) if isinstance(constant, frozenset) else constant  # set order varies
        digest.update(type(constant).__name__.encode() + b"(")
        for item in items:
            _feed_constant(digest, item)
        digest.update(b")")
    else:
        digest.update(f"{type(constant).__name__}:{constant!r},".encode())


def _memo_key(value) -> tuple:
    """What must stay the same object for a check that passed to pass again: a function's code
    can be replaced in place."""
    if isinstance(value, types.FunctionType):
        return (value, value.__code__)
    return (value, value)


def _unsaveable(entry) -> bool:
    return entry.guard_type in UNSAVEABLE or any(kind in UNSAVEABLE for kind in entry.derived_guard_types)


def torch_default_filter(entries) -> list[bool]:
    """aot_compile's own default (torch 2.11 and 2.13): drop global guards and unsaveable kinds."""
    return [not (entry.is_global or entry.guard_type in UNSAVEABLE) for entry in entries]


def guard_expression(entry) -> str:
    """The guard's expression in Dynamo's own terms (`L['model'].act`: the arguments are read
    from the dict L, so an argument named like a builtin cannot shadow one)."""
    guard = getattr(entry, "orig_guard", None)
    return guard.name if guard is not None and isinstance(getattr(guard, "name", None), str) else entry.name


class GuardRecorder:
    """The guard filter precompile hands to torch.compile: `user_filter` (or torch's default)
    decides, except for local guards torch cannot save: one on a function, class, code object,
    builtin, enum member or module is dropped and recorded (`checks`, keyed by expression) to be
    re-checked by tritonize; any other is kept unless the user's filter drops it, so that torch
    refuses to save it (PackageError) rather than drop it silently as its default filter does.

    It also records what the dropped global guards were about: modules (`global_modules`, whose
    source files are then checked like the traced ones) and plain constants (`global_constants`,
    expression -> value, re-checked before every call), and the forward of every submodule class
    (Dynamo guards a submodule by type only)."""

    def __init__(self, user_filter=None):
        self.user_filter = user_filter
        self.checks: dict[str, list] = {}
        self.global_modules: set[str] = set()
        self.global_constants: dict[str, object] = {}
        self._module_classes: set[type] = set()

    def __call__(self, entries) -> list[bool]:
        keep = list((self.user_filter or torch_default_filter)(entries))
        for index, entry in enumerate(entries):
            if entry.is_global:
                self._note_global(entry)
                continue
            self._note_module_class(entry)
            if not _unsaveable(entry):
                continue
            if self.user_filter is not None and not keep[index]:
                continue  # the user dropped it on purpose
            identity = fingerprint(entry.value) if entry.has_value else None
            if identity is not None:
                self.checks[guard_expression(entry)] = identity
            keep[index] = identity is None
        return keep

    def _note_global(self, entry) -> None:
        if not entry.has_value:
            return
        if isinstance(entry.value, types.ModuleType):
            self.global_modules.add(entry.value.__name__)
        elif entry.guard_type in ("CONSTANT_MATCH", "EQUALS_MATCH") and _plain_constant(entry.value):
            self.global_constants[guard_expression(entry)] = entry.value

    def _note_module_class(self, entry) -> None:
        value = entry.value if entry.has_value else None
        if entry.guard_type != "TYPE_MATCH" or not isinstance(value, torch.nn.Module):
            return
        identity = fingerprint(type(value).forward)
        if identity is not None and type(value) not in self._module_classes:
            self._module_classes.add(type(value))
            self.checks[f"type({guard_expression(entry)}).forward"] = identity


def _plain_constant(value) -> bool:
    """A value that JSON stores and compares exactly (finite floats only)."""
    if type(value) is float:
        return math.isfinite(value)
    return type(value) in (bool, int, str, type(None))


# ----------------------------------------------------------------------------- checks at call time


@dataclass
class IdentityChecks:
    """The recorded identity guards, checked before each call (module docstring)."""
    checks: dict[str, list]

    def __post_init__(self):
        self.expressions = list(self.checks)
        self.expected = [self.checks[e] for e in self.expressions]
        tree = ast.parse("(" + "".join(f"({e}), " for e in self.expressions) + ")", mode="eval")
        tree = ast.fix_missing_locations(_NoDictCopies().visit(tree))
        self.code = compile(tree, "<tritonize identity checks>", "eval")
        self.last_matched: list[tuple | None] = [None] * len(self.expressions)

    def values(self, f_locals: dict) -> tuple:
        return eval(self.code, {"__builtins__": builtins, "L": f_locals})  # noqa: S307 (Dynamo's expressions)

    def verify(self, f_locals: dict) -> None:
        """Nothing when every expression gives the object saved; RuntimeError naming the first
        that does not."""
        try:
            values = self.values(f_locals)
        except Exception as err:
            raise RuntimeError(f"tritonize precompiled function: guard check failed: evaluating the identity "
                               f"checks raised {type(err).__name__}: {err}") from err
        for index, value in enumerate(values):
            key, last = _memo_key(value), self.last_matched[index]
            if last is not None and key[0] is last[0] and key[1] is last[1]:
                continue
            now = fingerprint(value)
            if now is None or now != self.expected[index]:
                raise RuntimeError(f"tritonize precompiled function: guard check failed: "
                                   f"{readable(self.expressions[index])} is {_describe(now, value)}, it was "
                                   f"{_describe(self.expected[index])} when precompiled: precompile it again")
            self.last_matched[index] = key

    def mismatches(self, f_locals: dict) -> list[str]:
        """The expressions that cannot be re-checked on these (the example) arguments: at save,
        a check that does not hold on the very arguments traced would refuse every call."""
        try:
            values = self.values(f_locals)
        except Exception as err:
            return [f"{type(err).__name__}: {err}"]
        return [readable(e) for e, v, saved in zip(self.expressions, values, self.expected) if fingerprint(v) != saved]


def readable(expression: str) -> str:
    """`L['model'].act` as `model.act`."""
    return re.sub(r"\bL\[['\"]([A-Za-z_][A-Za-z_0-9]*)['\"]\]", r"\1", expression)


class _NoDictCopies(ast.NodeTransformer):
    """Dynamo writes a class attribute lookup as `dict(cls.__dict__)['forward']`, which copies the
    class's namespace: `cls.__dict__['forward']` reads the same entry without the copy."""

    def visit_Call(self, node):
        self.generic_visit(node)
        if (isinstance(node.func, ast.Name) and node.func.id == "dict" and len(node.args) == 1 and not node.keywords
                and isinstance(node.args[0], ast.Attribute) and node.args[0].attr == "__dict__"):
            return node.args[0]
        return node


def _describe(identity, value=None) -> str:
    if identity is None:
        return f"a {type(value).__name__}"
    kind, *names = identity
    if not names:
        return kind
    return f"the {kind} " + ".".join(str(n) for n in names[:2]) + (f" ({', '.join(map(str, names[2:]))})"
                                                                  if names[2:] else "")


# ----------------------------------------------------------------------------- global module hooks


# torch.nn.modules.module's global forward/backward hook dicts
CALL_HOOK_DICTS = tuple(name for name in vars(torch.nn.modules.module) if name.startswith("_global_")
                        and name.endswith("hooks") and ("forward" in name or "backward" in name))


def registered_global_hooks() -> list[str]:
    """The kinds of global module hooks (torch.nn.modules.module.register_module_forward_hook and
    the like) registered now. Dynamo's guards on them are global, which aot_compile drops: a
    precompiled function is only made, and only called, while there are none."""
    hooks = vars(torch.nn.modules.module)
    return [name[len("_global_"):] for name in CALL_HOOK_DICTS if hooks[name]]


# ----------------------------------------------------------------------------- globals


def external_globals(runtime_env, traced_globals: dict) -> dict[str, list]:
    """How to rebuild each global the generated bytecode loads that torch does not restore."""
    restored = set(runtime_env.import_sources) | set(runtime_env.used_globals)
    recipes = {}
    for name in sorted(runtime_env.external_refs):
        if name in restored or name.startswith("__compiled_fn"):
            continue
        if name in traced_globals:
            recipes[name] = _recipe(name, traced_globals[name])
        elif hasattr(builtins, name):
            recipes[name] = ["builtin", name]
        else:
            raise ValueError(f"the compiled code loads the global {name!r}, which the traced function's globals "
                             "do not hold")
    return recipes


def _recipe(name: str, value) -> list:
    if isinstance(value, types.ModuleType):
        return ["module", value.__name__]
    if getattr(builtins, name, None) is value:
        return ["builtin", name]
    module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if module and qualname and _resolve(module, qualname) is value:
        return ["object", module, qualname]
    raise ValueError(f"the compiled code loads the global {name!r} ({type(value).__name__}), which cannot be "
                     "found again by module and name in another process")


def _resolve(module: str, qualname: str):
    try:
        value = importlib.import_module(module)
        for part in qualname.split("."):
            value = getattr(value, part)
        return value
    except Exception:  # not importable any more, or no such attribute
        return None


def import_globals(recipes: dict[str, list]) -> dict:
    """The globals for load_compiled_function: each recorded global rebuilt."""
    rebuilt = {}
    for name, (kind, *where) in recipes.items():
        if kind == "builtin":
            value = getattr(builtins, where[0], None)
        elif kind == "module":
            value = _import(where[0])
        else:
            value = _resolve(*where)
        if value is None:
            raise PrecompiledArtifactError(f"the global {name} = {'.'.join(where)} it needs cannot be found here: "
                                           "another version of that library? precompile it again")
        rebuilt[name] = value
    return rebuilt


def _import(module: str):
    try:
        return importlib.import_module(module)
    except Exception:  # ImportError, or a module that no longer imports (SyntaxError...)
        return None


# ----------------------------------------------------------------------------- global constants


@dataclass
class GlobalConstants:
    """Plain constants Dynamo read from module globals (its guards on them are global, which
    aot_compile drops): each expression (`G['SCALE']`, `G['__import_cfg'].SCALE`) is evaluated
    before every call on the live module state and must give the saved value and type. `roots`
    says what each `G[name]` is: ["module", module name] or ["global", module name] (that
    module's own global `name`, read at each call)."""
    constants: list  # [expression, value]
    roots: dict

    def __post_init__(self):
        self.expected = [(type(value), value) for _, value in self.constants]
        source = "(" + "".join(f"({expression}), " for expression, _ in self.constants) + ")"
        self.code = compile(source, "<tritonize global checks>", "eval")
        self.namespace = None

    @staticmethod
    def record(constants: dict, traced_globals: dict, traced_module: str) -> "GlobalConstants":
        """The constants whose roots another process can find (a script's own globals cannot be)."""
        kept, roots = [], {}
        for expression, value in constants.items():
            names = set(re.findall(r"\bG\[['\"]([^'\"]+)['\"]\]", expression))
            recipes = {name: _root_recipe(traced_globals.get(name), traced_module) for name in names}
            if names and all(recipes.values()):
                kept.append([expression, value])
                roots.update(recipes)
        return GlobalConstants(kept, roots)

    def bind(self) -> None:
        """Finds the roots in this process (PrecompiledArtifactError when a module is gone)."""
        live = {}
        for name, (kind, module_name) in self.roots.items():
            module = _import(module_name)
            if module is None:
                raise PrecompiledArtifactError(f"the module {module_name} it read {name} from cannot be imported here: "
                                               "precompile it again")
            live[name] = (kind, module)
        self.namespace = _LiveGlobals(live)

    def verify(self) -> None:
        if not self.constants:
            return
        if self.namespace is None:
            self.bind()
        try:
            values = eval(self.code, {"__builtins__": builtins, "G": self.namespace})  # noqa: S307
        except Exception as err:
            raise RuntimeError(f"tritonize precompiled function: guard check failed: reading the module globals it "
                               f"was traced with raised {type(err).__name__}: {err}") from err
        for (expression, _), value, (kind, saved) in zip(self.constants, values, self.expected):
            if type(value) is not kind or value != saved:
                raise RuntimeError(f"tritonize precompiled function: guard check failed: {readable(expression)} is "
                                   f"{value!r}, it was {saved!r} when precompiled: precompile it again")


def _root_recipe(value, traced_module: str) -> list | None:
    if isinstance(value, types.ModuleType):
        return ["module", value.__name__]
    if traced_module and traced_module != "__main__" and _import(traced_module) is not None:
        return ["global", traced_module]
    return None


class _LiveGlobals:
    """`G` for the global checks: a module root is the module, any other name is read from its
    module's globals at each call."""

    def __init__(self, roots: dict):
        self.roots = roots

    def __getitem__(self, name: str):
        kind, module = self.roots[name]
        return module if kind == "module" else vars(module)[name]


# ----------------------------------------------------------------------------- sources


def _source_file(module_name: str) -> str | None:
    module = _import(module_name)
    try:
        return inspect.getsourcefile(module) if module is not None else None
    except TypeError:  # a builtin module
        return None


def _module_digest(module_name: str, path: str | None) -> str | None:
    """SHA-256 of the module's source: the file's bytes, or what its loader gives (a zip)."""
    if path is not None:
        try:
            with open(path, "rb") as file:
                return hashlib.sha256(file.read()).hexdigest()
        except OSError:
            pass
    module = _import(module_name) if module_name != "__main__" else None
    try:
        source = module.__loader__.get_source(module_name) if module is not None else None
    except Exception:
        source = None
    return hashlib.sha256(source.encode()).hexdigest() if source is not None else None


def source_digests(module_names) -> list[list]:
    """[module, source file, SHA-256 of its whole source] for each module Dynamo traced code
    from or read globals of (the whole file: module-level constants are baked into the graph
    too). Modules without a source (compiled, builtin) have nothing to compare."""
    digests = []
    for name in sorted(set(module_names)):
        path = _source_file(name)
        digest = _module_digest(name, path)
        if digest is not None:
            digests.append([name, path, digest])
    return digests


def check_sources(digests: list[list]) -> None:
    """PrecompiledArtifactError naming the first module whose source differs from the one traced.
    A script's functions (`__main__`) are looked up in the file recorded at save; a library's in
    the module this process imports."""
    for module, saved_path, digest in digests:
        path = saved_path if module == "__main__" else _source_file(module)
        if module != "__main__" and _import(module) is None:
            raise PrecompiledArtifactError(f"the module {module} it was traced from cannot be imported here: "
                                           "precompile it again")
        now = _module_digest(module, path)
        if now is None:
            raise PrecompiledArtifactError(f"the source of {module} ({path}), which it was traced from, cannot be "
                                           "read: precompile it again")
        if now != digest:
            raise PrecompiledArtifactError(f"the source of {module} ({path}) changed since it was precompiled: "
                                           "precompile it again")
