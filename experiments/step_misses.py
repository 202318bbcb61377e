"""Where the debugger's `step` misses: per scored step task of `evaluate --debugger` (the
same programs, positions and tasks, eval/debugger.py), whether the real state changed at
the landing, whether the model's landing state was right, and its line; the misses are
written out for reading.

    .venv/bin/python experiments/step_misses.py --model M --data DATA --split valid --limit 100 \
        --out runs/step-misses-M.json [--against runs/step-misses-OTHER.json]

`--against` pairs two models' files (the same tasks) and prints the difference of their
right shares with its standard error.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def step_tasks(gen, row: dict, rng: random.Random) -> list[dict]:
    """One program's `step` tasks, drawn as eval/debugger.score_program draws them."""
    from codeexecutor.debugger.events import row_events, stack_at, trace_text
    from codeexecutor.debugger.session import landing, predict
    from eval.debugger import _right, _tasks

    code, model_input = row["code"], gen.code_input(row["code"], row["task"])
    events = row_events(row, gen.profile.order)
    if not events:
        return []
    out = []
    for position in [-1] + sorted(rng.sample(range(len(events) - 1), min(2, len(events) - 1))):
        tasks = [t for t in _tasks(events, position, rng) if t[0] == "step"]  # the rng moves as the eval's
        if not tasks:
            continue
        frames = stack_at(code, events, position)
        action, _, lines, j = tasks[0]
        scoped = len(frames.stack) - 1
        budget = 2 * len(gen.encoder.ids(trace_text(gen.profile, events[position + 1 : j + 1], code))) + 32
        predicted = predict(gen, code, model_input, events[: position + 1], frames, [(action, scoped, lines)], budget)[
            0
        ]
        k = landing(predicted, action, scoped, lines)
        guess, real = (predicted[k] if k is not None else None), events[j]
        before = events[position].state if position >= 0 else {}
        out.append(
            {
                "position": position,
                "changed": real.state != before or bool(real.exception),
                "right": _right(guess, real),
                "line_right": guess is not None and guess.line == real.line,
                "real": real.to_json(),
                "guess": guess.to_json() if guess else None,
                "before": before,
            }
        )
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--data", required=True, help="a folder of built datasets; its codenetmut dataset is read")
    p.add_argument("--split", default="valid")
    p.add_argument("--limit", type=int, default=100)
    p.add_argument("--out", required=True)
    p.add_argument("--against", help="another model's file of the same tasks")
    args = p.parse_args()
    from codeexecutor.generation.api import cached_generator
    from eval.report import sampled_sets

    gen = cached_generator(args.model)
    rows = []
    for name, sample in sampled_sets(args.data, args.split, args.limit, 0):
        if name == "codenetmut":
            rng = random.Random(0)
            for row in sample:
                rows += step_tasks(gen, row, rng)
    Path(args.out).write_text(json.dumps(rows, indent=1))
    share = lambda rs, key="right": round(100 * sum(r[key] for r in rs) / max(1, len(rs)), 1)  # noqa: E731
    changed = [r for r in rows if r["changed"]]
    same = [r for r in rows if not r["changed"]]
    unchanged = round(100 - share(rows, "changed"), 1)
    print(f"{len(rows)} step tasks: right {share(rows)}; the state unchanged at {unchanged}% of them")
    print(
        f"right where unchanged {share(same)}, where changed {share(changed)}; line right {share(rows, 'line_right')}"
    )
    if args.against:
        other = json.loads(Path(args.against).read_text())
        d = [int(a["right"]) - int(b["right"]) for a, b in zip(rows, other)]
        mean = sum(d) / len(d)
        se = math.sqrt(sum((v - mean) ** 2 for v in d) / (len(d) - 1) / len(d))
        print(
            f"paired against {args.against}: {100 * mean:+.2f} "
            f"(standard error {100 * se:.2f}, a program's tasks not independent)"
        )


if __name__ == "__main__":
    main()
