"""The debugger's actions as training rows: transitions sampled from the traces a build
already recorded.

A row of a built dataset holds a real run's steps, each with its call depth. From it this
build draws a few (position, action) pairs and writes each as a row of its own: the real
steps up to the position, then the action asked (`next`, `out`, or `continue` to a line),
then the one step where the real run lands (or its crash). Tokenized, such a row reads

    <mask0> <line> <0> <state> ... </state> ... <mask> next <line> <7> <delta> s : 12 </state> </s>

and only the landing bears loss (modeling/rows.py): the steps before it are given, as the
debugger gives the model the real run up to where the user stands. `step` needs no rows
of its own: it is the next step of a whole trace, which every trace row already trains.

The positions are drawn uniformly over the run (the start included), the action uniformly
among those that land somewhere from there (`out` only inside a call), and a `continue`
breaks on the line of a later step drawn at random, as `evaluate --debugger` asks them
(eval/debugger.py). Rows whose steps before the landing would write more than
`max_chars` characters are drawn again (a trace cut before its landing trains nothing).

    codeexecutor build actions --from runs/data/codenetmut --out runs/data/actions

Each split is drawn from the same split of the source, so held-out problems stay held out.
Written atomically, one dataset a source dataset, under the source's names; a build
started again with the same options keeps the datasets it finished.
"""

from __future__ import annotations

import json
import logging
import os
import random

from codeexecutor.atomic import replacing
from codeexecutor.debugger.events import Event, row_events, target
from codeexecutor.execution.records import Step
from codeexecutor.modeling.format import format_trace

MARKED = ("next", "out", "continue")
log = logging.getLogger("curricula.actions")
COLUMNS = ("id", "problem_id", "split", "task", "kind", "source_id", "code", "steps", "status", "error", "action")


def draw(events: list[Event], rng: random.Random) -> tuple[int, str, int | None, int] | None:
    """One (position, action, breakpoint line, landing index) from a run's events, or None
    where the drawn position has no action that lands."""
    position = rng.randrange(-1, len(events) - 1)
    depth = events[position].depth if position >= 0 else 0
    later = [e.line for e in events[position + 1 :] if not e.exception]
    actions = [a for a in MARKED if (a != "out" or depth > 0) and (a != "continue" or later)]
    action = rng.choice(actions)
    line = rng.choice(later) if action == "continue" else None
    j = target(events, position, depth, action, line)
    return None if j is None else (position, action, line, j)


def _step(e: Event) -> dict:
    return {"line": e.line, "state": e.state, "output": e.output, "depth": e.depth}


def action_rows(row: dict, rng: random.Random, per_program: int, order: str, max_chars: int) -> list[dict]:
    """Up to `per_program` action rows of one built row (tries 3x as many draws)."""
    events = row_events(row, order)
    if len(events) < 2:
        return []
    out, seen = [], set()
    for _ in range(3 * per_program):
        if len(out) == per_program:
            break
        drawn = draw(events, rng)
        if drawn is None or drawn[:3] in seen:
            continue
        position, action, line, j = drawn
        given = events[: position + 1]
        if (
            len(format_trace([Step(e.line, e.state, e.output) for e in given], compact=True, code=row["code"]))
            > max_chars
        ):
            continue
        seen.add(drawn[:3])
        land = events[j]
        steps = [_step(e) for e in given] + ([] if land.exception else [_step(land)])
        error = json.dumps({"type": land.exception, "message": "", "line": land.line}) if land.exception else ""
        spec = {"name": action, "at": position + 1, "order": order} | ({"line": line} if line else {})
        out.append(
            {
                "id": f"{row['id']}_a{len(out)}",
                "problem_id": row.get("problem_id", ""),
                "split": row.get("split", ""),
                "task": row.get("task") or "codenet",
                "kind": "action",
                "source_id": row["id"],
                "code": row["code"],
                "steps": json.dumps(steps),
                "status": "error" if land.exception else "ok",
                "error": error,
                "action": json.dumps(spec),
            }
        )
    return out


