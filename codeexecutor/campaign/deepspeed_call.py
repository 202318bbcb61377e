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
    overlap   the same stage on DeepSpeed's engine in ZeRO-2 bf16 on one GPU, `overlap_comm`
              off and on, the median example tokens a second over the logged intervals
              after a warm-up: what overlapping the gradient reduction costs where there is
              nothing to overlap it with (it is on only where several nodes share
              gradients: training/config.py). `train.engine` is named: on one process
              `auto` takes the torch engine, which reads no ZeRO section

The file is written first with the device and the budget, again as each part starts and
ends, and with a refusal's reason; SIGTERM or SIGINT stops the part's process group and
writes what it logged. The data is the pack's (the same unpack as the draw's). The
budget's clock starts after the wheels are installed. CAMPAIGN_SMOKE=1 runs the same
parts on the CPU at toy sizes, in fp32 (fp16 needs CUDA; the CPU refuses it in one line),
so the plumbing is tested in CI (tests/test_campaign.py).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import statistics
import sys
import time

from codeexecutor.campaign import steps as d

BUDGET = float(os.environ.get("CAMPAIGN_BUDGET", d.SECOND_CALL))  # seconds of parts; CAMPAIGN_BUDGET fits a lease
SIZES = {
    # preset, tokens a micro-step, fp16 steps, overlap steps a run, steps a log row, warm-up
    # steps left out of a speed (the compile and the first steps' allocations)
    False: {"preset": "small", "tokens": 49152, "fp16_steps": 200, "overlap_steps": 100, "every": 5, "warm": 20},
    True: {"preset": "tiny", "tokens": 1024, "fp16_steps": 6, "overlap_steps": 8, "every": 2, "warm": 2},
}[d.SMOKE]
# the seconds each part needs to be worth starting: the H100 draws measured a launcher run
# 50-80 s before its first step, a training process about 20 s; `small` compiles in 12 s on
# the H200, and 0.053 s a step of 48 k tokens
NEED = {"fp16": 0 if d.SMOKE else 100, "overlap": 0 if d.SMOKE else 110}
MARGIN = 0 if d.SMOKE else 15  # seconds between parts: a killed run's group, its log read, the file written


class Stopped(Exception):
    """SIGTERM or SIGINT: the call is being stopped."""


STOPPED: list[str] = []  # the signal that stopped the call, once one came


def _stop(signum, frame):
    """The first SIGTERM or SIGINT stops the part under way (its processes killed by
    `steps.sh`); any later one is ignored, so the file is still written."""
    STOPPED.append(signal.Signals(signum).name)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise Stopped(STOPPED[0])


