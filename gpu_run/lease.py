"""One lease of a lent GPU in one call: the committed GPU model continued (or, with none
yet, the first recipe trained from scratch), exported in int8, scored on the fixed test
samples, each step's record in `$OUT/lease.json` as it ends.

    bash gpu_run/run.sh                   # on the lent GPU, carrying .campaign/whl (the wheels)
    bash gpu_run/run.sh --plan            # here: what the call will do and the room it leaves
    python gpu_run/land.py DIR --commit   # back here: the model into models/, committed

Every step but the export (a second or two in this process) is one of the product's own
commands in a child process, under its share of the call's seconds (gpu_run/recipe.yaml):

    data     pretrain --until tokenize, the committed ids unpacked (curricula/packed)
    train    pretrain --resume --minutes M: the training child, which a device fault cannot
             take this process down with; pretrain carries a dead child on, from its last
             save, on a safer path (training/fallback.py)
    export   the trained model in int8 (training/export.py), in pieces of 16 MiB
    score    evaluate --limit 300 on each test sample, the headline set first

The files a call brings back are at most eight: lease.json, model-meta.tar and the pieces.
A SIGTERM or SIGINT stops the step under way, keeps what it wrote and ends the call.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from codeexecutor import atomic  # noqa: E402  (after the checkout is on the path)


class Stopped(Exception):
    """SIGTERM or SIGINT: the call is being stopped."""


def _stop(signum, frame):
    raise Stopped(signal.Signals(signum).name)


def settings(smoke: bool) -> dict:
    """gpu_run/recipe.yaml, its `smoke` section over the rest where `smoke`."""
    import yaml

    raw = yaml.safe_load((ROOT / "gpu_run" / "recipe.yaml").read_text())
    smoke_part = raw.pop("smoke")
    return {**raw, **smoke_part, "smoke": True} if smoke else {**raw, "smoke": False}


def previous(models: pathlib.Path, s: dict) -> dict | None:
    """The committed model's lease record (models/MODEL/lease.json), None before the first lease."""
    path = models / s["model"] / "lease.json"
    return json.loads(path.read_text()) if path.is_file() else None


def pretrain_args(s: dict, work: pathlib.Path, models: pathlib.Path, before: dict | None) -> list[str]:
    """The recipe and `--set` lines of this lease: the first recipe, or the committed model
    continued on the later stages."""
    sets = [*s["set"], f"data.dir={work / 'data'}", "data.packed=curricula/packed"]
    if before is not None:
        sets += [f"model.init={models / s['model']}", "stages=" + json.dumps(s["later"])]
    return ["--recipe", s["first"], "--out", str(work / "pt"), *[a for x in sets for a in ("--set", x)]]


GRACE = 10  # seconds a stopped command has, after a SIGTERM, to keep what it has before the SIGKILL


def sh(args: list, timeout: float, log: pathlib.Path) -> int:
    """A command in its own process group, stopped whole at `timeout` (exit 124) or when
    this process is stopped: a SIGTERM first (pretrain and evaluate keep what they have),
    a SIGKILL after GRACE seconds. Its output goes to `log`."""
    with open(log, "a") as f:
        f.write(f"$ {' '.join(map(str, args))}\n")
        f.flush()
        proc = subprocess.Popen(
            list(map(str, args)), stdout=f, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True
        )
        try:
            return proc.wait(timeout=max(1.0, timeout))
        except subprocess.TimeoutExpired:
            _end(proc)
            f.write(f"[lease] stopped at its time limit of {timeout:.0f} s\n")
            return 124
        except BaseException:  # the call itself is being stopped: its command goes with it
            _end(proc)
            raise


def _end(proc: subprocess.Popen) -> None:
    """SIGTERM to the command's group, SIGKILL after GRACE seconds or at a signal to this
    process, which is raised again once the group is gone."""
    stop = None
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=GRACE)
    except subprocess.TimeoutExpired:
        pass
    except Stopped as exc:
        stop = exc
    except ProcessLookupError:  # the group is gone already
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # what is left of the group: its children too
    except ProcessLookupError:
        pass
    proc.wait()
    if stop is not None:
        raise stop


def tail(path: pathlib.Path, n: int = 1500) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return ""


PREFLIGHT = """
import json, platform, torch
info = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda}
for name in ("transformers", "tokenizers", "datasets", "deepspeed", "safetensors"):
    try:
        info[name] = getattr(__import__(name), "__version__", "present")
    except ImportError:
        info[name] = None
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    info.update(device=p.name, memory_gib=round(p.total_memory / 2**30, 1), bf16=torch.cuda.is_bf16_supported())
else:
    info["device"] = "cpu (" + (platform.processor() or platform.machine()) + ")"
print(json.dumps(info))
"""


