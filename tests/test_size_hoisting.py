"""codegen/size_hoisting.py: a symbolic wrapper computes each repeated size expression once a
call, right after its symbols are bound; the compiled function still matches eager."""
import torch

from helpers import assert_same

from conftest import DEVICE
from tritonize.backend import make_backend
from tritonize.codegen.size_hoisting import hoist_size_expressions

HEAD = ["def call(args):", "    arg0_1, arg1_1, = args", "    s0 = arg0_1.size(0)", "    s1 = arg0_1.size(1)"]


def hoisted(body: list[str], symbols=("s0", "s1")) -> list[str]:
    return hoist_size_expressions(HEAD + body, len(HEAD), set(symbols))


def test_a_repeated_expression_is_named_once_after_the_symbols():
    lines = hoisted(["    buf0 = empty_strided((s0 * s1, 64), (64, 1))",
                     "    kernel(buf0, (s0 * s1), 64 * s1)  # comment with s0 * s1 stays",
                     "    return (view(buf0, ((s0 * s1),), (64 * s1,)),)"])
    assert lines[:len(HEAD)] == HEAD
    assert lines[len(HEAD):len(HEAD) + 2] == ["    size0 = s0 * s1", "    size1 = 64 * s1"]
    assert lines[len(HEAD) + 2:] == ["    buf0 = empty_strided((size0, 64), (64, 1))",
                                     "    kernel(buf0, size0, size1)  # comment with s0 * s1 stays",
                                     "    return (view(buf0, (size0,), (size1,)),)"]


def test_single_uses_later_symbols_and_calls_stay_as_written():
    body = ["    u0 = buf1.item()",
            "    a = f(s0 * u0) + g(s0 * u0)",  # u0 is bound in the call, not at the top
            "    b = f(s0 + 1)",  # once only
            "    c = h(s1 * 2) + h(s1 * 2)"]
    lines = hoisted(body)
    assert lines[len(HEAD)] == "    size0 = s1 * 2"
    assert lines[len(HEAD) + 1:] == body[:3] + ["    c = h(size0) + h(size0)"]


def test_names_the_wrapper_already_uses_are_not_taken():
    lines = hoisted(["    size0 = empty((s0 - 1, 3))", "    k(size0, (s0 - 1), -s1, -s1, max(s0, s1 * 2), max(s0, s1 * 2))"])
    assert lines[len(HEAD):len(HEAD) + 3] == ["    size_0 = s0 - 1", "    size_1 = -s1", "    size_2 = max(s0, s1 * 2)"]
    assert lines[-1] == "    k(size0, size_0, size_1, size_1, size_2, size_2)"


def test_text_before_an_expression_may_hold_any_letter_and_numbers_alone_stay():
    lines = hoisted(['    a = tag(x, "é", s0 * s1, dim=-1)', '    b = tag(x, "ü", s0 * s1, dim=-1)'])
    assert lines[len(HEAD)] == "    size0 = s0 * s1"
    assert lines[len(HEAD) + 1:] == ['    a = tag(x, "é", size0, dim=-1)', '    b = tag(x, "ü", size0, dim=-1)']


def test_a_static_wrapper_is_unchanged():
    body = ["    buf0 = empty_strided((6, 64), (64, 1))", "    k(buf0, 6 * 64, 6 * 64)"]
    assert hoist_size_expressions(HEAD[:2] + body, 2, set()) == HEAD[:2] + body


def test_a_dynamic_graph_computes_its_repeated_sizes_once_and_matches_eager():
    def fn(x, y):
        flat = (x @ y).relu().reshape(-1)  # two buffers of s0 * s2 elements
        return flat * 2, flat.sin()

    recorder = []
    compiled = torch.compile(fn, backend=make_backend(recorder=recorder), dynamic=True)
    for rows, inner in ((5, 7), (9, 3), (12, 16)):
        x, y = torch.randn(rows, inner, device=DEVICE), torch.randn(inner, rows + 1, device=DEVICE)
        saved = x.clone(), y.clone()
        assert_same(compiled(x, y), fn(x, y))
        assert_same((x, y), saved)
    wrapper = next(r for r in recorder if r != "graph").wrapper
    call = wrapper[wrapper.index("def call("):]
    names = [line.split(" = ")[0].strip() for line in call.splitlines() if line.startswith("    size")]
    assert names, call
    assert all(call.count(name) >= 3 for name in names)  # defined once, used twice or more
