"""What torch's aot_compile cannot save about a traced function, and how tritonize keeps a
precompiled function (precompiled.py) safe without it.

**Identity guards.** Dynamo guards on the identity of the functions, classes and code objects it
traced through: the code of a decorated `forward`, the functions in a decorator's closure, a
submodule's class, a builtin activation function held by a module. An id() means nothing in
another process, so torch refuses to save these guards (PackageError), and transformers' models
have a dozen of them. `GuardRecorder` is the guard filter precompile gives torch: it takes such a
guard out of Dynamo's saved guards and records it as an `IdentityCheck`: the guard's expression
(in terms of the function's arguments, e.g. `model.__class__`) and the fingerprint of the object
it gave: its kind, module and qualified name, and for code its name, line and bytecode digest.
`IdentityChecks.verify` runs before every call of the loaded function: each expression must give
an object with the saved fingerprint (computed once per object: the last object that matched is
remembered, so a steady caller pays one tuple evaluation and an `is` per check). Replacing a
submodule's class, an activation function or a method with another one fails the call with a
RuntimeError naming the expression, as Dynamo's own guard failure does.

**Globals.** The bytecode Dynamo generates loads some globals torch does not restore: modules it
installs under generated names (`___module_collections_...`, to rebuild a transformers output)
and, on torch 2.11, builtins. `external_globals` records how to rebuild each (a module by name, an
object by module and qualified name, checked to be the same object now); `import_globals`
rebuilds them at load.

**Sources.** torch records the functions Dynamo traced (module and lines) but does not check them
on load. `source_digests` hashes those lines at save and `check_sources` compares them at load: a
library changed since the precompile refuses the artifact (PrecompiledArtifactError) rather than
running a graph traced from the old code.
"""
from __future__ import annotations

import ast
import builtins
import hashlib
import importlib
import inspect
import linecache
import os
import types
from dataclasses import dataclass

from .errors import PrecompiledArtifactError

# The guard kinds torch cannot save (CheckFunctionManager.UNSUPPORTED_SERIALIZATION_GUARD_TYPES in
# torch 2.11 and 2.13).
UNSAVEABLE = ("DICT_VERSION", "NN_MODULE", "ID_MATCH", "FUNCTION_MATCH", "CLASS_MATCH", "MODULE_MATCH",
              "CLOSURE_MATCH", "WEAKREF_ALIVE")


# ----------------------------------------------------------------------------- fingerprints


def fingerprint(value) -> list | None:
    """What identifies `value` across processes, or None for objects that have no such name."""
    if isinstance(value, types.CodeType):
        digest = hashlib.sha256(value.co_code).hexdigest()[:16]
        return ["code", getattr(value, "co_qualname", value.co_name), os.path.basename(value.co_filename),
                value.co_firstlineno, digest]
    if isinstance(value, types.FunctionType):
        return ["function", value.__module__, value.__qualname__] + fingerprint(value.__code__)[2:]
    if isinstance(value, types.BuiltinFunctionType):
        owner = value.__self__
        owner_name = owner.__name__ if isinstance(owner, types.ModuleType) else type(owner).__qualname__
        return ["builtin", value.__module__ or owner_name, value.__qualname__]
    if isinstance(value, type):
        return ["class", value.__module__, value.__qualname__]
    return None


def _unsaveable(entry) -> bool:
    return entry.guard_type in UNSAVEABLE or any(kind in UNSAVEABLE for kind in entry.derived_guard_types)


def torch_default_filter(entries) -> list[bool]:
    """aot_compile's own default (torch 2.11 and 2.13): drop global guards and unsaveable kinds."""
    return [not (entry.is_global or entry.guard_type in UNSAVEABLE) for entry in entries]


