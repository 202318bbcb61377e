"""Guided execution: values injected where code lacks them, coverage, lifted bodies, value events."""

import glob
import json
import os

import pytest

from codeexecutor import cli
from codeexecutor.execution import ExecStatus
from codeexecutor.execution.coverage import code_lines, covered_lines
from codeexecutor.execution.guided import Candidate, run_guided
from codeexecutor.generation.fill import DummyPredictor, EmptyPredictor
from eval.snippets import call_segment, compare, function_bodies

from .conftest import FIXTURES
from .test_sandbox import EXPECTED, VICTIM


class ByName:
    """A predictor for tests: ranked kinds per name, `object` for any other name."""

    name = "by-name"

    def __init__(self, table):
        self.table = table
        self.asked = []

    def predict(self, requests):
        self.asked += requests
        ranked = [self.table.get(f"{r.use}:{r.name}", self.table.get(r.name, ["object"])) for r in requests]
        return [[Candidate(*c) if isinstance(c, tuple) else Candidate(c) for c in kinds] for kinds in ranked]


FIGURE1 = """if not has_min_size(all_data):
    raise RuntimeError("not enough data")
train_len = int(len(all_data) * split)
train_data = all_data[:train_len]
print(len(train_data), train_data is all_data)
"""


def test_injected_values_let_the_snippet_run(pool):
    predictor = ByName(
        {
            "has_min_size": ["callable"],
            "call:has_min_size": ["object"],
            "all_data": [("list", "[1, 2, 3, 4]")],
            "split": [("float_pos", "0.5")],
        }
    )
    run = run_guided(pool, FIGURE1, "", predictor)
    assert run.result.status is ExecStatus.OK, run.result.error
    assert run.result.stdout == "2 False\n"
    assert [(i.name, i.use, i.kind) for i in run.injections][:3] == [
        ("has_min_size", "name", "callable"),
        ("all_data", "name", "list"),
        ("has_min_size", "call", "object"),
    ]
    assert run.covered_lines == [1, 3, 4, 5]  # line 2 never ran: the injected result is true
    assert run_guided(pool, FIGURE1, "", predictor).to_json() == run.to_json()  # deterministic
    asked = {r.name: r for r in predictor.asked}
    assert asked["all_data"].before.endswith("has_min_size(") and asked["all_data"].after.startswith("):")


def test_a_name_is_one_value_and_context_reaches_the_predictor(pool):
    run = run_guided(pool, "a = thing\nb = thing\nprint(a is b, thing.size)\n", "", ByName({"size": ["int_pos"]}))
    assert run.result.stdout == "True 1\n"
    assert [(i.name, i.use) for i in run.injections] == [("thing", "name"), ("size", "attribute")]


def test_missing_modules_and_the_standard_library(pool):
    src = "import notinstalled\nfrom other.sub import helper\nprint(re.sub('a', 'b', 'aa'), notinstalled.f(1))\n"
    run = run_guided(pool, src, "", ByName({"re": ["module"], "f": ["callable"], "helper": ["callable"]}))
    assert run.result.ok, run.result.error
    assert run.result.stdout == "bb <injected callable f>\n"  # f answers by its name: a callable
    kinds = {(i.name, i.kind) for i in run.injections}
    assert {("notinstalled", "module"), ("re", "module")} <= kinds


def test_injected_objects_unpack_index_and_iterate(pool):
    src = "a, b = thing\nc = thing[0]\nfor x in thing:\n    print(a, b, c, x, thing.__name__)\n"
    run = run_guided(pool, src, "", ByName({"thing": ["object"], "call:thing": ["int_pos"]}))
    assert run.result.ok, run.result.error
    assert run.result.stdout == "1 1 1 1 thing\n"  # two values for two names, one for a loop
    assert sorted(i.key for i in run.injections if i.use == "call") == [
        "name:thing[0]@1",
        "name:thing[0]@3",
        "name:thing[1]@1",
        "name:thing[]@2",
    ]


def test_tries_walk_to_the_next_candidate(pool):
    src = "x = f(3)\ny = x + 1\nprint(y)\n"
    table = {"f": ["str", "callable"], "call:f": ["str", "int_pos"]}
    once = run_guided(pool, src, "", ByName(table), tries=1)
    assert once.result.error.type == "TypeError" and once.covered_lines == []  # a string cannot be called
    more = run_guided(pool, src, "", ByName(table), tries=4)
    assert more.result.ok and more.result.stdout == "2\n" and more.covered_lines == [1, 2, 3]
    assert {(i.name, i.use, i.kind, i.rank) for i in more.injections} == {
        ("f", "name", "callable", 1),
        ("f", "call", "int_pos", 1),
    }
    assert 2 < more.tries <= 4  # f's next kind, then its result's next kind (a string cannot + 1)


