"""`codeexecutor pretrain --recipe`: the phases from a missing dataset to a scored model with its
card, the run carried on with --resume, stage steps fitted to --minutes, and the recipe's
bad input refused in one line before anything is written."""

import json
import os
import subprocess
import sys

import pytest
import yaml

from .conftest import ROOT

pytestmark = pytest.mark.integration  # pretrain end to end: its phases, the training child killed and carried on

pytest.importorskip("torch")


def _recipe(tmp_path, data_dir, **extra) -> str:
    recipe = {
        "model": {"preset": "tiny", "vocab_size": 400, "max_code_length": 128, "max_trace_length": 256, "dropout": 0.0},
        "train": {
            "output_dir": str(tmp_path / "unused"),
            "max_tokens": 1024,
            "log_every": 2,
            "save_every": 2,
            "eval_examples": 0,
        },
        "data": {
            "dir": str(data_dir),
            "builds": {
                "codenetmut": {"kind": "codenetmut", "codenet": [str(ROOT / "curricula" / "demo")], "mutants": 2}
            },
        },
        "tokenizer": {"sample": 400},
        "score": {"limit": 3, "sets": ["codenetmut"]},
        "stages": [
            {
                "name": "first",
                "steps": 3,
                "lr": 1e-3,
                "warmup": 1,
                "sources": [{"path": "codenetmut/codenetmut", "task": "codenet"}],
            },
            {
                "name": "second",
                "steps": 3,
                "lr": 1e-3,
                "warmup": 1,
                "sources": [
                    {"path": "codenetmut/codenetmut", "task": "codenet"},
                    {"path": "codenetmut/errors", "task": "codenet"},
                ],
            },
        ],
    }
    for key, value in extra.items():
        recipe[key] = value
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return str(path)


def _pretrain(*args, timeout=900):
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "2", "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "codeexecutor", "pretrain", *map(str, args)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_pretrain_builds_tokenizes_trains_scores_and_resumes(tmp_path):
    data, out = tmp_path / "data", tmp_path / "out"
    recipe = _recipe(tmp_path, data)
    flex = ("--set", "model.attention=flex")  # no CUDA here: the tile path, and the run says so
    prepared = _pretrain("--recipe", recipe, "--out", out, "--until", "tokenize", "--minutes", "5", *flex)  # as a pack
    assert prepared.returncode == 0 and prepared.stdout.splitlines()[-1] == str(out), prepared.stderr[-3000:]
    assert list(json.loads((out / "pretrain.json").read_text())["phases"]) == ["build", "tokenizer", "tokenize"]
    assert not (out / "run").exists() and "--resume carries on" in prepared.stderr
    # until the training begins the schedule may change: the tokens are kept, their curriculum written again
    tuned = _pretrain(
        "--recipe",
        recipe,
        "--out",
        out,
        "--until",
        "tokenize",
        "--resume",
        "--minutes",
        "5",
        *flex,
        "--set",
        "stages.second.sources.errors.weight=0.5",
        "--set",
        "stages.first.steps=4",
    )
    assert tuned.returncode == 0 and "schedule changed" in tuned.stderr and "tokenized before" in tuned.stderr, (
        tuned.stderr
    )
    written = yaml.safe_load((out / "tokenized" / "curriculum.yaml").read_text())["stages"]
    assert written[0]["steps"] == 4 and [src.get("weight", 1.0) for src in written[1]["sources"]] == [1.0, 0.5]
    data_change = _pretrain(
        "--recipe", recipe, "--out", out, "--until", "tokenize", "--resume", *flex, "--set", "model.vocab_size=300"
    )
    assert data_change.returncode == 2 and "another recipe or settings" in data_change.stderr
    done = _pretrain("--recipe", recipe, "--out", out, "--resume", *flex)  # --minutes may change until the training
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads((out / "pretrain.json").read_text())
    assert list(record["phases"]) == ["build", "tokenizer", "tokenize", "train", "score", "card"]
    assert record["phases"]["build"]["built"] == ["codenetmut"] and (data / "codenetmut" / "stats.json").exists()
    assert (out / "tokenizer" / "training.json").exists() and (out / "tokenized" / "curriculum.yaml").exists()
    assert record["phases"]["train"]["steps"] == {"first": 3, "second": 3}
    assert (out / "run" / "final" / "config.json").exists() and (out / "run" / "final" / "README.md").exists()
    setup = json.loads((out / "run" / "curriculum.json").read_text())["setup"]
    assert setup["attention"] == "tiles" and any("flex needs a CUDA device" in f for f in setup["fallbacks"])
    scores = json.loads((out / "scores" / "scores.json").read_text())
    assert set(scores["sets"]) == {"codenetmut", "errors"} and all(s["examples"] <= 3 for s in scores["sets"].values())
    # again without --resume: refused, nothing touched; with it: every phase is done already
    again = _pretrain("--recipe", recipe, "--out", out, *flex)
    lines = [line for line in again.stderr.splitlines() if line.strip()]
    assert again.returncode == 2 and len(lines) == 1 and "--resume" in lines[0], again.stderr
    resumed = _pretrain("--recipe", recipe, "--out", out, "--resume", *flex)
    assert resumed.returncode == 0 and resumed.stderr.count("done before") == 6, resumed.stderr[-2000:]
    minutes = _pretrain("--recipe", recipe, "--out", out, "--resume", "--minutes", "5", *flex)  # trained without
    assert minutes.returncode == 2 and "another recipe or settings" in minutes.stderr
    other = _pretrain("--recipe", recipe, "--out", out, "--resume", *flex, "--set", "model.preset=mini")
    assert other.returncode == 2 and "another recipe or settings" in other.stderr


