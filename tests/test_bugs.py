"""Realistic bugs (mutation/bugs.py), the errors set they build (curricula/bugs.py), the crash
detector (modeling/detector.py, training/detector.py) and the verdict `trace` reports."""

import json
import random

import pytest

from codeexecutor.generation.decoding import Decoding
from curricula.common import BuildSetup
from mutation.bugs import BUGS, inject
from mutation.operators import OPERATORS
from mutation.parsing import apply_edits, parse

from .conftest import ROOT

EXAMPLES = [(name, before, after) for name, bug in BUGS.items() for before, after in bug.examples()]


def test_every_bug_class_has_examples_and_a_name_apart_from_the_operators():
    assert len(BUGS) >= 12
    assert not set(BUGS) & set(OPERATORS)
    assert {name for name, _, _ in EXAMPLES} == set(BUGS)


@pytest.mark.parametrize("name,before,after", EXAMPLES)
def test_bug_examples(name, before, after):
    bug, data = BUGS[name], before.encode()
    made = [apply_edits(data, bug.apply(data, s, random.Random(0))).decode() for s in bug.sites(parse(data).root_node)]
    assert after in made


PROGRAM = """import math
N = int('3')
A = list(map(int, '1 2 3'.split()))
total = 0
for i in range(N):
    total += A[i]
B = sorted(A)
a, b = B[0], B[-1]
print(' '.join(map(str, B)), 'sum=' + str(total), total / N, math.sqrt(b))
"""


def test_inject_makes_one_bug_per_variant_that_parses_and_differs():
    variants = inject(PROGRAM, per_bug=2)
    assert {v.bug for v in variants} >= {
        "DCV",
        "NSP",
        "XRD",
        "OBR",
        "OBI",
        "MSN",
        "UBA",
        "RMI",
        "NON",
        "WUP",
        "MSI",
        "UDV",
    }
    codes = [v.code for v in variants]
    assert len(set(codes)) == len(codes) and PROGRAM not in codes
    for v in variants:
        compile(v.code, "<v>", "exec")
        assert {e.op for e in v.edits} == {v.bug}
        assert 1 <= v.line <= len(v.code.splitlines())
    assert inject(PROGRAM, per_bug=2) == variants  # reproducible


def test_protected_literals_are_kept_whole():
    spans = [(PROGRAM.index("'3'"), PROGRAM.index("'3'") + 3), (PROGRAM.index("'1 2 3'"), PROGRAM.index("'1 2 3'") + 7)]
    for v in inject(PROGRAM, per_bug=4, protected=tuple(spans)):
        assert "'3'" in v.code and "'1 2 3'" in v.code
    # the conversion around a protected literal can still be dropped: it is not the literal
    assert any(v.bug == "DCV" and "N = '3'" in v.code for v in inject(PROGRAM, per_bug=4, protected=tuple(spans)))


def test_the_variants_crash_as_their_class_says():
    from codeexecutor.execution import ExecutorPool

    by_bug = {}
    with ExecutorPool(workers=2) as pool:
        for v in inject(PROGRAM, per_bug=3):
            res = pool.execute(v.code)
            if res.error is not None:
                by_bug.setdefault(v.bug, set()).add(res.error.type)
    assert "NameError" in by_bug["MSN"] and "NameError" in by_bug["RMI"]
    assert "EOFError" in by_bug["XRD"] and "ValueError" in by_bug["WUP"]
    assert by_bug["DCV"] & {"TypeError"} and by_bug["NSP"] & {"ValueError"}
    for bug, types in by_bug.items():
        assert types & set(BUGS[bug].crashes_with) or bug in ("OBR", "UBA", "NON"), (bug, types)


@pytest.fixture(scope="module")
def bugs_build(tmp_path_factory):
    from curricula.bugs import BugsBuilder

    out = tmp_path_factory.mktemp("bugs") / "build"
    stats = BugsBuilder([str(ROOT / "curricula" / "demo")], str(out), per_bug=1, setup=BuildSetup(workers=2)).run(
        progress=False
    )
    return out, stats


