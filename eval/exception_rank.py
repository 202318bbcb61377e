"""Where a crash is lost: does the model rank `<exception>` first where the true trace has it?

A model that never writes `<exception>` may still be close: at the position where the
true trace ends in its exception step (teacher-forced, every earlier token the true one),
the rank of `<exception>` among all tokens says whether the crash is a near miss (second
behind `<line>`) or far from the model's mind, and which tokens win instead. Per error
kind, over the crashing programs of a test split whose whole trace fits the model's
length:

    .venv/bin/python -m eval.exception_rank --model runs/quality/run/final --data runs/quality/data-aug3 \\
        [--split test] [--limit 300] [--out report.json]
"""

from __future__ import annotations

import argparse
import json
import os
from collections import Counter, defaultdict

import torch

from codeexecutor.atomic import write_json


def exception_ranks(model: str, data: str, split: str = "test", limit: int | None = 300, batch_size: int = 16) -> dict:
    """Per error kind: crashing programs scored, the share where `<exception>` ranks first
    at the true exception step, its median rank, the mean log-probability gap to the
    token ranked first, and which tokens take its place."""
    import datasets

    from codeexecutor.generation import TraceGenerator
    from eval.evaluate import sample

    gen = TraceGenerator(model)
    enc, tok = gen.encoder, gen.tok
    exc_id = enc.exception_id
    if exc_id is None:
        from codeexecutor.errors import UsageError

        raise UsageError(f"{model} has no <exception> token (the release's format): there is no crash step to rank")
    table = datasets.load_from_disk(os.path.join(data, "codenetmut", "errors"))[split]
    rows = [table[i] for i in sample(len(table), limit)]
    items = []
    for r in rows:
        code, target = gen.profile.example(r)
        ids = enc.ids(target)
        if exc_id not in ids or len(ids) > enc.max_trace - 2:  # the crash step is past the model's length
            continue
        items.append((json.loads(r["error"])["type"], enc.code(code), [enc.mask0] + ids + [enc.eos], ids.index(exc_id)))
    per_kind: dict[str, list] = defaultdict(list)
    winners: dict[str, Counter] = defaultdict(Counter)
    with torch.no_grad():
        for i in range(0, len(items), batch_size):
            chunk = items[i : i + batch_size]
            batch = {
                k: v.to(gen.device)
                for k, v in enc.collate([{"code_ids": c, "trace_ids": t} for _, c, t, _ in chunk]).items()
            }
            logits = gen.model(**batch).logits  # position p predicts trace token p + 1
            for (kind, _, _, at), row in zip(chunk, logits):
                logp = gen.model.log_probs(row[at])  # predicts body token `at` (after <mask0>)
                rank = int((logp > logp[exc_id]).sum()) + 1
                best = int(logp.argmax())
                per_kind[kind].append((rank, float(logp[best] - logp[exc_id])))
                winners[kind][tok.convert_ids_to_tokens(best) if best != exc_id else "<exception>"] += 1
    report = {
        "model": model,
        "data": data,
        "split": split,
        "crashing_programs": len(rows),
        "scored": len(items),
        "trace_state": gen.profile.state,
        "kinds": {},
    }
    everything = [x for v in per_kind.values() for x in v]
    for kind, values in sorted(per_kind.items(), key=lambda kv: -len(kv[1])) + [("all", everything)]:
        ranks = sorted(r for r, _ in values)
        report["kinds"][kind] = {
            "examples": len(values),
            "ranked_first": round(100 * sum(r == 1 for r in ranks) / len(ranks), 2),
            "median_rank": ranks[len(ranks) // 2],
            "mean_gap_nats": round(sum(g for _, g in values) / len(values), 3),
            **({"first_instead": dict(winners[kind].most_common(3))} if kind != "all" else {}),
        }
    return report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True, help="built datasets (their codenetmut/errors set)")
    ap.add_argument("--split", default="test")
    ap.add_argument("--limit", type=int, default=300, help="crashing programs (a fixed sample, as evaluate's)")
    ap.add_argument("--out", help="write the report here as JSON")
    args = ap.parse_args()
    report = exception_ranks(args.model, args.data, args.split, args.limit)
    for kind, k in report["kinds"].items():
        print(
            f"{kind:22} n={k['examples']:4d}  <exception> first {k['ranked_first']:6.2f}%  "
            f"median rank {k['median_rank']:5d}  "
            f"gap {k['mean_gap_nats']:.2f} nats  {k.get('first_instead', '')}"
        )
    if args.out:
        write_json(args.out, report)


if __name__ == "__main__":
    main()