def test_minutes_fit_each_stage_from_its_measured_speed(tmp_path):
    """With --minutes, a stage's steps are fixed after its warm-up from its speed and the
    time left (training/budget.py), written to plan.json, and the run trains them."""
    data, out = tmp_path / "data", tmp_path / "out"
    recipe = _recipe(tmp_path, data, score={"limit": 0})
    with open(recipe) as f:
        raw = yaml.safe_load(f)
    for stage, share in zip(raw["stages"], (0.7, 0.3)):
        stage.update(steps=25, warmup=2, share=share)
    with open(recipe, "w") as f:
        yaml.safe_dump(raw, f)
    done = _pretrain("--recipe", recipe, "--out", out, "--minutes", 0.5, "--no-score")
    assert done.returncode == 0, done.stderr[-3000:]
    plan = json.loads((out / "run" / "plan.json").read_text())
    fixed = plan["stages"]
    assert set(fixed) == {"first", "second"} and all(s["seconds_per_step"] > 0 for s in fixed.values())
    log = [json.loads(line) for line in (out / "run" / "train_log.jsonl").read_text().splitlines() if '"loss"' in line]
    assert log[-1]["step"] == fixed["first"]["steps"] + fixed["second"]["steps"]  # the run trained what it planned
    # the first stage's fix took its share of the half minute: about 0.7 x 30 s / its seconds a step, less the
    # margin; later log steps may have fitted it again to the moment that planned (refits)
    first = fixed["first"]  # plan.json rounds the seconds it records: within a step or two of the figure
    start, span = plan["start"], plan["seconds"] - plan["start"]  # the run's start, then the stages' slots
    assert 0 < start < plan["seconds"] - first["seconds_left"]  # measured at the first fix, before it
    assert first["ends_at"] == pytest.approx(start + span * 0.7 * 0.92, abs=0.1)  # 0.92 of its slot
    spent = plan["seconds"] - first["seconds_left"]
    want = max(first["fixed_after"], int((first["ends_at"] - spent) / first["seconds_per_step"]) + first["fixed_after"])
    assert abs(first["planned"] - want) <= max(2, 0.01 * want)
    assert fixed["second"]["slot"] == pytest.approx([start + 0.7 * span, plan["seconds"]], abs=0.1)
    assert (
        first["refits"] > 0 or first["steps"] == first["planned"]
    )  # steps move only by a refit (which may move them back)


def test_a_resumed_budget_keeps_the_steps_it_fixed_and_the_time_it_spent(tmp_path):
    from codeexecutor.training.budget import Budget
    from codeexecutor.training.config import Source, Stage

    def stages():
        return [
            Stage("a", [Source("x", "codenet")], 100, share=0.5),
            Stage("b", [Source("x", "codenet")], 100, share=0.5),
        ]

    first = stages()
    budget = Budget(10, first, str(tmp_path))
    steps = budget.fix(0, 0.5, 20)  # half of the 600 s at 0.5 s a step, less the margin, after 20 steps
    assert abs(steps - (20 + 600 * 0.5 * 0.92 / 0.5)) <= 1 and first[0].steps == steps
    budget.spent = 400.0  # as if the stage had run for 400 s before a kill
    budget.started = __import__("time").perf_counter()
    budget.save()
    again = stages()
    resumed = Budget(10, again, str(tmp_path))
    assert again[0].steps == steps and resumed.is_fixed(again[0]) and not resumed.is_fixed(again[1])
    later = resumed.fix(1, 0.5, 20)  # the second stage's steps end at 0.92 of its slot [300, 600]: 576 - 400 s left
    assert 20 + int(170 / 0.5) <= later <= 20 + int(176 / 0.5)


