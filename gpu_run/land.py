"""Back from a lease: its model into models/MODEL, checked, with its card, and committed.

    python gpu_run/land.py DIR [--commit]      # DIR: the files the call brought back

The pieces are checked (sizes and hashes) and joined (training/export.py), the model is
loaded here as a user loads it, and models/MODEL gets its int8 weights, config and
tokenizer, `lease.json` (every lease so far: device, torch, the call's and the
training's minutes, steps, example tokens, the scores the GPU computed) and a card whose
totals add the leases up. With `--commit` the folder is committed at once, whatever it
scores: a model that is not committed is lost with the machine.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from codeexecutor.errors import UsageError  # noqa: E402  (after the checkout is on the path)


def entry(rec: dict) -> dict:
    """One lease as the card records it."""
    train, score = rec.get("train") or {}, rec.get("score") or {}
    pre = rec["preflight"]
    return {
        "date": rec["started"][:10],
        "device": pre.get("device"),
        "torch": pre.get("torch"),
        "call_minutes": round(rec.get("seconds", 0) / 60, 2),
        "training_minutes": round((train.get("seconds") or 0) / 60, 2),
        "stepping_minutes": round((train.get("stepping_seconds") or 0) / 60, 2),
        "steps": train.get("steps") or {},
        "example_tokens": train.get("example_tokens") or 0,
        "example_tokens_per_s": train.get("example_tokens_per_s"),
        "continued": rec.get("continues") is not None,
        "scores": {n: {k: v for k, v in e.items() if k != "aligned"} for n, e in (score.get("sets") or {}).items()},
        "score_limit": score.get("limit"),
        "score_status": score.get("status"),
    }


def totals(leases: list[dict]) -> dict:
    steps: dict[str, int] = {}
    for lease in leases:
        for stage, n in lease["steps"].items():
            steps[stage] = steps.get(stage, 0) + n
    return {
        "leases": len(leases),
        "call_minutes": round(sum(x["call_minutes"] for x in leases), 2),
        "training_minutes": round(sum(x["training_minutes"] for x in leases), 2),
        "example_tokens": sum(x["example_tokens"] for x in leases),
        "steps": steps,
    }


def note(leases: list[dict], total: dict) -> str:
    rows = [
        f"| {i} | {x['date']} | {x['device']} | {x['torch']} | {x['call_minutes']} | {x['training_minutes']} | "
        f"{sum(x['steps'].values()):,} | {x['example_tokens']:,} | "
        f"{(x['scores'].get('codenetmut') or {}).get('trace_accuracy', '–')} |"
        for i, x in enumerate(leases, 1)
    ]
    return (
        "\n## Leases\n\nEach lease continued the model the one before committed (gpu_run/, docs/gpu-run.md). "
        f"In all: {total['leases']} leases, {total['call_minutes']} minutes of device calls, "
        f"{total['training_minutes']} of training, {total['example_tokens']:,} example tokens (padding left out).\n\n"
        "| lease | date | device | torch | call min | training min | steps | example tokens | CodeNetMut trace acc. |\n"
        "|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n"
    )


def against(models: pathlib.Path, scores: dict, cpu: str = "codeexecutor-mini-cpu") -> list[str]:
    """Each set's trace accuracy beside the shipped CPU model's, where both scored the same
    fixed samples (the same limit)."""
    path = models / cpu / "scores.json"
    theirs = json.loads(path.read_text()) if path.is_file() else {}
    if theirs.get("limit") != scores.get("limit"):
        return [f"no {cpu} scores on the same {scores.get('limit')}-example samples to compare with"]
    return [
        f"{name}: trace accuracy {e.get('trace_accuracy')} here, {theirs['sets'][name].get('trace_accuracy')} for {cpu}"
        for name, e in scores["sets"].items()
        if name in theirs.get("sets", {})
    ]


def land(back: pathlib.Path, models: pathlib.Path, commit: bool) -> pathlib.Path:
    from codeexecutor.atomic import replacing, write_json
    from codeexecutor.modeling.loading import load_model
    from codeexecutor.training.card import Training, write_card
    from codeexecutor.training.export import join_pieces

    if not (back / "lease.json").is_file():
        raise UsageError(f"no lease.json in {back}: give the folder the call's files came back to")
    rec = json.loads((back / "lease.json").read_text())
    if (rec.get("export") or {}).get("status") != "ok":
        raise UsageError(f"the lease in {back} exported no model ({(rec.get('export') or {}).get('status')})")
    name = rec["model"]
    dest = models / name
    before = json.loads((dest / "lease.json").read_text()) if (dest / "lease.json").is_file() else {"leases": []}
    expected = rec["continues"]["leases"] if rec.get("continues") else 0  # leases the model had when this one began
    if expected != len(before["leases"]):
        raise UsageError(
            f"the lease began from {expected} leases of {name} and {dest} has {len(before['leases'])}: "
            "land the leases once each, in the order they ran"
        )
    leases = [*before["leases"], entry(rec)]
    total = totals(leases)
    with tempfile.TemporaryDirectory() as tmp:
        joined = pathlib.Path(tmp) / "model"
        join_pieces(str(back), str(joined))
        load_model(str(joined))  # loads here as a user loads it, or refuses in one line
        (joined / "pieces.json").unlink(missing_ok=True)
        with replacing(str(dest)) as out:
            shutil.copytree(joined, out)
            write_json(pathlib.Path(out) / "lease.json", {"model": name, "leases": leases, "totals": total})
            last = leases[-1]
            scores = {"sets": (rec.get("score") or {}).get("sets") or {}, "limit": last["score_limit"]}
            scores["runtime_errors"] = (rec.get("score") or {}).get("runtime_errors")
            write_json(pathlib.Path(out) / "scores.json", scores)
            recipe = "gpu_run/recipe.yaml (curricula/recipes/gpu-draw.yaml, then its `later` stages)"
            device = f"{last['device']} ({total['leases']} lease{'s' if total['leases'] > 1 else ''})"
            training = Training(device, recipe, total["steps"], total["training_minutes"], "bash gpu_run/run.sh")
            write_card(out, scores, training, note=note(leases, total))
    print(f"landed: {dest} (lease {len(leases)}; {total['training_minutes']} training minutes in all)")
    for line in against(models, scores):
        print(line)
    if commit and not dest.resolve().is_relative_to(ROOT):
        raise UsageError(f"{dest} is outside this checkout: --commit lands in its models/ only")
    if commit:
        cmd = ["git", "-C", str(ROOT), "add", "--", str(dest)]
        codenet = (last["scores"].get("codenetmut") or {}).get("trace_accuracy")
        msg = f"Land GPU lease {len(leases)} of {name}: CodeNetMut trace {codenet}"
        body = json.dumps({"lease": last, "totals": total}, indent=1)
        subprocess.run(cmd, check=True)
        subprocess.run(["git", "-C", str(ROOT), "commit", "-q", "-m", msg, "-m", body, "--", str(dest)], check=True)
        print(f"committed: {msg}")
    return dest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="gpu_run/land.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("back", help="the folder the call's files came back to")
    ap.add_argument("--models", default=str(ROOT / "models"), help="where models/MODEL is (default: the checkout's)")
    ap.add_argument("--commit", action="store_true", help="commit models/MODEL at once")
    a = ap.parse_args(argv)
    try:
        land(pathlib.Path(a.back), pathlib.Path(a.models), a.commit)
    except UsageError as exc:
        print(f"gpu_run/land.py: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
