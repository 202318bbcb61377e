"""Evaluation while training: per source of a stage, on a fixed sample of its valid split
(for a tokenized source, of the built dataset it was made from, where that is at hand),
the held-out loss and the greedy-decoded trace and output accuracy (the release's metric,
handed in by the caller: eval/ provides it through the CLI's registry; its SingleLine
variant for SingleLine)."""

from __future__ import annotations

import os
import random

import torch

from codeexecutor.generation.decoding import Decoding
from codeexecutor.training.tokenized import built_source, is_tokenized


class StageEvaluator:
    def __init__(
        self,
        stage,
        encoder,
        base_dir: str,
        loss_examples: int = 256,
        decode_examples: int = 32,
        batch_size: int = 16,
        metrics=None,
    ) -> None:
        """`metrics(predictions, golds, singleline=...)`: the metric the decoded examples are
        scored by (the release's, which eval/ provides through codeexecutor.cli); without
        one only the held-out loss is measured."""
        import datasets

        self.encoder = encoder
        self.batch_size = batch_size
        self.metrics = metrics
        self.sources: dict[str, dict] = {}
        for src in stage.sources:
            path = os.path.join(base_dir, src.path)
            if is_tokenized(path):  # training rows only: the held-out rows are in the dataset it was made from
                path = built_source(path)
                if path is None:
                    continue
            dd = datasets.load_from_disk(path)
            split = next((s for s in ("valid", "test") if isinstance(dd, datasets.DatasetDict) and s in dd), None)
            if split is None or "action" in dd[split].column_names:  # debugger actions: no whole trace to score
                continue
            table = dd[split]
            pick = random.Random(f"eval:{src.path}").sample(range(len(table)), min(loss_examples, len(table)))
            rows = [table[i] for i in sorted(pick)]
            pairs = [encoder.profile.example(r) for r in rows]
            golds = [encoder.profile.full.example(r)[1] for r in rows[:decode_examples]]  # scored with whole states
            fitted = [(encoder.code(c), encoder.fit_trace(t)[0]) for c, t in pairs]
            name = os.path.normpath(src.path).replace(os.sep, "/")
            self.sources[name] = {
                "split": split,
                "loss_rows": [{"code_ids": c, "trace_ids": t} for c, t in fitted if t is not None],
                "inputs": [c for c, _ in pairs[:decode_examples]],
                "golds": [encoder.gold(t) for t in golds],
                "singleline": src.task == "singleline",
            }

    @torch.no_grad()
    def evaluate(self, model, device, max_length: int | None = None) -> dict[str, dict]:
        from codeexecutor.generation.search import TraceGenerator

        was_training = model.training
        model.eval()
        generator = TraceGenerator.from_model(model, self.encoder, device)
        out = {}
        for name, src in self.sources.items():
            total = weight = 0.0
            rows = src["loss_rows"]
            for i in range(0, len(rows), self.batch_size):
                batch = {k: v.to(device) for k, v in self.encoder.collate(rows[i : i + self.batch_size]).items()}
                losses = model(**batch, reduction="none").loss.float()
                total += float(losses.sum())
                weight += len(losses)
            entry = {"split": src["split"], "loss": total / weight if weight else None}
            if src["inputs"] and self.metrics is not None:
                decoding = Decoding(beam=1, max_length=max_length, names=False, values=False)
                outs = generator.generate(src["inputs"], decoding, batch_size=self.batch_size)
                preds = [self.encoder.scored(g.text) for g in outs]
                m = self.metrics(preds, src["golds"], singleline=src["singleline"])
                entry.update(
                    trace_accuracy=m["trace_accuracy"], output_accuracy=m["output_accuracy"], decoded=len(preds)
                )
            out[name] = entry
        if was_training:
            model.train()
        return out


def score(results: dict[str, dict]) -> float:
    """One number to keep the best export of a stage by: mean trace accuracy over its
    sources (minus the mean loss / 1000, to break ties)."""
    acc = [r["trace_accuracy"] for r in results.values() if r.get("trace_accuracy") is not None]
    loss = [r["loss"] for r in results.values() if r.get("loss") is not None]
    return (sum(acc) / len(acc) if acc else 0.0) - (sum(loss) / len(loss) / 1000 if loss else 0.0)