def _stage(steps: int) -> list[dict]:
    """The draw's last stage (CodeNetMut: the longest traces, the loss head's largest sums)
    at `steps` steps and a short warm-up, its mining left out (as the throughput step's)."""
    last = d.recipe_stages()[-1]
    sources = [{k: v for k, v in src.items() if k not in ("hardest", "mine_from")} for src in last["sources"]]
    return [dict(last, sources=sources, steps=steps, warmup=min(20, max(1, steps // 4)), share=1.0)]


def _ds_config(name: str, overlap: bool) -> str:
    """A DeepSpeed config of ds_configs/ with `overlap_comm` set, written into the work folder."""
    cfg = json.loads((d.ROOT / "ds_configs" / name).read_text())
    cfg.setdefault("zero_optimization", {})["overlap_comm"] = overlap
    path = d.WORK / f"overlap-{'on' if overlap else 'off'}.json"
    path.write_text(json.dumps(cfg, indent=2))
    return str(path)


def fp16(result: dict, log, deadline: float) -> str:
    """run_pretrain.sh with ZeRO-2 fp16 (fp32 in the CPU smoke run) to its step limit."""
    n = SIZES["fp16_steps"]
    config = "cpu.json" if d.SMOKE else "zero2_fp16.json"
    cur = d.curriculum(
        "fp16", _stage(n), SIZES["preset"], SIZES["tokens"], log_every=1, engine="deepspeed", checkpoints=False
    )
    shutil.rmtree(d.WORK / "fp16", ignore_errors=True)
    env = {
        "PYTHON": sys.executable,
        "CURRICULUM": str(cur),
        "DS_CONFIG": f"ds_configs/{config}",
        "GPUS_PER_NODE": "1",
        "MASTER_PORT": str(random.randint(20000, 40000)),
    }
    t = time.time()
    result["fp16"] = {"command": f"DS_CONFIG=ds_configs/{config} GPUS_PER_NODE=1 bash run_pretrain.sh --max-steps {n}"}
    try:
        code = d.sh(["bash", "run_pretrain.sh", "--max-steps", n], deadline - time.time(), log, env)
    finally:  # stopped or not, what the run logged
        rows = [r for r in d.train_log(d.WORK / "fp16") if "loss" in r]
        result["fp16"].update(
            **fp16_figures(rows), **d.run_setup(d.WORK / "fp16"), config=config, seconds=round(time.time() - t, 1)
        )
    result["fp16"]["exit_code"] = code
    return fp16_status(result["fp16"], n)


def fp16_figures(rows: list[dict]) -> dict:
    """What an fp16 run's log rows say of its loss scale: each step's, the updates skipped
    on overflow in all and after step 20, the loss at the start and end."""
    losses = [r["loss"] for r in rows]
    return {
        "steps": len(rows),
        "loss_scale": [r.get("loss_scale") for r in rows],
        "skipped_steps": rows[-1].get("skipped_steps") if rows else None,
        "skips_after_step_20": d.skips_after(rows, 20),
        "loss_first_10": round(statistics.fmean(losses[:10]), 4) if losses else None,
        "loss_last_10": round(statistics.fmean(losses[-10:]), 4) if losses else None,
    }


def fp16_status(fig: dict, n: int) -> str:
    """ok where every step ran, and (in fp16) each logged its loss scale and none after
    step 20 was skipped; else what failed."""
    if fig.get("exit_code") != 0 or fig["steps"] != n:
        return f"failed: exit {fig.get('exit_code')}, {fig['steps']} of {n} steps logged"
    if d.SMOKE:  # fp32: no loss scale to read
        return "ok"
    if not all(fig["loss_scale"]):
        return "failed: a step logged no loss scale (the run did not train in fp16)"
    return (
        f"failed: updates skipped after step 20, at {fig['skips_after_step_20']}"
        if fig["skips_after_step_20"]
        else "ok"
    )


def speed(rows: list[dict]) -> dict | None:
    """Example tokens a second (padding left out) of each logged interval after the warm-up,
    from consecutive rows' stage tokens and seconds (a row's `tokens_per_s` is the stage's
    so far, compile included): their median and quartiles."""
    rates = [
        (b["stage_tokens"] - a["stage_tokens"]) / (b["stage_seconds"] - a["stage_seconds"])
        for a, b in zip(rows, rows[1:])
        if a["step"] >= SIZES["warm"] and a["stage"] == b["stage"] and b["stage_seconds"] > a["stage_seconds"]
    ]
    if not rates:
        return None
    q = statistics.quantiles(rates, n=4) if len(rates) > 1 else [rates[0]] * 3
    return {"median": round(q[1]), "quartiles": [round(q[0]), round(q[2])], "intervals": len(rates)}


def overlap(result: dict, log, deadline: float) -> str:
    """DeepSpeed's engine in ZeRO-2 bf16 (fp32 on the CPU) on one process, `overlap_comm`
    off then on, each run in half the time left: its speed after the warm-up."""
    n = SIZES["overlap_steps"]
    base = "cpu.json" if d.SMOKE else "zero2_bf16.json"
    result["overlap"] = {
        "config": base,
        "engine": "deepspeed",
        "runs": {},
        "measure": f"example tokens a second (padding left out) of each {SIZES['every']}-step interval from step "
        f"{SIZES['warm']} to {n}",
    }
    runs = result["overlap"]["runs"]
    for on in (False, True):
        name = f"overlap-{'on' if on else 'off'}"
        cur = d.curriculum(
            name,
            _stage(n),
            SIZES["preset"],
            SIZES["tokens"],
            log_every=SIZES["every"],
            engine="deepspeed",
            checkpoints=False,  # a measurement: never resumed, and a save would take its time
        )
        shutil.rmtree(d.WORK / name, ignore_errors=True)
        limit = (deadline - time.time()) / (1 if on else 2)
        argv = [sys.executable, "-m", "codeexecutor.training", "--curriculum", cur, "--ds-config", _ds_config(base, on)]
        code = None
        try:
            code = d.sh(argv, limit, log)
        finally:  # stopped or not, what the run logged
            rows = [r for r in d.train_log(d.WORK / name) if "loss" in r]
            runs[name] = {"exit_code": code, "steps": rows[-1]["step"] if rows else 0, **d.run_setup(d.WORK / name)}
            runs[name]["example_tokens_per_s"] = speed(rows)
    return overlap_status(result["overlap"], n)


def overlap_status(report: dict, n: int) -> str:
    """ok where both runs finished on DeepSpeed's engine and measured a speed (their ratio
    written into `report`); else which run failed and how."""
    for name, r in report["runs"].items():
        wanted = name == "overlap-on"
        if r["exit_code"] != 0 or r["steps"] != n or not r["example_tokens_per_s"]:
            return f"failed: {name} exit {r['exit_code']}, {r['steps']} of {n} steps logged"
        if r["engine"] != "deepspeed" or r["overlap_comm"] is not wanted:
            return f"failed: {name} trained on engine {r['engine']} with overlap_comm {r['overlap_comm']}"
    off, on = (report["runs"][k]["example_tokens_per_s"]["median"] for k in ("overlap-off", "overlap-on"))
    report["on_over_off"] = round(on / off, 3)
    return "ok"


def _parts(result: dict, start: float, deadline: float) -> None:
    """Each part on the time left, the file written as it starts and ends; fp16 leaves the
    overlap part its need where the budget holds both."""
    for name, part in (("fp16", fp16), ("overlap", overlap)):
        log = d.WORK / f"deepspeed-{name}.log"
        log.write_text("")
        t, left = time.time(), deadline - time.time()
        entry = {"part": name, "status": "running"}
        result["parts"].append(entry)
        d.write_json("deepspeed.json", result)
        # fp16 leaves overlap its need, and a margin for the bookkeeping between them
        reserve = NEED["overlap"] + MARGIN
        until = deadline - reserve if name == "fp16" and left >= NEED["fp16"] + reserve else deadline
        if left < NEED[name]:
            entry["status"] = f"skipped: {left:.0f} s left of the {NEED[name]} s it needs"
        else:
            try:
                entry["status"] = part(result, log, until)
            except Stopped as exc:
                entry["status"] = f"stopped by {exc}"
            except Exception as exc:  # noqa: BLE001  (a part that breaks is reported; the next one runs)
                entry["status"] = f"failed: {type(exc).__name__}: {exc}"
        entry.update(seconds=round(time.time() - t, 1), log_tail=d.tail(log, 1500))
        d.write_json("deepspeed.json", result)
        print(f"[deepspeed {time.time() - start:5.0f}s] {name}: {entry['status']}", flush=True)
        if STOPPED:  # whatever the part's status says (a stop can surface as another error)
            return


def call() -> int:
    start = time.time()
    deadline = start + BUDGET
    d.OUT.mkdir(parents=True, exist_ok=True)
    d.WORK.mkdir(parents=True, exist_ok=True)
    result: dict = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start)), "budget": BUDGET, "parts": []}
    d.write_json("deepspeed.json", result)  # a call killed in its preflight still says it started
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        _before_parts(result)
    except Stopped as exc:
        result["stopped"] = f"by {exc}, before the parts"
        d.write_json("deepspeed.json", result)
        raise
    except Exception as exc:  # noqa: BLE001  (any failure before the parts: its reason in the file, one line)
        result["refused"] = str(exc) if isinstance(exc, d.Refused) else f"{type(exc).__name__}: {exc}"
        d.write_json("deepspeed.json", result)
        raise d.Refused(result["refused"]) from None
    _parts(result, start, deadline)
    result["seconds"] = round(time.time() - start, 1)
    d.write_json("deepspeed.json", result)
    if STOPPED:
        raise Stopped(STOPPED[0])
    return 0 if all(p["status"] == "ok" for p in result["parts"]) else 1


def _before_parts(result: dict) -> None:
    """The pack checked, the device's versions (written), the data unpacked; refused where
    DeepSpeed is not here."""
    manifest = d.check_pack()
    checks: dict = {}
    d.preflight(checks, d.WORK / "deepspeed-preflight.log")
    keys = ("device", "torch", "cuda", "python", "deepspeed", "nvidia_smi", "matmul_tflops")
    result["device"] = {k: checks["preflight"].get(k) for k in keys}
    d.write_json("deepspeed.json", result)
    if not checks["preflight"].get("deepspeed"):
        raise d.Refused(
            "DeepSpeed is not installed here: pack with its wheels (codeexecutor draw pack), carry .campaign"
        )
    d.unpack(checks, manifest)


def run() -> int:
    """`codeexecutor draw deepspeed`: the call; 2 with one line where it cannot start, 124
    where a signal stopped it (its file written)."""
    try:
        return call()
    except d.Refused as exc:
        print(f"codeexecutor draw deepspeed: {exc}", file=sys.stderr)
        return 2
    except Stopped as exc:
        print(f"codeexecutor draw deepspeed: stopped by {exc}; deepspeed.json holds what ran", file=sys.stderr)
        return 124
