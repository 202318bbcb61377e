"""The draw's last step: tests/test_gpu.py first (its 90 s are planned), then on the time
left the 192 k-token steps and DeepSpeed's step beside the torch one, the deepspeed
launcher stopped and resumed, fp16's loss scale. Each part runs only where its time fits,
a part skipped says so, and the step fails where a GPU test fails or none ran."""

from __future__ import annotations

import pathlib
import shutil
import sys
import time

from codeexecutor.campaign.steps import (
    SIZES,
    WORK,
    curriculum,
    recipe_stages,
    run_setup,
    sh,
    skips_after,
    speed,
    tail,
    train_log,
    write_json,
)
from codeexecutor.training.distributed import has_deepspeed


def gpu_tests(checks: dict, log: pathlib.Path, deadline: float) -> None:
    """tests/test_gpu.py (its launcher test left out: the `checks` step runs the launcher on
    the packed data), its counts and failures from the JUnit report."""
    junit = WORK / "test_gpu.xml"
    junit.unlink(missing_ok=True)
    code = sh(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-m",
            "gpu",
            "-p",
            "no:cacheprovider",
            "tests/test_gpu.py",
            "-k",
            "not launcher",
            f"--junitxml={junit}",
        ],
        deadline - time.time(),
        log,
    )
    checks["test_gpu"] = {"exit_code": code, **junit_counts(junit)}
    write_json("checks.json", checks)


def final_checks(checks: dict, speeds: dict, log: pathlib.Path, deadline: float) -> str:
    """The last step, on the time left, each part only where its time fits: the 192 k-token
    steps and DeepSpeed's step beside the torch one (into throughput.json), tests/test_gpu.py,
    then the launcher and fp16 checks. Returns the step's status."""
    deepspeed = has_deepspeed()
    if deadline - time.time() >= SIZES["tests_need"]:  # first: FlexAttention against the tile path on the GPU
        gpu_tests(checks, log, time.time() + SIZES["tests_need"])
    else:
        checks["test_gpu"] = {"skipped": f"{deadline - time.time():.0f} s left of the {SIZES['tests_need']} s it takes"}
    if SIZES["more_runs"] and deadline - time.time() >= SIZES["more_need"]:
        speeds["more"] = speed(
            "more", SIZES["more_runs"], time.time() + (deadline - time.time()) * 0.4, log, deepspeed=deepspeed
        )
        write_json("throughput.json", speeds)
    else:
        speeds["more"] = {"skipped": f"{deadline - time.time():.0f} s left"}
    if not deepspeed:
        checks["launcher"] = checks["fp16"] = {"skipped": "DeepSpeed was not carried (the pack gave its room to data)"}
        write_json("checks.json", checks)
        return with_tests(checks, "skipped: no DeepSpeed carried")
    return with_tests(checks, launcher_checks(checks, log, deadline))


def with_tests(checks: dict, status: str) -> str:
    """The step's status with the GPU tests' outcome: failed where any test failed or they
    did not finish, whatever the other parts said."""
    tests = checks.get("test_gpu") or {}
    on_gpu = SIZES["tests_need"] < 10**9  # the CPU smoke run has no GPU tests to run
    if isinstance(tests.get("skipped"), str):  # not run, and why (a run's JUnit counts its skipped tests instead)
        return f"{status}; tests/test_gpu.py skipped ({tests['skipped']})" if on_gpu else status
    if tests.get("exit_code") == 124:
        return f"failed: tests/test_gpu.py stopped at its limit ({status})"
    bad = tests.get("failures", 0) + tests.get("errors", 0)
    ran = tests.get("tests", 0) - tests.get("skipped", 0)
    if on_gpu and not ran:  # every test skipped, or none collected (exit 5)
        return f"failed: tests/test_gpu.py ran no test (exit {tests.get('exit_code')}) ({status})"
    if tests.get("exit_code") not in (0, 5) or bad:
        return (
            f"failed: tests/test_gpu.py, {bad} of {tests.get('tests', '?')} failed "
            f"{tests.get('failed', [])[:3]} ({status})"
        )
    return status


