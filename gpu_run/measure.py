"""A lease's second call: what a cluster user needs to know, which the lease's own call
leaves to give its seconds to training.

    bash gpu_run/run.sh --measure      # after the lease, on the minutes left (270 s)

Each part runs where its seconds fit (gpu_run/recipe.yaml `measure`), writing
`$OUT/measure.json` as it starts and ends, so a call stopped at its limit keeps what it
measured:

    throughput  benchmarks/bench_step.py --speed: the compiled row step of `mini-wide` and
                `base` (example tokens a second, MFU, compile seconds), greedy decoding at
                a batch of 300
    tests       tests/test_gpu.py: FlexAttention against the tile path, the compiled bf16
                step, decoding in a CUDA graph
    fp16        run_pretrain.sh through the deepspeed launcher in ZeRO-2 fp16 to 200 steps:
                its loss scale and the updates skipped
    overlap     DeepSpeed's engine in ZeRO-2 bf16, `overlap_comm` off then on: what
                overlapping the gradient reduction costs on one GPU

The data is the lease's (`pretrain --until tokenize` on the committed ids).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import shutil
import signal
import statistics
import sys
import time

from lease import ROOT, Stopped, _stop, preflight, pretrain_args, settings, sh, tail

from codeexecutor import atomic


def curriculum(work: pathlib.Path, name: str, m: dict, steps: int, **train) -> pathlib.Path:
    """The tokenized recipe's last stage (CodeNetMut: its longest traces) at `steps` steps,
    its mining left out, on the measured preset."""
    import yaml

    raw = yaml.safe_load((work / "pt" / "tokenized" / "curriculum.yaml").read_text())
    last = raw["stages"][-1]
    last["sources"] = [{k: v for k, v in s.items() if k not in ("hardest", "mine_from")} for s in last["sources"]]
    raw["stages"] = [dict(last, steps=steps, warmup=min(20, max(1, steps // 4)), share=1.0)]
    raw["model"]["preset"] = m["preset"]
    raw["train"].update(output_dir=str(work / name), max_tokens=m["tokens"], eval_examples=0, **train)
    path = work / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def log_rows(run: pathlib.Path) -> list[dict]:
    path = run / "train_log.jsonl"
    return [r for r in map(json.loads, path.read_text().splitlines()) if "loss" in r] if path.exists() else []


def engine_of(run: pathlib.Path) -> dict:
    """The engine a run trained on and the `overlap_comm` its DeepSpeed config ended with."""
    try:
        record = json.loads((run / "curriculum.json").read_text())
    except (OSError, ValueError):
        return {"engine": None, "overlap_comm": None}
    zero = (record.get("ds_config") or {}).get("zero_optimization", {})
    return {"engine": record.get("setup", {}).get("engine"), "overlap_comm": zero.get("overlap_comm")}


def speed(rows: list[dict], warm: int) -> dict | None:
    """Example tokens a second (padding left out) of each logged interval after `warm` steps:
    the median and quartiles (a row's own `tokens_per_s` is its stage's so far, compile included)."""
    rates = [
        (b["stage_tokens"] - a["stage_tokens"]) / (b["stage_seconds"] - a["stage_seconds"])
        for a, b in zip(rows, rows[1:])
        if a["step"] >= warm and a["stage"] == b["stage"] and b["stage_seconds"] > a["stage_seconds"]
    ]
    if not rates:
        return None
    q = statistics.quantiles(rates, n=4) if len(rates) > 1 else [rates[0]] * 3
    return {"median": round(q[1]), "quartiles": [round(q[0]), round(q[2])], "intervals": len(rates)}


def throughput(m: dict, work: pathlib.Path, log: pathlib.Path, until: float, part: dict) -> str:
    out, cur = work / "speed.json", curriculum(work, "speed", m, 1)
    cmd = [sys.executable, "benchmarks/bench_step.py", "--speed", "--runs", *m["speed_runs"], "--decode", m["decode"]]
    cmd += ["--no-deepspeed", "--curriculum", cur, "--budget", max(5, until - time.time() - 5), "--out", out]
    code = sh(cmd, until - time.time(), log)
    part.update(exit_code=code, **(json.loads(out.read_text()) if out.exists() else {}))
    failed = [r for r in part.get("steps", []) if "error" in r]
    return "ok" if code == 0 and part.get("steps") and not failed else f"failed: exit {code}, {len(failed)} runs failed"


def tests(m: dict, work: pathlib.Path, log: pathlib.Path, until: float, part: dict) -> str:
    cmd = [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider", "tests/test_gpu.py"]
    code = sh([*cmd, "-k", "not launcher"], until - time.time(), log)
    part["exit_code"] = code
    summary = [x for x in tail(log, 600).splitlines() if " passed" in x or " failed" in x]
    part["summary"] = summary[-1] if summary else None
    if code == 0 and part["summary"] and " passed" in part["summary"]:
        return "ok"
    return f"failed: exit {code}, {part['summary'] or 'no summary'}"  # a file whose every test skipped ran none


def fp16(m: dict, work: pathlib.Path, log: pathlib.Path, until: float, part: dict) -> str:
    n, smoke = m["fp16_steps"], m["smoke"]
    config = "ds_configs/cpu.json" if smoke else "ds_configs/zero2_fp16.json"  # fp16 needs CUDA
    cur = curriculum(work, "fp16", m, n, log_every=1, engine="deepspeed", checkpoints=False)
    env = {"PYTHON": sys.executable, "CURRICULUM": str(cur), "DS_CONFIG": config, "GPUS_PER_NODE": "1"}
    env["MASTER_PORT"] = str(random.randint(20000, 40000))
    part["command"] = f"DS_CONFIG={config} GPUS_PER_NODE=1 bash run_pretrain.sh --max-steps {n}"
    os.environ.update(env)  # the launcher reads its settings from the environment
    try:
        code = sh(["bash", "run_pretrain.sh", "--max-steps", n], until - time.time(), log)
    finally:  # stopped or not, what the run logged
        rows = log_rows(work / "fp16")
        late = [
            b["step"]
            for a, b in zip(rows, rows[1:])
            if b["step"] > 20 and (b.get("skipped_steps") or 0) > (a.get("skipped_steps") or 0)
        ]
        part.update(
            steps=len(rows),
            loss_scale=[r.get("loss_scale") for r in rows],
            skips_after_step_20=late,
            **engine_of(work / "fp16"),
        )
        if rows:
            part.update(loss_first=round(rows[0]["loss"], 4), loss_last=round(rows[-1]["loss"], 4))
    if code != 0 or part["steps"] != n:
        return f"failed: exit {code}, {part['steps']} of {n} steps logged"
    if not smoke and not all(part["loss_scale"]):
        return "failed: a step logged no loss scale (the run did not train in fp16)"
    return f"failed: updates skipped after step 20, at {late}" if late else "ok"


def overlap(m: dict, work: pathlib.Path, log: pathlib.Path, until: float, part: dict) -> str:
    n = m["overlap_steps"]
    base = json.loads((ROOT / "ds_configs" / ("cpu.json" if m["smoke"] else "zero2_bf16.json")).read_text())
    part.update(runs={}, measure=f"example tokens a second of each {m['every']}-step interval from step {m['warm']}")
    for on in (False, True):
        name = f"overlap-{'on' if on else 'off'}"
        base.setdefault("zero_optimization", {})["overlap_comm"] = on
        (work / f"{name}.json").write_text(json.dumps(base))
        cur = curriculum(work, name, m, n, log_every=m["every"], engine="deepspeed", checkpoints=False)
        cmd = [sys.executable, "-m", "codeexecutor.training", "--curriculum", cur, "--ds-config", work / f"{name}.json"]
        code = None
        try:
            code = sh(cmd, (until - time.time()) / (1 if on else 2), log)
        finally:
            rows = log_rows(work / name)
            run = {"exit_code": code, "steps": rows[-1]["step"] if rows else 0, **engine_of(work / name)}
            part["runs"][name] = {**run, "example_tokens_per_s": speed(rows, m["warm"])}
        r = part["runs"][name]
        if code != 0 or r["steps"] != n or not r["example_tokens_per_s"]:
            return f"failed: {name} exit {code}, {r['steps']} of {n} steps logged"
        if r["engine"] != "deepspeed" or r["overlap_comm"] is not on:
            return f"failed: {name} trained on engine {r['engine']} with overlap_comm {r['overlap_comm']}"
    off, on_ = (part["runs"][k]["example_tokens_per_s"]["median"] for k in ("overlap-off", "overlap-on"))
    part["on_over_off"] = round(on_ / off, 3)
    return "ok"


PARTS = {"throughput": throughput, "tests": tests, "fp16": fp16, "overlap": overlap}


def measure(s: dict, out: pathlib.Path, work: pathlib.Path, models: pathlib.Path) -> int:
    m = {**s["measure"], "smoke": s["smoke"]}
    start = time.time()
    deadline = start + m["seconds"]
    out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    rec: dict = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start)), "preflight": preflight(s)}
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    data = sh(
        [
            sys.executable,
            "-m",
            "codeexecutor",
            "pretrain",
            *pretrain_args(s, work, models, None),
            "--until",
            "tokenize",
        ],
        120,
        work / "data.log",
    )
    if data != 0:
        rec["refused"] = f"the data did not unpack (exit {data}): {tail(work / 'data.log', 400)}"
        atomic.write_json(out / "measure.json", rec)
        print(f"gpu_run/measure.py: {rec['refused']}", file=sys.stderr)
        return 2
    for name, fn in PARTS.items():
        log, t, part = work / f"{name}.log", time.time(), {"status": "running"}
        rec[name] = part
        atomic.write_json(out / "measure.json", rec, default=str)
        if deadline - t < m["need"][name]:
            part["status"] = f"skipped: {deadline - t:.0f} s left of the {m['need'][name]} s it needs"
            continue
        try:
            part["status"] = fn(m, work, log, deadline, part)
        except Stopped as exc:
            part["status"] = f"stopped by {exc}"
        except Exception as exc:  # noqa: BLE001  (a part that breaks is reported; the next one runs)
            part["status"] = f"failed: {type(exc).__name__}: {exc}"
        part.update(seconds=round(time.time() - t, 1), log_tail=tail(log))
        atomic.write_json(out / "measure.json", rec, default=str)
        print(f"[measure {time.time() - start:5.0f}s] {name}: {part['status']}", flush=True)
        if part["status"].startswith("stopped"):
            return 124
    return 0 if all(rec[n]["status"] in ("ok",) or rec[n]["status"].startswith("skipped") for n in PARTS) else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="gpu_run/measure.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--smoke", action="store_true", help="the same parts on the CPU at toy sizes, in fp32")
    ap.add_argument("--out", default=os.environ.get("OUT") or str(ROOT / "runs" / "gpu-run" / "out"))
    ap.add_argument("--work", default=str(ROOT / "runs" / "gpu-run" / "measure"))
    a = ap.parse_args(argv)
    return measure(settings(a.smoke), pathlib.Path(a.out), pathlib.Path(a.work), ROOT / "models")


if __name__ == "__main__":
    sys.exit(main())
