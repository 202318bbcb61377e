"""How often the token-budget sampler trains on examples of each length.

    .venv/bin/python experiments/sampler_bias.py --data DATA/codenetmut/codenetmut \
        [--model models/codeexecutor-mini-cpu] [--max-tokens 1024] [--draws 20000]

Tokenizes the training split of a built dataset as the model's runs read it (its tokenizer
and trace format), then draws micro-batches with `StageData.indices` under both anchor
rules (training/data.py: "example", uniformly over examples; "token", proportional to
length) and counts, per band of total length, the share of the data against the share of
what was trained on, the mean length trained on, and how often the shortest quarter is
drawn against the longest. Nothing is trained: this measures the sampler alone. Writes
benchmarks/results/sampler-bias.json and .png.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BANDS = (0, 64, 128, 256, 512, 768, 1025)  # total tokens (code + trace)


def lengths(data: str, model: str) -> tuple:
    import datasets
    import numpy as np

    from codeexecutor.modeling.loading import resolve
    from codeexecutor.modeling.model import CodeExecutorConfig
    from codeexecutor.modeling.profiles import profile_of
    from codeexecutor.modeling.tokenizer import Encoder, load_tokenizer
    from codeexecutor.training.tokenized import tokenize

    path = resolve(model)
    cfg = CodeExecutorConfig.from_pretrained(path)
    profile = profile_of(cfg)
    tok = load_tokenizer(path, exception=profile.exception_step, delta=profile.delta)
    encoder = Encoder(tok, cfg.max_code_length, cfg.max_trace_length, profile)
    ds = datasets.load_from_disk(data)
    ds = ds["train"] if isinstance(ds, datasets.DatasetDict) else ds
    table, fits = tokenize(ds, encoder, num_proc=2)
    return np.asarray(table["code_len"]), np.asarray(table["trace_len"]), fits


def measure(code, trace, max_tokens: int, draws: int, anchor: str) -> dict:
    import numpy as np

    from codeexecutor.training.data import StageData

    data = StageData.from_lengths("codenet", code, trace, max_tokens, anchor)
    total = code + trace
    seen = np.zeros(len(total))
    sizes = []
    for step in range(draws):
        _, idx = data.indices(0, step, 0, 0, 1)
        np.add.at(seen, idx, 1)
        sizes.append(len(idx))
    band = np.digitize(total, BANDS) - 1
    rows = []
    for b in range(len(BANDS) - 1):
        mask = band == b
        if mask.any():
            rows.append(
                {
                    "tokens": f"{BANDS[b]}-{BANDS[b + 1] - 1}",
                    "data_share": round(float(mask.mean()), 4),
                    "trained_share": round(float(seen[mask].sum() / seen.sum()), 4),
                    "times_per_example": round(float(seen[mask].mean()), 3),
                }
            )
    short, long = total <= np.quantile(total, 0.25), total >= np.quantile(total, 0.75)
    return {
        "anchor": anchor,
        "bands": rows,
        "examples_per_batch": round(float(np.mean(sizes)), 1),
        "mean_tokens_trained": round(float((seen * total).sum() / seen.sum()), 1),
        "short_to_long_quarter": round(float(seen[short].mean() / seen[long].mean()), 2),
        "never_drawn_share": round(float((seen == 0).mean()), 4),
    }


def plot(report: dict, path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.6))
    bands = [r["tokens"] for r in report["anchors"][0]["bands"]]
    x = range(len(bands))
    ax.bar([i - 0.27 for i in x], [r["data_share"] for r in report["anchors"][0]["bands"]], 0.27, label="the data")
    for k, a in enumerate(report["anchors"]):
        ax.bar(
            [i + 0.27 * k for i in x],
            [r["trained_share"] for r in a["bands"]],
            0.27,
            label=f"trained on, anchor per {a['anchor']}",
        )
    ax.set_xticks(list(x), bands)
    ax.set_xlabel("example length (code + trace tokens)")
    ax.set_ylabel("share of examples")
    ax.legend()
    ax.set_title(f"token-budget batches of {report['max_tokens']} tokens, {report['examples']:,} training examples")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="a built dataset folder (its train split is measured)")
    ap.add_argument(
        "--model", default=str(ROOT / "models" / "codeexecutor-mini-cpu"), help="tokenizer and trace format"
    )
    ap.add_argument(
        "--max-tokens", type=int, default=1024, help="the token budget per micro-batch (cpu-hour recipe: 1024)"
    )
    ap.add_argument("--draws", type=int, default=20000, help="micro-batches drawn per anchor rule")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "sampler-bias.json"))
    args = ap.parse_args()
    from codeexecutor.progress import quiet_libraries

    quiet_libraries()
    code, trace, fits = lengths(args.data, args.model)
    total = code + trace
    report = {
        "data": args.data,
        "model": args.model,
        "examples": int(len(total)),
        "fits": fits,
        "max_tokens": args.max_tokens,
        "draws": args.draws,
        "mean_tokens_data": round(float(total.mean()), 1),
        "anchors": [measure(code, trace, args.max_tokens, args.draws, a) for a in ("example", "token")],
        "command": "experiments/sampler_bias.py " + " ".join(sys.argv[1:]),
    }
    out = pathlib.Path(args.out)
    out.write_text(json.dumps(report, indent=2) + "\n")
    plot(report, out.with_suffix(".png"))
    print(
        json.dumps(
            {
                a["anchor"]: {k: a[k] for k in ("mean_tokens_trained", "short_to_long_quarter", "never_drawn_share")}
                for a in report["anchors"]
            }
        )
    )
    print(f"data mean {report['mean_tokens_data']} tokens; wrote {out}")


if __name__ == "__main__":
    main()