def preflight(s: dict) -> dict:
    """Versions and the accelerator, asked of a child (this process opens no CUDA context:
    the training child must find the device free); refused on a GPU call without CUDA."""
    run = subprocess.run([sys.executable, "-c", PREFLIGHT], capture_output=True, text=True, cwd=ROOT, timeout=120)
    if run.returncode != 0:
        raise SystemExit(f"gpu_run: the preflight failed: {(run.stderr.strip().splitlines() or ['?'])[-1]}")
    info = json.loads(run.stdout.strip().splitlines()[-1])
    if not s["smoke"] and info["device"].startswith("cpu"):
        raise SystemExit("gpu_run: no CUDA device here: run the lease on the lent GPU machine, or --smoke on a CPU")
    return info


def train(s: dict, args: list[str], deadline: float, log: pathlib.Path, record: dict) -> None:
    """`pretrain --resume --minutes M`: the time to `deadline` less a training process's start-up."""
    minutes = max(0.2, (deadline - time.time() - s["startup"]) / 60)
    if s.get("minutes"):
        minutes = min(minutes, s["minutes"])
    record.update(minutes=round(minutes, 2), exit_code=None)
    cmd = [sys.executable, "-m", "codeexecutor", "pretrain", *args, "--resume", "--minutes", f"{minutes:.3f}"]
    try:
        code = sh([*cmd, "--no-score", "--until", "train", "--ds-config", s["ds_config"]], deadline - time.time(), log)
        record["exit_code"] = code
    finally:  # stopped or not: what it trained
        record.update(trained(pathlib.Path(args[args.index("--out") + 1])))


def trained(out: pathlib.Path) -> dict:
    """What the run under `out` trained: each stage's steps, the example tokens (padding left
    out) and stepping seconds, its speed, the path its last process took, each attempt."""
    path = out / "run" / "train_log.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
    ends, base, last = {}, {}, {}  # a stage's last row; its tokens and seconds of processes before
    for r in (r for r in rows if "loss" in r):  # in the order they ran
        prev = last.get(r["stage"])
        if prev and r["stage_tokens"] < prev["stage_tokens"]:  # a training process carried it on anew
            b = base.setdefault(r["stage"], [0, 0.0])
            b[0], b[1] = b[0] + prev["stage_tokens"], b[1] + prev["stage_seconds"]
        last[r["stage"]] = ends[r["stage"]] = r
    model = model_of(out)
    if model is not None and model.name != "final":  # a training cut short: what its export had
        ends = dict(list(ends.items())[: int(re.match(r"stage(\d+)", model.name).group(1))])
    steps, before = {}, 0
    for name, r in ends.items():  # a row's step counts on from the stages before it
        steps[name], before = r["step"] - before, r["step"]
    tokens = sum(r["stage_tokens"] + base.get(n, [0, 0])[0] for n, r in ends.items())
    stepping = sum(r["stage_seconds"] + base.get(n, [0, 0])[1] for n, r in ends.items())
    setup = out / "run" / "curriculum.json"
    record = out / "pretrain.json"
    return {
        "model": model.name if model else None,  # what the export sends back: the steps above are its own
        "steps": steps,
        "example_tokens": tokens,
        "stepping_seconds": round(stepping, 1),
        "example_tokens_per_s": round(tokens / stepping) if stepping else None,
        "last_loss": {name: round(r["loss"], 4) for name, r in ends.items()},
        "setup": json.loads(setup.read_text()).get("setup") if setup.exists() else None,
        "attempts": json.loads(record.read_text())["phases"].get("train", {}).get("attempts")
        if record.exists()
        else None,
        "log": rows[-40:],
    }


def model_of(out: pathlib.Path) -> pathlib.Path | None:
    """The run's final model, else its last stage export (a training stopped at its limit)."""
    run = out / "run"
    if (run / "final" / "config.json").exists():
        return run / "final"
    stages = sorted(p.parent for p in run.glob("stage*-*/config.json") if re.fullmatch(r"stage\d+-\w+", p.parent.name))
    return stages[-1] if stages else None  # a stage's own export, not its -best nor one being written (.tmp)