def test_the_absorbing_floor_is_tried_second_and_kept_when_it_covers_more(pool):
    src = "n = size(items)\nif n.bit_length() > 2:\n    print('big')\nprint(n + 1)\n"
    wrong = {"size": ["callable", "absorb"], "call:size": [("int_pos", "1"), "absorb"]}
    once = run_guided(pool, src, "", ByName(wrong), tries=1)
    assert once.covered_lines == [1, 2, 4]  # 1 has one bit: line 3 never runs
    floor = run_guided(pool, src, "", ByName(wrong), tries=2)
    assert floor.tries == 2 and floor.covered_lines == [1, 2, 3, 4]  # everything absorbed: the `if` is true
    assert {(i.name, i.kind) for i in floor.injections} == {("size", "absorb"), ("items", "object")}  # its only kind
    branchy = "n = size(items)\nif n:\n    print('big')\nelse:\n    print('small')\n"
    right = {"size": ["callable", "absorb"], "call:size": [("int_pos", "7"), "absorb"]}
    kept = run_guided(pool, branchy, "", ByName(right), tries=2)
    assert kept.tries == 2 and kept.covered_lines == [1, 2, 3]  # the floor ran and covered as much
    assert "absorb" not in {i.kind for i in kept.injections}  # a tie: the predictor's own run is kept
    pure = run_guided(pool, src, "", ByName({"size": ["callable"], "call:size": [("int_pos", "1")]}), tries=2)
    assert pure.tries == 1 and pure.covered_lines == [1, 2, 4]  # no absorbing candidate offered: no floor
    dummy = run_guided(pool, src, "", DummyPredictor(), tries=6)
    assert dummy.tries == 1  # every value absorbed already: the floor would repeat the run


def test_literals_are_data_never_code(pool):
    bad = ByName({"path": [("str", "__import__('os').system('touch /tmp/codeexecutor_pwned')")]})
    run = run_guided(pool, "print(path)\n", "", bad)
    assert run.result.stdout == "a\n"  # the kind's default: the text was no literal
    assert not glob.glob("/tmp/codeexecutor_pwned*")


def test_baselines_empty_and_dummy(pool):
    empty = run_guided(pool, FIGURE1, "", EmptyPredictor())
    dummy = run_guided(pool, FIGURE1, "", DummyPredictor())
    assert empty.result.error.type == "TypeError"  # an empty object cannot be called
    assert dummy.result.ok and len(dummy.covered_lines) > len(empty.covered_lines)


class Modules:
    """Answers `module` for every value: the predictor that reaches for the most."""

    name = "modules"

    def predict(self, requests):
        return [[Candidate("module"), Candidate("callable")] for _ in requests]


@pytest.mark.parametrize("predictor", [DummyPredictor(), Modules()], ids=["dummy", "modules"])
@pytest.mark.parametrize("name", sorted(set(EXPECTED) - {"python2", "syntax_error"}))
def test_hostile_programs_stay_contained_with_fill(pool, name, predictor):
    os.makedirs(VICTIM, exist_ok=True)
    source = (FIXTURES / "hostile" / f"{name}.py").read_text()
    run = run_guided(pool, source, "", predictor, tries=1)  # one try: the timed-out fixtures cost seconds a run
    assert run.result.status in EXPECTED[name] | {ExecStatus.ERROR}, run.result
    if EXPECTED[name] == {ExecStatus.VIOLATION}:
        assert run.result.status is ExecStatus.VIOLATION
    assert os.path.isdir(VICTIM) and not glob.glob("/tmp/codeexecutor_pwned*")


def test_a_module_answer_never_imports_what_the_sandbox_refuses(pool):
    run = run_guided(pool, "print(type(_posixsubprocess).__name__, type(antigravity).__name__)\n", "", Modules())
    assert run.result.stdout == "InjectedModule InjectedModule\n"
    run = run_guided(pool, "print('abc'.encode('nosuchcodec'))\n", "", Modules())
    assert run.result.error.type == "LookupError"  # a library's own failed import is not the program's