def test_bugs_build_counts_how_each_crash_came_about(bugs_build):
    from codeexecutor.training.crash_data import read_rows

    out, stats = bugs_build
    rows = read_rows(str(out))
    assert rows and any(r["crashed"] for r in rows) and any(not r["crashed"] for r in rows)
    assert {r["kind"] for r in rows} == {"original", "bug"}
    for r in rows:
        if r["crashed"]:
            assert r["type"] and 1 <= r["line"] <= len(r["code"].splitlines())
    crashes = sum(n for per in stats["per_operator_status"].values() for k, n in per.items() if k.startswith("error:"))
    assert crashes and stats["class_mix"]["crashes"] >= crashes
    assert set(stats["per_operator_status"]) <= set(BUGS)
    assert "bieber" in next(iter(stats["class_mix"]["percent"].values()))


def test_static_baseline_finds_undefined_names_and_reads():
    from eval.crashes import static_verdict

    assert static_verdict("a = 1\nprint(b)\n") == ("NameError", 2)
    assert static_verdict("import math\nprint(math.pi)\n") == (None, None)
    assert static_verdict("x = input()\nprint(y)\n") == ("EOFError", 1)
    assert static_verdict("def f(n):\n    return n\nprint(f(2))\n") == (None, None)


def _synthetic(generator, n=48):
    """Programs that crash with a NameError at a line that reads an unbound name, beside clean ones."""
    rng = random.Random(0)
    out = []
    for i in range(n):
        k = rng.randrange(1, 4)
        lines = [f"v{j} = {rng.randrange(9)}" for j in range(k)]
        crashed = i % 2 == 0
        lines.append("print(zz + 1)" if crashed else f"print(v{k - 1} + 1)")
        lines.append("print('done')")
        code = "\n".join(lines)
        out.append(
            {
                "id": f"p{i}",
                "code": code,
                "seen": code,
                "ids": generator.encoder.code(generator.code_input(code)),
                "offset": 0,
                "crashed": crashed,
                "type": "NameError" if crashed else None,
                "line": k + 1 if crashed else None,
            }
        )
    return out


def test_detector_learns_crash_kind_and_line_to_a_criterion(shipped_generator):
    import torch

    from codeexecutor.modeling.detector import CrashDetector
    from codeexecutor.modeling.line_facts import FACTS
    from codeexecutor.training.detector import _batch, _features, _loss, evaluate_net

    examples = _synthetic(shipped_generator)
    _features(shipped_generator, examples, progress=False)
    assert all(e["numbers"] == list(range(1, len(e["code"].splitlines()) + 1)) for e in examples)
    kinds = ["NameError", "other"]
    torch.manual_seed(0)
    net = CrashDetector(shipped_generator.model.config.hidden_size, kinds, layers=1, dropout=0.0, facts=FACTS)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    figures = {}
    for step in range(600):  # a cap, not a count: it stops at the criterion
        loss = _loss(net, _batch(examples, {k: i for i, k in enumerate(kinds)}))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 20 == 19:
            figures = evaluate_net(net, examples, kinds, threshold=0.5)
            if figures["detection_accuracy"] == 100 and figures["localisation_accuracy"] == 100:
                break
    assert figures["detection_accuracy"] == 100 and figures["localisation_accuracy"] == 100, figures


def test_verdict_is_the_detectors_and_names_a_disagreement():
    from codeexecutor.generation.api import one_verdict
    from codeexecutor.modeling.detector import Verdict

    crash = Verdict(0.9, True, "NameError", 0.8, 4, 0.7)
    error, note = one_verdict(None, crash, 1, True)
    assert error == {"type": "NameError", "line": 3, "probability": 0.9}
    assert "detector predicts NameError at line 3" in note and "no crash" in note
    assert one_verdict({"type": "NameError", "line": 3}, crash, 1, True) == (error, None)
    clean = Verdict(0.1, False, "NameError", 0.8, 4, 0.7)
    assert one_verdict(None, clean, 0, True) == (None, None)
    error, note = one_verdict({"type": "TypeError", "line": 2}, clean, 0, True)
    assert error is None and "TypeError at line 2" in note
    assert one_verdict({"type": "TypeError", "line": 2}, None, 0, True) == ({"type": "TypeError", "line": 2}, None)


