import pytest

from codeexecutor.execution import ExecStatus
from codeexecutor.execution.inline import InlineError, inline_stdin
from codeexecutor.generation.decoding import Decoding

from .conftest import real_programs

STDIN = "2\nab\ncd\n"


@pytest.mark.parametrize(
    "source, expected",
    [
        ("n = int(input())\na = input().split()\nprint(n, a)\n", "n = int('2')\na = 'ab'.split()\nprint(n, a)\n"),
        (
            "import sys\nfor line in sys.stdin:\n    print(line.strip())\n",
            "import sys\nfor line in ['2\\n', 'ab\\n', 'cd\\n']:\n    print(line.strip())\n",
        ),
        ("a, b, c = open(0).read().split()\n", "a, b, c = '2\\nab\\ncd\\n'.split()\n"),
        ("n, *a = open(0)\n", "n, *a = ['2\\n', 'ab\\n', 'cd\\n']\n"),
        ("import sys\nL = sys.stdin.readlines()\n", "import sys\nL = ['2\\n', 'ab\\n', 'cd\\n']\n"),
        (
            "import sys\nread = sys.stdin.buffer.read\nx = read().split()\n",
            "import sys\nread = sys.stdin.buffer.read\nx = b'2\\nab\\ncd\\n'.split()\n",
        ),
        ("x = list(map(str.strip, open(0)))\n", "x = list(map(str.strip, ['2\\n', 'ab\\n', 'cd\\n']))\n"),
    ],
)
def test_reads_become_literals(pool, source, expected):
    assert inline_stdin(source, STDIN, pool=pool).source == expected


def test_reads_in_a_loop_consume_one_literal_sequence(pool):
    src = "import sys\ninput = sys.stdin.readline\nn = int(input())\nfor i in range(n):\n    print(input().rstrip())\n"
    out = inline_stdin(src, STDIN, pool=pool)
    assert out.source.splitlines()[0] == "__inputs__ = ['ab\\n', 'cd\\n']; import sys"
    assert out.sequence_reads == 2 and len(out.source.splitlines()) == len(src.splitlines())


def test_reads_in_a_function_before_main_guard(pool):
    src = "def main():\n    n = int(input())\n    for i in range(n):\n        print(input())\n\nif __name__ == '__main__':\n    main()\n"  # noqa: E501
    out = inline_stdin(src, STDIN, pool=pool)
    assert out.source.splitlines()[6] == "    __inputs__ = ['ab', 'cd']; main()"
    assert pool.execute(out.source).stdout == "ab\ncd\n"


def test_program_that_defines_next_still_works(pool):
    src = "def next(x):\n    return x\n\nfor i in range(2):\n    print(next(input()))\n"
    assert pool.execute(inline_stdin(src, "a\nb\n", pool=pool).source).stdout == "a\nb\n"


def test_no_line_for_the_sequence_is_a_named_rejection(pool):
    src = "def f(x):\n    return x\nfor i in range(2):\n    print(f(input()))\n"
    with pytest.raises(InlineError) as err:
        inline_stdin(src, "a\nb\n", pool=pool)
    assert err.value.reason == "no_place_for_sequence"


def test_eof_loop_is_rejected_with_a_reason(pool):
    src = "while True:\n    try:\n        print(input())\n    except EOFError:\n        break\n"
    with pytest.raises(InlineError) as err:
        inline_stdin(src, STDIN, pool=pool)
    assert err.value.reason == "eof_read"


def test_program_without_reads_is_unchanged(pool):
    assert inline_stdin("print(1)\n", "x\n", pool=pool).source == "print(1)\n"


def _module_lines(result):
    return [s.line for s in result.steps]


@pytest.mark.data
def test_round_trip_on_real_programs(pool):
    """Inlined programs give the same output and the same line sequence and final values."""
    checked = 0
    for sid, source, stdin in real_programs(limit=60, seed=1):
        try:
            inlined = inline_stdin(source, stdin, pool=pool).source
        except InlineError:
            continue
        a = pool.execute(source, stdin)
        b = pool.execute(inlined, "")
        if a.status is not ExecStatus.OK:
            continue
        assert b.status is a.status, sid
        assert b.stdout == a.stdout, sid
        assert _module_lines(b) == _module_lines(a), sid
        final_a = {k: v for k, v in a.steps[-1].state.items() if k != "input"}
        final_b = {k: v for k, v in b.steps[-1].state.items() if k != "input"}
        assert final_a == final_b, sid
        checked += 1
    assert checked >= 45


