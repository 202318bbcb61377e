"""A GPU lease (gpu_run/), rehearsed on the CPU at toy sizes: the call's steps through the
same script, the model landed and committed-ready, the next lease continuing it, the card
adding them up; a stopped lease still sending back its model (the second call: test_gpu_measure.py)."""

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

from .conftest import ROOT

pytest.importorskip("torch")
sys.path.insert(0, str(ROOT / "gpu_run"))


def _lease(tmp_path: pathlib.Path, out: str, models: pathlib.Path):
    cmd = [sys.executable, "gpu_run/lease.py", "--smoke", "--out", str(tmp_path / out), "--work", str(tmp_path / "w")]
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    return subprocess.run(
        [*cmd, "--models", str(models)], capture_output=True, text=True, cwd=ROOT, env=env, timeout=900
    )


def _land(back: pathlib.Path, models: pathlib.Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "gpu_run/land.py", str(back), "--models", str(models)]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)


def _first_loss(lease: dict) -> float:
    return next(r["loss"] for r in lease["train"]["log"] if "loss" in r)


def test_the_recipe_leaves_training_400_seconds_of_steps_in_a_call():
    from lease import settings
    from wheels import stepping_seconds

    s = settings(False)
    assert s["seconds"] <= 590  # from run.sh's start; a call runs at most 600
    assert stepping_seconds(s) >= 400  # less export, score and what outside_steps counts (the H200's 50 s among it)
    smoke = settings(True)
    assert smoke["smoke"] and smoke["model"] != s["model"] and "model.preset=tiny" in smoke["set"]


def test_a_later_lease_continues_the_committed_model_on_the_later_stages(tmp_path):
    from lease import pretrain_args, settings

    s = settings(False)
    first = pretrain_args(s, tmp_path, tmp_path / "models", None)
    later = pretrain_args(s, tmp_path, tmp_path / "models", {"leases": [{}]})
    assert not any(x.startswith("model.init=") for x in first)
    assert f"model.init={tmp_path / 'models' / s['model']}" in later
    stages = json.loads(next(x for x in later if x.startswith("stages="))[len("stages=") :])
    assert [st["name"] for st in stages] == ["codenet"] and stages[0]["warmup"] < 50
    assert "data.packed=curricula/packed" in first


