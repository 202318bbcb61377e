"""The scope-aware name rule (generation/scopes.py): what a state at a line may name, read
off the code; it admits every true trace of real programs and refuses what no frame holds."""

import pytest

from codeexecutor.generation.constraints import StateRule, first_refused
from codeexecutor.generation.scopes import Function, Module, Scopes, source_of
from codeexecutor.modeling.format import format_code
from codeexecutor.modeling.profiles import Profile

PROGRAM = """from functools import lru_cache
import math
LIMIT = 3


@lru_cache(maxsize=None)
def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


def outer(a, b=2):
    total = a + b

    def inner(c):
        nonlocal total
        total += c
        return total
    return inner(1)


class Box:
    size = 4

    def grow(self, by):
        self.size += by
        return self.size


def one(x): return x + 1


for i in range(2):
    seen = outer(i)
print(fib(5), one(2), Box().grow(1), LIMIT, seen)
"""

# Real programs whose frames hold what a naive reading misses: closures and `nonlocal`,
# `global`, decorated functions and classes, an Enum's namespace, name mangling, a
# one-line definition, `del`, a walrus, a crash inside a call.
TRICKY = [
    PROGRAM,
    "from enum import Enum, unique\n@unique\nclass Color(Enum):\n    RED = 1\n    BLUE = 2\nprint(Color.RED)\n",
    "class Tree:\n    def __init__(self):\n        self.__n = 0\n    def add(self):\n        self.__n += 1\n"
    "        return self.__n\nt = Tree()\nprint(t.add())\n",
    "count = 0\ndef bump():\n    global count, extra\n    count += 1\n    extra = count\nbump()\nbump()\nprint(count, extra)\n",  # noqa: E501
    "xs = [1, 2, 3]\nif (n := len(xs)) > 2:\n    del xs[0]\ny = n\ndel n\nprint(y)\n",
    "def g(a):\n    return 10 // a\ndef f(a):\n    b = g(a)\n    return b\nx = f(0)\n",
    "def rotate(x, axis, angle):\n    names = locals()\n    del names['axis']\n    return x + angle\nprint(rotate(1, 'y', 2))\n",  # noqa: E501
]


def _tokenizer(texts):
    from codeexecutor.modeling.tokenizer import train_tokenizer

    return train_tokenizer(texts * 3, vocab_size=400, min_frequency=1, delta=True)


def test_each_line_is_given_its_frames_scope():
    scopes = Scopes(PROGRAM)
    lines = PROGRAM.splitlines()
    at = {text.strip(): scopes.at(k) for k, text in enumerate(lines) if text.strip()}
    assert at["return n"] == Function(("n",), ("n",))
    outer = Function(("a", "b", "inner", "total"), ("a", "b"))  # a cell comes after the plain locals
    assert at["total = a + b"] == outer and outer.first == ("a", "b")
    assert at["total += c"] == Function(("c", "total"), ("c",))  # a free variable is in the frame
    assert at["@lru_cache(maxsize=None)"] is at["LIMIT = 3"]  # a decorator runs in the scope around it
    assert at["def inner(c):"] == outer
    assert at["size = 4"] is None and at["class Box:"] is None  # class bodies are left free
    assert at["self.size += by"] == Function(("self", "by"), ("self", "by"))
    deleting = Scopes("def f(a, *rest, k=1, **kw):\n    del a\n    return k\n").at(1)
    assert deleting.params == ("a", "k", "rest", "kw") and deleting.first == ()  # `del`: no order promised
    assert Scopes("def f(a, b):\n    d = locals()\n    return d\n").at(1).first == ()  # the frame's dict, handed out
    assert at["def one(x): return x + 1"] is None  # the line runs in two frames
    module = scopes.at(lines.index("for i in range(2):"))
    assert isinstance(module, Module)
    assert module.names(0) == {"lru_cache"}
    assert module.names(lines.index("@lru_cache(maxsize=None)")) == {"lru_cache", "math", "LIMIT", "fib"}
    assert {"i", "seen", "Box", "one"} <= module.names(len(lines))


def test_names_a_statement_cannot_show_leave_the_module_free():
    assert Scopes("from math import *\nx = sqrt(4)\n").at(1) is None
    assert Scopes("globals()['y'] = 1\nprint(y)\n").at(1) is None
    assert Scopes("def f(:\n").at(0) is None  # code that does not compile: no restriction


def test_the_models_format_gives_back_a_source_with_its_line_numbers():
    source = source_of(format_code(PROGRAM))
    compile(source, "<program>", "exec")
    for k, line in enumerate(PROGRAM.splitlines()):
        assert source.splitlines()[k].strip() == line.strip()
    assert Scopes(source).at(7) == Scopes(PROGRAM).at(7)
    assert source_of(format_code("x = 1", "singleline")) == "x = 1\n"


@pytest.mark.parametrize("order", ["start", "end"])
@pytest.mark.parametrize("state", ["full", "delta"])
def test_every_true_trace_of_tricky_programs_is_admitted(pool, order, state):
    profile = Profile("exact", state=state, order=order)
    traced = []
    for src in TRICKY:
        r = pool.execute(src)
        assert r.steps, r.error
        traced.append((profile.code(src), profile.trace(r.steps, r.error, src)))
    tok = _tokenizer([t for _, t in traced] + [c for c, _ in traced])
    for code, target in traced:
        ids = tok.encode(target, add_special_tokens=False)
        assert first_refused(StateRule(tok, code, value_chars=103), ids) is None, target[:300]


def test_a_module_step_may_not_name_what_later_lines_bind_nor_a_functions_locals():
    profile = Profile("exact", state="delta", order="end")
    code = profile.code(PROGRAM)
    tok = _tokenizer([code, "<line> <0> <state> lru_cache : <function> </state>"])
    names = lambda text: tok.encode(text, add_special_tokens=False)  # noqa: E731
    for scoped, expected in ((True, False), (False, True)):
        rule = StateRule(tok, code, scopes=scoped)
        for wrong in ("fib", "total", "seen"):  # bound at a later line; a local of outer; bound later
            ids = names(f"<line> <0> <state> {wrong} : 1 </state>")
            assert (first_refused(rule, ids) is None) is expected, (scoped, wrong)
        assert first_refused(rule, names("<line> <0> <state> lru_cache : <function> </state>")) is None
    rule = StateRule(tok, code)
    inside = names("<line> <13> <state> a : 1 <dictsep> b : 2 <dictsep> total : 3 </state>")
    assert first_refused(rule, inside) is None
    assert first_refused(rule, names("<line> <13> <state> a : 1 <dictsep> LIMIT : 3 </state>")) is not None
    assert first_refused(rule, names("<line> <13> <state> b : 2 <dictsep> a : 1 </state>")) is not None  # a first
    assert first_refused(rule, names("<line> <13> <state> a : 1 </state>")) is not None  # b is due
    assert first_refused(rule, names("<line> <13> <delta> total : 3 </state>")) is None  # a delta lists changes only
