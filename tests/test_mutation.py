import ast
import json
import random
import subprocess
import sys
from collections import Counter

import pytest

from mutation import OPERATORS, MutationError, MutationStats, mutate
from mutation.parsing import apply_edits, has_errors, parse

from .conftest import ROOT, real_programs


def test_registry_is_the_twelve_operators():
    assert list(OPERATORS) == ["CRP", "AOD", "AOR", "ASR", "BCR", "COD", "LCR", "ROR", "SIR", "OIL", "RIL", "ZIL"]


EXAMPLES = [(name, before, after) for name, op in OPERATORS.items() for before, after in op.examples()]


@pytest.mark.parametrize("name, before, after", EXAMPLES, ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(EXAMPLES)])
def test_operator_examples(name, before, after):
    op = OPERATORS[name]
    src = before.encode()
    sites = list(op.sites(parse(src).root_node))
    assert sites, f"{name} finds no site in {before!r}"
    alternatives = op.alternatives(src, sites[0])
    if alternatives:
        produced = {apply_edits(src, edits).decode() for edits in alternatives}
        assert after in produced
    else:
        assert apply_edits(src, op.apply(src, sites[0], random.Random(0))).decode() == after
    assert not has_errors(parse(after.encode()))
    compile(after, "<after>", "exec")
    assert apply_edits(src, []) == src  # an unused site leaves the source byte-identical


def all_mutants(name: str, source: str) -> set[str]:
    op = OPERATORS[name]
    src = source.encode()
    out = set()
    for site in op.sites(parse(src).root_node):
        for edits in op.alternatives(src, site):
            out.add(apply_edits(src, edits).decode())
    return out


@pytest.mark.parametrize(
    "name, source, expected",
    [
        ("ROR", "a < b", {"a <= b", "a > b", "a >= b", "a == b", "a != b"}),
        ("ROR", "x == None", {"x != None"}),
        ("ROR", "None < x", set()),
        ("AOR", "x * y", {"x + y", "x - y", "x / y", "x // y", "x % y", "x ** y"}),
        ("AOR", "'a' + s", set()),
        ("AOR", "[0] * n", set()),
        ("ASR", "s += 'x'", set()),
        ("ASR", "t %= 7", {"t += 7", "t -= 7", "t *= 7", "t /= 7", "t //= 7", "t **= 7"}),
        ("LCR", "a and b", {"a or b"}),
        ("COD", "not a", {"a"}),
        ("COD", "k not in d", {"k in d"}),
        ("SIR", "a[1:2:3]", {"a[:2:3]", "a[1::3]", "a[1:2:]"}),
        ("AOD", "-x + +y", {"x + +y", "-x + y"}),
        ("BCR", "def f():\n    break", set()),
        ("RIL", "for x in map(int, a):\n    pass", set()),
        ("RIL", "import sys\nfor l in sys.stdin:\n    pass", set()),
        ("RIL", "for x in a:\n    pass", {"for x in reversed(a):\n    pass"}),
    ],
)
def test_exhaustive_sets(name, source, expected):
    assert all_mutants(name, source) == expected


def test_crp_skips_docstrings_fstrings_and_main_guard():
    src = '"""doc"""\ndef f():\n    """fd"""\n    return f"{x}"\nif __name__ == "__main__":\n    f()\n'
    assert list(OPERATORS["CRP"].sites(parse(src.encode()).root_node)) == []


def test_crp_numbers_keep_their_type_and_strings_change_by_one_or_two():
    rng = random.Random(1)
    op = OPERATORS["CRP"]
    for src, check in [
        (b"x = 7", lambda v: isinstance(v, int)),
        (b"x = 0.25", lambda v: isinstance(v, float)),
        (b"x = 'hello'", lambda v: isinstance(v, str) and abs(len(v) - 5) in (1, 2)),
        (b"x = 'a\\nb'", lambda v: isinstance(v, str)),
    ]:
        site = next(op.sites(parse(src).root_node))
        for _ in range(50):
            out = apply_edits(src, op.apply(src, site, rng)).decode()
            assert check(ast.literal_eval(out.split("=", 1)[1].strip())), out


def test_negative_constants_keep_the_tree_shape():
    op = OPERATORS["CRP"]
    rng = random.Random(0)
    for src in (b"x = 10 ** 5", b"y = -1", b"z = 3 .bit_length()"):
        for site in op.sites(parse(src).root_node):
            for _ in range(40):
                out = apply_edits(src, op.apply(src, site, rng)).decode()
                before, after = ast.parse(src.decode()).body[0].value, ast.parse(out).body[0].value
                assert type(before) is type(after), out


def test_p_zero_gives_no_mutant():
    src = "for i in range(3):\n    x = i * 2 - 1\n    if x < 2:\n        break\n"
    assert mutate(src, n=20, p=0.0) == []
    assert mutate(src, n=20, p=0.5)


def test_mutants_record_their_edits_and_differ():
    src = "a = [3, 1, 2]\nfor i in range(len(a)):\n    if a[i] > 1 and i != 0:\n        a[i] -= 1\nprint(a[1:])\n"
    stats = MutationStats()
    mutants = mutate(src, n=20, seed=3, stats=stats)
    assert mutants and stats.emitted == len(mutants)
    for m in mutants:
        assert m.code != src
        assert apply_edits(src.encode(), list(m.edits)).decode() == m.code
        assert len(m.operators) >= 1 and set(m.operators) <= set(OPERATORS)
    assert len({m.code for m in mutants}) == len(mutants)


