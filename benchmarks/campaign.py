"""One GPU draw: checks, throughput, a trained model and its scores, in at most 540 s.

    python3 benchmarks/campaign.py draw [--plan]      # gpu_campaign.sh draw installs the carried wheels first

A lent GPU gives 15 minutes of machine time in all and 10 minutes a call, and returns at
most 8 files of 16 MiB. The draw is one call of seven steps, cheapest and most likely to
fail first, each under its own time limit and all of them under 540 s (`_draw.BUDGET`);
each writes its file to $OUT as it finishes, so a call killed at any point leaves every
finished step's file, and the step it stops writes what it has with its log's end:

    checks.json      versions, the accelerator, the pack; the deepspeed launcher through
                     run_pretrain.sh (ZeRO-2 bf16, stopped and resumed: one step sequence);
                     ZeRO-2 fp16's dynamic loss scale; tests/test_gpu.py
    throughput.json  the training loop's tokens/s and MFU for two presets at two token
                     budgets, and FlexAttention against the dense mask
    training.json    the recipe trained on the packed data at the fastest budget
    scores.json      the six test samples of 300, greedy, batched on the accelerator
    model-meta.tar, model.safetensors.partK   the model in bfloat16, in pieces of 16 MiB

Nothing is built there: the data comes tokenized in the pack (campaign_pack.py); a pack
that is missing, too large or made for other code is refused in one line (exit 2).
CAMPAIGN_SMOKE=1 runs the same steps on the CPU at toy sizes (tests/test_campaign.py).
Back here, benchmarks/campaign_unpack.py checks and joins the model and scores it again.
"""

from __future__ import annotations

import json
import pathlib
import signal
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _draw as d  # noqa: E402


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
    checks["pack"] = {k: manifest.get(k) for k in ("code", "python", "recipe", "packed", "bytes", "test")}
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    chosen = {"preset": d.SIZES["train_preset"], "max_tokens": d.SIZES["budgets"][0], "attention": "sdpa"}
    for name, spec in d.STEPS.items():
        budget, file = spec[col], spec[2]
        log = d.WORK / f"{name}.log"
        log.write_text("")
        step_deadline = min(deadline, time.time() + budget)
        t = time.time()
        status = "ok"
        try:
            if name == "preflight":
                d.preflight(checks, log)
            elif name == "unpack":
                d.unpack(checks, manifest)
            elif name == "checks":
                d.launcher_checks(checks, log, step_deadline)
            elif name == "throughput":
                d.throughput(checks, results[file], log, step_deadline)
                chosen = results[file].get("chosen") or chosen
            elif name == "train":
                d.train(results[file], chosen, log, step_deadline, budget)
                if d.trained_model() is None:
                    status = "failed: no model came out of the training"
            elif name == "score":
                model = d.trained_model()
                if model is None:
                    status = "skipped: no trained model"
                else:
                    status = d.score(results[file], model, log, step_deadline)
            elif name == "export":
                model = d.trained_model()
                if model is None:
                    status = "skipped: no trained model"
                else:
                    from codeexecutor.training.export import export_pieces

                    checks["export"] = export_pieces(str(model), str(d.OUT), d.PIECE)
        except d.Refused as exc:
            checks["steps"].append({"step": name, "status": f"refused: {exc}", "seconds": round(time.time() - t, 1)})
            d.write_json("checks.json", checks)
            print(f"gpu_campaign: {exc}", file=sys.stderr)
            return 2
        except Stopped as exc:
            status = f"stopped by {exc}"
        except Exception as exc:  # noqa: BLE001  (a step that breaks is reported; the draw goes on)
            status = f"failed: {type(exc).__name__}: {exc}"
        entry = {"step": name, "status": status, "seconds": round(time.time() - t, 1), "budget": budget,
                 "log_tail": d.tail(log, 1500)}
        checks["steps"].append(entry)
        if file in results:
            results[file]["step"] = entry
            d.write_json(file, results[file])
        d.write_json("checks.json", checks)
        print(f"[campaign {time.time() - start:5.0f}s] {name}: {status} ({entry['seconds']} s of {budget})", flush=True)
        if status.startswith("stopped"):
            return 124
        if name == "preflight" and status != "ok":
            print(f"gpu_campaign: preflight {status}", file=sys.stderr)
            return 2
    checks["seconds"] = round(time.time() - start, 1)
    d.write_json("checks.json", checks)
    files = sorted(p.name for p in d.OUT.iterdir() if p.is_file())
    print(f"[campaign] done in {checks['seconds']} s; {len(files)} files in {d.OUT}: {', '.join(files)}")
    return 0 if len(files) <= 8 else 1


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "draw" or any(a not in ("--plan",) for a in argv[1:]):
        print("gpu_campaign: usage: gpu_campaign.sh draw [--plan]", file=sys.stderr)
        return 2
    if "--plan" in argv:
        print(d.plan())
        total = sum(s[0] for s in d.STEPS.values())
        if total > d.BUDGET:
            print(f"gpu_campaign: the plan's steps add up to {total} s, over the draw's {d.BUDGET}", file=sys.stderr)
            return 2
        return 0
    try:
        return draw()
    except d.Refused as exc:
        print(f"gpu_campaign: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