def test_a_stage_slow_to_start_spends_its_own_slot_not_the_next_stages(tmp_path):
    """Mining or an evaluation that runs long before a stage's steps (the CPU hour's
    Tutorial mining SingleLine's hardest examples) is paid from that stage's slot: the
    last stage still gets its share of the clock."""
    import time

    from codeexecutor.training.budget import Budget
    from codeexecutor.training.config import Source, Stage

    stages = [Stage(n, [Source("x", "codenet")], 100, share=s) for n, s in (("a", 0.5), ("b", 0.2), ("c", 0.3))]
    budget = Budget(10, stages, str(tmp_path))  # 600 s: slots [0, 300], [300, 420], [420, 600]
    budget.fix(0, 1.0, 20)
    budget.spent, budget.started = 400.0, time.perf_counter()  # b's mining ran to 400 s, 20 s before its slot ends
    b = budget.fix(1, 1.0, 20)
    assert b == 20 + int(300 + 120 * 0.92 - 400)  # what is left of its own slot, to 0.92 of it
    budget.spent, budget.started = 420.0, time.perf_counter()
    c = budget.fix(2, 1.0, 20)
    assert c == 20 + int(420 + 180 * 0.92 - 420)  # the last stage keeps its whole share


def test_a_refit_moves_a_stage_end_back_to_the_moment_its_fix_planned(tmp_path):
    """A warm-up measured on a busy machine (or a device that slows later) is corrected at
    the log steps after it: the stage's steps are fitted again to its planned end."""
    import time

    from codeexecutor.training.budget import Budget
    from codeexecutor.training.config import Source, Stage

    stages = [
        Stage("a", [Source("x", "codenet")], 100, share=0.5),
        Stage("b", [Source("x", "codenet")], 100, share=0.5),
    ]
    budget = Budget(10, stages, str(tmp_path))
    planned = budget.fix(0, 1.0, 20)  # a slow warm-up: 1 s a step over 300 s less the margin
    assert abs(planned - (20 + 276)) <= 1 and budget.fixed["a"]["ends_at"] == pytest.approx(276, abs=1)

    def at(seconds):  # the run's clock set to `seconds`
        budget.spent, budget.started = seconds, time.perf_counter()

    at(76.0)  # 40 steps later the machine is quiet: 0.25 s a step, 200 s to the planned end
    faster = budget.refit(0, 0.25, 60)
    assert abs(faster - (60 + 800)) <= 2 and stages[0].steps == faster and budget.fixed["a"]["refits"] == 1
    assert budget.refit(0, 0.255, 61) == faster  # within the tolerance: unchanged, no jolt to the decay
    at(176.0)  # then it slows to 1 s a step with 100 s left: the stage shrinks instead of overrunning
    assert abs(budget.refit(0, 1.0, 460) - 560) <= 1
    at(300.0)  # past the moment: the stage ends at the step it is at
    assert budget.refit(0, 1.0, 500) == 500
    again = [Stage("a", [Source("x", "codenet")], 100, share=0.5), Stage("b", [Source("x", "codenet")], 100, share=0.5)]
    resumed = Budget(10, again, str(tmp_path))  # the steps and the moment survive a kill
    assert again[0].steps == 500 and resumed.fixed["a"]["ends_at"] == budget.fixed["a"]["ends_at"]
    assert Budget(10, [Stage("c", [Source("x", "codenet")], 7)], str(tmp_path / "new")).refit(0, 1.0, 3) == 7  # unfixed


