"""House rules that are checked, not hoped for."""
import ast
import pathlib

SRC = pathlib.Path(__file__).resolve().parents[1] / "src" / "tritonize"


def _imports(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            prefix = "." * node.level + (node.module or "")
            found.add(prefix)
    return found


def test_runtime_never_imports_the_compiler():
    for path in (SRC / "runtime").glob("*.py"):
        for name in _imports(path):
            assert not any(part in name for part in ("lower", "schedule", "codegen")), (path, name)


def test_user_kernel_launch_never_imports_the_compiler():
    # Generated wrappers import user_kernels/launch.py; it and what it imports stay runtime-only.
    for name in ("binding.py", "interpret.py", "launch.py"):
        for imported in _imports(SRC / "user_kernels" / name):
            assert imported in {".binding", ".interpret", "torch", "triton", "__future__", "contextlib",
                                "threading", "dataclasses", "typing"} or imported.startswith(
                                    ("triton.", "torch.")), (name, imported)


def test_no_inductor_imports():
    for path in SRC.rglob("*.py"):
        assert not any(n.startswith("torch._inductor") for n in _imports(path)), path


def test_files_stay_small():
    for path in SRC.rglob("*.py"):
        assert len(path.read_text().splitlines()) <= 800, path
