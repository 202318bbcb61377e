"""The GPU draw (run_draw.sh, codeexecutor/campaign/), run on the CPU at toy sizes
(CAMPAIGN_SMOKE=1): every step the device call makes, through the same script, so a lent
GPU spends its minutes measuring."""

import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import pytest

from .conftest import ROOT

pytestmark = pytest.mark.integration  # the GPU draw end to end on the CPU: its smoke run, its calls, its stops

pytest.importorskip("torch")
SCRIPT = ROOT / "run_draw.sh"


def _env(tmp_path, pack) -> dict:
    return {
        **os.environ,
        "CAMPAIGN_SMOKE": "1",
        "CAMPAIGN_PACK": str(pack),
        "OUT": str(tmp_path / "out"),
        "CAMPAIGN_WORK": str(tmp_path / "work"),
        "PYTHON": sys.executable,
        "OMP_NUM_THREADS": "2",
    }


def _pack(demo_data, dest: pathlib.Path) -> pathlib.Path:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "codeexecutor",
            "draw",
            "pack",
            "--smoke",
            "--data",
            str(demo_data),
            "--out",
            str(dest),
            "--prep",
            str(dest.parent / "prep"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return dest


def _one_line_refusal(run: subprocess.CompletedProcess, *words: str) -> None:
    lines = [line for line in run.stderr.splitlines() if line.strip() and "[WARNING]" not in line]
    assert run.returncode == 2 and len(lines) == 1 and "Traceback" not in run.stderr, run.stderr[-3000:]
    for w in words:
        assert w in lines[0], lines[0]


def test_the_plan_fits_one_draw(tmp_path):
    run = subprocess.run(
        ["bash", str(SCRIPT), "--plan"],
        env=_env(tmp_path, tmp_path / "none"),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    rows = [line.split() for line in lines[1 : lines.index(next(x for x in lines if x.startswith("total")))]]
    gpu = sum(int(r[1]) for r in rows)
    # the training first, its model exported before it is scored; the measurements after; the checks
    # earlier draws answered last
    assert [r[0] for r in rows] == ["preflight", "unpack", "train", "export", "score", "throughput", "checks"]
    assert gpu <= 540 and re.search(rf"total\s+{gpu}\s", run.stdout)
    assert "no pack at" in run.stdout  # and nothing to count the tokens of
    bad = subprocess.run(
        ["bash", str(SCRIPT), "everything"],
        env=_env(tmp_path, tmp_path),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    _one_line_refusal(bad, "usage")


def test_the_draw_refuses_a_missing_stale_or_oversized_pack(tmp_path, demo_data):
    def draw(pack):
        return subprocess.run(
            ["bash", str(SCRIPT)],
            env=_env(tmp_path, pack),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )

    _one_line_refusal(draw(tmp_path / "nowhere"), "no pack", "draw pack")
    pack = _pack(demo_data, tmp_path / "pack")
    plan = subprocess.run(
        ["bash", str(SCRIPT), "--plan"], env=_env(tmp_path, pack), cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    manifest = json.loads((pack / "manifest.json").read_text())
    carried = next(line.split() for line in plan.stdout.splitlines() if line.startswith("carried"))
    assert plan.returncode == 0 and int(carried[2].replace(",", "")) == manifest["tokens"] > 0, plan.stdout
    assert manifest["tokens"] == sum(s["tokens"] for s in manifest["sources"].values())
    lost = next((pack / "ids").glob("*.ids.xz"))
    lost.rename(lost.with_suffix(".gone"))
    _one_line_refusal(draw(pack), "lacks", lost.name)
    lost.with_suffix(".gone").rename(lost)
    (pack / "manifest.json").write_text(json.dumps({**manifest, "code": "0123456789abcdef"}))  # other code, same ids:
    other = subprocess.run(
        ["bash", str(SCRIPT), "--plan"], env=_env(tmp_path, pack), cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert other.returncode == 0 and "ready" in other.stdout, (
        other.stderr
    )  # the pack is bound to its ids, not the checkout
    (pack / "manifest.json").write_text(json.dumps({**manifest, "data_format": manifest["data_format"] - 1}))
    _one_line_refusal(draw(pack), "data format", "pack again")
    (pack / "manifest.json").write_text(json.dumps(manifest))
    with open(pack / "ballast", "wb") as f:
        f.truncate(60 * 2**20)  # sparse: its size counts, not its disk
    _one_line_refusal(draw(pack), "MiB", "over")
    assert not (tmp_path / "out" / "throughput.json").exists()  # refused before any step ran


@pytest.mark.timeout(900)  # seven steps in processes of their own: about 130 s on a quiet 2-core machine
def test_the_smoke_draw_brings_back_a_model_that_loads_here(tmp_path, demo_data):
    pack = _pack(demo_data, tmp_path / "pack")
    run = subprocess.run(
        ["bash", str(SCRIPT)], env=_env(tmp_path, pack), cwd=ROOT, capture_output=True, text=True, timeout=1500
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    out = tmp_path / "out"
    files = sorted(p.name for p in out.iterdir())
    assert len(files) <= 8 and {
        "checks.json",
        "throughput.json",
        "training.json",
        "scores.json",
        "model-meta.tar",
    } <= set(files)
    checks = json.loads((out / "checks.json").read_text())
    assert [s["status"] for s in checks["steps"]] == ["ok"] * 7, checks["steps"]
    assert checks["launcher"]["continuous"] and checks["launcher"]["resumed"]  # run_pretrain.sh stopped and resumed
    assert checks["launcher"]["engine"] == "deepspeed"  # DeepSpeed's checkpoints, not the one-process torch engine
    assert checks["preflight"]["deepspeed"] and checks["pack"]["python"]
    tput = json.loads((out / "throughput.json").read_text())  # bench_step.py --speed, on the packed rows
    assert len(tput["steps"]) == 1 and all(r["tokens_per_s"] > 0 for r in tput["steps"])
    assert tput["decode"]["eager"]["ms_per_step"] > 0 and tput["steps"][0]["seconds_per_step"] > 0
    training = json.loads((out / "training.json").read_text())
    assert training["exit_code"] == 0 and training["measured"]["steps"] > 0
    assert all("ends_at" in st for st in training["plan"]["stages"].values())  # each stage fitted to a planned end
    scores = json.loads((out / "scores.json").read_text())
    assert set(scores["sets"]) == {"singleline", "tutorial", "codenetmut", "errors", "functions", "functions_errors"}
    assert scores["exit_code"] == 0 and len(scores["builds_scored"]) == 4  # decoded in the child, every build
    assert checks["unpack"]["sources"] == {
        k: v["rows"] for k, v in json.loads((pack / "manifest.json").read_text())["sources"].items()
    }  # each source's ids written back whole
    back = subprocess.run(
        [
            sys.executable,
            "-m",
            "codeexecutor",
            "draw",
            "unpack",
            str(out),
            "--pack",
            str(pack),
            "--limit",
            "2",
            "--record",
            str(tmp_path / "record.json"),
            "--install",
            str(tmp_path / "models" / "drawn"),
            "--weights",
            "int8",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert back.returncode == 0, back.stderr[-3000:]
    installed = tmp_path / "models" / "drawn"  # the model as it would ship: int8 codes, its card, loadable
    assert (installed / "model.int8.safetensors").exists() and not (installed / "model.safetensors").exists()
    assert "weights in int8" in (installed / "README.md").read_text()
    copy = json.loads((out / "unpacked.json").read_text())["installed"]  # the int8 copy scored on the same examples
    assert copy["weights"] == "int8" and set(copy["sets"]) == set(scores["sets"])
    assert all(0 <= c["identical_to_bf16"] <= 100 for c in copy["sets"].values())
    unpacked = json.loads((out / "unpacked.json").read_text())
    assert unpacked["pieces"] >= 1 and set(unpacked["sets"]) == set(scores["sets"])
    assert all(c["draw"] and c["here"]["examples"] == 2 for c in unpacked["sets"].values())
    joined = json.loads((tmp_path / "record.json").read_text())
    assert {"checks", "throughput", "training", "scores", "unpacked"} <= set(joined)
    assert all(len(s.get("log_tail", "")) <= 600 for s in joined["checks"]["steps"])


def _stopped_midway(args: list[str], env: dict, file: pathlib.Path, under_way, settle: float):
    """Runs run_draw.sh with `args`, sends SIGTERM `settle` seconds after `under_way(record)`
    holds of the JSON `file` it writes; (exit code, stderr)."""
    proc = subprocess.Popen(
        ["bash", str(SCRIPT), *args], env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.time() + 300
    while time.time() < deadline:
        if file.exists() and under_way(json.loads(file.read_text())):
            break
        time.sleep(0.2)
    time.sleep(settle)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err


def test_a_stopped_draw_keeps_the_files_of_its_finished_steps(tmp_path, demo_data):
    pack = _pack(demo_data, tmp_path / "pack")
    checks = tmp_path / "out" / "checks.json"
    # stopped once the training step is under way
    code, err = _stopped_midway([], _env(tmp_path, pack), checks, lambda c: len(c["steps"]) >= 2, 3)
    assert code == 124, err[-3000:]
    steps = json.loads(checks.read_text())["steps"]
    assert [s["status"] for s in steps[:2]] == ["ok"] * 2 and steps[2]["status"] == "stopped by SIGTERM", steps
    assert json.loads((tmp_path / "out" / "training.json").read_text())["step"]["status"] == "stopped by SIGTERM"
    assert not list((tmp_path / "out").glob("*.tmp"))  # every file the draw wrote is whole (the killed training's
    # own files are its resume's business)


def test_the_checks_step_fails_where_a_gpu_test_fails_or_none_ran(monkeypatch):
    from codeexecutor.campaign import checks

    monkeypatch.setitem(checks.SIZES, "tests_need", 90)  # as on a GPU
    clean = {"exit_code": 0, "tests": 5, "failures": 0, "errors": 0, "skipped": 0, "failed": []}
    assert checks.with_tests({"test_gpu": clean}, "ok") == "ok"
    failed = {**clean, "exit_code": 1, "failures": 2, "failed": ["test_a", "test_b"]}
    assert checks.with_tests({"test_gpu": failed}, "ok").startswith("failed: tests/test_gpu.py, 2 of 5 failed")
    for none_ran in ({**clean, "exit_code": 5, "tests": 0}, {**clean, "skipped": 5}):
        assert checks.with_tests({"test_gpu": none_ran}, "ok").startswith("failed: tests/test_gpu.py ran no test")
    assert checks.with_tests({"test_gpu": {"exit_code": 124}}, "ok").startswith("failed: tests/test_gpu.py stopped")
    assert (
        checks.with_tests({"test_gpu": {"skipped": "20 s left"}}, "ok") == "ok; tests/test_gpu.py skipped (20 s left)"
    )
    monkeypatch.setitem(checks.SIZES, "tests_need", 10**9)  # the CPU smoke run: no GPU tests to run
    assert checks.with_tests({"test_gpu": {"skipped": "no GPU"}}, "ok") == "ok"


def test_a_throughput_step_whose_measurements_fail_says_so():
    from codeexecutor.campaign.steps import measurements_status

    ok = {"steps": [{"preset": "small", "tokens_per_step": 49152, "tokens_per_s": 1.0}], "decode": {"graph": {}}}
    assert measurements_status(ok) == "ok"
    bad = {"steps": [dict(ok["steps"][0], error="IndexError: index 8008 is out of bounds")], "decode": {"graph": {}}}
    assert measurements_status(bad).startswith("failed: 1 of 2 measurements (small:49152): IndexError")
    assert measurements_status({"exit_code": 1}).startswith("failed: no measurement came back")


def test_the_deepspeed_call_runs_the_launcher_and_overlap_parts(tmp_path, demo_data):
    """`run_draw.sh --deepspeed` (a lent GPU's second call): run_pretrain.sh to its step
    limit with every step logged, then overlap_comm off and on, one file back."""
    env = _env(tmp_path, tmp_path / "none")
    missing = subprocess.run(
        ["bash", str(SCRIPT), "--deepspeed"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    _one_line_refusal(missing, "no pack at", "draw pack")
    pack = _pack(demo_data, tmp_path / "pack")
    run = subprocess.run(
        ["bash", str(SCRIPT), "--deepspeed"],
        env=_env(tmp_path, pack),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["deepspeed.json"]
    result = json.loads((tmp_path / "out" / "deepspeed.json").read_text())
    assert [(p["part"], p["status"]) for p in result["parts"]] == [("fp16", "ok"), ("overlap", "ok")]
    fp16 = result["fp16"]
    assert fp16["exit_code"] == 0 and fp16["steps"] == 6 and len(fp16["loss_scale"]) == 6
    assert "run_pretrain.sh --max-steps 6" in fp16["command"] and fp16["engine"] == "deepspeed"
    runs = result["overlap"]["runs"]
    assert [(r["engine"], r["overlap_comm"]) for r in runs.values()] == [("deepspeed", False), ("deepspeed", True)]
    assert all(r["exit_code"] == 0 and r["example_tokens_per_s"]["median"] > 0 for r in runs.values())
    assert result["overlap"]["on_over_off"] > 0 and result["device"]["torch"]


def test_a_stopped_deepspeed_call_keeps_what_its_part_logged(tmp_path, demo_data):
    """SIGTERM during the fp16 part: its processes stop, the part says so with the steps it
    logged, the overlap part never starts, the call exits 124 with its file whole."""
    pack = _pack(demo_data, tmp_path / "pack")
    out = tmp_path / "out" / "deepspeed.json"
    # stopped once the fp16 part is under way
    code, err = _stopped_midway(["--deepspeed"], _env(tmp_path, pack), out, lambda r: r["parts"], 2)
    assert code == 124 and "Traceback" not in err, err[-3000:]
    result = json.loads(out.read_text())
    assert [(p["part"], p["status"]) for p in result["parts"]] == [("fp16", "stopped by SIGTERM")]
    assert "command" in result["fp16"] and "steps" in result["fp16"]
    assert not list(out.parent.glob("*.tmp"))


def test_skips_after_names_only_the_late_skipped_steps():
    from codeexecutor.campaign.steps import skips_after

    rows = [{"step": s, "skipped_steps": k} for s, k in [(1, 1), (2, 2), (20, 2), (21, 3), (22, 3), (30, 5)]]
    assert skips_after(rows, 20) == [21, 30]
    assert skips_after(rows, 0) == [1, 2, 21, 30]
    assert skips_after([{"step": s} for s in range(1, 40)], 20) == []  # bf16: nothing skipped, nothing logged


def test_the_deepspeed_calls_verdicts_read_the_logged_rows(monkeypatch):
    """fp16 passes only with every step run, each with its loss scale, and no update skipped
    after step 20; the overlap part only where both runs trained on DeepSpeed with the
    overlap_comm asked; the speed is of each logged interval after the warm-up."""
    from codeexecutor.campaign import deepspeed_call as call
    from codeexecutor.campaign import steps

    monkeypatch.setattr(steps, "SMOKE", False)
    monkeypatch.setitem(call.SIZES, "warm", 2)
    rows = [{"step": s, "loss": 1.0, "loss_scale": 65536.0, "skipped_steps": 2} for s in range(1, 31)]
    fig = call.fp16_figures(rows) | {"exit_code": 0}
    assert call.fp16_status(fig, 30) == "ok" and fig["skipped_steps"] == 2
    rows[24]["skipped_steps"] = rows[25]["skipped_steps"] = 3  # an overflow at step 25
    assert "at [25]" in call.fp16_status(call.fp16_figures(rows) | {"exit_code": 0}, 30)
    assert "of 30 steps" in call.fp16_status(call.fp16_figures(rows[:20]) | {"exit_code": 0}, 30)
    bf16 = [{"step": s, "loss": 1.0} for s in range(1, 31)]  # no loss scale: not fp16
    assert "no loss scale" in call.fp16_status(call.fp16_figures(bf16) | {"exit_code": 0}, 30)

    logged = [  # 100 tokens a step; step 1 to 2 the compile (10 s), then 0.1 s a step
        {"step": s, "stage": "codenet", "stage_tokens": 100 * s, "stage_seconds": 10.0 + 0.1 * s} for s in range(1, 9)
    ]
    logged[0]["stage_seconds"] = 0.1
    assert call.speed(logged) == {"median": 1000, "quartiles": [1000, 1000], "intervals": 6}

    def run(engine, overlap_comm):
        return {
            "exit_code": 0,
            "steps": 8,
            "engine": engine,
            "overlap_comm": overlap_comm,
            "example_tokens_per_s": {"median": 900},
        }

    report = {"runs": {"overlap-off": run("deepspeed", False), "overlap-on": run("deepspeed", True)}}
    assert call.overlap_status(report, 8) == "ok" and report["on_over_off"] == 1.0
    report["runs"]["overlap-on"] = run("torch", None)  # the one-process default engine reads no ZeRO section
    assert "engine torch" in call.overlap_status(report, 8)
