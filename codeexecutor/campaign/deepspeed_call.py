"""A lent GPU's second call: the DeepSpeed paths a cluster user takes, which a draw leaves
for its time.

    bash run_draw.sh --deepspeed      # after the draw, in the lease's last minutes (270 s)

A draw spends its call on the trained model; its fp16 and launcher checks run last, on
the time left, and usually find none. What a V100 cluster needs to know is answered
here, each part writing `deepspeed.json` to $OUT as it ends (one file, so a call stopped
at its limit keeps what it measured):

    fp16      `run_pretrain.sh --max-steps 200` through the deepspeed launcher with
              ds_configs/zero2_fp16.json, on the draw's last stage (its sources and
              weights, 48 k-token rows): every step's dynamic loss scale and the steps
              skipped on overflow, those after step 20 named; the loss at its start and end
    overlap   the same stage in ZeRO-2 bf16 on one GPU with `overlap_comm` off and on,
              the median example tokens a second after a warm-up: what overlapping the
              gradient reduction costs where there is nothing to overlap it with (it is
              on only where several nodes share gradients: training/config.py)

The data is the pack's (the same unpack as the draw's). CAMPAIGN_SMOKE=1 runs the same
parts on the CPU at toy sizes, in fp32 (fp16 needs CUDA; the CPU refuses it in one line),
so the plumbing is tested in CI (tests/test_campaign.py).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import sys
import time

from codeexecutor.campaign import steps as d

BUDGET = float(os.environ.get("CAMPAIGN_BUDGET", d.SECOND_CALL))  # seconds of parts; CAMPAIGN_BUDGET fits a lease
SIZES = {
    # preset, tokens a micro-step, fp16 steps, overlap steps a run, warm-up steps left out of
    # a speed, and the seconds each part needs to be worth starting (the H100 draw: a
    # launcher run 50-80 s before its first step; `small` compiles in 12 s on the H200)
    False: {"preset": "small", "tokens": 49152, "fp16_steps": 200, "overlap_steps": 40, "warm": 10},
    True: {"preset": "tiny", "tokens": 1024, "fp16_steps": 6, "overlap_steps": 6, "warm": 2},
}[d.SMOKE]
NEED = {"fp16": 0 if d.SMOKE else 100, "overlap": 0 if d.SMOKE else 70}


def _stage(steps: int) -> list[dict]:
    """The draw's last stage (CodeNetMut: the longest traces, the loss head's largest sums)
    at `steps` steps and a short warm-up."""
    last = d.recipe_stages()[-1]
    return [dict(last, steps=steps, warmup=min(20, max(1, steps // 4)), share=1.0)]


def _ds_config(name: str, overlap: bool | None = None) -> str:
    """A DeepSpeed config from ds_configs/, with `overlap_comm` set where given."""
    if overlap is None:
        return f"ds_configs/{name}"
    cfg = json.loads((d.ROOT / "ds_configs" / name).read_text())
    cfg.setdefault("zero_optimization", {})["overlap_comm"] = overlap
    path = d.WORK / f"overlap-{'on' if overlap else 'off'}.json"
    path.write_text(json.dumps(cfg, indent=2))
    return str(path)


def fp16(result: dict, log, deadline: float) -> str:
    """run_pretrain.sh with ZeRO-2 fp16 (fp32 in the CPU smoke run) to its step limit."""
    n = SIZES["fp16_steps"]
    config = "cpu.json" if d.SMOKE else "zero2_fp16.json"
    cur = d.curriculum("fp16", _stage(n), SIZES["preset"], SIZES["tokens"], log_every=1)
    shutil.rmtree(d.WORK / "fp16", ignore_errors=True)
    env = {
        "PYTHON": sys.executable,
        "CURRICULUM": str(cur),
        "DS_CONFIG": f"ds_configs/{config}",
        "GPUS_PER_NODE": "1",
        "MASTER_PORT": str(random.randint(20000, 40000)),
    }
    t = time.time()
    code = d.sh(["bash", "run_pretrain.sh", "--max-steps", n], deadline - time.time(), log, env)
    rows = [r for r in d.train_log(d.WORK / "fp16") if "loss" in r]
    skipped = [r.get("skipped_steps") for r in rows]
    late = d.skips_after(rows, 20)
    losses = [r["loss"] for r in rows]
    result["fp16"] = {
        "command": f"DS_CONFIG=ds_configs/{config} GPUS_PER_NODE=1 bash run_pretrain.sh --max-steps {n}",
        "config": config,
        "exit_code": code,
        "seconds": round(time.time() - t, 1),
        "steps": len(rows),
        "loss_scale": [r.get("loss_scale") for r in rows],
        "skipped_steps": skipped[-1] if skipped else None,
        "skips_after_step_20": late,
        "loss_first_10": round(statistics.fmean(losses[:10]), 4) if losses else None,
        "loss_last_10": round(statistics.fmean(losses[-10:]), 4) if losses else None,
        "finite": all(x == x and abs(x) != float("inf") for x in losses),
    }
    done = code == 0 and len(rows) == n
    if not done:
        return f"failed: exit {code}, {len(rows)} of {n} steps logged"
    if d.SMOKE:
        return "ok"
    return "ok" if not late and all(result["fp16"]["loss_scale"][-5:]) else f"failed: skipped after step 20 at {late}"


def _speed(rows: list[dict]) -> float | None:
    """The median over logged steps after the warm-up of each step's own rate: its example
    tokens over its seconds (a row's `tokens_per_s` is the stage's so far, compile included)."""
    speeds = [
        (b["stage_tokens"] - a["stage_tokens"]) / (b["stage_seconds"] - a["stage_seconds"])
        for a, b in zip(rows, rows[1:])
        if a["step"] >= SIZES["warm"] and a["stage"] == b["stage"] and b["stage_seconds"] > a["stage_seconds"]
    ]
    return round(statistics.median(speeds)) if speeds else None


def overlap(result: dict, log, deadline: float) -> str:
    """ZeRO-2 bf16 (fp32 on the CPU) on one process, `overlap_comm` off then on, each run in
    half the time left: the median example tokens a second after the warm-up."""
    n = SIZES["overlap_steps"]
    base = "cpu.json" if d.SMOKE else "zero2_bf16.json"
    runs = {}
    for on in (False, True):
        name = f"overlap-{'on' if on else 'off'}"
        cur = d.curriculum(name, _stage(n), SIZES["preset"], SIZES["tokens"], log_every=1)
        shutil.rmtree(d.WORK / name, ignore_errors=True)
        limit = (deadline - time.time()) / (1 if on else 2)
        code = d.sh(
            [sys.executable, "-m", "codeexecutor.training", "--curriculum", cur, "--ds-config", _ds_config(base, on)],
            limit,
            log,
        )
        rows = [r for r in d.train_log(d.WORK / name) if "loss" in r]
        runs[name] = {"exit_code": code, "steps": len(rows), "example_tokens_per_s": _speed(rows)}
    off, on_ = (runs[k]["example_tokens_per_s"] for k in ("overlap-off", "overlap-on"))
    result["overlap"] = {
        "config": base,
        "runs": runs,
        "on_over_off": round(on_ / off, 3) if off and on_ else None,
        "measure": f"median example tokens a second (padding left out) over steps {SIZES['warm'] + 1}-{n}",
    }
    return "ok" if result["overlap"]["on_over_off"] else "failed: a run logged no speed (see runs)"


def call() -> int:
    start = time.time()
    deadline = start + BUDGET
    d.OUT.mkdir(parents=True, exist_ok=True)
    d.WORK.mkdir(parents=True, exist_ok=True)
    manifest = d.check_pack()
    result: dict = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start)), "parts": []}
    checks: dict = {}
    d.preflight(checks, d.WORK / "deepspeed-preflight.log")
    result["device"] = {
        k: checks["preflight"].get(k) for k in ("device", "torch", "cuda", "python", "deepspeed", "nvidia_smi")
    }
    if not checks["preflight"].get("deepspeed"):
        raise d.Refused(
            "DeepSpeed is not installed here: pack with its wheels (codeexecutor draw pack) and carry .campaign"
        )
    d.unpack(checks, manifest)
    for name, part in (("fp16", fp16), ("overlap", overlap)):
        log = d.WORK / f"deepspeed-{name}.log"
        log.write_text("")
        t, left = time.time(), deadline - time.time()
        if left < NEED[name]:
            status = f"skipped: {left:.0f} s left of the {NEED[name]} s it needs"
        else:
            try:
                status = part(result, log, deadline)
            except Exception as exc:  # noqa: BLE001  (a part that breaks is reported; the next one runs)
                status = f"failed: {type(exc).__name__}: {exc}"
        result["parts"].append(
            {"part": name, "status": status, "seconds": round(time.time() - t, 1), "log_tail": d.tail(log, 1500)}
        )
        d.write_json("deepspeed.json", result)
        print(f"[deepspeed {time.time() - start:5.0f}s] {name}: {status}", flush=True)
    result["seconds"] = round(time.time() - start, 1)
    d.write_json("deepspeed.json", result)
    return 0 if all(p["status"] == "ok" for p in result["parts"]) else 1


def run() -> int:
    """`codeexecutor draw deepspeed`: the call; 2 with one line where it cannot start."""
    try:
        return call()
    except d.Refused as exc:
        print(f"codeexecutor draw deepspeed: {exc}", file=sys.stderr)
        return 2