@pytest.mark.parametrize(
    "edit, words",
    [
        ({"extras": {"x": 1}}, ["unknown section(s) extras"]),
        ({"data": {"dir": "nowhere", "builds": {}}}, ["dataset folder", "not found", "data.builds"]),
        (
            {"data": {"dir": "d", "builds": {"codenetmut": {"kind": "codenetmut", "codenet": ["no/such/folder"]}}}},
            ["data.builds.codenetmut.codenet", "no/such/folder is not a folder"],
        ),
        ({"data": {"dir": "d", "builds": {"codenetmut": {"kind": "nonsense"}}}}, ["needs kind"]),
        (
            {
                "data": {
                    "dir": "d",
                    "builds": {"codenetmut": {"kind": "codenetmut", "codenet": ["curricula/demo"], "colour": 1}},
                }
            },
            ["unknown option colour"],
        ),
    ],
)
def test_a_bad_recipe_is_one_line_naming_the_problem(tmp_path, edit, words):
    recipe = _recipe(tmp_path, tmp_path / "data", **edit)
    done = _pretrain("--recipe", recipe, "--out", tmp_path / "out", timeout=120)
    lines = [line for line in done.stderr.splitlines() if line.strip() and "WARNING" not in line]
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert all(w in done.stderr for w in words), done.stderr
    assert not (tmp_path / "out").exists()  # refused before anything was written
    del lines


def test_minutes_must_buy_something_and_sets_must_name_a_field(tmp_path):
    recipe = _recipe(tmp_path, tmp_path / "data")
    zero = _pretrain("--recipe", recipe, "--out", tmp_path / "out", "--minutes", 0, timeout=120)
    assert zero.returncode == 2 and "minutes must be > 0" in zero.stderr
    bad = _pretrain("--recipe", recipe, "--out", tmp_path / "out", "--set", "preset=small", timeout=120)
    assert bad.returncode == 2 and "SECTION.FIELD=VALUE" in bad.stderr
    stage = _pretrain("--recipe", recipe, "--out", tmp_path / "out", "--set", "stages.nope.steps=3", timeout=120)
    assert stage.returncode == 2 and "no stage 'nope'" in stage.stderr


def test_a_set_reaches_one_source_of_a_stage_and_a_zero_weight_leaves_it_out():
    from codeexecutor.errors import ConfigError
    from codeexecutor.training.recipe import apply_overrides

    def recipe() -> dict:
        return {
            "data": {"builds": {"codenetmut": {"mutants": 9}}},
            "stages": [
                {
                    "name": "mix",
                    "steps": 5,
                    "sources": [
                        {"path": "singleline/singleline", "weight": 0.25, "hardest": 10},
                        {"path": "singleline/singleline", "weight": 0.25},
                        {"path": "codenetmut/errors", "weight": 0.1},
                    ],
                }
            ],
        }

    raw = apply_overrides(
        recipe(),
        [
            "stages.mix.sources.errors.weight=0.3",
            "stages.mix.sources.1.weight=0.5",
            "data.builds.codenetmut.mutants=3",
            "stages.mix.steps=7",
        ],
    )
    assert [src["weight"] for src in raw["stages"][0]["sources"]] == [0.25, 0.5, 0.3]
    assert raw["data"]["builds"]["codenetmut"]["mutants"] == 3 and raw["stages"][0]["steps"] == 7
    alone = apply_overrides(recipe(), ['stages=[{"name": "one", "steps": 2, "sources": [{"path": "a/b"}]}]'])
    assert [st["name"] for st in alone["stages"]] == ["one"]
    full = apply_overrides(recipe(), ["stages.mix.sources.codenetmut/errors.weight=0"])
    assert [src["path"] for src in full["stages"][0]["sources"]] == ["singleline/singleline"] * 2
    for item, words in (
        ("stages.mix.sources.singleline.weight=1", "several source 'singleline'"),
        ("stages.mix.sources.functions.weight=1", "no source 'functions'"),
        ("stages.mix.sources.7.weight=1", "no source '7'"),
        ("stages.mix.extra.errors.weight=1", "stages.STAGE.sources.SOURCE.FIELD"),
    ):
        with pytest.raises(ConfigError, match=words):
            apply_overrides(recipe(), [item])