def score(
    s: dict, model: pathlib.Path, data: pathlib.Path, deadline: float, log: pathlib.Path, record: dict, save
) -> str:
    """`evaluate --limit` on each test build in `order`, each build's scores saved as it ends."""
    record.update(limit=s["score"]["limit"], metric="release (Table 3), greedy", sets={}, builds=[])
    for build in s["score"]["order"]:
        out = log.parent / f"score-{build}.json"
        cmd = [sys.executable, "-m", "codeexecutor", "evaluate", "--model", model, "--data", data / "test" / build]
        cmd += ["--split", "test", "--limit", s["score"]["limit"], "--batch-size", s["score"]["batch"], "--out", out]
        t = time.time()
        code = sh(cmd, deadline - time.time(), log)
        if code != 0 or not out.exists():
            return f"{build}: exit {code}; {len(record['builds'])} of {len(s['score']['order'])} builds scored"
        report = json.loads(out.read_text())
        for name, e in report["datasets"].items():
            record["sets"][name] = {"examples": e["examples"], **e["table3"], "aligned": e.get("aligned")}
        if report.get("runtime_errors"):  # crashing programs against the non-crashing ones of the build
            record["runtime_errors"] = report["runtime_errors"]
        record["builds"].append({"build": build, "seconds": round(time.time() - t, 1)})
        save()  # a call killed at its limit keeps every set scored before
    return "ok"


def lease(s: dict, out: pathlib.Path, work: pathlib.Path, models: pathlib.Path, start: float) -> int:
    """The call from `start` (when run.sh began: the wheels' install counts) to its end."""
    deadline = start + s["seconds"]
    out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(work / "pt", ignore_errors=True)  # the run starts anew; the unpacked data is kept where it is whole
    work.mkdir(parents=True, exist_ok=True)
    before = previous(models, s)
    rec: dict = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start)), "smoke": s["smoke"]}
    rec.update(model=s["model"], continues={"model": s["model"], "leases": len(before["leases"])} if before else None)
    rec["preflight"] = preflight(s)
    args = pretrain_args(s, work, models, before)
    after = s["after_training"]
    ends = {"data": deadline - sum(after.values()) - s["least_training"], "train": deadline - sum(after.values())}
    ends.update(export=deadline - after["score"], score=deadline)
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)

    def save() -> None:
        rec["seconds"] = round(time.time() - start, 1)
        atomic.write_json(out / "lease.json", rec, default=str)

    stopped = None
    for name, until in ends.items():
        if stopped and name != "export":  # a stopped call still sends back the model it has
            break
        log, t, part = work / f"{name}.log", time.time(), {}
        rec[name] = part
        try:
            status = step(name, s, args, work, out, until, log, part, save)
        except Stopped as exc:
            status = stopped = f"stopped by {exc}"
        except Exception as exc:  # noqa: BLE001  (a step that breaks is reported; the file still comes back)
            status = f"failed: {type(exc).__name__}: {exc}"
        part.update(status=status, seconds=round(time.time() - t, 1), log_tail=tail(log))
        save()
        print(f"[lease {time.time() - start:5.0f}s] {name}: {status} ({part['seconds']} s)", flush=True)
        if status != "ok" and not (stopped and name == "train" and model_of(work / "pt")):
            break
    files = sorted(p.name for p in out.iterdir() if p.is_file())
    print(f"[lease] {rec['seconds']} s; {len(files)} files in {out}: {', '.join(files)}")
    if stopped:
        return 124
    return 0 if all(rec[n].get("status") == "ok" for n in ends) and len(files) <= 8 else 1


def step(
    name: str, s: dict, args: list[str], work: pathlib.Path, out: pathlib.Path, until: float, log, part, save
) -> str:
    """One step of the lease, its record in `part`; its status."""
    cmd = [sys.executable, "-m", "codeexecutor", "pretrain", *args]
    if name == "data":
        code = sh([*cmd, "--until", "tokenize"], until - time.time(), log)
        return "ok" if code == 0 else f"failed: exit {code}"
    if name == "train":
        train(s, args, until, log, part)
        return (
            "ok" if model_of(work / "pt") else f"failed: no model came out of the training (exit {part['exit_code']})"
        )
    if name == "export":
        from codeexecutor.training.export import export_pieces, save_shipped

        part["parameters"] = save_shipped(str(model_of(work / "pt")), str(work / "int8"), "int8")
        manifest = export_pieces(str(work / "int8"), str(out), int(s["piece_mib"] * 2**20))
        part["pieces"] = [p["file"] for p in manifest["pieces"]]
        return "ok"
    return score(s, work / "int8", work / "data", until, log, part, save)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="gpu_run/lease.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--smoke", action="store_true", help="the same steps on the CPU at toy sizes")
    ap.add_argument("--out", default=os.environ.get("OUT") or str(ROOT / "runs" / "gpu-run" / "out"))
    ap.add_argument("--work", default=str(ROOT / "runs" / "gpu-run" / "work"))
    ap.add_argument("--models", default=str(ROOT / "models"), help="where the model to continue is committed")
    ap.add_argument("--started", type=float, help="when the call began, in seconds since the epoch (run.sh's start)")
    a = ap.parse_args(argv)
    start = a.started or time.time()
    return lease(settings(a.smoke), pathlib.Path(a.out), pathlib.Path(a.work), pathlib.Path(a.models), start)


if __name__ == "__main__":
    sys.exit(main())
