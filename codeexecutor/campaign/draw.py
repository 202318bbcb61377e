"""One GPU draw: checks, a trained model and its scores, throughput, in at most 540 s.

    bash run_draw.sh [--plan]      # installs the carried wheels, then `codeexecutor draw run`

A lent GPU gives 15 minutes of machine time in all and 10 minutes a call, and returns at
most 8 files of 16 MiB. The draw is one call of seven steps, each under its own time
limit and all of them under 540 s (`steps.BUDGET`), in the order of what a draw is for:
the checks that stop everything, the trained model, its export (before any scoring, so
that it comes back), the scores, the step's and the decoder's speed, and last, on the
time left, the launcher and fp16 checks that earlier draws answered. The training starts
as soon as the data is unpacked and takes all the time but what the steps after it are
reserved. Each step writes its file to $OUT as it finishes, so a call killed at any
point leaves every finished step's file, and the step it stops writes what it has with
its log's end:

    checks.json      versions, the accelerator, the pack; on the time left,
                     tests/test_gpu.py, the deepspeed launcher through run_pretrain.sh
                     (ZeRO-2 bf16, stopped and resumed: one step sequence) and ZeRO-2
                     fp16's loss scale
    throughput.json  bench_step.py --speed: the compiled row step's tokens/s and MFU after a
                     warm-up, `small` and `base`, its compile seconds, greedy decoding at a
                     batch of 300; on the time left, 192 k-token steps and DeepSpeed's
    training.json    the recipe trained on the packed data at the fastest budget: its
                     plan, set-up (compile seconds, fallbacks) and log
    model-meta.tar, model.safetensors.partK   the model in bfloat16, in pieces of 16 MiB
    scores.json      the test samples (100 a set), greedy, batched, cheapest set first

Nothing is built there: the data comes tokenized (the committed ids in the working
tree, or a `--build` pack's own); a pack that is missing, too large or of another data
format is refused in one line (exit 2).
CAMPAIGN_SMOKE=1 runs the same steps on the CPU at toy sizes (tests/test_campaign.py).
Back here, `codeexecutor draw unpack` checks and joins the model and scores it again.
"""

from __future__ import annotations

import signal
import sys
import time

from codeexecutor.campaign import checks as c
from codeexecutor.campaign import steps as d


class Stopped(Exception):
    """SIGTERM or SIGINT: the call is being stopped."""


def _stop(signum, frame):
    raise Stopped(signal.Signals(signum).name)


def draw() -> int:
    start = time.time()
    deadline = start + (d.BUDGET if not d.SMOKE else sum(s[1] for s in d.STEPS.values()))
    d.OUT.mkdir(parents=True, exist_ok=True)
    d.WORK.mkdir(parents=True, exist_ok=True)
    checks: dict = {"plan": d.plan(), "steps": [], "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start))}
    results = {"throughput.json": {}, "training.json": {}, "scores.json": {}}
    col = 1 if d.SMOKE else 0
    manifest = d.check_pack()  # refused before anything runs
    checks["pack"] = {
        k: manifest.get(k)
        for k in (
            "fingerprint",
            "data_format",
            "committed",
            "code",
            "python",
            "recipe",
            "packed",
            "bytes",
            "tokens",
            "test",
        )
    }
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    for name, spec in d.STEPS.items():
        budget, file = spec[col], spec[2]
        log = d.WORK / f"{name}.log"
        log.write_text("")
        step_deadline = min(deadline, time.time() + budget)
        if name == "train" and not d.SMOKE:  # what the steps before it left over goes to training, not to the
            # checks at the end (the CPU smoke run keeps CI's time: its own limit)
            step_deadline = deadline - sum(d.STEPS[s][col] for s in d.RESERVED_AFTER_TRAIN + ("checks",))
        elif name == "checks":  # the last step: whatever time is left
            step_deadline = deadline
        t = time.time()
        try:
            status = _step(name, checks, results, manifest, log, step_deadline)
        except d.Refused as exc:
            checks["steps"].append({"step": name, "status": f"refused: {exc}", "seconds": round(time.time() - t, 1)})
            d.write_json("checks.json", checks)
            print(f"codeexecutor draw: {exc}", file=sys.stderr)
            return 2
        except Stopped as exc:
            status = f"stopped by {exc}"
        except Exception as exc:  # noqa: BLE001  (a step that breaks is reported; the draw goes on)
            status = f"failed: {type(exc).__name__}: {exc}"
        entry = {
            "step": name,
            "status": status,
            "seconds": round(time.time() - t, 1),
            "budget": round(step_deadline - t),
            "log_tail": d.tail(log, 1500),
        }
        checks["steps"].append(entry)
        if file in results:
            results[file]["step"] = entry
            d.write_json(file, results[file])
        d.write_json("checks.json", checks)
        print(f"[campaign {time.time() - start:5.0f}s] {name}: {status} ({entry['seconds']} s of {budget})", flush=True)
        if status.startswith("stopped by"):  # the call itself is ending: no step after this one
            return 124
        if name == "preflight" and status != "ok":
            print(f"codeexecutor draw: preflight {status}", file=sys.stderr)
            return 2
    checks["seconds"] = round(time.time() - start, 1)
    d.write_json("checks.json", checks)
    files = sorted(p.name for p in d.OUT.iterdir() if p.is_file())
    print(f"[campaign] done in {checks['seconds']} s; {len(files)} files in {d.OUT}: {', '.join(files)}")
    return 0 if len(files) <= 8 else 1


def _step(name: str, checks: dict, results: dict, manifest: dict, log, deadline: float) -> str:
    """One step of the draw, its file's part of `checks` or `results` filled; its status."""
    file = d.STEPS[name][2]
    if name == "preflight":
        d.preflight(checks, log)
    elif name == "unpack":
        d.unpack(checks, manifest)
    elif name == "throughput":
        return d.throughput(checks, results[file], log, deadline)
    elif name == "train":
        d.train(results[file], log, deadline)
        if d.trained_model() is None:
            return "failed: no model came out of the training"
    elif name in ("export", "score") and d.trained_model() is None:
        return "skipped: no trained model"
    elif name == "export":  # before the scoring: the model comes back whatever the scoring does
        from codeexecutor.training.export import export_pieces

        checks["export"] = export_pieces(str(d.trained_model()), str(d.OUT), d.PIECE)
    elif name == "score":
        return d.score(results[file], d.trained_model(), log, deadline)
    elif name == "checks":
        return c.final_checks(checks, results["throughput.json"], log, deadline)
    return "ok"


def run() -> int:
    """`codeexecutor draw run`: the draw; 2 with one line where it cannot start."""
    try:
        return draw()
    except d.Refused as exc:
        print(f"codeexecutor draw: {exc}", file=sys.stderr)
        return 2