def test_the_room_counts_the_model_a_lease_will_commit(tmp_path):
    from wheels import int8_bytes

    from codeexecutor.modeling.model import PRESETS, CodeExecutorConfig, CodeExecutorModel
    from codeexecutor.training.export import save_shipped

    model = CodeExecutorModel(CodeExecutorConfig(vocab_size=8213, **PRESETS["tiny"], max_position_embeddings=1300))
    model.tie_lm_head()
    model.save_pretrained(str(tmp_path / "m"))
    save_shipped(str(tmp_path / "m"), str(tmp_path / "int8"), "int8")
    real = (tmp_path / "int8" / "model.int8.safetensors").stat().st_size
    estimate = int8_bytes({"first": "curricula/recipes/gpu-draw.yaml", "set": ["model.preset=tiny"]})
    assert 0.9 * real <= estimate <= 1.25 * real, (estimate, real)
    run = subprocess.run(["bash", "gpu_run/run.sh", "--plan"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 0 and "MiB of the 64 left" in run.stdout, run.stderr


def test_totals_add_the_leases_up():
    from land import totals

    a = {"call_minutes": 9.5, "training_minutes": 7.1, "example_tokens": 100, "steps": {"singleline": 5, "codenet": 7}}
    b = {"call_minutes": 9.0, "training_minutes": 7.0, "example_tokens": 50, "steps": {"codenet": 3}}
    t = totals([a, b])
    assert t == {
        "leases": 2,
        "call_minutes": 18.5,
        "training_minutes": 14.1,
        "example_tokens": 150,
        "steps": {"singleline": 5, "codenet": 10},
    }


@pytest.mark.integration
@pytest.mark.timeout(900)  # two leases and their landings: about 150 s alone, twice that beside another heavy test
def test_a_smoke_lease_lands_and_the_next_lease_continues_it(tmp_path):
    models = tmp_path / "models"
    run = _lease(tmp_path, "out1", models)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    files = sorted(p.name for p in (tmp_path / "out1").iterdir())
    assert len(files) <= 8 and "lease.json" in files and "model-meta.tar" in files, files
    one = json.loads((tmp_path / "out1" / "lease.json").read_text())
    assert one["continues"] is None and one["train"]["example_tokens"] > 0 and one["score"]["sets"]
    last = max(r["step"] for r in one["train"]["log"] if "loss" in r)
    stages = list(one["train"]["steps"])  # a loaded CPU's budget may leave a late stage no step
    assert stages == ["singleline", "tutorial", "codenet"][: len(stages)] and stages, one["train"]
    assert sum(one["train"]["steps"].values()) == last and min(one["train"]["steps"].values()) > 0  # each its own
    landed = _land(tmp_path / "out1", models)
    assert landed.returncode == 0, landed.stderr
    dest = models / one["model"]
    from codeexecutor.modeling.loading import load_model

    load_model(str(dest))  # the committed folder loads as a user loads it

    run = _lease(tmp_path, "out2", models)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    two = json.loads((tmp_path / "out2" / "lease.json").read_text())
    assert two["continues"] == {"model": one["model"], "leases": 1}
    assert list(two["train"]["steps"]) == ["codenet"]  # the later stages only
    assert _first_loss(two) < _first_loss(one) - 1.0  # from the landed weights, not from scratch
    again = _land(tmp_path / "out1", models)  # the first lease's files once more: out of order
    assert again.returncode == 2 and "Traceback" not in again.stderr and "order" in again.stderr, again.stderr
    assert _land(tmp_path / "out2", models).returncode == 0
    record = json.loads((dest / "lease.json").read_text())
    steps = {k: one["train"]["steps"].get(k, 0) + two["train"]["steps"].get(k, 0) for k in one["train"]["steps"]}
    assert record["totals"]["leases"] == 2 and record["totals"]["steps"] == steps
    assert record["totals"]["example_tokens"] == one["train"]["example_tokens"] + two["train"]["example_tokens"]
    card = (dest / "README.md").read_text()
    assert "## Leases" in card and "| 2 |" in card and "2 leases" in card


@pytest.mark.integration
@pytest.mark.timeout(600)
def test_a_lease_stopped_in_its_training_still_sends_back_its_model(tmp_path):
    out, work = tmp_path / "out", tmp_path / "w"
    cmd = [sys.executable, "gpu_run/lease.py", "--smoke", "--out", str(out), "--work", str(work)]
    proc = subprocess.Popen(
        [*cmd, "--models", str(tmp_path / "models")], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    deadline = time.time() + 400
    while time.time() < deadline and not (work / "pt" / "run" / "stage1-singleline" / "config.json").exists():
        time.sleep(0.5)  # stopped once the training has exported its first stage
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=120)
    record = json.loads((out / "lease.json").read_text())
    assert code == 124, proc.stdout.read().decode()[-3000:]
    assert record["data"]["status"] == "ok" and record["train"]["status"] == "stopped by SIGTERM", record
    assert record["train"]["steps"] and record["export"]["status"] == "ok"  # what it trained, and the model
    assert "score" not in record and (out / "model-meta.tar").is_file() and not list(out.glob("*.tmp"))
    assert _land(out, tmp_path / "models").returncode == 0


def test_land_refuses_a_folder_without_a_lease_in_one_line(tmp_path):
    run = _land(tmp_path, tmp_path / "models")
    lines = [x for x in run.stderr.splitlines() if x.strip()]
    assert run.returncode == 2 and len(lines) == 1 and "lease.json" in lines[0], run.stderr


def test_a_landed_lease_is_set_beside_the_cpu_model_on_the_same_samples():
    from land import against

    sets = {"codenetmut": {"trace_accuracy": 31.0}, "unknown": {"trace_accuracy": 1.0}}
    lines = against(ROOT / "models", {"sets": sets, "limit": 300})
    cpu = json.loads((ROOT / "models" / "codeexecutor-mini-cpu" / "scores.json").read_text())
    assert lines == [
        f"codenetmut: trace accuracy 31.0 here, {cpu['sets']['codenetmut']['trace_accuracy']} for codeexecutor-mini-cpu"
    ]
    assert "no codeexecutor-mini-cpu scores" in against(ROOT / "models", {"sets": sets, "limit": 4})[0]


def test_a_cut_short_training_counts_what_its_export_holds_and_every_process(tmp_path):
    from lease import trained

    run = tmp_path / "run"
    rows = [  # stage 1 done; stage 2 carried on by a second process (its counters anew); stage 3 cut
        {"step": 10, "stage": "singleline", "loss": 5.0, "stage_tokens": 100, "stage_seconds": 1.0},
        {"step": 15, "stage": "tutorial", "loss": 4.0, "stage_tokens": 50, "stage_seconds": 0.5},
        {"step": 20, "stage": "tutorial", "loss": 3.9, "stage_tokens": 40, "stage_seconds": 0.4},
        {"step": 25, "stage": "codenet", "loss": 3.0, "stage_tokens": 70, "stage_seconds": 0.7},
    ]
    run.mkdir()
    (run / "train_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for name in ("stage1-singleline", "stage2-tutorial", "stage2-tutorial-best", "stage3-codenet.tmp"):
        (run / name).mkdir()
        (run / name / "config.json").write_text("{}")
    got = trained(tmp_path)
    assert got["model"] == "stage2-tutorial" and got["steps"] == {"singleline": 10, "tutorial": 10}
    assert got["example_tokens"] == 100 + 50 + 40 and got["stepping_seconds"] == 1.9