def test_train_detector_saves_a_detector_trace_reports(bugs_build, tmp_path):
    from codeexecutor.generation.api import trace_programs
    from codeexecutor.training.detector import DetectorRecipe, train_detector

    out, _ = bugs_build
    model = tmp_path / "model"
    recipe = DetectorRecipe(layers=1, minutes=0.3, eval_every=5, max_steps=10, batch=8)
    report = train_detector(
        str(ROOT / "models" / "codeexecutor-mini-cpu"), str(out), str(model), recipe, progress=False
    )
    assert report["steps"] == 10
    info = json.loads((model / "detector.json").read_text())
    assert info["kinds"][-1] == "other" and 0 < info["threshold"] < 1
    rep = trace_programs([{"code": "a = 1\nprint(b)\n"}], str(model), decoding=Decoding(max_length=16))[0]
    assert rep["verdict"] == "detector" and 0 <= rep["crash_probability"] <= 1
    assert rep["error"] is None or set(rep["error"]) == {"type", "line", "probability"}
    assert all(1 <= s["line"] <= 2 for s in rep["steps"])


def test_the_functions_bugs_join_the_detectors_training(bugs_build, tmp_path):
    from codeexecutor.errors import UsageError
    from codeexecutor.training.detector import DetectorRecipe, train_detector
    from curricula.bugs import FunctionBugsBuilder

    out, _ = bugs_build
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "LICENSE").write_text("MIT License\n")
    for k in range(6):  # modules split by their path: six, so that some are in train
        (package / f"mod{k}.py").write_text(
            f'def total{k}(xs, n):\n    """\n    >>> total{k}([1, 2, 3], 3)\n    6\n    """\n'
            "    s = 0\n    for i in range(n):\n        s += xs[i]\n    return s\n\n\n"
            f'def head{k}(xs):\n    """\n    >>> head{k}([3, 4])\n    3\n    """\n'
            "    first, *rest = xs\n    return first\n"
        )
    functions = tmp_path / "fbugs"
    FunctionBugsBuilder([str(package)], str(functions), per_bug=2, humaneval=None, setup=BuildSetup(workers=1)).run(
        progress=False
    )
    model = str(ROOT / "models" / "codeexecutor-mini-cpu")
    small = dict(layers=1, minutes=0.3, eval_every=5, max_steps=5, batch=8)
    alone = train_detector(model, str(out), str(tmp_path / "a"), DetectorRecipe(**small), progress=False)
    both = DetectorRecipe(**small, functions=str(functions))
    joined = train_detector(model, str(out), str(tmp_path / "b"), both, progress=False)
    assert joined["train_programs"] > alone["train_programs"]
    with pytest.raises(UsageError, match="--functions"):
        train_detector(model, str(out), str(tmp_path / "c"), DetectorRecipe(**small, functions=str(package)))


@pytest.fixture(scope="module")
def shipped_generator():
    from codeexecutor.generation.search import TraceGenerator

    return TraceGenerator(str(ROOT / "models" / "codeexecutor-mini-cpu"), device="cpu")


def test_debug_crash_command_reports_the_detectors_verdict():
    from codeexecutor.debugger.cli import act
    from codeexecutor.debugger.session import Session

    model = str(ROOT / "models" / "codeexecutor-mini-cpu")
    session = Session("total = 0\nfor i in range(3):\n    total += i\nprint(totl)\n", model=model, real=False)
    answer = act(session, "crash")
    assert answer["verdict"] == "detector" and 0 <= answer["crash_probability"] <= 1
    assert (answer["error"]["type"], answer["error"]["line"]) == ("NameError", 4)
    gone = Session("import fractions\nprint(fractions.gcd(4, 6))\n", model=model, real=False)
    answer = act(gone, "crash")
    assert answer["verdict"] == "interpreter" and answer["error"]["type"] == "AttributeError"
    assert answer["error"]["line"] == 2


def test_off_by_one_edits_keep_their_grouping_and_unpacking_needs_a_spare_name():
    from mutation.parsing import apply_edits

    def made(name, src):
        data = src.encode()
        bug = BUGS[name]
        return [
            apply_edits(data, bug.apply(data, s, random.Random(0))).decode() for s in bug.sites(parse(data).root_node)
        ]

    assert "print(a[(x >> 1) + 1])" in made("OBI", "print(a[x >> 1])")
    assert "for i in range((n if c else 2) + 1):\n    pass" in made("OBR", "for i in range(n if c else 2):\n    pass")
    assert "for i in range(n - 1 + 1):\n    pass" in made("OBR", "for i in range(n - 1):\n    pass")
    crowded = "c = d = z = rest = tmp = x2 = 0\na, b = 1, 2\n"
    assert made("WUP", crowded) == []