@pytest.mark.parametrize("name", ["cpu-hour", "gpu-draw", "gpu-draw-part", "paper", "million"])
def test_each_shipped_recipe_is_valid_bar_data_this_machine_lacks(name):
    """A recipe of curricula/recipes/ loads as `pretrain` reads it; where it cannot, only
    because data it reads is not on this machine (the paper's CodeNet, a million-row build)."""
    from codeexecutor.errors import ConfigError
    from codeexecutor.training.recipe import load_recipe

    from .conftest import SHARED_DATA

    try:
        cur, _ = load_recipe(str(ROOT / "curricula" / "recipes" / f"{name}.yaml"), str(ROOT))
    except ConfigError as exc:
        problems = [line for line in str(exc).splitlines()[1:] if line.strip()]
        assert problems and all("not found" in p or "is not a folder" in p for p in problems), str(exc)
        assert name in ("paper", "million") or not SHARED_DATA.is_dir(), str(exc)
        return
    if name == "gpu-draw-part":  # a part of the draw's committed data: its ids must be the draw recipe's
        draw, _ = load_recipe(str(ROOT / "curricula" / "recipes" / "gpu-draw.yaml"), str(ROOT))
        assert cur.profile() == draw.profile() and cur.tokenizer.keep_code_length == draw.tokenizer.keep_code_length
        assert (cur.model.max_code_length, cur.model.max_trace_length) == (
            draw.model.max_code_length,
            draw.model.max_trace_length,
        )
        return
    assert [st.name for st in cur.stages][:3] == ["singleline", "tutorial", "codenet"]
    assert sum(st.share for st in cur.stages) == pytest.approx(1.0)  # a --minutes budget is shared out whole


def test_a_killed_training_child_is_carried_on_from_its_checkpoint_on_a_safer_path(tmp_path):
    import signal
    import time

    data, out = tmp_path / "data", tmp_path / "out"
    stages = [
        {
            "name": "first",
            "steps": 40,
            "lr": 1e-3,
            "warmup": 1,
            "sources": [{"path": "codenetmut/codenetmut", "task": "codenet"}],
        }
    ]
    recipe = _recipe(tmp_path, data, stages=stages)
    prepared = _pretrain("--recipe", recipe, "--out", out, "--until", "tokenize", "--no-score")
    assert prepared.returncode == 0, prepared.stderr[-3000:]
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "2", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "codeexecutor",
            "pretrain",
            "--recipe",
            recipe,
            "--out",
            str(out),
            "--resume",
            "--no-score",
            "--minutes",
            "1.5",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    log, record = out / "run" / "train_log.jsonl", out / "pretrain.json"
    deadline, killed = time.time() + 600, None
    while time.time() < deadline and proc.poll() is None:  # the child past its first checkpoints (every 2 steps)
        attempts = json.loads(record.read_text())["phases"].get("train", {}).get("attempts", [])
        rows = log.read_text().splitlines()[:-1] if log.exists() else []  # the last line may be half written
        steps = [json.loads(x)["step"] for x in rows]
        if attempts and steps and max(steps) >= 6:
            killed = attempts[0]["pid"]
            os.kill(killed, signal.SIGKILL)  # as a device fault or the OOM killer ends it: no cleanup
            break
        time.sleep(0.2)
    said, err = proc.communicate(timeout=900)
    assert killed and proc.returncode == 0, err[-3000:]
    train = json.loads(record.read_text())["phases"]["train"]
    assert [a["exit_code"] for a in train["attempts"]] == [-signal.SIGKILL, 0], train["attempts"]
    assert train["attempts"][1]["path"] == "the tile path, eager" and "signal SIGKILL" in err
    given = [json.loads((out / f"order{i}.json").read_text())["curriculum"] for i in (0, 1)]  # what each child got
    assert given[0]["train"]["compile"] == "auto" and given[1]["train"]["compile"] is False
    assert given[0]["stages"] == given[1]["stages"] and given[1]["train"]["output_dir"] == str(out / "run")
    assert "resuming from" in said and (out / "run" / "final" / "config.json").exists()  # its checkpoint, not step 0
    plan = json.loads((out / "run" / "plan.json").read_text())  # the dead child's time was spent from the budget
    assert plan["spent"] >= train["attempts"][0]["seconds"] and plan["seconds"] == 90
    assert set(train["steps"]) == {"first"}


