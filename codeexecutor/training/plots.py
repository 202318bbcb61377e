"""The learning curves of a run (loss.png), from its train_log.jsonl: the training loss
per stage and, when the run evaluated while training, the held-out loss and the decoded
trace accuracy of each source."""

from __future__ import annotations

import json
import os


def plot_losses(log_path: str, png: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [json.loads(line) for line in open(log_path)] if os.path.exists(log_path) else []
    train = [r for r in rows if "loss" in r]
    evals = [r for r in rows if "eval" in r]
    if not train:
        return
    fig, axes = plt.subplots(1, 2 if evals else 1, figsize=(13 if evals else 8, 4), squeeze=False)
    ax = axes[0][0]
    for name in dict.fromkeys(r["stage"] for r in train):
        pts = [(r["step"], r["loss"]) for r in train if r["stage"] == name]
        ax.plot(*zip(*pts), label=f"train: {name}")
    sources = sorted({s for r in evals for s in r["eval"]})
    for src in sources:
        pts = [
            (r["step"], r["eval"][src]["loss"])
            for r in evals
            if src in r["eval"] and r["eval"][src].get("loss") is not None
        ]
        if pts:
            ax.plot(*zip(*pts), "o--", label=f"held out: {src.split('/')[-1]}")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("weighted token loss")
    ax.set_yscale("log")
    ax.legend(fontsize=7)
    ax.set_title("curriculum pretraining")
    if evals:
        ax2 = axes[0][1]
        for src in sources:
            pts = [
                (r["step"], r["eval"][src]["trace_accuracy"])
                for r in evals
                if src in r["eval"] and r["eval"][src].get("trace_accuracy") is not None
            ]
            if pts:
                ax2.plot(*zip(*pts), "o-", label=src.split("/")[-1])
        ax2.set_xlabel("optimizer step")
        ax2.set_ylabel("trace accuracy (%), greedy, release metric")
        ax2.set_ylim(0, 100)
        if ax2.get_legend_handles_labels()[0]:  # no decoded sample (eval_decode_examples: 0): nothing to name
            ax2.legend(fontsize=7)
        ax2.set_title("valid sample")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)
