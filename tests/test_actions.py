"""The debugger's actions as trained tasks: the rows drawn from real runs, their target text,
the loss that starts at the landing, and the decoding that asks for one step."""

import json
import random

import numpy as np

from .test_debugger import CALLS, _real


def _row(code: str, stdin: str = "") -> dict:
    from codeexecutor.execution import execute

    result = execute(code, stdin)
    steps = [{"line": s.line, "state": dict(s.state), "output": s.output, "depth": s.depth} for s in result.steps]
    error = ""
    if result.error is not None:
        error = json.dumps({"type": result.error.type, "message": "", "line": result.error.line})
    status = "error" if result.error is not None else "ok"
    return {
        "id": "p",
        "problem_id": "p",
        "split": "train",
        "task": "codenet",
        "code": code,
        "steps": json.dumps(steps),
    } | {
        "status": status,
        "error": error,
    }


def test_an_action_row_gives_the_real_steps_then_the_marker_then_where_the_run_lands():
    from codeexecutor.execution.records import Step
    from codeexecutor.modeling.profiles import Profile

    profile = Profile("exact", state="delta", order="end")
    events = _real(CALLS)  # lines 1, 4, 2, 3, 5, 6, 7 (f's steps before the line that called it)
    steps = [{"line": e.line, "state": e.state, "output": e.output, "depth": e.depth} for e in events]
    # `next` from line 4 (x = 3) skips f's two steps and lands on line 5, y written as a delta
    row = {"code": CALLS, "task": "codenet", "steps": json.dumps(steps[:2] + [steps[4]]), "status": "ok", "error": ""}
    row["action"] = json.dumps({"name": "next", "at": 2, "order": "end"})
    _, target = profile.example(row)
    given, landing = target.split(" <mask> next ")
    assert given == profile.trace([Step(**s) for s in steps[:2]], None, CALLS)  # the real steps as a trace writes them
    assert given.count("<line>") == 2 and "<2>" not in given  # f's lines are not given
    assert landing.startswith("<line> <4> <delta> y : 7 </state>")
    # a crash ends the walk: `continue` to a line that never runs lands on the exception
    crash = _real("a = 1\nb = a / 0\nc = 2\n")
    row = {"code": "a = 1\nb = a / 0\nc = 2\n", "task": "codenet", "status": "error"}
    row |= {"steps": json.dumps([{"line": 1, "state": crash[0].state, "depth": 0}])}
    row |= {
        "error": json.dumps({"type": "ZeroDivisionError", "line": 2}),
        "action": json.dumps({"name": "continue", "at": 1, "line": 3, "order": "end"}),
    }
    assert profile.example(row)[1].endswith("<mask> continue <2> <exception> <1> ZeroDivisionError")
    # a format without the crash step has no step to land on: the trace ends at the marker
    quiet = Profile("exact", exception_step=False, state="delta", order="end")
    assert quiet.example(row)[1].endswith("<mask> continue <2>")


def test_drawn_actions_land_where_the_real_run_does_and_keep_their_split():
    from codeexecutor.debugger.events import real_events, target
    from codeexecutor.execution.records import Step
    from curricula.actions import action_rows

    row = _row(CALLS)
    rows = []
    rng = random.Random(0)
    for _ in range(20):
        rows += action_rows(row, rng, per_program=2, order="end", max_chars=2000)
    assert {json.loads(r["action"])["name"] for r in rows} == {"next", "out", "continue"}
    events = _real(CALLS)
    for r in rows:
        spec = json.loads(r["action"])
        at, steps = spec["at"], json.loads(r["steps"])
        assert r["split"] == "train" and r["source_id"] == "p"
        assert [s["line"] for s in steps[:at]] == [e.line for e in events[:at]]  # the real steps, in order
        depth = events[at - 1].depth if at else 0
        j = target(events, at - 1, depth, spec["name"], spec.get("line"))
        assert steps[at]["line"] == events[j].line and steps[at]["state"] == events[j].state
    given = real_events([Step(**s) for s in json.loads(rows[0]["steps"])], None, "end")
    assert given  # the steps read back as events
    tight = action_rows(row, random.Random(0), 6, "end", max_chars=10)
    assert tight and all(json.loads(r["action"])["at"] == 0 for r in tight)  # only draws from the start fit