def test_a_program_that_forges_its_report_is_not_trusted(pool):
    src = "t = thing\nf = t._fill[0]\nf.needs.append({'key': 'name:zz', 'use': 'name', 'name': 'zz', 'line': 'x'})\n"
    src += "class E(int):\n    def __lt__(self, other):\n        raise ValueError\nexit(E(5))\n"
    run = run_guided(pool, src, "", ByName({}), tries=2)
    assert run.result.status is ExecStatus.EXIT and run.result.fill["returned"] == "object"
    assert [i.name for i in run.injections] == ["thing"]


def test_coverage_counts_statements_that_finished():
    src = "x = f(\n    1,\n)\n# note\n\nif x:\n    y = 1\nelse:\n    y = 2\nz = y / 0\n"
    assert code_lines(src) == [1, 2, 3, 6, 7, 8, 9, 10]
    assert covered_lines(src, [1, 6, 9, 10], "error") == [1, 2, 3, 6, 8, 9]
    assert covered_lines(src, [1, 6, 9, 10], "ok") == [1, 2, 3, 6, 8, 9, 10]
    assert covered_lines("try:\n    a = 1\nexcept E:\n    pass\n", [2], "ok") == [1, 2]


def test_bodies_are_lifted_as_lexecutor_lifts_them():
    module = (
        "class C:\n    def m(self, a):\n        # keep me\n        if a:\n            return a, 1\n"
        "        def inner():\n            return 2\n        yield inner\n\n"
        "async def skipped():\n    return 1\n\ndef g():\n    nonlocal_free = 1\n    return\n"
    )
    bodies = {b.function: b for b in function_bodies(module)}
    assert set(bodies) == {"C.m", "C.m.inner", "g"}
    m = bodies["C.m"].source
    assert "# keep me" in m and "exit((a, 1))" in m and "    return 2" in m and "exit(inner)" in m
    assert bodies["C.m"].first_line == 4  # the body's first statement; its comment leads it
    assert bodies["C.m"].source.startswith("# keep me\nif a:")
    assert bodies["g"].source.endswith("exit()\n")


def test_fidelity_compares_lines_branches_and_kind():
    body = "if a:\n    b = 1\nelse:\n    b = 2\nexit(b)\n"
    same = compare(body, [1, 2, 5], "int_pos", [1, 2, 5], "int_pos")
    assert same["exact"] and same["branches_same"] == 1
    other = compare(body, [1, 2, 5], "int_pos", [1, 4, 5], "int_pos")
    assert not other["exact"] and other["branches"] == 1 and other["branches_same"] == 0

    class S:
        def __init__(self, line, depth):
            self.line, self.depth = line, depth

    steps = [S(1, 0), S(5, 1), S(6, 1), S(5, 2), S(6, 2), S(7, 1), S(2, 0)]
    assert call_segment(steps, 5, 7) == [5, 6, 7]


def test_value_events_of_a_real_run(pool):
    src = "import os\ndef f(a):\n    return a * 2\nx = f(3)\nprint(os.sep, 'ab'.upper(), x)\n"
    plain = pool.execute(src)
    recorded = pool.execute(src, record_values=True)
    assert recorded.steps == plain.steps and recorded.stdout == plain.stdout  # instrumenting changes nothing
    sites = recorded.fill["sites"]
    events = {(sites[s][4], sites[s][5], kind, lit) for s, kind, lit in recorded.values}
    assert ("name", "a", "int_pos", "3") in events and ("call", "f", "int_pos", "6") in events
    assert ("name", "os", "module", None) in events and ("call", "upper", "str", "'AB'") in events
    assert not any(name == "print" for _, name, _, _ in events)  # builtins are never missing