def test_literal_spans_cover_the_inserted_text(pool):
    src = "import sys\ninput = sys.stdin.readline\nn = int(input())\nfor i in range(n):\n    print(input().rstrip())\n"
    out = inline_stdin(src, STDIN, pool=pool)
    data = out.source.encode()
    pieces = [data[a:b].decode() for a, b in out.literal_spans]
    assert pieces == ["__inputs__ = ['ab\\n', 'cd\\n']; ", "'2\\n'", "__inputs__.pop(0)"]


# -- static inlining (trace: no run) ----------------------------------------------------------
STATIC_CASES = [
    ("n = int(input())\na = list(map(int, input().split()))\nprint(sum(a) * n)\n", "2\n1 2 3\n"),
    (
        "import sys\ninput = sys.stdin.readline\nn = int(input())\nfor _ in range(n):\n    x = input()\n    print(x)\n",
        "2\nab\ncd\n",
    ),
    (
        "def main():\n    n, k = map(int, input().split())\n    print(n + k)\n\nif __name__ == '__main__':\n    main()\n",  # noqa: E501
        "3 4\n",
    ),
    ("import sys\nn, *a = map(int, open(0).read().split())\nprint(n, a)\n", "3\n1 2 3\n"),
    ("n = int(input())\nxs = [int(input()) for _ in range(n)]\nprint(xs)\n", "3\n5\n6\n7\n"),
    ("import sys\nfor line in sys.stdin:\n    print(line.strip())\n", "a\nb\n"),
    (
        "import sys\ndef main():\n    input = sys.stdin.buffer.readline\n    n = int(input())\n    print(n)\nmain()\n",
        "15\n",
    ),
    (
        "from sys import stdin\nh, w = map(int, stdin.readline().split())\ng = [stdin.readline().rstrip() for _ in range(h)]\n",  # noqa: E501
        "2 3\n#.#\n.#.\n",
    ),
    ("s = input()\nt = [int(x) for x in input().split()]\nprint(s, t)\n", "abc\n1 2\n"),
]


@pytest.mark.parametrize("src,stdin", STATIC_CASES)
def test_static_inlining_gives_the_recorded_form(src, stdin, pool):
    from codeexecutor.execution.inline_static import inline_static

    assert inline_static(src, stdin).source == inline_stdin(src, stdin, pool=pool).source


def test_static_inlining_refuses_what_it_cannot_order():
    from codeexecutor.execution.inline_static import inline_static

    with pytest.raises(InlineError) as err:
        inline_static("import sys\nfor _ in range(2):\n    a = input()\n    b = sys.stdin.readline()\n", "1\n2\n3\n4\n")
    assert err.value.reason == "static_ambiguous"
    with pytest.raises(InlineError) as err:
        inline_static("a = input()\nb = input()\n", "only one line\n")
    assert err.value.reason == "eof_read"


@pytest.mark.data
def test_static_and_recorded_inlining_agree_on_real_programs(pool):
    from codeexecutor.execution.inline_static import inline_static

    from .conftest import real_programs

    both = same = 0
    for _, src, stdin in real_programs(150, seed=4):
        if not stdin:
            continue
        try:
            recorded, static = inline_stdin(src, stdin, pool=pool).source, inline_static(src, stdin).source
        except InlineError:
            continue
        both += 1
        same += recorded == static
    assert both >= 100 and same / both >= 0.9, (same, both)  # 96.8% on the whole corpus (bench_inline)


def test_trace_runs_no_program_unless_compare(monkeypatch, request):
    pytest.importorskip("torch", reason="traces with a model")
    overfit_model = request.getfixturevalue("overfit_model")
    import codeexecutor.execution.pool as pool_module
    from codeexecutor.generation.api import trace_program

    def no_runs(*args, **kwargs):
        raise AssertionError("trace ran the program")

    monkeypatch.setattr(pool_module.ExecutorPool, "__init__", no_runs)
    monkeypatch.setattr(pool_module, "execute", no_runs)
    path, _ = overfit_model
    report = trace_program(
        "n = int(input())\nprint(n * 2)\n", "21\n", model=str(path), decoding=Decoding(beam=1, max_length=8)
    )
    assert report["code"] == "n = int('21')\nprint(n * 2)\n" and "ground_truth" not in report