class GuardRecorder:
    """The guard filter precompile hands to torch.compile: `user_filter` (or torch's default)
    decides, except that local identity guards on functions, classes and code are dropped and
    recorded (`checks`, keyed by expression) to be re-checked by tritonize."""

    def __init__(self, user_filter=None):
        self.user_filter = user_filter
        self.checks: dict[str, list] = {}

    def __call__(self, entries) -> list[bool]:
        keep = list((self.user_filter or torch_default_filter)(entries))
        for index, entry in enumerate(entries):
            if entry.is_global or not entry.has_value or not _unsaveable(entry):
                continue
            if self.user_filter is not None and not keep[index]:
                continue  # the user dropped it on purpose
            identity = fingerprint(entry.value)
            if identity is not None:
                self.checks[entry.name] = identity
                keep[index] = False
        return keep


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
        self.last_matched = [None] * len(self.expressions)

    def values(self, f_locals: dict) -> tuple:
        return eval(self.code, {"__builtins__": builtins}, f_locals)  # noqa: S307 (our own expressions)

    def verify(self, f_locals: dict) -> None:
        """Nothing when every expression gives the object saved; RuntimeError naming the first
        that does not."""
        try:
            values = self.values(f_locals)
        except Exception as err:
            raise RuntimeError(f"tritonize precompiled function: guard check failed: evaluating the identity "
                               f"checks raised {type(err).__name__}: {err}") from err
        for index, value in enumerate(values):
            if value is self.last_matched[index]:
                continue
            now = fingerprint(value)
            if now != self.expected[index]:
                raise RuntimeError(f"tritonize precompiled function: guard check failed: {self.expressions[index]} "
                                   f"is {_describe(now, value)}, it was {_describe(self.expected[index])} when "
                                   "precompiled: precompile it again for this model")
            self.last_matched[index] = value

    def mismatches(self, f_locals: dict) -> list[str]:
        """The expressions that cannot be re-checked on these (the example) arguments: at save,
        a check that does not hold on the very arguments traced would refuse every call."""
        try:
            values = self.values(f_locals)
        except Exception as err:
            return [f"{type(err).__name__}: {err}"]
        return [e for e, v, saved in zip(self.expressions, values, self.expected) if fingerprint(v) != saved]


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
    return f"the {kind} " + ".".join(str(n) for n in names[:2]) + (f" ({', '.join(map(str, names[2:]))})"
                                                                  if names[2:] else "")


# ----------------------------------------------------------------------------- globals


def external_globals(runtime_env, traced_globals: dict) -> dict[str, list]:
    """How to rebuild each global the generated bytecode loads that torch does not restore."""
    restored = set(runtime_env.import_sources) | set(runtime_env.used_globals)
    recipes = {}
    for name in sorted(runtime_env.external_refs):
        if name in restored or name.startswith("__compiled_fn") or hasattr(builtins, name):
            continue
        if name not in traced_globals:
            raise ValueError(f"the compiled code loads the global {name!r}, which the traced function's globals "
                             "do not hold")
        recipes[name] = _recipe(name, traced_globals[name])
    return recipes


def _recipe(name: str, value) -> list:
    if isinstance(value, types.ModuleType):
        return ["module", value.__name__]
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
    except (ImportError, AttributeError):
        return None


def import_globals(recipes: dict[str, list]) -> dict:
    """The globals for load_compiled_function: every builtin, and each recorded global rebuilt."""
    rebuilt = dict(vars(builtins))
    for name, recipe in recipes.items():
        value = importlib.import_module(recipe[1]) if recipe[0] == "module" else _resolve(*recipe[1:])
        if value is None:
            raise PrecompiledArtifactError(f"the global {name} = {recipe[1]}.{recipe[2]} it needs cannot be found "
                                           "here: another version of that library? precompile it again")
        rebuilt[name] = value
    return rebuilt


# ----------------------------------------------------------------------------- sources


def _lines_digest(module_name: str, first: int, last: int) -> str | None:
    try:
        filename = inspect.getsourcefile(importlib.import_module(module_name))
    except (ImportError, TypeError):
        return None
    if not filename:
        return None
    linecache.checkcache(filename)
    lines = linecache.getlines(filename)
    if len(lines) < last - 1:
        return None
    return hashlib.sha256("".join(lines[first - 1:last - 1]).encode()).hexdigest()


def source_digests(source_info) -> list[list]:
    """[module, first line, last line, SHA-256 of those lines] for each function Dynamo traced."""
    digests = []
    for source in sorted(source_info.inlined_sources, key=lambda s: (s.module, s.firstlineno)):
        digest = _lines_digest(source.module, source.firstlineno, source.lastlineno)
        if digest is not None:
            digests.append([source.module, source.firstlineno, source.lastlineno, digest])
    return digests


def check_sources(digests: list[list]) -> None:
    for module, first, last, digest in digests:
        if _lines_digest(module, first, last) != digest:
            raise PrecompiledArtifactError(f"the source of {module} (lines {first}-{last}) changed since it was "
                                           "precompiled: precompile it again")