def test_an_action_row_bears_loss_from_its_landing_only_and_other_rows_as_before():
    from codeexecutor.modeling.rows import pack_row

    marker, line, exc = 4, 10, 11
    weight_of = np.ones(20, dtype=np.float32)
    code = [0, 7, 2]
    plain = [5, line, 12, 13, line, 14, 2]
    asked = [5, line, 12, 13, marker, 15, line, 16, 17, 2]  # <mask0> step <mask> next | landing </s>
    cut = [5, line, 12, 13, marker, 15, 2]  # cut before its landing: nothing to learn
    before = pack_row([code, code], [plain, plain], 64, 1, weight_of)["weights"]
    row = pack_row([code, code, code], [plain, asked, cut], 64, 1, weight_of, (marker, {line, exc}))
    w, labels = row["weights"], row["labels"]
    first = len(code) + len(plain)
    assert np.array_equal(w[:first], before[:first])  # a trace without the marker: unchanged
    start = first + len(code)  # the asked trace's <mask0>
    trained = [int(labels[i]) for i in range(start, start + len(asked)) if w[i] > 0]
    assert trained == [line, 16, 17, 2]  # the landing step and </s>
    cut_start = start + len(asked) + len(code)
    assert not w[cut_start : cut_start + len(cut)].any()
    assert w[start - 1] == 0 and w.sum() == before[: len(code) + len(plain)].sum() + 4


def test_a_model_taught_the_actions_answers_each_with_one_step(demo_data, tmp_path):
    """A tiny model trained on action rows until it reproduces them answers every one of them,
    through the marker, with the real landing: the path from the row's text to `taught`'s
    decoding (prefix, marker, one step, the delta expanded against the given steps) holds."""
    import datasets

    from codeexecutor.debugger.events import row_events
    from codeexecutor.debugger.taught import taught
    from codeexecutor.generation.api import cached_generator
    from codeexecutor.modeling.profiles import Profile
    from curricula.actions import action_rows

    from .conftest_data import _overfit

    profile = Profile("exact", state="delta", order="end")
    rng = random.Random(1)
    asked = []
    for r in datasets.load_from_disk(str(demo_data / "codenetmut" / "codenetmut"))["train"]:
        if len(r["code"]) < 300:
            asked += [a for a in action_rows(r, rng, 1, "end", 400) if json.loads(a["action"])["at"] > 0]
        if len(asked) == 6:
            break
    pairs = [profile.example(a) for a in asked]
    assert all(len(t) < 600 for _, t in pairs)
    _overfit(pairs, tmp_path / "m", profile, length=256, config={"debugger_actions": "taught"})
    gen = cached_generator(str(tmp_path / "m"))
    for a in asked:
        spec = json.loads(a["action"])
        events = row_events(a, "end")
        path, real = events[: spec["at"]], events[spec["at"]]
        got = taught(gen, a["code"], gen.code_input(a["code"], "codenet"), path, spec["name"], spec.get("line"))[0]
        assert got is not None and got.line == real.line and got.state == real.state, (spec, got, real)
    # a session on such a model asks the action so: walked (for real) to the position, the action
    # lands where the real run does, in one step of decoding
    from codeexecutor.debugger.session import Session

    for a in asked[:3]:
        spec = json.loads(a["action"])
        s = Session(a["code"], generator=gen, actions="taught")
        for _ in range(spec["at"]):
            s.step()
        if spec["name"] == "continue":
            answer = s.run_to(spec["line"])
        else:
            answer = s.next() if spec["name"] == "next" else s.out()
        assert answer["asked"] == "taught"
        assert answer["predicted"]["line"] == answer["real"]["line"] and answer["agree"], answer
    s = Session(asked[0]["code"], generator=gen, actions="taught", real=False)  # no real steps to give
    assert s.next()["asked"] == "imposed"


