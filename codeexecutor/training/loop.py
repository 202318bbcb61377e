"""Curriculum pretraining under DeepSpeed: one training loop, stages as data + hyperparameters.

    deepspeed --module codeexecutor.training --curriculum curricula/demo.yaml --ds-config ds_configs/cpu.json
    python -m codeexecutor.training ...            # one process, no launcher (CPU demo)

The curriculum file (YAML) has three groups (see `Curriculum`): `model`, `train`, and a
list of `stages`, each with its data sources (dataset folder, task, mixing weight, and
optionally `hardest: K`: the K examples of that source with the highest loss under the
model as the previous stage left it, scored in parallel across ranks, among a fixed random
sample of `mine_from: N` of them when given), its number of
optimizer steps and its learning rate / warmup. One DeepSpeed engine runs all stages;
the learning rate follows each stage's warmup + linear decay.

Every `save_every` steps and at each stage end a DeepSpeed checkpoint (weights,
optimizer, scheduler, global step) is written; the same command after a kill resumes
from the latest one at the same step. Each stage end also exports a Hugging Face model
(`stageN-NAME/`, `save_pretrained` format, tokenizer included); the last one is copied
to `final/`, which `codeexecutor trace --model` loads. Losses go to TensorBoard
(`tensorboard/`), to `train_log.jsonl` and to `loss.png`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from codeexecutor.errors import ConfigError
from codeexecutor.training.budget import Budget
from codeexecutor.training.distributed import agreed
from codeexecutor.training.export import export_model, save_checkpoint
from codeexecutor.training.fallback import REFUSAL_FILE
from codeexecutor.training.order import TrainOrder
from codeexecutor.training.plots import plot_losses
from codeexecutor.training.precision import AUTO
from codeexecutor.training.profiling import StepProfiler
from codeexecutor.training.run import set_up
from codeexecutor.training.stage_loop import StageLoop


def train(order: TrainOrder) -> str:
    """Run (or resume) the whole curriculum of `order`; returns the final model folder. Its
    `minutes`: fit the stages' steps into that many minutes from this call on (set-up and
    compile included), each from its measured speed (training/budget.py)."""
    entered = time.perf_counter()  # a budget counts from here: a slow set-up or compile is paid from it
    max_steps, minutes = order.max_steps, order.minutes
    run = set_up(order)
    cur, out = run.cur, run.out
    writer = None
    if run.rank == 0:
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(os.path.join(out, "tensorboard"))
    budget = Budget(minutes, cur.stages, out, started=entered) if minutes and run.rank == 0 else None
    profiler = StepProfiler.from_env(out, run.rank)  # CODEEXECUTOR_PROFILE=FIRST:LAST (training/profiling.py)
    saved_at = run.global_step if run.global_step else -1  # the step of the newest checkpoint (one save per step)
    start_of = 0
    for si, stage in enumerate(cur.stages):
        if minutes:  # rank 0 holds a budgeted run's plan (resumed: the steps it fixed); every rank takes them
            stage.steps = agreed(stage.steps)
        if run.global_step >= start_of + stage.steps:
            start_of += stage.steps
            continue
        if max_steps is not None and run.global_step >= max_steps:
            break
        start_of, saved = StageLoop(run, si, start_of, max_steps, bool(minutes), budget, writer, profiler).run()
        saved_at = max(saved_at, saved)
    return _finish(run, saved_at, writer)


def _finish(run, saved_at: int, writer) -> str:
    """The final export where every stage ran; a checkpoint to resume from where a run
    stopped early (--max-steps)."""
    cur, final = run.cur, os.path.join(run.out, "final")
    total = sum(s.steps for s in cur.stages)
    if cur.train.checkpoints and run.global_step < total and saved_at != run.global_step:
        save_checkpoint(run.engine, run.ckpt, run.global_step, cur.train.keep_checkpoints, run.rank)
    if run.global_step >= total:
        export_model(run.engine, run.tok, final, run.rank, run.zero_stage)
        if run.rank == 0:
            plot_losses(os.path.join(run.out, "train_log.jsonl"), os.path.join(run.out, "loss.png"))
            print(f"pretraining done: {run.global_step} steps; model in {final}", flush=True)
    if writer is not None:
        writer.close()
    import torch.distributed as dist

    dist.barrier()
    dist.destroy_process_group()
    return final


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="codeexecutor.training", description="Curriculum pretraining under DeepSpeed.")
    given = ap.add_mutually_exclusive_group(required=True)
    given.add_argument("--curriculum", help="curriculum YAML (see curricula/*.yaml)")
    given.add_argument(
        "--order",
        help="a training order `codeexecutor pretrain` wrote (training/order.py): everything below in one file",
    )
    ap.add_argument(
        "--ds-config",
        help="DeepSpeed JSON config (ds_configs/; default auto: chosen by the device, training/precision.py)",
    )
    ap.add_argument("--base-dir", default=".", help="folder the curriculum's dataset paths are relative to")
    ap.add_argument("--output-dir", help="override train.output_dir")
    ap.add_argument("--max-steps", type=int, help="stop after this global step (the rest resumes later)")
    ap.add_argument("--minutes", type=float, help="fit the stages' steps into this many minutes (training/budget.py)")
    ap.add_argument("--local_rank", type=int, default=None, help=argparse.SUPPRESS)  # set by the deepspeed launcher
    args = ap.parse_args(argv)
    extra = (args.ds_config, args.output_dir, args.max_steps, args.minutes, None if args.base_dir == "." else 1)
    if args.order and any(v is not None for v in extra):
        ap.error("--order carries the DeepSpeed config, the folders and the budget: give them to the order's maker")
    from codeexecutor.progress import quiet_libraries

    quiet_libraries()
    try:
        if args.order:
            order = TrainOrder.load(args.order)
        else:  # a bad curriculum is reported before DeepSpeed starts
            steps = (args.max_steps, args.minutes)
            order = TrainOrder.from_curriculum(
                args.curriculum, args.ds_config or AUTO, args.base_dir, args.output_dir, steps
            )
        train(order)
    except ConfigError as exc:
        print(f"codeexecutor.training: {exc}", file=sys.stderr)
        if os.environ.get(REFUSAL_FILE):  # for `pretrain`, which a launcher's exit code would not tell
            with open(os.environ[REFUSAL_FILE], "w") as f:
                f.write(str(exc))
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