def test_a_setting_refused_under_the_launcher_stops_at_once_in_one_line(tmp_path):
    """Through run_pretrain.sh (a launcher reports a rank's exit 2 as its own failure), a
    refused setting (fp16 on the CPU) ends `pretrain` with exit 2 and the rank's line,
    after one attempt: no safer path is tried for a setting none of them mends."""
    recipe = _recipe(tmp_path, tmp_path / "data")
    out = tmp_path / "out"
    done = _pretrain(
        "--recipe",
        recipe,
        "--out",
        out,
        "--launcher",
        "--no-score",
        "--ds-config",
        ROOT / "ds_configs" / "zero2_fp16.json",
    )
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 2 and last.startswith("codeexecutor pretrain: error:") and "cpu.json" in last, done.stderr
    attempts = json.loads((out / "pretrain.json").read_text())["phases"]["train"]["attempts"]
    assert len(attempts) == 1


def test_every_recipe_build_option_is_an_option_of_its_builder_with_a_default_of_its_type():
    """A recipe's `data.builds` entry is the builder's call (curricula/build.py): an option the
    recipe may name that the builder lacks would fail only once a run reached its build."""
    from codeexecutor.errors import UsageError
    from codeexecutor.training.config import BUILD_OPTIONS
    from curricula.build import DEFAULTS, build

    for kind, options in BUILD_OPTIONS.items():
        for name, kind_of in options.items():
            assert name in DEFAULTS[kind], (kind, name)
            default = DEFAULTS[kind][name]
            assert default is None or isinstance(default, kind_of) or kind_of is list, (kind, name, default)
    with pytest.raises(UsageError, match="has no option colour"):
        build("tutorial", "unused", {"colour": 1})
    with pytest.raises(UsageError, match="does not look like Project CodeNet"):
        build("codenetmut", "unused", {"codenet": "no/such/folder"})  # one folder given as a string


def test_the_training_process_keeps_the_import_path_it_was_given(monkeypatch, tmp_path):
    """The GPU draw installs its carried wheels (datasets among them) in a folder on
    PYTHONPATH; the training process must see them beside the checkout."""
    import os

    from codeexecutor.pretrain import ROOT, child_env

    monkeypatch.setenv("PYTHONPATH", "/tmp/site")
    env = child_env(str(tmp_path / "refused.txt"))
    assert env["PYTHONPATH"].split(os.pathsep) == [ROOT, "/tmp/site"]
    monkeypatch.delenv("PYTHONPATH")
    assert child_env(str(tmp_path / "refused.txt"))["PYTHONPATH"] == ROOT


def test_the_runs_start_is_laid_before_the_slots_not_charged_to_the_first_stage(tmp_path):
    """A compile of 12 s in a 135 s budget is the run's cost: the first stage, whose share
    is 12%, still gets its share of the time after it (on a GPU it had been left 20 steps)."""
    from codeexecutor.training.budget import MARGIN, Budget
    from codeexecutor.training.config import Source, Stage

    stages = [Stage(n, [Source("x", "codenet")], 100, share=s) for n, s in (("a", 0.12), ("b", 0.02), ("c", 0.86))]
    budget = Budget(135 / 60, stages, str(tmp_path))
    budget.spent = 15.0  # set-up and compile (14 s), then 20 warm-up steps of 0.05 s
    steps = budget.fix(0, 0.05, 20)
    assert budget.start == 14.0 and budget.slot(0) == (14.0, 14.0 + 0.12 * 121)
    assert steps == 20 + int((14.0 + 0.12 * 121 * MARGIN - 15.0) / 0.05)  # about 250, not 20
    assert abs(budget.slot(2)[1] - 135) < 1e-9  # the last slot still ends with the budget
    again = Budget(135 / 60, stages, str(tmp_path))  # a resumed process keeps the slots
    assert again.start == 14.0 and again.slot(1) == budget.slot(1)


def test_a_run_from_a_model_continues_in_the_format_it_learnt_unless_told_otherwise(tmp_path):
    """A curriculum that starts from a compact, finish-order model and names no format keeps
    the model's: tokenizing or training it in the defaults' (whole states, start order) would
    teach it another format without a word. A format the curriculum names wins."""
    from codeexecutor.training.config import Curriculum

    def profile(**model):
        stages = [{"name": "s", "steps": 1, "sources": [{"path": "x", "task": "codenet"}]}]
        init = str(ROOT / "models" / "codeexecutor-mini-cpu")
        return Curriculum.from_dict({"model": {"init": init, **model}, "stages": stages}).profile()

    inherited = profile()
    assert (inherited.state, inherited.order, inherited.window) == ("delta", "end", "head")
    told = profile(trace_state="full", step_order="start")
    assert (told.state, told.order) == ("full", "start")