def test_a_build_of_actions_keeps_splits_and_a_model_trained_on_it_says_so(demo_data, tmp_path):
    from types import SimpleNamespace

    import datasets

    from codeexecutor.training.setup import trained_actions
    from curricula.build import build

    stats = build("actions", str(tmp_path / "actions"), {"from": str(demo_data / "codenetmut"), "per_program": 2})
    assert stats["kind"] == "actions" and set(stats["datasets"]) == {"codenetmut", "errors"}
    built = datasets.load_from_disk(str(tmp_path / "actions" / "codenetmut"))
    source = datasets.load_from_disk(str(demo_data / "codenetmut" / "codenetmut"))
    for split, rows in built.items():
        assert len(rows) == stats["datasets"]["codenetmut"][split] > 0
        assert {r["problem_id"] for r in rows} <= set(source[split]["problem_id"])  # held-out problems stay held out

    def cur(*paths):
        return SimpleNamespace(stages=[SimpleNamespace(sources=[SimpleNamespace(path=p) for p in paths])])

    assert trained_actions(cur(str(demo_data / "codenetmut" / "codenetmut"))) is None
    assert (
        trained_actions(cur(str(demo_data / "tutorial" / "tutorial"), str(tmp_path / "actions" / "errors"))) == "taught"
    )


def test_a_curriculum_that_cannot_train_its_actions_is_refused_and_so_is_a_useless_build(demo_data, tmp_path):
    from types import SimpleNamespace

    import pytest

    from codeexecutor.errors import ConfigError, UsageError
    from codeexecutor.modeling.profiles import Profile
    from codeexecutor.training.setup import check_action_sources
    from curricula.build import build

    out = str(tmp_path / "actions")
    build("actions", out, {"from": str(demo_data / "codenetmut"), "per_program": 1})

    def cur(max_tokens=1024, hardest=None):
        source = SimpleNamespace(path=out + "/codenetmut", hardest=hardest)
        return SimpleNamespace(
            stages=[SimpleNamespace(name="s", sources=[source])], train=SimpleNamespace(max_tokens=max_tokens)
        )

    end, start = Profile("exact", state="delta", order="end"), Profile("exact", state="delta", order="start")
    check_action_sources(cur(), end)
    with pytest.raises(ConfigError, match="--order start"):
        check_action_sources(cur(), start)
    with pytest.raises(ConfigError, match="max_tokens"):
        check_action_sources(cur(max_tokens=None), end)
    with pytest.raises(ConfigError, match="hardest"):
        check_action_sources(cur(hardest=10), end)
    for options, words in (
        ({"per_program": 0}, "at least 1"),
        ({"limit": -1}, "at least 1"),
        ({"order": "sideways"}, "end or start"),
    ):
        with pytest.raises(UsageError, match=words):
            build("actions", str(tmp_path / "x"), {"from": str(demo_data / "codenetmut"), **options})
    with pytest.raises(UsageError, match="is the --from folder"):
        build("actions", str(demo_data / "codenetmut"), {"from": str(demo_data / "codenetmut")})
    with pytest.raises(UsageError, match="no whole runs"):
        build("actions", str(tmp_path / "y"), {"from": out})


def test_an_actions_build_started_again_keeps_what_it_finished(demo_data, tmp_path):
    """A build killed after its first dataset draws only the rest when started again with
    the same options; other options draw everything anew."""
    import json
    import shutil

    from curricula.actions import build_actions

    out = tmp_path / "actions"
    first = build_actions(str(out), str(demo_data / "codenetmut"), per_program=2)
    stats = json.loads((out / "stats.json").read_text())
    assert stats["datasets"] == first["datasets"] and set(first["datasets"]) == {"codenetmut", "errors"}
    kept = (out / "codenetmut").stat().st_mtime_ns
    shutil.rmtree(out / "errors")  # as if killed while drawing the second dataset: neither written nor recorded
    for key in ("datasets", "drawn"):
        del stats[key]["errors"]
    (out / "stats.json").write_text(json.dumps(stats))
    second = build_actions(str(out), str(demo_data / "codenetmut"), per_program=2)
    assert (out / "codenetmut").stat().st_mtime_ns == kept and (out / "errors").is_dir()
    assert second["datasets"] == first["datasets"]
    build_actions(str(out), str(demo_data / "codenetmut"), per_program=1)  # other options: drawn again
    assert (out / "codenetmut").stat().st_mtime_ns != kept
    kept = (out / "codenetmut").stat().st_mtime_ns
    stats = json.loads((out / "stats.json").read_text())
    stats["of"]["codenetmut"] = "train:an-older-build"  # as if the source was built again since
    (out / "stats.json").write_text(json.dumps(stats))
    build_actions(str(out), str(demo_data / "codenetmut"), per_program=1)
    assert (out / "codenetmut").stat().st_mtime_ns != kept