def test_exec_fill_on_the_command_line(tmp_path, capsys):
    prog = tmp_path / "snippet.py"
    prog.write_text(FIGURE1)
    assert cli.main(["exec", str(prog), "--fill", "dummy", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["status"] == "ok" and obj["covered_lines"] == [1, 3, 4, 5]
    assert {i["name"] for i in obj["injections"]} == {"has_min_size", "all_data", "split"}
    assert cli.main(["exec", str(prog), "--fill", "empty"]) == 0
    out = capsys.readouterr().out
    assert "injected (empty" in out and "has_min_size" in out and "covered: 0 of 5" in out


def test_exec_fill_refuses_bad_predictors(tmp_path, capsys):
    prog = tmp_path / "p.py"
    prog.write_text("print(x)\n")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text('{"value_model": true, "arch": "features", "feature_set": 2}')
    listed = tmp_path / "listed"
    listed.mkdir()
    (listed / "config.json").write_text("[1, 2]")
    for args, words in (
        (["--fill", str(broken)], "a broken value model"),
        (["--fill", str(listed)], "is not a value model"),
        (["--fill", str(tmp_path / "nope")], "no such model folder"),
        (["--fill", "models/codeexecutor-mini-cpu"], "is not a value model"),
        (["--fill", "dummy", "--tries", "0"], "--tries 0"),
    ):
        assert cli.main(["exec", str(prog), *args]) == 2
        err = capsys.readouterr().err
        assert words in err and len(err.strip().splitlines()) == 1


def _write_events(folder, split, rows):
    import gzip

    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(folder / f"{split}.jsonl.gz", "wt") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def _synthetic(n, seed):
    """Events whose kind follows from how the name is used after it: learnable, not by name."""
    import random

    rng = random.Random(seed)
    uses = [
        ("(", "callable", None),
        (".upper()", "str", "'abc'"),
        (" + 1", "int_pos", "3"),
        (".append(x)", "list", None),
    ]
    rows = []
    for _ in range(n):
        after, kind, literal = rng.choice(uses)
        name = f"v{rng.randrange(10_000)}"
        rows.append(
            {
                "name": name,
                "use": "name",
                "kind": kind,
                "literal": literal,
                "before": "y = ",
                "after": f"{after}\n",
                "package": "p",
                "corpus": "c-1.0",
            }
        )
    return rows


def test_train_values_learns_from_context_and_resumes(tmp_path, capsys):
    from codeexecutor.execution.guided import Request
    from codeexecutor.generation.fill import load_predictor

    data = tmp_path / "events"
    _write_events(data, "train", _synthetic(3000, 0))
    _write_events(data, "valid", _synthetic(300, 1))
    recipe = tmp_path / "r.yaml"
    recipe.write_text("buckets: 4096\ndim: 16\nffn: 16\nepochs: 30\nbatch: 64\nlr: 0.002\nminutes: 2\n")
    out = tmp_path / "model"
    assert cli.main(["train-values", "--recipe", str(recipe), "--data", str(data), "--out", str(out)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["best"]["top1"] >= 90, report  # names are all new: the context decides
    predictor = load_predictor(str(out))
    ranked = predictor.predict([Request("name:q", "name", "q123", None, 1, "y = ", ".upper()\n")])[0]
    assert ranked[0].kind == "str" and ranked[0].p > 0.5
    state = json.loads((out / "training.json").read_text())
    assert cli.main(["train-values", "--recipe", str(recipe), "--data", str(data), "--out", str(out), "--resume"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["best"] == report["best"] and json.loads((out / "training.json").read_text()) == state
    import torch

    state_file = tmp_path / "model.state" / "state.pt"
    state = torch.load(state_file, weights_only=False)
    state.pop("feature_set")  # a state saved before feature sets were recorded: set 1
    torch.save(state, state_file)
    assert cli.main(["train-values", "--recipe", str(recipe), "--data", str(data), "--out", str(out), "--resume"]) == 2
    assert "feature set 1" in capsys.readouterr().err
    recipe.write_text("layerz: 3\n")
    assert cli.main(["train-values", "--recipe", str(recipe), "--data", str(data), "--out", str(out)]) == 2
    assert "no field layerz" in capsys.readouterr().err


def test_build_values_splits_by_package_and_resumes(tmp_path, capsys):
    root = tmp_path / "tinypkg-1.0"
    (root / "tinypkg").mkdir(parents=True)
    (root / "LICENSE").write_text("MIT License\n")
    (root / "tinypkg" / "core.py").write_text(
        'def double(xs):\n    """\n    >>> double([1, 2])\n    [1, 2, 1, 2]\n    """\n    return xs + xs\n\n'
        'def shout(word):\n    """\n    >>> shout("hi")\n    \'HI!\'\n    """\n    return word.upper() + "!"\n'
    )
    out = tmp_path / "events"
    args = ["build", "values", "--from", str(root), "--out", str(out), "--test", "tinypkg"]
    assert cli.main(args) == 0
    capsys.readouterr()
    stats = json.loads((out / "stats.json").read_text())
    assert stats["splits"]["test"]["events"] > 0 and stats["splits"]["train"]["events"] == 0
    assert stats["licences"] == {"tinypkg-1.0": "MIT"}
    from codeexecutor.training.values import read_events

    events = {(r["name"], r["use"], r["kind"]) for r in read_events(str(out), "test")}
    assert ("xs", "name", "list") in events and ("word", "name", "str") in events and ("upper", "call", "str") in events
    size = (out / "events.journal").stat().st_size
    assert cli.main(args) == 0  # resumed: every unit was done, nothing is run again
    assert (out / "events.journal").stat().st_size == size
    assert cli.main(["build", "values", "--out", str(out)]) == 2
    assert "needs from" in capsys.readouterr().err


def test_value_features_read_bindings_returns_and_checks():
    from codeexecutor.modeling.value_features import features

    before = (
        "import datetime as dt\nfrom os import path\ndef pair(a):\n    return (a, a)\n"
        "items = []\nif isinstance(cfg, dict):\n    pass\nx, y = "
    )
    after = "\nn: int = 3\n"
    assert "ret=(," in features("pair", "call", before, after)  # what the function defined in the context returns
    assert "unpacked:call" in features("pair", "call", before, after)  # `x, y = pair(...)`
    assert "bound=import" in features("dt", "name", before, after)
    assert "bound=from" in features("path", "name", before, after)
    assert "asg=[" in features("items", "name", before, after)
    assert "isa=dict" in features("cfg", "name", before, after)
    assert "ann=int" in features("n", "name", before, after)
    unbound = features("zzz", "name", before, after)
    assert not any(f.startswith(("bound=", "ret=", "asg=", "isa=", "ann=")) for f in unbound)


def test_a_value_model_of_another_feature_set_is_refused(tmp_path, capsys):
    import shutil

    old = tmp_path / "old"
    shutil.copytree(glob.glob("models/codeexecutor-values")[0], old)
    config = json.loads((old / "config.json").read_text())
    config.pop("feature_set")  # a folder written before the feature set was recorded: set 1
    (old / "config.json").write_text(json.dumps(config))
    prog = tmp_path / "p.py"
    prog.write_text("print(x)\n")
    assert cli.main(["exec", str(prog), "--fill", str(old)]) == 2
    err = capsys.readouterr().err
    assert "feature set 1" in err and "train-values" in err and len(err.strip().splitlines()) == 1


def test_trace_fill_writes_the_guided_run_and_its_injections_to_the_viewer(tmp_path, capsys):
    prog, page = tmp_path / "snippet.py", tmp_path / "page.html"
    prog.write_text(FIGURE1)
    argv = ["trace", str(prog), "--model", "models/codeexecutor-mini-cpu", "--fill", "dummy", "--html", str(page)]
    assert cli.main([*argv, "--max-length", "64"]) == 0
    out = capsys.readouterr().out
    assert "the real run was guided (dummy)" in out and "has_min_size" in out
    html = page.read_text()
    data = json.loads(html.split('id="trace-data">')[1].split("</script>")[0])
    assert {i["name"] for i in data["injections"]} == {"has_min_size", "all_data", "split"}
    assert data["real"]["label"] == "guided real run (dummy)" and data["real"]["status"] == "ok"
    assert "Values injected into the real run" in html
    for extra, words in (
        (["--fill", str(tmp_path / "nope")], "no such model folder"),  # refused before any decoding
        (["--fill", "--batch", str(prog)], "leave it out with --batch"),
    ):
        assert cli.main(["trace", str(prog), "--model", "models/codeexecutor-mini-cpu", *extra]) == 2
        err = capsys.readouterr().err
        assert words in err and len(err.strip().splitlines()) == 1


def test_debug_fill_guides_the_real_walk(overfit_model):
    from codeexecutor.debugger import Session

    path, _ = overfit_model
    session = Session(FIGURE1, model=str(path), fill="dummy")
    assert (
        session.walk_is_real
        and session.real_run[-1].exception is None
        and any("injected: line 1 name has_min_size" in n for n in session.notes)
    )
    assert {i["name"] for i in session.real()["injections"]} == {"has_min_size", "all_data", "split"}
    plain = Session(FIGURE1, model=str(path))
    assert plain.real_run[-1].exception == "NameError" and not plain.injections  # unguided, it stops at line 1