def check_source(source: str | None, out: str, opts) -> None:
    """Refuse, in one line each, what would build nothing useful or overwrite the source."""
    import datasets

    from codeexecutor.errors import UsageError
    from curricula.common import built_datasets

    if not source:
        raise UsageError("give --from DIR: a built folder whose runs the actions are drawn from")
    if opts.per_program < 1 or (opts.limit is not None and opts.limit < 1) or opts.max_chars < 1:
        raise UsageError("--per-program, --limit and --max-chars take a number of at least 1")
    if opts.order not in ("end", "start"):
        raise UsageError(f"--order {opts.order}: end or start (the step order of the model trained on them)")
    if out and os.path.realpath(out) == os.path.realpath(source):
        raise UsageError(f"--out {out} is the --from folder: the actions would replace the runs they are drawn from")
    for name, path in built_datasets(source, "--from folder").items():
        dd = datasets.load_from_disk(path)
        first = next(iter(dd.values()))
        if "action" in first.column_names or (len(first) and first[0].get("task") == "singleline"):
            raise UsageError(
                f"--from {source}: {name} holds no whole runs (a singleline or actions build); "
                "draw from a codenetmut, functions or tutorial build"
            )


def build_actions(
    out: str,
    source: str,
    per_program: int = 2,
    limit: int | None = None,
    order: str = "end",
    max_chars: int = 2000,
    seed: int = 0,
) -> dict:
    """Action rows of every dataset of the built folder `source`, into `out/<name>`; `limit`:
    at most this many source rows a split (drawn at random). Returns the stats.

    Each dataset is written whole (a temporary folder, then renamed) and recorded in
    `out/stats.json` as it ends, with the options that drew it and its source's
    fingerprint; a build started again with the same options keeps the datasets recorded
    whose source is unchanged and draws the rest (a killed build loses the dataset it was
    drawing at most)."""
    import datasets

    from codeexecutor.atomic import write_json
    from codeexecutor.progress import bar
    from curricula.common import built_datasets

    options = {"per_program": per_program, "limit": limit, "order": order, "max_chars": max_chars, "seed": seed}
    stats = {"kind": "actions", "source": os.path.abspath(source), **options, "datasets": {}, "drawn": {}}
    sources = built_datasets(source, "--from folder")
    stats["of"] = {name: _fingerprint(path) for name, path in sources.items()}  # what each was drawn from
    before = _recorded(out)
    if before and all(before.get(k) == v for k, v in stats.items() if k not in ("datasets", "drawn", "of")):
        for name in sources:  # a source dataset built again since is drawn again
            if name in before.get("datasets", {}) and before.get("of", {}).get(name) == stats["of"][name]:
                stats["datasets"][name], stats["drawn"][name] = before["datasets"][name], before["drawn"][name]
    for name, path in sources.items():
        if name in stats["datasets"] and os.path.isdir(os.path.join(out, name)):
            log.info("actions %s: kept, drawn with these options by the last run (%s/stats.json)", name, out)
            continue
        dd = datasets.load_from_disk(path)
        splits, counts = {}, {}
        for split, ds in dd.items():
            rng = random.Random(f"{seed}:{name}:{split}")
            idx = list(range(len(ds)))
            if limit is not None and len(idx) > limit:
                idx = sorted(rng.sample(idx, limit))
            rows = []
            for row in bar(ds.select(idx), desc=f"actions {name}/{split}", unit="program"):
                rows += action_rows(row, rng, per_program, order, max_chars)
            columns = {c: [r[c] for r in rows] for c in COLUMNS}
            splits[split] = datasets.Dataset.from_dict(columns, features=_features())
            counts[split] = {"programs": len(idx), "rows": len(rows)} | {
                a: sum(json.loads(r["action"])["name"] == a for r in rows) for a in MARKED
            }
        target_dir = os.path.join(out, name)
        with replacing(target_dir) as tmp:
            datasets.DatasetDict(splits).save_to_disk(tmp)
        stats["datasets"][name] = {split: c["rows"] for split, c in counts.items()}  # rows a split, as every build
        stats["drawn"][name] = counts
        write_json(os.path.join(out, "stats.json"), stats, ensure_ascii=False)
    write_json(os.path.join(out, "stats.json"), stats, ensure_ascii=False)
    return stats


def _fingerprint(path: str) -> str:
    """A saved dataset's identity: its splits' fingerprints (a build that writes it again
    writes new ones)."""
    prints = []
    for split in sorted(os.listdir(path)):
        state = os.path.join(path, split, "state.json")
        if os.path.isfile(state):
            with open(state) as f:
                prints.append(f"{split}:{json.load(f).get('_fingerprint')}")
    return ",".join(prints)


def _recorded(out: str) -> dict | None:
    """The stats a build into `out` recorded, None where there are none (or unreadable)."""
    try:
        with open(os.path.join(out, "stats.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _features():
    import datasets

    return datasets.Features({c: datasets.Value("string") for c in COLUMNS})