def test_same_seed_same_mutants_across_processes(tmp_path):
    src = (ROOT / "curricula" / "demo" / "data" / "p00003" / "Python" / "s000000004.py").read_text()
    prog = tmp_path / "p.py"
    prog.write_text(src)
    here = [m.to_json() for m in mutate(src, n=20, seed=7)]
    out = subprocess.run(
        [sys.executable, "-m", "codeexecutor", "mutate", str(prog), "--seed", "7", "--jsonl"],
        capture_output=True,
        text=True,
        env={"PYTHONHASHSEED": "123", "PATH": "/usr/bin:/bin"},
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    there = [json.loads(line) for line in out.stdout.splitlines()]
    assert there == here
    assert [m.to_json() for m in mutate(src, n=20, seed=8)] != here


def test_unparsable_program_is_an_error():
    with pytest.raises(MutationError):
        mutate("x = (\n")


def test_unknown_operator_is_named():
    with pytest.raises(ValueError, match="XYZ"):
        mutate("x = 1\n", operators="CRP,XYZ")


# -- AST diff: --operators X changes only what X may change ------------------------------------

ALLOWED = {  # operator -> (AST node type holding the difference, field)
    "CRP": {("Constant", "value"), ("UnaryOp", "operand"), "Constant"},  # 5 -> -12 is a UnaryOp
    "AOD": {"UnaryOp"},
    "AOR": {("BinOp", "op")},
    "ASR": {("AugAssign", "op")},
    "BCR": {"Break", "Continue"},
    "COD": {"UnaryOp", ("Compare", "ops")},
    "LCR": {("BoolOp", "op")},
    "ROR": {("Compare", "ops")},
    "SIR": {("Slice", "lower"), ("Slice", "upper"), ("Slice", "step")},
    "OIL": {("For", "body"), ("While", "body")},
    "RIL": {("For", "iter")},
    "ZIL": {("For", "body"), ("While", "body")},
}


class _Binarize(ast.NodeTransformer):
    """`a and b and c` is one flat BoolOp in Python's AST; tree-sitter (and the mutant's
    parentheses) see ((a and b) and c). Compare both as left-nested binary nodes."""

    def visit_BoolOp(self, node):
        self.generic_visit(node)
        left = node.values[0]
        for right in node.values[1:]:
            left = ast.BoolOp(op=node.op, values=[left, right])
        return left


def parse_binary(code: str) -> ast.AST:
    return _Binarize().visit(ast.parse(code))


def ast_differences(a: ast.AST, b: ast.AST, out: list) -> None:
    """Where two trees differ: (parent type, field) or the type of a replaced node."""
    if type(a) is not type(b):
        out.append(type(a).__name__)
        return
    for fld, va in ast.iter_fields(a):
        if fld in ("ctx", "type_comment", "kind"):
            continue
        vb = getattr(b, fld)
        if isinstance(va, list):
            if len(va) != len(vb):
                out.append((type(a).__name__, fld))
                continue
            for x, y in zip(va, vb):
                if isinstance(x, ast.AST):
                    if type(x) is not type(y) and {type(x), type(y)} <= {ast.Break, ast.Continue}:
                        out.append(type(x).__name__)
                    elif type(x) is not type(y) and fld in ("ops", "body"):
                        out.append((type(a).__name__, fld))
                    else:
                        ast_differences(x, y, out)
                elif x != y:
                    out.append((type(a).__name__, fld))
        elif isinstance(va, ast.AST):
            if (
                fld == "iter"
                and isinstance(vb, ast.Call)
                and getattr(vb.func, "id", None) == "reversed"
                and len(vb.args) == 1
                and ast.dump(vb.args[0]) == ast.dump(va)
            ):
                out.append((type(a).__name__, fld))  # exactly reversed(<the original iterable>)
            elif type(va) is not type(vb) and fld == "op":
                out.append((type(a).__name__, fld))
            elif (va is None) != (vb is None):
                out.append((type(a).__name__, fld))
            else:
                ast_differences(va, vb, out)
        elif va is None or vb is None:
            if (va is None) != (vb is None):
                out.append((type(a).__name__, fld))
        elif va != vb:
            out.append((type(a).__name__, fld))


@pytest.mark.data
def test_operators_fire_and_change_only_their_kind_on_real_programs():
    fired = Counter()
    programs = real_programs(limit=150, seed=5)
    for sid, source, _ in programs:
        try:
            original = parse_binary(source)
        except SyntaxError:
            continue
        for name in OPERATORS:
            try:
                mutants = mutate(source, n=2, seed=1, operators=[name])
            except MutationError:
                break
            for m in mutants:
                assert not has_errors(parse(m.code.encode())), (sid, name)
                assert m.code != source
                assert set(m.operators) == {name}
                diffs: list = []
                ast_differences(original, parse_binary(m.code), diffs)
                assert diffs and set(diffs) <= ALLOWED[name], (sid, name, diffs)
                fired[name] += 1
    assert set(fired) == set(OPERATORS), fired


@pytest.mark.data
def test_every_mutant_of_real_programs_parses_and_differs():
    total = 0
    for sid, source, _ in real_programs(limit=200, seed=9):
        try:
            mutants = mutate(source, n=5, seed=0)
        except MutationError:
            continue
        for m in mutants:
            assert not has_errors(parse(m.code.encode())), sid
            compile(m.code, sid, "exec")
            assert m.code != source
            total += 1
    assert total > 500


def test_protected_spans_are_never_touched():
    src = "n = int('3 4'.split()[0])\nfor i in range(n):\n    x = i * 2 + 1\n"
    start = src.index("'3 4'")
    span = (start, start + len("'3 4'"))
    mutants = mutate(src, n=40, seed=0, protected=(span,))
    assert mutants
    for m in mutants:
        assert "'3 4'" in m.code
        assert all(
            not (e.start < span[1] and span[0] < e.end) and not (e.start == e.end and span[0] <= e.start <= span[1])
            for e in m.edits
        )
