"""Does the scope-aware name rule admit every true trace? For each example of a build
(all test and valid rows of every set, and a sample of training rows), the gold target
in a model's format is tokenized and stepped through that model's StateRule; any token
the rule refuses is a gold trace the rule would forbid, and is listed.

    .venv/bin/python experiments/scope_rule_check.py --model runs/qd/run/final --data runs/quality/data-depth
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

SETS = (
    "singleline/singleline",
    "tutorial/tutorial",
    "codenetmut/codenetmut",
    "codenetmut/errors",
    "functions/functions",
    "functions/functions_errors",
)


def main() -> None:
    import datasets

    from codeexecutor.atomic import write_json
    from codeexecutor.generation.constraints import StateRule, first_refused, token_chars
    from codeexecutor.modeling.loading import load_model
    from codeexecutor.modeling.profiles import profile_of
    from codeexecutor.modeling.tokenizer import load_tokenizer

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--train-sample", type=int, default=2000, help="training rows checked per set")
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "scope-rule-check.json"))
    args = ap.parse_args()
    profile = profile_of(load_model(args.model).config)
    tok = load_tokenizer(args.model, exception=profile.exception_step, delta=profile.delta)
    chars = token_chars(tok)
    report = {"model": args.model, "data": args.data, "sets": {}, "refused": []}
    start = time.time()
    for name in SETS:
        path = os.path.join(args.data, name)
        if not os.path.isdir(path):
            continue
        ds = datasets.load_from_disk(path)
        checked = refused = by_identifiers = 0  # by_identifiers: refused without scopes too
        for split in ("test", "valid", "train"):
            rows = ds[split]
            picks = range(len(rows))
            if split == "train" and len(rows) > args.train_sample:
                picks = sorted(random.Random(0).sample(range(len(rows)), args.train_sample))
            for i in picks:
                row = rows[i]
                code, target = profile.example(row)
                ids = tok.encode(target, add_special_tokens=False)
                at = first_refused(StateRule(tok, code, value_chars=103, chars=chars), ids)
                checked += 1
                if at is not None:
                    refused += 1
                    plain = first_refused(StateRule(tok, code, value_chars=103, chars=chars, scopes=False), ids)
                    by_identifiers += plain is not None
                    if len(report["refused"]) < 50:
                        report["refused"].append(
                            {
                                "set": name,
                                "id": row["id"],
                                "token": at,
                                "scopes": plain is None,
                                "before": tok.decode(ids[max(0, at - 30) : at]),
                                "refused": tok.decode(ids[at : at + 3]),
                            }
                        )
        report["sets"][name] = {"checked": checked, "refused": refused, "refused_without_scopes": by_identifiers}
        print(name, report["sets"][name], f"{time.time() - start:.0f}s", flush=True)
    write_json(args.out, report, ensure_ascii=False)
    print("written", args.out)


if __name__ == "__main__":
    main()
