"""What the loop does around the steps of a stage: its data (with the hardest examples
mined where a source asks), its held-out evaluation and best export, and the log. Each
takes the run whole (training/run.py `Run`: its curriculum, engine, encoder, folders and
rank) and the stage's index."""

from __future__ import annotations

import json
import logging
import os

from codeexecutor.atomic import write_json
from codeexecutor.training.config import Source, Stage
from codeexecutor.training.data import StageData
from codeexecutor.training.mining import Mining, mine_hardest

log = logging.getLogger("codeexecutor.train")


def stage_data(run, si: int, mining_seconds: float | None = None) -> StageData:
    """Stage `si`'s data: hardest examples mined where a source asks for them (once; the
    choice is saved, so a resumed run uses the same), fit counts written beside the run.
    `mining_seconds`: the time mining may take (None: all it needs)."""
    import torch

    cur, stage, encoder, base_dir, out, rank = run.cur, run.cur.stages[si], run.encoder, run.base_dir, run.out, run.rank
    subsets = {}
    for j, src in enumerate(stage.sources):
        if src.hardest:
            mined = os.path.join(out, f"stage{si + 1}-{stage.name}-hardest-{j}.json")
            if not os.path.exists(mined):
                full = StageData(Stage(stage.name, [Source(src.path, src.task)], 1), encoder, base_dir)
                plan = Mining(src.hardest, cur.train.mining_batch_size, src.mine_from, cur.train.seed, mining_seconds)
                idx = mine_hardest(run.engine, full, 0, plan, rank=rank, world=run.world, precision=run.precision)
                if rank == 0:
                    write_json(mined, idx, indent=None)
                torch.distributed.barrier()
            with open(mined) as f:
                subsets[j] = json.load(f)
            log.info("stage %s: %d hardest examples of %s", stage.name, len(subsets[j]), src.path)
    weight_of = run.engine.module.loss_table() if run.spec is not None else None
    data = StageData(stage, encoder, base_dir, subsets, cur.train.max_tokens, cur.train.anchor, run.spec, weight_of)
    if rank == 0:
        stats_path = os.path.join(out, "data_stats.json")
        stats = json.load(open(stats_path)) if os.path.exists(stats_path) else {}
        stats[f"stage{si + 1}-{stage.name}"] = {
            "fit": data.fits,
            "max_tokens": cur.train.max_tokens,
            "max_trace_length": cur.model.max_trace_length,
        }
        write_json(stats_path, stats)
        for path, fits in data.fits.items():
            log.info("stage %s, %s: targets %s", stage.name, path, fits)
    return data


def evaluator_for(run, si: int):
    """Stage `si`'s held-out evaluator on rank 0, or None where the run evaluates nothing."""
    cur, stage = run.cur, run.cur.stages[si]
    if run.rank != 0 or cur.train.eval_examples <= 0:
        return None
    if run.zero_stage == 3:
        log.warning("evaluation while training is skipped under ZeRO-3 (parameters are partitioned across ranks)")
        return None
    from codeexecutor.modeling.trace_metrics import table3_metrics
    from codeexecutor.training.evaluation import StageEvaluator

    return StageEvaluator(
        stage,
        run.encoder,
        run.base_dir,
        cur.train.eval_examples,
        cur.train.eval_decode_examples,
        metrics=table3_metrics,
    )


def evaluate(run, evaluator, si: int, writer, log_path: str) -> None:
    """Evaluate at the run's step (rank 0), log it, and keep stage `si`'s best export
    (`stageN-NAME-best/`)."""
    from codeexecutor.training.evaluation import score

    engine, stage, step = run.engine, run.cur.stages[si], run.global_step
    results = evaluator.evaluate(engine.module, engine.device, run.cur.model.max_trace_length)
    log_row(writer, log_path, {"step": step, "stage": stage.name, "eval": results})
    best_path = os.path.join(run.out, f"stage{si + 1}-{stage.name}-best")
    value = score(results)
    record = os.path.join(best_path, "best.json")
    previous = json.load(open(record))["score"] if os.path.exists(record) else None
    if previous is None or value > previous:
        from codeexecutor.training.export import save_export

        save_export(engine.module, run.tok, best_path)
        with open(record, "w") as f:
            json.dump({"step": step, "score": value, "eval": results}, f, indent=2)
    log.info("step %d eval: %s", step, {k: {m: v for m, v in r.items() if m != "split"} for k, r in results.items()})


def loss_scaling(engine) -> dict:
    """fp16 only: the dynamic loss scale now and the optimizer steps skipped on overflow
    so far (DeepSpeed halves the scale and skips the step when gradients overflow)."""
    if not engine.fp16_enabled():
        return {}
    scale = getattr(engine.optimizer, "cur_scale", None)
    return {"loss_scale": float(scale) if scale is not None else None, "skipped_steps": int(engine.skipped_steps)}


def log_row(writer, log_path: str, row: dict) -> None:
    """One line of train_log.jsonl, and its numbers in TensorBoard."""
    with open(log_path, "a") as f:
        f.write(json.dumps(row) + "\n")
    for key, value in row.items():
        if key in ("step", "stage"):
            continue
        if isinstance(value, dict):  # eval: {source: {metric: value}}
            for src, metrics in value.items():
                for name, v in metrics.items():
                    if isinstance(v, (int, float)) and v is not None:
                        writer.add_scalar(f"eval/{src}/{name}", v, row["step"])
        elif isinstance(value, (int, float)):
            writer.add_scalar(key, value, row["step"])
