import collections

import pytest

from codeexecutor.execution.render import render


@pytest.mark.parametrize(
    "value, expected",
    [
        (3, "3"),
        (-2.5, "-2.5"),
        (True, "True"),
        (None, "None"),
        ("ab", "'ab'"),
        ("it's", '"it\'s"'),
        ([1, "a", (2,)], "[1, 'a', (2,)]"),
        ({"k": [1, 2]}, "{'k': [1, 2]}"),
        (set(), "set()"),
        ({3}, "{3}"),
        (frozenset({1}), "frozenset({1})"),
        ((), "()"),
        (collections.deque([1, 2], maxlen=3), "deque([1, 2], maxlen=3)"),
        (collections.defaultdict(int, {1: 2}), "defaultdict(<class 'int'>, {1: 2})"),
        (len, "<function>"),
        (lambda: 0, "<function>"),
        ([].append, "<function>"),
        (int, "<class>"),
        (collections, "<module>"),
        (b"x\n", "b'x\\n'"),
    ],
)
def test_exact_repr_when_short(value, expected):
    assert render(value) == expected


def test_builtin_containers_match_repr_exactly():
    for value in ([[1, 2], {"a": (3, 4.5)}], {1: {2: [3]}}, (1,), [[], {}, set()], collections.deque("ab")):
        assert render(value, limit=1000) == repr(value)


def test_long_values_are_cut_to_a_prefix_of_repr():
    value = list(range(1000))
    out = render(value, limit=20)
    assert out == repr(value)[:20] + "..."
    s = "x" * 10_000
    assert render(s, limit=10) == repr(s)[:10] + "..."


def test_huge_list_is_rendered_incrementally():
    import time

    big = list(range(2_000_000))
    start = time.perf_counter()
    for _ in range(100):
        render(big)
    assert time.perf_counter() - start < 0.5  # O(limit), not O(n): repr(big) alone takes ~0.1 s


def test_self_reference():
    a = [1]
    a.append(a)
    assert render(a) == repr(a) == "[1, [...]]"


def test_addresses_removed_and_one_line():
    class Foo:
        pass

    class Multi:
        def __repr__(self):
            return "a\nb"

    assert " at 0x" not in render(Foo())
    assert render(Foo()).endswith("Foo object>")
    assert render(Multi()) == "a\\nb"


def test_repr_failure_is_reported():
    class Bad:
        def __repr__(self):
            raise RuntimeError("no")

    assert render(Bad()) == "<repr failed: RuntimeError>"
    assert render([Bad()]) == "[<repr failed: RuntimeError>]"


def test_huge_int():
    assert render(10**5000).startswith("<int with ")
    assert render(10**50) == str(10**50)


def test_official_style_drops_quotes():
    assert render(["a", "b"], quotes=False) == "[a, b]"
    assert render("hi", quotes=False) == "hi"


def _random_value(rng, depth=0):
    kind = rng.randrange(9 if depth < 3 else 5)
    if kind == 0:
        return rng.randrange(-(10**6), 10**6)
    if kind == 1:
        return rng.random() * 100
    if kind == 2:
        return "".join(rng.choice("ab'\"\\ \n") for _ in range(rng.choice([0, 1, 3, 7, 300])))
    if kind == 3:
        return rng.choice([None, True, False])
    if kind == 4:
        return rng.randrange(10)
    size = rng.randrange(0, 14)
    items = [_random_value(rng, depth + 1) for _ in range(size)]
    if kind == 5:
        return items
    if kind == 6:
        return tuple(items)
    if kind == 7:
        return {i: v for i, v in enumerate(items)}
    return {k: v for k, v in zip(map(str, items), items)}


def test_randomized_values_render_as_prefix_of_repr():
    """Exactness of the incremental renderer and its C fast path on random nested values."""
    import random

    rng = random.Random(0)
    for _ in range(3000):
        value = _random_value(rng)
        limit = rng.choice([8, 20, 100, 10_000])
        full = repr(value)
        out = render(value, limit)
        if len(full) <= limit:
            assert out == full
        else:
            assert out == full[:limit] + "...", (value, limit)