def test_the_verdict_names_a_different_type_on_the_same_line():
    from codeexecutor.generation.api import one_verdict
    from codeexecutor.modeling.detector import Verdict

    error, note = one_verdict({"type": "TypeError", "line": 3}, Verdict(0.9, True, "NameError", 0.8, 3, 0.7), 0, True)
    assert error["type"] == "NameError" and "TypeError at line 3" in note


def test_detector_answers_an_empty_program_and_skips_a_description(shipped_generator, tmp_path):
    from codeexecutor.modeling.detector import Detector

    detector = Detector.load(
        str(ROOT / "models" / "codeexecutor-mini-cpu"), shipped_generator.model, shipped_generator.encoder
    )
    empty, described = detector.predict(["", '"""N M"""\nprint(totl)\n'], [0, 1])
    assert empty.line is None and 0 <= empty.probability <= 1
    assert described.crashed and (described.type, described.line) == ("NameError", 2)  # the program's line 2


def test_a_name_this_interpreter_lacks_is_the_verdict(shipped_generator):
    from codeexecutor.modeling.detector import Detector

    detector = Detector.load(
        str(ROOT / "models" / "codeexecutor-mini-cpu"), shipped_generator.model, shipped_generator.encoder
    )
    code = "a, b = map(int, '4 6'.split())\nfrom fractions import gcd\nprint(gcd(a, b))\n"
    checked, alone = detector.predict([code], check=True)[0], detector.predict([code], check=False)[0]
    assert (checked.crashed, checked.type, checked.line, checked.source) == (True, "ImportError", 2, "interpreter")
    assert checked.probability >= alone.probability and alone.source == "detector"
    assert checked.to_json()["source"] == "interpreter"
    from codeexecutor.generation.api import trace_programs

    rep = trace_programs(
        [{"code": code}], str(ROOT / "models" / "codeexecutor-mini-cpu"), decoding=Decoding(max_length=16)
    )
    assert (
        rep[0]["verdict"] == "interpreter" and rep[0]["error"]["type"] == "ImportError" and rep[0]["error"]["line"] == 2
    )


def test_real_crashes_are_the_splits_own_and_the_figures_name_the_majority(bugs_build):
    """`real` holds the crashing submissions of the split's own problems; the figures carry
    the balanced accuracy and the majority answer's detection beside the plain one."""
    from eval.crashes import crash_sets, figures

    out, _ = bugs_build
    sets = crash_sets(str(out), "test")
    real, everywhere = sets["real"], sets["real_every_split"]
    assert {r["split"] for r in real} == {"test"} and len(everywhere) >= len(real)
    rows = [{"type": "NameError", "line": 2, "crashed": True}] * 3 + [{"type": None, "line": None, "crashed": False}]
    always = figures([("NameError", 2)] * 4, rows)
    assert always["detection_accuracy"] == 75 and always["majority_detection"] == 75
    assert always["balanced_accuracy"] == 50
    right = figures([("NameError", 2)] * 3 + [(None, None)], rows)
    assert right["balanced_accuracy"] == 100


def test_a_recursion_that_never_ends_is_kept_as_its_recursion_error():
    """The trace's step cap stops an unbounded recursion first; the bug's run goes on
    untraced to the RecursionError a judge sees, at the recursive call's line."""
    from codeexecutor.execution import ExecutorPool
    from curricula.common import run_to_its_end

    (before, after), *_ = BUGS["URC"].examples()
    code = after + "\n\nprint(f(5))\n"
    with ExecutorPool(workers=1) as pool:
        traced, kept, fine = (
            pool.execute(code),
            run_to_its_end(pool, code),
            run_to_its_end(pool, before + "\n\nprint(f(5))\n"),
        )
    assert traced.status.value == "trace_limit" and traced.error is None
    assert (kept.status.value, kept.error.type, kept.error.line) == ("error", "RecursionError", 4)
    assert len(kept.steps) == len(traced.steps) and fine.ok and fine.stdout == "120\n"