def launcher_checks(checks: dict, log: pathlib.Path, deadline: float) -> str:
    """On the time the draw has left (the first two draws answered both): run_pretrain.sh
    as a cluster user runs it (the deepspeed launcher, ZeRO-2) stopped by --max-steps and
    started again, the logged step sequence continuous; then ZeRO-2 fp16 (the V100 path),
    its dynamic loss scale and skipped steps. A check that would not fit is skipped and
    says so. Returns the step's status."""
    import random

    left = deadline - time.time()
    if left < SIZES["launch_need"]:
        checks["launcher"] = {"skipped": f"{left:.0f} s left of the {SIZES['launch_need']} s two launcher runs take"}
        write_json("checks.json", checks)
        return f"skipped: {left:.0f} s left"
    stages = [
        {
            "name": "singleline",
            "steps": SIZES["launch_steps"],
            "lr": 2.0e-4,
            "warmup": 1,
            "sources": [dict(recipe_stages()[0]["sources"][0], weight=1.0)],
        }
    ]
    # DeepSpeed's engine named: on one process `auto` takes the torch engine, and the check
    # is of the path a cluster's several processes take (ZeRO, DeepSpeed's checkpoints)
    cur = curriculum("launch", stages, SIZES["presets"][0], SIZES["budgets"][0], engine="deepspeed")
    shutil.rmtree(WORK / "launch", ignore_errors=True)
    env = {
        "PYTHON": sys.executable,
        "CURRICULUM": str(cur),
        "DS_CONFIG": f"ds_configs/{SIZES['ds']}",
        "MASTER_PORT": str(random.randint(20000, 40000)),
    }
    half = SIZES["launch_steps"] // 2
    first = sh(["bash", "run_pretrain.sh", "--max-steps", half], deadline - time.time(), log, env)
    second = sh(["bash", "run_pretrain.sh"], deadline - time.time(), log, env)
    steps = [r["step"] for r in train_log(WORK / "launch") if "loss" in r]
    checks["launcher"] = {
        "ds_config": SIZES["ds"],
        "exit_codes": [first, second],
        "logged_steps": steps,
        "resumed": f"at step {half}" in tail(log, 200_000),
        "continuous": steps == list(range(1, SIZES["launch_steps"] + 1)),
        "final_model": (WORK / "launch" / "final" / "config.json").exists(),
        **run_setup(WORK / "launch"),
    }
    write_json("checks.json", checks)
    left = deadline - time.time()
    if SIZES["fp16_steps"] and left < SIZES["fp16_need"]:
        checks["fp16"] = {"skipped": f"{left:.0f} s left of the {SIZES['fp16_need']} s an fp16 run takes"}
    elif SIZES["fp16_steps"]:
        stages[0]["steps"] = SIZES["fp16_steps"]
        cur = curriculum("fp16", stages, SIZES["presets"][0], SIZES["budgets"][0])
        shutil.rmtree(WORK / "fp16", ignore_errors=True)
        code = sh(
            [
                sys.executable,
                "-m",
                "codeexecutor.training",
                "--curriculum",
                cur,
                "--ds-config",
                "ds_configs/zero2_fp16.json",
            ],
            deadline - time.time(),
            log,
        )
        rows = [r for r in train_log(WORK / "fp16") if "loss" in r]
        skipped = [r.get("skipped_steps", 0) for r in rows]
        late = skips_after(rows, 20)
        checks["fp16"] = {
            "exit_code": code,
            "steps": len(rows),
            "loss_scale": [r.get("loss_scale") for r in rows],
            "skipped_steps": skipped[-1] if skipped else None,
            "skips_after_step_20": late,
            "settled": bool(rows) and not late and all(r.get("loss_scale") for r in rows[-5:]),
        }
    else:
        checks["fp16"] = {"skipped": "fp16 training needs CUDA (the CPU smoke run checks the bf16 path only)"}
    write_json("checks.json", checks)
    return (
        "ok"
        if checks["launcher"]["continuous"] and checks["launcher"]["final_model"]
        else "failed: see checks.launcher"
    )


def junit_counts(path: pathlib.Path) -> dict:
    import xml.etree.ElementTree as ET

    if not path.exists():
        return {}
    suite = ET.parse(path).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    failed = [
        c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None or c.find("error") is not None
    ]
    return {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")} | {"failed": failed}
