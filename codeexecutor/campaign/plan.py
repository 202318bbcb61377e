"""`codeexecutor draw plan`: the draw's steps, whether its pack can run on this checkout, the
room it leaves, and what its training would make of the data, all before any device call.

The training's speed is not assumed: it is the example tokens a second (padding left out)
that the last recorded draw on that device kind trained at (`benchmarks/results/
gpu-draw-*.json`, its training log), with the seconds its training process spent outside
its steps (start-up, compile, stage ends); a stage takes its share of the trained tokens
and its sources their weights' share of its examples.
"""

from __future__ import annotations

import json
import os
import pathlib

from codeexecutor.errors import UsageError

ROOT = pathlib.Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"


def measured_speed(device: str | None = None, results: pathlib.Path = RESULTS) -> dict | None:
    """The last recorded draw's training speed on `device` (a substring of its name, e.g.
    H100; None: any): example tokens a second over its logged steps, the attention path,
    its torch, the seconds before its first logged step; None where no draw ran there."""
    found = []
    for path in sorted(results.glob("gpu-draw-*.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        training = record.get("training") or {}
        log = [r for r in training.get("log") or [] if "loss" in r]
        name = (record.get("checks") or {}).get("preflight", {}).get("device") or ""
        if not log or (device and device.lower() not in name.lower()):
            continue
        ends: dict[str, dict] = {}
        for row in log:
            ends[row["stage"]] = row
        tokens = sum(r["stage_tokens"] for r in ends.values())
        seconds = sum(r["stage_seconds"] for r in ends.values())
        found.append(
            {
                "file": path.name,
                "device": name,
                "date": path.stem[-10:],
                "torch": (record.get("checks") or {}).get("preflight", {}).get("torch"),
                "attention": (training.get("planned_from") or training.get("trains") or {}).get("attention"),
                "example_tokens_per_s": round(tokens / seconds),
                "steps": max(r["step"] for r in log),
                "overhead_seconds": round(training.get("seconds", seconds) - seconds, 1),
            }
        )
    return max(found, key=lambda f: f["date"]) if found else None


def data_plan(manifest: dict, trained: float, curriculum: dict) -> str:
    """Tokens carried a source, and the epochs a training of `trained` tokens makes over
    each: a stage takes its share of the tokens, and its sources their weights' share of
    the stage's examples (so of its tokens, by each source's tokens a row)."""
    sources = manifest["sources"]
    per_row = {name: s["tokens"] / max(s["rows"], 1) for name, s in sources.items()}
    taken = dict.fromkeys(sources, 0.0)
    stages = curriculum["stages"]
    for st in stages:
        share = st.get("share") or 1 / len(stages)
        srcs = [(os.path.basename(s["path"]), s.get("weight", 1.0)) for s in st["sources"]]
        mass = sum(w * per_row[n] for n, w in srcs)
        for n, w in srcs:
            taken[n] += trained * share * w * per_row[n] / mass
    lines = [f"{'source':<28} {'rows':>10} {'tokens':>12} {'MiB':>6} {'B/token':>8} {'epochs':>7}"]
    for name, s in sorted(sources.items()):
        lines.append(
            f"{name:<28} {s['rows']:>10,} {s['tokens']:>12,} {s['bytes'] / 2**20:>6.1f} "
            f"{s['bytes'] / max(s['tokens'], 1):>8.3f} {taken[name] / max(s['tokens'], 1):>7.2f}"
        )
    lines.append(
        f"{'carried':<28} {sum(s['rows'] for s in sources.values()):>10,} {manifest['tokens']:>12,} "
        f"{sum(s['bytes'] for s in sources.values()) / 2**20:>6.1f}"
    )
    return "\n".join(lines)


def print_plan(pack: str | None, device: str | None) -> int:
    import tarfile

    import yaml

    from codeexecutor.campaign import steps
    from codeexecutor.campaign.pack import verify
    from codeexecutor.campaign.room import LIMIT, tree_bytes

    print(steps.plan())
    total = sum(s[0] for s in steps.STEPS.values())
    if total > steps.BUDGET:
        raise UsageError(f"the plan's steps add up to {total} s, over the draw's {steps.BUDGET}")
    pack_dir = pathlib.Path(pack or os.environ.get("CAMPAIGN_PACK") or steps.ROOT / ".campaign")
    if not (pack_dir / "manifest.json").is_file():
        print(f"no pack at {pack_dir}: `codeexecutor draw pack` makes one (from the committed data, in minutes)")
        return 0
    manifest = json.loads((pack_dir / "manifest.json").read_text())
    tree = tree_bytes()
    room = verify(manifest, pack_dir, tree)  # refused here, in one line, before any device call
    print(
        f"pack: data fingerprint {manifest['fingerprint']} (format {manifest['data_format']}), ready; "
        f"{(LIMIT - room - tree) / 2**20:.1f} MiB beside a working tree of {tree / 2**20:.1f} MiB "
        f"({manifest['parts'].get('ids_in_tree', 0) / 2**20:.1f} of it committed ids): "
        f"{room / 2**20:.1f} MiB of {LIMIT / 2**20:.0f} left"
    )
    if not manifest.get("deepspeed"):
        print("the pack carries no DeepSpeed (its room went to data): run_draw.sh --deepspeed would refuse")
    with tarfile.open(pack_dir / "data.tar.xz") as tar:
        curriculum = yaml.safe_load(tar.extractfile("data/curriculum.yaml").read())
    seconds = steps.BUDGET - sum(s[0] for k, s in steps.STEPS.items() if k != "train")
    speed = measured_speed(device)
    if speed is None:
        print(f"no draw recorded{' on ' + device if device else ''}: the training's speed is unknown until one runs")
        return 0
    stepping = max(0.0, seconds - speed["overhead_seconds"])
    trained = stepping * speed["example_tokens_per_s"]
    print(data_plan(manifest, trained, curriculum))
    print(
        f"trained: {trained / 1e6:.0f} M example tokens in {stepping:.0f} s of steps ({seconds} s less the "
        f"{speed['overhead_seconds']} s that draw's training spent outside its steps: start-up, compile, stage ends) "
        f"at {speed['example_tokens_per_s'] / 1e6:.2f} M/s, as the draw of {speed['date']} on {speed['device']} "
        f"({speed['attention']}, torch {speed['torch']}) trained; epochs count the ids as kept, "
        "before a run cuts code to its window"
    )
    return 0
